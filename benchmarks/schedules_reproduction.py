"""Published pipeline-schedule comparisons, rerun on the schedule executor: the tables and figures of the
"Reproductions" sections of docs/schedules.md.

* **CrossPipe, Table 5, case 1** (Chen, Kubicek, Huang, Hoefler, "CrossPipe: Towards Optimal Pipeline Schedules for
  Cross-Datacenter Training", USENIX ATC'25, arXiv 2507.00217). Model M70 (hidden 8192, FFN 28672, 64 heads, 8 KV
  heads, 62 transformer layers plus embedding and output), TP 4 × PP 8 × DP 1, micro-batch 1, sequence 4096, two
  datacenters of 4 stages each (the boundary between stages 3 and 4 crosses them), global batch 16 (M = 16),
  activation budget equal to 1F1B's, no recomputation. Here every stage is identical: forward ``T_F = 0.038 s``
  (the paper's T_F, "the maximum runtime of the per-microbatch forward computation among stages"), backward
  ``2·T_F``, split into D and W by the zero-bubble FLOP count (``input_gradient_fraction(8192, 4096)``). Boundaries
  inside a datacenter have no message time and no latency; the cross-datacenter boundary has message time
  ``T_bw`` and latency ``T_lat``, each a ratio of ``T_F``. Times are per micro-batch (iteration ÷ M), as the
  paper's; the comparison is each schedule's time relative to 1F1B's at the same delays.
* **The schedule comparison of Barley, Leis, Klenk and Fröning** ("A Tabular Schedule Abstraction for
  Pipeline-Parallel Training", ISPDC 2026, arXiv 2605.24006), qualitatively: GPipe, 1F1B, Chimera and Hanayo on
  identical stages (forward 1, backward 2), S ∈ {4, 8}, M from 4 to 64, without communication, on a fast network
  and on a slow one (message time and latency in units of the forward).
* **Iteration time against bandwidth**: the eight schedules in CrossPipe's M70 two-datacenter setting at
  ``T_lat/T_F = 0.25``, ``T_bw/T_F`` from 0 to 4.
* **Gantt charts** of four schedules in that setting at ``(T_lat, T_bw)/T_F = (2, 2)``
  (``geopipe_evaluation.plots.schedule_gantt``).

Usage::

    python benchmarks/schedules_reproduction.py                       # the tables
    python benchmarks/schedules_reproduction.py --figures docs/img    # and schedules_bandwidth.png, schedules_gantt.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from geopipe_env.physics import schedule as sch

# CrossPipe's M70 two-datacenter setting (Chen et al., ATC'25, §7 and Table 4).
T_F = 0.038  # s, the paper's T_F for M70 (its Figure 11.b)
STAGES = 8
MICROBATCHES = 16  # case 1: global batch 16, micro-batch 1
CROSS_HOP = 3  # the boundary between stage 3 (first datacenter) and stage 4 (second)
HIDDEN, SEQ_LEN = 8192, 4096
BACKWARD_RATIO = 2.0
INPUT_GRADIENT = sch.input_gradient_fraction(HIDDEN, SEQ_LEN)
# An intra-datacenter message for the sensitivity check: one activation, s·h·2 bytes (64 MiB), on one 200 Gbit/s
# Slingshot NIC (the paper's Alps nodes), in units of T_F.
INTRA_MESSAGE_RATIO = SEQ_LEN * HIDDEN * 2 * 8 / 200e9 / T_F

# Table 5, case 1: seconds per micro-batch at (T_lat/T_F, T_bw/T_F).
PAPER_COLUMNS = ("1F1B", "ZBH1", "ZBV", "UD-Sub", "UD", "Wave")
TABLE5 = {
    (0.0, 0.0): (0.151, 0.133, 0.118, 0.137, 0.137, 0.119),
    (0.25, 0.25): (0.168, 0.150, 0.148, 0.149, 0.142, 0.127),
    (0.25, 2.0): (0.241, 0.230, 0.315, 0.181, 0.177, 0.250),
    (2.0, 0.25): (0.242, 0.229, 0.314, 0.160, 0.153, 0.148),
    (2.0, 2.0): (0.321, 0.309, 0.473, 0.198, 0.196, 0.256),
}
# GeoPipe's schedule for each of the paper's columns (crosspipe-greedy, two chunks per device in a V, against
# CrossUD; UD-Sub is printed beside it).
COMPARED = (("1f1b", "1F1B"), ("zb-h1", "ZBH1"), ("zbv", "ZBV"), ("crosspipe-greedy", "UD"))
TARGET_SCHEDULES = ("zbv", "crosspipe-greedy")  # 1F1B's ratio to itself is 1 by definition
TARGET_CELLS = ((0.0, 0.0), (0.25, 2.0), (2.0, 0.25), (2.0, 2.0))
TOLERANCE = 0.20  # GeoPipe's ratio within ±20% of the paper's

# The eight schedules of the bandwidth figure, with their chunks per device.
ALL_SCHEDULES = tuple((name, 2 if name in (sch.INTERLEAVED, sch.HANAYO) else 1) for name in sch.SCHEDULES)
FIGURE_LATENCY_RATIO = 0.25
FIGURE_BANDWIDTH_RATIOS = np.linspace(0.0, 4.0, 33)
GANTT_CELL = (2.0, 2.0)
GANTT_SCHEDULES = (("1f1b", 1), ("zbv", 1), ("crosspipe-greedy", 1), ("interleaved-1f1b", 2))

# The comparison of GPipe, 1F1B, Chimera and Hanayo: identical stages, forward 1, backward 2; each network's
# message time and latency per hop, in forwards.
COMPARISON_STAGES = (4, 8)
COMPARISON_MICROBATCHES = (4, 8, 16, 32, 64)
NETWORKS = {"none": (0.0, 0.0), "fast": (0.05, 0.01), "slow": (1.0, 0.1)}
HANAYO_V = 2
HANAYO_SHAPE = (8, 8)  # (S, M) of the one comparison of Hanayo and Chimera a secondary summary of the paper quotes
HANAYO_WAVES = (2, 4, 8)


def m70_model(schedule: str, latency_ratio: float, bandwidth_ratio: float, virtual_stages: int = 1,
              num_microbatches: int = MICROBATCHES, backward_ratio: float = BACKWARD_RATIO,
              intra_ratio: float = 0.0) -> sch.ExecutorModel:
    """The executor model of ``schedule`` in CrossPipe's M70 two-datacenter setting: 8 identical stages (forward
    ``T_F``, backward ``backward_ratio·T_F``), the cross-datacenter boundary with message time
    ``bandwidth_ratio·T_F`` and latency ``latency_ratio·T_F``, the others with message time ``intra_ratio·T_F`` and
    no latency. Interleaving's wrap (stage 7 back to stage 0) crosses back between the datacenters, on a link of its
    own with the cross-datacenter delays (as the environment times it)."""
    transfer = np.full(STAGES - 1, intra_ratio * T_F)
    latency = np.zeros(STAGES - 1)
    transfer[CROSS_HOP], latency[CROSS_HOP] = bandwidth_ratio * T_F, latency_ratio * T_F
    forward = np.full(STAGES, T_F)
    return sch.executor_model(forward, backward_ratio * forward, transfer, latency, num_microbatches, schedule,
                              virtual_stages, INPUT_GRADIENT, wan_hops=np.array([CROSS_HOP]),
                              wrap=(bandwidth_ratio * T_F, latency_ratio * T_F), wrap_wan=True)


def per_microbatch_s(schedule: str, latency_ratio: float, bandwidth_ratio: float, virtual_stages: int = 1,
                     **variant: float) -> float:
    """Iteration time ÷ M in the M70 setting (:func:`m70_model`; ``variant``: its keyword arguments)."""
    m = int(variant.get("num_microbatches", MICROBATCHES))
    return m70_model(schedule, latency_ratio, bandwidth_ratio, virtual_stages, **variant).total_s() / m


class Table5Row(NamedTuple):
    """One delay cell of Table 5: the paper's seconds per micro-batch by column, GeoPipe's by schedule."""

    cell: tuple[float, float]
    paper: dict[str, float]
    geopipe: dict[str, float]

    def paper_ratio(self, column: str) -> float:
        return self.paper[column] / self.paper["1F1B"]

    def ratio(self, schedule: str) -> float:
        return self.geopipe[schedule] / self.geopipe["1f1b"]

    def deviation(self, schedule: str, column: str) -> float:
        """GeoPipe's ratio to 1F1B over the paper's, minus one."""
        return self.ratio(schedule) / self.paper_ratio(column) - 1.0


def table5(**variant: float) -> list[Table5Row]:
    """GeoPipe's Table 5, case 1, beside the paper's (``variant``: :func:`m70_model`'s keyword arguments)."""
    return [Table5Row(cell, dict(zip(PAPER_COLUMNS, paper)),
                      {name: per_microbatch_s(name, *cell, **variant) for name, _ in COMPARED})
            for cell, paper in TABLE5.items()]


def implied_backward_ratio() -> float:
    """The backward ÷ forward at which 1F1B on identical stages of forward T_F takes the paper's no-delay 1F1B
    time: ``M·t = (M + S − 1)(1 + r)·T_F``."""
    return MICROBATCHES * TABLE5[(0.0, 0.0)][0] / ((MICROBATCHES + STAGES - 1) * T_F) - 1.0


def _cell(cell: tuple[float, float]) -> str:
    return f"({cell[0]:g}, {cell[1]:g})"


def print_table5() -> None:
    rows = table5()
    print(f"## CrossPipe Table 5, case 1 (M70, 2 DCs × 4 stages, M = {MICROBATCHES}, T_F = {T_F} s, "
          f"D share {INPUT_GRADIENT:.3f})\n")
    print("Seconds per micro-batch:\n")
    print("| (T_lat, T_bw)/T_F | paper 1F1B | GeoPipe 1f1b | paper ZBH1 | GeoPipe zb-h1 | paper ZBV | GeoPipe zbv | "
          "paper UD-Sub | paper UD | GeoPipe crosspipe-greedy | paper Wave |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p, g = r.paper, r.geopipe
        print(f"| {_cell(r.cell)} | {p['1F1B']:.3f} | {g['1f1b']:.3f} | {p['ZBH1']:.3f} | {g['zb-h1']:.3f} | "
              f"{p['ZBV']:.3f} | {g['zbv']:.3f} | {p['UD-Sub']:.3f} | {p['UD']:.3f} | {g['crosspipe-greedy']:.3f} | "
              f"{p['Wave']:.3f} |")
    print("\nRelative to 1F1B at the same delays, paper → GeoPipe (deviation of GeoPipe's ratio from the paper's):\n")
    print("| (T_lat, T_bw)/T_F | ZB-H1 | ZBV | crosspipe-greedy vs UD | crosspipe-greedy vs UD-Sub | ±20% target |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        parts = [f"{r.paper_ratio(col):.3f} → {r.ratio(name):.3f} ({r.deviation(name, col):+.1%})"
                 for name, col in COMPARED[1:]]
        sub = f"{r.paper_ratio('UD-Sub'):.3f} → {r.ratio('crosspipe-greedy'):.3f} " \
              f"({r.deviation('crosspipe-greedy', 'UD-Sub'):+.1%})"
        if r.cell in TARGET_CELLS:
            held = [abs(r.deviation(name, dict(COMPARED)[name])) <= TOLERANCE for name in TARGET_SCHEDULES]
            verdict = "holds" if all(held) else "misses: " + ", ".join(
                n for n, ok in zip(TARGET_SCHEDULES, held) if not ok)
        else:
            verdict = "(not a target cell)"
        print(f"| {_cell(r.cell)} | {' | '.join(parts)} | {sub} | {verdict} |")
    print("\nEach schedule's time relative to its own at no delay, paper → GeoPipe:\n")
    print("| (T_lat, T_bw)/T_F | 1F1B | ZB-H1 | ZBV | UD → crosspipe-greedy |")
    print("|---|---|---|---|---|")
    base = rows[0]
    for r in rows[1:]:
        parts = [f"{r.paper[col] / base.paper[col]:.2f} → {r.geopipe[name] / base.geopipe[name]:.2f}"
                 for name, col in COMPARED]
        print(f"| {_cell(r.cell)} | {' | '.join(parts)} |")
    print(f"\nThe paper's no-delay 1F1B ({TABLE5[(0.0, 0.0)][0]} s per micro-batch) is what identical stages of forward "
          f"T_F take with a backward of {implied_backward_ratio():.2f}·T_F; GeoPipe's at 2·T_F is "
          f"{rows[0].geopipe['1f1b']:.3f} s.")
    variants = ((f"intra-DC messages of {INTRA_MESSAGE_RATIO:.3f}·T_F (64 MiB on a 200 Gbit/s NIC)",
                 {"intra_ratio": INTRA_MESSAGE_RATIO}),
                (f"backward {implied_backward_ratio():.2f}·T_F (the paper's 1F1B time)",
                 {"backward_ratio": implied_backward_ratio()}))
    print("\nSensitivity of the target ratios (zbv / crosspipe-greedy relative to 1F1B):\n")
    print("| setting | " + " | ".join(_cell(c) for c in TARGET_CELLS) + " |")
    print("|---|" + "---|" * len(TARGET_CELLS))
    base = {r.cell: r for r in table5()}
    changes = []
    for label, variant in (("as above", {}),) + variants:
        by_cell = {r.cell: r for r in table5(**variant)}
        print(f"| {label} | " + " | ".join(
            " / ".join(f"{by_cell[c].ratio(n):.3f}" for n in TARGET_SCHEDULES) for c in TARGET_CELLS) + " |")
        if variant:
            changes.append(max(abs(by_cell[c].ratio(n) - base[c].ratio(n)) for c in TARGET_CELLS
                               for n in TARGET_SCHEDULES))
    print("| paper (ZBV / UD) | " + " | ".join(
        f"{TABLE5[c][2] / TABLE5[c][0]:.3f} / {TABLE5[c][4] / TABLE5[c][0]:.3f}" for c in TARGET_CELLS) + " |")
    print("\nLargest change of a target ratio: " + ", ".join(
        f"{change:.3f} ({label.split(' (')[0]})" for change, (label, _) in zip(changes, variants)) + ".")


def comparison_run(name: str, num_stages: int, num_microbatches: int, network: str,
                   virtual_stages: int = HANAYO_V) -> sch.ExecutionResult:
    """One iteration of ``name`` on identical stages (forward 1, backward 2) over ``network``; Hanayo and
    interleaved 1F1B with ``virtual_stages`` chunks per device (interleaving's wrap on a link like the others)."""
    transfer, latency = NETWORKS[network]
    hops = num_stages - 1
    v = virtual_stages if name in (sch.HANAYO, sch.INTERLEAVED) else 1
    return sch.simulate_schedule(np.ones(num_stages), np.full(num_stages, 2.0), np.full(hops, transfer),
                                 np.full(hops, latency), num_microbatches, name, v, wrap=(transfer, latency))


def comparison(num_stages: int, num_microbatches: int, network: str) -> dict[str, sch.ExecutionResult]:
    """GPipe, 1F1B, Chimera and Hanayo (and, as Hanayo's yardstick, interleaved 1F1B with the same chunks, where
    M is a multiple of S) at one shape and network."""
    names = [sch.GPIPE, sch.ONE_F_ONE_B, sch.CHIMERA, sch.HANAYO]
    if num_microbatches % num_stages == 0:
        names.append(sch.INTERLEAVED)
    return {name: comparison_run(name, num_stages, num_microbatches, network) for name in names}


def idle_fraction(run: sch.ExecutionResult) -> float:
    """The devices' mean idle time over the iteration time."""
    return float(run.bubble_s.mean() / run.total_s)


def print_comparison() -> None:
    print("\n## GPipe, 1F1B, Chimera and Hanayo (identical stages: forward 1, backward 2)\n")
    print("Networks, per hop (message time, latency) in forwards: " + ", ".join(
        f"{name} {x:g}, {lat:g}" for name, (x, lat) in NETWORKS.items()) + f". Hanayo and interleaved 1F1B: "
          f"v = {HANAYO_V}.\n")
    print("| network | S | M | GPipe ÷ 1F1B | peak GPipe / 1F1B | Chimera ÷ 1F1B | Chimera ÷ GPipe | Hanayo ÷ Chimera "
          "| Hanayo ÷ interleaved | idle 1F1B / Chimera / Hanayo |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for network in NETWORKS:
        for s in COMPARISON_STAGES:
            for m in COMPARISON_MICROBATCHES:
                runs = comparison(s, m, network)
                t = {name: run.total_s for name, run in runs.items()}
                interleaved = f"{t[sch.HANAYO] / t[sch.INTERLEAVED]:.3f}" if sch.INTERLEAVED in t else "–"
                peak = "/".join(f"{runs[n].peak_activation.max():g}" for n in (sch.GPIPE, sch.ONE_F_ONE_B))
                idle = " / ".join(f"{idle_fraction(runs[n]):.0%}" for n in (sch.ONE_F_ONE_B, sch.CHIMERA, sch.HANAYO))
                print(f"| {network} | {s} | {m} | {t[sch.GPIPE] / t[sch.ONE_F_ONE_B]:.3f} | {peak} | "
                      f"{t[sch.CHIMERA] / t[sch.ONE_F_ONE_B]:.3f} | {t[sch.CHIMERA] / t[sch.GPIPE]:.3f} | "
                      f"{t[sch.HANAYO] / t[sch.CHIMERA]:.3f} | {interleaved} | {idle} |")
    s, m = HANAYO_SHAPE
    print(f"\nMore chunks at (S, M) = ({s}, {m}), ÷ Chimera:\n")
    print("| network | " + " | ".join(f"hanayo v = {v} | interleaved v = {v}" for v in HANAYO_WAVES) + " |")
    print("|---|" + "---:|" * (2 * len(HANAYO_WAVES)))
    for network in ("none", "fast"):
        chimera = comparison_run(sch.CHIMERA, s, m, network).total_s
        print(f"| {network} | " + " | ".join(
            f"{comparison_run(sch.HANAYO, s, m, network, v).total_s / chimera:.3f} | "
            f"{comparison_run(sch.INTERLEAVED, s, m, network, v).total_s / chimera:.3f}" for v in HANAYO_WAVES) + " |")


def bandwidth_curves(ratios: np.ndarray = FIGURE_BANDWIDTH_RATIOS,
                     latency_ratio: float = FIGURE_LATENCY_RATIO) -> dict[str, np.ndarray]:
    """Per schedule, seconds per micro-batch in the M70 setting at each ``T_bw/T_F`` in ``ratios``."""
    return {name: np.array([per_microbatch_s(name, latency_ratio, r, v) for r in ratios]) for name, v in ALL_SCHEDULES}


def print_bandwidth(curves: dict[str, np.ndarray]) -> None:
    base = per_microbatch_s(sch.ONE_F_ONE_B, 0.0, 0.0)
    shown = [i for i, r in enumerate(FIGURE_BANDWIDTH_RATIOS) if r in (0.0, 0.5, 1.0, 2.0, 3.0, 4.0)]
    print(f"\n## Iteration time against bandwidth (M70, M = {MICROBATCHES}, T_lat/T_F = {FIGURE_LATENCY_RATIO}; "
          f"interleaved-1f1b and hanayo v = 2)\n")
    print(f"Seconds per micro-batch, and ÷ 1F1B without delay ({base:.4f} s):\n")
    print("| schedule | " + " | ".join(f"T_bw/T_F = {FIGURE_BANDWIDTH_RATIOS[i]:g}" for i in shown) + " |")
    print("|---|" + "---:|" * len(shown))
    for name, times in curves.items():
        print(f"| {name} | " + " | ".join(f"{times[i]:.3f} ({times[i] / base:.2f})" for i in shown) + " |")
    best = [min(curves, key=lambda n: curves[n][i]) for i in range(len(FIGURE_BANDWIDTH_RATIOS))]
    changes = [f"{best[0]} from 0"] + [f"{best[i]} from {FIGURE_BANDWIDTH_RATIOS[i]:g}"
                                         for i in range(1, len(best)) if best[i] != best[i - 1]]
    print("\nFastest schedule: " + ", ".join(changes) + ".")


def bandwidth_figure(curves: dict[str, np.ndarray], out: Path) -> Path:
    from matplotlib.figure import Figure

    from geopipe_evaluation.plots import policy_styles

    base = per_microbatch_s(sch.ONE_F_ONE_B, 0.0, 0.0)
    styles = policy_styles(list(curves))
    fig = Figure(figsize=(7.5, 4.6), layout="constrained")
    ax = fig.subplots()
    for name, times in curves.items():
        style = styles[name]
        label = f"{name} (v = 2)" if dict(ALL_SCHEDULES)[name] == 2 else name
        ax.plot(FIGURE_BANDWIDTH_RATIOS, times / base, label=label, color=style.color, linestyle=style.linestyle,
                marker=style.marker, markevery=4, markersize=4, linewidth=1.4)
    ax.set_xlabel("cross-datacenter message time T_bw / T_F")
    ax.set_ylabel("time per micro-batch ÷ 1F1B's without delay")
    ax.set_title(f"M70, 2 datacenters × 4 stages, M = {MICROBATCHES}, T_lat = {FIGURE_LATENCY_RATIO:g}·T_F "
                 f"(T_F = {T_F} s)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def gantt_figure(out: Path) -> Path:
    from matplotlib.figure import Figure

    from geopipe_evaluation.plots import schedule_gantt

    models = [m70_model(name, *GANTT_CELL, virtual_stages=v) for name, v in GANTT_SCHEDULES]
    runs = [model.execute(record=True) for model in models]
    end = max(run.total_s for run in runs)
    fig = Figure(figsize=(11.0, 12.0), layout="constrained")
    axes = fig.subplots(len(GANTT_SCHEDULES), 1, sharex=True)
    for ax, (name, v), model, run in zip(axes, GANTT_SCHEDULES, models, runs):
        label = f"{name} (v = {v})" if v > 1 else name
        schedule_gantt(run, model, ax=ax, title=f"{label}: {run.total_s / MICROBATCHES:.3f} s per micro-batch",
                       xmax=end)
        ax.axhline(CROSS_HOP + 0.5, color="0.3", linestyle=":", linewidth=1)
    for ax in axes[:-1]:
        ax.set_xlabel("")
    fig.suptitle(f"M70, 2 datacenters × 4 stages (dotted: the boundary between them), M = {MICROBATCHES}, "
                 f"(T_lat, T_bw) = ({GANTT_CELL[0]:g}, {GANTT_CELL[1]:g})·T_F", fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, default=None,
                        help="write schedules_bandwidth.png and schedules_gantt.png into this folder (docs/img)")
    args = parser.parse_args(argv)
    print_table5()
    print_comparison()
    curves = bandwidth_curves()
    print_bandwidth(curves)
    if args.figures is not None:
        print(f"\nwrote {bandwidth_figure(curves, args.figures / 'schedules_bandwidth.png')}")
        print(f"wrote {gantt_figure(args.figures / 'schedules_gantt.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
