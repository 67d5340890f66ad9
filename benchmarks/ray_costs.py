"""What the Ray layer costs on this machine: start-up times and the resident memory of Ray's processes.

Measures, in rounds: starting a local Ray instance (2 CPUs) and a simulated two-node cluster
(ray.cluster_utils.Cluster, one CPU a node); the resident memory (RSS) of Ray's own processes and of a task worker
after it ran episodes of ``--env`` (an env id or scenario file; default GeoPipe-v0); and, with RLlib, building masked
PPO with 2 env runners on the same world and the RSS of each env runner and of the driver after one iteration. Needs
the ``rllib`` extra (Linux: reads /proc)::

    python benchmarks/ray_costs.py --rounds 2 [--env GeoPipe-v0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geopipe_evaluation import ray_backend  # noqa: E402
from geopipe_evaluation.episodes import run_episode  # noqa: E402
from geopipe_evaluation.specs import parse_env  # noqa: E402

NODE_ARGS = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}


def rss_mib_by_process() -> dict[str, list[float]]:
    """Resident memory (MiB) of this machine's Ray processes, grouped by name: ``ray::<task or actor>`` for
    workers, else the program (gcs_server, raylet, log_monitor.py, ...)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if "VmRSS:" not in status:  # a kernel thread
            continue
        rss_mib = _rss_mib(status)
        if args[0].startswith("ray::"):
            groups[args[0]].append(rss_mib)
        elif any("/ray/" in a for a in args):
            groups[next((Path(a).name for a in args if a.endswith(".py")), Path(args[0]).name)].append(rss_mib)
    return dict(groups)


def _rss_mib(status: str) -> float:
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")) / 1024


def own_rss_mib() -> float:
    """This process's resident memory (MiB)."""
    return _rss_mib(Path("/proc/self/status").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0", help="env id or scenario .yaml (default GeoPipe-v0)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    ray_backend.prepare_environment()
    import ray
    from ray.cluster_utils import Cluster
    from ray.tune.registry import register_env

    from geopipe_agents import rllib_training
    from geopipe_agents.rllib import RunFolderPPO, make_masked_env

    starts: dict[str, list[float]] = defaultdict(list)
    memory: dict[str, list[float]] = defaultdict(list)
    tasks = [ray_backend.portable_task((parse_env(args.env), "bace-pipe", seed, None, False)) for seed in (1000, 1001)]
    env = tasks[0][0]  # a scenario file as an absolute path, for the Ray workers
    for _ in range(args.rounds):
        started = time.perf_counter()
        ray_backend.connect(num_cpus=2)
        starts["local instance (2 CPUs), ray.init"].append(time.perf_counter() - started)
        started = time.perf_counter()
        remote_chunk = ray.remote(num_cpus=1)(ray_backend.run_chunk)
        ray.get([remote_chunk.remote(run_episode, [task]) for task in tasks])
        starts[f"first 2 tasks of 1 {args.env} episode each (worker start + episode)"].append(time.perf_counter() - started)
        for name, values in rss_mib_by_process().items():
            memory[f"sweep: {name}"].extend(values)
        ray_backend.disconnect()

        started = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args=NODE_ARGS)
        cluster.add_node(**NODE_ARGS)
        starts["two-node cluster (Cluster, head + 1 node)"].append(time.perf_counter() - started)
        cluster.shutdown()

        env_kwargs = {} if env.scenario is None else {"scenario": env.scenario}
        plan = rllib_training.plan_run(None, env.env_id, 0, {"num_env_runners": 2, "env_kwargs": env_kwargs}, 1)
        started = time.perf_counter()
        ray_backend.connect(num_cpus=2, extra="rllib")
        register_env(rllib_training.ENV_NAME, make_masked_env)
        with tempfile.TemporaryDirectory() as folder:
            algo = RunFolderPPO(config=rllib_training.build_config(plan), run_dir=Path(folder))
            starts["RLlib PPO with 2 env runners: Ray start + build"].append(time.perf_counter() - started)
            algo.train()
            for name, values in rss_mib_by_process().items():
                memory[f"rllib: {name}"].extend(values)
            memory["rllib: driver (learner + local env runner)"].append(own_rss_mib())
            algo.stop()
        ray_backend.disconnect()

    print(f"{args.rounds} round(s)\n\n| start-up | seconds (each round) | mean |\n|---|---|---|")
    for name, values in starts.items():
        print(f"| {name} | {', '.join(f'{v:.1f}' for v in values)} | {statistics.mean(values):.1f} |")
    print("\n| process | count a round | RSS per process (MiB), mean | max |\n|---|---|---|---|")
    for name, values in sorted(memory.items()):
        print(f"| {name} | {len(values) / args.rounds:g} | {statistics.mean(values):.0f} | {max(values):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
