"""The rollout reference against its base policies (and optionally a saved agent), with its wall time per episode.

``rollout`` (over ``bace-pipe``) and ``rollout-sjf`` try every distinct launch at each decision on copies of the
env and keep the one whose copy, played out by the base policy, earns the most (``geopipe_baselines.rollout``). Their
margin over ``bace-pipe`` and ``sjf`` says how much return a scheduler could still find by deciding one launch
better; a learned agent (``--agent``) can be placed against it. Every episode runs in this process, one after the
other, so the wall times are those of one core.

Usage::

    python benchmarks/rollout_reference.py                       # GeoPipe-v0, seeds 1000..1009
    python benchmarks/rollout_reference.py --seeds 2 --agent agents/pretrained/geopipe_v0_maskable_ppo.zip

Prints per policy: mean return, mean avg JCT (h), mean cost ($), wall time per episode (s), and for the rollouts
the decisions and rollouts per episode and the paired return difference against their base policy (mean ± 95% CI,
t). Writes the same, with every episode, to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from geopipe_baselines.policy import DEFAULT_SEED_START  # noqa: E402
from geopipe_evaluation.report import json_safe, provenance  # noqa: E402
from geopipe_evaluation.specs import build_policy, parse_env  # noqa: E402
from geopipe_baselines.policy import play_episode  # noqa: E402
from geopipe_baselines.rollout import RolloutPolicy  # noqa: E402
from geopipe_evaluation.stats import mean_ci  # noqa: E402

DEFAULT_POLICIES = ("bace-pipe", "sjf", "rollout", "rollout-sjf")
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "rollout_reference.json"


def run(env_arg: str, spec: str, seed: int) -> dict[str, Any]:
    """One episode of the policy ``spec`` (a scripted name or a saved agent's path) on ``env_arg``."""
    policy = build_policy(spec)
    env = parse_env(env_arg).make(None, **policy.env_kwargs)
    try:
        started = time.perf_counter()
        episode_return, info = play_episode(env, policy, seed)
        wall_s = time.perf_counter() - started
    finally:
        env.close()
    metrics = info["episode_metrics"]
    row = {
        "policy": policy.name, "seed": seed, "return": episode_return, "avg_jct_h": metrics["avg_jct_h"],
        "total_cost_usd": metrics["total_cost_usd"], "wall_s": wall_s, "invalid_actions": metrics["invalid_actions"],
    }
    if isinstance(policy, RolloutPolicy):
        row.update(base=policy.base_name, max_candidates=policy.max_candidates, **policy.stats)
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per policy: means of the episode columns, and for a rollout its paired return difference against its base."""
    by_policy: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_policy.setdefault(row["policy"], []).append(row)
    summary = {}
    for name, mine in by_policy.items():
        entry: dict[str, Any] = {"episodes": len(mine)}
        for key in ("return", "avg_jct_h", "total_cost_usd", "wall_s", "decisions", "rollouts", "improved"):
            if key in mine[0]:
                entry[key] = float(np.mean([r[key] for r in mine]))
        base = mine[0].get("base")
        if base in by_policy:
            base_return = {r["seed"]: r["return"] for r in by_policy[base]}
            pairs = [(r["return"], base_return[r["seed"]]) for r in mine if r["seed"] in base_return]
            ci = mean_ci(a - b for a, b in pairs)
            below = sum(a < b - 1e-9 * abs(b) for a, b in pairs)  # never, by construction (geopipe_baselines.rollout)
            entry["return_minus_base"] = {"base": base, "mean": ci.mean, "ci95": ci.ci95, "n": ci.n, "seeds_below_base": below}
        summary[name] = entry
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0", help="env id or scenario .yaml (default GeoPipe-v0)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds from --seed-start (default 10)")
    parser.add_argument("--seed-start", type=int, default=DEFAULT_SEED_START)
    parser.add_argument("--policies", nargs="+", default=list(DEFAULT_POLICIES), help=f"default {' '.join(DEFAULT_POLICIES)}")
    parser.add_argument("--agent", metavar="PATH", help="also a saved agent (SB3 .zip or RLlib checkpoint folder; needs its extra)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file (default benchmarks/results/rollout_reference.json)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    specs = [*args.policies, *([args.agent] if args.agent else [])]
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    started = time.perf_counter()
    rows = []
    for spec in specs:
        for seed in seeds:
            rows.append(run(args.env, spec, seed))
            print(f"{rows[-1]['policy']} seed {seed}: return {rows[-1]['return']:.3f} in {rows[-1]['wall_s']:.2f} s", file=sys.stderr)
    summary = summarize(rows)

    print(f"\n{args.env}, seeds {seeds[0]}..{seeds[-1]}, one process\n")
    print("| policy | return | avg JCT (h) | cost ($) | wall s / episode | decisions / ep. | rollouts / ep. | return − base, 95% CI |")
    print("|---" * 8 + "|")
    for name, s in summary.items():
        diff = s.get("return_minus_base")
        diff_text = f"{diff['mean']:+.3f} ± {diff['ci95']:.3f} vs {diff['base']}" if diff and diff["n"] > 1 else (
            f"{diff['mean']:+.3f} vs {diff['base']}" if diff else "")
        extra = [f"{s[k]:.0f}" if k in s else "" for k in ("decisions", "rollouts")]
        print(f"| {name} | {s['return']:.3f} | {s['avg_jct_h']:.2f} | {s['total_cost_usd']:,.0f} | {s['wall_s']:.2f} | "
              f"{extra[0]} | {extra[1]} | {diff_text} |")
    total_s = time.perf_counter() - started
    print(f"\n{len(rows)} episodes in {total_s:.1f} s")

    document = {
        "command": " ".join(["python", "benchmarks/rollout_reference.py", *(sys.argv[1:] if argv is None else argv)]),
        "env": args.env, "seeds": seeds, "total_wall_s": total_s, **provenance(), "policies": summary, "episodes": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(json_safe(document), f, indent=1, allow_nan=False)
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
