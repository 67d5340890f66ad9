"""A digest of random-policy trajectories: what a speed-up that must change nothing is checked against.

Usage: ``python benchmarks/trajectory_digest.py [--env GeoPipe-v0] [--decisions 3000] [--seed 0]``.

It plays ``--decisions`` decisions of the masked random policy of ``env_throughput.py`` from the first reset on,
resetting with the next seed when an episode ends, and hashes (SHA-256) every observation, action, reward, end flag,
action mask and the numeric entries of every ``info``, in order, bit for bit. Run it on two revisions (for example
with ``git stash`` or in a ``git worktree``): equal digests mean the two played the same episodes.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

import geopipe_env  # noqa: F401
from geopipe_evaluation.cli import int_at_least

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for the benchmarks package
from benchmarks.env_throughput import masked_random_action  # noqa: E402


def _update(digest, value) -> None:
    """Feed one value into ``digest``, by its bytes (arrays and floats) or its repr (the rest)."""
    if isinstance(value, np.ndarray):
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, dict):
        for key in sorted(value):
            digest.update(key.encode())
            _update(digest, value[key])
    elif isinstance(value, (bool, int, float, np.floating, np.integer, np.bool_)):
        digest.update(np.asarray(value, dtype=float).tobytes())
    elif isinstance(value, (list, tuple)) and all(isinstance(v, (int, float, np.floating, np.integer)) for v in value):
        digest.update(np.asarray(value, dtype=float).tobytes())


def digest_of(env_id: str, decisions: int, seed: int) -> tuple[str, int]:
    """(hex digest, episodes) of ``decisions`` random decisions on ``env_id`` from seed ``seed``."""
    env = gym.make(env_id).unwrapped
    rng = np.random.default_rng(seed)
    digest = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    _update(digest, obs)
    _update(digest, info)
    episodes = 1
    for _ in range(decisions):
        action = masked_random_action(rng, info["action_mask"])
        obs, reward, terminated, truncated, info = env.step(action)
        for value in (action, obs, reward, terminated, truncated, info):
            _update(digest, value)
        if terminated or truncated:
            obs, info = env.reset(seed=seed + episodes)
            _update(digest, obs)
            _update(digest, info)
            episodes += 1
    return digest.hexdigest(), episodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0")
    parser.add_argument("--decisions", type=int_at_least(1), default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    hexdigest, episodes = digest_of(args.env, args.decisions, args.seed)
    print(f"{args.env}: {args.decisions} decisions, {episodes} episodes, seed {args.seed}: sha256 {hexdigest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
