"""Layer 3: GPU power, and exact integration of hourly price and carbon series.

Power is constant between simulator events and prices are constant within each UTC hour, so the cost of an
interval is power × ∫price dt, which :class:`HourlyIntegral` computes exactly from prefix sums, whatever the
interval's length or alignment to hour boundaries.
"""

from __future__ import annotations

import numpy as np

from geopipe_env.physics import kernels
from geopipe_env.units import SECONDS_PER_HOUR, WATTS_PER_KW


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

    __slots__ = ("values", "_prefix_h", "_columns")

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.ascontiguousarray(np.atleast_2d(np.asarray(values, dtype=float)))  # (num_series, num_hours)
        self._prefix_h = np.empty((self.values.shape[0], self.values.shape[1] + 1))  # value·hours up to each hour
        kernels.prefix_sums(self.values, self._prefix_h)  # np.cumsum's sums, compiled
        # hour → (prefix, value) of every series as Python floats, for the scalar code (filled on demand).
        self._columns: dict[int, tuple[list[float], list[float]]] = {}

    @property
    def prefix_h(self) -> np.ndarray:
        """(num_series, num_hours + 1) ∫ value dt from hour 0 to the start of each hour, in value·hours."""
        return self._prefix_h

    @property
    def num_hours(self) -> int:
        return self.values.shape[1]

    def cumulative(self, t_s: float) -> np.ndarray:
        """(num_series,) ∫_0^t value dt, in value·hours."""
        t_h = max(t_s, 0.0) / SECONDS_PER_HOUR
        last = self.num_hours - 1
        hour = min(int(t_h), last)
        return self._prefix_h[:, hour] + self.values[:, hour] * (t_h - hour)

    def integral(self, t0_s: float, t1_s: float) -> np.ndarray:
        """(num_series,) ∫_{t0}^{t1} value dt, in value·hours."""
        return self.cumulative(t1_s) - self.cumulative(t0_s)

    def weighted_integral(self, rows: tuple[int, ...], weights: tuple[float, ...], t0_s: float, t1_s: float) -> float:
        """``Σ_i weights[i] · ∫_{t0}^{t1} series[rows[i]] dt`` (value·hours), in scalar arithmetic.

        The same quantity as ``weights @ integral(t0, t1)[rows]``, without building (num_series,) arrays: a
        placement touches only a few regions, and this sits on the env's candidate hot path.
        """
        last = self.values.shape[1] - 1
        t0_h, t1_h = max(t0_s, 0.0) / SECONDS_PER_HOUR, max(t1_s, 0.0) / SECONDS_PER_HOUR
        h0, h1 = min(int(t0_h), last), min(int(t1_h), last)
        (prefix0, values0), (prefix1, values1) = self._column(h0), self._column(h1)
        into0, into1 = t0_h - h0, t1_h - h1
        total = 0.0
        for r, w in zip(rows, weights):
            start = prefix0[r] + values0[r] * into0
            end = prefix1[r] + values1[r] * into1
            total += w * (end - start)
        return float(total)

    def _column(self, hour: int) -> tuple[list[float], list[float]]:
        """``(prefix, value)`` of every series at ``hour`` as lists of Python floats (memoised)."""
        column = self._columns.get(hour)
        if column is None:
            column = self._columns[hour] = (self._prefix_h[:, hour].tolist(), self.values[:, hour].tolist())
        return column

    def at(self, t_s: float) -> np.ndarray:
        """(num_series,) values in force at time ``t_s``."""
        hour = min(int(max(t_s, 0.0) // SECONDS_PER_HOUR), self.num_hours - 1)
        return self.values[:, hour]
