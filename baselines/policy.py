"""The policy protocol shared by scripted and learned schedulers.

A policy is reset on an env at the start of an episode and then maps ``(obs, info)`` to an action that is valid
under ``info["action_mask"]``. Scripted policies read the unwrapped env's candidate table (what each action
would launch) but act only through ``env.step``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from geopipe_env.env import GeoPipeEnv
from geopipe_env.decision.strategies import STRATEGY_NAMES

# Evaluation seeds are this and above; training draws its episodes' seeds below, so held-out results stay held out.
DEFAULT_SEED_START = 1000


@runtime_checkable
class Policy(Protocol):
    """What every scheduler, scripted or learned, provides."""

    name: str
    env_kwargs: dict[str, Any]  # extra gym.make kwargs this policy needs (e.g. extra candidate strategies)

    def reset(self, env: Any) -> None:
        """Bind to ``env`` (a ``GeoPipeEnv`` or a wrapper of one) at the start of an episode."""

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        """An action valid under ``info["action_mask"]``."""


def play_episode(env: Any, policy: Policy, seed: int) -> tuple[float, dict[str, Any]]:
    """Reset ``env`` on ``seed``, let ``policy`` act until the episode ends; (return, the last step's info)."""
    obs, info = env.reset(seed=int(seed))
    policy.reset(env)
    episode_return = 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        episode_return += float(reward)
        if terminated or truncated:
            return episode_return, info


class WaitCounter:
    """Wraps a policy and counts, over the episodes it plays, the decisions where a launch was valid (``could``)
    and those of them where it waited (``waited``)."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.name, self.env_kwargs = policy, policy.name, policy.env_kwargs
        self.could = self.waited = 0
        self.wait_action = -1

    def reset(self, env: Any) -> None:
        self.policy.reset(env)
        self.wait_action = env.unwrapped.wait_action

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        action = int(self.policy.act(obs, info))
        if info["action_mask"][: self.wait_action].any():
            self.could += 1
            self.waited += action == self.wait_action
        return action


class ScriptedPolicy:
    """Base for policies that choose among the env's candidates. Subclasses implement :meth:`choose`."""

    name = "scripted"

    def __init__(self) -> None:
        self.env_kwargs: dict[str, Any] = {}
        self.env: GeoPipeEnv | None = None
        self.rng = np.random.default_rng(0)

    def reset(self, env: Any) -> None:
        self.env = env.unwrapped
        # Seeded from the env's RNG state without drawing from it: the same env seed gives the same episode,
        # and the env's own random stream is left untouched.
        self.rng = np.random.default_rng(self.env.np_random.bit_generator.state["state"]["state"])

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        mask = info["action_mask"]
        action = self.choose(mask)
        return action if mask[action] else self.env.wait_action

    def choose(self, mask: np.ndarray) -> int:
        raise NotImplementedError

    def action(self, slot: int, strategy: str) -> int:
        """The action that launches the job in queue slot ``slot`` on ``strategy``'s candidate, in the env's own
        order of strategies (an env may be made with other strategies, or the same in another order)."""
        strategies = self.env.strategies
        if strategy not in strategies:
            raise ValueError(f"{self.name}: the env offers no {strategy!r} candidates; its strategies are "
                             f"{', '.join(strategies)}")
        return slot * self.env.num_strategies + strategies.index(strategy)


class FcfsPolicy(ScriptedPolicy):
    """Strict first-come-first-served: the oldest waiting job on one strategy's placement, else wait.

    This is how the paper's four baselines order jobs (BACE-Pipe, arXiv 2605.25375); the head job blocks the
    queue when its placement is infeasible (head-of-line blocking).
    """

    def __init__(self, strategy: str, name: str | None = None) -> None:
        super().__init__()
        if strategy not in STRATEGY_NAMES:
            raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGY_NAMES)}")
        self.strategy = strategy
        self.name = name or strategy

    def choose(self, mask: np.ndarray) -> int:
        return self.action(0, self.strategy)


class RandomFcfsPolicy(ScriptedPolicy):
    """FCFS order with a uniformly random valid placement for the head job (else wait)."""

    name = "fcfs-random"

    def choose(self, mask: np.ndarray) -> int:
        k = self.env.num_strategies
        head = np.flatnonzero(mask[:k])
        return int(self.rng.choice(head)) if head.size else self.env.wait_action
