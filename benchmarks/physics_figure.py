"""Draw how one WAN boundary slows a pipeline, by data-parallel degree: the figure of docs/physics.md.

A Llama-3.1-405B job of GeoPipe-Abundant-v0's shape (t = 8 GPUs per stage on H100, S = 16 stages, 32 micro-batches of one
8,192-token sequence per replica) is split 8 + 8 stages over two regions, alone on a link of the given bandwidth
and 40 ms one-way latency. Its iteration time, from the analytic 1F1B model with the job's rate capped by the link
(``min(demand, capacity)``) and its ring all-reduce, is divided by the same stages with every boundary inside one
region (400 Gbit/s per GPU, 0.05 ms). One curve per ``d``: the WAN message is ``d·A``, so the demand grows with
``d`` and the knee moves to the right.

Usage::

    python benchmarks/physics_figure.py [--out docs/img/wan_slowdown.png]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from geopipe_env.base.catalog import GPU_CATALOG, MODEL_CATALOG
from geopipe_env.physics import pipeline
from geopipe_env.base.units import rate_gbps, transfer_time_s

MODEL, STAGES, TENSOR, MICROBATCHES, SEQ_LEN, MFU = "llama-3.1-405b", 16, 8, 32, 8192, 0.4
INTRA_GBPS, INTRA_LATENCY_S, WAN_LATENCY_S = 400.0, 0.05e-3, 0.040
REPLICAS = (1, 2, 4, 8)


def slowdown(bandwidth_gbps: float, replicas: int) -> float:
    """Iteration time across the WAN ÷ in one region, for one job alone on the link."""
    spec = MODEL_CATALOG[MODEL]
    forward = np.full(STAGES, pipeline.forward_time_s(spec.params, STAGES, 1, SEQ_LEN, GPU_CATALOG["H100"].tflops, MFU, TENSOR))
    backward = pipeline.BACKWARD_TO_FORWARD * forward
    message = pipeline.activation_bytes(1, SEQ_LEN, spec.hidden)
    allreduce = float(pipeline.allreduce_time_s(spec.params, STAGES, TENSOR, replicas, INTRA_GBPS, INTRA_LATENCY_S))
    transfer = np.full(STAGES - 1, transfer_time_s(message, INTRA_GBPS))
    latency = np.full(STAGES - 1, INTRA_LATENCY_S)
    local = pipeline.iteration_time(forward, backward, transfer, latency, MICROBATCHES).total_s + allreduce
    wan = STAGES // 2 - 1
    transfer[wan] = transfer_time_s(replicas * message, bandwidth_gbps)
    latency[wan] = WAN_LATENCY_S
    demand = rate_gbps(replicas * message, float(forward[0] + backward[0]))
    cadence = transfer_time_s(replicas * message, min(demand, bandwidth_gbps))
    across = pipeline.iteration_time(forward, backward, transfer, latency, MICROBATCHES, min_cadence_s=cadence).total_s
    return (across + allreduce) / local


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img/wan_slowdown.png"))
    args = parser.parse_args(argv)
    from matplotlib.figure import Figure

    bandwidths = np.geomspace(1.0, 200.0, 60)
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.subplots()
    for d in REPLICAS:
        ax.plot(bandwidths, [slowdown(b, d) for b in bandwidths], label=f"d = {d} ({STAGES * TENSOR * d:,} GPUs)")
    ax.axvspan(20.0, 37.7, color="0.85", label="GeoPipe-v0 links (8 VM pairs)")
    ax.axvspan(2.5, 4.7, color="0.93", label="one VM pair (Skyplane)")
    ax.set_xscale("log")
    ax.set_xlabel("WAN link bandwidth (Gbit/s, per direction)")
    ax.set_ylabel("iteration time ÷ in one region")
    ax.set_title("Llama-3.1-405B, TP 8 × PP 16 on H100, one WAN boundary (40 ms)", fontsize=10)
    ax.legend(fontsize=8)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    for d in REPLICAS:
        print(f"d = {d}: slowdown {slowdown(28.2, d):.2f} at the median GeoPipe-v0 link, {slowdown(3.5, d):.2f} at one VM pair")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
