"""Layer 2: the schedule executor, the authority on pipeline timing, and the schedules of the literature.

A pipeline runs on ``D`` devices (its stages, one per device) and its model is cut into chunks: one per device for
GPipe and 1F1B, ``v`` per device for the interleaved and wave schedules, two per device for the V schedules, and one
per device in each of two pipelines for Chimera. A micro-batch runs its chunks in order: ``F`` (forward) down the
chunks, then the backward back up, either ``B`` (the whole backward) or ``D`` (input gradient) followed later on the
same device by ``W`` (weight gradient), as zero-bubble schedules split it. A schedule says, per device, in what
order its ops run (:class:`Program`).

:func:`execute` runs a program as a discrete-event simulation (CrossPipe's performance model, Chen et al., ATC'25,
arXiv 2507.00217):

* an op starts when its device is free and its inputs are there: ``F(c, m)`` needs ``F(c−1, m)``'s activation,
  ``D``/``B(c, m)`` needs ``F(c, m)`` and ``D``/``B(c+1, m)``'s gradient (the last chunk's backward needs only its
  own forward: the loss), ``W(c, m)`` needs ``D(c, m)``;
* a message between chunks on two devices travels on the link between them, a serial resource: it is put on the
  link when its producer ends, or when the link has sent the messages asked for before it (first come, first
  served), holds it for its transfer time, and arrives one latency later. Chunks on one device pass their data
  without a message;
* each device's activation memory grows by a chunk's activation at each ``F``, and falls back at its backward
  (``D`` frees all but the part ``W`` still needs, :data:`W_MEMORY_FRACTION`).

Fixed programs run their order; a *greedy* program (``crosspipe-greedy``) chooses, each time a device is free, among
the ops that can start there: a backward first (it frees memory and unblocks the devices upstream), else a forward
if the activation budget allows it, else a weight gradient that fits in the wait. The greedy rule also generates
the fixed orders of the zero-bubble schedules, at unit op times under each one's placement and memory limit (the
zero-bubble authors' own schedule generator works the same way). Chimera's and Hanayo's orders merge 1F1B orders
(:func:`_merged`).

:func:`execute` returns the iteration time (the last op's end), each device's busy time, bubble and peak activation.
GPipe and 1F1B on identical stages have closed forms (``physics.pipeline``), which the tests prove equal to it.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from geopipe_env.base.caches import DiskStore, ProcessCache
from geopipe_env.base.compiled import jit_inline, jit_unchecked
from geopipe_env.base.tables import (
    EXECUTOR_INPUT, EXECUTOR_OUTPUT, XI_ACT_F, XI_ACT_W, XI_BUDGET, XI_CHUNK_D, XI_CHUNK_F, XI_CHUNK_W, XI_LINK_LAT,
    XI_LINK_OF, XI_LINK_WAN, XI_LINK_X, XO_BUSY, XO_END, XO_ORDER, XO_PEAK, XO_START,
)

# Op kinds.
F, B, D, W = 0, 1, 2, 3
# Event kinds of the simulation.
_DONE, _WAKE = 0, 1

GPIPE = "gpipe"
ONE_F_ONE_B = "1f1b"
INTERLEAVED = "interleaved-1f1b"
ZB_H1 = "zb-h1"
ZBV = "zbv"
CHIMERA = "chimera"
HANAYO = "hanayo"
CROSSPIPE_GREEDY = "crosspipe-greedy"

# Zero-bubble split of a transformer layer's backward (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024,
# arXiv 2401.10241, Table 1): the input gradient costs sbh(24h + 8s) FLOPs and the weight gradient sbh·24h, together
# twice the forward's sbh(24h + 4s); the activations a forward stores are M_B = 34sbh (with FlashAttention: no
# 5as²b term), of which the weight gradient still needs M_W = 32sbh after the input gradient.
W_MEMORY_FRACTION = 32.0 / 34.0


def input_gradient_fraction(hidden: int, seq_len: int) -> float:
    """The input gradient's share of a layer's backward time: ``(24h + 8s) / (48h + 8s)`` (Qi et al. 2024)."""
    return (24.0 * hidden + 8.0 * seq_len) / (48.0 * hidden + 8.0 * seq_len)


class ScheduleSpec(NamedTuple):
    """A schedule: how it places its chunks, orders its ops and is timed. The registry (:data:`SPECS`) is the one
    place where schedules are told apart; the rest of the package asks it (:func:`spec`) rather than compare names.

    Attributes:
        name: the schedule's name in scenario files.
        code: its stable number, which the observation reads (``code / SCHEDULE_CODE_SCALE``): a schedule added
            later takes the next code, so no existing schedule's observed value ever shifts.
        placement: ``line`` (chunk c on device c), ``loop`` (v chunks, c on device c mod D: Megatron's
            interleaving, whose last device sends back to its first), ``v`` (two chunks: down the devices, then
            back up), ``wave`` (v chunks zig-zagging down and up), ``bidirectional`` (two pipelines in opposite
            directions, Chimera).
        split: the backward is split into D and W.
        order: ``fixed`` (a published rule), ``merge`` (each pipeline's, or each chunk's, 1F1B order at unit op
            times, merged on each device by start time), ``unit`` (generated by the greedy rule at unit op times) or
            ``greedy`` (the greedy rule at the real op times, every time it is timed).
        weight_copies: model replicas each device holds (Chimera keeps two).
        closed_form: timed by ``physics.pipeline``'s closed form, exact on any stages (GPipe and 1F1B); the others
            by the executor (:class:`ExecutorModel`). Its memory model is :func:`in_flight_stages`, its messages per
            micro-batch on a link :func:`link_messages`.
        forwards_first: every forward before any backward (GPipe), which the closed form and the memory model read.
        source: where the schedule comes from.
    """

    name: str
    code: int
    placement: str
    split: bool
    order: str
    weight_copies: int
    closed_form: bool
    forwards_first: bool
    source: str

    @property
    def virtual_stages(self) -> bool:
        """It takes ``virtual_stages`` chunks per device (interleaved 1F1B, Hanayo)."""
        return self.placement in ("loop", "wave")

    @property
    def wraps(self) -> bool:
        """Its last device sends to its first (the interleaved schedule's wrap)."""
        return self.placement == "loop"


SPECS = {spec.name: spec for spec in (
    ScheduleSpec(GPIPE, 0, "line", False, "fixed", 1, True, True,
                 "Huang et al., GPipe, NeurIPS 2019 (arXiv 1811.06965)"),
    ScheduleSpec(ONE_F_ONE_B, 1, "line", False, "fixed", 1, True, False,
                 "Narayanan et al., PipeDream-Flush (1F1B), ICML 2021 (arXiv 2006.09503)"),
    ScheduleSpec(INTERLEAVED, 2, "loop", False, "fixed", 1, False, False,
                 "Narayanan et al., Megatron-LM PTD-P, SC'21 (arXiv 2104.04473), interleaved 1F1B"),
    ScheduleSpec(ZB_H1, 3, "line", True, "unit", 1, False, False,
                 "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024 (arXiv 2401.10241), ZB-H1"),
    ScheduleSpec(ZBV, 4, "v", True, "unit", 1, False, False,
                 "Qi et al., Pipeline Parallelism with Controllable Memory, NeurIPS 2024 (arXiv 2405.15362), ZB-V"),
    ScheduleSpec(CHIMERA, 5, "bidirectional", False, "merge", 2, False, False,
                 "Li and Hoefler, Chimera, SC'21 (arXiv 2107.06925)"),
    ScheduleSpec(HANAYO, 6, "wave", False, "merge", 1, False, False,
                 "Liu et al., Hanayo: Harnessing Wave-like Pipeline Parallelism, SC'23 (doi 10.1145/3581784.3607073)"),
    ScheduleSpec(CROSSPIPE_GREEDY, 7, "v", True, "greedy", 1, False, False,
                 "after Chen et al., CrossPipe, ATC'25 (arXiv 2507.00217), its greedy list scheduler"),
)}
SCHEDULES = tuple(sorted(SPECS, key=lambda name: SPECS[name].code))  # every schedule, by code
CLOSED_FORM_SCHEDULES = tuple(name for name in SCHEDULES if SPECS[name].closed_form)
MAX_SCHEDULES = len(SPECS)  # the schedules a job may accept: every one of them
# The observation's schedule feature is code / SCHEDULE_CODE_SCALE: the first eight schedules span [0, 1], and a
# schedule added later reads above 1 rather than moving the others.
SCHEDULE_CODE_SCALE = 7.0


def spec(name: str) -> ScheduleSpec:
    """The registry's entry for schedule ``name``; :class:`ShapeError` naming the key for an unknown one."""
    found = SPECS.get(name)
    if found is None:
        raise ShapeError(f"pipeline_schedule: got {name!r}; expected one of {', '.join(SCHEDULES)}")
    return found


class ShapeError(ValueError):
    """A pipeline shape that a schedule cannot run; the message says which key to change."""


def own_virtual_stages(name: str, virtual_stages: int) -> int:
    """``virtual_stages`` for a schedule that takes them (interleaved-1f1b, hanayo), else 1: a job accepting several
    schedules has one ``virtual_stages``, which only those use."""
    return virtual_stages if spec(name).virtual_stages else 1


def chunks_per_device(name: str, virtual_stages: int = 1) -> int:
    """How many chunks of the model each device holds under schedule ``name`` (per pipeline for Chimera)."""
    placement = SPECS[name].placement
    if placement in ("loop", "wave"):
        return virtual_stages
    return 2 if placement == "v" else 1


def check_shape(name: str, num_stages: int, num_microbatches: int, virtual_stages: int = 1) -> None:
    """Raise :class:`ShapeError` naming the key when schedule ``name`` cannot run ``S`` stages and ``M``
    micro-batches with ``virtual_stages`` chunks per device."""
    placement = spec(name).placement
    if placement in ("loop", "wave"):
        if virtual_stages < 2:
            raise ShapeError(f"virtual_stages: {name} needs at least 2 chunks per device, got {virtual_stages}")
        if placement == "wave" and virtual_stages % 2:
            raise ShapeError(f"virtual_stages: hanayo's waves go down and back up, so it needs an even count, got {virtual_stages}")
        if placement == "loop" and num_microbatches % num_stages:
            raise ShapeError(
                f"num_microbatches: interleaved-1f1b runs micro-batches in groups of the {num_stages} stages "
                f"(Megatron-LM), so M must be a multiple of {num_stages}, got {num_microbatches}"
            )
    elif virtual_stages != 1:
        raise ShapeError(f"virtual_stages: {name} takes no virtual stages (got {virtual_stages}); only "
                         "interleaved-1f1b and hanayo do")
    if placement == "bidirectional":
        if num_stages % 2:
            raise ShapeError(f"pipeline_stages: chimera pairs stages from both ends, so it needs an even count, got {num_stages}")
        if num_microbatches % 2:
            raise ShapeError(f"num_microbatches: chimera splits micro-batches between two pipelines, so it needs an "
                             f"even count, got {num_microbatches}")


def in_flight_stages(name: str, num_stages: int, num_microbatches: int, virtual_stages: int = 1) -> float:
    """The activations the busiest device holds at its peak under schedule ``name``, in micro-batches of one whole
    stage (a chunk holds ``1/v`` of one): the memory model of each schedule, which the tests hold to the peak the
    executor measures (:attr:`ExecutionResult.peak_activation`).

    * GPipe keeps every micro-batch: ``M``. 1F1B keeps ``min(S, M)`` on its first stage (Narayanan et al. 2021);
      the zero-bubble and greedy schedules run within that budget (ZB-H1 and ZB-V keep 1F1B's peak, Qi et al.;
      CrossPipe gives its dynamic schedules the budget of their static base).
    * Interleaved 1F1B: device 0 runs ``2(S − 1) + (v − 1)·S`` warm-up forwards of chunks of ``1/v`` stage and
      holds one more in its steady state (Megatron-LM's schedule).
    * Chimera, as built here (two 1F1B pipelines merged), holds ``S − i`` micro-batches of its down stage and
      ``i + 1`` of its up stage on device ``i``: ``min(S + 1, M)``.
    * Hanayo, 1F1B over the ``v·S`` chunks of its wave folded onto the devices: chunk ``c`` holds ``min(vS − c, M)``,
      summed over each device's chunks.
    """
    s, m, v = num_stages, num_microbatches, virtual_stages
    kind = SPECS[name].placement
    if SPECS[name].forwards_first:
        return float(m)
    if kind == "loop":
        return min((2.0 * (s - 1) + (v - 1) * s + 1.0) / v, float(m))
    if kind == "bidirectional":
        return float(min(s + 1, m))
    if kind == "wave":
        chunk_device = placement(name, s, v)
        held = [0.0] * s
        for c, dev in enumerate(chunk_device):
            held[dev] += min(v * s - c, m)
        return max(held) / v
    return float(min(s, m))


class Program(NamedTuple):
    """A schedule for ``D`` devices and ``M`` micro-batches: where its chunks sit and, per device, its op order.

    ``chunk_device[c]`` is chunk c's device; chunks of one pipeline are consecutive and ``chunk_next``/``chunk_prev``
    chain them (−1 at the ends); micro-batch m runs the pipeline ``m mod P``. ``ops`` is (N, 3): kind, chunk,
    micro-batch, device by device (``device_ops[d]:device_ops[d + 1]``); empty for a greedy program.
    """

    name: str
    num_devices: int
    num_microbatches: int
    num_pipelines: int
    split: bool
    greedy: bool
    chunk_device: np.ndarray  # (K,) int64
    chunk_next: np.ndarray  # (K,) int64
    chunk_prev: np.ndarray  # (K,) int64
    device_ops: np.ndarray  # (D + 1,) int64
    ops: np.ndarray  # (N, 3) int64
    packed: np.ndarray  # the whole program as one read-only int64 array (what the compiled executor takes)
    boundaries: tuple[tuple[int, int], ...]  # (a, b) per chunk boundary between two devices (device_boundaries)

    @property
    def num_chunks(self) -> int:
        return int(self.chunk_device.shape[0])


# Where the packed program's parts start: a header, then the arrays in this order.
_H_D, _H_K, _H_M, _H_P, _H_SPLIT, _H_GREEDY, _H_N = range(7)
_HEADER = 7


def _pack(num_devices, num_microbatches, num_pipelines, split, greedy, chunk_device, chunk_next, chunk_prev,
          device_ops, ops) -> np.ndarray:
    header = [num_devices, chunk_device.shape[0], num_microbatches, num_pipelines, int(split), int(greedy), ops.shape[0]]
    packed = np.concatenate([np.array(header), chunk_device, chunk_next, chunk_prev, device_ops, ops.reshape(-1)])
    packed = packed.astype(np.int64)
    packed.setflags(write=False)
    return packed


def _program(name, num_devices, num_microbatches, num_pipelines, split, greedy, chunk_device, ops_by_device) -> Program:
    chunk_device = np.asarray(chunk_device, dtype=np.int64)
    if num_devices >= 1 << 16 or chunk_device.shape[0] >= 1 << 16 or chunk_device.shape[0] * num_microbatches >= 1 << 27:
        # the event simulation packs an op's device and chunk in 16 bits each and its slot in 27
        raise ValueError(f"{name}: {num_devices} devices, {chunk_device.shape[0]} chunks and {num_microbatches} "
                         "micro-batches are beyond the schedule executor's range")
    per_pipe = chunk_device.shape[0] // num_pipelines
    chunk_next = np.full(chunk_device.shape[0], -1, dtype=np.int64)
    chunk_prev = np.full(chunk_device.shape[0], -1, dtype=np.int64)
    for p in range(num_pipelines):
        for c in range(p * per_pipe, (p + 1) * per_pipe):
            if c + 1 < (p + 1) * per_pipe:
                chunk_next[c] = c + 1
            if c > p * per_pipe:
                chunk_prev[c] = c - 1
    counts = [len(ops) for ops in ops_by_device]
    device_ops = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    ops = np.array([op for ops in ops_by_device for op in ops], dtype=np.int64).reshape(-1, 3)
    for array in (chunk_device, chunk_next, chunk_prev, device_ops, ops):
        array.setflags(write=False)
    packed = _pack(num_devices, num_microbatches, num_pipelines, split, greedy, chunk_device, chunk_next, chunk_prev,
                   device_ops, ops)
    boundaries = tuple((int(chunk_device[c]), int(chunk_device[nxt])) for c, nxt in enumerate(chunk_next.tolist())
                       if nxt >= 0 and chunk_device[c] != chunk_device[nxt])
    return Program(name, num_devices, num_microbatches, num_pipelines, split, greedy, chunk_device, chunk_next,
                   chunk_prev, device_ops, ops, packed, boundaries)


def placement(name: str, num_devices: int, virtual_stages: int = 1) -> list[int]:
    """Each chunk's device under schedule ``name``, chunks in pipeline order (Chimera: its down pipeline's, then its
    up pipeline's)."""
    kind, d = SPECS[name].placement, num_devices
    if kind == "line":
        return list(range(d))
    if kind == "loop":
        return [c % d for c in range(d * virtual_stages)]
    if kind == "bidirectional":
        return list(range(d)) + list(range(d - 1, -1, -1))
    chunks = 2 * d if kind == "v" else d * virtual_stages
    return [c % (2 * d) if c % (2 * d) < d else 2 * d - 1 - c % (2 * d) for c in range(chunks)]


def _merged(name: str, num_devices: int, num_microbatches: int, virtual_stages: int, chunk_device: list[int]) -> Program:
    """A program built from 1F1B: each pipeline of the schedule runs 1F1B as if each of its chunks had a device of its
    own (unit times: F = 1, B = 2 per stage, split over a device's chunks; no communication), and each device runs the
    ops of its chunks in the order they start there (a backward before a forward that starts with it). Chimera's two
    pipelines, each with half the micro-batches, merge this way (Li and Hoefler's construction of the bidirectional
    schedule); Hanayo's wave is 1F1B over its ``v·D`` chunks folded onto the devices."""
    d = num_devices
    pipelines = 2 if name == CHIMERA else 1
    chunks = len(chunk_device) // pipelines
    mbs = num_microbatches // pipelines
    per_device = chunks // d
    base = program(ONE_F_ONE_B, chunks, mbs)
    link_of, link_x, link_lat = links(chunks, np.zeros(chunks - 1), np.zeros(chunks - 1))
    f = np.full(chunks, 1.0 / per_device)
    run = execute(base, f, 2.0 * f, np.zeros(chunks), link_of, link_x, link_lat, f, f, np.zeros(chunks), record=True)
    by_device: list[list[tuple[float, int, int, int, int]]] = [[] for _ in range(d)]
    for (kind, c, j), at in run.starts.items():
        for p in range(pipelines):
            chunk = p * chunks + c
            by_device[chunk_device[chunk]].append((at, -chunk if kind == B else chunk, kind, chunk, j * pipelines + p))
    ops = [[(kind, chunk, mb) for *_, kind, chunk, mb in sorted(ops)] for ops in by_device]
    return _program(name, d, num_microbatches, pipelines, False, False, chunk_device, ops)


def _one_f_one_b(device: int, num_devices: int, num_microbatches: int) -> list[tuple[int, int, int]]:
    """1F1B (PipeDream-flush) on one chunk per device: ``min(D − d − 1, M)`` warm-up forwards, then F, B pairs,
    then the remaining backwards."""
    m = num_microbatches
    warmup = min(num_devices - device - 1, m)
    ops = [(F, device, j) for j in range(warmup)]
    for j in range(m - warmup):
        ops += [(F, device, warmup + j), (B, device, j)]
    return ops + [(B, device, j) for j in range(m - warmup, m)]


def _interleaved(device: int, num_devices: int, num_microbatches: int, virtual_stages: int) -> list[tuple[int, int, int]]:
    """Megatron-LM's interleaved 1F1B on device ``device``: its v chunks (``device + i·D``) take micro-batches in
    groups of D; ``(D − d − 1)·2 + (v − 1)·D`` warm-up forwards, then F, B pairs, then the remaining backwards."""
    d, m, v = num_devices, num_microbatches, virtual_stages
    total = m * v

    def forward(k: int) -> tuple[int, int, int]:
        chunk = (k // d) % v
        return F, chunk * d + device, (k // (d * v)) * d + k % d

    def backward(k: int) -> tuple[int, int, int]:
        chunk = v - 1 - (k // d) % v
        return B, chunk * d + device, (k // (d * v)) * d + k % d

    warmup = min((d - device - 1) * 2 + (v - 1) * d, total)
    ops = [forward(k) for k in range(warmup)]
    for k in range(total - warmup):
        ops += [forward(warmup + k), backward(k)]
    return ops + [backward(k) for k in range(total - warmup, total)]


@functools.lru_cache(maxsize=256)
def program(name: str, num_devices: int, num_microbatches: int, virtual_stages: int = 1) -> Program:
    """The program of schedule ``name`` for ``D`` devices and ``M`` micro-batches (memoised; read-only)."""
    check_shape(name, num_devices, num_microbatches, virtual_stages)
    spec = SPECS[name]
    d, m = num_devices, num_microbatches
    chunk_device = placement(name, d, virtual_stages)
    pipelines = 2 if spec.placement == "bidirectional" else 1
    if name == GPIPE:
        ops = [[(F, dev, j) for j in range(m)] + [(B, dev, j) for j in range(m)] for dev in range(d)]
        return _program(name, d, m, 1, False, False, chunk_device, ops)
    if name == ONE_F_ONE_B:
        return _program(name, d, m, 1, False, False, chunk_device, [_one_f_one_b(dev, d, m) for dev in range(d)])
    if name == INTERLEAVED:
        ops = [_interleaved(dev, d, m, virtual_stages) for dev in range(d)]
        return _program(name, d, m, 1, False, False, chunk_device, ops)
    if spec.order == "merge":
        return _merged(name, d, m, virtual_stages, chunk_device)
    greedy = _program(name, d, m, pipelines, spec.split, True, chunk_device, [[] for _ in range(d)])
    if spec.order == "greedy":
        return greedy
    # A fixed order generated at unit times: F = 1, B = 2 (D = W = 1), no communication, each device holding at most
    # 1F1B's peak activations (D stages' worth, its first stage's).
    chunks = len(chunk_device) // pipelines
    per_device = chunks // d
    unit = np.full(len(chunk_device), 1.0 / per_device)
    backward = unit * 2.0
    run = execute(greedy, unit, backward * 0.5 if spec.split else backward, backward * 0.5 if spec.split else unit * 0.0,
                  np.zeros(d * d, dtype=np.int64), np.zeros(1), np.zeros(1), unit, unit * W_MEMORY_FRACTION,
                  np.full(d, float(d)), record=True)
    return _program(name, d, m, pipelines, spec.split, False, chunk_device, run.order)


class ExecutionResult(NamedTuple):
    """An executed iteration: its time, and per device its busy time, end, idle time (bubble) and peak activations."""

    total_s: float
    busy_s: np.ndarray  # (D,)
    end_s: np.ndarray  # (D,) when each device ends its last op
    bubble_s: np.ndarray  # (D,) total − busy
    peak_activation: np.ndarray  # (D,) in the units of act_f
    order: list[list[tuple[int, int, int]]]  # per device, the ops as they started (with record=True)
    starts: dict[tuple[int, int, int], float]  # (kind, chunk, micro-batch) -> start time (with record=True)


def execute(prog: Program, chunk_f: np.ndarray, chunk_d: np.ndarray, chunk_w: np.ndarray, link_of: np.ndarray,
            link_x: np.ndarray, link_lat: np.ndarray, act_f: np.ndarray, act_w: np.ndarray, budget: np.ndarray,
            record: bool = False) -> ExecutionResult:
    """Run ``prog`` (see the module docstring).

    Args:
        prog: the program.
        chunk_f: (K,) per chunk the time of F.
        chunk_d: (K,) per chunk the time of D (of B when the program does not split it).
        chunk_w: (K,) per chunk the time of W (0 when the program does not split).
        link_of: (D·D,) the link that carries messages from device a to device b at ``a·D + b``.
        link_x: (L,) each link's transfer time per message.
        link_lat: (L,) each link's latency.
        act_f: (K,) the activation a chunk's F stores.
        act_w: (K,) the part of it its W still needs after D.
        budget: (D,) the activation each device may hold (greedy programs; ≤ 0: no limit).
        record: return the order in which each device ran its ops, and their start times.
    """
    d = prog.num_devices
    busy, end, peak = np.zeros(d), np.zeros(d), np.zeros(d)
    n = prog.num_chunks * prog.num_microbatches * (3 if prog.split else 2) // prog.num_pipelines
    order = np.full((n, 4), -1, dtype=np.int64) if record else np.zeros((0, 4), dtype=np.int64)
    start = np.zeros(order.shape[0])
    inputs = EXECUTOR_INPUT.pack(chunk_f=chunk_f, chunk_d=chunk_d, chunk_w=chunk_w, act_f=act_f, act_w=act_w,
                                 link_of=link_of, link_x=link_x, link_lat=link_lat,
                                 link_wan=np.zeros(link_x.shape[0], dtype=np.int64), budget=budget)
    out = EXECUTOR_OUTPUT.pack(busy=busy, end=end, peak=peak, order=order, start=start)
    total = run_program(prog.packed, inputs, link_x, out)
    by_device: list[list[tuple[int, int, int]]] = [[] for _ in range(d)]
    starts: dict[tuple[int, int, int], float] = {}
    for (dev, kind, chunk, mb), at in zip(order.tolist(), start.tolist()):
        if dev >= 0:
            by_device[dev].append((kind, chunk, mb))
            starts[(kind, chunk, mb)] = at
    if record and sum(len(ops) for ops in by_device) != n:
        raise RuntimeError(f"{prog.name}: the program stopped before every op ran (a cycle in its order)")
    return ExecutionResult(float(total), busy, end, total - busy, peak, by_device, starts)


@jit_unchecked
def run_program(prog, inputs, link_x, out):
    """The compiled simulation behind :func:`execute`: the packed program ``prog`` on the pipeline ``inputs``
    (a ``tables.EXECUTOR_INPUT`` record) with each link's message time ``link_x`` (the record's own, or one a
    bandwidth share puts a floor on); returns the iteration time and writes, per device, its busy time, end and
    peak activation into the ``out`` record (``tables.EXECUTOR_OUTPUT``), and (if its ``order`` has rows) each
    started op as ``(device, kind, chunk, micro-batch)`` and its start time.

    A program of fixed order whose every link carries the messages of one device only (:func:`_single_senders`)
    runs in one pass over its ops (:func:`_run_fixed`): each link then sends in its device's op order, which is the
    order the event simulation (:func:`_run_events`) would send in, so the two give the same times; the tests
    compare them. Greedy programs, and links two devices share, run the event simulation, whose event queue has a
    fixed capacity: a run that fills it is run again with four times as much."""
    chunk_f, chunk_d, chunk_w = inputs[XI_CHUNK_F], inputs[XI_CHUNK_D], inputs[XI_CHUNK_W]
    act_f, act_w, link_of, link_lat = inputs[XI_ACT_F], inputs[XI_ACT_W], inputs[XI_LINK_OF], inputs[XI_LINK_LAT]
    out_busy, out_end, out_peak, out_order, out_start = (out[XO_BUSY], out[XO_END], out[XO_PEAK], out[XO_ORDER],
                                                         out[XO_START])
    if prog[_H_GREEDY] == 0 and _single_senders(prog, link_of, link_x.shape[0]):
        return _run_fixed(prog, chunk_f, chunk_d, chunk_w, link_of, link_x, link_lat, act_f, act_w, out_busy,
                          out_end, out_peak, out_order, out_start)
    return _events_in_queue(prog, chunk_f, chunk_d, chunk_w, link_of, link_x, link_lat, act_f, act_w,
                            inputs[XI_BUDGET], out_busy, out_end, out_peak, out_order, out_start,
                            4 * (prog[_H_D] + prog[_H_K]) + 64)


@jit_unchecked
def _events_in_queue(prog, chunk_f, chunk_d, chunk_w, link_of, link_x, link_lat, act_f, act_w, budget, out_busy,
                     out_end, out_peak, out_order, out_start, capacity):
    """:func:`_run_events` with an event queue of ``capacity``, run again with four times as much until it fits."""
    while True:
        total = _run_events(prog, chunk_f, chunk_d, chunk_w, link_of, link_x, link_lat, act_f, act_w, budget, out_busy,
                            out_end, out_peak, out_order, out_start, capacity)
        if total >= 0.0:
            return total
        capacity *= 4
        out_busy[:] = 0.0
        out_end[:] = 0.0
        out_peak[:] = 0.0


@jit_unchecked
def _unpack(prog):
    """The packed program's arrays (:func:`_pack`): chunk_device, chunk_next, chunk_prev, device_ops, ops."""
    num_devices, num_chunks, num_ops = prog[_H_D], prog[_H_K], prog[_H_N]
    at = _HEADER
    chunk_device = prog[at:at + num_chunks]
    chunk_next = prog[at + num_chunks:at + 2 * num_chunks]
    chunk_prev = prog[at + 2 * num_chunks:at + 3 * num_chunks]
    at += 3 * num_chunks
    device_ops = prog[at:at + num_devices + 1]
    ops = prog[at + num_devices + 1:at + num_devices + 1 + 3 * num_ops]
    return chunk_device, chunk_next, chunk_prev, device_ops, ops


@jit_unchecked
def _slot_times(chunk_prev, m):
    """Per (chunk, micro-batch), as ``chunk · M + micro-batch``: when the activation arrives at its F (0 for the
    first chunks of a pipeline), the gradient at its backward, and when its F and its D (or B) ended; −1 while not
    known."""
    size = chunk_prev.shape[0] * m
    arrive_at = np.full(2 * size, -1.0)
    f_end = np.full(size, -1.0)
    d_end = np.full(size, -1.0)
    for c in range(chunk_prev.shape[0]):
        if chunk_prev[c] < 0:
            for j in range(m):
                arrive_at[c * m + j] = 0.0
    return arrive_at, f_end, d_end


@jit_unchecked
def _single_senders(prog, link_of, num_links):
    """Whether every link the program sends on is sent on by one device only: over each boundary between consecutive
    chunks on two devices, the activation's link (down) and the gradient's (up). Device pairs the program sends
    nothing between do not count (their ``link_of`` entries are unused)."""
    num_devices = prog[_H_D]
    chunk_device, chunk_next, _, _, _ = _unpack(prog)
    sender = np.full(num_links, -1, dtype=np.int64)
    for c in range(chunk_device.shape[0]):
        nxt = chunk_next[c]
        if nxt < 0 or chunk_device[c] == chunk_device[nxt]:
            continue
        a, b = chunk_device[c], chunk_device[nxt]
        for src, dst in ((a, b), (b, a)):
            link = link_of[src * num_devices + dst]
            if sender[link] >= 0 and sender[link] != src:
                return False
            sender[link] = src
    return True


@jit_unchecked
def _run_fixed(prog, chunk_f, chunk_d, chunk_w, link_of, link_x, link_lat, act_f, act_w, out_busy, out_end, out_peak,
               out_order, out_start):
    """:func:`run_program` for a fixed order on links of single senders: each device runs its ops in order, an op
    starting when the device is free and its inputs are there; the devices are advanced in turn, each as far as its
    inputs allow, until every op has run (a cycle in the order leaves ops unrun and is reported by
    :func:`execute`)."""
    num_devices, num_chunks, m = prog[_H_D], prog[_H_K], prog[_H_M]
    chunk_device, chunk_next, chunk_prev, device_ops, ops = _unpack(prog)
    arrive_at, f_end, d_end = _slot_times(chunk_prev, m)
    size = num_chunks * m
    link_free = np.zeros(link_x.shape[0])
    memory = np.zeros(num_devices)
    free_at = np.zeros(num_devices)
    next_op = device_ops[:num_devices].copy()
    recorded = 0
    progress = True
    while progress:
        progress = False
        for dev in range(num_devices):
            while next_op[dev] < device_ops[dev + 1]:
                kind, c, slot, ready = _next_fixed(dev, m, next_op, device_ops, ops, arrive_at, f_end, d_end)
                if ready < 0.0:
                    break
                k = next_op[dev]
                j = slot - c * m
                t = max(free_at[dev], ready)
                duration = chunk_f[c] if kind == F else chunk_w[c] if kind == W else chunk_d[c]
                if kind == F:
                    memory[dev] += act_f[c]
                    if memory[dev] > out_peak[dev]:
                        out_peak[dev] = memory[dev]
                if recorded < out_order.shape[0]:
                    out_order[recorded, 0], out_order[recorded, 1] = dev, kind
                    out_order[recorded, 2], out_order[recorded, 3] = c, j
                    out_start[recorded] = t
                    recorded += 1
                out_busy[dev] += duration
                end = t + duration
                free_at[dev] = end
                if kind == F:
                    f_end[slot] = end
                    nxt = chunk_next[c]
                    if nxt < 0:
                        arrive_at[size + slot] = end
                    else:
                        _deliver(end, dev, chunk_device[nxt], nxt * m + j, arrive_at, link_of, link_x, link_lat,
                                 link_free, num_devices)
                elif kind == B or kind == D:
                    d_end[slot] = end
                    memory[dev] -= act_f[c] if kind == B else act_f[c] - act_w[c]
                    prev = chunk_prev[c]
                    if prev >= 0:
                        _deliver(end, dev, chunk_device[prev], size + prev * m + j, arrive_at, link_of, link_x, link_lat,
                                 link_free, num_devices)
                else:
                    memory[dev] -= act_w[c]
                if end > out_end[dev]:
                    out_end[dev] = end
                next_op[dev] = k + 1
                progress = True
    total = 0.0
    for dev in range(num_devices):
        total = max(total, out_end[dev])
    return total


@jit_inline
def _deliver(t, src, dst, slot, arrivals, link_of, link_x, link_lat, link_free, num_devices):
    """A message from device ``src`` to ``dst`` whose producer ended at ``t``: its arrival into ``arrivals[slot]``
    (at once between chunks of one device), which it returns."""
    if src == dst:
        arrivals[slot] = t
        return t
    link = link_of[src * num_devices + dst]
    send = max(t, link_free[link])
    link_free[link] = send + link_x[link]
    arrivals[slot] = send + link_x[link] + link_lat[link]
    return arrivals[slot]


@jit_unchecked
def _run_events(prog, chunk_f, chunk_d, chunk_w, link_of, link_x, link_lat, act_f, act_w, budget, out_busy, out_end,
                out_peak, out_order, out_start, capacity):
    """:func:`run_program` as an event simulation (module docstring): any program. Events are processed in order of
    time, and those at one time in the order they were made; returns −1 if more than ``capacity`` wait at once."""
    num_devices, num_chunks, m = prog[_H_D], prog[_H_K], prog[_H_M]
    pipes, split, greedy = prog[_H_P], prog[_H_SPLIT], prog[_H_GREEDY]
    chunk_device, chunk_next, chunk_prev, device_ops, ops = _unpack(prog)
    arrive_at, f_end, d_end = _slot_times(chunk_prev, m)
    size = num_chunks * m
    # The greedy rule's two limits on forwards. On one chunk per device (ZB-H1), at most ``window[c]`` micro-batches
    # sit between their F and their backward, 1F1B's S − i, while weight gradients may wait within the budget. Where
    # micro-batches come back to a device (V, wave and two-way placements), a micro-batch's first F on a device needs
    # room within the budget for all its chunks there (``reserve``), and its later chunks there always go in, so new
    # micro-batches never fill a device that returning ones must reach. Chimera's two pipelines share the budget half
    # and half.
    per_device = (num_chunks // pipes) // num_devices
    window = np.full(num_chunks, m, dtype=np.int64)
    reserve = np.zeros(num_chunks)
    for c in range(num_chunks):
        left, nxt = 1, chunk_next[c]
        while nxt >= 0:
            left += 1
            if chunk_device[nxt] == chunk_device[c]:
                reserve[c] += act_f[nxt]
            nxt = chunk_next[nxt]
        prev = chunk_prev[c]
        while prev >= 0 and chunk_device[prev] != chunk_device[c]:
            prev = chunk_prev[prev]
        if prev >= 0:
            reserve[c] = 0.0  # a later chunk of a micro-batch already on this device
        else:
            reserve[c] += act_f[c]
        if per_device == 1 and pipes == 1:
            window[c] = left
    open_f = np.zeros(num_chunks, dtype=np.int64)
    # Per device: how many chunks it holds, then the chunks, the last first (the order the greedy rule reads them in).
    own_chunks = np.zeros((num_devices, num_chunks + 1), dtype=np.int64)
    for c in range(num_chunks - 1, -1, -1):
        dev = chunk_device[c]
        own_chunks[dev, 0] += 1
        own_chunks[dev, own_chunks[dev, 0]] = c
    share = 1.0 / pipes
    link_free = np.zeros(link_x.shape[0])
    memory = np.zeros(num_devices)
    pipe_memory = np.zeros(pipes * num_devices)  # per pipeline and device: what the greedy rule's budget counts
    running = np.zeros(num_devices, dtype=np.bool_)
    busy_until = np.full(num_devices, -1.0)  # when each device's running op ends (−1: idle)
    next_op = device_ops[:num_devices].copy()
    next_f = np.zeros(num_chunks, dtype=np.int64)  # greedy: the next micro-batch (by rank in its pipeline) per kind
    next_d = np.zeros(num_chunks, dtype=np.int64)
    next_w = np.zeros(num_chunks, dtype=np.int64)
    per_pipe = m // pipes
    recorded = 0
    pipe_at = np.empty(num_chunks, dtype=np.int64)  # where a chunk's pipeline's entries of pipe_memory start
    for c in range(num_chunks):
        pipe_at[c] = (c // (num_chunks // pipes)) * num_devices
    # The event queue: a binary heap of (time, sequence number, payload) in three arrays of ``capacity`` entries; a
    # run that would need more returns −1 and is run again with more (run_program). The payload packs the event's
    # device (16 bits), kind (1), op kind (3), chunk (16) and slot.
    if capacity < num_devices + 2:
        return -1.0
    ht = np.empty(capacity)
    hs = np.empty(capacity, dtype=np.int64)
    hp = np.empty(capacity, dtype=np.int64)
    n_ev = 0
    seq = 0
    for dev in range(num_devices):
        seq += 1
        n_ev = _hpush(ht, hs, hp, n_ev, 0.0, seq, (_WAKE << 16) | dev)
    wake_at = np.full(num_devices, -1.0)
    while n_ev:
        if n_ev + 2 > capacity:
            return -1.0  # an iteration pushes at most two events
        t = ht[0]
        payload = hp[0]
        n_ev = _hpop(ht, hs, hp, n_ev)
        dev = payload & 0xFFFF
        if (payload >> 16) & 1 == _DONE:
            kind = (payload >> 17) & 7
            c = (payload >> 20) & 0xFFFF
            slot = payload >> 36
            j = slot - c * m
            running[dev] = False
            busy_until[dev] = -1.0
            to = -1  # the chunk a message goes to, and where its arrival is written
            if kind == F:
                f_end[slot] = t
                open_f[c] += 1
                nxt = chunk_next[c]
                if nxt < 0:
                    arrive_at[size + slot] = t  # the loss: the backward may start at once
                else:
                    to, at = nxt, nxt * m + j
            elif kind == B or kind == D:
                d_end[slot] = t
                open_f[c] -= 1
                memory[dev] -= act_f[c] if kind == B else act_f[c] - act_w[c]
                pipe_memory[pipe_at[c] + dev] -= act_f[c] if kind == B else act_f[c] - act_w[c]
                prev = chunk_prev[c]
                if prev >= 0:
                    to, at = prev, size + prev * m + j
            else:
                memory[dev] -= act_w[c]
                pipe_memory[pipe_at[c] + dev] -= act_w[c]
            if to >= 0:
                # The message (module docstring), and a wake-up for its device when it arrives, unless that device
                # will still be at work then (it chooses again when its op ends).
                dst = chunk_device[to]
                arrive = _deliver(t, dev, dst, at, arrive_at, link_of, link_x, link_lat, link_free, num_devices)
                if dst != dev and arrive >= busy_until[dst]:
                    seq += 1
                    n_ev = _hpush(ht, hs, hp, n_ev, arrive, seq, (_WAKE << 16) | dst)
            if t > out_end[dev]:
                out_end[dev] = t
        elif running[dev]:
            continue  # a wake-up for a device at work: it chooses again when its op ends
        # The device is free at t: start its next op if it can, or wait for the earliest one it knows of.
        if greedy:
            kind, c, slot, ready = _choose(dev, t, num_chunks, m, pipes, per_pipe, split, own_chunks, arrive_at,
                                           f_end, d_end, next_f, next_d, next_w, pipe_memory, pipe_at, reserve,
                                           share, budget, chunk_w, open_f, window)
        else:
            kind, c, slot, ready = _next_fixed(dev, m, next_op, device_ops, ops, arrive_at, f_end, d_end)
        if kind < 0 or ready > t:
            if ready > t and ready != wake_at[dev]:
                wake_at[dev] = ready
                seq += 1
                n_ev = _hpush(ht, hs, hp, n_ev, ready, seq, (_WAKE << 16) | dev)
            continue
        j = slot - c * m
        duration = chunk_f[c] if kind == F else chunk_w[c] if kind == W else chunk_d[c]
        if kind == F:
            memory[dev] += act_f[c]
            pipe_memory[pipe_at[c] + dev] += reserve[c]
            if memory[dev] > out_peak[dev]:
                out_peak[dev] = memory[dev]
        if greedy:
            rank = j if pipes == 1 else j >> 1  # a program has one pipeline or two
            if kind == F:
                next_f[c] = rank + 1
            elif kind == W:
                next_w[c] = rank + 1
            else:
                next_d[c] = rank + 1
        else:
            next_op[dev] += 1
        if recorded < out_order.shape[0]:
            out_order[recorded, 0], out_order[recorded, 1] = dev, kind
            out_order[recorded, 2], out_order[recorded, 3] = c, j
            out_start[recorded] = t
            recorded += 1
        out_busy[dev] += duration
        running[dev] = True
        busy_until[dev] = t + duration
        seq += 1
        n_ev = _hpush(ht, hs, hp, n_ev, t + duration, seq, (slot << 36) | (c << 20) | (kind << 17) | (_DONE << 16) | dev)
    total = 0.0
    for dev in range(num_devices):
        total = max(total, out_end[dev])
    return total


@jit_inline
def _hpush(ht, hs, hp, n, t, s, p):
    """Put event ``(t, s, p)`` on the heap of ``n`` events in ``ht``, ``hs``, ``hp`` (earliest time, then lowest
    sequence number, first); returns its new size."""
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        pt = ht[parent]
        if pt < t or (pt == t and hs[parent] < s):
            break
        ht[i], hs[i], hp[i] = pt, hs[parent], hp[parent]
        i = parent
    ht[i], hs[i], hp[i] = t, s, p
    return n + 1


@jit_inline
def _hpop(ht, hs, hp, n):
    """Take the first event off the heap of ``n`` events (read it from index 0 before); returns the new size."""
    n -= 1
    if n == 0:
        return 0
    t, s, p = ht[n], hs[n], hp[n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        right = child + 1
        if right < n and (ht[right] < ht[child] or (ht[right] == ht[child] and hs[right] < hs[child])):
            child = right
        ct = ht[child]
        if t < ct or (t == ct and s < hs[child]):
            break
        ht[i], hs[i], hp[i] = ct, hs[child], hp[child]
        i = child
    ht[i], hs[i], hp[i] = t, s, p
    return n


@jit_inline
def _next_fixed(dev, m, next_op, device_ops, ops, arrive_at, f_end, d_end):
    """A fixed program's next op on ``dev`` and when its inputs are there: ``(kind, chunk, slot, ready)`` (slot
    ``chunk · M + micro-batch``), kind −1 and ready −1 while that is not known yet, all −1 when the device is done."""
    k = next_op[dev]
    if k >= device_ops[dev + 1]:
        return -1, -1, -1, -1.0
    kind, c, j = ops[3 * k], ops[3 * k + 1], ops[3 * k + 2]
    slot = c * m + j
    if kind == F:
        ready = arrive_at[slot]
    elif kind == W:
        ready = d_end[slot]
    else:
        ready = arrive_at[f_end.shape[0] + slot] if f_end[slot] >= 0.0 else -1.0
        if ready >= 0.0 and f_end[slot] > ready:
            ready = f_end[slot]
    return (kind if ready >= 0.0 else -1), c, slot, ready


@jit_inline
def _choose(dev, t, num_chunks, m, pipes, per_pipe, split, own_chunks, arrive_at, f_end, d_end, next_f, next_d,
            next_w, pipe_memory, pipe_at, reserve, share, budget, chunk_w, open_f, window):
    """The greedy rule's op on ``dev`` at ``t``: a backward (D or B) that can start, the chunk nearest the loss first;
    else a forward within its chunk's window and the activation budget, the oldest micro-batch first; else a W whose
    length fits before the next known backward or forward (any W when none is known, or when the budget blocks the
    forwards). ``(kind, chunk, slot, ready)`` as :func:`_next_fixed`, kind −1 and ready the soonest time one of its
    ops may start (−1 if none is known) when none can start now."""
    size = f_end.shape[0]
    soonest = -1.0
    best_d, best_f, best_w = -1, -1, -1
    best_d_c, best_f_c, best_w_c = -1, -1, -1
    best_f_rank, best_w_rank = per_pipe, per_pipe
    for i in range(own_chunks[dev, 0]):
        c = own_chunks[dev, i + 1]
        pipe = 0 if pipes == 1 else (0 if pipe_at[c] == 0 else 1)
        rank = next_d[c]
        if rank < per_pipe and rank < next_f[c]:
            slot = c * m + pipe + rank * pipes
            grad = arrive_at[size + slot]
            if f_end[slot] >= 0.0 and grad >= 0.0:
                ready = max(grad, f_end[slot])
                if ready <= t:
                    if best_d < 0:
                        best_d, best_d_c = slot, c
                elif soonest < 0.0 or ready < soonest:
                    soonest = ready
        rank = next_f[c]
        if rank < per_pipe:
            slot = c * m + pipe + rank * pipes
            room = reserve[c] == 0.0 or budget[dev] <= 0.0 or (
                pipe_memory[pipe_at[c] + dev] + reserve[c] <= share * budget[dev] * (1.0 + 1e-9))
            act = arrive_at[slot]
            if act >= 0.0 and room and open_f[c] < window[c]:
                if act <= t:
                    if rank < best_f_rank or (rank == best_f_rank and best_f >= 0 and c < best_f_c):
                        best_f, best_f_rank, best_f_c = slot, rank, c
                elif soonest < 0.0 or act < soonest:
                    soonest = act
        if split:
            rank = next_w[c]
            if rank < next_d[c]:
                slot = c * m + pipe + rank * pipes
                if d_end[slot] >= 0.0 and d_end[slot] <= t and rank < best_w_rank:
                    best_w, best_w_rank, best_w_c = slot, rank, c
    if best_d >= 0:
        return (D if split else B), best_d_c, best_d, t
    if best_f >= 0:
        return F, best_f_c, best_f, t
    if best_w >= 0 and (soonest < 0.0 or t + chunk_w[best_w_c] <= soonest):
        return W, best_w_c, best_w, t
    return -1, -1, -1, soonest


def links(num_devices: int, hop_transfer_s: np.ndarray, hop_latency_s: np.ndarray, wrap_transfer_s: float = 0.0,
          wrap_latency_s: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(link_of, link_x, link_lat)`` of a pipeline whose devices are its stages in order: each boundary between
    device i and i + 1 is two links (down, i → i+1, and up), with that hop's transfer time and latency; with more
    than two devices, devices D − 1 and 0 (the interleaved schedule's wrap) are two more, with ``wrap_*`` (with two,
    the wrap is their boundary's links).

    The arrays always hold ``2(D − 1) + 2`` links (the last two unused with two devices or fewer)."""
    d = num_devices
    hops = max(d - 1, 0)
    link_of = np.zeros(d * d, dtype=np.int64)
    for i in range(hops):
        link_of[i * d + i + 1], link_of[(i + 1) * d + i] = i, hops + i
    if d > 2:
        link_of[(d - 1) * d], link_of[d - 1] = 2 * hops, 2 * hops + 1
    link_x = np.concatenate((hop_transfer_s, hop_transfer_s, [wrap_transfer_s, wrap_transfer_s]))
    link_lat = np.concatenate((hop_latency_s, hop_latency_s, [wrap_latency_s, wrap_latency_s]))
    return link_of, link_x.astype(float), link_lat.astype(float)


def device_boundaries(prog: Program) -> list[tuple[int, int]]:
    """``(a, b)`` for each boundary between consecutive chunks on two devices, in pipeline order: per micro-batch
    of its pipeline it carries an activation from device a to b and a gradient back (Chimera's two pipelines each
    take half the micro-batches, so each of its boundaries carries ``1/num_pipelines`` message per micro-batch)."""
    return list(prog.boundaries)


@functools.lru_cache(maxsize=256)
def pipeline_link_messages(name: str, num_devices: int, num_microbatches: int, virtual_stages: int) -> np.ndarray:
    """:func:`link_messages` of a program on a pipeline's links (:func:`links`), per program (read-only)."""
    prog = program(name, num_devices, num_microbatches, virtual_stages)
    link_of, link_x, _ = links(num_devices, np.zeros(max(num_devices - 1, 0)), np.zeros(max(num_devices - 1, 0)))
    counts = link_messages(prog, link_of, link_x.shape[0])
    counts.setflags(write=False)
    return counts


def link_messages(prog: Program, link_of: np.ndarray, num_links: int) -> np.ndarray:
    """(L,) the messages each link carries per micro-batch, each way (:func:`device_boundaries`)."""
    d = prog.num_devices
    counts = np.zeros(num_links)
    share = 1.0 / prog.num_pipelines
    for a, b in device_boundaries(prog):
        counts[link_of[a * d + b]] += share
        counts[link_of[b * d + a]] += share
    return counts


@jit_unchecked
def timed_total_s(prog, inputs, min_cadence_s):
    """The iteration time of a program (:func:`run_program`) on the pipeline ``inputs`` (``tables.EXECUTOR_INPUT``)
    when every WAN link (``link_wan`` nonzero) sends a message in no less than ``min_cadence_s``: the floor a
    bandwidth share below the link's line rate puts on it (message bytes ÷ allocated rate)."""
    x = inputs[XI_LINK_X].copy()
    link_wan = inputs[XI_LINK_WAN]
    for i in range(x.shape[0]):
        if link_wan[i] != 0 and x[i] < min_cadence_s:
            x[i] = min_cadence_s
    d = inputs[XI_BUDGET].shape[0]
    # an EXECUTOR_OUTPUT record (busy, end, peak, order, start) that records no op
    out = (np.zeros(d), np.zeros(d), np.zeros(d), np.zeros((0, 4), dtype=np.int64), np.zeros(0))
    return run_program(prog, inputs, x, out)


# The schedule executor's iteration times the process keeps, oldest first out: every request (schedule
# choice, candidate table, launch, retiming) reads this one memo. A key holds the pipeline's arrays by value, about
# 2 KiB for a 16-stage pipeline, so the memo holds about 32 MiB.
TIMINGS_CACHE_SIZE = 16384
# Executor timings may also be kept on disk for every process of the machine running this code (caches.DiskStore,
# with GEOPIPE_TIMING_STORE set).
TIMINGS = ProcessCache("timings", TIMINGS_CACHE_SIZE, DiskStore("timings"))
BOUND_MARGIN = 1.0 - 1e-9  # ExecutorModel.lower_bound_s: below the exact bound by more than its rounding


class ExecutorModel(NamedTuple):
    """One pipeline under one schedule, ready to time at any cadence floor (:meth:`total_s`): its program, each
    chunk's op times and activations, and its links (and which of them cross regions)."""

    program: Program
    chunk_f: np.ndarray  # (K,)
    chunk_d: np.ndarray  # (K,)
    chunk_w: np.ndarray  # (K,)
    act_f: np.ndarray  # (K,) a chunk's activation, in micro-batches of one stage
    act_w: np.ndarray  # (K,) the part its W still needs after D
    link_of: np.ndarray  # (D·D,)
    link_x: np.ndarray  # (L,) message time at line rate
    link_lat: np.ndarray  # (L,)
    link_wan: np.ndarray  # (L,) int64, 1 for a link between regions
    budget: np.ndarray  # (D,) activation budget of the greedy rule, in micro-batches of one stage
    link_count: np.ndarray  # (L,) messages each link carries in one iteration (link_messages × M)
    min_wan_x: float  # the shortest message time of a WAN link at line rate (inf without one)

    def total_s(self, min_cadence_s: float = 0.0) -> float:
        """The iteration time at a cadence floor (:func:`timed_total_s`), memoised for the process (:data:`TIMINGS`)
        by the model's content: placements of one job shape on regions of one GPU type, in any world, time alike.
        A timing not in the memo is looked up in the machine's timing store before the executor runs (it is kept
        there after). A floor no WAN link's message time lies below changes no message time, so it is timed (and
        memoised) as 0."""
        floor = float(min_cadence_s) if min_cadence_s > self.min_wan_x else 0.0
        return TIMINGS.get_or((self.key(), floor), self._run, floor, persist=True)

    def _run(self, floor: float) -> float:
        """:func:`timed_total_s` of the model at a cadence floor."""
        return float(timed_total_s(self.program.packed, self.inputs(), floor))

    def inputs(self) -> tuple:
        """The model as the executor takes it: a ``tables.EXECUTOR_INPUT`` record."""
        return EXECUTOR_INPUT.pack(chunk_f=self.chunk_f, chunk_d=self.chunk_d, chunk_w=self.chunk_w, act_f=self.act_f,
                                   act_w=self.act_w, link_of=self.link_of, link_x=self.link_x, link_lat=self.link_lat,
                                   link_wan=self.link_wan, budget=self.budget)

    def lower_bound_s(self) -> float:
        """A lower bound on :meth:`total_s` at line rate that costs no simulation: no device runs its ops faster
        than back to back (each of its chunks runs ``F``, ``D`` and ``W`` once per micro-batch of its pipeline),
        and no link sends its messages faster than one after another, the last arriving one latency after it is
        sent. It is lowered by one part in 10⁹ (:data:`BOUND_MARGIN`): where it is tight, its sums round apart
        from the simulation's by a few units in the last place."""
        p = self.program
        per_chunk = (self.chunk_f + self.chunk_d + self.chunk_w) * (p.num_microbatches // p.num_pipelines)
        work = np.bincount(p.chunk_device, weights=per_chunk, minlength=p.num_devices).max()
        sent = self.link_count > 0.0
        links = (self.link_count[sent] * self.link_x[sent] + self.link_lat[sent]).max() if sent.any() else 0.0
        return float(max(work, links)) * BOUND_MARGIN

    def key(self) -> tuple:
        """What the model's timing depends on: its program's shape and its arrays' bytes."""
        p = self.program
        return (p.name, p.num_devices, p.num_microbatches, p.num_chunks, *(
            a.tobytes() for a in (self.chunk_f, self.chunk_d, self.chunk_w, self.link_x, self.link_lat, self.link_wan,
                                  self.budget)
        ))

    def execute(self, min_cadence_s: float = 0.0, record: bool = False) -> ExecutionResult:
        """The whole :class:`ExecutionResult` at a cadence floor."""
        x = np.where(self.link_wan != 0, np.maximum(self.link_x, min_cadence_s), self.link_x)
        return execute(self.program, self.chunk_f, self.chunk_d, self.chunk_w, self.link_of, x, self.link_lat,
                       self.act_f, self.act_w, self.budget, record=record)


def executor_model(forward_s: np.ndarray, backward_s: np.ndarray, hop_transfer_s: np.ndarray,
                   hop_latency_s: np.ndarray, num_microbatches: int, schedule: str = ONE_F_ONE_B,
                   virtual_stages: int = 1, input_gradient: float = 1.0, wan_hops: np.ndarray | None = None,
                   wrap: tuple[float, float] = (0.0, 0.0), wrap_wan: bool = False) -> ExecutorModel:
    """The :class:`ExecutorModel` of a pipeline given stage by stage (arguments as :func:`simulate_schedule`;
    ``wan_hops`` the boundaries that cross regions, ``wrap_wan`` whether the wrap does).

    Raises:
        ShapeError: a shape the schedule cannot run; ValueError: mismatched shapes or ``M < 1``.
    """
    forward, backward = (np.asarray(a, dtype=float).ravel() for a in (forward_s, backward_s))
    transfer, latency = (np.asarray(a, dtype=float).ravel() for a in (hop_transfer_s, hop_latency_s))
    num_stages = forward.shape[0]
    if num_stages < 1 or backward.shape[0] != num_stages or transfer.shape[0] != num_stages - 1 or latency.shape[0] != num_stages - 1:
        raise ValueError("need forward_s and backward_s of shape (S,), hop arrays of shape (S-1,), S >= 1")
    if num_microbatches < 1:
        raise ValueError(f"num_microbatches must be >= 1, got {num_microbatches}")
    prog = program(schedule, num_stages, int(num_microbatches), virtual_stages)
    f, d, w = chunk_times(prog, forward, backward, input_gradient)
    link_of, link_x, link_lat = links(num_stages, transfer, latency, *wrap)
    hops = max(num_stages - 1, 0)
    link_wan = np.zeros(link_x.shape[0], dtype=np.int64)
    if wan_hops is not None:
        for h in np.asarray(wan_hops, dtype=np.int64):
            link_wan[h] = link_wan[hops + h] = 1
    if wrap_wan:
        link_wan[2 * hops:] = 1
    act = np.ones(prog.num_chunks) / (prog.num_chunks // prog.num_pipelines // num_stages)
    budget = np.full(num_stages, in_flight_stages(ONE_F_ONE_B, num_stages, int(num_microbatches)))
    for array in (f, d, w, act, link_of, link_x, link_lat, link_wan, budget):
        array.setflags(write=False)
    act_w = act * W_MEMORY_FRACTION
    count = pipeline_link_messages(schedule, num_stages, int(num_microbatches), virtual_stages) * num_microbatches
    for array in (act_w, count):
        array.setflags(write=False)
    min_wan_x = float(link_x[link_wan != 0].min()) if link_wan.any() else float("inf")
    return ExecutorModel(prog, f, d, w, act, act_w, link_of, link_x, link_lat, link_wan, budget, count, min_wan_x)


def chunk_times(prog: Program, forward_s: np.ndarray, backward_s: np.ndarray, input_gradient: float = 1.0
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(chunk_f, chunk_d, chunk_w)`` from each device's (stage's) forward and backward times: a device's chunks of
    one pipeline share its layers equally; with the backward split, D takes ``input_gradient`` of it and W the rest
    (unsplit: the backward is all B)."""
    per_device = prog.num_chunks // prog.num_pipelines // prog.num_devices
    f = np.asarray(forward_s, dtype=float)[prog.chunk_device] / per_device
    b = np.asarray(backward_s, dtype=float)[prog.chunk_device] / per_device
    if not prog.split:
        return f, b, np.zeros_like(b)
    return f, b * input_gradient, b - b * input_gradient


def simulate_schedule(forward_s: np.ndarray, backward_s: np.ndarray, hop_transfer_s: np.ndarray,
                      hop_latency_s: np.ndarray, num_microbatches: int, schedule: str = ONE_F_ONE_B,
                      virtual_stages: int = 1, input_gradient: float = 1.0, wrap: tuple[float, float] = (0.0, 0.0),
                      record: bool = False) -> ExecutionResult:
    """One iteration of ``schedule`` on a pipeline given stage by stage (:func:`execute`).

    Args:
        forward_s: (S,) each stage's forward time per micro-batch.
        backward_s: (S,) each stage's backward time per micro-batch.
        hop_transfer_s: (S−1,) each boundary's message time on its link.
        hop_latency_s: (S−1,) each boundary's latency.
        num_microbatches: M.
        schedule: one of :data:`SCHEDULES`.
        virtual_stages: chunks per device (interleaved-1f1b, hanayo).
        input_gradient: the D share of a split backward (:func:`input_gradient_fraction`).
        wrap: the transfer time and latency between the last stage and the first (interleaved-1f1b).
        record: also return each device's op order and every op's start (for a Gantt chart).

    Raises:
        ShapeError: a shape the schedule cannot run; ValueError: mismatched shapes or ``M < 1``.
    """
    model = executor_model(forward_s, backward_s, hop_transfer_s, hop_latency_s, num_microbatches, schedule,
                           virtual_stages, input_gradient, wrap=wrap)
    return model.execute(record=record)
