"""How far from optimal: each episode's exact optimum against every scripted policy, the rollout reference and
learned agents, on the small worlds.

For each seed the script solves the episode (``geopipe_baselines.optimal.solve``, one core), replays the plan on a fresh
env and checks that it earns exactly the reported return, then plays every policy on the same seed
(``geopipe_evaluation.episodes.run_episode``, the harness of ``evaluate.py``). Per policy it reports, over the seeds, the
interquartile mean (IQM) with a 95% percentile-bootstrap interval of

* the **return gap** ``100·(R_opt − R)/|R_opt|`` (at least 0: no policy earns more than the optimum),
* the **JCT gap** ``100·(JCT − JCT_opt)/JCT_opt`` and the **cost gap** ``100·(cost − cost_opt)/cost_opt``, which
  can be negative: the optimum maximises the return, the sum of both, and a policy may be faster or cheaper;

and how many seeds it plays optimally. For the optimum it reports its mean return, JCT and cost, the solver's
wall time and nodes per instance, and where the bounds sit against it: the env's per-job lower bounds
(``jct_lower_bound_h``, ``cost_lower_bound_usd`` of the episode metrics, and the return they imply) and the
solver's own bound at the first decision (``geopipe_baselines.optimal.FutureBound``).

Usage::

    python benchmarks/optimality.py                           # GeoPipe-Small-v0, seeds 1000..1029, every policy
    python benchmarks/optimality.py --env small-4r --seeds 5 --policies bace-pipe sjf --agents
    python benchmarks/optimality.py --seed-start 5000 --policies --agents   # the optima alone
    python benchmarks/optimality.py --optima benchmarks/results/optimality.json --policies --agents RUN/best_model.zip
    python benchmarks/optimality.py --offered-load            # the small worlds' GPU-hours per job, their arrival rate

``--optima`` takes the optima from an earlier run's file, so that a new policy is set against them without solving
again. ``--env`` takes a registered id, a bundled scenario name or a scenario file. Progress lines come every
``--progress-every`` seconds of a search. Ctrl-C stops the search under way with its best plan so far, marked
not proven optimal, solves no further seed, and reports the seeds solved; a second Ctrl-C while the policies play
stops without a report. Writes everything, every episode included, to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402

import geopipe_env  # noqa: E402, F401 - registers the env ids
from geopipe_baselines import policy_names  # noqa: E402
from geopipe_evaluation.episodes import run_episode  # noqa: E402
from geopipe_baselines.optimal import FutureBound, check_world, play_plan, solve  # noqa: E402
from geopipe_baselines.policy import DEFAULT_SEED_START  # noqa: E402
from geopipe_evaluation.report import check_output_folder, json_safe, provenance  # noqa: E402
from geopipe_evaluation.specs import EnvSpec, EvaluationInputError, check_inputs, parse_env  # noqa: E402
from geopipe_evaluation.stats import iqm_interval  # noqa: E402
from geopipe_env.scenario.loader import SCENARIO_DIR, builtin_names, load_builtin  # noqa: E402

DEFAULT_ENV = "GeoPipe-Small-v0"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "optimality.json"
PRETRAINED = ROOT / "agents" / "pretrained"
DEFAULT_AGENTS = ("geopipe_v0_maskable_ppo.zip", "small_maskable_ppo.zip")  # those present are played
SMALL_SCENARIOS = ("small-2r", "small", "small-4r")
OFFERED_LOAD = 0.8  # GeoPipe-v0's, which the small worlds keep
INTERRUPTED_EXIT = 130


def env_spec(arg: str) -> EnvSpec:
    """An env id, a scenario file, or a bundled scenario's name (played as ``GeoPipe-v0`` on that scenario)."""
    if arg in builtin_names():
        return EnvSpec(label=arg, env_id="GeoPipe-v0", scenario=arg)
    return parse_env(arg)


def solve_seed(spec: EnvSpec, seed: int, time_limit_s: float | None, progress_every_s: float | None) -> dict[str, Any]:
    """Solve one episode and replay its plan on a fresh env; the row of the optimum (``ValueError`` if the replay
    does not earn exactly the reported return)."""
    env = spec.make()
    env.reset(seed=seed)
    core = env.unwrapped
    root_bound = FutureBound(core).upper_bound(core)
    solution = solve(env, time_limit_s, progress_every_s, label=f"seed {seed}")
    replay = spec.make()
    replay.reset(seed=seed)
    replayed, info, ended = play_plan(replay.unwrapped, solution.actions)
    if not ended or replayed != solution.episode_return:
        raise ValueError(f"seed {seed}: the plan replays to {replayed!r} (ended: {ended}), "
                         f"not {solution.episode_return!r}")
    metrics = info["episode_metrics"]
    lower = env_bound_return(core, metrics)
    return {
        "policy": "optimal", "seed": seed, "jobs": len(core.world.jobs), "return": solution.episode_return,
        "avg_jct_h": metrics["avg_jct_h"], "total_cost_usd": metrics["total_cost_usd"], "proven": solution.proven,
        "stopped_by": solution.stopped_by, "wall_s": solution.wall_s, "nodes": solution.nodes,
        "cut_by_bound": solution.cut_by_bound, "cut_as_seen": solution.cut_as_seen,
        "first_return": solution.first_return, "first_source": solution.first_source,
        "root_bound": root_bound, "jct_lower_bound_h": metrics["jct_lower_bound_h"],
        "cost_lower_bound_usd": metrics["cost_lower_bound_usd"], "lower_bound_return": lower,
        "decisions": len(solution.actions), "stalled_job_fraction": metrics["stalled_job_fraction"],
        "cross_region_jobs": cross_region_jobs(replay.unwrapped),
    }


def earlier_optima(path: Path, label: str, seeds: list[int]) -> tuple[list[dict[str, Any]], list[int]]:
    """The optima of ``seeds`` in an earlier run's JSON file of the same env, and the seeds it lacks."""
    try:
        document = json.loads(path.read_text())
        by_seed = {r["seed"]: r for r in document["optima"]} if document.get("env") == label else {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--optima {path}: not a results file of this script ({exc})") from None
    return [by_seed[s] for s in seeds if s in by_seed], [s for s in seeds if s not in by_seed]


def env_bound_return(core: Any, metrics: dict[str, float]) -> float:
    """The return the env's lower bounds imply: every job at its JCT bound, the cost at the cost bound."""
    jobs = len(core.world.jobs)
    jct_s = metrics["jct_lower_bound_h"] * 3600.0 * jobs
    return -(jct_s / core.t_ref_s + core.cost_weight * metrics["cost_lower_bound_usd"] / core.c_ref_usd)


def cross_region_jobs(core: Any) -> int:
    """Jobs of the finished episode whose stages span more than one region."""
    return sum(len(p.regions) > 1 for p in core.sim.placements.values())


def play_seed(spec: EnvSpec, policy: str, seed: int) -> dict[str, Any]:
    """One episode of a policy (a scripted name or an agent's file), timed."""
    started = time.perf_counter()
    row = run_episode(spec, policy, seed, None)
    keep = ("policy", "seed", "return", "avg_jct_h", "total_cost_usd", "stalled_job_fraction", "invalid_actions")
    return {**{k: row[k] for k in keep}, "wall_s": time.perf_counter() - started}


def gap_rows(optima: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per policy: the IQM and 95% bootstrap interval of the return, JCT and cost gaps, over the seeds both ran."""
    best = {r["seed"]: r for r in optima}
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == name and r["seed"] in best]
        ret = [-percent(r["return"], best[r["seed"]]["return"]) for r in mine]
        jct = [percent(r["avg_jct_h"], best[r["seed"]]["avg_jct_h"]) for r in mine]
        cost = [percent(r["total_cost_usd"], best[r["seed"]]["total_cost_usd"]) for r in mine]
        mean_return = float(np.mean([r["return"] for r in mine]))
        mean_optimum = float(np.mean([best[r["seed"]]["return"] for r in mine]))
        out[name] = {
            "seeds": len(mine),
            "return": mean_return,
            "return_gap_pct": iqm_interval(ret)._asdict(),
            "jct_gap_pct": iqm_interval(jct)._asdict(),
            "cost_gap_pct": iqm_interval(cost)._asdict(),
            "gap_of_mean_return_pct": 100.0 * (mean_optimum - mean_return) / abs(mean_optimum),
            "optimal_seeds": sum(g <= 1e-7 for g in ret),
            "above_optimum_seeds": sum(g < -1e-7 for g in ret),  # never, if the optimum is one
            "wall_s_per_episode": float(np.mean([r["wall_s"] for r in mine])),
        }
    return out


def percent(value: float, reference: float) -> float:
    """``100·(value − reference)/|reference|``."""
    return 100.0 * (value - reference) / abs(reference)


def _gap_interval(values: list[float], optima: list[float]) -> dict[str, float]:
    """IQM and bootstrap interval of ``percent(value, optimum)`` over the seeds."""
    return iqm_interval([percent(v, o) for v, o in zip(values, optima)])._asdict()


def optimum_summary(optima: list[dict[str, Any]]) -> dict[str, Any]:
    """The optimum's means, the solver's times and nodes, and the bounds against it."""
    wall = np.array([r["wall_s"] for r in optima])
    nodes = np.array([r["nodes"] for r in optima])
    ret = np.array([r["return"] for r in optima])
    jct_ratio = [r["jct_lower_bound_h"] / r["avg_jct_h"] for r in optima]
    cost_ratio = [r["cost_lower_bound_usd"] / r["total_cost_usd"] for r in optima]
    return {
        "seeds": len(optima),
        "proven": sum(r["proven"] for r in optima),
        "jobs": {str(n): sum(r["jobs"] == n for r in optima) for n in sorted({r["jobs"] for r in optima})},
        "return": float(ret.mean()),
        "avg_jct_h": float(np.mean([r["avg_jct_h"] for r in optima])),
        "total_cost_usd": float(np.mean([r["total_cost_usd"] for r in optima])),
        "wall_s": {"median": float(np.median(wall)), "iqm": iqm_interval(wall)._asdict(), "max": float(wall.max()),
                   "total": float(wall.sum())},
        "wall_s_by_jobs": {str(n): float(np.median([r["wall_s"] for r in optima if r["jobs"] == n]))
                           for n in sorted({r["jobs"] for r in optima})},
        "nodes": {"median": float(np.median(nodes)), "max": int(nodes.max())},
        "jct_bound_over_optimum": iqm_interval(jct_ratio)._asdict(),
        "cost_bound_over_optimum": iqm_interval(cost_ratio)._asdict(),
        "negative_cost_bound_seeds": sum(r["cost_lower_bound_usd"] < 0 for r in optima),
        "env_bound_gap_pct": _gap_interval([r["lower_bound_return"] for r in optima], list(ret)),
        "root_bound_gap_pct": _gap_interval([r["root_bound"] for r in optima], list(ret)),
        "best_scripted_gap_pct": iqm_interval([-percent(r["first_return"], r["return"]) for r in optima])._asdict(),
        "cross_region_jobs": int(sum(r["cross_region_jobs"] for r in optima)),
        "all_jobs": int(sum(r["jobs"] for r in optima)),
        "stalled_jobs_fraction": float(np.mean([r["stalled_job_fraction"] for r in optima])),
    }


def _interval(entry: dict[str, float], digits: int = 1) -> str:
    if not math.isfinite(entry["low"]):
        return f"{entry['estimate']:.{digits}f}"
    return f"{entry['estimate']:.{digits}f} [{entry['low']:.{digits}f}, {entry['high']:.{digits}f}]"


def markdown(label: str, seeds: list[int], summary: dict[str, Any], gaps: dict[str, dict[str, Any]]) -> str:
    """The gap table and the optimum's lines, as the docs show them."""
    s = summary
    lines = [
        f"{label}, seeds {seeds[0]}–{seeds[-1]} ({s['seeds']} solved, {s['proven']} proven optimal); gaps to the "
        f"optimum in %, IQM over seeds [95% bootstrap CI]",
        "",
        "| policy | mean return | return gap % | avg JCT gap % | cost gap % | optimal on |",
        "|---|---|---|---|---|---|",
        f"| **optimum** | {s['return']:.3f} | 0 | 0 | 0 | {s['seeds']} |",
    ]
    for name, g in sorted(gaps.items(), key=lambda item: item[1]["return_gap_pct"]["estimate"]):
        gap_cells = " | ".join(_interval(g[key]) for key in ("return_gap_pct", "jct_gap_pct", "cost_gap_pct"))
        lines.append(f"| {name} | {g['return']:.3f} | {gap_cells} | {g['optimal_seeds']} |")
    jobs = ", ".join(f"{n} jobs: {c}" for n, c in s["jobs"].items())
    by_jobs = ", ".join(f"{n} jobs {t:.1f} s" for n, t in s["wall_s_by_jobs"].items())
    lines += [
        "",
        f"The optimum: mean avg JCT {s['avg_jct_h']:.2f} h, mean cost ${s['total_cost_usd']:.2f}; {jobs}. Solver time "
        f"per instance (one core): median {s['wall_s']['median']:.1f} s, IQM {_interval(s['wall_s']['iqm'])} s, max "
        f"{s['wall_s']['max']:.1f} s, {s['wall_s']['total']:.0f} s in all; median by job count: {by_jobs}; nodes "
        f"median {s['nodes']['median']:.0f}, max {s['nodes']['max']:,}. The best scripted plan (the search's first) is "
        f"{_interval(s['best_scripted_gap_pct'])}% below the optimum. {s['cross_region_jobs']} of the optimum's "
        f"{s['all_jobs']} jobs span regions; stalled fraction {s['stalled_jobs_fraction']:.3f}.",
        "",
        f"Bounds against the optimum: the env's JCT bound is {_interval(s['jct_bound_over_optimum'], 3)} of the "
        f"optimum's avg JCT; its cost bound {_interval(s['cost_bound_over_optimum'], 3)} of the optimum's cost "
        f"(negative on {s['negative_cost_bound_seeds']} seeds, where a price in the horizon is); the return both imply "
        f"is {_interval(s['env_bound_gap_pct'])}% above the optimum's, the solver's bound at the first decision "
        f"{_interval(s['root_bound_gap_pct'])}%.",
    ]
    return "\n".join(lines) + "\n"


def offered_load() -> str:
    """The small worlds' expected GPU-hours per job (each job alone in one region of its reference GPU type) and
    the mean interarrival time at offered load 0.8, as their files cite."""
    from benchmarks.regimes import mean_gpu_hours

    data = yaml.safe_load((SCENARIO_DIR / "small-2r.yaml").read_text())
    data.pop("randomize", None)  # one job per class, model and dataset
    hours = mean_gpu_hours(data)
    lines = [f"the small worlds' job mix (small-2r.yaml, which the others inherit; N. Virginia's H100s are the "
             f"largest region in each): {hours:.3f} GPU-h per job"]
    for name in SMALL_SCENARIOS:
        gpus = sum(r.num_gpus for r in load_builtin(name).regions)
        lines.append(f"{name}: {gpus} GPUs; mean interarrival at offered load {OFFERED_LOAD} = "
                     f"{hours / (OFFERED_LOAD * gpus):.3f} h")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=DEFAULT_ENV,
                        help=f"env id, bundled scenario name or .yaml (default {DEFAULT_ENV})")
    parser.add_argument("--seeds", type=int, default=30, help="seeds from --seed-start (default 30)")
    parser.add_argument("--seed-start", type=int, default=DEFAULT_SEED_START)
    parser.add_argument("--policies", nargs="*", default=None,
                        help="scripted policies (default: every one, rollout and known-jobs-optimal; none: the optima alone)")
    parser.add_argument("--agents", nargs="*", default=None, metavar="PATH",
                        help="saved agents (default: the shipped ones present in agents/pretrained; none: no agent)")
    parser.add_argument("--time-limit", type=float, default=None, metavar="S", help="per search (default: none)")
    parser.add_argument("--progress-every", type=float, default=10.0, metavar="S",
                        help="seconds between a search's progress lines (default 10)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON file (default benchmarks/results/optimality.json; with --optima, none)")
    parser.add_argument("--optima", type=Path, metavar="JSON",
                        help="take the optima from an earlier run's file (same env) instead of solving them again")
    parser.add_argument("--offered-load", action="store_true", help="print the small worlds' arrival rates and stop")
    args = parser.parse_args(argv)
    if args.offered_load:
        print(offered_load())
        return 0
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    spec = env_spec(args.env)
    try:
        probe = spec.make()
        check_world(probe)
    except (ValueError, gym.error.Error) as exc:  # an unknown env or scenario, a world too large: one line
        parser.error(str(exc))
    policies = [*policy_names(include_aliases=False), "rollout", "known-jobs-optimal"] if args.policies is None else args.policies
    if args.agents is None:
        agents = [str(PRETRAINED / a) for a in DEFAULT_AGENTS if (PRETRAINED / a).exists()]
    else:
        agents = args.agents
    out = args.out if args.out is not None or args.optima is not None else DEFAULT_OUT
    try:  # every policy and agent, and the output folder, before any episode is solved
        check_inputs([spec], [*policies, *agents], None)
        if out is not None:
            check_output_folder(out.resolve().parent, force=True)
    except EvaluationInputError as exc:
        parser.error(str(exc))
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    started = time.perf_counter()

    optima: list[dict[str, Any]] = []
    interrupted = False
    if args.optima is not None:
        try:
            optima, missing = earlier_optima(args.optima, spec.label, seeds)
        except ValueError as exc:
            parser.error(str(exc))
        if missing:
            parser.error(f"--optima {args.optima}: no optimum of {spec.label} for seed(s) {missing}")
        seeds = []  # nothing left to solve
    try:
        for seed in seeds:
            row = solve_seed(spec, seed, args.time_limit, args.progress_every)
            optima.append(row)
            note = "" if row["proven"] else f" (not proven optimal: {row['stopped_by']})"
            print(f"seed {seed}: {row['jobs']} jobs, optimum {row['return']:.4f}{note}, {row['wall_s']:.1f} s, "
                  f"{row['nodes']:,} nodes", file=sys.stderr, flush=True)
            if row["stopped_by"] == "interrupted":
                raise KeyboardInterrupt
    except KeyboardInterrupt:  # Ctrl-C: the search under way kept its best plan; no further seed
        interrupted = True
        print(f"interrupted: reporting the {len(optima)} seed(s) solved", file=sys.stderr, flush=True)
    if not optima:
        return INTERRUPTED_EXIT
    solved = [r["seed"] for r in optima]
    try:
        rows = [play_seed(spec, p, s) for p in [*policies, *agents] for s in solved]
    except KeyboardInterrupt:
        print("interrupted while the policies played: no report", file=sys.stderr)
        return INTERRUPTED_EXIT
    summary = optimum_summary(optima)
    gaps = gap_rows(optima, rows)
    print()
    print(markdown(spec.label, solved, summary, gaps))
    total_s = time.perf_counter() - started
    print(f"{len(optima)} optima and {len(rows)} policy episodes in {total_s:.0f} s")
    document = {
        "command": " ".join(["python", "benchmarks/optimality.py", *(sys.argv[1:] if argv is None else argv)]),
        "env": spec.label, "seeds": solved, "interrupted": interrupted, "total_wall_s": total_s, **provenance(),
        "optimum": summary, "gaps": gaps, "optima": optima, "episodes": rows,
    }
    if out is None:
        return INTERRUPTED_EXIT if interrupted else 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(json_safe(document), indent=1, allow_nan=False))
    print(f"results in {out}")
    return INTERRUPTED_EXIT if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
