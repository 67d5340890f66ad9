"""Loading saved Stable-Baselines3 models (MaskablePPO or PPO) as GeoPipe policies.

A saved agent is ``<name>.zip`` (the SB3 model) with, optionally, ``<name>_vecnormalize.pkl`` beside it (the
observation-normalisation statistics of a ``VecNormalize`` wrapper). ``load_agent`` returns an
:class:`AgentPolicy` that normalises observations the way training did, predicts with the action mask, and
refuses an env whose observation space differs from the model's. :func:`load_pretrained` loads the agent
shipped inside the package, wherever the package is installed.

This module imports Stable-Baselines3 (and so torch) only when a model is loaded, so that the base install, which
has neither, can import it and say which extra is missing.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from geopipe_agents.spaces import ObservationSpaceMismatch, check_spaces
from geopipe_evaluation.cli import install_hint

if TYPE_CHECKING:
    from geopipe_baselines.policy import Policy

VECNORMALIZE_SUFFIX = "_vecnormalize.pkl"
PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"  # package data: present in site-packages too
PRETRAINED_AGENT = "geopipe_v0_maskable_ppo"  # the shipped MaskablePPO agent for GeoPipe-v0
TRAIN_EXTRA_MODULES = ("torch", "stable_baselines3", "sb3_contrib")
TRAIN_EXTRA_INSTALL = install_hint("train")


def train_extra_available() -> bool:
    """Whether torch, Stable-Baselines3 and sb3-contrib are installed (without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in TRAIN_EXTRA_MODULES)


def missing_train_extra(what: str, exc: ImportError) -> str:
    """A one-line message for an ``ImportError`` of the ``[train]`` extra: what needs it and how to install it."""
    return f"{what} needs the [train] extra ({exc.name or exc} is not installed): {TRAIN_EXTRA_INSTALL}"


class AgentPolicy:
    """A trained SB3 model behind the policy protocol (``reset(env)``, ``act(obs, info)``)."""

    def __init__(self, model: Any, obs_normalizer: Any | None, name: str, deterministic: bool = True) -> None:
        self.model = model
        self.obs_normalizer = obs_normalizer
        self.name = name
        self.deterministic = deterministic
        self.env_kwargs: dict[str, Any] = {}
        self.wait_action = int(model.action_space.n) - 1

    def __repr__(self) -> str:
        model = self.model
        return (
            f"AgentPolicy(name={self.name!r}, model={type(model).__name__}({type(model.policy).__name__}, "
            f"{model.num_timesteps:,} timesteps), obs_normalizer={type(self.obs_normalizer).__name__ if self.obs_normalizer is not None else None}, "
            f"deterministic={self.deterministic})"
        )

    def reset(self, env: Any) -> None:
        check_spaces(self.model.observation_space, env.observation_space, f"agent {self.name!r}")
        self.wait_action = env.unwrapped.wait_action

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        mask = np.asarray(info["action_mask"], dtype=bool)
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer.normalize_obs(obs)
        if _is_maskable(self.model):
            action, _ = self.model.predict(obs, deterministic=self.deterministic, action_masks=mask)
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        action = int(np.asarray(action).reshape(-1)[0])
        return action if mask[action] else self.wait_action  # plain PPO may pick a masked action


def _is_maskable(model: Any) -> bool:
    from sb3_contrib import MaskablePPO

    return isinstance(model, MaskablePPO)


def _algorithm_of(path: Path) -> Any:
    """The SB3 class a saved zip was made by, from the policy class recorded in it."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    with zipfile.ZipFile(path) as archive:
        data = archive.read("data").decode("utf-8", errors="replace")
    return MaskablePPO if "sb3_contrib" in data else PPO


def _first_line_with(text: str, words: str) -> str:
    return next((line.strip() for line in text.splitlines() if words in line), text.splitlines()[0] if text else "")


def load_agent(path: str | os.PathLike, env: Any | None = None, deterministic: bool = True) -> Policy:
    """Load ``path`` (an SB3 ``.zip``) and its normalisation stats, if saved beside it, as an :class:`AgentPolicy`.

    A folder is read as an RLlib checkpoint instead (:func:`geopipe_agents.rllib.load_rllib_agent`, the ``rllib`` extra),
    which always acts greedily.

    Args:
        path: the model file, or an RLlib checkpoint folder.
        env: optionally an env to check the observation space against right away.
        deterministic: act greedily (default) or sample from the policy.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not an SB3 model, or a folder without the ``rllib`` extra installed.
        ObservationSpaceMismatch: ``env``'s observation space differs from the model's, or the model was trained on
            another version of the observation (its weights do not fit the policy this version builds).
        ImportError: the ``[train]`` extra (torch, Stable-Baselines3, sb3-contrib) is not installed.
    """
    path = Path(path)
    if path.is_dir():
        try:
            from geopipe_agents.rllib import load_rllib_agent
        except ImportError as exc:
            raise ValueError(f"{path} is a folder (an RLlib checkpoint?); loading one needs the 'rllib' extra: {install_hint('rllib')}") from exc
        return load_rllib_agent(path, env)
    if not path.is_file():
        raise FileNotFoundError(f"no saved agent at {path}")
    try:
        model = _algorithm_of(path).load(path, device="cpu")
    except ImportError as exc:
        raise ImportError(missing_train_extra(f"loading the saved agent {path.name}", exc), name=exc.name) from exc
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ValueError(f"{path} is not a Stable-Baselines3 model file: {exc}") from exc
    except RuntimeError as exc:
        if "size mismatch" not in str(exc):
            raise
        # The saved observation space builds a policy whose layers no longer fit the saved weights: the policy reads
        # this version's observation tables, whose columns differ from those the model was trained on.
        raise ObservationSpaceMismatch(
            f"{path.name} was trained on another version of GeoPipe's observation: its weights do not fit the policy "
            f"this version builds ({_first_line_with(str(exc), 'size mismatch')}); retrain it with this version, or "
            "play it with the version it was trained with"
        ) from exc
    normalizer = None
    stats = path.with_name(path.stem + VECNORMALIZE_SUFFIX)
    if stats.is_file():
        with open(stats, "rb") as f:
            normalizer = pickle.load(f)
        normalizer.training = False
        check_spaces(normalizer.observation_space, model.observation_space, f"normalisation stats {stats.name}")
    agent = AgentPolicy(model, normalizer, name=path.stem, deterministic=deterministic)
    if env is not None:
        agent.reset(env)
    return agent


def pretrained_path(name: str = PRETRAINED_AGENT) -> Path:
    """The ``.zip`` of an agent shipped in ``agents/pretrained/`` (its normalisation stats lie beside it)."""
    return PRETRAINED_DIR / f"{name}.zip"


def load_pretrained(name: str = PRETRAINED_AGENT, env: Any | None = None, deterministic: bool = True) -> AgentPolicy:
    """Load a shipped agent, by default the MaskablePPO agent for GeoPipe-v0, from the installed package.

    It resolves the file through the package's own path, so it works from a source checkout and from
    site-packages alike; ``env`` and ``deterministic`` are as in :func:`load_agent`.
    """
    return load_agent(pretrained_path(name), env=env, deterministic=deterministic)


class SavedAgents:
    """The policy source of saved agents (``geopipe_evaluation.specs``), registered in the entry-point group
    ``geopipe.policies``: an SB3 ``.zip`` or an RLlib checkpoint folder, and the shipped agent by default."""

    def accepts(self, spec: str) -> bool:
        return spec.lower().endswith(".zip") or Path(spec).is_dir()

    def load(self, spec: str) -> Policy:
        return load_agent(spec)

    def defaults(self) -> list[str]:
        return [str(pretrained_path())]

    def unavailable(self) -> str | None:
        if train_extra_available():
            return None
        return f"loading saved agents needs the [train] extra: {TRAIN_EXTRA_INSTALL}"


SAVED_AGENTS = SavedAgents()
