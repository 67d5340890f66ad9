"""Arrivals replayed from a bundled job trace (workload.arrival.process: replay) and GeoPipe-Trace-v0."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml
from test_loader import base

from geopipe_env.scenario import bundled
from geopipe_env.simulation.generator import replay_kinds, sample_world
from geopipe_env.scenario.loader import SCENARIO_DIR, ScenarioError, StrictYamlLoader, load_builtin, load_scenario
from geopipe_env.physics import pipeline
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import Placement

TRACE_WORLD = "geopipe-v0-philly"


@pytest.fixture(scope="module")
def scenario():
    return load_builtin(TRACE_WORLD)


def _flagship() -> dict:
    return yaml.load((SCENARIO_DIR / "geopipe-v0.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506


def test_the_bundled_trace_is_sorted_and_its_quantiles_rank_gpu_time():
    trace = bundled.job_trace("philly")
    assert len(trace) == 82_247 and trace.submit_s[0] == 0.0 and np.all(np.diff(trace.submit_s) >= 0)
    assert np.array_equal(trace.gpu_seconds, trace.duration_s * trace.num_gpus)
    q = trace.gpu_time_quantile
    assert 0.0 < q.min() and q.max() < 1.0
    order = np.argsort(trace.gpu_seconds, kind="stable")
    assert np.all(np.diff(q[order]) >= 0)  # more GPU-time, never a lower quantile
    with pytest.raises(KeyError, match="valid: philly"):
        bundled.job_trace("helios")


def test_an_episode_replays_consecutive_trace_gaps_at_the_chosen_mean(scenario):
    """Arrivals keep the ratios of the trace's gaps (a window of consecutive jobs) and their mean is the key's."""
    trace = bundled.job_trace("philly")
    gaps = np.diff(trace.submit_s)
    mean_s = scenario.workload.arrival.mean_interarrival_s
    for seed in range(5):
        arrivals = np.array([job.arrival_s for job in sample_world(scenario, np.random.default_rng(seed)).jobs])
        n = len(arrivals)
        assert n == scenario.workload.num_jobs and arrivals[-1] == pytest.approx(n * mean_s)
        replayed = np.diff(np.concatenate(([0.0], arrivals)))
        ratios = replayed / replayed.sum()
        windows = np.lib.stride_tricks.sliding_window_view(gaps, n)
        match = np.flatnonzero(np.all(np.isclose(windows / windows.sum(axis=1, keepdims=True), ratios, atol=1e-12), axis=1))
        assert match.size >= 1, seed


def test_same_seed_same_replay_and_seeds_differ(scenario):
    def jobs(seed):
        world = sample_world(scenario, np.random.default_rng(seed))
        return [(job.arrival_s, job.model, job.num_gpus, job.iterations) for job in world.jobs]

    assert jobs(3) == jobs(3)
    assert jobs(3) != jobs(4)


def test_over_the_whole_trace_each_kind_comes_as_often_as_a_poisson_workload_draws_it(scenario):
    """The GPU-time bands give every (class, model, dataset) its Poisson probability over all trace jobs, within the
    ties of equal GPU-times, and the trace's larger jobs become the kinds with more compute."""
    trace = bundled.job_trace("philly")
    kinds = replay_kinds(scenario.workload)
    probabilities = np.array([kind[0] for kind in kinds])
    assert probabilities.sum() == pytest.approx(1.0) and len(kinds) == 14
    upper = np.cumsum(probabilities)
    picks = np.minimum(np.searchsorted(upper, trace.gpu_time_quantile, side="right"), len(kinds) - 1)
    assert np.abs(np.bincount(picks, minlength=len(kinds)) / len(trace) - probabilities).max() < 0.005
    compute = [kind[1].params_b * kind[2].tokens for kind in kinds]
    assert compute == sorted(compute)
    assert np.corrcoef(picks, np.log(trace.gpu_seconds))[0, 1] > 0.9


def test_compute_orders_the_flagship_kinds_as_their_isolated_gpu_hours_do(scenario):
    """The replay's proxy (parameters × tokens) sorts the flagship's 14 kinds in the order of their GPU-hours alone
    in one region of their reference GPU type (ties of compute in file order)."""
    data = _flagship()
    rows = []  # (compute, GPU-hours, model, dataset) per class and dataset, in file order
    for job_class, loaded in zip(data["workload"]["job_classes"], scenario.workload.classes):
        for dataset in loaded.datasets:
            one = copy.deepcopy(data)
            one["workload"].update(num_jobs=1, job_classes=[{**job_class, "datasets": [dataset.name]}])
            world = sample_world(load_scenario(one), np.random.default_rng(0))
            (job,) = world.jobs
            ref = int(np.argmax(np.where(job.fits, world.num_gpus, -1)))
            iteration_s = ClusterSim(world).local_iteration_s_of(job, Placement((ref,), (job.num_stages,)))
            iterations = pipeline.iterations_for(dataset.tokens, 1.0, job.micro_batch_size, job.seq_len,
                                                 job.num_microbatches, job.data_parallel)
            (model,) = loaded.models
            rows.append((model.params_b * dataset.tokens, iteration_s * iterations * job.num_gpus / 3600.0, model, dataset))
    by_compute = sorted(rows, key=lambda row: row[0])
    assert [(m, d) for _, _, m, d in by_compute] == [(k[1], k[2]) for k in replay_kinds(scenario.workload)]
    gpu_hours = [h for _, h, _, _ in by_compute]
    assert gpu_hours == sorted(gpu_hours), gpu_hours


def _replay_world(**arrival) -> dict:
    data = base()
    data["workload"]["arrival"] = arrival
    return data


@pytest.mark.parametrize(
    "arrival, path, words",
    [
        ({"process": "replay", "mean_interarrival_h": 1.0}, "workload.arrival.source", "missing"),
        ({"process": "replay", "source": "philly"}, "workload.arrival.mean_interarrival_h", "missing"),
        ({"process": "replay", "source": "phily", "mean_interarrival_h": 1.0}, "workload.arrival.source", "did you mean 'philly'"),
        ({"process": "poisson", "source": "philly", "mean_interarrival_h": 1.0}, "workload.arrival.source", "only with process: replay"),
        ({"process": "batch", "mean_interarrival_h": 1.0}, "workload.arrival.mean_interarrival_h", "poisson or replay"),
    ],
)
def test_bad_replay_keys_get_one_line_naming_the_key(arrival, path, words):
    with pytest.raises(ScenarioError) as info:
        load_scenario(_replay_world(**arrival))
    assert info.value.key_path == path and words in str(info.value) and "\n" not in str(info.value)


def test_a_replay_longer_than_the_trace_and_a_batch_draw_are_refused():
    data = _replay_world(process="replay", source="philly", mean_interarrival_h=1.0)
    data["workload"]["num_jobs"] = 82_247
    with pytest.raises(ScenarioError, match="at most 82246") as info:
        load_scenario(data)
    assert info.value.key_path == "workload.num_jobs"
    data["workload"]["num_jobs"] = 6
    data["randomize"] = {"batch_arrival_prob": 0.5}
    with pytest.raises(ScenarioError, match="poisson") as info:
        load_scenario(data)
    assert info.value.key_path == "randomize.batch_arrival_prob"
    data["randomize"] = {"arrival_scale": [0.5, 2.0]}  # scales a replay's mean gap as it does a Poisson one
    scenario = load_scenario(data)
    last = [sample_world(scenario, np.random.default_rng(seed)).jobs[-1].arrival_s for seed in range(4)]
    assert len(set(last)) == 4


def test_the_trace_world_runs_an_episode_with_only_valid_actions():
    import gymnasium as gym

    env = gym.make("GeoPipe-Trace-v0")
    obs, info = env.reset(seed=0)
    done, steps = False, 0
    while not done:
        mask = info["action_mask"]
        action = int(np.flatnonzero(mask)[-1])
        obs, _, terminated, truncated, info = env.step(action)
        done, steps = terminated or truncated, steps + 1
    assert steps >= env.unwrapped.scenario.workload.num_jobs and env.unwrapped.invalid_actions == 0


def test_the_extract_agrees_with_the_published_philly_summary_where_both_count_the_same_thing():
    """GPUs per job (median and max) match AcmeTrace's row of the full Philly trace; the extract holds a subset of
    its GPU jobs (benchmarks/trace_stats.py prints every statistic side by side)."""
    ours = bundled.trace_statistics(bundled.job_trace("philly"))
    published = bundled.trace_summary("acme")["Philly"]
    assert ours["med_gpu_num"] == published["med_gpu_num"] == 1.0
    assert ours["max_gpu"] == published["max_gpu"] == 128.0
    assert ours["gpu_job_num"] < published["gpu_job_num"]
    assert ours["gap_cv"] > 10.0 and 0.05 < ours["zero_gap_share"] < 0.1


def test_replayed_episodes_keep_the_trace_burstiness_that_poisson_arrivals_lack(scenario):
    """Over 100 episodes, a replay has simultaneous arrivals (same-second submissions) and episodes whose gaps vary
    far more than exponential gaps do; the flagship's Poisson episodes have neither."""
    def statistics(world_scenario) -> tuple[float, float]:
        zero, cvs = [], []
        for seed in range(100):
            arrivals = np.array([job.arrival_s for job in sample_world(world_scenario, np.random.default_rng(seed)).jobs])
            gaps = np.diff(np.concatenate(([0.0], arrivals)))
            zero.append(np.mean(gaps == 0.0))
            cvs.append(gaps.std() / gaps.mean())
        return float(np.mean(zero)), float(np.quantile(cvs, 0.95))

    zero, cv95 = statistics(scenario)
    assert zero > 0.04 and cv95 > 1.8
    zero, cv95 = statistics(load_builtin("geopipe-v0"))
    assert zero == 0.0 and cv95 < 1.5
