"""Layer 3: frozen scenario types.

A :class:`Scenario` is the static description of a world: regions, network, workload recipe and episode
options. It is built by :mod:`geopipe_env.scenario.loader` from YAML (or by hand in tests) and never mutated. Per-episode
sampling (randomisation, start hour, job draws) lives in :mod:`geopipe_env.simulation.generator`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from geopipe_env.base.catalog import DatasetSpec, GpuType, ModelSpec

HOURS_PER_YEAR = 8760


@dataclass(frozen=True, slots=True, eq=False)
class HourlySeries:
    """A value per UTC hour of the reference year 2023; a one-element series is a constant.

    Attributes:
        label: the bundled market / zone name, or ``"constant"``.
        values: (num_hours,) float64, in the unit of the field that holds the series.
    """

    label: str
    values: np.ndarray

    @classmethod
    def constant(cls, value: float) -> "HourlySeries":
        return cls("constant", np.array([float(value)]))

    @property
    def is_constant(self) -> bool:
        return self.values.shape[0] == 1

    def window(self, start_hour: int, num_hours: int, out: np.ndarray | None = None) -> np.ndarray:
        """Values for hours ``start_hour .. start_hour + num_hours - 1``, wrapping around the year: a new array, or
        ``out`` (num_hours,) written in place."""
        if out is None:
            out = np.empty(num_hours)
        size = self.values.shape[0]
        start = start_hour % size
        if self.is_constant:
            out[:] = self.values[0]
        elif start + num_hours <= size:  # no wrap: one slice
            out[:] = self.values[start:start + num_hours]
        else:
            out[:] = self.values[(start + np.arange(num_hours)) % size]
        return out


@dataclass(frozen=True, slots=True)
class RegionSpec:
    """A cloud region: its GPUs, access bandwidth, PUE, and price / carbon series."""

    id: str
    gpu: GpuType
    num_gpus: int
    access_bandwidth_gbps: float
    pue: float
    price_usd_per_kwh: HourlySeries
    carbon_g_per_kwh: HourlySeries | None = None


@dataclass(frozen=True, slots=True)
class BackgroundTraffic:
    """A diurnal share of every WAN link's capacity taken by other tenants' traffic.

    The share at hour ``h`` (episode UTC hour) is ``mean + amplitude * sin(2π (h + phase_h) / period_h)``,
    clipped to ``[0, MAX_BACKGROUND_FRACTION]``. It changes at hour ticks.
    """

    mean_fraction: float
    amplitude_fraction: float = 0.0
    period_h: float = 24.0
    phase_h: float = 0.0

    def fraction_at(self, utc_hour: float) -> float:
        share = self.mean_fraction + self.amplitude_fraction * np.sin(
            2.0 * np.pi * (utc_hour + self.phase_h) / self.period_h
        )
        return float(min(max(share, 0.0), MAX_BACKGROUND_FRACTION))


MAX_BACKGROUND_FRACTION = 0.95  # never take a link entirely away, so no job starves to zero rate


@dataclass(frozen=True, slots=True)
class LinkDegradation:
    """WAN links whose bandwidth drops for a while (``network.degradation`` in a scenario file)."""

    per_link_day: float  # events per link (both directions) and day
    factor: float  # the share of its bandwidth a degraded link keeps
    duration_s: float


@dataclass(frozen=True, slots=True, eq=False)
class NetworkSpec:
    """Inter-region links (directed, full duplex) and the intra-region link.

    Attributes:
        rule: ``"endpoint_mean"`` or ``"matrix"``, kept for reporting.
        bandwidth_gbps: (R, R) capacity per direction; 0 means no link. The diagonal is unused.
        latency_s: (R, R) one-way latency. The diagonal is unused.
    """

    rule: str
    bandwidth_gbps: np.ndarray
    latency_s: np.ndarray
    intra_bandwidth_gbps: float
    intra_latency_s: float
    background: BackgroundTraffic | None = None
    degradation: LinkDegradation | None = None

    @property
    def fixed_line_rates(self) -> bool:
        """Whether every link's capacity stays as given for the whole episode (no background traffic takes a share,
        no link degrades): what lets layouts' timing be cached across episodes and the candidate table run
        compiled."""
        return self.background is None and self.degradation is None

    @property
    def hourly_line_rates(self) -> bool:
        """Whether capacities change on the hour (background traffic)."""
        return self.background is not None

    def graph(self, region_ids: tuple[str, ...]) -> nx.DiGraph:
        """The network as a networkx digraph with ``bandwidth_gbps`` and ``latency_s`` edge attributes."""
        g = nx.DiGraph()
        g.add_nodes_from(region_ids)
        n = len(region_ids)
        for i in range(n):
            for j in range(n):
                if i != j and self.bandwidth_gbps[i, j] > 0.0:
                    g.add_edge(
                        region_ids[i],
                        region_ids[j],
                        bandwidth_gbps=float(self.bandwidth_gbps[i, j]),
                        latency_s=float(self.latency_s[i, j]),
                    )
        return g


@dataclass(frozen=True, slots=True)
class ArrivalSpec:
    """How jobs arrive: ``batch`` (all at t=0), ``poisson``, ``trace`` (times from a CSV) or ``replay`` (the gaps
    of a bundled job trace, named by ``source``, scaled to ``mean_interarrival_s``)."""

    process: str
    mean_interarrival_s: float = 0.0
    source: str | None = None


SIZING_KSTAR = "kstar"  # K* = argmin_K T_iter(K) on a reference placement (BACE-Pipe's rule)
SIZING_MEMORY = "memory"  # the fewest stages whose memory fits
SIZING_FIXED = "fixed"  # ``pipeline_stages`` given
PIPELINE_SIZINGS = (SIZING_KSTAR, SIZING_MEMORY)  # the values ``pipeline_sizing`` takes in a scenario file


@dataclass(frozen=True, slots=True)
class JobShape:
    """A job's parallel shape: tensor (``gpus_per_stage``), pipeline (sizing) and data (``data_parallel``) degrees.

    A job holds ``S · gpus_per_stage · context_parallel · data_parallel`` GPUs; each of its ``S`` stages puts its
    ``data_parallel`` replicas (``gpus_per_stage · context_parallel`` GPUs each) in one region. ``num_microbatches`` is per replica
    and iteration: ``global_batch_size / (micro_batch_size · data_parallel)`` when a global batch is given.
    """

    micro_batch_size: int = 1
    seq_len: int = 2048
    num_microbatches: int = 32
    gpus_per_stage: int = 1
    data_parallel: int = 1
    sizing: str = SIZING_KSTAR
    pipeline_stages: int | None = None  # with sizing "fixed"
    max_stages: int | None = None
    # The pipeline schedules the job accepts, the first its own (empty: the scenario's ``pipeline_schedule``), and
    # its chunks per device (None: the scenario's ``virtual_stages``).
    pipeline_schedules: tuple[str, ...] = ()
    virtual_stages: int | None = None
    context_parallel: int = 1  # c: a replica's stage holds gpus_per_stage × c GPUs, the sequence split over c
    recompute: bool = True  # activations checkpointed at layer boundaries and recomputed in the backward
    optimizer_state: str = "fp32"  # the optimizer state's precision (pipeline.OPTIMIZER_STATE_BYTES_PER_PARAM)

    @property
    def stage_gpus(self) -> int:
        """GPUs one pipeline stage takes over all replicas: ``gpus_per_stage · context_parallel · data_parallel``."""
        return self.gpus_per_stage * self.context_parallel * self.data_parallel


@dataclass(frozen=True, slots=True)
class JobClass:
    """A kind of job in the workload: its models, datasets and shape, drawn with probability ∝ ``weight``."""

    name: str
    weight: float
    models: tuple[ModelSpec, ...]
    datasets: tuple[DatasetSpec, ...]
    shape: JobShape


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One row of a job trace: submission time, what to train, and its shape (the workload's unless the row
    gives its own)."""

    submit_time_s: float
    model: ModelSpec
    dataset: DatasetSpec | None
    iterations: int | None
    shape: JobShape | None = None


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """The recipe from which each episode's jobs are drawn.

    ``models``, ``datasets`` and the shape fields describe the default job; ``classes``, when given, replace it by
    several kinds of job drawn by weight (every model and dataset of the classes is also listed in ``models`` and
    ``datasets``).
    """

    num_jobs: int
    arrival: ArrivalSpec
    models: tuple[ModelSpec, ...]
    datasets: tuple[DatasetSpec, ...]
    micro_batch_size: int = 1
    seq_len: int = 2048
    num_microbatches: int = 32
    gpus_per_stage: int = 1
    epochs: float = 1.0
    max_stages: int | None = None
    trace: tuple[TraceJob, ...] = ()
    data_parallel: int = 1
    pipeline_sizing: str = SIZING_KSTAR
    pipeline_stages: int | None = None
    classes: tuple[JobClass, ...] = ()
    pipeline_schedules: tuple[str, ...] = ()
    virtual_stages: int | None = None
    context_parallel: int = 1
    recompute: bool = True
    optimizer_state: str = "fp32"

    @property
    def shape(self) -> JobShape:
        """The default job shape (the workload-level keys)."""
        sizing = SIZING_FIXED if self.pipeline_stages is not None else self.pipeline_sizing
        return JobShape(
            self.micro_batch_size, self.seq_len, self.num_microbatches, self.gpus_per_stage, self.data_parallel,
            sizing, self.pipeline_stages, self.max_stages, self.pipeline_schedules, self.virtual_stages,
            self.context_parallel, self.recompute, self.optimizer_state,
        )

    def job_classes(self) -> tuple[JobClass, ...]:
        """The classes jobs are drawn from: ``classes``, or one class of the default shape."""
        if self.classes:
            return self.classes
        return (JobClass("default", 1.0, self.models, self.datasets, self.shape),)


def powers_of_two(bounds: tuple[int, int]) -> tuple[int, ...]:
    """The powers of two in ``[low, high]``, smallest first."""
    low, high = bounds
    powers, p = [], 1
    while p <= high:
        if p >= low:
            powers.append(p)
        p *= 2
    return tuple(powers)


@dataclass(frozen=True, slots=True)
class RandomizeSpec:
    """Per-episode domain randomisation, drawn from the env's RNG at every reset; ``None`` leaves a part as given.

    Attributes:
        bandwidth_scale: ``(low, high)``: every inter-region capacity × U(low, high).
        gpu_scale: ``(low, high)``: every region's GPU count × U(low, high), rounded, at least 1.
        gpu_types: each region's GPU type drawn uniformly from these (catalog or scenario ``gpus``).
        constant_price_prob: with this probability, every region's price and carbon are constant at their series'
            2023 means (a world without hourly series).
        num_jobs: ``(low, high)`` integers: the episode's job count, uniform.
        arrival_scale: ``(low, high)``: the Poisson mean interarrival time × U(low, high).
        batch_arrival_prob: with this probability, every job arrives at t = 0 instead of by the Poisson process.
        one_f_one_b_prob: with this probability, every job of the episode accepts only 1F1B.
        data_parallel: ``(low, high)`` integers: each job's data-parallel degree, a power of two drawn uniformly
            from those in the range.
        seq_len: ``(low, high)`` integers: each job's sequence length, a power of two drawn likewise.
    """

    bandwidth_scale: tuple[float, float] | None = None
    gpu_scale: tuple[float, float] | None = None
    gpu_types: tuple[GpuType, ...] | None = None
    constant_price_prob: float | None = None
    num_jobs: tuple[int, int] | None = None
    arrival_scale: tuple[float, float] | None = None
    batch_arrival_prob: float | None = None
    one_f_one_b_prob: float | None = None
    data_parallel: tuple[int, int] | None = None
    seq_len: tuple[int, int] | None = None

    @property
    def varies_shapes(self) -> bool:
        """Whether the episode redraws parts of its jobs' shapes."""
        return self.one_f_one_b_prob is not None or self.data_parallel is not None or self.seq_len is not None


@dataclass(frozen=True, slots=True)
class FailureSpec:
    """GPU failures, checkpoints and restarts (``failures`` in a scenario file); see ``physics.failures``."""

    per_gpu_day: float  # each GPU in service fails at this rate unless its type sets its own
    checkpoint_interval_s: float | None  # None: Young/Daly per job and placement
    checkpoint_gbps: float  # per GPU, writing and reading back its shard
    restart_s: float
    repair_s: float


@dataclass(frozen=True, slots=True)
class CapacityLossSpec:
    """Regions losing a share of their GPUs for a while, with notice (``capacity_loss`` in a scenario file)."""

    per_region_day: float
    fraction: float
    duration_s: float
    notice_s: float


@dataclass(frozen=True, slots=True)
class Scenario:
    """A complete, validated world description."""

    name: str
    horizon_s: float
    start_hour: int | None  # hour of 2023 (UTC) where series start; None = a random day each episode
    # An end-to-end efficiency applied to every GPU's peak, or None: each GPU type's kernel efficiency
    # (GpuType.kernel_efficiency), with attention FLOPs counted and the bubble timed by the schedule.
    mfu: float | None
    regions: tuple[RegionSpec, ...]
    network: NetworkSpec
    workload: WorkloadSpec
    randomize: RandomizeSpec = field(default_factory=RandomizeSpec)
    cost_weight: float = 1.0
    bill_idle_capacity: bool = False
    pipeline_schedule: str = "1f1b"
    virtual_stages: int = 1
    failures: FailureSpec | None = None  # None: nothing fails
    capacity_loss: CapacityLossSpec | None = None  # None: regions keep their GPUs (needs failures: checkpoints)

    @property
    def num_regions(self) -> int:
        return len(self.regions)

    def schedules_of(self, shape: JobShape) -> tuple[str, ...]:
        """The schedules a job of ``shape`` accepts, its own first: the shape's, or the scenario's one."""
        return shape.pipeline_schedules or (self.pipeline_schedule,)

    def virtual_stages_of(self, shape: JobShape) -> int:
        """A job's chunks per device (interleaved-1f1b, hanayo): the shape's, or the scenario's."""
        return self.virtual_stages if shape.virtual_stages is None else shape.virtual_stages

    @property
    def region_ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.regions)
