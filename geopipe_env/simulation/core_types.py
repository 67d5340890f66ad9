"""Layer 4: the core types, which every layer above reads: an episode's :class:`World` and its :class:`Job` s (which
:mod:`geopipe_env.simulation.generator` samples), where a job's stages go (:class:`Placement`), its state in the simulator
(:class:`JobStatus`), what the env knows of one candidate placement (:class:`CandidateInfo`), and the fields that
key the caches (:data:`JOB_PROFILE_FIELDS`, :func:`timing_key`, :func:`layout_key`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from geopipe_env.physics.pipeline import BACKWARD_TO_FORWARD, ONE_F_ONE_B, intra_message_bytes

if TYPE_CHECKING:
    from geopipe_env.physics.energy import HourlyIntegral
    from geopipe_env.scenario.types import Scenario

# The fields of a job that its timing, power and candidate placements read: jobs equal in these (the job's
# ``profile_key``) time alike on any placement of any world with equal timing_key, and the candidate table gives
# them the same placements. The model's name keeps jobs of different models apart. Every other field is listed in
# JOB_OTHER_FIELDS; tests/test_cache_keys.py perturbs each of those and checks that no timing moves.
JOB_PROFILE_FIELDS = (
    "model", "num_stages", "activation_bytes", "gpus_per_stage", "data_parallel", "num_microbatches", "forward_s",
    "fits", "allreduce_s", "schedules", "virtual_stages", "context_parallel", "backward_ratio", "input_gradient",
    "schedule_fits", "link_messages",
)
JOB_OTHER_FIELDS = (
    "job_id", "arrival_s", "dataset", "params", "layers", "hidden", "micro_batch_size", "seq_len", "iterations",
    "isolated_iteration_s", "lower_bound_s", "lower_bound_energy_kwh", "typical_demand_gbps", "isolated_power_w",
    "local_iteration_s", "optimizer_state",
)
# What a layout's timing reads of a world besides its job's profile and its placement (timing_key), and what its
# power reads besides (layout_key).
WORLD_TIMING_FIELDS = (
    "bandwidth_gbps", "latency_s", "scenario.network.intra_bandwidth_gbps", "scenario.network.intra_latency_s",
    "scenario.pipeline_schedule",
)
WORLD_POWER_FIELDS = ("idle_watts", "busy_watts", "pue")

@dataclass(frozen=True, eq=False)
class Job:
    """One job of an episode, with its physics precomputed.

    Per-region arrays are indexed by region; a region whose GPU cannot hold a stage of this job has
    ``fits[r] == False``. (No ``__slots__``: a reset copies tens of jobs from a template, and a copy of the fields'
    dict is one call where slots take one per field. A read costs about 20 ns more than from a slot; measured
    side by side, steps take the same time within 1% and resets 7% less.)
    """

    job_id: int
    arrival_s: float
    model: str
    dataset: str
    params: float
    layers: int
    hidden: int
    micro_batch_size: int
    seq_len: int
    num_microbatches: int  # M, per replica and iteration
    gpus_per_stage: int  # tensor-parallel degree t
    iterations: int
    num_stages: int  # S (K* under the kstar sizing rule)
    activation_bytes: float  # A = b·s·h·2, one replica's message per micro-batch and boundary
    forward_s: np.ndarray  # (R,) forward time of one stage per micro-batch on region r's GPUs
    fits: np.ndarray  # (R,) bool
    isolated_iteration_s: float  # on the reference placement used for K*
    lower_bound_s: float  # duration alone on an empty world, on a relaxed best placement
    lower_bound_energy_kwh: float
    typical_demand_gbps: float  # no-stall rate per hop, d·A·8 / (t_f + t_b), on the median GPU it fits
    isolated_power_w: float  # facility power running alone at the isolated iteration time, on the median GPU it fits
    local_iteration_s: float  # the reference placement's iteration time with every boundary inside one region
    data_parallel: int = 1  # replicas d; each stage's replicas sit in one region
    allreduce_s: float = 0.0  # gradient all-reduce of the d·c ranks per iteration, inside a region
    schedules: tuple[str, ...] = (ONE_F_ONE_B,)  # the pipeline schedules it accepts, its own first
    virtual_stages: int = 1  # chunks per device (interleaved-1f1b, hanayo)
    context_parallel: int = 1  # c: a replica's stage holds t·c GPUs
    backward_ratio: float = BACKWARD_TO_FORWARD  # backward time ÷ forward time
    input_gradient: float = 1.0  # the share of the backward a split schedule runs as D (the rest is W)
    # (len(schedules), R) bool: where a stage fits memory under each schedule (None: ``fits``, for one schedule)
    schedule_fits: np.ndarray | None = None
    link_messages: float = 1.0  # messages per micro-batch on its busiest link between two stages, under its own schedule
    optimizer_state: str = "fp32"  # its optimizer state's precision: what a checkpoint holds besides the weights
    # JOB_PROFILE_FIELDS' values: jobs with equal keys run identically on any placement of any world with equal
    # timing_key. Set once here, since the candidate table reads it tens of times per decision.
    profile_key: tuple = field(init=False, repr=False)
    stage_gpus: int = field(init=False, repr=False)  # GPUs one stage takes in its region: t·d
    wan_message_bytes: float = field(init=False, repr=False)  # on a cross-region boundary per micro-batch and way: d·A
    # Inside a region, per micro-batch and boundary, on each of a replica's c links: A/c (the sequence is split)
    intra_message_bytes: float = field(init=False, repr=False)
    num_gpus: int = field(init=False, repr=False)  # S·t·c·d
    isolated_duration_s: float = field(init=False, repr=False)  # iterations × isolated iteration time
    local_duration_s: float = field(init=False, repr=False)  # iterations × in-region iteration time

    def __post_init__(self) -> None:
        if self.schedule_fits is None:
            object.__setattr__(self, "schedule_fits", self.fits.reshape(1, -1))
        object.__setattr__(self, "profile_key", fields_key(self, JOB_PROFILE_FIELDS))
        object.__setattr__(self, "stage_gpus", self.gpus_per_stage * self.context_parallel * self.data_parallel)
        object.__setattr__(self, "wan_message_bytes", self.data_parallel * self.activation_bytes)
        object.__setattr__(self, "intra_message_bytes", intra_message_bytes(self.activation_bytes, self.context_parallel))
        object.__setattr__(self, "num_gpus", self.num_stages * self.stage_gpus)
        object.__setattr__(self, "isolated_duration_s", self.iterations * self.isolated_iteration_s)
        object.__setattr__(self, "local_duration_s", self.iterations * self.local_iteration_s)

    @property
    def schedule(self) -> str:
        """The job's own schedule (the first it accepts): the one its K* and BACE-Pipe's admission test use."""
        return self.schedules[0]


class GpuFailures(NamedTuple):
    """The GPU failures of an episode, drawn with its world (:func:`draw_failures`)."""

    times_s: np.ndarray  # sorted
    regions: np.ndarray  # the region each hits
    picks: np.ndarray  # a uniform draw in [0, 1) each, which picks the GPU of the region it hits
    per_gpu_day: np.ndarray  # (R,) each region's GPU failure rate


class CapacityLosses(NamedTuple):
    """The capacity losses of an episode, drawn with its world (:func:`draw_capacity_losses`)."""

    times_s: np.ndarray  # sorted
    regions: np.ndarray


class LinkDegradations(NamedTuple):
    """The link degradations of an episode, drawn with its world (:func:`draw_degradations`)."""

    times_s: np.ndarray  # sorted
    links: np.ndarray  # (n, 2) the two regions of each degraded link


@dataclass(frozen=True, slots=True, eq=False)
class World:
    """An episode's world: the scenario after randomisation, and its jobs."""

    scenario: Scenario
    num_gpus: np.ndarray  # (R,) int
    bandwidth_gbps: np.ndarray  # (R, R) nominal capacity before background traffic; 0 = no link
    latency_s: np.ndarray  # (R, R)
    start_hour: int  # hour of 2023 at episode t = 0
    price: HourlyIntegral  # (R, H) USD/kWh
    carbon: HourlyIntegral  # (R, H) g/kWh
    jobs: tuple[Job, ...]
    tflops: np.ndarray  # (R,)
    kernel_efficiency: np.ndarray  # (R,) each region's GPU type's (NaN where it has none; used without mfu)
    busy_watts: np.ndarray  # (R,)
    idle_watts: np.ndarray  # (R,)
    pue: np.ndarray  # (R,)
    hourly_series: bool = True  # some price or carbon series changes by the hour (False: every one is constant)
    # GPU failures over the horizon (scenario.failures; None when nothing fails): their times, regions, and each
    # as a uniform draw in [0, 1) that picks the GPU of the region it hits; and each region's rate per GPU-day.
    failures: GpuFailures | None = None
    capacity_losses: CapacityLosses | None = None  # scenario.capacity_loss's events (None without it)
    degradations: LinkDegradations | None = None  # scenario.network.degradation's events (None without it)

    @property
    def num_regions(self) -> int:
        return self.num_gpus.shape[0]

    @property
    def horizon_s(self) -> float:
        return self.scenario.horizon_s


def fields_key(obj: object, names: tuple[str, ...]) -> tuple:
    """A hashable key of the fields ``names`` of ``obj`` (dotted paths into nested fields): numbers and strings as
    they are, arrays by their dtype, shape and bytes."""
    key = []
    for name in names:
        value = obj
        for part in name.split("."):
            value = getattr(value, part)
        if isinstance(value, np.ndarray):
            value = (value.dtype.str, value.shape, value.tobytes())
        key.append(value)
    return tuple(key)


def timing_key(world: World) -> tuple:
    """What a layout's timing depends on besides its job's ``profile_key`` and its placement (WORLD_TIMING_FIELDS):
    the world's line rates and latencies, the intra-region link and the pipeline schedule."""
    return fields_key(world, WORLD_TIMING_FIELDS)


def layout_key(world: World) -> tuple:
    """What a layout's timing and power depend on besides its job's ``profile_key`` and its placement
    (WORLD_TIMING_FIELDS and WORLD_POWER_FIELDS)."""
    return fields_key(world, WORLD_TIMING_FIELDS + WORLD_POWER_FIELDS)


class JobStatus(IntEnum):
    PENDING = 0  # not yet arrived
    WAITING = 1
    RUNNING = 2
    DONE = 3


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a job's stages go: a path of distinct regions and the number of consecutive stages in each."""

    regions: tuple[int, ...]
    stages: tuple[int, ...]
    links: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)
    # Placements key the simulator's and the candidate table's caches, so the hash is computed once.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        links: list[tuple[int, int]] = []
        for a, b in zip(self.regions, self.regions[1:]):
            links += ((a, b), (b, a))
        object.__setattr__(self, "links", tuple(links))
        object.__setattr__(self, "_hash", hash((self.regions, self.stages)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def num_wan_hops(self) -> int:
        return len(self.regions) - 1


class CandidateInfo(NamedTuple):
    """What the env knows about one (queue slot, strategy) pair at a decision instant (a named tuple: built
    tens of times per decision)."""

    placement: Placement
    iteration_s: float
    duration_s: float
    cost_usd: float
    carbon_kg: float
    rate_gbps: float
    demand_gbps: float
    stalled: bool
    schedule: int  # which of the job's accepted schedules it would run (an index into Job.schedules)
