"""Speed work must not change the physics: episode metrics equal values recorded before any optimisation.

``tests/data/golden_metrics_pre_optimisation.json`` was produced at commit 8c6dbd4 (before the timing, layout and
model-profile caches) by running each policy below for seeds 1 and 2 and recording the return and metrics.
"""

import json
from pathlib import Path

import gymnasium as gym
import pytest

import geopipe_env  # noqa: F401
from baselines import make_policy

GOLDEN = json.loads((Path(__file__).parent / "data" / "golden_metrics_pre_optimisation.json").read_text())


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_metrics_match_pre_optimisation_values(case):
    """Return, JCT, cost, energy, carbon, WAN traffic and makespan equal the recorded values to 1e-9."""
    env_id, name, seed = case.split("|")
    policy = make_policy(name)
    env = gym.make(env_id, **policy.env_kwargs)
    obs, info = env.reset(seed=int(seed))
    policy.reset(env)
    total = 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        total += reward
        if terminated or truncated:
            break
    got = {"return": total, **info["episode_metrics"]}
    for key, value in GOLDEN[case].items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
