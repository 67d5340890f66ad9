"""Train a MaskablePPO (or PPO) scheduler on GeoPipe; each run gets its own folder with models, logs and config.

Examples::

    geopipe-train                                               # MaskablePPO on GeoPipe-v0, agents/hyperparams/maskable_ppo.yml
    geopipe-train --algo ppo --env GeoPipe-Paper24-v0 --seed 3 --hyperparams n_envs=2 learning_rate=1.0e-4
    geopipe-train --resume runs/maskable_ppo_GeoPipe-v0_20250101-120000_0 --n-timesteps 100000

Hyperparameters come from ``agents/hyperparams/<algo>.yml``, shipped with the package (entry = env id, else
``default``). Training envs are seeded ``seed + i`` below 1000; evaluation runs on held-out seeds from
``--eval-seed-start`` (1000 by default), where ``bace-pipe`` and ``sjf`` are also run once so that
``learning_curve.png`` can draw their returns beside the agent's. ``python train.py`` in a source checkout runs the
same :func:`main`. The logic lives in ``agents.training``, ``agents.callbacks`` and ``agents.learning_curve``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.loading import missing_train_extra
from baselines.cli import OneLineErrorParser, command_line, int_at_least

PROG = "geopipe-train"
DEFAULT_EVAL_FREQ = 10_000
DEFAULT_EVAL_EPISODES = 5
DEFAULT_CHECKPOINT_FREQ = 50_000
DEFAULT_TORCH_THREADS = 1

_POSITIVE_INT = int_at_least(1)
_NON_NEGATIVE_INT = int_at_least(0)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    from agents import rllib_training, training

    parser = OneLineErrorParser(prog=prog, description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--algo", choices=[*training.ALGOS, rllib_training.ALGO], help=f"algorithm (default {training.DEFAULT_ALGO}, or the resumed run's)")
    add("--env", help=f"registered GeoPipe env id (default {training.DEFAULT_ENV_ID}, or the resumed run's)")
    add("--seed", type=_NON_NEGATIVE_INT, default=0, help="env i is seeded seed + i, below 1000 (default %(default)s)")
    add("--n-timesteps", type=_POSITIVE_INT, help="timesteps to train (to add, when resuming); sets n_timesteps")
    add("--hyperparams", nargs="+", default=[], metavar="KEY=VALUE", help="hyperparameter overrides; values are YAML")
    add("--hyperparams-file", type=Path, help="hyperparameter file (default agents/hyperparams/<algo>.yml, shipped)")
    add("--eval-freq", type=_NON_NEGATIVE_INT, default=DEFAULT_EVAL_FREQ, help="evaluate every N timesteps, 0 = never (default %(default)s)")
    add("--eval-episodes", type=_POSITIVE_INT, default=DEFAULT_EVAL_EPISODES, help="held-out seeds per evaluation (default %(default)s)")
    add("--eval-seed-start", type=_NON_NEGATIVE_INT, default=training.FIRST_HELD_OUT_SEED, help="first evaluation seed, at least 1000 (default %(default)s)")
    add("--checkpoint-freq", type=_NON_NEGATIVE_INT, default=DEFAULT_CHECKPOINT_FREQ, help="checkpoint every N timesteps, 0 = never (default %(default)s)")
    add("--log-dir", type=Path, default=Path("runs"), help="folder of run folders (default %(default)s)")
    add("--run-name", help="run folder name (default <algo>_<env>_<YYYYmmdd-HHMMSS>_<seed>)")
    add("--resume", type=Path, metavar="RUN_DIR", help="continue that run's latest checkpoint or model.zip, in a new run folder")
    # Small MLP updates gain nothing from more threads, and lose several-fold to contention on a busy machine.
    add("--torch-threads", type=_POSITIVE_INT, default=DEFAULT_TORCH_THREADS, help="torch CPU threads (default %(default)s)")
    add("--ray-address", metavar="ADDR", help=f"with --algo {rllib_training.ALGO}: join the Ray cluster at ADDR (default: a local one)")
    add("--verbose", type=int, choices=(0, 1), default=1, help="1 prints SB3's training tables (default %(default)s)")
    add("--no-progress-bar", action="store_true", help="hide the progress bar")
    return parser


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """Train as ``argv`` asks; 0 on success. Bad input, or a missing ``[train]`` extra, exits 2 with one line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        import torch

        from agents import rllib_training, training
    except ImportError as exc:
        OneLineErrorParser(prog=prog).error(missing_train_extra("training", exc))
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    rllib = args.algo == rllib_training.ALGO
    try:
        if args.ray_address is not None and not rllib:
            raise training.TrainingInputError(f"--ray-address needs --algo {rllib_training.ALGO}")
        overrides = training.parse_overrides(args.hyperparams)
        if args.n_timesteps is not None:
            overrides["n_timesteps"] = args.n_timesteps
        plan = (rllib_training if rllib else training).plan_run(
            args.algo, args.env, args.seed, overrides, args.eval_episodes, args.hyperparams_file, args.resume, args.eval_seed_start
        )
        run_dir = training.create_run_dir(args.log_dir, plan, args.run_name)
    except training.TrainingInputError as exc:
        parser.error(str(exc))
    training.write_run_files(run_dir, plan, vars(args), command_line(prog, argv))
    print(f"run folder: {run_dir}")
    torch.set_num_threads(args.torch_threads)
    if rllib:
        steps = rllib_training.train(plan, run_dir, args.eval_freq, args.checkpoint_freq, args.ray_address, args.verbose)
        print(f"{steps} timesteps; model in {run_dir}/{training.MODEL_NAME}/")
        return 0
    model = training.train(
        plan, run_dir, args.eval_freq, args.checkpoint_freq, progress_bar=not args.no_progress_bar, verbose=args.verbose
    )
    print(f"{model.num_timesteps} timesteps; model in {run_dir}/{training.MODEL_NAME}.zip")
    return 0


if __name__ == "__main__":
    sys.exit(main())
