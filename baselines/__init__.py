"""Scripted schedulers behind one factory: ``make_policy(name)``."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from geopipe_baselines.bace import BacePipePolicy, PriceAwarePolicy, SjfPolicy
from geopipe_baselines.policy import FcfsPolicy, Policy, RandomFcfsPolicy, ScriptedPolicy

_FACTORIES: dict[str, Callable[[], Policy]] = {
    # BACE-Pipe and the paper's three ablations (Zhang, Liu and Xu, arXiv 2605.25375).
    "bace-pipe": BacePipePolicy,
    "bace-pipe-no-priority": lambda: BacePipePolicy("bace-pipe-no-priority", use_priority=False),
    "bace-pipe-no-pathfinder": lambda: BacePipePolicy("bace-pipe-no-pathfinder", strategy="bace-pipe-no-pathfinder"),
    "bace-pipe-no-costmin": lambda: BacePipePolicy("bace-pipe-no-costmin", strategy="bace-pipe-no-costmin"),
    # The paper's four baselines (same paper), FCFS with K*.
    "ldf": lambda: FcfsPolicy("ldf"),
    "lcf": lambda: FcfsPolicy("lcf"),
    "cr-ldf": lambda: FcfsPolicy("cr-ldf"),
    "cr-lcf": lambda: FcfsPolicy("cr-lcf"),
    # The two baseline families by the paper's names for them.
    "delay-first": lambda: FcfsPolicy("cr-ldf", name="delay-first"),
    "cost-first": lambda: FcfsPolicy("cr-lcf", name="cost-first"),
    "fcfs-random": RandomFcfsPolicy,
    # Heuristics beyond the paper's.
    "sjf": SjfPolicy,
    "price-aware": PriceAwarePolicy,
    # Slow references, left out of the default lists: one-step rollout over a base policy (geopipe_baselines.rollout).
    "rollout": lambda: _rollout("bace-pipe"),
    "rollout-sjf": lambda: _rollout("sjf"),
    # The exact optimum of each episode by branch and bound over env copies (geopipe_baselines.optimal): small worlds only.
    "optimal": lambda: _optimal(),
    # The same without foreknowledge of arrivals, re-solved at each decision (geopipe_baselines.optimal): small worlds only.
    "known-jobs-optimal": lambda: _known_jobs_optimal(),
}

# Each decision plays the episode out on copies of the env (the rollouts), or each episode is solved exactly before
# it is played (optimal), so these run only when named (docs/policies.md).
SLOW_REFERENCES = ("rollout", "rollout-sjf", "optimal", "known-jobs-optimal")


ALIASES = {"delay-first": "cr-ldf", "cost-first": "cr-lcf"}  # the paper's family names for the same policies


def _rollout(base: str) -> Policy:
    from geopipe_baselines.rollout import RolloutPolicy

    return RolloutPolicy(base)


def _optimal() -> Policy:
    from geopipe_baselines.optimal import OptimalPolicy

    return OptimalPolicy()


def _known_jobs_optimal() -> Policy:
    from geopipe_baselines.optimal import KnownJobsOptimalPolicy

    return KnownJobsOptimalPolicy()


def policy_names(include_aliases: bool = True, include_slow: bool = False) -> tuple[str, ...]:
    """The names :func:`make_policy` accepts (optionally without the aliases of other names), without the slow
    references (:data:`SLOW_REFERENCES`) unless ``include_slow``: these are the default policy lists."""
    return tuple(
        name for name in _FACTORIES
        if (include_aliases or name not in ALIASES) and (include_slow or name not in SLOW_REFERENCES)
    )


def make_policy(name: str) -> Policy:
    """A fresh scripted policy by name.

    Raises:
        ValueError: an unknown name; the message offers the closest valid name (``bace_pipe``: ``bace-pipe``) and
            lists them all.
    """
    try:
        return _FACTORIES[name]()
    except (KeyError, TypeError):
        normalised = str(name).strip().casefold().replace("_", "-").replace(" ", "-")
        close = [normalised] if normalised in _FACTORIES else difflib.get_close_matches(normalised, _FACTORIES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown policy {name!r}{hint}; expected one of {', '.join(_FACTORIES)}") from None


__all__ = ["SLOW_REFERENCES", "Policy", "ScriptedPolicy", "make_policy", "policy_names"]
