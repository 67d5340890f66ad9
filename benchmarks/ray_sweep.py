"""Wall time of one evaluate.py sweep on each backend: the process pool, a local Ray instance, and a two-node Ray
cluster simulated on this machine (ray.cluster_utils.Cluster, one CPU a node), run interleaved in rounds.

Each run is ``python evaluate.py --no-plots --workers 2`` in a fresh process (start-up included), on the same
episodes of ``--env`` (an env id or scenario file, as evaluate.py takes it; default GeoPipe-v0); the script checks
that every run wrote the same results.csv. Needs the ``ray`` extra::

    python benchmarks/ray_sweep.py --seeds 100 --rounds 2      # 11 scripted policies x 100 seeds = 1,100 episodes
    python benchmarks/ray_sweep.py --env GeoPipe-Abundant-v0 --seeds 100 --rounds 3   # the sweep of docs/ray.md
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geopipe_baselines import policy_names  # noqa: E402
from geopipe_evaluation import ray_backend  # noqa: E402

NODE_ARGS = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}
BACKENDS = ("process", "ray", "ray two-node")


def run_evaluate(out: Path, env: str, seeds: int, extra: list[str]) -> tuple[float, float]:
    """(wall seconds of one ``evaluate.py`` run on ``env`` writing to ``out``, the seconds it reports from the first
    episode's start to the files written: the wall time less the interpreter's start and imports)."""
    command = [sys.executable, str(ROOT / "evaluate.py"), "--policies", *policy_names(include_aliases=False), "--seeds", str(seeds),
               "--env", env, "--workers", "2", "--no-plots", "--out", str(out), *extra]
    started = time.perf_counter()
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    wall_s = time.perf_counter() - started
    return wall_s, float(output.strip().splitlines()[-1].split(" episodes in ")[1].split(" s;")[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0", help="env id or scenario .yaml (default GeoPipe-v0)")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    ray_backend.prepare_environment()  # the cluster below: 127.0.0.1 only, token auth in the environment
    from ray.cluster_utils import Cluster

    times: dict[str, list[tuple[float, float]]] = {b: [] for b in BACKENDS}
    cluster_start_s = []
    with tempfile.TemporaryDirectory() as folder:
        outputs = []
        for round_index in range(args.rounds):
            for backend in BACKENDS:
                out = Path(folder) / f"{backend.replace(' ', '-')}-{round_index}"
                if backend == "ray two-node":
                    started = time.perf_counter()
                    cluster = Cluster(initialize_head=True, head_node_args=NODE_ARGS)
                    cluster.add_node(**NODE_ARGS)
                    cluster_start_s.append(time.perf_counter() - started)
                    try:
                        times[backend].append(run_evaluate(out, args.env, args.seeds, ["--backend", "ray", "--ray-address", cluster.address]))
                    finally:
                        cluster.shutdown()
                else:
                    times[backend].append(run_evaluate(out, args.env, args.seeds, ["--backend", backend]))
                outputs.append((out / "results.csv").read_text())
                print(f"round {round_index + 1} {backend}: {times[backend][-1][0]:.1f} s ({times[backend][-1][1]:.1f} s after imports)", flush=True)
        same = all(text == outputs[0] for text in outputs)
    episodes = len(policy_names(include_aliases=False)) * args.seeds
    print(f"\n{args.env}: {episodes} episodes per run, {args.rounds} round(s) interleaved; every results.csv identical: {same}\n")
    print("| backend | wall time per run (s) | mean (s) | ratio to process | after imports, mean (s) | ratio to process |")
    print("|---|---|---|---|---|---|")
    base = [statistics.mean(t[i] for t in times["process"]) for i in (0, 1)]
    for backend in BACKENDS:
        mean = [statistics.mean(t[i] for t in times[backend]) for i in (0, 1)]
        print(f"| {backend} | {', '.join(f'{t[0]:.1f}' for t in times[backend])} | {mean[0]:.1f} | {mean[0] / base[0]:.2f} | {mean[1]:.1f} | {mean[1] / base[1]:.2f} |")
    print(f"\ntwo-node cluster start (head + worker node): {', '.join(f'{t:.1f}' for t in cluster_start_s)} s, not in the times above")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
