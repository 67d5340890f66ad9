"""Layer 2: GPU power, and exact integration of hourly price and carbon series.

Power is constant between simulator events and prices are constant within each UTC hour, so the cost of an
interval is power × ∫price dt, which :class:`HourlyIntegral` computes exactly from prefix sums, whatever the
interval's length or alignment to hour boundaries. The formulas that the decision path's compiled code uses are
compiled here (:data:`~geopipe_env.base.compiled.jit`) and called from Python too: one definition each.
"""

from __future__ import annotations

import numpy as np

from geopipe_env.base.compiled import jit
from geopipe_env.base.units import SECONDS_PER_HOUR, WATTS_PER_KW


@jit
def gpu_power_w(num_gpus: float, idle_watts: float, busy_watts: float, busy_fraction: float, pue: float) -> float:
    """Facility power of ``num_gpus`` GPUs: ``n·(idle + u·(busy − idle))·PUE``."""
    return num_gpus * (idle_watts + busy_fraction * (busy_watts - idle_watts)) * pue


def energy_kwh(power_w: float, duration_s: float) -> float:
    """Energy of a constant power over a duration."""
    return power_w / WATTS_PER_KW * duration_s / SECONDS_PER_HOUR


class HourlyIntegral:
    """Exact integrals over time of piecewise-constant hourly series, for many series at once.

    ``values[r, h]`` is series r's value during episode hour h (hour 0 starts at t = 0). Times past the last
    hour hold the last value.
    """

    __slots__ = ("values", "_prefix_h")

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.ascontiguousarray(np.atleast_2d(np.asarray(values, dtype=float)))  # (num_series, num_hours)
        self._prefix_h = np.empty((self.values.shape[0], self.values.shape[1] + 1))  # value·hours up to each hour
        prefix_sums(self.values, self._prefix_h)  # np.cumsum's sums, compiled

    @property
    def prefix_h(self) -> np.ndarray:
        """(num_series, num_hours + 1) ∫ value dt from hour 0 to the start of each hour, in value·hours."""
        return self._prefix_h

    @property
    def num_hours(self) -> int:
        return self.values.shape[1]

    def cumulative(self, t_s: float) -> np.ndarray:
        """(num_series,) ∫_0^t value dt, in value·hours."""
        out = np.empty(self.values.shape[0])
        cumulative_at(self._prefix_h, self.values, float(t_s), out)
        return out

    def integral(self, t0_s: float, t1_s: float) -> np.ndarray:
        """(num_series,) ∫_{t0}^{t1} value dt, in value·hours."""
        return self.cumulative(t1_s) - self.cumulative(t0_s)

    def weighted_integral(self, rows: tuple[int, ...], weights: tuple[float, ...], t0_s: float, t1_s: float) -> float:
        """``Σ_i weights[i] · ∫_{t0}^{t1} series[rows[i]] dt`` (value·hours): the same quantity as
        ``weights @ integral(t0, t1)[rows]``, summed row by row (:func:`weighted_integral`)."""
        rows_a = np.array(rows, dtype=np.int64)
        return weighted_integral(self._prefix_h, self.values, rows_a, np.array(weights, dtype=float), rows_a.size,
                                 float(t0_s), float(t1_s))

    def at(self, t_s: float) -> np.ndarray:
        """(num_series,) values in force at time ``t_s``."""
        hour = min(int(max(t_s, 0.0) // SECONDS_PER_HOUR), self.num_hours - 1)
        return self.values[:, hour]


@jit
def prefix_sums(values: np.ndarray, out: np.ndarray) -> None:
    """``out[:, 0] = 0`` and ``out[:, 1:] = np.cumsum(values, axis=1)``: each row's running sums, added in order as
    ``np.cumsum`` adds them (:class:`HourlyIntegral`'s prefix sums), in a fifth of its time."""
    for r in range(values.shape[0]):
        out[r, 0] = 0.0
        if values.shape[1]:
            total = values[r, 0]
            out[r, 1] = total
            for h in range(1, values.shape[1]):
                total += values[r, h]
                out[r, h + 1] = total


@jit
def cumulative_at(prefix_h: np.ndarray, values: np.ndarray, t_s: float, out: np.ndarray) -> None:
    """``out[r] = ∫_0^t series r`` in value·hours, as :meth:`HourlyIntegral.cumulative`: hourly values held after
    the last hour. ``prefix_h`` is (R, H+1) and ``values`` (R, H)."""
    t_h = max(t_s, 0.0) / SECONDS_PER_HOUR
    hour = min(int(t_h), values.shape[1] - 1)
    into = t_h - hour
    for r in range(values.shape[0]):
        out[r] = prefix_h[r, hour] + values[r, hour] * into


@jit
def weighted_integral(prefix_h: np.ndarray, values: np.ndarray, rows: np.ndarray, weights: np.ndarray, length: int,
                      t0_s: float, t1_s: float) -> float:
    """``Σ_i weights[i] · ∫_{t0}^{t1} series[rows[i]] dt`` over the first ``length`` rows, as
    :meth:`HourlyIntegral.weighted_integral` computes it."""
    last = values.shape[1] - 1
    t0_h = max(t0_s, 0.0) / SECONDS_PER_HOUR
    t1_h = max(t1_s, 0.0) / SECONDS_PER_HOUR
    h0 = min(int(t0_h), last)
    h1 = min(int(t1_h), last)
    into0 = t0_h - h0
    into1 = t1_h - h1
    total = 0.0
    for i in range(length):
        r = rows[i]
        start = prefix_h[r, h0] + values[r, h0] * into0
        end = prefix_h[r, h1] + values[r, h1] * into1
        total += weights[i] * (end - start)
    return total
