"""Side by side: GeoPipe-v0's decisions/s against a peer scheduling env, in interleaved rounds, as ratios.

Usage: ``python benchmarks/peer_throughput.py --jumanji-python PATH [--rounds 5] [--decisions 3000]``.

Each round runs GeoPipe-v0, then the peer, each in a fresh process: a warm-up of 300 decisions (numba's cached
kernels load, jax compiles), then ``--decisions`` timed decisions of a masked random policy with resets included
(episodes restart with the next seed). It prints each round's two rates and their ratio, then the median of each
and the median ratio. The machine's speed drifts from minute to minute, so only a ratio taken within one round
means much.

The peer is Jumanji's JobShop-v0 (10 jobs on 10 machines) through ``JumanjiToGymWrapper``: one decision is one
step, which assigns an operation or no-op to every machine; the policy draws each machine's choice uniformly
among its valid ones. jax and jumanji are not GeoPipe dependencies, so pass an interpreter that has them
(``--jumanji-python``; e.g. a venv with ``pip install jumanji``).

The Gymnasium port of Decima (spark-sched-sim) is not measured: it is not on PyPI, and its env downloads its
TPC-H job data from the internet when it is built.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from baselines.cli import int_at_least

WARMUP = 300

# A runner prints one number: decisions per second over the timed decisions. Each env fills in how it is made and
# its policy, a uniform draw among the valid actions (rng.integers into np.flatnonzero(mask), as env_throughput.py).
RUNNER = """
import time
import numpy as np
{make_env}
rng = np.random.default_rng(0)
seed = 0

def act(obs, info):
{act}

def run(decisions):
    global seed
    obs, info = env.reset(seed=seed)
    for _ in range(decisions):
        obs, reward, terminated, truncated, info = env.step(act(obs, info))
        if terminated or truncated:
            seed += 1
            obs, info = env.reset(seed=seed)

run({warmup})
start = time.perf_counter()
run({decisions})
print({decisions} / (time.perf_counter() - start))
"""

GEOPIPE = {
    "make_env": 'import gymnasium as gym\nimport geopipe_env\nenv = gym.make("GeoPipe-v0").unwrapped',
    "act": '    valid = np.flatnonzero(info["action_mask"])\n    return int(valid[rng.integers(valid.size)])',
}
# One decision assigns every machine: each machine's choice is drawn among its valid ones.
JUMANJI = {
    "make_env": 'import jumanji\nfrom jumanji.wrappers import JumanjiToGymWrapper\n'
                'env = JumanjiToGymWrapper(jumanji.make("JobShop-v0"))',
    "act": '    return np.array([v[rng.integers(v.size)] for v in map(np.flatnonzero, obs["action_mask"])])',
}


def rate(python: str, env: dict[str, str], decisions: int) -> float:
    """Decisions per second of one run of :data:`RUNNER` for ``env`` in a fresh ``python`` process."""
    code = RUNNER.format(**env, warmup=WARMUP, decisions=decisions)
    one_thread = {"OMP_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, env={**os.environ, **one_thread})
    except OSError as error:
        raise SystemExit(f"cannot run {python}: {error.strerror}") from None
    if done.returncode != 0:
        raise SystemExit(f"{python} failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jumanji-python", required=True, help="a Python interpreter with jax and jumanji installed")
    parser.add_argument("--rounds", type=int_at_least(1), default=5)
    parser.add_argument("--decisions", type=int_at_least(1), default=3000)
    args = parser.parse_args(argv)
    ours, theirs = [], []
    print("| round | GeoPipe-v0 decisions/s | Jumanji JobShop-v0 steps/s | ratio |")
    print("|---|---|---|---|")
    for round_ in range(args.rounds):
        ours.append(rate(sys.executable, GEOPIPE, args.decisions))
        theirs.append(rate(args.jumanji_python, JUMANJI, args.decisions))
        print(f"| {round_} | {ours[-1]:,.0f} | {theirs[-1]:,.0f} | {ours[-1] / theirs[-1]:.2f}× |", flush=True)
    ratios = [a / b for a, b in zip(ours, theirs)]
    print(f"| median | {statistics.median(ours):,.0f} | {statistics.median(theirs):,.0f} | "
          f"{statistics.median(ratios):.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
