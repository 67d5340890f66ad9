"""Layer 4 tests: the one timing memo (``schedule.TIMINGS``) and the schedule choice that prunes by lower bounds.

Every iteration time the simulator, the candidate table and a launch ask for goes through one memo keyed by the
pipeline's content; a launch finds what the candidate table timed moments before, and choosing a job's fastest
schedule skips only the schedules whose lower bound shows that they cannot win."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np

import geopipe_env  # noqa: F401
from geopipe_env.base import caches
from geopipe_env.simulation import simulator
from geopipe_env.physics import schedule
from geopipe_env.simulation.core_types import Placement


def _placements(sim, job, rng, count):
    """Up to ``count`` random paths of distinct regions with the job's stages spread over them."""
    num_regions = sim.world.num_regions
    out = []
    for _ in range(count):
        length = int(rng.integers(1, min(num_regions, job.num_stages, 4) + 1))
        regions = tuple(int(r) for r in rng.permutation(num_regions)[:length])
        cuts = np.sort(rng.choice(np.arange(1, job.num_stages), length - 1, replace=False)) if length > 1 else []
        stages = np.diff(np.concatenate(([0], cuts, [job.num_stages]))).astype(int)
        out.append(Placement(regions, tuple(int(s) for s in stages)))
    return out


def test_the_pruned_choice_is_the_fastest_schedule():
    """``simulator.fastest`` picks what ``min(models, key=total_s)`` picks (the first of equals), on random
    placements of every GeoPipe-v0 job class, while timing fewer schedules with the executor."""
    env = gym.make("GeoPipe-v0").unwrapped
    env.reset(seed=4)
    sim = env.sim
    rng = np.random.default_rng(0)
    seen, skipped = 0, 0
    for job in {j.profile_key: j for j in sim.world.jobs if len(j.schedules) > 1}.values():
        for placement in _placements(sim, job, rng, 6):
            forward, transfer, latency, wan_pos = sim._stage_arrays(job, placement)
            wrap = sim._wrap(job, placement)
            models = [simulator.pipeline_model(job, i, placement, forward, transfer, latency, wan_pos, wrap, False)
                      for i in range(len(job.schedules))]
            caches.clear_all()
            chosen = simulator.fastest(models)
            timed = schedule.TIMINGS.misses
            assert chosen is min(models, key=lambda model: model.total_s())
            skipped += schedule.TIMINGS.misses - timed  # timed by min(), not by fastest()
            seen += 1
    assert seen > 20 and skipped > 0, "no schedule was pruned"


def test_no_pipeline_is_timed_twice_at_one_floor(monkeypatch):
    """Over masked-random episodes of GeoPipe-v0 (schedule choices, candidate tables, launches, retimings), the
    executor never runs the same pipeline at the same cadence floor twice: the candidate table's requests, the
    launches after them and the retimings all meet in the one memo."""
    runs = []
    executor = schedule.timed_total_s

    def counted(prog, inputs, floor):
        runs.append((prog.tobytes(), *(a.tobytes() for a in inputs), floor))
        return executor(prog, inputs, floor)

    monkeypatch.setattr(schedule, "timed_total_s", counted)
    caches.clear_all()
    env = gym.make("GeoPipe-v0").unwrapped
    obs, info = env.reset(seed=7)
    rng = np.random.default_rng(7)
    for step in range(300):
        launches = np.flatnonzero(info["action_mask"][:-1])
        action = int(rng.choice(launches)) if launches.size else env.wait_action
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset(seed=8 + step)
    assert len(runs) > 50
    assert len(set(runs)) == len(runs), f"{len(runs) - len(set(runs))} of {len(runs)} executor runs were repeats"
    hits, misses, size, _, _ = caches.stats()["timings"]
    assert hits > 0 and misses == size


def test_clear_all_forgets_every_process_cache():
    """``caches.clear_all`` empties every registered process cache and its counts."""
    env = gym.make("GeoPipe-v0").unwrapped
    env.reset(seed=1)
    for _ in range(20):
        env.step(int(np.flatnonzero(env.action_masks())[0]))
    assert any(stat[2] for stat in caches.stats().values())
    caches.clear_all()
    assert all(stat[:3] == (0, 0, 0) and stat[4] == 0 for stat in caches.stats().values())


STORE_RUN = """
import gymnasium as gym
import numpy as np
import geopipe_env
from geopipe_env.physics import schedule

env = gym.make("GeoPipe-v0").unwrapped  # its warm-up episodes use no store
runs = []
executor = schedule.timed_total_s
schedule.timed_total_s = lambda *args: runs.append(1) or executor(*args)
obs, info = env.reset(seed=5)
rng = np.random.default_rng(5)
rewards = []
for step in range(60):
    obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    rewards.append(reward)
    if terminated or truncated:
        obs, info = env.reset(seed=6 + step)
print(len(runs), schedule.TIMINGS.store_hits, repr(sum(rewards)))
"""


def _store_run(folder) -> tuple[int, int, float]:
    """(executor runs, memo misses the store answered, summed reward) of 60 decisions of GeoPipe-v0 in a fresh
    process whose timing store is in ``folder``."""
    env = {**os.environ, "GEOPIPE_TIMING_STORE": str(folder)}
    done = subprocess.run([sys.executable, "-c", STORE_RUN], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    runs, store_hits, total = done.stdout.split()[-3:]
    return int(runs), int(store_hits), float(total)


def test_processes_share_executor_timings_through_the_store(tmp_path):
    """A second process on the machine's timing store runs the executor for nothing the first one timed (the
    store answers each of those) and plays the same episode."""
    runs, store_hits, first = _store_run(tmp_path)
    assert runs > 0 and store_hits == 0
    assert any((tmp_path / "timings").iterdir())
    again_runs, again_store_hits, second = _store_run(tmp_path)
    assert second == first
    assert again_runs == 0 and again_store_hits == runs


def test_a_store_that_cannot_open_is_a_miss(tmp_path, monkeypatch):
    """A timing store whose folder cannot be made (a file stands in its way) answers nothing and breaks nothing:
    the executor times as without a store."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GEOPIPE_TIMING_STORE", str(blocker))
    store = caches.DiskStore("timings")
    assert store.get(("key", 0.0)) is None
    store.set(("key", 0.0), 1.0)
    assert store.get(("key", 0.0)) is None


def test_the_store_is_off_unless_asked_for(tmp_path, monkeypatch):
    """No store without ``GEOPIPE_TIMING_STORE`` (or with ``off``); ``on`` puts it beside the compiled kernels, in a
    folder named as theirs (package version and compiled sources' hash); a path puts it there."""
    from geopipe_env.base import compiled

    store = caches.DiskStore("timings")
    for setting in ("", "off", "0"):
        monkeypatch.setenv("GEOPIPE_TIMING_STORE", setting)
        assert store.folder() is None
    monkeypatch.setenv("GEOPIPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GEOPIPE_TIMING_STORE", "on")
    assert store.folder() == tmp_path / "cache" / "timings" / compiled.cache_dir().name
    monkeypatch.setenv("GEOPIPE_TIMING_STORE", str(tmp_path / "elsewhere"))
    assert store.folder() == tmp_path / "elsewhere" / "timings"


def test_a_paused_store_answers_nothing_and_keeps_nothing(tmp_path, monkeypatch):
    """Inside ``stores_paused`` (the env's warm-up episodes) a store neither answers nor records; outside it does."""
    monkeypatch.setenv("GEOPIPE_TIMING_STORE", str(tmp_path))
    store = caches.DiskStore("timings")
    store.set(("kept", 0.0), 1.0)
    with caches.stores_paused():
        assert store.get(("kept", 0.0)) is None
        store.set(("dropped", 0.0), 2.0)
    assert store.get(("kept", 0.0)) == 1.0 and store.get(("dropped", 0.0)) is None
