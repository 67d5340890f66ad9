"""Figures of an evaluation (``geopipe_evaluation.summary``): one set of PNGs per env, file names prefixed by its slug.

- ``<slug>_paired_differences.png``: each policy's per-seed difference to the reference policy in average time in
  system, total cost and return (dots), with the mean and its 95% CI. Pairing by seed removes the workload's and prices'
  variation that both share, which would otherwise swamp the difference (as in bars of unpaired means);
- ``<slug>_jct_cdf.png``: the CDF of job completion times per policy, pooled over episodes, on a log time axis;
- ``<slug>_time_vs_cost.png``: per-policy mean average time in system (every arrived job, to its finish or the
  horizon, so a policy that leaves jobs waiting cannot look fast) vs mean cost with CI crosses, the Pareto front
  marked; a policy that finishes under 90% of the best's jobs (and so spends less) has a hollow marker and its
  jobs done in the legend;
- ``<slug>_gpu_timeline.png``: allocated GPUs per region over time, one small panel per policy in a grid (first
  seed).

Every policy keeps one colour, marker and line style across the figures (:func:`policy_styles`), so a dozen
policies stay apart. Figures are built with ``matplotlib.figure.Figure`` directly (no pyplot), so no GUI backend or
global figure state is involved.

:func:`schedule_gantt` draws one pipeline iteration of the schedule executor (``geopipe_env.physics.schedule``)
as a Gantt chart: a row per device, a bar per op.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from geopipe_evaluation.summary import REFERENCE_POLICY, RETURN_KEY, paired_values, pareto_front
from geopipe_evaluation.stats import CONFIDENCE, mean_ci

DPI = 120
FIGURES = ("paired_differences", "jct_cdf", "time_vs_cost", "gpu_timeline")  # what plot_env draws: <slug>_<figure>.png
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINE_STYLES = ("-", "--", "-.", ":")
# (metric, axis label, True when lower is better) of the paired-difference panels.
PAIRED_METRICS = (("avg_time_in_system_h", "average time in system (h)", True), ("total_cost_usd", "total cost (USD)", True), (RETURN_KEY, "return", False))
PAIRED_ROW_HEIGHT_IN = 0.42
UNFINISHED_MARK = 0.9  # a policy finishing fewer jobs than this share of the best's is marked in the cost-time figure
TIMELINE_COLUMNS = 4
TIMELINE_PANEL_IN = (3.3, 2.1)  # (width, height) of one policy's panel
SEED_DOT_SPREAD = 0.5  # the per-seed dots of one policy spread over this fraction of its row, in seed order


class Style(NamedTuple):
    """How one policy is drawn in every figure."""

    color: str
    marker: str
    linestyle: str


# 20 distinct colours: tab10's ten, then indigo, dark olive, gold, plum and teal, then light blue, orange, green, red
# and purple (tab20's light halves). Policy i takes PALETTE[i % 20]; the regions of the GPU timelines likewise.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#e6ab02", "#7b4173", "#1b9e77", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
)


def policy_styles(names: Sequence[str]) -> dict[str, Style]:
    """A distinct (colour, marker, line style) per policy: 20 colours (``PALETTE``), so that no two of up to 20
    policies (the default evaluation has 12) share a colour; then the colours again with the next marker and line
    style, so that no two of up to 80 policies look alike."""
    n = len(PALETTE)
    return {
        name: Style(PALETTE[i % n], MARKERS[(i // n + i) % len(MARKERS)], LINE_STYLES[(i // n) % len(LINE_STYLES)])
        for i, name in enumerate(names)
    }


def _ci(entry: dict[str, float]) -> float:
    return entry["ci95"] if math.isfinite(entry["ci95"]) else 0.0


def plot_env(rows: Sequence[dict[str, Any]], policies: dict[str, Any], title: str, slug: str, out_dir: Path) -> list[Path]:
    """Draw the four figures of one env; ``rows`` are its episodes and ``policies`` its summary. Returns the paths."""
    names = list(policies)
    styles = policy_styles(names)
    reference = REFERENCE_POLICY if REFERENCE_POLICY in names else names[0]
    figures = {
        "paired_differences": _paired_differences(rows, names, reference, styles, title),
        "jct_cdf": _cdf(rows, names, styles, title),
        "time_vs_cost": _scatter(policies, styles, title),
        "gpu_timeline": _timelines(rows, names, title),
    }
    paths = []
    for name, fig in figures.items():
        path = Path(out_dir) / f"{slug}_{name}.png"
        fig.savefig(path, dpi=DPI, bbox_inches="tight")
        paths.append(path)
    return paths


def _paired_differences(rows: Sequence[dict[str, Any]], names: list[str], reference: str, styles: dict[str, Style], title: str) -> Figure:
    others = [p for p in names if p != reference]
    fig = Figure(figsize=(13.0, max(2.5, PAIRED_ROW_HEIGHT_IN * len(others) + 1.6)), layout="constrained")
    axes = fig.subplots(1, len(PAIRED_METRICS), sharey=True, squeeze=False)[0]
    y = np.arange(len(others))
    for ax, (metric, label, lower_is_better) in zip(axes, PAIRED_METRICS):
        for row, policy in zip(y, others):
            mine, ref = paired_values(rows, policy, reference, metric)
            diff = mine - ref
            if not diff.size:
                continue
            offsets = np.linspace(-SEED_DOT_SPREAD / 2, SEED_DOT_SPREAD / 2, diff.size) if diff.size > 1 else np.zeros(1)
            ax.scatter(diff, row + offsets, s=9, color="0.6", zorder=2, linewidths=0)
            est = mean_ci(diff)
            style = styles[policy]
            ax.errorbar(est.mean, row, xerr=est.ci95 if math.isfinite(est.ci95) else None, fmt=style.marker, color=style.color,
                        markersize=7, capsize=3, linewidth=1.6, zorder=3)
        ax.axvline(0.0, color="0.2", linewidth=1, zorder=1)
        ax.set_xlabel(f"{label}: policy − {reference}\n" + ("← better" if lower_is_better else "better →"))
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, others)
    axes[0].invert_yaxis()
    fig.suptitle(f"{title}: paired difference to {reference} per seed (dots), mean ± {CONFIDENCE:.0%} CI (t)")
    return fig


def _cdf(rows: Sequence[dict[str, Any]], names: list[str], styles: dict[str, Style], title: str) -> Figure:
    fig = Figure(figsize=(9.0, 4.8), layout="constrained")
    ax = fig.subplots()
    for policy in names:
        jct = np.sort([j for r in rows if r["policy"] == policy for j in r["jct_h"]])
        if jct.size:
            fraction = np.arange(jct.size + 1) / jct.size
            style = styles[policy]
            ax.step(np.r_[jct[0], jct], fraction, where="post", label=policy, color=style.color, linestyle=style.linestyle, linewidth=1.4)
    ax.set_xscale("log")  # JCTs span hours to weeks; a linear axis crowds most jobs into its first tenth
    ax.set_xlabel("job completion time (h, log scale)")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_title(f"{title}: JCT CDF, pooled over episodes (left is faster)")
    ax.grid(alpha=0.3, which="both")
    fig.legend(loc="outside right upper", fontsize="small")
    return fig


def _scatter(policies: dict[str, Any], styles: dict[str, Style], title: str) -> Figure:
    names = list(policies)
    jct = [policies[p]["avg_time_in_system_h"] for p in names]
    cost = [policies[p]["total_cost_usd"] for p in names]
    done = [policies[p].get("jobs_completed", {}).get("mean", math.nan) for p in names]
    most_done = max((d for d in done if math.isfinite(d)), default=math.nan)
    fig = Figure(figsize=(9.5, 5.5), layout="constrained")
    ax = fig.subplots()
    for policy, j, c, d in zip(names, jct, cost, done):
        style = styles[policy]
        # A policy that leaves many jobs unfinished is cheap for it: it says so in the legend, with a hollow marker.
        short = math.isfinite(d) and d < UNFINISHED_MARK * most_done
        label = f"{policy} ({d:.1f} of {most_done:.1f} jobs done)" if short else policy
        ax.errorbar(j["mean"], c["mean"], xerr=_ci(j), yerr=_ci(c), fmt="none", ecolor=style.color, alpha=0.35, linewidth=0.9, zorder=1)
        ax.scatter(j["mean"], c["mean"], marker=style.marker, s=60, color="none" if short else style.color,
                   edgecolors=style.color if short else "0.15", linewidths=1.2 if short else 0.5, label=label, zorder=3)
    front = pareto_front([(j["mean"], c["mean"]) for j, c in zip(jct, cost)])
    if front:
        front.sort(key=lambda i: jct[i]["mean"])
        fx, fy = [jct[i]["mean"] for i in front], [cost[i]["mean"] for i in front]
        ax.step(fx, fy, where="post", color="0.3", linestyle="--", linewidth=1, label="Pareto front", zorder=0)
        for i in front:
            ax.annotate(names[i], (jct[i]["mean"], cost[i]["mean"]), xytext=(8, 6), textcoords="offset points", fontsize="small")
    ax.set_xlabel("average time in system (h): every arrived job, to its finish or the horizon")
    ax.set_ylabel("total cost (USD)")
    ax.set_title(f"{title}: time in system vs cost, mean ± {CONFIDENCE:.0%} CI (lower left is better)")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize="small")
    return fig


def _timelines(rows: Sequence[dict[str, Any]], names: list[str], title: str) -> Figure:
    recorded = {r["policy"]: r for r in rows if r.get("timeline") is not None}
    shown = [p for p in names if p in recorded]
    columns = max(1, min(TIMELINE_COLUMNS, len(shown)))
    grid_rows = max(1, math.ceil(len(shown) / columns))
    width_in, height_in = TIMELINE_PANEL_IN
    fig = Figure(figsize=(width_in * columns + 0.8, height_in * grid_rows + 1.4), layout="constrained")
    axes = fig.subplots(grid_rows, columns, sharex=True, sharey=True, squeeze=False).ravel()
    for ax, policy in zip(axes, shown):
        line = recorded[policy]["timeline"]
        gpus = np.asarray(line["gpus"], dtype=float)  # (num_points, num_regions)
        ax.stackplot(line["t_h"], gpus.T, labels=line["regions"], step="post", colors=[PALETTE[i % len(PALETTE)] for i in range(gpus.shape[1])])
        ax.axhline(sum(line["capacity"]), color="0.3", linestyle=":", linewidth=1)
        ax.set_title(policy, fontsize="small", loc="left")
    for ax in axes[len(shown):]:
        ax.set_axis_off()
    for ax in axes[::columns]:
        ax.set_ylabel("GPUs")
    for ax in axes[(grid_rows - 1) * columns:]:
        ax.set_xlabel("time (h)")
    if shown:
        regions = recorded[shown[0]]["timeline"]["regions"]
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", fontsize="small", ncol=min(len(regions), 8))
        seed = recorded[shown[0]]["seed"]
        fig.suptitle(f"{title}: allocated GPUs per region, seed {seed} (dotted: total GPUs)")
    return fig


# Op kinds of the schedule executor (geopipe_env.physics.schedule: F, B, D, W = 0, 1, 2, 3), their names and colours.
OP_KINDS = ("F", "B", "D", "W")
OP_COLORS = ("tab:blue", "tab:red", "tab:orange", "tab:green")
GANTT_BAR_HEIGHT = 0.8
GANTT_FONT_SIZE = 6.0
_CHAR_WIDTH_EM = 0.62  # a digit's width in a sans-serif font, in ems: when a label fits its bar


def schedule_gantt(run: Any, model: Any = None, ax: Axes | None = None, title: str | None = None,
                   labels: bool = True, xmax: float | None = None) -> Axes:
    """Draw one iteration of a pipeline schedule as a Gantt chart: each device a row (device 0 at the top), each op
    a bar from its start for its duration, coloured by kind (``F`` forward, ``B`` whole backward, ``D`` input
    gradient, ``W`` weight gradient). Idle time is left blank: it is the bubble, and the waits for messages.

    Example::

        from geopipe_env.physics import schedule as sch
        model = sch.executor_model(forward, backward, hop_transfer, hop_latency, 16, "zbv", input_gradient=0.54)
        ax = schedule_gantt(model, title="zbv")
        ax.figure.savefig("zbv.png", dpi=120)

    Args:
        run: an ``ExecutorModel`` (``physics.schedule.executor_model``), which is executed at line rate with
            ``record=True``, or an ``ExecutionResult`` recorded with ``record=True`` (``execute``,
            ``simulate_schedule`` or ``ExecutorModel.execute``), whose op durations then come from ``model``.
        model: with an ``ExecutionResult``: the ``ExecutorModel`` it ran, or anything with its ``chunk_f``,
            ``chunk_d`` and ``chunk_w`` arrays (per chunk the time of F, of D or B, and of W).
        ax: the axes to draw on; a new figure's (``ax.figure``) when None.
        title: the axes' title.
        labels: write each op's micro-batch on its bar when it fits (``m`` when every device holds one chunk,
            ``c:m`` with the chunk otherwise).
        xmax: where the time axis ends (default: the iteration's end), to draw several schedules to one scale.

    Returns:
        The axes drawn on. Its patches are the bars, one ``Rectangle`` per op: x its start, width its duration,
        centred on its device's row.

    Raises:
        ValueError: ``run`` was not recorded (no op starts), or an ``ExecutionResult`` came without ``model``.
    """
    if hasattr(run, "chunk_f") and hasattr(run, "execute"):
        run, model = run.execute(record=True), run
    if not run.starts:
        raise ValueError("schedule_gantt needs the op starts: execute with record=True")
    if model is None:
        raise ValueError("schedule_gantt needs the op durations: pass the ExecutorModel the result ran as model")
    times = (model.chunk_f, model.chunk_d, model.chunk_d, model.chunk_w)  # B and D both take chunk_d
    if ax is None:
        ax = Figure(figsize=(10.0, 0.35 * len(run.order) + 1.2), layout="constrained").subplots()
    ops = [(device, kind, chunk, mb) for device, device_ops in enumerate(run.order) for kind, chunk, mb in device_ops]
    one_chunk = all(len({c for _, c, _ in device_ops}) <= 1 for device_ops in run.order)
    for kind, (name, color) in enumerate(zip(OP_KINDS, OP_COLORS)):
        mine = [op for op in ops if op[1] == kind]
        if mine:
            starts = [run.starts[op[1:]] for op in mine]
            widths = [float(times[kind][op[2]]) for op in mine]
            ax.barh([op[0] for op in mine], widths, left=starts, height=GANTT_BAR_HEIGHT, color=color,
                    edgecolor="white", linewidth=0.4, label=name)
    span = max(run.total_s if xmax is None else xmax, 1e-12)
    ax.set_xlim(0.0, span)
    ax.set_ylim(len(run.order) - 0.5, -0.5)  # device 0 at the top
    ax.set_yticks(range(len(run.order)), [f"device {d}" for d in range(len(run.order))])
    ax.set_xlabel("time (s)")
    if labels:
        fig = ax.figure
        inches_per_s = ax.get_position().width * fig.get_figwidth() / span
        for device, kind, chunk, mb in ops:
            text = str(mb) if one_chunk else f"{chunk}:{mb}"
            width = float(times[kind][chunk])
            if width * inches_per_s >= len(text) * _CHAR_WIDTH_EM * GANTT_FONT_SIZE / 72.0:
                ax.text(run.starts[(kind, chunk, mb)] + width / 2.0, device, text, ha="center", va="center",
                        fontsize=GANTT_FONT_SIZE, color="white")
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize="small", ncol=4, frameon=False, borderaxespad=0.2)
    if title:
        ax.set_title(title, fontsize="medium", loc="left")
    return ax
