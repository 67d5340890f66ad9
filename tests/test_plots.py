"""geopipe_evaluation.plots: the evaluation figures stay few and legible with a dozen policies."""

import numpy as np
from matplotlib.image import imread

from geopipe_evaluation import plots
from geopipe_evaluation.summary import summarize

NUM_POLICIES = 12
NAMES = ["bace-pipe", *(f"policy-{i}" for i in range(1, NUM_POLICIES))]
SEEDS = (1000, 1001, 1002)


def _rows() -> list[dict]:
    """Synthetic episodes: policy i is i hours slower than bace-pipe on every seed, with a first-seed timeline."""
    rows = []
    for i, name in enumerate(NAMES):
        for seed in SEEDS:
            jct = [1.0 + i + seed - SEEDS[0], 5.0 + i]
            rows.append({
                "env": "e", "policy": name, "seed": seed, "return": -float(np.mean(jct)),
                "avg_jct_h": float(np.mean(jct)), "avg_time_in_system_h": float(np.mean(jct)) + 1.0,
                "total_cost_usd": 100.0 + 10 * i, "jct_h": jct, "comm_slowdown": [1.0],
                "timeline": {"t_h": [0.0, 1.0, 2.0], "gpus": [[1, 2], [3, 0], [0, 0]], "regions": ["a", "b"], "capacity": [4, 4]}
                if seed == SEEDS[0] else None,
            })
    return rows


def test_twelve_policies_make_four_figures_of_moderate_size(tmp_path):
    """With 12 policies every figure is at most 1,800 px wide and 1,200 px tall: the GPU timelines form a grid,
    not a 12-panel column."""
    rows = _rows()
    paths = plots.plot_env(rows, summarize(rows)["e"], "e", "e", tmp_path)
    assert sorted(p.name for p in paths) == sorted(f"e_{n}.png" for n in plots.FIGURES)  # the names geopipe-evaluate replaces
    for path in paths:
        height, width = imread(path).shape[:2]
        assert width <= 1800 and height <= 1200, (path.name, width, height)
    height, width = imread(tmp_path / "e_gpu_timeline.png").shape[:2]
    assert width > height  # a grid is wider than tall


def test_paired_differences_show_each_policy_against_the_reference():
    """One row per policy other than bace-pipe, in order, with its mean difference at the per-seed mean."""
    rows = _rows()
    fig = plots._paired_differences(rows, NAMES, "bace-pipe", plots.policy_styles(NAMES), "e")
    jct_axes = fig.axes[0]
    assert [t.get_text() for t in jct_axes.get_yticklabels()] == NAMES[1:]
    means = sorted(float(bar.lines[0].get_xdata()[0]) for bar in jct_axes.containers)  # each error bar's data point
    assert means == sorted(float(i) for i in range(1, NUM_POLICIES))  # policy i: i hours slower on every seed


def test_policy_styles_are_distinct():
    """Up to 80 policies get 80 different (colour, marker, line style) triples; up to 20, 20 different colours."""
    styles = plots.policy_styles([f"p{i}" for i in range(80)])
    assert len({(s.color, s.marker, s.linestyle) for s in styles.values()}) == 80
    assert len({s.color for s in list(styles.values())[:20]}) == 20


def test_the_default_policies_each_have_their_own_colour():
    """Every scripted policy, the slow references and the shipped agent: no two share a colour (with ten colours,
    bace-pipe and price-aware, the first and the eleventh, would)."""
    from geopipe_baselines import SLOW_REFERENCES
    from geopipe_evaluation.specs import default_policy_specs

    specs, _ = default_policy_specs()
    names = [*specs, *SLOW_REFERENCES]
    colours = [style.color for style in plots.policy_styles(names).values()]
    assert len(names) >= 12
    assert len(set(colours)) == len(names)


def test_the_cost_time_figure_marks_policies_that_leave_jobs_unfinished(tmp_path):
    """The cost–time figure plots time in system, and a policy that finishes fewer jobs than the best is labelled
    with its jobs done (it is cheap for that reason)."""
    from geopipe_evaluation.plots import _scatter, policy_styles

    def entry(mean):
        return {"mean": mean, "ci95": 0.1, "n": 3}

    policies = {
        "bace-pipe": {"avg_time_in_system_h": entry(92.0), "total_cost_usd": entry(14350.0), "jobs_completed": entry(39.7)},
        "ldf": {"avg_time_in_system_h": entry(600.0), "total_cost_usd": entry(261.0), "jobs_completed": entry(2.3)},
    }
    fig = _scatter(policies, policy_styles(list(policies)), "w")
    ax = fig.axes[0]
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert "bace-pipe" in labels and "ldf (2.3 of 39.7 jobs done)" in labels
    assert ax.get_xlabel().startswith("average time in system")
