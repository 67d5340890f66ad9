"""Training overhead: SB3 MaskablePPO steps/s on GeoPipe-v0 divided by SB3 PPO steps/s on CartPole-v1.

Usage: ``python benchmarks/training_overhead.py [--timesteps 4096] [--rounds 3] [--n-envs 2] [--env GeoPipe-v0]``. Every learner uses
the same ``n_steps``, batch size, network (two hidden layers of 64) and number of envs (DummyVecEnv, one process),
on the CPU, in this one process, with the same torch thread count, so the ratios isolate what the environment
costs the learner. The learners are built and warmed up first, then run in interleaved rounds (each learner
``--timesteps`` per round, in turn), so that the machine's drift hits them alike. The env's share of a training
step is taken per round from CPU time, in two ways: against the null env below, and directly, as the CPU time
spent inside the GeoPipe-v0 envs' ``step`` and ``reset`` (a wrapper clocks them: the simulator and the gym
wrappers under it, not SB3's vector env or its mask calls).

A third run, MaskablePPO on a *null* env with GeoPipe-v0's observation and action spaces (a fixed observation,
every action valid, 45-step episodes, no simulation), gives the learner's own ceiling on those spaces: the ratio
that an infinitely fast GeoPipe-v0 would reach. A fourth shrinks the null env's observation to CartPole's four
floats, keeping the 65 masked actions: what the action space and masking alone cost the learner.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import geopipe_env  # noqa: F401
from geopipe_evaluation.cli import int_at_least


class NullEnv(gym.Env):
    """GeoPipe's spaces (those of every GeoPipe env with the default queue and regions) and nothing else: what the
    learner costs when the env costs nothing."""

    EPISODE_STEPS = 45  # a masked-random episode, mean over seeds 1000–1199: GeoPipe-Abundant-v0 45.0, GeoPipe-v0 44.3

    def __init__(self) -> None:
        spec = gym.make("GeoPipe-v0").unwrapped
        self.observation_space, self.action_space = spec.observation_space, spec.action_space
        self._obs = spec.observation_space.sample()
        self._mask = np.ones(spec.action_space.n, dtype=bool)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs, {}

    def step(self, action):
        self._t += 1
        return self._obs, 0.0, self._t >= self.EPISODE_STEPS, False, {}

    def action_masks(self) -> np.ndarray:
        return self._mask


class TinyNullEnv(NullEnv):
    """:class:`NullEnv` with CartPole's observation size (4 floats) and GeoPipe-v0's masked actions."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self._obs = np.zeros(4, dtype=np.float32)


class EnvClock(gym.Wrapper):
    """The CPU time spent inside ``step`` and ``reset`` of the env it wraps (the env and the wrappers under it)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.cpu_s = 0.0

    def step(self, action):
        start = time.process_time()
        out = self.env.step(action)
        self.cpu_s += time.process_time() - start
        return out

    def reset(self, **kwargs):
        start = time.process_time()
        out = self.env.reset(**kwargs)
        self.cpu_s += time.process_time() - start
        return out


class Learner:
    """One SB3 learner on ``n_envs`` copies of an env (DummyVecEnv, one process), warmed up by one rollout and
    update, timed round by round."""

    def __init__(self, algo, policy: str, env_id, n_envs: int, n_steps: int, batch: int) -> None:
        # Every learner's envs are clocked, so that the clock's own cost is the same in all of them.
        self.venv = make_vec_env(env_id, n_envs=n_envs, seed=0, wrapper_class=EnvClock)
        self.model = algo(
            policy, self.venv, n_steps=n_steps, batch_size=batch, policy_kwargs={"net_arch": [64, 64]}, device="cpu",
            seed=0, verbose=0,
        )
        self.model.learn(n_steps * n_envs)  # warm-up: one rollout and update outside the timing
        self.wall_s: list[float] = []  # per round
        self.cpu_s: list[float] = []
        self.env_cpu_s: list[float] = []  # inside the envs' step and reset (EnvClock)

    def _env_cpu_s(self) -> float:
        return sum(self.venv.get_attr("cpu_s"))

    def run(self, timesteps: int) -> None:
        wall, cpu, env_cpu = time.perf_counter(), time.process_time(), self._env_cpu_s()
        self.model.learn(timesteps, reset_num_timesteps=False)
        self.wall_s.append(time.perf_counter() - wall)
        self.cpu_s.append(time.process_time() - cpu)
        self.env_cpu_s.append(self._env_cpu_s() - env_cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int_at_least(1), default=4096, help="timesteps per learner per round")
    parser.add_argument("--rounds", type=int_at_least(1), default=3, help="rounds; each runs every learner once, in turn")
    parser.add_argument("--n-envs", type=int_at_least(1), default=2)
    parser.add_argument("--n-steps", type=int_at_least(1), default=256)
    parser.add_argument("--batch-size", type=int_at_least(1), default=64)
    parser.add_argument("--torch-threads", type=int, default=1, help="as train.py's default (small MLPs lose with more)")
    parser.add_argument("--env", default="GeoPipe-v0", help="the GeoPipe env id to train on (default GeoPipe-v0)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    common = dict(n_envs=args.n_envs, n_steps=args.n_steps, batch=args.batch_size)
    learners = {
        "PPO on CartPole-v1": Learner(PPO, "MlpPolicy", "CartPole-v1", **common),
        f"MaskablePPO on {args.env}": Learner(MaskablePPO, "MultiInputPolicy", args.env, **common),
        "MaskablePPO on a null env, same spaces": Learner(MaskablePPO, "MultiInputPolicy", NullEnv, **common),
        "  ... with a 4-float observation": Learner(MaskablePPO, "MlpPolicy", TinyNullEnv, **common),
    }
    cartpole, geopipe, null, tiny = learners.values()
    shares, inside = [], []  # per round: 1 - null/GeoPipe-v0 CPU time, and the clocked env time / CPU time
    for round_ in range(args.rounds):
        for learner in learners.values():
            learner.run(args.timesteps)
        shares.append(1.0 - null.cpu_s[-1] / geopipe.cpu_s[-1])
        inside.append(geopipe.env_cpu_s[-1] / geopipe.cpu_s[-1])
        print(f"round {round_}: the env's share of a {args.env} training step {100 * shares[-1]:.0f}% (CPU time; "
              f"{100 * inside[-1]:.0f}% timed inside step and reset)", flush=True)
    rate = {name: args.timesteps / statistics.median(learner.wall_s) for name, learner in learners.items()}
    for name, steps_per_s in rate.items():
        print(f"{name + ':':<42}{steps_per_s:8,.0f} steps/s (median of {args.rounds} rounds, wall time)")
    ms = {name: 1e3 * statistics.median(learner.cpu_s) / args.timesteps for name, learner in learners.items()}
    print(f"CPU per training step: {ms[f'MaskablePPO on {args.env}']:.2f} ms on {args.env}, "
          f"{ms['MaskablePPO on a null env, same spaces']:.2f} ms on the null env")
    print(f"the env's share of a training step (1 - null/{args.env}, CPU time, per round): "
          f"{', '.join(f'{100 * s:.0f}%' for s in shares)}; median {100 * statistics.median(shares):.0f}%")
    print(f"timed inside step and reset (the env and its gym wrappers): "
          f"{1e3 * statistics.median(geopipe.env_cpu_s) / args.timesteps:.2f} ms per step; per round "
          f"{', '.join(f'{100 * s:.0f}%' for s in inside)} of the step's CPU time; median {100 * statistics.median(inside):.0f}%")
    geo, cart = rate[f"MaskablePPO on {args.env}"], rate["PPO on CartPole-v1"]
    print(f"ratio to CartPole: {geo / cart:.2f}; the learner's own ceiling on these spaces: "
          f"{rate['MaskablePPO on a null env, same spaces'] / cart:.2f} "
          f"(4-float observation: {rate['  ... with a 4-float observation'] / cart:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
