"""Layer 3: compiled kernels of the decision path (numba, cached on disk).

Each kernel is a pure function over flat arrays and floats that does what a Python reference elsewhere in the
package does, operation for operation, so that the results agree to rounding (the only differences are sums that
numpy or BLAS evaluate in another order). The reference is named in each docstring, and
``tests/test_kernels.py`` checks every kernel against it. The kernels exist because the decision path calls
these loops thousands of times per second, where Python's per-operation cost dominates the arithmetic.

``cache=True`` keeps the machine code on disk (numba's cache, beside this file or in ``NUMBA_CACHE_DIR``), so a
process compiles a kernel only the first time it is ever used; later processes load it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from geopipe_env.units import GRAMS_PER_KG, SECONDS_PER_HOUR, WATTS_PER_KW

# The accumulators that :func:`advance_hours` updates in place, by position.
ENERGY_KWH, COST_USD, CARBON_KG, WAN_BYTES, GPU_SECONDS, JOB_SECONDS = range(6)


@njit(cache=True)
def cumulative_at(prefix_h: np.ndarray, values: np.ndarray, t_s: float, out: np.ndarray) -> None:
    """``out[r] = ∫_0^t series r`` in value·hours, as :meth:`energy.HourlyIntegral.cumulative`: hourly values held
    after the last hour. ``prefix_h`` is (R, H+1) and ``values`` (R, H)."""
    t_h = max(t_s, 0.0) / SECONDS_PER_HOUR
    hour = min(int(t_h), values.shape[1] - 1)
    into = t_h - hour
    for r in range(values.shape[0]):
        out[r] = prefix_h[r, hour] + values[r, hour] * into


@njit(cache=True)
def advance_hours(
    now_s: float,
    tick_s: float,
    stop_s: float,
    limit_s: float,
    remaining_iters: np.ndarray,
    iteration_s: np.ndarray,
    wan_bytes_per_s: np.ndarray,
    kw: np.ndarray,
    total_w: float,
    price_prefix_h: np.ndarray,
    price_values: np.ndarray,
    carbon_prefix_h: np.ndarray,
    carbon_values: np.ndarray,
    has_carbon: bool,
    allocated_gpus: int,
    jobs_in_system: int,
    totals: np.ndarray,
) -> tuple[float, float]:
    """Run the hour ticks at ``tick_s, tick_s + 1 h, …`` that come before ``stop_s`` and at or before ``limit_s``,
    when nothing but prices and carbon changes at them: each tick is ``ClusterSim.advance_to`` to its time (jobs'
    progress, WAN bytes, energy, cost, carbon, GPU- and job-seconds at constant power ``kw`` per region and
    ``total_w`` in all), then the next tick an hour later.

    ``remaining_iters`` (per running job) and ``totals`` (indexed by ``ENERGY_KWH`` … ``JOB_SECONDS``) are
    updated in place. Returns ``(now_s, next tick_s)``.
    """
    num_regions = kw.shape[0]
    price_then = np.empty(num_regions)
    price_now = np.empty(num_regions)
    carbon_then = np.empty(num_regions)
    carbon_now = np.empty(num_regions)
    while tick_s < stop_s and tick_s <= limit_s:
        dt = tick_s - now_s
        if dt > 0.0:
            wan_bytes = totals[WAN_BYTES]
            for j in range(remaining_iters.shape[0]):
                remaining_iters[j] -= dt / iteration_s[j]
                wan_bytes += wan_bytes_per_s[j] * dt
            totals[WAN_BYTES] = wan_bytes
            totals[ENERGY_KWH] += total_w / WATTS_PER_KW * dt / SECONDS_PER_HOUR
            cumulative_at(price_prefix_h, price_values, now_s, price_then)
            cumulative_at(price_prefix_h, price_values, tick_s, price_now)
            cost = 0.0
            for r in range(num_regions):
                cost += kw[r] * (price_now[r] - price_then[r])
            totals[COST_USD] += cost
            if has_carbon:
                cumulative_at(carbon_prefix_h, carbon_values, now_s, carbon_then)
                cumulative_at(carbon_prefix_h, carbon_values, tick_s, carbon_now)
                carbon = 0.0
                for r in range(num_regions):
                    carbon += kw[r] * (carbon_now[r] - carbon_then[r])
                totals[CARBON_KG] += carbon / GRAMS_PER_KG
            totals[GPU_SECONDS] += float(allocated_gpus) * dt
            totals[JOB_SECONDS] += jobs_in_system * dt
            now_s = tick_s
        tick_s = now_s + SECONDS_PER_HOUR
    return now_s, tick_s


def warm_up() -> None:
    """Call every kernel once on tiny inputs, so that loading them from numba's disk cache (or compiling them, the
    first time on a machine) happens here and not inside the first episode. Idempotent and cheap once done."""
    one, regions = np.ones(1), np.zeros(1)
    series_prefix, series_values = np.zeros((1, 2)), np.zeros((1, 1))
    advance_hours(
        0.0, 1.0, 0.0, 0.0, np.zeros(1), one, regions, regions, 0.0, series_prefix, series_values, series_prefix,
        series_values, False, 0, 0, np.zeros(6),
    )
