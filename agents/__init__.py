"""Learned schedulers: load a saved SB3 model as a policy with the protocol of ``geopipe_baselines.policy``.

Importing this package needs no torch; loading a model and training need the ``[train]`` extra.
"""

from geopipe_agents.loading import AgentPolicy, load_agent, load_pretrained, pretrained_path
from geopipe_agents.spaces import ObservationSpaceMismatch

__all__ = ["AgentPolicy", "ObservationSpaceMismatch", "load_agent", "load_pretrained", "pretrained_path"]
