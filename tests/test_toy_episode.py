"""A GeoPipe-Toy-v0 episode traced by hand, event by event."""

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401
from geopipe_env.physics.schedule import simulate_schedule
from geopipe_env.decision.strategies import STRATEGY_NAMES

LCF = STRATEGY_NAMES.index("lcf")
CR_LCF = STRATEGY_NAMES.index("cr-lcf")


def test_toy_episode_matches_hand_trace():
    """Event times, JCTs, energy, WAN bytes and cost equal the values derived by hand below.

    Toy world: regions cheap (3 GPUs, $0.10/kWh) and dear (3 GPUs, $0.30/kWh), link 10 Gbit/s and 10 ms,
    intra-region 100 Gbit/s and 0 ms. Each job is a 1.5B model with K* = 2 stages, M = 2 micro-batches.
      f = 2·(1.5e9/2)·1000 / (100e12·0.5) = 0.03 s, b = 0.06 s, t = f + b = 0.09 s;
      A = 1·1000·1000·2 = 2e6 bytes = 1.6e7 bits.
    1F1B with S = 2, M = 2: stage 0 runs F0 F1 B0 B1, stage 1 runs F0 B0 F1 B1. The critical path is
    F0(s0) → hop → F0 B0 (s1) → hop → B0(s0) → B1(s0), with B1's gradient already back (stage 1 did F1 B1 while
    B0 ran), so T = round trip + one more backward-slot = 2t + 2(x+l) + t:
      single region: x = 1.6e7/1e11 = 1.6e-4 s, l = 0 → T1 = 0.18 + 3.2e-4 + 0.09 = 0.27032 s;
      cheap→dear:   x = 1.6e-3 s, l = 0.01 s       → T2 = 0.18 + 0.0232 + 0.09 = 0.2932 s.
    (The exact schedule-table simulation gives the same: see the last assertion.)
    Demand 1.6e7/0.09 bit/s = 0.178 Gbit/s < 10 Gbit/s: no stall.
    Trace: j0, j1 at 0 s (10000 iterations), j2 at 1000 s (5000 iterations).
      t=0:    launch j0 by LCF → cheap (2 GPUs); launch j1 by LCF → dear (cheap has 1 free).
      t=1000: j2 arrives; only cross-region fits: CR-LCF → cheap×1 → dear×1.
      j2 ends at 1000 + 5000·0.2932 = 2466 s; j0 and j1 end at 10000·0.27032 = 2703.2 s.
    JCTs: 2703.2, 2703.2, 1466 s.
    Energy per iteration = Σ_stages (idle·T + (busy−idle)·M·t): single 2·(100·0.27032) + 2·300·0.18 = 162.064 J;
      cross 2·(100·0.2932) + 2·300·0.18 = 166.64 J.
    Cost: j0 1,620,960 J at 0.10 + j1 1,620,960 J at 0.30 + j2 422,400 J at 0.10 and 422,400 J at 0.30.
    WAN bytes: j2 sends 2·M·A = 8e6 bytes per iteration over its one WAN hop: 4e10 bytes.
    """
    env = gym.make("GeoPipe-Toy-v0").unwrapped
    obs, info = env.reset(seed=0)
    assert env.sim.now_s == 0.0 and env.sim.waiting == [0, 1]
    k = env.num_strategies

    _, r0, term, trunc, info = env.step(0 * k + LCF)
    assert env.sim.placements[0].regions == (0,) and env.sim.now_s == 0.0
    _, r1, term, trunc, info = env.step(0 * k + LCF)
    assert env.sim.placements[1].regions == (1,)
    # No one waits now; the env advanced by itself to j2's arrival, where only cross-region candidates exist.
    assert env.sim.now_s == pytest.approx(1000.0) and env.sim.waiting == [2]
    assert env.candidate(0, LCF) is None
    _, r2, term, trunc, info = env.step(0 * k + CR_LCF)
    assert env.sim.placements[2].regions == (0, 1) and env.sim.placements[2].stages == (1, 1)
    assert term and not trunc

    finish = env.sim.finish_s
    assert finish[2] == pytest.approx(2466.0, rel=1e-12)
    assert finish[0] == pytest.approx(2703.2, rel=1e-12) and finish[1] == pytest.approx(2703.2, rel=1e-12)
    m = info["episode_metrics"]
    assert m["avg_jct_h"] == pytest.approx((2703.2 * 2 + 1466.0) / 3 / 3600, rel=1e-12)
    joules = {"single": 10000 * 162.064, "cross_per_region": 5000 * 166.64 / 2}
    kwh = lambda j: j / 3.6e6  # noqa: E731
    cost = kwh(joules["single"]) * 0.10 + kwh(joules["single"]) * 0.30 + kwh(joules["cross_per_region"]) * (0.10 + 0.30)
    assert m["total_cost_usd"] == pytest.approx(cost, rel=1e-9)
    assert m["energy_kwh"] == pytest.approx(kwh(2 * joules["single"] + 2 * joules["cross_per_region"]), rel=1e-9)
    assert m["wan_traffic_tb"] == pytest.approx(4e10 / 1e12, rel=1e-9)
    assert m["jobs_completed"] == 3 and m["invalid_actions"] == 0 and m["stalled_job_fraction"] == 0.0
    total = r0 + r1 + r2
    expected = -((2703.2 * 2 + 1466.0) / env.t_ref_s + env.cost_weight * cost / env.c_ref_usd)
    assert total == pytest.approx(expected, rel=1e-9)
    assert np.isclose(m["makespan_h"], 2703.2 / 3600)
    f, x, lat = np.array([0.03, 0.03]), np.array([1.6e-3]), np.array([0.01])
    assert simulate_schedule(f, 2 * f, x, lat, 2).total_s == pytest.approx(0.2932, rel=1e-12)
