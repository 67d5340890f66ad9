"""Learned schedulers: load a saved SB3 model as a policy with the protocol of ``baselines.policy``."""

from agents.loading import AgentPolicy, ObservationSpaceMismatch, load_agent

__all__ = ["AgentPolicy", "ObservationSpaceMismatch", "load_agent"]
