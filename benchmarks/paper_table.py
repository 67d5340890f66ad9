"""Print the BACE-Pipe paper comparison (Zhang, Liu and Xu, arXiv 2605.25375) from an ``evaluate.py`` results.json.

Usage::

    python evaluate.py --env GeoPipe-Paper-v0 GeoPipe-Paper24-v0 GeoPipe-v0 --seeds 20 --out results/paper
    python benchmarks/paper_table.py results/paper/results.json

Every figure is a change of one policy's mean over the same seeds against another's: ``100·(a − b) / b``.
"""

from __future__ import annotations

import sys

from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for the benchmarks package
from benchmarks import results_file  # noqa: E402

# (row label, policy a, policy b, the paper's reported change of a vs b for JCT, for cost) — arXiv 2605.25375.
ROWS = [
    ("BACE-Pipe vs LDF", "bace-pipe", "ldf", "−27.9…−64.7 (all baselines)", "−12.6…−30.6 (all baselines)"),
    ("BACE-Pipe vs LCF", "bace-pipe", "lcf", "−27.9…−64.7", "≈ −30 (cost ≈ 70% of LCF's)"),
    ("BACE-Pipe vs CR-LDF", "bace-pipe", "cr-ldf", "≈ −43 (JCT ≈ 57% of CR-LDF's)", "−12.6…−30.6"),
    ("BACE-Pipe vs CR-LCF", "bace-pipe", "cr-lcf", "−27.9…−64.7", "−12.6…−30.6"),
    ("w/o priority vs BACE-Pipe", "bace-pipe-no-priority", "bace-pipe", "+41.9", "+5.0"),
    ("w/o pathfinder vs BACE-Pipe", "bace-pipe-no-pathfinder", "bace-pipe", "+52.5", "+20.5"),
    ("w/o Cost-Min vs BACE-Pipe", "bace-pipe-no-costmin", "bace-pipe", "+4.6", "+13.9"),
    ("paradox: CR-LDF vs LDF", "cr-ldf", "ldf", "+28.8", "—"),
    ("paradox: CR-LCF vs LCF", "cr-lcf", "lcf", "+13.1", "—"),
]


def change_pct(policies: dict, a: str, b: str, metric: str) -> str:
    if a not in policies or b not in policies:
        return "n/a"
    ma, mb = policies[a][metric]["mean"], policies[b][metric]["mean"]
    return f"{100.0 * (ma - mb) / abs(mb):+.1f}"


def main(argv: list[str] | None = None) -> int:
    read = results_file.read(argv, __doc__, max_extra=0)
    if read is None:
        return 2
    results, extra = read
    envs = list(results["envs"])
    header = "| comparison | " + " | ".join(f"{e} JCT % | {e} cost %" for e in envs) + " | paper JCT % | paper cost % |"
    print(header)
    print("|---" * (2 * len(envs) + 3) + "|")
    for label, a, b, paper_jct, paper_cost in ROWS:
        cells = []
        for env in envs:
            policies = results["envs"][env]["policies"]
            cells += [change_pct(policies, a, b, "avg_jct_h"), change_pct(policies, a, b, "total_cost_usd")]
        print(f"| {label} | " + " | ".join(cells) + f" | {paper_jct} | {paper_cost} |")
    n = len(results["seeds"])
    print(f"\n{n} seeds ({results['seeds'][0]}–{results['seeds'][-1]}) per env; negative = a is lower than b.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
