"""Observation spaces of saved agents: the check that a model meets the env it was trained for.

Shared by the SB3 loader (:mod:`geopipe_agents.loading`) and the RLlib one (:mod:`geopipe_agents.rllib`).
"""

from __future__ import annotations

from gymnasium import spaces


class ObservationSpaceMismatch(ValueError):
    """The env's observation space is not the one the model was trained on."""


def _describe(space: spaces.Space) -> str:
    if isinstance(space, spaces.Dict):
        return "{" + ", ".join(f"{k}: {v.shape}" for k, v in space.spaces.items()) + "}"
    return str(space)


# Observation keys whose size the env's arguments set (queue_slots, max_regions, strategies); the others are fixed
# by the observation layout of the GeoPipe version.
SIZED_BY_ARGUMENTS = ("regions", "links", "queue", "candidates")
FIXED_BY_VERSION = ("global",)


def check_spaces(model_space: spaces.Space, env_space: spaces.Space, source: str) -> None:
    """Raise :class:`ObservationSpaceMismatch` with both layouts unless the spaces are equal, with a hint at the
    likely cause: other env arguments, or an observation layout of another GeoPipe version."""
    if model_space == env_space:
        return
    hint = "use an env with the same queue_slots / max_regions / strategies as at training"
    if isinstance(model_space, spaces.Dict) and isinstance(env_space, spaces.Dict):
        differing = {k for k in {*model_space.spaces, *env_space.spaces}
                     if k not in model_space.spaces or k not in env_space.spaces
                     or model_space[k].shape != env_space[k].shape}
        fixed_by_version = differing - set(SIZED_BY_ARGUMENTS)
        if fixed_by_version and fixed_by_version <= set(FIXED_BY_VERSION):
            hint = (f"the observation layout differs in {', '.join(sorted(differing))}, which no env argument sets: the "
                    "model was trained with another GeoPipe version; retrain it with this one (train.py) or load it "
                    "with the version it was trained with")
    raise ObservationSpaceMismatch(
        f"{source} was trained on observations {_describe(model_space)} but the env gives {_describe(env_space)}; "
        f"{hint}"
    )
