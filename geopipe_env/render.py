"""Layer 6: rendering (reads the env through :class:`RenderedEnv`; imports the layers below).

``render_ansi(env)`` draws a plain-ASCII dashboard and ``render_rgb(env)`` a matplotlib picture of the same state.
Both read one :class:`Dashboard` snapshot built by :func:`dashboard`, so the two views never disagree on what
they show. The RGB view builds a fresh ``Figure`` on an Agg canvas each call (no pyplot global state), so it is
safe in subprocess vector envs and its memory is freed with the figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.colors import Colormap, ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Circle, Rectangle, Wedge
from matplotlib.ticker import MaxNLocator

from geopipe_env.simulation.core_types import CandidateInfo, JobStatus, World
from geopipe_env.scenario.types import Scenario
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.base.units import SECONDS_PER_HOUR


class RenderedEnv(Protocol):
    """What rendering reads of an env (``GeoPipeEnv`` has it): its episode's simulator and world, its scenario, its
    table sizes and the candidate behind each action."""

    sim: ClusterSim | None
    world: World | None
    scenario: Scenario
    queue_slots: int
    num_strategies: int

    def candidate(self, slot: int, strategy: int) -> CandidateInfo | None: ...

HOURS_PER_DAY = 24.0
MINUTES_PER_HOUR = 60

# ANSI layout.
MAX_LINE_CHARS = 120
GPU_BAR_CHARS = 10
MAX_ID_CHARS = 16  # region ids longer than this are cut in tables
MAX_NAME_CHARS = 14  # model / dataset names likewise
ELLIPSIS = ".."

# RGB layout: a fixed size keeps the frame shape constant across steps (video recorders need that).
FIGURE_SIZE_IN = (10.0, 5.0)
FIGURE_DPI = 100
FONT_SIZE_PT = 7
LAYOUT_RADIUS = 1.0  # regions sit on a circle of this radius (axes units)
MAX_NODE_RADIUS = 0.30  # the region with most GPUs; node area scales with GPU count
MIN_NODE_RADIUS = 0.05
NODE_SPACING_SHARE = 0.8  # the largest node's radius at most this share of half the gap to its neighbour
RING_FRACTION = 0.35  # width of the used-GPU ring, as a share of the node radius
LABEL_OFFSET = 0.05  # gap between a node's rim and its label
LABEL_ALIGN_COS = 0.3  # labels of nodes this far off the vertical (horizontal) axis align sideways (up/down)
LABEL_SPAN = 0.75  # room around the circle for labels (axes units)
MAX_EDGE_WIDTH_PT = 6.0
MIN_EDGE_WIDTH_PT = 0.8
# Fixed axes rectangles (figure fractions, left, bottom, width, height): a layout engine would triple the cost.
NETWORK_AXES_RECT = (0.0, 0.0, 0.52, 0.95)
USAGE_AXES_RECT = (0.60, 0.17, 0.38, 0.58)
SUMMARY_XY = (0.79, 0.97)  # top centre of the summary box
KEY_SPACE = 0.45  # below the circle, for the colour keys (axes units)
KEY_HEIGHT = 0.08
KEY_GAP = 0.03
KEY_MARGIN = 0.35  # keys keep this far from the vertical centre line, clear of a bottom node's label
FONT_HEIGHT = 0.1  # a line of FONT_SIZE_PT text, in axes units
TITLE_PAD = 0.02  # axes fraction
MAX_GPU_TICKS = 4
BAR_WIDTH = 0.7
STALL_HATCH = "//"
BAR_HEADROOM = 1.5  # room above the tallest bar for the job key
# The job key, in axes fractions: up to KEY_ROWS rows per column, columns side by side in the headroom.
MAX_KEY_JOBS = 10
KEY_ROWS = 5
KEY_LEFT = 0.03
KEY_TOP = 0.96
KEY_ROW_HEIGHT = 0.05
KEY_COLUMN_WIDTH = 0.48
KEY_SWATCH = 0.03
PRICE_CMAP = "RdYlGn_r"  # cheap = green, dear = red
UTILISATION_CMAP = "YlOrRd"
UTILISATION_CMAP_FLOOR = 0.35  # start at orange, so lightly loaded links stand out from idle grey
PRICE_COLOUR_PERCENTILES = (5.0, 95.0)  # price spikes would otherwise wash every node out to one colour
JOB_CMAP = "tab20"
COLOURMAP_LEVELS = 256
USED_COLOUR = "0.25"
FREE_COLOUR = "0.85"
IDLE_LINK_COLOUR = "0.8"


@dataclass(frozen=True, slots=True)
class RegionRow:
    region_id: str
    used_gpus: int
    total_gpus: int
    price_usd_per_kwh: float
    carbon_g_per_kwh: float


@dataclass(frozen=True, slots=True)
class QueueRow:
    slot: int
    job_id: int
    model: str
    dataset: str
    num_stages: int  # K*
    waiting_h: float
    num_feasible: int  # candidate placements (of K strategies) that can launch now


@dataclass(frozen=True, slots=True)
class RunningRow:
    job_id: int
    model: str
    path: tuple[tuple[int, int], ...]  # (region index, stages) along the pipeline
    gpus: np.ndarray  # (R,) GPUs held per region
    iteration_s: float
    rate_gbps: float
    demand_gbps: float
    stalled: bool
    progress: float  # share of iterations done, in [0, 1]


@dataclass(frozen=True, slots=True)
class LinkRow:
    src: int
    dst: int
    load_gbps: float
    capacity_gbps: float  # now, after background traffic

    @property
    def utilisation(self) -> float:
        return self.load_gbps / self.capacity_gbps if self.capacity_gbps > 0.0 else 0.0


@dataclass(frozen=True, slots=True)
class Dashboard:
    """Everything both views show, read from the env once per render."""

    scenario_name: str
    time_h: float
    utc_hour: float  # hour of day, in [0, 24)
    num_jobs: int
    num_done: int
    num_running: int
    num_waiting: int
    num_strategies: int
    cost_usd: float
    energy_kwh: float
    carbon_kg: float
    price_range_usd_per_kwh: tuple[float, float]  # fixed over the episode, so node colours compare across frames
    regions: tuple[RegionRow, ...]
    queue: tuple[QueueRow, ...]
    running: tuple[RunningRow, ...]
    links: tuple[LinkRow, ...]  # every directed link, idle ones included


def dashboard(env: RenderedEnv) -> Dashboard:
    """Snapshot the unwrapped env's current state for rendering."""
    sim, world = env.sim, env.world
    if sim is None:
        raise RuntimeError("call reset() before render()")
    now_s = sim.now_s
    price = world.price.at(now_s)
    carbon = world.carbon.at(now_s)
    used = world.num_gpus - sim.free_gpus
    regions = tuple(
        RegionRow(spec.id, int(used[r]), int(world.num_gpus[r]), float(price[r]), float(carbon[r]))
        for r, spec in enumerate(env.scenario.regions)
    )
    queue = tuple(
        QueueRow(
            slot=slot,
            job_id=jid,
            model=world.jobs[jid].model,
            dataset=world.jobs[jid].dataset,
            num_stages=world.jobs[jid].num_stages,
            waiting_h=(now_s - world.jobs[jid].arrival_s) / SECONDS_PER_HOUR,
            num_feasible=sum(env.candidate(slot, k) is not None for k in range(env.num_strategies)),
        )
        for slot, jid in enumerate(sim.waiting[: env.queue_slots])
    )
    running = tuple(
        RunningRow(
            job_id=jid,
            model=rj.job.model,
            path=tuple(zip(rj.placement.regions, rj.placement.stages)),
            gpus=rj.gpus,
            iteration_s=rj.iteration_s,
            rate_gbps=rj.rate_gbps,
            demand_gbps=rj.demand_gbps,
            stalled=rj.stalled,
            progress=float(np.clip(1.0 - rj.remaining_iters / rj.job.iterations, 0.0, 1.0)),
        )
        for jid, rj in sorted(sim.running.items())
    )
    src, dst = np.nonzero(world.bandwidth_gbps > 0.0)
    links = tuple(
        LinkRow(int(a), int(b), float(sim.link_load_gbps[a, b]), float(sim.capacity_gbps[a, b]))
        for a, b in zip(src, dst)
        if a != b
    )
    return Dashboard(
        scenario_name=env.scenario.name,
        time_h=now_s / SECONDS_PER_HOUR,
        utc_hour=(world.start_hour + now_s / SECONDS_PER_HOUR) % HOURS_PER_DAY,
        num_jobs=len(world.jobs),
        num_done=int((sim.status == JobStatus.DONE).sum()),
        num_running=len(sim.running),
        num_waiting=len(sim.waiting),
        num_strategies=env.num_strategies,
        cost_usd=sim.cost_usd,
        energy_kwh=sim.energy_kwh,
        carbon_kg=sim.carbon_kg,
        price_range_usd_per_kwh=tuple(float(p) for p in np.percentile(world.price.values, PRICE_COLOUR_PERCENTILES)),
        regions=regions,
        queue=queue,
        running=running,
        links=links,
    )


def summary_lines(d: Dashboard) -> tuple[str, str, str]:
    """Header lines (time; jobs; money and energy) shared by both views."""
    minutes = int(d.utc_hour * MINUTES_PER_HOUR) % (int(HOURS_PER_DAY) * MINUTES_PER_HOUR)
    clock = f"{minutes // MINUTES_PER_HOUR:02d}:{minutes % MINUTES_PER_HOUR:02d}"
    return (
        f"{d.scenario_name} | t = {d.time_h:.2f} h | UTC {clock}",
        f"jobs: {d.num_done} done, {d.num_running} running, {d.num_waiting} waiting (of {d.num_jobs})",
        f"cost ${d.cost_usd:,.2f} | energy {d.energy_kwh:,.1f} kWh | carbon {d.carbon_kg:,.1f} kg",
    )


# ---------------------------------------------------------------------------------------------------- ANSI
def _cut(text: str, width: int) -> str:
    """``text`` shortened to at most ``width`` characters, marking the cut."""
    return text if len(text) <= width else text[: max(width - len(ELLIPSIS), 0)] + ELLIPSIS


def _gpu_bar(used: int, total: int) -> str:
    filled = round(GPU_BAR_CHARS * used / total) if total else 0
    return "[" + "#" * filled + "-" * (GPU_BAR_CHARS - filled) + "]"


def _path_text(path: tuple[tuple[int, int], ...], regions: tuple[RegionRow, ...]) -> str:
    """``eu-west x2 -> us-east x3``: ASCII for ``eu-west×2 → us-east×3``."""
    return " -> ".join(f"{regions[r].region_id} x{n}" for r, n in path)


def render_ansi(env: RenderedEnv) -> str:
    """A plain-ASCII dashboard of the env's state, every line at most ``MAX_LINE_CHARS`` characters."""
    d = dashboard(env)
    idw = max([len(r.region_id) for r in d.regions] + [len("region")])
    idw = min(idw, MAX_ID_CHARS)
    nw = MAX_NAME_CHARS
    lines = ["=" * MAX_LINE_CHARS, *summary_lines(d), ""]

    lines.append(f"{'region':<{idw}}  {'GPUs used':>11} {'':{GPU_BAR_CHARS + 2}}  {'USD/kWh':>8}  {'gCO2/kWh':>8}")
    for r in d.regions:
        gpus = f"{r.used_gpus:>5}/{r.total_gpus:<5}"
        lines.append(
            f"{_cut(r.region_id, idw):<{idw}}  {gpus} {_gpu_bar(r.used_gpus, r.total_gpus)}  "
            f"{r.price_usd_per_kwh:>8.4f}  {r.carbon_g_per_kwh:>8.1f}"
        )

    hidden = d.num_waiting - len(d.queue)
    lines += ["", f"QUEUE: {d.num_waiting} waiting" + (f", first {len(d.queue)} shown" if hidden else "")]
    if d.queue:
        lines.append(
            f"{'slot':>4} {'job':>4}  {'model':<{nw}} {'dataset':<{nw}} {'K*':>3} {'wait h':>7}  feasible"
        )
    for q in d.queue:
        lines.append(
            f"{q.slot:>4} {q.job_id:>4}  {_cut(q.model, nw):<{nw}} {_cut(q.dataset, nw):<{nw}} {q.num_stages:>3} "
            f"{q.waiting_h:>7.2f}  {q.num_feasible}/{d.num_strategies}"
        )

    lines += ["", f"RUNNING: {d.num_running}"]
    if d.running:
        head = f"{'job':>4}  {'model':<{nw}} {'iter s':>8} {'rate/demand Gbps':>17} {'':5} {'done':>5}  "
        lines.append(head + "path")
    for j in d.running:
        row = (
            f"{j.job_id:>4}  {_cut(j.model, nw):<{nw}} {j.iteration_s:>8.3f} "
            f"{j.rate_gbps:>8.2f}/{j.demand_gbps:<8.2f} {'STALL' if j.stalled else '':5} {100 * j.progress:>4.0f}%  "
        )
        lines.append(row + _cut(_path_text(j.path, d.regions), MAX_LINE_CHARS - len(row)))

    busy = [link for link in d.links if link.load_gbps > 0.0]
    lines += ["", f"LINKS: {len(busy)} loaded of {len(d.links)}"]
    if busy:
        lines.append(f"{'link':<{2 * idw + 4}}  {'load/capacity Gbps':>18}  {'util':>5}")
    for link in busy:
        name = f"{d.regions[link.src].region_id} -> {d.regions[link.dst].region_id}"
        lines.append(
            f"{_cut(name, 2 * idw + 4):<{2 * idw + 4}}  {link.load_gbps:>8.2f}/{link.capacity_gbps:<9.2f}  "
            f"{100 * link.utilisation:>4.0f}%"
        )
    return "\n".join(_cut(line, MAX_LINE_CHARS) for line in lines) + "\n"


# ---------------------------------------------------------------------------------------------------- RGB
def _node_positions(num_regions: int) -> np.ndarray:
    """(R, 2) regions on a circle, the first at the top, going clockwise."""
    angle = np.pi / 2 - 2 * np.pi * np.arange(num_regions) / num_regions
    return LAYOUT_RADIUS * np.stack([np.cos(angle), np.sin(angle)], axis=1)


def _title(ax: Axes, text: str) -> None:
    """An axes title as plain text: ``set_title`` measures the tick labels each draw to dodge them, which is slow."""
    ax.text(0.5, 1.0 + TITLE_PAD, text, transform=ax.transAxes, ha="center", va="bottom", fontsize=FONT_SIZE_PT + 1)


def _colour_key(ax: Axes, cmap: Colormap, x_range: tuple[float, float], y: float, caption: str) -> None:
    """A horizontal colour strip with its caption below, in ``ax``'s data coordinates.

    Drawn as an image rather than a ``colorbar``: a colorbar is another axes with ticks, which doubles the cost.
    """
    x0, x1 = x_range
    ax.imshow(
        np.linspace(0.0, 1.0, COLOURMAP_LEVELS)[None, :], cmap=cmap, extent=(x0, x1, y, y + KEY_HEIGHT),
        aspect="auto", interpolation="nearest", zorder=1,
    )
    ax.text((x0 + x1) / 2, y - KEY_GAP, caption, ha="center", va="top", fontsize=FONT_SIZE_PT)


def _draw_network(ax: Axes, d: Dashboard) -> None:
    """Regions as nodes (area ~ GPUs, fill = price, ring = used GPUs) joined by links (width ~ capacity)."""
    n = len(d.regions)
    pos = _node_positions(n)
    total = np.array([r.total_gpus for r in d.regions], dtype=float)
    # Neighbours on the circle are 2·sin(π/n) apart; keep the largest nodes from touching when there are many.
    max_radius = MAX_NODE_RADIUS if n < 2 else min(MAX_NODE_RADIUS, NODE_SPACING_SHARE * np.sin(np.pi / n))
    radius = np.maximum(max_radius * np.sqrt(total / total.max()), MIN_NODE_RADIUS)
    price_norm = Normalize(*d.price_range_usd_per_kwh)
    price_cmap = colormaps[PRICE_CMAP]
    util_cmap = ListedColormap(colormaps[UTILISATION_CMAP](np.linspace(UTILISATION_CMAP_FLOOR, 1.0, COLOURMAP_LEVELS)))

    # One segment per region pair: the wider direction sets the width, the busier one the colour.
    pairs: dict[tuple[int, int], list[float]] = {}
    for link in d.links:
        cap_util_load = pairs.setdefault((min(link.src, link.dst), max(link.src, link.dst)), [0.0, 0.0, 0.0])
        cap_util_load[0] = max(cap_util_load[0], link.capacity_gbps)
        cap_util_load[1] = max(cap_util_load[1], link.utilisation)
        cap_util_load[2] = max(cap_util_load[2], link.load_gbps)
    if pairs:
        drawn = sorted(pairs.items(), key=lambda item: item[1][2])  # loaded links on top of idle ones
        max_cap = max(c for c, _, _ in pairs.values()) or 1.0
        segments = [pos[[a, b]] for (a, b), _ in drawn]
        widths = [MIN_EDGE_WIDTH_PT + (MAX_EDGE_WIDTH_PT - MIN_EDGE_WIDTH_PT) * c / max_cap for _, (c, _, _) in drawn]
        colours = [util_cmap(u) if load > 0.0 else IDLE_LINK_COLOUR for _, (_, u, load) in drawn]
        ax.add_collection(LineCollection(segments, linewidths=widths, colors=colours, zorder=1))

    # Patches go in collections: ``add_patch`` recomputes the data limits per patch, which costs more than drawing.
    nodes = [Circle(pos[r], radius[r]) for r in range(len(d.regions))]
    fills = [price_cmap(price_norm(row.price_usd_per_kwh)) for row in d.regions]
    ax.add_collection(PatchCollection(nodes, facecolors=fills, edgecolors="k", linewidths=0.6, zorder=2))
    rings, ring_colours = [], []
    for r, row in enumerate(d.regions):
        # Used GPUs clockwise from the top in dark, the rest light.
        used_deg = 360.0 * row.used_gpus / row.total_gpus
        width = RING_FRACTION * radius[r]
        rings += [
            Wedge(pos[r], radius[r], 90.0 - used_deg, 90.0, width=width),
            Wedge(pos[r], radius[r], 90.0, 450.0 - used_deg, width=width),
        ]
        ring_colours += [USED_COLOUR, FREE_COLOUR]
    ax.add_collection(PatchCollection(rings, facecolors=ring_colours, edgecolors="none", zorder=3))
    for r, row in enumerate(d.regions):
        centre, rad = pos[r], radius[r]
        # Anchor the label on the rim facing away from the centre, so it never covers its node or the links.
        direction = pos[r] / LAYOUT_RADIUS
        ha = "left" if direction[0] > LABEL_ALIGN_COS else "right" if direction[0] < -LABEL_ALIGN_COS else "center"
        va = "bottom" if direction[1] > LABEL_ALIGN_COS else "top" if direction[1] < -LABEL_ALIGN_COS else "center"
        ax.text(
            *(centre + direction * (rad + LABEL_OFFSET)),
            f"{row.region_id}\n{row.used_gpus}/{row.total_gpus} GPUs, ${row.price_usd_per_kwh:.3f}",
            ha=ha, va=va, fontsize=FONT_SIZE_PT, zorder=5,
        )

    span = LAYOUT_RADIUS + MAX_NODE_RADIUS + LABEL_SPAN
    key_y = -span - KEY_SPACE + KEY_GAP + FONT_HEIGHT
    lo, hi = d.price_range_usd_per_kwh
    _colour_key(ax, price_cmap, (-span, -KEY_MARGIN), key_y, f"price USD/kWh {lo:.3f}-{hi:.3f}")
    _colour_key(ax, util_cmap, (KEY_MARGIN, span), key_y, "link use 0-100%, grey idle")
    ax.set_xlim(-span, span)
    ax.set_ylim(-span - KEY_SPACE, span)
    ax.set_aspect("equal")
    ax.set_axis_off()
    _title(ax, "regions: fill price, ring GPUs used; links: width capacity")


def _draw_usage(ax: Axes, d: Dashboard) -> None:
    """GPUs per region stacked by running job (hatched if stalled), over an outline of each region's total."""
    x = np.arange(len(d.regions))
    left = x - BAR_WIDTH / 2
    total = np.array([r.total_gpus for r in d.regions])
    job_cmap = colormaps[JOB_CMAP]
    # Rectangles in collections rather than ``ax.bar``, which adds (and autoscales) one patch at a time.
    outline = [Rectangle((left[r], 0.0), BAR_WIDTH, total[r]) for r in x]
    ax.add_collection(PatchCollection(outline, facecolors="none", edgecolors="0.4", linewidths=0.8, zorder=3))
    segments: dict[bool, tuple[list[Rectangle], list]] = {False: ([], []), True: ([], [])}
    bottom = np.zeros(len(d.regions))
    for j in d.running:
        colour = job_cmap(j.job_id % job_cmap.N)
        rects, colours = segments[j.stalled]
        for r in np.flatnonzero(j.gpus):
            rects.append(Rectangle((left[r], bottom[r]), BAR_WIDTH, j.gpus[r]))
            colours.append(colour)
        bottom += j.gpus
    for stalled, (rects, colours) in segments.items():
        if rects:
            hatch = STALL_HATCH if stalled else None
            ax.add_collection(
                PatchCollection(rects, facecolors=colours, edgecolors="white", linewidths=0.4, hatch=hatch, zorder=2)
            )
    ax.set_xlim(-0.5, len(d.regions) - 0.5)
    ax.set_ylim(0, BAR_HEADROOM * total.max())
    # Few explicit ticks: each tick is four artists, and text is most of a frame's cost.
    ax.set_yticks(MaxNLocator(MAX_GPU_TICKS, integer=True).tick_values(0, total.max()))
    ax.set_xticks(x, [r.region_id for r in d.regions], rotation=30, ha="right")
    ax.tick_params(labelsize=FONT_SIZE_PT)
    ax.set_ylabel("GPUs", fontsize=FONT_SIZE_PT)
    _title(ax, "GPUs by running job (hatched: stalled)")
    _job_key(ax, d.running, job_cmap)


def _job_key(ax: Axes, running: tuple[RunningRow, ...], job_cmap: Colormap) -> None:
    """A legend of the first ``MAX_KEY_JOBS`` running jobs in the axes' headroom, in columns.

    Hand-placed swatches and labels: ``ax.legend`` lays every entry out several times, which is slow.
    """
    shown = running[:MAX_KEY_JOBS]
    if not shown:
        return
    col, row = np.divmod(np.arange(len(shown)), KEY_ROWS)
    x = KEY_LEFT + col * KEY_COLUMN_WIDTH
    y = KEY_TOP - row * KEY_ROW_HEIGHT
    swatches = [Rectangle((xi, yi - KEY_SWATCH / 2), KEY_SWATCH / 2, KEY_SWATCH) for xi, yi in zip(x, y)]
    colours = [job_cmap(j.job_id % job_cmap.N) for j in shown]
    ax.add_collection(PatchCollection(swatches, facecolors=colours, edgecolors="none", transform=ax.transAxes))
    for xi, yi, j in zip(x, y, shown):
        label = f"{j.job_id} {j.model}"
        ax.text(xi + KEY_SWATCH, yi, label, transform=ax.transAxes, ha="left", va="center", fontsize=FONT_SIZE_PT - 1)
    if len(running) > len(shown):
        more = f"+{len(running) - len(shown)} more"
        y_more = KEY_TOP - KEY_ROWS * KEY_ROW_HEIGHT
        ax.text(KEY_LEFT, y_more, more, transform=ax.transAxes, ha="left", va="center", fontsize=FONT_SIZE_PT - 1)


def render_rgb(env: RenderedEnv) -> np.ndarray:
    """(H, W, 3) uint8 picture of the env's state; H and W are fixed by ``FIGURE_SIZE_IN`` and ``FIGURE_DPI``."""
    d = dashboard(env)
    fig = Figure(figsize=FIGURE_SIZE_IN, dpi=FIGURE_DPI)
    canvas = FigureCanvasAgg(fig)
    _draw_network(fig.add_axes(NETWORK_AXES_RECT), d)
    _draw_usage(fig.add_axes(USAGE_AXES_RECT), d)
    fig.text(
        *SUMMARY_XY, "\n".join(summary_lines(d)), ha="center", va="top", fontsize=FONT_SIZE_PT + 2,
        bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.6"},
    )
    canvas.draw()
    # A copy, so that nothing references the canvas: the figure (never registered with pyplot) is freed on return.
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
