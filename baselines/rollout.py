"""One-step rollout over a base policy: a slow headroom reference, not a training baseline.

At each decision :class:`RolloutPolicy` tries candidate actions on copies of the env: each copy takes one
candidate, then the base policy (``bace-pipe`` by default) plays it to the episode's end, and the candidate whose
copy earns the highest return is taken. The base policy's own action is always among the candidates and wins
every tie, so the policy's return is at least its base policy's on every seed: the copies replay the env exactly
(the env draws from its RNG only at ``reset``), and the base policy chooses from the env's state alone (every
scripted policy does but ``fcfs-random``, whose draws depend on its history), so the base action's rollout is the
return the base policy would still earn, and any candidate taken earns at least that much (the classic rollout
improvement argument). The margin it finds over its base is a measure of how much a scheduler that decides one
launch better could gain.

The copies are the env's own (:class:`EnvCopier`): a :mod:`pickle` snapshot of the unwrapped ``GeoPipeEnv`` per
decision, its unchanging parts kept by reference, and one copy loaded from it per candidate; each continues
exactly as the env. The env being played is read but never stepped, and its
RNG is not drawn from.

Candidates: wait, the base policy's action, and the distinct valid launches (actions of one queue slot whose
strategies give the same placement are one launch). When there are more distinct launches than
``max_candidates``, the ones tried are chosen by the candidate table's estimates, scored like the reward
(estimated duration ÷ ``T_ref`` + ``cost_weight`` · estimated cost ÷ ``C_ref``, lower first): the best launch of
each queued job first, then the next best of any job.
"""

from __future__ import annotations

import io
import math
import pickle
from typing import Any

import numpy as np

from geopipe_env.env import GeoPipeEnv

DEFAULT_BASE = "bace-pipe"
# Launches rolled out per decision besides the base action and wait. docs/policies.md gives the timing behind it.
DEFAULT_MAX_CANDIDATES = 16
# A candidate replaces the base action only when its return is higher by more than this (relative to the base
# action's return), so that floating-point noise between equal rollouts never moves the policy off its base.
TIE_TOLERANCE = 1e-9


class EnvCopier:
    """Copies of one episode's env that continue exactly as it would: ``pickle`` of the env, with the parts that no
    step changes (the scenario with its price series, the episode's world, the spaces) kept by reference rather
    than written and read again. A snapshot is taken once (:meth:`snapshot`) and loaded once per copy
    (:meth:`load`): loading costs about a fifth of a ``copy.deepcopy`` of the env (180–220 against 820–960 µs
    on GeoPipe-Small-v0, three decisions into seed 1001)."""

    def __init__(self, env: GeoPipeEnv) -> None:
        self.parts = (env.scenario, env.world, env.observation_space, env.action_space)
        self._ids = {id(part): i for i, part in enumerate(self.parts)}

    def snapshot(self, env: GeoPipeEnv) -> bytes:
        """``env`` as bytes, its unchanging parts by reference."""
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = lambda obj: self._ids.get(id(obj))
        pickler.dump(env)
        return buffer.getvalue()

    def load(self, snapshot: bytes) -> GeoPipeEnv:
        """A new env from a :meth:`snapshot`."""
        unpickler = pickle.Unpickler(io.BytesIO(snapshot))
        unpickler.persistent_load = self.parts.__getitem__
        return unpickler.load()

    def copy(self, env: GeoPipeEnv) -> GeoPipeEnv:
        """One copy of ``env``."""
        return self.load(self.snapshot(env))


def distinct_launches(env: GeoPipeEnv, mask: np.ndarray) -> dict[tuple, int]:
    """``{(queue slot, placement): its lowest action}`` over the valid launches of ``mask``."""
    k = env.num_strategies
    launches: dict[tuple, int] = {}
    for a in np.flatnonzero(mask[: env.wait_action]).tolist():
        slot = a // k
        launches.setdefault((slot, env.candidate(slot, a % k).placement), a)
    return launches


class RolloutPolicy:
    """Rollout over ``base`` (a scripted policy name), trying at most ``max_candidates`` launches per decision
    (None: every distinct valid launch) besides the base action and wait."""

    def __init__(
        self, base: str = DEFAULT_BASE, max_candidates: int | None = DEFAULT_MAX_CANDIDATES, name: str | None = None
    ) -> None:
        from geopipe_baselines import make_policy  # baselines/__init__ imports this module

        if max_candidates is not None and (
            isinstance(max_candidates, bool) or not isinstance(max_candidates, int) or max_candidates < 0
        ):
            raise ValueError(f"max_candidates: got {max_candidates!r}; expected an integer >= 0, or None for every launch")
        self.base_name = base
        self.base = make_policy(base)
        if isinstance(self.base, RolloutPolicy):
            raise ValueError(f"base: got {base!r}; expected a policy other than a rollout")
        self.max_candidates = max_candidates
        self.name = name or ("rollout" if base == DEFAULT_BASE else f"rollout-{base}")
        self.env_kwargs: dict[str, Any] = dict(self.base.env_kwargs)  # the copies need the base policy's strategies
        self.env: GeoPipeEnv | None = None
        self._make_base = make_policy
        # Per episode: decisions taken, candidates rolled out, and decisions where a candidate beat the base action.
        self.stats = {"decisions": 0, "rollouts": 0, "improved": 0}

    def reset(self, env: Any) -> None:
        self.env = env.unwrapped
        self.base.reset(env)
        self.stats = {"decisions": 0, "rollouts": 0, "improved": 0}

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        mask = info["action_mask"]
        env = self.env
        base_action = int(self.base.act(obs, info))
        if not mask[base_action]:
            base_action = env.wait_action
        self.stats["decisions"] += 1
        candidates = self.candidates(mask, base_action)
        if len(candidates) == 1:
            return base_action
        copier = EnvCopier(env)
        snapshot = copier.snapshot(env)
        returns = {a: self.rollout_return(copier.load(snapshot), a) for a in candidates}
        self.stats["rollouts"] += len(candidates)
        best = base_action
        threshold = returns[base_action] + TIE_TOLERANCE * max(abs(returns[base_action]), 1.0)
        for a in candidates:  # in action order: among equal returns the lowest action wins
            if returns[a] > threshold and returns[a] > returns[best]:
                best = a
        if best != base_action:
            self.stats["improved"] += 1
        return best

    def rollout_return(self, env: GeoPipeEnv, action: int) -> float:
        """The return of ``env``, a copy of the env played, that takes ``action`` and is then played to the episode's
        end by a fresh base policy."""
        obs, reward, terminated, truncated, info = env.step(action)
        total = float(reward)
        if terminated or truncated:
            return total
        base = self._make_base(self.base_name)
        base.reset(env)
        while True:
            obs, reward, terminated, truncated, info = env.step(base.act(obs, info))
            total += float(reward)
            if terminated or truncated:
                return total

    def candidates(self, mask: np.ndarray, base_action: int) -> list[int]:
        """The actions to roll out, in action order: the base action, wait, and at most ``max_candidates`` distinct
        valid launches (the base action's launch counts as the base action)."""
        env = self.env
        launches = distinct_launches(env, mask)
        if base_action < env.wait_action:  # the base action stands for its launch
            k = env.num_strategies
            launches[base_action // k, env.candidate(base_action // k, base_action % k).placement] = base_action
        others = [a for a in launches.values() if a != base_action]
        if self.max_candidates is not None and len(others) > self.max_candidates:
            others = self.ranked(others)[: self.max_candidates]
        return sorted({base_action, env.wait_action, *others})

    def ranked(self, actions: list[int]) -> list[int]:
        """``actions`` by the candidate table's estimates, scored like the reward (lower first): the best launch
        of each queued job first, then the rest."""
        env = self.env
        k = env.num_strategies

        def score(a: int) -> float:
            info = env.candidate(a // k, a % k)
            value = info.duration_s / env.t_ref_s + env.cost_weight * info.cost_usd / env.c_ref_usd
            return value if math.isfinite(value) else math.inf

        by_score = sorted(actions, key=lambda a: (score(a), a))
        seen: set[int] = set()
        first, rest = [], []
        for a in by_score:
            (rest if a // k in seen else first).append(a)
            seen.add(a // k)
        return first + rest
