"""What each training choice of the shipped agent buys: short MaskablePPO runs that each change one setting.

Usage: ``python benchmarks/agent_ablation.py [--timesteps 50000] [--seeds 30] [--out benchmarks/results/agent_ablation.json]``

Every variant trains ``--timesteps`` steps with ``train.py``'s GeoPipe-v0 hyperparameters (the shipped agent's
settings: ``CandidateScoringPolicy``, gamma 1, one env with 1,024 steps per update, lr 1e-3, no entropy bonus,
on the ``geopipe-v0-wide`` world) with one setting changed, from training seed 0. Each final model then plays GeoPipe-v0
deterministically on the validation seeds 5000.. (never the test seeds 1000..), and the default model also with
the plain argmax over actions instead of the mode of the decision. ``fcfs-random`` and ``bace-pipe`` play the same
seeds. Printed per variant: mean return (± 95% CI, t), the share of decisions where the agent waited although it
could launch, and the training wall time and steps/s (this machine, shared: compare within one run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import geopipe_env  # noqa: E402, F401
from geopipe_agents.loading import load_agent  # noqa: E402
from geopipe_baselines import make_policy  # noqa: E402
from geopipe_baselines.policy import WaitCounter, play_episode  # noqa: E402
from geopipe_evaluation.stats import mean_ci  # noqa: E402

VARIANTS = {  # name → hyperparameter overrides of the GeoPipe-v0 entry
    "shipped settings": [],
    "gamma 0.99": ["gamma=0.99"],
    "MultiInputPolicy (flat MLP)": ["policy=MultiInputPolicy", "policy_kwargs={net_arch: [128, 128]}"],
    "8 in-process envs × 128 steps": ["n_envs=8", "n_steps=128"],
    "lr 3e-4, entropy 0.01": ["learning_rate=3.0e-4", "ent_coef=0.01"],
}
ARGMAX = "shipped settings, argmax play"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "agent_ablation.json"


class ArgmaxPlay:
    """A loaded agent that acts by the plain argmax over its masked action probabilities."""

    def __init__(self, agent) -> None:
        self.agent, self.name, self.env_kwargs = agent, ARGMAX, {}

    def reset(self, env) -> None:
        self.agent.reset(env)

    def act(self, obs, info) -> int:
        policy = self.agent.model.policy
        tensor, _ = policy.obs_to_tensor(obs)
        with torch.no_grad():
            dist = policy.get_distribution(tensor, action_masks=np.asarray(info["action_mask"])[None])
        return int(dist.get_actions(deterministic=True)[0])


def play(policy, seeds) -> dict:
    counted = WaitCounter(policy)
    returns = [play_episode(gym.make("GeoPipe-v0"), counted, seed)[0] for seed in seeds]
    ci = mean_ci(returns)
    return {"mean_return": ci.mean, "ci95": ci.ci95, "wait_share": counted.waited / max(counted.could, 1),
            "returns": returns}


def train(name: str, overrides: list[str], timesteps: int, log_dir: Path) -> tuple[Path, float]:
    run = "v" + str(list(VARIANTS).index(name))
    cmd = [sys.executable, str(ROOT / "train.py"), "--env", "GeoPipe-v0", "--n-timesteps", str(timesteps),
           "--eval-freq", "0", "--checkpoint-freq", "0", "--log-dir", str(log_dir), "--run-name", run,
           "--no-progress-bar", "--verbose", "0"] + (["--hyperparams", *overrides] if overrides else [])
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return log_dir / run / "model.zip", time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=50_000)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = range(5000, 5000 + args.seeds)
    rows = {name: play(make_policy(name), seeds) for name in ("fcfs-random", "bace-pipe")}
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in VARIANTS.items():
            model, wall_s = train(name, overrides, args.timesteps, Path(tmp))
            agent = load_agent(model)
            rows[name] = {**play(agent, seeds), "train_s": wall_s, "steps_per_s": args.timesteps / wall_s,
                          "overrides": overrides}
            if not overrides:
                rows[ARGMAX] = play(ArgmaxPlay(agent), seeds)
            print(f"{name}: {rows[name]['mean_return']:.2f} ({wall_s:.0f} s)", flush=True)
    print(f"\n{args.timesteps:,} training steps per variant; GeoPipe-v0, validation seeds {seeds.start}–{seeds.stop - 1}\n")
    print("| variant | mean return ± 95% CI | waits where it could launch | training wall time (steps/s) |")
    print("|---|---|---|---|")
    for name, row in rows.items():
        train_s = f"{row['train_s']:.0f} s ({row['steps_per_s']:.0f})" if "train_s" in row else "—"
        waits = f"{100 * row['wait_share']:.0f}%"
        print(f"| {name} | {row['mean_return']:.2f} ± {row['ci95']:.2f} | {waits} | {train_s} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"timesteps": args.timesteps, "seeds": list(seeds), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
