"""Layer 4: the simulator's compiled integration and reallocation (:data:`~geopipe_env.base.compiled.jit`).

:class:`~geopipe_env.simulation.simulator.ClusterSim` keeps its per-job state in two tables (``tables.SIM_JOB_FLOATS`` and
``tables.SIM_JOB_INTS``) and its totals in one array (``tables.SIM_TOTALS``), which these kernels advance between
events (progress, energy, cost, carbon, WAN bytes, GPU- and job-seconds) and update when the running set or the
line rates change (max-min fair rates, the jobs to retime, power per region).
"""

from __future__ import annotations

import numpy as np

from geopipe_env.base.compiled import jit, pairwise_sum
from geopipe_env.physics.energy import cumulative_at
from geopipe_env.physics.network import max_min_rates
from geopipe_env.base.tables import (
    CARBON_KG, COST_USD, ENERGY_KWH, GPU_SECONDS, JF_DEMAND, JF_ITERATION, JF_RATE, JF_REMAINING, JF_TIMED_RATE,
    JF_WAN_BYTES, JI_NUM_LINKS, JI_STALE, JI_TIMED_CAPACITY, JOB_SECONDS, WAN_BYTES,
)
from geopipe_env.base.units import GRAMS_PER_KG, SECONDS_PER_HOUR, WATTS_PER_KW


@jit
def advance_interval(now_s: float, t_s: float, running: np.ndarray, job_f: np.ndarray, kw: np.ndarray, total_w: float,
                     series: tuple, allocated_gpus: int, jobs_in_system: int, totals: np.ndarray) -> None:
    """Integrate ``[now_s, t_s]`` at constant rates and power, as ``ClusterSim.advance_to`` does: each running job
    progresses by ``dt / iteration_s`` iterations and sends ``wan_bytes_per_s · dt``; energy is ``total_w · dt``,
    cost and carbon ``Σ_r kw[r] · ∫ price_r`` (∫ carbon_r), and GPU- and job-seconds grow by the allocated GPUs and
    the jobs in the system times ``dt``.

    ``running`` holds the running jobs' ids in the simulator's order, ``job_f`` the simulator's per-job floats
    (``JF_*`` rows); ``series`` is ``(price prefix_h, price values, carbon prefix_h, carbon values, has_carbon)`` as
    ``HourlyIntegral`` holds them. The iterations left (``job_f[JF_REMAINING]``) and ``totals`` (indexed by
    ``ENERGY_KWH`` … ``JOB_SECONDS``) are updated in place. Nothing happens unless ``t_s > now_s``.
    """
    dt = t_s - now_s
    if dt <= 0.0:
        return
    remaining_iters, iteration_s, wan_bytes_per_s = job_f[JF_REMAINING], job_f[JF_ITERATION], job_f[JF_WAN_BYTES]
    price_prefix_h, price_values, carbon_prefix_h, carbon_values, has_carbon = series
    num_regions = kw.shape[0]
    wan_bytes = totals[WAN_BYTES]
    for j in running:
        remaining_iters[j] -= dt / iteration_s[j]
        wan_bytes += wan_bytes_per_s[j] * dt
    totals[WAN_BYTES] = wan_bytes
    totals[ENERGY_KWH] += total_w / WATTS_PER_KW * dt / SECONDS_PER_HOUR
    then = np.empty(num_regions)
    later = np.empty(num_regions)
    cumulative_at(price_prefix_h, price_values, now_s, then)
    cumulative_at(price_prefix_h, price_values, t_s, later)
    cost = 0.0
    for r in range(num_regions):
        cost += kw[r] * (later[r] - then[r])
    totals[COST_USD] += cost
    if has_carbon:
        cumulative_at(carbon_prefix_h, carbon_values, now_s, then)
        cumulative_at(carbon_prefix_h, carbon_values, t_s, later)
        carbon = 0.0
        for r in range(num_regions):
            carbon += kw[r] * (later[r] - then[r])
        totals[CARBON_KG] += carbon / GRAMS_PER_KG
    totals[GPU_SECONDS] += float(allocated_gpus) * dt
    totals[JOB_SECONDS] += jobs_in_system * dt


@jit
def advance_hours(now_s: float, tick_s: float, stop_s: float, limit_s: float, running: np.ndarray, job_f: np.ndarray,
                  kw: np.ndarray, total_w: float, series: tuple, allocated_gpus: int, jobs_in_system: int,
                  totals: np.ndarray) -> tuple[float, float]:
    """Run the hour ticks at ``tick_s, tick_s + 1 h, …`` that come before ``stop_s`` and at or before ``limit_s``,
    when nothing but prices and carbon changes at them: each tick is :func:`advance_interval` to its time (as
    ``ClusterSim.step_event`` would take it), then the next tick an hour later. Returns ``(now_s, next tick_s)``.
    """
    while tick_s < stop_s and tick_s <= limit_s:
        if tick_s > now_s:
            advance_interval(now_s, tick_s, running, job_f, kw, total_w, series, allocated_gpus, jobs_in_system,
                             totals)
            now_s = tick_s
        tick_s = now_s + SECONDS_PER_HOUR
    return now_s, tick_s


@jit
def advance_to_event(now_s: float, tick_s: float, event_s: float, limit_s: float, quiet_hours: bool,
                     running: np.ndarray, job_f: np.ndarray, kw: np.ndarray, total_w: float, series: tuple,
                     allocated_gpus: int, jobs_in_system: int, totals: np.ndarray) -> tuple[float, float, bool]:
    """One call for the integration the env does between two events: if ``quiet_hours``, the hour ticks before
    the next arrival or completion (at ``event_s``) and at or before ``limit_s`` (:func:`advance_hours`, as
    ``ClusterSim.advance_quiet_hours``); then :func:`advance_interval` to the next event (the heap's or the next
    tick, whichever is first) if it lies at or before ``limit_s``, else to ``limit_s``.

    Returns:
        ``(now_s, tick_s, reached)``: the new clock and next tick, and whether the clock stands at the next event
        (False: it stands at ``limit_s``, before every event).
    """
    if quiet_hours and tick_s < event_s and tick_s <= limit_s:
        now_s, tick_s = advance_hours(now_s, tick_s, event_s, limit_s, running, job_f, kw, total_w, series,
                                      allocated_gpus, jobs_in_system, totals)
    t_s = min(event_s, tick_s)
    reached = t_s <= limit_s
    if not reached:
        t_s = limit_s
    if t_s > now_s:
        advance_interval(now_s, t_s, running, job_f, kw, total_w, series, allocated_gpus, jobs_in_system, totals)
        now_s = t_s
    return now_s, tick_s, reached


@jit
def add_rows(table: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """``out += table[r]`` for each ``r`` of ``rows`` in order (the order a Python loop of numpy additions takes)."""
    for r in rows:
        for c in range(out.shape[0]):
            out[c] += table[r, c]


@jit
def region_power(power_w: np.ndarray, running: np.ndarray, total_w: np.ndarray, kw: np.ndarray) -> float:
    """Per region, the running jobs' power (:func:`add_rows` of their rows of ``power_w`` into ``total_w``) and in
    kW (``kw``); returns the sum over regions in W as numpy's ``sum`` gives it."""
    add_rows(power_w, running, total_w)
    for r in range(kw.shape[0]):
        kw[r] = total_w[r] / WATTS_PER_KW
    return pairwise_sum(total_w, total_w.shape[0])


@jit
def stale_jobs(running: np.ndarray, rates: np.ndarray, timed_rate: np.ndarray, timed_capacity: np.ndarray,
               capacity_version: int, out: np.ndarray) -> int:
    """Write into ``out`` the running jobs (in order) whose allocated rate or line rates differ from those they
    were timed at, as ``ClusterSim._recompute_rates`` retimes them; how many."""
    count = 0
    for j in running:
        if rates[j] != timed_rate[j] or timed_capacity[j] != capacity_version:
            out[count] = j
            count += 1
    return count


@jit
def reallocate(
    running: np.ndarray,
    job_f: np.ndarray,
    job_i: np.ndarray,
    job_links: np.ndarray,
    capacity_gbps: np.ndarray,
    link_load_gbps: np.ndarray,
    max_utilization: float,
    capacity_version: int,
    power_w: np.ndarray,
    total_w: np.ndarray,
    kw: np.ndarray,
) -> tuple[float, int, float]:
    """One call for what ``ClusterSim._recompute_rates`` asks of the kernels: :func:`max_min_rates`, then
    :func:`stale_jobs` into ``job_i[JI_STALE]``, then, if no job is stale (so no power row changes),
    :func:`region_power`. The per-job arguments of those are rows of the simulator's tables ``job_f`` and ``job_i``
    (``JF_*`` and ``JI_*``); ``capacity_gbps`` is (R, R).

    Returns:
        ``(max_utilization, stale count, total power W)``; with stale jobs the power is not computed (0.0 and
        ``total_w`` untouched): the caller retimes them, then calls :func:`region_power`.
    """
    max_utilization = max_min_rates(
        running, job_f[JF_DEMAND], job_links, job_i[JI_NUM_LINKS], capacity_gbps.ravel(), job_f[JF_RATE],
        link_load_gbps, max_utilization,
    )
    count = stale_jobs(running, job_f[JF_RATE], job_f[JF_TIMED_RATE], job_i[JI_TIMED_CAPACITY], capacity_version,
                       job_i[JI_STALE])
    if count:
        return max_utilization, count, 0.0
    return max_utilization, 0, region_power(power_w, running, total_w, kw)


