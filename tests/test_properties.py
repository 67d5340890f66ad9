"""Property-based tests: random valid worlds × random (sometimes invalid) actions keep every invariant."""

import gymnasium as gym
import numpy as np
import pytest
from conftest import PROPERTY_TALLY
from hypothesis import given
from hypothesis import strategies as st
from stable_baselines3.common.vec_env import SubprocVecEnv

import geopipe_env  # noqa: F401
from geopipe_env.env import GeoPipeEnv
from geopipe_env.simulation.core_types import JobStatus
from geopipe_env.scenario.loader import ScenarioError, load_scenario
from benchmarks.synthetic import random_scenario_dict


@given(  # example count: the hypothesis profile (tests/conftest.py), 40 by default
    world_seed=st.integers(0, 2**32 - 1),
    num_regions=st.integers(1, 16),
    num_jobs=st.integers(1, 12),
    market_prices=st.booleans(),
    action_seed=st.integers(0, 2**32 - 1),
    invalid_rate=st.sampled_from([0.0, 0.2]),
    replicas=st.sampled_from([1, 1, 2, 4]),
    failing=st.booleans(),
    schedules=st.sampled_from([None, None, ("1f1b", "crosspipe-greedy"), ("interleaved-1f1b", "1f1b", "crosspipe-greedy"),
                               ("zbv", "zb-h1", "gpipe"), ("chimera", "hanayo", "1f1b")]),
)
def test_random_worlds_keep_invariants(world_seed, num_regions, num_jobs, market_prices, action_seed, invalid_rate, replicas,
                                       failing, schedules):
    """No exception; GPUs, link loads, clock, energy, cost, carbon, JCT bounds and the reward sum hold at every step.

    A world with ``replicas`` > 1 runs every job as that many data-parallel replicas with the same per-replica batch
    (or single-replica, when its regions cannot hold the replicas' stages). A ``failing`` world's GPUs fail often
    (once a GPU-day, repaired in two hours), its regions lose half their GPUs once a day for three hours and its
    links drop to a fifth twice a day for two hours, so that episodes interrupt jobs (GPUs under repair or away are
    counted apart) and links change their rates. A world with ``schedules`` has its jobs accept those pipeline
    schedules (two chunks per device where one takes virtual stages), timed by the schedule executor, where its
    regions hold them.
    """
    spec = random_scenario_dict(np.random.default_rng(world_seed), num_regions, num_jobs, market_prices=market_prices)
    if schedules is not None:
        accepting = {**spec["workload"], "pipeline_schedules": list(schedules)}
        if {"interleaved-1f1b", "hanayo"} & set(schedules):
            accepting["virtual_stages"] = 2
        try:
            load_scenario({**spec, "workload": accepting})
            spec["workload"] = accepting
        except ScenarioError:
            pass  # a schedule's memory does not fit these regions: the world keeps 1F1B
    if failing:
        spec["failures"] = {"per_gpu_day": 1.0, "repair_h": 2.0}
        spec["capacity_loss"] = {"per_region_day": 1.0, "fraction": 0.5, "duration_h": 3.0, "notice_s": 30.0}
        spec["network"]["degradation"] = {"per_link_day": 2.0, "factor": 0.2, "duration_h": 2.0}
    scenario = None
    if replicas > 1:
        workload = {k: v for k, v in spec["workload"].items() if k != "num_microbatches"}
        workload.update(data_parallel=replicas, global_batch_size=spec["workload"]["num_microbatches"] * replicas)
        try:
            scenario = load_scenario({**spec, "workload": workload})
        except ScenarioError:
            pass
    if scenario is None:
        scenario = load_scenario(spec)
    env = GeoPipeEnv(scenario)
    rng = np.random.default_rng(action_seed)
    obs, info = env.reset(seed=int(rng.integers(2**31)))
    assert env.observation_space.contains(obs)
    sim, world = env.sim, env.world
    # Rewards cover the episode from its first decision on; before it (the first job may find no candidate, or too
    # few GPUs in service in a failing world) time, cost and carbon accrue with no decision to reward, and an
    # episode may even end there.
    job_s0, cost0 = sim.job_seconds, sim.cost_usd
    if env.terminated or env.truncated:
        assert not info["action_mask"][: env.wait_action].any()
        return
    prices_non_negative = bool((world.price.values >= 0).all())
    total, last_t, last_energy = 0.0, 0.0, 0.0
    for steps in range(1, 501):
        if rng.random() < invalid_rate:
            action = int(rng.integers(-3, env.action_space.n + 3))  # may be masked or out of range
        else:
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert env.observation_space.contains(obs)
        assert info["action_mask"][env.wait_action] or terminated or truncated
        held = sum((rj.gpus for rj in sim.running.values()), np.zeros_like(sim.free_gpus))
        assert (sim.free_gpus >= 0).all() and (sim.repairing >= 0).all() and (sim.away >= 0).all()
        assert np.array_equal(world.num_gpus - sim.free_gpus - sim.repairing - sim.away, held)
        assert (sim.work_left >= 0).all()
        assert (sim.link_load_gbps <= sim.capacity_gbps * (1 + 1e-9) + 1e-12).all()
        assert sim.now_s >= last_t and sim.energy_kwh >= last_energy >= 0.0 and sim.carbon_kg >= 0.0
        assert sim.cost_usd >= 0.0 or not prices_non_negative
        last_t, last_energy = sim.now_s, sim.energy_kwh
        if terminated or truncated:
            break
    else:
        pytest.fail("episode did not end within 500 decisions")
    done = sim.status == JobStatus.DONE
    arrival = np.array([j.arrival_s for j in world.jobs])
    lower = np.array([j.lower_bound_s for j in world.jobs])
    assert (sim.start_s[done] >= arrival[done]).all()
    assert (sim.finish_s[done] - arrival[done] >= lower[done] * (1 - 1e-9)).all()
    expected = -((sim.job_seconds - job_s0) / env.t_ref_s + env.cost_weight * (sim.cost_usd - cost0) / env.c_ref_usd)
    expected -= env.invalid_action_penalty * env.invalid_actions
    assert total == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert (sim.work_left[done] == 0).all() or not failing
    PROPERTY_TALLY.update(worlds=1, steps=steps, invalid=env.invalid_actions, jobs_done=int(done.sum()),
                          interruptions=int(sim.interruptions.sum()))


def _first_valid(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def test_subprocess_episodes_equal_single_process():
    """The same seeds give the same episode metrics in SB3's SubprocVecEnv as in this process."""
    seeds = [21, 22]
    # "module:id" makes each worker import geopipe_env (and so register the ids) itself.
    venv = SubprocVecEnv([lambda: gym.make("geopipe_env:GeoPipe-v0") for _ in seeds])
    try:
        venv.seed(seeds[0])  # env i is seeded seeds[0] + i
        venv.reset()
        metrics = {}
        while len(metrics) < len(seeds):
            masks = venv.env_method("action_masks")
            _, _, dones, infos = venv.step(np.array([_first_valid(m) for m in masks]))
            for i, (d, inf) in enumerate(zip(dones, infos)):
                if d and i not in metrics:
                    metrics[i] = inf["episode_metrics"]
    finally:
        venv.close()
    for i, seed in enumerate(seeds):
        env = gym.make("GeoPipe-v0")
        obs, info = env.reset(seed=seed)
        while True:
            obs, r, term, trunc, info = env.step(_first_valid(info["action_mask"]))
            if term or trunc:
                break
        assert info["episode_metrics"] == metrics[i]
