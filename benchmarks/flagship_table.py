"""Print every policy's communication and outcome figures on one env from an ``evaluate.py`` results.json.

Usage::

    python evaluate.py --env GeoPipe-v0 --seeds 20 --out results/flagship
    python benchmarks/flagship_table.py results/flagship/results.json [ENV]

Three tables, one row per policy, each of at most six columns so that it fits a docs page. Communication: the
share of GPU-hours its jobs ran across regions, stalled-job fraction, average comm slowdown and peak WAN link
utilisation (mean ± 95% CI over the seeds). Outcomes: jobs finished, average time in system (every job from its
arrival to its finish or the episode's end), average JCT (finished jobs) and total cost (means); beside the time in
system and the cost, in brackets, the paired difference against ``bace-pipe`` on the same seeds: the mean of
(policy − bace-pipe) in % of bace-pipe's mean, with its 95% CI (t). Headline (the README's table): the share of
GPU-hours run across regions and the stalled-job fraction, then the jobs done, the time in system and the cost with
their paired changes against ``bace-pipe``. A world whose GPUs fail adds a fourth: goodput, GPU-hours lost to
failures and interruptions per job (mean ± 95% CI). The env defaults to the first in the file.
"""

from __future__ import annotations

import sys

import numpy as np
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for the benchmarks package
from benchmarks import results_file  # noqa: E402

from geopipe_evaluation.stats import mean_ci
from geopipe_env import ENV_IDS
from geopipe_env.scenario.loader import load_builtin, load_scenario

REFERENCE = "bace-pipe"


def _paired_pct(rows: list[dict], policy: str, metric: str) -> str:
    """``policy − bace-pipe`` per seed, as mean ± CI in % of bace-pipe's mean."""
    ref = {r["seed"]: r[metric] for r in rows if r["policy"] == REFERENCE}
    diffs = [r[metric] - ref[r["seed"]] for r in rows if r["policy"] == policy and r["seed"] in ref]
    scale = 100.0 / abs(float(np.mean(list(ref.values()))))
    est = mean_ci(diffs)
    return f"{est.mean * scale:+.1f} ± {est.ci95 * scale:.1f}"


def _paired_time_and_cost(rows: list[dict], policy: str) -> tuple[str, str]:
    """`` (+x ± y%)`` beside the time in system and beside the cost (empty for bace-pipe itself)."""
    if policy == REFERENCE:
        return "", ""
    return (f" ({_paired_pct(rows, policy, 'avg_time_in_system_h')}%)",
            f" ({_paired_pct(rows, policy, 'total_cost_usd')}%)")


def _number(value) -> bool:
    """Whether a results file's value is a number (NaN is written as null)."""
    return value is not None and value == value


def _jobs_per_episode(env: dict) -> int | None:
    """The number of jobs each episode of the env holds, or None when its scenario draws the number (or the file does
    not say which env it ran)."""
    if env.get("scenario"):
        scenario = load_scenario(env["scenario"])
    elif env.get("env_id") in ENV_IDS:
        scenario = load_builtin(ENV_IDS[env["env_id"]])
    else:
        return None
    return None if scenario.randomize.num_jobs is not None else int(scenario.workload.num_jobs)


def _cell(rows: list[dict], metric: str, digits: int) -> str:
    est = mean_ci(r[metric] for r in rows)
    return f"{est.mean:.{digits}f} ± {est.ci95:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    read = results_file.read(argv, __doc__, max_extra=1)
    if read is None:
        return 2
    results, extra = read
    env = extra[0] if extra else next(iter(results["envs"]))
    rows = [r for r in results["episodes"] if r["env"] == env]
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    print("| policy | cross-region GPU share | stalled frac. | comm slowdown | peak link util. |")
    print("|---" * 5 + "|")
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        slowdown = _cell(mine, "avg_comm_slowdown", 3) if all(_number(r["avg_comm_slowdown"]) for r in mine) else "—"
        print(f"| {policy} | {_cell(mine, 'cross_region_gpu_share', 2)} | {_cell(mine, 'stalled_job_fraction', 3)} "
              f"| {slowdown} | {_cell(mine, 'max_link_utilization', 2)} |")
    # The paired % beside its mean, so that the table has five columns.
    print("\n| policy | jobs done | avg time in system (h), paired vs bace-pipe | avg JCT (h) "
          "| cost ($), paired vs bace-pipe |")
    print("|---" * 5 + "|")
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        paired = _paired_time_and_cost(rows, policy)
        jct = [r["avg_jct_h"] for r in mine if _number(r["avg_jct_h"])]  # finished jobs only; none if none finished
        print(
            f"| {policy} | {np.mean([r['jobs_completed'] for r in mine]):.1f} "
            f"| {np.mean([r['avg_time_in_system_h'] for r in mine]):.1f}{paired[0]} "
            f"| {f'{np.mean(jct):.1f}' if jct else '—'} "
            f"| {np.mean([r['total_cost_usd'] for r in mine]):,.0f}{paired[1]} |"
        )
    arrived = _jobs_per_episode(results["envs"][env])
    arrived = f" (of {arrived})" if arrived else ""
    print(f"\n| policy | cross-region share of GPU-hours | stalled jobs | jobs done{arrived} "
          "| time in system (h), vs bace-pipe | cost ($), vs bace-pipe |")
    print("|---" * 6 + "|")
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        paired = _paired_time_and_cost(rows, policy)
        print(
            f"| {policy} | {np.mean([r['cross_region_gpu_share'] for r in mine]):.2f} "
            f"| {100 * np.mean([r['stalled_job_fraction'] for r in mine]):.1f}% "
            f"| {np.mean([r['jobs_completed'] for r in mine]):.1f} "
            f"| {np.mean([r['avg_time_in_system_h'] for r in mine]):.1f}{paired[0]} "
            f"| {np.mean([r['total_cost_usd'] for r in mine]):,.0f}{paired[1]} |"
        )
    if any(_number(r.get("goodput")) and r["goodput"] < 1.0 for r in rows):
        print("\n| policy | goodput | GPU-hours lost to failures | interruptions per job |")
        print("|---" * 4 + "|")
        for policy in policies:
            mine = [r for r in rows if r["policy"] == policy]
            print(f"| {policy} | {_cell(mine, 'goodput', 3)} | {_cell(mine, 'gpu_hours_lost_to_failures', 0)} "
                  f"| {_cell(mine, 'interruptions_per_job', 2)} |")
    seeds = results["seeds"]
    print(f"\n{len(seeds)} seeds ({seeds[0]}–{seeds[-1]}) on {env}; ± is the 95% CI (t); negative % = lower than bace-pipe.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
