"""The compiled candidate table (``geopipe_env.decision.candidate_kernels``, in ``decision.CompiledBackend``) equals the Python
one (``strategies.candidate_row``) at every decision: the same placements behind the same actions, and the same
figures to 1e-12."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401
from geopipe_env.decision.backends import CompiledBackend, PythonBackend
from geopipe_env.env import GeoPipeEnv
from geopipe_env.decision.placement import PlacementContext
from geopipe_env.scenario.loader import load_scenario
from geopipe_env.decision.strategies import candidate_row
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
    from_rows = env.encoder.encode_rows(env.sim, env.sim.waiting, table.rows())
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


def test_strategies_without_a_compiled_twin_run_beside_the_compiled_table():
    """The ablations have no compiled twin: their columns run their Python rules, the others stay compiled, and the
    whole table equals the Python one."""
    strategies = ("bace-pipe", "bace-pipe-no-costmin", "fastest", "bace-pipe-no-pathfinder")
    env = gym.make("GeoPipe-v0", strategies=strategies).unwrapped
    assert isinstance(env._backend, CompiledBackend)
    assert [k for k, _ in env._backend.python_columns] == [1, 3]
    assert walk(env, 7, 80) > 200


@pytest.mark.parametrize("kwargs", [{"timing": "exact"}, {"scenario": "a6000-vm-pair", "timing": "exact"}])
def test_exact_timing_uses_the_python_backend(kwargs):
    """The compiled table times layouts by the analytic model, so exact timing runs the Python backend."""
    env = gym.make("GeoPipe-v0", **kwargs).unwrapped
    assert isinstance(env._backend, PythonBackend)
