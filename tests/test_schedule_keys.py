"""Scenario keys for schedules, virtual stages, context parallelism, recompute and calibrated compute: what the
loader accepts, the one-line errors it gives, and the physics a world then has."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from reference import PythonBackend
from geopipe_env.env import GeoPipeEnv
from geopipe_env.simulation.generator import sample_world
from geopipe_env.scenario.loader import SCENARIO_DIR, ScenarioError, load_scenario
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import JobStatus, Placement


def world_dict(**workload) -> dict:
    """Two linked H100 regions and one GPT-3-shaped job class; calibrated compute (no mfu)."""
    return {
        "name": "schedules", "horizon_h": 240, "start_utc": "2023-03-01T00:00Z",
        "regions": [{"id": "a", "gpu": "H100", "num_gpus": 256, "price_usd_per_kwh": 0.1},
                    {"id": "b", "gpu": "H100", "num_gpus": 256, "price_usd_per_kwh": 0.2}],
        "network": {"rule": "matrix", "intra_region": {"bandwidth_gbps": 400, "latency_ms": 0.05},
                    "matrix": {"a": {"b": {"bandwidth_gbps": 50.0, "latency_ms": 20.0}}}},
        "workload": {"num_jobs": 4, "arrival": {"process": "batch"}, "models": ["gpt3-175b"],
                     "datasets": ["wikitext-103"], "gpus_per_stage": 4, "pipeline_stages": 8, "data_parallel": 2,
                     "global_batch_size": 64, "seq_len": 2048, **workload},
    }


def one_job(**workload):
    world = sample_world(load_scenario(world_dict(**workload)), np.random.default_rng(0))
    return world, world.jobs[0]


@pytest.mark.parametrize("workload, key, words", [
    ({"pipeline_schedule": "zb-h2"}, "workload.pipeline_schedule", "zb-h1"),
    ({"pipeline_schedule": "interleaved-1f1b"}, "virtual_stages", "at least 2"),
    ({"pipeline_schedule": "interleaved-1f1b", "virtual_stages": 5}, "workload.virtual_stages", "do not divide"),
    ({"pipeline_schedule": "interleaved-1f1b", "virtual_stages": 2, "global_batch_size": 20},
     "workload.num_microbatches", "multiple of 8"),
    ({"pipeline_schedule": "chimera", "pipeline_stages": 7, "gpus_per_stage": 8}, "workload.pipeline_stages", "even"),
    ({"pipeline_schedule": "1f1b", "virtual_stages": 2}, "workload.virtual_stages", "takes none"),
    ({"pipeline_schedule": "gpipe", "global_batch_size": 2048}, "workload.pipeline_stages", "do not fit"),
    ({"pipeline_schedules": ["1f1b", "1f1b"]}, "workload.pipeline_schedules", "twice"),
    ({"pipeline_schedule": "zbv", "pipeline_schedules": ["zbv"]}, "workload.pipeline_schedules", "together"),
    ({"context_parallel": 0}, "workload.context_parallel", ">= 1"),
    ({"recompute": "yes"}, "workload.recompute", "true or false"),
    ({"optimizer_state": "fp16"}, "workload.optimizer_state", "bf16"),
])
def test_a_shape_no_schedule_can_run_is_one_line_naming_the_key(workload, key, words):
    with pytest.raises(ScenarioError) as error:
        load_scenario(world_dict(**workload))
    assert error.value.key_path == key and words in str(error.value)
    assert "\n" not in str(error.value)


def test_without_mfu_every_gpu_needs_a_kernel_efficiency():
    d = world_dict()
    d["regions"][0]["gpu"] = "A6000"
    with pytest.raises(ScenarioError, match="A6000") as error:
        load_scenario(d)
    assert error.value.key_path == "mfu"
    d["gpus"] = {"A6000": {"kernel_efficiency": 0.5}}
    assert load_scenario(d).regions[0].gpu.kernel_efficiency == 0.5
    d.pop("gpus")
    d["mfu"] = 0.4
    assert load_scenario(d).mfu == 0.4


def test_calibrated_compute_counts_attention_and_the_gpu_efficiency():
    """A stage's forward is (2·(P/S)·b·s + 4·(L/S)·b·s²·h) / (t·c · peak · η); with recompute the backward is three
    forwards, without it two; with mfu set, two and the old formula."""
    world, job = one_job()
    flops = 2 * 175e9 / 8 * 2048 + 4 * 96 / 8 * 2048 * 2048 * 12288
    assert job.forward_s[0] == pytest.approx(flops / (4 * 989e12 * world.kernel_efficiency[0]), rel=1e-12)
    assert job.backward_ratio == 3.0
    assert one_job(recompute=False, gpus_per_stage=8)[1].backward_ratio == 2.0
    d = world_dict()
    d["mfu"] = 0.4
    legacy = sample_world(load_scenario(d), np.random.default_rng(0)).jobs[0]
    assert legacy.backward_ratio == 2.0
    assert legacy.forward_s[0] == pytest.approx(2 * 175e9 / 8 * 2048 / (4 * 989e12 * 0.4), rel=1e-12)


def test_context_parallel_splits_a_stage_over_more_gpus():
    """c context-parallel ranks: t·c·d GPUs a stage, 1/c of the compute each, a message A/c inside a region and
    d·A across; the all-reduce spans d·c ranks."""
    _, plain = one_job()
    _, split = one_job(context_parallel=2)
    assert split.stage_gpus == 2 * plain.stage_gpus and split.num_gpus == 2 * plain.num_gpus
    np.testing.assert_allclose(split.forward_s, plain.forward_s / 2, rtol=1e-12)
    assert split.intra_message_bytes == plain.activation_bytes / 2
    assert split.wan_message_bytes == plain.wan_message_bytes
    assert split.allreduce_s > plain.allreduce_s


def test_a_job_with_several_schedules_runs_the_fastest_that_fits():
    """Every accepted schedule that fits the placement is timed at line rate; the fastest is chosen, and the
    candidate says which; its iteration time is that schedule's."""
    world, job = one_job(pipeline_schedules=["1f1b", "zbv", "crosspipe-greedy"])
    sim = ClusterSim(world)
    for placement in (Placement((0,), (8,)), Placement((0, 1), (4, 4))):
        times = []
        for name in job.schedules:
            alone = copy.copy(job)
            object.__setattr__(alone, "__dict__", {**job.__dict__, "schedules": (name,)})
            times.append(ClusterSim(world).estimate(alone, placement).iteration_s)
        est = sim.estimate(job, placement)
        assert est.schedule == int(np.argmin(times))
        assert est.iteration_s == min(times)


def test_the_backends_agree_on_a_world_of_every_schedule():
    """The compiled candidate table (executor layouts timed in compiled code) and the Python one give the same
    observations, rewards and candidates over whole episodes of a world using every schedule."""
    d = yaml.safe_load((SCENARIO_DIR / "geopipe-abundant.yaml").read_text())
    d.pop("mfu")
    d["workload"]["num_jobs"] = 24
    chosen = [["1f1b"], ["chimera"], ["1f1b", "zb-h1", "crosspipe-greedy"], ["zbv"], ["interleaved-1f1b"],
              ["hanayo"], ["crosspipe-greedy"], ["gpipe"]]
    for job_class, names in zip(d["workload"]["job_classes"], chosen):
        job_class["pipeline_schedules"] = names
        if names[0] in ("interleaved-1f1b", "hanayo"):
            job_class["virtual_stages"] = 2
    d["workload"]["job_classes"][-1].update(pipeline_stages=16, recompute=True)
    scenario = load_scenario(d)
    wan_bytes = 0.0
    for seed in range(2):
        compiled, python = GeoPipeEnv(scenario), GeoPipeEnv(scenario)
        python._backend = PythonBackend(python.strategies)
        (obs_c, info_c), (obs_p, info_p) = compiled.reset(seed=seed), python.reset(seed=seed)
        rng = np.random.default_rng(seed)
        while True:
            np.testing.assert_array_equal(info_c["action_mask"], info_p["action_mask"])
            for key in obs_c:
                np.testing.assert_allclose(obs_c[key], obs_p[key], rtol=1e-9, atol=1e-12, err_msg=key)
            for slot in range(compiled.queue_slots):
                for k in range(compiled.num_strategies):
                    got, want = compiled.candidate(slot, k), python.candidate(slot, k)
                    assert (got is None) == (want is None)
                    if got is not None:
                        assert got.schedule == want.schedule and got.iteration_s == pytest.approx(want.iteration_s, rel=1e-12)
            action = int(rng.choice(np.flatnonzero(info_c["action_mask"])))
            obs_c, r_c, done, cut, info_c = compiled.step(action)
            obs_p, r_p, _, _, info_p = python.step(action)
            assert r_c == pytest.approx(r_p, rel=1e-9)
            if done or cut:
                break
        wan_bytes += compiled.sim.wan_bytes
    assert wan_bytes > 0.0  # pipelines crossed regions: WAN links carried the executor's messages


def test_an_interleaved_pipeline_over_three_regions_wraps_on_a_link_of_its_own():
    """Interleaved 1F1B's last stage sends back to its first: over two regions on the hop's link the other way,
    over three on the link from the last region to the first, which then carries the job's traffic too."""
    d = world_dict(pipeline_schedule="interleaved-1f1b", virtual_stages=2, pipeline_stages=6, gpus_per_stage=8,
                   data_parallel=1, global_batch_size=12)
    d["regions"].append({"id": "c", "gpu": "H100", "num_gpus": 256, "price_usd_per_kwh": 0.3})
    d["network"]["matrix"] = {"a": {"b": {"bandwidth_gbps": 50.0, "latency_ms": 20.0},
                                    "c": {"bandwidth_gbps": 50.0, "latency_ms": 30.0}},
                              "b": {"c": {"bandwidth_gbps": 50.0, "latency_ms": 20.0}}}
    world = sample_world(load_scenario(d), np.random.default_rng(0))
    sim, job = ClusterSim(world), world.jobs[0]
    two = sim.layout(job, Placement((0, 1), (3, 3)))
    three = sim.layout(job, Placement((0, 1, 2), (2, 2, 2)))
    assert set(two.links) == {(0, 1), (1, 0)}
    assert set(three.links) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2)}
    # Per micro-batch: v = 2 messages down each hop and back, and v − 1 = 1 over the wrap each way.
    assert three.wan_bytes_per_iteration == pytest.approx(12 * job.wan_message_bytes * (2 * 2 * 2 + 2 * 1))
    assert two.wan_bytes_per_iteration == pytest.approx(12 * job.wan_message_bytes * (2 * 2 + 2 * 1))
    # Launched, the job loads all six links: its hops both ways and the wrap both ways (2·R links on R regions).
    while job.job_id not in sim.waiting:
        sim.step_event()
    sim.launch(job.job_id, Placement((0, 1, 2), (2, 2, 2)))
    assert sim.status[job.job_id] == JobStatus.RUNNING
    loaded = {(a, b) for a in range(3) for b in range(3) if sim.link_load_gbps[a, b] > 0.0}
    assert loaded == set(three.links)


def test_a_class_no_fleet_can_hold_is_one_line_naming_it():
    """A job class larger than all the regions together is refused at load time, naming the class; one that only
    the whole fleet holds loads."""
    d = world_dict()
    d["workload"]["job_classes"] = [{"name": "small", "data_parallel": 2},
                                    {"name": "frontier", "data_parallel": 17, "num_microbatches": 4}]  # 544 GPUs > 512
    with pytest.raises(ScenarioError) as error:
        load_scenario(d)
    assert error.value.key_path == "workload.models[0]"  # the class inherits the workload's model
    assert "job class 'frontier'" in str(error.value) and "\n" not in str(error.value)
    d["workload"]["job_classes"][1]["data_parallel"] = 16  # 512 GPUs: both regions, whole
    world = sample_world(load_scenario(d), np.random.default_rng(0))
    assert max(j.num_gpus for j in world.jobs) == int(world.num_gpus.sum())


def test_bace_pipe_grows_a_path_for_a_job_no_region_holds_and_no_link_admits():
    """A job larger than every region whose messages no link could admit even idle would wait forever under the
    admission test; BACE-Pipe places it across regions instead, and the compiled twin agrees."""
    d = world_dict(num_jobs=1, data_parallel=16, global_batch_size=256)  # 512 GPUs: more than either region
    d["network"]["matrix"]["a"]["b"]["bandwidth_gbps"] = 5.0  # 2 × 8 × 50 MB per message: 1.3 s, far over t_f + t_b
    scenario = load_scenario(d)
    for backend in ("compiled", "python"):
        env = GeoPipeEnv(scenario, strategies=("bace-pipe",))
        if backend == "python":
            env._backend = PythonBackend(env.strategies)
        obs, info = env.reset(seed=0)
        info_c = env.candidate(0, 0)
        assert info_c is not None and len(info_c.placement.regions) == 2, backend


def test_episode_metrics_count_cross_region_gpu_hours_and_unfinished_jobs():
    """``cross_region_gpu_share`` is the GPU-hours of jobs placed across regions over all launched jobs' (to their
    finish or the episode's end); ``avg_time_in_system_h`` counts every arrived job to its finish or the end."""
    d = world_dict(num_jobs=2, data_parallel=16, global_batch_size=256)  # each job takes both regions whole
    env = GeoPipeEnv(load_scenario(d), strategies=("cr-ldf",))
    obs, info = env.reset(seed=0)
    obs, _, done, cut, info = env.step(0)  # the first job, across both regions; the second waits for it
    while not (done or cut):
        obs, _, done, cut, info = env.step(0 if info["action_mask"][0] else env.wait_action)
    m = info["episode_metrics"]
    assert m["cross_region_job_fraction"] == 1.0 and m["cross_region_gpu_share"] == 1.0
    jobs = env.world.jobs
    in_system = [env.sim.finish_s[j.job_id] - j.arrival_s for j in jobs]
    assert m["avg_time_in_system_h"] == pytest.approx(np.mean(in_system) / 3600, rel=1e-12)
    assert m["avg_time_in_system_h"] == pytest.approx(m["avg_jct_h"], rel=1e-12)


def test_a_bf16_optimizer_state_admits_a_shape_an_fp32_state_does_not():
    """The state is (4 + o/(d·c))·P/S: o = 12 bytes per parameter with fp32 state, 4 with bf16. GPT-3 175B on 4
    stages of TP 8 with one replica needs 16·175e9/4/8 = 87.5 GB of state per GPU (more than 72 usable) with fp32
    state and 8·175e9/4/8 = 43.75 GB with bf16; the world's job keeps its stage count and times alike."""
    shape = {"pipeline_stages": 4, "gpus_per_stage": 8, "data_parallel": 1, "global_batch_size": 16}
    with pytest.raises(ScenarioError) as error:
        load_scenario(world_dict(**shape))
    assert error.value.key_path == "workload.pipeline_stages" and "do not fit" in str(error.value)
    world, job = one_job(**shape, optimizer_state="bf16")
    assert job.num_stages == 4
    assert load_scenario(world_dict(**shape, optimizer_state="bf16")).workload.shape.optimizer_state == "bf16"
    fp32_world, fp32_job = one_job()
    bf16_world, bf16_job = one_job(optimizer_state="bf16")
    assert bf16_job.forward_s.tolist() == fp32_job.forward_s.tolist()

