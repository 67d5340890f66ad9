"""Layer 4: the event-driven cluster simulator.

``ClusterSim`` holds one episode's runtime state: the clock, free GPUs, waiting and running jobs, link loads and
the energy / cost / carbon accumulators. It advances from event to event (arrivals, completions, hour ticks);
between events every rate is constant, so progress and integrals are exact. It knows nothing about policies,
actions or observations: the env (layer 6) asks it to ``launch`` or to ``advance``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from geopipe_env.engine import Event, EventKind, EventQueue
from geopipe_env.generator import Job, World
from geopipe_env.physics import pipeline, schedule
from geopipe_env.physics.energy import energy_kwh, gpu_power_w
from geopipe_env.physics.network import is_stalled, max_min_fair
from geopipe_env import units
from geopipe_env.units import GRAMS_PER_KG, SECONDS_PER_HOUR, WATTS_PER_KW, transfer_time_s


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

    def __post_init__(self) -> None:
        pairs = zip(self.regions[:-1], self.regions[1:])
        object.__setattr__(self, "links", tuple(link for a, b in pairs for link in ((a, b), (b, a))))

    @property
    def num_wan_hops(self) -> int:
        return len(self.regions) - 1

    def wan_links(self) -> tuple[tuple[int, int], ...]:
        """Directed links used: each hop forward (activations) and backward (gradients)."""
        return self.links


class InfeasiblePlacement(ValueError):
    """A placement that cannot be launched now (not enough GPUs, memory, or a missing link)."""


@dataclass(frozen=True, slots=True, eq=False)
class Layout:
    """A placement's per-stage and per-boundary times at the current line rates, and its no-stall demand."""

    forward_s: np.ndarray  # (S,)
    hop_transfer_s: np.ndarray  # (S−1,)
    hop_latency_s: np.ndarray  # (S−1,)
    wan_hop_index: np.ndarray  # positions of the WAN hops among the S−1 boundaries
    demand_gbps: float


@dataclass(slots=True)
class RunningJob:
    """Mutable state of a job while it runs."""

    job: Job
    placement: Placement
    gpus: np.ndarray  # (R,) GPUs held per region
    layout: Layout  # refreshed when line rates change
    remaining_iters: float
    rate_gbps: float = 0.0
    iteration_s: float = 0.0
    stalled: bool = False
    version: int = 0
    power_w: np.ndarray | None = None  # (R,)
    wan_bytes_per_s: float = 0.0

    @property
    def demand_gbps(self) -> float:
        return self.layout.demand_gbps


@dataclass(frozen=True, slots=True)
class Estimate:
    """What launching a placement now would give, on the current network load."""

    iteration_s: float
    duration_s: float
    rate_gbps: float
    demand_gbps: float
    stalled: bool
    power_w: np.ndarray  # (R,)


class ClusterSim:
    """One episode of the geo-distributed cluster."""

    def __init__(self, world: World, exact_timing: bool = False) -> None:
        self.world = world
        self.exact_timing = exact_timing
        sc = world.scenario
        n_jobs = len(world.jobs)
        self.now_s = 0.0
        self.free_gpus = world.num_gpus.copy()
        self.status = np.full(n_jobs, JobStatus.PENDING, dtype=np.int8)
        self.start_s = np.full(n_jobs, np.nan)
        self.finish_s = np.full(n_jobs, np.nan)
        self.ever_stalled = np.zeros(n_jobs, dtype=bool)
        self.waiting: list[int] = []  # job ids in arrival order
        self.running: dict[int, RunningJob] = {}
        self.placements: dict[int, Placement] = {}
        self.energy_kwh = 0.0
        self.cost_usd = 0.0
        self.carbon_kg = 0.0
        self.wan_bytes = 0.0
        self.gpu_seconds = 0.0  # allocated GPU·s
        self.job_seconds = 0.0  # Σ over jobs in system of time: the JCT integral
        self.region_power_w = np.zeros(world.num_regions)
        self.link_load_gbps = np.zeros((world.num_regions, world.num_regions))
        # (time_s, allocated GPUs per region) after every launch and completion, for plots and audits.
        self.gpu_timeline: list[tuple[float, np.ndarray]] = [(0.0, np.zeros(world.num_regions, dtype=np.int64))]
        self._events = EventQueue()
        for job in world.jobs:
            self._events.push(job.arrival_s, Event(EventKind.ARRIVAL, job.job_id))
        self._time_varying = sc.network.background is not None or any(
            not r.price_usd_per_kwh.is_constant or (r.carbon_g_per_kwh is not None and not r.carbon_g_per_kwh.is_constant)
            for r in sc.regions
        )
        if self._time_varying:
            self._events.push(SECONDS_PER_HOUR, Event(EventKind.HOUR_TICK))
        self.capacity_gbps = self._capacity_at(0.0)
        self._capacity_version = 0  # bumps when background traffic changes capacities
        # (job profile, placement, rate, capacity version) → (iteration_s, power_w): timing is pure in these,
        # and every job of one model in a world shares its profile.
        self._timing_cache: dict[tuple, tuple[float, np.ndarray]] = {}
        # (job profile, placement, capacity version) → stage arrays and demand (read-only; never mutated).
        self._layout_cache: dict[tuple, Layout] = {}
        self._idle_power_w = world.idle_watts * world.pue  # per unallocated GPU, billed if the scenario says so

    # ------------------------------------------------------------------ time
    def _capacity_at(self, t_s: float) -> np.ndarray:
        bg = self.world.scenario.network.background
        if bg is None:
            return self.world.bandwidth_gbps
        hour = self.world.start_hour + t_s / SECONDS_PER_HOUR
        return self.world.bandwidth_gbps * (1.0 - bg.fraction_at(hour))

    @property
    def done(self) -> bool:
        return len(self.running) == 0 and len(self.waiting) == 0 and not self._pending_arrivals()

    def _pending_arrivals(self) -> bool:
        return bool((self.status == JobStatus.PENDING).any())

    def next_event_s(self) -> float:
        return self._events.peek()

    def advance_to(self, t_s: float) -> None:
        """Integrate progress, energy, cost and carbon from ``now`` to ``t_s`` (no event may lie between)."""
        dt = t_s - self.now_s
        if dt <= 0.0:
            return
        w = self.world
        for rj in self.running.values():
            rj.remaining_iters -= dt / rj.iteration_s
            self.wan_bytes += rj.wan_bytes_per_s * dt
        power = self.region_power_w
        if w.scenario.bill_idle_capacity:
            power = power + self.free_gpus * self._idle_power_w
        kw = power / WATTS_PER_KW
        self.energy_kwh += energy_kwh(float(power.sum()), dt)
        self.cost_usd += float(kw @ w.price.integral(self.now_s, t_s))
        self.carbon_kg += float(kw @ w.carbon.integral(self.now_s, t_s)) / GRAMS_PER_KG
        allocated = w.num_gpus - self.free_gpus
        self.gpu_seconds += float(allocated.sum()) * dt
        self.job_seconds += (len(self.waiting) + len(self.running)) * dt
        self.now_s = t_s

    def step_event(self) -> bool:
        """Advance to the next event and process every event at that instant. False if none is left."""
        t = self._events.peek()
        if t == float("inf"):
            return False
        self.advance_to(t)
        changed = False
        while self._events.peek() == t:
            _, ev = self._events.pop()
            changed |= self._handle(ev)
        if changed:
            self._recompute_rates()
        return True

    def _handle(self, ev: Event) -> bool:
        """Apply one event; True if link rates need recomputing."""
        if ev.kind == EventKind.ARRIVAL:
            self.status[ev.job_id] = JobStatus.WAITING
            self.waiting.append(ev.job_id)
            return False
        if ev.kind == EventKind.COMPLETION:
            rj = self.running.get(ev.job_id)
            if rj is None or rj.version != ev.version:
                return False  # superseded by a later rate change
            self._finish(rj)
            return True
        # Hour tick: prices change (read lazily from the series); background traffic changes capacities.
        self._events.push(self.now_s + SECONDS_PER_HOUR, Event(EventKind.HOUR_TICK))
        if self.world.scenario.network.background is not None:
            self.capacity_gbps = self._capacity_at(self.now_s)
            self._capacity_version += 1
            return True
        return False

    def _finish(self, rj: RunningJob) -> None:
        jid = rj.job.job_id
        del self.running[jid]
        self.free_gpus += rj.gpus
        self.status[jid] = JobStatus.DONE
        self.finish_s[jid] = self.now_s
        self.gpu_timeline.append((self.now_s, self.world.num_gpus - self.free_gpus))

    # ------------------------------------------------------------------ placement physics
    def layout(self, job: Job, placement: Placement) -> Layout:
        """The placement's :class:`Layout` at the current capacities (memoised)."""
        key = (job.profile_key, placement, self._capacity_version)
        cached = self._layout_cache.get(key)
        if cached is None:
            forward, transfer, latency, wan_pos = self._stage_arrays(job, placement)
            for array in (forward, transfer, latency, wan_pos):
                array.flags.writeable = False
            cached = self._layout_cache[key] = Layout(forward, transfer, latency, wan_pos, self.demand_gbps(job, forward))
        return cached

    def _stage_arrays(self, job: Job, placement: Placement) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-stage forward times and per-boundary transfer/latency at line rate, plus WAN hop positions."""
        regions = np.asarray(placement.regions)
        stages = np.asarray(placement.stages)
        forward = np.repeat(job.forward_s[regions], stages)
        n_hops = forward.shape[0] - 1
        net = self.world.scenario.network
        transfer = np.full(n_hops, transfer_time_s(job.activation_bytes, net.intra_bandwidth_gbps))
        latency = np.full(n_hops, net.intra_latency_s)
        wan_pos = np.cumsum(stages)[:-1] - 1
        for k, (a, b) in enumerate(zip(placement.regions[:-1], placement.regions[1:])):
            transfer[wan_pos[k]] = transfer_time_s(job.activation_bytes, self.capacity_gbps[a, b])
            latency[wan_pos[k]] = self.world.latency_s[a, b]
        return forward, transfer, latency, wan_pos

    def _timing(
        self, job: Job, placement: Placement, forward: np.ndarray, transfer: np.ndarray, latency: np.ndarray, rate_gbps: float
    ) -> tuple[float, np.ndarray]:
        """Iteration time at a given per-hop rate, and the resulting facility power per region (memoised)."""
        key = (job.profile_key, placement, rate_gbps, self._capacity_version)
        cached = self._timing_cache.get(key)
        if cached is None:
            cached = self._timing_cache[key] = self._compute_timing(job, placement, forward, transfer, latency, rate_gbps)
        return cached

    def _compute_timing(
        self, job: Job, placement: Placement, forward: np.ndarray, transfer: np.ndarray, latency: np.ndarray, rate_gbps: float
    ) -> tuple[float, np.ndarray]:
        backward = pipeline.BACKWARD_TO_FORWARD * forward
        min_cadence = 0.0
        if placement.num_wan_hops and rate_gbps > 0.0:
            min_cadence = transfer_time_s(job.activation_bytes, rate_gbps)
        schedule_name = self.world.scenario.pipeline_schedule
        if self.exact_timing:
            # The schedule table with each WAN hop's messages serialised at the job's allocated rate.
            transfer = transfer.copy()
            if min_cadence > 0.0:
                wan = np.cumsum(placement.stages)[:-1] - 1
                transfer[wan] = np.maximum(transfer[wan], min_cadence)
            t_iter = schedule.simulate_schedule(forward, backward, transfer, latency, job.num_microbatches, schedule_name).total_s
        else:
            t_iter = pipeline.iteration_time(
                forward, backward, transfer, latency, job.num_microbatches, schedule_name, min_cadence
            ).total_s
        w = self.world
        power = np.zeros(w.num_regions)
        g = job.gpus_per_stage
        for r, n in zip(placement.regions, placement.stages):
            busy = job.num_microbatches * (1.0 + pipeline.BACKWARD_TO_FORWARD) * job.forward_s[r] / t_iter
            power[r] = gpu_power_w(n * g, w.idle_watts[r], w.busy_watts[r], busy, w.pue[r])
        return t_iter, power

    def demand_gbps(self, job: Job, forward: np.ndarray) -> float:
        """Rate per WAN hop below which communication stalls this pipeline."""
        backward = pipeline.BACKWARD_TO_FORWARD * forward
        cadence = pipeline.demand_cadence_s(forward, backward, self.world.scenario.pipeline_schedule)
        return units.rate_gbps(job.activation_bytes, cadence)

    def check_placement(self, job: Job, placement: Placement) -> str | None:
        """Why ``placement`` cannot be launched for ``job`` now, or None if it can."""
        if self.status[job.job_id] != JobStatus.WAITING:
            return "job is not waiting"
        if len(set(placement.regions)) != len(placement.regions) or not placement.regions:
            return "regions must be a non-empty path of distinct regions"
        if sum(placement.stages) != job.num_stages or min(placement.stages) < 1:
            return f"stages must be positive and sum to K*={job.num_stages}"
        for r, n in zip(placement.regions, placement.stages):
            if not job.fits[r]:
                return f"a stage does not fit GPU memory in region {r}"
            if n * job.gpus_per_stage > self.free_gpus[r]:
                return f"region {r} has {self.free_gpus[r]} free GPUs, needs {n * job.gpus_per_stage}"
        for a, b in zip(placement.regions[:-1], placement.regions[1:]):
            if self.world.bandwidth_gbps[a, b] <= 0.0:
                return f"no link between regions {a} and {b}"
        return None

    def estimate(self, job: Job, placement: Placement) -> Estimate:
        """Iteration time and power if ``placement`` launched now and got the bandwidth left on its links."""
        lay = self.layout(job, placement)
        demand = lay.demand_gbps
        rate = demand
        if placement.num_wan_hops:
            spare = min(
                max(self.capacity_gbps[a, b] - self.link_load_gbps[a, b], 0.0) for a, b in placement.wan_links()
            )
            rate = min(demand, spare)
        if rate <= 0.0:
            return Estimate(float("inf"), float("inf"), 0.0, demand, True, np.zeros(self.world.num_regions))
        t_iter, power = self._timing(job, placement, lay.forward_s, lay.hop_transfer_s, lay.hop_latency_s, rate)
        return Estimate(t_iter, t_iter * job.iterations, rate, demand, is_stalled(rate, demand), power)

    # ------------------------------------------------------------------ actions
    def launch(self, job_id: int, placement: Placement) -> None:
        """Start ``job_id`` on ``placement`` now. Raises :class:`InfeasiblePlacement` and changes nothing if it cannot."""
        job = self.world.jobs[job_id]
        why = self.check_placement(job, placement)
        if why is not None:
            raise InfeasiblePlacement(why)
        gpus = np.zeros(self.world.num_regions, dtype=np.int64)
        for r, n in zip(placement.regions, placement.stages):
            gpus[r] = n * job.gpus_per_stage
        rj = RunningJob(
            job=job, placement=placement, gpus=gpus, layout=self.layout(job, placement), remaining_iters=float(job.iterations)
        )
        self.free_gpus -= gpus
        self.waiting.remove(job_id)
        self.status[job_id] = JobStatus.RUNNING
        self.start_s[job_id] = self.now_s
        self.running[job_id] = rj
        self.placements[job_id] = placement
        self.gpu_timeline.append((self.now_s, self.world.num_gpus - self.free_gpus))
        self._recompute_rates()

    def _recompute_rates(self) -> None:
        """Max-min fair rates for all running jobs on all directed links, then timing, power and completions."""
        jobs = list(self.running.values())
        links: dict[tuple[int, int], int] = {}
        for rj in jobs:
            for link in rj.placement.wan_links():
                links.setdefault(link, len(links))
        self.link_load_gbps = np.zeros_like(self.link_load_gbps)
        if links:
            usage = np.zeros((len(jobs), len(links)))
            for j, rj in enumerate(jobs):
                for link in rj.placement.wan_links():
                    usage[j, links[link]] += 1.0
            cap = np.array([self.capacity_gbps[a, b] for a, b in links])
            rates = max_min_fair(np.array([rj.demand_gbps for rj in jobs]), usage, cap)
            load = usage.T @ rates
            for (a, b), idx in links.items():
                self.link_load_gbps[a, b] = load[idx]
        else:
            rates = np.array([rj.demand_gbps for rj in jobs])
        self.region_power_w = np.zeros(self.world.num_regions)
        for rj, rate in zip(jobs, rates):
            job = rj.job
            rj.layout = lay = self.layout(job, rj.placement)  # line rates may have changed
            t_iter, power = self._timing(job, rj.placement, lay.forward_s, lay.hop_transfer_s, lay.hop_latency_s, float(rate))
            rj.rate_gbps = float(rate)
            rj.stalled = bool(rj.placement.num_wan_hops) and is_stalled(float(rate), rj.demand_gbps)
            self.ever_stalled[job.job_id] |= rj.stalled
            rj.power_w = power
            self.region_power_w += power
            per_iter_bytes = 2.0 * job.num_microbatches * job.activation_bytes * rj.placement.num_wan_hops
            rj.wan_bytes_per_s = per_iter_bytes / t_iter
            if t_iter != rj.iteration_s:
                rj.iteration_s = t_iter
                rj.version += 1
                finish = self.now_s + max(rj.remaining_iters, 0.0) * t_iter
                self._events.push(finish, Event(EventKind.COMPLETION, job.job_id, rj.version))
