"""The regime-map script (benchmarks/regimes.py) on one regime: files, table and figures that agree; the regimes'
worlds; the offered load and the demand table."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import yaml

from benchmarks import regimes
from geopipe_env.scenario.loader import load_scenario  # noqa: E402


def test_one_regime_writes_a_consistent_table_and_heat_map(tmp_path, monkeypatch):
    """One regime of GeoPipe-v0 cut to 12 jobs, one seed: the JSON's derived figures are the % changes of its own
    policy means, on time in system (unfinished jobs counted), and the best policy is the one of least time in
    system."""
    tiny = regimes.flagship()
    tiny["workload"]["num_jobs"] = 12
    monkeypatch.setattr(regimes, "flagship", lambda: copy.deepcopy(tiny))
    code = regimes.main(["--wan", "1", "--fleets", "1", "--loads", "0.8", "--schedules", "1f1b", "--seeds", "1",
                         "--workers", "1", "--out", str(tmp_path)])
    assert code == 0
    result = json.loads((tmp_path / "regimes.json").read_text())
    (regime,) = result["regimes"]
    means = regime["means"]
    assert set(means) == set(regimes.POLICIES) and "sjf" in means
    tis = {p: m["avg_time_in_system_h"] for p, m in means.items()}
    cost = {p: m["total_cost_usd"] for p, m in means.items()}
    assert regime["paradox_lcf"] == pytest.approx(100 * (tis["cr-lcf"] - tis["lcf"]) / tis["lcf"])
    assert regime["paradox_ldf"] == pytest.approx(100 * (tis["cr-ldf"] - tis["ldf"]) / tis["ldf"])
    assert regime["bace_vs"]["sjf"][1] == pytest.approx(100 * (cost["bace-pipe"] - cost["sjf"]) / cost["sjf"])
    assert regime["best_policy"] == min(tis, key=tis.get)
    assert regime["best_cross_region_gpu_share"] == means[regime["best_policy"]]["cross_region_gpu_share"]
    for p in regimes.POLICIES:  # time in system counts the unfinished jobs, finished-job JCT does not
        if means[p]["jobs_completed"] < 12:
            assert tis[p] > means[p]["avg_jct_h"] or math.isnan(means[p]["avg_jct_h"])
    assert regime["gpus"] == 1344 and regime["mean_interarrival_h"] == pytest.approx(4.592, abs=1e-3)
    assert (tmp_path / "regimes.png").stat().st_size > 10_000
    assert (tmp_path / "regimes.md").read_text().count("| ×1 | ×1 | 0.8 | 1f1b |") == 3  # one row per table


def test_regime_worlds_scale_the_wan_and_fleet_and_can_run_1f1b_only(tmp_path, monkeypatch):
    """Each regime's scenario: WAN capacities and GPU counts scaled in the file, arrivals at the offered load, and
    the 1f1b variant's classes accepting 1F1B alone (no virtual stages), which loads."""
    data = regimes.variant(2.0, "1f1b")
    flagship = regimes.flagship()
    assert [r["num_gpus"] for r in data["regions"]] == [2 * r["num_gpus"] for r in flagship["regions"]]
    for job_class in data["workload"]["job_classes"]:
        assert job_class["pipeline_schedules"] == ["1f1b"] and "virtual_stages" not in job_class
    scenario = load_scenario(data)
    assert {scenario.schedules_of(c.shape) for c in scenario.workload.classes} == {("1f1b",)}

    data = regimes.variant()
    data["workload"]["job_classes"] = data["workload"]["job_classes"][1:2]  # one class: a fast mean_gpu_hours
    hours = regimes.mean_gpu_hours(data)
    monkeypatch.setattr(regimes, "flagship", lambda: yaml.safe_load(yaml.safe_dump(data)))  # the one-class world
    paths, facts = regimes.regime_scenarios(tmp_path, [0.125], [2.0], [0.4], ["flagship"])
    (key,) = paths
    assert key == (0.125, 2.0, 0.4, "flagship")
    written = yaml.safe_load(paths[key].read_text())
    assert written["network"]["matrix"]["eu-west"]["us-east"]["bandwidth_gbps"] == pytest.approx(33.912 / 8)
    assert "randomize" not in written  # a fixed scale in the file draws nothing from the episode's RNG
    assert facts[key]["gpus"] == 2688
    assert written["workload"]["arrival"]["mean_interarrival_h"] == pytest.approx(hours / (0.4 * 2688))


def test_offered_load_is_the_expected_gpu_hours_of_the_mix():
    """One class, one dataset: the expected GPU-hours are that job's local iteration time × iterations × GPUs."""
    data = regimes.flagship()
    job_class = data["workload"]["job_classes"][1]
    data["workload"]["job_classes"] = [job_class]
    data["workload"]["datasets"] = ["wikitext-103"]
    hours = regimes.mean_gpu_hours(data)
    # llama3-70b: 64 GPUs, 99 iterations (103,227,021 tokens / 1,048,576 per iteration, rounded up), of 10–20 s
    # (the DGX Cloud recipe it follows takes 14.72 s per iteration).
    assert 99 * 64 * 10.0 / 3600 < hours < 99 * 64 * 20.0 / 3600


def test_demand_comes_from_the_generated_jobs():
    """Per class, the per-hop demand on each GPU type is d·A·8 / (t_f + t_b) of the generated job's forward time
    there; Job.typical_demand_gbps (the median GPU it fits, 1 message) lies between the H100 and A100 figures, and
    an interleaved class's own schedule sends v messages per micro-batch."""
    rows = {row["name"]: row for row in regimes.class_demands()}
    assert set(rows) == {c["name"] for c in regimes.flagship()["workload"]["job_classes"]}
    assert math.isnan(rows["llama3-8b"]["H100"])  # one stage: no pipeline boundary
    for name in ("llama3-70b", "bloom-176b", "llama3-405b-meta"):
        row = rows[name]
        assert row["A100"] < row["typical_gbps"] < row["H100"]
    meta = rows["llama3-405b-meta"]
    assert meta["gpus"] == 1024 and meta["own_messages"] == 4 and meta["H100_own"] == pytest.approx(4 * meta["H100"])
    assert meta["message_mb"] == pytest.approx(8 * 1 * 8192 * 16384 * 2 / 1e6)  # d·b·s·h·2 bytes
    assert "| llama3-405b-meta | 1,024 (16 × 8 × 8) | interleaved-1f1b (4) |" in regimes.demand_table()


@pytest.mark.parametrize(("argv", "message"), [
    (["--wan", "0"], "--wan and --loads must be > 0"),
    (["--loads", "-1"], "--wan and --loads must be > 0"),
    (["--fleets", "0.5"], "--fleets must be >= 1"),
    (["--seeds", "0"], "--seeds and --workers must be >= 1"),
])
def test_bad_ranges_are_one_line_errors(capsys, argv, message):
    """A non-positive WAN scale or load, a fleet below ×1 or no seeds is refused before anything runs."""
    with pytest.raises(SystemExit) as exc:
        regimes.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_the_agent_is_set_against_each_regimes_best_scripted_policy_by_return():
    """benchmarks/agent_regimes.py: the best scripted policy is the one of highest mean return, and the agent's
    differences to it are paired by seed, with their CI and p-value; Holm's adjustment then gives the verdict."""
    from benchmarks import agent_regimes

    rows = []
    for seed, (agent, a, b) in enumerate([(10.0, 8.0, 1.0), (12.0, 9.0, 2.0), (11.0, 9.5, 0.0), (13.0, 10.0, 1.5)]):
        for policy, ret in (("agent", agent), ("a", a), ("b", b)):
            rows.append({"policy": policy, "seed": seed, "return": ret, "avg_time_in_system_h": 100.0 - ret,
                         "total_cost_usd": 1000.0})
    comparison = agent_regimes.regime_comparison(rows, ("a", "b"))
    assert comparison["best_scripted"] == "a"
    ret = comparison["return"]
    assert ret["n"] == 4 and ret["diff"] == pytest.approx(np.mean([2.0, 3.0, 1.5, 3.0]))
    assert ret["ci"] > 0.0 and ret["p"] < 0.05
    assert comparison["avg_time_in_system_h"]["diff"] == pytest.approx(-ret["diff"])
    assert comparison["total_cost_usd"]["diff"] == 0.0 and comparison["total_cost_usd"]["p"] == 1.0
    # Holm over two regimes: the clear one stays better, one of no difference is not significant.
    level = copy.deepcopy(comparison)
    level["return"].update(diff=0.0, p=1.0)
    comparisons = {(1.0, 1.0, 0.8, "flagship"): comparison, (0.3, 1.0, 0.8, "flagship"): level}
    agent_regimes.adjust(comparisons)
    assert ret["p_holm"] == pytest.approx(2 * ret["p"]) and ret["verdict"] == "better"
    assert level["return"]["verdict"] == "not significant"
