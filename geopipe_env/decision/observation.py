"""Layer 5: the observation encoder.

Every array is flat (1-D), as SB3's ``MultiInputPolicy`` expects; reshape with :func:`obs_layout` to recover the
tables: ``regions`` (a row per region, up to max_regions), ``links`` (max_regions² rows, row ``i·max_regions + j``
link i→j), ``queue`` (Q rows), ``candidates`` (Q·K rows, row ``a = slot·K + k`` describing action ``a``) and
``global`` (one row).
Every column is declared, with its meaning, in :mod:`geopipe_env.base.tables`.

:class:`ObservationEncoder` writes an observation from a compiled candidate table's arrays, in compiled code
(:meth:`~ObservationEncoder.encode_table`). Its specification, ``encode_rows`` in ``tests/reference.py``, writes it
from candidate rows (:class:`~geopipe_env.simulation.core_types.CandidateInfo`); the two give equal observations
(``tests/test_tables.py`` compares every declared feature).

Every feature is scale-free (a ratio, a log-ratio or a normalised value) so that a policy trained on one
scenario reads another with at most ``max_regions`` regions. Shapes are fixed; absent rows are zero with a zero
``present`` flag.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping

import numpy as np
from gymnasium import spaces

from geopipe_env.base import tables
from geopipe_env.decision.candidate_kernels import candidate_features
from geopipe_env.base.compiled import jit, pairwise_sum
from geopipe_env.simulation.core_types import World, fields_key
from geopipe_env.physics.schedule import MAX_SCHEDULES, SCHEDULE_CODE_SCALE, spec
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.base.tables import (
    CO_CANDIDATE_F, CO_CANDIDATE_LENGTH, CO_CANDIDATE_OF, EE_CONSTANTS_F, EE_CONSTANTS_I,
    EE_HOURLY, EE_JOB_TABLE, EE_TEMPLATE, ES_FREE_GPUS, ES_GAP_S, ES_HOUR, ES_IN_SERVICE, ES_LINK_LOAD, ES_LOST_S,
    ES_NOW_S, ES_NUM_RUNNING, ES_NUM_WAITING, ES_UTILIZATION_BASE, ES_WORK_LEFT, JOB_SCHEDULES,
    F_C_REF, F_CARBON_REF, F_HORIZON, F_NUM_JOBS, F_NUM_LINKS, F_START_HOUR, F_T_LOCAL, F_TIME_SCALE,
    F_TOTAL_GPUS, G_GPU_UTILIZATION, G_HOUR_COS, G_HOUR_SIN, G_MEAN_LINK_UTILIZATION, G_QUEUE_BEYOND_WINDOW,
    G_RUNNING_JOBS, G_TIME_FRACTION, G_TIME_SCALE, G_WAIT_GAP, I_CANDIDATES_AT, I_GLOBAL_AT, I_LINKS_AT, I_QUEUE_AT,
    I_REGIONS, I_REGIONS_AT, JOB_ARRIVAL, JOB_LOCAL_DURATION, JOB_LOCAL_ITERATION, JOB_LOG_DEMAND, JOB_SHARE,
    L_CAPACITY, L_LATENCY, L_UTILIZATION, Q_CAN_START, Q_LOG_BANDWIDTH_DEMAND, Q_LOG_LOCAL_DURATION, Q_LOST_WORK,
    Q_PRESENT, Q_STAGES_SHARE, Q_WAITING_TIME, R_CARBON, R_FREE_GPU_FRACTION, R_GPUS_SHARE, R_IN_SERVICE,
    R_LINK_UTILIZATION, R_PRESENT, R_PRICE_FORECAST, R_PRICE_NOW, R_PUE_EXCESS,
)
from geopipe_env.base.units import SECONDS_PER_HOUR

OBS_CLIP = 100.0
FORECAST_H = 6  # the price forecast feature averages the next 6 hours, this one included (perfect foresight)
# The feature names of each table, in order (declared with their meanings in geopipe_env.base.tables).
REGION_FEATURES = tables.REGION_FEATURES.names
LINK_FEATURES = tables.LINK_FEATURES.names
QUEUE_FEATURES = tables.QUEUE_FEATURES.names
CANDIDATE_FEATURES = tables.CANDIDATE_FEATURES.names
GLOBAL_FEATURES = tables.GLOBAL_FEATURES.names
# What the encoder's per-world constants read of a world (with the table sizes, the key of their cache).
ENCODER_WORLD_FIELDS = ("num_gpus", "bandwidth_gbps", "latency_s", "pue", "scenario.network.intra_bandwidth_gbps")
# The encoder's hourly table (H, R, 3): the regions table's price now, price forecast and carbon, per hour.
HOURLY_PRICE, HOURLY_FORECAST, HOURLY_CARBON = range(3)


def obs_layout(max_regions: int, queue_slots: int, num_strategies: int) -> dict[str, tuple[int, ...]]:
    """The table shape behind each flat observation key."""
    return {
        "regions": (max_regions, len(REGION_FEATURES)),
        "links": (max_regions * max_regions, len(LINK_FEATURES)),
        "queue": (queue_slots, len(QUEUE_FEATURES)),
        "candidates": (queue_slots * num_strategies, len(CANDIDATE_FEATURES)),
        "global": (len(GLOBAL_FEATURES),),
    }


def observation_space(max_regions: int, queue_slots: int, num_strategies: int) -> spaces.Dict:
    layout = obs_layout(max_regions, queue_slots, num_strategies)
    return spaces.Dict(
        {
            key: spaces.Box(-OBS_CLIP, OBS_CLIP, shape=(int(np.prod(shape)),), dtype=np.float32)
            for key, shape in layout.items()
        }
    )


PRICE_SCALE_FLOOR = 1e-9  # USD/kWh: the least mean absolute price a price is normalised by


@jit
def _normalised_into(values: np.ndarray, column: int, out: np.ndarray) -> None:
    """``out[:, :, column]`` = the (R, H) ``values`` relative to the regions' mean absolute value in each hour (real
    prices can be negative), transposed, in float32; the mean adds the rows in order, then divides by their
    count, as numpy's mean over the regions axis does (``reference.normalise_prices``)."""
    num_regions, num_hours = values.shape
    scale = np.empty(num_hours)
    for h in range(num_hours):
        scale[h] = abs(values[0, h])
    for r in range(1, num_regions):
        for h in range(num_hours):
            scale[h] += abs(values[r, h])
    for h in range(num_hours):
        scale[h] = max(scale[h] / num_regions, PRICE_SCALE_FLOOR)
        for r in range(num_regions):
            out[h, r, column] = values[r, h] / scale[h]


@jit
def hourly_features(price: np.ndarray, prefix_h: np.ndarray, carbon: np.ndarray, carbon_scale: float,
                    out: np.ndarray) -> None:
    """The regions table's per-hour columns into ``out`` (H, R, 3) float32: each hour's price, and its mean over the
    next ``FORECAST_H`` hours (this one included; fewer where the series ends), both normalised across regions
    (:func:`_normalised_into`), and carbon ÷ ``carbon_scale``. ``price`` and ``carbon`` are (R, H), ``prefix_h``
    (R, H + 1) the price's prefix sums (``HourlyIntegral.prefix_h``). The same floats as numpy's whole-array
    version (``reference.hourly_features``), in about a third of its time (39 against 106 µs on GeoPipe-v0's 722
    hours)."""
    num_regions, num_hours = price.shape
    forecast = np.empty((num_regions, num_hours))
    for r in range(num_regions):
        for h in range(num_hours):
            end = min(h + FORECAST_H, num_hours)
            forecast[r, h] = (prefix_h[r, end] - prefix_h[r, h]) / (end - h)
    _normalised_into(price, HOURLY_PRICE, out)
    _normalised_into(forecast, HOURLY_FORECAST, out)
    for h in range(num_hours):
        for r in range(num_regions):
            out[h, r, HOURLY_CARBON] = carbon[r, h] / carbon_scale


NUM_HEADER_INTS = len(tables.ENCODER_INTS)  # where the encoder's variable-width ints start


@jit
def _encode_compiled(episode, state, slot_jobs, table, out) -> None:
    """The observation of a compiled candidate table (its specification: ``encode_rows`` in ``tests/reference.py``)
    into the flat float32 ``out``,
    operation for operation (numpy's pairwise sums included), so the two observations are equal.

    ``episode`` (``tables.ENCODER_EPISODE``) holds the episode's constants (``tables.ENCODER_INTS``,
    ``ENCODER_FLOATS``), the regions' price, forecast and carbon features per hour, and the per-job table
    (``tables.ENCODER_JOBS``); ``state`` (``tables.ENCODER_STATE``) the cluster at the decision, the hour whose
    features apply and the time a wait would skip (:meth:`ObservationEncoder._gap_s`); ``slot_jobs`` the visible
    jobs' ids, and ``table`` the candidate table (``tables.CANDIDATE_OUTPUT``).
    """
    template, constants_i, constants_f = episode[EE_TEMPLATE], episode[EE_CONSTANTS_I], episode[EE_CONSTANTS_F]
    hourly, job_table = episode[EE_HOURLY], episode[EE_JOB_TABLE]
    now_s, hour, free_gpus = state[ES_NOW_S], state[ES_HOUR], state[ES_FREE_GPUS]
    link_load, capacity = state[ES_LINK_LOAD], state[ES_UTILIZATION_BASE]
    num_waiting, num_running, gap_s = state[ES_NUM_WAITING], state[ES_NUM_RUNNING], state[ES_GAP_S]
    in_service, work_left, lost_s = state[ES_IN_SERVICE], state[ES_WORK_LEFT], state[ES_LOST_S]
    candidate_of, candidate_f = table[CO_CANDIDATE_OF], table[CO_CANDIDATE_F]
    candidate_length = table[CO_CANDIDATE_LENGTH]
    out[:] = template
    n = constants_i[I_REGIONS]
    region_at, links_at, queue_at = constants_i[I_REGIONS_AT], constants_i[I_LINKS_AT], constants_i[I_QUEUE_AT]
    candidate_at, global_at = constants_i[I_CANDIDATES_AT], constants_i[I_GLOBAL_AT]
    at = NUM_HEADER_INTS
    util_index, linked = constants_i[at:at + n * n], constants_i[at + n * n:at + 2 * n * n]
    at += 2 * n * n
    num_gpus, out_links = constants_i[at:at + n], constants_i[at + n:at + 2 * n]
    t_local_s, num_jobs, total_gpus = constants_f[F_T_LOCAL], constants_f[F_NUM_JOBS], constants_f[F_TOTAL_GPUS]
    start_hour, horizon_s, num_links = constants_f[F_START_HOUR], constants_f[F_HORIZON], constants_f[F_NUM_LINKS]
    c_ref_usd, carbon_ref_kg = constants_f[F_C_REF], constants_f[F_CARBON_REF]
    queue_slots, num_strategies = candidate_of.shape
    region_rows = out[region_at:links_at].reshape((-1, len(REGION_FEATURES)))
    queue_rows = out[queue_at:candidate_at].reshape((queue_slots, len(QUEUE_FEATURES)))
    candidate_rows = out[candidate_at:global_at].reshape((queue_slots * num_strategies, len(CANDIDATE_FEATURES)))
    util = np.zeros((n, n))
    out_util = np.empty(n)
    for i in range(n):
        for j in range(n):
            if linked[i * n + j]:
                util[i, j] = link_load[i, j] / capacity[i, j]
            out[util_index[i * n + j]] = util[i, j]
        out_util[i] = pairwise_sum(util[i], n)
    for i in range(n):
        row = region_rows[i]
        row[R_FREE_GPU_FRACTION] = free_gpus[i] / num_gpus[i]
        row[R_PRICE_NOW] = hourly[hour, i, HOURLY_PRICE]
        row[R_PRICE_FORECAST] = hourly[hour, i, HOURLY_FORECAST]
        row[R_CARBON] = hourly[hour, i, HOURLY_CARBON]
        row[R_LINK_UTILIZATION] = out_util[i] / out_links[i]
        row[R_IN_SERVICE] = in_service[i] / num_gpus[i]
    num_slots = slot_jobs.shape[0]
    can_start = np.zeros(queue_slots)
    slot_local_iteration_s = np.empty(num_slots)
    slot_schedules = np.empty((num_slots, MAX_SCHEDULES))
    for slot in range(num_slots):
        slot_local_iteration_s[slot] = job_table[slot_jobs[slot], JOB_LOCAL_ITERATION]
        slot_schedules[slot] = job_table[slot_jobs[slot], JOB_SCHEDULES:JOB_SCHEDULES + MAX_SCHEDULES]
    wan_scale = max(n - 1, 1)
    candidate_features(candidate_of[:num_slots], candidate_f, candidate_length, slot_local_iteration_s,
                       slot_schedules, t_local_s, c_ref_usd, float(wan_scale), carbon_ref_kg, candidate_rows, can_start)
    for slot in range(num_slots):
        j = slot_jobs[slot]
        job = job_table[j]
        row = queue_rows[slot]
        row[Q_PRESENT] = 1.0
        row[Q_STAGES_SHARE] = job[JOB_SHARE]
        local_left_s = max(work_left[j], 1.0) * job[JOB_LOCAL_ITERATION]
        row[Q_LOG_LOCAL_DURATION] = np.log(local_left_s / t_local_s)
        row[Q_LOG_BANDWIDTH_DEMAND] = job[JOB_LOG_DEMAND]
        row[Q_WAITING_TIME] = (now_s - job[JOB_ARRIVAL]) / t_local_s
        row[Q_CAN_START] = can_start[slot]
        row[Q_LOST_WORK] = lost_s[j] / job[JOB_LOCAL_DURATION]
    hour_of_day = (start_hour + now_s / SECONDS_PER_HOUR) % 24.0
    allocated = total_gpus - float(free_gpus.sum())
    mean_util = pairwise_sum(out_util, n) / num_links if num_links else 0.0
    out[global_at + G_HOUR_SIN] = np.sin(2 * np.pi * hour_of_day / 24.0)
    out[global_at + G_HOUR_COS] = np.cos(2 * np.pi * hour_of_day / 24.0)
    out[global_at + G_QUEUE_BEYOND_WINDOW] = max(num_waiting - queue_slots, 0) / queue_slots
    out[global_at + G_RUNNING_JOBS] = num_running / max(num_jobs, 1.0)
    out[global_at + G_GPU_UTILIZATION] = allocated / total_gpus
    out[global_at + G_TIME_FRACTION] = now_s / horizon_s
    out[global_at + G_MEAN_LINK_UTILIZATION] = mean_util
    out[global_at + G_WAIT_GAP] = min(math.log1p(max(gap_s, 0.0) / t_local_s), OBS_CLIP)
    out[global_at + G_TIME_SCALE] = constants_f[F_TIME_SCALE]
    for i in range(out.shape[0]):  # np.minimum / np.maximum: a NaN stays NaN
        if out[i] > OBS_CLIP:
            out[i] = OBS_CLIP
        elif out[i] < -OBS_CLIP:
            out[i] = -OBS_CLIP


def schedule_code(name: str) -> float:
    """A pipeline schedule as the observation gives it (``tables.CAND_SCHEDULE``): its stable code in the registry
    (``physics.schedule.SPECS``) ÷ ``SCHEDULE_CODE_SCALE``, from 0 (gpipe) to 1 (crosspipe-greedy)."""
    return spec(name).code / SCHEDULE_CODE_SCALE


class ObservationEncoder:
    """Builds observations for one episode; per-episode constants are computed once in ``__init__``."""

    def __init__(
        self,
        world: World,
        max_regions: int,
        queue_slots: int,
        num_strategies: int,
        t_local_s: float,
        t_ref_s: float,
        c_ref_usd: float,
        carbon_ref_kg: float,
        world_constants: MutableMapping | None = None,
    ) -> None:
        """``world_constants`` (optional, owned by the caller: a bounded cache such as ``caches.BoundedDict(1)``)
        keeps the constants of the last worlds' physics across episodes: pass the same one only to encoders of one
        scenario. ``t_local_s`` is the time scale of the duration features (``tables.QUEUE_FEATURES``): the jobs' mean
        in-region duration (``GeoPipeEnv.t_local_s``); ``t_ref_s`` the reward's (``GeoPipeEnv.t_ref_s``), which the
        global feature ``time_scale`` relates to it."""
        self.world = world
        self.max_regions = max_regions
        self.queue_slots = queue_slots
        self.num_strategies = num_strategies
        self.t_local_s = t_local_s
        self.t_ref_s = t_ref_s
        self.c_ref_usd = c_ref_usd
        self.carbon_ref_kg = max(carbon_ref_kg, 1e-9)
        n = world.num_regions
        key = (fields_key(world, ENCODER_WORLD_FIELDS), max_regions, queue_slots, num_strategies)
        constants = None if world_constants is None else world_constants.get(key)
        if constants is None:
            constants = self._world_constants(world, max_regions, queue_slots, num_strategies)
            if world_constants is not None:
                world_constants[key] = constants
        (self.total_gpus, self.max_bw, self.median_bw, self.max_lat, self._keys, self._slices, self._shapes,
         self._template, self._linked, self._num_links, self._out_links, self._util_index, self._constants_i) = constants
        carbon_mean = float(np.abs(world.carbon.values).mean())
        self.carbon_scale = carbon_mean if carbon_mean > 0 else 1.0
        # (H, R, 3): per hour, the regions table's price now and its mean over the next FORECAST_H hours, each
        # normalised across regions, and carbon (HOURLY_* columns).
        num_hours = world.price.values.shape[1]
        self._hourly = np.empty((num_hours, n, 3), dtype=np.float32)
        hourly_features(world.price.values, world.price.prefix_h, world.carbon.values, self.carbon_scale, self._hourly)
        self._last_hour = num_hours - 1
        # Per job (tables.ENCODER_JOBS), the queue features that do not change while it waits (as the specification
        # computes them), its arrival and its in-region iteration time and duration.
        jobs = world.jobs
        self._job_table = np.zeros((len(jobs), JOB_SCHEDULES + MAX_SCHEDULES))
        self._job_table[:, JOB_SHARE] = [job.num_gpus / self.total_gpus for job in jobs]
        self._job_table[:, JOB_LOG_DEMAND] = [math.log(job.typical_demand_gbps / self.median_bw) for job in jobs]
        self._job_table[:, JOB_ARRIVAL] = [job.arrival_s for job in jobs]
        self._job_table[:, JOB_LOCAL_ITERATION] = [job.local_iteration_s for job in jobs]
        self._job_table[:, JOB_LOCAL_DURATION] = [job.local_duration_s for job in jobs]
        for row, job in zip(self._job_table, jobs):
            row[JOB_SCHEDULES:JOB_SCHEDULES + len(job.schedules)] = [schedule_code(name) for name in job.schedules]
        self._capacity: tuple = (None, None)  # (the simulator's capacity array, it with zeros replaced by 1)
        self._constants_f = np.empty(len(tables.ENCODER_FLOATS))  # the compiled encoder's (tables.ENCODER_FLOATS)
        self._constants_f[[F_T_LOCAL, F_NUM_JOBS, F_TOTAL_GPUS, F_START_HOUR, F_HORIZON, F_NUM_LINKS, F_C_REF,
                           F_CARBON_REF, F_TIME_SCALE]] = (
            t_local_s, len(jobs), self.total_gpus, world.start_hour, world.horizon_s, self._num_links, c_ref_usd,
            self.carbon_ref_kg, math.log(t_ref_s / t_local_s))
        self._episode = tables.ENCODER_EPISODE.pack(template=self._template, constants_i=self._constants_i,
                                                    constants_f=self._constants_f, hourly=self._hourly,
                                                    job_table=self._job_table)

    @staticmethod
    def _world_constants(world: World, max_regions: int, queue_slots: int, num_strategies: int) -> tuple:
        """What the encoder holds that depends only on the world's ENCODER_WORLD_FIELDS and the table sizes;
        read-only once built."""
        n = world.num_regions
        total_gpus = float(world.num_gpus.sum())
        bw = world.bandwidth_gbps
        max_bw = max(float(bw.max(initial=0.0)), 1e-9)
        median_bw = float(np.median(bw[bw > 0])) if (bw > 0).any() else world.scenario.network.intra_bandwidth_gbps
        lat = world.latency_s[bw > 0]
        max_lat = max(float(lat.max()), 1e-9) if lat.size else 1.0
        layout = obs_layout(max_regions, queue_slots, num_strategies)
        keys = ("regions", "links", "queue", "candidates", "global")
        ends = np.cumsum([int(np.prod(layout[k])) for k in keys])
        slices = [slice(int(a), int(b)) for a, b in zip(np.r_[0, ends[:-1]], ends)]
        shapes = [layout[k] for k in keys]
        # Every observation starts as a copy of this flat template, which holds the per-episode constants.
        template = np.zeros(int(ends[-1]), dtype=np.float32)
        regions = template[slices[0]].reshape(shapes[0])
        links = template[slices[1]].reshape(max_regions, max_regions, len(LINK_FEATURES))
        links[:n, :n, L_CAPACITY] = bw / max_bw
        links[:n, :n, L_LATENCY] = np.where(bw > 0, world.latency_s / max_lat, 0.0)
        regions[:n, R_PRESENT] = 1.0
        regions[:n, R_GPUS_SHARE] = world.num_gpus / total_gpus
        regions[:n, R_PUE_EXCESS] = world.pue - 1.0
        np.clip(template, -OBS_CLIP, OBS_CLIP, out=template)
        linked = world.bandwidth_gbps > 0
        num_links = int(linked.sum())
        out_links = np.maximum(linked.sum(axis=1), 1)  # (R,) for the mean link utilisation per region
        # (R², ) positions of the real links' utilisation in the flat links table
        rows = (np.arange(n)[:, None] * max_regions + np.arange(n)[None, :]).reshape(-1)
        util_index = slices[1].start + rows * len(LINK_FEATURES) + L_UTILIZATION
        header = np.empty(NUM_HEADER_INTS, dtype=np.int64)  # the compiled encoder's (tables.ENCODER_INTS), then the rest
        header[[I_REGIONS, I_REGIONS_AT, I_LINKS_AT, I_QUEUE_AT, I_CANDIDATES_AT, I_GLOBAL_AT]] = (
            n, *(part.start for part in slices)
        )
        constants_i = np.concatenate((header, util_index, linked.reshape(-1), world.num_gpus, out_links)).astype(np.int64)
        return (total_gpus, max_bw, median_bw, max_lat, keys, slices, shapes, template, linked, num_links, out_links,
                util_index, constants_i)

    def _utilization(self, sim: ClusterSim) -> np.ndarray:
        """The simulator's capacities with zeros replaced by 1 (a missing link's utilisation is 0), refreshed when
        the simulator replaces its capacity array (capacities changed)."""
        if self._capacity[0] is not sim.capacity_gbps:
            self._capacity = (sim.capacity_gbps, np.where(sim.capacity_gbps > 0, sim.capacity_gbps, 1.0))
        return self._capacity[1]

    def encode_table(self, sim: ClusterSim, queue: list[int], visible_ids: np.ndarray, table: tuple) -> dict[str, np.ndarray]:
        """The observation of a compiled candidate table (its visible job ids and ``tables.CANDIDATE_OUTPUT``; see
        ``candidate_kernels.candidate_table``), in compiled code."""
        flat = np.empty_like(self._template)
        now = sim.now_s
        state = tables.ENCODER_STATE.pack(
            now_s=now, hour=min(int(now // SECONDS_PER_HOUR), self._last_hour), free_gpus=sim.free_gpus,
            link_load=sim.link_load_gbps, utilization_base=self._utilization(sim), num_waiting=len(queue),
            num_running=len(sim.running), gap_s=self._gap_s(sim), in_service=sim.in_service_gpus(),
            work_left=sim.work_left, lost_s=sim.lost_s,
        )
        _encode_compiled(self._episode, state, visible_ids, table, flat)
        return {key: flat[part] for key, part in zip(self._keys, self._slices)}

    def _gap_s(self, sim: ClusterSim) -> float:
        """The Δt a wait would skip: to the simulator's next event (arrival, completion or hour tick) or to the
        horizon, whichever is first. A world without hourly series and with nothing running or due skips to the
        horizon."""
        return min(sim.next_event_s(), self.world.horizon_s) - sim.now_s

