"""Layer 6: the observation encoder (DESIGN §6).

Every array is flat (1-D), as SB3's ``MultiInputPolicy`` expects; reshape with :func:`obs_layout` to recover the
tables: ``regions`` (max_regions, 8), ``links`` (max_regions², 3) where row ``i·max_regions + j`` is link i→j,
``queue`` (Q, 6), ``candidates`` (Q·K, 8) where row ``a = slot·K + k`` describes action ``a``, and ``global`` (7,).

Every feature is scale-free (a ratio, a log-ratio or a normalised value) so that a policy trained on one
scenario reads another with at most ``max_regions`` regions. Shapes are fixed; absent rows are zero with a zero
``present`` flag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from geopipe_env.generator import World
from geopipe_env.simulator import ClusterSim, Placement
from geopipe_env.units import SECONDS_PER_HOUR

OBS_CLIP = 100.0
FORECAST_H = 6  # the price forecast feature averages the next 6 hours, this one included (perfect foresight)
REGION_FEATURES = ("present", "free_gpu_fraction", "gpus_share", "price_now", "price_forecast", "carbon", "pue_excess", "link_utilization")
LINK_FEATURES = ("capacity", "utilization", "latency")
QUEUE_FEATURES = ("present", "stages_share", "log_isolated_duration", "log_bandwidth_demand", "waiting_time", "can_start")
CANDIDATE_FEATURES = ("feasible", "log_iteration_vs_isolated", "log_duration", "cost", "wan_hops", "bandwidth_slack", "stalled", "carbon")
GLOBAL_FEATURES = ("hour_sin", "hour_cos", "queue_beyond_window", "running_jobs", "gpu_utilization", "time_fraction", "mean_link_utilization")


@dataclass(frozen=True, slots=True)
class CandidateInfo:
    """What the env knows about one (queue slot, strategy) pair at a decision instant."""

    placement: Placement
    iteration_s: float
    duration_s: float
    cost_usd: float
    carbon_kg: float
    rate_gbps: float
    demand_gbps: float
    stalled: bool


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


def _normalise_prices(values: np.ndarray) -> np.ndarray:
    """(R, H) prices relative to the regions' mean absolute price in each hour (real prices can be negative)."""
    scale = np.maximum(np.abs(values).mean(axis=0, keepdims=True), 1e-9)
    return values / scale


class ObservationEncoder:
    """Builds observations for one episode; per-episode constants are computed once in ``__init__``."""

    def __init__(
        self,
        world: World,
        max_regions: int,
        queue_slots: int,
        num_strategies: int,
        t_ref_s: float,
        c_ref_usd: float,
        carbon_ref_kg: float,
    ) -> None:
        self.world = world
        self.max_regions = max_regions
        self.queue_slots = queue_slots
        self.num_strategies = num_strategies
        self.t_ref_s = t_ref_s
        self.c_ref_usd = c_ref_usd
        self.carbon_ref_kg = max(carbon_ref_kg, 1e-9)
        n = world.num_regions
        self.total_gpus = float(world.num_gpus.sum())
        bw = world.bandwidth_gbps
        self.max_bw = max(float(bw.max(initial=0.0)), 1e-9)
        self.median_bw = float(np.median(bw[bw > 0])) if (bw > 0).any() else world.scenario.network.intra_bandwidth_gbps
        lat = world.latency_s[bw > 0]
        self.max_lat = max(float(lat.max()), 1e-9) if lat.size else 1.0
        carbon_mean = float(np.abs(world.carbon.values).mean())
        self.carbon_scale = carbon_mean if carbon_mean > 0 else 1.0
        links = np.zeros((max_regions, max_regions, len(LINK_FEATURES)), dtype=np.float32)
        links[:n, :n, 0] = bw / self.max_bw
        links[:n, :n, 2] = np.where(bw > 0, world.latency_s / self.max_lat, 0.0)
        self._links_static = links
        regions = np.zeros((max_regions, len(REGION_FEATURES)), dtype=np.float32)
        regions[:n, 0] = 1.0
        regions[:n, 2] = world.num_gpus / self.total_gpus
        regions[:n, 6] = world.pue - 1.0
        self._regions_static = regions
        self._linked = world.bandwidth_gbps > 0
        self._num_links = int(self._linked.sum())
        self._out_links = np.maximum(self._linked.sum(axis=1), 1)  # (R,) for the mean link utilisation per region
        layout = obs_layout(max_regions, queue_slots, num_strategies)
        self._keys = ("regions", "links", "queue", "candidates", "global")
        ends = np.cumsum([int(np.prod(layout[k])) for k in self._keys])
        self._slices = [slice(int(a), int(b)) for a, b in zip(np.r_[0, ends[:-1]], ends)]
        # Per-hour price features, normalised across regions: now, and the mean of the next FORECAST_H hours.
        price = world.price.values  # (R, H)
        window = np.cumsum(np.concatenate((np.zeros((n, 1)), price), axis=1), axis=1)
        hours = np.arange(price.shape[1])
        ahead = np.minimum(hours + FORECAST_H, price.shape[1])
        forecast = (window[:, ahead] - window[:, hours]) / (ahead - hours)
        self._price_now = _normalise_prices(price)  # (R, H)
        self._price_forecast = _normalise_prices(forecast)  # (R, H)
        self._carbon = world.carbon.values / self.carbon_scale  # (R, H)
        self._last_hour = price.shape[1] - 1

    def encode(self, sim: ClusterSim, queue: list[int], cands: list[list[CandidateInfo | None]]) -> dict[str, np.ndarray]:
        w = self.world
        n = w.num_regions
        now = sim.now_s
        cap = np.where(sim.capacity_gbps > 0, sim.capacity_gbps, 1.0)
        util = np.where(w.bandwidth_gbps > 0, sim.link_load_gbps / cap, 0.0)

        regions = self._regions_static.copy()
        regions[:n, 1] = sim.free_gpus / w.num_gpus
        hour_index = min(int(now // SECONDS_PER_HOUR), self._last_hour)
        regions[:n, 3] = self._price_now[:, hour_index]
        regions[:n, 4] = self._price_forecast[:, hour_index]
        regions[:n, 5] = self._carbon[:, hour_index]
        regions[:n, 7] = util.sum(axis=1) / self._out_links

        links = self._links_static.copy()
        links[:n, :n, 1] = util

        q = np.zeros((self.queue_slots, len(QUEUE_FEATURES)), dtype=np.float32)
        c = np.zeros((self.queue_slots * self.num_strategies, len(CANDIDATE_FEATURES)), dtype=np.float32)
        q_rows, c_index, c_rows = [], [], []
        wan_scale = max(n - 1, 1)
        for slot, jid in enumerate(queue[: self.queue_slots]):
            job = w.jobs[jid]
            row_cands = cands[slot] if slot < len(cands) else ()  # no candidates once the episode ended
            q_rows.append(
                (
                    1.0,
                    job.num_gpus / self.total_gpus,
                    math.log(job.isolated_duration_s / self.t_ref_s),
                    math.log(job.typical_demand_gbps / self.median_bw),
                    (now - job.arrival_s) / self.t_ref_s,
                    float(any(ci is not None for ci in row_cands)),
                )
            )
            for k, ci in enumerate(row_cands):
                if ci is None:
                    continue
                hops = ci.placement.num_wan_hops
                c_index.append(slot * self.num_strategies + k)
                c_rows.append(
                    (
                        1.0,
                        math.log(ci.iteration_s / job.isolated_iteration_s),
                        math.log(ci.duration_s / self.t_ref_s),
                        ci.cost_usd / self.c_ref_usd,
                        hops / wan_scale,
                        (ci.rate_gbps / ci.demand_gbps) if hops else 1.0,
                        float(ci.stalled),
                        ci.carbon_kg / self.carbon_ref_kg,
                    )
                )
        if q_rows:
            q[: len(q_rows)] = q_rows
        if c_rows:
            c[c_index] = c_rows
        hour = (w.start_hour + now / SECONDS_PER_HOUR) % 24.0
        allocated = float((w.num_gpus - sim.free_gpus).sum())
        mean_util = float(util[self._linked].sum()) / self._num_links if self._num_links else 0.0
        g = np.array(
            (
                np.sin(2 * np.pi * hour / 24.0),
                np.cos(2 * np.pi * hour / 24.0),
                max(len(queue) - self.queue_slots, 0) / self.queue_slots,
                len(sim.running) / max(len(w.jobs), 1),
                allocated / self.total_gpus,
                now / w.horizon_s,
                mean_util,
            ),
            dtype=np.float32,
        )
        flat = np.concatenate([regions.reshape(-1), links.reshape(-1), q.reshape(-1), c.reshape(-1), g])
        np.clip(flat, -OBS_CLIP, OBS_CLIP, out=flat)
        return {key: flat[part] for key, part in zip(self._keys, self._slices)}
