"""GPU failures, checkpoints, restarts and repairs (scenario key ``failures``): the formulas, the process, and the
validation against the published failure rates and the Young/Daly analytic goodput."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import yaml

from geopipe_env.env import GeoPipeEnv
from geopipe_env.simulation.generator import sample_world
from geopipe_env.scenario.loader import SCENARIO_DIR, ScenarioError, StrictYamlLoader, load_builtin, load_scenario
from geopipe_env.physics import failures
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import JobStatus, Placement
from geopipe_env.base.units import SECONDS_PER_DAY

LLAMA3_RATE = 419 / (54 * 16_384)  # unexpected interruptions per GPU-day (Dubey et al., arXiv 2407.21783)
META_CLUSTER_RATE = 3e-3  # Kokolis et al., HPCA 2025: every cause that kills a job, per GPU-day


def _flagship_class(name: str) -> dict:
    data = yaml.load((SCENARIO_DIR / "geopipe-v0.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506
    return next(c for c in data["workload"]["job_classes"] if c["name"] == name)


def one_job_world(rate: float, epochs: float, **failure_keys) -> dict:
    """One 1,024-GPU Llama 3.1 405B job (the flagship's Meta shape) on OpenWebText in a region of 2,048 H100, so
    that a failed GPU is always replaced at once: the job's own failures and checkpoints set its goodput."""
    return {
        "name": "one-job", "horizon_h": 8000, "start_utc": "2023-01-01T00:00Z",
        "regions": [{"id": "a", "gpu": "H100", "num_gpus": 2048, "price_usd_per_kwh": 0.1}],
        "network": {"rule": "matrix", "intra_region": {"bandwidth_gbps": 400, "latency_ms": 0.05}},
        "workload": {"num_jobs": 1, "arrival": {"process": "batch"}, "datasets": ["openwebtext"], "epochs": epochs,
                     "job_classes": [_flagship_class("llama3-405b-meta")]},
        "failures": {"per_gpu_day": rate, "repair_h": 24.0, **failure_keys},
    }


def play(env: GeoPipeEnv, seed: int) -> dict:
    """An episode with the first valid action at every step; its metrics."""
    _, info = env.reset(seed=seed)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        done = terminated or truncated
    return env.episode_metrics()


def play_conserving_gpus(env: GeoPipeEnv, seed: int) -> tuple[int, int]:
    """An episode with the first valid action at every step, checking at each that free, held, under-repair and away
    GPUs make up every region; the most GPUs seen under repair and away at once."""
    _, info = env.reset(seed=seed)
    done, repairing, away = False, 0, 0
    while not done:
        sim = env.sim
        held = sum((rj.gpus for rj in sim.running.values()), np.zeros_like(sim.free_gpus))
        assert np.array_equal(sim.free_gpus + held + sim.repairing + sim.away, env.world.num_gpus)
        repairing, away = max(repairing, int(sim.repairing.sum())), max(away, int(sim.away.sum()))
        _, _, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        done = terminated or truncated
    return repairing, away


def test_checkpoint_and_young_daly_formulas():
    # 405B parameters × 14 bytes over 1,024 GPUs writing 1 Gbit/s each.
    assert failures.checkpoint_s(405.0, 1024, 1.0) == pytest.approx(405e9 * 14 * 8 / 1024e9)
    assert failures.mean_time_between_failures_s(3.0) == pytest.approx(SECONDS_PER_DAY / 3.0)
    assert math.isinf(failures.mean_time_between_failures_s(0.0))
    assert failures.young_daly_interval_s(50.0, 10_000.0) == pytest.approx(1000.0)
    # No checkpoints and no failures: nothing is wasted; the Young/Daly interval minimises the waste.
    assert failures.expected_goodput(math.inf, 0.0, 0.0, math.inf) == 1.0
    best = failures.young_daly_interval_s(44.0, 28_000.0)
    for other in (0.5 * best, 2.0 * best):
        assert failures.expected_goodput(other, 44.0, 30.0, 28_000.0) < failures.expected_goodput(best, 44.0, 30.0, 28_000.0)


@pytest.mark.parametrize(
    "change, path, words",
    [
        (lambda f: f.pop("repair_h"), "failures.repair_h", "missing"),
        (lambda f: f.update(per_gpu_day=-1.0), "failures.per_gpu_day", ">= 0"),
        (lambda f: f.update(checkpoint_interval_h=0), "failures.checkpoint_interval_h", "> 0"),
        (lambda f: f.update(repair_hours=1), "failures.repair_hours", "did you mean 'repair_h'"),
    ],
)
def test_bad_failure_keys_get_one_line_naming_the_key(change, path, words):
    data = one_job_world(META_CLUSTER_RATE, 1.0)
    change(data["failures"])
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    assert info.value.key_path == path and words in str(info.value) and "\n" not in str(info.value)


def test_failures_are_off_by_default_and_drawn_after_everything_else():
    """Failures are off unless a scenario asks (the flagship has none). With failures on, a seed draws the same jobs, prices and links as without, and the
    same failures every time."""
    flagship = load_builtin("geopipe-v0")
    assert flagship.failures is None and sample_world(flagship, np.random.default_rng(0)).failures is None
    data = yaml.load((SCENARIO_DIR / "geopipe-v0.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506
    data["failures"] = {"per_gpu_day": META_CLUSTER_RATE, "repair_h": 24.0}
    failing = load_scenario(data)
    plain, first, again = (sample_world(s, np.random.default_rng(7)) for s in (flagship, failing, failing))
    assert [j.arrival_s for j in plain.jobs] == [j.arrival_s for j in first.jobs]
    assert [j.iterations for j in plain.jobs] == [j.iterations for j in first.jobs]
    assert all(np.array_equal(a, b) for a, b in zip(first.failures, again.failures))
    # 1,344 GPUs at 3e-3 a GPU-day for 30 days: about 121 failures, spread over the regions by their GPUs.
    count = first.failures.times_s.shape[0]
    expected = META_CLUSTER_RATE * 1344 * 30
    assert abs(count - expected) < 4 * math.sqrt(expected)
    assert np.all(np.diff(first.failures.times_s) >= 0) and first.failures.times_s[-1] <= failing.horizon_s


def test_gpus_are_conserved_and_repaired():
    """At every event, free + held + under-repair GPUs make up each region; every failure's GPU comes back after
    the repair time; interrupted jobs wait again and finish with all their work done."""
    data = yaml.load((SCENARIO_DIR / "small.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506
    data["failures"] = {"per_gpu_day": 2.0, "repair_h": 6.0}  # far above any fleet: many failures in a short episode
    env = GeoPipeEnv(scenario=load_scenario(data))
    seen_repairs, _ = play_conserving_gpus(env, 3)
    sim = env.sim
    assert seen_repairs > 0 and sim.interruptions.sum() > 0
    assert np.all(sim.work_left[sim.status == JobStatus.DONE] == 0.0)


@pytest.mark.parametrize("rate, epochs, seeds", [(LLAMA3_RATE, 40.0, 4), (META_CLUSTER_RATE, 20.0, 2)])
def test_a_one_job_world_fails_at_the_published_rate_with_the_young_daly_goodput(rate, epochs, seeds):
    """The 1,024-GPU job is interrupted as often as rate × GPUs × its running days (within the 99% Poisson
    interval, over the seeds), and its goodput is within 2% of the Young/Daly analytic value."""
    env = GeoPipeEnv(scenario=load_scenario(one_job_world(rate, epochs)))
    interruptions, running_days = 0, 0.0
    for seed in range(seeds):
        metrics = play(env, seed)
        sim = env.sim
        assert metrics["jobs_completed"] == 1
        interruptions += int(sim.interruptions.sum())
        running_days += sum(sim.run_totals()[0].values()) / env.world.jobs[0].num_gpus / SECONDS_PER_DAY
        job = env.world.jobs[0]
        cost = failures.checkpoint_s(job.params / 1e9, job.num_gpus, 1.0)
        mtbf = failures.mean_time_between_failures_s(rate * job.num_gpus)
        expected = failures.expected_goodput(failures.young_daly_interval_s(cost, mtbf), cost, 30.0, mtbf)
        assert metrics["goodput"] == pytest.approx(expected, abs=0.02)
    mean = rate * 1024 * running_days
    assert mean > 10
    assert abs(interruptions - mean) < 2.58 * math.sqrt(mean) + 1  # 99% normal approximation of the Poisson


def test_a_fixed_checkpoint_interval_and_no_failures():
    """A stated interval is used as is (more waste than Young/Daly's); a rate of zero interrupts nothing and
    checkpoints nothing, so the goodput is 1."""
    env = GeoPipeEnv(scenario=load_scenario(one_job_world(0.0, 1.0)))
    metrics = play(env, 0)
    assert metrics["goodput"] == 1.0 and metrics["interruptions_per_job"] == 0.0
    hourly = GeoPipeEnv(scenario=load_scenario(one_job_world(META_CLUSTER_RATE, 5.0, checkpoint_interval_h=0.1)))
    daly = GeoPipeEnv(scenario=load_scenario(one_job_world(META_CLUSTER_RATE, 5.0)))
    assert play(hourly, 0)["goodput"] < play(daly, 0)["goodput"]


def test_a_checkpoint_holds_the_weights_and_the_optimizer_state_the_job_keeps():
    """14 bytes a parameter with fp32 optimizer state (bf16 weights, fp32 master weights and two moments), 6 with
    bf16 state (the weights and two bf16 moments): the same job's checkpoint then takes 6/14 of the time."""
    costs = {}
    for state in ("fp32", "bf16"):
        data = one_job_world(META_CLUSTER_RATE, 1.0)
        data["workload"]["job_classes"][0]["optimizer_state"] = state
        world = sample_world(load_scenario(data), np.random.default_rng(0))
        sim = ClusterSim(world)
        sim.step_event()  # the job's arrival
        job = world.jobs[0]
        assert job.optimizer_state == state
        sim.launch(0, Placement((0,), (job.num_stages,)))
        costs[state] = sim._runs[0].checkpoint_s
    assert costs["fp32"] == pytest.approx(405e9 * 14 * 8 / (1024 * 1e9), rel=1e-12)
    assert costs["bf16"] == pytest.approx(costs["fp32"] * 6 / 14, rel=1e-12)


def test_an_interrupted_job_keeps_its_last_checkpoint():
    """Right after an interruption the job waits again, with its work at launch less the whole iterations its
    checkpoints saved; the computing it lost is less than one checkpoint cycle."""
    scenario = load_scenario(one_job_world(META_CLUSTER_RATE, 5.0))
    world = sample_world(scenario, np.random.default_rng(1))
    sim = ClusterSim(world)
    sim.step_event()  # the job's arrival
    job = world.jobs[0]
    sim.launch(0, Placement((0,), (job.num_stages,)))
    before = float(sim.work_left[0])
    while sim.interruptions[0] == 0:
        assert sim.step_event()
    assert sim.status[0] == JobStatus.WAITING and sim.waiting == [0] and not sim.running
    left = float(sim.work_left[0])
    assert left == math.floor(left) and 0 < left <= before
    cost = failures.checkpoint_s(job.params / 1e9, job.num_gpus, scenario.failures.checkpoint_gbps)
    cycle = failures.young_daly_interval_s(cost, failures.mean_time_between_failures_s(META_CLUSTER_RATE * job.num_gpus))
    assert 0.0 <= sim.run_gpu_seconds["lost_s"] / job.num_gpus < cycle + cost
    assert sim.run_gpu_seconds["restart_s"] == 0.0  # a first run has no restart


def test_the_evaluation_reports_goodput_for_a_world_whose_gpus_fail(tmp_path, capsys):
    """geopipe-evaluate on a scenario file with failures prints a goodput table and writes the failure metrics to
    results.csv; on a world where nothing fails it prints no such table."""
    from geopipe_evaluation.evaluate_cli import main

    data = {"extends": "small", "name": "small-failing", "failures": {"per_gpu_day": 2.0, "repair_h": 6.0}}
    path = tmp_path / "small-failing.yaml"
    path.write_text(yaml.safe_dump(data))
    args = ["--policies", "bace-pipe", "sjf", "--seeds", "2", "--workers", "1", "--no-plots"]
    assert main(["--env", str(path), *args, "--out", str(tmp_path / "failing")]) == 0
    out = capsys.readouterr().out
    assert "| policy | goodput | GPU-h lost to failures | interruptions per job |" in out
    assert "small-failing.yaml: paired goodput difference, bace-pipe − policy, same seeds" in out
    header = (tmp_path / "failing" / "results.csv").read_text().splitlines()[0].split(",")
    assert {"goodput", "gpu_hours_lost_to_failures", "interruptions_per_job"} <= set(header)
    results = json.loads((tmp_path / "failing" / "results.json").read_text())
    (by_subject,) = results["paired_goodput_differences"].values()
    assert by_subject["bace-pipe"]["sjf"]["n"] == 2
    assert main(["--env", "GeoPipe-Small-v0", *args, "--out", str(tmp_path / "plain")]) == 0
    assert "goodput" not in capsys.readouterr().out
    assert "paired_goodput_differences" not in json.loads((tmp_path / "plain" / "results.json").read_text())


def test_gpu_hours_count_only_the_runs():
    """With failures, a job's held GPU-hours are those of its runs, not the time it waited between them: every run's
    GPU-seconds (restart, saved, checkpoint, lost) add up to what the jobs held."""
    data = yaml.load((SCENARIO_DIR / "small.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506
    data["failures"] = {"per_gpu_day": 2.0, "repair_h": 6.0}
    env = GeoPipeEnv(scenario=load_scenario(data))
    metrics = play(env, 3)
    by_use, held, cross = env.sim.run_totals()
    assert env.sim.interruptions.sum() > 0
    assert float(held.sum()) == pytest.approx(sum(by_use.values()))
    assert np.all(cross <= held) and 0.0 <= metrics["cross_region_gpu_share"] <= 1.0


def _losing(notice_s: float) -> GeoPipeEnv:
    data = yaml.load((SCENARIO_DIR / "small.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506
    data["failures"] = {"per_gpu_day": 0.0, "repair_h": 1.0}
    data["capacity_loss"] = {"per_region_day": 24.0, "fraction": 0.5, "duration_h": 12.0, "notice_s": notice_s}
    return GeoPipeEnv(scenario=load_scenario(data))


def test_capacity_loss_takes_free_gpus_first_then_the_newest_jobs_and_gives_them_back():
    """A region that loses half its GPUs gives free ones first; the jobs that must stop are the last launched;
    the GPUs come back after the loss's duration; GPUs are conserved at every step. With a notice that covers a
    checkpoint, stopped jobs lose no work (only restarts); with none they lose their work since a checkpoint."""
    lost = {}
    for notice in (3600.0, 0.0):
        env = _losing(notice)
        _, seen_away = play_conserving_gpus(env, 2)
        sim = env.sim
        assert seen_away > 0 and sim.interruptions.sum() > 0 and sim.repairing.sum() == 0
        lost[notice] = sim.run_gpu_seconds["lost_s"]
    assert lost[3600.0] == 0.0 and lost[0.0] > 0.0


def test_the_observation_shows_gpus_out_of_service_and_work_lost():
    """The regions' ``in_service`` is the share of GPUs neither away nor under repair; a queued job's ``lost_work``
    is the computing time its interrupted runs lost over its in-region duration, and its duration feature is that of
    the work it has left. Both move in a world whose GPUs leave, and are 1 and 0 in one whose GPUs never do."""
    from geopipe_env.base.tables import Q_LOG_LOCAL_DURATION, Q_LOST_WORK, QUEUE_FEATURES, R_IN_SERVICE, REGION_FEATURES

    def check(env: GeoPipeEnv, seed: int) -> tuple[float, float]:
        obs, info = env.reset(seed=seed)
        least_in_service, most_lost = 1.0, 0.0
        done = False
        while not done:
            sim, n = env.sim, env.world.num_regions
            regions = obs["regions"].reshape(-1, len(REGION_FEATURES))
            want = (env.world.num_gpus - sim.repairing - sim.away) / env.world.num_gpus
            np.testing.assert_allclose(regions[:n, R_IN_SERVICE], want, rtol=1e-6)
            queue = obs["queue"].reshape(-1, len(QUEUE_FEATURES))
            for slot, jid in enumerate(sim.waiting[: env.queue_slots]):
                job = env.world.jobs[jid]
                lost = sim.lost_s[jid] / (job.iterations * job.local_iteration_s)
                assert queue[slot, Q_LOST_WORK] == pytest.approx(lost, rel=1e-6, abs=1e-9)
                left = math.log(max(sim.work_left[jid], 1.0) * job.local_iteration_s / env.t_local_s)
                assert queue[slot, Q_LOG_LOCAL_DURATION] == pytest.approx(left, rel=1e-5, abs=1e-5)
                most_lost = max(most_lost, float(queue[slot, Q_LOST_WORK]))
            least_in_service = min(least_in_service, float(regions[:n, R_IN_SERVICE].min()))
            obs, _, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
            done = terminated or truncated
        return least_in_service, most_lost

    least, lost = check(_losing(0.0), 2)
    assert least <= 0.5 and lost > 0.0  # losses of half a region, which may overlap
    assert check(GeoPipeEnv(scenario="small"), 2) == (1.0, 0.0)


def test_capacity_loss_needs_failures_and_checks_its_keys():
    data = yaml.load((SCENARIO_DIR / "small.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506
    data["capacity_loss"] = {"per_region_day": 1.0, "fraction": 0.5, "duration_h": 1.0}
    with pytest.raises(ScenarioError, match="without failures") as info:
        load_scenario(data)
    assert info.value.key_path == "capacity_loss"
    data["failures"] = {"per_gpu_day": 0.0, "repair_h": 1.0}
    data["capacity_loss"]["fraction"] = 1.5
    with pytest.raises(ScenarioError, match="<= 1") as info:
        load_scenario(data)
    assert info.value.key_path == "capacity_loss.fraction"


def test_a_degraded_link_keeps_its_share_for_the_duration_both_ways():
    """Each degradation drops its link to ``factor`` of its bandwidth in both directions and restores it after the
    duration; overlapping ones do not compound; a world with degradations runs on the compiled backend too."""
    data = yaml.load((SCENARIO_DIR / "small.yaml").read_text(), Loader=StrictYamlLoader)  # noqa: S506
    data["network"]["degradation"] = {"per_link_day": 6.0, "factor": 0.25, "duration_h": 3.0}
    scenario = load_scenario(data)
    assert not scenario.network.fixed_line_rates and not scenario.network.hourly_line_rates
    world = sample_world(scenario, np.random.default_rng(4))
    assert world.degradations.times_s.size > 0
    sim = ClusterSim(world)
    base = world.bandwidth_gbps
    ratios = set()
    while sim.step_event() and sim.now_s < world.degradations.times_s[-1] + 4 * 3600:
        ratio = np.divide(sim.capacity_gbps, base, out=np.ones_like(base), where=base > 0)
        assert np.allclose(ratio, ratio.T)
        assert set(np.round(np.unique(ratio), 12)) <= {0.25, 1.0}
        ratios |= set(np.round(np.unique(ratio), 12))
        assert np.array_equal(ratio < 1.0, (sim._degraded > 0) & (base > 0))
    assert ratios == {0.25, 1.0}
    assert np.array_equal(sim.capacity_gbps, base) and not sim._degraded.any()  # all restored
    env = GeoPipeEnv(scenario=scenario)
    assert type(env._backend).__name__ == "CompiledBackend"
    assert play(env, 0)["jobs_completed"] >= 1


def test_the_faults_world_is_the_flagship_with_the_published_rates():
    """GeoPipe-Faults-v0 is GeoPipe-v0 plus failures and capacity loss: the same regions, links and job classes, each
    GPU type's rate from its source (H100: Llama 3's interruptions; A100: the mean of Meta's two clusters' node
    failures, 8 GPUs a node), and spot capacity loss of 5% a month in events of one zone of three. Its episodes keep
    GPUs conserved, see failures and capacity losses, and give the shipped flagship agent the observation it was
    trained on."""
    import gymnasium as gym

    faults, flagship = load_builtin("geopipe-v0-faults"), load_builtin("geopipe-v0")
    rates = {region.gpu.name: region.gpu.failures_per_gpu_day for region in faults.regions}
    without_rates = [dataclasses.replace(r, gpu=dataclasses.replace(r.gpu, failures_per_gpu_day=None))
                     for r in faults.regions]
    assert without_rates == list(flagship.regions)
    assert all(np.array_equal(getattr(faults.network, name), getattr(flagship.network, name))
               for name in ("bandwidth_gbps", "latency_s")) and faults.network.degradation is None
    assert faults.workload == flagship.workload and flagship.failures is None and flagship.capacity_loss is None
    assert rates["H100"] == pytest.approx(LLAMA3_RATE, rel=0.01)
    assert rates["A100"] == pytest.approx((6.50 + 2.34) / 2 / 1000 / 8, rel=0.01)
    loss = faults.capacity_loss
    assert loss.per_region_day * loss.fraction * 30 == pytest.approx(0.05, rel=0.01) and loss.notice_s == 120.0
    env = gym.make("GeoPipe-Faults-v0")
    assert env.observation_space == gym.make("GeoPipe-v0").observation_space
    interruptions = 0.0
    for seed in range(3):
        play_conserving_gpus(env.unwrapped, seed)
        interruptions += env.unwrapped.episode_metrics()["interruptions_per_job"]
    assert interruptions > 0.0
