"""The specification of the built-in placement strategies: each rule written plainly in Python.

The env runs the compiled twins of these rules (``geopipe_env.decision.candidate_kernels``). This module is what they
are held to: ``tests/test_candidate_kernels.py`` plays both, decision for decision, and they must give the same
placements (ties, orders and arithmetic follow these rules step by step). It lives with the tests and does not ship
with the package. ``geopipe_env.decision.placement`` describes each strategy; :class:`BaceReading` names the
readings of BACE-Pipe where its paper (arXiv 2605.25375) is silent, which ``benchmarks/bace_readings.py`` measures
by registering each reading's rule as a strategy of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from geopipe_env.base.units import transfer_time_s
from geopipe_env.decision.placement import PlacementContext, _placement, admission_per_forward
from geopipe_env.decision.strategies import strategy
from geopipe_env.simulation.core_types import Job, Placement


class BaceReading(NamedTuple):
    """How BACE-Pipe reads what its paper leaves open. The defaults are the ``bace-pipe`` strategy's (its compiled
    twin's); docs/policies.md ("BACE-Pipe where the paper is silent") gives the measurements behind each
    (``benchmarks/bace_readings.py`` runs every reading).

    Attributes:
        single_region_first: a job that one region holds goes to the cheapest such region, with no WAN hop.
        price_over_run: regions rank by the mean price over the job's expected run, not the price now.
        per_unit_work: regions rank by price × busy W per TFLOPS × PUE (the cost of a unit of work), not price.
        admit_on_forward: a boundary is admitted if its transfer fits the forward time ``t_f``, not ``t_f + t_b``.
        grow_by_price: the path grows to the cheapest admissible neighbour, not the one with most spare bandwidth.
        admit_the_never_admitted: a job that no region can hold whole and for which the pathfinder finds no admissible
            path even with nothing running (every GPU free, every link's line rate spare) grows its path without the
            admission test; else it could only wait, forever.
    """

    single_region_first: bool = True
    price_over_run: bool = True
    per_unit_work: bool = True
    admit_on_forward: bool = False
    grow_by_price: bool = False
    admit_the_never_admitted: bool = True


def ever_admitted(ctx: PlacementContext, job: Job, forward_only: bool = False) -> bool:
    """Whether BACE-Pipe's admission rule could ever let the job run: with nothing running (every GPU free,
    every link's line rate spare), some region it fits holds it whole, or the pathfinder grows an admissible
    path from some region (:class:`_Idle`); the compiled twin is ``candidate_kernels._ever_admitted``."""
    key = (job.profile_key, forward_only)
    memo = ctx.__dict__.setdefault("_spec_ever_admitted", {})
    admitted = memo.get(key)
    if admitted is None:
        idle = _Idle(ctx)
        free = idle.free_list(job)
        admissible = lambda a, b: comm_fits_compute(idle, job, a, b, forward_only)  # noqa: E731
        admitted = memo[key] = any(n >= job.num_stages for n in free) or any(
            _grow_path(idle, job, start, lambda end, new: idle.spare[end][new], admissible, both_ends=True)
            is not None
            for start, n in enumerate(free) if n > 0
        )
    return admitted


class _Idle:
    """The world of a :class:`PlacementContext` with nothing running: every GPU free and every link's line rate
    spare (what :func:`ever_admitted` grows paths in)."""

    def __init__(self, ctx: PlacementContext) -> None:
        self._ctx = ctx
        self.neighbours, self.latency = ctx.neighbours, ctx.latency
        self.spare: list[list[float]] = ctx.sim.capacity_gbps.tolist()
        self._gpus: list[int] = ctx.sim.world.num_gpus.tolist()

    def free_list(self, job: Job) -> list[int]:
        return [n // job.stage_gpus if fits else 0 for n, fits in zip(self._gpus, job.fits.tolist())]

    def forward(self, job: Job) -> list[float]:
        return self._ctx.forward(job)


def _fill_in_order(order: Sequence[int], free: list[int], needed: int) -> Placement | None:
    """Take stages from regions in ``order`` (the pipeline path) until ``needed`` are placed."""
    regions, stages, placed = [], [], 0
    for r in order:
        take = min(free[r], needed - placed)
        if take > 0:
            regions.append(r)
            stages.append(take)
            placed += take
        if placed == needed:
            return _placement(tuple(regions), tuple(stages))
    return None


def single_region(ctx: PlacementContext, job: Job, key: Callable[[int], float]) -> Placement | None:
    """The whole job in the region that minimises ``key`` (lowest index on ties) among those that hold it now."""
    free = ctx.free_list(job)
    fitting = [r for r, n in enumerate(free) if n >= job.num_stages]
    if not fitting:
        return None
    return _placement((min(fitting, key=lambda r: (key(r), r)),), (job.num_stages,))


def lcf(ctx: PlacementContext, job: Job) -> Placement | None:
    """LCF: the cheapest region (price now) that holds the whole job."""
    return single_region(ctx, job, ctx.price.__getitem__)


def ldf(ctx: PlacementContext, job: Job) -> Placement | None:
    """LDF: the region with the most free GPUs, if it holds the whole job."""
    free_gpus = ctx.free_gpus
    return single_region(ctx, job, lambda r: -free_gpus[r])


def _grow_path(
    ctx: PlacementContext,
    job: Job,
    start: int,
    score: Callable[[int, int], float],
    admissible: Callable[[int, int], bool] | None = None,
    both_ends: bool = False,
) -> list[int] | None:
    """Extend a path from ``start`` one region at a time until it holds K* stages.

    Each step adds the linked, unused region with free stages that maximises ``score(end, new)`` and passes
    ``admissible(end, new)``; ``end`` is the path's tail, or either end if ``both_ends``.
    """
    free = ctx.free_list(job)
    neighbours = ctx.neighbours
    path = [start]
    held = free[start]
    while held < job.num_stages:
        best, best_score, at_head = None, -np.inf, False
        ends = [(path[-1], False), (path[0], True)] if both_ends and len(path) > 1 else [(path[-1], False)]
        for end, head in ends:
            for new in neighbours[end]:
                if free[new] <= 0 or new in path or (admissible is not None and not admissible(end, new)):
                    continue
                s = score(end, new)
                if s > best_score:
                    best, best_score, at_head = new, s, head
        if best is None:
            return None
        if at_head:
            path.insert(0, best)
        else:
            path.append(best)
        held += free[best]
    return path


def _by_price(ctx: PlacementContext, regions: list[int]) -> list[int]:
    """``regions`` in ascending price now, the lower index first on ties."""
    price = ctx.price
    return sorted(regions, key=lambda r: (price[r], r))


def _by_cost(ctx: PlacementContext, job: Job, regions: list[int], reading: BaceReading = BaceReading()) -> list[int]:
    """``regions`` in ascending :meth:`PlacementContext.cost_rank` for ``job``, the lower index first on ties."""
    rank = ctx.cost_rank(job, reading.price_over_run, reading.per_unit_work)
    return sorted(regions, key=lambda r: (rank[r], r))


def cr_lcf(ctx: PlacementContext, job: Job) -> Placement | None:
    """CR-LCF: start at the cheapest region and append the cheapest linked region; fill in that order."""
    free = ctx.free_list(job)
    starts = [r for r, n in enumerate(free) if n > 0]
    if not starts:
        return None
    price = ctx.price
    path = _grow_path(ctx, job, _by_price(ctx, starts)[0], lambda end, new: -price[new])
    return None if path is None else _fill_in_order(path, free, job.num_stages)


def cr_ldf(ctx: PlacementContext, job: Job) -> Placement | None:
    """CR-LDF: start at the region with most free GPUs; append by free GPUs and spare bandwidth; fill in order."""
    free = ctx.free_list(job)
    starts = [r for r, n in enumerate(free) if n > 0]
    if not starts:
        return None
    start = max(starts, key=lambda r: (free[r], -r))
    max_free = max(float(max(free)), 1.0)
    max_bw = max(ctx.max_spare_gbps, 1e-9)
    spare = ctx.spare
    path = _grow_path(ctx, job, start, lambda end, new: free[new] / max_free + spare[end][new] / max_bw)
    return None if path is None else _fill_in_order(path, free, job.num_stages)


def comm_fits_compute(ctx: PlacementContext, job: Job, a: int, b: int, forward_only: bool = False) -> bool:
    """BACE-Pipe's admission rule for a boundary a→b: ``d·A·8/B_avail + latency <= t_f + t_b`` (no stall), or
    ``<= t_f`` with ``forward_only``; divided by the messages a micro-batch puts on the link under the job's own
    schedule (``Job.link_messages``: a chunk's compute per message). ``B_avail`` is ``ctx.spare``."""
    free_bw = min(ctx.spare[a][b], ctx.spare[b][a])
    if free_bw <= 0.0:
        return False
    comm_s = transfer_time_s(job.wan_message_bytes, free_bw) + ctx.latency[a][b]
    forward = ctx.forward(job)
    stage_s = admission_per_forward(job, forward_only) * min(forward[a], forward[b])
    return comm_s <= stage_s


def cost_min_allocate(
    ctx: PlacementContext, job: Job, path: Sequence[int], reading: BaceReading = BaceReading()
) -> Placement | None:
    """BACE-Pipe's Cost-Min allocator: one stage per path region, the rest in ascending cost, path order kept."""
    free = ctx.free_list(job)
    if len(path) > job.num_stages or any(free[r] < 1 for r in path):
        return None
    stages = {r: 1 for r in path}
    left = job.num_stages - len(path)
    for r in _by_cost(ctx, job, path, reading):
        take = min(free[r] - 1, left)
        stages[r] += take
        left -= take
    if left > 0:
        return None
    return _placement(tuple(path), tuple(stages[r] for r in path))


def bace_pathfinder(
    ctx: PlacementContext,
    job: Job,
    check_bandwidth: bool = True,
    score: Callable[[int, int], float] | None = None,
    by_cost: bool = True,
    reading: BaceReading = BaceReading(),
) -> list[int] | None:
    """BACE-Pipe's pathfinder: the cheapest single region that holds the job, else a cross-region path grown from
    each start (cheapest first) along the best spare bandwidth.

    The paper combines regions "to get past the GPU capacity of one region", so a job that one region holds
    stays in one region, where no WAN hop slows it. With ``check_bandwidth`` a region joins a
    path only if its boundary passes :func:`comm_fits_compute`; ``score`` replaces the spare-bandwidth
    preference (the no-pathfinder ablation grows by price instead). ``by_cost=False`` (the no-Cost-Min ablation:
    price enters only through Cost-Min) ranks the single regions and the starts by free stages instead.
    ``reading`` chooses the readings of :class:`BaceReading`.
    """
    free = ctx.free_list(job)
    if by_cost:
        order = lambda regions: _by_cost(ctx, job, regions, reading)  # noqa: E731
    else:
        order = lambda regions: sorted(regions, key=lambda r: (-free[r], r))  # noqa: E731
    whole = [r for r, n in enumerate(free) if n >= job.num_stages] if reading.single_region_first else []
    if whole:
        return order(whole)[:1]
    forward_only = reading.admit_on_forward
    if reading.admit_the_never_admitted and check_bandwidth and not ever_admitted(ctx, job, forward_only):
        check_bandwidth = False
    admissible = (lambda a, b: comm_fits_compute(ctx, job, a, b, forward_only)) if check_bandwidth else None
    if score is None and reading.grow_by_price:
        rank = ctx.cost_rank(job, reading.price_over_run, reading.per_unit_work)
        score = lambda end, new: -rank[new]  # noqa: E731
    spare = ctx.spare
    grow_score = score or (lambda end, new: spare[end][new])
    for start in order([r for r, n in enumerate(free) if n > 0]):
        path = _grow_path(ctx, job, start, grow_score, admissible=admissible, both_ends=True)
        if path is not None:
            return path
    return None


def bace_pipe(ctx: PlacementContext, job: Job, reading: BaceReading = BaceReading()) -> Placement | None:
    """BACE-Pipe: bandwidth-aware pathfinder + Cost-Min allocator."""
    path = bace_pathfinder(ctx, job, reading=reading)
    return None if path is None else cost_min_allocate(ctx, job, path, reading)


def bace_pipe_no_pathfinder(ctx: PlacementContext, job: Job) -> Placement | None:
    """Ablation: Cost-Min allocation on the cost-first (ascending cost) path, with no bandwidth admission."""
    rank = ctx.cost_rank(job)
    path = bace_pathfinder(ctx, job, check_bandwidth=False, score=lambda end, new: -rank[new])
    return None if path is None else cost_min_allocate(ctx, job, path)


def bace_pipe_no_costmin(ctx: PlacementContext, job: Job) -> Placement | None:
    """Ablation: the bandwidth-aware pathfinder with no price in it (single regions and starts by free stages),
    its path filled greedily in path order."""
    path = bace_pathfinder(ctx, job, by_cost=False)
    return None if path is None else _fill_in_order(path, ctx.free_list(job), job.num_stages)


# Each built-in named strategy's rule (the selectors choose among the pool: ``reference.candidate_row``).
RULES: dict[str, Callable[[PlacementContext, Job], Placement | None]] = {
    "bace-pipe": bace_pipe,
    "cr-lcf": cr_lcf,
    "cr-ldf": cr_ldf,
    "lcf": lcf,
    "ldf": ldf,
    "bace-pipe-no-pathfinder": bace_pipe_no_pathfinder,
    "bace-pipe-no-costmin": bace_pipe_no_costmin,
}


def named_placement(ctx: PlacementContext, job: Job, name: str) -> Placement | None:
    """The placement of ``job`` under the strategy ``name`` (not a selector): a built-in one's rule here, a
    registered one's own rule; memoised per job profile in ``ctx.named``, as the env's Python columns keep it."""
    key = (job.profile_key, name)
    if key not in ctx.named:
        rule = RULES.get(name) or strategy(name).rule
        ctx.named[key] = rule(ctx, job)
    return ctx.named[key]
