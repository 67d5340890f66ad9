"""The optional Ray layer from outside: the core imports no ray, a missing extra is one line, one thread per worker."""

import math
import multiprocessing
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from geopipe_evaluation.specs import parse_env
from geopipe_evaluation.episodes import run_episode
from geopipe_evaluation.ray_backend import chunk_indices, is_loopback, portable_task
from geopipe_evaluation.threads import limit_worker_threads

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_core_packages_never_import_ray():
    """Importing geopipe_env, geopipe_baselines, geopipe_evaluation and geopipe_agents, with their CLIs' modules and the Ray layer's entry points, loads no ray."""
    result = _python(
        "import sys, geopipe_env, geopipe_baselines, geopipe_agents, geopipe_evaluation.specs, geopipe_evaluation.episodes, geopipe_evaluation.ray_backend, geopipe_agents.training, "
        "geopipe_agents.loading, geopipe_agents.rllib_training, evaluate, train\n"
        "loaded = sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))\n"
        "assert not loaded, loaded"
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("script", "args", "command"),
    [
        ("evaluate", ["--backend", "ray", "--env", "GeoPipe-Toy-v0", "--policies", "lcf", "--seeds", "1"], "pip install -e '.[ray]'"),
        ("train", ["--algo", "rllib_ppo", "--env", "GeoPipe-Toy-v0"], "pip install -e '.[rllib]'"),
    ],
)
def test_missing_extra_is_one_line_and_exit_2(script, args, command, tmp_path):
    """Without ray, --backend ray and --algo rllib_ppo stop with exit code 2 and one line naming the install command."""
    result = _python(
        "import sys; sys.modules['ray'] = None  # as if ray were not installed\n"
        f"import {script}; sys.exit({script}.main({args + ['--log-dir' if script == 'train' else '--out', str(tmp_path)]!r}))"
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and command in lines[0], result.stderr
    assert not any(tmp_path.iterdir())  # stopped before writing anything


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def test_process_pool_workers_run_torch_on_one_thread():
    """A spawn worker set up by limit_worker_threads runs torch on one thread, even on a many-core machine."""
    with ProcessPoolExecutor(1, multiprocessing.get_context("spawn"), initializer=limit_worker_threads) as pool:
        assert pool.submit(_torch_threads).result() == 1


@pytest.mark.parametrize(("num_tasks", "num_cpus"), [(1, 2), (7, 1), (1100, 2), (10, 2.5)])
def test_chunks_cover_every_task_once(num_tasks, num_cpus):
    """The chunks hold every task exactly once, in about four chunks per CPU, none empty."""
    chunks = chunk_indices(num_tasks, num_cpus)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(num_tasks))
    assert len(chunks) == min(num_tasks, math.ceil(4 * num_cpus)) and all(chunks)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [(None, True), ("127.0.0.1:6379", True), ("localhost:6379", True), ("[::1]:6379", True), ("10.0.0.5:6379", False), ("ray://head:10001", False)],
)
def test_loopback_addresses(address, loopback):
    """Local instances and loopback addresses are recognised; a cluster elsewhere is not."""
    assert is_loopback(address) is loopback


def test_portable_task_makes_files_absolute_and_keeps_the_row(monkeypatch):
    """A relative scenario file (and agent path) becomes absolute for the workers; the episode's row is unchanged."""
    monkeypatch.chdir(ROOT)
    task = (parse_env("geopipe_env/data/scenarios/toy.yaml"), "lcf", 1000, None, False)
    portable = portable_task(task)
    assert Path(portable[0].scenario).is_absolute() and portable[0].label == task[0].label and portable[1:] == task[1:]
    assert portable_task((parse_env("GeoPipe-Toy-v0"), "agents", 1, None, False))[1] == str(ROOT / "agents")
    expected = run_episode(*task)
    monkeypatch.chdir(ROOT / "tests")  # a worker's working folder differs from the driver's
    assert run_episode(*portable) == expected
