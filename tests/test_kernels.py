"""The compiled kernels equal their specification in ``tests/reference.py`` (or numpy's own operations)."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401
import reference

from geopipe_env.simulation import sim_kernels
from geopipe_env.base import tables
from geopipe_env.base.compiled import pairwise_sum
from geopipe_env.simulation.generator import sample_world
from geopipe_env.simulation.layout_table import EMPTY_SLOT, LayoutTable, find_layout, index_layout, layout_key
from geopipe_env.scenario.loader import load_builtin
from geopipe_env.physics import energy, network, pipeline
from geopipe_env.physics.energy import HourlyIntegral, energy_kwh
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import Placement

REL = 1e-12


def test_cumulative_at_equals_the_reference():
    """∫ from 0 to t of hourly series, before, inside and past the series, equals reference.cumulative."""
    rng = np.random.default_rng(0)
    series = HourlyIntegral(rng.normal(size=(5, 30)))
    out = np.empty(5)
    for t_s in (-5.0, 0.0, 1.0, 3599.9, 3600.0, 7777.7, 29 * 3600.0, 31.5 * 3600.0, *rng.uniform(0, 40 * 3600, 20)):
        energy.cumulative_at(series.prefix_h, series.values, t_s, out)
        assert np.array_equal(out, reference.cumulative(series.prefix_h, series.values, t_s))
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


@pytest.mark.parametrize("scenario, seed", [("geopipe-abundant", 0), ("geopipe-abundant", 3), ("geopipe-v0-wide", 1)])
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


def test_advance_to_equals_the_physics_functions():
    """One interval of ClusterSim.advance_to (the compiled advance_interval) equals progress, energy, cost and
    carbon computed from the Python physics: energy.energy_kwh and HourlyIntegral.integral."""
    env, sim = _busy_sim("geopipe-abundant", 0)
    w = sim.world
    before = copy.deepcopy(sim)
    t0, t1 = sim.now_s, sim.now_s + 0.37 * (sim.next_event_s() - sim.now_s)
    dt = t1 - t0
    sim.advance_to(t1)
    kw = before.region_power_w / 1000.0
    assert sim.energy_kwh == pytest.approx(before.energy_kwh + energy_kwh(float(before.region_power_w.sum()), dt), rel=REL)
    assert sim.cost_usd == pytest.approx(before.cost_usd + float(kw @ w.price.integral(t0, t1)), rel=REL)
    assert sim.carbon_kg == pytest.approx(before.carbon_kg + float(kw @ w.carbon.integral(t0, t1)) / 1000.0, rel=REL)
    wan = before.wan_bytes + sum(rj.wan_bytes_per_s * dt for rj in before.running.values())
    assert sim.wan_bytes == pytest.approx(wan, rel=REL)
    for jid, rj in before.running.items():
        assert sim.running[jid].remaining_iters == rj.remaining_iters - dt / rj.iteration_s
    in_system = len(before.waiting) + len(before.running)
    assert sim.job_seconds == before.job_seconds + in_system * dt
    assert sim.gpu_seconds == before.gpu_seconds + float(int(w.num_gpus.sum() - before.free_gpus.sum())) * dt


def test_max_min_rates_equals_max_min_fair():
    """The compiled allocation over jobs' link lists equals reference.max_min_fair on the usage matrix, contended
    links included, and the link loads and peak utilisation follow from it."""
    rng = np.random.default_rng(5)
    num_links = 12
    for trial in range(300):
        num_jobs = int(rng.integers(1, 9))
        links = [rng.choice(num_links, size=int(rng.integers(0, 5)), replace=False) for _ in range(num_jobs)]
        demand = rng.uniform(0.1, 10.0, num_jobs)
        capacity = rng.uniform(1.0, 20.0 if trial % 2 else 60.0, num_links)
        running = rng.permutation(num_jobs).astype(np.int64)
        job_links = np.zeros((num_jobs, 5), dtype=np.int64)
        for j, ls in enumerate(links):
            job_links[j, : ls.size] = ls
        num = np.array([ls.size for ls in links], dtype=np.int64)
        rates, load = np.zeros(num_jobs), np.zeros(num_links)
        peak = network.max_min_rates(running, demand, job_links, num, capacity, rates, load, 0.0)
        used = sorted({int(link) for j in running for link in links[j]})
        usage = np.zeros((num_jobs, len(used)))
        for i, j in enumerate(running):
            usage[i, [used.index(int(link)) for link in links[j]]] = 1.0
        want = reference.max_min_fair(demand[running], usage, capacity[used]) if used else demand[running]
        np.testing.assert_allclose(rates[running], want, rtol=1e-12)
        if used:
            np.testing.assert_allclose(load[used], usage.T @ want, rtol=1e-12)
            assert peak == pytest.approx(float((usage.T @ want / capacity[used]).max()), rel=1e-12)
        assert not load[[link for link in range(num_links) if link not in used]].any()


def _state(sim) -> tuple:
    """What stepping changes: the clock, the next tick, the heap, waiting and running jobs, progress and totals."""
    return (sim.now_s, sim._tick_s, len(sim._events), tuple(sim.waiting), tuple(sim.running),
            sim._remaining_iters.tobytes(), sim._totals.tobytes(), sim.free_gpus.tobytes())


@pytest.mark.parametrize("scenario, seed, quiet", [("geopipe-abundant", 0, True), ("geopipe-abundant", 3, False),
                                                   ("geopipe-v0-wide", 1, True)])
def test_step_event_within_equals_its_python_steps(scenario, seed, quiet):
    """``step_event_within`` (one compiled call for the integration) leaves the simulator as
    ``advance_quiet_hours``, then ``step_event`` or ``advance_to(limit)`` do, bit for bit, event after event, up to
    and past a limit that stops it."""
    env, sim = _busy_sim(scenario, seed)
    reference = copy.deepcopy(sim)
    limit = sim.now_s + 400 * 3600.0
    steps = 0
    while True:
        if quiet:
            reference.advance_quiet_hours(limit)
        want = reference.next_event_s() <= limit
        if want:
            reference.step_event()
        else:
            reference.advance_to(limit)
        assert sim.step_event_within(limit, quiet) == want
        assert _state(sim) == _state(reference)
        steps += 1
        if not want:
            break
    assert steps >= 3 and sim.now_s == limit


def test_advance_quiet_hours_stops_at_the_limit():
    """No tick past ``limit_s`` is taken (the env passes the horizon)."""
    env, sim = _busy_sim("geopipe-abundant", 0)
    limit = sim._tick_s + 1.5 * 3600.0
    sim.advance_quiet_hours(limit)
    assert sim.now_s <= limit < sim._tick_s


def test_weighted_integral_equals_the_reference():
    """Σ weights · ∫ series over any interval equals reference.weighted_integral (to 1e-12; numpy's dot adds in
    another order) and HourlyIntegral.weighted_integral value for value."""
    rng = np.random.default_rng(1)
    series = HourlyIntegral(rng.normal(size=(6, 48)))
    for _ in range(200):
        rows = rng.choice(6, size=int(rng.integers(1, 7)), replace=False)
        weights = rng.uniform(0.0, 5.0, rows.size)
        t0 = float(rng.uniform(-100.0, 50 * 3600.0))
        t1 = t0 + float(rng.uniform(0.0, 60 * 3600.0))
        want = reference.weighted_integral(series.prefix_h, series.values, tuple(rows.tolist()), tuple(weights.tolist()),
                                           t0, t1)
        got = energy.weighted_integral(series.prefix_h, series.values, rows, weights, rows.size, t0, t1)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-9)
        assert got == series.weighted_integral(tuple(rows.tolist()), tuple(weights.tolist()), t0, t1)


@pytest.mark.parametrize("schedule", pipeline.SCHEDULES)
def test_uniform_total_equals_the_reference_closed_form(schedule):
    """The compiled closed form is reference._uniform_total_s on floats, bit for bit, cadence floor included."""
    rng = np.random.default_rng(2)
    for _ in range(500):
        f, x, lat = rng.uniform(0.001, 1.0), rng.uniform(0.0, 1.0), rng.uniform(0.0, 0.1)
        s, m = float(rng.integers(1, 65)), int(rng.integers(1, 129))
        cadence = float(rng.choice([0.0, rng.uniform(0.0, 3.0)]))
        want = reference._uniform_total_s(f, s, x, lat, m, schedule, cadence, max, math.floor, math.ceil)
        assert pipeline.uniform_total_s(f, 2.0 * f, s, x, lat, m, schedule == pipeline.GPIPE, cadence) == want


@pytest.mark.parametrize("schedule", pipeline.SCHEDULES)
def test_layout_table_timing_equals_iteration_model(schedule):
    """A layout table's compiled evaluation of a model's parts (the 1F1B path family folded into lines,
    dominated lines dropped) equals IterationModel.total_s at any cadence floor, bit for bit, for every kind of
    model (GPipe, closed form, one micro-batch, path family)."""
    from test_timing_model import random_layout

    rng = np.random.default_rng(3)
    table = LayoutTable()
    kinds = set()
    for _ in range(400):
        forward, backward, transfer, latency, m = random_layout(rng)
        model = reference.IterationModel(forward, backward, transfer, latency, m, schedule)
        parts = reference.model_parts(forward, backward, transfer, latency, m, schedule)
        kinds.add(parts.kind)
        lay = reference.store_parts(table, parts, 0, np.arange(1), np.arange(1) + len(kinds), (0.0, 0.0, 0.0))
        for cadence in (0.0, *rng.uniform(0.0, 3.0, 3), *rng.uniform(3.0, 50.0, 2)):
            got = pipeline.iteration_total_s(table.layout_f, table.layout_i, table.arrays, lay, cadence)
            assert got == model.total_s(cadence)
    assert kinds == ({pipeline.MODEL_GPIPE} if schedule == pipeline.GPIPE else {1, 2, 3})


def _random_placement(rng: np.random.Generator, world, num_stages: int):
    """A path of distinct linked regions (up to four) and a random split of ``num_stages`` stages over it."""
    linked = world.bandwidth_gbps > 0
    path = [int(rng.integers(world.num_regions))]
    for _ in range(int(rng.integers(0, min(4, num_stages)))):
        nxt = [r for r in np.flatnonzero(linked[path[-1]]) if r not in path]
        if not nxt:
            break
        path.append(int(rng.choice(nxt)))
    cuts = np.sort(rng.choice(np.arange(1, num_stages), size=len(path) - 1, replace=False)) if len(path) > 1 else []
    stages = np.diff(np.concatenate(([0], cuts, [num_stages])))
    return Placement(tuple(path), tuple(int(n) for n in stages))


@pytest.mark.parametrize("scenario", ["geopipe-abundant", "paper", "toy"])
@pytest.mark.parametrize("schedule", pipeline.SCHEDULES)
def test_store_layout_equals_the_python_model(scenario, schedule):
    """LayoutTable.add times a placement by the compiled store_layout: the table then holds, bit for bit,
    the rows, lines and placement that reference.store_parts writes from the reference model of the simulator's
    pipeline (reference.timing_parts), for every kind of model: GPipe, closed form, one micro-batch, path family; also over
    the rows an emptied table keeps."""
    base = load_builtin(scenario)
    world = sample_world(dataclasses.replace(base, pipeline_schedule=schedule), np.random.default_rng(5))
    sim = ClusterSim(world)
    compiled, spec = LayoutTable(), LayoutTable()
    rng = np.random.default_rng(10)
    for _ in range(50):  # layouts that leave their rows behind when the table empties (it keeps its arrays)
        job = world.jobs[int(rng.integers(len(world.jobs)))]
        placement = _random_placement(rng, world, job.num_stages)
        compiled.add(sim, dataclasses.replace(job, num_microbatches=1 + int(rng.integers(64))),
                     np.array(placement.regions), np.array(placement.stages))
    compiled.clear()
    rng = np.random.default_rng(9)
    kinds = set()
    for _ in range(150):
        job = world.jobs[int(rng.integers(len(world.jobs)))]
        if rng.random() < 0.2:
            job = dataclasses.replace(job, num_microbatches=1)
        placement = _random_placement(rng, world, job.num_stages)
        regions, stages = np.array(placement.regions), np.array(placement.stages)
        lay = compiled.add(sim, job, regions, stages)
        assert compiled.add(sim, job, regions, stages) == lay  # found, not stored again
        pid = spec.profile_id(job)
        if find_layout(spec.index, spec.layout_i, spec.places, pid, regions, stages, regions.size)[0] < 0:
            parts, demand = reference.timing_parts(sim, job, placement)
            extra = (job.allreduce_s, demand, job.wan_message_bytes)
            assert reference.store_parts(spec, parts, pid, regions, stages, extra) == lay
            kinds.add(parts.kind)
    assert compiled.num_layouts == spec.num_layouts
    assert np.array_equal(compiled.layout_f[:lay + 1], spec.layout_f[:lay + 1])
    assert np.array_equal(compiled.layout_i[:lay + 1], spec.layout_i[:lay + 1])
    assert np.array_equal(compiled.arrays[:compiled._arrays_used], spec.arrays[:spec._arrays_used])
    assert np.array_equal(compiled.places[:compiled._places_used], spec.places[:spec._places_used])
    for table in (compiled, spec):  # each indexes every layout once (the emptied one in more slots)
        assert sorted(table.index[table.index != EMPTY_SLOT]) == list(range(table.num_layouts))
    if schedule == pipeline.GPIPE:
        assert kinds == {pipeline.MODEL_GPIPE}
    else:  # the toy world's jobs have two stages on GPUs alike: a single hop, always the closed form
        assert kinds == {pipeline.MODEL_ROUND_TRIP, pipeline.MODEL_UNIFORM, pipeline.MODEL_PATHS} - (
            {pipeline.MODEL_PATHS} if scenario == "toy" else set()
        )


@pytest.mark.parametrize("schedule", pipeline.SCHEDULES)
def test_model_total_s_equals_iteration_model(schedule):
    """pipeline.model_total_s, which times the simulator's running jobs, equals reference.IterationModel.total_s bit
    for bit at any cadence floor, on writable and read-only arrays (the simulator passes read-only views of bytes)."""
    from test_timing_model import random_layout

    rng = np.random.default_rng(13)
    for trial in range(300):
        forward, backward, transfer, latency, m = random_layout(rng)
        backward = 2.0 * forward  # the simulator's stages
        if trial % 2:
            forward, transfer, latency = (np.frombuffer(a.tobytes()) for a in (forward, transfer, latency))
        model = reference.IterationModel(forward, backward, transfer, latency, m, schedule)
        tab = pipeline.packed_path_tables(forward.shape[0], max(m - 1, 1))
        gpipe = schedule == pipeline.GPIPE
        for cadence in (0.0, *rng.uniform(0.0, 3.0, 2), rng.uniform(3.0, 50.0)):
            got = pipeline.model_total_s(forward, backward, transfer, latency, m, gpipe, *tab, cadence)
            assert got == model.total_s(cadence)


def test_fixed_paths_equal_the_python_ones():
    """The compiled 1F1B path family's fixed parts equal reference.fixed_paths, array for array, bit for bit."""
    from test_timing_model import random_layout

    rng = np.random.default_rng(8)
    checked = 0
    while checked < 200:
        forward, backward, transfer, latency, m = random_layout(rng)
        if m < 2:
            continue
        n = m - 1
        want = reference.fixed_paths(forward, backward, forward + backward, transfer, latency, n)
        tab = want.tables
        got = pipeline.fixed_paths(
            forward, backward, transfer, latency, n, tab.run_reach, tab.held, tab.turn_stage, tab.turn_reach,
            tab.turn_hop_reach, tab.turn_held, tab.turn_cycles, tab.turn_segment, tab.turn_steps, tab.tail_copies,
            tab.tail_width, tab.full_loops, tab.part_loop, tab.copies, tab.segment, tab.pre_loop, tab.post_width,
            tab.cool_steps, tab.first_reach,
        )
        assert got[0] == want.last_stage_s and got[1] == want.other_s
        for array, name in zip(got[2:], ("tail_s", "loops_only_s", "segments_s", "pre_loop_s", "post_s")):
            assert np.array_equal(array, getattr(want, name)), name
        # The same family from the packed tables (what the layout table and the simulator build).
        packed = pipeline.packed_fixed_paths(forward, backward, transfer, latency, m,
                                             *pipeline.packed_path_tables(forward.shape[0], n))
        for a, b in zip(packed, got):
            assert np.array_equal(np.asarray(a), np.asarray(b))
        checked += 1


def test_packed_path_tables_hold_every_field():
    """The packed path tables give back each field of pipeline.path_tables, values and kind (int or float), by the
    declared field numbers (tables.PATH_TABLE), for pipelines of 1 to 40 stages and 0 to 200 advances."""
    assert tables.PATH_TABLE.names == pipeline._PathTables._fields
    for num_stages, n in [(1, 0), (1, 5), (2, 3), (5, 1), (8, 31), (16, 63), (40, 200), (13, 7)]:
        path = pipeline.path_tables(num_stages, n)
        tab_i, tab_f = pipeline.packed_path_tables(num_stages, n)
        assert not tab_i.flags.writeable and not tab_f.flags.writeable
        for field, name in enumerate(tables.PATH_TABLE.names):
            want = getattr(path, name)
            got = pipeline.tab_part(tab_i, tab_f if want.dtype.kind == "f" else tab_i, field)
            assert got.dtype == want.dtype and np.array_equal(got, want), (num_stages, n, name)


def test_find_layout_walks_past_hash_collisions():
    """A placement whose hash slot another placement holds is stored at the next slot and found there, as
    itself; the placement at the slot is not mistaken for it. The search wraps around the index's end."""
    table = LayoutTable()
    parts = reference.model_parts(np.ones(2), 2 * np.ones(2), np.ones(1), np.zeros(1), 4)
    a_regions, a_stages = np.array([0, 1]), np.array([1, 1])
    wrap = table.index.size - 1
    slot_a = layout_key(0, a_regions, a_stages, 2) & wrap
    # Another placement sits at a's slot, as if its hash had collided with a's.
    other = reference.store_parts(table, parts, 0, np.array([1, 0]), np.array([1, 1]), (0.0, 0.0, 0.0), slot=slot_a)
    next_a = (slot_a + 1) & wrap
    assert find_layout(table.index, table.layout_i, table.places, 0, a_regions, a_stages, 2) == (-1, next_a)
    a = reference.store_parts(table, parts, 0, a_regions, a_stages, (0.0, 0.0, 0.0))
    assert table.index[slot_a] == other and table.index[next_a] == a != other
    assert find_layout(table.index, table.layout_i, table.places, 0, a_regions, a_stages, 2) == (a, next_a)
    assert find_layout(table.index, table.layout_i, table.places, 1, a_regions, a_stages, 2)[0] == -1
    # At the last slot, the next is the first.
    table.clear()
    other = reference.store_parts(table, parts, 0, np.array([1, 0]), np.array([1, 1]), (0.0, 0.0, 0.0), slot=wrap)
    assert index_layout(table.index, wrap, 5) == 0 and table.index[0] == 5


def test_layout_index_grows_with_the_table():
    """Past its first rows the table doubles them and rebuilds its index, twice their number of slots: every
    layout stored before and after is found where it was, and fewer than half the slots are ever taken."""
    table = LayoutTable()
    parts = reference.model_parts(np.ones(1), 2 * np.ones(1), np.zeros(0), np.zeros(0), 4)
    sizes = set()
    for lay in range(100):
        stored = reference.store_parts(table, parts, lay, np.array([lay % 7]), np.array([1 + lay // 7]), (0.0, 0.0, 0.0))
        assert stored == lay
        assert np.count_nonzero(table.index != EMPTY_SLOT) == lay + 1 <= table.index.size // 2
        sizes.add(table.index.size)
    assert sizes == {32, 64, 128, 256}
    for lay in range(100):
        got = find_layout(table.index, table.layout_i, table.places, lay, np.array([lay % 7]), np.array([1 + lay // 7]),
                          1)[0]
        assert got == lay


def test_layout_table_pickles_empty():
    """The table is a cache: a pickled copy starts empty and works."""
    table = LayoutTable()
    parts = reference.model_parts(np.ones(1), 2 * np.ones(1), np.zeros(0), np.zeros(0), 4)
    reference.store_parts(table, parts, 0, np.array([0]), np.array([1]), (0.0, 0.0, 0.0))
    clone = pickle.loads(pickle.dumps(table))
    assert table.num_layouts == 1 and clone.num_layouts == 0 and (clone.index == EMPTY_SLOT).all()


def test_pairwise_sum_equals_numpy_sum():
    """Sums of 1 to 300 values of mixed magnitudes equal numpy's, bit for bit."""
    rng = np.random.default_rng(4)
    for count in [*range(1, 40), 64, 127, 128, 129, 200, 300]:
        for _ in range(20):
            values = rng.normal(size=count) * 10.0 ** rng.uniform(-6, 6, count)
            assert pairwise_sum(values, count) == values.sum()


def test_prefix_sums_equal_numpy_cumsum():
    """HourlyIntegral's compiled prefix sums equal a column of zeros and np.cumsum along the hours, bit for bit,
    for 1 to 70 series of 0 to 800 hours of mixed magnitudes and signs, and for a transposed (strided) input."""
    rng = np.random.default_rng(21)
    for rows in [1, 2, 5, 6, 16, 64, 70]:
        for hours in [0, 1, 2, 7, 722, 800]:
            values = rng.normal(size=(rows, hours)) * 10.0 ** rng.integers(-3, 4, size=(rows, hours))
            want = np.concatenate((np.zeros((rows, 1)), np.cumsum(values, axis=1)), axis=1)
            assert np.array_equal(HourlyIntegral(values).prefix_h, want)
    strided = rng.normal(size=(30, 4)).T
    assert np.array_equal(HourlyIntegral(strided).prefix_h[:, 1:], np.cumsum(strided, axis=1))


def test_add_rows_equals_a_python_loop():
    """Adding chosen rows in order gives, bit for bit, what ``out += table[r]`` in a Python loop gives."""
    rng = np.random.default_rng(6)
    table = rng.normal(size=(40, 9)) * 10.0 ** rng.uniform(-6, 6, (40, 9))
    rows = rng.permutation(40)[:25].astype(np.int64)
    want = np.zeros(9)
    for r in rows:
        want += table[r]
    got = np.zeros(9)
    sim_kernels.add_rows(table, rows, got)
    assert np.array_equal(got, want)


def test_region_power_and_stale_jobs_equal_their_numpy_forms():
    """Region power is the rows' sum in order, its kW and numpy's total; the stale jobs are those whose rate or
    capacity version moved, in running order."""
    rng = np.random.default_rng(7)
    power_w = rng.uniform(0.0, 5e5, (30, 11))
    running = rng.permutation(30)[:12].astype(np.int64)
    total, kw = np.zeros(11), np.empty(11)
    got = sim_kernels.region_power(power_w, running, total, kw)
    want = np.zeros(11)
    for r in running:
        want += power_w[r]
    assert np.array_equal(total, want) and np.array_equal(kw, want / 1000.0) and got == float(want.sum())
    rates, timed = rng.uniform(0, 1, 30), rng.uniform(0, 1, 30)
    timed[running[::2]] = rates[running[::2]]
    version = np.zeros(30, dtype=np.int64)
    version[running[4]] = -1
    out = np.zeros(30, dtype=np.int64)
    count = sim_kernels.stale_jobs(running, rates, timed, version, 0, out)
    want_ids = [j for j in running if rates[j] != timed[j] or version[j] != 0]
    assert out[:count].tolist() == want_ids and running[4] in want_ids


def test_simulator_rows_stay_views_of_its_tables_in_copies():
    """A deep copy or an unpickled simulator names the rows of its own per-job tables (what the kernels read and
    write), holding the original's values, and shares no memory with the original."""
    env, sim = _busy_sim("geopipe-abundant", 0)
    names = ("_remaining_iters", "_iteration_s", "_wan_bytes_per_s", "_demand_gbps", "_rates", "_rate_gbps",
             "_job_num_links", "_timed_at_capacity", "_stale")
    for clone in (copy.deepcopy(sim), pickle.loads(pickle.dumps(sim))):
        assert np.array_equal(clone._job_f, sim._job_f) and np.array_equal(clone._job_i, sim._job_i)
        for name in names:
            row = getattr(clone, name)
            table, original = (clone._job_f, sim._job_f) if row.dtype == np.float64 else (clone._job_i, sim._job_i)
            assert np.shares_memory(row, table) and not np.shares_memory(row, original), name
            assert np.array_equal(row, getattr(sim, name)), name
        clone.step_event()  # runs on its own tables: the original does not move
        assert not np.array_equal(clone._remaining_iters, sim._remaining_iters)


@pytest.mark.parametrize("stale", [False, True])
def test_reallocate_equals_its_three_kernels(stale):
    """``reallocate`` gives what max_min_rates, stale_jobs and (with no stale job) region_power give one by one,
    on contended links; with a stale job it leaves the power to the caller."""
    rng = np.random.default_rng(11)
    num_regions, num_jobs = 5, 14
    running = rng.permutation(num_jobs)[:9].astype(np.int64)
    demand = rng.uniform(1.0, 40.0, num_jobs)
    job_links = rng.integers(0, num_regions * num_regions, (num_jobs, 4)).astype(np.int64)
    num_links = rng.integers(0, 5, num_jobs).astype(np.int64)
    capacity = rng.uniform(5.0, 60.0, num_regions * num_regions)
    power_w = rng.uniform(0.0, 5e5, (num_jobs, num_regions))

    def run(fused: bool):
        job_f = np.zeros((tables.NUM_JOB_FLOATS, num_jobs))
        job_i = np.zeros((tables.NUM_JOB_INTS, num_jobs), dtype=np.int64)
        rates, out, timed_capacity = job_f[tables.JF_RATE], job_i[tables.JI_STALE], job_i[tables.JI_TIMED_CAPACITY]
        job_f[tables.JF_DEMAND], job_f[tables.JF_TIMED_RATE], job_i[tables.JI_NUM_LINKS] = demand, rates_timed, num_links
        load = np.zeros(num_regions * num_regions)
        total, kw = np.zeros(num_regions), np.zeros(num_regions)
        if stale:
            timed_capacity[running[3]] = -1
        if fused:
            peak, count, total_w = sim_kernels.reallocate(running, job_f, job_i, job_links,
                                                          capacity.reshape(num_regions, num_regions), load, 0.5, 0,
                                                          power_w, total, kw)
        else:
            peak = network.max_min_rates(running, demand, job_links, num_links, capacity, rates, load, 0.5)
            count = sim_kernels.stale_jobs(running, rates, rates_timed, timed_capacity, 0, out)
            total_w = sim_kernels.region_power(power_w, running, total, kw) if count == 0 else 0.0
        return peak, count, total_w, rates, load, out[:count].copy(), total, kw

    rates_timed = np.zeros(num_jobs)
    first = run(fused=False)  # the rates each job gets; time them at those so that only the stale one is stale
    rates_timed = first[3].copy()
    want, got = run(fused=False), run(fused=True)
    assert want[1] == (1 if stale else 0)
    for w, g in zip(want, got):
        assert np.array_equal(np.asarray(w), np.asarray(g))
    assert (got[2] == 0.0) == stale
