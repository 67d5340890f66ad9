"""Train a MaskablePPO (or PPO) scheduler on GeoPipe; each run gets its own folder with models, logs and config.

Examples::

    geopipe-train                                               # MaskablePPO on GeoPipe-v0, agents/hyperparams/maskable_ppo.yml
    geopipe-train --algo ppo --env GeoPipe-Paper24-v0 --seed 3 --hyperparams n_envs=2 learning_rate=1.0e-4
    geopipe-train --resume runs/maskable_ppo_GeoPipe-v0_20250101-120000_0 --n-timesteps 100000

Hyperparameters come from ``agents/hyperparams/<algo>.yml``, shipped with the package (entry = env id, else
``default``). Training envs are seeded ``seed + i`` below 1000; evaluation runs on held-out seeds from
``--eval-seed-start`` (1000 by default), where ``bace-pipe`` and ``sjf`` are also run once so that
``learning_curve.png`` can draw their returns beside the agent's. ``python train.py`` in a source checkout runs the
same :func:`main`. The logic lives in ``geopipe_agents.training``, ``geopipe_agents.callbacks`` and ``geopipe_agents.learning_curve``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from geopipe_agents.loading import missing_train_extra
from geopipe_evaluation.cli import OneLineErrorParser, command_line, int_at_least

PROG = "geopipe-train"
DEFAULT_EVAL_FREQ = 10_000
DEFAULT_EVAL_EPISODES = 5
# A run killed at any point resumes from a checkpoint at most this many timesteps old.
DEFAULT_CHECKPOINT_FREQ = 10_000
DEFAULT_KEEP_CHECKPOINTS = 5  # so a long run's checkpoints take a bounded space
DEFAULT_TORCH_THREADS = 1
DEFAULT_LOG_DIR = Path("runs")
# Settings of a run (argparse dests) that a resumed run keeps unless given again, with their defaults for a new run.
RESUMED_SETTINGS = {
    "seed": 0,
    "eval_freq": DEFAULT_EVAL_FREQ,
    "eval_episodes": DEFAULT_EVAL_EPISODES,
    "checkpoint_freq": DEFAULT_CHECKPOINT_FREQ,
    "keep_checkpoints": DEFAULT_KEEP_CHECKPOINTS,
    "torch_threads": DEFAULT_TORCH_THREADS,
}
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process that Ctrl-C ended

_POSITIVE_INT = int_at_least(1)
_NON_NEGATIVE_INT = int_at_least(0)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    from geopipe_agents import rllib_training, training

    parser = OneLineErrorParser(prog=prog, description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--algo", choices=[*training.ALGOS, rllib_training.ALGO], help=f"algorithm (default {training.DEFAULT_ALGO}, or the resumed run's)")
    add("--env", help=f"registered GeoPipe env id (default {training.DEFAULT_ENV_ID}, or the resumed run's)")
    add("--seed", type=_NON_NEGATIVE_INT, help="env i is seeded seed + i, below 1000 (default 0, or the resumed run's)")
    add("--n-timesteps", type=_POSITIVE_INT, help="timesteps to train (to add, when resuming); sets n_timesteps")
    add("--hyperparams", nargs="+", default=[], metavar="KEY=VALUE", help="hyperparameter overrides; values are YAML")
    add("--hyperparams-file", type=Path, help="hyperparameter file (default agents/hyperparams/<algo>.yml, shipped)")
    add("--eval-freq", type=_NON_NEGATIVE_INT, help=f"evaluate every N timesteps, 0 = never (default {DEFAULT_EVAL_FREQ}, or the resumed run's)")
    add("--eval-episodes", type=_POSITIVE_INT, help=f"held-out seeds per evaluation (default {DEFAULT_EVAL_EPISODES}, or the resumed run's)")
    add("--eval-seed-start", type=_NON_NEGATIVE_INT, help=f"first evaluation seed, at least 1000 (default {training.FIRST_HELD_OUT_SEED}, or the resumed run's)")
    add("--checkpoint-freq", type=_NON_NEGATIVE_INT,
        help=f"checkpoint every N timesteps, 0 = never; a killed run loses at most N (default {DEFAULT_CHECKPOINT_FREQ}, or the resumed run's)")
    add("--keep-checkpoints", type=_NON_NEGATIVE_INT, help=f"keep the newest N checkpoints, 0 = all (default {DEFAULT_KEEP_CHECKPOINTS}, or the resumed run's)")
    add("--log-dir", type=Path, help="folder of run folders (default runs, or the resumed run's)")
    add("--run-name", help="run folder name (default <algo>_<env>_<YYYYmmdd-HHMMSS>_<seed>)")
    add("--resume", type=Path, metavar="RUN_DIR",
        help="continue that run, in a new run folder, from its newest readable model: model.zip, a checkpoint or best_model.zip (model/, ... for RLlib)")
    # Small MLP updates gain nothing from more threads, and lose several-fold to contention on a busy machine.
    add("--torch-threads", type=_POSITIVE_INT, help=f"torch CPU threads (default {DEFAULT_TORCH_THREADS}, or the resumed run's)")
    add("--ray-address", metavar="ADDR", help=f"with --algo {rllib_training.ALGO}: join the Ray cluster at ADDR (default: a local one)")
    add("--verbose", type=int, choices=(0, 1), default=1, help="1 prints SB3's training tables (default %(default)s)")
    add("--no-progress-bar", action="store_true", help="hide the progress bar")
    return parser


def resolve_settings(args: argparse.Namespace, old: dict[str, Any]) -> None:
    """Fill the settings not given on the command line (None in ``args``): from ``old``, the resumed run's
    ``args.yml``, when resuming (the log folder: the resumed run's own), else the defaults.

    Raises:
        TrainingInputError: the resumed run's ``args.yml`` holds a setting of the wrong type.
    """
    from geopipe_agents import training

    defaults = {**RESUMED_SETTINGS, "eval_seed_start": training.FIRST_HELD_OUT_SEED}
    for name, default in defaults.items():
        if getattr(args, name) is not None:
            continue
        value = old.get(name, default)
        minimum = 1 if name in ("eval_episodes", "torch_threads") else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise training.TrainingInputError(f"--resume {args.resume}: {training.ARGS_FILE}: {name}: got {value!r}; expected an integer >= {minimum}")
        setattr(args, name, value)
    if args.log_dir is None:
        args.log_dir = args.resume.parent if args.resume is not None else DEFAULT_LOG_DIR


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """Train as ``argv`` asks; 0 on success, 130 when Ctrl-C stopped it (after saving the model). Bad input, or a
    missing ``[train]`` extra, exits 2 with one line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        from geopipe_agents import training
    except ImportError as exc:
        OneLineErrorParser(prog=prog).error(missing_train_extra("training", exc))
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        return _train(parser, args, command_line(prog, argv))
    except training.TrainingInterrupted as exc:
        print(f"{prog}: interrupted at {exc.num_timesteps} timesteps; the model so far is saved in {exc.saved}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted before training started", file=sys.stderr)
    return EXIT_INTERRUPTED


def _train(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str) -> int:
    """Check the inputs (bad ones exit 2 through ``parser``), make the run folder and train."""
    import torch

    from geopipe_agents import rllib_training, training

    try:
        old = training.read_run_args(args.resume) if args.resume is not None else {}
        rllib = (args.algo or old.get("algo")) == rllib_training.ALGO
        if args.ray_address is not None and not rllib:
            raise training.TrainingInputError(f"--ray-address needs --algo {rllib_training.ALGO}")
        if rllib:  # before anything imports ray: reading a checkpoint to resume from does
            from geopipe_evaluation.ray_backend import prepare_environment

            prepare_environment(args.ray_address)
        resolve_settings(args, old)
        overrides = training.parse_overrides(args.hyperparams)
        if args.n_timesteps is not None:
            overrides["n_timesteps"] = args.n_timesteps
        plan = (rllib_training if rllib else training).plan_run(
            args.algo, args.env, args.seed, overrides, args.eval_episodes, args.hyperparams_file, args.resume, args.eval_seed_start
        )
        run_dir = training.create_run_dir(args.log_dir, plan, args.run_name)
    except training.TrainingInputError as exc:
        parser.error(str(exc))
    training.write_run_files(run_dir, plan, vars(args), command)
    print(f"run folder: {run_dir}")
    if plan.resume is not None:
        print(plan.resume.describe())
    torch.set_num_threads(args.torch_threads)
    if rllib:
        steps = rllib_training.train(plan, run_dir, args.eval_freq, args.checkpoint_freq, args.ray_address, args.verbose, args.keep_checkpoints)
        print(f"{steps} timesteps; model in {run_dir}/{training.MODEL_NAME}/")
        return 0
    model = training.train(
        plan, run_dir, args.eval_freq, args.checkpoint_freq, progress_bar=not args.no_progress_bar, verbose=args.verbose,
        keep_checkpoints=args.keep_checkpoints,
    )
    print(f"{model.num_timesteps} timesteps; model in {run_dir}/{training.MODEL_NAME}.zip")
    return 0


if __name__ == "__main__":
    sys.exit(main())
