"""Layer 5: one episode's candidate table, computed by the compiled kernel and read like the Python one.

:class:`CandidateTable` prepares an episode's flat arrays once (its job profiles, per-job figures and the world's
constants), calls :func:`geopipe_env.candidate_kernels.candidate_table` at each decision (adding the layouts it
reports missing to the shared :class:`~geopipe_env.layout_table.LayoutTable` and calling it again), and keeps the
result in preallocated arrays. A :class:`~geopipe_env.placement.CandidateInfo` is built only when asked for
(:meth:`CandidateTable.info`); the observation reads the arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from geopipe_env import candidate_kernels as ck
from geopipe_env.generator import World
from geopipe_env.layout_table import LayoutTable
from geopipe_env.placement import CandidateInfo, _placement
from geopipe_env.simulator import ClusterSim, Placement


def compiled_strategies(strategies: Sequence[str]) -> np.ndarray | None:
    """The kernel's codes of ``strategies``, or None if one of them is not built into the kernel."""
    if not all(name in ck.CODES for name in strategies):
        return None
    return np.array([ck.CODES[name] for name in strategies], dtype=np.int64)


class CandidateTable:
    """The compiled candidate table of one episode (``queue_slots`` visible jobs × the strategies' codes)."""

    def __init__(self, sim: ClusterSim, layouts: LayoutTable, codes: np.ndarray, queue_slots: int) -> None:
        self.sim = sim
        self.layouts = layouts
        self.codes = codes
        w: World = sim.world
        num_regions = w.num_regions
        jobs = w.jobs
        # The episode's job profiles (jobs with equal profile_key time alike), and each job's.
        index: dict[tuple, int] = {}
        self._profile_job: list[int] = []  # a job of each profile, to time its layouts by
        job_profile = []
        for job in jobs:
            p = index.get(job.profile_key)
            if p is None:
                p = index[job.profile_key] = len(index)
                self._profile_job.append(job.job_id)
            job_profile.append(p)
        first = [jobs[j] for j in self._profile_job]
        self.job_i = np.array((job_profile, [j.iterations for j in jobs]), dtype=np.int64)  # (2, J), rows ck.J_*
        self.job_run_s = np.array([j.isolated_duration_s for j in jobs])  # (J,)
        # (P, R + 1) and (P, 4 + R), columns ck.P_*: filled by columns (rows of mixed numbers would be slower)
        self.profile_f = np.empty((len(first), num_regions + 1))
        self.profile_f[:, :num_regions] = [j.forward_s for j in first]
        self.profile_f[:, num_regions] = [j.wan_message_bytes for j in first]
        self.profile_i = np.zeros((len(first), ck.P_FITS + num_regions), dtype=np.int64)
        self.profile_i[:, ck.P_STAGES:ck.P_FITS] = [(j.num_stages, j.stage_gpus, j.num_microbatches) for j in first]
        self.profile_i[:, ck.P_FITS:] = [j.fits for j in first]
        self._world = (
            np.stack((w.bandwidth_gbps, w.latency_s)), np.stack((w.busy_watts * w.pue / w.tflops, w.idle_watts,
                                                                 w.busy_watts, w.pue)),
            w.price.prefix_h, w.price.values, w.carbon.prefix_h, w.carbon.values,
        )
        num_strategies = codes.size
        pool = ck.NUM_NAMED + num_regions
        self.candidate_of = np.full((queue_slots, num_strategies), -1, dtype=np.int64)  # (Q, K)
        self.candidate_f = np.zeros((queue_slots * pool, ck.NUM_CANDIDATE_FLOATS))  # (C, 7)
        self.candidate_place = np.zeros((queue_slots * pool, 2 * num_regions), dtype=np.int64)  # (C, 2R)
        self.candidate_length = np.zeros(queue_slots * pool, dtype=np.int64)  # (C,)
        self._misses = np.zeros((queue_slots * pool, 2 * num_regions + 2), dtype=np.int64)  # (X, 2R + 2)
        self.num_slots = 0  # visible jobs at the last decision
        self._profiles_of: dict | None = None  # the layout table's profile dict that profile_i holds ids of
        self.visible_ids = np.zeros(0, dtype=np.int64)  # their job ids

    def compute(self, visible: Sequence[int], mask: np.ndarray) -> int:
        """Fill the table for the visible job ids, and ``mask`` (Q·K + 1,) with the valid actions (wait is valid);
        the number of valid launches."""
        sim = self.sim
        self.num_slots = len(visible)
        self.visible_ids = ids = np.array(visible, dtype=np.int64)
        if self.layouts.full():
            self.layouts.clear()
        if self._profiles_of is not self.layouts.profiles:  # a new or emptied layout table: its profile ids
            self._profiles_of = self.layouts.profiles
            for p, j in enumerate(self._profile_job):
                self.profile_i[p, ck.P_TABLE_ID] = self.layouts.profile_id(sim.world.jobs[j])
        rows = self.candidate_of[: self.num_slots]
        while True:
            table = self.layouts
            _, num_misses, launches = ck.candidate_table(
                sim.now_s, sim.free_gpus, sim.capacity_gbps, sim.link_load_gbps, *self._world,
                self.profile_f, self.profile_i, ids, self.job_i, self.job_run_s, self.codes,
                table.index, table.layout_f, table.layout_i, table.arrays, table.places,
                rows, self.candidate_f, self.candidate_place, self.candidate_length, self._misses, mask,
            )
            if not num_misses:
                return launches
            num_regions = sim.world.num_regions
            for miss in self._misses[:num_misses]:
                p, length = int(miss[0]), int(miss[1])
                regions, stages = miss[2:2 + length], miss[2 + num_regions:2 + num_regions + length]
                table.add(sim, sim.world.jobs[self._profile_job[p]], regions, stages)

    def placement(self, slot: int, k: int) -> Placement | None:
        """The placement of the candidate behind action ``slot·K + k`` at the last decision (None if masked)."""
        if slot >= self.num_slots:
            return None
        c = int(self.candidate_of[slot, k])
        if c < 0:
            return None
        length = int(self.candidate_length[c])
        num_regions = self.sim.world.num_regions
        place = self.candidate_place[c].tolist()
        return _placement(tuple(place[:length]), tuple(place[num_regions:num_regions + length]))

    def info(self, slot: int, k: int) -> CandidateInfo | None:
        """The candidate behind action ``slot·K + k`` at the last decision, as the Python table describes it."""
        placement = self.placement(slot, k)
        if placement is None:
            return None
        f = self.candidate_f[int(self.candidate_of[slot, k])].tolist()
        return CandidateInfo(
            placement, f[ck.C_ITERATION], f[ck.C_DURATION], f[ck.C_COST], f[ck.C_CARBON], f[ck.C_RATE],
            f[ck.C_DEMAND], bool(f[ck.C_STALLED]),
        )

    def rows(self) -> list[list[CandidateInfo | None]]:
        """The whole table as the Python one holds it (one CandidateInfo per feasible action)."""
        return [[self.info(slot, k) for k in range(self.codes.size)] for slot in range(self.num_slots)]
