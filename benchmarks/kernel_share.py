"""How much of a decision the compiled kernels take: each call from Python into a numba kernel, clocked.

Usage: ``python benchmarks/kernel_share.py [--env GeoPipe-v0] [--decisions 30000] [--warmup 3000]``. One env steps
``--warmup`` decisions of a random valid policy (resets included; every kernel is loaded or compiled by then),
then every numba kernel of ``geopipe_env`` that Python code calls is wrapped by a clock, and the env steps
``--decisions`` more. It prints, per kernel, the time inside its calls (numba's dispatch included) per decision,
the calls per decision and the time per call, and the kernels' share of the whole. What is not in a kernel is
Python: the resets, the policy, and the code around the kernels. The clocks add about 0.2 µs a call, which the
whole includes.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import sys
import time
from pathlib import Path
from collections.abc import Callable, Iterator

import gymnasium as gym
import numpy as np
from numba.core.registry import CPUDispatcher

from geopipe_env.base.compiled import COMPILED_SOURCES
from geopipe_evaluation.cli import int_at_least

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for the benchmarks package
from benchmarks.env_throughput import masked_random_action  # noqa: E402

# The modules that hold the compiled kernels.
MODULES = tuple(
    importlib.import_module("geopipe_env." + name.removesuffix(".py").replace("/", "."))
    for name in COMPILED_SOURCES if name != "__init__.py"
)


@contextlib.contextmanager
def clocked_kernels(seconds: collections.Counter, calls: collections.Counter) -> Iterator[int]:
    """Inside the block, every kernel of ``MODULES`` is a wrapper that adds its time to ``seconds`` and its calls to
    ``calls`` (Python callers look a kernel up on its module at each call; compiled callers were bound when they
    were compiled, so call the kernels once before). Yields the number of kernels wrapped; restores them after."""
    def clocked(name: str, kernel: CPUDispatcher) -> Callable:
        def call(*args):
            start = time.perf_counter()
            out = kernel(*args)
            seconds[name] += time.perf_counter() - start
            calls[name] += 1
            return out
        return call

    # Each kernel in the module that defines it (a module that imports one by name calls it unclocked).
    originals = [(module, name, value) for module in MODULES for name, value in vars(module).items()
                 if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__]
    try:
        for module, name, kernel in originals:
            setattr(module, name, clocked(name, kernel))
        yield len(originals)
    finally:
        for module, name, kernel in originals:
            setattr(module, name, kernel)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0")
    parser.add_argument("--decisions", type=int_at_least(1), default=30_000)
    parser.add_argument("--warmup", type=int_at_least(0), default=3_000)
    args = parser.parse_args(argv)
    env = gym.make(args.env).unwrapped
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    episodes = 1

    def play(decisions: int) -> None:
        nonlocal obs, info, episodes
        for _ in range(decisions):
            obs, reward, terminated, truncated, info = env.step(masked_random_action(rng, info["action_mask"]))
            if terminated or truncated:
                obs, info = env.reset(seed=episodes)
                episodes += 1

    play(args.warmup)
    seconds: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    with clocked_kernels(seconds, calls):
        start = time.perf_counter()
        play(args.decisions)
        total_s = time.perf_counter() - start
    n = args.decisions
    print(f"{args.env}: {n:,} decisions after {args.warmup:,}, {1e6 * total_s / n:.1f} µs a decision with the clocks")
    print(f"{'kernel':<22}{'µs/decision':>12}{'calls/decision':>16}{'µs/call':>9}{'share':>7}")
    for name, s in seconds.most_common():
        print(f"{name:<22}{1e6 * s / n:>12.1f}{calls[name] / n:>16.2f}{1e6 * s / calls[name]:>9.1f}"
              f"{100 * s / total_s:>6.0f}%")
    kernel_s = sum(seconds.values())
    print(f"the kernels: {1e6 * kernel_s / n:.1f} µs a decision, {100 * kernel_s / total_s:.0f}% of it; "
          f"Python the other {100 - 100 * kernel_s / total_s:.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
