"""The pictures of the home, environment and physics pages (``benchmarks/render_figures.py``) show what their
captions say."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
from benchmarks import render_figures as figures  # noqa: E402


def test_the_home_page_render_shows_a_pipeline_across_three_regions():
    """GeoPipe-v0, seed 15, 21 decisions of bace-pipe: a 576-GPU Llama-3.1-405B job, larger than any region, runs
    over three regions (4, 4 and 1 stages of 64 GPUs)."""
    name, env_id, seed, decisions = figures.RENDERS[0]
    env = figures.played(env_id, seed, decisions, render_mode=None)
    try:
        core = env.unwrapped
        crossing = [j for j in core.sim.running if len(core.sim.placements[j].regions) > 1]
        assert len(crossing) == 1
        job = crossing[0]
        placement = core.sim.placements[job]
        assert [core.scenario.region_ids[r] for r in placement.regions] == ["eu-west", "eu-central", "asia-singapore"]
        assert tuple(placement.stages) == (4, 4, 1)
        spec = core.world.jobs[job]
        assert spec.model == "llama-3.1-405b"
        assert (spec.num_gpus, spec.stage_gpus, spec.num_stages) == (576, 64, 9)
        assert 576 > max(r.num_gpus for r in core.scenario.regions)
    finally:
        env.close()
    page = (ROOT / "docs" / "index.md").read_text()
    assert f"img/{name}" in page and "from eu-west through eu-central to asia-singapore" in page


def test_the_environment_page_render_shows_two_jobs_running_and_one_waiting():
    name, env_id, seed, decisions = figures.RENDERS[1]
    frame = figures.render_frame(env_id, seed, decisions)
    assert frame.shape == (500, 1000, 3)
    env = figures.played(env_id, seed, decisions, render_mode=None)
    try:
        assert (len(env.unwrapped.sim.running), len(env.unwrapped.sim.waiting)) == (2, 1)
    finally:
        env.close()
    assert f"img/{name}" in (ROOT / "docs" / "environment.md").read_text()


def test_the_physics_page_gantt_times():
    """The iteration times physics.md quotes for one job in one region and across two (3.26 s and 4.29 s)."""
    times = {name: model.total_s() for name, model in figures.placement_models().items()}
    assert f"{times['one region']:.2f}" == "3.26" and f"{times['two regions']:.2f}" == "4.29"
    page = (ROOT / "docs" / "physics.md").read_text()
    assert "3.26 s" in page and "4.29 s" in page and f"img/{figures.GANTT_FILE}" in page
    assert len(figures.gantt_figure().axes) == 2
