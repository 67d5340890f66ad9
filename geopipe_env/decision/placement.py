"""Layer 5: what a candidate strategy sees of the cluster at one decision, and the placements it returns.

The built-in strategies run compiled (:mod:`geopipe_env.decision.candidate_kernels`;
:mod:`geopipe_env.decision.strategies` names them). Their rules, written plainly in Python, are the specification
the parity tests hold the compiled code to; they live with the tests (``tests/reference_placement.py``) and do not
ship. A strategy a user registers (:func:`geopipe_env.decision.strategies.register_strategy`) is a Python rule
``(PlacementContext, Job) -> Placement | None`` that reads the facts a :class:`PlacementContext` gathers once per
decision and describes its placement with :meth:`PlacementContext.describe`.

The built-in strategies (BACE-Pipe: arXiv 2605.25375):

* ``bace-pipe``: bandwidth-aware pathfinder (the cheapest single region that holds the job; else Prim-like
  expansion from either end of the path along the highest available bandwidth, adding a region only if
  ``d·A·8/B_avail + latency <= t_f + t_b``) plus the Cost-Min allocator (one stage per path region, the rest in
  ascending cost). "Cheap" here is the electricity price over the job's expected run per unit of GPU work (see
  :meth:`PlacementContext.cost_rank`): the paper's worlds have constant prices and one GPU type, where this is
  its ascending price order;
* ``cr-lcf``: cross-region cost-first, GPUs aggregated over regions in ascending price;
* ``cr-ldf``: cross-region delay-first, greedy path expansion on free GPUs and available bandwidth;
* ``lcf`` / ``ldf``: the whole job in the cheapest region / the region with the most free GPUs;
* ``fastest`` / ``cheapest`` / ``greenest``: the best of all the above and every single region, by estimated
  duration, electricity cost or carbon.

Two more strategies are not in the default K but serve the paper's ablations:
``bace-pipe-no-pathfinder`` (Cost-Min on the cost-first path, no bandwidth admission) and
``bace-pipe-no-costmin`` (the pathfinder with no price in it, its path filled in path order).
"""

from __future__ import annotations

import math

import numpy as np

from geopipe_env.base.caches import ProcessCache
from geopipe_env.decision.candidate_kernels import cost_rank
from geopipe_env.simulation.core_types import CandidateInfo, Job, Placement
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.base.units import GRAMS_PER_KG, WATTS_PER_KW


class PlacementContext:
    """Cluster facts shared by every strategy at one decision instant (computed once, read many times).

    The strategies read Python lists (``price``, ``spare``, ``neighbours``, :meth:`free_list`) rather than numpy
    scalars: their loops touch a few regions at a time, where list indexing is several times faster.
    """

    _static: tuple = (None, [], [], [])  # (world, neighbour lists, latency rows, facility W per TFLOPS) of the last world

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim
        w = sim.world
        spare_gbps = np.maximum(sim.capacity_gbps - sim.link_load_gbps, 0.0)
        self.price: list[float] = w.price.at(sim.now_s).tolist()  # (R,) USD/kWh now
        self.spare: list[list[float]] = spare_gbps.tolist()  # (R, R) bandwidth left on each directed link
        self.max_spare_gbps = float(spare_gbps.max())
        self.free_gpus: list[int] = sim.free_gpus.tolist()
        static = PlacementContext._static  # read once: another env (thread) may replace it meanwhile
        if static[0] is not w:
            neighbours = [np.flatnonzero(row).tolist() for row in w.bandwidth_gbps > 0]
            watts_per_tflops = w.busy_watts * w.pue / w.tflops
            static = PlacementContext._static = (w, neighbours, w.latency_s.tolist(), watts_per_tflops)
        # Per-world constants: each region's links (ascending), latency, and its GPUs' facility W per TFLOPS.
        _, self.neighbours, self.latency, self._watts_per_tflops = static
        self._cost_ranks: dict[tuple[int, bool, bool], list[float]] = {}
        self._described: dict[tuple, CandidateInfo | None] = {}
        self._free_lists: dict[tuple, list[int]] = {}
        self._forward: dict[tuple, list[float]] = {}
        # Named placements depend on a job only through its profile, so jobs of one model share them.
        self.named: dict[tuple[tuple, str], Placement | None] = {}

    def free_list(self, job: Job) -> list[int]:
        """Per region, how many of this job's stages it can hold now (0 where memory does not fit)."""
        free = self._free_lists.get(job.profile_key)
        if free is None:
            g = job.stage_gpus
            free = [n // g if fits else 0 for n, fits in zip(self.free_gpus, job.fits.tolist())]
            self._free_lists[job.profile_key] = free
        return free

    def cost_rank(self, job: Job, over_run: bool = True, per_unit_work: bool = True) -> list[float]:
        """Per region, what a unit of this job's GPU work costs there: the mean electricity price over the job's
        expected run (now to now + its isolated duration) × the GPUs' busy watts per TFLOPS × the region's PUE.

        BACE-Pipe's Cost-Min puts GPUs "in cheaper regions". Its worlds have constant prices and one GPU type,
        where this order is the price order. Here prices change by the hour and fleets mix GPU types: a price that
        holds for the next hour only, or on a GPU or in a building that needs more energy for the same work, is not
        cheap.
        ``over_run=False`` takes the price now, ``per_unit_work=False`` the price alone.
        """
        key = (job.job_id, over_run, per_unit_work)
        rank = self._cost_ranks.get(key)
        if rank is None:
            w, now = self.sim.world, self.sim.now_s
            weight = self._watts_per_tflops if per_unit_work else np.ones(w.num_regions)
            if over_run:  # the compiled table's formula (candidate_kernels.cost_rank), the one definition
                out, start, end = np.empty(w.num_regions), np.empty(w.num_regions), np.empty(w.num_regions)
                cost_rank(w.price.prefix_h, w.price.values, now, job.isolated_duration_s, weight, start, end, out)
                rank = out.tolist()
            else:
                rank = (w.price.at(now) * weight).tolist()
            self._cost_ranks[key] = rank
        return rank

    def forward(self, job: Job) -> list[float]:
        """The job's per-region forward time per micro-batch, as a list."""
        fwd = self._forward.get(job.profile_key)
        if fwd is None:
            fwd = self._forward[job.profile_key] = job.forward_s.tolist()
        return fwd

    def describe(self, job: Job, placement: Placement) -> CandidateInfo | None:
        """Launching ``placement`` now: estimated timing, electricity cost and carbon; None if it would not run.

        Cost and carbon are power × ∫price (∫carbon intensity) over the estimated run, per region. Jobs with the
        same profile and iterations left share the result (memoised).
        """
        key = (job.profile_key, float(self.sim.work_left[job.job_id]), placement)
        if key in self._described:
            return self._described[key]
        est = self.sim.estimate(job, placement, self.spare)
        info = None
        if math.isfinite(est.duration_s):
            w, now = self.sim.world, self.sim.now_s
            kw = tuple(float(est.power_w[r]) / WATTS_PER_KW for r in placement.regions)
            end = now + est.duration_s
            info = CandidateInfo(
                placement, est.iteration_s, est.duration_s, w.price.weighted_integral(placement.regions, kw, now, end),
                w.carbon.weighted_integral(placement.regions, kw, now, end) / GRAMS_PER_KG, est.rate_gbps,
                est.demand_gbps, est.stalled, est.schedule,
            )
        self._described[key] = info
        return info


PLACEMENT_INTERN_SIZE = 1024  # interned placements kept
_PLACEMENTS = ProcessCache("placements", PLACEMENT_INTERN_SIZE)


def _placement(regions: tuple[int, ...], stages: tuple[int, ...]) -> Placement:
    """The :class:`Placement` of ``regions`` and ``stages``, interned: the strategies rebuild the same few
    placements at every decision, and a lookup costs a tenth of building one."""
    return _PLACEMENTS.get_or((regions, stages), Placement, regions, stages)


def admission_per_forward(job: Job, forward_only: bool = False) -> float:
    """The compute that BACE-Pipe's admission rule lets one message's transfer take, in forward times of the
    faster of the boundary's two stages (the admission test takes the smaller forward time): ``(t_f + t_b) /
    t_f`` (or 1 with ``forward_only``) over the job's messages per micro-batch."""
    return (1.0 if forward_only else 1.0 + job.backward_ratio) / job.link_messages


