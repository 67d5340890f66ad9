"""A short demo: one GeoPipe episode per scripted policy, with the episode metrics side by side.

Run ``python -m geopipe_env.demo [--env GeoPipe-v0] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import sys

import gymnasium as gym
import geopipe_env  # noqa: F401  (registers the env ids)

SHOWN_METRICS = ("avg_jct_h", "p95_jct_h", "avg_wait_h", "total_cost_usd", "energy_kwh", "carbon_kg", "gpu_utilization", "stalled_job_fraction", "jobs_completed")


def run_episode(env_id: str, seed: int, policy_name: str) -> dict[str, float]:
    """One episode of ``policy_name`` on ``env_id``; its episode metrics."""
    from baselines import make_policy

    policy = make_policy(policy_name)
    env = gym.make(env_id, **policy.env_kwargs)
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    while True:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            return info["episode_metrics"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0", help="a registered GeoPipe env id")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    policies = ["cr-ldf", "cr-lcf", "ldf", "lcf", "fcfs-random"]
    rows = {p: run_episode(args.env, args.seed, p) for p in policies}
    print(f"{args.env}, seed {args.seed}\n")
    print("| policy | " + " | ".join(SHOWN_METRICS) + " |")
    print("|---" * (len(SHOWN_METRICS) + 1) + "|")
    for p, m in rows.items():
        print(f"| {p} | " + " | ".join(f"{m[k]:.3g}" for k in SHOWN_METRICS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
