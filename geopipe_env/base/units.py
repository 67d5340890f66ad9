"""Layer 1: unit conversions and physical constants.

Everything inside the simulator is SI-like: seconds, bytes, Gbit/s, watts, kWh, USD/kWh and g/kWh.
Names carry their unit; the helpers here are the only place where a conversion factor appears. The two that the
decision path's compiled code calls are compiled themselves (:data:`~geopipe_env.base.compiled.jit`), so Python and
compiled code share one definition.
"""

from __future__ import annotations

import math

from geopipe_env.base.compiled import jit

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 24.0 * SECONDS_PER_HOUR
BITS_PER_BYTE = 8.0
BITS_PER_GBIT = 1e9
FLOPS_PER_TFLOP = 1e12
BYTES_PER_GB = 1e9
BYTES_PER_TB = 1e12
WATTS_PER_KW = 1000.0
KWH_PER_MWH = 1000.0
GRAMS_PER_KG = 1000.0
SECONDS_PER_MS = 1e-3
BF16_BYTES = 2


def hours(seconds: float) -> float:
    """Seconds to hours."""
    return seconds / SECONDS_PER_HOUR


def seconds_from_hours(hours_: float) -> float:
    """Hours to seconds."""
    return hours_ * SECONDS_PER_HOUR


@jit
def transfer_time_s(num_bytes: float, bandwidth_gbps: float) -> float:
    """Serialisation time of ``num_bytes`` on a link of ``bandwidth_gbps`` (infinite if the rate is 0)."""
    if bandwidth_gbps <= 0.0:
        return math.inf
    return num_bytes * BITS_PER_BYTE / (bandwidth_gbps * BITS_PER_GBIT)


@jit
def rate_gbps(num_bytes: float, period_s: float) -> float:
    """The bandwidth that moves ``num_bytes`` every ``period_s`` seconds."""
    return num_bytes * BITS_PER_BYTE / (period_s * BITS_PER_GBIT)


def usd_per_kwh_from_usd_per_mwh(price_usd_per_mwh: float) -> float:
    """Market prices are quoted per MWh; the simulator bills per kWh."""
    return price_usd_per_mwh / KWH_PER_MWH
