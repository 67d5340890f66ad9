"""Layer 3: exact discrete-event execution of one GPipe or 1F1B pipeline iteration.

This is the reference the analytic model in :mod:`geopipe_env.physics.pipeline` is tested against. It may import
only numpy, the standard library, :mod:`geopipe_env.units` and :mod:`geopipe_env.physics.pipeline`.

Model (CrossPipe's performance model; Chen et al., ATC'25, arXiv 2507.00217):

* Each stage runs its ops in the fixed order of the schedule table. GPipe: ``F0..F(M−1)`` then ``B0..B(M−1)``.
  1F1B (non-interleaved, PipeDream-flush): stage ``i`` runs ``min(S−i−1, M)`` warm-up forwards, then alternates
  ``F, B`` in the steady state, then drains the remaining backwards.
* ``F(m, i)`` needs ``F(m, i−1)``'s activation delivered over hop ``i−1``. ``B(m, i)`` needs ``F(m, i)`` and
  ``B(m, i+1)``'s gradient delivered over hop ``i``.
* Each directed hop (forward ``i→i+1`` and backward ``i+1→i``, full duplex) is a serial resource. A message holds
  the link for ``hop_transfer_s[k]`` and arrives ``hop_latency_s[k]`` later (a pure delay). Messages are served
  in the order their producers finish (FIFO). An op starts at
  ``max(stage free, producer end + queued transfer + latency)``.

All producers on one directed link sit on one stage, whose ops are serial, so a link's FIFO order is that
stage's op order and each message can be timed the moment its producer finishes. The simulation therefore
walks the ops in a topological order (no event heap) and is exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from geopipe_env.physics.pipeline import GPIPE, ONE_F_ONE_B, SCHEDULES

_FORWARD = 0
_BACKWARD = 1


class ScheduleResult(NamedTuple):
    """Outcome of one simulated iteration."""

    total_s: float  # makespan: the last op's end, with the first op starting at 0
    peak_in_flight: np.ndarray  # (S,) max micro-batches whose forward is done and backward is not, per stage
    stage_end_s: np.ndarray  # (S,) when each stage finishes its last op


def stage_op_order(stage: int, num_stages: int, num_microbatches: int, schedule: str) -> list[tuple[int, int]]:
    """The schedule table's op order for one stage, as ``(kind, micro_batch)`` with kind 0 = F, 1 = B.

    Args:
        stage: 0-based stage index ``i``.
        num_stages: S.
        num_microbatches: M.
        schedule: ``"gpipe"`` or ``"1f1b"``.
    """
    m = num_microbatches
    if schedule == GPIPE:
        return [(_FORWARD, j) for j in range(m)] + [(_BACKWARD, j) for j in range(m)]
    if schedule != ONE_F_ONE_B:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    warmup = min(num_stages - stage - 1, m)
    ops = [(_FORWARD, j) for j in range(warmup)]
    for j in range(m - warmup):
        ops.append((_FORWARD, warmup + j))
        ops.append((_BACKWARD, j))
    ops.extend((_BACKWARD, j) for j in range(m - warmup, m))
    return ops


def simulate_schedule(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
) -> ScheduleResult:
    """Execute one iteration's schedule table exactly (see the module docstring for the model).

    Args:
        forward_s: (S,) forward time per micro-batch of each stage.
        backward_s: (S,) backward time per micro-batch of each stage.
        hop_transfer_s: (S−1,) time one message holds each boundary's link.
        hop_latency_s: (S−1,) one-way latency of each boundary.
        num_microbatches: M ≥ 1.
        schedule: ``"1f1b"`` or ``"gpipe"``.

    Raises:
        ValueError: on an unknown schedule, mismatched shapes or ``M < 1``.
    """
    f = [float(v) for v in np.asarray(forward_s, dtype=float).ravel()]
    b = [float(v) for v in np.asarray(backward_s, dtype=float).ravel()]
    x = [float(v) for v in np.asarray(hop_transfer_s, dtype=float).ravel()]
    lat = [float(v) for v in np.asarray(hop_latency_s, dtype=float).ravel()]
    num_stages, m = len(f), int(num_microbatches)
    if num_stages < 1 or len(b) != num_stages or len(x) != num_stages - 1 or len(lat) != num_stages - 1:
        raise ValueError("need forward_s and backward_s of shape (S,), hop arrays of shape (S-1,), S >= 1")
    if m < 1:
        raise ValueError(f"num_microbatches must be >= 1, got {m}")

    orders = [stage_op_order(i, num_stages, m, schedule) for i in range(num_stages)]
    # Arrival time of micro-batch j's input at stage i: activation for F, gradient for B (None = not yet sent).
    act_arrival: list[list[float | None]] = [[0.0] * m] + [[None] * m for _ in range(num_stages - 1)]
    grad_arrival: list[list[float | None]] = [[None] * m for _ in range(num_stages - 1)] + [[0.0] * m]
    fwd_done: list[list[bool]] = [[False] * m for _ in range(num_stages)]
    fwd_link_free = [0.0] * (num_stages - 1)  # (S−1,) forward link i→i+1
    bwd_link_free = [0.0] * (num_stages - 1)  # (S−1,) backward link i+1→i
    stage_free = [0.0] * num_stages
    next_op = [0] * num_stages
    in_flight = [0] * num_stages
    peak = [0] * num_stages

    remaining = 2 * m * num_stages
    while remaining:
        progressed = False
        for i in range(num_stages):
            order = orders[i]
            while next_op[i] < len(order):
                kind, j = order[next_op[i]]
                if kind == _FORWARD:
                    ready = act_arrival[i][j]
                    if ready is None:
                        break
                    end = max(stage_free[i], ready) + f[i]
                    fwd_done[i][j] = True
                    in_flight[i] += 1
                    peak[i] = max(peak[i], in_flight[i])
                    if i + 1 < num_stages:
                        send = max(end, fwd_link_free[i])
                        fwd_link_free[i] = send + x[i]
                        act_arrival[i + 1][j] = send + x[i] + lat[i]
                else:
                    ready = grad_arrival[i][j]
                    if ready is None or not fwd_done[i][j]:
                        break
                    end = max(stage_free[i], ready) + b[i]
                    in_flight[i] -= 1
                    if i > 0:
                        send = max(end, bwd_link_free[i - 1])
                        bwd_link_free[i - 1] = send + x[i - 1]
                        grad_arrival[i - 1][j] = send + x[i - 1] + lat[i - 1]
                stage_free[i] = end
                next_op[i] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - the two schedule tables are deadlock-free
            raise RuntimeError("schedule table deadlocked")
    stage_end = np.asarray(stage_free)
    return ScheduleResult(
        total_s=float(stage_end.max()), peak_in_flight=np.asarray(peak, dtype=int), stage_end_s=stage_end
    )
