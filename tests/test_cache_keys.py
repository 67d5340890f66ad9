"""The process's caches are keyed by declared fields (``core_types.JOB_PROFILE_FIELDS``, ``WORLD_TIMING_FIELDS``,
``WORLD_POWER_FIELDS``): every field is declared one way or the other, and a field left out of a key changes no
timing, power or demand, so no cache can serve a stale value."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import geopipe_env  # noqa: F401
from geopipe_env.base import caches
from geopipe_env.simulation import core_types, generator
from geopipe_env.simulation.core_types import (
    JOB_OTHER_FIELDS, JOB_PROFILE_FIELDS, WORLD_POWER_FIELDS, WORLD_TIMING_FIELDS, Job, World, layout_key, timing_key,
)
from geopipe_env.simulation.generator import sample_world
from geopipe_env.simulation.layout_table import LayoutTable
from geopipe_env.scenario.loader import load_builtin
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import Placement


def _perturbed(value):
    """A different value of the same kind."""
    if isinstance(value, np.ndarray):
        return ~value if value.dtype == bool else value * 1.37 + 1.0
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, np.integer)):
        return value + 1
    if isinstance(value, float):
        return value * 1.37 + 1.0
    if isinstance(value, str):
        return value + "-other"
    if isinstance(value, tuple):
        return value + ("other",)
    if value is None:  # World.failures of a world where nothing fails: one failure, after the horizon
        return generator.GpuFailures(np.array([1e12]), np.zeros(1, dtype=np.int64), np.zeros(1), np.zeros(1))
    raise TypeError(type(value))


def _world_and_placements() -> tuple[World, list[tuple[Job, Placement]]]:
    """GeoPipe-v0's world and, per job profile, a single-region and a cross-region placement."""
    world = sample_world(load_builtin("geopipe-v0"), np.random.default_rng(1))
    cases, seen = [], set()
    for job in world.jobs:
        if job.profile_key in seen:
            continue
        seen.add(job.profile_key)
        home = int(np.flatnonzero(job.fits)[0])
        other = next(r for r in range(world.num_regions) if r != home and job.fits[r] and world.bandwidth_gbps[home, r] > 0)
        first = max(job.num_stages // 2, 1)
        cases.append((job, Placement((home,), (job.num_stages,))))
        if job.num_stages > 1:
            cases.append((job, Placement((home, other), (first, job.num_stages - first))))
    return world, cases


def _timing(world: World, job: Job, placement: Placement) -> tuple:
    """Everything the simulator and the layout table derive for ``job`` on ``placement``, from empty caches."""
    caches.clear_all()
    sim = ClusterSim(world)
    layout = sim.layout(job, placement)
    rates = (layout.demand_gbps, 0.5 * layout.demand_gbps, 0.1 * layout.demand_gbps)
    timed = [(t, p.tobytes()) for t, p in (layout.timing.at(r) for r in rates)]
    table = LayoutTable()
    lay = table.add(sim, job, np.array(placement.regions), np.array(placement.stages))
    row = (table.layout_f[lay].tobytes(), table.arrays[:table._arrays_used].tobytes())
    return layout.demand_gbps, tuple(timed), row, sim.local_iteration_s_of(job, placement)


def test_every_job_field_is_declared_once():
    """A job's fields are each either part of its profile key or declared outside it."""
    fields = [f.name for f in dataclasses.fields(Job) if f.init]
    assert sorted(fields) == sorted(JOB_PROFILE_FIELDS + JOB_OTHER_FIELDS)
    assert not set(JOB_PROFILE_FIELDS) & set(JOB_OTHER_FIELDS)


@pytest.mark.parametrize("name", JOB_OTHER_FIELDS)
def test_a_job_field_outside_the_profile_key_changes_no_timing(name):
    """Perturbing a field the profile key leaves out keeps the key and every timing, power and demand."""
    world, cases = _world_and_placements()
    for job, placement in cases:
        other = dataclasses.replace(job, **{name: _perturbed(getattr(job, name))})
        assert other.profile_key == job.profile_key
        assert _timing(world, other, placement) == _timing(world, job, placement), (name, placement)


@pytest.mark.parametrize("name", JOB_PROFILE_FIELDS)
def test_every_profile_field_moves_the_key(name):
    """The key holds each declared field: changing one gives another key."""
    world, cases = _world_and_placements()
    job = cases[0][0]
    assert dataclasses.replace(job, **{name: _perturbed(getattr(job, name))}).profile_key != job.profile_key


def _world_fields() -> list[str]:
    return [f.name for f in dataclasses.fields(World)]


@pytest.mark.parametrize("name", [f for f in [f.name for f in dataclasses.fields(World)]
                                  if f not in WORLD_TIMING_FIELDS + ("scenario", "jobs", "price", "carbon")])
def test_a_world_field_outside_the_timing_key_changes_no_timing(name):
    """Perturbing a world field that timing_key leaves out keeps the key and every layout's timing and demand (and,
    outside layout_key, its power)."""
    world, cases = _world_and_placements()
    other = dataclasses.replace(world, **{name: _perturbed(getattr(world, name))})
    assert timing_key(other) == timing_key(world)
    for job, placement in cases:
        want, got = _timing(world, job, placement), _timing(other, job, placement)
        assert got[0] == want[0] and got[2:] == want[2:], (name, placement)  # demand, layout row, local time
        assert [t for t, _ in got[1]] == [t for t, _ in want[1]], (name, placement)  # iteration times
        if name not in WORLD_POWER_FIELDS:
            assert got[1] == want[1], (name, placement)  # with the power per region
    if name not in WORLD_POWER_FIELDS:
        assert layout_key(other) == layout_key(world)


def test_the_world_keys_hold_their_declared_fields():
    """Changing a declared field (a line rate, a latency, a power figure) moves the key it belongs to."""
    world, _ = _world_and_placements()
    for name in ("bandwidth_gbps", "latency_s"):
        other = dataclasses.replace(world, **{name: _perturbed(getattr(world, name))})
        assert timing_key(other) != timing_key(world) and layout_key(other) != layout_key(world)
    for name in WORLD_POWER_FIELDS:
        other = dataclasses.replace(world, **{name: _perturbed(getattr(world, name))})
        assert timing_key(other) == timing_key(world) and layout_key(other) != layout_key(world)
    assert core_types.fields_key(world, ("scenario.network.intra_latency_s",)) == (world.scenario.network.intra_latency_s,)
