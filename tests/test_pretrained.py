"""The shipped agent in agents/pretrained/: it loads, evaluate.py picks it up, and it plays valid episodes."""

from pathlib import Path

import gymnasium as gym
import pytest

import agents
import geopipe_env  # noqa: F401
from agents import load_agent
from baselines.evaluation import default_policy_specs
from baselines.policy import play_episode

PRETRAINED = Path(agents.__file__).resolve().parent / "pretrained"
AGENT = PRETRAINED / "geopipe_v0_maskable_ppo.zip"


def test_shipped_agent_has_its_files_and_is_evaluated_by_default():
    """The model travels with its normalisation statistics, and evaluate.py includes it without arguments."""
    assert AGENT.is_file() and AGENT.with_name(AGENT.stem + "_vecnormalize.pkl").is_file()
    assert str(AGENT) in default_policy_specs()


@pytest.mark.parametrize("env_id", ["GeoPipe-v0", "GeoPipe-Paper-v0"])
def test_shipped_agent_plays_a_held_out_episode_validly(env_id):
    """On a held-out seed it finishes every job with only valid actions, also on a scenario it was not trained on."""
    env = gym.make(env_id)
    episode_return, info = play_episode(env, load_agent(AGENT), 1000)
    metrics = info["episode_metrics"]
    assert metrics["invalid_actions"] == 0
    assert metrics["jobs_completed"] == env.unwrapped.scenario.workload.num_jobs
    assert episode_return < 0.0
