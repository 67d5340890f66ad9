"""The rollout reference policy: env copies continue exactly, the policy never falls below its base policy, it
leaves the env it plays untouched, and it is out of the default policy lists."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401
from geopipe_baselines import SLOW_REFERENCES, Policy, make_policy, policy_names
from geopipe_evaluation.specs import default_policy_specs
from geopipe_baselines.policy import play_episode
from geopipe_baselines.rollout import RolloutPolicy

TOY = "GeoPipe-Toy-v0"
FLAGSHIP = "GeoPipe-v0"
ABUNDANT = "geopipe-abundant"  # a world of the flagship's size where each lookahead is quick


def _make(env_id: str, **kwargs) -> gym.Env:
    """A registered env, or a bundled scenario under GeoPipe-v0."""
    if env_id in gym.registry:
        return gym.make(env_id, **kwargs)
    return gym.make(FLAGSHIP, scenario=env_id, **kwargs)


def _continue(env, actions_seed: int) -> tuple[list[float], list, list, dict]:
    """Play ``env`` to the end with masked-random actions from ``actions_seed``: (rewards, observations, masks,
    episode metrics)."""
    rng = np.random.default_rng(actions_seed)
    mask = env.action_masks()
    rewards, observations, masks = [], [], []
    while True:
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        mask = info["action_mask"]
        rewards.append(reward)
        observations.append(obs)
        masks.append(mask)
        if terminated or truncated:
            return rewards, observations, masks, info["episode_metrics"]


def _same_continuation(a, b) -> None:
    rewards_a, obs_a, masks_a, metrics_a = a
    rewards_b, obs_b, masks_b, metrics_b = b
    assert rewards_a == rewards_b
    assert all(np.array_equal(x, y) for x, y in zip(masks_a, masks_b)) and len(masks_a) == len(masks_b)
    assert all(np.array_equal(x[key], y[key]) for x, y in zip(obs_a, obs_b) for key in x)
    assert metrics_a == metrics_b or all(  # NaN metrics compare unequal to themselves
        metrics_a[k] == metrics_b[k] or (np.isnan(metrics_a[k]) and np.isnan(metrics_b[k])) for k in metrics_a
    )


@pytest.mark.parametrize("clone", ["deepcopy", "pickle"])
@pytest.mark.parametrize("env_id, kwargs", [(TOY, {}), (FLAGSHIP, {}), (FLAGSHIP, {"timing": "exact"})])
def test_a_copy_mid_episode_continues_exactly_as_the_env(env_id, kwargs, clone):
    """A copy of the env taken mid-episode gives the same rewards, observations, masks and metrics as the env
    itself for the same actions, and making it leaves the env's RNG where it was."""
    env = gym.make(env_id, **kwargs).unwrapped
    env.reset(seed=1000)
    policy = make_policy("bace-pipe")
    policy.reset(env)
    info = {"action_mask": env.action_masks()}
    for _ in range(1 if env_id == TOY else 5):  # the toy episode has 3 decisions
        obs, _, terminated, truncated, info = env.step(policy.act(None, info))
        assert not (terminated or truncated)
    rng_state = env.np_random.bit_generator.state
    twin = copy.deepcopy(env) if clone == "deepcopy" else pickle.loads(pickle.dumps(env))
    assert env.np_random.bit_generator.state == rng_state and twin.np_random is not env.np_random
    assert twin.sim is not env.sim and twin.world is not env.world
    _same_continuation(_continue(twin, 7), _continue(env, 7))


def test_copies_share_no_state_with_the_env():
    """Stepping a copy to the end leaves the env's state, down to its pickled bytes, unchanged."""
    env = gym.make(FLAGSHIP).unwrapped
    env.reset(seed=1001)
    before = pickle.dumps(env)
    _continue(copy.deepcopy(env), 3)
    _continue(pickle.loads(before), 4)
    assert pickle.dumps(env) == before


@pytest.mark.parametrize("name, base", [("rollout", "bace-pipe"), ("rollout-sjf", "sjf")])
def test_rollout_satisfies_the_protocol_and_is_named_by_its_base(name, base):
    policy = make_policy(name)
    assert isinstance(policy, Policy) and isinstance(policy, RolloutPolicy)
    assert policy.name == name and policy.base_name == base
    assert policy.env_kwargs == make_policy(base).env_kwargs


def test_rollout_is_out_of_the_default_policy_lists():
    """make_policy knows the slow references (the rollouts and the exact optimum, with and without foreknowledge of
    arrivals), but the default lists (evaluate.py's default, ...) leave them out."""
    assert set(SLOW_REFERENCES) == {"rollout", "rollout-sjf", "optimal", "known-jobs-optimal"}
    assert not set(SLOW_REFERENCES) & (set(policy_names()) | set(policy_names(include_aliases=False)))
    assert set(SLOW_REFERENCES) <= set(policy_names(include_slow=True))
    assert not set(SLOW_REFERENCES) & set(default_policy_specs()[0])


@pytest.mark.parametrize("bad", [-1, 1.5, True, "4"])
def test_bad_candidate_limit_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="max_candidates"):
        RolloutPolicy(max_candidates=bad)


def test_a_rollout_base_is_refused():
    with pytest.raises(ValueError, match="base"):
        RolloutPolicy(base="rollout")


@pytest.mark.parametrize("base", ["bace-pipe", "sjf"])
@pytest.mark.parametrize("env_id, seeds", [(TOY, range(1000, 1003)), (ABUNDANT, [1000])])
def test_rollout_never_returns_less_than_its_base_policy(env_id, seeds, base):
    """The base action is a candidate and wins ties, so the rollout's return is at least the base policy's on every
    seed (up to float rounding of the sums), with only valid actions. On the toy (the same world on every seed) it
    beats BACE-Pipe by placing the second job across both regions, and finds nothing better than SJF."""
    gains = []
    for seed in seeds:
        base_policy = make_policy(base)
        base_return, _ = play_episode(_make(env_id, **base_policy.env_kwargs), base_policy, seed)
        rollout = RolloutPolicy(base)
        rollout_return, info = play_episode(_make(env_id, **rollout.env_kwargs), rollout, seed)
        assert rollout_return >= base_return - 1e-9 * abs(base_return), (seed, rollout_return, base_return)
        assert info["episode_metrics"]["invalid_actions"] == 0
        assert rollout.stats["decisions"] > 0 and rollout.stats["rollouts"] >= rollout.stats["decisions"]
        gains.append(rollout_return - base_return)
    if env_id == TOY:
        assert min(gains) > 0 if base == "bace-pipe" else max(gains) == 0, gains


def _record(policy, env_id: str, seed: int) -> tuple[list[int], list[float]]:
    env = _make(env_id, **policy.env_kwargs)
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    actions, rewards = [], []
    while True:
        rng_state = env.unwrapped.np_random.bit_generator.state
        clock = env.unwrapped.sim.now_s
        actions.append(policy.act(obs, info))
        assert env.unwrapped.np_random.bit_generator.state == rng_state and env.unwrapped.sim.now_s == clock
        obs, reward, terminated, truncated, info = env.step(actions[-1])
        rewards.append(reward)
        if terminated or truncated:
            return actions, rewards


@pytest.mark.parametrize("env_id, seed", [(TOY, 1003), (ABUNDANT, 1001)])
def test_rollout_is_deterministic_and_leaves_the_env_it_plays_alone(env_id, seed):
    """The same seed gives the same actions; deciding neither draws from the env's RNG nor moves its clock, and
    replaying the chosen actions on a fresh env gives the same rewards as the episode the policy played."""
    actions, rewards = _record(make_policy("rollout"), env_id, seed)
    assert _record(make_policy("rollout"), env_id, seed) == (actions, rewards)
    fresh = _make(env_id, **make_policy("rollout").env_kwargs)
    fresh.reset(seed=seed)
    assert [fresh.step(a)[1] for a in actions] == rewards


def test_candidates_hold_the_base_action_wait_and_at_most_the_limit():
    """With a limit, the launches tried are the base action, wait and the best-scored launch of each of the first
    queued jobs; without one, every distinct valid launch."""
    env = gym.make(FLAGSHIP).unwrapped
    obs, info = env.reset(seed=1002)
    limited, every = RolloutPolicy(max_candidates=1), RolloutPolicy(max_candidates=None)
    for policy in (limited, every):
        policy.reset(env)
    checked = 0
    while True:
        mask = info["action_mask"]
        base_action = limited.base.act(obs, info)
        full = every.candidates(mask, base_action)
        few = limited.candidates(mask, base_action)
        assert {base_action, env.wait_action} <= set(few) <= set(full) and len(few) <= 3
        assert all(mask[a] for a in full) and full == sorted(full)
        placements = {(a // env.num_strategies, env.candidate(a // env.num_strategies, a % env.num_strategies).placement)
                      for a in full if a != env.wait_action}
        assert len(placements) == len(full) - 1  # one action per distinct launch
        if len(full) > 3:
            ranked = limited.ranked([a for a in full if a not in (base_action, env.wait_action)])
            assert set(few) == {base_action, env.wait_action, ranked[0]}
            checked += 1
        obs, _, terminated, truncated, info = env.step(base_action)
        if terminated or truncated:
            break
    assert checked > 0
