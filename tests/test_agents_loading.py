"""Loading saved SB3 models as policies."""

import gymnasium as gym
import numpy as np
import pytest
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

import geopipe_env  # noqa: F401
from geopipe_agents import ObservationSpaceMismatch, load_agent
from geopipe_agents.loading import VECNORMALIZE_SUFFIX, check_spaces


def _episode(env, agent, seed=0):
    obs, info = env.reset(seed=seed)
    agent.reset(env)
    while True:
        action = agent.act(obs, info)
        assert info["action_mask"][action]
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return info["episode_metrics"]


@pytest.mark.parametrize("algo", [MaskablePPO, PPO])
def test_saved_model_with_stats_loads_and_acts_validly(tmp_path, algo):
    """A saved (untrained) model plus VecNormalize stats loads and finishes a toy episode with valid actions."""
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("GeoPipe-Toy-v0")]), norm_reward=False)
    model = algo("MultiInputPolicy", venv, n_steps=16, batch_size=16, seed=0)
    model.save(tmp_path / "agent.zip")
    venv.save(str(tmp_path / ("agent" + VECNORMALIZE_SUFFIX)))
    agent = load_agent(tmp_path / "agent.zip")
    assert agent.obs_normalizer is not None
    metrics = _episode(gym.make("GeoPipe-Toy-v0"), agent)
    assert metrics["invalid_actions"] == 0
    if algo is MaskablePPO:  # plain PPO's masked picks become waits, so it may stop at the horizon
        assert metrics["jobs_completed"] == 3


def test_model_for_another_observation_space_is_refused(tmp_path):
    """Loading a model into an env with a different observation space fails with a clear message."""
    model = MaskablePPO("MultiInputPolicy", gym.make("GeoPipe-Toy-v0"), n_steps=16, batch_size=16)
    model.save(tmp_path / "small.zip")
    other = gym.make("GeoPipe-Toy-v0", max_regions=8)
    with pytest.raises(ObservationSpaceMismatch, match="max_regions"):
        load_agent(tmp_path / "small.zip", env=other)


def test_model_for_another_observation_layout_is_refused(tmp_path):
    """A model whose observation has another layout (here a global table of one feature fewer, as in an older
    GeoPipe release) gets a clear error naming the key and saying no env argument can fix it."""
    env = gym.make("GeoPipe-Toy-v0")
    spaces_ = dict(env.observation_space.spaces)
    spaces_["global"] = gym.spaces.Box(-100.0, 100.0, shape=(spaces_["global"].shape[0] - 1,), dtype=np.float32)
    old = gym.spaces.Dict(spaces_)
    with pytest.raises(ObservationSpaceMismatch, match="differs in global, which no env argument sets"):
        check_spaces(old, env.observation_space, "agent 'old'")


def test_a_scoring_model_of_another_observation_version_is_refused(tmp_path, monkeypatch):
    """A CandidateScoringPolicy saved when a table had another column count builds, on loading, layers that do not
    fit its weights: one ObservationSpaceMismatch saying so, not torch's state-dict error."""
    from geopipe_agents import policies

    model = MaskablePPO(policies.CandidateScoringPolicy, gym.make("GeoPipe-Toy-v0"), n_steps=16, batch_size=16)
    model.save(tmp_path / "scorer.zip")
    monkeypatch.setattr(policies, "ROW_WIDTH", policies.ROW_WIDTH + 1)  # this "version" has one more column
    with pytest.raises(ObservationSpaceMismatch, match="another version of GeoPipe's observation.*retrain"):
        load_agent(tmp_path / "scorer.zip")


def test_missing_or_corrupt_file_is_a_clear_error(tmp_path):
    """A missing path or a file that is not an SB3 zip gives FileNotFoundError / ValueError."""
    with pytest.raises(FileNotFoundError):
        load_agent(tmp_path / "nope.zip")
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a Stable-Baselines3 model"):
        load_agent(bad)
