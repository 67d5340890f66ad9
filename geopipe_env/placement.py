"""Layer 5: named placement strategies that turn (cluster state, job) into a candidate placement.

Each strategy returns a :class:`Placement` of exactly K* stages, or ``None`` when it finds nothing feasible now.
The env exposes them as the K candidate slots of its action space (DESIGN §5), so every scripted policy's
decision is an action, and the strategies also serve the scripted policies directly (PAPERS.md §1.3–§1.7):

* ``bace-pipe``: bandwidth-aware pathfinder (Prim-like expansion from either end of the path along the
  highest available bandwidth, adding a region only if ``A·8/B_avail + latency <= t_stage``) plus the Cost-Min
  allocator (one stage per path region, the rest in ascending electricity price);
* ``cr-lcf``: cross-region cost-first, GPUs aggregated over regions in ascending price;
* ``cr-ldf``: cross-region delay-first, greedy path expansion on free GPUs and available bandwidth;
* ``lcf`` / ``ldf``: the whole job in the cheapest region / the region with the most free GPUs;
* ``fastest`` / ``cheapest`` / ``greenest``: the best of all the above and every single region, by estimated
  duration, electricity cost or carbon.

Two more strategies are not in the default K but serve the paper's ablations (PAPERS.md §1.8):
``bace-pipe-no-pathfinder`` (Cost-Min on the cost-first path, no bandwidth admission) and
``bace-pipe-no-costmin`` (the pathfinder's path filled in path order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from geopipe_env.generator import Job
from geopipe_env.physics.energy import HourlyIntegral
from geopipe_env.physics import pipeline
from geopipe_env.simulator import ClusterSim, Estimate, Placement
from geopipe_env.units import GRAMS_PER_KG, WATTS_PER_KW, transfer_time_s

STRATEGY_NAMES: tuple[str, ...] = ("bace-pipe", "cr-lcf", "cr-ldf", "lcf", "ldf", "fastest", "cheapest", "greenest")


class PlacementContext:
    """Cluster facts shared by every strategy at one decision instant (computed once, read many times)."""

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim
        w = sim.world
        self.price_now = w.price.at(sim.now_s)  # (R,) USD/kWh
        self.free_gpus = sim.free_gpus
        self.linked = w.bandwidth_gbps > 0  # (R, R)
        self.spare_gbps = np.maximum(sim.capacity_gbps - sim.link_load_gbps, 0.0)  # (R, R)
        self._estimates: dict[tuple[int, Placement], Estimate] = {}
        self._integrals: dict[tuple[int, int, Placement], float] = {}
        self._free_stages: dict[tuple, np.ndarray] = {}
        # Named placements depend on a job only through its profile, so jobs of one model share them.
        self.named: dict[tuple[tuple, str], Placement | None] = {}

    def free_stages(self, job: Job) -> np.ndarray:
        """(R,) how many of this job's stages each region can hold now (0 where memory does not fit); read-only."""
        free = self._free_stages.get(job.profile_key)
        if free is None:
            free = self._free_stages[job.profile_key] = np.where(job.fits, self.free_gpus // job.gpus_per_stage, 0)
            free.flags.writeable = False
        return free

    def estimate(self, job: Job, placement: Placement) -> Estimate:
        key = (job.job_id, placement)
        est = self._estimates.get(key)
        if est is None:
            est = self._estimates[key] = self.sim.estimate(job, placement)
        return est

    def _over_run(self, series: HourlyIntegral, job: Job, placement: Placement) -> float:
        """Σ over the placement's regions of power (kW) × ∫series over the estimated run (memoised)."""
        key = (id(series), job.job_id, placement)
        value = self._integrals.get(key)
        if value is None:
            value = self._integrals[key] = self._integrate_over_run(series, job, placement)
        return value

    def _integrate_over_run(self, series: HourlyIntegral, job: Job, placement: Placement) -> float:
        est = self.estimate(job, placement)
        if not np.isfinite(est.duration_s):
            return float("inf")
        now = self.sim.now_s
        kw = tuple(float(est.power_w[r]) / WATTS_PER_KW for r in placement.regions)
        return series.weighted_integral(placement.regions, kw, now, now + est.duration_s)

    def cost_usd(self, job: Job, placement: Placement) -> float:
        """Estimated electricity cost: power × ∫price over the estimated run, per region."""
        return self._over_run(self.sim.world.price, job, placement)

    def carbon_kg(self, job: Job, placement: Placement) -> float:
        """Estimated carbon: power × ∫carbon intensity over the estimated run, per region."""
        return self._over_run(self.sim.world.carbon, job, placement) / GRAMS_PER_KG


def _fill_in_order(order: Sequence[int], free: np.ndarray, needed: int) -> Placement | None:
    """Take stages from regions in ``order`` (the pipeline path) until ``needed`` are placed."""
    regions, stages = [], []
    for r in order:
        take = int(min(free[r], needed - sum(stages)))
        if take > 0:
            regions.append(int(r))
            stages.append(take)
        if sum(stages) == needed:
            return Placement(tuple(regions), tuple(stages))
    return None


def single_region(ctx: PlacementContext, job: Job, key: Callable[[int], float]) -> Placement | None:
    """The whole job in the region that minimises ``key`` among those that can hold it now."""
    free = ctx.free_stages(job)
    fitting = np.flatnonzero(free >= job.num_stages)
    if fitting.size == 0:
        return None
    best = min(fitting, key=lambda r: (key(int(r)), int(r)))
    return Placement((int(best),), (job.num_stages,))


def lcf(ctx: PlacementContext, job: Job) -> Placement | None:
    """LCF: the cheapest region (price now) that holds the whole job."""
    return single_region(ctx, job, lambda r: ctx.price_now[r])


def ldf(ctx: PlacementContext, job: Job) -> Placement | None:
    """LDF: the region with the most free GPUs, if it holds the whole job."""
    return single_region(ctx, job, lambda r: -ctx.free_gpus[r])


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
    free = ctx.free_stages(job)
    path = [start]
    held = int(free[start])
    while held < job.num_stages:
        best, best_score, at_head = None, -np.inf, False
        ends = [(path[-1], False), (path[0], True)] if both_ends and len(path) > 1 else [(path[-1], False)]
        for end, head in ends:
            for new in np.flatnonzero(ctx.linked[end] & (free > 0)):
                new = int(new)
                if new in path or (admissible is not None and not admissible(end, new)):
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
        held += int(free[best])
    return path


def cr_lcf(ctx: PlacementContext, job: Job) -> Placement | None:
    """CR-LCF: start at the cheapest region and append the cheapest linked region; fill in that order."""
    free = ctx.free_stages(job)
    starts = np.flatnonzero(free > 0)
    if starts.size == 0:
        return None
    start = int(min(starts, key=lambda r: (ctx.price_now[r], r)))
    path = _grow_path(ctx, job, start, lambda end, new: -ctx.price_now[new])
    return None if path is None else _fill_in_order(path, free, job.num_stages)


def cr_ldf(ctx: PlacementContext, job: Job) -> Placement | None:
    """CR-LDF: start at the region with most free GPUs; append by free GPUs and spare bandwidth; fill in order."""
    free = ctx.free_stages(job)
    starts = np.flatnonzero(free > 0)
    if starts.size == 0:
        return None
    start = int(max(starts, key=lambda r: (free[r], -r)))
    max_free = max(float(free.max()), 1.0)
    max_bw = max(float(ctx.spare_gbps.max()), 1e-9)
    path = _grow_path(ctx, job, start, lambda end, new: free[new] / max_free + ctx.spare_gbps[end, new] / max_bw)
    return None if path is None else _fill_in_order(path, free, job.num_stages)


def comm_fits_compute(ctx: PlacementContext, job: Job, a: int, b: int) -> bool:
    """BACE-Pipe's admission rule for a boundary a→b: ``A·8/B_avail + latency <= t_stage`` (no stall)."""
    spare = min(ctx.spare_gbps[a, b], ctx.spare_gbps[b, a])
    if spare <= 0.0:
        return False
    comm_s = transfer_time_s(job.activation_bytes, spare) + ctx.sim.world.latency_s[a, b]
    stage_s = (1.0 + pipeline.BACKWARD_TO_FORWARD) * min(job.forward_s[a], job.forward_s[b])
    return comm_s <= stage_s


def cost_min_allocate(ctx: PlacementContext, job: Job, path: Sequence[int]) -> Placement | None:
    """BACE-Pipe's Cost-Min allocator: one stage per path region, the rest in ascending price, path order kept."""
    free = ctx.free_stages(job)
    if len(path) > job.num_stages or any(free[r] < 1 for r in path):
        return None
    stages = {r: 1 for r in path}
    left = job.num_stages - len(path)
    for r in sorted(path, key=lambda r: (ctx.price_now[r], r)):
        take = int(min(free[r] - 1, left))
        stages[r] += take
        left -= take
    if left > 0:
        return None
    return Placement(tuple(int(r) for r in path), tuple(stages[r] for r in path))


def bace_pathfinder(
    ctx: PlacementContext,
    job: Job,
    check_bandwidth: bool = True,
    score: Callable[[int, int], float] | None = None,
) -> list[int] | None:
    """BACE-Pipe's pathfinder: from each start (cheapest first), grow along the best spare bandwidth.

    With ``check_bandwidth`` a region joins only if its boundary passes :func:`comm_fits_compute`; ``score``
    replaces the spare-bandwidth preference (the no-pathfinder ablation grows by price instead).
    """
    free = ctx.free_stages(job)
    admissible = (lambda a, b: comm_fits_compute(ctx, job, a, b)) if check_bandwidth else None
    grow_score = score or (lambda end, new: ctx.spare_gbps[end, new])
    for start in sorted(np.flatnonzero(free > 0), key=lambda r: (ctx.price_now[r], r)):
        path = _grow_path(ctx, job, int(start), grow_score, admissible=admissible, both_ends=True)
        if path is not None:
            return path
    return None


def bace_pipe(ctx: PlacementContext, job: Job) -> Placement | None:
    """BACE-Pipe: bandwidth-aware pathfinder + Cost-Min allocator."""
    path = bace_pathfinder(ctx, job)
    return None if path is None else cost_min_allocate(ctx, job, path)


def bace_pipe_no_pathfinder(ctx: PlacementContext, job: Job) -> Placement | None:
    """Ablation: Cost-Min allocation on the cost-first (ascending price) path, with no bandwidth admission."""
    path = bace_pathfinder(ctx, job, check_bandwidth=False, score=lambda end, new: -ctx.price_now[new])
    return None if path is None else cost_min_allocate(ctx, job, path)


def bace_pipe_no_costmin(ctx: PlacementContext, job: Job) -> Placement | None:
    """Ablation: the bandwidth-aware pathfinder's path, filled greedily in path order instead of by price."""
    path = bace_pathfinder(ctx, job)
    return None if path is None else _fill_in_order(path, ctx.free_stages(job), job.num_stages)


def _pool(ctx: PlacementContext, job: Job, named: Sequence[Placement | None]) -> list[Placement]:
    """The named strategies' placements plus every single region that holds the job, without repeats."""
    free = ctx.free_stages(job)
    singles = [Placement((int(r),), (job.num_stages,)) for r in np.flatnonzero(free >= job.num_stages)]
    seen: dict[Placement, None] = {}
    for p in list(named) + singles:
        if p is not None:
            seen.setdefault(p, None)
    return list(seen)


def _best(pool: list[Placement], key: Callable[[Placement], float]) -> Placement | None:
    scored = [(key(p), i, p) for i, p in enumerate(pool)]
    scored = [s for s in scored if np.isfinite(s[0])]
    return min(scored)[2] if scored else None


BASE_STRATEGIES: dict[str, Callable[[PlacementContext, Job], Placement | None]] = {
    "bace-pipe": bace_pipe,
    "cr-lcf": cr_lcf,
    "cr-ldf": cr_ldf,
    "lcf": lcf,
    "ldf": ldf,
    "bace-pipe-no-pathfinder": bace_pipe_no_pathfinder,
    "bace-pipe-no-costmin": bace_pipe_no_costmin,
}
POOLED_FROM = ("bace-pipe", "cr-lcf", "cr-ldf", "lcf", "ldf")  # what fastest / cheapest / greenest choose among
SELECTORS = ("fastest", "cheapest", "greenest")
ALL_STRATEGIES: tuple[str, ...] = tuple(BASE_STRATEGIES) + SELECTORS


def candidates(ctx: PlacementContext, job: Job, strategies: Sequence[str] = STRATEGY_NAMES) -> list[Placement | None]:
    """The candidate placement of ``job`` under each of ``strategies``, in order."""
    def named(name: str) -> Placement | None:
        key = (job.profile_key, name)
        if key not in ctx.named:
            ctx.named[key] = BASE_STRATEGIES[name](ctx, job)
        return ctx.named[key]

    pool: list[Placement] | None = None
    out: list[Placement | None] = []
    for name in strategies:
        if name in BASE_STRATEGIES:
            out.append(named(name))
            continue
        if pool is None:
            pool = _pool(ctx, job, [named(n) for n in POOLED_FROM])
        if name == "fastest":
            out.append(_best(pool, lambda p: ctx.estimate(job, p).duration_s))
        elif name == "cheapest":
            out.append(_best(pool, lambda p: ctx.cost_usd(job, p)))
        else:
            out.append(_best(pool, lambda p: ctx.carbon_kg(job, p)))
    return out


