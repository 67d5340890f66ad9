"""Masked PPO on RLlib's new API stack: the observation layout, the masking RLModule, and trained policies.

Needs the ``rllib`` extra (``pip install -e ".[rllib]"``); ``geopipe_agents`` imports this module only when an RLlib
policy is trained or loaded.

RLlib's default connectors do not flatten a nested Dict observation, and its example action-masking module is
deprecated. So :class:`MaskedFlatObservation` gives the env RLlib's masking layout, ``{"action_mask": float32
(num_actions,), "observations": the flattened boxes}``, and :class:`MaskedPPOTorchRLModule` (RLlib's default PPO
module on ``"observations"``) adds ``log(mask)`` to the action logits, so a masked action is never sampled, taken
or credited. A trained module is used through the project's policy protocol by :class:`RLlibAgentPolicy`
(:func:`load_rllib_agent`, or :func:`geopipe_agents.load_agent` on a checkpoint folder).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from ray.rllib.algorithms.ppo import PPO
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.utils.torch_utils import FLOAT_MIN

import geopipe_env  # noqa: F401  (registers the env ids in RLlib's worker processes)
from geopipe_agents.spaces import check_spaces

MASK_KEY, OBS_KEY = "action_mask", "observations"
# Where an Algorithm checkpoint (Algorithm.save_to_path) keeps the trained module.
MODULE_IN_CHECKPOINT = Path("learner_group", "learner", "rl_module", "default_policy")
MODULE_STATE_FILE = "class_and_ctor_args.pkl"  # written beside every saved RLModule


# ---------------------------------------------------------------------------------------------------- observations
def masked_observation_space(observation_space: spaces.Space, action_space: spaces.Discrete) -> spaces.Dict:
    """The layout RLlib's masking module reads: the mask as float32 and the env's boxes flattened into one."""
    return spaces.Dict({
        MASK_KEY: spaces.Box(0.0, 1.0, (int(action_space.n),), np.float32),
        OBS_KEY: spaces.flatten_space(observation_space),
    })


def masked_observation(observation_space: spaces.Space, obs: Any, action_mask: np.ndarray) -> dict[str, np.ndarray]:
    """One observation in :func:`masked_observation_space`'s layout."""
    return {MASK_KEY: np.asarray(action_mask, dtype=np.float32), OBS_KEY: spaces.flatten(observation_space, obs).astype(np.float32)}


class MaskedFlatObservation(gym.Wrapper):
    """A GeoPipe env whose observations carry the action mask in RLlib's masking layout."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = masked_observation_space(env.observation_space, env.action_space)

    def reset(self, **kwargs: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return masked_observation(self.env.observation_space, obs, info["action_mask"]), info

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return masked_observation(self.env.observation_space, obs, info["action_mask"]), reward, terminated, truncated, info


def make_masked_env(config: dict[str, Any]) -> gym.Env:
    """RLlib's env creator: ``config["env_id"]`` made with ``config["env_kwargs"]``, in the masking layout."""
    return MaskedFlatObservation(gym.make(f"geopipe_env:{config['env_id']}", **config.get("env_kwargs", {})))


# ---------------------------------------------------------------------------------------------------- module
class MaskedPPOTorchRLModule(DefaultPPOTorchRLModule):
    """RLlib's default PPO module (separate policy and value MLPs) on the ``"observations"`` box, with the logits
    of masked actions pushed to the smallest float, in exploration, inference and training alike."""

    def __init__(self, *, observation_space: spaces.Dict, **kwargs: Any) -> None:
        if not isinstance(observation_space, spaces.Dict) or set(observation_space.spaces) != {MASK_KEY, OBS_KEY}:
            raise ValueError(f"{type(self).__name__} needs a Dict observation space of {MASK_KEY!r} and {OBS_KEY!r}, got {observation_space}")
        super().__init__(observation_space=observation_space[OBS_KEY], **kwargs)  # the networks see the boxes only
        self.observation_space = observation_space  # saved with the module, so a checkpoint rebuilds this layout

    @staticmethod
    def _split(batch: dict[str, Any]) -> tuple[torch.Tensor | None, dict[str, Any]]:
        """(the mask, the batch with the boxes as its observations); no mask once the batch is split already."""
        obs = batch[Columns.OBS]
        if not isinstance(obs, dict):
            return None, batch
        return obs[MASK_KEY], {**batch, Columns.OBS: obs[OBS_KEY]}

    @staticmethod
    def _mask(output: dict[str, Any], mask: torch.Tensor) -> dict[str, Any]:
        output[Columns.ACTION_DIST_INPUTS] = output[Columns.ACTION_DIST_INPUTS] + torch.clamp(torch.log(mask), min=FLOAT_MIN)
        return output

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        mask, inner = self._split(batch)
        return self._mask(super()._forward(inner, **kwargs), mask)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        mask, inner = self._split(batch)
        return self._mask(super()._forward_train(inner, **kwargs), mask)

    def compute_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        return super().compute_values(self._split(batch)[1], embeddings)


class RunFolderPPO(PPO):
    """RLlib's PPO, keeping its Trainable folder in ``<run_dir>/rllib``: outside Tune, Ray makes a fresh one under
    ``~/ray_results`` for every Algorithm."""

    def __init__(self, config: Any, run_dir: str | os.PathLike | None = None, **kwargs: Any) -> None:
        self._run_dir = None if run_dir is None else Path(run_dir)
        super().__init__(config=config, **kwargs)

    def _setup_logdir(self) -> None:
        if self._run_dir is None:  # rebuilt from a checkpoint: a temporary folder, still outside the home folder
            self._logdir = tempfile.mkdtemp(prefix="rllib-")
        else:
            self._logdir = str(self._run_dir / "rllib")
            os.makedirs(self._logdir, exist_ok=True)


# ---------------------------------------------------------------------------------------------------- policies
class RLlibAgentPolicy:
    """A trained :class:`MaskedPPOTorchRLModule` behind the policy protocol: the most likely valid action."""

    def __init__(self, module: RLModule, name: str) -> None:
        self.module = module
        self.name = name
        self.env_kwargs: dict[str, Any] = {}
        self.env_observation_space: spaces.Space | None = None
        self.wait_action = int(module.action_space.n) - 1

    def reset(self, env: Any) -> None:
        expected = masked_observation_space(env.observation_space, env.action_space)
        check_spaces(self.module.observation_space, expected, f"RLlib agent {self.name!r}")
        self.env_observation_space = env.observation_space
        self.wait_action = env.unwrapped.wait_action

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        mask = np.asarray(info["action_mask"], dtype=bool)
        layout = masked_observation(self.env_observation_space, obs, mask)
        batch = {Columns.OBS: {key: torch.from_numpy(value)[None] for key, value in layout.items()}}
        with torch.no_grad():
            logits = self.module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS][0]
        action = int(torch.argmax(logits))
        return action if mask[action] else self.wait_action  # every action masked: the env's wait is always valid


def module_dir(path: str | os.PathLike) -> Path | None:
    """The saved module inside ``path`` (an Algorithm checkpoint, or a saved RLModule itself); None if neither."""
    path = Path(path)
    for candidate in (path / MODULE_IN_CHECKPOINT, path):
        if (candidate / MODULE_STATE_FILE).is_file():
            return candidate
    return None


def load_rllib_agent(path: str | os.PathLike, env: Any | None = None) -> RLlibAgentPolicy:
    """The policy saved in ``path``, an RLlib checkpoint folder (``train.py --algo rllib_ppo`` writes
    ``model/``, ``best_model/`` and ``checkpoints/model_<N>_steps/``); named after the folder.

    Raises:
        FileNotFoundError: ``path`` holds no saved RLlib module.
        ObservationSpaceMismatch: ``env``'s observations differ from the module's.
    """
    found = module_dir(path)
    if found is None:
        raise FileNotFoundError(f"no RLlib checkpoint at {path} (expected {MODULE_IN_CHECKPOINT}/{MODULE_STATE_FILE} inside)")
    module = RLModule.from_checkpoint(found.resolve())  # Ray reads a relative path as a URI
    module.eval()
    agent = RLlibAgentPolicy(module, name=Path(path).name)
    if env is not None:
        agent.reset(env)
    return agent
