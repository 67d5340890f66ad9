"""evaluate.py --backend ray: the process backend's rows, tables and files, on a local instance and a two-node cluster."""

import json
import os

import pytest
from conftest import load_script

from geopipe_evaluation import ray_backend
from geopipe_evaluation.specs import parse_env
from geopipe_evaluation.episodes import run_episodes

ray_backend.prepare_environment()  # before ray is imported: 127.0.0.1 only, token auth, files in the temp folder
ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

evaluate = load_script("evaluate")

ENVS = ["GeoPipe-Toy-v0", "GeoPipe-v0"]
POLICIES = ["bace-pipe", "cr-ldf", "fcfs-random", "sjf"]
SEEDS = [1000, 1001, 1002]
NODE_ARGS = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}


@pytest.fixture(scope="module")
def process_rows():
    """The process pool's rows for every (env, policy, seed), the reference for the Ray runs."""
    return run_episodes([parse_env(e) for e in ENVS], POLICIES, SEEDS, None, 2, progress=False)


@pytest.fixture(scope="module")
def two_node_cluster():
    """A head and a worker node of one CPU each, both on 127.0.0.1."""
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args=NODE_ARGS)
    cluster.add_node(**NODE_ARGS)
    yield cluster
    cluster.shutdown()


def _evaluate(backend: str, out, capsys) -> str:
    argv = ["--env", *ENVS, "--policies", *POLICIES, "--seeds", str(len(SEEDS)), "--workers", "2", "--out", str(out), "--no-plots"]
    assert evaluate.main([*argv, "--backend", backend]) == 0
    return capsys.readouterr().out.rsplit("\n", 2)[0]  # the closing line holds the wall time


def test_ray_backend_prints_and_writes_what_the_process_backend_does(tmp_path, capsys):
    """A local Ray sweep prints the same tables and paired statistics and writes the same CSV and JSON, in the same order."""
    tables = {backend: _evaluate(backend, tmp_path / backend, capsys) for backend in ("process", "ray")}
    assert tables["ray"] == tables["process"] and "paired return difference" in tables["ray"]
    assert (tmp_path / "ray" / "results.csv").read_text() == (tmp_path / "process" / "results.csv").read_text()
    documents = [json.loads((tmp_path / backend / "results.json").read_text()) for backend in ("process", "ray")]
    for document in documents:
        document.pop("command")
    assert documents[0] == documents[1]


def test_two_node_cluster_gives_the_process_rows(two_node_cluster, process_rows):
    """A sweep on a two-node cluster returns the process pool's rows, timelines included, in the same order."""
    rows = run_episodes([parse_env(e) for e in ENVS], POLICIES, SEEDS, None, 2, progress=False, backend="ray", ray_address=two_node_cluster.address)
    assert rows == process_rows


def test_workers_on_both_nodes_get_the_code_by_runtime_env_and_one_thread(two_node_cluster):
    """Each node's workers find the project's packages in the job's py_modules (so a node needs no install of the
    project), run torch on one thread, and run at the driver's priority (not Ray's niceness 15)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def worker_facts():
        import os
        import sys
        from pathlib import Path

        import torch

        shipped = {pkg for entry in sys.path if "py_modules" in entry for pkg in ("geopipe_env", "geopipe_baselines", "geopipe_evaluation", "geopipe_agents") if (Path(entry) / pkg / "__init__.py").is_file()}
        return ray.get_runtime_context().get_node_id(), shipped, torch.get_num_threads(), os.nice(0)

    ray_backend.connect(two_node_cluster.address)
    try:
        nodes = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
        remote = ray.remote(worker_facts)
        facts = ray.get([remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote() for node in nodes])
    finally:
        ray_backend.disconnect()
    assert len(nodes) == 2 and {fact[0] for fact in facts} == set(nodes)
    for _, shipped, threads, niceness in facts:
        assert shipped == {"geopipe_env", "geopipe_baselines", "geopipe_evaluation", "geopipe_agents"}
        assert threads == 1 and niceness == os.nice(0)
