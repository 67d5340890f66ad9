"""Shared helpers for the test suite."""

import numpy as np


def masked_random_rollout(env, seed: int, policy_seed: int | None = None, record: bool = False, max_steps: int = 100_000):
    """Run one episode with uniformly random valid actions; return (steps, total reward, last info, trace)."""
    rng = np.random.default_rng(seed if policy_seed is None else policy_seed)
    obs, info = env.reset(seed=seed)
    trace = []
    total = 0.0
    for step in range(max_steps):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        if record:
            trace.append((obs, reward, info["action_mask"].copy()))
        if terminated or truncated:
            return step + 1, total, info, trace
    raise AssertionError("episode did not end")
