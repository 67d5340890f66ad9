"""The compiled candidate table (``geopipe_env.decision.candidate_kernels``, in ``decision.backends.CompiledBackend``)
equals the Python one (``candidate_row`` in ``tests/reference.py``) at every decision: the same placements behind the same actions, and the same
figures to 1e-12."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401
from geopipe_env.decision.backends import CompiledBackend
from reference import PythonBackend, candidate_row, encode_rows
from geopipe_env.env import GeoPipeEnv
from geopipe_env.decision.placement import PlacementContext
from geopipe_env.scenario.loader import load_scenario
from benchmarks.synthetic import random_scenario_dict

REL = 1e-12


def assert_tables_agree(env) -> int:
    """Compare the env's compiled table with the Python table of the same state; the number of actions compared."""
    table = env._backend
    assert isinstance(table, CompiledBackend)
    ctx = PlacementContext(env.sim)
    visible = env.sim.waiting[: env.queue_slots]
    compared = 0
    for slot, jid in enumerate(visible):
        want_row = candidate_row(ctx, env.world.jobs[jid], env.strategies)
        for k, want in enumerate(want_row):
            got = table.info(slot, k)
            compared += 1
            assert (got is None) == (want is None), (slot, env.strategies[k])
            if want is None:
                continue
            assert got.placement == want.placement, (slot, env.strategies[k])
            # The env launches the table's candidates without checking them again (ClusterSim.launch, checked=True).
            assert env.sim.check_placement(env.world.jobs[jid], got.placement) is None
            assert got.stalled == want.stalled
            for field in ("iteration_s", "duration_s", "cost_usd", "carbon_kg", "rate_gbps", "demand_gbps"):
                assert getattr(got, field) == pytest.approx(getattr(want, field), rel=REL, abs=1e-300), field
    # The observation read from the arrays equals the one read from CandidateInfo rows.
    from_arrays = table.observe(env.sim.waiting)
    from_rows = encode_rows(env.encoder, env.sim, env.sim.waiting, table.rows())
    for key in from_arrays:
        assert np.array_equal(from_arrays[key], from_rows[key]), key
    return compared


def walk(env, seed: int, steps: int) -> int:
    """A masked-random run over ``steps`` decisions (episodes restart), comparing the tables at each."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    compared = 0
    for step in range(steps):
        compared += assert_tables_agree(env)
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if terminated or truncated:
            obs, info = env.reset(seed=seed + step + 1)
    return compared


@pytest.mark.parametrize(
    "env_id, kwargs, seed",
    [
        ("GeoPipe-v0", {}, 0),
        ("GeoPipe-v0", {"scenario": "geopipe-v0-randomized"}, 4),
        ("GeoPipe-v0", {"scenario": "a6000-vm-pair"}, 2),
        ("GeoPipe-Paper24-v0", {}, 1),
        ("GeoPipe-Toy-v0", {}, 0),
    ],
)
def test_compiled_table_equals_python_table(env_id, kwargs, seed):
    """On the shipped worlds, every decision of masked-random runs."""
    env = gym.make(env_id, **kwargs).unwrapped
    assert walk(env, seed, 120) > 500


@pytest.mark.parametrize("seed", range(6))
def test_compiled_table_equals_python_table_on_random_worlds(seed):
    """On random worlds (1-16 regions, mixed GPU types, sparse WAN, GPipe or 1F1B), with strategies reordered."""
    rng = np.random.default_rng(seed)
    spec = random_scenario_dict(rng, int(rng.integers(1, 17)), int(rng.integers(4, 40)), batch=True)
    spec["pipeline_schedule"] = "gpipe" if seed % 2 else "1f1b"
    scenario = load_scenario(spec)
    strategies = ("greenest", "ldf", "bace-pipe", "cheapest", "cr-ldf", "lcf", "fastest", "cr-lcf")
    env = GeoPipeEnv(scenario, strategies=strategies)
    walk(env, seed, 60)


def test_registered_strategies_give_placements_that_the_compiled_table_describes():
    """A registered strategy has no compiled code: its Python rule gives its column's placements, which the compiled
    table describes; the others (BACE-Pipe's ablations included) stay compiled, and the whole table equals the
    Python one."""
    from reference_placement import single_region
    from geopipe_env.decision.strategies import register_strategy, strategy_names

    if "test-most-free-region" not in strategy_names():
        register_strategy("test-most-free-region", lambda ctx, job: single_region(ctx, job, lambda r: -ctx.free_list(job)[r]))
    strategies = ("bace-pipe", "bace-pipe-no-costmin", "test-most-free-region", "fastest", "bace-pipe-no-pathfinder")
    env = gym.make("GeoPipe-v0", strategies=strategies).unwrapped
    assert isinstance(env._backend, CompiledBackend)
    assert [k for k, _ in env._backend.python_columns] == [2]
    assert walk(env, 7, 80) > 200


@pytest.mark.parametrize("scenario", ["geopipe-v0", "paper-24", "a6000-vm-pair"])
def test_the_ablations_compiled_twins_equal_their_rules(scenario):
    """BACE-Pipe's two ablations run compiled: their placements and figures equal their Python rules at every
    decision, alone and beside the pooled strategies and selectors."""
    strategies = ("bace-pipe-no-pathfinder", "cheapest", "bace-pipe-no-costmin", "bace-pipe", "ldf")
    env = GeoPipeEnv(scenario, strategies=strategies)
    assert env._backend.python_columns == []
    assert walk(env, 11, 120) > 300


BACKGROUND = {"extends": "geopipe-v0", "network": {"background": {"mean_fraction": 0.3, "amplitude_fraction": 0.2}}}
DEGRADED = {"extends": "geopipe-v0-faults",
            "network": {"degradation": {"per_link_day": 2.0, "factor": 0.3, "duration_h": 3.0}}}


@pytest.mark.parametrize(("scenario", "timing"), [
    ("geopipe-v0", "exact"), ("a6000-vm-pair", "exact"), ("paper", "exact"), (BACKGROUND, "analytic"),
    (DEGRADED, "analytic"),
])
def test_compiled_table_equals_python_table_with_exact_timing_and_changing_line_rates(scenario, timing):
    """With exact timing (every layout timed in Python through the memo) and in worlds whose line rates change
    (background traffic, degraded links: the env's own layout table, emptied when they change), the compiled table
    still equals the Python one at every decision."""
    scenario = scenario if isinstance(scenario, str) else load_scenario(scenario)
    env = GeoPipeEnv(scenario, timing=timing)
    assert walk(env, 3, 80) > 200


@pytest.mark.parametrize(("scenario", "timing"), [(BACKGROUND, "analytic"), (DEGRADED, "analytic"),
                                                  ("paper", "exact")])
def test_both_backends_play_the_same_episodes(monkeypatch, scenario, timing):
    """An env on the Python backend (the specification) and one on the compiled backend, sent the same actions,
    give equal observations, masks and rewards at every step, episodes restarting."""
    import geopipe_env.env as env_module

    scenario = load_scenario(scenario) if isinstance(scenario, dict) else scenario
    envs = []
    for backend in (lambda strategies, slots: PythonBackend(strategies), CompiledBackend):
        monkeypatch.setattr(env_module, "make_backend", backend)
        envs.append(GeoPipeEnv(scenario, timing=timing))
    assert isinstance(envs[0]._backend, PythonBackend) and isinstance(envs[1]._backend, CompiledBackend)
    rng = np.random.default_rng(0)
    steps = [env.reset(seed=0) for env in envs]
    for step in range(150):
        (obs_a, info_a), (obs_b, info_b) = steps
        assert all(np.array_equal(obs_a[key], obs_b[key]) for key in obs_a), step
        assert np.array_equal(info_a["action_mask"], info_b["action_mask"]), step
        action = int(rng.choice(np.flatnonzero(info_a["action_mask"])))
        steps, rewards = [], []
        for env in envs:
            obs, reward, terminated, truncated, info = env.step(action)
            rewards.append(reward)
            steps.append(env.reset(seed=step) if terminated or truncated else (obs, info))
        assert rewards[0] == rewards[1], step