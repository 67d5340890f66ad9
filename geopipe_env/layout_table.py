"""Layer 4: the layouts of (job profile, placement) pairs as flat arrays, for the compiled candidate table.

A layout's timing at any allocated rate needs only what :func:`pipeline.model_parts` gives plus its
no-stall demand and all-reduce time. :class:`LayoutTable` stores these once per layout, in rows of flat arrays
that compiled code reads by integer id (``geopipe_env.physics.kernels.iteration_total_s``), and finds a
placement's id by a hash of it in an open-addressing index, a plain array (``kernels.find_layout``). Compiled
code times and stores a new layout (``kernels.store_layout``); the simulator's Python model
(:meth:`ClusterSim.timing_parts`, stored by :meth:`LayoutTable.store`) stays the reference it is tested against.
The envs of a process share one table per world timing (:func:`shared_table`): layouts recur across episodes and
envs of one scenario.
"""

from __future__ import annotations

import numpy as np
from geopipe_env.generator import Job, World, timing_key
from geopipe_env.physics import kernels, pipeline
from geopipe_env.physics.pipeline import ModelParts
from geopipe_env.simulator import ClusterSim

# The table empties itself when its path arrays pass this many floats (8 MiB), or its layouts MAX_TABLE_LAYOUTS.
MAX_TABLE_FLOATS = 1 << 20
MAX_TABLE_LAYOUTS = 4096
SHARED_TABLES = 4  # tables the process keeps (shared_table), one per world timing; all forgotten when full


class LayoutTable:
    """Layouts of one world's timing (pass one table only to worlds with equal :func:`timing_key`, without
    background traffic: it assumes line rates that never change). Pickles empty: it is a cache."""

    def __init__(self) -> None:
        self.layout_f = np.zeros((16, kernels.NUM_LAYOUT_FLOATS))  # (capacity, NUM_LAYOUT_FLOATS)
        self.layout_i = np.zeros((16, kernels.NUM_LAYOUT_INTS), dtype=np.int64)  # (capacity, NUM_LAYOUT_INTS)
        self.arrays = np.zeros(4096)  # the layouts' 1F1B path lines, one after the other
        self.places = np.zeros(256, dtype=np.int64)  # the layouts' regions and stages, one after the other
        # Hash slot → layout id (kernels.find_layout), with room for as many layouts as the rows above: an array, not
        # a numba typed dict, whose unboxing alone costs about 1 µs a call.
        self.index = kernels.new_layout_index(self.layout_f.shape[0])
        self.clear()

    def clear(self) -> None:
        """Forget every layout and profile. The arrays keep their size (what lies past the used part is never
        read), so a table that fills and empties again and again holds the same memory."""
        self.index.fill(kernels.EMPTY_SLOT)
        self.profiles: dict[tuple, int] = {}  # Job.profile_key → profile id
        self.num_layouts = 0
        self._arrays_used = 0
        self._places_used = 0

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()

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
        length), if it is not stored yet; its id. The compiled ``kernels.store_layout`` times it: the same floats
        as :meth:`store` of :meth:`ClusterSim.timing_parts`, the Python reference (tests/test_kernels.py)."""
        pid = self.profile_id(job)
        length = regions.size
        lay, slot = kernels.find_layout(self.index, self.layout_i, self.places, pid, regions, stages, length)
        if lay >= 0:
            return lay
        m = job.num_microbatches
        tab_i, tab_f = pipeline.packed_path_tables(job.num_stages, max(m - 1, 1))
        segment_paths = tab_i[2 * kernels.TAB_SEGMENT + 1]
        index = self.index
        lay = self._reserve(2 * m + 3 * segment_paths, 2 * length)  # tail lines ≤ M, segment lines ≤ B
        if self.index is not index:  # a grown index: the placement's free slot moved
            slot = kernels.find_layout(self.index, self.layout_i, self.places, pid, regions, stages, length)[1]
        world = sim.world
        net = world.scenario.network
        self._arrays_used, self._places_used = kernels.store_layout(
            job.forward_s, job.activation_bytes, job.wan_message_bytes, job.allreduce_s, m,
            world.scenario.pipeline_schedule == pipeline.GPIPE, regions, stages, length, sim.capacity_gbps,
            world.latency_s, float(net.intra_bandwidth_gbps), float(net.intra_latency_s), tab_i, tab_f, pid, slot,
            self.index, self.layout_f, self.layout_i, self.arrays, self._arrays_used, self.places, self._places_used, lay,
        )
        self.num_layouts += 1
        return lay

    def _reserve(self, floats: int, ints: int) -> int:
        """Grow the arrays (doubling) until one more layout with up to ``floats`` path floats and ``ints`` placement
        ints fits; its id."""
        lay = self.num_layouts
        if lay == self.layout_f.shape[0]:
            self.layout_f = np.concatenate((self.layout_f, np.zeros_like(self.layout_f)))
            self.layout_i = np.concatenate((self.layout_i, np.zeros_like(self.layout_i)))
            self.index = kernels.new_layout_index(self.layout_f.shape[0])
            kernels.rebuild_index(self.index, self.layout_i, self.places, lay)
        self.arrays = _grown(self.arrays, self._arrays_used + floats)
        self.places = _grown(self.places, self._places_used + ints)
        return lay

    def store(
        self,
        parts: ModelParts,
        profile: int,
        regions: np.ndarray,
        stages: np.ndarray,
        extra: tuple[float, float, float],
        slot: int | None = None,
    ) -> int:
        """Append a layout: its model's ``parts``, profile id, placement and ``(all-reduce s, demand Gbit/s, WAN
        message bytes)``, indexed at ``slot`` or the first free one after it (default: the first free one from its
        hash). Its id."""
        path_arrays = np.concatenate(
            (parts.tail_slope, parts.tail_intercept, parts.segment_slope, parts.segment_start, parts.segment_end)
        )
        index = self.index
        lay = self._reserve(path_arrays.size, 2 * regions.size)
        if slot is None or self.index is not index:  # a grown index holds every layout at new slots
            slot = kernels.find_layout(self.index, self.layout_i, self.places, profile, regions, stages, regions.size)[1]
        self.arrays[self._arrays_used:self._arrays_used + path_arrays.size] = path_arrays
        self.places[self._places_used:self._places_used + 2 * regions.size] = np.concatenate((regions, stages))
        f, s, x, lat = parts.uniform
        allreduce_s, demand_gbps, wan_message_bytes = extra
        self.layout_f[lay] = (
            parts.base_s, parts.max_x, parts.max_f, parts.max_b, f, s, x, lat, parts.last_stage_s, parts.constant_s,
            allreduce_s, demand_gbps, wan_message_bytes,
        )
        self.layout_i[lay] = (
            parts.kind, parts.num_microbatches, profile, self._places_used, regions.size - 1, self._arrays_used,
            parts.tail_slope.size, parts.segment_slope.size,
        )
        self._arrays_used += path_arrays.size
        self._places_used += 2 * regions.size
        self.num_layouts += 1
        kernels.index_layout(self.index, slot, lay)
        return lay


def _grown(buffer: np.ndarray, need: int) -> np.ndarray:
    """``buffer``, or a copy doubled in size until it holds ``need`` values (what lies past the old end is zero)."""
    if need <= buffer.size:
        return buffer
    grown = np.zeros(max(2 * buffer.size, need), dtype=buffer.dtype)
    grown[:buffer.size] = buffer
    return grown


_SHARED: dict[tuple, LayoutTable] = {}


def shared_table(world: World) -> LayoutTable:
    """The process's layout table for worlds with the :func:`timing_key` of ``world``, so that every env of a
    process (and every episode) on such worlds shares its layouts. Worlds with background traffic must not use it."""
    key = timing_key(world)
    table = _SHARED.get(key)
    if table is None:
        if len(_SHARED) >= SHARED_TABLES:
            _SHARED.clear()
        table = _SHARED[key] = LayoutTable()
    return table


def forget_shared_tables() -> None:
    """Drop the process's shared tables (envs holding one keep it until their next reset)."""
    _SHARED.clear()
