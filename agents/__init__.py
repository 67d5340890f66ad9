"""Learned schedulers: load a saved SB3 model as a policy with the protocol of ``baselines.policy``.

Importing this package needs no torch; loading a model and training need the ``[train]`` extra.
"""

from agents.loading import AgentPolicy, load_agent, load_pretrained, pretrained_path
from agents.spaces import ObservationSpaceMismatch

__all__ = ["AgentPolicy", "ObservationSpaceMismatch", "load_agent", "load_pretrained", "pretrained_path"]
