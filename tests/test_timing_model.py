"""The timing paths equal their specification (``tests/reference.py``): the compiled analytic model vs the
reference's, the reference's own fast model vs its full path family, the pruned 1F1B path family vs the full one,
and the simulator's shared iteration-time cache vs no cache."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401
import reference

from geopipe_env.base import caches
from geopipe_env.simulation import simulator
from geopipe_env.physics import pipeline
from geopipe_env.physics.pipeline import SCHEDULES
from geopipe_env.simulation.simulator import CLOSED_FORMS
from geopipe_env.simulation.core_types import Placement
from geopipe_env.base.units import transfer_time_s

REL = 1e-12


def random_layout(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Stage and hop arrays like the simulator's (blocks of identical stages, a few slow hops) or fully random."""
    num_stages = int(rng.integers(1, 48))
    m = int(rng.choice([1, 2, 3, 8, 16, 31, 32, 33, 64]))
    kind = rng.integers(3)
    if kind == 0:  # identical stages and hops: the closed form
        forward = np.full(num_stages, rng.uniform(0.01, 1.0))
        hops = np.full(num_stages - 1, rng.uniform(0.0, 0.5)), np.full(num_stages - 1, rng.uniform(0.0, 0.1))
        return forward, 2.0 * forward, *hops, m
    if kind == 1:  # regions: blocks of identical stages, WAN hops between them
        cuts = np.sort(rng.choice(np.arange(1, num_stages), size=min(3, num_stages - 1), replace=False))
        sizes = np.diff(np.concatenate(([0], cuts, [num_stages])))
        forward = np.repeat(rng.uniform(0.01, 1.0, sizes.size), sizes)
        transfer, latency = np.full(num_stages - 1, 0.01), np.full(num_stages - 1, 1e-4)
        transfer[cuts - 1], latency[cuts - 1] = rng.uniform(0.0, 2.0, cuts.size), rng.uniform(0.0, 0.1, cuts.size)
        return forward, 2.0 * forward, transfer, latency, m
    forward = rng.uniform(0.0, 1.0, num_stages)
    backward = rng.uniform(0.0, 2.0, num_stages)
    return forward, backward, rng.uniform(0.0, 1.0, num_stages - 1), rng.uniform(0.0, 0.3, num_stages - 1), m


def identical_stages_and_hops(forward, backward, transfer, latency) -> bool:
    same = [np.all(a == a[0]) for a in (forward, transfer, latency) if a.size]
    return all(same) and np.array_equal(backward, 2.0 * forward)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_iteration_model_equals_iteration_time(schedule):
    """At many cadence floors (rates), the model's total equals the reference; exactly unless the closed form is used."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        forward, backward, transfer, latency, m = random_layout(rng)
        model = reference.IterationModel(forward, backward, transfer, latency, m, schedule)
        for cadence in (0.0, *rng.uniform(0.0, 3.0, 4)):
            want = reference.iteration_time(forward, backward, transfer, latency, m, schedule, cadence)
            got = model.total_s(cadence)
            assert got == pytest.approx(want.total_s, rel=REL)
            if schedule == pipeline.GPIPE or not identical_stages_and_hops(forward, backward, transfer, latency):
                assert got == want.total_s
            # The compiled model, as the simulator and the docs' figures use it: the fast model's value, split alike.
            compiled = pipeline.iteration_time(forward, backward, transfer, latency, m, schedule, cadence)
            assert compiled.total_s == got
            assert compiled[1:] == pytest.approx(want[1:], rel=REL, abs=1e-12)


def test_uniform_closed_form_on_floats_equals_the_vectorised_one():
    """The scalar evaluation of the closed form is the array one, value for value, cadence floor included."""
    rng = np.random.default_rng(1)
    stages = np.arange(1, 65)
    for _ in range(50):
        f, x, lat = rng.uniform(0.01, 1.0), rng.uniform(0.0, 1.0), rng.uniform(0.0, 0.1)
        m, cadence = int(rng.integers(1, 65)), float(rng.choice([0.0, rng.uniform(0.0, 3.0)]))
        for schedule in SCHEDULES:
            vectorised = pipeline.uniform_iteration_time_s(np.full(stages.size, f), stages, x, lat, m, schedule, cadence)
            for s, want in zip(stages, vectorised):
                got = reference._uniform_total_s(f, float(s), x, lat, m, schedule, cadence, max, np.floor, np.ceil)
                assert got == want
            spec = reference.uniform_total_s(np.full(stages.size, f), stages, x, lat, m, schedule, cadence)
            assert np.array_equal(spec, vectorised)


def test_pruned_segment_paths_never_change_the_longest_path(monkeypatch):
    """Dropping dominated segment paths from the tables leaves every 1F1B iteration time bit for bit unchanged."""
    rng = np.random.default_rng(2)
    cases = [random_layout(rng) for _ in range(150)]
    cadences = rng.uniform(0.0, 2.0, len(cases))

    def times() -> list[float]:
        pipeline.path_tables.cache_clear()
        return [reference.iteration_time(*case, pipeline.ONE_F_ONE_B, c).total_s for case, c in zip(cases, cadences)]

    pruned, pruned_size = times(), pipeline.path_tables(42, 31).segment.size
    monkeypatch.setattr(pipeline, "_dominant_segment_paths", lambda copies, *_: list(range(len(copies))))
    full, full_size = times(), pipeline.path_tables(42, 31).segment.size
    pipeline.path_tables.cache_clear()
    assert pruned == full and pruned_size < full_size


def test_max_min_fair_gives_the_demands_when_everything_fits():
    rng = np.random.default_rng(3)
    for _ in range(200):
        usage = (rng.random((6, 4)) < 0.4).astype(float)
        demand = rng.uniform(0.1, 5.0, 6)
        capacity = usage.T @ demand * rng.uniform(1.0, 2.0, 4) + 1e-9
        assert np.array_equal(reference.max_min_fair(demand, usage, capacity), demand)


def play(seed: int, steps: int = 120) -> list[tuple]:
    """A masked-random geopipe-abundant run (two episodes or more): what the agent sees, and the simulator's totals."""
    env = gym.make("GeoPipe-v0", scenario="geopipe-abundant").unwrapped
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    seen = []
    for step in range(steps):
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        seen.append((reward, *(obs[key].tobytes() for key in sorted(obs)), env.sim.energy_kwh, env.sim.cost_usd))
        if terminated or truncated or step == steps // 2:
            obs, info = env.reset(seed=seed + step + 1)
    return seen


def test_shared_iteration_cache_changes_no_result():
    """Episodes timed from a warm cross-episode cache equal episodes timed from scratch."""
    caches.clear_all()
    cold = play(5)
    assert len(CLOSED_FORMS) > 0
    warm = play(5)
    assert warm == cold


def test_placement_hash_survives_pickling():
    placement = Placement((2, 0, 3), (4, 5, 6))
    clone = pickle.loads(pickle.dumps(placement))
    assert clone == placement and hash(clone) == hash(placement) == hash(Placement((2, 0, 3), (4, 5, 6)))
    assert clone.links == ((2, 0), (0, 2), (0, 3), (3, 0))
    assert {placement: 1}[Placement((2, 0, 3), (4, 5, 6))] == 1


def test_running_jobs_are_timed_by_the_reference_model():
    """Each running job's iteration time is ``iteration_time`` on its layout at its allocated rate (the d replicas'
    d·A per WAN message), plus its data-parallel all-reduce."""
    env = gym.make("GeoPipe-v0", scenario="geopipe-abundant").unwrapped
    rng = np.random.default_rng(6)
    obs, info = env.reset(seed=6)
    checked = 0
    for _ in range(60):
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        for rj in env.sim.running.values():
            job = rj.job
            forward, transfer, latency, _ = env.sim._stage_arrays(job, rj.placement)
            cadence = transfer_time_s(job.wan_message_bytes, rj.rate_gbps) if rj.placement.num_wan_hops else 0.0
            want = pipeline.iteration_time(
                forward, 2.0 * forward, transfer, latency, job.num_microbatches, env.world.scenario.pipeline_schedule,
                cadence,
            ).total_s
            assert rj.iteration_s == pytest.approx(want + job.allreduce_s, rel=REL)
            checked += 1
        if terminated or truncated:
            break
    assert checked > 50


@pytest.mark.parametrize("timing", ["analytic", "exact"])
def test_local_iteration_is_the_placement_timed_with_intra_region_links(timing):
    """``local_iteration_s_of`` (the base of a job's communication slowdown) is the placement's timing with every
    boundary on the intra-region link, at no cadence floor, bit for bit."""
    env = gym.make("GeoPipe-v0", scenario="geopipe-abundant", timing=timing).unwrapped
    rng = np.random.default_rng(8)
    obs, info = env.reset(seed=8)
    sim, net = env.sim, env.world.scenario.network
    checked = 0
    for _ in range(40):
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        for rj in sim.running.values():
            job = rj.job
            forward, transfer, latency, _ = sim._stage_arrays(job, rj.placement)
            transfer[:] = intra_x = transfer_time_s(job.activation_bytes, net.intra_bandwidth_gbps)
            latency[:] = float(net.intra_latency_s)
            model = simulator.pipeline_model(
                job, rj.layout.schedule, rj.placement, forward, transfer, latency, np.zeros(0, dtype=np.intp),
                (intra_x, float(net.intra_latency_s), False, ()), timing == "exact",
            )
            timing_model = simulator.PlacementTiming(env.world, job, rj.placement, model)
            assert sim.local_iteration_s_of(job, rj.placement) == timing_model.at(0.0)[0]  # memoised, maybe
            simulator._LOCAL_ITERATION.clear()
            assert sim.local_iteration_s_of(job, rj.placement) == timing_model.at(0.0)[0]  # computed
            checked += 1
        if terminated or truncated:
            break
    assert checked > 30


def test_local_iteration_is_shared_by_placements_of_equal_stage_times():
    """Placements whose stages run at the same times in the same order (regions of one GPU type) share one
    memoised local iteration time, equal to each computed afresh."""
    env = gym.make("GeoPipe-v0", scenario="geopipe-abundant").unwrapped
    env.reset(seed=2)
    sim, world = env.sim, env.world
    job = max(world.jobs, key=lambda j: j.num_stages)
    same = [r for r in range(world.num_regions) if job.forward_s[r] == job.forward_s[0] and job.fits[r]]
    assert len(same) >= 2
    split = Placement((same[0], same[1]), (1, job.num_stages - 1))
    whole = Placement((same[1],), (job.num_stages,))
    fresh = []
    for placement in (split, whole):
        simulator._LOCAL_ITERATION.clear()
        fresh.append(sim.local_iteration_s_of(job, placement))
    simulator._LOCAL_ITERATION.clear()
    shared = [sim.local_iteration_s_of(job, placement) for placement in (split, whole)]
    assert fresh == shared and shared[0] == shared[1] and len(simulator._LOCAL_ITERATION) == 1
