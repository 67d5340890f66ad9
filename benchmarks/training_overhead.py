"""Training overhead: SB3 MaskablePPO steps/s on GeoPipe-v0 divided by SB3 PPO steps/s on CartPole-v1.

Usage: ``python benchmarks/training_overhead.py [--timesteps 4096] [--n-envs 2]``. Both runs use the same
``n_steps``, batch size, network (two hidden layers of 64) and number of envs (DummyVecEnv, one process), on the
CPU, in this one process, with the same torch thread count, so the ratio isolates what the environment costs the
learner.

A third run, MaskablePPO on a *null* env with GeoPipe-v0's observation and action spaces (a fixed observation,
every action valid, 27-step episodes, no simulation), gives the learner's own ceiling on those spaces: the ratio
that an infinitely fast GeoPipe-v0 would reach. A fourth shrinks the null env's observation to CartPole's four
floats, keeping the 65 masked actions: what the action space and masking alone cost the learner.
"""

from __future__ import annotations

import argparse
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import geopipe_env  # noqa: F401


class NullEnv(gym.Env):
    """GeoPipe-v0's spaces and nothing else: what the learner costs when the env costs nothing."""

    EPISODE_STEPS = 27  # about a masked-random GeoPipe-v0 episode

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


def steps_per_second(algo, policy: str, env_id, timesteps: int, n_envs: int, n_steps: int, batch: int) -> float:
    venv = make_vec_env(env_id, n_envs=n_envs, seed=0)
    model = algo(
        policy, venv, n_steps=n_steps, batch_size=batch, policy_kwargs={"net_arch": [64, 64]}, device="cpu", seed=0,
        verbose=0,
    )
    model.learn(n_steps * n_envs)  # warm-up: one rollout and update outside the timing
    start = time.perf_counter()
    model.learn(timesteps, reset_num_timesteps=False)
    rate = timesteps / (time.perf_counter() - start)
    venv.close()
    return rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=4096)
    parser.add_argument("--n-envs", type=int, default=2)
    parser.add_argument("--n-steps", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--torch-threads", type=int, default=1, help="as train.py's default (small MLPs lose with more)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    common = dict(timesteps=args.timesteps, n_envs=args.n_envs, n_steps=args.n_steps, batch=args.batch_size)
    cartpole = steps_per_second(PPO, "MlpPolicy", "CartPole-v1", **common)
    geopipe = steps_per_second(MaskablePPO, "MultiInputPolicy", "GeoPipe-v0", **common)
    null = steps_per_second(MaskablePPO, "MultiInputPolicy", NullEnv, **common)
    tiny = steps_per_second(MaskablePPO, "MlpPolicy", TinyNullEnv, **common)
    print(f"PPO on CartPole-v1:                      {cartpole:8,.0f} steps/s")
    print(f"MaskablePPO on GeoPipe-v0:               {geopipe:8,.0f} steps/s")
    print(f"MaskablePPO on a null env, same spaces:  {null:8,.0f} steps/s")
    print(f"  ... with a 4-float observation:         {tiny:8,.0f} steps/s (ratio {tiny / cartpole:.2f})")
    print(f"ratio: {geopipe / cartpole:.2f} (target >= 0.8); the learner's own ceiling on these spaces: {null / cartpole:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
