"""Training throughput by vector env: MaskablePPO steps/s with envs in this process or in worker processes.

Usage: ``python benchmarks/vec_env_throughput.py [--rounds 3] [--timesteps 8192] [--env GeoPipe-v0]
[--scenario geopipe-v0-wide]``. ``--scenario ''`` runs the env id's own world.

Every configuration trains the shipped agent's policy (``CandidateScoringPolicy``) with the same rollout size per
update (1,024 steps: ``n_steps = 1024 / n_envs``), minibatch and epochs, so they differ only in how the envs are
stepped: ``DummyVecEnv`` (all envs in this process, stepped one after another) or ``SubprocVecEnv`` (one worker
process per env, stepped in parallel while the learner waits). Rounds are interleaved (every configuration once
per round, in a rotating order) so that a busy machine slows them alike; the median of the rounds is reported,
with each configuration's ratio to one in-process env.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from sb3_contrib import MaskablePPO  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize  # noqa: E402

from geopipe_agents.policies import CandidateScoringPolicy  # noqa: E402
from geopipe_agents.training import make_env  # noqa: E402

ROLLOUT = 1024  # steps per update, over all envs
CONFIGS = (("dummy", 1), ("dummy", 4), ("dummy", 8), ("subproc", 2), ("subproc", 4))


def steps_per_second(kind: str, n_envs: int, timesteps: int, env_id: str, scenario: str) -> float:
    fns = [lambda: make_env(env_id, {"scenario": scenario} if scenario else {}) for _ in range(n_envs)]
    venv = SubprocVecEnv(fns) if kind == "subproc" else DummyVecEnv(fns)
    venv.seed(0)
    venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=1.0)
    model = MaskablePPO(
        CandidateScoringPolicy, venv, n_steps=ROLLOUT // n_envs, batch_size=256, n_epochs=5, gamma=1.0,
        seed=0, device="cpu", verbose=0,
    )
    model.learn(ROLLOUT)  # warm-up: compilation, first resets, torch kernels
    start, done = time.perf_counter(), model.num_timesteps
    model.learn(timesteps, reset_num_timesteps=False)
    rate = (model.num_timesteps - done) / (time.perf_counter() - start)
    venv.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=8192)
    parser.add_argument("--env", default="GeoPipe-v0", help="the GeoPipe env id to train on (default GeoPipe-v0)")
    parser.add_argument("--scenario", default="geopipe-v0-wide", help="its scenario ('': the env id's own)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rates: dict[tuple[str, int], list[float]] = {c: [] for c in CONFIGS}
    for r in range(args.rounds):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[: r % len(CONFIGS)]
        for kind, n in order:
            rates[(kind, n)].append(steps_per_second(kind, n, args.timesteps, args.env, args.scenario))
            print(f"round {r + 1}: {kind} × {n}: {rates[(kind, n)][-1]:.0f} steps/s", flush=True)
    base = statistics.median(rates[("dummy", 1)])
    print(f"\n{os.cpu_count()} CPUs, {args.rounds} rounds of {args.timesteps} steps, {args.env}, scenario "
          f"{args.scenario or 'its own'}")
    print("| vec env | envs | steps/s (median) | range | vs 1 in-process env |\n|---|---|---|---|---|")
    for (kind, n), values in rates.items():
        med = statistics.median(values)
        print(f"| {kind} | {n} | {med:.0f} | {min(values):.0f}–{max(values):.0f} | {med / base:.2f}× |")


if __name__ == "__main__":
    main()
