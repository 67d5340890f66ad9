"""Layer 4: the layouts of (job profile, placement) pairs as flat arrays, for the compiled candidate table.

A layout's timing at any allocated rate needs only its analytic model taken apart (``pipeline.model_scalars``,
``pipeline.fold_paths``) plus its no-stall demand and all-reduce time. :class:`LayoutTable` stores these once per
layout, in rows of flat arrays (columns: ``tables.LAYOUT_FLOATS`` and ``tables.LAYOUT_INTS``) that compiled code
reads by integer id (``pipeline.iteration_total_s``), and finds a placement's id by a hash of it in an
open-addressing index, a plain array (:func:`find_layout`). :func:`store_layout` times and stores a new layout in
compiled code. A layout the schedule executor times keeps only its placement, demand and a one-entry memo of its time
in the table; the compiled table asks Python for a time at a new cadence floor (:meth:`LayoutTable.time_requested`),
which the process's one timing memo answers (``schedule.TIMINGS``). The envs of a process share one table per world
timing (:func:`shared_table`): layouts recur across episodes and envs of one scenario.
"""

from __future__ import annotations

import numpy as np

from geopipe_env.base.caches import ProcessCache
from geopipe_env.base.compiled import jit
from geopipe_env.simulation.core_types import Job, Placement, World, timing_key
from geopipe_env.physics import pipeline, schedule
from geopipe_env.physics.pipeline import (
    MODEL_EXECUTOR, MODEL_PATHS, demand_gbps, fold_paths, model_scalars, packed_fixed_paths, stage_arrays, tab_part,
)
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.base.tables import (
    LA_ARRAYS, LA_INDEX, LA_LAYOUT_F, LA_LAYOUT_I, LA_PLACES, LAYOUT_ARRAYS, LAYOUT_JOB, LAYOUT_NETWORK, LJ_ACTIVATION_BYTES,
    LJ_ALLREDUCE_S, LJ_BACKWARD_RATIO, LJ_FORWARD_R, LJ_GPIPE, LJ_MICROBATCHES, LJ_PROFILE, LJ_TAB_F, LJ_TAB_I,
    LJ_WAN_MESSAGE_BYTES, LN_INTRA_GBPS, LN_INTRA_LATENCY_S, LN_LATENCY, LN_LINE_GBPS, LAYOUT_FLOATS, LAYOUT_INTS, LF_ALLREDUCE, LF_BASE, LF_CONSTANT, LF_DEMAND, LF_LAST_STAGE, LF_MEMO_CADENCE,
    LF_MEMO_TOTAL, LF_WAN_BYTES, LI_ARRAYS, LI_HOPS, LI_KIND, LI_M, LI_PATH, LI_PROFILE, LI_SCHEDULE, LI_SEGMENTS,
    LI_TAILS, LI_WRAP, TAB_PRE, TAB_SEGMENT, TAB_TAIL_REST,
)

# The table empties itself when its path arrays pass this many floats (8 MiB), or its layouts MAX_TABLE_LAYOUTS.
MAX_TABLE_FLOATS = 1 << 20
MAX_TABLE_LAYOUTS = 4096
SHARED_TABLES = 4  # tables the process keeps (shared_table), one per world timing


class LayoutTable:
    """Layouts of one world's timing at its line rates (pass one table only to worlds with equal
    :func:`timing_key`, and empty it when their line rates change). With ``exact``, every layout is timed in
    Python through the process's timing memo, as the executor's are (the closed forms too, by their exact
    simulation). Pickles empty: it is a cache."""

    def __init__(self, exact: bool = False) -> None:
        self.exact = exact
        self.layout_f = np.zeros((16, len(LAYOUT_FLOATS)))  # (capacity, NUM_LAYOUT_FLOATS)
        self.layout_i = np.zeros((16, len(LAYOUT_INTS)), dtype=np.int64)  # (capacity, NUM_LAYOUT_INTS)
        self.arrays = np.zeros(4096)  # the layouts' 1F1B path lines, one after the other
        # The layouts' regions and stages, one after the other.
        self.places = np.zeros(256, dtype=np.int64)
        # Hash slot → layout id (find_layout), with room for as many layouts as the rows above: an array, not
        # a numba typed dict, whose unboxing alone costs about 1 µs a call.
        self.index = new_layout_index(self.layout_f.shape[0])
        self._new_arrays()
        self.clear()

    def _new_arrays(self) -> None:
        """Keep :attr:`record`, the arrays as the compiled code takes them (``tables.LAYOUT_ARRAYS``), up to date
        after the arrays are replaced (when they grow: read it again after :meth:`add`)."""
        self.record = LAYOUT_ARRAYS.pack(index=self.index, layout_f=self.layout_f, layout_i=self.layout_i,
                                         arrays=self.arrays, places=self.places)

    def clear(self) -> None:
        """Forget every layout and profile. The arrays keep their size (what lies past the used part is never
        read), so a table that fills and empties again and again holds the same memory."""
        self.index.fill(EMPTY_SLOT)
        self.profiles: dict[tuple, int] = {}  # Job.profile_key → profile id
        self.num_layouts = 0
        self._arrays_used = 0
        self._places_used = 0
        self._executors: dict[int, object] = {}  # layout id → its pipeline model (simulator.PipelineModel)

    def __getstate__(self) -> dict:
        return {"exact": self.exact}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["exact"])

    def profile_id(self, job: Job) -> int:
        """The table's id of the job's profile: jobs with equal ``profile_key`` (which holds their stage and
        all-reduce times) time alike in any world of one :func:`timing_key`."""
        pid = self.profiles.get(job.profile_key)
        if pid is None:
            pid = self.profiles[job.profile_key] = len(self.profiles)
        return pid

    def full(self) -> bool:
        return self.num_layouts >= MAX_TABLE_LAYOUTS or self._arrays_used >= MAX_TABLE_FLOATS

    def add(self, sim: ClusterSim, job: Job, regions: np.ndarray, stages: np.ndarray) -> int:
        """Store the layout of ``job`` on the placement of ``regions`` and ``stages`` (int64 arrays of the path's
        length), if it is not stored yet (:func:`store_layout` times it); its id."""
        pid = self.profile_id(job)
        length = regions.size
        lay, slot = find_layout(self.index, self.layout_i, self.places, pid, regions, stages, length)
        if lay >= 0:
            return lay
        entry = schedule.spec(job.schedule)
        if len(job.schedules) == 1 and entry.closed_form and not self.exact:
            lay, chosen = self._store_analytic(sim, job, regions, stages, pid, slot, entry.forwards_first), 0
        else:
            lay, chosen = self._store_chosen(sim, job, regions, stages, pid, slot)
        self.layout_i[lay, LI_SCHEDULE] = chosen
        self.num_layouts += 1
        return lay

    def _store_chosen(self, sim: ClusterSim, job: Job, regions: np.ndarray, stages: np.ndarray, pid: int,
                      slot: int) -> tuple[int, int]:
        """Store a layout of a job with several accepted schedules, one the executor times, or any with exact timing,
        under the schedule the simulator chooses (``ClusterSim.pipeline_model``): its analytic model
        (:meth:`_store_analytic`), or its model timed in Python (:meth:`_store_executor`); its id and the schedule's
        index into ``Job.schedules``."""
        placement = Placement(tuple(regions.tolist()), tuple(stages.tolist()))
        model = sim.layout(job, placement).timing.model
        if model.executor is None and not self.exact:
            gpipe = schedule.spec(job.schedules[model.schedule]).forwards_first
            return self._store_analytic(sim, job, regions, stages, pid, slot, gpipe), model.schedule
        return self._store_executor(job, model, regions, stages, pid, slot), model.schedule

    def _store_analytic(self, sim: ClusterSim, job: Job, regions: np.ndarray, stages: np.ndarray, pid: int,
                        slot: int, gpipe: bool) -> int:
        """Write a GPipe or 1F1B layout (:func:`store_layout` times it) at the placement's free ``slot``; its id."""
        length = regions.size
        m = job.num_microbatches
        tab_i, tab_f = pipeline.packed_path_tables(job.num_stages, max(m - 1, 1))
        segment_paths = tab_i[2 * TAB_SEGMENT + 1]
        index = self.index
        lay = self._reserve(2 * m + 3 * segment_paths, 2 * length)  # tail lines ≤ M, segment lines ≤ B
        if self.index is not index:  # a grown index: the placement's free slot moved
            slot = find_layout(self.index, self.layout_i, self.places, pid, regions, stages, length)[1]
        world, net = sim.world, sim.world.scenario.network
        profile = LAYOUT_JOB.pack(
            forward_r=job.forward_s, backward_ratio=job.backward_ratio, activation_bytes=job.intra_message_bytes,
            wan_message_bytes=job.wan_message_bytes, allreduce_s=job.allreduce_s, microbatches=m, gpipe=gpipe,
            tab_i=tab_i, tab_f=tab_f, profile=pid,
        )
        network = LAYOUT_NETWORK.pack(line_gbps=sim.capacity_gbps, latency=world.latency_s,
                                      intra_gbps=float(net.intra_bandwidth_gbps),
                                      intra_latency_s=float(net.intra_latency_s))
        self._arrays_used, self._places_used = store_layout(
            profile, regions, stages, length, network, self.record, slot, lay, self._arrays_used, self._places_used,
        )
        return lay

    def _store_executor(self, job: Job, model, regions: np.ndarray, stages: np.ndarray, pid: int, slot: int) -> int:
        """Write a layout timed in Python (``pipeline.MODEL_EXECUTOR``: the executor's, or any with exact timing): its
        all-reduce, WAN message and demand, its placement, and its time at line rate in the row's memo; the model
        (``simulator.PipelineModel``) stays on the Python side (:meth:`time_requested`), which times it through the
        process's timing memo."""
        length = regions.size
        index = self.index
        lay = self._reserve(0, 2 * length)
        if self.index is not index:
            slot = find_layout(self.index, self.layout_i, self.places, pid, regions, stages, length)[1]
        row, li = self.layout_f[lay], self.layout_i[lay]
        row[:] = 0.0
        li[:] = 0
        row[LF_ALLREDUCE], row[LF_WAN_BYTES], row[LF_DEMAND] = job.allreduce_s, job.wan_message_bytes, model.demand_gbps
        row[LF_MEMO_CADENCE], row[LF_MEMO_TOTAL] = 0.0, model.total_s(0.0)  # its time at line rate, known already
        path = self._places_used
        self.places[path:path + length] = regions
        self.places[path + length:path + 2 * length] = stages
        li[LI_KIND], li[LI_M], li[LI_PROFILE], li[LI_PATH], li[LI_HOPS] = MODEL_EXECUTOR, job.num_microbatches, pid, path, length - 1
        li[LI_WRAP] = 1 if len(model.links) > 2 * (length - 1) else 0
        self._places_used = path + 2 * length
        self._executors[lay] = model
        index_layout(self.index, slot, lay)
        return lay

    def time_requested(self, lay: int) -> None:
        """Time executor layout ``lay`` at the cadence floor the candidate table asked for (written in its row's memo
        with a NaN time, ``candidate_kernels.candidate_table``), through the process's timing memo
        (``schedule.TIMINGS``): the launch that follows finds it there."""
        row = self.layout_f[lay]
        row[LF_MEMO_TOTAL] = self._executors[lay].total_s(float(row[LF_MEMO_CADENCE]))

    def _reserve(self, floats: int, ints: int) -> int:
        """Grow the arrays (doubling) until one more layout with up to ``floats`` path floats and ``ints`` placement
        ints fits; its id."""
        lay = self.num_layouts
        if lay == self.layout_f.shape[0]:
            self.layout_f = np.concatenate((self.layout_f, np.zeros_like(self.layout_f)))
            self.layout_i = np.concatenate((self.layout_i, np.zeros_like(self.layout_i)))
            self.index = new_layout_index(self.layout_f.shape[0])
            rebuild_index(self.index, self.layout_i, self.places, lay)
        self.arrays = _grown(self.arrays, self._arrays_used + floats)
        self.places = _grown(self.places, self._places_used + ints)
        self._new_arrays()
        return lay


def _grown(buffer: np.ndarray, need: int) -> np.ndarray:
    """``buffer``, or a copy doubled in size until it holds ``need`` values (what lies past the old end is zero)."""
    if need <= buffer.size:
        return buffer
    grown = np.zeros(max(2 * buffer.size, need), dtype=buffer.dtype)
    grown[:buffer.size] = buffer
    return grown


@jit
def write_model(forward, backward, transfer, hop_latency, m, gpipe, tab_i, tab_f, row, ints, arrays, arrays_used):
    """A pipeline's analytic model (per-stage forward and backward times, per-hop transfer times and latencies,
    ``m`` micro-batches, GPipe or 1F1B) taken apart and written as a layout table's row: its scalars
    (``pipeline.model_scalars``) into ``row`` (LF_BASE … LF_CONSTANT)
    and ``ints`` (LI_KIND, LI_M, LI_ARRAYS, LI_TAILS, LI_SEGMENTS), its lines into ``arrays`` from ``arrays_used``
    on (room for ``2·m + 3·B`` floats, B segment paths). ``tab_i``, ``tab_f`` are
    ``pipeline.packed_path_tables(S, max(m − 1, 1))``. Returns the floats then used."""
    row[LF_BASE:LF_CONSTANT + 1] = 0.0  # what a kind does not use is 0
    kind = model_scalars(forward, backward, transfer, hop_latency, m, gpipe, row)
    num_tails = num_segments = 0
    if kind == MODEL_PATHS:
        last_stage_s, other_s, tail_s, loops_only_s, segments_s, pre_loop_s, post_s = packed_fixed_paths(
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


@jit
def store_layout(profile, regions, stages, length, network, layouts, slot, lay, arrays_used, places_used):
    """Time a job profile's placement and store it as layout ``lay`` of a layout table, indexed at ``slot`` or the
    next free one: its pipeline (``pipeline.stage_arrays``), its model taken apart (:func:`write_model`), its
    no-stall demand (``pipeline.demand_gbps``), all-reduce time and WAN message, in one call.

    ``profile`` is the job profile (``tables.LAYOUT_JOB``: among others its forward time per micro-batch of a stage
    on each region's GPUs, the backward's ratio to it, and its ``pipeline.packed_path_tables(S, max(M − 1, 1))``);
    ``regions`` and ``stages`` (their first ``length`` entries) the placement; ``network`` the links
    (``tables.LAYOUT_NETWORK``); ``layouts`` the table's arrays (``tables.LAYOUT_ARRAYS``), which must have room for
    the layout (:meth:`LayoutTable.add` grows them), with ``arrays_used`` floats and ``places_used`` ints in use.
    Returns the floats and ints then used.
    """
    forward_r, backward_ratio = profile[LJ_FORWARD_R], profile[LJ_BACKWARD_RATIO]
    activation_bytes, wan_message_bytes = profile[LJ_ACTIVATION_BYTES], profile[LJ_WAN_MESSAGE_BYTES]
    allreduce_s, m, gpipe = profile[LJ_ALLREDUCE_S], profile[LJ_MICROBATCHES], profile[LJ_GPIPE]
    tab_i, tab_f = profile[LJ_TAB_I], profile[LJ_TAB_F]
    line_gbps, latency = network[LN_LINE_GBPS], network[LN_LATENCY]
    intra_gbps, intra_latency_s = network[LN_INTRA_GBPS], network[LN_INTRA_LATENCY_S]
    index, layout_f, layout_i = layouts[LA_INDEX], layouts[LA_LAYOUT_F], layouts[LA_LAYOUT_I]
    arrays, places = layouts[LA_ARRAYS], layouts[LA_PLACES]
    forward, transfer, hop_latency, _ = stage_arrays(
        forward_r, activation_bytes, wan_message_bytes, regions, stages, length, line_gbps, latency, intra_gbps,
        intra_latency_s,
    )
    row, ints = layout_f[lay], layout_i[lay]
    ints[:] = 0  # what the analytic model does not use (the executor's columns, its schedule, its wrap) is 0
    row[LF_MEMO_CADENCE] = row[LF_MEMO_TOTAL] = 0.0
    backward = backward_ratio * forward
    arrays_used = write_model(forward, backward, transfer, hop_latency, m, gpipe, tab_i, tab_f, row, ints, arrays,
                              arrays_used)
    row[LF_ALLREDUCE], row[LF_WAN_BYTES] = allreduce_s, wan_message_bytes
    row[LF_DEMAND] = demand_gbps(forward, backward, wan_message_bytes, gpipe, 1.0)
    ints[LI_PROFILE], ints[LI_PATH], ints[LI_HOPS] = profile[LJ_PROFILE], places_used, length - 1
    places[places_used:places_used + length] = regions[:length]
    places[places_used + length:places_used + 2 * length] = stages[:length]
    index_layout(index, slot, lay)
    return arrays_used, places_used + 2 * length


EMPTY_SLOT = -1  # a free slot of a layout index
_FNV_OFFSET = np.uint64(14695981039346656037)  # FNV-1a's 64-bit offset basis and prime
_FNV_PRIME = np.uint64(1099511628211)


@jit
def layout_key(profile: int, regions: np.ndarray, stages: np.ndarray, length: int) -> int:
    """A 64-bit hash (FNV-1a) of a job profile's placement: where the layout table's index first looks for it."""
    h = _FNV_OFFSET
    h = (h ^ np.uint64(profile)) * _FNV_PRIME
    for i in range(length):
        h = (h ^ np.uint64(regions[i])) * _FNV_PRIME
        h = (h ^ np.uint64(stages[i] + 65536)) * _FNV_PRIME
    return np.int64(h)


@jit
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


def new_layout_index(num_layouts: int) -> np.ndarray:
    """An empty index for up to ``num_layouts`` layouts (:func:`find_layout`): the least power of two of slots that
    is at least twice as many, so that no more than half of them are ever taken and searches stay short."""
    slots = 2
    while slots < 2 * num_layouts:
        slots *= 2
    return np.full(slots, EMPTY_SLOT, dtype=np.int64)


@jit
def index_layout(index: np.ndarray, slot: int, lay: int) -> int:
    """Put layout ``lay`` at ``slot`` of an index, or at the next free slot after it (a collision); the slot used."""
    wrap = index.shape[0] - 1
    while index[slot] != EMPTY_SLOT:
        slot = (slot + 1) & wrap
    index[slot] = lay
    return slot


@jit
def rebuild_index(index: np.ndarray, layout_i: np.ndarray, places: np.ndarray, num_layouts: int) -> None:
    """Put layouts ``0 … num_layouts − 1`` of a table into the empty ``index``, in order (a grown table's index)."""
    wrap = np.int64(index.shape[0] - 1)
    for lay in range(num_layouts):
        at, length = layout_i[lay, LI_PATH], layout_i[lay, LI_HOPS] + 1
        key = layout_key(layout_i[lay, LI_PROFILE], places[at:at + length], places[at + length:at + 2 * length], length)
        index_layout(index, key & wrap, lay)


_SHARED = ProcessCache("layout tables", SHARED_TABLES)


def shared_table(world: World, exact: bool = False) -> LayoutTable:
    """The process's layout table for worlds with the :func:`timing_key` of ``world`` and this timing, so that every
    env of a process (and every episode) on such worlds shares its layouts. Worlds whose line rates change (background
    traffic, degraded links) must not use it: each keeps its own, emptied when they change."""
    return _SHARED.get_or((timing_key(world), exact), LayoutTable, exact)


def warm_up_growth() -> None:
    """Grow a full table once, so that :func:`rebuild_index` is loaded (or compiled) with the first env: an episode
    reaches it only when its table outgrows its first rows, which the env's warm-up episode does not
    (``env._warm_up_kernels``)."""
    table = LayoutTable()
    table.num_layouts = table.layout_f.shape[0]
    table._reserve(0, 0)
