"""Regime map: where the winning policies cross regions, where the WAN binds, where the schedules and BACE-Pipe's
parts change the answer.

Every regime is the GeoPipe-v0 world (GPU scarcity: 1,344 GPUs in six regions, job classes up to 1,024 GPUs, two
of them larger than any region) with four things changed:

* **WAN scale**: every inter-region capacity × {0.125, 0.3, 1, 3}. 0.125 is one VM pair per region pair (the raw
  Skyplane figure), 1 the flagship's eight.
* **Fleet scale**: every region's GPUs × {1, 2}. At ×2 N. Virginia holds 1,024 GPUs, so every class fits one
  region; below ×1 the 1,024-GPU class fits no fleet.
* **Load**: offered load {0.4, 0.8, 1.2}: the mean interarrival time is the mix's expected GPU-hours per job (each
  job alone in one region of its reference GPU type, :func:`mean_gpu_hours`) ÷ (load × the fleet's GPUs).
* **Schedules**: the flagship's (each class accepts its published schedule, 1F1B and crosspipe-greedy and runs the
  fastest on each placement) or ``1f1b`` only (every class's ``pipeline_schedules`` replaced by ``[1f1b]``, its
  ``virtual_stages`` removed).

The WAN and fleet scales are written into the scenario (not drawn by ``randomize``), so a seed draws the same jobs
and start day in every regime, their arrival times scaled to the regime's mean interarrival time.

For each regime it runs ``bace-pipe``, ``sjf`` (the best scripted policy on GeoPipe-v0), the paper's four
baselines and BACE-Pipe's three ablations on the same seeds and prints a table: the cross-region GPU share of
BACE-Pipe and of the regime's best policy (lowest mean time in system), stall fraction, comm slowdown and peak link
utilisation of CR-LCF (which ignores bandwidth) and of BACE-Pipe, BACE-Pipe's time in system and cost against each
baseline and SJF, the cross-region paradox (CR-LDF vs LDF, CR-LCF vs LCF) and each ablation against the full
BACE-Pipe. Time in system counts every arrived job, finished or not, to the episode's end: LDF and LCF serve the
queue in order, one region per job, so they block at the first job larger than every region, and their finished
jobs' JCT says nothing of the jobs left waiting. Changes are of means over the seeds: ``100·(a − b)/b``; negative
means a is lower. It writes ``regimes.md``, ``regimes.json`` and ``regimes.png`` (the heat map) to ``--out``.

Usage::

    python benchmarks/regimes.py --seeds 5 --workers 2 --out benchmarks/results/regimes
    python benchmarks/regimes.py --wan 0.3 1 --fleets 1 --loads 0.8 --schedules flagship --seeds 10   # a slice
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

from geopipe_evaluation.episodes import run_episodes
from geopipe_evaluation.specs import EnvSpec
from geopipe_env.simulation.generator import sample_world
from geopipe_env.simulation.core_types import Job, World
from geopipe_env.scenario.loader import SCENARIO_DIR, load_scenario
from geopipe_env.physics import pipeline
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import Placement
from geopipe_env.base.units import rate_gbps

WAN_SCALES = (0.125, 0.3, 1.0, 3.0)
FLEET_SCALES = (1.0, 2.0)
LOADS = (0.4, 0.8, 1.2)
SCHEDULES = ("flagship", "1f1b")
ONLY_1F1B = "1f1b"
POLICIES = (
    "bace-pipe", "sjf", "ldf", "lcf", "cr-ldf", "cr-lcf",
    "bace-pipe-no-priority", "bace-pipe-no-pathfinder", "bace-pipe-no-costmin",
)
BASELINES = ("ldf", "lcf", "cr-ldf", "cr-lcf")
COMPARED = (*BASELINES, "sjf")  # what BACE-Pipe is set against
ABLATIONS = ("bace-pipe-no-priority", "bace-pipe-no-pathfinder", "bace-pipe-no-costmin")
METRICS = (
    "avg_time_in_system_h", "avg_jct_h", "jobs_completed", "total_cost_usd", "cross_region_gpu_share",
    "cross_region_job_fraction", "stalled_job_fraction", "avg_comm_slowdown", "max_link_utilization",
)
TIS = "avg_time_in_system_h"
COST = "total_cost_usd"
SHORT = {"bace-pipe": "BACE", "sjf": "SJF", "ldf": "LDF", "lcf": "LCF", "cr-ldf": "CR-LDF", "cr-lcf": "CR-LCF",
         "bace-pipe-no-priority": "w/o priority", "bace-pipe-no-pathfinder": "w/o pathfinder",
         "bace-pipe-no-costmin": "w/o Cost-Min"}


def flagship() -> dict:
    """GeoPipe-v0's scenario file as a dict."""
    return yaml.safe_load((SCENARIO_DIR / "geopipe-v0.yaml").read_text())


def variant(fleet: float = 1.0, schedules: str = "flagship") -> dict:
    """The flagship with the regime's fleet and schedules (no WAN scale, the flagship's arrival rate)."""
    data = flagship()
    for region in data["regions"]:
        region["num_gpus"] = int(round(region["num_gpus"] * fleet))
    if schedules == ONLY_1F1B:
        data["pipeline_schedule"] = ONLY_1F1B
        data.pop("virtual_stages", None)
        for job_class in data["workload"]["job_classes"]:
            job_class.pop("pipeline_schedule", None)
            job_class.pop("virtual_stages", None)  # 1F1B runs one chunk per device
            job_class["pipeline_schedules"] = [ONLY_1F1B]
    elif schedules != "flagship":
        raise ValueError(f"unknown schedules {schedules!r}; expected one of {SCHEDULES}")
    data["name"] = f"regime fleet x{fleet:g}, {schedules}"
    return data


def scale_wan(data: dict, wan: float) -> None:
    """Every inter-region capacity of ``data``'s matrix × ``wan``, in place."""
    for row in data["network"]["matrix"].values():
        for link in row.values():
            link["bandwidth_gbps"] = round(link["bandwidth_gbps"] * wan, 6)


def one_job(data: dict, job_class: dict, model: str, dataset: str) -> tuple[Job, World]:
    """A world of ``data`` holding one job of ``job_class`` (with ``model`` and ``dataset``), and the job."""
    one = copy.deepcopy(data)
    one["workload"].update(num_jobs=1, job_classes=[{**job_class, "models": [model], "datasets": [dataset]}])
    world = sample_world(load_scenario(one), np.random.default_rng(0))
    (job,) = world.jobs
    return job, world


def mean_gpu_hours(data: dict) -> float:
    """The expected GPU-hours of a job of this workload alone in one region of its reference GPU type (the
    fitting type with the most GPUs), every boundary inside the region: exact over the classes' weights, models
    and datasets, each drawn uniformly within its class. A lower bound for jobs larger than that region."""
    workload = data["workload"]
    classes = workload["job_classes"]
    scenario = load_scenario(data)
    total_weight = sum(c.get("weight", 1.0) for c in classes)
    expected = 0.0
    for job_class, loaded in zip(classes, scenario.workload.classes):
        models = job_class.get("models", workload.get("models"))
        for model in models:
            # A job's iteration time does not depend on its dataset, only its iteration count does.
            job, world = one_job(data, job_class, model, loaded.datasets[0].name)
            ref = int(np.argmax(np.where(job.fits, world.num_gpus, -1)))
            iteration_s = ClusterSim(world).local_iteration_s_of(job, Placement((ref,), (job.num_stages,)))
            for dataset in loaded.datasets:
                iterations = pipeline.iterations_for(dataset.tokens, scenario.workload.epochs, job.micro_batch_size,
                                                     job.seq_len, job.num_microbatches, job.data_parallel)
                share = job_class.get("weight", 1.0) / total_weight / (len(models) * len(loaded.datasets))
                expected += share * iteration_s * iterations * job.num_gpus / 3600.0
    return expected


def class_demands(data: dict | None = None) -> list[dict]:
    """Per job class of ``data`` (default: the flagship), from the job the generator builds for it: its shape,
    WAN message ``d·A`` and per-hop demand ``m·d·A·8 / (t_f + t_b)`` on an H100 and an A100 region (each GPU type's
    forward time ``Job.forward_s``), with ``m`` = 1 message per micro-batch (1F1B) and ``m`` = its own schedule's,
    beside ``Job.typical_demand_gbps`` (the fewest messages of its schedules, on the median GPU it fits)."""
    data = flagship() if data is None else data
    gpu_of = [r["gpu"] for r in data["regions"]]
    out = []
    for job_class in data["workload"]["job_classes"]:
        models = job_class.get("models", data["workload"].get("models"))
        job, _ = one_job(data, job_class, models[0], job_class.get("datasets", data["workload"]["datasets"])[0])
        own = pipeline.max_link_messages(job.schedule, job.num_stages, job.num_microbatches, job.virtual_stages)
        row = {
            "name": job_class["name"], "stages": job.num_stages, "tc": job.gpus_per_stage * job.context_parallel,
            "d": job.data_parallel, "gpus": job.num_gpus, "schedule": job.schedule, "own_messages": own,
            "message_mb": job.wan_message_bytes / 1e6, "typical_gbps": job.typical_demand_gbps,
        }
        for gpu in ("H100", "A100"):
            regions = [r for r, g in enumerate(gpu_of) if g == gpu and job.fits[r]]
            stage_s = (1.0 + job.backward_ratio) * float(job.forward_s[regions[0]]) if regions else math.nan
            row[gpu] = rate_gbps(job.wan_message_bytes, stage_s) if job.num_stages > 1 else math.nan
            row[f"{gpu}_own"] = own * row[gpu]
        out.append(row)
    return out


def demand_table() -> str:
    """The flagship's :func:`class_demands` as a table, beside its WAN links at each WAN scale."""
    data = flagship()
    scenario = load_scenario(data)
    capacity = scenario.network.bandwidth_gbps[scenario.network.bandwidth_gbps > 0]
    lines = [
        "| job class | GPUs (S × t·c × d) | own schedule (messages per micro-batch and hop) | "
        "WAN message d·A (MB) | demand per hop at 1 message, H100 / A100 (Gbit/s) | "
        "at its own schedule's, H100 / A100 | Job.typical_demand_gbps |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in class_demands(data):
        shape = f"{row['gpus']:,} ({row['stages']} × {row['tc']} × {row['d']})"
        if row["stages"] == 1:
            cells = "— (one stage) | — | —"
        else:
            cells = (f"{row['H100']:.1f} / {row['A100']:.1f} | {row['H100_own']:.1f} / {row['A100_own']:.1f} | "
                     f"{row['typical_gbps']:.1f}")
        lines.append(f"| {row['name']} | {shape} | {row['schedule']} ({row['own_messages']:g}) | "
                     f"{row['message_mb']:,.0f} | {cells} |")
    lines.append(
        f"\nWAN links: {capacity.min():.1f}–{capacity.max():.1f} Gbit/s per direction "
        f"(median {np.median(capacity):.1f}), shared max-min fairly by every job crossing them; at WAN scale "
        + ", ".join(f"×{w:g}: {w * capacity.min():.1f}–{w * capacity.max():.1f}" for w in WAN_SCALES if w != 1.0)
        + "."
    )
    return "\n".join(lines) + "\n"


def regime_scenarios(
    out_dir: Path, wan_scales=WAN_SCALES, fleets=FLEET_SCALES, loads=LOADS, schedules=SCHEDULES
) -> tuple[dict[tuple, Path], dict[tuple, dict]]:
    """Write one scenario file per regime. (WAN scale, fleet scale, load, schedules) → path, and → its facts
    (fleet GPUs, jobs per episode, mean GPU-hours per job, mean interarrival time)."""
    folder = out_dir / "scenarios"
    folder.mkdir(parents=True, exist_ok=True)
    paths, facts = {}, {}
    for sched, fleet in itertools.product(schedules, fleets):
        base = variant(fleet, sched)
        fleet_gpus = sum(r["num_gpus"] for r in base["regions"])
        gpu_hours = mean_gpu_hours(base)
        for wan, load in itertools.product(wan_scales, loads):
            data = copy.deepcopy(base)
            data["name"] = f"wan x{wan:g}, fleet x{fleet:g}, load {load:g}, {sched}"
            data["workload"]["arrival"]["mean_interarrival_h"] = gpu_hours / (load * fleet_gpus)
            scale_wan(data, wan)
            path = folder / f"wan{wan:g}_fleet{fleet:g}_load{load:g}_{sched}.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            key = (wan, fleet, load, sched)
            paths[key] = path
            facts[key] = {"gpus": fleet_gpus, "num_jobs": data["workload"]["num_jobs"], "mean_gpu_hours": gpu_hours,
                          "mean_interarrival_h": gpu_hours / (load * fleet_gpus)}
    return paths, facts


def _mean(values: list[float]) -> float:
    """The mean of the numbers among ``values`` (NaN if none)."""
    numbers = [v for v in values if not math.isnan(v)]
    return float(np.mean(numbers)) if numbers else math.nan


def change_pct(means: dict, a: str, b: str, metric: str) -> float:
    """``100·(a − b)/b`` of two policies' means."""
    mb = means[b][metric]
    return 100.0 * (means[a][metric] - mb) / abs(mb) if mb else math.nan


def regime_summary(rows: list[dict]) -> dict:
    """Means per policy over the seeds, the per-seed values, and the regime's derived figures."""
    per_seed = {p: {k: [float(r[k]) for r in sorted(rows, key=lambda r: r["seed"]) if r["policy"] == p]
                    for k in METRICS} for p in POLICIES}
    means = {p: {k: _mean(v) for k, v in metrics.items()} for p, metrics in per_seed.items()}
    best = min(POLICIES, key=lambda p: means[p][TIS])
    best_other = min(COMPARED, key=lambda p: means[p][TIS])
    return {
        "means": means,
        "per_seed": per_seed,
        "best_policy": best,
        "best_cross_region_gpu_share": means[best]["cross_region_gpu_share"],
        "best_compared": best_other,
        "bace_vs_best_compared_tis": change_pct(means, "bace-pipe", best_other, TIS),
        "bace_vs": {b: (change_pct(means, "bace-pipe", b, TIS), change_pct(means, "bace-pipe", b, COST))
                    for b in COMPARED},
        "paradox_ldf": change_pct(means, "cr-ldf", "ldf", TIS),
        "paradox_lcf": change_pct(means, "cr-lcf", "lcf", TIS),
        "paradox_ldf_jct": change_pct(means, "cr-ldf", "ldf", "avg_jct_h"),
        "paradox_lcf_jct": change_pct(means, "cr-lcf", "lcf", "avg_jct_h"),
        "ablation": {a: (change_pct(means, a, "bace-pipe", TIS), change_pct(means, a, "bace-pipe", COST))
                     for a in ABLATIONS},
    }


def _regime_cells(key: tuple) -> str:
    wan, fleet, load, sched = key
    return f"| ×{wan:g} | ×{fleet:g} | {load:g} | {sched} |"


def _pct(value: float) -> str:
    """A % change for the tables: signed and whole, or a dash where it is undefined (nothing to compare with)."""
    return "—" if math.isnan(value) else f"{value:+.0f}"


def _per_policy(summaries: dict, title: str, cell) -> list[str]:
    """A table of ``cell(a policy's means)`` per regime and policy, under ``title``."""
    names = " | ".join(SHORT[p] for p in POLICIES)
    lines = ["", f"## {title}, per policy", "", f"| WAN | fleet | load | schedules | {names} |",
             "|" + "---|" * (4 + len(POLICIES))]
    for key, s in summaries.items():
        lines.append(_regime_cells(key) + " " + " | ".join(cell(s["means"][p]) for p in POLICIES) + " |")
    return lines


def markdown(summaries: dict, facts: dict, seeds: list[int]) -> str:
    """The main table, then each policy's time in system and cost per regime."""
    compared = ", ".join(SHORT[b] for b in COMPARED)
    head = (
        "| WAN | fleet | load | schedules | best policy: time in system (h) | cross-region GPU share BACE / best | "
        "stall CR-LCF / BACE | comm slowdown CR-LCF / BACE | peak link util. CR-LCF / BACE | "
        "BACE time in system (h), jobs done | "
        f"BACE time in system % vs {compared} | BACE cost % vs {compared} | "
        "paradox, time in system %: CR-LDF vs LDF, CR-LCF vs LCF | "
        "w/o priority, pathfinder, Cost-Min: time in system % | … cost % |"
    )
    lines = ["## Regimes", "", head, "|" + "---|" * 15]
    for key, s in summaries.items():
        m = s["means"]
        pair = lambda k, fmt: f"{m['cr-lcf'][k]:{fmt}} / {m['bace-pipe'][k]:{fmt}}"  # noqa: E731
        lines.append(
            f"{_regime_cells(key)} {SHORT[s['best_policy']]}: {m[s['best_policy']][TIS]:.0f} | "
            f"{m['bace-pipe']['cross_region_gpu_share']:.2f} / {s['best_cross_region_gpu_share']:.2f} | "
            f"{pair('stalled_job_fraction', '.2f')} | {pair('avg_comm_slowdown', '.3f')} | "
            f"{pair('max_link_utilization', '.2f')} | "
            f"{m['bace-pipe'][TIS]:.0f}, {m['bace-pipe']['jobs_completed']:.1f} | "
            + ", ".join(_pct(s["bace_vs"][b][0]) for b in COMPARED) + " | "
            + ", ".join(_pct(s["bace_vs"][b][1]) for b in COMPARED) + " | "
            + f"{_pct(s['paradox_ldf'])}, {_pct(s['paradox_lcf'])} | "
            + ", ".join(_pct(s["ablation"][a][0]) for a in ABLATIONS) + " | "
            + ", ".join(_pct(s["ablation"][a][1]) for a in ABLATIONS) + " |"
        )
    num_jobs = next(iter(facts.values()))["num_jobs"]
    lines += _per_policy(summaries, f"Time in system (h) and jobs finished (of {num_jobs})",
                         lambda m: f"{m[TIS]:.0f} ({m['jobs_completed']:.1f})")
    lines += _per_policy(summaries, "Cost (thousand USD) and cross-region GPU share",
                         lambda m: f"{m[COST] / 1e3:.1f} ({m['cross_region_gpu_share']:.2f})")
    variants = dict.fromkeys((fleet, sched) for _, fleet, _, sched in summaries)
    lines.append("")
    for fleet, sched in variants:
        f = next(facts[k] for k in summaries if k[1] == fleet and k[3] == sched)
        lines.append(f"- fleet ×{fleet:g}, {sched}: {f['gpus']:,} GPUs, {f['mean_gpu_hours']:,.1f} GPU-h per job.")
    lines.append(
        f"\n{len(seeds)} seeds ({seeds[0]}–{seeds[-1]}) per regime and policy; time in system counts every arrived "
        "job to its finish or the episode's end; changes are of means, negative = the first policy is lower."
    )
    return "\n".join(lines) + "\n"


def heat_map(summaries: dict, path: Path) -> None:
    """Ten panels over (schedules, fleet, load) rows × WAN-scale columns."""
    from matplotlib.figure import Figure

    wan_scales = sorted({key[0] for key in summaries})
    rows = list(dict.fromkeys((sched, fleet, load) for _, fleet, load, sched in summaries))

    def best_cell(s: dict) -> str:
        return f"{s['best_cross_region_gpu_share']:.2f}\n{SHORT[s['best_policy']]}"

    panels = [
        ("Best policy (time in system):\nits cross-region GPU share", lambda s: s["best_cross_region_gpu_share"],
         "viridis", best_cell),
        ("BACE-Pipe's cross-region GPU share", lambda s: s["means"]["bace-pipe"]["cross_region_gpu_share"],
         "viridis", "{:.2f}"),
        ("WAN binds: CR-LCF comm slowdown", lambda s: s["means"]["cr-lcf"]["avg_comm_slowdown"], "viridis", "{:.2f}"),
        ("BACE-Pipe vs best of baselines and SJF:\ntime in system %", lambda s: s["bace_vs_best_compared_tis"],
         "RdBu_r", "{:+.0f}"),
        ("BACE-Pipe vs SJF: cost %", lambda s: s["bace_vs"]["sjf"][1], "RdBu_r", "{:+.0f}"),
        ("Paradox: CR-LDF vs LDF time in system %", lambda s: s["paradox_ldf"], "RdBu_r", "{:+.0f}"),
        ("Paradox: CR-LCF vs LCF time in system %", lambda s: s["paradox_lcf"], "RdBu_r", "{:+.0f}"),
        ("w/o priority vs BACE-Pipe: time in system %", lambda s: s["ablation"]["bace-pipe-no-priority"][0],
         "RdBu_r", "{:+.0f}"),
        ("w/o pathfinder vs BACE-Pipe: time in system %", lambda s: s["ablation"]["bace-pipe-no-pathfinder"][0],
         "RdBu_r", "{:+.0f}"),
        ("w/o Cost-Min vs BACE-Pipe: cost %", lambda s: s["ablation"]["bace-pipe-no-costmin"][1], "RdBu_r", "{:+.0f}"),
    ]
    fig = Figure(figsize=(26, 13), layout="constrained")
    axes = fig.subplots(2, 5)
    for ax, (title, value, cmap, fmt) in zip(axes.ravel(), panels):
        cells = [[summaries[(wan, fleet, load, sched)] for wan in wan_scales] for sched, fleet, load in rows]
        grid = np.array([[value(s) for s in row] for row in cells])
        if cmap == "RdBu_r":
            finite = np.abs(grid[np.isfinite(grid)])
            bound = min(max(float(finite.max()) if finite.size else 1.0, 1.0), 100.0)
            image = ax.imshow(grid, cmap=cmap, vmin=-bound, vmax=bound, aspect="auto")
        else:
            image = ax.imshow(grid, cmap=cmap, aspect="auto")
        for (i, j), v in np.ndenumerate(grid):
            text = fmt(cells[i][j]) if callable(fmt) else fmt.format(v)
            red, green, blue, _ = image.cmap(image.norm(v))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_xticks(range(len(wan_scales)), [f"×{w:g}" for w in wan_scales])
        ax.set_yticks(range(len(rows)), [f"{sched}, fleet ×{fleet:g}, load {load:g}" for sched, fleet, load in rows],
                      fontsize=8)
        ax.set_xlabel("WAN capacity scale")
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle("GeoPipe-v0 regime map (time in system counts unfinished jobs; negative % = the first policy is "
                 "lower, blue is better for it; colour capped at ±100%)")
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds per regime and policy (from --seed-start)")
    parser.add_argument("--seed-start", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/regimes"))
    parser.add_argument("--wan", type=float, nargs="+", default=list(WAN_SCALES), help="WAN capacity scales")
    parser.add_argument("--fleets", type=float, nargs="+", default=list(FLEET_SCALES),
                        help="fleet scales (every region's GPUs ×; at least 1)")
    parser.add_argument("--loads", type=float, nargs="+", default=list(LOADS), help="offered loads")
    parser.add_argument("--schedules", nargs="+", choices=SCHEDULES, default=list(SCHEDULES),
                        help="the flagship's schedules per class, or 1f1b only")
    parser.add_argument("--offered-load", action="store_true",
                        help="print the mean GPU-hours per job (the arrival rate) of the flagship and of each "
                             "--fleets × --schedules variant, and stop")
    parser.add_argument("--demand", action="store_true", help="print the flagship's per-hop demand table and stop")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.workers < 1:
        parser.error("--seeds and --workers must be >= 1")
    if min(args.wan) <= 0 or min(args.loads) <= 0:
        parser.error("--wan and --loads must be > 0")
    if min(args.fleets) < 1:
        parser.error("--fleets must be >= 1 (below 1 the 1,024-GPU class fits no fleet)")
    if args.demand:
        print(demand_table())
        return 0
    if args.offered_load:
        data = flagship()
        gpus = sum(r["num_gpus"] for r in data["regions"])
        hours = mean_gpu_hours(data)
        print(f"GeoPipe-v0: {hours:,.1f} GPU-h per job (expected over its classes and datasets); {gpus:,} GPUs; "
              f"mean interarrival at offered load 0.8 = {hours / (0.8 * gpus):.3f} h")
        for sched, fleet in itertools.product(args.schedules, args.fleets):
            data = variant(fleet, sched)
            gpus = sum(r["num_gpus"] for r in data["regions"])
            hours = mean_gpu_hours(data)
            print(f"fleet ×{fleet:g}, {sched}: {hours:,.1f} GPU-h per job; {gpus:,} GPUs; mean interarrival at load "
                  + ", ".join(f"{load:g} = {hours / (load * gpus):.3f} h" for load in args.loads))
        return 0
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    facts, per_regime, elapsed = play_regimes(args, POLICIES, seeds)
    summaries = {key: regime_summary(rows) for key, rows in per_regime.items()}
    table = markdown(summaries, facts, seeds)
    (args.out / "regimes.md").write_text(table)
    (args.out / "regimes.json").write_text(json.dumps(
        {"seeds": seeds, "policies": list(POLICIES), "episode_seconds": round(elapsed, 1),
         "regimes": regimes_records(facts, summaries)}, indent=1,
    ))
    heat_map(summaries, args.out / "regimes.png")
    print(table)
    print(f"{sum(map(len, per_regime.values()))} episodes in {elapsed:.0f} s; wrote {args.out}/regimes.md, .json, .png")
    return 0


def play_regimes(args: argparse.Namespace, policies, seeds: list[int]) -> tuple[dict, dict[tuple, list[dict]], float]:
    """Write the regimes' scenario files (``args.out``, ``args.wan``, ``args.fleets``, ``args.loads``,
    ``args.schedules``) and play ``policies`` on each over ``seeds`` with ``args.workers``: each regime's facts, its
    episodes' rows, and the seconds the episodes took."""
    args.out.mkdir(parents=True, exist_ok=True)
    paths, facts = regime_scenarios(args.out, args.wan, args.fleets, args.loads, args.schedules)
    order = sorted(paths, key=lambda k: (args.schedules.index(k[3]), k[1], k[0], k[2]))
    envs = {key: EnvSpec(label=paths[key].stem, env_id="GeoPipe-v0", scenario=str(paths[key])) for key in order}
    start = time.perf_counter()
    rows = run_episodes(list(envs.values()), list(policies), seeds, None, args.workers)
    elapsed = time.perf_counter() - start
    by_env: dict[str, list[dict]] = {}
    for row in rows:
        by_env.setdefault(row["env"], []).append(row)
    return facts, {key: by_env[spec.label] for key, spec in envs.items()}, elapsed


def regimes_records(facts: dict, results: dict[tuple, dict]) -> list[dict]:
    """Per regime, its scale, load and schedules, its facts and ``results``' entry, for a JSON file."""
    return [{"wan_scale": w, "fleet_scale": f, "load": l, "schedules": s, **facts[(w, f, l, s)], **entry}
            for (w, f, l, s), entry in results.items()]


if __name__ == "__main__":
    sys.exit(main())
