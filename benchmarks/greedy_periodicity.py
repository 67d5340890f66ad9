"""Do the flagship's greedy schedules settle into a periodic regime that could be extrapolated?

Plays masked-random decisions of an env, records every schedule-executor run it asks for (the pipeline's model and
the cadence floor), draws a sample of the greedy runs of ``--min-microbatches`` or more, runs
each again with every op's start time recorded, and measures, for each period p of 1 to ``--max-period``
micro-batches, the longest stretch of micro-batches over which op start times repeat with period p: micro-batch
j + p starts each of its ops a fixed time after micro-batch j does, the same for consecutive j (to ``--tolerance``
of the iteration time). A run whose stretches are long could be timed by running its start and end and
extrapolating its middle; one without could not.

Usage::

    python benchmarks/greedy_periodicity.py [--env GeoPipe-v0] [--decisions 3000] [--sample 300]

Prints, over the sampled runs, the mean and median share of a run's micro-batches that lie in its longest periodic
stretch (period 1, and the best period), and the share of runs with none.
"""

from __future__ import annotations

import argparse
import sys

import gymnasium as gym
import numpy as np

import geopipe_env  # noqa: F401  (registers the env ids)
from geopipe_env.base import caches
from geopipe_env.physics import schedule


def record_runs(env_id: str, decisions: int, seed: int) -> list[tuple[schedule.ExecutorModel, float]]:
    """Every executor run ``decisions`` masked-random decisions of ``env_id`` ask for, from empty caches: (the
    pipeline's model, the cadence floor)."""
    caches.clear_all()
    runs: list[tuple[schedule.ExecutorModel, float]] = []
    run = schedule.ExecutorModel._run

    def recorded(model, floor):
        runs.append((model, float(floor)))
        return run(model, floor)

    schedule.ExecutorModel._run = recorded
    try:
        env = gym.make(env_id)
        rng = np.random.default_rng(seed)
        _, info = env.reset(seed=seed)
        episode = seed
        for _ in range(decisions):
            _, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            if terminated or truncated:
                episode += 1
                _, info = env.reset(seed=episode)
    finally:
        schedule.ExecutorModel._run = run
    return runs


def start_times(model: schedule.ExecutorModel, floor: float) -> tuple[np.ndarray, float]:
    """(4, K, M) each op's start time at the cadence floor (NaN for op kinds the program lacks) and the iteration
    time."""
    result = model.execute(floor, record=True)
    prog = model.program
    times = np.full((4, prog.num_chunks, prog.num_microbatches), np.nan)
    for (kind, chunk, mb), at in result.starts.items():
        times[kind, chunk, mb] = at
    return times, result.total_s


def longest_periodic_share(times: np.ndarray, total: float, period: int, tolerance: float) -> float:
    """The longest stretch of micro-batches over which start times repeat with ``period``, as a share of M."""
    m = times.shape[2]
    shift = times[:, :, period:] - times[:, :, :-period]  # (4, K, M − p): how much later micro-batch j + p starts
    change = np.nan_to_num(shift[:, :, 1:] - shift[:, :, :-1])
    repeats = np.all(np.abs(change) <= tolerance * total, axis=(0, 1))
    best = current = 0
    for same in repeats:
        current = current + 1 if same else 0
        best = max(best, current)
    return best / m


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0")
    parser.add_argument("--decisions", type=int, default=3000, help="masked-random decisions to record (default 3000)")
    parser.add_argument("--sample", type=int, default=300, help="greedy runs to analyse (default 300)")
    parser.add_argument("--min-microbatches", type=int, default=32)
    parser.add_argument("--max-period", type=int, default=16)
    parser.add_argument("--tolerance", type=float, default=1e-9, help="of the iteration time (default 1e-9)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.decisions < 1 or args.sample < 1 or args.max_period < 1 or args.min_microbatches < 3:
        parser.error("--decisions, --sample and --max-period must be >= 1, --min-microbatches >= 3")
    runs = record_runs(args.env, args.decisions, args.seed)
    greedy = [r for r in runs if r[0].program.greedy and r[0].program.num_microbatches >= args.min_microbatches]
    if not greedy:
        print(f"{args.env}: none of the {len(runs)} executor runs is greedy with >= {args.min_microbatches} "
              "micro-batches")
        return 0
    rng = np.random.default_rng(args.seed)
    picked = [greedy[i] for i in rng.choice(len(greedy), size=min(args.sample, len(greedy)), replace=False)]
    first, best = [], []
    for model, floor in picked:
        times, total = start_times(model, floor)
        shares = [longest_periodic_share(times, total, p, args.tolerance)
                  for p in range(1, args.max_period + 1) if 2 * p < times.shape[2]]
        first.append(shares[0])
        best.append(max(shares))
    first_a, best_a = np.array(first), np.array(best)
    print(f"{args.env}: {len(runs)} executor runs in {args.decisions} decisions, {len(greedy)} greedy with >= "
          f"{args.min_microbatches} micro-batches, {len(picked)} analysed")
    print(f"period 1: mean share {first_a.mean():.3f}, median {np.median(first_a):.3f}, runs with none "
          f"{np.mean(first_a == 0):.2f}")
    print(f"best period of 1-{args.max_period}: mean share {best_a.mean():.3f}, median {np.median(best_a):.3f}, "
          f"runs with none {np.mean(best_a == 0):.2f}, runs with half or more {np.mean(best_a >= 0.5):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
