"""Layer 2: GPU failures, checkpoints and restarts: the formulas an interrupted job's lost work follows.

A job checkpoints its weights and optimizer state every ``T`` seconds of running time and spends ``C`` seconds
writing each checkpoint, so it runs in cycles of ``T + C`` of which ``C`` makes no progress. When one of its GPUs
fails, it loses the work since its last checkpoint and restarts, after ``R`` seconds of restart and ``C`` of
reading the checkpoint back, on whatever GPUs it is given next.

Young (1974) and Daly (2006) give the interval that wastes least: ``T* = √(2·C·M)`` for a mean time between
failures ``M`` of the job's GPUs together, which wastes a fraction of about ``C/T + (T/2 + R + C)/M`` of the
running time (:func:`expected_goodput`).
"""

from __future__ import annotations

import math

from geopipe_env.base.units import BF16_BYTES, BITS_PER_BYTE, BITS_PER_GBIT, SECONDS_PER_DAY
from geopipe_env.physics.pipeline import OPTIMIZER_STATE_BYTES_PER_PARAM


def checkpoint_bytes_per_param(optimizer_state: str = "fp32") -> float:
    """A checkpoint holds the bf16 weights (2 bytes a parameter) and the optimizer's state
    (``pipeline.OPTIMIZER_STATE_BYTES_PER_PARAM``): 14 bytes a parameter with fp32 state, the fp32 master weights
    and two Adam moments (the 16 bytes of mixed-precision Adam less the gradients; Rajbhandari et al., "ZeRO",
    SC 2020), and 6 with bf16 state."""
    return BF16_BYTES + OPTIMIZER_STATE_BYTES_PER_PARAM[optimizer_state]


def checkpoint_s(params_b: float, num_gpus: int, write_gbps: float, optimizer_state: str = "fp32") -> float:
    """``C``: the seconds a job of ``params_b`` billion parameters on ``num_gpus`` GPUs takes to write (or read) a
    checkpoint, each GPU writing its shard at ``write_gbps`` Gbit/s in parallel."""
    bytes_per_param = checkpoint_bytes_per_param(optimizer_state)
    return params_b * 1e9 * bytes_per_param * BITS_PER_BYTE / (num_gpus * write_gbps * BITS_PER_GBIT)


def mean_time_between_failures_s(failures_per_day: float) -> float:
    """``M``: the mean time between failures of GPUs that fail ``failures_per_day`` times a day together (the sum
    of each GPU's rate); infinite for none."""
    return math.inf if failures_per_day <= 0.0 else SECONDS_PER_DAY / failures_per_day


def young_daly_interval_s(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """``T* = √(2·C·M)`` (Young 1974; Daly 2006): the checkpoint interval that wastes least, to first order
    (infinite, no checkpoints, when nothing fails)."""
    return math.sqrt(2.0 * checkpoint_cost_s * mtbf_s)


def expected_goodput(interval_s: float, checkpoint_cost_s: float, restart_s: float, mtbf_s: float) -> float:
    """The first-order share of running time that advances training: ``1 − C/(T + C) − (T/2 + R + C)/M``, the
    checkpoints' share of each cycle and, per failure, half a cycle lost on average plus the restart and the
    checkpoint read."""
    cycle = interval_s + checkpoint_cost_s
    writing = 0.0 if math.isinf(cycle) else checkpoint_cost_s / cycle
    lost = 0.0 if math.isinf(mtbf_s) else (cycle / 2.0 + restart_s + checkpoint_cost_s) / mtbf_s
    return 1.0 - writing - lost
