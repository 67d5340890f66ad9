"""Layer 2: max-min fair bandwidth sharing among pipelines (progressive filling).

Each running job is one commodity: it needs the same rate on every cross-region hop it uses, up to its demand
(the rate at which its slowest stage produces messages). Rates are max-min fair over all directed links at once:
raise every unfrozen job's rate together; freeze a job when it reaches its demand or when a link it uses
saturates. A job that ends below its demand is *stalled*. Both are compiled (:data:`~geopipe_env.base.compiled.jit`):
the simulator calls them from Python and from its compiled reallocation alike. ``tests/reference.py`` holds
the same filling written with numpy arrays, the specification the tests hold this to.
"""

from __future__ import annotations

import numpy as np

from geopipe_env.base.compiled import jit

STALL_TOLERANCE = 1e-9  # a rate this far (relative) below the demand is still the demand: rounding, not a stall
FILL_TOLERANCE = 1e-12  # progressive filling: a link with this much (relative to the largest) left is saturated


@jit
def is_stalled(rate_gbps: float, demand_gbps: float) -> bool:
    """A job is stalled when its allocated rate is below its no-stall demand (with a relative tolerance)."""
    return rate_gbps < demand_gbps * (1.0 - STALL_TOLERANCE)


@jit
def max_min_rates(
    running: np.ndarray,
    demand_gbps: np.ndarray,
    job_links: np.ndarray,
    job_num_links: np.ndarray,
    capacity_gbps: np.ndarray,
    rates: np.ndarray,
    link_load_gbps: np.ndarray,
    max_utilization: float,
) -> float:
    """Max-min fair rates of the running jobs (ids ``running``) and the load they put on each directed link:
    ``reference.max_min_fair`` (progressive filling, with its shortcut when every link carries its jobs' demands)
    over the links in use.

    Args:
        demand_gbps (J,): each job's demand per hop. job_links (J, L), job_num_links (J,): each job's directed WAN
            links as flat indices into (R, R), and how many. capacity_gbps (R·R,): link capacities.
        rates (J,), link_load_gbps (R·R,): written, each running job's rate and each link's load (zero if unused).
        max_utilization: the largest load ÷ capacity seen so far.

    Returns:
        The largest load ÷ capacity, this allocation's included.
    """
    num_jobs = running.shape[0]
    # The links in use, in first-use order, and each job's use of them.
    column = np.full(capacity_gbps.shape[0], -1, dtype=np.int64)
    links = np.empty(capacity_gbps.shape[0], dtype=np.int64)
    num_used = 0
    for i in range(num_jobs):
        j = running[i]
        for k in range(job_num_links[j]):
            link = job_links[j, k]
            if column[link] < 0:
                column[link] = num_used
                links[num_used] = link
                num_used += 1
    link_load_gbps[:] = 0.0
    for i in range(num_jobs):
        rates[running[i]] = demand_gbps[running[i]]
    if num_used == 0:
        return max_utilization
    usage = np.zeros((num_jobs, num_used))
    for i in range(num_jobs):
        j = running[i]
        for k in range(job_num_links[j]):
            usage[i, column[job_links[j, k]]] = 1.0
    capacity = np.empty(num_used)
    for c in range(num_used):
        capacity[c] = capacity_gbps[links[c]]
    demand = np.empty(num_jobs)
    for i in range(num_jobs):
        demand[i] = demand_gbps[running[i]]
    fits = True
    for c in range(num_used):
        carried = 0.0
        for i in range(num_jobs):
            carried += usage[i, c] * demand[i]
        fits = fits and carried <= capacity[c]
    got = demand.copy()
    if not fits:
        got[:] = 0.0
        active = np.zeros(num_jobs, dtype=np.bool_)
        for i in range(num_jobs):
            uses = usage[i].sum() > 0
            if not uses:
                got[i] = demand[i]
            active[i] = uses and demand[i] > 0
        remaining = capacity.copy()
        tol = FILL_TOLERANCE * max(remaining.max(), 1.0)
        load = np.empty(num_used)
        while active.any():
            for c in range(num_used):
                load[c] = 0.0
                for i in range(num_jobs):
                    if active[i]:
                        load[c] += usage[i, c]
            link_step = np.inf
            for c in range(num_used):
                if load[c] > 0:
                    link_step = min(link_step, remaining[c] / load[c])
            job_step = np.inf
            for i in range(num_jobs):
                if active[i]:
                    job_step = min(job_step, demand[i] - got[i])
            step = max(min(link_step, job_step), 0.0)
            for i in range(num_jobs):
                if active[i]:
                    got[i] += step
            for c in range(num_used):
                remaining[c] -= step * load[c]
            for i in range(num_jobs):
                hits_link = False
                for c in range(num_used):
                    if remaining[c] <= tol and usage[i, c] > 0:
                        hits_link = True
                done = got[i] >= demand[i] - tol
                if hits_link or done:
                    active[i] = False
        for i in range(num_jobs):
            got[i] = min(got[i], demand[i])
    for i in range(num_jobs):
        rates[running[i]] = got[i]
    for c in range(num_used):
        load_c = 0.0
        for i in range(num_jobs):
            load_c += usage[i, c] * got[i]
        link_load_gbps[links[c]] = load_c
        max_utilization = max(max_utilization, load_c / capacity[c])
    return max_utilization
