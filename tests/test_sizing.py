"""Sizing a job against a world: the most stages one pipeline path can hold (a chain of linked regions, each
once), which caps K* in the generator and which the loader checks every job against."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from geopipe_env.physics.sizing import linked_regions, path_room


def _linked(num_regions: int, pairs) -> np.ndarray:
    bandwidth = np.zeros((num_regions, num_regions))
    for a, b in pairs:
        bandwidth[a, b] = 1.0
    return linked_regions(bandwidth)


def _brute_force(linked: np.ndarray, held: np.ndarray) -> int:
    """Every ordering of every subset of the regions that hold stages, kept if consecutive regions are linked."""
    usable = [r for r in range(len(held)) if held[r] > 0]
    best = 0
    for size in range(1, len(usable) + 1):
        for path in itertools.permutations(usable, size):
            if all(linked[a, b] for a, b in itertools.pairwise(path)):
                best = max(best, int(sum(held[r] for r in path)))
    return best


@pytest.mark.parametrize(("pairs", "held", "room"), [
    ([(0, 1), (0, 2), (0, 3)], [4, 16, 4, 2], 24),  # a star around region 0: two leaves and the centre
    ([(0, 1), (1, 2), (2, 3)], [4, 16, 4, 2], 26),  # a chain: every region
    ([(0, 1), (2, 3)], [4, 16, 4, 2], 20),  # two groups: the better one
    ([(0, 1), (0, 2), (0, 3)], [4, 16, 0, 2], 22),  # a region without a stage is never on the path
    ([(1, 0)], [3, 5], 8),  # a link in one direction joins the pair
    ([], [3, 5], 5),  # no links: one region
])
def test_path_room_of_small_worlds(pairs, held, room):
    linked = _linked(len(held), pairs)
    assert path_room(linked, np.array(held)) == room == _brute_force(linked, np.array(held))


def test_path_room_equals_brute_force_on_random_worlds():
    """Random graphs of up to seven regions, sparse and dense: the search equals trying every path."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 8))
        density = rng.uniform(0.1, 0.9)
        pairs = [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < density]
        held = rng.integers(0, 6, n)
        linked = _linked(n, pairs)
        assert path_room(linked, held) == _brute_force(linked, held), (pairs, held.tolist())


def test_a_star_world_sizes_every_job_onto_one_path():
    """Four regions in a star (64, 16, 16 and 8 GPUs) with 8-way data-parallel jobs: the regions hold 13 stages, but
    a path at most 12 (leaf, centre, leaf). Every job's K* fits a path, so the first job launches and the episode
    does not run out its horizon inside reset."""
    from geopipe_env.env import GeoPipeEnv
    from geopipe_env.scenario.loader import load_scenario

    link = {"bandwidth_gbps": 10.0, "latency_ms": 20.0}
    scenario = load_scenario({
        "name": "star", "horizon_h": 2000, "start_utc": "2023-01-01T00:00Z", "mfu": 0.4,
        "regions": [{"id": "r0", "gpu": "A6000", "num_gpus": 64, "price_usd_per_kwh": 0.1},
                    {"id": "r1", "gpu": "A6000", "num_gpus": 16, "price_usd_per_kwh": 0.1},
                    {"id": "r2", "gpu": "A6000", "num_gpus": 16, "price_usd_per_kwh": 0.1},
                    {"id": "r3", "gpu": "A6000", "num_gpus": 8, "price_usd_per_kwh": 0.1}],
        "network": {"rule": "matrix", "matrix": {"r0": {"r1": link, "r2": link, "r3": link}}},
        "workload": {"num_jobs": 4, "arrival": {"process": "batch"}, "models": ["qwen2.5-32b"],
                     "datasets": ["alpaca"], "data_parallel": 8, "global_batch_size": 256},
    })
    env = GeoPipeEnv(scenario)
    env.reset(seed=0)
    assert {job.num_stages for job in env.world.jobs} == {12}
    assert env.sim.now_s < scenario.horizon_s
    assert env.action_masks()[:-1].any()
