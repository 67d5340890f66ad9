"""Side by side: GeoPipe-v0's decisions/s against peer scheduling envs, in interleaved rounds, as ratios.

Usage::

    python benchmarks/peer_throughput.py [--jumanji-python PATH] [--decima PATH --tpch PATH] [--rounds 5]
        [--decisions 3000] [--env GeoPipe-v0]

Each round runs GeoPipe-v0, then each peer, each in a fresh process: a warm-up of 300 decisions (numba's cached
kernels load, jax compiles), then ``--decisions`` timed decisions of a random valid policy with resets included
(episodes restart with the next seed). It prints each round's rates and the ratio of GeoPipe-v0's to each peer's,
then the medians and the median ratios. The machine's speed drifts from minute to minute, so only a ratio taken
within one round means much. Name at least one peer:

- Jumanji's JobShop-v0 (10 jobs on 10 machines) through ``JumanjiToGymWrapper`` (``--jumanji-python``: an
  interpreter with jax and jumanji, e.g. a venv with ``pip install jumanji``; they are not GeoPipe dependencies).
  One decision is one step, which assigns an operation or no-op to every machine; the policy draws each machine's
  choice uniformly among its valid ones.
- Decima's env in its Gymnasium port, spark-sched-sim (``--decima``: a checkout of
  github.com/ArchieGertsman/spark-sched-sim, which is not on PyPI; ``--tpch``: the TPC-H job DAGs of
  github.com/hongzimao/decima-sim, its ``spark_env/tpch`` folder, which the port otherwise downloads when its env
  is built). It runs in this interpreter (gymnasium, numpy and networkx), with the port's example settings (10
  executors, 50 jobs). The policy is the port's ``RandomScheduler``: a random job that has a schedulable stage,
  that stage, and a uniform executor count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from geopipe_evaluation.cli import int_at_least

WARMUP = 300

# A runner prints one number: decisions per second over the timed decisions. Each env fills in how it is made and
# its policy, a uniform draw among the valid actions (rng.integers into np.flatnonzero(mask), as env_throughput.py).
RUNNER = """
import time
import numpy as np
{make_env}
rng = np.random.default_rng(0)
seed = 0

def act(obs, info):
{act}

def run(decisions):
    global seed
    obs, info = env.reset(seed=seed)
    for _ in range(decisions):
        obs, reward, terminated, truncated, info = env.step(act(obs, info))
        if terminated or truncated:
            seed += 1
            obs, info = env.reset(seed=seed)

run({warmup})
start = time.perf_counter()
run({decisions})
print({decisions} / (time.perf_counter() - start))
"""

def geopipe(env_id: str) -> dict:
    """The GeoPipe side of a round: a GeoPipe env (``env_id``) and a masked random policy."""
    return {
        "make_env": f'import gymnasium as gym\nimport geopipe_env\nenv = gym.make("{env_id}").unwrapped',
        "act": '    valid = np.flatnonzero(info["action_mask"])\n    return int(valid[rng.integers(valid.size)])',
    }
# One decision assigns every machine: each machine's choice is drawn among its valid ones.
JUMANJI = {
    "make_env": 'import jumanji\nfrom jumanji.wrappers import JumanjiToGymWrapper\n'
                'env = JumanjiToGymWrapper(jumanji.make("JobShop-v0"))',
    "act": '    return np.array([v[rng.integers(v.size)] for v in map(np.flatnonzero, obs["action_mask"])])',
}
# spark-sched-sim's example settings (its examples.py); the TPC-H data under ./data/tpch of the working directory.
DECIMA_CONFIG = {
    "num_executors": 10, "job_arrival_cap": 50, "job_arrival_rate": 4.0e-5, "moving_delay": 2000.0,
    "warmup_delay": 1000.0, "data_sampler_cls": "TPCHDataSampler",
}


def decima(checkout: str) -> dict[str, str]:
    """The runner parts for spark-sched-sim at ``checkout``: its heuristics' helpers are loaded from their file
    (the ``schedulers`` package imports torch-geometric for Decima's own network)."""
    helpers = os.path.join(checkout, "schedulers", "heuristics", "utils.py")
    return {
        "make_env": "import importlib.util\nimport gymnasium as gym\nimport spark_sched_sim\n"
                    f"spec = importlib.util.spec_from_file_location('heuristics', {helpers!r})\n"
                    "heuristics = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(heuristics)\n"
                    f"env = gym.make('spark_sched_sim:SparkSchedSimEnv-v0', env_cfg={DECIMA_CONFIG!r}).unwrapped",
        "act": "    heuristics.preprocess_obs(obs)\n"
               "    jobs, stage = list(range(len(obs['exec_supplies']))), -1\n"
               "    while jobs and stage == -1:  # RandomScheduler: a random job with a schedulable stage\n"
               "        stage = heuristics.find_stage(obs, jobs.pop(rng.integers(len(jobs))))\n"
               "    return {'stage_idx': stage, 'num_exec': int(rng.integers(1, obs['num_committable_execs'] + 1))}",
    }


def rate(python: str, env: dict[str, str], decisions: int, cwd: str | None = None, path: str | None = None) -> float:
    """Decisions per second of one run of :data:`RUNNER` for ``env`` in a fresh ``python`` process (in ``cwd``,
    with ``path`` on ``PYTHONPATH``)."""
    code = RUNNER.format(**env, warmup=WARMUP, decisions=decisions)
    variables = {"OMP_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
    if path is not None:
        variables["PYTHONPATH"] = os.pathsep.join(filter(None, (path, os.environ.get("PYTHONPATH"))))
    try:
        done = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, cwd=cwd, env={**os.environ, **variables}
        )
    except OSError as error:
        raise SystemExit(f"cannot run {python}: {error.strerror}") from None
    if done.returncode != 0:
        raise SystemExit(f"{python} failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jumanji-python", help="a Python interpreter with jax and jumanji installed")
    parser.add_argument("--decima", help="a checkout of spark-sched-sim (github.com/ArchieGertsman/spark-sched-sim)")
    parser.add_argument("--tpch", help="decima-sim's spark_env/tpch folder (github.com/hongzimao/decima-sim)")
    parser.add_argument("--env", default="GeoPipe-v0", help="the GeoPipe env id to run (default GeoPipe-v0)")
    parser.add_argument("--rounds", type=int_at_least(1), default=5)
    parser.add_argument("--decisions", type=int_at_least(1), default=3000)
    args = parser.parse_args(argv)
    if (args.decima is None) != (args.tpch is None):
        parser.error("--decima and --tpch go together")
    if args.decima is not None:
        if not os.path.isfile(os.path.join(args.decima, "spark_sched_sim", "__init__.py")):
            parser.error(f"--decima {args.decima}: not a spark-sched-sim checkout (no spark_sched_sim/__init__.py)")
        if not os.path.isfile(os.path.join(args.tpch, "2g", "adj_mat_1.npy")):
            parser.error(f"--tpch {args.tpch}: not decima-sim's spark_env/tpch folder (no 2g/adj_mat_1.npy)")
    if args.jumanji_python is None and args.decima is None:
        parser.error("name a peer: --jumanji-python, or --decima with --tpch")
    with tempfile.TemporaryDirectory() as work:
        peers = []  # (column, interpreter, runner parts, working directory, PYTHONPATH entry)
        if args.jumanji_python is not None:
            peers.append(("Jumanji JobShop-v0 steps/s", args.jumanji_python, JUMANJI, None, None))
        if args.decima is not None:
            os.mkdir(os.path.join(work, "data"))
            os.symlink(os.path.abspath(args.tpch), os.path.join(work, "data", "tpch"))
            peers.append(("Decima (spark-sched-sim) steps/s", sys.executable, decima(os.path.abspath(args.decima)),
                          work, os.path.abspath(args.decima)))
        ours, theirs = [], [[] for _ in peers]
        print(f"| round | {args.env} decisions/s | " + " | ".join(f"{p[0]} | ratio" for p in peers) + " |")
        print("|---|---|" + "---|---|" * len(peers))
        for round_ in range(args.rounds):
            ours.append(rate(sys.executable, geopipe(args.env), args.decisions))
            cells = []
            for (_, python, env, cwd, path), rates in zip(peers, theirs):
                rates.append(rate(python, env, args.decisions, cwd, path))
                cells.append(f"{rates[-1]:,.0f} | {ours[-1] / rates[-1]:.2f}×")
            print(f"| {round_} | {ours[-1]:,.0f} | " + " | ".join(cells) + " |", flush=True)
        cells = [f"{statistics.median(r):,.0f} | {statistics.median([a / b for a, b in zip(ours, r)]):.2f}×" for r in theirs]
        print(f"| median | {statistics.median(ours):,.0f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
