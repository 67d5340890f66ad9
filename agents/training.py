"""Training GeoPipe agents with Stable-Baselines3: hyperparameters, vectorised envs, models and runs.

The pieces ``geopipe-train`` (``geopipe_agents.train_cli``) puts together, rl-baselines3-zoo style:

* :func:`load_hyperparams`: one native-YAML file per algorithm (``agents/hyperparams/<algo>.yml``, shipped as
  package data) keyed by env id, with a ``default`` entry for ids it does not list, plus ``key=value`` overrides.
* :func:`plan_run`: checks every input (algorithm, env id, env kwargs, hyperparameters, seeds, the run to resume)
  before anything is written, raising :class:`TrainingInputError`.
* :func:`make_vec_env`: ``n_envs`` envs (``SubprocVecEnv`` above one, else ``DummyVecEnv``), env ``i`` seeded
  ``seed + i``, optionally under ``VecNormalize``.
* :func:`train`: builds (or resumes) the model and learns, with the callbacks of :mod:`geopipe_agents.callbacks`; every run
  lives in its own folder (:func:`create_run_dir`, :func:`write_run_files`).

Training seeds stay below :data:`geopipe_baselines.policy.DEFAULT_SEED_START` (1000): seeds from there up are held
out, and the periodic evaluation runs on them.
"""

from __future__ import annotations

import functools
import json
import math
import pickle
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import yaml
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import configure as configure_logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize
from torch import nn

import geopipe_env  # noqa: F401  (registers the env ids in this process)
from geopipe_agents.callbacks import BEST_MODEL_NAME, checkpoint_timesteps, checkpoints, save_agent, saved_model_paths, training_callbacks, vecnormalize_path
from geopipe_agents.policies import CUSTOM_POLICIES
from geopipe_baselines.policy import DEFAULT_SEED_START
from geopipe_env.env import GeoPipeEnv
from geopipe_env.scenario.loader import StrictYamlLoader

ALGOS: dict[str, type[BaseAlgorithm]] = {"maskable_ppo": MaskablePPO, "ppo": PPO}
DEFAULT_ALGO = "maskable_ppo"
DEFAULT_ENV_ID = "GeoPipe-v0"
HYPERPARAMS_DIR = Path(__file__).resolve().parent / "hyperparams"  # package data, so installed copies train too
DEFAULT_ENTRY = "default"  # the hyperparameter entry for env ids a file does not list

# Keyword arguments of the SB3 algorithm, and keys that shape the run around it.
MODEL_KEYS = ("policy", "n_steps", "batch_size", "learning_rate", "gamma", "gae_lambda", "ent_coef", "n_epochs", "clip_range", "policy_kwargs")
RUN_KEYS = ("n_envs", "vec_env", "n_timesteps", "normalize", "env_kwargs")
VEC_ENVS = ("dummy", "subproc")  # envs in this process (the default: faster here) or one worker process each
HYPERPARAM_KEYS = (*RUN_KEYS, *MODEL_KEYS)
INT_KEYS = ("n_envs", "n_timesteps", "n_steps", "batch_size", "n_epochs")
FLOAT_KEYS = ("learning_rate", "gamma", "gae_lambda", "ent_coef", "clip_range")
# Keys that may also decay linearly to 0 over the run: "lin_<value>" (rl-baselines3-zoo's notation).
SCHEDULE_KEYS = ("learning_rate", "clip_range")
LINEAR_PREFIX = "lin_"
DICT_KEYS = ("policy_kwargs", "env_kwargs")
VECNORMALIZE_KEYS = ("norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon", "norm_obs_keys")
DEFAULT_POLICY = "MultiInputPolicy"  # GeoPipe observations are a Dict of boxes
# policy_kwargs.activation_fn is named in YAML and mapped here, so the files stay free of evaluated strings.
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU, "gelu": nn.GELU}

FIRST_HELD_OUT_SEED = DEFAULT_SEED_START  # training env seeds must stay below
MODEL_NAME = "model"
CHECKPOINT_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
CONFIG_FILE, ARGS_FILE, COMMAND_FILE = "config.yml", "args.yml", "command.txt"
RUN_TIME_FORMAT = "%Y%m%d-%H%M%S"


class TrainingInputError(ValueError):
    """An algorithm, env id, hyperparameter, scenario, seed or run folder that cannot be trained; says why."""


# ---------------------------------------------------------------------------------------------------- YAML
def _load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=StrictYamlLoader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        raise TrainingInputError(f"{source}: not valid YAML ({str(exc).splitlines()[0]})") from exc


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise TrainingInputError(f"cannot read {path}: {exc.strerror}") from exc
    return _load_yaml(text, str(path))


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["key=value", ...]`` as a dict, each value read as YAML (``n_envs=4``, ``normalize=false``,
    ``policy_kwargs={net_arch: [64, 64]}``)."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TrainingInputError(f"--hyperparams {item!r}: expected key=value")
        overrides[key.strip()] = _load_yaml(value, f"--hyperparams {key.strip()}")
    return overrides


# ---------------------------------------------------------------------------------------------------- hyperparameters
def hyperparams_file(algo: str) -> Path:
    """The shipped hyperparameter file of ``algo`` (``agents/hyperparams/<algo>.yml``)."""
    return HYPERPARAMS_DIR / f"{algo}.yml"


def load_hyperparams(
    algo: str, env_id: str, overrides: dict[str, Any] | None = None, path: Path | None = None, check: Callable[..., dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The hyperparameters of ``algo`` on ``env_id``: the file's entry for the id (else ``default``), updated by
    ``overrides``, checked by ``check(hyperparams, source)`` (default :func:`check_hyperparams`)."""
    path = hyperparams_file(algo) if path is None else path
    table = _read_yaml(path)
    if not isinstance(table, dict):
        raise TrainingInputError(f"{path}: expected a mapping of env ids to hyperparameters")
    key = env_id if env_id in table else DEFAULT_ENTRY
    if key not in table:
        raise TrainingInputError(f"{path} has no entry for {env_id} and no {DEFAULT_ENTRY!r} entry")
    entry = table[key] or {}
    if not isinstance(entry, dict):
        raise TrainingInputError(f"{path}: {key}: expected a mapping of hyperparameters")
    source = f"{path.name} [{key}]" + (" with --hyperparams" if overrides else "")
    return (check or check_hyperparams)({**entry, **(overrides or {})}, source)


def check_hyperparams(hyperparams: dict[str, Any], source: str = "hyperparameters") -> dict[str, Any]:
    """``hyperparams`` with defaults filled in (``n_envs`` 1, ``vec_env`` dummy, ``policy``, ``normalize`` false, empty dicts), after
    checking every key and type."""
    unknown = sorted(set(hyperparams) - set(HYPERPARAM_KEYS))
    if unknown:
        raise TrainingInputError(f"{source}: unknown hyperparameter(s) {', '.join(unknown)}; expected one of {', '.join(HYPERPARAM_KEYS)}")
    hp = {"n_envs": 1, "vec_env": "dummy", "policy": DEFAULT_POLICY, "normalize": False, "policy_kwargs": {}, "env_kwargs": {}, **hyperparams}
    if "n_timesteps" not in hp:
        raise TrainingInputError(f"{source}: n_timesteps is required")
    for key in INT_KEYS:
        if key in hp:
            value = hp[key]
            if isinstance(value, float) and value.is_integer():
                hp[key] = value = int(value)  # 1e6 in YAML is a float
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TrainingInputError(f"{source}: {key}: got {value!r}; expected an integer >= 1")
    for key in FLOAT_KEYS:
        value = hp.get(key, 0.0)
        if key in SCHEDULE_KEYS and isinstance(value, str):
            start = _linear_start(value)
            if start is None:
                raise TrainingInputError(f"{source}: {key}: got {value!r}; expected a finite number >= 0, or "
                                         f"{LINEAR_PREFIX}<number> for one that decays linearly to 0 over the run")
            value = start
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise TrainingInputError(f"{source}: {key}: got {value!r}; expected a finite number >= 0")
    for key in DICT_KEYS:
        if not isinstance(hp[key], dict):
            raise TrainingInputError(f"{source}: {key}: got {hp[key]!r}; expected a mapping")
    if hp["vec_env"] not in VEC_ENVS:
        raise TrainingInputError(f"{source}: vec_env: got {hp['vec_env']!r}; expected one of {', '.join(VEC_ENVS)}")
    if not isinstance(hp["policy"], str):
        raise TrainingInputError(f"{source}: policy: got {hp['policy']!r}; expected a policy name such as {DEFAULT_POLICY}")
    activation = hp["policy_kwargs"].get("activation_fn")
    if activation is not None and activation not in ACTIVATIONS:
        raise TrainingInputError(f"{source}: policy_kwargs.activation_fn: got {activation!r}; expected one of {', '.join(ACTIVATIONS)}")
    normalize = hp["normalize"]
    if isinstance(normalize, dict):
        bad = sorted(set(normalize) - set(VECNORMALIZE_KEYS))
        if bad:
            raise TrainingInputError(f"{source}: normalize: unknown key(s) {', '.join(bad)}; expected one of {', '.join(VECNORMALIZE_KEYS)}")
    elif not isinstance(normalize, bool):
        raise TrainingInputError(f"{source}: normalize: got {normalize!r}; expected true, false or a mapping of VecNormalize arguments")
    return {k: hp[k] for k in HYPERPARAM_KEYS if k in hp}


def vecnormalize_kwargs(hyperparams: dict[str, Any]) -> dict[str, Any] | None:
    """``VecNormalize`` keyword arguments from the ``normalize`` hyperparameter (None: no normalisation); the
    discount defaults to the algorithm's ``gamma``."""
    normalize = hyperparams["normalize"]
    if normalize is False:
        return None
    kwargs = {} if normalize is True else dict(normalize)
    kwargs.setdefault("gamma", hyperparams.get("gamma", 0.99))
    return kwargs


def _linear_start(value: str) -> float | None:
    """The starting value of a ``lin_<number>`` schedule, or None if ``value`` is not one."""
    if not value.startswith(LINEAR_PREFIX):
        return None
    try:
        return float(value[len(LINEAR_PREFIX):])
    except ValueError:
        return None


def linear_schedule(start: float) -> Callable[[float], float]:
    """A value that falls linearly from ``start`` to 0 over the run (SB3 passes the share of it still to come)."""

    def value(progress_remaining: float) -> float:
        return progress_remaining * start

    return value


def model_kwargs(hyperparams: dict[str, Any]) -> dict[str, Any]:
    """The algorithm's keyword arguments among ``hyperparams`` (``policy`` left out), with activations and
    ``lin_`` schedules resolved."""
    kwargs = {k: hyperparams[k] for k in MODEL_KEYS if k in hyperparams and k != "policy"}
    for key in SCHEDULE_KEYS:
        if isinstance(kwargs.get(key), str):
            kwargs[key] = linear_schedule(_linear_start(kwargs[key]))
    policy_kwargs = dict(kwargs.get("policy_kwargs", {}))
    if "activation_fn" in policy_kwargs:
        policy_kwargs["activation_fn"] = ACTIVATIONS[policy_kwargs["activation_fn"]]
    kwargs["policy_kwargs"] = policy_kwargs
    return kwargs


# ---------------------------------------------------------------------------------------------------- envs
def make_env(env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
    """One monitored env. The module-qualified id makes a worker process import ``geopipe_env`` (and so register
    the ids) itself, which ``SubprocVecEnv``'s default ``forkserver`` start method does not do."""
    return Monitor(gym.make(f"geopipe_env:{env_id}", **env_kwargs))


def make_vec_env(env_id: str, hyperparams: dict[str, Any], seed: int, stats: Path | None = None) -> VecEnv:
    """``n_envs`` envs, env ``i`` seeded ``seed + i`` at its first reset, under ``VecNormalize`` if asked: fresh, or
    with the statistics saved in ``stats`` (to resume).

    ``vec_env: dummy`` (the default) steps the envs one after another in this process, ``subproc`` in one worker
    process each. On a 2-core machine ``dummy`` trains faster (``benchmarks/vec_env_throughput.py``): the policy
    runs once per step on a batch of all envs, and workers only add inter-process traffic.
    """
    env_fns = [functools.partial(make_env, env_id, hyperparams["env_kwargs"]) for _ in range(hyperparams["n_envs"])]
    parallel = hyperparams.get("vec_env", "dummy") == "subproc" and len(env_fns) > 1
    venv: VecEnv = SubprocVecEnv(env_fns) if parallel else DummyVecEnv(env_fns)
    venv.seed(seed)
    norm = vecnormalize_kwargs(hyperparams)
    if norm is None:
        return venv
    if stats is None:
        return VecNormalize(venv, **norm)
    normalizer = VecNormalize.load(str(stats), venv)
    normalizer.training = True
    return normalizer


def check_env_args(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Make the env once, so that an unknown id, a bad scenario or a bad env argument fails before training."""
    try:
        env = gym.make(env_id, **env_kwargs)
    except (ValueError, TypeError, FileNotFoundError, gym.error.Error) as exc:
        raise TrainingInputError(f"cannot make {env_id} with env_kwargs {env_kwargs}: {exc}") from exc
    try:
        if not isinstance(env.unwrapped, GeoPipeEnv):
            raise TrainingInputError(f"{env_id} is not a GeoPipe env (got {type(env.unwrapped).__name__})")
    finally:
        env.close()


def check_model_args(algo: str, env_id: str, hyperparams: dict[str, Any]) -> None:
    """Build the model once on one in-process env (under ``VecNormalize`` if asked), so that a policy, a
    ``policy_kwargs`` entry or a ``normalize`` key the algorithm cannot take fails before the run folder exists.

    Only the type errors SB3 and torch raise for such arguments count as bad input; anything else is a bug and
    keeps its traceback.
    """
    venv: VecEnv = DummyVecEnv([functools.partial(make_env, env_id, hyperparams["env_kwargs"])])
    try:
        norm = vecnormalize_kwargs(hyperparams)
        env = venv if norm is None else VecNormalize(venv, **norm)
        policy = CUSTOM_POLICIES.get(hyperparams["policy"], hyperparams["policy"])
        ALGOS[algo](policy, env, device="cpu", **model_kwargs(hyperparams))
    except (ValueError, TypeError, KeyError, AssertionError) as exc:
        detail = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        raise TrainingInputError(f"{algo} cannot build a model from these hyperparameters: {detail}") from exc
    finally:
        venv.close()


# ---------------------------------------------------------------------------------------------------- runs
@dataclass(frozen=True, slots=True)
class ResumeSource:
    """The saved model a resumed run continues from, and the newer saved models passed over as unreadable."""

    path: Path
    num_timesteps: int
    unreadable: tuple[str, ...] = ()  # "<file> (<why>)" each

    def describe(self) -> str:
        """One line: which model the run resumes from, and why not from a newer one."""
        line = f"resuming from {self.path} ({self.num_timesteps:,} timesteps)"
        if self.unreadable:
            line += f"; passed over, unreadable: {'; '.join(self.unreadable)}"
        return line


@dataclass(frozen=True, slots=True)
class RunPlan:
    """A checked training run: what to train, on what, for how long, and from which saved model if resuming."""

    algo: str
    env_id: str
    seed: int
    hyperparams: dict[str, Any]
    eval_seeds: tuple[int, ...]
    resume: ResumeSource | None = None

    @property
    def resume_model(self) -> Path | None:
        """The saved model this run continues from (None for a new run)."""
        return None if self.resume is None else self.resume.path


def resume_source(run_dir: Path, needs_stats: bool) -> ResumeSource:
    """The newest readable saved model of ``run_dir``: ``model.zip``, a checkpoint or ``best_model.zip``, whichever
    holds the most timesteps (on a tie ``model.zip``, then a checkpoint). A model counts as readable when its zip
    archive is whole and names its timesteps and, if ``needs_stats``, its ``VecNormalize`` stats beside it load.

    Raises:
        TrainingInputError: no saved model of ``run_dir`` is readable.
    """
    return newest_readable(
        run_dir, f"{MODEL_NAME}.zip", f"{BEST_MODEL_NAME}.zip", checkpoints(run_dir / CHECKPOINT_DIR),
        functools.partial(check_saved_model, needs_stats=needs_stats),
    )


def newest_readable(run_dir: Path, final: str, best: str, saved_checkpoints: Sequence[Path], check: Callable[[Path], int]) -> ResumeSource:
    """Of the saved models of ``run_dir`` (its final model ``final``, its checkpoints and its best model ``best``),
    the one ``check`` reads with the most timesteps; on a tie the final model, then a checkpoint.

    Args:
        check: the timesteps of a saved model, or :class:`TrainingInputError` saying why it cannot be read.

    Raises:
        TrainingInputError: no saved model of ``run_dir`` is readable.
    """
    ranked = [(p, 2) for p in saved_model_paths(run_dir / final)] + [(p, 1) for p in saved_checkpoints]
    ranked += [(p, 0) for p in saved_model_paths(run_dir / best)]
    readable, unreadable = [], []
    for path, rank in ranked:
        try:
            readable.append((check(path), rank, path))
        except TrainingInputError as exc:
            unreadable.append((path, str(exc)))
    if not readable:
        found = f"; unreadable: {'; '.join(why for _, why in unreadable)}" if unreadable else ""
        raise TrainingInputError(f"--resume {run_dir}: no saved model to resume from ({final}, {CHECKPOINT_DIR}/ or {best}){found}")
    num_timesteps, _, path = max(readable)
    passed_over = tuple(why for p, why in unreadable if (n := checkpoint_timesteps(p)) is None or n >= num_timesteps)
    return ResumeSource(path, num_timesteps, passed_over)


def check_saved_model(path: Path, needs_stats: bool) -> int:
    """The timesteps of the saved SB3 model at ``path`` after checking that it can be loaded: a whole zip archive
    (every member's checksum) and, if ``needs_stats``, ``VecNormalize`` stats beside it that unpickle.

    Raises:
        TrainingInputError: saying what is wrong with the file.
    """
    num_timesteps = saved_num_timesteps(path)
    with zipfile.ZipFile(path) as archive:
        corrupt = archive.testzip()
    if corrupt is not None:
        raise TrainingInputError(f"{path} (its {corrupt} is corrupt)")
    if needs_stats:
        stats = vecnormalize_path(path)
        try:
            with open(stats, "rb") as f:
                pickle.load(f)  # noqa: S301 (the run's own file)
        except FileNotFoundError:
            raise TrainingInputError(f"{path} (no {stats.name} beside it)") from None
        except Exception as exc:  # unpickling a cut-off file raises EOFError, UnpicklingError, ValueError, ...
            raise TrainingInputError(f"{path} (its {stats.name} is unreadable: {type(exc).__name__})") from exc
    return num_timesteps


def saved_num_timesteps(path: Path) -> int:
    """The ``num_timesteps`` recorded in a saved SB3 model, read without loading it."""
    try:
        with zipfile.ZipFile(path) as archive:
            return int(json.loads(archive.read("data"))["num_timesteps"])
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise TrainingInputError(f"{path} (not a Stable-Baselines3 model file: {exc})") from exc


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
    """Check every input of a run and resolve its hyperparameters.

    A new run reads ``agents/hyperparams/<algo>.yml`` (or ``hyperparams_path``). A resumed run (``resume``, a run
    folder) keeps that run's algorithm, env id and ``config.yml`` hyperparameters (``algo`` / ``env_id`` may be
    None or must match), continues from its newest readable saved model (:func:`resume_source`), and takes
    ``n_timesteps`` as the timesteps to add; ``overrides`` apply in both cases. The periodic evaluation runs on
    seeds ``eval_seed_start`` onwards, which must be held out (at least 1000); keep them apart from the seeds a
    final comparison reports. A new run's model is built once here (:func:`check_model_args`), so that nothing is
    written for hyperparameters it cannot take.
    """
    source = None
    if resume is not None:
        algo, env_id, recorded = read_resumed_run(resume, algo, env_id, overrides, fixed=("policy", "policy_kwargs"))
    algo = algo or DEFAULT_ALGO
    env_id = env_id or DEFAULT_ENV_ID
    if algo not in ALGOS:
        raise TrainingInputError(f"unknown algorithm {algo!r}; expected one of {', '.join(ALGOS)}")
    if resume is not None:
        hyperparams = check_hyperparams(recorded, f"{resume / CONFIG_FILE}")
        source = resume_source(resume, needs_stats=vecnormalize_kwargs(hyperparams) is not None)
    else:
        hyperparams = load_hyperparams(algo, env_id, overrides, hyperparams_path)
    check_seeds(seed, seed + hyperparams["n_envs"] - 1, eval_seed_start)
    if hyperparams["policy"] in CUSTOM_POLICIES and algo != DEFAULT_ALGO:
        raise TrainingInputError(f"policy {hyperparams['policy']} needs --algo {DEFAULT_ALGO} (it reads action masks)")
    check_env_args(env_id, hyperparams["env_kwargs"])
    if source is None:  # a resumed model keeps its saved policy
        check_model_args(algo, env_id, hyperparams)
    eval_seeds = tuple(range(eval_seed_start, eval_seed_start + eval_episodes))
    return RunPlan(algo, env_id, seed, hyperparams, eval_seeds, source)


def read_resumed_run(
    resume: Path, algo: str | None, env_id: str | None, overrides: dict[str, Any], fixed: Sequence[str]
) -> tuple[str, str, dict[str, Any]]:
    """The algorithm, env id and hyperparameters (its ``config.yml`` updated by ``overrides``) of the run folder
    ``resume``. ``algo`` and ``env_id`` may be None or must match the run's.

    Raises:
        TrainingInputError: ``resume`` is not a training run folder, names another algorithm or env id, or
            ``overrides`` sets one of the ``fixed`` hyperparameters, which the saved model fixes.
    """
    if not resume.is_dir():
        raise TrainingInputError(f"--resume {resume}: no such run folder")
    old_args = read_run_args(resume)
    for name, given in (("algo", algo), ("env", env_id)):
        if given is not None and old_args.get(name) not in (None, given):
            raise TrainingInputError(f"--resume {resume}: that run used --{name} {old_args[name]}, not {given}")
    algo = algo or old_args.get("algo")
    env_id = env_id or old_args.get("env")
    if algo is None or env_id is None or not (resume / CONFIG_FILE).is_file():
        raise TrainingInputError(f"--resume {resume}: not a training run folder (needs {ARGS_FILE} and {CONFIG_FILE})")
    for key in fixed:
        if key in overrides:
            raise TrainingInputError(f"--resume: {key} is fixed by the saved model; it cannot be overridden")
    recorded = _read_yaml(resume / CONFIG_FILE)
    if not isinstance(recorded, dict):
        raise TrainingInputError(f"{resume / CONFIG_FILE}: expected a mapping of hyperparameters")
    return algo, env_id, {**recorded, **overrides}


def read_run_args(run_dir: Path) -> dict[str, Any]:
    """The command-line settings a run recorded in its ``args.yml`` (empty if it has none)."""
    path = run_dir / ARGS_FILE
    if not path.is_file():
        return {}
    args = _read_yaml(path)
    if not isinstance(args, dict):
        raise TrainingInputError(f"{path}: expected a mapping of settings")
    return args


def check_seeds(seed: int, last_seed: int, eval_seed_start: int) -> None:
    """Raise :class:`TrainingInputError` unless the training seeds ``seed..last_seed`` lie below 1000 and the
    evaluation seeds start at 1000 or above (held out)."""
    if seed < 0 or last_seed >= FIRST_HELD_OUT_SEED:
        raise TrainingInputError(
            f"training seeds {seed}..{last_seed} must lie in 0..{FIRST_HELD_OUT_SEED - 1}; seeds from {FIRST_HELD_OUT_SEED} are held out for evaluation"
        )
    if eval_seed_start < FIRST_HELD_OUT_SEED:
        raise TrainingInputError(f"evaluation seeds must be held out: start at {FIRST_HELD_OUT_SEED} or above, not {eval_seed_start}")


def create_run_dir(log_dir: Path, plan: RunPlan, run_name: str | None = None) -> Path:
    """A new folder ``log_dir/<run_name>``, by default ``<algo>_<env_id>_<YYYYmmdd-HHMMSS>_<seed>`` (suffixed
    ``_2``, ``_3``, ... if taken)."""
    if run_name is not None:
        run_dir = log_dir / run_name
        if run_dir.exists():
            raise TrainingInputError(f"{run_dir} exists; choose another --run-name")
        run_dir.mkdir(parents=True)
        return run_dir
    base = f"{plan.algo}_{plan.env_id}_{time.strftime(RUN_TIME_FORMAT)}_{plan.seed}"
    for n in range(1, 1000):
        run_dir = log_dir / (base if n == 1 else f"{base}_{n}")
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:
            continue
    raise TrainingInputError(f"too many runs named {base} in {log_dir}")


def write_run_files(run_dir: Path, plan: RunPlan, args: dict[str, Any], command: str) -> None:
    """``config.yml`` (the final hyperparameters), ``args.yml`` (the CLI arguments, plus the resumed model) and
    ``command.txt`` (the command line)."""
    args = {k: str(v) if isinstance(v, Path) else v for k, v in args.items()}
    args.update(algo=plan.algo, env=plan.env_id)
    if plan.resume_model is not None:
        args["resume_model"] = str(plan.resume_model)
    (run_dir / CONFIG_FILE).write_text(yaml.safe_dump(plan.hyperparams, sort_keys=False))
    (run_dir / ARGS_FILE).write_text(yaml.safe_dump(args, sort_keys=False))
    (run_dir / COMMAND_FILE).write_text(command + "\n")


def build_model(plan: RunPlan, venv: VecEnv, run_dir: Path, verbose: int) -> BaseAlgorithm:
    """A new model on ``venv``, or the resumed one with the run's hyperparameters and ``venv`` set, logging to
    ``run_dir/tensorboard`` (and to stdout if ``verbose``)."""
    algo_class = ALGOS[plan.algo]
    kwargs = model_kwargs(plan.hyperparams)
    common = {"verbose": verbose, "device": "cpu"}
    if plan.resume_model is None:
        policy = CUSTOM_POLICIES.get(plan.hyperparams["policy"], plan.hyperparams["policy"])
        model = algo_class(policy, venv, seed=plan.seed, **kwargs, **common)
    else:
        del kwargs["policy_kwargs"]  # stored in the model
        model = algo_class.load(plan.resume_model, env=venv, **kwargs, **common)
        model.set_random_seed(plan.seed)
    model.set_logger(configure_logger(str(run_dir / TENSORBOARD_DIR), ["stdout", "tensorboard"] if verbose else ["tensorboard"]))
    return model


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by Ctrl-C (``SIGINT``) after the model so far was saved at ``saved``."""

    def __init__(self, num_timesteps: int, saved: Path) -> None:
        super().__init__(num_timesteps, saved)
        self.num_timesteps = num_timesteps
        self.saved = saved


def train(
    plan: RunPlan,
    run_dir: Path,
    eval_freq: int,
    checkpoint_freq: int,
    progress_bar: bool = True,
    verbose: int = 1,
    keep_checkpoints: int = 0,
) -> BaseAlgorithm:
    """Train (or keep training) for ``n_timesteps`` and save ``run_dir/model.zip`` (+ its normalisation stats).

    TensorBoard events go to ``run_dir/tensorboard``; evaluations, the best model and checkpoints (the newest
    ``keep_checkpoints``, 0 = all) are written by the callbacks. Timesteps keep counting on a resumed model.

    Raises:
        TrainingInterrupted: Ctrl-C stopped training; the model was saved first.
    """
    stats = None if plan.resume_model is None else vecnormalize_path(plan.resume_model)
    venv = make_vec_env(plan.env_id, plan.hyperparams, plan.seed, stats)
    try:
        model = build_model(plan, venv, run_dir, verbose)
        callbacks = training_callbacks(
            run_dir,
            functools.partial(make_env, plan.env_id, plan.hyperparams["env_kwargs"]),
            plan.eval_seeds,
            eval_freq,
            run_dir / CHECKPOINT_DIR,
            checkpoint_freq,
            verbose,
            keep_checkpoints,
        )
        try:
            model.learn(
                total_timesteps=plan.hyperparams["n_timesteps"],
                callback=callbacks,
                reset_num_timesteps=plan.resume_model is None,
                progress_bar=progress_bar,
            )
        except KeyboardInterrupt:
            print(f"interrupted at {model.num_timesteps} timesteps; saving the model")
            save_agent(model, run_dir / f"{MODEL_NAME}.zip")
            raise TrainingInterrupted(model.num_timesteps, run_dir / f"{MODEL_NAME}.zip") from None
        save_agent(model, run_dir / f"{MODEL_NAME}.zip")
        return model
    finally:
        _close_quietly(venv)


def _close_quietly(venv: VecEnv) -> None:
    """Close ``venv``; worker processes that Ctrl-C already ended (it reaches the whole process group) are gone,
    which ``SubprocVecEnv.close`` reports as a broken pipe."""
    try:
        venv.close()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass
