"""Layer 2: sizing a job against a world's GPUs.

One rule, shared by the episode generator (which picks K*) and the scenario loader (which rejects worlds where a
job could never run): K* is sized on a *reference GPU type*, the type holding the most GPUs among those a stage of
the job fits (ties: more memory, then more TFLOPS), and may use at most the GPUs with at least that memory on one
pipeline path: regions joined one after another by links, each region once. (A pipeline's stages form a chain, so
in a star of four regions a job reaches at most three of them, though all four are connected.)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from geopipe_env.physics import pipeline


class JobSizing(NamedTuple):
    """How a model fits a world."""

    ref_region: int  # a region with the reference GPU type
    min_stages: int  # the fewest stages that fit the reference GPU's memory
    total_stages: int  # stages the GPUs with at least the reference memory hold, wherever they are
    room_stages: int  # the same, on the best single pipeline path of regions (see path_room)


def connected_components(bandwidth_gbps: np.ndarray) -> list[np.ndarray]:
    """Groups of regions joined by links (either direction), as (R,) bool masks."""
    n = bandwidth_gbps.shape[0]
    linked = linked_regions(bandwidth_gbps)
    seen = np.zeros(n, dtype=bool)
    groups = []
    for start in range(n):
        if seen[start]:
            continue
        group = np.zeros(n, dtype=bool)
        frontier = [start]
        group[start] = seen[start] = True
        while frontier:
            r = frontier.pop()
            for nxt in np.flatnonzero(linked[r] & ~seen):
                seen[nxt] = group[nxt] = True
                frontier.append(int(nxt))
        groups.append(group)
    return groups


def path_room(linked: np.ndarray, held: np.ndarray) -> int:
    """The most stages one pipeline path can hold: the largest sum of ``held`` (R,) over a simple path of regions in
    which each consecutive pair is ``linked`` (R, R) bool, symmetric. Only regions that hold a stage can be on it.

    A depth-first search over (end, regions used) states in each connected group, each state once, stopped when a
    path holds the whole group (in a group whose regions are all linked to each other, the first path does)."""
    usable = held > 0
    best = 0
    for group in connected_components(np.where(np.outer(usable, usable), linked, False)):
        members = [int(r) for r in np.flatnonzero(group & usable)]
        if not members:
            continue
        neighbours = {r: [s for s in members if linked[r, s] and s != r] for r in members}
        whole = sum(int(held[r]) for r in members)
        found = 0
        seen: set[tuple[int, int]] = set()

        def grow(end: int, used: int, stages: int) -> None:
            nonlocal found
            found = max(found, stages)
            if found == whole or (end, used) in seen:
                return
            seen.add((end, used))
            for nxt in neighbours[end]:
                if not used >> nxt & 1:
                    grow(nxt, used | 1 << nxt, stages + int(held[nxt]))

        for start in sorted(members, key=lambda r: -held[r]):
            grow(start, 1 << start, int(held[start]))
        best = max(best, found)
    return best


def linked_regions(bandwidth_gbps: np.ndarray) -> np.ndarray:
    """(R, R) bool: the pairs of regions joined by a link in either direction."""
    return (bandwidth_gbps > 0) | (bandwidth_gbps.T > 0)


def size_job(
    params: float,
    layers: int,
    hidden: int,
    micro_batch_size: int,
    seq_len: int,
    num_microbatches: int,
    gpus_per_stage: int,
    schedule: str,
    num_gpus: np.ndarray,
    memory_gb: np.ndarray,
    tflops: np.ndarray,
    linked: np.ndarray,
    data_parallel: int = 1,
    virtual_stages: int = 1,
    context_parallel: int = 1,
    recompute: bool = True,
    accepted: tuple[str, ...] = (),
    optimizer_state: str = "fp32",
) -> JobSizing | None:
    """The job's reference GPU and room in this world; ``None`` if a stage fits no GPU even at one layer each
    (or at no stage count that ``schedule`` and the ``accepted`` schedules can run).

    Room counts stages of all ``data_parallel`` replicas: ``gpus_per_stage · context_parallel · data_parallel``
    GPUs each.
    """
    min_stages = [
        pipeline.min_feasible_stages(
            params, layers, hidden, micro_batch_size, seq_len, num_microbatches, mem, gpus_per_stage, schedule,
            data_parallel, virtual_stages, context_parallel, recompute, accepted, optimizer_state,
        )
        for mem in memory_gb
    ]
    fitting = [r for r, k in enumerate(min_stages) if k is not None]
    if not fitting:
        return None
    same_type = [int(num_gpus[(memory_gb == memory_gb[r]) & (tflops == tflops[r])].sum()) for r in range(len(num_gpus))]
    ref = max((same_type[r], memory_gb[r], tflops[r], r) for r in fitting)[3]
    big_enough = memory_gb >= memory_gb[ref]
    stages_held = num_gpus // (gpus_per_stage * context_parallel * data_parallel)  # (R,) a stage's replicas share its region
    total = int(stages_held[big_enough].sum())
    room = path_room(linked, np.where(big_enough, stages_held, 0))
    return JobSizing(ref_region=ref, min_stages=int(min_stages[ref]), total_stages=total, room_stages=room)
