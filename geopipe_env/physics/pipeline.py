"""Layer 3: pipeline-parallel timing and memory, as pure functions.

Notation (DESIGN §3): ``P`` parameters, ``S`` stages, ``b`` micro-batch size, ``s`` sequence length, ``h`` hidden
size, ``M`` micro-batches per iteration. A stage's forward time per micro-batch is
``t_f = 2·(P/S)·b·s / (g·tflops·1e12·MFU)`` for a stage on ``g`` GPUs, and ``t_b = 2·t_f`` (the 6·P·tokens rule).
Each stage boundary moves one activation of ``A = b·s·h·2`` bytes forward and a gradient of the same size back.

Analytic iteration time (see also the README, "Physics"). Every stage and every directed hop is a serial
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
  :mod:`geopipe_env.physics.schedule` is the reference; the README ("Physics") gives the measured
  errors.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from geopipe_env.units import BF16_BYTES, BYTES_PER_GB, FLOPS_PER_TFLOP

GPIPE = "gpipe"
ONE_F_ONE_B = "1f1b"
SCHEDULES = (GPIPE, ONE_F_ONE_B)

BACKWARD_TO_FORWARD = 2.0  # backward = 2× forward FLOPs: the 6·P·tokens rule (Kaplan et al. 2020)
STATE_BYTES_PER_PARAM = 16.0  # bf16 weights + grads, fp32 master + Adam m, v (ZeRO paper, Rajbhandari et al. 2020)
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
) -> float | np.ndarray:
    """Peak memory of the busiest stage (stage 0) of one pipeline, in bytes, before splitting over GPUs.

    Model state is ``16·P/S``. Stage 0 keeps ``min(S, M)`` micro-batches in flight under 1F1B and all ``M`` under
    GPipe, each holding a checkpointed input per layer, plus one layer's working set during recompute.
    """
    in_flight = num_microbatches if schedule == GPIPE else np.minimum(num_stages, num_microbatches)
    layers_per_stage = -(-layers // num_stages)  # ceil, for an int or an int array of stage counts
    tokens_hidden = micro_batch_size * seq_len * hidden
    checkpoints = in_flight * layers_per_stage * CHECKPOINT_BYTES_PER_TOKEN_HIDDEN * tokens_hidden
    working = WORKING_BYTES_PER_TOKEN_HIDDEN * tokens_hidden
    return STATE_BYTES_PER_PARAM * params / num_stages + checkpoints + working


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
) -> int | None:
    """The smallest stage count (at most one stage per layer) whose stages fit; ``None`` if none does."""
    stage_counts = np.arange(1, layers + 1)
    need = stage_memory_bytes(params, layers, hidden, stage_counts, micro_batch_size, seq_len, num_microbatches, schedule)
    fitting = np.flatnonzero(fits_memory(need, memory_gb, gpus_per_stage))
    return int(stage_counts[fitting[0]]) if fitting.size else None


class _PathTables(NamedTuple):
    """Index bookkeeping of the 1F1B path family for one ``(S, n)``. It holds no times, so it is memoised.

    One entry per candidate path (see the module docstring for the shapes). Loop paths (A): ``tail_copies``
    tail loops from stage ``tail_first``, the other ``tail_rest`` advances filled by tail loops or single
    steps. Segment paths (B): ``pre`` advances, ``copies`` of segment ``[first, last]``, then ``cool_steps``
    cool-down steps or one tail loop of width ``post_width``. Turn paths (C): per turn stage d, and per pair
    (h, d) with cycles over ``[h, d]``; ``*_reach`` are the deepest stages whose ops can supply a run of steps.
    """

    tail_first: np.ndarray  # (A,) int
    tail_copies: np.ndarray  # (A,) float
    tail_rest: np.ndarray  # (A,) int
    segment: np.ndarray  # (B,) int: first·S + last, an index into the flattened (S, S) segment table
    copies: np.ndarray  # (B,) float
    pre: np.ndarray  # (B,) int
    pre_loop_ok: np.ndarray  # (B,) 0, or −inf where a tail loop of width ``pre`` would start above ``first``
    post_width: np.ndarray  # (B,) int: width of the tail loop after the copies (0 for cool-down)
    cool_steps: np.ndarray  # (B,) float: cool-down steps after the copies (0 for a tail loop)
    first: np.ndarray  # (B,) int
    held: np.ndarray  # (S,) float: K_d − 1 = min(S−d, M) − 1, steps of the shorter burst when turning at d
    run_reach: np.ndarray  # (S,) int: 1 + the deepest stage ≤ d that can run n steps (0: none)
    turn_segment: np.ndarray  # (C,) int: h·S + d for the cycled pairs
    turn_stage: np.ndarray  # (C,) int: d
    turn_hop: np.ndarray  # (C,) int: h
    turn_cycles: np.ndarray  # (C,) float: ⌊(M − K_d) / (d − h + 1)⌋ ≥ 1
    turn_steps: np.ndarray  # (C,) float: n − cycles·(d − h + 1) steps after the cycles
    turn_reach: np.ndarray  # (C,) int: 1 + the deepest stage ≤ h that can run ``turn_steps`` steps (0: none)
    advances: np.ndarray  # (n+1,) float: 0..n
    full_loops: np.ndarray  # (n+1,) float: r // S
    part_loop: np.ndarray  # (n+1,) int: r % S


@functools.lru_cache(maxsize=128)
def _path_tables(num_stages: int, n: int) -> _PathTables:
    """Build :class:`_PathTables`; pure in its two integers, so the cache changes no result."""
    tail_first, tail_copies, tail_rest = [], [], []
    for first in range(num_stages):
        width = num_stages - first
        for copies in range(n // width + 1):
            tail_first.append(first)
            tail_copies.append(copies)
            tail_rest.append(n - copies * width)
    segment, seg_copies, pre, post_width, cool_steps, seg_first = [], [], [], [], [], []
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
                post_width.append(loop_width)
                cool_steps.append(steps)
                seg_first.append(first)
    pre_a = np.array(pre, dtype=int)
    first_a = np.array(seg_first, dtype=int)
    stage = np.arange(num_stages)
    held = np.minimum(num_stages - stage, n + 1)  # (S,) K_d
    # A run of r consecutive forwards (or backwards) at stage u needs S−u ≥ r+1.
    run_reach = np.maximum(np.minimum(stage, num_stages - 1 - n) + 1, 0)
    hop, turn = np.triu_indices(num_stages, 1)
    width = turn - hop + 1
    cycles = (n + 1 - held[turn]) // width
    keep = cycles >= 1
    hop, turn, width, cycles = hop[keep], turn[keep], width[keep], cycles[keep]
    steps = n - cycles * width
    tables = _PathTables(
        tail_first=np.array(tail_first, dtype=int),
        tail_copies=np.array(tail_copies, dtype=float),
        tail_rest=np.array(tail_rest, dtype=int),
        segment=np.array(segment, dtype=int),
        copies=np.array(seg_copies, dtype=float),
        pre=pre_a,
        pre_loop_ok=np.where(pre_a <= num_stages - first_a, 0.0, -np.inf),
        post_width=np.array(post_width, dtype=int),
        cool_steps=np.array(cool_steps, dtype=float),
        first=first_a,
        held=(held - 1).astype(float),
        run_reach=run_reach,
        turn_segment=hop * num_stages + turn,
        turn_stage=turn,
        turn_hop=hop,
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
    stage_s = forward_s + backward_s  # (S,)
    num_stages = stage_s.shape[0]
    tab = _path_tables(num_stages, n)
    before = np.zeros(num_stages)  # (S,) Σ_{p<q}(t_p + 2y_p)
    np.cumsum(stage_s[:-1] + 2.0 * (hop_transfer_s + hop_latency_s), out=before[1:])
    through = before + stage_s  # (S,) Σ_{p≤q} t_p + 2Σ_{p<q} y_p
    segment_s = (through - before[:, None]).ravel()  # (S·S,) [first, last]; junk below the diagonal
    loop_s = np.zeros(num_stages + 1)  # (S+1,) tail loop by width (from stage S−width); 0 for width 0
    loop_s[1:] = through[-1] - before[::-1]
    step_s = max(float(stage_s[-1]), link_step_s)  # one advance at the last stage or on the bottleneck link

    # (A) Tail loops need no room after them, so they mix freely with each other and with single steps.
    loop_fill = np.maximum(tab.full_loops * loop_s[-1] + loop_s[tab.part_loop], tab.advances * step_s)  # (n+1,)
    longest = float((tab.tail_copies * loop_s[num_stages - tab.tail_first] + loop_fill[tab.tail_rest]).max())

    # (B) Copies of a segment, with single steps or a tail loop from at or below `first` before them, and the
    # cool-down of a stage at or above `first`, or a tail loop begun on the way back up, after them.
    if tab.segment.size:
        pre_s = np.maximum(tab.pre * step_s, loop_s[np.minimum(tab.pre, num_stages)] + tab.pre_loop_ok)
        post_s = loop_s[tab.post_width] + tab.cool_steps * np.maximum.accumulate(backward_s)[tab.first]
        longest = max(longest, float((tab.copies * segment_s[tab.segment] + pre_s + post_s).max()))

    # (C) Turns: micro-batches run down in a burst of steps (forwards of one stage, or messages queued on one
    # hop) to a stage d that holds K = min(S−d, M) of them before its first backward, then come back up in a
    # burst of backwards or queued gradients: n + K − 1 steps, the long burst on the slower side. Or the
    # first K run down, cycles over [h, d] follow, and the last gradients come back up in a burst.
    slowest_f = np.concatenate(([0.0], np.maximum.accumulate(forward_s)))  # (S+1,) by 1 + deepest stage
    slowest_b = np.concatenate(([0.0], np.maximum.accumulate(backward_s)))  # (S+1,)
    slowest_x = np.concatenate(([0.0], np.maximum.accumulate(hop_transfer_s)))  # (S,) by 1 + deepest hop
    above = np.arange(num_stages)  # 1 + the deepest hop above stage d
    any_f = np.maximum(slowest_f[1:], slowest_x[above])
    any_b = np.maximum(slowest_b[1:], slowest_x[above])
    run_f = np.maximum(slowest_f[tab.run_reach], slowest_x[above])
    run_b = np.maximum(slowest_b[tab.run_reach], slowest_x[above])
    bursts = np.maximum(n * run_f + tab.held * any_b, tab.held * any_f + n * run_b)
    longest = max(longest, float((through + bursts).max() - through[-1]))
    if tab.turn_stage.size:
        back_s = np.maximum(slowest_b[tab.turn_reach], slowest_x[tab.turn_hop + 1])
        down_s = tab.held[tab.turn_stage] * any_f[tab.turn_stage]
        cycled = through[tab.turn_stage] + down_s + tab.turn_cycles * segment_s[tab.turn_segment]
        longest = max(longest, float((cycled + tab.turn_steps * back_s).max() - through[-1]))

    # A stage's whole op chain after its prefix.
    chain = float((before + num_microbatches * stage_s).max() - through[-1])
    return max(longest, chain)


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
) -> np.ndarray:
    """:func:`iteration_time` for identical stages and hops, vectorised over ``num_stages``.

    With ``t = f + b``, ``y = x + l`` and ``n = M − 1``: ``T = S·t + 2(S−1)·y + E``. GPipe has
    ``E = n·(max(f, x) + max(b, x))``. 1F1B has the exact tail-loop knapsack (module docstring)
    ``E = max(n(t+2y) − 2y⌈n/S⌉, ⌊n/S⌋·(S·t + 2(S−1)·y) + (n mod S)·max(t, x), n·max(t, x))``.
    """
    f = np.asarray(forward_s, dtype=float)
    b = BACKWARD_TO_FORWARD * f
    s = np.asarray(num_stages, dtype=float)
    x = hop_transfer_s * (s > 1)
    y = (hop_transfer_s + hop_latency_s) * (s > 1)
    n = num_microbatches - 1
    t = f + b
    if schedule == GPIPE:
        extra = n * (np.maximum(f, x) + np.maximum(b, x))
    else:
        step = np.maximum(t, x)  # one advance by the bottleneck stage or link
        loops = n * (t + 2.0 * y) - 2.0 * y * np.ceil(n / s)  # fewest tail loops, widest first
        full = np.floor(n / s)
        mixed = full * (s * t + 2.0 * (s - 1.0) * y) + (n - full * s) * step
        extra = np.maximum(np.maximum(loops, mixed), n * step)
    return s * t + 2.0 * (s - 1.0) * y + extra

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
) -> int | None:
    """K* = argmin_K T_iter(K) over memory-feasible K, on a reference placement (BACE-Pipe, PAPERS.md §1.3).

    The reference placement puts every stage on the given GPU type and every boundary on a reference link
    (``ref_bandwidth_gbps``, ``ref_latency_s``). Ties go to the smaller K (fewer GPUs). Returns ``None`` when
    no K up to ``max_stages`` (default: one stage per layer) fits memory.
    """
    k_min = min_feasible_stages(
        params, layers, hidden, micro_batch_size, seq_len, num_microbatches, memory_gb, gpus_per_stage, schedule
    )
    k_max = layers if max_stages is None else min(layers, max_stages)
    if k_min is None or k_min > k_max:
        return None
    ks = np.arange(k_min, k_max + 1)
    f = forward_time_s(params, 1, micro_batch_size, seq_len, tflops, mfu, gpus_per_stage) / ks
    x = activation_bytes(micro_batch_size, seq_len, hidden) * 8.0 / (ref_bandwidth_gbps * 1e9)
    t = uniform_iteration_time_s(f, ks, x, ref_latency_s, num_microbatches, schedule)
    return int(ks[int(np.argmin(t))])


def iterations_for(tokens: float, epochs: float, micro_batch_size: int, seq_len: int, num_microbatches: int) -> int:
    """Iterations to see ``epochs × tokens`` tokens with ``b·s·M`` tokens per iteration (at least one)."""
    return max(1, math.ceil(tokens * epochs / (micro_batch_size * seq_len * num_microbatches)))
