"""The speed benchmarks that the docs quote: benchmarks/revisions.py runs the named revision's code,
benchmarks/kernel_share.py clocks the kernels and puts them back, and benchmarks/greedy_periodicity.py finds periodic
stretches where there are some."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import numpy as np

from benchmarks import greedy_periodicity, kernel_share
from geopipe_env.physics import schedule
from benchmarks import revisions

IN_GIT = shutil.which("git") is not None and subprocess.run(
    ["git", "-C", str(revisions.REPO), "rev-parse", "HEAD"], capture_output=True
).returncode == 0
needs_git = pytest.mark.skipif(not IN_GIT, reason="not a git checkout")


def test_worktree_runs_and_prints_its_ratio(capsys):
    assert revisions.main([revisions.WORKTREE, "--rounds", "1", "--decisions", "20"]) == 0
    out = capsys.readouterr().out
    assert "round 0: WORKTREE" in out
    assert "1.00x (rounds 1.00-1.00)" in out


def test_a_run_refuses_a_geopipe_env_from_elsewhere(tmp_path):
    """A folder without geopipe_env: the installed package would be imported, and the run says so."""
    with pytest.raises(SystemExit, match="not from the revision's files"):
        revisions.run(tmp_path, "GeoPipe-v0", 1, seed=0)


@needs_git
def test_export_is_the_revisions_files(tmp_path):
    tree = revisions.export("HEAD", tmp_path)
    committed = subprocess.run(["git", "-C", str(revisions.REPO), "show", "HEAD:geopipe_env/env.py"],
                               capture_output=True, text=True, check=True).stdout
    assert (tree / "geopipe_env" / "env.py").read_text() == committed


@needs_git
def test_unknown_revision_and_repeated_revision_are_one_line_errors(tmp_path, capsys):
    with pytest.raises(SystemExit, match="cannot export 'no-such-revision'"):
        revisions.export("no-such-revision", tmp_path)
    with pytest.raises(SystemExit):
        revisions.main(["HEAD", "HEAD"])
    assert "name each revision (with its env) once" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        revisions.main(["HEAD="])
    assert "'HEAD=': expected REV or REV=ENV" in capsys.readouterr().err


def test_one_revision_runs_two_envs_named_after_it(capsys):
    """WORKTREE=A WORKTREE=B: one export, each label runs its own env id, the second's ratio taken to the first."""
    labels = [f"{revisions.WORKTREE}=GeoPipe-Toy-v0", f"{revisions.WORKTREE}=GeoPipe-Paper-v0"]
    assert revisions.main([*labels, "--rounds", "1", "--decisions", "20"]) == 0
    out = capsys.readouterr().out
    assert f"round 0: {labels[0]} " in out and f", {labels[1]} " in out
    assert "GeoPipe-Toy-v0, GeoPipe-Paper-v0, decisions/s" in out


def test_kernel_share_clocks_the_kernels_and_restores_them(capsys):
    from geopipe_env.simulation import sim_kernels

    before = {name: getattr(sim_kernels, name) for name in ("reallocate", "advance_to_event")}
    assert kernel_share.main(["--decisions", "200", "--warmup", "50"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:-1]}
    assert {"candidate_table", "_encode_compiled", "advance_to_event"} <= set(rows)
    assert 0.9 <= float(rows["_encode_compiled"][2]) <= 1.1  # about one observation per decision
    share = int(out.splitlines()[-1].split(", ")[1].split("%")[0])
    assert 0 < share < 100
    assert all(getattr(sim_kernels, name) is kernel for name, kernel in before.items())


def test_backends_prints_both_backends_and_their_ratio(capsys):
    """benchmarks/backends.py times the compiled and the Python backend in fresh processes and prints the ratio;
    a background share outside [0, 1) is a one-line usage error."""
    from benchmarks import backends

    assert backends.main(["--scenario", "toy", "--timing", "exact", "--decisions", "20", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "round 0: compiled" in out and "compiled ÷ python:" in out
    with pytest.raises(SystemExit) as exit_info:
        backends.main(["--background", "1.5"])
    assert exit_info.value.code == 2
    assert "--background: got 1.5" in capsys.readouterr().err


def test_periodicity_finds_the_stretch_of_a_periodic_schedule_and_none_in_an_aperiodic_one():
    """Start times that repeat with period 2 from micro-batch 4 on are found as a stretch at period 2 (not 1); start
    times that never repeat give none."""
    m = 20
    times = np.full((4, 1, m), np.nan)
    steps = [1.0, 2.0] * (m // 2)  # period 2: gaps alternate
    times[0, 0, :] = np.cumsum([0.0, 0.5, 0.9, 0.2] + steps[4:])
    assert greedy_periodicity.longest_periodic_share(times, 100.0, 1, 1e-9) == 0.0
    assert greedy_periodicity.longest_periodic_share(times, 100.0, 2, 1e-9) >= 13 / m
    times[0, 0, :] = np.cumsum(np.arange(1, m + 1) ** 1.5)
    assert all(greedy_periodicity.longest_periodic_share(times, 100.0, p, 1e-9) == 0.0 for p in range(1, 6))


def test_periodicity_runs_and_restores_the_executor(capsys):
    executor = schedule.ExecutorModel._run
    assert greedy_periodicity.main(["--decisions", "150", "--sample", "3", "--min-microbatches", "16"]) == 0
    assert schedule.ExecutorModel._run is executor
    out = capsys.readouterr().out
    assert "executor runs in 150 decisions" in out and "best period of 1-16" in out
