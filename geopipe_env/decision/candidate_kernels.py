"""Layer 5: the built-in strategies, compiled, and the candidate table they give.

:func:`candidate_table` computes, for every visible job, the placements of the five named strategies
(``bace-pipe`` with its default reading, ``cr-lcf``, ``cr-ldf``, ``lcf``, ``ldf``), the pool of those and every
single region that holds the job, each pool entry's estimate, cost and carbon, the ``fastest`` / ``cheapest`` /
``greenest`` choices among the pool, BACE-Pipe's two ablations where they are columns, and the placements that
registered strategies' Python rules give. Its specification is ``candidate_row`` in ``tests/reference.py``, from
the Python rules of ``tests/reference_placement.py``; ``tests/test_candidate_kernels.py`` checks the two against
each other, decision for decision. Ties, orders and arithmetic follow the Python code step by step, so the same
placements come out and the numbers agree to rounding. Every job's timing is read from a
:class:`geopipe_env.simulation.layout_table.LayoutTable`; a placement whose layout is not stored yet is reported
back as a miss for the caller to add.
"""

from __future__ import annotations

import numpy as np

from geopipe_env.base.compiled import jit, jit_inline
from geopipe_env.simulation.layout_table import find_layout
from geopipe_env.physics.energy import cumulative_at, gpu_power_w, weighted_integral
from geopipe_env.physics.network import is_stalled
from geopipe_env.physics.pipeline import MODEL_EXECUTOR, iteration_total_s
from geopipe_env.base.tables import (
    C_CARBON, C_COST, C_DEMAND, C_DURATION, C_ITERATION, C_RATE, C_STALLED, CAND_BANDWIDTH_SLACK, CAND_CARBON,
    CJ_JOB_I, CJ_JOB_RUN_S, CJ_PROFILE_F, CJ_PROFILE_I, CJ_STRATEGIES, CO_CANDIDATE_F, CO_CANDIDATE_LENGTH,
    CO_CANDIDATE_OF, CO_CANDIDATE_PLACE, CO_GIVEN, CO_MISSES, CW_CARBON_PREFIX, CW_CARBON_VALUES, CW_LINKS,
    CW_PRICE_PREFIX, CW_PRICE_VALUES, CW_REGION_F, DS_CAPACITY, DS_FREE_GPUS, DS_LINK_LOAD, DS_NOW_S, LA_ARRAYS,
    LA_INDEX, LA_LAYOUT_F, LA_LAYOUT_I, LA_PLACES,
    CAND_COST, CAND_FEASIBLE, CAND_LOG_DURATION, CAND_LOG_ITERATION_VS_LOCAL, CAND_SCHEDULE, CAND_STALLED,
    CAND_WAN_HOPS, C_SCHEDULE, J_ITERATIONS, J_PROFILE, LF_ALLREDUCE, LF_DEMAND, LF_MEMO_CADENCE, LF_MEMO_TOTAL, LF_WAN_BYTES, LI_KIND,
    LI_SCHEDULE, LI_WRAP,
    P_FITS, P_MICROBATCHES, P_STAGE_GPUS, P_STAGES, P_TABLE_ID, PF_ADMIT_PER_FORWARD,
    PF_BUSY_PER_FORWARD, PF_FORWARD, PF_WAN_BYTES,
)
from geopipe_env.base.units import GRAMS_PER_KG, SECONDS_PER_HOUR, WATTS_PER_KW, transfer_time_s

# Strategy codes (``strategies.BUILT_IN`` binds them to names): the named strategies, which make the pool in this
# order, then the selectors, then BACE-Pipe's two ablations (named, not pooled). A negative code
# (``strategies.NO_TWIN``) is a registered strategy, whose placements its Python rule gives the kernel.
BACE_PIPE, CR_LCF, CR_LDF, LCF, LDF, FASTEST, CHEAPEST, GREENEST, BACE_PIPE_NO_PATHFINDER, BACE_PIPE_NO_COSTMIN = range(10)
NUM_NAMED = 5
# Path growth scores: minus the new region's key, the price (cr-lcf) or the cost rank (bace-pipe-no-pathfinder);
# free stages and spare bandwidth (cr-ldf); spare bandwidth (bace-pipe, bace-pipe-no-costmin).
_BY_PRICE, _BY_FREE_AND_SPARE, _BY_SPARE = range(3)


@jit
def cost_rank(price_prefix: np.ndarray, price_values: np.ndarray, now_s: float, run_s: float,
              watts_per_tflops: np.ndarray, start_cum: np.ndarray, end_cum: np.ndarray, out: np.ndarray) -> None:
    """Per region into ``out``, what a unit of a job's GPU work costs there (``PlacementContext.cost_rank``, the
    order of BACE-Pipe's Cost-Min): the mean electricity price over the job's expected run, ``now_s`` to
    ``now_s + run_s`` (its running integral's two ends go into ``start_cum`` and ``end_cum``), × the GPUs' facility
    W per TFLOPS."""
    cumulative_at(price_prefix, price_values, now_s, start_cum)
    cumulative_at(price_prefix, price_values, now_s + run_s, end_cum)
    for r in range(out.shape[0]):
        out[r] = (end_cum[r] - start_cum[r]) * (SECONDS_PER_HOUR / run_s) * watts_per_tflops[r]


@jit
def _before(key_a: float, a: int, key_b: float, b: int) -> bool:
    """``(key_a, a) < (key_b, b)``: Python's order of ``(key, region)`` tuples."""
    return key_a < key_b or (key_a == key_b and a < b)


@jit
def _sort_by(keys: np.ndarray, regions: np.ndarray, count: int) -> None:
    """Sort ``regions[:count]`` in place by ``(keys[r], r)`` (``sorted(regions, key=lambda r: (keys[r], r))``)."""
    for i in range(1, count):
        r = regions[i]
        j = i - 1
        while j >= 0 and _before(keys[r], r, keys[regions[j]], regions[j]):
            regions[j + 1] = regions[j]
            j -= 1
        regions[j + 1] = r


@jit
def _admits(a: int, b: int, spare: np.ndarray, latency: np.ndarray, admit_s: np.ndarray, wan_bytes: float) -> bool:
    """BACE-Pipe's admission test (``reference_placement.comm_fits_compute``, the tests' specification):
    ``d·A·8/B_avail + latency <= t_f + t_b`` on boundary a→b, per message of the job's schedule; ``admit_s`` (R,) is
    the right-hand side per region (``placement.admission_per_forward`` × the forward time)."""
    free_bw = min(spare[a, b], spare[b, a])
    if free_bw <= 0.0:
        return False
    comm_s = transfer_time_s(wan_bytes, free_bw) + latency[a, b]
    return comm_s <= min(admit_s[a], admit_s[b])


@jit
def _ever_admitted(capacity: np.ndarray, bandwidth: np.ndarray, latency: np.ndarray, admit_s: np.ndarray,
                   wan_bytes: float, fits: np.ndarray, region_gpus: np.ndarray, stage_gpus: int, needed: int,
                   price: np.ndarray, path: np.ndarray, in_path: np.ndarray) -> bool:
    """``reference_placement.ever_admitted``: with every GPU free and every link's line rate spare, some region the
    job fits holds it whole, or BACE-Pipe's pathfinder grows an admissible path from some region."""
    num_regions = capacity.shape[0]
    free = np.zeros(num_regions, dtype=np.int64)
    for r in range(num_regions):
        if fits[r]:
            free[r] = int(region_gpus[r]) // stage_gpus
            if free[r] >= needed:
                return True
    for start in range(num_regions):
        if free[start] > 0 and _grow_path(start, needed, free, bandwidth, capacity, latency, admit_s, wan_bytes,
                                          price, _BY_SPARE, 1.0, 1.0, True, True, path, in_path):
            return True
    return False


@jit
def _grow_path(start: int, needed: int, free: np.ndarray, bandwidth: np.ndarray, spare: np.ndarray,
               latency: np.ndarray, admit_s: np.ndarray, wan_bytes: float, price: np.ndarray, score_kind: int,
               max_free: float, max_bw: float, admissible: bool, both_ends: bool, path: np.ndarray,
               in_path: np.ndarray) -> int:
    """``reference_placement._grow_path``: the path's length in ``path`` (0 if it cannot hold ``needed`` stages)."""
    num_regions = free.shape[0]
    in_path[:] = False
    path[0] = start
    in_path[start] = True
    length = 1
    held = free[start]
    while held < needed:
        best, best_score, at_head = -1, -np.inf, False
        num_ends = 2 if both_ends and length > 1 else 1
        for e in range(num_ends):
            end = path[length - 1] if e == 0 else path[0]
            for new in range(num_regions):
                if bandwidth[end, new] <= 0.0 or free[new] <= 0 or in_path[new]:
                    continue
                if admissible and not _admits(end, new, spare, latency, admit_s, wan_bytes):
                    continue
                if score_kind == _BY_PRICE:
                    score = -price[new]
                elif score_kind == _BY_FREE_AND_SPARE:
                    score = free[new] / max_free + spare[end, new] / max_bw
                else:
                    score = spare[end, new]
                if score > best_score:
                    best, best_score, at_head = new, score, e == 1
        if best < 0:
            return 0
        if at_head:
            for i in range(length, 0, -1):
                path[i] = path[i - 1]
            path[0] = best
        else:
            path[length] = best
        in_path[best] = True
        length += 1
        held += free[best]
    return length


@jit
def _fill_in_order(path: np.ndarray, length: int, free: np.ndarray, needed: int, regions: np.ndarray,
                   stages: np.ndarray) -> int:
    """``reference_placement._fill_in_order``: the placement's length in ``regions``/``stages`` (0 if none)."""
    placed, count = 0, 0
    for i in range(length):
        r = path[i]
        take = min(free[r], needed - placed)
        if take > 0:
            regions[count] = r
            stages[count] = take
            count += 1
            placed += take
        if placed == needed:
            return count
    return 0


@jit
def _cost_min_allocate(path: np.ndarray, length: int, free: np.ndarray, needed: int, rank: np.ndarray,
                       regions: np.ndarray, stages: np.ndarray, order: np.ndarray) -> int:
    """``reference_placement.cost_min_allocate``: one stage per path region, the rest in ascending cost; length or 0."""
    if length > needed:
        return 0
    for i in range(length):
        if free[path[i]] < 1:
            return 0
        regions[i] = path[i]
        stages[i] = 1
        order[i] = path[i]
    _sort_by(rank, order, length)
    left = needed - length
    for j in range(length):
        r = order[j]
        take = min(free[r] - 1, left)
        for i in range(length):
            if regions[i] == r:
                stages[i] += take
        left -= take
    return 0 if left > 0 else length


@jit
def _best_single(free: np.ndarray, needed: int, keys: np.ndarray) -> int:
    """``reference_placement.single_region``: the region minimising ``(keys[r], r)`` that holds ``needed`` stages,
    or -1."""
    best = -1
    for r in range(free.shape[0]):
        if free[r] >= needed and (best < 0 or _before(keys[r], r, keys[best], best)):
            best = r
    return best


@jit
def _named(code: int, free: np.ndarray, free_gpus: np.ndarray, needed: int, bandwidth: np.ndarray, spare: np.ndarray,
           max_spare: float, latency: np.ndarray, admit_s: np.ndarray, wan_bytes: float, price: np.ndarray,
           rank: np.ndarray, regions: np.ndarray, stages: np.ndarray, path: np.ndarray, in_path: np.ndarray,
           order: np.ndarray, admissible: bool) -> int:
    """The placement of named strategy ``code`` (``strategies.BUILT_IN``) in ``regions``/``stages``; its
    length, 0 if the strategy finds none. ``admissible``: BACE-Pipe's paths pass its admission test (false for a
    job no link could ever admit, :func:`_ever_admitted`)."""
    num_regions = free.shape[0]
    if code == LCF or code == LDF:
        keys = price if code == LCF else -free_gpus.astype(np.float64)
        best = _best_single(free, needed, keys)
        if best < 0:
            return 0
        regions[0], stages[0] = best, needed
        return 1
    if code == BACE_PIPE or code == BACE_PIPE_NO_PATHFINDER or code == BACE_PIPE_NO_COSTMIN:
        # The pathfinder (reference_placement.bace_pathfinder): the best single region that holds the job, else a path
        # grown from each start in order. The no-pathfinder ablation grows by cost rank with no admission test; the
        # no-Cost-Min one orders by free stages and fills its path in order.
        keys = -free.astype(np.float64) if code == BACE_PIPE_NO_COSTMIN else rank
        best = _best_single(free, needed, keys)
        length = 0
        if best >= 0:
            path[0] = best
            length = 1
        else:
            count = 0
            starts = np.empty(num_regions, dtype=np.int64)
            for r in range(num_regions):
                if free[r] > 0:
                    starts[count] = r
                    count += 1
            _sort_by(keys, starts, count)
            for i in range(count):
                if code == BACE_PIPE_NO_PATHFINDER:
                    length = _grow_path(starts[i], needed, free, bandwidth, spare, latency, admit_s, wan_bytes, rank,
                                        _BY_PRICE, 1.0, 1.0, False, True, path, in_path)
                else:
                    length = _grow_path(starts[i], needed, free, bandwidth, spare, latency, admit_s, wan_bytes,
                                        price, _BY_SPARE, 1.0, 1.0, admissible, True, path, in_path)
                if length:
                    break
        if length == 0:
            return 0
        if code == BACE_PIPE_NO_COSTMIN:
            return _fill_in_order(path, length, free, needed, regions, stages)
        return _cost_min_allocate(path, length, free, needed, rank, regions, stages, order)
    start, max_free = -1, 1.0
    for r in range(num_regions):
        max_free = max(max_free, float(free[r]))
        if free[r] <= 0:
            continue
        if start < 0:
            start = r
        elif code == CR_LCF and _before(price[r], r, price[start], start):
            start = r
        elif code == CR_LDF and free[r] > free[start]:
            start = r
    if start < 0:
        return 0
    kind = _BY_PRICE if code == CR_LCF else _BY_FREE_AND_SPARE
    length = _grow_path(start, needed, free, bandwidth, spare, latency, admit_s, wan_bytes, price, kind, max_free,
                        max(max_spare, 1e-9), False, False, path, in_path)
    if length == 0:
        return 0
    return _fill_in_order(path, length, free, needed, regions, stages)


@jit
def _same(regions_a: np.ndarray, stages_a: np.ndarray, length_a: int, regions_b: np.ndarray, stages_b: np.ndarray,
          length_b: int) -> bool:
    """Whether two placements (regions, stages, path length) are equal."""
    if length_a != length_b:
        return False
    for i in range(length_a):
        if regions_a[i] != regions_b[i] or stages_a[i] != stages_b[i]:
            return False
    return True


@jit_inline
def _pool_entry(pool_regions: np.ndarray, pool_stages: np.ndarray, pool_length: np.ndarray, count: int,
                regions: np.ndarray, stages: np.ndarray, length: int) -> tuple[int, int]:
    """A placement's entry among the first ``count`` of a pool, added at ``count`` if it is not there:
    ``(entry, entries now)``."""
    for j in range(count):
        if _same(pool_regions[j], pool_stages[j], pool_length[j], regions, stages, length):
            return j, count
    pool_regions[count, :length] = regions[:length]
    pool_stages[count, :length] = stages[:length]
    pool_length[count] = length
    return count, count + 1


@jit
def candidate_table(state, world, jobs, visible, layouts, output, mask) -> tuple[int, int, int]:
    """The candidate table of the visible jobs (the specification's ``candidate_row`` for each, in slot order).

    Args:
        state: ``tables.DECISION_STATE``: the decision instant, free GPUs per region, and each directed link's
            capacity and load (the strategies read what is left, ``max(capacity − load, 0)``).
        world: ``tables.CANDIDATE_WORLD``: link capacities and latencies, the regions' power figures, and the
            hourly price and carbon series as ``HourlyIntegral`` holds them.
        jobs: ``tables.CANDIDATE_JOBS``: per job profile, its WAN message ``d·A`` in bytes, busy and admission time
            per forward, then its forward time per region (``tables.PROFILE_FLOATS``); its layout-table id, stage
            count, GPUs per stage and micro-batches, then its memory fit per region (``tables.PROFILE_INTS``); per
            job, its profile and iterations (``tables.CANDIDATE_JOB_INTS`` rows) and its isolated duration (what
            BACE-Pipe's cost rank spreads the price over); the strategy codes (``BACE_PIPE`` …
            ``BACE_PIPE_NO_COSTMIN``; a negative code is a registered strategy's column, whose placements the caller
            gives in ``output``'s ``given``).
        visible (Q',): the visible jobs' ids, in slot order.
        layouts: ``tables.LAYOUT_ARRAYS`` of a :class:`~geopipe_env.simulation.layout_table.LayoutTable`.
        output: ``tables.CANDIDATE_OUTPUT``, read: the placements given for registered strategies' columns;
            written: the candidate behind each action (−1: masked); each
            candidate's figures (``tables.CANDIDATE_FLOATS``), regions and stages, and path length; the (profile,
            length, regions, stages) of placements whose layout the table lacks, and ``−1 − lay`` (first column)
            for executor layouts to time at the floor their row asks for (``LayoutTable.time_requested``).
        mask (Q·K + 1,): written (with no misses), the env's action mask: action ``slot·K + k`` valid where
            ``candidate_of[slot, k] >= 0``, every other action invalid but the last (wait), which is valid.

    Returns:
        ``(candidates, misses, launches)``: how many rows of the first two were written, and how many actions
        launch a job. With misses the table is incomplete: add or time them and call again.
    """
    now_s, free_gpus, capacity, link_load = (
        state[DS_NOW_S], state[DS_FREE_GPUS], state[DS_CAPACITY], state[DS_LINK_LOAD]
    )
    links, region_f = world[CW_LINKS], world[CW_REGION_F]
    price_prefix, price_values = world[CW_PRICE_PREFIX], world[CW_PRICE_VALUES]
    carbon_prefix, carbon_values = world[CW_CARBON_PREFIX], world[CW_CARBON_VALUES]
    profile_f, profile_i = jobs[CJ_PROFILE_F], jobs[CJ_PROFILE_I]
    job_i, job_run_s, strategies = jobs[CJ_JOB_I], jobs[CJ_JOB_RUN_S], jobs[CJ_STRATEGIES]
    index, layout_f, layout_i = layouts[LA_INDEX], layouts[LA_LAYOUT_F], layouts[LA_LAYOUT_I]
    arrays, places = layouts[LA_ARRAYS], layouts[LA_PLACES]
    candidate_of, candidate_f = output[CO_CANDIDATE_OF], output[CO_CANDIDATE_F]
    candidate_place, candidate_length = output[CO_CANDIDATE_PLACE], output[CO_CANDIDATE_LENGTH]
    misses, given = output[CO_MISSES], output[CO_GIVEN]
    num_regions = free_gpus.shape[0]
    num_slots = visible.shape[0]
    bandwidth, latency = links[0], links[1]
    watts_per_tflops, idle_w, busy_w, pue = region_f[0], region_f[1], region_f[2], region_f[3]
    spare = np.maximum(capacity - link_load, 0.0)
    max_spare = spare.max()
    num_profiles = profile_f.shape[0]
    hour = min(int(max(now_s, 0.0) // SECONDS_PER_HOUR), price_values.shape[1] - 1)
    price = np.ascontiguousarray(price_values[:, hour])
    pool_size = NUM_NAMED + num_regions + strategies.shape[0]  # the pool, then the columns' own placements
    # Per profile, its free stages and its named placements (computed for the first visible job of the profile,
    # as PlacementContext.named keeps them for the specification).
    done = np.zeros(num_profiles, dtype=np.bool_)
    free_of = np.zeros((num_profiles, num_regions), dtype=np.int64)
    named_regions = np.zeros((num_profiles, NUM_NAMED, num_regions), dtype=np.int64)
    named_stages = np.zeros((num_profiles, NUM_NAMED, num_regions), dtype=np.int64)
    named_length = np.zeros((num_profiles, NUM_NAMED), dtype=np.int64)
    path = np.empty(num_regions, dtype=np.int64)
    in_path = np.empty(num_regions, dtype=np.bool_)
    order = np.empty(num_regions, dtype=np.int64)
    rank = np.empty(num_regions)
    start_cum = np.empty(num_regions)
    end_cum = np.empty(num_regions)
    pool_regions = np.zeros((pool_size, num_regions), dtype=np.int64)
    pool_stages = np.zeros((pool_size, num_regions), dtype=np.int64)
    pool_length = np.zeros(pool_size, dtype=np.int64)
    pool_candidate = np.zeros(pool_size, dtype=np.int64)
    named_at = np.zeros(NUM_NAMED, dtype=np.int64)
    # BACE-Pipe's ablations, by column: their placements per profile (as the named ones), and each column's entry
    # after the pool at the current slot.
    num_columns = strategies.shape[0]
    ablations = 0
    for k in range(num_columns):
        if strategies[k] == BACE_PIPE_NO_PATHFINDER or strategies[k] == BACE_PIPE_NO_COSTMIN:
            ablations += 1
    size_of = num_profiles if ablations else 0
    column_regions = np.zeros((size_of, num_columns, num_regions), dtype=np.int64)
    column_stages = np.zeros((size_of, num_columns, num_regions), dtype=np.int64)
    column_length = np.zeros((size_of, num_columns), dtype=np.int64)
    column_at = np.full(num_columns, -1, dtype=np.int64)
    kw = np.empty(num_regions)
    candidate_of[:, :] = -1
    num_candidates, num_misses = 0, 0
    for slot in range(num_slots):
        job = visible[slot]
        p = job_i[J_PROFILE, job]
        ints = profile_i[p]
        needed, stage_gpus, m = ints[P_STAGES], ints[P_STAGE_GPUS], ints[P_MICROBATCHES]
        forward = profile_f[p, PF_FORWARD:PF_FORWARD + num_regions]
        wan_bytes = profile_f[p, PF_WAN_BYTES]
        if not done[p]:
            done[p] = True
            for r in range(num_regions):
                free_of[p, r] = free_gpus[r] // stage_gpus if ints[P_FITS + r] else 0
            cost_rank(price_prefix, price_values, now_s, job_run_s[job], watts_per_tflops, start_cum, end_cum, rank)
            admit_s = profile_f[p, PF_ADMIT_PER_FORWARD] * forward
            admissible = _ever_admitted(capacity, bandwidth, latency, admit_s, wan_bytes, ints[P_FITS:], region_f[4],
                                        stage_gpus, needed, price, path, in_path)
            for code in range(NUM_NAMED):
                named_length[p, code] = _named(
                    code, free_of[p], free_gpus, needed, bandwidth, spare, max_spare, latency, admit_s,
                    wan_bytes, price, rank, named_regions[p, code],
                    named_stages[p, code], path, in_path, order, admissible,
                )
            if ablations:
                for k in range(num_columns):
                    code = strategies[k]
                    if code == BACE_PIPE_NO_PATHFINDER or code == BACE_PIPE_NO_COSTMIN:
                        column_length[p, k] = _named(
                            code, free_of[p], free_gpus, needed, bandwidth, spare, max_spare, latency, admit_s,
                            wan_bytes, price, rank, column_regions[p, k], column_stages[p, k], path, in_path, order,
                            admissible,
                        )
        free = free_of[p]
        # The pool: the named placements, then every single region that holds the job, without repeats.
        size = 0
        for i in range(NUM_NAMED + num_regions):
            if i < NUM_NAMED:
                length = named_length[p, i]
                if length == 0:
                    named_at[i] = -1
                    continue
                regions, stages = named_regions[p, i], named_stages[p, i]
            else:
                r = i - NUM_NAMED
                if free[r] < needed:
                    continue
                regions, stages, length = pool_regions[size], pool_stages[size], 1
                regions[0], stages[0] = r, needed
            at, size = _pool_entry(pool_regions, pool_stages, pool_length, size, regions, stages, length)
            if i < NUM_NAMED:
                named_at[i] = at
        # The ablations' placements and those the caller gives for registered strategies, after the pool (the
        # selectors choose among the pool only).
        described = size
        for k in range(num_columns):
            column_at[k] = -1
            code = strategies[k]
            if code < 0:
                length = given[slot, k, 0]
                if length > 0:
                    column_at[k], described = _pool_entry(pool_regions, pool_stages, pool_length, described,
                                                          given[slot, k, 1:1 + num_regions],
                                                          given[slot, k, 1 + num_regions:], length)
            elif ablations and column_length[p, k] > 0:
                column_at[k], described = _pool_entry(pool_regions, pool_stages, pool_length, described,
                                                      column_regions[p, k], column_stages[p, k], column_length[p, k])
        # Describe each entry (placement.PlacementContext.describe).
        for j in range(described):
            pool_candidate[j] = -1
            length = pool_length[j]
            regions, stages = pool_regions[j], pool_stages[j]
            lay, _ = find_layout(index, layout_i, places, ints[P_TABLE_ID], regions, stages, length)
            if lay < 0:
                misses[num_misses, 0] = p
                misses[num_misses, 1] = length
                misses[num_misses, 2:2 + length] = regions[:length]
                misses[num_misses, 2 + num_regions:2 + num_regions + length] = stages[:length]
                num_misses += 1
                continue
            demand = layout_f[lay, LF_DEMAND]
            rate = demand
            if length > 1:
                free_bw = np.inf
                for h in range(length - 1):
                    a, b = regions[h], regions[h + 1]
                    free_bw = min(free_bw, min(spare[a, b], spare[b, a]))
                if layout_i[lay, LI_WRAP]:  # an interleaved pipeline's wrap from its last region to its first
                    a, b = regions[length - 1], regions[0]
                    free_bw = min(free_bw, min(spare[a, b], spare[b, a]))
                rate = min(demand, free_bw)
            if rate <= 0.0:
                continue
            min_cadence = 0.0
            if length > 1:
                min_cadence = transfer_time_s(layout_f[lay, LF_WAN_BYTES], rate)
            if layout_i[lay, LI_KIND] == MODEL_EXECUTOR:
                # The executor runs in Python, behind the process's timing memo: a time at another cadence floor
                # than the row's memo holds is asked for (the floor written, the time NaN) as a miss ``−1 − lay``.
                if layout_f[lay, LF_MEMO_CADENCE] != min_cadence or np.isnan(layout_f[lay, LF_MEMO_TOTAL]):
                    layout_f[lay, LF_MEMO_CADENCE] = min_cadence
                    layout_f[lay, LF_MEMO_TOTAL] = np.nan
                    misses[num_misses, 0] = -1 - lay
                    num_misses += 1
                    continue
                t_iter = layout_f[lay, LF_MEMO_TOTAL]
            else:
                t_iter = iteration_total_s(layout_f, layout_i, arrays, lay, min_cadence)
            t_iter += layout_f[lay, LF_ALLREDUCE]
            duration = t_iter * job_i[J_ITERATIONS, job]
            if not np.isfinite(duration):
                continue
            busy_per_forward = m * profile_f[p, PF_BUSY_PER_FORWARD]
            for h in range(length):
                r = regions[h]
                busy_fraction = float(busy_per_forward * forward[r]) / t_iter
                gpus = stages[h] * stage_gpus
                kw[h] = gpu_power_w(gpus, idle_w[r], busy_w[r], busy_fraction, pue[r]) / WATTS_PER_KW
            end_s = now_s + duration
            c = num_candidates
            num_candidates += 1
            pool_candidate[j] = c
            out = candidate_f[c]
            out[C_ITERATION] = t_iter
            out[C_DURATION] = duration
            out[C_COST] = weighted_integral(price_prefix, price_values, regions, kw, length, now_s, end_s)
            out[C_CARBON] = (
                weighted_integral(carbon_prefix, carbon_values, regions, kw, length, now_s, end_s) / GRAMS_PER_KG
            )
            out[C_RATE] = rate
            out[C_DEMAND] = demand
            out[C_STALLED] = 1.0 if is_stalled(rate, demand) else 0.0
            out[C_SCHEDULE] = float(layout_i[lay, LI_SCHEDULE])
            candidate_place[c, :length] = regions[:length]
            candidate_place[c, num_regions:num_regions + length] = stages[:length]
            candidate_length[c] = length
        if num_misses:
            continue
        for k in range(strategies.shape[0]):
            code = strategies[k]
            if code >= 0 and code < NUM_NAMED:
                at = named_at[code]
                candidate_of[slot, k] = -1 if at < 0 else pool_candidate[at]
                continue
            if code < 0 or code == BACE_PIPE_NO_PATHFINDER or code == BACE_PIPE_NO_COSTMIN:
                at = column_at[k]
                candidate_of[slot, k] = -1 if at < 0 else pool_candidate[at]
                continue
            column = C_DURATION if code == FASTEST else C_COST if code == CHEAPEST else C_CARBON
            best, best_value = -1, np.inf
            for j in range(size):
                c = pool_candidate[j]
                if c < 0:
                    continue
                value = candidate_f[c, column]
                if np.isfinite(value) and (best < 0 or value < best_value):
                    best, best_value = c, value
            candidate_of[slot, k] = best
    launches = 0
    if num_misses == 0:
        mask[:] = False
        num_strategies = strategies.shape[0]
        for slot in range(num_slots):
            for k in range(num_strategies):
                if candidate_of[slot, k] >= 0:
                    mask[slot * num_strategies + k] = True
                    launches += 1
        mask[mask.shape[0] - 1] = True
    return num_candidates, num_misses, launches


@jit
def candidate_features(candidate_of: np.ndarray, candidate_f: np.ndarray, candidate_length: np.ndarray,
                       slot_local_iteration_s: np.ndarray, slot_schedules: np.ndarray, t_local_s: float,
                       c_ref_usd: float, wan_scale: float, carbon_ref_kg: float, out: np.ndarray,
                       can_start: np.ndarray) -> None:
    """Write the observation's candidate rows (``tables.CANDIDATE_FEATURES``) of a computed table into
    ``out`` (Q·K, 9) float32, as ``ObservationEncoder.encode`` does from ``CandidateInfo`` values (before its
    clipping), and whether each visible job has a candidate into ``can_start`` (Q,). ``slot_local_iteration_s`` (Q,)
    holds each visible job's in-region iteration time, ``t_local_s`` the episode's time scale; ``slot_schedules`` (Q, 8)
    holds each visible job's accepted schedules' codes (``tables.CAND_SCHEDULE`` values)."""
    num_slots, num_strategies = candidate_of.shape
    for slot in range(num_slots):
        can_start[slot] = 0.0
        for k in range(num_strategies):
            c = candidate_of[slot, k]
            if c < 0:
                continue
            can_start[slot] = 1.0
            f = candidate_f[c]
            hops = candidate_length[c] - 1
            row = out[slot * num_strategies + k]
            row[CAND_FEASIBLE] = 1.0
            row[CAND_LOG_ITERATION_VS_LOCAL] = np.log(f[C_ITERATION] / slot_local_iteration_s[slot])
            row[CAND_LOG_DURATION] = np.log(f[C_DURATION] / t_local_s)
            row[CAND_COST] = f[C_COST] / c_ref_usd
            row[CAND_WAN_HOPS] = hops / wan_scale
            row[CAND_BANDWIDTH_SLACK] = f[C_RATE] / f[C_DEMAND] if hops else 1.0
            row[CAND_STALLED] = f[C_STALLED]
            row[CAND_CARBON] = f[C_CARBON] / carbon_ref_kg
            row[CAND_SCHEDULE] = slot_schedules[slot, int(f[C_SCHEDULE])]


