"""Env throughput: decisions per second on an env with a masked random policy, one process, resets included.

Usage: ``python benchmarks/env_throughput.py [--env GeoPipe-v0] [--decisions 3000] [--runs 5]``. Prints each run
and the median. Each run steps until it has taken ``--decisions`` actions, resetting (with the next seed) whenever
an episode ends, and counts the resets' time too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import gymnasium as gym
import numpy as np

import geopipe_env  # noqa: F401


def decisions_per_second(env_id: str, decisions: int, seed: int) -> tuple[float, int]:
    """(decisions per second, episodes) for one run."""
    env = gym.make(env_id).unwrapped  # no checker wrappers: measure the env itself
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    obs, info = env.reset(seed=seed)
    episodes = 1
    for _ in range(decisions):
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if terminated or truncated:
            obs, info = env.reset(seed=seed + episodes)
            episodes += 1
    return decisions / (time.perf_counter() - start), episodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0")
    parser.add_argument("--decisions", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    rates = []
    for run in range(args.runs):
        rate, episodes = decisions_per_second(args.env, args.decisions, seed=run * 10_000)
        rates.append(rate)
        print(f"run {run}: {rate:,.0f} decisions/s ({args.decisions} decisions, {episodes} episodes)")
    print(f"{args.env}: median {statistics.median(rates):,.0f} decisions/s over {args.runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
