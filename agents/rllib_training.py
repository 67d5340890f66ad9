"""Training masked PPO with RLlib (new API stack) in the run folders of ``train.py``.

``python train.py --algo rllib_ppo [--ray-address ADDR] [--hyperparams num_env_runners=2]`` plans the run with
:func:`plan_run` (same checks and ``RunPlan`` as the SB3 algorithms) and trains it with :func:`train`. Needs the
``rllib`` extra; this module imports ``ray`` only inside :func:`train`.

Hyperparameters live in ``agents/hyperparams/rllib_ppo.yml``, keyed by env id, in RLlib's own names. Env runner ``i``
(1..``num_env_runners``; 0 is the driver's, which samples when there are no runners) has its env seeded
``seed + i``, below 1000. The run folder holds what an SB3 run's does, with RLlib checkpoint folders
(``Algorithm.save_to_path``) in place of zips: ``model/``, ``best_model/``, ``checkpoints/model_<N>_steps/``,
each loadable with :func:`geopipe_agents.load_agent` and each written atomically. ``--resume RUN_DIR`` continues from the
newest readable of them (:func:`resume_source`), as an SB3 run does from its zips. Ray's own files stay out of the
home folder.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

from geopipe_agents.callbacks import (
    BEST_MODEL_NAME, append_evaluation, checkpoint_path, checkpoints, crossed, evaluate_agent, evaluate_references, prune_checkpoints,
    replace_atomically, summarize_episodes,
)
from geopipe_agents.learning_curve import plot_learning_curve
from geopipe_agents.training import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    DEFAULT_ENV_ID,
    FIRST_HELD_OUT_SEED,
    MODEL_NAME,
    TENSORBOARD_DIR,
    ResumeSource,
    RunPlan,
    TrainingInputError,
    TrainingInterrupted,
    check_env_args,
    check_seeds,
    load_hyperparams,
    newest_readable,
    read_resumed_run,
)

ALGO = "rllib_ppo"
ENV_NAME = "geopipe-masked"  # the env creator's name in Ray's registry

INT_KEYS = ("n_timesteps", "train_batch_size", "minibatch_size", "num_epochs")
COUNT_KEYS = ("num_env_runners",)  # integers >= 0
FLOAT_KEYS = ("lr", "gamma", "lambda_", "entropy_coeff", "clip_param", "vf_loss_coeff", "vf_clip_param", "grad_clip")
# PPO settings passed to PPOConfig.training (train_batch_size is per learner; the driver is the only learner).
TRAINING_KEYS = ("minibatch_size", "num_epochs", *FLOAT_KEYS, "use_kl_loss")
HYPERPARAM_KEYS = (*INT_KEYS, *COUNT_KEYS, *FLOAT_KEYS, "use_kl_loss", "fcnet_hiddens", "fcnet_activation", "env_kwargs")
ACTIVATIONS = ("tanh", "relu", "swish", "linear")  # RLlib's names for fcnet_activation
MODEL_KEYS = ("fcnet_hiddens", "fcnet_activation")  # the module's shape: a resumed run keeps its checkpoint's
# In an Algorithm checkpoint: its metadata file, and the state whose metrics count the env steps sampled so far.
CHECKPOINT_FILE, STATE_FILE = "rllib_checkpoint.json", "algorithm_state.pkl"
STEPS_METRIC = "env_runners--num_env_steps_sampled_lifetime"


def check_hyperparams(hyperparams: dict[str, Any], source: str = "hyperparameters") -> dict[str, Any]:
    """``hyperparams`` with defaults filled in (no env runners, RLlib's PPO defaults, no env kwargs), after
    checking every key and type.

    Raises:
        TrainingInputError: an unknown key, a missing ``n_timesteps``, or a value of the wrong type or range.
    """
    unknown = sorted(set(hyperparams) - set(HYPERPARAM_KEYS))
    if unknown:
        raise TrainingInputError(f"{source}: unknown hyperparameter(s) {', '.join(unknown)}; expected one of {', '.join(HYPERPARAM_KEYS)}")
    hp = {"num_env_runners": 0, "env_kwargs": {}, **hyperparams}
    if "n_timesteps" not in hp:
        raise TrainingInputError(f"{source}: n_timesteps is required")

    def bad(key: str, expected: str) -> TrainingInputError:
        return TrainingInputError(f"{source}: {key}: got {hp[key]!r}; expected {expected}")

    for key in (*INT_KEYS, *COUNT_KEYS):
        if key in hp:
            if isinstance(hp[key], float) and hp[key].is_integer():
                hp[key] = int(hp[key])  # 1e5 in YAML is a float
            minimum = 0 if key in COUNT_KEYS else 1
            if not isinstance(hp[key], int) or isinstance(hp[key], bool) or hp[key] < minimum:
                raise bad(key, f"an integer >= {minimum}")
    for key in FLOAT_KEYS:
        if key in hp and (not isinstance(hp[key], (int, float)) or isinstance(hp[key], bool) or not math.isfinite(hp[key]) or hp[key] < 0):
            raise bad(key, "a finite number >= 0")
    if "use_kl_loss" in hp and not isinstance(hp["use_kl_loss"], bool):
        raise bad("use_kl_loss", "true or false")
    hiddens = hp.get("fcnet_hiddens", [])
    if not isinstance(hiddens, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hiddens):
        raise bad("fcnet_hiddens", "a list of layer sizes, e.g. [128, 128]")
    if hp.get("fcnet_activation", "tanh") not in ACTIVATIONS:
        raise bad("fcnet_activation", f"one of {', '.join(ACTIVATIONS)}")
    if not isinstance(hp["env_kwargs"], dict):
        raise bad("env_kwargs", "a mapping")
    if "minibatch_size" in hp and "train_batch_size" in hp and hp["minibatch_size"] > hp["train_batch_size"]:
        raise bad("minibatch_size", f"at most train_batch_size ({hp['train_batch_size']})")
    return {k: hp[k] for k in HYPERPARAM_KEYS if k in hp}


def plan_run(
    algo: str | None,
    env_id: str | None,
    seed: int,
    overrides: dict[str, Any],
    eval_episodes: int,
    hyperparams_path: Path | None = None,
    resume: Path | None = None,
    eval_seed_start: int = FIRST_HELD_OUT_SEED,
) -> RunPlan:
    """Check every input of an RLlib run (the arguments of :func:`geopipe_agents.training.plan_run`) before anything is
    written. A resumed run (``resume``, a run folder) keeps that run's env id and ``config.yml`` hyperparameters
    (``overrides`` apply, except to the module's shape), continues from its newest readable checkpoint folder
    (:func:`resume_source`) and takes ``n_timesteps`` as the env steps to add.

    Raises:
        TrainingInputError: bad input, the ``rllib`` extra missing, or a run folder with no readable checkpoint.
    """
    from geopipe_evaluation.ray_backend import INSTALL_COMMANDS

    if algo not in (None, ALGO):
        raise TrainingInputError(f"{__name__} trains {ALGO}, not {algo}")
    if not _installed("ray", "tree", "pyarrow"):  # ray, and what its rllib extra adds, without importing ray yet
        raise TrainingInputError(f"{ALGO} needs the 'rllib' extra: {INSTALL_COMMANDS['rllib']}")
    source = None
    if resume is not None:
        _, env_id, recorded = read_resumed_run(resume, ALGO, env_id, overrides, fixed=MODEL_KEYS)
        hyperparams = check_hyperparams(recorded, f"{resume / CONFIG_FILE}")
        source = resume_source(resume)
    else:
        env_id = env_id or DEFAULT_ENV_ID
        hyperparams = load_hyperparams(ALGO, env_id, overrides, hyperparams_path, check=check_hyperparams)
    check_seeds(seed, seed + hyperparams["num_env_runners"], eval_seed_start)
    check_env_args(env_id, hyperparams["env_kwargs"])
    return RunPlan(ALGO, env_id, seed, hyperparams, tuple(range(eval_seed_start, eval_seed_start + eval_episodes)), source)


def resume_source(run_dir: Path) -> ResumeSource:
    """The newest readable checkpoint folder of ``run_dir``: ``model/``, ``checkpoints/model_<N>_steps/`` or
    ``best_model/``, whichever has sampled the most env steps (on a tie ``model/``, then a checkpoint), by
    :func:`saved_env_steps`.

    Raises:
        TrainingInputError: no checkpoint folder of ``run_dir`` is readable.
    """
    return newest_readable(run_dir, MODEL_NAME, BEST_MODEL_NAME, checkpoints(run_dir / CHECKPOINT_DIR, suffix=""), saved_env_steps)


def saved_env_steps(path: Path) -> int:
    """The env steps an RLlib Algorithm checkpoint folder has sampled, after checking that every file of it reads
    (each ``.pkl`` unpickles, each ``.json`` parses), so that a folder cut short is found here and not halfway
    through restoring it.

    Raises:
        TrainingInputError: saying what is wrong with the folder.
    """
    if not (path / CHECKPOINT_FILE).is_file():
        raise TrainingInputError(f"{path} (not an RLlib checkpoint: no {CHECKPOINT_FILE})")
    state = None
    for file in sorted(path.rglob("*")):  # sorted: the same file reported first on every machine
        try:
            if file.suffix == ".json":
                json.loads(file.read_text())
            elif file.suffix == ".pkl":
                with open(file, "rb") as f:
                    loaded = pickle.load(f)  # noqa: S301 (the run's own file)
                if file == path / STATE_FILE:
                    state = loaded
        except Exception as exc:  # a file cut short raises EOFError, UnpicklingError, JSONDecodeError, ...
            raise TrainingInputError(f"{path} (its {file.relative_to(path)} is unreadable: {type(exc).__name__})") from exc
    try:
        return int(state["metrics_logger"]["stats"][STEPS_METRIC]["lifetime_sum"])
    except (KeyError, TypeError, ValueError) as exc:  # TypeError: no state file
        raise TrainingInputError(f"{path} (its {STATE_FILE} does not count the env steps sampled: {type(exc).__name__})") from exc


def _installed(*modules: str) -> bool:
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in modules)


def build_config(plan: RunPlan) -> Any:
    """The ``PPOConfig`` of ``plan``: masked PPO on the new API stack, the driver as the only learner."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from geopipe_agents.rllib import MaskedPPOTorchRLModule

    hp = plan.hyperparams
    model_config = {"vf_share_layers": False}
    model_config.update({k: hp[k] for k in ("fcnet_hiddens", "fcnet_activation") if k in hp})
    training = {k: hp[k] for k in TRAINING_KEYS if k in hp}
    if "train_batch_size" in hp:
        training["train_batch_size_per_learner"] = hp["train_batch_size"]
    return (
        PPOConfig()
        .environment(ENV_NAME, env_config={"env_id": plan.env_id, "env_kwargs": hp["env_kwargs"]})
        .env_runners(num_env_runners=hp["num_env_runners"], num_envs_per_env_runner=1)
        .learners(num_learners=0)
        .training(**training)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=MaskedPPOTorchRLModule, model_config=model_config))
        .debugging(seed=plan.seed)
    )


def train(
    plan: RunPlan, run_dir: Path, eval_freq: int, checkpoint_freq: int, ray_address: str | None = None, verbose: int = 1, keep_checkpoints: int = 0
) -> int:
    """Train for ``n_timesteps`` env steps (more, from its checkpoint, for a resumed run), on a local Ray instance
    or the cluster at ``ray_address``; return the env steps sampled in all.

    Writes ``model/`` (also on Ctrl-C), ``best_model/`` (best mean held-out return), ``checkpoints/`` (the newest
    ``keep_checkpoints``, 0 = all), ``evaluations.csv``, ``reference_returns.csv``, ``learning_curve.png`` and
    TensorBoard events in ``run_dir``. Every checkpoint folder is written atomically
    (:func:`geopipe_agents.callbacks.replace_atomically`).

    Raises:
        TrainingInterrupted: Ctrl-C stopped training; ``model/`` was saved first.
    """
    from geopipe_evaluation.ray_backend import connect, disconnect

    connect(ray_address, num_cpus=max(os.cpu_count() or 1, plan.hyperparams["num_env_runners"]), extra="rllib")
    from ray.tune.registry import register_env
    from torch.utils.tensorboard import SummaryWriter

    from geopipe_agents.rllib import RLlibAgentPolicy, RunFolderPPO, make_masked_env

    register_env(ENV_NAME, make_masked_env)
    algo = RunFolderPPO(config=build_config(plan), run_dir=run_dir)
    steps = 0
    if plan.resume is not None:
        algo.restore_from_path(str(plan.resume.path.resolve()))  # Ray reads a relative path as a URI
        steps = plan.resume.num_timesteps
    goal = steps + plan.hyperparams["n_timesteps"]

    def save(path: Path) -> None:
        replace_atomically(lambda temp: algo.save_to_path(str(temp.resolve())), path)

    eval_env = gym.make(plan.env_id, **plan.hyperparams["env_kwargs"])
    writer = SummaryWriter(str(run_dir / TENSORBOARD_DIR))
    best = -math.inf
    try:
        if eval_freq > 0:
            evaluate_references(run_dir, eval_env, plan.eval_seeds)
        started, first = time.perf_counter(), steps
        try:
            while steps < goal:
                previous, result = steps, algo.train()
                steps = int(result["num_env_steps_sampled_lifetime"])
                _log(writer, result, steps, (steps - first) / (time.perf_counter() - started), verbose)
                if crossed(steps, previous, eval_freq):
                    policy = RLlibAgentPolicy(algo.get_module(), name="eval")
                    row = {"timesteps": steps, **summarize_episodes(evaluate_agent(policy, eval_env, plan.eval_seeds))}
                    append_evaluation(run_dir, row)
                    plot_learning_curve(run_dir)
                    writer.add_scalar("eval/mean_return", row["mean_return"], steps)
                    if row["mean_return"] > best:
                        best = row["mean_return"]
                        save(run_dir / BEST_MODEL_NAME)
                if crossed(steps, previous, checkpoint_freq):
                    save(checkpoint_path(run_dir / CHECKPOINT_DIR, steps, suffix=""))
                    prune_checkpoints(run_dir / CHECKPOINT_DIR, keep_checkpoints, suffix="")
        except KeyboardInterrupt:
            print(f"interrupted at {steps} timesteps; saving the model")
            save(run_dir / MODEL_NAME)
            raise TrainingInterrupted(steps, run_dir / MODEL_NAME) from None
        save(run_dir / MODEL_NAME)
        if verbose:
            print(f"{steps - first} env steps in {time.perf_counter() - started:.1f} s of training")
        return steps
    finally:
        writer.close()
        eval_env.close()
        algo.stop()
        disconnect()


def _log(writer: Any, result: dict[str, Any], steps: int, steps_per_s: float, verbose: int) -> None:
    """TensorBoard scalars of one iteration (the SB3 runs' names where they mean the same), and a line if verbose."""
    episode_return = result.get("env_runners", {}).get("episode_return_mean", math.nan)
    learner = result.get("learners", {}).get("default_policy", {})
    scalars = {
        "rollout/ep_rew_mean": episode_return,
        "time/fps": steps_per_s,
        "train/policy_loss": learner.get("policy_loss", math.nan),
        "train/value_loss": learner.get("vf_loss", math.nan),
        "train/entropy": learner.get("entropy", math.nan),
    }
    for tag, value in scalars.items():
        if math.isfinite(value):
            writer.add_scalar(tag, value, steps)
    if verbose:
        print(f"{steps:>9,} env steps  {steps_per_s:6.0f} steps/s  mean training return {episode_return:.3f}")
