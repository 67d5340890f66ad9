"""The speed work's caches that outlive one decision or one episode must be invisible in results."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401
from geopipe_env.base import caches
from geopipe_env.simulation import core_types, generator, layout_table, simulator
from geopipe_env.simulation.generator import sample_world
from geopipe_env.scenario.loader import load_builtin


def _jobs_equal(a, b) -> bool:
    for x, y in zip(a.jobs, b.jobs, strict=True):
        for f in dataclasses.fields(x):
            u, v = getattr(x, f.name), getattr(y, f.name)
            if not (np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v):
                return False
    return True


@pytest.mark.parametrize("name", ["geopipe-v0", "geopipe-v0-randomized", "paper"])
def test_profile_cache_gives_the_worlds_of_no_cache(name):
    """Worlds drawn with a shared profile cache equal worlds drawn without one, episode after episode."""
    scenario = load_builtin(name)
    cache: dict = {}
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    for _ in range(4):
        cached, fresh = sample_world(scenario, rng_a, cache), sample_world(scenario, rng_b)
        assert _jobs_equal(cached, fresh)
        assert np.array_equal(cached.num_gpus, fresh.num_gpus) and np.array_equal(cached.bandwidth_gbps, fresh.bandwidth_gbps)
    assert cache, "the cache was not used"


@pytest.mark.parametrize("name", ["geopipe-v0", "geopipe-v0-randomized", "paper"])
def test_jobs_copied_from_a_template_equal_jobs_built_by_init(name):
    """A world's later jobs of one profile, dataset and iteration count are copies of the first's fields
    (generator._job_like): every field, the derived ones too, equals what Job's own __init__ builds."""
    world = sample_world(load_builtin(name), np.random.default_rng(3))
    init = [f.name for f in dataclasses.fields(core_types.Job) if f.init]
    rebuilt = dataclasses.replace(world, jobs=tuple(core_types.Job(**{n: getattr(j, n) for n in init}) for j in world.jobs))
    assert _jobs_equal(world, rebuilt)
    kinds = {(j.model, j.dataset, j.iterations, j.num_stages) for j in world.jobs}
    assert len(kinds) < len(world.jobs), "no two jobs of one kind: nothing was copied from a template"


def test_profile_cache_is_bounded_and_profiles_are_read_only(monkeypatch):
    """A randomised scenario draws new profiles each episode; the cache never exceeds its size, and a world drawn
    through a small cache equals one drawn with none."""
    monkeypatch.setattr(generator, "PROFILE_CACHE_SIZE", 5)
    scenario = load_builtin("geopipe-v0-randomized")
    cache = generator.new_profile_cache()
    rng, fresh = np.random.default_rng(0), np.random.default_rng(0)
    for _ in range(10):
        world = sample_world(scenario, rng, cache)
        assert len(cache) <= 5
        assert _jobs_equal(world, sample_world(scenario, fresh))
    with pytest.raises(ValueError):
        world.jobs[0].forward_s[0] = 1.0  # shared across jobs and episodes: must not be writable


def _interleaved(envs, seeds) -> list[list[tuple[float, bytes]]]:
    """Masked-random episodes of ``envs`` (seeded ``seeds``) stepped alternately: per env, (reward, the candidates'
    bytes) per step."""
    rngs = [np.random.default_rng(s) for s in seeds]
    infos = [env.reset(seed=s)[1] for env, s in zip(envs, seeds)]
    trace = [[] for _ in envs]
    done = [False] * len(envs)
    while not all(done):
        for i, env in enumerate(envs):
            if not done[i]:
                obs, reward, term, trunc, infos[i] = env.step(int(rngs[i].choice(np.flatnonzero(infos[i]["action_mask"]))))
                trace[i].append((reward, obs["candidates"].tobytes()))
                done[i] = term or trunc
    return trace


def test_interleaved_envs_equal_solo_runs():
    """Two envs on different worlds stepped alternately (sharing per-world caches) equal each run alone."""
    ids, seeds = ["GeoPipe-v0", "GeoPipe-Toy-v0"], [3, 4]
    together = _interleaved([gym.make(i).unwrapped for i in ids], seeds)
    alone = [_interleaved([gym.make(i).unwrapped], [s])[0] for i, s in zip(ids, seeds)]
    assert together == alone


def _episode(env, seed: int) -> list[tuple[float, float, float]]:
    """(reward, Σ candidates, Σ queue) per step of a masked-random episode."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    out = []
    while True:
        obs, reward, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        out.append((reward, float(obs["candidates"].sum()), float(obs["queue"].sum())))
        if term or trunc:
            return out


@pytest.mark.parametrize("tiny_bounds", [False, True])
def test_caches_across_episodes_change_nothing(monkeypatch, tiny_bounds):
    """Episodes run one after another in one env (layouts, iteration times, profiles and placements carried
    over, and with tiny bounds emptied again and again) equal the same episodes each in a fresh env."""
    from geopipe_env.decision import placement

    if tiny_bounds:
        monkeypatch.setattr(simulator, "LAYOUT_CACHE_SIZE", 5)
        monkeypatch.setattr(simulator, "RATES_PER_LAYOUT", 2)
        monkeypatch.setattr(placement, "_PLACEMENTS", caches.ProcessCache("placements (3)", 3))
        monkeypatch.setattr(generator, "PROFILE_CACHE_SIZE", 2)
    caches.clear_all()  # shared layout caches made anew, at the bound in force
    seeds = [11, 12, 13]
    shared = gym.make("GeoPipe-v0").unwrapped
    carried = [_episode(shared, s) for s in seeds]
    assert shared.sim._layout_cache is simulator.shared_layout_cache(shared.world, False), "the cache was not shared"
    assert len(shared.sim._layout_cache) > 0
    fresh = []
    for s in seeds:
        caches.clear_all()
        fresh.append(_episode(gym.make("GeoPipe-v0").unwrapped, s))
    assert carried == fresh


def test_envs_of_one_process_share_layouts_only_where_they_time_alike(tmp_path):
    """Envs of one process share the simulator's layouts (a second env launches the first one's layouts without
    timing them again), but a scenario whose jobs keep their model names and shapes and run at another
    utilisation (so other stage times) gets its own: episodes interleaved in one process equal episodes each with
    every process cache forgotten first."""
    path = tmp_path / "slow.yaml"
    path.write_text("version: 1\nextends: geopipe-v0\nname: slow\nmfu: 0.3\n")
    runs = [("GeoPipe-v0", 3), (str(path), 3), ("GeoPipe-v0", 4), (str(path), 4)]

    def make(scenario):
        return gym.make("GeoPipe-v0", scenario=scenario).unwrapped if scenario != "GeoPipe-v0" else gym.make(scenario).unwrapped

    caches.clear_all()
    shared = [_episode(make(scenario), seed) for scenario, seed in runs]
    first = make("GeoPipe-v0")
    first.reset(seed=3)
    cache = first.sim._layout_cache
    size = len(cache)
    _episode(first, 3)
    assert len(cache) == size, "an env re-timed layouts that another env of the process had timed"
    fresh = []
    for scenario, seed in runs:
        caches.clear_all()
        fresh.append(_episode(make(scenario), seed))
    assert shared == fresh


def test_background_traffic_episodes_do_not_share_layouts(tmp_path):
    """With background traffic line rates change every hour, so layouts stay per episode; episodes in one env
    still equal episodes in fresh envs."""
    path = tmp_path / "busy.yaml"
    path.write_text(
        "version: 1\nextends: geopipe-v0\nname: busy\n"
        "network: {background: {mean_fraction: 0.3, amplitude_fraction: 0.2}}\n"
    )
    caches.clear_all()
    shared = gym.make("GeoPipe-v0", scenario=str(path)).unwrapped
    carried = [_episode(shared, s) for s in (5, 6)]
    fresh = [_episode(gym.make("GeoPipe-v0", scenario=str(path)).unwrapped, s) for s in (5, 6)]
    assert carried == fresh
    assert len(shared.sim._layout_cache) > 0
    assert len(simulator.shared_layout_cache(shared.world, False)) == 0


def test_indices_drawn_at_once_are_numpys_draws_one_by_one():
    """generator._draw_indices gives the numbers of rng.integers(0, n) called once per size, sizes of 1 included,
    and leaves the stream where those calls leave it, after any earlier use of the generator."""
    master = np.random.default_rng(11)
    for trial in range(300):
        seed = int(master.integers(1 << 31))
        sizes = master.integers(1, 9, size=int(master.integers(0, 90))).tolist()
        if trial % 3 == 0:
            sizes = [1] * len(sizes)
        at_once, one_by_one = np.random.default_rng(seed), np.random.default_rng(seed)
        for rng in (at_once, one_by_one):  # an odd number of 32-bit words used before
            rng.random()
            rng.integers(0, 7)
        assert generator._draw_indices(at_once, sizes) == [int(one_by_one.integers(0, n)) for n in sizes]
        assert at_once.random() == one_by_one.random() and at_once.integers(0, 5) == one_by_one.integers(0, 5)


def test_weighted_indices_are_numpys_choice():
    """generator._weighted_indices draws what rng.choice(k, size, p=p) draws, and leaves the stream where it does."""
    master = np.random.default_rng(12)
    for _ in range(300):
        k, size, seed = int(master.integers(1, 8)), int(master.integers(0, 90)), int(master.integers(1 << 31))
        weights = master.uniform(0.01, 5.0, k)
        p = weights / weights.sum()
        fast, numpy_choice = np.random.default_rng(seed), np.random.default_rng(seed)
        for rng in (fast, numpy_choice):
            rng.random()
        assert np.array_equal(generator._weighted_indices(fast, p, size), numpy_choice.choice(k, size=size, p=p))
        assert fast.random() == numpy_choice.random()


def test_event_queue_push_all_pops_as_pushes():
    """Events queued at once pop in the order of the same events pushed one by one (ties by kind, then order)."""
    from geopipe_env.simulation.engine import Event, EventKind, EventQueue

    rng = np.random.default_rng(3)
    timed = [(float(t), Event(EventKind(int(k)), j)) for j, (t, k) in enumerate(zip(rng.integers(0, 5, 60), rng.integers(0, 2, 60)))]
    one_by_one, at_once = EventQueue(), EventQueue()
    for time_s, event in timed:
        one_by_one.push(time_s, event)
    at_once.push_all([time_s for time_s, _ in timed], [event for _, event in timed])
    at_once.push(2.0, Event(EventKind.COMPLETION, 99))
    one_by_one.push(2.0, Event(EventKind.COMPLETION, 99))
    assert [one_by_one.pop() for _ in range(61)] == [at_once.pop() for _ in range(61)]


def test_arrival_events_are_shared_and_equal_new_ones():
    """Every episode's arrival events are the same immutable objects, equal to the events built one by one."""
    from geopipe_env.simulation.engine import Event, EventKind, arrival_events

    first = arrival_events(30)
    assert first == tuple(Event(EventKind.ARRIVAL, j) for j in range(30))
    again = arrival_events(45)
    assert again[:30] == first and all(a is b for a, b in zip(again, first)) and again[44].job_id == 44


def test_envs_of_one_process_share_layouts_and_change_nothing(monkeypatch):
    """Envs on worlds of one timing share one layout table (emptied again and again with a tiny bound), and
    stepped alternately they equal each run alone with no table before it."""
    monkeypatch.setattr(layout_table, "MAX_TABLE_LAYOUTS", 7)

    seeds = [21, 22, 23]
    envs = [gym.make("GeoPipe-v0").unwrapped for _ in seeds]
    together = _interleaved(envs, seeds)
    assert envs[0]._backend.layouts is envs[1]._backend.layouts is envs[2]._backend.layouts
    alone = []
    for s in seeds:
        caches.clear_all()
        alone.append(_interleaved([gym.make("GeoPipe-v0").unwrapped], [s])[0])
    assert together == alone


def test_series_window_is_the_wrapped_index_of_the_year():
    """HourlySeries.window takes one slice when the window does not wrap, and equals the wrapped index either way,
    as a new array or written into ``out``; a constant series fills the window with its value."""
    from geopipe_env.scenario.types import HourlySeries

    values = np.random.default_rng(2).random(8760)
    series = HourlySeries("year", values)
    for start in (-5, 0, 1, 5000, 8038, 8759, 8760, 20000):
        for hours in (1, 24, 722, 760, 9000):
            want = values[(start + np.arange(hours)) % 8760]
            window = series.window(start, hours)
            assert np.array_equal(window, want), (start, hours)
            window[0] = -1.0  # a copy: the scenario's series stays as it was
            out = np.full(hours, np.nan)
            assert series.window(start, hours, out=out) is out and np.array_equal(out, want), (start, hours)
    assert np.array_equal(series.values, np.random.default_rng(2).random(8760))
    assert np.array_equal(HourlySeries.constant(0.25).window(7, 5), np.full(5, 0.25))
