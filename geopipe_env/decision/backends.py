"""Layer 5: the decision backends: the candidate table behind the action space, and the observation.

At each decision the env asks its backend for the candidate table of the visible jobs (which action launches what,
and with which estimated figures), for the placement behind an action, and for the observation, through
:class:`DecisionBackend`; the env uses the one :func:`make_backend` gives, for every world and timing:
:class:`CompiledBackend`, the compiled twins of the built-in strategies (``candidate_kernels``), timed from a layout
table, and the compiled observation encoder. A strategy added with ``strategies.register_strategy`` has no
compiled code: its Python rule gives its placements, which the compiled table then describes as it does the others
(one description of every candidate, and each given placement checked first: ``ClusterSim.check_placement``). Worlds whose line rates never change share the
process's table for their timing; a world whose line rates change (background traffic, degraded links) keeps a table
of its own and empties it when they change. With ``timing="exact"`` every layout is timed in Python through the
process's timing memo (``LayoutTable(exact=True)``).

Its specification, ``PythonBackend`` in ``tests/reference.py`` (every strategy's Python rule,
``candidate_row``, timed by the simulator, and the observation written from the candidates' rows), lives
with the tests and does not ship. The two give the same placements behind the same actions, the same figures and
equal observations (``tests/test_candidate_kernels.py``, ``tests/test_tables.py``), and play the same episodes bit
for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from geopipe_env.decision import candidate_kernels as ck
from geopipe_env.simulation.layout_table import LayoutTable, shared_table
from geopipe_env.decision.observation import ObservationEncoder
from geopipe_env.simulation.core_types import CandidateInfo, Placement
from geopipe_env.decision.placement import PlacementContext, _placement, admission_per_forward
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.decision.strategies import NO_TWIN, compiled_codes, named_placement
from geopipe_env.base.tables import (
    CANDIDATE_JOBS, CANDIDATE_OUTPUT, CANDIDATE_WORLD, DECISION_STATE, C_CARBON, C_COST, C_DEMAND, C_DURATION, C_ITERATION, C_RATE, C_SCHEDULE, C_STALLED, J_ITERATIONS, J_PROFILE,
    NUM_CANDIDATE_FLOATS, P_FITS, P_MICROBATCHES, P_STAGE_GPUS, P_STAGES, P_TABLE_ID, PF_ADMIT_PER_FORWARD,
    PF_BUSY_PER_FORWARD, PF_FORWARD, PF_WAN_BYTES,
)


class DecisionBackend(Protocol):
    """What the env asks at a decision. ``start`` binds an episode; ``compute`` fills the table for the visible jobs;
    ``end`` empties it (the episode has ended: the queue stays visible, with no candidates)."""

    checked: bool  # whether every candidate is launchable as it stands (the simulator need not check it again)

    def start(self, sim: ClusterSim, encoder: ObservationEncoder) -> None: ...

    def compute(self, visible: Sequence[int], mask: np.ndarray) -> int:
        """Fill the table for the visible job ids and ``mask`` (Q·K + 1,) with the valid actions (wait valid); the
        number of valid launches."""

    def end(self, visible: Sequence[int]) -> None: ...

    def placement(self, slot: int, k: int) -> Placement | None:
        """The placement behind action ``slot·K + k`` at the last decision (None if masked)."""

    def info(self, slot: int, k: int) -> CandidateInfo | None:
        """The candidate behind action ``slot·K + k`` at the last decision (None if masked)."""

    def observe(self, queue: list[int]) -> dict[str, np.ndarray]:
        """The observation at the last decision, with ``queue`` the waiting jobs in order."""


def make_backend(strategies: Sequence[str], queue_slots: int) -> DecisionBackend:
    """The backend an env uses: the compiled one, for every world and timing."""
    return CompiledBackend(strategies, queue_slots)


class CompiledBackend:
    """The compiled candidate table and encoder. Per episode it prepares flat arrays once (the episode's job
    profiles, per-job figures and the world's constants); at each decision it calls
    ``candidate_kernels.candidate_table`` (adding the layouts it reports missing to its layout table and calling it
    again), after running the registered strategies' Python rules, whose placements it describes, and keeps the
    result in preallocated arrays. A :class:`CandidateInfo` is built only when asked for (:meth:`info`)."""

    checked = True

    def __init__(self, strategies: Sequence[str], queue_slots: int) -> None:
        self.strategies = tuple(strategies)
        self.queue_slots = queue_slots
        self.codes = np.array(compiled_codes(self.strategies), dtype=np.int64)
        # Columns of the strategies that run in Python: (k, name).
        self.python_columns = [(k, name) for k, name in enumerate(self.strategies) if self.codes[k] == NO_TWIN]
        self.layouts: LayoutTable | None = None

    def start(self, sim: ClusterSim, encoder: ObservationEncoder) -> None:
        self.sim, self.encoder = sim, encoder
        if sim.world.scenario.network.fixed_line_rates:
            self.layouts = shared_table(sim.world, sim.exact_timing)
        else:  # line rates change (background traffic, degraded links): a table of the env's own, emptied when they do
            self.layouts = LayoutTable(sim.exact_timing)
        self._line_rates = sim.capacity_version  # the line rates the table's layouts were timed at
        w = sim.world
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
        self.job_i = np.empty((2, len(jobs)), dtype=np.int64)  # (2, J), rows tables.CANDIDATE_JOB_INTS
        self.job_i[J_PROFILE], self.job_i[J_ITERATIONS] = job_profile, [j.iterations for j in jobs]
        self.job_run_s = np.array([j.isolated_duration_s for j in jobs])  # (J,)
        # (P, 3 + R) and (P, 4 + R), tables.PROFILE_FLOATS and PROFILE_INTS: filled by columns (rows of mixed
        # numbers would be slower)
        self.profile_f = np.empty((len(first), PF_FORWARD + num_regions))
        self.profile_f[:, PF_FORWARD:] = [j.forward_s for j in first]
        self.profile_f[:, PF_WAN_BYTES] = [j.wan_message_bytes for j in first]
        self.profile_f[:, PF_BUSY_PER_FORWARD] = [1.0 + j.backward_ratio for j in first]
        self.profile_f[:, PF_ADMIT_PER_FORWARD] = [admission_per_forward(j) for j in first]
        self.profile_i = np.zeros((len(first), P_FITS + num_regions), dtype=np.int64)
        self.profile_i[:, P_STAGES] = [j.num_stages for j in first]
        self.profile_i[:, P_STAGE_GPUS] = [j.stage_gpus for j in first]
        self.profile_i[:, P_MICROBATCHES] = [j.num_microbatches for j in first]
        self.profile_i[:, P_FITS:] = [j.fits for j in first]
        self._world = CANDIDATE_WORLD.pack(
            links=np.stack((w.bandwidth_gbps, w.latency_s)),
            region_f=np.stack((w.busy_watts * w.pue / w.tflops, w.idle_watts, w.busy_watts, w.pue,
                               w.num_gpus.astype(float))),
            price_prefix=w.price.prefix_h, price_values=w.price.values,
            carbon_prefix=w.carbon.prefix_h, carbon_values=w.carbon.values,
        )
        queue_slots = self.queue_slots
        # Per visible job: the pool (named strategies and single regions), then at most one row per column beyond
        # it (an ablation's own placement, or a Python-run strategy's).
        rows = queue_slots * (ck.NUM_NAMED + num_regions + self.codes.size)
        self.candidate_of = np.full((queue_slots, self.codes.size), -1, dtype=np.int64)  # (Q, K)
        self.candidate_f = np.zeros((rows, NUM_CANDIDATE_FLOATS))  # (C, tables.CANDIDATE_FLOATS)
        self.candidate_place = np.zeros((rows, 2 * num_regions), dtype=np.int64)  # (C, 2R)
        self.candidate_length = np.zeros(rows, dtype=np.int64)  # (C,)
        self._misses = np.zeros((rows, 2 * num_regions + 2), dtype=np.int64)  # (X, 2R + 2)
        self.given = np.zeros((queue_slots, self.codes.size, 2 * num_regions + 1), dtype=np.int64)  # (Q, K, 2R + 1)
        self._jobs = CANDIDATE_JOBS.pack(profile_f=self.profile_f, profile_i=self.profile_i, job_i=self.job_i,
                                         job_run_s=self.job_run_s, strategies=self.codes)
        self.output = CANDIDATE_OUTPUT.pack(candidate_of=self.candidate_of, candidate_f=self.candidate_f,
                                            candidate_place=self.candidate_place,
                                            candidate_length=self.candidate_length, misses=self._misses,
                                            given=self.given)
        self.num_slots = 0  # visible jobs at the last decision
        self._profiles_of: dict | None = None  # the layout table's profile dict that profile_i holds ids of
        self.visible_ids = np.zeros(0, dtype=np.int64)  # their job ids

    def compute(self, visible: Sequence[int], mask: np.ndarray) -> int:
        sim = self.sim
        self.num_slots = len(visible)
        self.visible_ids = ids = np.array(visible, dtype=np.int64)
        if sim.world.failures is not None:  # an interrupted job has the work of its last checkpoint left
            self.job_i[J_ITERATIONS] = sim.work_left
        if self.layouts.full() or self._line_rates != sim.capacity_version:
            self.layouts.clear()
            self._line_rates = sim.capacity_version
        if self._profiles_of is not self.layouts.profiles:  # a new or emptied layout table: its profile ids
            self._profiles_of = self.layouts.profiles
            for p, j in enumerate(self._profile_job):
                self.profile_i[p, P_TABLE_ID] = self.layouts.profile_id(sim.world.jobs[j])
        state = DECISION_STATE.pack(now_s=sim.now_s, free_gpus=sim.free_gpus, capacity=sim.capacity_gbps,
                                    link_load=sim.link_load_gbps)
        if self.python_columns:
            self._give_python_placements(visible)
        while True:
            table = self.layouts
            used, num_misses, launches = ck.candidate_table(state, self._world, self._jobs, ids, table.record,
                                                            self.output, mask)
            if not num_misses:
                break
            num_regions = sim.world.num_regions
            for miss in self._misses[:num_misses]:
                p, length = int(miss[0]), int(miss[1])
                if p < 0:
                    table.time_requested(-1 - p)
                    continue
                regions, stages = miss[2:2 + length], miss[2 + num_regions:2 + num_regions + length]
                table.add(sim, sim.world.jobs[self._profile_job[p]], regions, stages)
        return launches

    def _give_python_placements(self, visible: Sequence[int]) -> None:
        """Run the registered strategies' Python rules for the visible jobs and write their placements into
        ``given``, which the compiled table describes as it does the built-in ones.

        Raises:
            ValueError: a rule gave something other than a Placement or None, or a placement the cluster cannot hold
                now (``ClusterSim.check_placement``).
        """
        sim = self.sim
        ctx = PlacementContext(sim)
        given, num_regions = self.given, sim.world.num_regions
        for slot, jid in enumerate(visible):
            job = sim.world.jobs[jid]
            for k, name in self.python_columns:
                placement = named_placement(ctx, job, name)
                given[slot, k, 0] = 0
                if placement is None:
                    continue
                if not isinstance(placement, Placement):
                    raise ValueError(f"strategy {name!r} gave job {jid} {placement!r}; expected a Placement or None")
                why = sim.check_placement(job, placement)
                if why is not None:
                    raise ValueError(f"strategy {name!r} gave job {jid} a placement the cluster cannot hold now "
                                     f"(regions {placement.regions}, stages {placement.stages}): {why}")
                length = len(placement.regions)
                given[slot, k, 0] = length
                given[slot, k, 1:1 + length] = placement.regions
                given[slot, k, 1 + num_regions:1 + num_regions + length] = placement.stages

    def end(self, visible: Sequence[int]) -> None:
        self.num_slots = len(visible)
        self.visible_ids = np.array(visible, dtype=np.int64)
        self.candidate_of[:] = -1

    def placement(self, slot: int, k: int) -> Placement | None:
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
        placement = self.placement(slot, k)
        if placement is None:
            return None
        f = self.candidate_f[int(self.candidate_of[slot, k])].tolist()
        return CandidateInfo(
            placement, f[C_ITERATION], f[C_DURATION], f[C_COST], f[C_CARBON], f[C_RATE], f[C_DEMAND],
            bool(f[C_STALLED]), int(f[C_SCHEDULE]),
        )

    def rows(self) -> list[list[CandidateInfo | None]]:
        """The whole table as its specification holds it (one CandidateInfo per feasible action)."""
        return [[self.info(slot, k) for k in range(self.codes.size)] for slot in range(self.num_slots)]

    def observe(self, queue: list[int]) -> dict[str, np.ndarray]:
        return self.encoder.encode_table(self.sim, queue, self.visible_ids, self.output)
