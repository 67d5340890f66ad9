"""Layer 3 tests: pipeline timing and memory (``physics.pipeline``) against closed forms and the exact schedule.

The exact discrete-event execution of the schedule table (``physics.schedule``) is the reference for the analytic
iteration time. Grids of stage count S, micro-batch count M, transfer time x and latency l are expressed
relative to the forward time f, as in CrossPipe's sweeps (Chen et al., ATC'25, arXiv 2507.00217).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest

from geopipe_env.physics import pipeline
from geopipe_env.physics.pipeline import GPIPE, ONE_F_ONE_B, SCHEDULES
from geopipe_env.physics.schedule import F, ShapeError, program, simulate_schedule

EXACT_REL_TOL = 1e-9  # for quantities that must agree up to float rounding
# Analytic 1F1B vs the exact schedule: every analytic term is a path in the schedule's DAG, so it never exceeds
# the exact makespan; these bound how far it falls short. Measured max on the grids below: 1.80% (random stage
# times, S=2, M=8) and 1.06% (identical stages, random slow hops, S=8, M=32).
ONE_F_ONE_B_GRID_REL_TOL = 0.03
# Measured max 5.41% over the seeded geo placements below (S=16, M=32), 6.69% over 1000 such placements.
ONE_F_ONE_B_GEO_REL_TOL = 0.07
# The loop-bound formula this replaced erred by +18% on the uniform grid, −41% with one slow first hop, and
# −44%…+23% on geo placements.

FORWARD_S = 1.0
GRID_STAGES = (1, 2, 4, 8, 16)
GRID_MICROBATCHES = (1, 4, 8, 32)
GRID_TRANSFER_PER_F = (0.0, 0.25, 1.0, 2.0)
GRID_LATENCY_PER_F = (0.0, 0.5, 2.0, 8.0)
GRID = list(itertools.product(GRID_STAGES, GRID_MICROBATCHES, GRID_TRANSFER_PER_F, GRID_LATENCY_PER_F))

# Llama-3.1-70B-like job on an A6000-like GPU (numbers typed here, not read from the catalog).
PARAMS = 70.6e9
LAYERS = 80
HIDDEN = 8192
MICRO_BATCH = 1
SEQ_LEN = 2048
TFLOPS = 154.8
MEMORY_GB = 48.0
MFU = 0.4


def uniform_case(num_stages: int, x_per_f: float, l_per_f: float) -> tuple[np.ndarray, ...]:
    """Identical stages (b = 2f) and hops."""
    forward = np.full(num_stages, FORWARD_S)
    return (
        forward,
        pipeline.BACKWARD_TO_FORWARD * forward,
        np.full(num_stages - 1, x_per_f * FORWARD_S),
        np.full(num_stages - 1, l_per_f * FORWARD_S),
    )


def random_stage_cases(seed: int = 7) -> list[tuple[tuple[np.ndarray, ...], int]]:
    """The grid with each stage's forward time drawn from [0.5, 2]·f (b = 2f), hops uniform."""
    rng = np.random.default_rng(seed)
    cases = []
    for num_stages, m, x_per_f, l_per_f in GRID:
        forward = FORWARD_S * rng.uniform(0.5, 2.0, num_stages)
        hops = (np.full(num_stages - 1, x_per_f * FORWARD_S), np.full(num_stages - 1, l_per_f * FORWARD_S))
        cases.append(((forward, pipeline.BACKWARD_TO_FORWARD * forward, *hops), m))
    return cases


def random_hop_cases(seed: int = 11) -> list[tuple[tuple[np.ndarray, ...], int]]:
    """Identical stages; each hop is a fast intra-region link or, with probability 1/3, a slow WAN link."""
    rng = np.random.default_rng(seed)
    cases = []
    for num_stages, m, x_per_f, l_per_f in GRID:
        forward = np.full(num_stages, FORWARD_S)
        wan = rng.random(num_stages - 1) < 1.0 / 3.0
        transfer = np.where(wan, x_per_f * rng.uniform(0.5, 1.5, num_stages - 1), 0.01) * FORWARD_S
        latency = np.where(wan, l_per_f * rng.uniform(0.5, 1.5, num_stages - 1), 0.001) * FORWARD_S
        cases.append(((forward, pipeline.BACKWARD_TO_FORWARD * forward, transfer, latency), m))
    return cases


def geo_placement_cases(seed: int = 2024, count: int = 60) -> list[tuple[tuple[np.ndarray, ...], int]]:
    """Pipelines cut into 1–4 regions of A6000/A100/H100-like GPUs, with a slow WAN hop between regions."""
    rng = np.random.default_rng(seed)
    tflops = np.array([154.8, 312.0, 989.0])
    cases = []
    for _ in range(count):
        num_stages = int(rng.choice([2, 4, 8, 16, 24, 32, 48, 64]))
        m = int(rng.choice([4, 8, 16, 32, 64]))
        num_regions = min(int(rng.integers(1, 5)), num_stages)
        cuts = np.sort(rng.choice(np.arange(1, num_stages), size=num_regions - 1, replace=False))
        region = np.searchsorted(cuts, np.arange(num_stages), side="right")  # (S,)
        # 0.6 s per forward for 16 stages on an A6000, scaled by stage count and GPU speed.
        forward = 0.6 * (16 / num_stages) * tflops[0] / rng.choice(tflops, size=num_regions)[region]
        wan = np.zeros(num_stages - 1, dtype=bool)
        wan[cuts - 1] = True
        transfer = np.where(wan, rng.uniform(0.05, 1.5, num_stages - 1), 0.003)
        latency = np.where(wan, rng.uniform(0.01, 0.13, num_stages - 1), 1e-4)
        cases.append(((forward, pipeline.BACKWARD_TO_FORWARD * forward, transfer, latency), m))
    return cases


def rel_err(analytic: float, exact: float) -> float:
    """Signed relative error of the analytic value."""
    return (analytic - exact) / exact


# --- closed forms: compute, messages, memory, iterations ------------------------------------------------------


def test_forward_time_closed_form() -> None:
    """A stage's forward time is 2·(P/S)·b·s / (g·tflops·1e12·MFU)."""
    expected = 2.0 * (70.6e9 / 8) * 1 * 2048 / (154.8e12 * 0.4)
    got = pipeline.forward_time_s(PARAMS, 8, MICRO_BATCH, SEQ_LEN, TFLOPS, MFU)
    assert got == pytest.approx(expected, rel=EXACT_REL_TOL)
    assert got == pytest.approx(0.58377261, rel=1e-8)  # 3.614720e13 FLOP / 6.192e13 FLOP/s
    halved = pipeline.forward_time_s(PARAMS, 8, MICRO_BATCH, SEQ_LEN, TFLOPS, MFU, gpus_per_stage=2)
    assert halved == pytest.approx(expected / 2.0, rel=EXACT_REL_TOL)


def test_activation_bytes_closed_form() -> None:
    """One boundary message is b·s·h·2 bytes (bf16): 1·2048·8192·2 = 32 MiB."""
    assert pipeline.activation_bytes(1, 2048, 8192) == 33_554_432.0
    assert pipeline.activation_bytes(4, 4096, 5120) == 4 * 4096 * 5120 * 2


def test_stage_memory_closed_form() -> None:
    """Stage 0 holds 16·P/S of state, min(S, M) (1F1B) or M (GPipe) checkpointed micro-batches, and one working set."""
    tokens_hidden = 1 * 2048 * 8192
    state = 16.0 * 70.6e9 / 8
    working = 34.0 * tokens_hidden
    # 80 layers over 8 stages = 10 layers per stage, each keeping a 2-byte-per-element input per micro-batch.
    one_f_one_b = state + 8 * 10 * 2.0 * tokens_hidden + working
    gpipe = state + 32 * 10 * 2.0 * tokens_hidden + working
    args = (PARAMS, LAYERS, HIDDEN, 8, MICRO_BATCH, SEQ_LEN, 32)
    assert pipeline.stage_memory_bytes(*args, schedule=ONE_F_ONE_B) == pytest.approx(one_f_one_b, rel=EXACT_REL_TOL)
    assert pipeline.stage_memory_bytes(*args, schedule=GPIPE) == pytest.approx(gpipe, rel=EXACT_REL_TOL)
    # With M < S the 1F1B stage holds only M micro-batches; layers per stage round up (80 / 3 → 27).
    few = state * 8 / 3 + 2 * 27 * 2.0 * tokens_hidden + working
    got = pipeline.stage_memory_bytes(PARAMS, LAYERS, HIDDEN, 3, MICRO_BATCH, SEQ_LEN, 2)
    assert got == pytest.approx(few, rel=EXACT_REL_TOL)


def test_optimizer_state_precision_changes_only_the_sharded_state() -> None:
    """bf16 optimizer state keeps 4 bytes per parameter where fp32 keeps 12, both sharded over d·c: the difference
    is 8·P/S/(d·c) per GPU group, held by each of the c context-parallel ranks of the stage (summed over them)."""
    for d, c in ((1, 1), (2, 1), (4, 2)):
        args = (PARAMS, LAYERS, HIDDEN, 8, MICRO_BATCH, SEQ_LEN, 32, ONE_F_ONE_B, d, 1, c)
        fp32 = pipeline.stage_memory_bytes(*args)
        bf16 = pipeline.stage_memory_bytes(*args, optimizer_state="bf16")
        assert fp32 - bf16 == pytest.approx(c * 8.0 * PARAMS / 8 / (d * c), rel=EXACT_REL_TOL)
    assert pipeline.OPTIMIZER_STATE_BYTES_PER_PARAM["fp32"] + pipeline.WEIGHT_AND_GRADIENT_BYTES_PER_PARAM == 16.0


def test_fits_memory_threshold() -> None:
    """A stage fits when its bytes per GPU are at most 90% of the GPU memory."""
    usable = 0.9 * 48.0 * 1e9
    assert pipeline.fits_memory(usable, 48.0)
    assert not pipeline.fits_memory(usable * (1.0 + 1e-9), 48.0)
    assert pipeline.fits_memory(2.0 * usable, 48.0, gpus_per_stage=2)
    assert not pipeline.fits_memory(2.0 * usable * (1.0 + 1e-9), 48.0, gpus_per_stage=2)


def test_min_feasible_stages_is_smallest_fitting_count() -> None:
    """The minimum stage count fits memory and one stage fewer does not; nothing fitting gives None."""
    args = (PARAMS, LAYERS, HIDDEN, MICRO_BATCH, SEQ_LEN, 32)
    k_min = pipeline.min_feasible_stages(*args, MEMORY_GB)
    assert k_min is not None and k_min > 1
    # 16·P/S alone needs S ≥ 16·70.6e9 / 43.2e9 ≈ 26.1, so at least 27 stages.
    assert k_min >= math.ceil(16.0 * 70.6e9 / (0.9 * 48e9))

    def need(k: int) -> float:
        return pipeline.stage_memory_bytes(PARAMS, LAYERS, HIDDEN, k, MICRO_BATCH, SEQ_LEN, 32)

    assert pipeline.fits_memory(need(k_min), MEMORY_GB)
    assert not pipeline.fits_memory(need(k_min - 1), MEMORY_GB)
    assert pipeline.min_feasible_stages(*args, 10_000.0) == 1
    assert pipeline.min_feasible_stages(*args, 1.0) is None


def test_iterations_for_closed_form() -> None:
    """Iterations are ⌈tokens·epochs / (b·s·M)⌉, at least one."""
    assert pipeline.iterations_for(1e9, 1.0, 1, 2048, 32) == math.ceil(1e9 / 65536) == 15259
    assert pipeline.iterations_for(1e9, 3.0, 2, 2048, 32) == math.ceil(3e9 / 131072)
    assert pipeline.iterations_for(10.0, 1.0, 1, 2048, 32) == 1


# --- the exact schedule -----------------------------------------------------------------------------------------


def stage_op_order(stage: int, num_stages: int, m: int, schedule: str) -> list[tuple[int, int]]:
    """One stage's (kind, micro-batch) order in a one-chunk program (kind 0 = F, 1 = B)."""
    prog = program(schedule, num_stages, m)
    return [(int(k), int(j)) for k, c, j in prog.ops[prog.device_ops[stage]:prog.device_ops[stage + 1]]]


def test_stage_op_orders_follow_the_schedule_tables() -> None:
    """GPipe runs all forwards, then all backwards; 1F1B stage i runs min(S−i−1, M) forwards first, then alternates."""
    assert stage_op_order(0, 3, 2, GPIPE) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # S = 4, M = 6, stage 0: 3 warm-up forwards, F3 B0 F4 B1 F5 B2, then B3 B4 B5.
    assert stage_op_order(0, 4, 6, ONE_F_ONE_B) == [
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (0, 4), (1, 1), (0, 5), (1, 2), (1, 3), (1, 4), (1, 5)
    ]
    assert stage_op_order(3, 4, 3, ONE_F_ONE_B) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert stage_op_order(0, 8, 2, ONE_F_ONE_B) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert F == 0
    with pytest.raises(ShapeError):
        program("zero-bubble", 2, 2)


def test_exact_gpipe_hand_trace_with_link_queueing() -> None:
    """Messages on a link are served one at a time in producer order, then delayed by the latency (hand trace)."""
    # S=2, M=2, f=b=1, x=2, l=1. Stage 0: F0 0–1, F1 1–2; link: m0 1–3 (arrives 4), m1 queues to 3–5 (arrives 6).
    # Stage 1: F0 4–5, F1 6–7, B0 7–8, B1 8–9; gradients: 8–10 (arrive 11), 10–12 (arrive 13).
    # Stage 0: B0 11–12, B1 13–14.
    result = simulate_schedule(np.ones(2), np.ones(2), np.array([2.0]), np.array([1.0]), 2, GPIPE)
    assert result.total_s == pytest.approx(14.0, rel=EXACT_REL_TOL)
    np.testing.assert_allclose(result.end_s, [14.0, 9.0])


def test_exact_one_f_one_b_hand_trace() -> None:
    """1F1B stage 0 waits for B0's gradient before its third forward (hand trace)."""
    # S=2, M=3, f=1, b=2, x=0, l=1. Stage 0: F0 0–1, F1 1–2. Stage 1: F0 2–3, B0 3–5, F1 5–6, B1 6–8.
    # Stage 0: B0 6–8, F2 8–9, B1 9–11. Stage 1: F2 10–11, B2 11–13. Stage 0: B2 14–16.
    result = simulate_schedule(np.ones(2), np.full(2, 2.0), np.zeros(1), np.ones(1), 3, ONE_F_ONE_B)
    assert result.total_s == pytest.approx(16.0, rel=EXACT_REL_TOL)
    np.testing.assert_array_equal(result.peak_activation, [2, 1])


def test_simulate_rejects_bad_inputs() -> None:
    """Mismatched shapes, M < 1 and unknown schedules raise ValueError."""
    with pytest.raises(ValueError):
        simulate_schedule(np.ones(3), np.ones(3), np.zeros(1), np.zeros(1), 4)
    with pytest.raises(ValueError):
        simulate_schedule(np.ones(2), np.ones(2), np.zeros(1), np.zeros(1), 0)
    with pytest.raises(ShapeError, match="pipeline_schedule"):
        simulate_schedule(np.ones(2), np.ones(2), np.zeros(1), np.zeros(1), 4, "interleaved")


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_exact_without_communication_is_m_plus_s_minus_one_slots(schedule: str) -> None:
    """With no transfer or latency and identical stages the exact makespan is (M+S−1)·(f+b).

    The closed form of ttsugriy/distributed-training-book, pipeline-parallelism chapter.
    """
    f, b = 0.7, 1.4
    for num_stages, m in itertools.product(GRID_STAGES, GRID_MICROBATCHES):
        zeros = np.zeros(num_stages - 1)
        result = simulate_schedule(np.full(num_stages, f), np.full(num_stages, b), zeros, zeros, m, schedule)
        assert result.total_s == pytest.approx((m + num_stages - 1) * (f + b), rel=EXACT_REL_TOL), (num_stages, m)


def test_gpipe_and_one_f_one_b_runtime_equal_but_peaks_differ() -> None:
    """Without communication both schedules take as long; 1F1B holds min(S−i, M) micro-batches at stage i, GPipe M."""
    for num_stages, m in itertools.product(GRID_STAGES, GRID_MICROBATCHES):
        case = uniform_case(num_stages, 0.0, 0.0)
        gpipe = simulate_schedule(*case, m, GPIPE)
        one_f_one_b = simulate_schedule(*case, m, ONE_F_ONE_B)
        assert one_f_one_b.total_s == pytest.approx(gpipe.total_s, rel=EXACT_REL_TOL)
        np.testing.assert_array_equal(gpipe.peak_activation, np.full(num_stages, m))
        np.testing.assert_array_equal(one_f_one_b.peak_activation, np.minimum(num_stages - np.arange(num_stages), m))
        assert one_f_one_b.peak_activation[0] == min(num_stages, m)
        if m > num_stages:
            assert one_f_one_b.peak_activation.max() < gpipe.peak_activation.max() == m


# --- analytic vs exact ------------------------------------------------------------------------------------------


def test_gpipe_analytic_is_exact_on_the_grid() -> None:
    """The GPipe flow-shop formula equals the exact schedule for identical stages over the S, M, x, l grid."""
    for num_stages, m, x_per_f, l_per_f in GRID:
        case = uniform_case(num_stages, x_per_f, l_per_f)
        exact = simulate_schedule(*case, m, GPIPE).total_s
        analytic = pipeline.iteration_time(*case, m, GPIPE).total_s
        assert analytic == pytest.approx(exact, rel=EXACT_REL_TOL), (num_stages, m, x_per_f, l_per_f)


def test_gpipe_analytic_is_exact_for_heterogeneous_stages() -> None:
    """The GPipe formula stays exact with unequal stage times, backward ratios and hops."""
    rng = np.random.default_rng(3)
    for case, m in random_stage_cases() + random_hop_cases():
        exact = simulate_schedule(*case, m, GPIPE).total_s
        assert pipeline.iteration_time(*case, m, GPIPE).total_s == pytest.approx(exact, rel=EXACT_REL_TOL)
    for _ in range(100):
        num_stages, m = int(rng.integers(1, 10)), int(rng.integers(1, 40))
        forward = rng.uniform(0.2, 2.0, num_stages)
        case = (forward, forward * rng.uniform(1.0, 3.0, num_stages), rng.uniform(0, 3, num_stages - 1),
                rng.uniform(0, 5, num_stages - 1))
        exact = simulate_schedule(*case, m, GPIPE).total_s
        assert pipeline.iteration_time(*case, m, GPIPE).total_s == pytest.approx(exact, rel=EXACT_REL_TOL)


def test_one_f_one_b_analytic_is_exact_for_identical_stages() -> None:
    """For identical stages and hops the 1F1B formula equals the exact schedule over the S, M, x, l grid."""
    for num_stages, m, x_per_f, l_per_f in GRID:
        case = uniform_case(num_stages, x_per_f, l_per_f)
        exact = simulate_schedule(*case, m, ONE_F_ONE_B).total_s
        analytic = pipeline.iteration_time(*case, m, ONE_F_ONE_B).total_s
        assert analytic == pytest.approx(exact, rel=EXACT_REL_TOL), (num_stages, m, x_per_f, l_per_f)


@pytest.mark.parametrize(
    ("cases", "tolerance"),
    [
        (random_stage_cases, ONE_F_ONE_B_GRID_REL_TOL),
        (random_hop_cases, ONE_F_ONE_B_GRID_REL_TOL),
        (geo_placement_cases, ONE_F_ONE_B_GEO_REL_TOL),
    ],
    ids=["random-stages", "random-hops", "geo-placements"],
)
def test_one_f_one_b_analytic_within_tolerance_for_heterogeneous_pipelines(
    cases: Callable[[], list[tuple[tuple[np.ndarray, ...], int]]], tolerance: float
) -> None:
    """With unequal stages or hops the 1F1B formula never exceeds the exact schedule and falls short by < tolerance."""
    for case, m in cases():
        exact = simulate_schedule(*case, m, ONE_F_ONE_B).total_s
        err = rel_err(pipeline.iteration_time(*case, m, ONE_F_ONE_B).total_s, exact)
        assert -tolerance <= err <= EXACT_REL_TOL, (len(case[0]), m, err)


def critical_path_shapes() -> dict[str, tuple[tuple[np.ndarray, ...], int]]:
    """Small pipelines whose exact critical path has one known shape each (traced with the exact schedule)."""
    shapes = {}
    # A slow first hop: stage 1 holds one micro-batch fewer than stage 0, so it cycles with stage 0 across
    # the hop, two micro-batches per 2t + 2l, far slower than stage 0's loop bound (4t + 2l) / 4.
    forward = np.full(4, 1.0 / 3.0)
    shapes["slow-first-hop"] = ((forward, 2.0 * forward, np.zeros(3), np.array([100.0, 0.0, 0.0])), 32)
    # One slow hop deep in a long pipeline: activations queue through it until stage 41 holds its 22, and
    # later the gradients queue back: about M + 22 messages each way.
    forward = np.full(64, 0.05)
    transfer, latency = np.full(63, 0.003), np.full(63, 1e-4)
    transfer[40], latency[40] = 0.5, 0.05
    shapes["slow-hop-deep"] = ((forward, 2.0 * forward, transfer, latency), 32)
    # A slow early hop with M > S: the queues are short, and cycles over (5, 6) carry the middle.
    forward = np.full(32, 0.05)
    transfer, latency = np.full(31, 0.003), np.full(31, 1e-4)
    transfer[5], latency[5] = 0.3, 0.05
    shapes["slow-hop-cycles"] = ((forward, 2.0 * forward, transfer, latency), 64)
    # A slow first region with M < S: stage 1 runs all forwards back to back, micro-batch 7 turns at stage 8,
    # and stage 0 runs all backwards back to back.
    forward = np.array([0.6, 0.6] + [0.094] * 14)
    transfer, latency = np.full(15, 0.003), np.full(15, 1e-4)
    transfer[1], latency[1] = 0.317, 0.129
    shapes["slow-region-burst"] = ((forward, 2.0 * forward, transfer, latency), 8)
    # A slow middle stage with cheap backwards: its own op chain, after its prefix, is the critical path.
    forward = np.array([0.25, 2.0, 0.25, 0.5, 0.25])
    shapes["slow-stage-chain"] = ((forward, 0.5 * forward, np.zeros(4), np.zeros(4)), 7)
    return shapes


@pytest.mark.parametrize("shape", list(critical_path_shapes()))
def test_one_f_one_b_analytic_follows_known_critical_paths(shape: str) -> None:
    """Each critical-path shape of the analytic family is matched exactly on a pipeline where it is the longest."""
    case, m = critical_path_shapes()[shape]
    exact = simulate_schedule(*case, m, ONE_F_ONE_B).total_s
    assert pipeline.iteration_time(*case, m, ONE_F_ONE_B).total_s == pytest.approx(exact, rel=EXACT_REL_TOL)


# --- uniform and vectorised forms --------------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_uniform_iteration_time_matches_iteration_time(schedule: str) -> None:
    """The vectorised uniform form equals iteration_time on identical stage and hop arrays, for every S at once."""
    stages = np.arange(1, 33)
    for m, x, lat in itertools.product((1, 3, 8, 32, 64), (0.0, 0.1, 1.0, 4.0), (0.0, 0.3, 2.0, 9.0)):
        forward = 0.8 / stages
        vectorised = pipeline.uniform_iteration_time_s(forward, stages, x, lat, m, schedule)
        for k, f, got in zip(stages, forward, vectorised):
            hops = (np.full(k - 1, x), np.full(k - 1, lat))
            want = pipeline.iteration_time(np.full(k, f), np.full(k, 2.0 * f), *hops, m, schedule).total_s
            assert got == pytest.approx(want, rel=EXACT_REL_TOL), (k, m, x, lat)


# --- stage count K* ---------------------------------------------------------------------------------------------


def optimal_args(memory_gb: float = 80.0, bandwidth_gbps: float = 10.0) -> tuple:
    """Llama-70B-like job on an A100-like GPU (312 TFLOPS) with a reference link."""
    forward_one_stage_s = pipeline.forward_time_s(PARAMS, 1, MICRO_BATCH, SEQ_LEN, 312.0, MFU)
    return (PARAMS, LAYERS, HIDDEN, MICRO_BATCH, SEQ_LEN, 32, forward_one_stage_s, memory_gb, bandwidth_gbps, 0.05)


def test_optimal_stages_is_feasible_brute_force_argmin() -> None:
    """K* fits memory, is at least the minimum stage count and is the smallest argmin of the iteration time."""
    args = optimal_args()
    k_star = pipeline.optimal_stages(*args)
    k_min = pipeline.min_feasible_stages(PARAMS, LAYERS, HIDDEN, MICRO_BATCH, SEQ_LEN, 32, 80.0)
    assert k_star is not None and k_min is not None and k_star >= k_min
    need = pipeline.stage_memory_bytes(PARAMS, LAYERS, HIDDEN, k_star, MICRO_BATCH, SEQ_LEN, 32)
    assert pipeline.fits_memory(need, 80.0)
    x = pipeline.activation_bytes(MICRO_BATCH, SEQ_LEN, HIDDEN) * 8.0 / 10e9
    times = {}
    for k in range(k_min, LAYERS + 1):
        f = pipeline.forward_time_s(PARAMS, k, MICRO_BATCH, SEQ_LEN, 312.0, MFU)
        times[k] = float(pipeline.uniform_iteration_time_s(f, k, x, 0.05, 32))
    best = min(times.values())
    assert k_star == min(k for k, t in times.items() if t == pytest.approx(best, rel=EXACT_REL_TOL))


def test_optimal_stages_none_when_nothing_fits() -> None:
    """No memory-feasible stage count gives None."""
    assert pipeline.optimal_stages(*optimal_args(memory_gb=1.0)) is None
    assert pipeline.optimal_stages(*optimal_args(), max_stages=2) is None


def test_optimal_stages_shrink_as_bandwidth_drops() -> None:
    """Slower reference links make extra hops dearer, so K* is non-increasing as bandwidth falls."""
    for schedule in SCHEDULES:
        ks = [pipeline.optimal_stages(*optimal_args(bandwidth_gbps=bw), schedule=schedule)
              for bw in (400.0, 100.0, 25.0, 10.0, 3.0, 1.0, 0.3, 0.1)]
        assert all(k is not None for k in ks)
        assert all(later <= earlier for earlier, later in zip(ks, ks[1:])), (schedule, ks)
        assert ks[-1] < ks[0]


# --- monotonicity ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_iteration_time_monotone_in_hops_and_cadence(schedule: str) -> None:
    """Raising any hop's transfer time or latency, or the cadence floor, never shortens the iteration."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        num_stages, m = int(rng.integers(2, 10)), int(rng.choice([1, 2, 5, 16, 32]))
        forward = rng.uniform(0.3, 2.0, num_stages)
        backward = 2.0 * forward
        transfer = rng.uniform(0.0, 2.0, num_stages - 1)
        latency = rng.uniform(0.0, 4.0, num_stages - 1)
        cadence = float(rng.uniform(0.0, 3.0))
        base = pipeline.iteration_time(forward, backward, transfer, latency, m, schedule, cadence).total_s
        for hop, delta in itertools.product(range(num_stages - 1), (1e-3, 0.5, 5.0)):
            bumped = transfer.copy()
            bumped[hop] += delta
            assert pipeline.iteration_time(forward, backward, bumped, latency, m, schedule, cadence).total_s >= base
            bumped = latency.copy()
            bumped[hop] += delta
            assert pipeline.iteration_time(forward, backward, transfer, bumped, m, schedule, cadence).total_s >= base
        for delta in (1e-3, 0.5, 5.0):
            slower = pipeline.iteration_time(forward, backward, transfer, latency, m, schedule, cadence + delta)
            assert slower.total_s >= base
