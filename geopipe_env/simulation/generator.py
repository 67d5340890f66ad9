"""Layer 4: per-episode world sampling (Jumanji-style generator).

``sample_world(scenario, rng)`` turns a frozen :class:`Scenario` into a :class:`World`: the episode's regions after
randomisation, its price and carbon series aligned to episode time, and its jobs with everything the simulator
needs precomputed (K*, iterations, per-region stage times, memory fit, lower bounds). All randomness comes from
the ``rng`` argument, which the env seeds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import MutableMapping
from dataclasses import dataclass, field

import numpy as np

from geopipe_env.scenario import bundled
from geopipe_env.base.caches import BoundedDict
from geopipe_env.simulation.core_types import CapacityLosses, GpuFailures, Job, LinkDegradations, World
from geopipe_env.physics import pipeline
from geopipe_env.physics.energy import HourlyIntegral, gpu_power_w
from geopipe_env.scenario.types import (
    SIZING_FIXED, SIZING_MEMORY, CapacityLossSpec, FailureSpec, JobShape, LinkDegradation, RandomizeSpec, Scenario,
    powers_of_two,
)
from geopipe_env.physics.schedule import ONE_F_ONE_B
from geopipe_env.physics.sizing import linked_regions, size_job
from geopipe_env.base.units import SECONDS_PER_DAY, SECONDS_PER_HOUR, rate_gbps, transfer_time_s

DAYS_PER_YEAR = 365
JOULES_PER_KWH = 3.6e6
HORIZON_MARGIN_H = 2  # series run a little past the horizon so that lookups at t = horizon stay in range


def draw_failures(spec: FailureSpec, gpus: tuple, num_gpus: np.ndarray, horizon_s: float,
                  rng: np.random.Generator) -> GpuFailures:
    """Each region's GPUs fail as a Poisson process at their type's rate (else the scenario's) times their count:
    the merged process over the horizon, its count drawn first, then its times, regions and picks."""
    per_gpu_day = np.array([spec.per_gpu_day if g.failures_per_gpu_day is None else g.failures_per_gpu_day
                            for g in gpus])
    per_s = per_gpu_day * num_gpus / SECONDS_PER_DAY
    times = _poisson_times(float(per_s.sum()), horizon_s, rng)
    count = times.shape[0]
    regions = _weighted_indices(rng, per_s / per_s.sum(), count) if count else np.zeros(0, dtype=np.int64)
    return GpuFailures(times, regions, rng.random(count), per_gpu_day)


def _poisson_times(rate_per_s: float, horizon_s: float, rng: np.random.Generator) -> np.ndarray:
    """A Poisson process's times over ``[0, horizon_s]``, sorted: its count drawn first, then the times uniformly."""
    count = int(rng.poisson(rate_per_s * horizon_s)) if rate_per_s > 0.0 else 0
    return np.sort(rng.uniform(0.0, horizon_s, size=count))


def draw_capacity_losses(spec: CapacityLossSpec, num_regions: int, horizon_s: float,
                         rng: np.random.Generator) -> CapacityLosses:
    """Each region loses GPUs as a Poisson process at ``per_region_day``: the merged process over the horizon, its
    count drawn first, then its times and regions (uniform)."""
    times = _poisson_times(spec.per_region_day * num_regions / SECONDS_PER_DAY, horizon_s, rng)
    return CapacityLosses(times, rng.integers(0, num_regions, size=times.shape[0]))


def draw_degradations(spec: LinkDegradation, bandwidth_gbps: np.ndarray, horizon_s: float,
                      rng: np.random.Generator) -> LinkDegradations:
    """Each WAN link (a pair of regions with bandwidth either way) degrades as a Poisson process at
    ``per_link_day``: the merged process over the horizon, its count drawn first, then its times and links."""
    linked = (bandwidth_gbps > 0) | (bandwidth_gbps > 0).T
    pairs = np.argwhere(np.triu(linked, k=1))
    times = _poisson_times(spec.per_link_day * len(pairs) / SECONDS_PER_DAY, horizon_s, rng)
    count = times.shape[0]
    return LinkDegradations(times, pairs[rng.integers(0, len(pairs), size=count)] if count else np.zeros((0, 2), np.int64))


def _reference_link(bandwidth_gbps: np.ndarray, latency_s: np.ndarray, intra_bw: float, intra_lat: float) -> tuple[float, float]:
    """The median inter-region link (bandwidth, latency): K*'s reference boundary; intra-region if there is none."""
    mask = bandwidth_gbps > 0
    np.fill_diagonal(mask, False)
    if not mask.any():
        return intra_bw, intra_lat
    return float(np.median(bandwidth_gbps[mask])), float(np.median(latency_s[mask]))


def _link_facts(bandwidth: np.ndarray, latency: np.ndarray, intra_bw: float, intra_lat: float) -> tuple:
    """(reference bandwidth, reference latency, best WAN bandwidth, best latency, linked region pairs) of a world."""
    ref_bw, ref_lat = _reference_link(bandwidth, latency, intra_bw, intra_lat)
    best_bw = float(bandwidth.max(initial=0.0))  # the best WAN link (0 if none)
    wan = bandwidth > 0
    best_lat = min(intra_lat, float(latency[wan].min())) if wan.any() else intra_lat
    return ref_bw, ref_lat, best_bw, best_lat, linked_regions(bandwidth)


def _sample_arrivals(scenario: Scenario, rng: np.random.Generator) -> list[tuple[float, object, object, int | None, JobShape]]:
    """(arrival_s, model, dataset, iterations, shape) per job.

    With one job class the draws are the arrival times, then every job's model, then every job's dataset; with
    several, each job's class is drawn by weight first, then its model and dataset within the class.
    """
    wl, rand = scenario.workload, scenario.randomize
    if wl.arrival.process == "trace":
        rows = wl.trace[: wl.num_jobs]
        return [(r.submit_time_s, r.model, r.dataset, r.iterations, r.shape or wl.shape) for r in rows]
    num_jobs = int(rng.integers(rand.num_jobs[0], rand.num_jobs[1] + 1)) if rand.num_jobs else wl.num_jobs
    if wl.arrival.process == "replay":
        return _replayed(wl, num_jobs, _mean_gap_s(scenario, rng), rng)
    batch = wl.arrival.process != "poisson"
    if not batch and rand.batch_arrival_prob is not None:
        batch = bool(rng.random() < rand.batch_arrival_prob)
    if batch:
        times = np.zeros(num_jobs)
    else:
        times = np.cumsum(rng.exponential(_mean_gap_s(scenario, rng), size=num_jobs))
    classes = wl.job_classes()
    if len(classes) == 1:
        (only,) = classes
        model_idx = rng.integers(0, len(only.models), size=num_jobs)
        data_idx = rng.integers(0, len(only.datasets), size=num_jobs)
        models, datasets, shape = only.models, only.datasets, only.shape
        return [
            (t, models[m], datasets[d], None, shape)
            for t, m, d in zip(times.tolist(), model_idx.tolist(), data_idx.tolist())  # Python numbers: faster
        ]
    weights = np.array([c.weight for c in classes])
    drawn = _weighted_indices(rng, weights / weights.sum(), num_jobs)
    # Then each job's model and dataset, uniformly within its class, in that order: picks[2i] and picks[2i + 1].
    sizes = np.array([(len(c.models), len(c.datasets)) for c in classes], dtype=np.int64)
    picks = _draw_indices(rng, sizes[drawn].ravel())
    return [
        (t, c.models[picks[2 * i]], c.datasets[picks[2 * i + 1]], None, c.shape)
        for i, (t, c) in enumerate(zip(times.tolist(), (classes[k] for k in drawn.tolist())))
    ]


def _vary_shapes(rand: RandomizeSpec, arrivals: list, rng: np.random.Generator) -> list:
    """The arrivals with their shapes redrawn by ``randomize``: first whether the episode runs 1F1B only, then each
    job's data-parallel degree, then each job's sequence length (powers of two, uniformly). A job keeps its
    class's micro-batches per replica; its iterations follow from its tokens (:func:`pipeline.iterations_for`)."""
    only_1f1b = rand.one_f_one_b_prob is not None and bool(rng.random() < rand.one_f_one_b_prob)
    degrees = _draw_powers(rand.data_parallel, len(arrivals), rng)
    lengths = _draw_powers(rand.seq_len, len(arrivals), rng)
    varied: dict[tuple, JobShape] = {}  # one object per distinct shape: profiles are found by the shape's id
    out = []
    for i, (arrival_s, model, dataset, iterations, shape) in enumerate(arrivals):
        changes: dict = {}
        if only_1f1b:
            changes.update(pipeline_schedules=(ONE_F_ONE_B,), virtual_stages=1)  # 1F1B runs one chunk per device
        if degrees is not None:
            changes["data_parallel"] = degrees[i]
        if lengths is not None:
            changes["seq_len"] = lengths[i]
        key = (id(shape), *changes.values())
        new = varied.get(key)
        if new is None:
            new = varied[key] = dataclasses.replace(shape, **changes)
        out.append((arrival_s, model, dataset, iterations, new))
    return out


def _draw_powers(bounds: tuple[int, int] | None, size: int, rng: np.random.Generator) -> list[int] | None:
    """``size`` powers of two drawn uniformly from those in ``bounds`` (None without bounds)."""
    if bounds is None:
        return None
    powers = powers_of_two(bounds)
    return [powers[k] for k in rng.integers(0, len(powers), size=size).tolist()]


def _mean_gap_s(scenario: Scenario, rng: np.random.Generator) -> float:
    """The episode's mean gap between arrivals: the workload's, scaled by a draw of ``randomize.arrival_scale``."""
    scale = scenario.randomize.arrival_scale
    return scenario.workload.arrival.mean_interarrival_s * (rng.uniform(*scale) if scale else 1.0)


def replay_kinds(wl) -> list[tuple[float, object, object, JobShape]]:
    """The kinds of job a replay maps trace jobs onto: (probability, model, dataset, shape) per class, model and
    dataset, with the probability a Poisson workload draws it (the class's weight, then model and dataset uniformly),
    sorted by training compute, parameters × tokens (6·N·D FLOPs per epoch; Kaplan et al. 2020), ties in file
    order. At one efficiency, compute orders GPU-time."""
    classes = wl.job_classes()
    total = sum(c.weight for c in classes)
    kinds = [
        (c.weight / total / (len(c.models) * len(c.datasets)), model, dataset, c.shape)
        for c in classes
        for model in c.models
        for dataset in c.datasets
    ]
    return sorted(kinds, key=lambda kind: kind[1].params_b * kind[2].tokens)


def _replayed(wl, num_jobs: int, mean_s: float, rng: np.random.Generator) -> list[tuple[float, object, object, None, JobShape]]:
    """``num_jobs`` jobs replayed from the workload's bundled trace: the trace's jobs ``first + 1 … first +
    num_jobs`` after a uniformly drawn ``first``, arriving at the trace's gaps scaled so that their mean is
    ``mean_s`` (a window whose jobs all came in the same second arrives at once, at t = 0).

    A job's kind (:func:`replay_kinds`) follows its GPU-time: its quantile among all the trace's jobs falls in one
    kind's band of the kinds' cumulative probabilities, smallest compute first. The trace's large jobs become the
    large kinds, and over the whole trace each kind comes as often as a Poisson workload draws it.
    """
    trace = bundled.job_trace(wl.arrival.source)
    first = int(rng.integers(0, len(trace) - num_jobs))
    gaps = np.diff(trace.submit_s[first : first + num_jobs + 1])
    total = float(gaps.sum())
    times = np.cumsum(gaps) * (num_jobs * mean_s / total) if total > 0 else np.zeros(num_jobs)
    kinds = replay_kinds(wl)
    upper = np.cumsum([kind[0] for kind in kinds])
    quantiles = trace.gpu_time_quantile[first + 1 : first + num_jobs + 1]
    picks = np.minimum(np.searchsorted(upper, quantiles * upper[-1], side="right"), len(kinds) - 1)
    return [(t, kinds[k][1], kinds[k][2], None, kinds[k][3]) for t, k in zip(times.tolist(), picks.tolist())]


def _weighted_indices(rng: np.random.Generator, p: np.ndarray, size: int) -> np.ndarray:
    """``rng.choice(p.size, size=size, p=p)`` without its checks of ``p``: the same steps (the normalised
    cumulative sum searched for ``size`` uniform draws), so the same indices and the same stream after them
    (tests/test_speed_caches.py checks it); 2 µs instead of 20 µs for 40 draws."""
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return cdf.searchsorted(rng.random(size), side="right")


def _draw_indices(rng: np.random.Generator, sizes: np.ndarray | list[int]) -> list[int]:
    """One uniform index below each of ``sizes``: ``[rng.integers(0, n) for n in sizes]`` in one call. numpy draws
    each bounded integer from the generator's stream of 32-bit words (Lemire's method) whether it draws one or
    many, and a size of 1 takes no random bits, so the numbers and the stream after them are those of the calls
    one by one (tests/test_speed_caches.py checks it). At 80 draws one call takes 10 µs, the calls one by one
    86 µs."""
    return rng.integers(0, np.asarray(sizes, dtype=np.int64)).tolist()


PROFILE_CACHE_SIZE = 256  # model profiles an env keeps (new_profile_cache), oldest first out
MAX_GPU_TYPE_DRAWS = 1000
_GPU_FIELDS = ("tflops", "memory_gb", "busy_watts", "idle_watts", "kernel_efficiency")


class JobDoesNotFit(ValueError):
    """A job of the episode cannot be placed in the episode's world."""


def _draw_gpu_types(types: tuple, num_regions: int, rng: np.random.Generator) -> tuple:
    return tuple(types[i] for i in rng.integers(0, len(types), size=num_regions))


class _LazyLinkFacts:
    """:func:`_link_facts` of a world, computed when a profile first needs them (with a warm profile cache, never)."""

    __slots__ = ("_args", "_facts")

    def __init__(self, *args) -> None:
        self._args = args
        self._facts: tuple | None = None

    def get(self) -> tuple:
        if self._facts is None:
            self._facts = _link_facts(*self._args)
        return self._facts


def _cached_profile(cache: dict, key: tuple, model, shape, scenario, num_gpus, tflops, efficiency, memory, busy,
                    idle, pue, links):
    profile = cache.get(key)
    if profile is None:
        profile = cache[key] = _model_profile(
            model, shape, scenario, num_gpus, tflops, efficiency, memory, busy, idle, pue, *links.get()
        )
    return profile


def _hourly(series: list, start_hour: int, num_hours: int, at_mean: bool) -> np.ndarray:
    """(len(series), num_hours): each series' window from ``start_hour``, or its 2023 mean throughout if
    ``at_mean``; zeros for a missing series."""
    out = np.zeros((len(series), num_hours))
    for row, s in zip(out, series):
        if s is not None and at_mean:
            row[:] = s.values.mean()
        elif s is not None:
            s.window(start_hour, num_hours, out=row)
    return out


def new_profile_cache() -> BoundedDict:
    """A cache of model profiles for :func:`sample_world`, bounded at :data:`PROFILE_CACHE_SIZE` (randomised
    worlds rarely repeat a profile)."""
    return BoundedDict(PROFILE_CACHE_SIZE)


def sample_world(scenario: Scenario, rng: np.random.Generator, profile_cache: MutableMapping | None = None) -> World:
    """Draw one episode's world from ``scenario`` using ``rng`` only.

    ``profile_cache`` (optional, owned by the caller and used with one scenario only; :func:`new_profile_cache`
    gives a bounded one) memoises model profiles
    across episodes: a profile is a pure function of the scenario, the model and the episode's GPU counts and
    bandwidths, so episodes without randomisation recompute none.
    """
    regions = scenario.regions
    net = scenario.network
    rand = scenario.randomize
    bw_scale = rng.uniform(*rand.bandwidth_scale) if rand.bandwidth_scale else 1.0
    gpu_scale = rng.uniform(*rand.gpu_scale) if rand.gpu_scale else 1.0
    num_gpus = np.array([max(1, int(round(r.num_gpus * gpu_scale))) for r in regions], dtype=np.int64)
    bandwidth = net.bandwidth_gbps * bw_scale
    latency = net.latency_s.copy()
    gpus = tuple(r.gpu for r in regions)
    if rand.gpu_types:
        gpus = _draw_gpu_types(rand.gpu_types, len(regions), rng)
    constant_price = rand.constant_price_prob is not None and bool(rng.random() < rand.constant_price_prob)
    start_hour = scenario.start_hour if scenario.start_hour is not None else int(rng.integers(0, DAYS_PER_YEAR)) * 24
    num_hours = int(math.ceil(scenario.horizon_s / SECONDS_PER_HOUR)) + HORIZON_MARGIN_H
    # With constant_price, each region's price and carbon at its series' 2023 mean: a world without hourly series.
    price = _hourly([r.price_usd_per_kwh for r in regions], start_hour, num_hours, constant_price)
    carbon = _hourly([r.carbon_g_per_kwh for r in regions], start_hour, num_hours, constant_price)
    pue = np.array([r.pue for r in regions])
    # Jobs of one model share their sizing, timing and memory fit within a world (and across equal worlds).
    if profile_cache is None:
        profile_cache = {}
    arrivals = _sample_arrivals(scenario, rng)
    own_shapes = [arrival[4] for arrival in arrivals]
    if rand.varies_shapes:
        arrivals = _vary_shapes(rand, arrivals, rng)
    links = _LazyLinkFacts(bandwidth, latency, net.intra_bandwidth_gbps, net.intra_latency_s)
    for _ in range(MAX_GPU_TYPE_DRAWS):
        tflops, memory, busy, idle, efficiency = (
            np.array([getattr(g, f) for g in gpus], dtype=float) for f in _GPU_FIELDS
        )
        # Everything a profile reads of this draw (the scenario is the cache's own): its arrays' bytes.
        world_key = tuple(
            a.tobytes() for a in (num_gpus, bandwidth, latency, tflops, memory, busy, idle, pue, efficiency)
        )
        # This draw's profiles by model and shape object: the cache's keys (dataclasses, hashed field by field) are
        # then hashed once per profile rather than once per job.
        drawn: dict[tuple[int, int], _ModelProfile | JobDoesNotFit] = {}

        def profile_of(model, shape) -> _ModelProfile | JobDoesNotFit:
            profile = drawn.get((id(model), id(shape)))
            if profile is None:
                try:
                    profile = _cached_profile(profile_cache, (model, shape, world_key), model, shape, scenario,
                                              num_gpus, tflops, efficiency, memory, busy, idle, pue, links)
                except JobDoesNotFit as error:
                    profile = error
                drawn[id(model), id(shape)] = profile
            return profile

        try:
            jobs = []
            for job_id, (arrival_s, model, dataset, iterations, shape) in enumerate(arrivals):
                profile = profile_of(model, shape)
                if isinstance(profile, JobDoesNotFit) and shape is not own_shapes[job_id]:
                    shape = own_shapes[job_id]  # a redrawn shape that cannot run here: the job keeps its class's
                    profile = profile_of(model, shape)
                if isinstance(profile, JobDoesNotFit):
                    raise profile
                jobs.append(_make_job(job_id, arrival_s, model, dataset, iterations, scenario, shape, profile))
            break
        except JobDoesNotFit:
            if not rand.gpu_types:
                raise
            # A mixed fleet can leave too few GPUs of a job's reference type; each type alone always fits (the
            # loader checks), so the draw is repeated: GPU types are uniform given that every job can run.
            gpus = _draw_gpu_types(rand.gpu_types, len(regions), rng)
    else:
        raise JobDoesNotFit(f"no draw of randomize.gpu_types in {MAX_GPU_TYPE_DRAWS} fitted every job of the episode")
    # Drawn last, so that a world with failures has the jobs, prices and links of the same seed without them.
    failures = None
    if scenario.failures is not None:
        failures = draw_failures(scenario.failures, gpus, num_gpus, scenario.horizon_s, rng)
    losses = None
    if scenario.capacity_loss is not None:
        losses = draw_capacity_losses(scenario.capacity_loss, len(regions), scenario.horizon_s, rng)
    degradations = None
    if net.degradation is not None:
        degradations = draw_degradations(net.degradation, bandwidth, scenario.horizon_s, rng)
    return World(
        scenario=scenario,
        num_gpus=num_gpus,
        bandwidth_gbps=bandwidth,
        latency_s=latency,
        start_hour=start_hour,
        price=HourlyIntegral(price),
        carbon=HourlyIntegral(carbon),
        jobs=tuple(jobs),
        tflops=tflops,
        kernel_efficiency=efficiency,
        busy_watts=busy,
        idle_watts=idle,
        pue=pue,
        hourly_series=not constant_price and any(
            not r.price_usd_per_kwh.is_constant or (r.carbon_g_per_kwh is not None and not r.carbon_g_per_kwh.is_constant)
            for r in regions
        ),
        failures=failures,
        capacity_losses=losses,
        degradations=degradations,
    )


@dataclass(frozen=True, slots=True, eq=False)
class _ModelProfile:
    """Everything about a model of one shape in one world that does not depend on the job's dataset or arrival."""

    num_stages: int
    activation_bytes: float
    forward_s: np.ndarray
    fits: np.ndarray
    isolated_iteration_s: float
    lower_bound_iteration_s: float
    lower_bound_stage_energy_j: float  # per stage (all replicas) and iteration, on the most frugal region type
    typical_demand_gbps: float
    isolated_power_w: float
    allreduce_s: float
    local_iteration_s: float  # on the reference region's GPUs with every boundary inside the region
    # (schedules, virtual_stages, context_parallel, backward_ratio, input_gradient, schedule_fits, link_messages)
    recipe: tuple
    # (dataset, iterations) → the first job of them: the fields of such a job but its id and arrival are a pure
    # function of the profile (and the model, shape and scenario behind it), so later ones copy it (_make_job).
    job_templates: dict = field(default_factory=dict, repr=False)


def _stage_forward_s(model, shape: JobShape, scenario, num_stages: int, tflops: float, efficiency: float) -> float:
    """A stage's forward per micro-batch on one GPU type: with ``mfu``, the end-to-end formula; without, the
    calibrated one (attention counted, the GPU type's kernel efficiency)."""
    b, s, g = shape.micro_batch_size, shape.seq_len, shape.gpus_per_stage
    if scenario.mfu is not None:
        return pipeline.forward_time_s(model.params, num_stages, b, s, tflops, scenario.mfu, g)
    return pipeline.calibrated_forward_s(model.params, model.layers, model.hidden, num_stages, b, s, tflops,
                                         efficiency, g * shape.context_parallel)


def _num_stages(model, shape: JobShape, scenario, sizing, tflops, efficiency, memory, ref_bw, ref_lat) -> int | None:
    """The job's stage count S under its sizing rule (None if no count fits the room it has)."""
    room = sizing.room_stages if shape.max_stages is None else min(shape.max_stages, sizing.room_stages)
    if shape.sizing == SIZING_FIXED:
        return shape.pipeline_stages if sizing.min_stages <= shape.pipeline_stages <= sizing.room_stages else None
    if shape.sizing == SIZING_MEMORY:
        return sizing.min_stages if sizing.min_stages <= min(room, model.layers) else None
    net = scenario.network
    ref = sizing.ref_region
    names = scenario.schedules_of(shape)
    return pipeline.optimal_stages(
        model.params, model.layers, model.hidden, shape.micro_batch_size, shape.seq_len, shape.num_microbatches,
        _stage_forward_s(model, shape, scenario, 1, tflops[ref], efficiency[ref]), memory[ref], ref_bw, ref_lat,
        shape.gpus_per_stage, names[0], room, shape.data_parallel, net.intra_bandwidth_gbps, net.intra_latency_s,
        scenario.virtual_stages_of(shape), shape.context_parallel, shape.recompute,
        pipeline.backward_ratio(scenario.mfu is None, shape.recompute), names[1:], shape.optimizer_state,
    )


def _model_profile(
    model, shape: JobShape, scenario, num_gpus, tflops, efficiency, memory, busy, idle, pue, ref_bw, ref_lat, best_bw,
    best_lat, linked,
) -> _ModelProfile:
    b, s, m, g, d = shape.micro_batch_size, shape.seq_len, shape.num_microbatches, shape.gpus_per_stage, shape.data_parallel
    c, v, recompute = shape.context_parallel, scenario.virtual_stages_of(shape), shape.recompute
    names = scenario.schedules_of(shape)
    sizing = size_job(
        model.params, model.layers, model.hidden, b, s, m, g, names[0], num_gpus, memory, tflops, linked, d, v, c,
        recompute, names[1:], shape.optimizer_state,
    )
    if sizing is None:
        raise JobDoesNotFit(f"model {model.name} fits no GPU memory in this episode")
    ref_region = sizing.ref_region
    # Never ask for more GPUs than one connected group of regions with enough memory holds.
    k_star = _num_stages(model, shape, scenario, sizing, tflops, efficiency, memory, ref_bw, ref_lat)
    if k_star is None:
        raise JobDoesNotFit(f"model {model.name} fits no connected group of regions in this episode")
    num_regions = len(num_gpus)
    schedule_fits = np.zeros((len(names), num_regions), dtype=bool)
    for i, name in enumerate(names):
        stage_bytes = pipeline.stage_memory_bytes(model.params, model.layers, model.hidden, k_star, b, s, m, name, d,
                                                  v, c, recompute, shape.optimizer_state)
        schedule_fits[i] = [pipeline.fits_memory(stage_bytes, memory[r], g * c) for r in range(num_regions)]
    fits = schedule_fits.any(axis=0)
    forward = np.array(
        [_stage_forward_s(model, shape, scenario, k_star, tflops[r], efficiency[r]) for r in range(num_regions)]
    )
    ratio = pipeline.backward_ratio(scenario.mfu is None, recompute)
    input_gradient = pipeline.input_gradient_share(model.hidden, s, ratio)
    act = pipeline.activation_bytes(b, s, model.hidden)
    net = scenario.network
    allreduce = float(
        pipeline.allreduce_time_s(model.params, k_star, g, d * c, net.intra_bandwidth_gbps, net.intra_latency_s)
    )

    def alone_s(f: float, x: float, lat: float, where: np.ndarray, bound: bool = False) -> float:
        """The fastest accepted schedule that fits ``where`` (any, if none does) on identical stages and hops; with
        ``bound``, a lower bound on it (``pipeline.recipe_lower_bound_s``)."""
        fitting = [name for name, ok in zip(names, schedule_fits) if ok[where].any()] or names
        if bound:
            return min(pipeline.recipe_lower_bound_s(f, k_star, x, lat, m, name, ratio) for name in fitting)
        return min(pipeline.recipe_uniform_s(f, k_star, x, lat, m, name, v, ratio, input_gradient) for name in fitting)

    ref_x = transfer_time_s(d * act, ref_bw)
    ref_only = np.arange(num_regions) == ref_region
    isolated = alone_s(float(forward[ref_region]), ref_x, ref_lat, ref_only) + allreduce
    # The same pipeline with every boundary inside the region: what the WAN slows a job down from.
    intra_x = transfer_time_s(pipeline.intra_message_bytes(act, c), net.intra_bandwidth_gbps)
    local = alone_s(float(forward[ref_region]), intra_x, float(net.intra_latency_s), ref_only) + allreduce
    # Lower bound: every stage on the fastest GPU it fits, every boundary on the best link (monotone model).
    fastest = float(forward[fits].min())
    # A boundary moves d·A over the WAN or A/c per link inside a region: the faster of the two bounds it.
    best_x = min(transfer_time_s(d * act, best_bw), intra_x)
    lb_iter = alone_s(fastest, best_x, best_lat, fits, bound=True) + allreduce
    busy_s = m * (1.0 + ratio) * forward
    stage_energy_j = (idle * lb_iter + (busy - idle) * busy_s) * pue * (g * c * d)  # (R,) per stage per iteration
    typical_stage_s = (1.0 + ratio) * float(np.median(forward[fits]))
    per_gpu_w = gpu_power_w(1, idle, busy, np.minimum(busy_s / isolated, 1.0), pue)  # (R,) alone, isolated pace
    isolated_power_w = float(np.median(per_gpu_w[fits])) * (int(k_star) * g * c * d)
    # The fewest messages any accepted schedule puts on a link: what a pipeline across regions would run.
    messages = min(pipeline.max_link_messages(name, int(k_star), m, v) for name in names)
    demand = rate_gbps(messages * d * act, typical_stage_s)
    for array in (forward, fits, schedule_fits):  # shared by every job of the model, and across episodes
        array.flags.writeable = False
    return _ModelProfile(
        int(k_star), act, forward, fits, isolated, lb_iter, float(stage_energy_j[fits].min()), demand,
        isolated_power_w, allreduce, local, (names, v, c, ratio, input_gradient, schedule_fits, messages),
    )


def _make_job(job_id, arrival_s, model, dataset, iterations, scenario, shape: JobShape, profile: _ModelProfile) -> Job:
    # Keyed by the dataset object's identity: the profile cache serves one scenario, which keeps its datasets alive,
    # and hashing the dataclass field by field would cost more than the copy.
    template = profile.job_templates.get((id(dataset), iterations))
    if template is None:
        job = profile.job_templates[(id(dataset), iterations)] = _build_job(
            job_id, arrival_s, model, dataset, iterations, scenario, shape, profile
        )
        return job
    return _job_like(template, job_id, float(arrival_s))


def _job_like(template: Job, job_id: int, arrival_s: float) -> Job:
    """The job ``Job(...)`` builds from ``template``'s fields with another id and arrival time (``__post_init__``
    reads neither), as a copy of the template's field dict: about 0.5 µs, where the frozen dataclass's ``__init__``
    takes about 5 µs, and a reset builds tens of jobs."""
    job = object.__new__(Job)
    fields = template.__dict__.copy()
    fields["job_id"] = job_id
    fields["arrival_s"] = arrival_s
    object.__setattr__(job, "__dict__", fields)  # the frozen class's own __setattr__ refuses every name
    return job


def _build_job(job_id, arrival_s, model, dataset, iterations, scenario, shape: JobShape, profile: _ModelProfile) -> Job:
    b, s, m, d = shape.micro_batch_size, shape.seq_len, shape.num_microbatches, shape.data_parallel
    if iterations is None:
        iterations = pipeline.iterations_for(dataset.tokens, scenario.workload.epochs, b, s, m, d)
    k_star, act, forward, fits = profile.num_stages, profile.activation_bytes, profile.forward_s, profile.fits
    names, v, c, ratio, input_gradient, schedule_fits, messages = profile.recipe
    isolated, lb_iter = profile.isolated_iteration_s, profile.lower_bound_iteration_s
    lb_energy_kwh = profile.lower_bound_stage_energy_j * k_star * iterations / JOULES_PER_KWH
    return Job(
        job_id=job_id,
        arrival_s=float(arrival_s),
        model=model.name,
        dataset=dataset.name if dataset is not None else "trace",
        params=model.params,
        layers=model.layers,
        hidden=model.hidden,
        micro_batch_size=b,
        seq_len=s,
        num_microbatches=m,
        gpus_per_stage=shape.gpus_per_stage,
        iterations=int(iterations),
        num_stages=int(k_star),
        activation_bytes=act,
        forward_s=forward,
        fits=fits,
        isolated_iteration_s=isolated,
        lower_bound_s=iterations * lb_iter,
        lower_bound_energy_kwh=lb_energy_kwh,
        typical_demand_gbps=profile.typical_demand_gbps,
        isolated_power_w=profile.isolated_power_w,
        local_iteration_s=profile.local_iteration_s,
        data_parallel=d,
        allreduce_s=profile.allreduce_s,
        schedules=names,
        virtual_stages=v,
        context_parallel=c,
        backward_ratio=ratio,
        input_gradient=input_gradient,
        schedule_fits=schedule_fits,
        link_messages=messages,
        optimizer_state=shape.optimizer_state,
    )
