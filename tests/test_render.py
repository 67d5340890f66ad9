"""Layer 7: the ANSI and RGB renderers."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from matplotlib import _pylab_helpers

import geopipe_env  # noqa: F401  (registers the env ids)
from geopipe_env import render
from geopipe_env.render import MAX_LINE_CHARS, dashboard

TOY = "GeoPipe-Toy-v0"


def _make(env_id: str, render_mode: str, seed: int = 0):
    env = gym.make(env_id, render_mode=render_mode)
    env.reset(seed=seed)
    return env, env.unwrapped


def _spanning_job(env) -> int | None:
    """The id of a running job whose pipeline spans several regions, if any."""
    return next((jid for jid, rj in env.sim.running.items() if len(rj.placement.regions) > 1), None)


def _launch_across_regions(wrapped, env, max_steps: int = 40) -> int:
    """Step (preferring multi-region launches) until a running job spans several regions; return its id."""
    for _ in range(max_steps):
        wrapped.step(_first_valid_launch(env, multi_region=True))
        jid = _spanning_job(env)
        if jid is not None:
            return jid
    raise AssertionError("no multi-region launch happened")


def _first_valid_launch(env, multi_region: bool = False) -> int:
    """The lowest valid launch action (preferring a placement over several regions), or wait if none."""
    valid = [int(a) for a in np.flatnonzero(env.action_masks()[: env.wait_action])]
    if multi_region:
        spanning = [a for a in valid if len(env.candidate(*divmod(a, env.num_strategies)).placement.regions) > 1]
        valid = spanning or valid
    return valid[0] if valid else env.wait_action


def test_ansi_lists_every_region_and_the_running_jobs_path():
    """The ANSI dashboard names every region after reset, and after a launch the job's model and its region path."""
    env, u = _make(TOY, "ansi")
    text = env.render()
    assert all(region.id in text for region in u.scenario.regions)
    assert "RUNNING: 0" in text

    rj = u.sim.running[_launch_across_regions(env, u)]
    placement, job = rj.placement, rj.job
    text = env.render()
    ids = [u.scenario.regions[r].id for r in placement.regions]
    path = " -> ".join(f"{rid} x{n}" for rid, n in zip(ids, placement.stages))
    job_line = next(line for line in text.splitlines() if line.split()[:1] == [str(job.job_id)] and path in line)
    assert job.model in job_line
    assert f"{ids[0]} -> {ids[1]}" in text, "a loaded link of the path should be listed"


def test_ansi_is_plain_ascii_and_at_most_120_columns():
    """Every ANSI line is plain ASCII without escape codes and at most MAX_LINE_CHARS long, through an episode."""
    env, u = _make("GeoPipe-v0", "ansi")
    for _ in range(8):
        text = env.render()
        assert text.isascii() and "\x1b" not in text
        assert max(len(line) for line in text.splitlines()) <= MAX_LINE_CHARS
        _, _, terminated, truncated, _ = env.step(_first_valid_launch(u, multi_region=True))
        if terminated or truncated:
            break


def test_ansi_lists_only_loaded_links():
    """The links table has one row per directed link with load > 0, and none for idle links."""
    env, u = _make("GeoPipe-v0", "ansi")
    _launch_across_regions(env, u)
    text = env.render()
    loaded = int((u.sim.link_load_gbps > 0).sum())
    assert 0 < loaded < len(dashboard(u).links)
    assert f"LINKS: {loaded} loaded of {len(dashboard(u).links)}" in text
    assert sum(" -> " in line and line.rstrip().endswith("%") for line in text.splitlines()) == loaded


def test_dashboard_feasible_counts_match_the_action_mask():
    """Each queue row's feasible-candidate count equals the number of valid actions of its slot."""
    _, u = _make("GeoPipe-v0", "ansi")
    mask = u.action_masks()[: u.wait_action].reshape(u.queue_slots, u.num_strategies)
    rows = dashboard(u).queue
    assert rows, "GeoPipe-v0 should have a waiting job at its first decision"
    assert [q.num_feasible for q in rows] == [int(mask[q.slot].sum()) for q in rows]
    assert [q.job_id for q in rows] == u.sim.waiting[: u.queue_slots]


def test_geopipe_v0_ansi_renders_through_a_short_episode():
    """``gym.make("GeoPipe-v0", render_mode="ansi")`` renders a string at every step of a short episode."""
    env, u = _make("GeoPipe-v0", "ansi", seed=3)
    for _ in range(12):
        text = env.render()
        assert isinstance(text, str) and u.scenario.name in text
        _, _, terminated, truncated, _ = env.step(_first_valid_launch(u))
        if terminated or truncated:
            break
    assert isinstance(env.render(), str)


def test_rgb_frames_have_a_constant_shape_are_not_blank_and_change_after_a_launch():
    """rgb_array frames are (H, W, 3) uint8 of one shape across steps, not blank, and differ after a launch."""
    env, u = _make(TOY, "rgb_array")
    first = env.render()
    assert first.ndim == 3 and first.shape[2] == 3 and first.dtype == np.uint8
    assert first.var() > 0
    frames = [first]
    for _ in range(3):
        _, _, terminated, truncated, _ = env.step(_first_valid_launch(u, multi_region=True))
        frames.append(env.render())
        if terminated or truncated:
            break
    assert {f.shape for f in frames} == {first.shape}
    assert all(f.dtype == np.uint8 and f.var() > 0 for f in frames)
    assert not np.array_equal(frames[0], frames[1])


def test_rgb_leaves_no_pyplot_figures_behind():
    """Rendering RGB never registers a figure with pyplot, so repeated renders hold no figures open."""
    _, u = _make(TOY, "rgb_array")
    before = _pylab_helpers.Gcf.get_num_fig_managers()
    for _ in range(2):
        render.render_rgb(u)
    assert _pylab_helpers.Gcf.get_num_fig_managers() == before


def test_rgb_renders_in_async_vector_env_subprocesses():
    """An AsyncVectorEnv renders one rgb_array frame per sub-env from its worker processes."""
    venv = gym.make_vec(TOY, num_envs=2, vectorization_mode="async", render_mode="rgb_array")
    try:
        venv.reset(seed=0)
        frames = venv.render()
    finally:
        venv.close()
    assert len(frames) == 2
    assert all(f.dtype == np.uint8 and f.ndim == 3 and f.var() > 0 for f in frames)


def test_invalid_render_mode_raises_at_construction():
    """A render_mode outside ``metadata["render_modes"]`` raises ValueError when the env is made."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="render_mode"):
            gym.make(TOY, render_mode="vr")


def test_render_before_reset_raises():
    """Rendering the unwrapped env before reset raises RuntimeError rather than failing on missing state."""
    env = gym.make(TOY, render_mode="ansi").unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.render()
