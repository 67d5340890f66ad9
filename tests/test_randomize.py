"""Per-episode domain randomisation (the scenario's ``randomize`` block): what each key draws, from the env's RNG."""

from __future__ import annotations

import numpy as np
import pytest

from geopipe_env.simulation.generator import sample_world
from geopipe_env.simulation.core_types import fields_key, layout_key
from geopipe_env.scenario.loader import ScenarioError, load_builtin, load_scenario
from tests.test_loader import base


def _worlds(scenario, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [sample_world(scenario, rng) for _ in range(n)]


def test_every_key_draws_within_its_range():
    d = base()
    d["randomize"] = {
        "gpu_types": ["A6000", "H100"],
        "constant_price_prob": 0.5,
        "num_jobs": [2, 6],
        "arrival_scale": [0.5, 2.0],
        "batch_arrival_prob": 0.3,
    }
    scenario = load_scenario(d)
    worlds = _worlds(scenario, 200)
    h100, a6000 = 989.0, 154.8
    types = np.array([w.tflops for w in worlds])
    assert set(np.unique(types)) == {a6000, h100}  # region c's A100 never appears
    assert 0.35 < (types == h100).mean() < 0.65
    counts = [len(w.jobs) for w in worlds]
    assert set(counts) == {2, 3, 4, 5, 6}
    market = 1  # region b prices on the GB market; a constant-price episode holds it flat
    flat = [np.ptp(w.price.values[market]) == 0.0 for w in worlds]
    assert 0.35 < np.mean(flat) < 0.65
    batch = [all(j.arrival_s == 0.0 for j in w.jobs) for w in worlds]
    assert 0.2 < np.mean(batch) < 0.4
    # A Poisson episode's mean gap lies in 1.5 h × [0.5, 2] up to sampling noise; over many episodes both ends show.
    gaps = [np.mean(np.diff([0.0] + [j.arrival_s for j in w.jobs])) / 3600 for w, b in zip(worlds, batch) if not b]
    assert min(gaps) < 1.0 and max(gaps) > 2.0


def test_constant_price_is_the_series_annual_mean():
    d = base()
    d["randomize"] = {"constant_price_prob": 1.0}
    scenario = load_scenario(d)
    (world,) = _worlds(scenario, 1)
    assert np.allclose(world.price.values[1], scenario.regions[1].price_usd_per_kwh.values.mean())
    assert np.allclose(world.price.values[0], 0.1)


def test_same_seed_same_world_and_gpu_types_enter_the_physics():
    scenario = load_builtin("geopipe-v0-wide")
    a, b = _worlds(scenario, 3, seed=7), _worlds(scenario, 3, seed=7)
    drawn = ("num_gpus", "bandwidth_gbps", "tflops", "busy_watts", "idle_watts")
    for wa, wb in zip(a, b, strict=True):
        assert fields_key(wa, drawn) == fields_key(wb, drawn) and len(wa.jobs) == len(wb.jobs)
        assert [j.lower_bound_s for j in wa.jobs] == [j.lower_bound_s for j in wb.jobs]
    # Worlds with different GPU types never share layouts: the key holds their power, and the jobs' profiles their
    # stage times.
    worlds = _worlds(scenario, 20)
    assert len({layout_key(w) for w in worlds}) == 20
    assert len({fields_key(w, ("tflops",)) for w in worlds}) > 1


def test_mixed_fleets_redraw_until_every_job_fits():
    """A fleet mixing GPU types can leave a job's reference type too few GPUs; the draw is repeated, so every
    episode of the wide training world can run each of its jobs."""
    scenario = load_builtin("geopipe-v0-wide")
    for world in _worlds(scenario, 60, seed=3):
        for job in world.jobs:
            assert job.fits.any() and job.num_stages >= 1


def _shaped(**randomize) -> dict:
    d = base()
    d["workload"]["num_jobs"] = 12
    d["workload"]["pipeline_schedules"] = ["interleaved-1f1b", "1f1b"]
    d["workload"]["virtual_stages"] = 2
    d["randomize"] = randomize
    return d


def test_shape_draws_are_powers_of_two_in_range_and_keep_each_jobs_tokens():
    scenario = load_scenario(_shaped(data_parallel=[1, 4], seq_len=[1000, 4096]))
    degrees, lengths = set(), set()
    for world in _worlds(scenario, 30):
        for job in world.jobs:
            degrees.add(job.data_parallel)
            lengths.add(job.seq_len)
            # The class's micro-batches per replica stay; the iterations follow from the dataset's tokens.
            assert job.num_microbatches == 32
            tokens = job.iterations * job.micro_batch_size * job.seq_len * job.num_microbatches * job.data_parallel
            assert tokens >= scenario.workload.datasets[0].tokens
            assert (job.iterations - 1) * tokens / job.iterations < scenario.workload.datasets[0].tokens
    assert degrees == {1, 2, 4} and lengths == {1024, 2048, 4096}


def test_shape_draws_follow_the_seed_and_leave_other_draws_alone():
    plain = load_scenario(_shaped())
    shaped = load_scenario(_shaped(data_parallel=[2, 2]))
    a, b = _worlds(shaped, 3, seed=5), _worlds(shaped, 3, seed=5)
    for wa, wb in zip(a, b, strict=True):
        assert [(j.data_parallel, j.lower_bound_s) for j in wa.jobs] == [(j.data_parallel, j.lower_bound_s) for j in wb.jobs]
    # The shape draws come after the arrivals: the same seed gives the same arrivals, models and prices.
    for wp, ws in zip(_worlds(plain, 3, seed=5), a, strict=True):
        assert [(j.arrival_s, j.model) for j in wp.jobs] == [(j.arrival_s, j.model) for j in ws.jobs]
        assert np.array_equal(wp.price.values, ws.price.values)
        assert {j.data_parallel for j in wp.jobs} == {1} and {j.data_parallel for j in ws.jobs} == {2}


def test_one_f_one_b_prob_draws_whole_episodes():
    scenario = load_scenario(_shaped(one_f_one_b_prob=0.5))
    kinds = [{j.schedules for j in w.jobs} for w in _worlds(scenario, 40)]
    only = [k == {("1f1b",)} for k in kinds]
    assert all(o or k == {("interleaved-1f1b", "1f1b")} for o, k in zip(only, kinds))
    assert 0.25 < np.mean(only) < 0.75
    never = load_scenario(_shaped(one_f_one_b_prob=0.0))
    assert all(j.schedules == ("interleaved-1f1b", "1f1b") for w in _worlds(never, 5) for j in w.jobs)


def test_a_drawn_shape_that_cannot_run_keeps_the_class_shape():
    """A stage of 8 GPUs per replica: 2 or 4 replicas fit a region of 32 GPUs, 8 or 16 fit none, so those draws
    keep the class's single replica."""
    d = _shaped(data_parallel=[2, 16])
    d["workload"].update(pipeline_stages=2, gpus_per_stage=8)
    scenario = load_scenario(d)
    degrees = {j.data_parallel for w in _worlds(scenario, 20) for j in w.jobs}
    assert degrees == {1, 2, 4}


def test_a_shape_range_without_a_power_of_two_is_one_clear_error():
    with pytest.raises(ScenarioError, match=r"randomize\.data_parallel: no power of two lies in \[3, 3\]"):
        load_scenario(_shaped(data_parallel=[3, 3]))
