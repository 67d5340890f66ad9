"""The shipped agents in agents/pretrained/: they load, geopipe-evaluate picks the GeoPipe-v0 one up, and they play
valid episodes."""

from pathlib import Path

import gymnasium as gym
import pytest

import geopipe_agents
import geopipe_env  # noqa: F401
from geopipe_agents import load_agent, load_pretrained, pretrained_path
from geopipe_evaluation.specs import default_policy_specs
from geopipe_baselines.policy import play_episode

PRETRAINED = Path(geopipe_agents.__file__).resolve().parent / "pretrained"
AGENT = PRETRAINED / "geopipe_v0_maskable_ppo.zip"


def test_shipped_agent_has_its_files_and_is_evaluated_by_default():
    """The model travels with its normalisation statistics, and geopipe-evaluate includes it without arguments."""
    assert AGENT.is_file() and AGENT.with_name(AGENT.stem + "_vecnormalize.pkl").is_file()
    assert pretrained_path() == AGENT
    specs, notes = default_policy_specs()
    assert specs[-1] == str(AGENT) and not notes


def test_load_pretrained_finds_the_agent_through_the_package(tmp_path, monkeypatch):
    """load_pretrained() needs no path and does not depend on the working folder."""
    monkeypatch.chdir(tmp_path)
    agent = load_pretrained(env=gym.make("GeoPipe-v0"))
    assert agent.name == AGENT.stem and agent.obs_normalizer is not None


def test_an_agent_prints_what_it_is():
    """An agent's repr names it, its algorithm and network, its training timesteps and how it acts."""
    text = repr(load_pretrained())
    assert text == (
        "AgentPolicy(name='geopipe_v0_maskable_ppo', model=MaskablePPO(CandidateScoringPolicy, 200,000 timesteps), "
        "obs_normalizer=VecNormalize, deterministic=True)"
    )
    assert "deterministic=False" in repr(load_agent(AGENT, deterministic=False))


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


SMALL_AGENT = PRETRAINED / "small_maskable_ppo.zip"


@pytest.mark.parametrize("seed", [1002, 1003, 1004])
def test_small_suite_agent_plays_validly_and_never_above_the_optimum(seed):
    """The agent trained on GeoPipe-Small-v0 ships with its normalisation statistics, finishes held-out episodes
    with valid actions only, and earns no more than the exact optimum of the same episode."""
    from geopipe_baselines.optimal import solve

    assert SMALL_AGENT.with_name(SMALL_AGENT.stem + "_vecnormalize.pkl").is_file()
    env = gym.make("GeoPipe-Small-v0")
    episode_return, info = play_episode(env, load_agent(SMALL_AGENT), seed)
    assert info["episode_metrics"]["invalid_actions"] == 0
    assert info["episode_metrics"]["jobs_completed"] == len(env.unwrapped.world.jobs)
    env.reset(seed=seed)
    optimum = solve(env, progress_every_s=None)
    assert optimum.proven and episode_return <= optimum.episode_return + 1e-9 * abs(optimum.episode_return)
