"""Figures of an evaluation (``baselines.evaluation``): one set of PNGs per env, file names prefixed by its slug.

- ``<slug>_jct_cost_bars.png``: average JCT and total cost per policy, with 95% CI error bars;
- ``<slug>_jct_cdf.png``: the CDF of job completion times per policy, pooled over episodes;
- ``<slug>_jct_vs_cost.png``: per-policy mean average JCT vs mean cost with CI crosses, the Pareto front marked;
- ``<slug>_gpu_timeline.png``: allocated GPUs per region over time, one subplot per policy (first seed).

Figures are built with ``matplotlib.figure.Figure`` directly (no pyplot), so no GUI backend or global figure state
is involved.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from baselines.evaluation import pareto_front

DPI = 120
TIMELINE_ROW_HEIGHT_IN = 1.7


def _colors(n: int) -> list:
    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _ci(entry: dict[str, float]) -> float:
    return entry["ci95"] if math.isfinite(entry["ci95"]) else 0.0


def plot_env(rows: Sequence[dict[str, Any]], policies: dict[str, Any], title: str, slug: str, out_dir: Path) -> list[Path]:
    """Draw the four figures of one env; ``rows`` are its episodes and ``policies`` its summary. Returns the paths."""
    names = list(policies)
    colors = dict(zip(names, _colors(len(names))))
    figures = {
        "jct_cost_bars": _bars(policies, colors, title),
        "jct_cdf": _cdf(rows, names, colors, title),
        "jct_vs_cost": _scatter(policies, colors, title),
        "gpu_timeline": _timelines(rows, names, title),
    }
    paths = []
    for name, fig in figures.items():
        path = Path(out_dir) / f"{slug}_{name}.png"
        fig.savefig(path, dpi=DPI, bbox_inches="tight")
        paths.append(path)
    return paths


def _bars(policies: dict[str, Any], colors: dict, title: str) -> Figure:
    names = list(policies)
    fig = Figure(figsize=(max(6.0, 0.9 * len(names) + 2.0), 6.5), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    x = np.arange(len(names))
    for ax, (key, label) in zip(axes, (("avg_jct_h", "average JCT (h)"), ("total_cost_usd", "total cost (USD)"))):
        entries = [policies[p][key] for p in names]
        ax.bar(x, [e["mean"] for e in entries], yerr=[_ci(e) for e in entries], capsize=4, color=[colors[p] for p in names])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[-1].set_xticks(x, names, rotation=30, ha="right")
    axes[0].set_title(f"{title}: mean ± 95% CI")
    return fig


def _cdf(rows: Sequence[dict[str, Any]], names: list[str], colors: dict, title: str) -> Figure:
    fig = Figure(figsize=(8.0, 4.5), layout="constrained")
    ax = fig.subplots()
    for policy in names:
        jct = np.sort([j for r in rows if r["policy"] == policy for j in r["jct_h"]])
        if jct.size:
            fraction = np.arange(jct.size + 1) / jct.size
            ax.step(np.r_[jct[0], jct], fraction, where="post", label=policy, color=colors[policy])
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_title(f"{title}: JCT CDF, pooled over episodes")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize="small")
    return fig


def _scatter(policies: dict[str, Any], colors: dict, title: str) -> Figure:
    names = list(policies)
    jct = [policies[p]["avg_jct_h"] for p in names]
    cost = [policies[p]["total_cost_usd"] for p in names]
    fig = Figure(figsize=(9.0, 5.0), layout="constrained")
    ax = fig.subplots()
    for policy, j, c in zip(names, jct, cost):
        ax.errorbar(j["mean"], c["mean"], xerr=_ci(j), yerr=_ci(c), fmt="o", capsize=3, color=colors[policy], label=policy)
    front = pareto_front([(j["mean"], c["mean"]) for j, c in zip(jct, cost)])
    if front:
        front.sort(key=lambda i: jct[i]["mean"])
        fx, fy = [jct[i]["mean"] for i in front], [cost[i]["mean"] for i in front]
        ax.step(fx, fy, where="post", color="0.3", linestyle="--", linewidth=1, label="Pareto front", zorder=0)
        ax.scatter(fx, fy, s=180, facecolors="none", edgecolors="0.2", zorder=3)
        for i in front:
            ax.annotate(names[i], (jct[i]["mean"], cost[i]["mean"]), xytext=(8, 6), textcoords="offset points", fontsize="small")
    ax.set_xlabel("average JCT (h)")
    ax.set_ylabel("total cost (USD)")
    ax.set_title(f"{title}: JCT vs cost, mean ± 95% CI (lower left is better)")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize="small")
    return fig


def _timelines(rows: Sequence[dict[str, Any]], names: list[str], title: str) -> Figure:
    recorded = {r["policy"]: r for r in rows if r.get("timeline") is not None}
    shown = [p for p in names if p in recorded]
    fig = Figure(figsize=(9.0, TIMELINE_ROW_HEIGHT_IN * max(len(shown), 1) + 1.2), layout="constrained")
    axes = fig.subplots(max(len(shown), 1), 1, sharex=True, squeeze=False)[:, 0]
    for ax, policy in zip(axes, shown):
        line = recorded[policy]["timeline"]
        gpus = np.asarray(line["gpus"], dtype=float)  # (num_points, num_regions)
        ax.stackplot(line["t_h"], gpus.T, labels=line["regions"], step="post", colors=_colors(gpus.shape[1]))
        ax.axhline(sum(line["capacity"]), color="0.3", linestyle=":", linewidth=1)
        ax.set_ylabel("GPUs")
        ax.set_title(f"{policy} (seed {recorded[policy]['seed']})", fontsize="medium", loc="left")
    if shown:
        regions = recorded[shown[0]]["timeline"]["regions"]
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", fontsize="small", ncol=min(len(regions), 8))
    axes[-1].set_xlabel("time (h)")
    fig.suptitle(f"{title}: allocated GPUs per region (dotted: total GPUs)")
    return fig
