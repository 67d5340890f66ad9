"""The regime-map script (benchmarks/regimes.py) on one regime: files, table and figures that agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import regimes  # noqa: E402


def test_one_regime_writes_a_consistent_table_and_heat_map(tmp_path):
    """One regime, one seed: the JSON's derived figures are the % changes of its own policy means."""
    code = regimes.main(["--wan", "1", "--shapes", "d=pub", "--loads", "0.8", "--seeds", "1", "--workers", "1",
                         "--out", str(tmp_path)])
    assert code == 0
    result = json.loads((tmp_path / "regimes.json").read_text())
    (regime,) = result["regimes"]
    means = regime["means"]
    jct = {p: m["avg_jct_h"] for p, m in means.items()}
    assert regime["paradox_ldf"] == pytest.approx(100 * (jct["cr-ldf"] - jct["ldf"]) / jct["ldf"])
    assert regime["bace_vs"]["lcf"][0] == pytest.approx(100 * (jct["bace-pipe"] - jct["lcf"]) / jct["lcf"])
    assert set(means) == set(regimes.POLICIES)
    assert (tmp_path / "regimes.png").stat().st_size > 10_000
    assert (tmp_path / "regimes.md").read_text().count("| ×1 | d=pub | 0.8 |") == 1


def test_offered_load_is_the_expected_gpu_hours_of_the_mix():
    """One class, one dataset: the expected GPU-hours are that job's local iteration time × iterations × GPUs."""
    data = regimes.flagship()
    job_class = data["workload"]["job_classes"][1]
    data["workload"]["job_classes"] = [job_class]
    data["workload"]["datasets"] = ["wikitext-103"]
    hours = regimes.mean_gpu_hours(data)
    # llama2-13b: 16 GPUs, 197 iterations (103,227,021 tokens / 524,288 per iteration, rounded up).
    assert 197 * 16 * 6.0 / 3600 < hours < 197 * 16 * 9.0 / 3600


def test_bad_ranges_are_one_line_errors(capsys):
    """A non-positive WAN scale or load is refused before anything runs."""
    with pytest.raises(SystemExit) as exc:
        regimes.main(["--wan", "0"])
    assert exc.value.code == 2 and "--wan and --loads must be > 0" in capsys.readouterr().err
