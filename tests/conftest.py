"""Shared helpers for the test suite."""

import importlib.util
from pathlib import Path

import numpy as np


def load_script(name: str):
    """A top-level CLI script (``evaluate.py``, ``train.py``) as a module: scripts are not installed packages."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
