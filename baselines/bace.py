"""BACE-Pipe (Zhang, Liu and Xu, arXiv 2605.25375) and two stronger-than-FCFS heuristics, as scripted policies.

BACE-Pipe's **dynamic priority** scores each visible waiting job j as
``Priority_j = (1 − α)(1 − I_j) + α(1 − D_j)``, where (our normalisations; the paper does not give them):

* ``I_j`` = the job's isolated duration ÷ the largest isolated duration in the visible queue (short → high);
* ``D_j`` = the job's bandwidth demand per hop (``Job.typical_demand_gbps``: ``A·8 / (t_f + t_b)`` on a typical GPU) ÷ the largest in the
  visible queue (light → high);
* ``α`` = the mean utilisation of the inter-region links that carry traffic now (0 when none does): an idle
  network favours short jobs, a congested one favours jobs that need little bandwidth.

The highest-priority job that has a feasible placement is launched (the priority is what lifts BACE-Pipe out of
FCFS head-of-line blocking), on the BACE-Pipe candidate: bandwidth-aware pathfinder + Cost-Min allocator.
The three ablations drop one part each: FCFS order, no bandwidth admission, or no Cost-Min.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geopipe_baselines.policy import ScriptedPolicy
from geopipe_env.decision.strategies import STRATEGY_NAMES


def _with_strategy(strategy: str) -> dict[str, Any]:
    """Env kwargs that make ``strategy`` a candidate slot (appended after the default K)."""
    return {} if strategy in STRATEGY_NAMES else {"strategies": [*STRATEGY_NAMES, strategy]}


def congestion(env) -> float:
    """α: mean utilisation of the inter-region links that carry traffic now (0 if none)."""
    sim = env.sim
    loaded = sim.link_load_gbps > 0
    if not loaded.any():
        return 0.0
    return float((sim.link_load_gbps[loaded] / sim.capacity_gbps[loaded]).mean())


def priorities(env, job_ids: list[int]) -> np.ndarray:
    """BACE-Pipe's priority of each job in ``job_ids`` (higher runs first)."""
    jobs = [env.world.jobs[j] for j in job_ids]
    duration = np.array([j.isolated_duration_s for j in jobs])
    demand = np.array([j.typical_demand_gbps for j in jobs])
    alpha = congestion(env)
    return (1.0 - alpha) * (1.0 - duration / duration.max()) + alpha * (1.0 - demand / demand.max())


class BacePipePolicy(ScriptedPolicy):
    """BACE-Pipe: dynamic priority (or FCFS for the ablation) over the visible queue, on one placement strategy."""

    def __init__(self, name: str = "bace-pipe", strategy: str = "bace-pipe", use_priority: bool = True) -> None:
        super().__init__()
        self.name = name
        self.strategy = strategy
        self.use_priority = use_priority
        self.env_kwargs = _with_strategy(strategy)

    def choose(self, mask: np.ndarray) -> int:
        env = self.env
        k = env.strategies.index(self.strategy)
        if not self.use_priority:
            return k  # strict FCFS: the head job or nothing
        visible = env.sim.waiting[: env.queue_slots]
        score = priorities(env, visible)
        for slot in sorted(range(len(visible)), key=lambda i: (-score[i], i)):
            action = slot * env.num_strategies + k
            if mask[action]:
                return action
        return env.wait_action


class SjfPolicy(ScriptedPolicy):
    """Shortest (isolated) job first among jobs that can start, each on its cheapest feasible placement."""

    name = "sjf"

    def ordered_slots(self) -> list[int]:
        env = self.env
        visible = env.sim.waiting[: env.queue_slots]
        return sorted(range(len(visible)), key=lambda i: (env.world.jobs[visible[i]].isolated_duration_s, i))

    def choose(self, mask: np.ndarray) -> int:
        k = self.env.strategies.index("cheapest")
        for slot in self.ordered_slots():
            action = slot * self.env.num_strategies + k
            if mask[action]:
                return action
        return self.env.wait_action


class PriceAwarePolicy(SjfPolicy):
    """SJF on the cheapest placement, but it waits for a cheaper hour that is coming soon.

    A job starts now unless the GPU-weighted price of its placement's regions will be more than ``tolerance``
    lower at some hour within ``lookahead_h`` (perfect foresight of day-ahead prices), or once it has waited
    ``max_wait_h``. With constant prices it is plain SJF on the cheapest placement.
    """

    name = "price-aware"

    def __init__(self, lookahead_h: int = 12, tolerance: float = 0.05, max_wait_h: float = 6.0) -> None:
        super().__init__()
        self.lookahead_h = lookahead_h
        self.tolerance = tolerance
        self.max_wait_h = max_wait_h

    def choose(self, mask: np.ndarray) -> int:
        env = self.env
        k = env.strategies.index("cheapest")
        now = env.sim.now_s
        hour = int(now // 3600.0)
        prices = env.world.price.values[:, hour : hour + self.lookahead_h + 1]  # (R, H)
        for slot in self.ordered_slots():
            action = slot * env.num_strategies + k
            if not mask[action]:
                continue
            job = env.world.jobs[env.sim.waiting[slot]]
            placement = env.candidate(slot, k).placement
            gpus = np.zeros(env.world.num_regions)
            gpus[list(placement.regions)] = placement.stages
            weighted = gpus @ prices / gpus.sum()  # (H,) the placement's mean price per hour
            waited_h = (now - job.arrival_s) / 3600.0
            cheaper_soon = weighted[1:].size and weighted[1:].min() < weighted[0] * (1.0 - self.tolerance)
            if not cheaper_soon or waited_h >= self.max_wait_h:
                return action
        return env.wait_action
