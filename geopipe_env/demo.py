"""A short demo: one GeoPipe episode per simple policy, with the episode metrics side by side.

Run ``python -m geopipe_env.demo [--env GeoPipe-v0] [--seed 0]``. The policies here act only through the
action space: ``fcfs/<strategy>`` launches the oldest waiting job on that strategy's candidate when it is
valid (else waits), and ``random`` picks a uniformly random valid action.
"""

from __future__ import annotations

import argparse
import sys

import gymnasium as gym
import numpy as np

import geopipe_env  # noqa: F401  (registers the env ids)
from geopipe_env.placement import STRATEGY_NAMES

SHOWN_METRICS = ("avg_jct_h", "p95_jct_h", "avg_wait_h", "total_cost_usd", "energy_kwh", "carbon_kg", "gpu_utilization", "stalled_job_fraction", "jobs_completed")


def fcfs_action(env, strategy: str) -> int:
    """The oldest waiting job on ``strategy``'s candidate if valid, otherwise wait."""
    action = STRATEGY_NAMES.index(strategy)
    return action if env.action_masks()[action] else env.wait_action


def run_episode(env_id: str, seed: int, policy: str) -> dict[str, float]:
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    while True:
        if policy == "random":
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        else:
            action = fcfs_action(env.unwrapped, policy.split("/", 1)[1])
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return info["episode_metrics"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0", help="a registered GeoPipe env id")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    policies = ["fcfs/bace-pipe", "fcfs/cr-ldf", "fcfs/cr-lcf", "fcfs/ldf", "fcfs/lcf", "random"]
    rows = {p: run_episode(args.env, args.seed, p) for p in policies}
    print(f"{args.env}, seed {args.seed}\n")
    print("| policy | " + " | ".join(SHOWN_METRICS) + " |")
    print("|---" * (len(SHOWN_METRICS) + 1) + "|")
    for p, m in rows.items():
        print(f"| {p} | " + " | ".join(f"{m[k]:.3g}" for k in SHOWN_METRICS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
