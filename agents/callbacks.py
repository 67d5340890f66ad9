"""SB3 callbacks for training GeoPipe agents: episode metrics, held-out evaluation and checkpoints.

Every saved agent is written in the format :func:`geopipe_agents.load_agent` reads: ``<name>.zip`` plus, when training
normalises observations, ``<name>_vecnormalize.pkl`` beside it (:func:`save_agent`). Each file is written to a
temporary name and renamed into place, so a run killed mid-save keeps the previous file whole.
"""

from __future__ import annotations

import csv
import math
import os
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from geopipe_agents.learning_curve import (
    EVALUATIONS_FILE, SUMMARY_COLUMNS, evaluate_agent, plot_learning_curve, summarize_episodes, write_references,
)
from geopipe_agents.loading import VECNORMALIZE_SUFFIX, AgentPolicy
from geopipe_baselines import make_policy

METRICS_PREFIX = "geopipe/"
REFERENCE_POLICIES = ("bace-pipe", "sjf")  # evaluated once on the same seeds, drawn on the learning curve
EVALUATION_COLUMNS = ("timesteps", *SUMMARY_COLUMNS)
BEST_MODEL_NAME = "best_model"
CHECKPOINT_PREFIX = "model"
CHECKPOINT_PATTERN = re.compile(rf"{CHECKPOINT_PREFIX}_(\d+)_steps")  # the name of a checkpoint, less its suffix
TEMP_SUFFIX = ".tmp"  # a save in progress: .<name>.tmp beside the file or folder it replaces
OLD_SUFFIX = ".old"  # a replaced folder while its successor is renamed into place: .<name>.old


def vecnormalize_path(model_path: Path) -> Path:
    """Where the normalisation stats of ``model_path`` live (the name ``load_agent`` looks for)."""
    return model_path.with_name(model_path.stem + VECNORMALIZE_SUFFIX)


def replace_atomically(write: Callable[[Path], object], path: Path) -> None:
    """Write ``path`` whole or not at all: ``write(temp)`` fills a hidden temporary file or folder beside it, which
    is flushed to disk and then renamed over ``path``. A process killed at any point leaves the old file (or none)
    and at most the temporary file, never a truncated ``path``.

    A folder (an RLlib checkpoint) cannot be renamed over another, so the old one is first renamed to
    ``.<name>.old`` and deleted once the new one is in place; a process killed between the two renames leaves the
    old folder whole under that name (:func:`saved_model_paths` finds it).

    Args:
        write: writes the file or folder at the path it is given.
        path: the file or folder to create or replace.
    """
    temp = path.with_name(f".{path.name}{TEMP_SUFFIX}")
    old = path.with_name(f".{path.name}{OLD_SUFFIX}")
    try:
        _delete(temp)
        write(temp)
        for file in temp.rglob("*") if temp.is_dir() else [temp]:
            if file.is_file():
                with open(file, "rb+") as f:
                    os.fsync(f.fileno())
        if temp.is_dir() and path.exists():
            _delete(old)
            os.replace(path, old)
        os.replace(temp, path)
    except BaseException:
        _delete(temp)
        raise
    _delete(old)


def _delete(path: Path) -> None:
    """Remove the file or folder ``path``, if there is one."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def saved_model_paths(path: Path) -> list[Path]:
    """``path`` if it exists, else the whole old copy a folder replacement cut short left (``.<name>.old``), else
    nothing."""
    old = path.with_name(f".{path.name}{OLD_SUFFIX}")
    return [path] if path.exists() else [old] if old.is_dir() else []


def save_agent(model: BaseAlgorithm, path: Path) -> None:
    """Save ``model`` to ``path`` (a ``.zip``) and its ``VecNormalize`` stats, if any, beside it, each atomically
    (:func:`replace_atomically`). The stats are written first, so a model file always has its stats beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        replace_atomically(lambda temp: normalizer.save(str(temp)), vecnormalize_path(path))
    replace_atomically(model.save, path)  # a temporary name ending in .tmp: SB3 adds no .zip to it


def crossed(num_timesteps: int, previous: int, every: int) -> bool:
    """True when a multiple of ``every`` lies in ``(previous, num_timesteps]``."""
    return every > 0 and num_timesteps // every > previous // every


class EpisodeMetricsCallback(BaseCallback):
    """Log the finite ``info["episode_metrics"]`` of every finished episode as ``geopipe/<key>`` means."""

    def _on_step(self) -> bool:
        for info, done in zip(self.locals["infos"], self.locals["dones"]):
            if not done or "episode_metrics" not in info:
                continue
            for key, value in info["episode_metrics"].items():
                if isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and math.isfinite(value):
                    self.logger.record_mean(METRICS_PREFIX + key, float(value))
        return True


def evaluate_references(run_dir: Path, env: gym.Env, seeds: Sequence[int], names: Sequence[str] = REFERENCE_POLICIES) -> None:
    """Play the scripted policies ``names`` once on ``seeds`` and write their summaries to ``reference_returns.csv``."""
    rows = [{"policy": name, **summarize_episodes(evaluate_agent(make_policy(name), env, seeds))} for name in names]
    write_references(run_dir, rows)


def append_evaluation(run_dir: Path, row: dict[str, float]) -> None:
    """Add one evaluation (``EVALUATION_COLUMNS``) to ``<run_dir>/evaluations.csv``, writing the header first."""
    path = run_dir / EVALUATIONS_FILE
    new = not path.is_file()
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=EVALUATION_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(row)


class HeldOutEvalCallback(BaseCallback):
    """Every ``eval_freq`` timesteps, run the model deterministically on fixed held-out seeds and keep the best.

    The episodes run on ``eval_env``, a separate single env that returns raw rewards, with the model's action
    masks and the training ``VecNormalize``'s current observation statistics: its ``normalize_obs`` reads them
    without updating them, so evaluation neither drifts from nor alters what training uses and saves. A row per
    evaluation goes to ``<run_dir>/evaluations.csv``; the model with the highest mean return is saved as
    ``best_model.zip`` (+ ``best_model_vecnormalize.pkl``). When training starts, the scripted
    ``reference_policies`` play the same seeds once (``reference_returns.csv``); ``learning_curve.png`` is redrawn
    after every evaluation with their returns as horizontal lines.
    """

    def __init__(
        self,
        make_eval_env: Callable[[], gym.Env],
        run_dir: Path,
        seeds: Sequence[int],
        eval_freq: int,
        verbose: int = 0,
        reference_policies: Sequence[str] = REFERENCE_POLICIES,
    ) -> None:
        super().__init__(verbose)
        self.reference_policies = list(reference_policies)
        self.make_eval_env = make_eval_env
        self.run_dir = run_dir
        self.seeds = list(seeds)
        self.eval_freq = eval_freq
        self.best_mean_return = -math.inf
        self.eval_env: gym.Env | None = None
        self._last_timesteps = 0

    def _on_training_start(self) -> None:
        self._last_timesteps = self.num_timesteps
        if self.eval_env is None:
            self.eval_env = self.make_eval_env()
            self._evaluate_references()

    def _evaluate_references(self) -> None:
        assert self.eval_env is not None
        evaluate_references(self.run_dir, self.eval_env, self.seeds, self.reference_policies)

    def _on_step(self) -> bool:
        if crossed(self.num_timesteps, self._last_timesteps, self.eval_freq):
            self.evaluate()
        self._last_timesteps = self.num_timesteps
        return True

    def evaluate(self) -> float:
        """Run the held-out episodes now, log and record them, save a new best model; return the mean return."""
        assert self.eval_env is not None, "evaluate() runs during training"
        policy = AgentPolicy(self.model, self.model.get_vec_normalize_env(), name="eval", deterministic=True)
        results = evaluate_agent(policy, self.eval_env, self.seeds)
        row = {"timesteps": self.num_timesteps, **summarize_episodes(results)}
        append_evaluation(self.run_dir, row)
        plot_learning_curve(self.run_dir)
        for key in ("mean_return", "mean_avg_jct_h", "mean_total_cost_usd"):
            if math.isfinite(row[key]):
                self.logger.record(f"eval/{key}", row[key])
        if row["mean_return"] > self.best_mean_return:
            self.best_mean_return = row["mean_return"]
            save_agent(self.model, self.run_dir / f"{BEST_MODEL_NAME}.zip")
            if self.verbose:
                print(f"new best mean return {row['mean_return']:.3f} at {self.num_timesteps} timesteps")
        return row["mean_return"]

    def _on_training_end(self) -> None:
        if self.eval_env is not None:
            self.eval_env.close()
            self.eval_env = None


class CheckpointCallback(BaseCallback):
    """Every ``save_freq`` timesteps, save ``<folder>/model_<timesteps>_steps.zip`` and its normalisation stats,
    then delete all but the newest ``keep`` checkpoints (``keep`` 0 keeps every one)."""

    def __init__(self, folder: Path, save_freq: int, keep: int = 0, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.folder = folder
        self.save_freq = save_freq
        self.keep = keep
        self._last_timesteps = 0

    def _on_training_start(self) -> None:
        self._last_timesteps = self.num_timesteps

    def _on_step(self) -> bool:
        if crossed(self.num_timesteps, self._last_timesteps, self.save_freq):
            save_agent(self.model, checkpoint_path(self.folder, self.num_timesteps))
            prune_checkpoints(self.folder, self.keep)
        self._last_timesteps = self.num_timesteps
        return True


def checkpoint_path(folder: Path, num_timesteps: int, suffix: str = ".zip") -> Path:
    """The checkpoint for ``num_timesteps``: a ``.zip`` file, or with ``suffix`` "" an RLlib checkpoint folder."""
    return folder / f"{CHECKPOINT_PREFIX}_{num_timesteps}_steps{suffix}"


def checkpoint_timesteps(path: Path) -> int | None:
    """The timesteps a checkpoint's name gives (None for any other name, such as ``model.zip``)."""
    match = CHECKPOINT_PATTERN.fullmatch(path.name.removesuffix(".zip"))
    return None if match is None else int(match.group(1))


def checkpoints(folder: Path, suffix: str = ".zip") -> list[Path]:
    """The checkpoints in ``folder`` (``.zip`` files, or with ``suffix`` "" RLlib's folders), oldest first by the
    timesteps in their names."""
    found = [(n, p) for p in folder.glob(f"{CHECKPOINT_PREFIX}_*_steps{suffix}") if (n := checkpoint_timesteps(p)) is not None]
    return [p for _, p in sorted(found)]


def prune_checkpoints(folder: Path, keep: int, suffix: str = ".zip") -> None:
    """Delete all but the newest ``keep`` checkpoints of ``folder`` (0 keeps every one), with their statistics."""
    if keep > 0:
        for old in checkpoints(folder, suffix)[:-keep]:
            _delete(old)
            vecnormalize_path(old).unlink(missing_ok=True)


def training_callbacks(
    run_dir: Path,
    make_eval_env: Callable[[], gym.Env],
    eval_seeds: Sequence[int],
    eval_freq: int,
    checkpoint_dir: Path,
    checkpoint_freq: int,
    verbose: int = 0,
    keep_checkpoints: int = 0,
) -> list[BaseCallback]:
    """The metrics callback, plus evaluation and checkpoints when their frequency is positive (the newest
    ``keep_checkpoints`` kept, 0 = all)."""
    callbacks: list[BaseCallback] = [EpisodeMetricsCallback()]
    if eval_freq > 0:
        callbacks.append(HeldOutEvalCallback(make_eval_env, run_dir, eval_seeds, eval_freq, verbose))
    if checkpoint_freq > 0:
        callbacks.append(CheckpointCallback(checkpoint_dir, checkpoint_freq, keep_checkpoints, verbose))
    return callbacks

