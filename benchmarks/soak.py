"""Soak and memory: run many env steps across seeds while sampling resident memory.

Usage::

    python benchmarks/soak.py --steps 1000000            # the soak: RSS sampled every --sample-every steps
    python benchmarks/soak.py --episodes 10              # peak RSS of a 10-episode run

Prints the RSS samples (MiB), the growth from the first sample taken after warm-up to the last, and the peak
(``ru_maxrss``); exits 1 if the growth exceeds ``--max-growth-mib`` (2 MiB). Seeds run 0, 1, 2, ... with a masked random policy; every episode is checked to end cleanly.

The warm-up (``--warmup-steps``, 100,000) is how long the process's bounded caches take to reach their size on
GeoPipe-Abundant-v0: the compiled candidate table's layout table first fills (8 MiB of path lines, then it empties and keeps
its arrays) after about 60,000 steps, and the Python layout and iteration-time caches fill in about as many.
Growth after that would be memory that no bound holds.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import gymnasium as gym
import numpy as np

import geopipe_env  # noqa: F401

PAGE_MIB = 4096 / 2**20


def rss_mib() -> float:
    """Current resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_MIB


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0")
    parser.add_argument("--steps", type=int, default=None, help="total env steps (the soak)")
    parser.add_argument("--episodes", type=int, default=None, help="run this many whole episodes instead")
    parser.add_argument("--sample-every", type=int, default=50_000)
    parser.add_argument("--warmup-steps", type=int, default=100_000,
                        help="growth is measured from after these (the caches' fill time, see above)")
    parser.add_argument("--max-growth-mib", type=float, default=2.0, help="fail (exit 1) if RSS grows more than this after warm-up")
    args = parser.parse_args(argv)
    if (args.steps is None) == (args.episodes is None):
        parser.error("give exactly one of --steps or --episodes")
    env = gym.make(args.env).unwrapped
    rng = np.random.default_rng(0)
    seed, steps, episodes = 0, 0, 0
    obs, info = env.reset(seed=seed)
    start = time.perf_counter()
    samples: list[tuple[int, float]] = [(0, rss_mib())]
    baseline: float | None = None
    while True:
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        steps += 1
        if terminated or truncated:
            if info["episode_metrics"]["invalid_actions"] != 0:
                raise AssertionError(f"seed {seed}: invalid actions under a masked policy")
            episodes += 1
            if args.episodes is not None and episodes >= args.episodes:
                break
            seed += 1
            obs, info = env.reset(seed=seed)
        if baseline is None and steps >= args.warmup_steps:
            baseline = rss_mib()
        if steps % args.sample_every == 0:
            samples.append((steps, rss_mib()))
            print(f"{steps:>9,} steps  {episodes:>7,} episodes  RSS {samples[-1][1]:7.1f} MiB  {time.perf_counter() - start:7.0f} s", flush=True)
        if args.steps is not None and steps >= args.steps:
            break
    samples.append((steps, rss_mib()))
    elapsed = time.perf_counter() - start
    print(f"{args.env}: {steps:,} steps, {episodes:,} episodes in {elapsed:.0f} s ({steps / elapsed:,.0f} steps/s)")
    print(f"RSS first {samples[0][1]:.1f} MiB, last {samples[-1][1]:.1f} MiB, peak {peak_rss_mib():.1f} MiB")
    if baseline is not None:
        growth = samples[-1][1] - baseline
        print(f"growth after {args.warmup_steps:,} warm-up steps: {growth:+.1f} MiB")
        if growth > args.max_growth_mib:
            print(f"FAIL: resident memory grew by more than the bound of {args.max_growth_mib} MiB")
            return 1
        print(f"bound held: growth <= {args.max_growth_mib} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
