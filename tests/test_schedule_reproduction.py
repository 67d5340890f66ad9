"""Published schedule comparisons on the schedule executor (``benchmarks/schedules_reproduction.py``) and the Gantt
chart of an executed schedule (``geopipe_evaluation.plots.schedule_gantt``).

The findings the docs report as reproduced are held here: GPipe and 1F1B take the same time on identical stages
without communication and 1F1B holds fewer activations; Chimera gains most over 1F1B at few micro-batches; the
zero-bubble and greedy schedules against 1F1B in CrossPipe's M70 two-datacenter setting, and the cells of
CrossPipe's Table 5 where GeoPipe's ratio to 1F1B is within ±20% of the paper's."""

from __future__ import annotations


import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from geopipe_evaluation.plots import GANTT_BAR_HEIGHT, schedule_gantt  # noqa: E402
from geopipe_env.physics import schedule as sch  # noqa: E402

from benchmarks import schedules_reproduction as repro

REL = 1e-12


def _bars(ax) -> list[tuple[float, float, float]]:
    """Each bar of a Gantt chart as (row, start, duration), sorted."""
    return sorted((p.get_y() + p.get_height() / 2.0, p.get_x(), p.get_width()) for p in ax.patches
                  if isinstance(p, Rectangle))


def _expected(run: sch.ExecutionResult, model: sch.ExecutorModel) -> list[tuple[float, float, float]]:
    times = {sch.F: model.chunk_f, sch.B: model.chunk_d, sch.D: model.chunk_d, sch.W: model.chunk_w}
    return sorted((float(device), run.starts[(kind, chunk, mb)], float(times[kind][chunk]))
                  for device, ops in enumerate(run.order) for kind, chunk, mb in ops)


def _model(name: str, num_stages: int = 4, m: int = 6) -> sch.ExecutorModel:
    forward = np.linspace(1.0, 1.3, num_stages)
    return sch.executor_model(forward, 2.0 * forward, np.full(num_stages - 1, 0.4), np.full(num_stages - 1, 0.2), m,
                              name, input_gradient=0.6)


@pytest.mark.parametrize("name", [sch.ONE_F_ONE_B, sch.ZBV, sch.CROSSPIPE_GREEDY])
def test_gantt_draws_one_bar_per_op_from_its_start_for_its_duration(name):
    """Given a model, the chart executes it and draws every op once: on its device's row, from the start the
    executor recorded, as long as the op's chunk time (D's for a split backward, W's for the weight gradient)."""
    model = _model(name)
    ax = schedule_gantt(model, title=name)
    run = model.execute(record=True)
    expected = _expected(run, model)
    assert len(expected) == sum(len(ops) for ops in run.order) == len(ax.patches)
    np.testing.assert_allclose(np.array(_bars(ax)), np.array(expected), rtol=REL, atol=1e-12)
    assert all(p.get_height() == pytest.approx(GANTT_BAR_HEIGHT) for p in ax.patches)
    assert ax.get_xlim() == pytest.approx((0.0, run.total_s))
    kinds = {"F", "B"} if name == sch.ONE_F_ONE_B else {"F", "D", "W"}
    assert {t.get_text() for t in ax.get_legend().get_texts()} == kinds
    assert ax.get_title(loc="left") == name


def test_gantt_from_a_recorded_result_takes_the_durations_from_its_model():
    """An ``ExecutionResult`` and the model it ran draw the same bars as the model alone; labels carry the
    micro-batch (one chunk per device) or chunk:micro-batch (two), on bars wide enough for them."""
    model = _model(sch.ONE_F_ONE_B, 3, 4)
    run = model.execute(record=True)
    ax = schedule_gantt(run, model, xmax=2.0 * run.total_s)
    np.testing.assert_allclose(np.array(_bars(ax)), np.array(_expected(run, model)), rtol=REL, atol=1e-12)
    assert ax.get_xlim() == pytest.approx((0.0, 2.0 * run.total_s))
    labels = [t.get_text() for t in ax.texts]
    assert labels and set(labels) <= {str(j) for j in range(4)}
    zbv = _model(sch.ZBV, 3, 4)
    labels = [t.get_text() for t in schedule_gantt(zbv).texts]
    assert labels and all(":" in text for text in labels)


def test_gantt_needs_the_starts_and_the_durations():
    model = _model(sch.ONE_F_ONE_B)
    with pytest.raises(ValueError, match="record=True"):
        schedule_gantt(model.execute(), model)
    with pytest.raises(ValueError, match="model"):
        schedule_gantt(model.execute(record=True))


@pytest.mark.parametrize("num_stages", repro.COMPARISON_STAGES)
def test_gpipe_and_one_f_one_b_take_the_same_time_without_communication_and_one_f_one_b_holds_less(num_stages):
    """Barley et al.: GPipe and 1F1B are runtime-equivalent and 1F1B has the lower activation peak. On identical
    stages without communication the executor gives both the same time, GPipe holding M micro-batches and 1F1B
    min(S, M)."""
    for m in repro.COMPARISON_MICROBATCHES:
        runs = repro.comparison(num_stages, m, "none")
        gpipe, one_f_one_b = runs[sch.GPIPE], runs[sch.ONE_F_ONE_B]
        assert gpipe.total_s == pytest.approx(one_f_one_b.total_s, rel=REL)
        assert gpipe.peak_activation.max() == m
        assert one_f_one_b.peak_activation.max() == min(num_stages, m)


@pytest.mark.parametrize("network", ["none", "fast"])
def test_chimera_gains_most_over_one_f_one_b_at_few_microbatches(network):
    """Barley et al.: Chimera pays off mainly at low micro-batch counts. Without communication and on a fast
    network it is faster than 1F1B at every M ≥ S, and its gain shrinks as M grows."""
    for num_stages in repro.COMPARISON_STAGES:
        runs = [repro.comparison(num_stages, m, network) for m in repro.COMPARISON_MICROBATCHES if m >= num_stages]
        ratios = [run[sch.CHIMERA].total_s / run[sch.ONE_F_ONE_B].total_s for run in runs]
        assert all(r < 1.0 for r in ratios)
        assert ratios == sorted(ratios) and ratios[-1] - ratios[0] > 0.05, ratios


def test_on_a_slow_network_chimera_beats_gpipe_only_at_few_microbatches_and_hanayo_loses_most():
    """On the slow network Chimera is faster than GPipe at M ≤ 8 and slower at M = 64; Hanayo (v = 2, twice the
    messages per link) falls further behind Chimera than on the fast network."""
    for num_stages in repro.COMPARISON_STAGES:
        for m in repro.COMPARISON_MICROBATCHES:
            slow, fast = repro.comparison(num_stages, m, "slow"), repro.comparison(num_stages, m, "fast")
            chimera_vs_gpipe = slow[sch.CHIMERA].total_s / slow[sch.GPIPE].total_s
            if m <= 8:
                assert chimera_vs_gpipe < 1.0, (num_stages, m)
            if m == 64:
                assert chimera_vs_gpipe > 1.0, (num_stages, m)
            hanayo_slow = slow[sch.HANAYO].total_s / slow[sch.CHIMERA].total_s
            hanayo_fast = fast[sch.HANAYO].total_s / fast[sch.CHIMERA].total_s
            assert hanayo_slow > hanayo_fast + 0.2, (num_stages, m)


def test_zero_bubble_and_greedy_schedules_against_one_f_one_b_in_the_m70_setting():
    """CrossPipe's M70 two-datacenter setting: without delay ZB-V and crosspipe-greedy finish before 1F1B; with any
    of the paper's delays crosspipe-greedy is the fastest of 1F1B, ZB-H1, ZB-V and itself, as CrossUD is in the
    paper's Table 5."""
    rows = {row.cell: row for row in repro.table5()}
    still = rows[(0.0, 0.0)].geopipe
    assert still["zbv"] < still["1f1b"] and still["crosspipe-greedy"] < still["1f1b"]
    compared = [column for _, column in repro.COMPARED]
    for cell, row in rows.items():
        if cell != (0.0, 0.0):
            assert min(row.geopipe, key=row.geopipe.get) == "crosspipe-greedy", cell
            assert min(compared, key=row.paper.get) == "UD", cell  # the paper's table agrees
    assert rows[(2.0, 2.0)].geopipe["crosspipe-greedy"] < 0.75 * rows[(2.0, 2.0)].geopipe["1f1b"]


def test_latency_and_message_time_cost_one_f_one_b_alike_but_not_zbv():
    """In the executor a latency does not hold the link: 1F1B and ZB-H1 (one message per round trip) take the same
    time at (T_lat, T_bw) = (0.25, 2) and (2, 0.25), while ZB-V, with two messages per micro-batch on the
    cross-datacenter link, is link-bound only at T_bw = 2 (the paper's static schedules take the same time at both)."""
    for name in ("1f1b", "zb-h1"):
        assert repro.per_microbatch_s(name, 0.25, 2.0) == pytest.approx(repro.per_microbatch_s(name, 2.0, 0.25), rel=1e-9)
    assert repro.per_microbatch_s("zbv", 2.0, 0.25) < 0.9 * repro.per_microbatch_s("zbv", 0.25, 2.0)


# ZB-V at (2, 0.25) is within the band too (−18.7%), but not for the paper's reason: the paper's static schedules
# pay a latency as they pay a message time, GeoPipe's ZB-V does not (docs/schedules.md, Reproductions). It is left
# out so that a change to how latency is modelled is not mistaken for a regression.
HELD_CELLS = [(name, cell) for name in repro.TARGET_SCHEDULES for cell in repro.TARGET_CELLS
              if (name, cell) != ("zbv", (2.0, 0.25))]


@pytest.mark.parametrize("name, cell", HELD_CELLS)
def test_crosspipe_table5_ratios_to_one_f_one_b_within_twenty_percent(name, cell):
    """GeoPipe's time relative to 1F1B is within ±20% of the paper's (Table 5, case 1; crosspipe-greedy against
    CrossUD)."""
    row = {r.cell: r for r in repro.table5()}[cell]
    assert abs(row.deviation(name, dict(repro.COMPARED)[name])) <= repro.TOLERANCE


def test_bandwidth_curves_cover_every_schedule_and_start_at_the_table():
    """The bandwidth figure's curves: all eight schedules, and at T_bw/T_F = 2 (T_lat/T_F = 0.25) the Table 5 cell."""
    ratios = np.array([0.0, 2.0])
    curves = repro.bandwidth_curves(ratios)
    assert set(curves) == set(sch.SCHEDULES)
    row = {r.cell: r for r in repro.table5()}[(0.25, 2.0)]
    for name, _ in repro.COMPARED:
        assert curves[name][1] == pytest.approx(row.geopipe[name], rel=REL)
