"""Layer 4: a small SimPy-style event heap.

Entries are ``(time_s, priority, seq, event)``: ties in time run by kind priority, then in insertion order, so
the order is total and deterministic. Unlike SimPy's generator processes, everything here pickles, which
vector envs need.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from enum import IntEnum
from typing import NamedTuple


class EventKind(IntEnum):
    """Event kinds; the value is the tie-break priority at equal times (lower runs first)."""

    COMPLETION = 0  # free GPUs before anything else looks at the cluster
    ARRIVAL = 1
    HOUR_TICK = 2  # electricity prices, carbon and background traffic change on the hour
    FAILURE = 3  # a GPU fails (job_id: the failure's index in the world's GpuFailures)
    REPAIR = 4  # a failed GPU is back in service (job_id: its region)
    CAPACITY_LOSS = 5  # a region loses GPUs (job_id: the loss's index in the world's CapacityLosses)
    CAPACITY_RETURN = 6  # they are back (job_id: the region; version: how many)
    LINK_DEGRADE = 7  # a WAN link's bandwidth drops (job_id: the degradation's index in the world's LinkDegradations)
    LINK_RESTORE = 8  # and comes back (job_id: the same index)


class Event(NamedTuple):
    """A scheduled event. ``version`` lets a completion be superseded when the job's rate changes."""

    kind: EventKind
    job_id: int = -1
    version: int = 0


def arrival_events(num_jobs: int) -> tuple[Event, ...]:
    """The arrival events of jobs ``0 … num_jobs − 1``: immutable, so episodes share them (a reset needs tens)."""
    if len(_ARRIVALS) < num_jobs:
        _ARRIVALS.extend(Event(EventKind.ARRIVAL, job_id) for job_id in range(len(_ARRIVALS), num_jobs))
    return tuple(_ARRIVALS[:num_jobs])


_ARRIVALS: list[Event] = []


class EventQueue:
    """A deterministic priority queue of timed events."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, time_s: float, event: Event) -> None:
        heapq.heappush(self._heap, (time_s, int(event.kind), self._seq, event))
        self._seq += 1

    def push_all(self, times_s: list[float], events: Sequence[Event]) -> None:
        """``push`` each event at its time, in order (the same queue, built at once)."""
        seq = self._seq
        self._heap += [(time_s, int(event.kind), seq + i, event) for i, (time_s, event) in enumerate(zip(times_s, events))]
        self._seq = seq + len(times_s)
        heapq.heapify(self._heap)

    def peek(self) -> float:
        """Time of the next event, or +inf when empty."""
        return self._heap[0][0] if self._heap else float("inf")

    def pop(self) -> tuple[float, Event]:
        time_s, _, _, event = heapq.heappop(self._heap)
        return time_s, event

    def remove(self, kind: EventKind) -> list[Event]:
        """Take every event of ``kind`` out of the queue (the others keep their order); the events taken."""
        taken = [entry[3] for entry in self._heap if entry[3].kind == kind]
        if taken:
            self._heap = [entry for entry in self._heap if entry[3].kind != kind]
            heapq.heapify(self._heap)
        return taken
