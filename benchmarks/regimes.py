"""Regime map: where WAN bandwidth binds, where the cross-region paradox appears, where each BACE-Pipe part matters.

Every regime is the GeoPipe-v0 world with three things changed:

* **WAN scale**: every inter-region capacity × {0.125, 0.3, 1, 3}. 0.125 is one VM pair per region pair (the raw
  Skyplane figure), 1 the flagship's eight.
* **Job shape**: the flagship's published data-parallel degrees (``d = pub``) or a single replica (``d = 1``: the
  same per-replica batch, so GPUs and WAN messages shrink by ``d``), on the flagship's mixed H100/A100 fleet or on
  an all-A100 fleet (``A100``).
* **Load**: offered load {0.4, 0.8, 1.2}: the mean interarrival time is the shape's mean GPU-hours per job (each
  job alone in one region of its reference GPU type) ÷ (load × the fleet's GPUs).

For each regime it runs ``bace-pipe``, the paper's four baselines and BACE-Pipe's three ablations on the same
seeds and prints a table: stall fraction, comm slowdown and peak link utilisation (of CR-LCF, which ignores
bandwidth, and of BACE-Pipe), BACE-Pipe's JCT and cost change against each baseline, the cross-region paradox
(CR-LDF vs LDF, CR-LCF vs LCF) and each ablation against the full BACE-Pipe. Changes are of means over the seeds:
``100·(a − b)/b``; negative means a is lower. It writes ``regimes.md``, ``regimes.json`` and ``regimes.png`` (the
heat map) to ``--out``.

Usage::

    python benchmarks/regimes.py --seeds 5 --workers 2 --out benchmarks/results/regimes
    python benchmarks/regimes.py --wan 0.3 1 --shapes d=pub --loads 0.8 --seeds 10   # a slice of the map
    python benchmarks/regimes.py --offered-load    # the flagship's mean GPU-hours per job (its arrival rate)
    python benchmarks/regimes.py --demand          # per-hop demand of the flagship's job classes vs its links
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from baselines.specs import EnvSpec
from baselines.episodes import run_episodes
from geopipe_env.catalog import GPU_CATALOG, MODEL_CATALOG
from geopipe_env.generator import sample_world
from geopipe_env.loader import SCENARIO_DIR, load_scenario
from geopipe_env.physics import pipeline
from geopipe_env.simulator import ClusterSim, Placement

WAN_SCALES = (0.125, 0.3, 1.0, 3.0)
SHAPES = ("d=pub", "d=1", "d=pub A100", "d=1 A100")
LOADS = (0.4, 0.8, 1.2)
POLICIES = (
    "bace-pipe", "ldf", "lcf", "cr-ldf", "cr-lcf",
    "bace-pipe-no-priority", "bace-pipe-no-pathfinder", "bace-pipe-no-costmin",
)
BASELINES = ("ldf", "lcf", "cr-ldf", "cr-lcf")
ABLATIONS = ("bace-pipe-no-priority", "bace-pipe-no-pathfinder", "bace-pipe-no-costmin")


def flagship() -> dict:
    """GeoPipe-v0's scenario file as a dict."""
    return yaml.safe_load((SCENARIO_DIR / "geopipe-v0.yaml").read_text())


def shape_variant(shape: str) -> dict:
    """The flagship with the regime's job shape and fleet (no WAN scale, the flagship's arrival rate).

    With one replica the optimizer state is no longer sharded, so a published pipeline that no longer fits memory
    gets the fewest stages that do.
    """
    data = flagship()
    if shape.startswith("d=1"):
        for job_class in data["workload"]["job_classes"]:
            replicas = job_class["data_parallel"]
            job_class["data_parallel"] = 1
            job_class["global_batch_size"] //= replicas
            (model,) = job_class["models"]
            spec = MODEL_CATALOG[model]
            fewest = pipeline.min_feasible_stages(
                spec.params, spec.layers, spec.hidden, job_class["micro_batch_size"], job_class["seq_len"],
                job_class["global_batch_size"] // job_class["micro_batch_size"], GPU_CATALOG["A100"].memory_gb,
                job_class["gpus_per_stage"],
            )
            job_class["pipeline_stages"] = max(job_class["pipeline_stages"], fewest)
    if shape.endswith("A100"):
        for region in data["regions"]:
            region["gpu"] = "A100"
    data["name"] = f"regime {shape}"
    return data


def mean_gpu_hours(data: dict) -> float:
    """The expected GPU-hours of a job of this workload alone in one region of its reference GPU type (the
    fitting type with the most GPUs), every boundary inside the region: exact over the classes' weights, models
    and datasets, each drawn uniformly within its class."""
    workload = data["workload"]
    classes = workload["job_classes"]
    total_weight = sum(c.get("weight", 1.0) for c in classes)
    expected = 0.0
    for job_class in classes:
        models = job_class.get("models", workload.get("models"))
        datasets = job_class.get("datasets", workload["datasets"])
        for model, dataset in itertools.product(models, datasets):
            one = copy.deepcopy(data)
            one["workload"].update(num_jobs=1, job_classes=[{**job_class, "models": [model], "datasets": [dataset]}])
            world = sample_world(load_scenario(one), np.random.default_rng(0))
            (job,) = world.jobs
            ref = int(np.argmax(np.where(job.fits, world.num_gpus, -1)))
            iteration_s = ClusterSim(world).local_iteration_s_of(job, Placement((ref,), (job.num_stages,)))
            share = job_class.get("weight", 1.0) / total_weight / (len(models) * len(datasets))
            expected += share * iteration_s * job.iterations * job.num_gpus / 3600.0
    return expected


def demand_table() -> str:
    """Each flagship job class's per-hop demand ``d·A·8/(t_f + t_b)`` on H100 and on A100, beside the links."""
    data = flagship()
    scenario = load_scenario(data)
    capacity = scenario.network.bandwidth_gbps[scenario.network.bandwidth_gbps > 0]
    lines = [
        "| job class | GPUs (S × t × d) | WAN message d·A (MB) | demand per hop on H100 (Gbit/s) | on A100 (Gbit/s) |",
        "|---|---|---|---|---|",
    ]
    tflops = {gpu: GPU_CATALOG[gpu].tflops for gpu in ("H100", "A100")}
    for job_class in data["workload"]["job_classes"]:
        (model,) = job_class["models"]
        spec = MODEL_CATALOG[model]
        b, s, t, d, stages = (job_class[k] for k in ("micro_batch_size", "seq_len", "gpus_per_stage", "data_parallel",
                                                      "pipeline_stages"))
        message = d * pipeline.activation_bytes(b, s, spec.hidden)
        demand = {
            gpu: message * 8.0 / (3.0 * pipeline.forward_time_s(spec.params, stages, b, s, peak, scenario.mfu, t)) / 1e9
            for gpu, peak in tflops.items()
        }
        cells = "— (one stage) | —" if stages == 1 else f"{demand['H100']:.1f} | {demand['A100']:.1f}"
        lines.append(f"| {job_class['name']} | {stages * t * d:,} ({stages} × {t} × {d}) | {message / 1e6:,.0f} | {cells} |")
    lines.append(
        f"\nWAN links: {capacity.min():.1f}–{capacity.max():.1f} Gbit/s per direction (median {np.median(capacity):.1f}), "
        "shared max-min fairly by every job crossing them."
    )
    return "\n".join(lines) + "\n"


def regime_scenarios(
    out_dir: Path, wan_scales=WAN_SCALES, shapes=SHAPES, loads=LOADS
) -> dict[tuple[float, str, float], Path]:
    """Write one scenario file per regime; (WAN scale, shape, load) → path."""
    folder = out_dir / "scenarios"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for shape in shapes:
        base = shape_variant(shape)
        fleet_gpus = sum(r["num_gpus"] for r in base["regions"])
        gpu_hours = mean_gpu_hours(base)
        for wan, load in itertools.product(wan_scales, loads):
            data = copy.deepcopy(base)
            data["name"] = f"wan x{wan:g}, {shape}, load {load:g}"
            data["workload"]["arrival"]["mean_interarrival_h"] = gpu_hours / (load * fleet_gpus)
            if wan != 1.0:  # a randomize key draws from the episode's RNG even for a fixed scale
                data["randomize"] = {"bandwidth_scale": [wan, wan]}
            slug = f"wan{wan:g}_{shape.replace('=', '').replace(' ', '_')}_load{load:g}"
            path = folder / f"{slug}.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            paths[(wan, shape, load)] = path
    return paths


def change_pct(means: dict, a: str, b: str, metric: str) -> float:
    """``100·(a − b)/b`` of two policies' means."""
    mb = means[b][metric]
    return 100.0 * (means[a][metric] - mb) / abs(mb) if mb else math.nan


def regime_summary(rows: list[dict]) -> dict:
    """Means per policy, and the regime's derived figures."""
    means = {
        p: {k: float(np.nanmean([r[k] for r in rows if r["policy"] == p]))
            for k in ("avg_jct_h", "total_cost_usd", "stalled_job_fraction", "avg_comm_slowdown", "max_link_utilization")}
        for p in POLICIES
    }
    best_jct = min(BASELINES, key=lambda p: means[p]["avg_jct_h"])
    cheapest = min(BASELINES, key=lambda p: means[p]["total_cost_usd"])
    return {
        "means": means,
        "bace_vs": {b: (change_pct(means, "bace-pipe", b, "avg_jct_h"), change_pct(means, "bace-pipe", b, "total_cost_usd"))
                    for b in BASELINES},
        "bace_vs_best_jct": change_pct(means, "bace-pipe", best_jct, "avg_jct_h"),
        "best_baseline": best_jct,
        "bace_vs_cheapest_cost": change_pct(means, "bace-pipe", cheapest, "total_cost_usd"),
        "cheapest_baseline": cheapest,
        "paradox_ldf": change_pct(means, "cr-ldf", "ldf", "avg_jct_h"),
        "paradox_lcf": change_pct(means, "cr-lcf", "lcf", "avg_jct_h"),
        "ablation": {a: (change_pct(means, a, "bace-pipe", "avg_jct_h"), change_pct(means, a, "bace-pipe", "total_cost_usd"))
                     for a in ABLATIONS},
    }


def markdown(summaries: dict, seeds: list[int]) -> str:
    head = (
        "| WAN | shape | load | stall CR-LCF / BACE | comm slowdown CR-LCF / BACE | peak util CR-LCF / BACE | "
        "BACE JCT % vs LDF, LCF, CR-LDF, CR-LCF | BACE cost % vs LDF, LCF, CR-LDF, CR-LCF | "
        "paradox JCT %: CR-LDF vs LDF, CR-LCF vs LCF | w/o priority, pathfinder, Cost-Min: JCT % | ... cost % |"
    )
    lines = [head, "|" + "---|" * 11]
    for (wan, shape, load), s in summaries.items():
        m = s["means"]
        pair = lambda key, fmt: f"{m['cr-lcf'][key]:{fmt}} / {m['bace-pipe'][key]:{fmt}}"  # noqa: E731
        lines.append(
            f"| ×{wan:g} | {shape} | {load:g} | {pair('stalled_job_fraction', '.2f')} | "
            f"{pair('avg_comm_slowdown', '.3f')} | {pair('max_link_utilization', '.2f')} | "
            + ", ".join(f"{s['bace_vs'][b][0]:+.1f}" for b in BASELINES) + " | "
            + ", ".join(f"{s['bace_vs'][b][1]:+.1f}" for b in BASELINES) + " | "
            + f"{s['paradox_ldf']:+.1f}, {s['paradox_lcf']:+.1f} | "
            + ", ".join(f"{s['ablation'][a][0]:+.1f}" for a in ABLATIONS) + " | "
            + ", ".join(f"{s['ablation'][a][1]:+.1f}" for a in ABLATIONS) + " |"
        )
    lines.append(
        f"\n{len(seeds)} seeds ({seeds[0]}–{seeds[-1]}) per regime and policy; changes are of means, "
        "negative = the first policy is lower."
    )
    return "\n".join(lines) + "\n"


def heat_map(summaries: dict, path: Path) -> None:
    """Eight panels over (shape, load) rows × WAN-scale columns."""
    from matplotlib.figure import Figure

    wan_scales = sorted({wan for wan, _, _ in summaries})
    rows = list(dict.fromkeys((shape, load) for _, shape, load in summaries))
    panels = [
        ("Bandwidth binds: CR-LCF comm slowdown", lambda s: s["means"]["cr-lcf"]["avg_comm_slowdown"], "viridis", "{:.2f}"),
        ("Cross-region paradox: CR-LDF vs LDF JCT %", lambda s: s["paradox_ldf"], "RdBu_r", "{:+.0f}"),
        ("Cross-region paradox: CR-LCF vs LCF JCT %", lambda s: s["paradox_lcf"], "RdBu_r", "{:+.0f}"),
        ("BACE-Pipe vs best baseline JCT %", lambda s: s["bace_vs_best_jct"], "RdBu_r", "{:+.0f}"),
        ("BACE-Pipe vs cheapest baseline cost %", lambda s: s["bace_vs_cheapest_cost"], "RdBu_r", "{:+.0f}"),
        ("w/o priority vs BACE-Pipe JCT %", lambda s: s["ablation"]["bace-pipe-no-priority"][0], "RdBu_r", "{:+.0f}"),
        ("w/o pathfinder vs BACE-Pipe JCT %", lambda s: s["ablation"]["bace-pipe-no-pathfinder"][0], "RdBu_r", "{:+.0f}"),
        ("w/o Cost-Min vs BACE-Pipe cost %", lambda s: s["ablation"]["bace-pipe-no-costmin"][1], "RdBu_r", "{:+.0f}"),
    ]
    fig = Figure(figsize=(20, 10), layout="constrained")
    axes = fig.subplots(2, 4)
    for ax, (title, value, cmap, fmt) in zip(axes.ravel(), panels):
        grid = np.array([[value(summaries[(wan, shape, load)]) for wan in wan_scales] for shape, load in rows])
        if cmap == "RdBu_r":
            bound = max(float(np.nanmax(np.abs(grid))), 1.0)
            image = ax.imshow(grid, cmap=cmap, vmin=-bound, vmax=bound, aspect="auto")
        else:
            image = ax.imshow(grid, cmap=cmap, aspect="auto")
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(wan_scales)), [f"×{w:g}" for w in wan_scales])
        ax.set_yticks(range(len(rows)), [f"{shape}, load {load:g}" for shape, load in rows], fontsize=8)
        ax.set_xlabel("WAN capacity scale")
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle("GeoPipe regime map (negative % = the first policy is lower; blue is better for it)")
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds per regime and policy (from --seed-start)")
    parser.add_argument("--seed-start", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/regimes"))
    parser.add_argument("--wan", type=float, nargs="+", default=list(WAN_SCALES), help="WAN capacity scales")
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES), help="job shapes")
    parser.add_argument("--loads", type=float, nargs="+", default=list(LOADS), help="offered loads")
    parser.add_argument("--offered-load", action="store_true", help="print the flagship's mean GPU-hours per job and stop")
    parser.add_argument("--demand", action="store_true", help="print the flagship's per-hop demand table and stop")
    args = parser.parse_args(argv)
    if args.demand:
        print(demand_table())
        return 0
    if args.offered_load:
        data = flagship()
        gpus = sum(r["num_gpus"] for r in data["regions"])
        hours = mean_gpu_hours(data)
        print(f"GeoPipe-v0: {hours:,.1f} GPU-h per job (expected over its classes and datasets); {gpus:,} GPUs; "
              f"mean interarrival at offered load 0.8 = {hours / (0.8 * gpus):.3f} h")
        return 0
    if args.seeds < 1 or args.workers < 1:
        parser.error("--seeds and --workers must be >= 1")
    if min(args.wan) <= 0 or min(args.loads) <= 0:
        parser.error("--wan and --loads must be > 0")
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    paths = regime_scenarios(args.out, args.wan, args.shapes, args.loads)
    envs = {key: EnvSpec(label=path.stem, env_id="GeoPipe-v0", scenario=str(path)) for key, path in paths.items()}
    start = time.perf_counter()
    rows = run_episodes(list(envs.values()), POLICIES, seeds, None, args.workers)
    by_env: dict[str, list[dict]] = {}
    for row in rows:
        by_env.setdefault(row["env"], []).append(row)
    summaries = {key: regime_summary(by_env[spec.label]) for key, spec in envs.items()}
    table = markdown(summaries, seeds)
    (args.out / "regimes.md").write_text(table)
    (args.out / "regimes.json").write_text(json.dumps(
        {"seeds": seeds, "regimes": [{"wan_scale": w, "shape": s, "load": l, **v} for (w, s, l), v in summaries.items()]},
        indent=1,
    ))
    heat_map(summaries, args.out / "regimes.png")
    print(table)
    print(f"{len(rows)} episodes in {time.perf_counter() - start:.0f} s; wrote {args.out}/regimes.md, .json, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
