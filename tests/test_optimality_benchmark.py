"""benchmarks/optimality.py: the gap table on a few seeds, one-line refusals, and a real Ctrl-C that keeps the best
plan so far, marked not proven optimal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FOREGROUND_JOB

ROOT = Path(__file__).resolve().parents[1]
from benchmarks import optimality  # noqa: E402


def test_gap_table_on_two_seeds(tmp_path, capsys):
    out = tmp_path / "optimality.json"
    assert optimality.main(["--seed-start", "1002", "--seeds", "2", "--policies", "bace-pipe", "lcf", "--agents",
                            "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| **optimum** |" in table and "| bace-pipe |" in table and "| lcf |" in table
    document = json.loads(out.read_text())
    assert [o["proven"] for o in document["optima"]] == [True, True] and not document["interrupted"]
    for name, gap in document["gaps"].items():
        assert gap["seeds"] == 2 and gap["above_optimum_seeds"] == 0, name
        assert gap["return_gap_pct"]["estimate"] >= 0.0
    optimum = {o["seed"]: o["return"] for o in document["optima"]}
    for row in document["episodes"]:
        assert row["return"] <= optimum[row["seed"]] + 1e-9 * abs(row["return"])
    assert document["optimum"]["root_bound_gap_pct"]["estimate"] >= 0.0  # the bound is above the optimum
    # Another policy against the same optima, without solving again; a seed the file lacks is a one-line error.
    again = tmp_path / "again.json"
    assert optimality.main(["--seed-start", "1002", "--seeds", "2", "--optima", str(out), "--policies", "sjf",
                            "--agents", "--out", str(again)]) == 0
    second = json.loads(again.read_text())
    assert second["optima"] == document["optima"] and list(second["gaps"]) == ["sjf"]
    with pytest.raises(SystemExit):
        optimality.main(["--seed-start", "1002", "--seeds", "3", "--optima", str(out), "--policies", "sjf"])
    assert "no optimum of GeoPipe-Small-v0 for seed(s) [1004]" in capsys.readouterr().err


def test_bad_input_is_a_one_line_error_before_any_solving(tmp_path, capsys):
    """A world too large, an unknown env, policy or agent file, a bad --optima file, an unwritable --out."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for args in (["--env", "GeoPipe-v0"], ["--env", "no-such-world"], ["--policies", "no-such-policy"],
                 ["--agents", str(tmp_path / "missing.zip")], ["--optima", str(blocker)],
                 ["--out", str(blocker / "optimality.json")]):
        with pytest.raises(SystemExit) as stopped:
            optimality.main([*args, "--seeds", "1"])
        assert stopped.value.code == 2, args
    err = capsys.readouterr().err
    assert "the exact solver takes at most 8 jobs and 4 regions" in err
    assert "unknown policy 'no-such-policy'" in err and "not a results file of this script" in err
    assert "seed 1000:" not in err  # nothing was solved


def test_offered_load_prints_the_arrival_rates_the_files_cite(capsys):
    assert optimality.main(["--offered-load"]) == 0
    out = capsys.readouterr().out
    for line in ("14.607 GPU-h per job", "small-2r: 48 GPUs; mean interarrival at offered load 0.8 = 0.380 h",
                 "small: 64 GPUs; mean interarrival at offered load 0.8 = 0.285 h",
                 "small-4r: 72 GPUs; mean interarrival at offered load 0.8 = 0.254 h"):
        assert line in out
    for name, hours in (("small-2r", "0.380"), ("small", "0.285"), ("small-4r", "0.254")):
        scenario = ROOT / "geopipe_env" / "data" / "scenarios" / f"{name}.yaml"
        assert f"mean_interarrival_h: {hours}" in scenario.read_text()


def test_ctrl_c_reports_the_best_plan_so_far(tmp_path):
    """SIGINT during a long search (8 jobs, minutes): the search stops with its best plan, marked not proven, no
    further seed is solved, and the report and the JSON file are still written."""
    world = tmp_path / "small-8.yaml"
    world.write_text("extends: small\nname: small-8\nrandomize:\n  num_jobs: [8, 8]\n")
    out = tmp_path / "optimality.json"
    run = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "optimality.py"), "--env", str(world), "--seed-start", "1006",
         "--seeds", "2", "--policies", "bace-pipe", "--agents", "--progress-every", "0.5", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **FOREGROUND_JOB,
    )
    for line in run.stderr:  # the first progress line: the search is under way
        if line.startswith("optimal seed 1006:"):
            break
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == optimality.INTERRUPTED_EXIT
    assert "interrupted; the best plan so far is not proven optimal" in stderr
    assert "Traceback" not in stderr
    assert "(1 solved, 0 proven optimal)" in stdout
    document = json.loads(out.read_text())
    assert document["interrupted"] and document["seeds"] == [1006]
    (optimum,) = document["optima"]
    assert not optimum["proven"] and optimum["stopped_by"] == "interrupted"
    assert optimum["return"] >= optimum["first_return"]  # at least the best scripted plan it started from
