"""Layer 3: pipeline-parallel timing and memory, as pure functions.

Notation: ``P`` parameters, ``S`` stages, ``b`` micro-batch size, ``s`` sequence length, ``h`` hidden
size, ``M`` micro-batches per iteration. A stage's forward time per micro-batch is
``t_f = 2·(P/S)·b·s / (g·tflops·1e12·MFU)`` for a stage on ``g`` GPUs, and ``t_b = 2·t_f`` (the 6·P·tokens rule).
Each stage boundary moves one activation of ``A = b·s·h·2`` bytes forward and a gradient of the same size back.

Analytic iteration time (see also docs/physics.md). Every stage and every directed hop is a serial
resource; a hop's latency is a pure delay. With per-stage ``f_i, b_i`` and per-hop transfer ``x_k`` and latency
``l_k``:

* GPipe is a pair of flow shops (all forwards, then all backwards). For identical jobs a flow shop's makespan
  is ``Σ p + Σ delays + (M−1)·max p``, so exactly
  ``T = Σ(f+b) + 2Σ(x+l) + (M−1)·(max(max f, max x) + max(max b, max x))``.
* 1F1B (PipeDream-flush) is not a flow shop: stage ``i`` holds at most ``k_i = min(S−i, M)`` micro-batches,
  so in its steady state ``B(j, i)`` is followed by ``F(j+S−i, i)``. The makespan is the longest path in the
  schedule's DAG (ops and messages as nodes, stage order, data and link-queue order as edges). Every path
  starts with one micro-batch's round trip ``R = Σ(f+b) + 2Σ(x+l)`` and then makes ``M−1`` net "advances" of
  the micro-batch index, through

  - *segments* ``[i, d]``: ``B(j,i) → F(j+S−i, i) → … → F(·, d) → B(j+d−i+1, d) → … → B(j+d−i+1, i)``, worth
    ``Σ_{q=i..d}(f_q+b_q) + 2Σ_{q=i..d−1}(x_q+l_q)`` for ``d−i+1`` advances, which need ``S−1−d`` more advances
    after them; the *tail loops* (``d = S−1``) need none;
  - *steps* of one advance: a message queued behind the previous one on a hop (``x``, or ``min_cadence_s``),
    a forward or backward run of one stage (``f`` or ``b``; a run of ``r`` needs ``S−u ≥ r+1``), or one
    ``F,B`` pair of the last stage;
  - *turns*: ``F(a, d) → B(a−k_d+1, d)`` goes back ``k_d − 1`` micro-batches, so bursts of steps down to ``d``
    and back up add ``n + k_d − 1`` steps (``n = M−1``); this is what makes a slow hop cost about ``M + k``
    messages each way.

  Choosing the steps is a knapsack with exact weight ``M−1`` whose items must also come in an order the
  schedule allows, solved here only over a cheap family: (A) tail loops of one width plus a fill of tail loops
  of width ``S`` and one narrower, or of steps; (B) ``q`` copies of one segment ``[i, d]`` after steps or a
  tail loop starting at or below ``i``, followed by ``S−1−d`` cool-down backwards or a tail loop begun at stage
  ``i``, ``d`` or midway; (C) turns at each stage ``d`` with the long burst on the slower side, or the first
  ``k_d`` down, cycles over a pair ``[h, d]``, and a burst back up; and a stage's whole op chain after its
  prefix. Every term is a real path, so the analytic value never exceeds the exact makespan. For identical
  stages and hops the longest path is a tail-loop knapsack, solved in closed form in
  :func:`uniform_iteration_time_s`:
  ``T = R + max(n(t+2y) − 2y⌈n/S⌉, ⌊n/S⌋·(St+2(S−1)y) + (n mod S)·max(t,x), n·max(t,x))`` with ``t = f+b``,
  ``y = x+l``. The family contains it, so the value is exact there. With unequal stages or hops it can fall
  short when the critical path mixes several kinds of step. The exact schedule-table simulation in
  :mod:`geopipe_env.physics.schedule` is the reference; docs/physics.md gives the measured
  errors.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from geopipe_env.physics import kernels
from geopipe_env.units import BF16_BYTES, BITS_PER_BYTE, BITS_PER_GBIT, BYTES_PER_GB, FLOPS_PER_TFLOP

GPIPE = "gpipe"
ONE_F_ONE_B = "1f1b"
SCHEDULES = (GPIPE, ONE_F_ONE_B)

BACKWARD_TO_FORWARD = 2.0  # backward = 2× forward FLOPs: the 6·P·tokens rule (Kaplan et al. 2020)
STATE_BYTES_PER_PARAM = 16.0  # bf16 weights + grads, fp32 master + Adam m, v (ZeRO paper, Rajbhandari et al. 2020)
# Of these, the 12 bytes of fp32 master weights and Adam moments are sharded over the data-parallel replicas, as
# Megatron-LM's distributed optimizer and ZeRO stage 1 do; the bf16 weights and gradients are not.
SHARDED_STATE_BYTES_PER_PARAM = 12.0
# Activation checkpointing at layer boundaries keeps one bf16 layer input (b·s·h·2 bytes) per layer and
# micro-batch in flight; the layer being recomputed needs its full working set, 34·b·s·h bytes with
# selective recompute (Korthikanti et al. 2022, arXiv 2205.05198).
CHECKPOINT_BYTES_PER_TOKEN_HIDDEN = float(BF16_BYTES)
WORKING_BYTES_PER_TOKEN_HIDDEN = 34.0
USABLE_MEMORY_FRACTION = 0.9  # CUDA context, allocator fragmentation and buffers take ~10%


class IterationTime(NamedTuple):
    """An iteration's duration and its split into busy compute, exposed communication and bubble."""

    total_s: float
    compute_s: float  # the slowest stage's busy time, M·max(f+b)
    comm_s: float  # fill/drain transfer and latency, 2Σ(x+l)
    bubble_s: float  # the rest: pipeline fill/drain idling and stalls


def forward_time_s(
    params: float, num_stages: int, micro_batch_size: int, seq_len: int, tflops: float, mfu: float, gpus_per_stage: int = 1
) -> float:
    """Forward time of one stage for one micro-batch: ``2·(P/S)·b·s / (g·tflops·1e12·MFU)``."""
    flops = 2.0 * (params / num_stages) * micro_batch_size * seq_len
    return flops / (gpus_per_stage * tflops * FLOPS_PER_TFLOP * mfu)


def activation_bytes(micro_batch_size: int, seq_len: int, hidden: int) -> float:
    """Bytes of one activation (or gradient) message at a stage boundary: ``b·s·h·2`` (bf16)."""
    return float(micro_batch_size * seq_len * hidden * BF16_BYTES)


def stage_memory_bytes(
    params: float,
    layers: int,
    hidden: int,
    num_stages: int | np.ndarray,
    micro_batch_size: int,
    seq_len: int,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
    data_parallel: int = 1,
) -> float | np.ndarray:
    """Peak memory of the busiest stage (stage 0) of one pipeline replica, in bytes, before splitting over GPUs.

    Model state is ``(4 + 12/d)·P/S``: ``16·P/S`` for one replica, with the optimizer's 12 bytes per parameter
    sharded over ``d`` replicas. Stage 0 keeps ``min(S, M)`` micro-batches in flight under 1F1B and all ``M``
    under GPipe, each holding a checkpointed input per layer, plus one layer's working set during recompute.
    """
    in_flight = num_microbatches if schedule == GPIPE else np.minimum(num_stages, num_microbatches)
    layers_per_stage = -(-layers // num_stages)  # ceil, for an int or an int array of stage counts
    tokens_hidden = micro_batch_size * seq_len * hidden
    checkpoints = in_flight * layers_per_stage * CHECKPOINT_BYTES_PER_TOKEN_HIDDEN * tokens_hidden
    working = WORKING_BYTES_PER_TOKEN_HIDDEN * tokens_hidden
    state_bytes_per_param = STATE_BYTES_PER_PARAM
    if data_parallel > 1:
        unsharded = STATE_BYTES_PER_PARAM - SHARDED_STATE_BYTES_PER_PARAM
        state_bytes_per_param = unsharded + SHARDED_STATE_BYTES_PER_PARAM / data_parallel
    return state_bytes_per_param * params / num_stages + checkpoints + working


def fits_memory(stage_bytes: float | np.ndarray, memory_gb: float, gpus_per_stage: int = 1) -> bool | np.ndarray:
    """Whether a stage's memory, split evenly over ``gpus_per_stage`` GPUs, fits the usable GPU memory
    (elementwise for an array of stage sizes)."""
    return stage_bytes / gpus_per_stage <= USABLE_MEMORY_FRACTION * memory_gb * BYTES_PER_GB


def min_feasible_stages(
    params: float,
    layers: int,
    hidden: int,
    micro_batch_size: int,
    seq_len: int,
    num_microbatches: int,
    memory_gb: float,
    gpus_per_stage: int = 1,
    schedule: str = ONE_F_ONE_B,
    data_parallel: int = 1,
) -> int | None:
    """The smallest stage count (at most one stage per layer) whose stages fit; ``None`` if none does."""
    stage_counts = np.arange(1, layers + 1)
    need = stage_memory_bytes(
        params, layers, hidden, stage_counts, micro_batch_size, seq_len, num_microbatches, schedule, data_parallel
    )
    fitting = np.flatnonzero(fits_memory(need, memory_gb, gpus_per_stage))
    return int(stage_counts[fitting[0]]) if fitting.size else None


class _PathTables(NamedTuple):
    """Index bookkeeping of the 1F1B path family for one ``(S, n)``. It holds no times, so it is memoised.

    One entry per candidate path (see the module docstring for the shapes). Loop paths (A): ``tail_copies``
    tail loops of width ``tail_width`` (from stage S − width), the other ``tail_rest`` advances filled by tail
    loops or single steps. Segment paths (B): ``pre`` advances, ``copies`` of segment ``[first, last]``, then
    ``cool_steps`` cool-down steps or one tail loop of width ``post_width``. Turn paths (C): per turn stage d, and
    per pair (h, d) with cycles over ``[h, d]``; ``*_reach`` are the deepest stages whose ops can supply a run of
    steps. Indices into the per-layout arrays of :func:`_fixed_paths` are stored ready to use.
    """

    tail_width: np.ndarray  # (A,) int: S − the first stage of the tail loops
    tail_copies: np.ndarray  # (A,) float
    tail_rest: np.ndarray  # (A,) int
    segment: np.ndarray  # (B,) int: first·S + last, an index into the flattened (S, S) segment table
    copies: np.ndarray  # (B,) float
    pre: np.ndarray  # (B,) float
    # (B,) int: min(pre, S), the width of a tail loop standing in for the pre steps, or S+1 (a −inf entry of the
    # loop table) where that loop would start above ``first``.
    pre_loop: np.ndarray
    post_width: np.ndarray  # (B,) int: width of the tail loop after the copies (0 for cool-down)
    cool_steps: np.ndarray  # (B,) float: cool-down steps after the copies (0 for a tail loop)
    first_reach: np.ndarray  # (B,) int: first + 1
    held: np.ndarray  # (S,) float: K_d − 1 = min(S−d, M) − 1, steps of the shorter burst when turning at d
    run_reach: np.ndarray  # (S,) int: 1 + the deepest stage ≤ d that can run n steps (0: none)
    turn_segment: np.ndarray  # (C,) int: h·S + d for the cycled pairs
    turn_stage: np.ndarray  # (C,) int: d
    turn_held: np.ndarray  # (C,) float: held[d]
    turn_hop_reach: np.ndarray  # (C,) int: h + 1
    turn_cycles: np.ndarray  # (C,) float: ⌊(M − K_d) / (d − h + 1)⌋ ≥ 1
    turn_steps: np.ndarray  # (C,) float: n − cycles·(d − h + 1) steps after the cycles
    turn_reach: np.ndarray  # (C,) int: 1 + the deepest stage ≤ h that can run ``turn_steps`` steps (0: none)
    advances: np.ndarray  # (n+1,) float: 0..n
    full_loops: np.ndarray  # (n+1,) float: r // S
    part_loop: np.ndarray  # (n+1,) int: r % S


def _dominant_segment_paths(
    copies: list[int], pre: list[int], post: list[tuple[int, int]], first: list[int], num_stages: int
) -> list[int]:
    """Indices of the segment paths (B) that can be the longest of their family, in order.

    A path with no copy of its segment depends on ``[first, last]`` only through whether a tail loop may stand
    in for its pre steps (``pre ≤ S − first``) and, for a cool-down, through the slowest backward at or above
    ``first``, which never decreases with ``first``. So among such paths with the same pre steps and the same
    post part, the one with the largest ``first`` is at least as long as every other (with floating-point
    rounding too, since it is monotonic), both among those allowing the tail loop and among the rest.
    """
    keep = [i for i, c in enumerate(copies) if c]
    largest_first: dict[tuple, int] = {}
    for i, c in enumerate(copies):
        if not c:
            key = (post[i], pre[i], pre[i] <= num_stages - first[i])
            j = largest_first.get(key)
            if j is None or first[i] > first[j]:
                largest_first[key] = i
    return sorted(keep + list(largest_first.values()))


@functools.lru_cache(maxsize=128)
def path_tables(num_stages: int, n: int) -> _PathTables:
    """Build :class:`_PathTables` for ``num_stages`` stages and ``n = M − 1`` advances (read-only; compiled code
    that builds a layout's model takes them besides its times). Pure in its two integers, so the cache changes no
    result."""
    tail_first, tail_copies, tail_rest = [], [], []
    for first in range(num_stages):
        width = num_stages - first
        for copies in range(n // width + 1):
            tail_first.append(first)
            tail_copies.append(copies)
            tail_rest.append(n - copies * width)
    segment, seg_copies, pre, post, seg_first = [], [], [], [], []
    for first in range(num_stages):
        for last in range(first, num_stages - 1):
            width = last - first + 1
            room = num_stages - 1 - last
            # After the copies: the cool-down, or one tail loop begun on the last copy's way back up (from its
            # top, middle or bottom stage: all last−first+1 choices would cost O(S³) entries for little gain).
            starts = sorted({first, (first + last) // 2, last})
            for loop_width, steps in [(0, room)] + [(num_stages - p, 0) for p in starts]:
                after = loop_width + steps
                if n < after:
                    continue
                copies = (n - after) // width
                segment.append(first * num_stages + last)
                seg_copies.append(copies)
                pre.append(n - after - copies * width)
                post.append((loop_width, steps))
                seg_first.append(first)
    keep = _dominant_segment_paths(seg_copies, pre, post, seg_first, num_stages)
    pre_a = np.array(pre, dtype=int)[keep]
    first_a = np.array(seg_first, dtype=int)[keep]
    post_a = np.array(post, dtype=int).reshape(-1, 2)[keep]
    stage = np.arange(num_stages)
    held = np.minimum(num_stages - stage, n + 1)  # (S,) K_d
    # A run of r consecutive forwards (or backwards) at stage u needs S−u ≥ r+1.
    run_reach = np.maximum(np.minimum(stage, num_stages - 1 - n) + 1, 0)
    hop, turn = np.triu_indices(num_stages, 1)
    width = turn - hop + 1
    cycles = (n + 1 - held[turn]) // width
    kept = cycles >= 1
    hop, turn, width, cycles = hop[kept], turn[kept], width[kept], cycles[kept]
    steps = n - cycles * width
    tables = _PathTables(
        tail_width=num_stages - np.array(tail_first, dtype=int),
        tail_copies=np.array(tail_copies, dtype=float),
        tail_rest=np.array(tail_rest, dtype=int),
        segment=np.array(segment, dtype=int)[keep],
        copies=np.array(seg_copies, dtype=float)[keep],
        pre=pre_a.astype(float),
        pre_loop=np.where(pre_a <= num_stages - first_a, np.minimum(pre_a, num_stages), num_stages + 1),
        post_width=np.ascontiguousarray(post_a[:, 0]),  # contiguous like the rest: one compiled signature
        cool_steps=post_a[:, 1].astype(float),
        first_reach=first_a + 1,
        held=(held - 1).astype(float),
        run_reach=run_reach,
        turn_segment=hop * num_stages + turn,
        turn_stage=turn,
        turn_held=(held[turn] - 1).astype(float),
        turn_hop_reach=hop + 1,
        turn_cycles=cycles.astype(float),
        turn_steps=steps.astype(float),
        turn_reach=np.maximum(np.minimum(hop, num_stages - 1 - steps) + 1, 0),
        advances=np.arange(n + 1, dtype=float),
        full_loops=(np.arange(n + 1) // num_stages).astype(float),
        part_loop=np.arange(n + 1) % num_stages,
    )
    for array in tables:
        array.setflags(write=False)
    return tables


@functools.lru_cache(maxsize=128)
def packed_path_tables(num_stages: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`path_tables` as compiled code takes them (``kernels.tab_part`` reads a field): ``(ints, floats)``,
    read-only. ``ints`` starts with each field's start and length, in ``kernels.PATH_TABLE_FIELDS`` order (the
    fields' own order), the int fields' values follow; ``floats`` holds the float fields' values."""
    tables = path_tables(num_stages, n)
    header, ints, floats = [], [], []
    int_at, float_at = 2 * len(tables), 0
    for array in tables:
        if array.dtype.kind == "f":
            header += (float_at, array.size)
            floats.append(array)
            float_at += array.size
        else:
            header += (int_at, array.size)
            ints.append(array)
            int_at += array.size
    packed_i = np.concatenate([np.array(header, dtype=np.int64), *ints]).astype(np.int64)
    packed_f = np.concatenate([np.zeros(0), *floats]).astype(np.float64)
    for array in (packed_i, packed_f):
        array.setflags(write=False)
    return packed_i, packed_f


class _FixedPaths(NamedTuple):
    """The parts of one layout's 1F1B path family that do not depend on the time of a single step.

    A step (one advance at the last stage or on the bottleneck link) takes ``max(f+b of the last stage,
    link_step_s)``; it enters only the loop paths' fill and the segment paths' pre steps (:func:`_longest_s`).
    """

    tables: _PathTables
    last_stage_s: float  # f + b of the last stage: the least a step takes
    tail_s: np.ndarray  # (A,) the tail loops of each loop path
    loops_only_s: np.ndarray  # (n+1,) r advances filled by tail loops only (width S, then one narrower)
    segments_s: np.ndarray  # (B,) the copies of each segment path's segment
    pre_loop_s: np.ndarray  # (B,) a tail loop in place of the pre steps (−inf where none may start)
    post_s: np.ndarray  # (B,) what follows the copies: the cool-down or a tail loop
    other_s: float  # the longest turn path (C) or stage op chain


def _fixed_paths(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    stage_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    n: int,
) -> _FixedPaths:
    """Compute :class:`_FixedPaths` for ``n = M − 1 ≥ 1`` advances (``stage_s = forward_s + backward_s``)."""
    num_stages = stage_s.shape[0]
    tab = path_tables(num_stages, n)
    before = np.zeros(num_stages)  # (S,) Σ_{p<q}(t_p + 2y_p)
    np.add.accumulate(stage_s[:-1] + 2.0 * (hop_transfer_s + hop_latency_s), out=before[1:])  # cumsum
    through = before + stage_s  # (S,) Σ_{p≤q} t_p + 2Σ_{p<q} y_p
    segment_s = (through - before[:, None]).ravel()  # (S·S,) [first, last]; junk below the diagonal
    # (S+2,) tail loop by width (from stage S−width); 0 for width 0, and −inf at S+1 for "no loop allowed".
    loop_s = np.empty(num_stages + 2)
    loop_s[0], loop_s[-1] = 0.0, -np.inf
    np.subtract(through[-1], before[::-1], out=loop_s[1:-1])

    # (C) Turns: micro-batches run down in a burst of steps (forwards of one stage, or messages queued on one
    # hop) to a stage d that holds K = min(S−d, M) of them before its first backward, then come back up in a
    # burst of backwards or queued gradients: n + K − 1 steps, the long burst on the slower side. Or the
    # first K run down, cycles over [h, d] follow, and the last gradients come back up in a burst.
    slowest_f = np.zeros(num_stages + 1)  # (S+1,) by 1 + deepest stage
    np.maximum.accumulate(forward_s, out=slowest_f[1:])
    slowest_b = np.zeros(num_stages + 1)  # (S+1,)
    np.maximum.accumulate(backward_s, out=slowest_b[1:])
    slowest_x = np.zeros(num_stages)  # (S,) by 1 + deepest hop; entry d: the hops above stage d
    np.maximum.accumulate(hop_transfer_s, out=slowest_x[1:])
    any_f = np.maximum(slowest_f[1:], slowest_x)
    any_b = np.maximum(slowest_b[1:], slowest_x)
    run_f = np.maximum(slowest_f[tab.run_reach], slowest_x)
    run_b = np.maximum(slowest_b[tab.run_reach], slowest_x)
    bursts = np.maximum(n * run_f + tab.held * any_b, tab.held * any_f + n * run_b)
    other = float((through + bursts).max() - through[-1])
    if tab.turn_stage.size:
        back_s = np.maximum(slowest_b[tab.turn_reach], slowest_x[tab.turn_hop_reach])
        down_s = tab.turn_held * any_f[tab.turn_stage]
        cycled = through[tab.turn_stage] + down_s + tab.turn_cycles * segment_s[tab.turn_segment]
        other = max(other, float((cycled + tab.turn_steps * back_s).max() - through[-1]))
    # A stage's whole op chain after its prefix.
    chain = float((before + (n + 1) * stage_s).max() - through[-1])

    return _FixedPaths(
        tables=tab,
        last_stage_s=float(stage_s[-1]),
        tail_s=tab.tail_copies * loop_s[tab.tail_width],
        loops_only_s=tab.full_loops * loop_s[num_stages] + loop_s[tab.part_loop],
        segments_s=tab.copies * segment_s[tab.segment],
        pre_loop_s=loop_s[tab.pre_loop],
        # The cool-down runs backwards of a stage at or above `first`.
        post_s=loop_s[tab.post_width] + tab.cool_steps * slowest_b[tab.first_reach],
        other_s=max(other, chain),
    )


def compiled_fixed_paths(
    forward_s: np.ndarray, backward_s: np.ndarray, hop_transfer_s: np.ndarray, hop_latency_s: np.ndarray, n: int
) -> _FixedPaths:
    """:func:`_fixed_paths` (with ``stage_s = forward_s + backward_s``) by the compiled ``kernels.fixed_paths``,
    which equals it array for array, bit for bit."""
    tab = path_tables(forward_s.shape[0], n)
    last_stage_s, other_s, tail_s, loops_only_s, segments_s, pre_loop_s, post_s = kernels.fixed_paths(
        forward_s, backward_s, hop_transfer_s, hop_latency_s, n, tab.run_reach, tab.held, tab.turn_stage,
        tab.turn_reach, tab.turn_hop_reach, tab.turn_held, tab.turn_cycles, tab.turn_segment, tab.turn_steps,
        tab.tail_copies, tab.tail_width, tab.full_loops, tab.part_loop, tab.copies, tab.segment, tab.pre_loop,
        tab.post_width, tab.cool_steps, tab.first_reach,
    )
    return _FixedPaths(tab, last_stage_s, tail_s, loops_only_s, segments_s, pre_loop_s, post_s, other_s)


def _longest_s(paths: _FixedPaths, link_step_s: float) -> float:
    """The longest path of the family, given the fixed parts and the bottleneck link's time per step."""
    tab = paths.tables
    step_s = max(paths.last_stage_s, link_step_s)  # one advance at the last stage or on the bottleneck link

    # (A) Tail loops need no room after them, so they mix freely with each other and with single steps.
    loop_fill = np.maximum(paths.loops_only_s, tab.advances * step_s)  # (n+1,)
    longest = float((paths.tail_s + loop_fill[tab.tail_rest]).max())

    # (B) Copies of a segment, with single steps or a tail loop from at or below `first` before them, and the
    # cool-down of a stage at or above `first`, or a tail loop begun on the way back up, after them.
    if tab.segment.size:
        pre_s = np.maximum(tab.pre * step_s, paths.pre_loop_s)
        longest = max(longest, float((paths.segments_s + pre_s + paths.post_s).max()))
    return max(longest, paths.other_s)


def _one_f_one_b_extra_s(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    link_step_s: float,
) -> float:
    """1F1B time beyond one micro-batch's round trip: the longest of the path family in the module docstring."""
    n = num_microbatches - 1
    if n <= 0:
        return 0.0
    stage_s = forward_s + backward_s
    return _longest_s(_fixed_paths(forward_s, backward_s, stage_s, hop_transfer_s, hop_latency_s, n), link_step_s)


def iteration_time(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
    min_cadence_s: float = 0.0,
) -> IterationTime:
    """Analytic iteration time of one pipeline (see the module docstring for the derivation).

    Args:
        forward_s: (S,) forward time per micro-batch of each stage.
        backward_s: (S,) backward time per micro-batch of each stage.
        hop_transfer_s: (S−1,) time to put one message on each boundary's link at its line rate.
        hop_latency_s: (S−1,) one-way latency of each boundary.
        num_microbatches: M.
        schedule: ``"1f1b"`` or ``"gpipe"``.
        min_cadence_s: a floor on the steady-state cadence imposed by a bandwidth share below the link's line
            rate (message bytes / allocated rate); 0 when the job is not throttled. It floors the time per
            micro-batch only; a throttled hop's fill and drain queueing is modelled by passing its throttled
            message time in ``hop_transfer_s`` instead.
    """
    m = num_microbatches
    stage_s = forward_s + backward_s
    compute_total = float(stage_s.sum())
    fill = 2.0 * float(hop_transfer_s.sum() + hop_latency_s.sum())
    max_x = max(float(hop_transfer_s.max()) if hop_transfer_s.size else 0.0, min_cadence_s)
    if schedule == GPIPE:
        cadence = max(float(forward_s.max()), max_x) + max(float(backward_s.max()), max_x)
        total = compute_total + fill + (m - 1) * cadence
    else:
        extra = _one_f_one_b_extra_s(forward_s, backward_s, hop_transfer_s, hop_latency_s, m, max_x)
        total = compute_total + fill + extra
    busy = m * float(stage_s.max())
    return IterationTime(total_s=total, compute_s=busy, comm_s=fill, bubble_s=max(total - busy - fill, 0.0))


# How an IterationModel evaluates (ModelParts.kind).
MODEL_GPIPE, MODEL_UNIFORM, MODEL_ROUND_TRIP, MODEL_PATHS = range(4)


class ModelParts(NamedTuple):
    """An :class:`IterationModel` taken apart (see :func:`model_parts`).

    For MODEL_PATHS the 1F1B path family of :func:`_longest_s` is folded (``kernels.fold_paths``) into lines in the
    time of one step (``step_s = max(last_stage_s, the bottleneck link's time per step)``): the longest path is
    ``max(constant_s, max(tail_intercept + tail_slope·step_s), max((segment_start + segment_slope·step_s) +
    segment_end))``, the same floating-point operations as :func:`_longest_s` takes on each path, with the paths
    that cannot be the longest at any step left out.
    """

    kind: int  # MODEL_GPIPE, MODEL_UNIFORM (1F1B closed form), MODEL_ROUND_TRIP (1F1B, M = 1) or MODEL_PATHS
    num_microbatches: int
    base_s: float  # one micro-batch's round trip, Σ(f+b) + 2Σ(x+l)
    max_x: float  # the slowest hop's transfer time
    max_f: float  # GPipe only
    max_b: float  # GPipe only
    uniform: tuple[float, float, float, float]  # (f, S, x, l) of identical stages and hops (MODEL_UNIFORM)
    last_stage_s: float  # MODEL_PATHS: f + b of the last stage, the least a step takes
    constant_s: float  # MODEL_PATHS: the longest path whose length does not depend on the step
    tail_slope: np.ndarray  # (T,) steps after the tail loops, one line per count
    tail_intercept: np.ndarray  # (T,) the longest tail loops before that many steps
    segment_slope: np.ndarray  # (G,) pre steps before the copies of a segment
    segment_start: np.ndarray  # (G,) the copies
    segment_end: np.ndarray  # (G,) what follows them


def _model_scalars(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    schedule: str,
) -> tuple[int, float, float, float, float, tuple[float, float, float, float]]:
    """``(kind, base_s, max_x, max_f, max_b, uniform)`` of a layout's :class:`IterationModel` (see
    :class:`ModelParts`): which evaluation it takes, and its scalars."""
    stage_s = forward_s + backward_s
    base_s = float(stage_s.sum()) + 2.0 * float(hop_transfer_s.sum() + hop_latency_s.sum())
    max_x = float(hop_transfer_s.max()) if hop_transfer_s.size else 0.0
    if schedule == GPIPE:
        return MODEL_GPIPE, base_s, max_x, float(forward_s.max()), float(backward_s.max()), (0.0, 0.0, 0.0, 0.0)
    if num_microbatches <= 1:
        return MODEL_ROUND_TRIP, base_s, max_x, 0.0, 0.0, (0.0, 0.0, 0.0, 0.0)
    f = float(forward_s[0])
    lat = float(hop_latency_s[0]) if hop_latency_s.size else 0.0
    uniform = (f, float(forward_s.shape[0]), max_x, lat)
    if (
        (forward_s == f).all()
        and (backward_s == BACKWARD_TO_FORWARD * f).all()
        and (hop_transfer_s == max_x).all()
        and (hop_latency_s == lat).all()
    ):
        return MODEL_UNIFORM, base_s, max_x, 0.0, 0.0, uniform
    return MODEL_PATHS, base_s, max_x, 0.0, 0.0, (0.0, 0.0, 0.0, 0.0)


def model_parts(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
) -> ModelParts:
    """The :class:`IterationModel` of a layout taken apart (arguments as :func:`iteration_time`): the input of its
    compiled evaluation (:func:`geopipe_env.physics.kernels.iteration_total_s`), which equals
    :meth:`IterationModel.total_s` bit for bit. The 1F1B path family is built and folded in compiled code
    (``kernels.fixed_paths``, ``kernels.fold_paths``), from this module's path tables."""
    kind, base_s, max_x, max_f, max_b, uniform = _model_scalars(
        forward_s, backward_s, hop_transfer_s, hop_latency_s, num_microbatches, schedule
    )
    empty = np.zeros(0)
    last_stage_s, folded = 0.0, (0.0, empty, empty, empty, empty, empty)
    if kind == MODEL_PATHS:
        n = num_microbatches - 1
        paths = compiled_fixed_paths(forward_s, backward_s, hop_transfer_s, hop_latency_s, n)
        tab, last_stage_s = paths.tables, paths.last_stage_s
        folded = kernels.fold_paths(
            paths.tail_s, tab.tail_rest, paths.loops_only_s, paths.other_s, paths.segments_s, tab.pre,
            paths.pre_loop_s, paths.post_s,
        )
    return ModelParts(kind, num_microbatches, base_s, max_x, max_f, max_b, uniform, last_stage_s, *folded)


class IterationModel:
    """:func:`iteration_time`'s ``total_s`` for one stage/hop layout, as a cheap function of ``min_cadence_s``.

    The cadence floor enters the analytic model only through ``max_x``: GPipe's cadence, or the time of one
    1F1B step. Everything else (sums, and the step-independent parts of the 1F1B path family, see
    :class:`_FixedPaths`) is computed once here, and :meth:`total_s` finishes the same operations as
    :func:`iteration_time`, so the totals are equal. Identical stages (``b = 2f``) and hops under 1F1B use the
    closed form of :func:`uniform_iteration_time_s` in scalar arithmetic, equal up to rounding (~1e-15).
    """

    __slots__ = ("_schedule", "_m", "_base_s", "_max_x", "_max_f", "_max_b", "_uniform", "_paths")

    def __init__(
        self,
        forward_s: np.ndarray,
        backward_s: np.ndarray,
        hop_transfer_s: np.ndarray,
        hop_latency_s: np.ndarray,
        num_microbatches: int,
        schedule: str = ONE_F_ONE_B,
    ) -> None:
        """Precompute everything that does not depend on the cadence floor (arguments as :func:`iteration_time`)."""
        self._schedule = schedule
        self._m = num_microbatches
        kind, self._base_s, self._max_x, self._max_f, self._max_b, uniform = _model_scalars(
            forward_s, backward_s, hop_transfer_s, hop_latency_s, num_microbatches, schedule
        )
        self._uniform: tuple[float, float, float, float] | None = uniform if kind == MODEL_UNIFORM else None
        self._paths: _FixedPaths | None = None
        if kind == MODEL_PATHS:
            self._paths = compiled_fixed_paths(forward_s, backward_s, hop_transfer_s, hop_latency_s, num_microbatches - 1)

    def total_s(self, min_cadence_s: float = 0.0) -> float:
        """``iteration_time(..., min_cadence_s).total_s`` for this layout."""
        max_x = max(self._max_x, min_cadence_s)
        if self._schedule == GPIPE:
            cadence = max(self._max_f, max_x) + max(self._max_b, max_x)
            return self._base_s + (self._m - 1) * cadence
        if self._uniform is not None:
            f, num_stages, x, lat = self._uniform
            return _uniform_total_s(f, num_stages, x, lat, self._m, ONE_F_ONE_B, min_cadence_s, max, math.floor, math.ceil)
        if self._paths is None:  # a single micro-batch
            return self._base_s
        return self._base_s + _longest_s(self._paths, max_x)


def demand_cadence_s(forward_s: np.ndarray, backward_s: np.ndarray, schedule: str = ONE_F_ONE_B) -> float:
    """The compute cadence a hop must keep up with so that communication never stalls the pipeline.

    Under 1F1B each boundary carries one message per ``max(f+b)``; under GPipe the forward phase sends one per
    ``max f``. A hop whose message time exceeds this throttles the pipeline (a stall).
    """
    if schedule == GPIPE:
        return float(forward_s.max())
    return float((forward_s + backward_s).max())


def uniform_iteration_time_s(
    forward_s: np.ndarray | float,
    num_stages: np.ndarray | int,
    hop_transfer_s: float,
    hop_latency_s: float,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
    min_cadence_s: float = 0.0,
) -> np.ndarray:
    """:func:`iteration_time` for identical stages and hops, vectorised over ``num_stages``.

    With ``t = f + b``, ``y = x + l``, ``n = M − 1`` and ``x̂ = max(x, min_cadence_s)``:
    ``T = S·t + 2(S−1)·y + E``. GPipe has ``E = n·(max(f, x̂) + max(b, x̂))``. 1F1B has the exact tail-loop
    knapsack (module docstring)
    ``E = max(n(t+2y) − 2y⌈n/S⌉, ⌊n/S⌋·(S·t + 2(S−1)·y) + (n mod S)·max(t, x̂), n·max(t, x̂))``.
    """
    f = np.asarray(forward_s, dtype=float)
    s = np.asarray(num_stages, dtype=float)
    return _uniform_total_s(
        f, s, hop_transfer_s, hop_latency_s, num_microbatches, schedule, min_cadence_s, np.maximum, np.floor, np.ceil
    )


def _uniform_total_s(
    f: np.ndarray | float,
    s: np.ndarray | float,
    hop_transfer_s: float,
    hop_latency_s: float,
    num_microbatches: int,
    schedule: str,
    min_cadence_s: float,
    maximum: Callable,
    floor: Callable,
    ceil: Callable,
) -> np.ndarray | float:
    """:func:`uniform_iteration_time_s`'s formula on arrays (with numpy's ``maximum``, ``floor``, ``ceil``) or on
    Python floats (with ``max``, ``math.floor``, ``math.ceil``): the same operations, so equal results."""
    b = BACKWARD_TO_FORWARD * f
    x = maximum(hop_transfer_s * (s > 1), min_cadence_s)
    y = (hop_transfer_s + hop_latency_s) * (s > 1)
    n = num_microbatches - 1
    t = f + b
    if schedule == GPIPE:
        extra = n * (maximum(f, x) + maximum(b, x))
    else:
        step = maximum(t, x)  # one advance by the bottleneck stage or link
        loops = n * (t + 2.0 * y) - 2.0 * y * ceil(n / s)  # fewest tail loops, widest first
        full = floor(n / s)
        mixed = full * (s * t + 2.0 * (s - 1.0) * y) + (n - full * s) * step
        extra = maximum(maximum(loops, mixed), n * step)
    return s * t + 2.0 * (s - 1.0) * y + extra


def allreduce_time_s(
    params: float,
    num_stages: int | np.ndarray,
    gpus_per_stage: int,
    data_parallel: int,
    bandwidth_gbps: float,
    latency_s: float,
) -> float | np.ndarray:
    """Gradient all-reduce of one stage's ``d`` data-parallel replicas after an iteration (ring, inside a region).

    Each GPU holds ``2·P/(S·t)`` bytes of bf16 gradients. A ring all-reduce over ``d`` GPUs sends ``2(d−1)/d`` of
    them through each GPU's link and takes ``2(d−1)`` latency steps (Patarasuk and Yuan 2009; the NCCL ring):
    ``T = 2(d−1)/d · 2P/(S·t) · 8 / bw + 2(d−1)·ℓ``. Zero for ``d = 1``. Every stage has the same gradient size,
    so the stages' all-reduces run side by side and one of them is the iteration's cost.
    """
    if data_parallel <= 1:
        return 0.0 * num_stages
    steps = data_parallel - 1
    grad_bytes = BF16_BYTES * params / (num_stages * gpus_per_stage)
    return 2.0 * steps / data_parallel * grad_bytes * BITS_PER_BYTE / (bandwidth_gbps * BITS_PER_GBIT) + 2.0 * steps * latency_s


def optimal_stages(
    params: float,
    layers: int,
    hidden: int,
    micro_batch_size: int,
    seq_len: int,
    num_microbatches: int,
    tflops: float,
    memory_gb: float,
    mfu: float,
    ref_bandwidth_gbps: float,
    ref_latency_s: float,
    gpus_per_stage: int = 1,
    schedule: str = ONE_F_ONE_B,
    max_stages: int | None = None,
    data_parallel: int = 1,
    intra_bandwidth_gbps: float = 0.0,
    intra_latency_s: float = 0.0,
) -> int | None:
    """K* = argmin_K T_iter(K) over memory-feasible K, on a reference placement (BACE-Pipe's sizing rule).

    The reference placement puts every stage on the given GPU type and every boundary on a reference link
    (``ref_bandwidth_gbps``, ``ref_latency_s``) that carries the ``d`` replicas' messages (``d·A`` per
    micro-batch); with ``d > 1`` the gradient all-reduce at the intra-region link is added. Ties go to the smaller
    K (fewer GPUs). Returns ``None`` when no K up to ``max_stages`` (default: one stage per layer) fits memory.
    """
    k_min = min_feasible_stages(
        params, layers, hidden, micro_batch_size, seq_len, num_microbatches, memory_gb, gpus_per_stage, schedule,
        data_parallel,
    )
    k_max = layers if max_stages is None else min(layers, max_stages)
    if k_min is None or k_min > k_max:
        return None
    ks = np.arange(k_min, k_max + 1)
    f = forward_time_s(params, 1, micro_batch_size, seq_len, tflops, mfu, gpus_per_stage) / ks
    x = data_parallel * activation_bytes(micro_batch_size, seq_len, hidden) * 8.0 / (ref_bandwidth_gbps * 1e9)
    t = uniform_iteration_time_s(f, ks, x, ref_latency_s, num_microbatches, schedule)
    if data_parallel > 1:
        t = t + allreduce_time_s(params, ks, gpus_per_stage, data_parallel, intra_bandwidth_gbps, intra_latency_s)
    return int(ks[int(np.argmin(t))])


def iterations_for(
    tokens: float, epochs: float, micro_batch_size: int, seq_len: int, num_microbatches: int, data_parallel: int = 1
) -> int:
    """Iterations to see ``epochs × tokens`` tokens with ``b·s·M·d`` tokens per iteration (at least one)."""
    return max(1, math.ceil(tokens * epochs / (micro_batch_size * seq_len * num_microbatches * data_parallel)))
