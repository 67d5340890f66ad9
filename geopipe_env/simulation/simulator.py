"""Layer 4: the event-driven cluster simulator.

``ClusterSim`` holds one episode's runtime state: the clock, free GPUs, waiting and running jobs, link loads and
the energy / cost / carbon accumulators. It advances from event to event (arrivals, completions, hour ticks);
between events every rate is constant, so progress and integrals are exact. It knows nothing about policies,
actions or observations: the env (layer 6) asks it to ``launch`` or to ``advance``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from geopipe_env.simulation import sim_kernels
from geopipe_env.base.caches import BoundedDict, ProcessCache
from geopipe_env.simulation.engine import Event, EventKind, EventQueue, arrival_events
from geopipe_env.simulation.core_types import Job, JobStatus, Placement, World, fields_key, layout_key
from geopipe_env.physics import failures, pipeline, schedule
from geopipe_env.physics.energy import gpu_power_w
from geopipe_env.physics.network import is_stalled
from geopipe_env.base.tables import (
    CARBON_KG, COST_USD, ENERGY_KWH, GPU_SECONDS, JF_DEMAND, JF_ITERATION, JF_RATE, JF_REMAINING, JF_TIMED_RATE,
    JF_WAN_BYTES, JI_NUM_LINKS, JI_STALE, JI_TIMED_CAPACITY, JOB_SECONDS, NUM_JOB_FLOATS, NUM_JOB_INTS, NUM_TOTALS,
    WAN_BYTES,
)
from geopipe_env.base.units import SECONDS_PER_HOUR, WATTS_PER_KW, transfer_time_s


_WAITING, _RUNNING, _DONE = int(JobStatus.WAITING), int(JobStatus.RUNNING), int(JobStatus.DONE)
_ARRIVAL, _COMPLETION = EventKind.ARRIVAL, EventKind.COMPLETION
_FAILURE, _REPAIR = EventKind.FAILURE, EventKind.REPAIR
_LOSS, _RETURN = EventKind.CAPACITY_LOSS, EventKind.CAPACITY_RETURN
_DEGRADE, _RESTORE = EventKind.LINK_DEGRADE, EventKind.LINK_RESTORE


class Run(NamedTuple):
    """How a job's current run (from its launch to its completion or interruption) spends its running time, in a
    world with failures: first the restart (``overhead_iters`` of its work: after an interruption, the restart and
    the checkpoint read), then cycles of ``interval_s`` computing and ``checkpoint_s`` writing a checkpoint, which
    stretch its useful work ``work_iters`` into the run's ``effective_iters`` (``physics.failures``)."""

    launch_s: float
    work_iters: float
    effective_iters: float
    overhead_iters: float
    interval_s: float  # inf: no checkpoints (its GPUs never fail)
    checkpoint_s: float


class RunSplit(NamedTuple):
    """A run's running time so far, split: seconds restarting, computing work that a checkpoint saved (or that
    finished), writing checkpoints, and computing work lost to the failure that ended it."""

    restart_s: float
    saved_s: float
    checkpoint_s: float
    lost_s: float
    saved_iters: float  # useful iterations the run keeps


class InfeasiblePlacement(ValueError):
    """A placement that cannot be launched now (not enough GPUs, memory, or a missing link)."""


@dataclass(slots=True, eq=False)
class Layout:
    """A placement at the current line rates: its no-stall demand, its iteration time and power as functions of
    the allocated rate, and its links (the per-stage arrays behind them: ``pipeline.stage_arrays``)."""

    demand_gbps: float
    timing: PlacementTiming
    wan_link_index: np.ndarray  # (L,) int64: the directed WAN links it uses as flat indices into (R, R)
    # What a launch and a retiming read (the layout's key holds the job's shape, so these are the layout's own):
    gpus: np.ndarray  # (R,) int64, read-only: GPUs held per region
    wan_bytes_per_iteration: float  # M micro-batches × d·A bytes × the messages a micro-batch puts on WAN links
    links: tuple[tuple[int, int], ...]  # the directed WAN links it uses, as (region, region) pairs
    schedule: int  # which of the job's accepted schedules it runs (an index into Job.schedules)
    # The same stages with no WAN boundary (ClusterSim.local_iteration_s_of), set at the layout's first launch.
    local_iteration_s: float = float("nan")


def _iteration_time_s(inputs: tuple[bytes, bytes, bytes, bytes, int, str, bool, float], min_cadence: float) -> float:
    """Iteration time of a GPipe or 1F1B pipeline given by value: the bytes of its per-stage forward times, per-hop
    transfer times and latencies and WAN hop positions, its micro-batch count, schedule, whether to simulate the
    schedule table exactly, its backward ÷ forward, and the cadence floor its allocated rate imposes on the WAN
    hops.

    Pure in its arguments, so it is memoised for the process (:data:`CLOSED_FORMS`), which every episode and env of
    the process shares: worlds of one scenario repeat their regions and links, so placements recur from episode to
    episode. The closed forms cost microseconds and contended rates rarely repeat, so their cache is small: a large
    one would grow for most of a million steps and hit little more.
    """
    return CLOSED_FORMS.get_or((inputs, min_cadence), _analytic_time_s, inputs, min_cadence)


def _analytic_time_s(inputs: tuple[bytes, bytes, bytes, bytes, int, str, bool, float], min_cadence: float) -> float:
    """:func:`_iteration_time_s` computed."""
    forward_b, transfer_b, latency_b, wan_b, m, schedule_name, exact, ratio = inputs
    forward, transfer, latency = np.frombuffer(forward_b), np.frombuffer(transfer_b), np.frombuffer(latency_b)
    backward = ratio * forward
    if not exact:  # the analytic model
        tab_i, tab_f = pipeline.packed_path_tables(forward.shape[0], max(m - 1, 1))
        return pipeline.model_total_s(
            forward, backward, transfer, latency, m, schedule.spec(schedule_name).forwards_first, tab_i, tab_f,
            min_cadence,
        )
    # The schedule table with each WAN hop's messages serialised at the job's allocated rate.
    transfer = transfer.copy()
    if min_cadence > 0.0:
        wan = np.frombuffer(wan_b, dtype=np.intp)
        transfer[wan] = np.maximum(transfer[wan], min_cadence)
    return schedule.simulate_schedule(forward, backward, transfer, latency, m, schedule_name).total_s


def _timing_inputs(forward: np.ndarray, transfer: np.ndarray, latency: np.ndarray, wan_pos: np.ndarray, m: int,
                   schedule_name: str, exact: bool, ratio: float) -> tuple[bytes, bytes, bytes, bytes, int, str, bool, float]:
    """A pipeline by value, as :func:`_iteration_time_s` takes it."""
    arrays = [np.asarray(a, dtype=float) for a in (forward, transfer, latency)]
    arrays.append(np.asarray(wan_pos, dtype=np.intp))
    return (*(array.tobytes() for array in arrays), m, schedule_name, exact, ratio)


_NO_WAN = np.zeros(0, dtype=np.intp)


class PipelineModel(NamedTuple):
    """One accepted schedule of a job on one placement at fixed line rates: how to time it at a cadence floor, and
    the traffic it puts on the WAN."""

    schedule: int  # an index into Job.schedules
    analytic: tuple | None  # GPipe and 1F1B: the pipeline by value (_timing_inputs); None for the executor's
    executor: schedule.ExecutorModel | None
    demand_gbps: float
    wan_bytes_per_iteration: float
    links: tuple[tuple[int, int], ...]  # the directed WAN links it uses

    def total_s(self, min_cadence_s: float = 0.0) -> float:
        """Iteration time (without the all-reduce) when each WAN message takes at least ``min_cadence_s``."""
        if self.executor is None:
            return _iteration_time_s(self.analytic, min_cadence_s)
        return self.executor.total_s(min_cadence_s)


def wrap_link(regions: tuple[int, ...], capacity_gbps: np.ndarray, latency_s: np.ndarray, wan_message_bytes: float,
              intra_transfer_s: float, intra_latency_s: float) -> tuple[float, float, bool, tuple[tuple[int, int], ...]]:
    """The link an interleaved pipeline's wrap (its last stage back to its first) takes on a path of ``regions``:
    ``(transfer s, latency s, crosses regions, the WAN links it adds to the job's)``. In one region it is an
    intra-region link; over more, the link from the last region to the first (infinite transfer if there is none),
    which over two regions is the WAN hop's link the other way (the job uses it already). The executor gives the
    wrap's messages a serial link of their own beside the hop's (the two share the WAN link's bandwidth through
    the job's allocation, which counts both in its demand), so that each link has one sender and the program runs
    in one pass (``schedule.run_program``)."""
    if len(regions) == 1:
        return intra_transfer_s, intra_latency_s, False, ()
    a, b = regions[-1], regions[0]
    gbps = float(capacity_gbps[a, b])
    x = transfer_time_s(wan_message_bytes, gbps) if gbps > 0.0 else float("inf")
    return x, float(latency_s[a, b]), True, ((a, b), (b, a)) if len(regions) > 2 else ()


def wan_messages(prog: schedule.Program, placement: Placement) -> dict[tuple[int, int], float]:
    """Messages per micro-batch on each directed WAN link (a pair of regions) of ``placement`` under ``prog``, each
    way: its device boundaries (``schedule.device_boundaries``) between stages in two regions."""
    region_of = [r for r, n in zip(placement.regions, placement.stages) for _ in range(n)]
    share = 1.0 / prog.num_pipelines
    counts: dict[tuple[int, int], float] = {}
    for a, b in schedule.device_boundaries(prog):
        a, b = region_of[a], region_of[b]
        if a != b:
            counts[a, b] = counts.get((a, b), 0.0) + share
            counts[b, a] = counts.get((b, a), 0.0) + share
    return counts


def pipeline_model(job: Job, index: int, placement: Placement, forward: np.ndarray, transfer: np.ndarray,
                   latency: np.ndarray, wan_pos: np.ndarray, wrap: tuple, exact: bool) -> PipelineModel:
    """The :class:`PipelineModel` of ``job.schedules[index]`` on ``placement`` (its stage arrays at the current line
    rates, ``pipeline.stage_arrays``; ``wrap`` as :func:`wrap_link` gives it)."""
    name = job.schedules[index]
    m, msg = job.num_microbatches, job.wan_message_bytes
    backward = job.backward_ratio * forward
    entry = schedule.spec(name)
    if entry.closed_form:
        analytic = _timing_inputs(forward, transfer, latency, wan_pos, m, name, exact, job.backward_ratio)
        demand = pipeline.demand_gbps(forward, backward, msg, entry.forwards_first, 1.0)
        per_iteration = 2.0 * m * msg * placement.num_wan_hops
        return PipelineModel(index, analytic, None, demand, per_iteration, placement.links)
    wrap_x, wrap_lat, wrap_wan, wrap_links = wrap
    loop = entry.wraps
    model = schedule.executor_model(
        forward, backward, transfer, latency, m, name, schedule.own_virtual_stages(name, job.virtual_stages),
        job.input_gradient, wan_pos, (wrap_x, wrap_lat), wrap_wan and loop,
    )
    per_pair = wan_messages(model.program, placement)
    most = max(per_pair.values()) if per_pair else 1.0
    demand = pipeline.demand_gbps(forward, backward, msg, False, most)
    per_iteration = m * msg * sum(per_pair.values())
    return PipelineModel(index, None, model, demand, per_iteration, placement.links + (wrap_links if loop else ()))


def fastest(models: Sequence[PipelineModel]) -> PipelineModel:
    """The model of the shortest iteration at line rate, the first of equals: ``min(models, key=total_s)``, without
    timing the models whose lower bound (``ExecutorModel.lower_bound_s``; an analytic model's own time) shows that
    they cannot win. Models are timed in the order of their bounds, the likely winner first."""
    bounds = [model.total_s() if model.executor is None else model.executor.lower_bound_s() for model in models]
    best, best_s = -1, float("inf")
    for i in sorted(range(len(models)), key=bounds.__getitem__):
        bound = bounds[i]
        if bound > best_s or (bound == best_s and i > best):
            continue
        total = bounds[i] if models[i].executor is None else models[i].total_s()
        if total < best_s or (total == best_s and i < best):
            best, best_s = i, total
    return models[best]


class PlacementTiming:
    """Iteration time and facility power per region of one job profile on one placement at the current line
    rates, as functions of the per-hop rate the job is allocated (memoised per rate, and across episodes by
    the model's inputs).

    A placement is nearly always timed at a single rate (its no-stall demand, or the spare bandwidth when it is
    estimated), so no :class:`pipeline.IterationModel` is kept between rates: it would cost memory for nothing.
    """

    __slots__ = ("_model", "_wan_message_bytes", "_allreduce_s", "_has_wan", "_num_regions", "_power_terms", "_by_rate")

    def __init__(self, world: World, job: Job, placement: Placement, model: PipelineModel) -> None:
        m = job.num_microbatches
        self._model = model
        self._wan_message_bytes = job.wan_message_bytes
        self._allreduce_s = job.allreduce_s
        self._has_wan = bool(placement.num_wan_hops)
        self._num_regions = world.num_regions
        # Per region: (region, GPUs, busy GPU·s per iteration of one GPU, idle W, busy W, PUE), as Python floats.
        busy_per_forward = m * (1.0 + job.backward_ratio)
        g = job.stage_gpus
        self._power_terms = tuple(
            (
                r,
                n * g,
                float(busy_per_forward * job.forward_s[r]),
                float(world.idle_watts[r]),
                float(world.busy_watts[r]),
                float(world.pue[r]),
            )
            for r, n in zip(placement.regions, placement.stages)
        )
        # rate → (iteration s, power W (R,)); contended spare bandwidth takes many values, so few are kept
        self._by_rate = BoundedDict(RATES_PER_LAYOUT)

    @property
    def model(self) -> PipelineModel:
        """The schedule it times, and how."""
        return self._model

    def at(self, rate_gbps: float) -> tuple[float, np.ndarray]:
        """``(iteration_s, power_w (R,))`` when each WAN hop gets ``rate_gbps`` (read-only; shared by callers)."""
        cached = self._by_rate.get(rate_gbps)
        if cached is None:
            min_cadence = 0.0
            if self._has_wan and rate_gbps > 0.0:
                min_cadence = transfer_time_s(self._wan_message_bytes, rate_gbps)
            t_iter = self._model.total_s(min_cadence) + self._allreduce_s
            cached = self._by_rate[rate_gbps] = (t_iter, self._power_w(t_iter))
        return cached

    def _power_w(self, t_iter: float) -> np.ndarray:
        power = np.zeros(self._num_regions)
        for r, gpus, busy_s, idle_w, busy_w, pue in self._power_terms:
            power[r] = gpu_power_w(gpus, idle_w, busy_w, busy_s / t_iter, pue)
        return power


@dataclass(slots=True, eq=False)
class RunningJob:
    """Mutable state of a job while it runs. Its progress, iteration time, WAN traffic and power are kept in
    ``sim``'s per-job arrays, which the compiled kernels advance; the properties here read and write them."""

    sim: ClusterSim = field(repr=False)
    job: Job
    placement: Placement
    gpus: np.ndarray  # (R,) GPUs held per region
    layout: Layout  # refreshed when line rates change
    layout_version: int  # the line rates (ClusterSim._capacity_version) ``layout`` was computed at
    stalled: bool = False
    version: int = 0

    @property
    def demand_gbps(self) -> float:
        return self.layout.demand_gbps

    rate_gbps = property(lambda self: self._value("_rate_gbps"), doc="the rate per WAN hop it was last timed at")
    remaining_iters = property(lambda self: self._value("_remaining_iters"), doc="iterations left")
    iteration_s = property(lambda self: self._value("_iteration_s"), doc="iteration time at its rate")
    wan_bytes_per_s = property(lambda self: self._value("_wan_bytes_per_s"), doc="bytes sent over WAN links per second")

    @property
    def power_w(self) -> np.ndarray:
        """(R,) facility power per region (a view of the simulator's table: copy it to keep it)."""
        return self.sim._power_w[self.job.job_id]

    def _value(self, array: str) -> float:
        """This job's entry of one of the simulator's per-job arrays, as a Python float."""
        return float(getattr(self.sim, array)[self.job.job_id])


class Estimate(NamedTuple):
    """What launching a placement now would give, on the current network load (a named tuple: the candidate
    table builds several per decision)."""

    iteration_s: float
    duration_s: float
    rate_gbps: float
    demand_gbps: float
    stalled: bool
    power_w: np.ndarray  # (R,)
    schedule: int  # which of the job's accepted schedules it would run (an index into Job.schedules)


RATES_PER_LAYOUT = 8  # rates memoised per layout (a layout can outlive an episode); contended rates rarely repeat
LAYOUT_CACHE_SIZE = 1024  # layouts kept across episodes (launched ones: the compiled table has its own)
SHARED_LAYOUT_CACHES = 4  # layout caches a process keeps (shared_layout_cache), one per world timing

_SHARED_LAYOUTS = ProcessCache("shared layout caches", SHARED_LAYOUT_CACHES)
CLOSED_FORMS_CACHE_SIZE = 2048  # GPipe and 1F1B iteration times a process keeps (about 1 MiB)
CLOSED_FORMS = ProcessCache("closed-form timings", CLOSED_FORMS_CACHE_SIZE)
LOCAL_ITERATION_CACHE_SIZE = 2048  # local iteration times a process keeps (ClusterSim.local_iteration_s_of)
# What a placement's local iteration time reads of a world besides its job's profile and its stages' forward times.
LOCAL_TIMING_FIELDS = (
    "scenario.network.intra_bandwidth_gbps", "scenario.network.intra_latency_s", "scenario.pipeline_schedule",
)
_LOCAL_ITERATION = ProcessCache("local iteration times", LOCAL_ITERATION_CACHE_SIZE)


def shared_layout_cache(world: World, exact_timing: bool) -> BoundedDict:
    """The process's ``layout_cache`` for :class:`ClusterSim` on worlds that time and power every layout alike:
    equal :func:`~geopipe_env.simulation.core_types.layout_key` (line rates, latencies, intra-region link, schedule, GPU power
    figures and PUE) and timing. Every env of a process, and every episode, on such worlds shares it: a layout is a
    pure function of these, its job's ``profile_key`` and its placement. Worlds whose line rates change must not
    use it."""
    return _SHARED_LAYOUTS.get_or((layout_key(world), exact_timing), BoundedDict, LAYOUT_CACHE_SIZE)


class ClusterSim:
    """One episode of the geo-distributed cluster."""

    def __init__(self, world: World, exact_timing: bool = False, layout_cache: MutableMapping | None = None) -> None:
        """``layout_cache`` (optional) carries layouts and their timing across episodes and simulators: pass the
        same mapping only for worlds of equal :func:`shared_layout_cache` key and the same ``exact_timing`` (that
        function gives the process's one, bounded at ``LAYOUT_CACHE_SIZE`` layouts). It is used only when line
        rates never change (no background traffic)."""
        self.world = world
        self.exact_timing = exact_timing
        sc = world.scenario
        n_jobs = len(world.jobs)
        self.now_s = 0.0
        self.free_gpus = world.num_gpus.copy()
        self.status = np.full(n_jobs, JobStatus.PENDING, dtype=np.int8)
        self._pending = n_jobs  # jobs not yet arrived
        self.start_s = np.full(n_jobs, np.nan)
        self.finish_s = np.full(n_jobs, np.nan)
        self.ever_stalled = np.zeros(n_jobs, dtype=bool)
        self.local_iteration_s = np.full(n_jobs, np.nan)  # per launched job: its stages with no WAN boundary
        self.max_link_utilization = 0.0  # the largest load ÷ capacity of any WAN link so far
        self.waiting: list[int] = []  # job ids in arrival order
        self.running: dict[int, RunningJob] = {}
        self.placements: dict[int, Placement] = {}
        # energy kWh, cost USD, carbon kg, WAN bytes, allocated GPU·s and job·s (Σ over jobs in the system of
        # time: the JCT integral), by tables.SIM_TOTALS; read through the properties below.
        self._totals = np.zeros(NUM_TOTALS)
        # Per job id, while it runs: iterations left, iteration time, WAN bytes per second, demand, the last
        # allocation, the rate it was last timed at (RunningJob reads these), its directed WAN links as flat indices
        # into (R, R) and how many, and the capacity version it was timed at: rows of one float and one int table
        # (tables.SIM_JOB_FLOATS, SIM_JOB_INTS), which the kernels take whole.
        self._job_f = np.zeros((NUM_JOB_FLOATS, n_jobs))
        self._job_i = np.zeros((NUM_JOB_INTS, n_jobs), dtype=np.int64)
        self._bind_job_rows()
        self._timed_at_capacity[:] = -1
        self._power_w = np.zeros((n_jobs, world.num_regions))  # per region
        # Per job, the directed WAN links it uses: a path's hops both ways, and an interleaved pipeline's wrap (its last
        # region back to its first) both ways, at most 2·R.
        self._job_links = np.zeros((n_jobs, 2 * world.num_regions), dtype=np.int64)
        self._running_ids = np.zeros(0, dtype=np.int64)  # the running jobs' ids, in ``running``'s order
        self.region_power_w = np.zeros(world.num_regions)
        self._region_kw = (np.zeros(world.num_regions), 0.0)  # region_power_w in kW, and its sum in W
        self.link_load_gbps = np.zeros((world.num_regions, world.num_regions))
        # (time_s, allocated GPUs per region) after every launch and completion, for plots and audits.
        self.gpu_timeline: list[tuple[float, np.ndarray]] = [(0.0, np.zeros(world.num_regions, dtype=np.int64))]
        self._events = EventQueue()
        self._events.push_all([job.arrival_s for job in world.jobs], arrival_events(n_jobs))
        # Hour ticks only where something changes by the hour: background traffic, or an hourly price or carbon
        # series of this episode's world (randomisation can hold a scenario's markets constant).
        self._time_varying = sc.network.hourly_line_rates or world.hourly_series
        # The next hour tick: kept beside the heap (there is at most one), so that the next arrival or completion
        # is the heap's top and a run of quiet hours can be taken at once (advance_quiet_hours).
        self._tick_s = SECONDS_PER_HOUR if self._time_varying else float("inf")
        # Per directed link, the degradations under way (world.degradations; None without them).
        self._degraded = None if world.degradations is None else np.zeros((world.num_regions, world.num_regions), dtype=np.int64)
        self.capacity_gbps = self._capacity_at(0.0)
        self._capacity_version = 0  # bumps when background traffic changes capacities
        # (job profile, placement, capacity version) → stage arrays, demand and timing (read-only): timing is
        # pure in these and the rate, and every job of one model in a world shares its profile.
        shareable = layout_cache is not None and sc.network.fixed_line_rates
        self._layout_cache: MutableMapping[tuple, Layout] = layout_cache if shareable else {}
        self._idle_power_w = world.idle_watts * world.pue  # per unallocated GPU, billed if the scenario says so
        self._allocated_gpus = 0  # Σ (num_gpus − free_gpus)
        self._has_carbon = bool(world.carbon.values.any())
        # The hourly series as sim_kernels.advance_interval reads them.
        self._series = (world.price.prefix_h, world.price.values, world.carbon.prefix_h, world.carbon.values,
                        self._has_carbon)
        # GPU failures (world.failures; None when nothing fails). Per job: the useful iterations it has left (a
        # failure rolls them back to its last checkpoint), its interruptions, the Run it is on, and the version its
        # next run's completion events start from (a stale completion of an earlier run never matches), and the
        # computing time its interrupted runs lost. Per region: GPUs under repair. And the GPU-seconds of every run by
        # what they did (RunSplit's fields).
        self._failing = world.failures is not None
        self.work_left = np.array([float(job.iterations) for job in world.jobs])
        self.interruptions = np.zeros(n_jobs, dtype=np.int64)
        self.lost_s = np.zeros(n_jobs)
        self._runs: dict[int, Run] = {}
        self._next_version: dict[int, int] = {}
        self.repairing = np.zeros(world.num_regions, dtype=np.int64)
        self.away = np.zeros(world.num_regions, dtype=np.int64)  # per region, GPUs a capacity loss took
        self.run_gpu_seconds = dict.fromkeys(("restart_s", "saved_s", "checkpoint_s", "lost_s"), 0.0)
        self.held_gpu_s = np.zeros(n_jobs)  # per job, its ended runs' GPU-seconds (run_totals)
        self.cross_held_gpu_s = np.zeros(n_jobs)
        if self._failing:
            times = world.failures.times_s
            self._events.push_all(times.tolist(), [Event(_FAILURE, i) for i in range(times.shape[0])])
        if world.capacity_losses is not None:
            times = world.capacity_losses.times_s
            self._events.push_all(times.tolist(), [Event(_LOSS, i) for i in range(times.shape[0])])
        if world.degradations is not None:
            times = world.degradations.times_s
            self._events.push_all(times.tolist(), [Event(_DEGRADE, i) for i in range(times.shape[0])])

    def _bind_job_rows(self) -> None:
        """Name the rows of the per-job tables (views: writing one writes the table the kernels read)."""
        f, i = self._job_f, self._job_i
        self._remaining_iters, self._iteration_s = f[JF_REMAINING], f[JF_ITERATION]
        self._wan_bytes_per_s, self._demand_gbps = f[JF_WAN_BYTES], f[JF_DEMAND]
        self._rates, self._rate_gbps = f[JF_RATE], f[JF_TIMED_RATE]  # the last allocation; timed at
        self._job_num_links, self._timed_at_capacity = i[JI_NUM_LINKS], i[JI_TIMED_CAPACITY]
        self._stale = i[JI_STALE]  # scratch: the jobs to retime

    def __setstate__(self, state: dict) -> None:
        """Unpickled (or deep-copied), the rows are arrays of their own: bind them to the tables again."""
        self.__dict__.update(state)
        self._bind_job_rows()

    # ------------------------------------------------------------------ totals
    energy_kwh = property(lambda self: float(self._totals[ENERGY_KWH]), doc="facility energy so far, kWh")
    cost_usd = property(lambda self: float(self._totals[COST_USD]), doc="electricity cost so far, USD")
    carbon_kg = property(lambda self: float(self._totals[CARBON_KG]), doc="carbon so far, kg")
    wan_bytes = property(lambda self: float(self._totals[WAN_BYTES]), doc="bytes sent over WAN links so far")
    gpu_seconds = property(lambda self: float(self._totals[GPU_SECONDS]), doc="allocated GPU·s so far")
    job_seconds = property(lambda self: float(self._totals[JOB_SECONDS]), doc="Σ over jobs in system of time")

    # ------------------------------------------------------------------ time
    def _capacity_at(self, t_s: float) -> np.ndarray:
        net = self.world.scenario.network
        capacity = self.world.bandwidth_gbps
        if net.background is not None:
            hour = self.world.start_hour + t_s / SECONDS_PER_HOUR
            capacity = capacity * (1.0 - net.background.fraction_at(hour))
        if self._degraded is not None and self._degraded.any():
            capacity = capacity * np.where(self._degraded > 0, net.degradation.factor, 1.0)
        return capacity

    def _degrade(self, index: int, by: int) -> bool:
        """Start (``by`` 1) or end (−1) degradation ``index`` of its link, both ways; the new line rates."""
        a, b = (int(r) for r in self.world.degradations.links[index])
        self._degraded[a, b] += by
        self._degraded[b, a] += by
        if by > 0:
            self._events.push(self.now_s + self.world.scenario.network.degradation.duration_s, Event(_RESTORE, index))
        self.capacity_gbps = self._capacity_at(self.now_s)
        self._capacity_version += 1
        return True

    @property
    def capacity_version(self) -> int:
        """Bumps whenever the line rates change (background traffic's hourly share, a link's degradation)."""
        return self._capacity_version

    @property
    def done(self) -> bool:
        return len(self.running) == 0 and len(self.waiting) == 0 and self._pending == 0

    def next_event_s(self) -> float:
        return min(self._events.peek(), self._tick_s)

    def drop_arrivals_to_come(self) -> frozenset[int]:
        """Remove the arrivals still to come and return their jobs' ids: the world as a planner that knows only the
        jobs already here sees it. For a copy that such a planner searches (``geopipe_baselines.optimal``), never for
        the simulator an env is playing: those jobs then never arrive, and the episode ends without them."""
        dropped = frozenset(event.job_id for event in self._events.remove(_ARRIVAL))
        self._pending -= len(dropped)
        return dropped

    def _billed_power(self) -> tuple[np.ndarray, float]:
        """(R,) billed power per region in kW, and its sum in W (constant between events)."""
        if self.world.scenario.bill_idle_capacity:
            power = self.region_power_w + self.free_gpus * self._idle_power_w
            return power / WATTS_PER_KW, float(power.sum())
        return self._region_kw

    def advance_to(self, t_s: float) -> None:
        """Integrate progress, energy, cost and carbon from ``now`` to ``t_s`` (no event may lie between)."""
        if t_s <= self.now_s:
            return
        kw, total_w = self._billed_power()
        sim_kernels.advance_interval(
            self.now_s, t_s, self._running_ids, self._job_f, kw, total_w, self._series, self._allocated_gpus,
            len(self.waiting) + len(self.running), self._totals,
        )
        self.now_s = t_s

    def step_event(self) -> bool:
        """Advance to the next event and process every event at that instant (the hour tick last, as its kind's
        priority says). False if none is left."""
        t = self.next_event_s()
        if t == float("inf"):
            return False
        self.advance_to(t)
        self._process_events_at(t)
        return True

    def step_event_within(self, limit_s: float, quiet_hours: bool = False) -> bool:
        """:meth:`advance_quiet_hours` (if ``quiet_hours``), then :meth:`step_event` if the next event lies at or
        before ``limit_s``; otherwise advance to ``limit_s`` and return False. The integration up to the event is
        one compiled call (``sim_kernels.advance_to_event``)."""
        kw, total_w = self._billed_power()
        quiet_hours = quiet_hours and not self.world.scenario.network.hourly_line_rates
        self.now_s, self._tick_s, reached = sim_kernels.advance_to_event(
            self.now_s, self._tick_s, self._events.peek(), limit_s, quiet_hours, self._running_ids, self._job_f, kw,
            total_w, self._series, self._allocated_gpus, len(self.waiting) + len(self.running), self._totals,
        )
        if reached:
            self._process_events_at(self.now_s)
        return reached

    def _process_events_at(self, t: float) -> None:
        """Process every event at instant ``t`` (the clock stands there): the heap's in order, then the hour tick,
        as its kind's priority says; then the rates, if anything changed them."""
        changed = False
        while self._events.peek() == t:
            _, ev = self._events.pop()
            changed |= self._handle(ev)
        if self._tick_s == t:
            changed |= self._hour_tick()
        if changed:
            self._recompute_rates()

    def advance_quiet_hours(self, limit_s: float) -> None:
        """Process, as :meth:`step_event` would one by one, every hour tick before the next arrival or completion
        and at or before ``limit_s``, when the caller knows that nothing it decides depends on prices or carbon
        until then. Does nothing with background traffic, whose hourly capacities change the rates."""
        if self.world.scenario.network.hourly_line_rates or self._tick_s >= self._events.peek():
            return
        if self._tick_s > limit_s:
            return
        kw, total_w = self._billed_power()
        self.now_s, self._tick_s = sim_kernels.advance_hours(
            self.now_s, self._tick_s, self._events.peek(), limit_s, self._running_ids, self._job_f, kw, total_w,
            self._series, self._allocated_gpus, len(self.waiting) + len(self.running), self._totals,
        )

    def _handle(self, ev: Event) -> bool:
        """Apply one event; True if link rates need recomputing."""
        kind = ev.kind
        if kind == _ARRIVAL:
            self.status[ev.job_id] = _WAITING
            self._pending -= 1
            self.waiting.append(ev.job_id)
            return False
        if kind == _COMPLETION:
            rj = self.running.get(ev.job_id)
            if rj is None or rj.version != ev.version:
                return False  # superseded by a later rate change (or an interruption)
            self._finish(rj)
            return True
        if kind == _FAILURE:
            return self._fail(ev.job_id)
        if kind == _REPAIR:
            self.repairing[ev.job_id] -= 1
            self.free_gpus[ev.job_id] += 1
            return False
        if kind == _LOSS:
            return self._lose(ev.job_id)
        if kind == _RETURN:  # a capacity loss ends: its GPUs (the event's version) are back
            self.away[ev.job_id] -= ev.version
            self.free_gpus[ev.job_id] += ev.version
            return False
        if kind == _DEGRADE:
            return self._degrade(ev.job_id, 1)
        if kind == _RESTORE:
            return self._degrade(ev.job_id, -1)
        raise ValueError(f"unexpected event {ev!r}: hour ticks are not kept in the heap")

    def _hour_tick(self) -> bool:
        """Prices change (read lazily from the series); background traffic changes capacities. True if link
        rates need recomputing."""
        self._tick_s = self.now_s + SECONDS_PER_HOUR
        if self.world.scenario.network.hourly_line_rates:
            self.capacity_gbps = self._capacity_at(self.now_s)
            self._capacity_version += 1
            return True
        return False

    def _finish(self, rj: RunningJob) -> None:
        jid = rj.job.job_id
        if self._failing:
            self._count_run(self._runs.pop(jid), jid, interrupted=False)
            self.work_left[jid] = 0.0
        del self.running[jid]
        self._running_ids = np.fromiter(self.running, np.int64, len(self.running))
        self.free_gpus += rj.gpus
        self._allocated_gpus -= rj.job.num_gpus  # the sum of rj.gpus
        self.status[jid] = _DONE
        self.finish_s[jid] = self.now_s
        self.gpu_timeline.append((self.now_s, self._held_per_region()))

    # ------------------------------------------------------------------ failures
    def _start_run(self, job: Job, lay: Layout) -> float:
        """A run of ``job`` on ``lay`` in a world with failures: its checkpoint interval (the scenario's, else
        Young/Daly for its GPUs' failure rate) and cost, and after an interruption its restart (the scenario's
        restart cost and a checkpoint read, charged at its uncontended iteration time); the iterations it runs."""
        spec = self.world.scenario.failures
        jid = job.job_id
        mtbf = failures.mean_time_between_failures_s(float(lay.gpus @ self.world.failures.per_gpu_day))
        cost = failures.checkpoint_s(job.params / 1e9, job.num_gpus, spec.checkpoint_gbps, job.optimizer_state)
        interval = spec.checkpoint_interval_s or failures.young_daly_interval_s(cost, mtbf)
        overhead = 0.0
        if self.interruptions[jid]:
            overhead = (spec.restart_s + cost) / (lay.timing.model.total_s() + job.allreduce_s)
        work = float(self.work_left[jid])
        stretch = 1.0 if math.isinf(interval) else (interval + cost) / interval
        run = self._runs[jid] = Run(self.now_s, work, work * stretch + overhead, overhead, interval, cost)
        return run.effective_iters

    def _split(self, run: Run, jid: int, interrupted: bool) -> RunSplit:
        """How ``run`` has spent its running time up to now. Work is taken to progress evenly in time within the run
        (exact while its rate holds): the restart first, then whole cycles of computing and writing a checkpoint;
        the last, unfinished cycle's computing is lost if ``interrupted`` (else it counts as saved)."""
        elapsed = self.now_s - run.launch_s
        done = run.effective_iters - max(float(self._remaining_iters[jid]), 0.0)
        if elapsed <= 0.0 or done <= 0.0:
            return RunSplit(max(elapsed, 0.0), 0.0, 0.0, 0.0, 0.0)
        restart = elapsed * min(run.overhead_iters, done) / done
        working = elapsed - restart
        cycle = run.interval_s + run.checkpoint_s
        cycles = 0.0 if math.isinf(cycle) else math.floor(working / cycle)
        writing = cycles * run.checkpoint_s
        computing = working - writing
        saved = (cycles * run.interval_s if cycles else 0.0) if interrupted else computing
        useful_iters = max(done - run.overhead_iters, 0.0) * (1.0 if math.isinf(cycle) else run.interval_s / cycle)
        saved_iters = useful_iters * (saved / computing) if computing > 0.0 else 0.0
        return RunSplit(restart, saved, writing, computing - saved, saved_iters)

    def _count_run(self, run: Run, jid: int, interrupted: bool) -> RunSplit:
        """Add a run that ends now to the GPU-seconds by what they did and by job."""
        split = self._split(run, jid, interrupted)
        self._add_run(self.run_gpu_seconds, self.held_gpu_s, self.cross_held_gpu_s, run, jid, split)
        return split

    def _add_run(self, by_use: dict, held: np.ndarray, cross: np.ndarray, run: Run, jid: int, split: RunSplit) -> None:
        """Add ``run``'s GPU-seconds up to now to ``by_use`` (RunSplit's fields), and to job ``jid``'s entry of
        ``held`` (and of ``cross`` if its pipeline crosses regions)."""
        gpus = self.world.jobs[jid].num_gpus
        for name, seconds in zip(RunSplit._fields[:4], split[:4]):
            by_use[name] += gpus * seconds
        held[jid] += gpus * (self.now_s - run.launch_s)
        if len(self.running[jid].placement.regions) > 1:
            cross[jid] += gpus * (self.now_s - run.launch_s)

    def run_totals(self) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
        """In a world with failures, every run's GPU-seconds so far, the running jobs' current runs included as if
        they ended now without a failure: by what they did (RunSplit's fields); and per job, those its runs held
        and those of its runs whose pipeline crossed regions (a job may run on several placements)."""
        by_use, held, cross = dict(self.run_gpu_seconds), self.held_gpu_s.copy(), self.cross_held_gpu_s.copy()
        for jid, run in self._runs.items():
            self._add_run(by_use, held, cross, run, jid, self._split(run, jid, interrupted=False))
        return by_use, held, cross

    def _fail(self, index: int) -> bool:
        """A GPU of a region fails: one in service, picked uniformly (a pick that lands on a GPU under repair or away
        is no failure: each GPU in service fails at the region's rate). If a job holds it, the job is interrupted. True if
        link rates need recomputing."""
        drawn = self.world.failures
        region = int(drawn.regions[index])
        pick = int(drawn.picks[index] * self.world.num_gpus[region]) - int(self.repairing[region] + self.away[region])
        if pick < 0:
            return False  # a GPU under repair, or away
        self.repairing[region] += 1
        self._events.push(self.now_s + self.world.scenario.failures.repair_s, Event(_REPAIR, region))
        for rj in self.running.values():
            held = int(rj.gpus[region])
            if pick < held:
                self._interrupt(rj, region)
                return True
            pick -= held
        self.free_gpus[region] -= 1  # a GPU no job held
        return False

    def _lose(self, index: int) -> bool:
        """A region loses a share of its GPUs for a while (a capacity block's end, or correlated spot
        interruptions), with notice: free GPUs go first, then the jobs that launched last, which checkpoint in the
        notice if it is long enough to write one (else they lose their work since their last checkpoint, as on a
        failure). True if link rates need recomputing."""
        spec = self.world.scenario.capacity_loss
        region = int(self.world.capacity_losses.regions[index])
        in_service = int(self.in_service_gpus()[region])
        lost = min(max(1, round(spec.fraction * int(self.world.num_gpus[region]))), in_service)
        if lost <= 0:
            return False
        victims = sorted((rj for rj in self.running.values() if rj.gpus[region]), key=lambda rj: -self._runs[rj.job.job_id].launch_s)
        changed = False
        for rj in victims:
            if self.free_gpus[region] >= lost:
                break
            self._interrupt(rj, None, noticed=spec.notice_s >= self._runs[rj.job.job_id].checkpoint_s)
            changed = True
        self.free_gpus[region] -= lost
        self.away[region] += lost
        self._events.push(self.now_s + spec.duration_s, Event(_RETURN, region, lost))
        return changed

    def _interrupt(self, rj: RunningJob, failed: int | None, noticed: bool = False) -> None:
        """``rj`` stops: it keeps the work of its last checkpoint (all of it if ``noticed``: it checkpointed in the
        notice), frees its GPUs (but the failed one's, in region ``failed``, which is under repair) and waits again,
        in arrival order."""
        jid = rj.job.job_id
        run = self._runs.pop(jid)
        split = self._count_run(run, jid, interrupted=not noticed)
        self.work_left[jid] = max(run.work_iters - math.floor(split.saved_iters), 0.0)  # checkpoints hold whole iterations
        self.interruptions[jid] += 1
        self.lost_s[jid] += split.lost_s
        self._next_version[jid] = rj.version + 1
        del self.running[jid]
        self._running_ids = np.fromiter(self.running, np.int64, len(self.running))
        self.free_gpus += rj.gpus
        if failed is not None:
            self.free_gpus[failed] -= 1  # the failed GPU is under repair
        self._allocated_gpus -= rj.job.num_gpus
        self.status[jid] = _WAITING
        bisect.insort(self.waiting, jid)  # job ids follow arrival order
        self.gpu_timeline.append((self.now_s, self._held_per_region()))

    def in_service_gpus(self) -> np.ndarray:
        """(R,) GPUs in service per region: neither under repair nor away (capacity loss). GPUs leave service only
        in a world whose GPUs fail (capacity loss needs failures): elsewhere this is the world's own array, not to be
        written."""
        return self.world.num_gpus - self.repairing - self.away if self._failing else self.world.num_gpus

    def _held_per_region(self) -> np.ndarray:
        """(R,) GPUs jobs hold: those in service and not free."""
        return self.in_service_gpus() - self.free_gpus

    def mean_iteration_s(self) -> np.ndarray:
        """(num_jobs,) each launched job's mean iteration time so far: time running ÷ iterations done (NaN if it
        never launched; its current iteration time if it has done no full iteration yet)."""
        iterations = np.array([job.iterations for job in self.world.jobs], dtype=float)
        out = (self.finish_s - self.start_s) / iterations  # NaN for the jobs that have not finished
        for j, rj in self.running.items():
            done = rj.job.iterations - rj.remaining_iters
            out[j] = (self.now_s - self.start_s[j]) / done if done >= 1.0 else rj.iteration_s
        return out

    def comm_slowdown(self) -> np.ndarray:
        """(num_jobs,) per launched job: mean iteration time on its placement ÷ the same stages with every boundary
        inside one region (NaN if it never launched)."""
        return self.mean_iteration_s() / self.local_iteration_s

    # ------------------------------------------------------------------ placement physics
    def layout(self, job: Job, placement: Placement) -> Layout:
        """The placement's :class:`Layout` at the current capacities (memoised)."""
        key = (job.profile_key, placement, self._capacity_version)
        cached = self._layout_cache.get(key)
        if cached is None:
            model = self.pipeline_model(job, placement)
            timing = PlacementTiming(self.world, job, placement, model)
            num_regions = self.world.num_regions
            links = np.array([a * num_regions + b for a, b in model.links], dtype=np.int64)
            gpus = np.zeros(num_regions, dtype=np.int64)
            for r, n in zip(placement.regions, placement.stages):
                gpus[r] = n * job.stage_gpus
            for array in (links, gpus):  # shared by every launch of the layout
                array.setflags(write=False)
            cached = self._layout_cache[key] = Layout(
                model.demand_gbps, timing, links, gpus, model.wan_bytes_per_iteration, model.links, model.schedule
            )
        return cached

    def pipeline_model(self, job: Job, placement: Placement) -> PipelineModel:
        """The schedule ``placement`` runs ``job`` with, as a :class:`PipelineModel` at the current line rates: of the
        job's accepted schedules that fit memory in every region of the placement, the one with the shortest
        iteration at line rate (the first on ties; the job's own when there is one). A placement no accepted
        schedule fits gets the job's own, timed as if it did (``check_placement`` refuses to launch it)."""
        forward, transfer, latency, wan_pos = self._stage_arrays(job, placement)
        wrap = self._wrap(job, placement)
        if len(job.schedules) == 1:
            return pipeline_model(job, 0, placement, forward, transfer, latency, wan_pos, wrap, self.exact_timing)
        regions = list(placement.regions)
        options = [i for i in range(len(job.schedules)) if job.schedule_fits[i, regions].all()] or [0]
        models = [pipeline_model(job, i, placement, forward, transfer, latency, wan_pos, wrap, self.exact_timing)
                  for i in options]
        return fastest(models)

    def _wrap(self, job: Job, placement: Placement) -> tuple:
        """:func:`wrap_link` of ``placement`` at the current line rates."""
        net = self.world.scenario.network
        intra_x = transfer_time_s(job.intra_message_bytes, float(net.intra_bandwidth_gbps))
        return wrap_link(placement.regions, self.capacity_gbps, self.world.latency_s, job.wan_message_bytes, intra_x,
                         float(net.intra_latency_s))

    def local_iteration_s_of(self, job: Job, placement: Placement) -> float:
        """Iteration time of ``placement``'s stages with every boundary inside one region (intra-region link and
        latency): what the job would take with no WAN. The base of its communication slowdown.

        It depends on the placement only through its stages' forward times in order, so it is memoised (for the
        process) by those, as runs of equal times: placements over regions of one GPU type share it."""
        runs: list[tuple[float, int]] = []  # (forward time, stages) of consecutive stages with equal times
        for r, n in zip(placement.regions, placement.stages):
            f = float(job.forward_s[r])
            if runs and runs[-1][0] == f:
                runs[-1] = (f, runs[-1][1] + n)
            else:
                runs.append((f, n))
        index = self.layout(job, placement).schedule
        key = (job.profile_key, tuple(runs), fields_key(self.world, LOCAL_TIMING_FIELDS), self.exact_timing, index)
        return _LOCAL_ITERATION.get_or(key, self._local_iteration_s, job, placement, index)

    def _local_iteration_s(self, job: Job, placement: Placement, index: int) -> float:
        """:meth:`local_iteration_s_of` computed: the job's schedule ``index`` on the placement's stages in one
        region."""
        net = self.world.scenario.network
        forward = np.repeat(job.forward_s[list(placement.regions)], placement.stages)
        n_hops = forward.shape[0] - 1
        intra_x = transfer_time_s(job.intra_message_bytes, net.intra_bandwidth_gbps)
        transfer = np.full(n_hops, intra_x)
        latency = np.full(n_hops, float(net.intra_latency_s))
        wrap = (intra_x, float(net.intra_latency_s), False, ())
        local = Placement((placement.regions[0],), (job.num_stages,))
        model = pipeline_model(job, index, local, forward, transfer, latency, _NO_WAN, wrap, self.exact_timing)
        return model.total_s(0.0) + job.allreduce_s  # PlacementTiming.at(0.0): no cadence floor

    def _stage_arrays(self, job: Job, placement: Placement) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``pipeline.stage_arrays`` of the placement at the current line rates: per-stage forward times,
        per-boundary transfer times and latencies, and the WAN boundaries' positions."""
        net = self.world.scenario.network
        regions, stages = np.array(placement.regions, dtype=np.int64), np.array(placement.stages, dtype=np.int64)
        return pipeline.stage_arrays(
            job.forward_s, job.intra_message_bytes, job.wan_message_bytes, regions, stages, regions.size,
            self.capacity_gbps, self.world.latency_s, float(net.intra_bandwidth_gbps), float(net.intra_latency_s),
        )

    def check_placement(self, job: Job, placement: Placement) -> str | None:
        """Why ``placement`` cannot be launched for ``job`` now, or None if it can."""
        if self.status[job.job_id] != _WAITING:
            return "job is not waiting"
        regions, stages = placement.regions, placement.stages
        if not regions or len(set(regions)) != len(regions):
            return "regions must be a non-empty path of distinct regions"
        if sum(stages) != job.num_stages or min(stages) < 1:
            return f"stages must be positive and sum to K*={job.num_stages}"
        fits = job.fits
        free = self.free_gpus
        g = job.stage_gpus
        for r, n in zip(regions, stages):
            if not fits[r]:
                return f"a stage does not fit GPU memory in region {r}"
            if n * g > free[r]:
                return f"region {r} has {free[r]} free GPUs, needs {n * g}"
        if len(job.schedules) > 1 and not job.schedule_fits[:, list(regions)].all(axis=1).any():
            return "no accepted schedule fits GPU memory in every region of the path"
        if len(regions) > 1:
            bandwidth = self.world.bandwidth_gbps
            for a, b in zip(regions, regions[1:]):
                if bandwidth[a, b] <= 0.0:
                    return f"no link between regions {a} and {b}"
            if len(regions) > 2 and bandwidth[regions[-1], regions[0]] <= 0.0:
                name = job.schedules[self.layout(job, placement).schedule]
                if schedule.spec(name).wraps:
                    return f"{name} wraps from its last region {regions[-1]} back to its first {regions[0]}, which no link joins"
        return None

    def estimate(self, job: Job, placement: Placement, spare_gbps: list[list[float]] | None = None) -> Estimate:
        """Iteration time and power if ``placement`` launched now and got the bandwidth left on its links.

        ``spare_gbps`` (optional): ``max(capacity − load, 0)`` per directed link as nested lists, when the caller
        has it at hand (the candidate table does).
        """
        lay = self.layout(job, placement)
        demand = lay.demand_gbps
        rate = demand
        if placement.regions[1:]:
            if spare_gbps is None:
                spare = min(
                    max(self.capacity_gbps[a, b] - self.link_load_gbps[a, b], 0.0) for a, b in lay.links
                )
            else:
                spare = min(spare_gbps[a][b] for a, b in lay.links)
            rate = min(demand, spare)
        if rate <= 0.0:
            return Estimate(float("inf"), float("inf"), 0.0, demand, True, np.zeros(self.world.num_regions),
                            lay.schedule)
        t_iter, power = lay.timing.at(rate)
        work = float(self.work_left[job.job_id])  # its iterations, or what a failure left of them
        return Estimate(t_iter, t_iter * work, rate, demand, is_stalled(rate, demand), power, lay.schedule)

    # ------------------------------------------------------------------ actions
    def launch(self, job_id: int, placement: Placement, checked: bool = False) -> None:
        """Start ``job_id`` on ``placement`` now. Raises :class:`InfeasiblePlacement` and changes nothing if it cannot.

        ``checked=True`` skips the feasibility check, for a caller that holds a placement built for this job in
        this state (the env's compiled candidate table, whose every candidate passes :meth:`check_placement`)."""
        job = self.world.jobs[job_id]
        if not checked:
            why = self.check_placement(job, placement)
            if why is not None:
                raise InfeasiblePlacement(why)
        lay = self.layout(job, placement)
        gpus = lay.gpus
        rj = RunningJob(self, job, placement, gpus, lay, self._capacity_version)
        if self._failing:
            rj.version = self._next_version.get(job_id, 0)  # an earlier run's completions stay stale
            self._remaining_iters[job_id] = self._start_run(job, lay)
        else:
            self._remaining_iters[job_id] = float(job.iterations)
        self._iteration_s[job_id] = 0.0
        self._wan_bytes_per_s[job_id] = 0.0
        self._rate_gbps[job_id] = 0.0
        self._timed_at_capacity[job_id] = -1
        self._demand_gbps[job_id] = lay.demand_gbps
        links = lay.wan_link_index
        self._job_links[job_id, : links.shape[0]] = links
        self._job_num_links[job_id] = links.shape[0]
        self.free_gpus -= gpus
        self._allocated_gpus += job.num_gpus  # the sum of gpus (check_placement: the stages sum to num_stages)
        self.waiting.remove(job_id)
        self.status[job_id] = _RUNNING
        if not self._failing or math.isnan(self.start_s[job_id]):  # its first start (a restart keeps it)
            self.start_s[job_id] = self.now_s
        if math.isnan(lay.local_iteration_s):
            lay.local_iteration_s = self.local_iteration_s_of(job, placement)
        self.local_iteration_s[job_id] = lay.local_iteration_s
        self.running[job_id] = rj
        self._running_ids = np.fromiter(self.running, np.int64, len(self.running))
        self.placements[job_id] = placement
        self.gpu_timeline.append((self.now_s, self._held_per_region()))
        self._recompute_rates()

    def _recompute_rates(self) -> None:
        """Max-min fair rates for all running jobs on all directed links (``network.max_min_rates``: progressive
        filling), then timing, power and completions
        (``sim_kernels.reallocate`` does the compiled parts in one call)."""
        num_regions = self.world.num_regions
        ids = self._running_ids
        link_load = np.zeros(num_regions * num_regions)
        power = np.zeros(num_regions)
        kw = np.empty(num_regions)
        self.max_link_utilization, count, total_w = sim_kernels.reallocate(
            ids, self._job_f, self._job_i, self._job_links, self.capacity_gbps, link_load, self.max_link_utilization,
            self._capacity_version, self._power_w, power, kw,
        )
        self.link_load_gbps = link_load.reshape(num_regions, num_regions)
        if count:
            rates = self._rates
            for jid in self._stale[:count].tolist():
                self._retime(self.running[jid], float(rates[jid]))
            total_w = sim_kernels.region_power(self._power_w, ids, power, kw)
        self.region_power_w = power
        self._region_kw = (kw, total_w)

    def _retime(self, rj: RunningJob, rate_gbps: float) -> None:
        """Give a running job a new rate (or new line rates): timing, power, and a new completion if it moved."""
        job = rj.job
        jid = job.job_id
        version = self._capacity_version
        lay = rj.layout
        if rj.layout_version != version:
            rj.layout = lay = self.layout(job, rj.placement)
            rj.layout_version = version
            self._demand_gbps[jid] = lay.demand_gbps
        self._timed_at_capacity[jid] = version
        t_iter, power = lay.timing.at(rate_gbps)
        self._rate_gbps[jid] = rate_gbps
        rj.stalled = stalled = bool(lay.wan_link_index.shape[0]) and is_stalled(rate_gbps, lay.demand_gbps)
        if stalled:
            self.ever_stalled[jid] = True
        self._power_w[jid] = power
        self._wan_bytes_per_s[jid] = lay.wan_bytes_per_iteration / t_iter
        if t_iter != self._iteration_s[jid]:
            self._iteration_s[jid] = t_iter
            rj.version += 1
            finish = self.now_s + max(float(self._remaining_iters[jid]), 0.0) * t_iter
            self._events.push(finish, Event(_COMPLETION, jid, rj.version))


