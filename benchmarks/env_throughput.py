"""Env throughput: decisions per second on an env with a masked random policy, one process, resets included.

Usage: ``python benchmarks/env_throughput.py [--env GeoPipe-v0] [--decisions 3000] [--runs 5]``. Prints each run
and the median. Each run steps until it has taken ``--decisions`` actions, resetting (with the next seed) whenever
an episode ends, and counts the resets' time too. The figure is end to end: the policy's time is in it. Each run
also prints the env's own rate (the time inside ``reset`` and ``step`` alone), so that a reader can tell the env
from the policy, and at the end each process cache's hits and misses (``geopipe_env.base.caches``): the timing memo's
misses are the schedule executor's runs and the closed forms' evaluations.

The policy draws uniformly among the valid actions: an index into ``np.flatnonzero(mask)`` from
``rng.integers``, which costs about 5 µs a decision. (``rng.choice`` over the same array draws from the same
distribution but costs about 13 µs: it would be a tenth of what is measured here.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import gymnasium as gym
import numpy as np

import geopipe_env  # noqa: F401
from geopipe_evaluation.cli import int_at_least
from geopipe_env.base import caches


def masked_random_action(rng: np.random.Generator, mask: np.ndarray) -> int:
    """A uniform draw among the actions ``mask`` marks valid."""
    valid = np.flatnonzero(mask)
    return int(valid[rng.integers(valid.size)])


def decisions_per_second(env_id: str, decisions: int, seed: int, **env_kwargs) -> tuple[float, float, int]:
    """(decisions per second end to end, decisions per second of the env's own time, episodes) for one run of a
    random valid policy; ``env_kwargs`` go to ``gym.make``."""
    env = gym.make(env_id, **env_kwargs).unwrapped  # no checker wrappers: measure the env itself
    rng = np.random.default_rng(seed)
    clock = time.perf_counter
    start = clock()
    obs, info = env.reset(seed=seed)
    env_s = clock() - start
    episodes = 1
    for _ in range(decisions):
        action = masked_random_action(rng, info["action_mask"])
        t0 = clock()
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset(seed=seed + episodes)
            episodes += 1
        env_s += clock() - t0
    return decisions / (clock() - start), decisions / env_s, episodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0")
    parser.add_argument("--decisions", type=int_at_least(1), default=3000)
    parser.add_argument("--runs", type=int_at_least(1), default=5)
    args = parser.parse_args(argv)
    rates, env_rates = [], []
    for run in range(args.runs):
        rate, env_rate, episodes = decisions_per_second(args.env, args.decisions, seed=run * 10_000)
        rates.append(rate)
        env_rates.append(env_rate)
        print(f"run {run}: {rate:,.0f} decisions/s ({env_rate:,.0f} in the env's own time; {args.decisions} decisions, "
              f"{episodes} episodes)")
    print(f"{args.env}: median {statistics.median(rates):,.0f} decisions/s over {args.runs} runs "
          f"(the env's own time: {statistics.median(env_rates):,.0f})")
    print_cache_stats()
    return 0


def print_cache_stats() -> None:
    """One line per process cache: its hits, misses and size (the runs of a process share them)."""
    for name, (hits, misses, size, maxsize, from_store) in caches.stats().items():
        rate = hits / (hits + misses) if hits + misses else 0.0
        print(f"  cache {name}: {hits:,} hits, {misses:,} misses ({rate:.0%} hits; {from_store:,} of the misses read from the "
              f"timing store), {size:,} of {maxsize:,} entries")


if __name__ == "__main__":
    sys.exit(main())
