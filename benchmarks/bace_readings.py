"""BACE-Pipe where its paper is silent: each reading of ``BaceReading`` against the project's, measured.

The paper fixes BACE-Pipe's three parts but not how they act in worlds unlike its own (hourly prices, mixed GPU
types, jobs that one region holds, admission that passes every link). Each row here flips one reading, or takes
the paper's literal reading of all of them (``literal``: price now, price alone, cross-region paths from the
cheapest start whatever one region holds), and runs BACE-Pipe with it on the same seeds as the project's reading
(``bace-pipe``) and the four baselines. Episodes run in this process, since the readings are registered here.

The readings are variants of BACE-Pipe's rule written plainly in Python: the specification that the compiled
``bace-pipe`` is held to, which lives with the tests (``tests/reference_placement.py``, not in the package), so
this script runs from a checkout of the repository.

Usage::

    python benchmarks/bace_readings.py [--seeds 20] [--env GeoPipe-v0 GeoPipe-Paper-v0 ...]

Columns: mean return; the paired return difference against ``bace-pipe`` (mean ± 95% CI, t); the % change of mean
JCT and mean cost against ``bace-pipe``; the mean comm slowdown.
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys
import time

import gymnasium as gym
import numpy as np

import geopipe_env  # noqa: F401  (registers the env ids)
from geopipe_baselines import make_policy
from geopipe_baselines.bace import BacePipePolicy
from geopipe_evaluation.stats import mean_ci
from geopipe_baselines.policy import play_episode
from geopipe_env.decision.strategies import register_strategy, strategy_names

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))  # the specification's rules
from reference_placement import BaceReading, bace_pipe  # noqa: E402

READINGS: dict[str, BaceReading] = {
    "no single-region first": BaceReading(single_region_first=False),
    "price now": BaceReading(price_over_run=False),
    "price alone (not per unit of work)": BaceReading(per_unit_work=False),
    "admit on t_f": BaceReading(admit_on_forward=True),
    "grow by price": BaceReading(grow_by_price=True),
    "literal": BaceReading(single_region_first=False, price_over_run=False, per_unit_work=False),
}
BASELINES = ("ldf", "lcf", "cr-ldf", "cr-lcf")
DEFAULT_ENVS = ("GeoPipe-v0", "GeoPipe-Paper-v0", "GeoPipe-Paper24-v0", "a6000-vm-pair", "geopipe-v0-bw0.3")


def _strategy_name(label: str) -> str:
    return "bace-pipe[" + label + "]"


def register_readings() -> None:
    """Register one candidate strategy per reading (once per process)."""
    for label, reading in READINGS.items():
        if _strategy_name(label) not in strategy_names():
            register_strategy(_strategy_name(label), functools.partial(bace_pipe, reading=reading))


def _episode(env_name: str, policy, seed: int) -> tuple[float, float, float, float]:
    kwargs = {} if env_name in gym.registry else {"scenario": env_name}
    env = gym.make(env_name if env_name in gym.registry else "GeoPipe-v0", **kwargs, **policy.env_kwargs)
    ret, info = play_episode(env, policy, seed)
    m = info["episode_metrics"]
    return ret, m["avg_jct_h"], m["total_cost_usd"], m["avg_comm_slowdown"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds from --seed-start (default 20)")
    parser.add_argument("--seed-start", type=int, default=1000)
    parser.add_argument("--env", nargs="+", default=list(DEFAULT_ENVS), help="env ids or bundled scenario names")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        parser.error("--seeds must be >= 2 (a paired CI needs two)")
    register_readings()
    seeds = range(args.seed_start, args.seed_start + args.seeds)
    makers = {"bace-pipe": lambda: make_policy("bace-pipe")}
    makers |= {label: functools.partial(BacePipePolicy, label, _strategy_name(label)) for label in READINGS}
    makers |= {name: functools.partial(make_policy, name) for name in BASELINES}
    started = time.perf_counter()
    for env_name in args.env:
        runs = {label: np.array([_episode(env_name, make(), s) for s in seeds]) for label, make in makers.items()}
        ref = runs["bace-pipe"]
        print(f"\n#### {env_name} ({args.seeds} seeds from {args.seed_start})\n")
        print("| BACE-Pipe reading | return | − bace-pipe, 95% CI | JCT vs bace-pipe | cost vs bace-pipe | comm slowdown |")
        print("|---|---|---|---|---|---|")
        for label, r in runs.items():
            diff = mean_ci(r[:, 0] - ref[:, 0])
            paired = "—" if label == "bace-pipe" else f"{diff.mean:+.2f} ± {diff.ci95:.2f}"
            jct = 100 * (np.nanmean(r[:, 1]) / np.nanmean(ref[:, 1]) - 1)
            cost = 100 * (r[:, 2].mean() / ref[:, 2].mean() - 1)
            print(f"| {label} | {r[:, 0].mean():.2f} | {paired} | {jct:+.1f}% | {cost:+.1f}% | {np.nanmean(r[:, 3]):.3f} |")
    print(f"\n{time.perf_counter() - started:.0f} s; rows below the readings are the paper's baselines, for scale.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
