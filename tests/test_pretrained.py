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


def test_shipped_agent_finishes_a_held_out_geopipe_v0_episode():
    """On a held-out seed of the env it was made for, it finishes every job with only valid actions."""
    env = gym.make("GeoPipe-v0")
    episode_return, info = play_episode(env, load_agent(AGENT), 1000)
    metrics = info["episode_metrics"]
    assert metrics["invalid_actions"] == 0
    assert metrics["jobs_completed"] == env.unwrapped.scenario.workload.num_jobs
    assert episode_return < 0.0


def test_shipped_agent_acts_validly_on_a_scenario_it_was_not_trained_on():
    """On GeoPipe-Paper-v0 (other GPUs, links and job sizes) its actions stay valid; the README reports that it
    leaves some jobs waiting there."""
    _, info = play_episode(gym.make("GeoPipe-Paper-v0"), load_agent(AGENT), 1000)
    assert info["episode_metrics"]["invalid_actions"] == 0
