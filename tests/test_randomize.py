"""Per-episode domain randomisation (the scenario's ``randomize`` block): what each key draws, from the env's RNG."""

from __future__ import annotations

import numpy as np

from geopipe_env.simulation.generator import sample_world
from geopipe_env.simulation.core_types import fields_key, layout_key
from geopipe_env.scenario.loader import load_builtin, load_scenario
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
