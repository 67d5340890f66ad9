"""Scaling: env step time as the number of regions and the queue length grow.

Usage: ``python benchmarks/scaling.py [--decisions 30] [--worlds 3]``. Worlds come from
``benchmarks/synthetic.py`` (the hypothesis tests' generator). For each region count (6, 16, 32, 64; the env's
``max_regions`` is set to fit) and each queue length (8, 32, 128 jobs submitted at t = 0, so that many wait), it
times the first ``--decisions`` steps of a masked random policy (reset excluded) over ``--worlds`` random worlds,
and prints the mean step time and its ratio to the 6-region time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from geopipe_env.env import GeoPipeEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for the benchmarks package
from benchmarks.synthetic import random_scenario  # noqa: E402

REGION_COUNTS = (6, 16, 32, 64)
QUEUE_LENGTHS = (8, 32, 128)


def step_time_ms(num_regions: int, num_jobs: int, decisions: int, worlds: int) -> float:
    """Mean wall time of one step, in ms, over the first ``decisions`` steps of each world."""
    total_s, steps = 0.0, 0
    for w in range(worlds):
        scenario = random_scenario(np.random.default_rng(w), num_regions, num_jobs, batch=True)
        env = GeoPipeEnv(scenario, max_regions=max(16, num_regions))
        rng = np.random.default_rng(w)
        obs, info = env.reset(seed=w)
        for _ in range(decisions):
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            start = time.perf_counter()
            obs, reward, terminated, truncated, info = env.step(action)
            total_s += time.perf_counter() - start
            steps += 1
            if terminated or truncated:
                break
    return 1e3 * total_s / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=30)
    parser.add_argument("--worlds", type=int, default=3)
    args = parser.parse_args(argv)
    print("| regions | " + " | ".join(f"{q} waiting: ms/step" for q in QUEUE_LENGTHS) + " | ratio to 6 regions (8 waiting) |")
    print("|---" * (len(QUEUE_LENGTHS) + 2) + "|")
    base = None
    for regions in REGION_COUNTS:
        times = [step_time_ms(regions, q, args.decisions, args.worlds) for q in QUEUE_LENGTHS]
        base = base or times[0]
        print(f"| {regions} | " + " | ".join(f"{t:.2f}" for t in times) + f" | {times[0] / base:.2f}× |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
