"""Print a learned agent's comparison with the scripted policies from an ``evaluate.py`` results.json, one row per env.

Usage::

    python evaluate.py --env GeoPipe-v0 GeoPipe-Paper-v0 <bw0.3.yaml> <gpu0.5.yaml> --seeds 30 --out results/agent
    python benchmarks/agent_table.py results/agent/results.json [AGENT_NAME]

Columns: the agent's mean return; the best scripted policy by mean return; the paired return difference (agent −
policy, same seeds, mean ± 95% CI) against that policy and against bace-pipe; how many scripted policies the agent
beats (verdict "better": the paired t-test significant after Holm's adjustment over all of the file's comparisons);
and the agent's average JCT and cost as % change vs bace-pipe. The agent name
defaults to the only policy with paired differences in the file.
"""

from __future__ import annotations

import sys

from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for the benchmarks package
from benchmarks import results_file  # noqa: E402

REFERENCE = "bace-pipe"


def _diff(est: dict) -> str:
    low, high = est["mean"] - est["ci95"], est["mean"] + est["ci95"]
    return f"{est['mean']:+.2f} [{low:+.2f}, {high:+.2f}]"


def main(argv: list[str] | None = None) -> int:
    read = results_file.read(argv, __doc__, max_extra=1)
    if read is None:
        return 2
    results, extra = read
    paired = results["paired_return_differences"]
    print("| env | agent return | best scripted (return) | agent − best scripted, 95% CI | agent − bace-pipe, 95% CI "
          "| scripted beaten (Holm) | avg JCT vs bace-pipe | cost vs bace-pipe |")
    print("|---" * 8 + "|")
    for env, subjects in paired.items():
        agent = extra[0] if extra else next(iter(subjects))
        others = subjects[agent]
        policies = results["envs"][env]["policies"]
        best = max(others, key=lambda p: policies[p]["return"]["mean"])
        beaten = sum(1 for est in others.values() if est["verdict"] == "better")
        mine = policies[agent]
        print(
            f"| {env} | {mine['return']['mean']:.2f} | {best} ({policies[best]['return']['mean']:.2f}) | {_diff(others[best])} "
            f"| {_diff(others[REFERENCE])} | {beaten} of {len(others)} "
            f"| {mine['avg_jct_h']['change_vs_reference_pct']:+.1f}% | {mine['total_cost_usd']['change_vs_reference_pct']:+.1f}% |"
        )
    n = len(results["seeds"])
    print(f"\n{n} seeds ({results['seeds'][0]}–{results['seeds'][-1]}) per env; agent: {agent}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
