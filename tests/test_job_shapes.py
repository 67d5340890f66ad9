"""Job shapes (tensor, pipeline and data parallelism): single jobs checked against numbers computed by hand.

The world: two regions of 8 "T" GPUs (100 TFLOPS, 80 GB, 400 W busy, 100 W idle), MFU 0.5, a 10 Gbit/s, 10 ms WAN
link and a 100 Gbit/s, 0 ms intra-region link. The job: 3e9 parameters, 4 layers, hidden 1000, b = 1, s = 1000,
t = 2 GPUs per stage, d = 2 replicas, S = 2 stages, global batch 4 sequences, so M = 4 / (1·2) = 2.

  t_f = 2·(3e9/2)·1·1000 / (2·100e12·0.5) = 0.03 s, t_b = 0.06 s, t = t_f + t_b = 0.09 s.
  A = 1·1000·1000·2 = 2e6 bytes per replica and micro-batch; on a WAN boundary d·A = 4e6 bytes each way.
  1F1B with S = 2, M = 2: T_pipe = 3t + 2y with y = x + l the hop's transfer plus latency (stage 0 runs F0 F1 B0
  B1, and B1 waits for the second round trip; see tests/test_toy_episode.py for the trace).
    one region: x = A·8/100e9 = 1.6e-4 s, l = 0  → T_pipe = 0.27 + 3.2e-4 = 0.27032 s;
    two regions: x = d·A·8/10e9 = 3.2e-3 s, l = 0.01 s → T_pipe = 0.27 + 0.0264 = 0.2964 s.
  All-reduce after each iteration: each GPU holds 2·P/(S·t) = 1.5e9 bytes of gradients; a ring over d = 2 sends
  2(d−1)/d = 1 of them: 1.5e9·8/100e9 = 0.12 s (latency 0). So T_iter = 0.39032 s (one region), 0.4164 s (two).
  Iterations: 4e6 tokens / (b·s·M·d = 4000 tokens per iteration) = 1000.
  Demand per WAN hop = d·A·8 / t = 3.2e7 / 0.09 bit/s = 0.35556 Gbit/s (d = 1: 0.17778).
"""

from __future__ import annotations

import numpy as np
import pytest

from geopipe_env.simulation.generator import sample_world
from geopipe_env.scenario.loader import ScenarioError, load_scenario
from geopipe_env.physics import pipeline
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import Placement

TOKENS = 4e6


def world_dict(**workload) -> dict:
    """The two-region world of the module docstring, with one job of the given workload keys."""
    return {
        "name": "shapes",
        "horizon_h": 24,
        "mfu": 0.5,
        "gpus": {"T": {"tflops": 100, "memory_gb": 80, "busy_watts": 400, "idle_watts": 100}},
        "regions": [
            {"id": "a", "gpu": "T", "num_gpus": 8, "price_usd_per_kwh": 0.1},
            {"id": "b", "gpu": "T", "num_gpus": 8, "price_usd_per_kwh": 0.3},
        ],
        "network": {
            "rule": "matrix",
            "matrix": {"a": {"b": {"bandwidth_gbps": 10, "latency_ms": 10}}},
            "intra_region": {"bandwidth_gbps": 100, "latency_ms": 0},
        },
        "workload": {
            "num_jobs": 1,
            "arrival": {"process": "batch"},
            "models": [{"name": "m3b", "params_b": 3, "layers": 4, "hidden": 1000}],
            "datasets": [{"name": "d", "tokens": TOKENS}],
            "micro_batch_size": 1,
            "seq_len": 1000,
            "gpus_per_stage": 2,
            "data_parallel": 2,
            "global_batch_size": 4,
            "pipeline_stages": 2,
            **workload,
        },
    }


def run_alone(placement: Placement, **workload) -> ClusterSim:
    """Launch the one job on ``placement`` at t = 0 and run the simulator to its end."""
    world = sample_world(load_scenario(world_dict(**workload)), np.random.default_rng(0))
    sim = ClusterSim(world)
    sim.step_event()  # the arrival
    sim.launch(0, placement)
    while sim.step_event():
        pass
    return sim


ONE_REGION = Placement((0,), (2,))
TWO_REGIONS = Placement((0, 1), (1, 1))


def test_shape_fields_follow_the_keys():
    """M = global batch / (b·d), the job holds S·t·d GPUs, and its iterations see d replicas' tokens."""
    job = sample_world(load_scenario(world_dict()), np.random.default_rng(0)).jobs[0]
    assert job.num_microbatches == 2 and job.num_stages == 2 and job.data_parallel == 2
    assert job.num_gpus == 8 and job.stage_gpus == 4
    assert job.iterations == 1000
    assert job.wan_message_bytes == 4e6
    assert job.allreduce_s == pytest.approx(0.12, rel=1e-12)


def test_jct_alone_in_one_region():
    """Alone in one region the job ends at 1000 iterations × (0.27032 + 0.12) s = 390.32 s, with no WAN bytes."""
    sim = run_alone(ONE_REGION)
    assert sim.finish_s[0] == pytest.approx(1000 * 0.39032, rel=1e-12)
    assert sim.wan_bytes == 0.0
    assert sim.comm_slowdown()[0] == pytest.approx(1.0, rel=1e-12)
    assert sim.max_link_utilization == 0.0


def test_jct_wan_bytes_and_slowdown_across_two_regions():
    """Across the WAN: 1000 × 0.4164 s; 2·M·d·A = 1.6e7 bytes per iteration on the one boundary; slowdown
    0.4164 / 0.39032; link load = demand 0.35556 Gbit/s on a 10 Gbit/s link."""
    sim = run_alone(TWO_REGIONS)
    assert sim.finish_s[0] == pytest.approx(1000 * 0.4164, rel=1e-12)
    assert sim.wan_bytes == pytest.approx(1000 * 2 * 2 * 2 * 2e6, rel=1e-12)
    assert sim.comm_slowdown()[0] == pytest.approx(0.4164 / 0.39032, rel=1e-12)
    assert sim.max_link_utilization == pytest.approx(3.2e7 / 0.09 / 10e9, rel=1e-12)


def test_allreduce_time_closed_form():
    """Ring all-reduce: 2(d−1)/d · 2P/(S·t) · 8 / bw + 2(d−1)·ℓ, and zero for one replica."""
    got = pipeline.allreduce_time_s(3e9, 2, 2, 4, 100.0, 1e-5)
    assert got == pytest.approx(2 * 3 / 4 * (2 * 3e9 / 4) * 8 / 100e9 + 2 * 3 * 1e-5, rel=1e-12)
    assert pipeline.allreduce_time_s(3e9, 2, 2, 1, 100.0, 1e-5) == 0.0
    assert pipeline.allreduce_time_s(3e9, 2, 2, 2, 100.0, 0.0) == pytest.approx(0.12, rel=1e-12)


@pytest.mark.parametrize("replicas, demand_gbps", [(1, 1.6e7 / 0.09 / 1e9), (2, 3.2e7 / 0.09 / 1e9)])
def test_demand_per_hop_scales_with_replicas(replicas, demand_gbps):
    """Demand per hop = d·A·8 / (t_f + t_b): 0.17778 Gbit/s for d = 1, twice that for d = 2."""
    world = sample_world(
        load_scenario(world_dict(data_parallel=replicas, global_batch_size=2 * replicas)), np.random.default_rng(0)
    )
    sim = ClusterSim(world)
    job = world.jobs[0]
    assert sim.layout(job, TWO_REGIONS).demand_gbps == pytest.approx(demand_gbps, rel=1e-12)
    assert job.typical_demand_gbps == pytest.approx(demand_gbps, rel=1e-12)


def test_optimizer_state_is_sharded_over_replicas():
    """Model state per stage is (4 + 12/d)·P/S bytes: d = 4 saves 12·P/S·(3/4) against d = 1."""
    args = (3e9, 4, 1000, 2, 1, 1000, 2)
    one = pipeline.stage_memory_bytes(*args, data_parallel=1)
    four = pipeline.stage_memory_bytes(*args, data_parallel=4)
    assert one - four == pytest.approx(12 * 3e9 / 2 * 0.75, rel=1e-12)


def test_memory_sizing_takes_the_fewest_stages_that_fit():
    """``pipeline_sizing: memory`` picks min_feasible_stages: 3e9 params at t = 1 need 16·3e9/S ≤ 72 GB → S = 1
    on 80 GB GPUs, but 3 on 20 GB GPUs (48e9/S + ~42 MB of activations ≤ 0.9·20 GB)."""
    spec = world_dict(pipeline_stages=None, pipeline_sizing="memory", gpus_per_stage=1, data_parallel=1,
                      global_batch_size=None, num_microbatches=2)
    assert sample_world(load_scenario(spec), np.random.default_rng(0)).jobs[0].num_stages == 1
    spec["gpus"]["T"]["memory_gb"] = 20
    assert sample_world(load_scenario(spec), np.random.default_rng(0)).jobs[0].num_stages == 3


def test_job_classes_draw_shapes_by_weight():
    """Two classes of weights 3 and 1: the heavier one's shape is drawn about three times as often."""
    spec = world_dict(num_jobs=400)
    wl = spec["workload"]
    for key in ("gpus_per_stage", "data_parallel", "global_batch_size", "pipeline_stages"):
        wl.pop(key)
    wl["job_classes"] = [
        {"name": "wide", "weight": 3, "data_parallel": 2, "global_batch_size": 4, "pipeline_stages": 2},
        {"name": "deep", "weight": 1, "pipeline_stages": 4, "num_microbatches": 8},
    ]
    world = sample_world(load_scenario(spec), np.random.default_rng(1))
    shapes = [(j.data_parallel, j.num_stages, j.num_microbatches) for j in world.jobs]
    assert set(shapes) == {(2, 2, 2), (1, 4, 8)}
    assert 0.65 < shapes.count((2, 2, 2)) / len(shapes) < 0.85


def test_trace_rows_carry_their_own_shape(tmp_path):
    """A trace's optional shape columns override the workload's keys for that row only."""
    (tmp_path / "jobs.csv").write_text(
        "submit_time_s,model,iterations,data_parallel,global_batch_size\n0,m3b,10,,\n5,m3b,10,1,2\n"
    )
    spec = world_dict()
    spec["workload"].update(arrival={"process": "trace"}, trace={"csv": "jobs.csv"})
    del spec["workload"]["num_jobs"], spec["workload"]["datasets"]
    path = tmp_path / "s.yaml"
    import yaml

    path.write_text(yaml.safe_dump(spec))
    jobs = sample_world(load_scenario(path), np.random.default_rng(0)).jobs
    assert [(j.data_parallel, j.num_microbatches) for j in jobs] == [(2, 2), (1, 2)]


@pytest.mark.parametrize(
    "keys, path, words",
    [
        ({"global_batch_size": 5}, "workload.global_batch_size", "multiple of 2"),
        ({"data_parallel": 0}, "workload.data_parallel", ">= 1"),
        ({"data_parallel": -2}, "workload.data_parallel", ">= 1"),
        ({"pipeline_stages": None, "pipeline_sizing": "kstra"}, "workload.pipeline_sizing", "kstar"),
        ({"pipeline_sizing": "memory"}, "workload.pipeline_stages", "either pipeline_sizing or pipeline_stages"),
        ({"pipeline_stages": 5}, "workload.pipeline_stages", "at most 4"),
        ({"gpus_per_stage": 1, "data_parallel": 1, "global_batch_size": 2, "pipeline_stages": 1}, "workload.pipeline_stages", "at least"),
        ({"data_parallel": 5, "global_batch_size": 10}, "workload.data_parallel", "10 GPUs"),
        ({"data_parallel": 4, "global_batch_size": 8, "pipeline_stages": 4}, "workload.models[0]", "32 GPUs"),
        ({"num_microbatches": 4}, "workload.global_batch_size", "either num_microbatches or global_batch_size"),
    ],
)
def test_bad_shapes_get_one_clear_error(keys, path, words):
    """Each bad shape raises one ScenarioError naming the key path and what was expected."""
    if "pipeline_stages" in keys and keys["pipeline_stages"] == 1:
        spec = world_dict(**keys)
        spec["gpus"]["T"]["memory_gb"] = 20  # 3e9 params need 3 stages of 20 GB GPUs at t = 1
    else:
        spec = world_dict(**keys)
    with pytest.raises(ScenarioError) as err:
        load_scenario(spec)
    assert err.value.key_path == path and words in str(err.value)
