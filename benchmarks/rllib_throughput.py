"""Training throughput on a GeoPipe env: RLlib masked PPO (0, 1, 2 env runners) against SB3 MaskablePPO (1, 2 envs),
with the same batch and network, run interleaved in rounds.

Both learn from 512 env steps per update in minibatches of 128 for 10 epochs, with a [128, 128] tanh MLP for the
policy and another for the value, no normalisation, torch on one thread in every process. Each run is a fresh
process; it reports the env steps per second of learning (updates included, start-up excluded) and the start-up
(imports, Ray, workers, model). ``--env`` is a registered env id (default GeoPipe-v0). Needs the ``rllib`` extra::

    python benchmarks/rllib_throughput.py --timesteps 20480 --rounds 2 [--env GeoPipe-v0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCH = {"rollout": 512, "minibatch": 128, "epochs": 10, "net": [128, 128]}
RUNS = ("rllib 0 runners", "rllib 1 runner", "rllib 2 runners", "sb3 1 env", "sb3 2 envs")


def one_run(name: str, env_id: str, timesteps: int) -> dict[str, float]:
    """Train one configuration on ``env_id`` for about ``timesteps`` env steps; (start-up s, learning s, env steps)."""
    import torch

    torch.set_num_threads(1)
    workers = int(name.split()[1])
    with tempfile.TemporaryDirectory() as folder:
        if name.startswith("rllib"):
            from geopipe_agents import rllib_training
            from geopipe_evaluation import ray_backend

            overrides = {"num_env_runners": workers, "train_batch_size": BATCH["rollout"], "minibatch_size": BATCH["minibatch"],
                         "num_epochs": BATCH["epochs"], "fcnet_hiddens": BATCH["net"], "env_kwargs": {}, "n_timesteps": timesteps}
            plan = rllib_training.plan_run(None, env_id, 0, overrides, 1)
            ray_backend.connect(num_cpus=max(2, workers), extra="rllib")
            from ray.tune.registry import register_env

            from geopipe_agents.rllib import RunFolderPPO, make_masked_env

            register_env(rllib_training.ENV_NAME, make_masked_env)
            algo = RunFolderPPO(config=rllib_training.build_config(plan), run_dir=Path(folder))
            first = steps = int(algo.train()["num_env_steps_sampled_lifetime"])  # the first iteration warms up; not timed
            ready = time.perf_counter()
            while steps - first < timesteps:
                steps = int(algo.train()["num_env_steps_sampled_lifetime"])
            learned = time.perf_counter() - ready
            algo.stop()
            ray_backend.disconnect()
            return {"startup_s": ready - STARTED, "learn_s": learned, "steps": steps - first}
        from geopipe_agents import training

        overrides = {"n_envs": workers, "n_steps": BATCH["rollout"] // workers, "batch_size": BATCH["minibatch"], "n_epochs": BATCH["epochs"],
                     "policy": "MultiInputPolicy", "policy_kwargs": {"net_arch": BATCH["net"]}, "normalize": False, "env_kwargs": {},
                     "n_timesteps": timesteps}
        plan = training.plan_run("maskable_ppo", env_id, 0, overrides, 1)
        venv = training.make_vec_env(env_id, plan.hyperparams, 0)
        model = training.build_model(plan, venv, Path(folder), verbose=0)
        model.learn(BATCH["rollout"])  # the first update warms up like RLlib's; not timed
        ready = time.perf_counter()
        model.learn(timesteps, reset_num_timesteps=False)
        learned = time.perf_counter() - ready
        venv.close()
        return {"startup_s": ready - STARTED, "learn_s": learned, "steps": timesteps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GeoPipe-v0", help="the GeoPipe env id to train on (default GeoPipe-v0)")
    parser.add_argument("--timesteps", type=int, default=20_480)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", choices=RUNS, help=argparse.SUPPRESS)  # a single run, in this process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.one, args.env, args.timesteps)))
        return 0
    results: dict[str, list[dict[str, float]]] = {name: [] for name in RUNS}
    for round_index in range(args.rounds):
        for name in RUNS:
            started = time.perf_counter()
            output = subprocess.run([sys.executable, __file__, "--one", name, "--env", args.env, "--timesteps", str(args.timesteps)],
                                    check=True, capture_output=True, text=True).stdout
            result = json.loads(output.strip().splitlines()[-1])
            result["wall_s"] = time.perf_counter() - started
            results[name].append(result)
            print(f"round {round_index + 1} {name}: {result['steps'] / result['learn_s']:.0f} steps/s, start-up {result['startup_s']:.1f} s", flush=True)
    print(f"\n{args.env}, {args.timesteps} timed env steps a run, {args.rounds} round(s) interleaved; batch {BATCH}\n")
    print("| run | learning steps/s (each round) | mean steps/s | ratio to sb3 1 env | start-up (s) |")
    print("|---|---|---|---|---|")
    rate = {name: [r["steps"] / r["learn_s"] for r in rs] for name, rs in results.items()}
    base = statistics.mean(rate["sb3 1 env"])
    for name in RUNS:
        startup = statistics.mean(r["startup_s"] for r in results[name])
        print(f"| {name} | {', '.join(f'{v:.0f}' for v in rate[name])} | {statistics.mean(rate[name]):.0f} | {statistics.mean(rate[name]) / base:.2f} | {startup:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
