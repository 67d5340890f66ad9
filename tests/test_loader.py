"""Layer 2: scenario loading (YAML v1 → Scenario), bundled data, and the one error type for bad input."""

from __future__ import annotations

import contextlib
import csv
import math
import pickle
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

import geopipe_env  # noqa: F401  (registers the env ids)
from geopipe_env.scenario import bundled
from geopipe_env.base.catalog import GPU_CATALOG, MODEL_CATALOG
from geopipe_env.scenario.loader import SCENARIO_DIR, ScenarioError, builtin_names, load_builtin, load_scenario

DATA_DIR = bundled.DATA_DIR
FILE = "<file>"  # stands for the scenario file's own path in an expected key path


def base() -> dict:
    """A small valid scenario: three linked regions, one of them on a bundled market."""
    return {
        "name": "unit",
        "horizon_h": 48,
        "start_utc": "2023-03-01T00:00Z",
        "mfu": 0.4,  # an A6000 has no calibrated kernel efficiency
        "regions": [
            {"id": "a", "gpu": "A6000", "num_gpus": 32, "price_usd_per_kwh": 0.1},
            {"id": "b", "gpu": "A6000", "num_gpus": 32, "price_market": "GB", "carbon_zone": "GB"},
            {"id": "c", "gpu": "A100", "num_gpus": 16, "price_usd_per_kwh": 0.2, "pue": 1.2},
        ],
        "network": {
            "rule": "matrix",
            "matrix": {
                "a": {
                    "b": {"bandwidth_gbps": 4.0, "latency_ms": 30.0},
                    "c": {"bandwidth_gbps": 2.0, "latency_ms": 80.0},
                },
                "b": {"c": {"bandwidth_gbps": 3.0, "latency_ms": 60.0}},
            },
        },
        "workload": {
            "num_jobs": 4,
            "arrival": {"process": "poisson", "mean_interarrival_h": 1.5},
            "models": ["qwen2.5-14b"],
            "datasets": ["alpaca"],
        },
    }


def write(tmp_path: Path, data: dict | str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def endpoint_mean_base() -> dict:
    d = base()
    d["network"] = {"rule": "endpoint_mean"}
    for region, access in zip(d["regions"], (25.0, 100.0, 40.0), strict=True):
        region["access_bandwidth_gbps"] = access
    return d


# ---------------------------------------------------------------------------------------------------------
# Shipped scenarios and bundled data
# ---------------------------------------------------------------------------------------------------------


def test_builtin_names_include_the_registered_scenarios():
    """The paper scenarios and the flagship are shipped as package data."""
    assert {"paper", "paper-24", "geopipe-v0"} <= set(builtin_names())


@pytest.mark.parametrize("name", builtin_names())
def test_every_shipped_scenario_loads(name):
    """Every shipped YAML loads into a scenario whose network matrices match its regions."""
    scenario = load_builtin(name)
    num_regions = scenario.num_regions
    assert scenario.network.bandwidth_gbps.shape == (num_regions, num_regions)
    assert scenario.network.latency_s.shape == (num_regions, num_regions)
    assert scenario.horizon_s > 0.0


def test_paper_scenarios_follow_the_paper():
    """GeoPipe-Paper-v0 has six A6000 regions, the endpoint-mean rule and prices spanning $0.156–0.295/kWh."""
    for name, num_jobs in (("paper", 8), ("paper-24", 24)):
        scenario = load_builtin(name)
        assert scenario.workload.num_jobs == num_jobs
        assert scenario.network.rule == "endpoint_mean"
        assert all(r.gpu.name == "A6000" and r.num_gpus in (16, 32, 64, 128) for r in scenario.regions)
        prices = {r.id: r.price_usd_per_kwh.values[0] for r in scenario.regions}
        assert prices["us-east"] == 0.156 and prices["eu-west"] == 0.295
        order = ["us-east", "asia-tokyo", "asia-singapore", "oceania-sydney", "eu-central", "eu-west"]
        assert [prices[r] for r in order] == sorted(prices.values())
        assert all(25.0 <= r.access_bandwidth_gbps <= 100.0 for r in scenario.regions)


def test_flagship_uses_real_series_and_measured_wan():
    """GeoPipe-v0 bills hourly market prices, starts at a random hour and takes latency = Skyplane RTT / 2."""
    scenario = load_builtin("geopipe-v0")
    assert scenario.start_hour is None
    assert [r.price_usd_per_kwh.label for r in scenario.regions] == [
        "GB",
        "US-MIDA-PJM",
        "DE-LU",
        "JP-TK",
        "SG",
        "AU-NSW",
    ]
    assert all(r.price_usd_per_kwh.values.shape == (8760,) for r in scenario.regions)
    ids, rtt_ms = bundled.geo10_matrix("rtt_ms")
    i, j = ids.index("eu-west"), ids.index("us-east")
    assert scenario.network.latency_s[0, 1] == pytest.approx(rtt_ms[i, j] / 2 / 1000, abs=1e-6)
    assert scenario.network.latency_s[1, 0] == scenario.network.latency_s[0, 1]
    assert (scenario.network.bandwidth_gbps + np.eye(6) > 0).all()


def test_bundled_prices_convert_mwh_to_kwh_and_keep_negative_values():
    """A bundled price column is USD/MWh ÷ 1000, hour by hour, and negative market prices survive."""
    with open(DATA_DIR / "electricity_price_hourly_2023_usd.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    series = bundled.price_series("DE-LU")
    assert len(rows) == series.values.shape[0] == 8760
    assert series.values[5] == pytest.approx(float(rows[5]["DE-LU"]) / 1000.0)
    assert series.values.min() < 0.0
    assert not series.values.flags.writeable


def test_bundled_names_and_geo10():
    """All 23 markets and 16 zones are listed, and geo10 matrices have nan on the diagonal."""
    assert len(bundled.price_markets()) == 23 and "US-MIDA-PJM" in bundled.price_markets()
    assert len(bundled.carbon_zones()) == 16 and "DE-LU" in bundled.carbon_zones()
    ids, rtt = bundled.geo10_matrix("rtt_ms")
    assert len(ids) == 10 and rtt.shape == (10, 10) and np.isnan(np.diag(rtt)).all()
    assert bundled.carbon_series("GB").values.shape == (8760,)


# ---------------------------------------------------------------------------------------------------------
# Round trip of values and units
# ---------------------------------------------------------------------------------------------------------


def test_round_trip_of_key_values_and_units(tmp_path):
    """Hours become seconds, ms become one-way seconds, MWh prices become kWh prices, start_utc an hour of 2023."""
    scenario = load_scenario(write(tmp_path, base()))
    assert scenario.name == "unit"
    assert scenario.horizon_s == 48 * 3600.0
    assert scenario.start_hour == (31 + 28) * 24
    assert scenario.mfu == 0.4 and scenario.pipeline_schedule == "1f1b" and not scenario.bill_idle_capacity
    assert scenario.network.latency_s[0, 1] == pytest.approx(0.030)
    assert scenario.network.intra_bandwidth_gbps == 100.0
    assert scenario.network.intra_latency_s == pytest.approx(0.05e-3)
    gb = scenario.regions[1].price_usd_per_kwh
    assert gb.label == "GB" and gb.values[0] == pytest.approx(72.9 / 1000.0)
    assert scenario.regions[0].price_usd_per_kwh.is_constant and scenario.regions[0].price_usd_per_kwh.values[0] == 0.1
    assert scenario.regions[1].carbon_g_per_kwh.values[0] == pytest.approx(91.4)
    assert scenario.regions[0].carbon_g_per_kwh is None
    assert scenario.regions[2].pue == 1.2 and scenario.regions[0].pue == 1.0
    assert scenario.regions[2].gpu == GPU_CATALOG["A100"]
    assert scenario.workload.arrival.process == "poisson"
    assert scenario.workload.arrival.mean_interarrival_s == 1.5 * 3600.0
    assert scenario.workload.models == (MODEL_CATALOG["qwen2.5-14b"],)
    assert scenario.cost_weight == 1.0


@pytest.mark.parametrize(
    ("start_utc", "hour"),
    [
        ("2023-01-01T00:00Z", 0),
        ("2023-03-01T00:00Z", 1416),
        ("2021-03-01T05:00Z", 1421),  # any year maps onto the 2023 calendar
        ("2023-01-01T01:00+01:00", 0),  # offsets are converted to UTC
        ("2023-12-31T23:00Z", 8759),
        ("random", None),
    ],
)
def test_start_utc_maps_to_an_hour_of_2023(start_utc, hour):
    """start_utc becomes hours since 2023-01-01T00Z, keeping month, day and hour; "random" becomes None."""
    d = base()
    d["start_utc"] = start_utc
    assert load_scenario(d).start_hour == hour


def test_endpoint_mean_capacity_is_the_mean_of_access_bandwidths():
    """Under endpoint_mean each link carries the mean of its two regions' access bandwidths, both ways."""
    d = endpoint_mean_base()
    d["network"]["default_latency_ms"] = 40.0
    d["network"]["matrix"] = {"a": {"c": {"latency_ms": 12.0}}}
    network = load_scenario(d).network
    access = np.array([25.0, 100.0, 40.0])
    expected = (access[:, None] + access[None, :]) / 2.0
    np.fill_diagonal(expected, 0.0)
    np.testing.assert_allclose(network.bandwidth_gbps, expected)
    assert network.latency_s[0, 1] == pytest.approx(0.040) and network.latency_s[1, 2] == pytest.approx(0.040)
    assert network.latency_s[0, 2] == network.latency_s[2, 0] == pytest.approx(0.012)


def test_endpoint_mean_default_latency_is_50_ms():
    """Without default_latency_ms an endpoint_mean pair has a one-way latency of 50 ms."""
    assert load_scenario(endpoint_mean_base()).network.latency_s[0, 1] == pytest.approx(0.050)


def test_matrix_fills_the_missing_direction_and_keeps_given_ones():
    """A pair given one way holds both ways, a pair given both ways stays directional, and an absent pair is no link."""
    d = base()
    d["network"]["matrix"] = {
        "a": {"b": {"bandwidth_gbps": 4.0, "latency_ms": 30.0}},
        "b": {"a": {"bandwidth_gbps": 5.0, "latency_ms": 31.0}, "c": {"bandwidth_gbps": 3.0, "latency_ms": 60.0}},
    }
    network = load_scenario(d).network
    assert network.bandwidth_gbps[0, 1] == 4.0 and network.bandwidth_gbps[1, 0] == 5.0
    assert network.latency_s[0, 1] == pytest.approx(0.030) and network.latency_s[1, 0] == pytest.approx(0.031)
    assert network.bandwidth_gbps[1, 2] == network.bandwidth_gbps[2, 1] == 3.0
    assert network.latency_s[2, 1] == pytest.approx(0.060)
    assert network.bandwidth_gbps[0, 2] == network.bandwidth_gbps[2, 0] == 0.0
    assert not network.bandwidth_gbps.flags.writeable


def test_extensions_gpu_override_inline_model_and_options():
    """Partial GPU overrides merge with the catalog; inline models, datasets and the documented options load."""
    d = base()
    d["gpus"] = {
        "a6000": {"busy_watts": 280},
        "MI300": {"tflops": 1300, "memory_gb": 192, "busy_watts": 750, "idle_watts": 140},
    }
    d["regions"][2]["gpu"] = "mi300"
    d["pipeline_schedule"] = "gpipe"
    d["bill_idle_capacity"] = True
    d["objective"] = {"cost_weight": 0.5}
    d["randomize"] = {"bandwidth_scale": [0.3, 1.5], "gpu_scale": [0.5, 1.25]}
    d["network"]["background"] = {"mean_fraction": 0.2, "amplitude_fraction": 0.1}
    d["workload"].update(
        models=["Qwen2.5-14B", {"name": "tiny", "params_b": 1.0, "layers": 8, "hidden": 1024}],
        datasets=[{"name": "mine", "tokens": 1e6}],
        gpus_per_stage=2,
        epochs=2.5,
        max_stages=40,
    )
    scenario = load_scenario(d)
    a6000 = scenario.regions[0].gpu
    assert a6000.name == "A6000" and a6000.busy_watts == 280 and a6000.tflops == GPU_CATALOG["A6000"].tflops
    assert scenario.regions[2].gpu.name == "MI300" and scenario.regions[2].gpu.memory_gb == 192
    assert scenario.pipeline_schedule == "gpipe" and scenario.bill_idle_capacity and scenario.cost_weight == 0.5
    assert scenario.randomize.bandwidth_scale == (0.3, 1.5) and scenario.randomize.gpu_scale == (0.5, 1.25)
    assert scenario.network.background.mean_fraction == 0.2 and scenario.network.background.period_h == 24.0
    wl = scenario.workload
    assert [m.name for m in wl.models] == ["qwen2.5-14b", "tiny"] and wl.datasets[0].tokens == 1e6
    assert (wl.gpus_per_stage, wl.epochs, wl.max_stages) == (2, 2.5, 40)


DESIGN_EXAMPLE = """
name: my-world
horizon_h: 720
start_utc: 2023-03-01T00:00Z   # where hourly price series start; "random" picks a day each episode
mfu: 0.4
gpus: {A6000: {tflops: 154.8, memory_gb: 48, busy_watts: 300, idle_watts: 50}}   # optional overrides
regions:
  - {id: eu-west, gpu: A6000, num_gpus: 64, access_bandwidth_gbps: 50, price_usd_per_kwh: 0.295}
  - {id: us-east, gpu: A6000, num_gpus: 32, access_bandwidth_gbps: 25, price_market: US-MIDA-PJM,
     carbon_zone: US-MIDA-PJM, pue: 1.2}
network:
  rule: endpoint_mean            # or: matrix
  intra_region: {bandwidth_gbps: 100, latency_ms: 0.05}
workload:
  num_jobs: 24
  arrival: {process: poisson, mean_interarrival_h: 1.5}   # or {process: batch} (all at t=0)
  models: [llama-3.1-70b, qwen2.5-14b]                     # catalog keys, or inline {params_b, layers, hidden}
  datasets: [alpaca, wikitext-103]
  micro_batch_size: 1
  seq_len: 2048
  num_microbatches: 32
randomize:                     # optional, sampled per episode from the env's RNG
  bandwidth_scale: [0.3, 1.5]
  gpu_scale: [0.5, 1.25]
objective: {cost_weight: 1.0}
"""


def test_design_example_loads(tmp_path):
    """A compact schema example (both price forms, endpoint_mean, Poisson arrivals) loads as written."""
    scenario = load_scenario(write(tmp_path, DESIGN_EXAMPLE))
    assert scenario.network.bandwidth_gbps[0, 1] == 37.5 and scenario.start_hour == 1416
    assert scenario.regions[1].price_usd_per_kwh.label == "US-MIDA-PJM" and scenario.regions[1].pue == 1.2


def test_exponent_floats_without_a_dot_or_sign_are_numbers(tmp_path):
    """YAML 1.2 floats such as 2e8 (strings to plain PyYAML) load as numbers."""
    d = base()
    d["workload"]["datasets"] = ["__TOKENS__"]
    text = yaml.safe_dump(d, sort_keys=False).replace("__TOKENS__", "{name: mine, tokens: 2e8}")
    assert load_scenario(write(tmp_path, text)).workload.datasets[0].tokens == 2e8


def test_trace_csv_loads(tmp_path):
    """Trace rows become TraceJobs sorted by submit time, and num_jobs defaults to the row count."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "trace.csv").write_text(
        "submit_time_s,model,dataset,iterations\n"
        "3600,falcon-40b,wikitext-103,\n"
        "0,tiny,,500\n"
        "\n"
        "1800,qwen2.5-14b,alpaca,\n",
        encoding="utf-8",
    )
    d = base()
    d["workload"] = {
        "arrival": {"process": "trace"},
        "trace": {"csv": "jobs/trace.csv"},
        "models": [{"name": "tiny", "params_b": 1.0, "layers": 8, "hidden": 1024}],
    }
    wl = load_scenario(write(tmp_path, d)).workload
    assert wl.num_jobs == 3 and len(wl.trace) == 3
    assert [job.submit_time_s for job in wl.trace] == [0.0, 1800.0, 3600.0]
    assert wl.trace[0].model.name == "tiny" and wl.trace[0].iterations == 500 and wl.trace[0].dataset is None
    assert wl.trace[2].model == MODEL_CATALOG["falcon-40b"] and wl.trace[2].dataset.name == "wikitext-103"
    assert [m.name for m in wl.models] == ["tiny", "qwen2.5-14b", "falcon-40b"]
    assert [ds.name for ds in wl.datasets] == ["alpaca", "wikitext-103"]


def test_trace_num_jobs_takes_the_earliest_rows(tmp_path):
    """A num_jobs below the trace length keeps the earliest submissions."""
    (tmp_path / "t.csv").write_text("submit_time_s,model,iterations\n9,qwen2.5-14b,5\n1,qwen2.5-14b,7\n")
    d = base()
    d["workload"] = {"num_jobs": 1, "arrival": {"process": "trace"}, "trace": {"csv": "t.csv"}}
    trace = load_scenario(write(tmp_path, d)).workload.trace
    assert len(trace) == 1 and trace[0].iterations == 7


# ---------------------------------------------------------------------------------------------------------
# Bad input: always ScenarioError, naming the key path
# ---------------------------------------------------------------------------------------------------------


def _set(path: str, value):
    """A mutation that sets a dotted path (with [i] for list items) in the base scenario."""

    def mutate(d):
        keys = path.replace("[", ".").replace("]", "").split(".")
        node = d
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        last = keys[-1]
        node[int(last) if last.isdigit() else last] = value

    return mutate


def _delete(path: str):
    """A mutation that removes a dotted path (with [i] for list items) from the base scenario."""

    def mutate(d):
        keys = path.replace("[", ".").replace("]", "").split(".")
        node = d
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        del node[keys[-1]]

    return mutate


def _disconnect(d):
    for region in d["regions"]:
        region.update(gpu="A6000", num_gpus=16)
    d["network"]["matrix"] = {"a": {"b": {"bandwidth_gbps": 4.0, "latency_ms": 30.0}}}
    d["workload"]["models"] = ["flm-101b"]  # needs 41 A6000 stages: 48 GPUs in all, but at most 32 linked


def _star(d):
    d["regions"].append({"id": "d", "gpu": "A6000", "num_gpus": 12, "price_usd_per_kwh": 0.1})
    for region in d["regions"]:
        region.update(gpu="A6000", num_gpus=12)
    link = {"bandwidth_gbps": 4.0, "latency_ms": 30.0}
    d["network"]["matrix"] = {"a": {"b": link, "c": link, "d": link}}  # b, c and d reach each other only through a
    d["workload"]["models"] = ["flm-101b"]  # 41 A6000 stages: 48 GPUs in all, but a path (say b-a-c) holds 36


def _trace_without_model_column(tmp_path):
    (tmp_path / "jobs.csv").write_text("submit_time_s,dataset\n0,alpaca\n")

    def mutate(d):
        d["workload"] = {"arrival": {"process": "trace"}, "trace": {"csv": "jobs.csv"}}

    return mutate


def _trace_with_unknown_model(tmp_path):
    (tmp_path / "jobs.csv").write_text("submit_time_s,model,dataset\n0,qwen2.5-14b,alpaca\n5,gpt-5,alpaca\n")

    def mutate(d):
        d["workload"] = {"arrival": {"process": "trace"}, "trace": {"csv": "jobs.csv"}}

    return mutate


BAD_CASES = [
    ("unknown top-level key", _set("horizon_hours", 5), "horizon_hours"),
    ("unknown region key", _set("regions[0].num_gpu", 8), "regions[0].num_gpu"),
    (
        "unknown region in matrix (destination)",
        _set("network.matrix.a.zz", {"bandwidth_gbps": 1, "latency_ms": 1}),
        "network.matrix.a.zz",
    ),
    (
        "unknown region in matrix (source)",
        _set("network.matrix.zz", {"a": {"bandwidth_gbps": 1, "latency_ms": 1}}),
        "network.matrix.zz",
    ),
    ("negative bandwidth", _set("network.matrix.a.b.bandwidth_gbps", -1.0), "network.matrix.a.b.bandwidth_gbps"),
    ("zero bandwidth", _set("network.matrix.b.c.bandwidth_gbps", 0), "network.matrix.b.c.bandwidth_gbps"),
    ("matrix pair without latency", _delete("network.matrix.a.b.latency_ms"), "network.matrix.a.b.latency_ms"),
    (
        "model that fits no memory",
        _set("workload.models", [{"name": "huge", "params_b": 5000, "layers": 8, "hidden": 8192}]),
        "workload.models[0]",
    ),
    ("unknown market", _set("regions[1].price_market", "XX-NOWHERE"), "regions[1].price_market"),
    ("unknown carbon zone", _set("regions[1].carbon_zone", "FR"), "regions[1].carbon_zone"),
    ("empty regions", _set("regions", []), "regions"),
    ("malformed YAML", "regions: [ {id: a\nhorizon_h: 3\n", FILE),
    ("duplicate YAML key", "name: x\nname: y\n", FILE),
    ("string for num_gpus", _set("regions[0].num_gpus", "many"), "regions[0].num_gpus"),
    ("float for num_gpus", _set("regions[0].num_gpus", 8.5), "regions[0].num_gpus"),
    ("bool for a number", _set("mfu", True), "mfu"),
    ("bool for a count", _set("workload.num_jobs", True), "workload.num_jobs"),
    ("NaN", _set("horizon_h", float("nan")), "horizon_h"),
    ("inf", _set("network.matrix.a.c.latency_ms", float("inf")), "network.matrix.a.c.latency_ms"),
    ("zero GPUs", _set("regions[2].num_gpus", 0), "regions[2].num_gpus"),
    ("duplicate region id", _set("regions[1].id", "a"), "regions[1].id"),
    ("disconnected network where a job cannot fit", _disconnect, "network.matrix"),
    ("star network where no pipeline path holds a job", _star, "network.matrix"),
    ("trace CSV with missing columns", _trace_without_model_column, "workload.trace.csv"),
    ("trace row with an unknown model", _trace_with_unknown_model, "workload.trace.csv[1].model"),
    (
        "trace CSV not found",
        _set("workload", {"arrival": {"process": "trace"}, "trace": {"csv": "nope.csv"}}),
        "workload.trace.csv",
    ),
    ("price as constant and market", _set("regions[0].price_market", "GB"), "regions[0].price_market"),
    ("no price", _delete("regions[0].price_usd_per_kwh"), "regions[0].price_usd_per_kwh"),
    ("unknown model key", _set("workload.models", ["llama-4-9000b"]), "workload.models[0]"),
    ("unknown dataset key", _set("workload.datasets", ["alpaca", "the-pile"]), "workload.datasets[1]"),
    ("unknown GPU", _set("regions[0].gpu", "B200"), "regions[0].gpu"),
    ("mfu above one", _set("mfu", 1.5), "mfu"),
    ("zero horizon", _set("horizon_h", 0), "horizon_h"),
    ("pue below one", _set("regions[2].pue", 0.9), "regions[2].pue"),
    ("randomize low above high", _set("randomize", {"bandwidth_scale": [1.5, 0.3]}), "randomize.bandwidth_scale"),
    ("randomize non-positive", _set("randomize", {"gpu_scale": [0.0, 1.0]}), "randomize.gpu_scale[0]"),
    ("gpu scale leaves too few GPUs", _set("randomize", {"gpu_scale": [0.01, 1.0]}), "randomize.gpu_scale"),
    ("randomize unknown GPU type", _set("randomize", {"gpu_types": ["A100", "B300"]}), "randomize.gpu_types[1]"),
    ("randomize empty GPU types", _set("randomize", {"gpu_types": []}), "randomize.gpu_types"),
    (
        "randomize GPU type too small for a job",
        lambda d: (
            d.update(gpus={"tiny": {"tflops": 10, "memory_gb": 1, "busy_watts": 100, "idle_watts": 10}}),
            d.update(randomize={"gpu_types": ["A100", "tiny"]}),
        ),
        "randomize.gpu_types",
    ),
    ("randomize probability above one", _set("randomize", {"constant_price_prob": 1.5}), "randomize.constant_price_prob"),
    ("randomize job count zero", _set("randomize", {"num_jobs": [0, 5]}), "randomize.num_jobs[0]"),
    ("randomize job count not an integer", _set("randomize", {"num_jobs": [2, 5.5]}), "randomize.num_jobs[1]"),
    ("randomize job counts reversed", _set("randomize", {"num_jobs": [9, 5]}), "randomize.num_jobs"),
    (
        "randomize arrivals of a batch workload",
        lambda d: (d["workload"].update(arrival={"process": "batch"}), d.update(randomize={"arrival_scale": [0.5, 2]})),
        "randomize.arrival_scale",
    ),
    ("randomize unknown key", _set("randomize", {"price_scale": [0.5, 2]}), "randomize.price_scale"),
    ("unparseable start_utc", _set("start_utc", "next tuesday"), "start_utc"),
    ("unknown rule", _set("network.rule", "fastest"), "network.rule"),
    ("poisson without a mean", _delete("workload.arrival.mean_interarrival_h"), "workload.arrival.mean_interarrival_h"),
    ("max_stages below the memory minimum", _set("workload.max_stages", 2), "workload.max_stages"),
    (
        "link from a region to itself",
        _set("network.matrix.a.a", {"bandwidth_gbps": 1, "latency_ms": 1}),
        "network.matrix.a.a",
    ),
    ("missing required section", _delete("workload"), "workload"),
    ("wrong schema version", _set("version", 2), "version"),
    ("idle above busy power", _set("gpus", {"A6000": {"idle_watts": 400}}), "gpus.A6000.idle_watts"),
]


@pytest.mark.parametrize(("mutation", "key_path"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_bad_file_raises_scenario_error_naming_the_key_path(tmp_path, mutation, key_path):
    """Each kind of bad file raises ScenarioError whose key_path is exact and whose message starts with it."""
    if isinstance(mutation, str):
        path = write(tmp_path, mutation)
    else:
        d = base()
        if mutation.__name__.startswith("_trace"):
            mutation = mutation(tmp_path)
        mutation(d)
        path = write(tmp_path, d)
    expected = str(path) if key_path == FILE else key_path
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.key_path == expected
    assert str(info.value).startswith(f"{expected}: ") and "; expected " in str(info.value)


def test_endpoint_mean_requires_access_bandwidth():
    """Under endpoint_mean a region without access_bandwidth_gbps is rejected at that key."""
    d = endpoint_mean_base()
    del d["regions"][1]["access_bandwidth_gbps"]
    with pytest.raises(ScenarioError) as info:
        load_scenario(d)
    assert info.value.key_path == "regions[1].access_bandwidth_gbps"


def test_missing_file_names_the_file(tmp_path):
    """A path that does not exist raises ScenarioError keyed by that path."""
    missing = tmp_path / "absent.yaml"
    with pytest.raises(ScenarioError) as info:
        load_scenario(missing)
    assert info.value.key_path == str(missing)


@pytest.mark.parametrize("scenario, close", [("geopipe-v1", "'geopipe-v0', 'geopipe-v0-wide' or"), ("Paper24.yaml", "'paper-24' or 'paper'?"), ("elsewhere/geopipe-v0-wid.yml", "'geopipe-v0-wide'")])
def test_a_missing_scenario_suggests_the_close_built_in_names(scenario, close):
    """A scenario that is neither a file nor a built-in name gets one line naming the close built-in names, from
    gym.make as from load_scenario; a name close to none gets the list of built-in names."""
    with pytest.raises(ScenarioError) as info:
        gym.make("GeoPipe-v0", scenario=scenario)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{scenario}: file not found") and f"did you mean {close}" in message
    with pytest.raises(ScenarioError, match=r"file not found, nor a built-in scenario name; expected a scenario YAML file or one of a6000"):
        load_scenario("zzz-qqq")


def test_unknown_key_error_suggests_the_close_key():
    """An unknown key's message offers the nearest valid key and lists what was expected."""
    d = base()
    d["regions"][0]["num_gpu"] = 8
    with pytest.raises(ScenarioError, match=r"did you mean 'num_gpus'\?.*expected one of id, gpu, num_gpus"):
        load_scenario(d)


def test_unknown_market_error_lists_valid_markets():
    """An unknown market's message lists bundled markets to choose from."""
    d = base()
    d["regions"][1]["price_market"] = "GBR"
    with pytest.raises(ScenarioError, match=r"did you mean 'GB'\?.*US-MIDA-PJM"):
        load_scenario(d)


def test_unknown_builtin_is_a_scenario_error_and_a_value_error():
    """An unknown built-in name raises ScenarioError, which generic ValueError handlers also catch."""
    assert issubclass(ScenarioError, ValueError)
    with pytest.raises(ScenarioError, match="expected one of .*geopipe-v0"):
        load_builtin("no-such-scenario")


def _leaves(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, (*path, i))
    yield path


JUNK = [None, "junk", True, -1, 0, 1e300, math.nan, [], {}, [1, 2, 3], {"x": 1}]


def test_any_junk_value_anywhere_raises_only_scenario_error():
    """Replacing any node of a valid file with junk either still loads or raises ScenarioError, never another error."""
    for path in _leaves(base()):
        if not path:
            continue
        for junk in JUNK:
            d = base()
            node = d
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = junk
            with contextlib.suppress(ScenarioError):
                load_scenario(d)


def test_scenario_error_survives_pickling():
    """A ScenarioError raised in a subprocess worker reaches the parent with its key path intact."""
    error = pickle.loads(pickle.dumps(ScenarioError("regions[0].gpu", "unknown GPU type 'B200'", "a GPU name")))
    assert error.key_path == "regions[0].gpu" and str(error).startswith("regions[0].gpu: unknown GPU")


def test_loaded_scenario_pickles():
    """A loaded scenario pickles and unpickles (vector envs ship it to worker processes)."""
    scenario = load_builtin("geopipe-v0")
    clone = pickle.loads(pickle.dumps(scenario))
    assert clone.region_ids == scenario.region_ids
    np.testing.assert_array_equal(clone.network.bandwidth_gbps, scenario.network.bandwidth_gbps)


def test_extends_deep_merges_a_base_scenario(tmp_path):
    """``extends`` loads the base file and deep-merges this file's keys over it (mappings merge, lists replace)."""
    from geopipe_env.scenario.loader import load_builtin

    base = load_builtin("geopipe-abundant")
    (tmp_path / "child.yaml").write_text(
        "extends: geopipe-abundant\nname: child\nmfu: 0.3\nworkload: {num_jobs: 5}\nrandomize: {gpu_scale: [0.5, 0.5]}\n"
    )
    child = load_scenario(tmp_path / "child.yaml")
    assert child.name == "child" and child.mfu == 0.3 and child.workload.num_jobs == 5
    assert child.workload.models == base.workload.models  # untouched keys of a merged mapping survive
    assert child.region_ids == base.region_ids and child.randomize.gpu_scale == (0.5, 0.5)
    (tmp_path / "grandchild.yaml").write_text("extends: child.yaml\nname: grandchild\n")
    assert load_scenario(tmp_path / "grandchild.yaml").workload.num_jobs == 5


def test_extends_keeps_the_base_files_paths(tmp_path, monkeypatch):
    """A file path inside a base (a trace CSV) is relative to the base's folder, wherever the extending file or the
    working directory is; a path the extending file writes itself is relative to its own folder."""
    monkeypatch.chdir(tmp_path)
    toy = load_builtin("toy")
    assert load_scenario({"extends": "toy", "name": "toy"}).workload == toy.workload  # a built-in trace world
    (tmp_path / "base").mkdir()
    (tmp_path / "child").mkdir()
    shutil.copy(SCENARIO_DIR / "toy.yaml", tmp_path / "base" / "base.yaml")
    shutil.copy(SCENARIO_DIR / "toy_jobs.csv", tmp_path / "base" / "toy_jobs.csv")
    (tmp_path / "child" / "child.yaml").write_text("extends: ../base/base.yaml\nname: toy\n")
    assert load_scenario(tmp_path / "child" / "child.yaml").workload == toy.workload
    rows = (SCENARIO_DIR / "toy_jobs.csv").read_text().splitlines()
    (tmp_path / "child" / "own.csv").write_text("\n".join(rows[:2]) + "\n")  # one job
    (tmp_path / "child" / "own.yaml").write_text("extends: ../base/base.yaml\nworkload: {num_jobs: 1, trace: {csv: own.csv}}\n")
    assert load_scenario(tmp_path / "child" / "own.yaml").workload.num_jobs == 1


@pytest.mark.parametrize(
    "text,message",
    [
        ("extends: no-such-world\n", "no scenario"),
        ("extends: [1]\n", "built-in scenario name"),
        ("extends: loop.yaml\n", "extends itself"),
    ],
)
def test_bad_extends_is_a_scenario_error(tmp_path, text, message):
    """A missing, mistyped or cyclic base raises ScenarioError at key path 'extends'."""
    (tmp_path / "loop.yaml").write_text(text)
    with pytest.raises(ScenarioError, match=message) as err:
        load_scenario(tmp_path / "loop.yaml")
    assert err.value.key_path == "extends"


def test_yaml_merge_keys_may_be_overridden():
    """A key that overrides one merged in with ``<<: *anchor`` is legal; a key written twice is not."""
    import yaml

    from geopipe_env.scenario.loader import StrictYamlLoader

    data = yaml.load("base: &b {x: 1, y: 2}\nchild: {<<: *b, x: 3}\n", Loader=StrictYamlLoader)
    assert data["child"] == {"x": 3, "y": 2}
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'x'"):
        yaml.load("x: 1\nx: 2\n", Loader=StrictYamlLoader)


def _price_csv_scenario(tmp_path, rows, unit="usd_per_mwh", header="datetime_utc,mine"):
    from datetime import datetime, timedelta

    lines = [header]
    for hour, value in rows:
        stamp = (datetime(2023, 1, 1) + timedelta(hours=hour)).strftime("%Y-%m-%dT%H:%MZ")
        lines.append(f"{stamp},{value}")
    (tmp_path / "prices.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "w.yaml").write_text(
        "name: w\nhorizon_h: 24\n"
        "regions:\n  - {id: a, gpu: A100, num_gpus: 8, price_csv: {path: prices.csv, column: mine, unit: " + unit + "}}\n"
        "network: {rule: matrix, matrix: {}}\n"
        "workload: {num_jobs: 1, arrival: {process: batch}, models: [qwen2.5-14b], datasets: [alpaca]}\n"
    )
    return tmp_path / "w.yaml"


def test_price_csv_loads_and_converts_units(tmp_path):
    """A full-year hourly price CSV in USD/MWh becomes the region's hourly USD/kWh series."""
    values = [50.0 + (h % 24) for h in range(8760)]
    scenario = load_scenario(_price_csv_scenario(tmp_path, enumerate(values)))
    series = scenario.regions[0].price_usd_per_kwh
    assert series.values.shape == (8760,) and series.values[0] == pytest.approx(0.050)
    assert series.values[23] == pytest.approx(0.073)


@pytest.mark.parametrize(
    "rows,unit,header,message",
    [
        ([(h, 50.0) for h in range(8760) if h != 100], "usd_per_mwh", "datetime_utc,mine", "gap"),
        ([(h, 50.0 if h != 5 else "") for h in range(8760)], "usd_per_mwh", "datetime_utc,mine", "mine is ''"),
        ([(h, "nan" if h == 7 else 50.0) for h in range(8760)], "usd_per_mwh", "datetime_utc,mine", "mine is 'nan'"),
        ([(h, 50.0) for h in range(8760)], "usd_per_kwh", "datetime_utc,mine", "looks like usd_per_mwh"),
        ([(h, 0.05) for h in range(8760)], "usd_per_mwh", "datetime_utc,mine", "looks like usd_per_kwh"),
        ([(h, 50.0) for h in range(8760)], "usd_per_mwh", "datetime_utc,other", "lacks column"),
        ([(h, 50.0) for h in range(100)], "usd_per_mwh", "datetime_utc,mine", "100 hourly rows"),
        ([(0, 50.0), (0, 50.0)], "usd_per_mwh", "datetime_utc,mine", "repeated"),
    ],
)
def test_bad_price_csv_is_a_scenario_error(tmp_path, rows, unit, header, message):
    """Gaps, empty or NaN cells, a wrong unit, a missing column or a short file each name the problem."""
    with pytest.raises(ScenarioError, match=message) as err:
        load_scenario(_price_csv_scenario(tmp_path, rows, unit, header))
    assert err.value.key_path.startswith("regions[0].price_csv")


def test_network_graph_carries_the_links():
    """NetworkSpec.graph is a networkx digraph with each link's bandwidth and one-way latency on its edge."""
    from geopipe_env.scenario.loader import load_builtin

    scenario = load_builtin("toy")
    graph = scenario.network.graph(scenario.region_ids)
    assert set(graph.nodes) == {"cheap", "dear"} and graph.number_of_edges() == 2
    assert graph["cheap"]["dear"] == {"bandwidth_gbps": 10.0, "latency_s": pytest.approx(0.01)}
    assert graph["dear"]["cheap"]["bandwidth_gbps"] == 10.0
