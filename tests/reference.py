"""The specification of the compiled code, the same formulas written plainly with numpy arrays.

The decision path runs compiled code (:data:`geopipe_env.base.compiled.jit`) that is written for speed: loops over flat
arrays, tables of precomputed indices, lines folded ahead of time. This module writes what that code computes the
plain way, with numpy's whole-array operations, as the specification it is held to. It lives with the tests and
does not ship with the package: the
parity tests (``tests/test_kernels.py``, ``tests/test_timing_model.py``, ``tests/test_candidate_kernels.py``,
``tests/test_tables.py``) compare every compiled function with its specification here, and they are the contract.
The compiled code must agree with this module to rounding (in most places bit for bit); a change to one is a change
to both.

* The analytic iteration time of a pipeline, with the 1F1B path family of ``physics.pipeline``'s docstring
  (:func:`iteration_time`, :class:`IterationModel`, :func:`model_parts`), and the closed form for identical stages
  and hops (:func:`uniform_total_s`).
* Max-min fair rates by progressive filling (:func:`max_min_fair`).
* A layout table's row, stored from a model taken apart (:func:`timing_parts`, :func:`store_parts`).
* The observation's hourly price features (:func:`normalise_prices`, :func:`hourly_features`) and the hourly
  series' integrals (:func:`cumulative`, :func:`weighted_integral`).
* The candidate table: :func:`candidate_row` (each strategy's Python rule, ``reference_placement``, then the
  selectors over the pool).
* The decision backend: :class:`PythonBackend`, every strategy's Python rule timed by the simulator and the
  observation written from the candidates' rows, which the compiled backend (``decision.backends``) must equal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from geopipe_env.simulation.core_types import Job
from geopipe_env.decision.placement import PlacementContext
from geopipe_env.decision.strategies import _REGISTRY, BUILT_IN, STRATEGY_NAMES
from geopipe_env.decision.placement import _placement
from geopipe_env.decision.observation import ObservationEncoder
from geopipe_env.simulation.core_types import CandidateInfo
from geopipe_env.simulation.layout_table import LayoutTable, find_layout, index_layout
from geopipe_env.decision.observation import (
    FORECAST_H, HOURLY_CARBON, HOURLY_FORECAST, HOURLY_PRICE, OBS_CLIP, PRICE_SCALE_FLOOR, schedule_code,
)
from geopipe_env.physics import pipeline
from geopipe_env.physics.network import FILL_TOLERANCE
from geopipe_env.physics.pipeline import (
    BACKWARD_TO_FORWARD, MODEL_GPIPE, MODEL_PATHS, MODEL_ROUND_TRIP, MODEL_UNIFORM, ONE_F_ONE_B, IterationTime,
    _PathTables, path_tables,
)
from geopipe_env.physics.schedule import spec
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import Placement
from geopipe_env.base.tables import (
    CAND_BANDWIDTH_SLACK, CAND_CARBON, CAND_COST, CAND_FEASIBLE, CAND_LOG_DURATION, CAND_LOG_ITERATION_VS_LOCAL,
    CAND_SCHEDULE, CAND_STALLED, CAND_WAN_HOPS, G_GPU_UTILIZATION, G_HOUR_COS, G_HOUR_SIN, G_MEAN_LINK_UTILIZATION,
    G_QUEUE_BEYOND_WINDOW, G_RUNNING_JOBS, G_TIME_FRACTION, G_TIME_SCALE, G_WAIT_GAP, LAYOUT_FLOATS, Q_CAN_START,
    Q_LOG_BANDWIDTH_DEMAND, Q_LOG_LOCAL_DURATION, Q_LOST_WORK, Q_PRESENT, Q_STAGES_SHARE, Q_WAITING_TIME, R_CARBON,
    R_FREE_GPU_FRACTION, R_IN_SERVICE, R_LINK_UTILIZATION, R_PRICE_FORECAST, R_PRICE_NOW,
)
from geopipe_env.base.units import BITS_PER_BYTE, BITS_PER_GBIT, SECONDS_PER_HOUR
from reference_placement import named_placement


# ---------------------------------------------------------------------------------------- pipeline timing
class _FixedPaths(NamedTuple):
    """The parts of one layout's 1F1B path family that do not depend on the time of a single step.

    A step (one advance at the last stage or on the bottleneck link) takes ``max(f+b of the last stage,
    link_step_s)``; it enters only the loop paths' fill and the segment paths' pre steps (:func:`_longest_s`).
    ``pipeline.fixed_paths`` computes its arrays in compiled code.
    """

    tables: _PathTables
    last_stage_s: float  # f + b of the last stage: the least a step takes
    tail_s: np.ndarray  # (A,) the tail loops of each loop path
    loops_only_s: np.ndarray  # (n+1,) r advances filled by tail loops only (width S, then one narrower)
    segments_s: np.ndarray  # (B,) the copies of each segment path's segment
    pre_loop_s: np.ndarray  # (B,) a tail loop in place of the pre steps (−inf where none may start)
    post_s: np.ndarray  # (B,) what follows the copies: the cool-down or a tail loop
    other_s: float  # the longest turn path (C) or stage op chain


def fixed_paths(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    stage_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    n: int,
) -> _FixedPaths:
    """Compute :class:`_FixedPaths` for ``n = M − 1 ≥ 1`` advances (``stage_s = forward_s + backward_s``)."""
    num_stages = stage_s.shape[0]
    tab = path_tables(num_stages, n)
    before = np.zeros(num_stages)  # (S,) Σ_{p<q}(t_p + 2y_p)
    np.add.accumulate(stage_s[:-1] + 2.0 * (hop_transfer_s + hop_latency_s), out=before[1:])  # cumsum
    through = before + stage_s  # (S,) Σ_{p≤q} t_p + 2Σ_{p<q} y_p
    segment_s = (through - before[:, None]).ravel()  # (S·S,) [first, last]; junk below the diagonal
    # (S+2,) tail loop by width (from stage S−width); 0 for width 0, and −inf at S+1 for "no loop allowed".
    loop_s = np.empty(num_stages + 2)
    loop_s[0], loop_s[-1] = 0.0, -np.inf
    np.subtract(through[-1], before[::-1], out=loop_s[1:-1])

    # (C) Turns: micro-batches run down in a burst of steps (forwards of one stage, or messages queued on one
    # hop) to a stage d that holds K = min(S−d, M) of them before its first backward, then come back up in a
    # burst of backwards or queued gradients: n + K − 1 steps, the long burst on the slower side. Or the
    # first K run down, cycles over [h, d] follow, and the last gradients come back up in a burst.
    slowest_f = np.zeros(num_stages + 1)  # (S+1,) by 1 + deepest stage
    np.maximum.accumulate(forward_s, out=slowest_f[1:])
    slowest_b = np.zeros(num_stages + 1)  # (S+1,)
    np.maximum.accumulate(backward_s, out=slowest_b[1:])
    slowest_x = np.zeros(num_stages)  # (S,) by 1 + deepest hop; entry d: the hops above stage d
    np.maximum.accumulate(hop_transfer_s, out=slowest_x[1:])
    any_f = np.maximum(slowest_f[1:], slowest_x)
    any_b = np.maximum(slowest_b[1:], slowest_x)
    run_f = np.maximum(slowest_f[tab.run_reach], slowest_x)
    run_b = np.maximum(slowest_b[tab.run_reach], slowest_x)
    bursts = np.maximum(n * run_f + tab.held * any_b, tab.held * any_f + n * run_b)
    other = float((through + bursts).max() - through[-1])
    if tab.turn_stage.size:
        back_s = np.maximum(slowest_b[tab.turn_reach], slowest_x[tab.turn_hop_reach])
        down_s = tab.turn_held * any_f[tab.turn_stage]
        cycled = through[tab.turn_stage] + down_s + tab.turn_cycles * segment_s[tab.turn_segment]
        other = max(other, float((cycled + tab.turn_steps * back_s).max() - through[-1]))
    # A stage's whole op chain after its prefix.
    chain = float((before + (n + 1) * stage_s).max() - through[-1])

    return _FixedPaths(
        tables=tab,
        last_stage_s=float(stage_s[-1]),
        tail_s=tab.tail_copies * loop_s[tab.tail_width],
        loops_only_s=tab.full_loops * loop_s[num_stages] + loop_s[tab.part_loop],
        segments_s=tab.copies * segment_s[tab.segment],
        pre_loop_s=loop_s[tab.pre_loop],
        # The cool-down runs backwards of a stage at or above `first`.
        post_s=loop_s[tab.post_width] + tab.cool_steps * slowest_b[tab.first_reach],
        other_s=max(other, chain),
    )




def _fixed_paths_of(forward_s: np.ndarray, backward_s: np.ndarray, hop_transfer_s: np.ndarray,
                    hop_latency_s: np.ndarray, n: int) -> _FixedPaths:
    """:func:`fixed_paths` with ``stage_s = forward_s + backward_s``."""
    return fixed_paths(forward_s, backward_s, forward_s + backward_s, hop_transfer_s, hop_latency_s, n)


def _longest_s(paths: _FixedPaths, link_step_s: float) -> float:
    """The longest path of the family, given the fixed parts and the bottleneck link's time per step."""
    tab = paths.tables
    step_s = max(paths.last_stage_s, link_step_s)  # one advance at the last stage or on the bottleneck link

    # (A) Tail loops need no room after them, so they mix freely with each other and with single steps.
    loop_fill = np.maximum(paths.loops_only_s, tab.advances * step_s)  # (n+1,)
    longest = float((paths.tail_s + loop_fill[tab.tail_rest]).max())

    # (B) Copies of a segment, with single steps or a tail loop from at or below `first` before them, and the
    # cool-down of a stage at or above `first`, or a tail loop begun on the way back up, after them.
    if tab.segment.size:
        pre_s = np.maximum(tab.pre * step_s, paths.pre_loop_s)
        longest = max(longest, float((paths.segments_s + pre_s + paths.post_s).max()))
    return max(longest, paths.other_s)


def _one_f_one_b_extra_s(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    link_step_s: float,
) -> float:
    """1F1B time beyond one micro-batch's round trip: the longest of the path family in the module docstring."""
    n = num_microbatches - 1
    if n <= 0:
        return 0.0
    stage_s = forward_s + backward_s
    return _longest_s(fixed_paths(forward_s, backward_s, stage_s, hop_transfer_s, hop_latency_s, n), link_step_s)


def iteration_time(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
    min_cadence_s: float = 0.0,
) -> IterationTime:
    """``pipeline.iteration_time`` (arguments alike), with the whole 1F1B path family of numpy arrays."""
    m = num_microbatches
    stage_s = forward_s + backward_s
    compute_total = float(stage_s.sum())
    fill = 2.0 * float(hop_transfer_s.sum() + hop_latency_s.sum())
    max_x = max(float(hop_transfer_s.max()) if hop_transfer_s.size else 0.0, min_cadence_s)
    if spec(schedule).forwards_first:
        cadence = max(float(forward_s.max()), max_x) + max(float(backward_s.max()), max_x)
        total = compute_total + fill + (m - 1) * cadence
    else:
        extra = _one_f_one_b_extra_s(forward_s, backward_s, hop_transfer_s, hop_latency_s, m, max_x)
        total = compute_total + fill + extra
    busy = m * float(stage_s.max())
    return IterationTime(total_s=total, compute_s=busy, comm_s=fill, bubble_s=max(total - busy - fill, 0.0))


class ModelParts(NamedTuple):
    """An :class:`IterationModel` taken apart (see :func:`model_parts`).

    For MODEL_PATHS the 1F1B path family of :func:`_longest_s` is folded (``pipeline.fold_paths``) into lines in the
    time of one step (``step_s = max(last_stage_s, the bottleneck link's time per step)``): the longest path is
    ``max(constant_s, max(tail_intercept + tail_slope·step_s), max((segment_start + segment_slope·step_s) +
    segment_end))``, the same floating-point operations as :func:`_longest_s` takes on each path, with the paths
    that cannot be the longest at any step left out.
    """

    kind: int  # MODEL_GPIPE, MODEL_UNIFORM (1F1B closed form), MODEL_ROUND_TRIP (1F1B, M = 1) or MODEL_PATHS
    num_microbatches: int
    base_s: float  # one micro-batch's round trip, Σ(f+b) + 2Σ(x+l)
    max_x: float  # the slowest hop's transfer time
    max_f: float  # GPipe only
    max_b: float  # GPipe only
    uniform: tuple[float, float, float, float]  # (f, S, x, l) of identical stages and hops (MODEL_UNIFORM)
    last_stage_s: float  # MODEL_PATHS: f + b of the last stage, the least a step takes
    constant_s: float  # MODEL_PATHS: the longest path whose length does not depend on the step
    tail_slope: np.ndarray  # (T,) steps after the tail loops, one line per count
    tail_intercept: np.ndarray  # (T,) the longest tail loops before that many steps
    segment_slope: np.ndarray  # (G,) pre steps before the copies of a segment
    segment_start: np.ndarray  # (G,) the copies
    segment_end: np.ndarray  # (G,) what follows them


def _model_scalars(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    schedule: str,
) -> tuple[int, float, float, float, float, tuple[float, float, float, float]]:
    """``(kind, base_s, max_x, max_f, max_b, uniform)`` of a layout's :class:`IterationModel` (see
    :class:`ModelParts`): which evaluation it takes, and its scalars."""
    stage_s = forward_s + backward_s
    base_s = float(stage_s.sum()) + 2.0 * float(hop_transfer_s.sum() + hop_latency_s.sum())
    max_x = float(hop_transfer_s.max()) if hop_transfer_s.size else 0.0
    if spec(schedule).forwards_first:
        return MODEL_GPIPE, base_s, max_x, float(forward_s.max()), float(backward_s.max()), (0.0, 0.0, 0.0, 0.0, 0.0)
    if num_microbatches <= 1:
        return MODEL_ROUND_TRIP, base_s, max_x, 0.0, 0.0, (0.0, 0.0, 0.0, 0.0, 0.0)
    f, b = float(forward_s[0]), float(backward_s[0])
    lat = float(hop_latency_s[0]) if hop_latency_s.size else 0.0
    uniform = (f, b, float(forward_s.shape[0]), max_x, lat)
    if (
        (forward_s == f).all()
        and (backward_s == b).all()
        and (hop_transfer_s == max_x).all()
        and (hop_latency_s == lat).all()
    ):
        return MODEL_UNIFORM, base_s, max_x, 0.0, 0.0, uniform
    return MODEL_PATHS, base_s, max_x, 0.0, 0.0, (0.0, 0.0, 0.0, 0.0, 0.0)


def model_parts(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
) -> ModelParts:
    """The :class:`IterationModel` of a layout taken apart (arguments as :func:`iteration_time`): the input of its
    compiled evaluation (``pipeline.iteration_total_s``), which equals
    :meth:`IterationModel.total_s` bit for bit. The 1F1B path family is built and folded in compiled code
    (``pipeline.fixed_paths``, ``pipeline.fold_paths``), from the path tables."""
    kind, base_s, max_x, max_f, max_b, uniform = _model_scalars(
        forward_s, backward_s, hop_transfer_s, hop_latency_s, num_microbatches, schedule
    )
    empty = np.zeros(0)
    last_stage_s, folded = 0.0, (0.0, empty, empty, empty, empty, empty)
    if kind == MODEL_PATHS:
        n = num_microbatches - 1
        paths = _fixed_paths_of(forward_s, backward_s, hop_transfer_s, hop_latency_s, n)
        tab, last_stage_s = paths.tables, paths.last_stage_s
        folded = pipeline.fold_paths(
            paths.tail_s, tab.tail_rest, paths.loops_only_s, paths.other_s, paths.segments_s, tab.pre,
            paths.pre_loop_s, paths.post_s,
        )
    return ModelParts(kind, num_microbatches, base_s, max_x, max_f, max_b, uniform, last_stage_s, *folded)


class IterationModel:
    """:func:`iteration_time`'s ``total_s`` for one stage/hop layout, as a cheap function of ``min_cadence_s``.

    The cadence floor enters the analytic model only through ``max_x``: GPipe's cadence, or the time of one
    1F1B step. Everything else (sums, and the step-independent parts of the 1F1B path family, see
    :class:`_FixedPaths`) is computed once here, and :meth:`total_s` finishes the same operations as
    :func:`iteration_time`, so the totals are equal. Identical stages (``b = 2f``) and hops under 1F1B use the
    closed form of :func:`uniform_iteration_time_s` in scalar arithmetic, equal up to rounding (~1e-15).
    """

    __slots__ = ("_schedule", "_m", "_base_s", "_max_x", "_max_f", "_max_b", "_uniform", "_paths")

    def __init__(
        self,
        forward_s: np.ndarray,
        backward_s: np.ndarray,
        hop_transfer_s: np.ndarray,
        hop_latency_s: np.ndarray,
        num_microbatches: int,
        schedule: str = ONE_F_ONE_B,
    ) -> None:
        """Precompute everything that does not depend on the cadence floor (arguments as :func:`iteration_time`)."""
        self._schedule = schedule
        self._m = num_microbatches
        kind, self._base_s, self._max_x, self._max_f, self._max_b, uniform = _model_scalars(
            forward_s, backward_s, hop_transfer_s, hop_latency_s, num_microbatches, schedule
        )
        self._uniform: tuple[float, float, float, float, float] | None = uniform if kind == MODEL_UNIFORM else None
        self._paths: _FixedPaths | None = None
        if kind == MODEL_PATHS:
            self._paths = _fixed_paths_of(forward_s, backward_s, hop_transfer_s, hop_latency_s, num_microbatches - 1)

    def total_s(self, min_cadence_s: float = 0.0) -> float:
        """``iteration_time(..., min_cadence_s).total_s`` for this layout."""
        max_x = max(self._max_x, min_cadence_s)
        if spec(self._schedule).forwards_first:
            cadence = max(self._max_f, max_x) + max(self._max_b, max_x)
            return self._base_s + (self._m - 1) * cadence
        if self._uniform is not None:
            f, b, num_stages, x, lat = self._uniform
            return _uniform_total_s(f, num_stages, x, lat, self._m, ONE_F_ONE_B, min_cadence_s, max, math.floor,
                                    math.ceil, b)
        if self._paths is None:  # a single micro-batch
            return self._base_s
        return self._base_s + _longest_s(self._paths, max_x)



def uniform_total_s(
    forward_s: np.ndarray | float,
    num_stages: np.ndarray | float,
    hop_transfer_s: float,
    hop_latency_s: float,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
    min_cadence_s: float = 0.0,
    backward_ratio: float = BACKWARD_TO_FORWARD,
) -> np.ndarray:
    """``pipeline.uniform_iteration_time_s`` with numpy's whole-array operations."""
    f = np.asarray(forward_s, dtype=float)
    s = np.asarray(num_stages, dtype=float)
    return _uniform_total_s(
        f, s, hop_transfer_s, hop_latency_s, num_microbatches, schedule, min_cadence_s, np.maximum, np.floor, np.ceil,
        backward_ratio * f,
    )


def _uniform_total_s(
    f: np.ndarray | float,
    s: np.ndarray | float,
    hop_transfer_s: float,
    hop_latency_s: float,
    num_microbatches: int,
    schedule: str,
    min_cadence_s: float,
    maximum: Callable,
    floor: Callable,
    ceil: Callable,
    b: np.ndarray | float | None = None,
) -> np.ndarray | float:
    """:func:`uniform_iteration_time_s`'s formula on arrays (with numpy's ``maximum``, ``floor``, ``ceil``) or on
    Python floats (with ``max``, ``math.floor``, ``math.ceil``): the same operations, so equal results. The
    backward ``b`` defaults to ``2f``."""
    if b is None:
        b = BACKWARD_TO_FORWARD * f
    x = maximum(hop_transfer_s * (s > 1), min_cadence_s)
    y = (hop_transfer_s + hop_latency_s) * (s > 1)
    n = num_microbatches - 1
    t = f + b
    if spec(schedule).forwards_first:
        extra = n * (maximum(f, x) + maximum(b, x))
    else:
        step = maximum(t, x)  # one advance by the bottleneck stage or link
        loops = n * (t + 2.0 * y) - 2.0 * y * ceil(n / s)  # fewest tail loops, widest first
        full = floor(n / s)
        mixed = full * (s * t + 2.0 * (s - 1.0) * y) + (n - full * s) * step
        extra = maximum(maximum(loops, mixed), n * step)
    return s * t + 2.0 * (s - 1.0) * y + extra



# ------------------------------------------------------------------------------------ bandwidth sharing
def max_min_fair(demand_gbps: np.ndarray, usage: np.ndarray, capacity_gbps: np.ndarray) -> np.ndarray:
    """Progressive-filling max-min fair rates (``network.max_min_rates`` over a simulator's running jobs).

    Args:
        demand_gbps: (J,) each job's rate cap (its no-stall demand per hop).
        usage: (J, L) how many of job j's hops use link l (0 if none).
        capacity_gbps: (L,) link capacities, all > 0.

    Returns:
        (J,) rates with ``usage.T @ rates <= capacity`` and ``rates <= demand``. A job that uses no link
        gets its full demand.
    """
    demand = np.asarray(demand_gbps, dtype=float)
    usage = np.asarray(usage, dtype=float)
    if demand.size == 0:
        return np.zeros(0)
    # Common case: every link can carry the full demands of the jobs on it. Filling then raises each job
    # until it reaches its demand and no link saturates first, so the result is the demands themselves (the
    # filling loop's running sums of steps can land an ulp off them; the demands are the exact answer).
    if (usage.T @ demand <= capacity_gbps).all():
        return demand.copy()
    rates = np.zeros(demand.shape)
    uses_links = usage.sum(axis=1) > 0
    rates[~uses_links] = demand[~uses_links]
    active = uses_links & (demand > 0)
    remaining = np.asarray(capacity_gbps, dtype=float).copy()
    tol = FILL_TOLERANCE * max(float(remaining.max(initial=0.0)), 1.0)
    while active.any():
        load = usage[active].sum(axis=0)  # (L,) hops of unfrozen jobs on each link
        on = load > 0
        link_step = (remaining[on] / load[on]).min() if on.any() else np.inf
        job_step = (demand[active] - rates[active]).min()
        step = max(min(link_step, job_step), 0.0)
        rates[active] += step
        remaining -= step * load
        saturated = remaining <= tol
        hits_link = (usage[:, saturated] > 0).any(axis=1)
        done = rates >= demand - tol
        active &= ~(hits_link | done)
    return np.minimum(rates, demand)


# ------------------------------------------------------------------------------------ the layout table
def timing_parts(sim: ClusterSim, job: Job, placement: Placement) -> tuple[ModelParts, float]:
    """The analytic model of ``placement``'s iteration at the simulator's line rates, taken apart
    (:func:`model_parts`), and its no-stall demand: what ``layout_table.store_layout`` stores."""
    forward, transfer, latency, _ = sim._stage_arrays(job, placement)
    backward = job.backward_ratio * forward
    schedule_name = job.schedule
    parts = model_parts(forward, backward, transfer, latency, job.num_microbatches, schedule_name)
    stage_s = forward + backward
    cadence = float(forward.max()) if spec(schedule_name).forwards_first else float(stage_s.max())
    return parts, job.wan_message_bytes * BITS_PER_BYTE / (cadence * BITS_PER_GBIT)


def store_parts(
    table: LayoutTable,
    parts: ModelParts,
    profile: int,
    regions: np.ndarray,
    stages: np.ndarray,
    extra: tuple[float, float, float],
    slot: int | None = None,
) -> int:
    """Append a layout to ``table``: its model's ``parts``, profile id, placement and ``(all-reduce s, demand
    Gbit/s, WAN message bytes)``, indexed at ``slot`` or the first free one after it (default: the first free one
    from its hash); its id. What ``layout_table.store_layout`` does in one compiled call."""
    path_arrays = np.concatenate(
        (parts.tail_slope, parts.tail_intercept, parts.segment_slope, parts.segment_start, parts.segment_end)
    )
    index = table.index
    lay = table._reserve(path_arrays.size, 2 * regions.size)
    if slot is None or table.index is not index:  # a grown index holds every layout at new slots
        slot = find_layout(table.index, table.layout_i, table.places, profile, regions, stages, regions.size)[1]
    table.arrays[table._arrays_used:table._arrays_used + path_arrays.size] = path_arrays
    table.places[table._places_used:table._places_used + 2 * regions.size] = np.concatenate((regions, stages))
    f, b, s, x, lat = parts.uniform
    allreduce_s, demand_gbps, wan_message_bytes = extra
    table.layout_f[lay] = 0.0
    table.layout_f[lay, :len(LAYOUT_FLOATS) - 2] = (  # the executor's memo columns stay 0
        parts.base_s, parts.max_x, parts.max_f, parts.max_b, f, b, s, x, lat, parts.last_stage_s, parts.constant_s,
        allreduce_s, demand_gbps, wan_message_bytes,
    )
    table.layout_i[lay] = 0
    table.layout_i[lay, :8] = (  # kind … segments; schedule 0, no executor parts, no wrap
        parts.kind, parts.num_microbatches, profile, table._places_used, regions.size - 1, table._arrays_used,
        parts.tail_slope.size, parts.segment_slope.size,
    )
    table._arrays_used += path_arrays.size
    table._places_used += 2 * regions.size
    table.num_layouts += 1
    index_layout(table.index, slot, lay)
    return lay


# ------------------------------------------------------------------------------ prices and hourly series
def normalise_prices(values: np.ndarray) -> np.ndarray:
    """(R, H) prices relative to the regions' mean absolute price in each hour (real prices can be negative)."""
    scale = np.maximum(np.abs(values).mean(axis=0, keepdims=True), PRICE_SCALE_FLOOR)
    return values / scale


def hourly_features(price: np.ndarray, prefix_h: np.ndarray, carbon: np.ndarray, carbon_scale: float) -> np.ndarray:
    """(H, R, 3) float32: per hour the price and its mean over the next ``FORECAST_H`` hours (this one included;
    fewer where the series ends), both normalised across regions, and carbon ÷ ``carbon_scale``
    (``observation.hourly_features``). ``prefix_h`` (R, H + 1) holds the price's prefix sums."""
    num_hours = price.shape[1]
    hours = np.arange(num_hours)
    ends = np.minimum(hours + FORECAST_H, num_hours)
    forecast = (prefix_h[:, ends] - prefix_h[:, :num_hours]) / (ends - hours)
    out = np.empty((num_hours, price.shape[0], 3), dtype=np.float32)
    out[:, :, 0] = normalise_prices(price).T
    out[:, :, 1] = normalise_prices(forecast).T
    out[:, :, 2] = (carbon / carbon_scale).T
    return out


def cumulative(prefix_h: np.ndarray, values: np.ndarray, t_s: float) -> np.ndarray:
    """(R,) ∫_0^t of each hourly series in value·hours (``energy.cumulative_at``): hourly values held after the
    last hour."""
    t_h = max(t_s, 0.0) / SECONDS_PER_HOUR
    hour = min(int(t_h), values.shape[1] - 1)
    return prefix_h[:, hour] + values[:, hour] * (t_h - hour)


def weighted_integral(prefix_h: np.ndarray, values: np.ndarray, rows: tuple[int, ...], weights: tuple[float, ...],
                      t0_s: float, t1_s: float) -> float:
    """``Σ_i weights[i] · ∫_{t0}^{t1} series[rows[i]] dt`` (``energy.weighted_integral``)."""
    rows_a = list(rows)
    return float(np.asarray(weights) @ (cumulative(prefix_h, values, t1_s) - cumulative(prefix_h, values, t0_s))[rows_a])


class PythonBackend:
    """Every strategy's Python rule; the observation from the candidates' rows."""

    checked = False

    def __init__(self, strategies: Sequence[str]) -> None:
        self.strategies = tuple(strategies)
        self.rows: list[list[CandidateInfo | None]] = []

    def start(self, sim: ClusterSim, encoder: ObservationEncoder) -> None:
        self.sim, self.encoder, self.rows = sim, encoder, []

    def compute(self, visible: Sequence[int], mask: np.ndarray) -> int:
        sim = self.sim
        jobs = [sim.world.jobs[jid] for jid in visible]
        ctx = PlacementContext(sim)
        mask[:] = False
        mask[-1] = True
        self.rows = []
        if not any(sum(ctx.free_list(job)) >= job.num_stages for job in jobs):  # no strategy can place any
            return 0
        num_strategies = len(self.strategies)
        for slot, job in enumerate(jobs):
            row = candidate_row(ctx, job, self.strategies)
            for k, info in enumerate(row):
                if info is not None:
                    mask[slot * num_strategies + k] = True
            self.rows.append(row)
        return int(mask[:-1].sum())

    def end(self, visible: Sequence[int]) -> None:
        self.rows = []

    def info(self, slot: int, k: int) -> CandidateInfo | None:
        return self.rows[slot][k] if slot < len(self.rows) else None

    def placement(self, slot: int, k: int) -> Placement | None:
        info = self.info(slot, k)
        return None if info is None else info.placement

    def observe(self, queue: list[int]) -> dict[str, np.ndarray]:
        return encode_rows(self.encoder, self.sim, queue, self.rows)


def encode_rows(encoder: ObservationEncoder, sim: ClusterSim, queue: list[int], rows: list[list[CandidateInfo | None]]) -> dict[str, np.ndarray]:
    """The observation of ``sim`` with ``queue`` visible and, per visible slot, a row of candidates
    (``CandidateInfo``, None where masked; no rows once the episode has ended)."""
    w = encoder.world
    n = w.num_regions
    now = sim.now_s
    util = np.where(encoder._linked, sim.link_load_gbps / encoder._utilization(sim), 0.0)
    out_util = util.sum(axis=1)

    flat = encoder._template.copy()
    regions, _, q, c, g = _tables(encoder, flat)
    hourly = encoder._hourly[min(int(now // SECONDS_PER_HOUR), encoder._last_hour)]
    regions[:n, R_FREE_GPU_FRACTION] = sim.free_gpus / w.num_gpus
    regions[:n, R_PRICE_NOW] = hourly[:, HOURLY_PRICE]
    regions[:n, R_PRICE_FORECAST] = hourly[:, HOURLY_FORECAST]
    regions[:n, R_CARBON] = hourly[:, HOURLY_CARBON]
    regions[:n, R_LINK_UTILIZATION] = out_util / encoder._out_links
    regions[:n, R_IN_SERVICE] = sim.in_service_gpus() / w.num_gpus
    flat[encoder._util_index] = util.reshape(-1)

    wan_scale = max(n - 1, 1)
    for slot, jid in enumerate(queue[: encoder.queue_slots]):
        job = w.jobs[jid]
        row_cands = rows[slot] if slot < len(rows) else ()  # no candidates once the episode ended
        q_row = q[slot]
        q_row[Q_PRESENT] = 1.0
        q_row[Q_STAGES_SHARE] = job.num_gpus / encoder.total_gpus
        local_left_s = max(float(sim.work_left[jid]), 1.0) * job.local_iteration_s
        q_row[Q_LOG_LOCAL_DURATION] = math.log(local_left_s / encoder.t_local_s)
        q_row[Q_LOG_BANDWIDTH_DEMAND] = math.log(job.typical_demand_gbps / encoder.median_bw)
        q_row[Q_WAITING_TIME] = (now - job.arrival_s) / encoder.t_local_s
        q_row[Q_CAN_START] = float(any(ci is not None for ci in row_cands))
        q_row[Q_LOST_WORK] = float(sim.lost_s[jid]) / job.local_duration_s
        for k, ci in enumerate(row_cands):
            if ci is None:
                continue
            hops = ci.placement.num_wan_hops
            c_row = c[slot * encoder.num_strategies + k]
            c_row[CAND_FEASIBLE] = 1.0
            c_row[CAND_LOG_ITERATION_VS_LOCAL] = math.log(ci.iteration_s / job.local_iteration_s)
            c_row[CAND_LOG_DURATION] = math.log(ci.duration_s / encoder.t_local_s)
            c_row[CAND_COST] = ci.cost_usd / encoder.c_ref_usd
            c_row[CAND_WAN_HOPS] = hops / wan_scale
            c_row[CAND_BANDWIDTH_SLACK] = (ci.rate_gbps / ci.demand_gbps) if hops else 1.0
            c_row[CAND_STALLED] = float(ci.stalled)
            c_row[CAND_CARBON] = ci.carbon_kg / encoder.carbon_ref_kg
            c_row[CAND_SCHEDULE] = schedule_code(job.schedules[ci.schedule])
    hour = (w.start_hour + now / SECONDS_PER_HOUR) % 24.0
    g[G_HOUR_SIN] = math.sin(2 * math.pi * hour / 24.0)
    g[G_HOUR_COS] = math.cos(2 * math.pi * hour / 24.0)
    g[G_QUEUE_BEYOND_WINDOW] = max(len(queue) - encoder.queue_slots, 0) / encoder.queue_slots
    g[G_RUNNING_JOBS] = len(sim.running) / max(len(w.jobs), 1)
    g[G_GPU_UTILIZATION] = (encoder.total_gpus - float(sim.free_gpus.sum())) / encoder.total_gpus
    g[G_TIME_FRACTION] = now / w.horizon_s
    g[G_MEAN_LINK_UTILIZATION] = float(out_util.sum()) / encoder._num_links if encoder._num_links else 0.0
    g[G_WAIT_GAP] = _wait_gap(encoder, sim)
    g[G_TIME_SCALE] = math.log(encoder.t_ref_s / encoder.t_local_s)
    np.minimum(flat, OBS_CLIP, out=flat)
    np.maximum(flat, -OBS_CLIP, out=flat)
    return {key: flat[part] for key, part in zip(encoder._keys, encoder._slices)}


def _tables(encoder: ObservationEncoder, flat: np.ndarray) -> list[np.ndarray]:
    """Views of a flat observation as its tables (regions, links, queue, candidates, global)."""
    return [flat[part].reshape(shape) for part, shape in zip(encoder._slices, encoder._shapes)]


def _wait_gap(encoder: ObservationEncoder, sim: ClusterSim) -> float:
    """``log(1 + Δt / T_local)`` for the Δt of :meth:`_gap_s`."""
    return min(math.log1p(max(encoder._gap_s(sim), 0.0) / encoder.t_local_s), OBS_CLIP)


def candidate_row(ctx: PlacementContext, job: Job, strategies: Sequence[str] = STRATEGY_NAMES) -> list[CandidateInfo | None]:
    """The candidate of ``job`` under each of ``strategies``, described; None where a strategy finds nothing
    feasible now (no placement, or one that would get no bandwidth)."""

    def named(name: str) -> Placement | None:
        return named_placement(ctx, job, name)

    def describe(placement: Placement | None) -> CandidateInfo | None:
        return None if placement is None else ctx.describe(job, placement)

    pool: list[CandidateInfo] | None = None
    out: list[CandidateInfo | None] = []
    for name in strategies:
        chosen = _REGISTRY[name]
        if chosen.selects is None:
            out.append(describe(named(name)))
            continue
        if pool is None:
            pooled = [s.name for s in BUILT_IN if s.pooled]  # what the selectors choose among
            described = (describe(p) for p in _pool(ctx, job, [named(n) for n in pooled]))
            pool = [c for c in described if c is not None]
        scored = [(chosen.selects(c), i) for i, c in enumerate(pool)]
        scored = [s for s in scored if math.isfinite(s[0])]
        out.append(pool[min(scored)[1]] if scored else None)
    return out


def _pool(ctx: PlacementContext, job: Job, named: Sequence[Placement | None]) -> list[Placement]:
    """The pooled strategies' placements plus every single region that holds the job, without repeats."""
    singles = [_placement((r,), (job.num_stages,)) for r, n in enumerate(ctx.free_list(job)) if n >= job.num_stages]
    seen: dict[Placement, None] = {}
    for p in list(named) + singles:
        if p is not None:
            seen.setdefault(p, None)
    return list(seen)


def candidates(ctx: PlacementContext, job: Job, strategies: Sequence[str] = STRATEGY_NAMES) -> list[Placement | None]:
    """The candidate placement of ``job`` under each of ``strategies``, in order (None where infeasible)."""
    return [None if c is None else c.placement for c in candidate_row(ctx, job, strategies)]
