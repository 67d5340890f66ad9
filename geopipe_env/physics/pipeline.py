"""Layer 2: pipeline-parallel timing and memory, as pure functions.

Notation: ``P`` parameters, ``S`` stages, ``b`` micro-batch size, ``s`` sequence length, ``h`` hidden
size, ``M`` micro-batches per iteration. A stage's forward time per micro-batch on ``g`` GPUs is either
``t_f = 2·(P/S)·b·s / (g·tflops·1e12·MFU)`` with a scenario's end-to-end ``mfu``, or, calibrated,
``(2·(P/S)·b·s + 4·(L/S)·b·s²·h) / (g·tflops·1e12·η)`` with the GPU's kernel efficiency ``η``
(:func:`calibrated_forward_s`); ``t_b = 2·t_f`` (the 6·P·tokens rule), plus one ``t_f`` when calibrated compute
recomputes checkpointed activations (:func:`backward_ratio`). Each stage boundary moves one activation of
``A = b·s·h·2`` bytes forward and a gradient of the same size back.

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

The model is computed by compiled functions (:data:`~geopipe_env.base.compiled.jit`) that Python calls too:
:func:`model_total_s` times a pipeline at a cadence floor, :func:`model_scalars`, :func:`fixed_paths` and
:func:`fold_paths` take it apart for the layout table (:mod:`geopipe_env.simulation.layout_table`), whose rows
:func:`iteration_total_s` evaluates. ``tests/reference.py`` writes the same path family with numpy arrays: the
specification the tests hold these to.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from geopipe_env.base.compiled import jit, pairwise_sum
from geopipe_env.physics import schedule as schedules
from geopipe_env.physics.schedule import GPIPE, ONE_F_ONE_B
from geopipe_env.base.tables import (
    LF_BASE, LF_CONSTANT, LF_LAST_STAGE, LF_MAX_B, LF_MAX_F, LF_MAX_X, LF_UNI_B, LF_UNI_F, LF_UNI_LAT, LF_UNI_S, LF_UNI_X,
    LI_ARRAYS, LI_KIND, LI_M, LI_SEGMENTS, LI_TAILS, NUM_LAYOUT_FLOATS, NUM_LAYOUT_INTS, TAB_ADVANCES,
    TAB_COOL_STEPS, TAB_COPIES, TAB_FIRST_REACH, TAB_FULL_LOOPS, TAB_HELD, TAB_PART_LOOP, TAB_POST_WIDTH, TAB_PRE,
    TAB_PRE_LOOP, TAB_RUN_REACH, TAB_SEGMENT, TAB_TAIL_COPIES, TAB_TAIL_REST, TAB_TAIL_WIDTH, TAB_TURN_CYCLES,
    TAB_TURN_HELD, TAB_TURN_HOP_REACH, TAB_TURN_REACH, TAB_TURN_SEGMENT, TAB_TURN_STAGE, TAB_TURN_STEPS,
)
from geopipe_env.base.units import BF16_BYTES, BITS_PER_BYTE, BITS_PER_GBIT, BYTES_PER_GB, FLOPS_PER_TFLOP, rate_gbps, transfer_time_s

# The schedules the analytic model times (the schedule executor, physics.schedule, times every schedule).
SCHEDULES = schedules.CLOSED_FORM_SCHEDULES

BACKWARD_TO_FORWARD = 2.0  # backward = 2× forward FLOPs: the 6·P·tokens rule (Kaplan et al. 2020)
# Model state per parameter: the bf16 weights and gradients, 4 bytes on every GPU that holds them, and the optimizer's
# state, sharded over the data-parallel (× context-parallel) ranks that hold the same weights, as Megatron-LM's
# distributed optimizer and ZeRO stage 1 do. With fp32 state it is the fp32 master weights and Adam's two moments,
# 12 bytes (16 in all, the ZeRO paper's count: Rajbhandari et al. 2020). With bf16 state it is Adam's two moments in
# bf16 and no master copy, 4 bytes: NeMo's distributed Adam keeps no master weights when its state's dtype is the
# model's (NeMo 2.0, `MegatronBaseModel.setup_optimization`), which NVIDIA's Nemotron-4 340B recipe sets
# (NVIDIA/dgxc-benchmarking v24.11.1, nemotron4-340b-synth.yaml: `optim.dtype: bf16`).
WEIGHT_AND_GRADIENT_BYTES_PER_PARAM = 4.0
OPTIMIZER_STATE_BYTES_PER_PARAM = {"fp32": 12.0, "bf16": 4.0}
OPTIMIZER_STATES = tuple(OPTIMIZER_STATE_BYTES_PER_PARAM)
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


def forward_flops(params: float, layers: int, hidden: int, num_stages: int, micro_batch_size: int,
                  seq_len: int) -> float:
    """FLOPs of one stage's forward for one micro-batch: ``2·(P/S)·b·s`` in the weights' matrix products and
    ``4·(L/S)·b·s²·h`` in attention's scores and weighted sum, counted in full (no causal halving), as NVIDIA's and
    Megatron-LM's MFU figures count them (Narayanan et al. 2021, arXiv 2104.04473, Eq. 3; Qi et al. 2024, Table 1:
    a layer's forward is ``sbh(24h + 4s)``)."""
    tokens = micro_batch_size * seq_len
    return 2.0 * (params / num_stages) * tokens + 4.0 * (layers / num_stages) * tokens * seq_len * hidden


def calibrated_forward_s(params: float, layers: int, hidden: int, num_stages: int, micro_batch_size: int,
                         seq_len: int, tflops: float, kernel_efficiency: float, gpus: int) -> float:
    """Forward time of one stage for one micro-batch on ``gpus`` GPUs (tensor × context parallel) that reach
    ``kernel_efficiency`` of their peak: :func:`forward_flops` ÷ (gpus · tflops · 1e12 · efficiency). The bubble,
    the messages and the all-reduce are timed apart, so the efficiency is that of the kernels alone."""
    flops = forward_flops(params, layers, hidden, num_stages, micro_batch_size, seq_len)
    return flops / (gpus * tflops * FLOPS_PER_TFLOP * kernel_efficiency)


def backward_ratio(calibrated: bool, recompute: bool) -> float:
    """The backward's time in forward times: 2 (the 6·P·tokens rule), plus the recomputed forward when activations
    are checkpointed and compute is calibrated. An ``mfu`` is an end-to-end figure measured on runs that recompute
    or not, so it keeps the 2."""
    return BACKWARD_TO_FORWARD + (1.0 if calibrated and recompute else 0.0)


def input_gradient_share(hidden: int, seq_len: int, ratio: float) -> float:
    """The share of a backward of ``ratio`` forward times that a split schedule runs as D (the input gradient,
    after the recomputed forward if there is one) rather than W (the weight gradient): ``(ratio − 2 + 2q) / ratio``
    with ``q`` the input gradient's share of the two-forward backward (``schedule.input_gradient_fraction``)."""
    q = schedules.input_gradient_fraction(hidden, seq_len)
    return (ratio - BACKWARD_TO_FORWARD + BACKWARD_TO_FORWARD * q) / ratio


def runnable_stages(names: tuple[str, ...], layers: int, num_microbatches: int, virtual_stages: int,
                    stage_counts: np.ndarray) -> np.ndarray:
    """(len(stage_counts),) bool: which stage counts every schedule of ``names`` can run: its shape rules
    (``schedule.check_shape``), and each stage's layers (``⌈L/S⌉``) split evenly into its chunks per device."""
    if all(schedules.spec(name).closed_form for name in names):
        return np.ones(stage_counts.shape[0], dtype=bool)
    runnable = _runnable_counts(tuple(names), layers, num_microbatches, virtual_stages)
    return np.array([runnable[k - 1] if 1 <= k <= layers else False for k in stage_counts.tolist()], dtype=bool)


@functools.lru_cache(maxsize=256)
def _runnable_counts(names: tuple[str, ...], layers: int, num_microbatches: int, virtual_stages: int) -> tuple[bool, ...]:
    """:func:`runnable_stages` for every stage count 1 … ``layers`` (memoised: worlds repeat their job shapes)."""
    stage_counts = np.arange(1, layers + 1)
    ok = np.ones(stage_counts.shape[0], dtype=bool)
    for i, k in enumerate(stage_counts.tolist()):
        for name in names:
            v = schedules.own_virtual_stages(name, virtual_stages)
            chunks = schedules.chunks_per_device(name, v)
            try:
                schedules.check_shape(name, k, num_microbatches, v)
            except schedules.ShapeError:
                ok[i] = False
                break
            if (-(-layers // k)) % chunks:
                ok[i] = False
                break
    return tuple(ok.tolist())


def activation_bytes(micro_batch_size: int, seq_len: int, hidden: int) -> float:
    """Bytes of one activation (or gradient) message at a stage boundary: ``b·s·h·2`` (bf16)."""
    return float(micro_batch_size * seq_len * hidden * BF16_BYTES)


def intra_message_bytes(message_bytes: float, context_parallel: int) -> float:
    """Bytes a replica's stage boundary sends per micro-batch on each of its ``c`` links inside a region: the
    activation split along the sequence, ``A / c`` (the whole ``A`` over the WAN, where one link carries it)."""
    return message_bytes / context_parallel


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
    virtual_stages: int = 1,
    context_parallel: int = 1,
    recompute: bool = True,
    optimizer_state: str = "fp32",
) -> float | np.ndarray:
    """Peak memory of the busiest device of one pipeline replica, in bytes, summed over the ``t·c`` GPUs of its
    stage (:func:`fits_memory` splits it evenly over them).

    Model state is ``(4 + o/(d·c))·P/S`` per GPU group: the bf16 weights and gradients, and the optimizer's ``o``
    bytes per parameter (12 with ``optimizer_state`` fp32, 4 with bf16: :data:`OPTIMIZER_STATE_BYTES_PER_PARAM`)
    sharded over the ``d·c`` ranks that hold the same weights (Megatron-LM's distributed optimizer);
    each of the ``c`` context-parallel ranks holds it, and Chimera holds two stages' worth. The busiest device keeps
    ``schedule.in_flight_stages`` micro-batches of a stage in flight. With ``recompute`` each holds one checkpointed
    input per layer, ``2·b·s·h`` bytes, plus one layer's working set while it is recomputed; without, every
    layer's activations, ``34·b·s·h`` bytes (Korthikanti et al. 2022, with FlashAttention and sequence
    parallelism); both are split over the stage's ``t·c`` GPUs.
    """
    counts = np.asarray(num_stages)
    in_flight = np.array([
        schedules.in_flight_stages(schedule, k, num_microbatches, virtual_stages) for k in counts.ravel().tolist()
    ]).reshape(counts.shape)
    if counts.ndim == 0:
        in_flight = float(in_flight)
    layers_per_stage = -(-layers // num_stages)  # ceil, for an int or an int array of stage counts
    tokens_hidden = micro_batch_size * seq_len * hidden
    if recompute:
        checkpoints = in_flight * layers_per_stage * CHECKPOINT_BYTES_PER_TOKEN_HIDDEN * tokens_hidden
        activations = checkpoints + WORKING_BYTES_PER_TOKEN_HIDDEN * tokens_hidden
    else:
        activations = in_flight * layers_per_stage * WORKING_BYTES_PER_TOKEN_HIDDEN * tokens_hidden
    sharing = data_parallel * context_parallel
    state_bytes_per_param = WEIGHT_AND_GRADIENT_BYTES_PER_PARAM + OPTIMIZER_STATE_BYTES_PER_PARAM[optimizer_state] / sharing
    state = state_bytes_per_param * params / num_stages
    copies = schedules.spec(schedule).weight_copies * context_parallel
    if copies != 1:
        state = state * copies
    return state + activations


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
    virtual_stages: int = 1,
    context_parallel: int = 1,
    recompute: bool = True,
    accepted: tuple[str, ...] = (),
    optimizer_state: str = "fp32",
) -> int | None:
    """The smallest stage count (at most one stage per layer) whose stages fit and that ``schedule`` and every
    schedule of ``accepted`` can run (:func:`runnable_stages`); ``None`` if none does."""
    stage_counts = np.arange(1, layers + 1)
    need = stage_memory_bytes(
        params, layers, hidden, stage_counts, micro_batch_size, seq_len, num_microbatches, schedule, data_parallel,
        virtual_stages, context_parallel, recompute, optimizer_state,
    )
    ok = fits_memory(need, memory_gb, gpus_per_stage * context_parallel)
    ok &= runnable_stages((schedule, *accepted), layers, num_microbatches, virtual_stages, stage_counts)
    fitting = np.flatnonzero(ok)
    return int(stage_counts[fitting[0]]) if fitting.size else None




class _PathTables(NamedTuple):
    """Index bookkeeping of the 1F1B path family for one ``(S, n)``. It holds no times, so it is memoised.

    One entry per candidate path (see the module docstring for the shapes). Loop paths (A): ``tail_copies``
    tail loops of width ``tail_width`` (from stage S − width), the other ``tail_rest`` advances filled by tail
    loops or single steps. Segment paths (B): ``pre`` advances, ``copies`` of segment ``[first, last]``, then
    ``cool_steps`` cool-down steps or one tail loop of width ``post_width``. Turn paths (C): per turn stage d, and
    per pair (h, d) with cycles over ``[h, d]``; ``*_reach`` are the deepest stages whose ops can supply a run of
    steps. Indices into the per-layout arrays of :func:`fixed_paths` are stored ready to use.
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
    """:func:`path_tables` as compiled code takes them (:func:`tab_part` reads a field): ``(ints, floats)``,
    read-only. ``ints`` starts with each field's start and length, in ``tables.PATH_TABLE`` order (the
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



# How a pipeline's model evaluates (a layout's ``LI_KIND``).
MODEL_GPIPE, MODEL_UNIFORM, MODEL_ROUND_TRIP, MODEL_PATHS = range(4)
MODEL_EXECUTOR = 4  # a layout timed by the schedule executor, in Python (layout_table.LayoutTable.time_requested)


@jit
def tab_part(tab_i: np.ndarray, values: np.ndarray, field: int) -> np.ndarray:
    """Field ``field`` (``TAB_*``) of packed path tables: a view of ``values``, which is ``tab_i`` for an int field
    and ``tab_f`` for a float one."""
    start = tab_i[2 * field]
    return values[start:start + tab_i[2 * field + 1]]


@jit
def uniform_total_s(f: float, b: float, s: float, hop_transfer_s: float, hop_latency_s: float, m: int, gpipe: bool,
                    min_cadence_s: float) -> float:
    """Iteration time of ``s`` identical stages (forward ``f``, backward ``b``) and hops (transfer
    ``hop_transfer_s``, latency ``hop_latency_s``) under GPipe or 1F1B at a cadence floor: the closed form of
    :func:`uniform_iteration_time_s`."""
    several = 1.0 if s > 1 else 0.0
    x = max(hop_transfer_s * several, min_cadence_s)
    y = (hop_transfer_s + hop_latency_s) * several
    n = m - 1
    t = f + b
    if gpipe:
        extra = n * (max(f, x) + max(b, x))
    else:
        step = max(t, x)  # one advance by the bottleneck stage or link
        loops = n * (t + 2.0 * y) - 2.0 * y * np.ceil(n / s)  # fewest tail loops, widest first
        full = np.floor(n / s)
        mixed = full * (s * t + 2.0 * (s - 1.0) * y) + (n - full * s) * step
        extra = max(max(loops, mixed), n * step)
    return s * t + 2.0 * (s - 1.0) * y + extra


@jit
def uniform_totals(f: np.ndarray, s: np.ndarray, hop_transfer_s: float, hop_latency_s: float, m: int, gpipe: bool,
                   min_cadence_s: float, backward_ratio: float, out: np.ndarray) -> None:
    """:func:`uniform_total_s` of each pair ``(f[i], s[i])``, backward ``backward_ratio·f[i]``, into ``out[i]``."""
    for i in range(out.shape[0]):
        out[i] = uniform_total_s(f[i], backward_ratio * f[i], s[i], hop_transfer_s, hop_latency_s, m, gpipe,
                                 min_cadence_s)


@jit
def model_scalars(forward, backward, transfer, hop_latency, m, gpipe, row):
    """Which evaluation a pipeline's model takes (its kind, ``MODEL_*``, returned) and its scalars, written into a
    layout table's ``row`` (LF_BASE … LF_UNI_LAT; see ``tables.LAYOUT_FLOATS``)."""
    num_stages = forward.shape[0]
    hops = num_stages - 1
    stage_s = forward + backward
    row[LF_BASE] = pairwise_sum(stage_s, num_stages) + 2.0 * (
        pairwise_sum(transfer, hops) + pairwise_sum(hop_latency, hops)
    )
    max_x = row[LF_MAX_X] = transfer.max() if hops else 0.0
    if gpipe:
        row[LF_MAX_F], row[LF_MAX_B] = forward.max(), backward.max()
        return MODEL_GPIPE
    if m <= 1:
        return MODEL_ROUND_TRIP
    f, b = forward[0], backward[0]
    lat = hop_latency[0] if hops else 0.0
    for i in range(num_stages):
        if forward[i] != f or backward[i] != b:
            return MODEL_PATHS
    for i in range(hops):
        if transfer[i] != max_x or hop_latency[i] != lat:
            return MODEL_PATHS
    row[LF_UNI_F], row[LF_UNI_B], row[LF_UNI_S], row[LF_UNI_X], row[LF_UNI_LAT] = f, b, float(num_stages), max_x, lat
    return MODEL_UNIFORM


@jit
def fixed_paths(forward_s, backward_s, hop_transfer_s, hop_latency_s, n, run_reach, held, turn_stage, turn_reach,
                turn_hop_reach, turn_held, turn_cycles, turn_segment, turn_steps, tail_copies, tail_width, full_loops,
                part_loop, copies, segment, pre_loop, post_width, cool_steps, first_reach):
    """The parts of a layout's 1F1B path family that do not depend on the time of one step, for ``n = M − 1 ≥ 1``
    advances (``reference.fixed_paths`` with numpy arrays), from the path tables of :func:`path_tables`
    (passed as their arrays, by field name): ``(last_stage_s, other_s, tail_s, loops_only_s, segments_s,
    pre_loop_s, post_s)``, operation for operation."""
    num_stages = forward_s.shape[0]
    stage_s = forward_s + backward_s
    before = np.zeros(num_stages)
    for q in range(1, num_stages):
        before[q] = before[q - 1] + (stage_s[q - 1] + 2.0 * (hop_transfer_s[q - 1] + hop_latency_s[q - 1]))
    through = before + stage_s
    segment_s = np.empty(num_stages * num_stages)
    for i in range(num_stages):
        for j in range(num_stages):
            segment_s[i * num_stages + j] = through[j] - before[i]
    loop_s = np.empty(num_stages + 2)
    loop_s[0], loop_s[-1] = 0.0, -np.inf
    for k in range(num_stages):
        loop_s[1 + k] = through[num_stages - 1] - before[num_stages - 1 - k]
    slowest_f = np.zeros(num_stages + 1)
    slowest_b = np.zeros(num_stages + 1)
    slowest_x = np.zeros(num_stages)
    for q in range(num_stages):
        slowest_f[q + 1] = forward_s[q] if q == 0 else max(slowest_f[q], forward_s[q])
        slowest_b[q + 1] = backward_s[q] if q == 0 else max(slowest_b[q], backward_s[q])
    for q in range(num_stages - 1):
        slowest_x[q + 1] = hop_transfer_s[q] if q == 0 else max(slowest_x[q], hop_transfer_s[q])
    last = through[num_stages - 1]
    other = -np.inf
    for d in range(num_stages):
        any_f = max(slowest_f[d + 1], slowest_x[d])
        any_b = max(slowest_b[d + 1], slowest_x[d])
        run_f = max(slowest_f[run_reach[d]], slowest_x[d])
        run_b = max(slowest_b[run_reach[d]], slowest_x[d])
        bursts = max(n * run_f + held[d] * any_b, held[d] * any_f + n * run_b)
        other = max(other, through[d] + bursts)
    other -= last
    if turn_stage.shape[0]:
        cycled_max = -np.inf
        for c in range(turn_stage.shape[0]):
            d = turn_stage[c]
            back_s = max(slowest_b[turn_reach[c]], slowest_x[turn_hop_reach[c]])
            down_s = turn_held[c] * max(slowest_f[d + 1], slowest_x[d])
            cycled = through[d] + down_s + turn_cycles[c] * segment_s[turn_segment[c]]
            cycled_max = max(cycled_max, cycled + turn_steps[c] * back_s)
        other = max(other, cycled_max - last)
    chain = -np.inf
    for q in range(num_stages):
        chain = max(chain, before[q] + (n + 1) * stage_s[q])
    other = max(other, chain - last)
    tail_s = np.empty(tail_copies.shape[0])
    for a in range(tail_s.shape[0]):
        tail_s[a] = tail_copies[a] * loop_s[tail_width[a]]
    loops_only_s = np.empty(full_loops.shape[0])
    for r in range(loops_only_s.shape[0]):
        loops_only_s[r] = full_loops[r] * loop_s[num_stages] + loop_s[part_loop[r]]
    num_segments = copies.shape[0]
    segments_s = np.empty(num_segments)
    pre_loop_s = np.empty(num_segments)
    post_s = np.empty(num_segments)
    for b in range(num_segments):
        segments_s[b] = copies[b] * segment_s[segment[b]]
        pre_loop_s[b] = loop_s[pre_loop[b]]
        post_s[b] = loop_s[post_width[b]] + cool_steps[b] * slowest_b[first_reach[b]]
    return stage_s[num_stages - 1], other, tail_s, loops_only_s, segments_s, pre_loop_s, post_s


@jit
def packed_fixed_paths(forward, backward, transfer, hop_latency, m, tab_i, tab_f):
    """:func:`fixed_paths` for ``n = m − 1`` advances, from the packed path tables ``tab_i``, ``tab_f``."""
    return fixed_paths(
        forward, backward, transfer, hop_latency, m - 1, tab_part(tab_i, tab_i, TAB_RUN_REACH),
        tab_part(tab_i, tab_f, TAB_HELD), tab_part(tab_i, tab_i, TAB_TURN_STAGE), tab_part(tab_i, tab_i, TAB_TURN_REACH),
        tab_part(tab_i, tab_i, TAB_TURN_HOP_REACH), tab_part(tab_i, tab_f, TAB_TURN_HELD),
        tab_part(tab_i, tab_f, TAB_TURN_CYCLES), tab_part(tab_i, tab_i, TAB_TURN_SEGMENT),
        tab_part(tab_i, tab_f, TAB_TURN_STEPS), tab_part(tab_i, tab_f, TAB_TAIL_COPIES),
        tab_part(tab_i, tab_i, TAB_TAIL_WIDTH), tab_part(tab_i, tab_f, TAB_FULL_LOOPS),
        tab_part(tab_i, tab_i, TAB_PART_LOOP), tab_part(tab_i, tab_f, TAB_COPIES), tab_part(tab_i, tab_i, TAB_SEGMENT),
        tab_part(tab_i, tab_i, TAB_PRE_LOOP), tab_part(tab_i, tab_i, TAB_POST_WIDTH),
        tab_part(tab_i, tab_f, TAB_COOL_STEPS), tab_part(tab_i, tab_i, TAB_FIRST_REACH),
    )


@jit
def fold_paths(tail_s, tail_rest, loops_only_s, other_s, segments_s, pre, pre_loop_s, post_s):
    """``pipeline.ModelParts``' lines of a 1F1B path family (the arrays of ``pipeline._FixedPaths`` and its
    tables): ``(constant_s, tail_slope, tail_intercept, segment_slope, segment_start, segment_end)``.

    Rounding is monotone, so ``a + max(x, y) = max(a + x, a + y)`` and ``(a + max(x, y)) + c = max((a + x) + c,
    (a + y) + c)`` in floating point too: each member of ``pipeline._longest_s``'s family splits into a part
    without the step and a line in it. A line of one slope is dropped when another has an intercept (tails), or a
    start and an end (segments), at least as large: it is never above that one. A zero slope adds ``0·step = 0``.
    """
    constant = other_s
    best = np.full(loops_only_s.shape[0], -np.inf)  # the largest intercept per tail slope (steps after the loops)
    for a in range(tail_s.shape[0]):
        r = tail_rest[a]
        constant = max(constant, tail_s[a] + loops_only_s[r])
        if r == 0:
            constant = max(constant, tail_s[a])
        elif tail_s[a] > best[r]:
            best[r] = tail_s[a]
    num_tails = 0
    for r in range(best.shape[0]):
        if best[r] > -np.inf:
            num_tails += 1
    tail_slope = np.empty(num_tails)
    tail_intercept = np.empty(num_tails)
    i = 0
    for r in range(best.shape[0]):
        if best[r] > -np.inf:
            tail_slope[i] = r
            tail_intercept[i] = best[r]
            i += 1
    num = segments_s.shape[0]
    most_pre = 0  # the largest slope: the pre steps, a whole number of steps
    for b in range(num):
        constant = max(constant, segments_s[b] + pre_loop_s[b] + post_s[b])
        if pre[b] == 0.0:
            constant = max(constant, segments_s[b] + post_s[b])
        else:
            most_pre = max(most_pre, int(pre[b]))
    # Within each slope, lines in order of decreasing start (argsort's order among equal starts); one is kept when its
    # end passes every end of a larger start of its slope.
    keep = np.zeros(num, dtype=np.bool_)
    highest_end = np.full(most_pre + 1, -np.inf)  # per slope, the largest end so far
    by_start = np.argsort(-segments_s)
    for k in range(num):
        c = by_start[k]
        if pre[c] == 0.0:
            continue
        slope = int(pre[c])
        if post_s[c] > highest_end[slope]:
            keep[c] = True
            highest_end[slope] = post_s[c]
    kept = np.flatnonzero(keep)
    return constant, tail_slope, tail_intercept, pre[kept], segments_s[kept], post_s[kept]


@jit
def model_total_s(forward, backward, transfer, hop_latency, m, gpipe, tab_i, tab_f, min_cadence_s):
    """The analytic iteration time of a pipeline (per-stage forward and backward times, per-hop transfer times and
    latencies, ``m`` micro-batches, GPipe or 1F1B) at a cadence floor (:func:`iteration_time`): the longest of the
    1F1B path family evaluated directly (it is evaluated once). ``tab_i``, ``tab_f`` are
    :func:`packed_path_tables` ``(S, max(m − 1, 1))``."""
    layout_f = np.zeros((1, NUM_LAYOUT_FLOATS))
    layout_i = np.zeros((1, NUM_LAYOUT_INTS), dtype=np.int64)
    kind = model_scalars(forward, backward, transfer, hop_latency, m, gpipe, layout_f[0])
    if kind != MODEL_PATHS:
        layout_i[0, LI_KIND], layout_i[0, LI_M] = kind, m
        return iteration_total_s(layout_f, layout_i, np.zeros(0), 0, min_cadence_s)
    last_stage_s, other_s, tail_s, loops_only_s, segments_s, pre_loop_s, post_s = packed_fixed_paths(
        forward, backward, transfer, hop_latency, m, tab_i, tab_f
    )
    tail_rest, advances = tab_part(tab_i, tab_i, TAB_TAIL_REST), tab_part(tab_i, tab_f, TAB_ADVANCES)
    pre = tab_part(tab_i, tab_f, TAB_PRE)
    step_s = max(last_stage_s, max(layout_f[0, LF_MAX_X], min_cadence_s))
    longest = -np.inf
    for a in range(tail_s.shape[0]):
        r = tail_rest[a]
        longest = max(longest, tail_s[a] + max(loops_only_s[r], advances[r] * step_s))
    for b in range(segments_s.shape[0]):
        longest = max(longest, (segments_s[b] + max(pre[b] * step_s, pre_loop_s[b])) + post_s[b])
    return layout_f[0, LF_BASE] + max(longest, other_s)


@jit
def iteration_total_s(layout_f: np.ndarray, layout_i: np.ndarray, arrays: np.ndarray, lay: int, min_cadence_s: float) -> float:
    """:func:`model_total_s` of layout ``lay`` of a layout table at a cadence floor, from the parts stored in its
    rows (for MODEL_PATHS the longest of the folded path lines, :func:`fold_paths`)."""
    kind = layout_i[lay, LI_KIND]
    m = layout_i[lay, LI_M]
    max_x = max(layout_f[lay, LF_MAX_X], min_cadence_s)
    base = layout_f[lay, LF_BASE]
    if kind == MODEL_GPIPE:
        cadence = max(layout_f[lay, LF_MAX_F], max_x) + max(layout_f[lay, LF_MAX_B], max_x)
        return base + (m - 1) * cadence
    if kind == MODEL_UNIFORM:
        return uniform_total_s(
            layout_f[lay, LF_UNI_F], layout_f[lay, LF_UNI_B], layout_f[lay, LF_UNI_S], layout_f[lay, LF_UNI_X],
            layout_f[lay, LF_UNI_LAT], m, False, min_cadence_s,
        )
    if kind == MODEL_ROUND_TRIP:
        return base
    step = max(layout_f[lay, LF_LAST_STAGE], max_x)
    longest = layout_f[lay, LF_CONSTANT]
    at = layout_i[lay, LI_ARRAYS]
    num_tails = layout_i[lay, LI_TAILS]
    for a in range(at, at + num_tails):
        longest = max(longest, arrays[a + num_tails] + arrays[a] * step)
    at += 2 * num_tails
    num_segments = layout_i[lay, LI_SEGMENTS]
    for b in range(at, at + num_segments):
        longest = max(longest, (arrays[b + num_segments] + arrays[b] * step) + arrays[b + 2 * num_segments])
    return base + longest

@jit
def stage_arrays(forward_r, activation_bytes, wan_message_bytes, regions, stages, length, line_gbps, latency,
                 intra_gbps, intra_latency_s):
    """A placement's pipeline: per stage its forward time per micro-batch, per boundary its transfer time at line
    rate and its latency, and the positions of the WAN boundaries (each region's last stage).

    ``forward_r`` (R,) is the job's forward time of a stage on each region's GPUs; ``regions`` and ``stages`` (their
    first ``length`` entries) the placement, a path of regions holding consecutive stages; ``line_gbps`` and
    ``latency`` (R, R) the links. Inside a region every replica has its own link and sends ``activation_bytes``; across
    regions the replicas share the WAN link and send ``wan_message_bytes``.
    """
    num_stages = 0
    for i in range(length):
        num_stages += stages[i]
    forward = np.empty(num_stages)
    transfer = np.full(num_stages - 1, transfer_time_s(activation_bytes, intra_gbps))
    hop_latency = np.full(num_stages - 1, intra_latency_s)
    wan_pos = np.empty(length - 1, dtype=np.int64)
    q = 0
    for i in range(length):
        for _ in range(stages[i]):
            forward[q] = forward_r[regions[i]]
            q += 1
        if i + 1 < length:  # the region's last stage sends over the WAN
            a, b = regions[i], regions[i + 1]
            transfer[q - 1] = transfer_time_s(wan_message_bytes, line_gbps[a, b])
            hop_latency[q - 1] = latency[a, b]
            wan_pos[i] = q - 1
    return forward, transfer, hop_latency, wan_pos


@jit
def demand_gbps(forward, backward, wan_message_bytes, gpipe, messages):
    """The rate per WAN hop below which communication stalls a pipeline: ``messages`` messages ``d·A`` per
    micro-batch and compute cadence. Under 1F1B each boundary carries one message per ``max(f + b)``; under GPipe
    the forward phase sends one per ``max f``; a schedule with several chunks per device sends one per chunk
    boundary on the link (``physics.schedule.link_messages``)."""
    cadence = forward.max() if gpipe else (forward + backward).max()
    return rate_gbps(messages * wan_message_bytes, cadence)


def iteration_time(
    forward_s: np.ndarray,
    backward_s: np.ndarray,
    hop_transfer_s: np.ndarray,
    hop_latency_s: np.ndarray,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
    min_cadence_s: float = 0.0,
) -> IterationTime:
    """Analytic iteration time of one pipeline (see the module docstring for the derivation), with its split.

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
    forward, backward, transfer, latency = (
        np.ascontiguousarray(a, dtype=float) for a in (forward_s, backward_s, hop_transfer_s, hop_latency_s)
    )
    tab_i, tab_f = packed_path_tables(forward.shape[0], max(num_microbatches - 1, 1))
    gpipe = schedules.spec(schedule).forwards_first
    total = model_total_s(forward, backward, transfer, latency, num_microbatches, gpipe, tab_i, tab_f,
                          float(min_cadence_s))
    stage_s = forward + backward
    fill = 2.0 * float(transfer.sum() + latency.sum())
    busy = num_microbatches * float(stage_s.max())
    return IterationTime(total_s=total, compute_s=busy, comm_s=fill, bubble_s=max(total - busy - fill, 0.0))



def uniform_iteration_time_s(
    forward_s: np.ndarray | float,
    num_stages: np.ndarray | int,
    hop_transfer_s: float,
    hop_latency_s: float,
    num_microbatches: int,
    schedule: str = ONE_F_ONE_B,
    min_cadence_s: float = 0.0,
    backward_ratio: float = BACKWARD_TO_FORWARD,
) -> np.ndarray:
    """:func:`iteration_time` for identical stages and hops (backward ``backward_ratio·f``), vectorised over
    ``num_stages``.

    With ``t = f + b``, ``y = x + l``, ``n = M − 1`` and ``x̂ = max(x, min_cadence_s)``:
    ``T = S·t + 2(S−1)·y + E``. GPipe has ``E = n·(max(f, x̂) + max(b, x̂))``. 1F1B has the exact tail-loop
    knapsack (module docstring)
    ``E = max(n(t+2y) − 2y⌈n/S⌉, ⌊n/S⌋·(S·t + 2(S−1)·y) + (n mod S)·max(t, x̂), n·max(t, x̂))``.
    """
    f, s = np.broadcast_arrays(np.asarray(forward_s, dtype=float), np.asarray(num_stages, dtype=float))
    out = np.empty(f.shape)
    gpipe = schedules.spec(schedule).forwards_first
    uniform_totals(np.ascontiguousarray(f).ravel(), np.ascontiguousarray(s).ravel(), float(hop_transfer_s),
                   float(hop_latency_s), int(num_microbatches), gpipe, float(min_cadence_s),
                   float(backward_ratio), out.reshape(-1))
    return out


def recipe_uniform_s(forward_s: float, num_stages: int, hop_transfer_s: float, hop_latency_s: float,
                     num_microbatches: int, schedule: str = ONE_F_ONE_B, virtual_stages: int = 1,
                     ratio: float = BACKWARD_TO_FORWARD, input_gradient: float = 1.0) -> float:
    """Iteration time of ``S`` identical stages (forward ``f``, backward ``ratio·f``) and hops, the wrap of an
    interleaved schedule on the same link, under any schedule at line rate: the closed form for GPipe and 1F1B
    (:func:`uniform_iteration_time_s`), the schedule executor for the others."""
    if schedules.spec(schedule).closed_form:
        return float(uniform_iteration_time_s(forward_s, num_stages, hop_transfer_s, hop_latency_s, num_microbatches,
                                              schedule, backward_ratio=ratio))
    f = np.full(num_stages, float(forward_s))
    hops = max(num_stages - 1, 0)
    model = schedules.executor_model(f, ratio * f, np.full(hops, hop_transfer_s), np.full(hops, hop_latency_s),
                                     num_microbatches, schedule, schedules.own_virtual_stages(schedule, virtual_stages),
                                     input_gradient,
                                     wrap=(hop_transfer_s, hop_latency_s))
    return model.total_s()


def recipe_lower_bound_s(forward_s: float, num_stages: int, hop_transfer_s: float, hop_latency_s: float,
                         num_microbatches: int, schedule: str = ONE_F_ONE_B, ratio: float = BACKWARD_TO_FORWARD) -> float:
    """A lower bound on :func:`recipe_uniform_s`: the closed form itself for GPipe and 1F1B; for the executor's
    schedules, each device's own work, ``M·(f + b)`` (no schedule runs a device's ops faster than back to back)."""
    if schedules.spec(schedule).closed_form:
        return float(uniform_iteration_time_s(forward_s, num_stages, hop_transfer_s, hop_latency_s, num_microbatches,
                                              schedule, backward_ratio=ratio))
    return num_microbatches * (1.0 + ratio) * float(forward_s)


def max_link_messages(schedule: str, num_stages: int, num_microbatches: int, virtual_stages: int = 1) -> float:
    """The most messages one link between two devices carries per micro-batch under ``schedule`` (each way): 1
    under GPipe, 1F1B, ZB-H1 and Chimera, ``v`` under interleaved 1F1B and Hanayo, 2 under the V schedules."""
    if schedules.spec(schedule).closed_form or num_stages < 2:
        return 1.0
    v = schedules.own_virtual_stages(schedule, virtual_stages)
    return float(schedules.pipeline_link_messages(schedule, num_stages, num_microbatches, v).max())


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
    forward_one_stage_s: float,
    memory_gb: float,
    ref_bandwidth_gbps: float,
    ref_latency_s: float,
    gpus_per_stage: int = 1,
    schedule: str = ONE_F_ONE_B,
    max_stages: int | None = None,
    data_parallel: int = 1,
    intra_bandwidth_gbps: float = 0.0,
    intra_latency_s: float = 0.0,
    virtual_stages: int = 1,
    context_parallel: int = 1,
    recompute: bool = True,
    ratio: float = BACKWARD_TO_FORWARD,
    accepted: tuple[str, ...] = (),
    optimizer_state: str = "fp32",
) -> int | None:
    """K* = argmin_K T_iter(K) over memory-feasible, runnable K, on a reference placement (BACE-Pipe's sizing rule).

    The reference placement puts every stage on the given GPU type (``forward_one_stage_s``: the whole model's
    forward per micro-batch as one stage there, so a stage of K takes ``1/K`` of it) and every boundary on a
    reference link (``ref_bandwidth_gbps``, ``ref_latency_s``) that carries the ``d`` replicas' messages (``d·A``
    per micro-batch); with ``d·c > 1`` the gradient all-reduce at the intra-region link is added. GPipe is timed by
    its closed form, every other schedule by 1F1B's: the sizing's proxy (the executor would time each K by
    simulation). Ties go to the smaller K (fewer GPUs). Returns ``None`` when no K up to ``max_stages`` (default:
    one stage per layer) fits memory and runs ``schedule`` and the ``accepted`` ones (:func:`runnable_stages`).
    """
    k_min = min_feasible_stages(
        params, layers, hidden, micro_batch_size, seq_len, num_microbatches, memory_gb, gpus_per_stage, schedule,
        data_parallel, virtual_stages, context_parallel, recompute, accepted, optimizer_state,
    )
    k_max = layers if max_stages is None else min(layers, max_stages)
    if k_min is None or k_min > k_max:
        return None
    ks = np.arange(k_min, k_max + 1)
    f = forward_one_stage_s / ks
    x = transfer_time_s(data_parallel * activation_bytes(micro_batch_size, seq_len, hidden), ref_bandwidth_gbps)
    timed_as = GPIPE if schedules.spec(schedule).forwards_first else ONE_F_ONE_B
    t = uniform_iteration_time_s(f, ks, x, ref_latency_s, num_microbatches, timed_as, backward_ratio=ratio)
    ranks = data_parallel * context_parallel
    if ranks > 1:
        t = t + allreduce_time_s(params, ks, gpus_per_stage, ranks, intra_bandwidth_gbps, intra_latency_s)
    need = stage_memory_bytes(params, layers, hidden, ks, micro_batch_size, seq_len, num_microbatches, schedule,
                              data_parallel, virtual_stages, context_parallel, recompute, optimizer_state)
    allowed = fits_memory(need, memory_gb, gpus_per_stage * context_parallel)
    allowed &= runnable_stages((schedule, *accepted), layers, num_microbatches, virtual_stages, ks)
    t = np.where(allowed, t, np.inf)
    return int(ks[int(np.argmin(t))])


def iterations_for(
    tokens: float, epochs: float, micro_batch_size: int, seq_len: int, num_microbatches: int, data_parallel: int = 1
) -> int:
    """Iterations to see ``epochs × tokens`` tokens with ``b·s·M·d`` tokens per iteration (at least one)."""
    return max(1, math.ceil(tokens * epochs / (micro_batch_size * seq_len * num_microbatches * data_parallel)))
