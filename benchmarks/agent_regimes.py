"""The agent on the regime map: in every regime, a learned policy against the best scripted policy, paired by seed.

The regimes are the regime map's (``benchmarks/regimes.py``: the flagship with its WAN capacity, fleet, offered load
and schedule sets changed). In each, every scripted policy (aliases and the slow references left out) and the agent
play the same seeds. The regime's best scripted policy is the one with the highest mean return over those seeds (the
reward is the benchmark's objective; chosen on the seeds it is then compared on, which favours it). The table gives,
per regime, that policy, the agent's mean return minus its own, paired by seed, with its 95% CI (t) and Holm's
adjusted p-value over the regimes, and the same difference in time in system and cost (in % of the best policy's
mean). The heat map draws the return difference per regime; a cell whose CI lies above zero is marked ``+``, below
zero ``−``.

Usage::

    python benchmarks/agent_regimes.py --agent agents/pretrained/geopipe_v0_maskable_ppo.zip --seeds 30 --workers 2 \\
        --out benchmarks/results/agent_regimes
    python benchmarks/agent_regimes.py --agent PATH --wan 0.125 --fleets 1 --loads 0.8 --schedules flagship --seeds 5

It writes ``agent_regimes.md``, ``agent_regimes.json`` and ``agent_regimes.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for the benchmarks package
from benchmarks.regimes import FLEET_SCALES, LOADS, SCHEDULES, WAN_SCALES, play_regimes, regimes_records  # noqa: E402
from geopipe_baselines import policy_names  # noqa: E402
from geopipe_evaluation.stats import holm, mean_ci, t_test_p_value  # noqa: E402
from geopipe_evaluation.summary import paired_values, verdict  # noqa: E402

AGENT = "agent"
METRICS = ("return", "avg_time_in_system_h", "total_cost_usd")


def regime_comparison(rows: list[dict], scripted: tuple[str, ...]) -> dict:
    """For one regime's rows: the best scripted policy by mean return, and the agent's differences to it, paired by
    seed (``summary.paired_values``): mean, CI, p-value (Holm's adjustment and the verdict come with the family,
    :func:`adjust`)."""
    best = max(scripted, key=lambda p: np.mean([r["return"] for r in rows if r["policy"] == p]))
    out: dict = {"best_scripted": best}
    for metric in METRICS:
        agent, other = paired_values(rows, AGENT, best, metric)
        diff = mean_ci(agent - other)
        reference = abs(float(other.mean()))
        out[metric] = {"agent": float(agent.mean()), "best": float(other.mean()), "diff": diff.mean, "ci": diff.ci95,
                       "diff_pct": 100.0 * diff.mean / reference if reference else math.nan,
                       "ci_pct": 100.0 * diff.ci95 / reference if reference else math.nan,
                       "n": diff.n, "p": t_test_p_value(agent - other)}
    return out


def adjust(comparisons: dict) -> None:
    """Holm's adjustment of the return comparisons over the regimes, and each one's verdict (``summary.verdict``)."""
    entries = [c["return"] for c in comparisons.values()]
    for entry, p_holm in zip(entries, holm([e["p"] for e in entries])):
        entry["p_holm"] = p_holm
        entry["verdict"] = verdict(entry["diff"], p_holm, entry["n"])


def markdown(comparisons: dict) -> str:
    lines = ["| WAN | fleet | load | schedules | best scripted | agent − best, return (95% CI) | p (Holm) | verdict | "
             "time in system, agent vs best | cost, agent vs best |", "|" + "---|" * 10]
    for (wan, fleet, load, sched), c in comparisons.items():
        r, t, k = c["return"], c["avg_time_in_system_h"], c["total_cost_usd"]
        lines.append(f"| ×{wan:g} | ×{fleet:g} | {load:g} | {sched} | {c['best_scripted']} | "
                     f"{r['diff']:+.1f} ± {r['ci']:.1f} | {r['p_holm']:.2g} | {r['verdict']} | "
                     f"{t['diff_pct']:+.1f} ± {t['ci_pct']:.1f}% | {k['diff_pct']:+.1f} ± {k['ci_pct']:.1f}% |")
    counts = {v: sum(c["return"]["verdict"] == v for c in comparisons.values())
              for v in ("better", "not significant", "worse")}
    lines += ["", f"In return, the agent is better than the regime's best scripted policy in {counts['better']} "
              f"regimes, ties it in {counts['not significant']} and is worse in {counts['worse']} (of {len(comparisons)}; Holm's "
              "adjustment over the regimes, family-wise error 5%). Time in system and cost: the agent's mean minus "
              "the best policy's, in % of the best policy's mean, with the 95% CI of the paired difference."]
    return "\n".join(lines) + "\n"


def heat_map(comparisons: dict, path: Path) -> None:
    """Agent minus best scripted, in return, per regime: WAN scale across, (schedules, fleet, load) down."""
    wans = sorted({k[0] for k in comparisons})
    rows = sorted({k[1:] for k in comparisons}, key=lambda r: (r[2], r[0], r[1]))
    grid = np.full((len(rows), len(wans)), np.nan)
    marks = {}
    for (wan, fleet, load, sched), c in comparisons.items():
        i, j = rows.index((fleet, load, sched)), wans.index(wan)
        grid[i, j] = c["return"]["diff"]
        marks[i, j] = {"better": "+", "worse": "−"}.get(c["return"]["verdict"], "")
    bound = float(np.nanmax(np.abs(grid))) or 1.0
    fig = Figure(figsize=(1.6 * len(wans) + 3.5, 0.45 * len(rows) + 1.8), dpi=110)
    ax = fig.add_subplot()
    image = ax.imshow(grid, cmap="RdBu", vmin=-bound, vmax=bound, aspect="auto")
    for (i, j), mark in marks.items():
        ax.text(j, i, f"{grid[i, j]:+.0f}{mark}", ha="center", va="center", fontsize=8,
                color="white" if abs(grid[i, j]) > bound / 2 else "black")
    ax.set_xticks(range(len(wans)), [f"WAN ×{w:g}" for w in wans])
    ax.set_yticks(range(len(rows)), [f"{s}, fleet ×{f:g}, load {l:g}" for f, l, s in rows], fontsize=8)
    fig.colorbar(image, ax=ax, label="agent − best scripted, return")
    ax.set_title("The agent against each regime's best scripted policy (+/−: Holm-adjusted p ≤ 0.05)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", required=True, help="a saved agent (.zip) to set against the scripted policies")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--seed-start", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/agent_regimes"))
    parser.add_argument("--wan", type=float, nargs="+", default=list(WAN_SCALES))
    parser.add_argument("--fleets", type=float, nargs="+", default=list(FLEET_SCALES))
    parser.add_argument("--loads", type=float, nargs="+", default=list(LOADS))
    parser.add_argument("--schedules", nargs="+", choices=SCHEDULES, default=list(SCHEDULES))
    args = parser.parse_args(argv)
    if args.seeds < 2 or args.workers < 1:
        parser.error("--seeds must be >= 2 (a paired CI) and --workers >= 1")
    if not Path(args.agent).is_file():
        parser.error(f"--agent: no file {args.agent}")
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    scripted = policy_names(include_aliases=False)
    facts, per_regime, elapsed = play_regimes(args, [*scripted, f"{AGENT}={Path(args.agent).resolve()}"], seeds)
    comparisons = {key: regime_comparison(rows, scripted) for key, rows in per_regime.items()}
    adjust(comparisons)
    table = markdown(comparisons)
    (args.out / "agent_regimes.md").write_text(table)
    (args.out / "agent_regimes.json").write_text(json.dumps(
        {"agent": args.agent, "seeds": seeds, "scripted": list(scripted), "episode_seconds": round(elapsed, 1),
         "regimes": regimes_records(facts, comparisons)}, indent=1,
    ))
    heat_map(comparisons, args.out / "agent_regimes.png")
    print(table)
    print(f"{sum(map(len, per_regime.values()))} episodes in {elapsed:.0f} s; wrote {args.out}/agent_regimes.md, .json, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
