"""Print every policy's communication and outcome figures on one env from an ``evaluate.py`` results.json.

Usage::

    python evaluate.py --env GeoPipe-v0 --seeds 20 --out results/flagship
    python benchmarks/flagship_table.py results/flagship/results.json [ENV]

One row per policy: stalled-job fraction, average comm slowdown and peak WAN link utilisation (mean ± 95% CI over
the seeds), average JCT and total cost (means), and the paired difference against ``bace-pipe`` on the same
seeds for JCT and for cost: the mean of (policy − bace-pipe) in % of bace-pipe's mean, with its 95% CI (t). The
env defaults to the first in the file.
"""

from __future__ import annotations

import sys

import numpy as np
import results_file

from baselines.stats import mean_ci

REFERENCE = "bace-pipe"


def _paired_pct(rows: list[dict], policy: str, metric: str) -> str:
    """``policy − bace-pipe`` per seed, as mean ± CI in % of bace-pipe's mean."""
    ref = {r["seed"]: r[metric] for r in rows if r["policy"] == REFERENCE}
    diffs = [r[metric] - ref[r["seed"]] for r in rows if r["policy"] == policy and r["seed"] in ref]
    scale = 100.0 / abs(float(np.mean(list(ref.values()))))
    est = mean_ci(diffs)
    return f"{est.mean * scale:+.1f} ± {est.ci95 * scale:.1f}"


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
    print("| policy | stalled frac. | comm slowdown | peak link util. | avg JCT (h) | cost ($) "
          "| JCT vs bace-pipe, paired % | cost vs bace-pipe, paired % |")
    print("|---" * 8 + "|")
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        paired = ("—", "—") if policy == REFERENCE else (
            _paired_pct(rows, policy, "avg_jct_h"), _paired_pct(rows, policy, "total_cost_usd"))
        print(
            f"| {policy} | {_cell(mine, 'stalled_job_fraction', 3)} | {_cell(mine, 'avg_comm_slowdown', 3)} "
            f"| {_cell(mine, 'max_link_utilization', 2)} | {np.mean([r['avg_jct_h'] for r in mine]):.1f} "
            f"| {np.mean([r['total_cost_usd'] for r in mine]):,.0f} | {paired[0]} | {paired[1]} |"
        )
    seeds = results["seeds"]
    print(f"\n{len(seeds)} seeds ({seeds[0]}–{seeds[-1]}) on {env}; ± is the 95% CI (t); negative % = lower than bace-pipe.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
