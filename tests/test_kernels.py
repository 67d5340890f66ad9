"""The compiled kernels (``geopipe_env.physics.kernels``) equal their Python references."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401
from geopipe_env.physics import kernels
from geopipe_env.physics.energy import HourlyIntegral

REL = 1e-12


def test_cumulative_at_equals_hourly_integral():
    """∫ from 0 to t of hourly series, before, inside and past the series, equals HourlyIntegral.cumulative."""
    rng = np.random.default_rng(0)
    series = HourlyIntegral(rng.normal(size=(5, 30)))
    out = np.empty(5)
    for t_s in (-5.0, 0.0, 1.0, 3599.9, 3600.0, 7777.7, 29 * 3600.0, 31.5 * 3600.0, *rng.uniform(0, 40 * 3600, 20)):
        kernels.cumulative_at(series.prefix_h, series.values, t_s, out)
        assert np.array_equal(out, series.cumulative(t_s))


def _busy_sim(scenario: str, seed: int):
    """A simulator of ``scenario`` with jobs running and an hour tick due before the next arrival or completion."""
    env = gym.make("GeoPipe-v0", scenario=scenario).unwrapped
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    while True:
        launches = np.flatnonzero(info["action_mask"][:-1])
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(launches)) if launches.size else env.wait_action)
        assert not (terminated or truncated)
        sim = env.sim
        if sim.running and sim._tick_s + 3 * 3600.0 < sim._events.peek():
            return env, sim


@pytest.mark.parametrize("scenario, seed", [("geopipe-v0", 0), ("geopipe-v0", 3), ("geopipe-v0-randomized", 1)])
def test_advance_quiet_hours_equals_ticks_one_by_one(scenario, seed):
    """A run of hour ticks taken at once leaves the clock, the next tick, every job's progress and every
    accumulator as ``step_event`` tick by tick does."""
    env, sim = _busy_sim(scenario, seed)
    reference = copy.deepcopy(sim)
    limit = sim.now_s + 50 * 3600.0
    stop = min(reference._events.peek(), limit)
    ticks = 0
    while reference._tick_s < reference._events.peek() and reference._tick_s <= limit:
        reference.step_event()
        ticks += 1
    sim.advance_quiet_hours(limit)
    assert ticks >= 3 and sim._tick_s >= min(stop, sim._tick_s)
    assert sim.now_s == reference.now_s and sim._tick_s == reference._tick_s
    for jid, rj in sim.running.items():
        assert rj.remaining_iters == reference.running[jid].remaining_iters
    for name in ("energy_kwh", "cost_usd", "carbon_kg", "wan_bytes", "gpu_seconds", "job_seconds"):
        assert getattr(sim, name) == pytest.approx(getattr(reference, name), rel=REL), name
    # What follows is the same event, at the same time.
    assert sim.next_event_s() == reference.next_event_s()


def test_advance_quiet_hours_stops_at_the_limit():
    """No tick past ``limit_s`` is taken (the env passes the horizon)."""
    env, sim = _busy_sim("geopipe-v0", 0)
    limit = sim._tick_s + 1.5 * 3600.0
    sim.advance_quiet_hours(limit)
    assert sim.now_s <= limit < sim._tick_s
