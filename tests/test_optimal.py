"""The exact solver (geopipe_baselines.optimal): brute force on tiny worlds, exact replays, never below a scripted policy,
a valid bound, one-line refusals, and searches stopped by a time limit or Ctrl-C."""

from __future__ import annotations

import copy
import io
import math

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401 - registers the env ids
from geopipe_baselines import make_policy, policy_names
from geopipe_baselines import optimal
from geopipe_baselines.optimal import FutureBound, Search, WorldTooLarge, solve
from geopipe_baselines.policy import play_episode
from geopipe_env.scenario.loader import load_scenario

SMALL = "GeoPipe-Small-v0"
# Seeds of GeoPipe-Small-v0 with 4 or 5 jobs, each solved in about a second.
QUICK_SEEDS = (1002, 1003, 1004)


def tiny_world(hourly: bool, schedules: tuple[str, ...] = ()) -> object:
    """Two jobs on two regions (H100 and A100) joined by a 2 Gbit/s link: hourly market prices (GB, DE-LU) with a
    6-hour horizon, or constant prices and a third region. With ``schedules`` the pipelined Llama-2-13B job
    accepts those, and runs the fastest that fits each placement."""
    prices = ({"price_market": "GB"}, {"price_market": "DE-LU"}) if hourly else (
        {"price_usd_per_kwh": 0.12}, {"price_usd_per_kwh": 0.05})
    regions = [
        {"id": "a", "gpu": "H100", "num_gpus": 4, **prices[0]},
        {"id": "b", "gpu": "A100", "num_gpus": 4, **prices[1]},
    ]
    links = {"a": {"b": {"bandwidth_gbps": 2.0, "latency_ms": 10}}}
    if not hourly:
        regions.append({"id": "c", "gpu": "H100", "num_gpus": 2, "price_usd_per_kwh": 0.08})
        links["a"]["c"] = {"bandwidth_gbps": 1.0, "latency_ms": 30}
    return load_scenario({
        "name": "tiny", "horizon_h": 6 if hourly else 24, "start_utc": "random",
        "regions": regions,
        "network": {"rule": "matrix", "matrix": links, "intra_region": {"bandwidth_gbps": 400, "latency_ms": 0.05}},
        "workload": {
            "num_jobs": 2, "arrival": {"process": "poisson", "mean_interarrival_h": 0.5}, "datasets": ["wikitext-103"],
            "job_classes": [
                {"models": ["llama-2-13b"], "gpus_per_stage": 1, "pipeline_stages": 4, "data_parallel": 1,
                 "global_batch_size": 32, "micro_batch_size": 1, "seq_len": 4096,
                 **({"pipeline_schedules": list(schedules)} if schedules else {})},
                {"models": ["llama-3.1-8b"], "gpus_per_stage": 1, "pipeline_stages": 2, "data_parallel": 1,
                 "global_batch_size": 32, "micro_batch_size": 1, "seq_len": 4096},
            ],
        },
    })


def brute_force(env) -> float:
    """The best return over every sequence of valid actions from ``env``'s decision (every action, duplicates
    included; no bound, no merging)."""
    best = -math.inf
    actions = np.flatnonzero(env.action_masks()).tolist()
    for i, action in enumerate(actions):
        child = env if i == len(actions) - 1 else copy.deepcopy(env)
        _, reward, terminated, truncated, _ = child.step(action)
        best = max(best, reward if terminated or truncated else reward + brute_force(child))
    return best


@pytest.mark.parametrize(("hourly", "seed", "queue_slots", "schedules"), [
    (True, 0, 8, ()), (True, 2, 8, ()), (False, 1, 8, ()), (False, 3, 8, ()), (True, 4, 1, ()),
    (False, 5, 8, ("1f1b", "crosspipe-greedy")), (True, 6, 8, ("zb-h1", "1f1b")),
])
def test_solver_equals_brute_force(hourly, seed, queue_slots, schedules):
    """The optimum equals the best of every valid action sequence; with one queue slot the second job shows only
    once the first has left the queue; with several schedules a job's candidates may each run another one."""
    env = gym.make("GeoPipe-v0", scenario=tiny_world(hourly, schedules), queue_slots=queue_slots)
    env.reset(seed=seed)
    core = env.unwrapped
    expected = brute_force(copy.deepcopy(core))
    solution = solve(env, progress_every_s=None, seed_policies=())
    assert solution.proven
    assert solution.episode_return == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert solution.nodes > 1


@pytest.mark.parametrize("seed", QUICK_SEEDS)
def test_plan_replays_to_its_return_and_beats_no_scripted_policy(seed):
    env = gym.make(SMALL)
    env.reset(seed=seed)
    solution = solve(env, progress_every_s=None, seed_policies=())  # no scripted plan to start from
    assert solution.proven
    replay = gym.make(SMALL)  # a fresh env, with gymnasium's checking wrappers
    replay.reset(seed=seed)
    total, steps = 0.0, 0
    for action in solution.actions:
        _, reward, terminated, truncated, info = replay.step(action)
        total += float(reward)
        steps += 1
        if terminated or truncated:
            break
    assert steps == len(solution.actions) and terminated
    assert total == solution.episode_return  # the same arithmetic in the same order: exactly
    assert info["episode_metrics"] == solution.metrics
    for name in policy_names(include_aliases=False):
        policy = make_policy(name)
        scripted, _ = play_episode(gym.make(SMALL, **policy.env_kwargs), policy, seed)
        assert scripted <= solution.episode_return + 1e-9 * abs(scripted), name


def test_optimal_policy_plays_its_plan():
    policy = make_policy("optimal")
    env = gym.make(SMALL)
    total, info = play_episode(env, policy, QUICK_SEEDS[0])
    assert policy.stats["proven"] and total == policy.stats["return"]
    assert info["episode_metrics"]["jobs_completed"] == len(env.unwrapped.world.jobs)


def test_bound_is_never_below_what_the_episode_still_earns():
    """At every decision of masked-random episodes (waits included), the bound is at least the return earned from
    there to the end."""
    worst = -math.inf
    for env_id, scenario in ((SMALL, None), ("GeoPipe-v0", "small-4r"), ("GeoPipe-v0", "small-2r")):
        env = gym.make(env_id, **({"scenario": scenario} if scenario else {})).unwrapped
        for seed in range(4):
            rng = np.random.default_rng(seed)
            env.reset(seed=seed)
            bound = FutureBound(env)
            bounds, rewards = [], []
            wait_share = rng.uniform(0.0, 0.5)
            while True:
                bounds.append(bound.upper_bound(env))
                launches = np.flatnonzero(env.action_masks()[: env.wait_action])
                wait = launches.size == 0 or rng.random() < wait_share
                _, reward, terminated, truncated, _ = env.step(env.wait_action if wait else int(rng.choice(launches)))
                rewards.append(reward)
                if terminated or truncated:
                    break
            earned = np.cumsum(rewards[::-1])[::-1]
            worst = max(worst, float((earned - np.array(bounds)).max()))
    assert worst <= 1e-9


def test_large_worlds_are_refused_with_one_line():
    policy = make_policy("optimal")
    env = gym.make("GeoPipe-v0")
    with pytest.raises(WorldTooLarge) as refused:
        policy.reset(env)  # before a reset: the scenario's job count
    message = str(refused.value)
    assert "\n" not in message and "40 jobs" in message and "6 regions" in message
    env.reset(seed=0)
    with pytest.raises(WorldTooLarge):
        solve(env)
    mixture = gym.make("GeoPipe-v0", scenario=["small", "geopipe-v0"])  # refused for the large world it may draw
    with pytest.raises(WorldTooLarge, match="'geopipe-v0' has up to 40 jobs"):
        policy.reset(mixture)


def test_progress_lines_and_time_limit(monkeypatch):
    monkeypatch.setattr(optimal, "TICK_EVERY_NODES", 1)
    env = gym.make(SMALL)
    env.reset(seed=QUICK_SEEDS[0])
    stream = io.StringIO()
    solution = solve(env, time_limit_s=0.0, progress_every_s=0.0, stream=stream, label="seed 1002")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("optimal seed 1002: ") and "nodes" in lines[0] and "best return" in lines[0]
    assert "time limit of 0 s reached; the best plan so far is not proven optimal" in lines[-1]
    assert not solution.proven and solution.nodes == 1
    replay = gym.make(SMALL)
    replay.reset(seed=QUICK_SEEDS[0])
    total = 0.0
    for action in solution.actions:
        total += float(replay.step(action)[1])
    assert total == solution.episode_return


def test_ctrl_c_returns_the_best_plan_so_far(monkeypatch):
    calls = {"n": 0}

    def interrupted(self):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(optimal, "TICK_EVERY_NODES", 1)
    monkeypatch.setattr(Search, "_tick", interrupted)
    env = gym.make(SMALL)
    env.reset(seed=1001)  # 7 jobs: thousands of nodes
    stream = io.StringIO()
    solution = solve(env, stream=stream)
    assert not solution.proven and solution.nodes == 3
    assert solution.episode_return == solution.first_return  # the best scripted plan, which the search starts from
    assert "interrupted; the best plan so far is not proven optimal" in stream.getvalue()
    calls["n"] = 0
    with pytest.raises(KeyboardInterrupt):  # the policy lets Ctrl-C stop the evaluation it runs in
        solve(env, stream=io.StringIO(), stop_on_interrupt=False)


@pytest.mark.parametrize(("hourly", "seed"), [(True, 0), (False, 1), (True, 2)])
def test_known_jobs_solve_equals_brute_force_without_the_arrivals_to_come(hourly, seed):
    """``solve(known_jobs_only=True)`` is the optimum of the world without the jobs still to arrive (brute force
    over a copy that drops them): the bound leaves those jobs out. The env itself keeps its arrivals."""
    env = gym.make("GeoPipe-v0", scenario=tiny_world(hourly))
    env.reset(seed=seed)
    core = env.unwrapped
    known = copy.deepcopy(core)
    dropped = known.sim.drop_arrivals_to_come()
    assert dropped and known.sim.next_event_s() >= core.sim.next_event_s()
    expected = brute_force(copy.deepcopy(known))
    assert FutureBound(known, dropped).upper_bound(known) >= expected - 1e-9 * abs(expected)  # a bound of this world
    before = core.sim.next_event_s()
    solution = solve(env, progress_every_s=None, seed_policies=(), known_jobs_only=True)
    assert solution.proven
    assert solution.episode_return == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert core.sim.next_event_s() == before
    for _ in range(20):  # waiting, the env sees the dropped jobs arrive
        if dropped <= set(core.sim.waiting):
            break
        env.step(core.wait_action)
    assert dropped <= set(core.sim.waiting)


def test_known_jobs_optimal_plays_every_job_and_never_beats_the_optimum():
    """The policy re-solves at each decision without foreknowledge; it finishes every job of the episode (those
    that arrive later too) and earns no more than the optimum."""
    seed = QUICK_SEEDS[0]
    env = gym.make(SMALL)
    policy = make_policy("known-jobs-optimal")
    total, info = play_episode(env, policy, seed)
    assert info["episode_metrics"]["jobs_completed"] == len(env.unwrapped.world.jobs)
    assert policy.stats["decisions"] >= 2 and policy.stats["unproven"] == 0
    best = gym.make(SMALL)
    best.reset(seed=seed)
    assert total <= solve(best, progress_every_s=None).episode_return + 1e-9 * abs(total)
