"""Layer 3: max-min fair bandwidth sharing among pipelines (progressive filling).

Each running job is one commodity: it needs the same rate on every cross-region hop it uses, up to its demand
(the rate at which its slowest stage produces messages). Rates are max-min fair over all directed links at once:
raise every unfrozen job's rate together; freeze a job when it reaches its demand or when a link it uses
saturates. A job that ends below its demand is *stalled*.
"""

from __future__ import annotations

import numpy as np

REL_EPS = 1e-12


def max_min_fair(demand_gbps: np.ndarray, usage: np.ndarray, capacity_gbps: np.ndarray) -> np.ndarray:
    """Progressive-filling max-min fair rates.

    Args:
        demand_gbps: (J,) each job's rate cap (its no-stall demand per hop).
        usage: (J, L) how many of job j's hops use link l (0 if none).
        capacity_gbps: (L,) link capacities, all > 0.

    Returns:
        (J,) rates with ``usage.T @ rates <= capacity`` and ``rates <= demand``. A job that uses no link
        gets its full demand.
    """
    demand = np.asarray(demand_gbps, dtype=float)
    usage = np.asarray(usage, dtype=float)
    if demand.size == 0:
        return np.zeros(0)
    # Common case: every link can carry the full demands of the jobs on it. Filling then raises each job
    # until it reaches its demand and no link saturates first, so the result is the demands themselves (the
    # filling loop's running sums of steps can land an ulp off them; the demands are the exact answer).
    if (usage.T @ demand <= capacity_gbps).all():
        return demand.copy()
    rates = np.zeros(demand.shape)
    uses_links = usage.sum(axis=1) > 0
    rates[~uses_links] = demand[~uses_links]
    active = uses_links & (demand > 0)
    remaining = np.asarray(capacity_gbps, dtype=float).copy()
    tol = REL_EPS * max(float(remaining.max(initial=0.0)), 1.0)
    while active.any():
        load = usage[active].sum(axis=0)  # (L,) hops of unfrozen jobs on each link
        on = load > 0
        link_step = (remaining[on] / load[on]).min() if on.any() else np.inf
        job_step = (demand[active] - rates[active]).min()
        step = max(min(link_step, job_step), 0.0)
        rates[active] += step
        remaining -= step * load
        saturated = remaining <= tol
        hits_link = (usage[:, saturated] > 0).any(axis=1)
        done = rates >= demand - tol
        active &= ~(hits_link | done)
    return np.minimum(rates, demand)


def is_stalled(rate_gbps: float, demand_gbps: float) -> bool:
    """A job is stalled when its allocated rate is below its no-stall demand (with a relative tolerance)."""
    return rate_gbps < demand_gbps * (1.0 - 1e-9)
