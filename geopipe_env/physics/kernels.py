"""Layer 3: compiled kernels of the decision path (numba, cached on disk).

Each kernel is a pure function over flat arrays and floats that does what a Python reference elsewhere in the
package does, operation for operation, so that the results agree to rounding (the only differences are sums that
numpy or BLAS evaluate in another order). The reference is named in each docstring, and
``tests/test_kernels.py`` checks every kernel against it. The kernels exist because the decision path calls
these loops thousands of times per second, where Python's per-operation cost dominates the arithmetic.

``cache=True`` keeps the machine code on disk (numba's cache, beside this file or in ``NUMBA_CACHE_DIR``), so a
process compiles a kernel only the first time it is ever used; later processes load it. Numba checks only the
calling kernel's own file for changes: after editing a kernel here, delete the cached code of the modules whose
kernels call it (``find geopipe_env -name '*.nb[ci]' -delete``), or they keep running the old version.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from geopipe_env.units import BITS_PER_BYTE, BITS_PER_GBIT, GRAMS_PER_KG, SECONDS_PER_HOUR, WATTS_PER_KW

# The accumulators that :func:`advance_hours` updates in place, by position.
ENERGY_KWH, COST_USD, CARBON_KG, WAN_BYTES, GPU_SECONDS, JOB_SECONDS = range(6)
# The simulator's per-job tables, rows indexed by job id in their columns: floats (J_F, J) — iterations left,
# iteration time, WAN bytes per second, demand per hop, the last allocated rate, the rate the job was timed at —
# and ints (J_I, J) — directed WAN links, the capacity version the job was timed at, scratch for the stale jobs. One
# array of each kind, rather than one per quantity: numba's dispatch costs about 0.1 µs per array argument.
JF_REMAINING, JF_ITERATION, JF_WAN_BYTES, JF_DEMAND, JF_RATE, JF_TIMED_RATE = range(6)
NUM_JOB_FLOATS = 6
JI_NUM_LINKS, JI_TIMED_CAPACITY, JI_STALE = range(3)
NUM_JOB_INTS = 3


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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def add_rows(table: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """``out += table[r]`` for each ``r`` of ``rows`` in order (the order a Python loop of numpy additions takes)."""
    for r in rows:
        for c in range(out.shape[0]):
            out[c] += table[r, c]


@njit(cache=True)
def region_power(power_w: np.ndarray, running: np.ndarray, total_w: np.ndarray, kw: np.ndarray) -> float:
    """Per region, the running jobs' power (:func:`add_rows` of their rows of ``power_w`` into ``total_w``) and in
    kW (``kw``); returns the sum over regions in W as numpy's ``sum`` gives it."""
    add_rows(power_w, running, total_w)
    for r in range(kw.shape[0]):
        kw[r] = total_w[r] / WATTS_PER_KW
    return pairwise_sum(total_w, total_w.shape[0])


@njit(cache=True)
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


@njit(cache=True)
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
    ``network.max_min_fair`` (progressive filling, with its shortcut when every link carries its jobs' demands)
    over the links in use, as ``ClusterSim._recompute_rates`` builds it.

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
        tol = 1e-12 * max(remaining.max(), 1.0)
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


@njit(cache=True)
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


# A layout table (geopipe_env.layout_table.LayoutTable) holds per layout a row of floats, a row of ints, its
# placement in a flat int array and its 1F1B path lines (pipeline.ModelParts) in a flat float array; the columns:
(LF_BASE, LF_MAX_X, LF_MAX_F, LF_MAX_B, LF_UNI_F, LF_UNI_S, LF_UNI_X, LF_UNI_LAT, LF_LAST_STAGE, LF_CONSTANT,
 LF_ALLREDUCE, LF_DEMAND, LF_WAN_BYTES) = range(13)
NUM_LAYOUT_FLOATS = 13
# LI_ARRAYS: where the lines start in the float array: tail_slope, tail_intercept (LI_TAILS each), then
# segment_slope, segment_start, segment_end (LI_SEGMENTS each). LI_PATH: where regions, then stages (LI_HOPS + 1
# each) start in the int array.
LI_KIND, LI_M, LI_PROFILE, LI_PATH, LI_HOPS, LI_ARRAYS, LI_TAILS, LI_SEGMENTS = range(8)
NUM_LAYOUT_INTS = 8
MODEL_GPIPE, MODEL_UNIFORM, MODEL_ROUND_TRIP, MODEL_PATHS = range(4)  # as geopipe_env.physics.pipeline
BACKWARD_TO_FORWARD = 2.0  # as geopipe_env.physics.pipeline
STALL_TOLERANCE = 1e-9  # as geopipe_env.physics.network.is_stalled
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@njit(cache=True)
def uniform_total_s(f: float, s: float, hop_transfer_s: float, hop_latency_s: float, m: int, min_cadence_s: float) -> float:
    """1F1B iteration time of ``s`` identical stages and hops: ``pipeline._uniform_total_s`` on floats (the
    closed form of ``pipeline.uniform_iteration_time_s``), operation for operation."""
    b = BACKWARD_TO_FORWARD * f
    several = 1.0 if s > 1 else 0.0
    x = max(hop_transfer_s * several, min_cadence_s)
    y = (hop_transfer_s + hop_latency_s) * several
    n = m - 1
    t = f + b
    step = max(t, x)
    loops = n * (t + 2.0 * y) - 2.0 * y * np.ceil(n / s)
    full = np.floor(n / s)
    mixed = full * (s * t + 2.0 * (s - 1.0) * y) + (n - full * s) * step
    extra = max(max(loops, mixed), n * step)
    return s * t + 2.0 * (s - 1.0) * y + extra


@njit(cache=True)
def iteration_total_s(layout_f: np.ndarray, layout_i: np.ndarray, arrays: np.ndarray, lay: int, min_cadence_s: float) -> float:
    """``pipeline.IterationModel.total_s(min_cadence_s)`` of layout ``lay`` of a layout table, from the parts
    ``pipeline.model_parts`` gave it (for MODEL_PATHS the longest path of ``pipeline._longest_s``, from its lines)."""
    kind = layout_i[lay, LI_KIND]
    m = layout_i[lay, LI_M]
    max_x = max(layout_f[lay, LF_MAX_X], min_cadence_s)
    base = layout_f[lay, LF_BASE]
    if kind == MODEL_GPIPE:
        cadence = max(layout_f[lay, LF_MAX_F], max_x) + max(layout_f[lay, LF_MAX_B], max_x)
        return base + (m - 1) * cadence
    if kind == MODEL_UNIFORM:
        return uniform_total_s(
            layout_f[lay, LF_UNI_F], layout_f[lay, LF_UNI_S], layout_f[lay, LF_UNI_X], layout_f[lay, LF_UNI_LAT], m,
            min_cadence_s,
        )
    if kind == MODEL_ROUND_TRIP:
        return base
    step = max(layout_f[lay, LF_LAST_STAGE], max_x)
    longest = layout_f[lay, LF_CONSTANT]
    at = layout_i[lay, LI_ARRAYS]
    num_tails = layout_i[lay, LI_TAILS]
    for a in range(at, at + num_tails):
        longest = max(longest, arrays[a + num_tails] + arrays[a] * step)
    at += 2 * num_tails
    num_segments = layout_i[lay, LI_SEGMENTS]
    for b in range(at, at + num_segments):
        longest = max(longest, (arrays[b + num_segments] + arrays[b] * step) + arrays[b + 2 * num_segments])
    return base + longest


@njit(cache=True)
def fixed_paths(forward_s, backward_s, hop_transfer_s, hop_latency_s, n, run_reach, held, turn_stage, turn_reach,
                turn_hop_reach, turn_held, turn_cycles, turn_segment, turn_steps, tail_copies, tail_width, full_loops,
                part_loop, copies, segment, pre_loop, post_width, cool_steps, first_reach):
    """``pipeline._fixed_paths`` for ``n = M − 1 ≥ 1`` advances, from the path tables of ``pipeline.path_tables``
    (passed as their arrays, by field name): ``(last_stage_s, other_s, tail_s, loops_only_s, segments_s,
    pre_loop_s, post_s)``, operation for operation."""
    num_stages = forward_s.shape[0]
    stage_s = forward_s + backward_s
    before = np.zeros(num_stages)
    for q in range(1, num_stages):
        before[q] = before[q - 1] + (stage_s[q - 1] + 2.0 * (hop_transfer_s[q - 1] + hop_latency_s[q - 1]))
    through = before + stage_s
    segment_s = np.empty(num_stages * num_stages)
    for i in range(num_stages):
        for j in range(num_stages):
            segment_s[i * num_stages + j] = through[j] - before[i]
    loop_s = np.empty(num_stages + 2)
    loop_s[0], loop_s[-1] = 0.0, -np.inf
    for k in range(num_stages):
        loop_s[1 + k] = through[num_stages - 1] - before[num_stages - 1 - k]
    slowest_f = np.zeros(num_stages + 1)
    slowest_b = np.zeros(num_stages + 1)
    slowest_x = np.zeros(num_stages)
    for q in range(num_stages):
        slowest_f[q + 1] = forward_s[q] if q == 0 else max(slowest_f[q], forward_s[q])
        slowest_b[q + 1] = backward_s[q] if q == 0 else max(slowest_b[q], backward_s[q])
    for q in range(num_stages - 1):
        slowest_x[q + 1] = hop_transfer_s[q] if q == 0 else max(slowest_x[q], hop_transfer_s[q])
    last = through[num_stages - 1]
    other = -np.inf
    for d in range(num_stages):
        any_f = max(slowest_f[d + 1], slowest_x[d])
        any_b = max(slowest_b[d + 1], slowest_x[d])
        run_f = max(slowest_f[run_reach[d]], slowest_x[d])
        run_b = max(slowest_b[run_reach[d]], slowest_x[d])
        bursts = max(n * run_f + held[d] * any_b, held[d] * any_f + n * run_b)
        other = max(other, through[d] + bursts)
    other -= last
    if turn_stage.shape[0]:
        cycled_max = -np.inf
        for c in range(turn_stage.shape[0]):
            d = turn_stage[c]
            back_s = max(slowest_b[turn_reach[c]], slowest_x[turn_hop_reach[c]])
            down_s = turn_held[c] * max(slowest_f[d + 1], slowest_x[d])
            cycled = through[d] + down_s + turn_cycles[c] * segment_s[turn_segment[c]]
            cycled_max = max(cycled_max, cycled + turn_steps[c] * back_s)
        other = max(other, cycled_max - last)
    chain = -np.inf
    for q in range(num_stages):
        chain = max(chain, before[q] + (n + 1) * stage_s[q])
    other = max(other, chain - last)
    tail_s = np.empty(tail_copies.shape[0])
    for a in range(tail_s.shape[0]):
        tail_s[a] = tail_copies[a] * loop_s[tail_width[a]]
    loops_only_s = np.empty(full_loops.shape[0])
    for r in range(loops_only_s.shape[0]):
        loops_only_s[r] = full_loops[r] * loop_s[num_stages] + loop_s[part_loop[r]]
    num_segments = copies.shape[0]
    segments_s = np.empty(num_segments)
    pre_loop_s = np.empty(num_segments)
    post_s = np.empty(num_segments)
    for b in range(num_segments):
        segments_s[b] = copies[b] * segment_s[segment[b]]
        pre_loop_s[b] = loop_s[pre_loop[b]]
        post_s[b] = loop_s[post_width[b]] + cool_steps[b] * slowest_b[first_reach[b]]
    return stage_s[num_stages - 1], other, tail_s, loops_only_s, segments_s, pre_loop_s, post_s


@njit(cache=True)
def fold_paths(tail_s, tail_rest, loops_only_s, other_s, segments_s, pre, pre_loop_s, post_s):
    """``pipeline.ModelParts``' lines of a 1F1B path family (the arrays of ``pipeline._FixedPaths`` and its
    tables): ``(constant_s, tail_slope, tail_intercept, segment_slope, segment_start, segment_end)``.

    Rounding is monotone, so ``a + max(x, y) = max(a + x, a + y)`` and ``(a + max(x, y)) + c = max((a + x) + c,
    (a + y) + c)`` in floating point too: each member of ``pipeline._longest_s``'s family splits into a part
    without the step and a line in it. A line of one slope is dropped when another has an intercept (tails), or a
    start and an end (segments), at least as large: it is never above that one. A zero slope adds ``0·step = 0``.
    """
    constant = other_s
    best = np.full(loops_only_s.shape[0], -np.inf)  # the largest intercept per tail slope (steps after the loops)
    for a in range(tail_s.shape[0]):
        r = tail_rest[a]
        constant = max(constant, tail_s[a] + loops_only_s[r])
        if r == 0:
            constant = max(constant, tail_s[a])
        elif tail_s[a] > best[r]:
            best[r] = tail_s[a]
    num_tails = 0
    for r in range(best.shape[0]):
        if best[r] > -np.inf:
            num_tails += 1
    tail_slope = np.empty(num_tails)
    tail_intercept = np.empty(num_tails)
    i = 0
    for r in range(best.shape[0]):
        if best[r] > -np.inf:
            tail_slope[i] = r
            tail_intercept[i] = best[r]
            i += 1
    num = segments_s.shape[0]
    most_pre = 0  # the largest slope: the pre steps, a whole number of steps
    for b in range(num):
        constant = max(constant, segments_s[b] + pre_loop_s[b] + post_s[b])
        if pre[b] == 0.0:
            constant = max(constant, segments_s[b] + post_s[b])
        else:
            most_pre = max(most_pre, int(pre[b]))
    # Within each slope, lines in order of decreasing start (argsort's order among equal starts); one is kept when its
    # end passes every end of a larger start of its slope.
    keep = np.zeros(num, dtype=np.bool_)
    highest_end = np.full(most_pre + 1, -np.inf)  # per slope, the largest end so far
    by_start = np.argsort(-segments_s)
    for k in range(num):
        c = by_start[k]
        if pre[c] == 0.0:
            continue
        slope = int(pre[c])
        if post_s[c] > highest_end[slope]:
            keep[c] = True
            highest_end[slope] = post_s[c]
    kept = np.flatnonzero(keep)
    return constant, tail_slope, tail_intercept, pre[kept], segments_s[kept], post_s[kept]


@njit(cache=True)
def transfer_time_s(num_bytes: float, bandwidth_gbps: float) -> float:
    """``units.transfer_time_s`` in compiled code: one message of ``num_bytes`` at ``bandwidth_gbps`` (inf at 0)."""
    if bandwidth_gbps <= 0.0:
        return np.inf
    return num_bytes * BITS_PER_BYTE / (bandwidth_gbps * BITS_PER_GBIT)


@njit(cache=True)
def _model_scalars(forward, backward, transfer, hop_latency, m, gpipe, row):
    """``pipeline._model_scalars``: which evaluation a pipeline's model takes (its kind, returned) and its scalars,
    written into a layout table's ``row`` (LF_BASE … LF_UNI_LAT)."""
    num_stages = forward.shape[0]
    hops = num_stages - 1
    stage_s = forward + backward
    row[LF_BASE] = pairwise_sum(stage_s, num_stages) + 2.0 * (
        pairwise_sum(transfer, hops) + pairwise_sum(hop_latency, hops)
    )
    max_x = row[LF_MAX_X] = transfer.max() if hops else 0.0
    if gpipe:
        row[LF_MAX_F], row[LF_MAX_B] = forward.max(), backward.max()
        return MODEL_GPIPE
    if m <= 1:
        return MODEL_ROUND_TRIP
    f = forward[0]
    lat = hop_latency[0] if hops else 0.0
    for i in range(num_stages):
        if forward[i] != f or backward[i] != BACKWARD_TO_FORWARD * f:
            return MODEL_PATHS
    for i in range(hops):
        if transfer[i] != max_x or hop_latency[i] != lat:
            return MODEL_PATHS
    row[LF_UNI_F], row[LF_UNI_S], row[LF_UNI_X], row[LF_UNI_LAT] = f, float(num_stages), max_x, lat
    return MODEL_UNIFORM


# ``pipeline.path_tables`` as compiled code takes it: two read-only arrays (``pipeline.packed_path_tables``), not the
# named tuple of 22 arrays, whose unboxing costs about 6 µs a call. ``tab_i`` starts with each field's start and
# length (in ``tab_i`` for an int field, in ``tab_f`` for a float one), in ``PATH_TABLE_FIELDS`` order.
PATH_TABLE_FIELDS = (
    "tail_width", "tail_copies", "tail_rest", "segment", "copies", "pre", "pre_loop", "post_width", "cool_steps",
    "first_reach", "held", "run_reach", "turn_segment", "turn_stage", "turn_held", "turn_hop_reach", "turn_cycles",
    "turn_steps", "turn_reach", "advances", "full_loops", "part_loop",
)
(TAB_TAIL_WIDTH, TAB_TAIL_COPIES, TAB_TAIL_REST, TAB_SEGMENT, TAB_COPIES, TAB_PRE, TAB_PRE_LOOP, TAB_POST_WIDTH,
 TAB_COOL_STEPS, TAB_FIRST_REACH, TAB_HELD, TAB_RUN_REACH, TAB_TURN_SEGMENT, TAB_TURN_STAGE, TAB_TURN_HELD,
 TAB_TURN_HOP_REACH, TAB_TURN_CYCLES, TAB_TURN_STEPS, TAB_TURN_REACH, TAB_ADVANCES, TAB_FULL_LOOPS,
 TAB_PART_LOOP) = range(len(PATH_TABLE_FIELDS))


@njit(cache=True)
def tab_part(tab_i: np.ndarray, values: np.ndarray, field: int) -> np.ndarray:
    """Field ``field`` (``TAB_*``) of packed path tables: a view of ``values``, which is ``tab_i`` for an int field
    and ``tab_f`` for a float one."""
    start = tab_i[2 * field]
    return values[start:start + tab_i[2 * field + 1]]


@njit(cache=True)
def _fixed(forward, backward, transfer, hop_latency, m, tab_i, tab_f):
    """:func:`fixed_paths` for ``n = m − 1`` advances, from the packed path tables ``tab_i``, ``tab_f``."""
    return fixed_paths(
        forward, backward, transfer, hop_latency, m - 1, tab_part(tab_i, tab_i, TAB_RUN_REACH),
        tab_part(tab_i, tab_f, TAB_HELD), tab_part(tab_i, tab_i, TAB_TURN_STAGE), tab_part(tab_i, tab_i, TAB_TURN_REACH),
        tab_part(tab_i, tab_i, TAB_TURN_HOP_REACH), tab_part(tab_i, tab_f, TAB_TURN_HELD),
        tab_part(tab_i, tab_f, TAB_TURN_CYCLES), tab_part(tab_i, tab_i, TAB_TURN_SEGMENT),
        tab_part(tab_i, tab_f, TAB_TURN_STEPS), tab_part(tab_i, tab_f, TAB_TAIL_COPIES),
        tab_part(tab_i, tab_i, TAB_TAIL_WIDTH), tab_part(tab_i, tab_f, TAB_FULL_LOOPS),
        tab_part(tab_i, tab_i, TAB_PART_LOOP), tab_part(tab_i, tab_f, TAB_COPIES), tab_part(tab_i, tab_i, TAB_SEGMENT),
        tab_part(tab_i, tab_i, TAB_PRE_LOOP), tab_part(tab_i, tab_i, TAB_POST_WIDTH),
        tab_part(tab_i, tab_f, TAB_COOL_STEPS), tab_part(tab_i, tab_i, TAB_FIRST_REACH),
    )


@njit(cache=True)
def write_model(forward, transfer, hop_latency, m, gpipe, tab_i, tab_f, row, ints, arrays, arrays_used):
    """``pipeline.model_parts`` of a pipeline (per-stage forward times, per-hop transfer times and latencies, ``m``
    micro-batches, GPipe or 1F1B) written as a layout table's row: its scalars into ``row`` (LF_BASE … LF_CONSTANT)
    and ``ints`` (LI_KIND, LI_M, LI_ARRAYS, LI_TAILS, LI_SEGMENTS), its lines into ``arrays`` from ``arrays_used``
    on (room for ``2·m + 3·B`` floats, B segment paths). ``tab_i``, ``tab_f`` are
    ``pipeline.packed_path_tables(S, max(m − 1, 1))``. Returns the floats then used."""
    backward = BACKWARD_TO_FORWARD * forward
    row[LF_BASE:LF_CONSTANT + 1] = 0.0  # what a kind does not use is 0, as in LayoutTable.store
    kind = _model_scalars(forward, backward, transfer, hop_latency, m, gpipe, row)
    num_tails = num_segments = 0
    if kind == MODEL_PATHS:
        last_stage_s, other_s, tail_s, loops_only_s, segments_s, pre_loop_s, post_s = _fixed(
            forward, backward, transfer, hop_latency, m, tab_i, tab_f
        )
        row[LF_LAST_STAGE] = last_stage_s
        row[LF_CONSTANT], tail_slope, tail_intercept, segment_slope, segment_start, segment_end = fold_paths(
            tail_s, tab_part(tab_i, tab_i, TAB_TAIL_REST), loops_only_s, other_s, segments_s,
            tab_part(tab_i, tab_f, TAB_PRE), pre_loop_s, post_s,
        )
        num_tails, num_segments = tail_slope.shape[0], segment_slope.shape[0]
        at = arrays_used
        for part in (tail_slope, tail_intercept, segment_slope, segment_start, segment_end):
            arrays[at:at + part.shape[0]] = part
            at += part.shape[0]
    ints[LI_KIND], ints[LI_M], ints[LI_ARRAYS] = kind, m, arrays_used
    ints[LI_TAILS], ints[LI_SEGMENTS] = num_tails, num_segments
    return arrays_used + 2 * num_tails + 3 * num_segments


@njit(cache=True)
def model_total_s(forward, transfer, hop_latency, m, gpipe, tab_i, tab_f, min_cadence_s):
    """``pipeline.IterationModel(forward, 2·forward, transfer, hop_latency, m, schedule).total_s(min_cadence_s)``,
    operation for operation (``pipeline._longest_s`` for the 1F1B path family, unfolded: it is evaluated once).
    ``tab_i``, ``tab_f`` are ``pipeline.packed_path_tables(S, max(m − 1, 1))``."""
    backward = BACKWARD_TO_FORWARD * forward
    layout_f = np.zeros((1, NUM_LAYOUT_FLOATS))
    layout_i = np.zeros((1, NUM_LAYOUT_INTS), dtype=np.int64)
    kind = _model_scalars(forward, backward, transfer, hop_latency, m, gpipe, layout_f[0])
    if kind != MODEL_PATHS:
        layout_i[0, LI_KIND], layout_i[0, LI_M] = kind, m
        return iteration_total_s(layout_f, layout_i, np.zeros(0), 0, min_cadence_s)
    last_stage_s, other_s, tail_s, loops_only_s, segments_s, pre_loop_s, post_s = _fixed(
        forward, backward, transfer, hop_latency, m, tab_i, tab_f
    )
    tail_rest, advances = tab_part(tab_i, tab_i, TAB_TAIL_REST), tab_part(tab_i, tab_f, TAB_ADVANCES)
    pre = tab_part(tab_i, tab_f, TAB_PRE)
    step_s = max(last_stage_s, max(layout_f[0, LF_MAX_X], min_cadence_s))
    longest = -np.inf
    for a in range(tail_s.shape[0]):
        r = tail_rest[a]
        longest = max(longest, tail_s[a] + max(loops_only_s[r], advances[r] * step_s))
    for b in range(segments_s.shape[0]):
        longest = max(longest, (segments_s[b] + max(pre[b] * step_s, pre_loop_s[b])) + post_s[b])
    return layout_f[0, LF_BASE] + max(longest, other_s)


@njit(cache=True)
def store_layout(forward_r, activation_bytes, wan_message_bytes, allreduce_s, m, gpipe, regions, stages, length,
                 line_gbps, latency, intra_gbps, intra_latency_s, tab_i, tab_f, profile, slot, index, layout_f, layout_i,
                 arrays, arrays_used, places, places_used, lay):
    """Time a job profile's placement and store it as layout ``lay`` of a layout table, indexed at ``slot`` or the
    next free one: what ``layout_table.LayoutTable.store`` does with ``ClusterSim.timing_parts`` (its stage arrays,
    ``pipeline.model_parts`` and the no-stall demand), operation for operation, in one call.

    ``forward_r`` (R,) is the profile's forward time per micro-batch of a stage on each region's GPUs; ``regions``
    and ``stages`` (their first ``length`` entries) the placement; ``line_gbps`` and ``latency`` (R, R) the links;
    ``tab_i``, ``tab_f`` the profile's ``pipeline.packed_path_tables(S, max(M − 1, 1))``. The table's arrays must have room for the
    layout (``layout_table.LayoutTable.add`` grows them). Returns the floats and ints then used.
    """
    # ClusterSim._stage_arrays
    num_stages = 0
    for i in range(length):
        num_stages += stages[i]
    forward = np.empty(num_stages)
    transfer = np.full(num_stages - 1, transfer_time_s(activation_bytes, intra_gbps))
    hop_latency = np.full(num_stages - 1, intra_latency_s)
    q = 0
    for i in range(length):
        for _ in range(stages[i]):
            forward[q] = forward_r[regions[i]]
            q += 1
        if i + 1 < length:  # the region's last stage sends over the WAN
            a, b = regions[i], regions[i + 1]
            transfer[q - 1] = transfer_time_s(wan_message_bytes, line_gbps[a, b])
            hop_latency[q - 1] = latency[a, b]
    row, ints = layout_f[lay], layout_i[lay]
    arrays_used = write_model(forward, transfer, hop_latency, m, gpipe, tab_i, tab_f, row, ints, arrays, arrays_used)
    # ClusterSim.demand_gbps: the message per compute cadence (pipeline.demand_cadence_s)
    cadence = forward.max() if gpipe else (forward + BACKWARD_TO_FORWARD * forward).max()
    row[LF_ALLREDUCE], row[LF_WAN_BYTES] = allreduce_s, wan_message_bytes
    row[LF_DEMAND] = wan_message_bytes * BITS_PER_BYTE / (cadence * BITS_PER_GBIT)  # units.rate_gbps
    ints[LI_PROFILE], ints[LI_PATH], ints[LI_HOPS] = profile, places_used, length - 1
    places[places_used:places_used + length] = regions[:length]
    places[places_used + length:places_used + 2 * length] = stages[:length]
    index_layout(index, slot, lay)
    return arrays_used, places_used + 2 * length


@njit(cache=True)
def layout_key(profile: int, regions: np.ndarray, stages: np.ndarray, length: int) -> int:
    """A 64-bit hash (FNV-1a) of a job profile's placement: where the layout table's index first looks for it."""
    h = _FNV_OFFSET
    h = (h ^ np.uint64(profile)) * _FNV_PRIME
    for i in range(length):
        h = (h ^ np.uint64(regions[i])) * _FNV_PRIME
        h = (h ^ np.uint64(stages[i] + 65536)) * _FNV_PRIME
    return np.int64(h)


@njit(cache=True)
def find_layout(index: np.ndarray, layout_i: np.ndarray, places: np.ndarray, profile: int, regions: np.ndarray,
                stages: np.ndarray, length: int) -> tuple[int, int]:
    """``(layout id, slot)`` of a profile's placement in a layout table, or ``(-1, the slot to insert it at)``.

    ``index`` is an open-addressing hash table: a power-of-two number of slots, each a layout id or ``EMPTY_SLOT``,
    fewer than half of them taken (:func:`new_layout_index`). The search starts at the slot of the placement's
    :func:`layout_key` and walks on past slots that hold other placements (hash collisions), so every id found is
    checked against the placement it holds."""
    wrap = np.int64(index.shape[0] - 1)
    slot = layout_key(profile, regions, stages, length) & wrap
    while index[slot] != EMPTY_SLOT:
        lay = index[slot]
        at = layout_i[lay, LI_PATH]
        same = layout_i[lay, LI_PROFILE] == profile and layout_i[lay, LI_HOPS] + 1 == length
        i = 0
        while same and i < length:
            same = places[at + i] == regions[i] and places[at + length + i] == stages[i]
            i += 1
        if same:
            return lay, slot
        slot = (slot + 1) & wrap
    return -1, slot


EMPTY_SLOT = -1  # a free slot of a layout index


def new_layout_index(num_layouts: int) -> np.ndarray:
    """An empty index for up to ``num_layouts`` layouts (:func:`find_layout`): the least power of two of slots that
    is at least twice as many, so that no more than half of them are ever taken and searches stay short."""
    slots = 2
    while slots < 2 * num_layouts:
        slots *= 2
    return np.full(slots, EMPTY_SLOT, dtype=np.int64)


@njit(cache=True)
def index_layout(index: np.ndarray, slot: int, lay: int) -> int:
    """Put layout ``lay`` at ``slot`` of an index, or at the next free slot after it (a collision); the slot used."""
    wrap = index.shape[0] - 1
    while index[slot] != EMPTY_SLOT:
        slot = (slot + 1) & wrap
    index[slot] = lay
    return slot


@njit(cache=True)
def rebuild_index(index: np.ndarray, layout_i: np.ndarray, places: np.ndarray, num_layouts: int) -> None:
    """Put layouts ``0 … num_layouts − 1`` of a table into the empty ``index``, in order (a grown table's index)."""
    wrap = np.int64(index.shape[0] - 1)
    for lay in range(num_layouts):
        at, length = layout_i[lay, LI_PATH], layout_i[lay, LI_HOPS] + 1
        key = layout_key(layout_i[lay, LI_PROFILE], places[at:at + length], places[at + length:at + 2 * length], length)
        index_layout(index, key & wrap, lay)


@njit(cache=True)
def prefix_sums(values: np.ndarray, out: np.ndarray) -> None:
    """``out[:, 0] = 0`` and ``out[:, 1:] = np.cumsum(values, axis=1)``: each row's running sums, added in order as
    ``np.cumsum`` adds them (``energy.HourlyIntegral``'s prefix sums), in a fifth of its time."""
    for r in range(values.shape[0]):
        out[r, 0] = 0.0
        if values.shape[1]:
            total = values[r, 0]
            out[r, 1] = total
            for h in range(1, values.shape[1]):
                total += values[r, h]
                out[r, h + 1] = total


@njit(cache=True)
def weighted_integral(prefix_h: np.ndarray, values: np.ndarray, rows: np.ndarray, weights: np.ndarray, length: int,
                      t0_s: float, t1_s: float) -> float:
    """``Σ_i weights[i] · ∫_{t0}^{t1} series[rows[i]] dt`` over the first ``length`` rows, as
    ``energy.HourlyIntegral.weighted_integral`` computes it."""
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


@njit(cache=True)
def pairwise_sum(values: np.ndarray, count: int) -> float:
    """``values[:count].sum()`` as numpy computes it (pairwise: blocks of 8 accumulators, halves past 128), so
    that compiled code reproduces numpy's sums bit for bit."""
    if count < 8:
        total = 0.0
        for i in range(count):
            total += values[i]
        return total
    if count <= 128:
        r0, r1, r2, r3 = values[0], values[1], values[2], values[3]
        r4, r5, r6, r7 = values[4], values[5], values[6], values[7]
        i = 8
        while i < count - count % 8:
            r0 += values[i]
            r1 += values[i + 1]
            r2 += values[i + 2]
            r3 += values[i + 3]
            r4 += values[i + 4]
            r5 += values[i + 5]
            r6 += values[i + 6]
            r7 += values[i + 7]
            i += 8
        total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < count:
            total += values[i]
            i += 1
        return total
    half = count // 2
    half -= half % 8
    return pairwise_sum(values, half) + pairwise_sum(values[half:], count - half)


def warm_up() -> None:
    """Call the kernels that Python calls directly once on tiny inputs, so that loading them from numba's disk
    cache (or compiling them, the first time on a machine) happens here and not inside the first episode."""
    one, regions = np.ones(1), np.zeros(1)
    series_prefix, series_values = np.zeros((1, 2)), np.zeros((1, 1))
    running = np.zeros(1, dtype=np.int64)
    job_f, job_i = np.ones((NUM_JOB_FLOATS, 1)), np.zeros((NUM_JOB_INTS, 1), dtype=np.int64)
    series = (series_prefix, series_values, series_prefix, series_values, False)
    advance_interval(0.0, 1.0, running, job_f, regions, 0.0, series, 0, 0, np.zeros(6))
    advance_hours(0.0, 1.0, 0.0, 0.0, running, job_f, regions, 0.0, series, 0, 0, np.zeros(6))
    advance_to_event(0.0, 1.0, 0.0, 0.0, True, running, job_f, regions, 0.0, series, 0, 0, np.zeros(6))
    region_power(np.zeros((1, 1)), running, np.zeros(1), np.zeros(1))
    prefix_sums(series_values, series_prefix)
    layout_i = np.zeros((1, NUM_LAYOUT_INTS), dtype=np.int64)
    index = new_layout_index(1)
    find_layout(index, layout_i, running, 0, running, running, 1)
    rebuild_index(index, layout_i, np.zeros(2, dtype=np.int64), 1)
    reallocate(running, job_f, job_i, np.zeros((1, 1), dtype=np.int64), np.ones((1, 1)), np.zeros(1), 0.0, 0,
               np.zeros((1, 1)), np.zeros(1), np.zeros(1))
