"""BACE-Pipe's decisions in hand-built states where the right answer is known."""

import pytest

from geopipe_baselines import make_policy
from geopipe_baselines.bace import congestion, priorities
from geopipe_env.env import GeoPipeEnv
from geopipe_env.scenario.loader import load_scenario


def _scenario(tmp_path, slow_ab_gbps=0.001, second_model="toy", c_gpus=1):
    """Regions a ($0.10, 1 GPU), b ($0.20, 1 GPU), c ($0.30, ``c_gpus``); a–b is nearly cut, a–c and b–c are fast.

    Both jobs are the toy 1.5B model with K* = 2 stages (t_f + t_b = 0.09 s, A = 1.6e7 bits): j0 runs 10000
    iterations, j1 only 100. Both arrive at t = 0.
    """
    (tmp_path / "jobs.csv").write_text(f"submit_time_s,model,iterations\n0,toy,10000\n0,{second_model},100\n")
    return load_scenario(
        {
            "name": "bace-hand",
            "horizon_h": 48,
            "mfu": 0.5,
            "gpus": {"TOY": {"tflops": 100, "memory_gb": 20, "busy_watts": 400, "idle_watts": 100}},
            "regions": [
                {"id": "a", "gpu": "TOY", "num_gpus": 1, "price_usd_per_kwh": 0.10},
                {"id": "b", "gpu": "TOY", "num_gpus": 1, "price_usd_per_kwh": 0.20},
                {"id": "c", "gpu": "TOY", "num_gpus": c_gpus, "price_usd_per_kwh": 0.30},
            ],
            "network": {
                "rule": "matrix",
                "matrix": {
                    "a": {"b": {"bandwidth_gbps": slow_ab_gbps, "latency_ms": 10}, "c": {"bandwidth_gbps": 10, "latency_ms": 10}},
                    "b": {"c": {"bandwidth_gbps": 10, "latency_ms": 10}},
                },
                "intra_region": {"bandwidth_gbps": 100, "latency_ms": 0},
            },
            "workload": {
                "arrival": {"process": "trace"},
                "trace": {"csv": str(tmp_path / "jobs.csv")},
                "models": [
                    {"name": "toy", "params_b": 1.5, "layers": 4, "hidden": 1000},
                    {"name": "toy-wide", "params_b": 1.5, "layers": 4, "hidden": 4000},
                ],
                "datasets": ["alpaca"],
                "seq_len": 1000,
                "num_microbatches": 2,
                "max_stages": 2,
            },
        }
    )


def test_bace_pipe_picks_short_job_on_bandwidth_safe_cheap_path(tmp_path):
    """On an idle network (α = 0) BACE-Pipe launches the shorter job, on the path a→c, not the cut link a→b.

    Priority = 1 − I: j1 (100 iterations) beats j0 (10000). The pathfinder starts at the cheapest region a and
    may add b only if 1.6e7 bits / 0.001 Gbit/s + 10 ms = 16.01 s <= 0.09 s (no) or c if 1.6 ms + 10 ms <= 0.09 s
    (yes). Cost-Min then puts one stage in each. Cost-first (CR-LCF) instead follows price onto a→b.
    """
    policy = make_policy("bace-pipe")
    env = GeoPipeEnv(_scenario(tmp_path), **policy.env_kwargs)
    obs, info = env.reset(seed=0)
    policy.reset(env)
    assert congestion(env) == 0.0
    assert list(priorities(env, env.sim.waiting)) == pytest.approx([1.0 - 1.0, 1.0 - 100 / 10000])
    action = policy.act(obs, info)
    slot, k = divmod(action, env.num_strategies)
    assert env.sim.waiting[slot] == 1
    assert env.candidate(slot, k).placement.regions == (0, 2)
    assert env.candidate(slot, k).placement.stages == (1, 1)
    cr_lcf = env.candidate(slot, env.strategies.index("cr-lcf")).placement
    assert cr_lcf.regions == (0, 1)
    assert env.candidate(slot, env.strategies.index("cr-lcf")).stalled


def test_bace_pipe_without_priority_keeps_fcfs_order(tmp_path):
    """The no-priority ablation launches the head job (j0) even though j1 is shorter."""
    policy = make_policy("bace-pipe-no-priority")
    env = GeoPipeEnv(_scenario(tmp_path), **policy.env_kwargs)
    obs, info = env.reset(seed=0)
    policy.reset(env)
    action = policy.act(obs, info)
    assert env.sim.waiting[action // env.num_strategies] == 0


def test_congestion_shifts_priority_to_light_jobs(tmp_path):
    """With α = 0 the short job wins; with every link saturated (α = 1) the lighter job wins although it is long.

    j1 is "toy-wide" (hidden 4000): the same compute as j0 but 4× the activation bytes, so D = 1 for j1 and
    D = 0.25 for j0; priority = 1 − D gives j0 0.75 and j1 0.
    """
    env = GeoPipeEnv(_scenario(tmp_path, second_model="toy-wide"))
    env.reset(seed=0)
    idle = priorities(env, env.sim.waiting)
    assert idle[1] > idle[0]  # idle network: the short job (j1) first
    env.sim.link_load_gbps = env.sim.capacity_gbps.copy()
    assert congestion(env) == pytest.approx(1.0)
    assert list(priorities(env, env.sim.waiting)) == pytest.approx([0.75, 0.0])


def test_bace_pipe_keeps_a_job_that_one_region_holds_in_that_region(tmp_path):
    """With 2 GPUs in c, c alone holds the job: BACE-Pipe places both stages there, with no WAN hop, although the
    path a→c would use the cheaper region a for one stage."""
    policy = make_policy("bace-pipe")
    env = GeoPipeEnv(_scenario(tmp_path, c_gpus=2), **policy.env_kwargs)
    obs, info = env.reset(seed=0)
    policy.reset(env)
    slot, k = divmod(policy.act(obs, info), env.num_strategies)
    assert env.candidate(slot, k).placement.regions == (2,) and env.candidate(slot, k).placement.stages == (2,)


def _two_region_world(gpu_b: str, price_b: float | str) -> dict:
    """Regions a (H100, $0.10/kWh) and b (``gpu_b`` at ``price_b``), 16 GPUs each; one 8-stage job."""
    return {
        "name": "cost-rank",
        "horizon_h": 24,
        "start_utc": "2023-01-01T00:00Z",
        "regions": [
            {"id": "a", "gpu": "H100", "num_gpus": 16, "price_usd_per_kwh": 0.10},
            {"id": "b", "gpu": gpu_b, "num_gpus": 16,
             **({"price_market": price_b} if isinstance(price_b, str) else {"price_usd_per_kwh": price_b})},
        ],
        "network": {"rule": "matrix", "matrix": {"a": {"b": {"bandwidth_gbps": 10, "latency_ms": 10}}}},
        "workload": {"num_jobs": 1, "arrival": {"process": "batch"}, "models": ["llama-2-13b"],
                     "datasets": ["wikitext-103"], "seq_len": 4096, "pipeline_stages": 8, "num_microbatches": 8},
    }


def _bace_region(spec: dict) -> tuple[int, ...]:
    policy = make_policy("bace-pipe")
    env = GeoPipeEnv(load_scenario(spec), **policy.env_kwargs)
    obs, info = env.reset(seed=0)
    policy.reset(env)
    slot, k = divmod(policy.act(obs, info), env.num_strategies)
    return env.candidate(slot, k).placement.regions


def test_cost_min_ranks_regions_by_price_per_unit_of_work():
    """An A100 region at $0.07/kWh is dearer per unit of work than an H100 one at $0.10 (400 W / 312 TFLOPS ×
    0.07 = 0.090 vs 700 / 989 × 0.10 = 0.071 USD·W/(kWh·TFLOPS)); an H100 at $0.07 is cheaper."""
    assert _bace_region(_two_region_world("A100", 0.07)) == (0,)
    assert _bace_region(_two_region_world("H100", 0.07)) == (1,)


def test_cost_rank_is_the_mean_price_over_the_expected_run():
    """The rank is ∫price over [now, now + isolated duration] ÷ that duration × W/TFLOPS, not the price now."""
    env = GeoPipeEnv(load_scenario(_two_region_world("H100", "DE-LU")))
    env.reset(seed=0)
    from geopipe_env.decision.placement import PlacementContext

    ctx = PlacementContext(env.sim)
    job = env.world.jobs[0]
    run_s = job.isolated_duration_s
    mean_price = env.world.price.integral(0.0, run_s) / (run_s / 3600.0)
    watts_per_tflops = env.world.busy_watts / env.world.tflops
    assert ctx.cost_rank(job) == pytest.approx((mean_price * watts_per_tflops).tolist(), rel=1e-12)
    assert run_s > 3600.0 and ctx.cost_rank(job)[1] != pytest.approx(ctx.price[1] * watts_per_tflops[1])


def test_literal_reading_grows_a_path_that_one_region_would_hold(tmp_path):
    """``BaceReading(single_region_first=False)`` reads the paper literally: from the cheapest start a (1 GPU) the
    pathfinder grows to c, although c alone (2 GPUs) holds the job."""
    import functools

    from geopipe_env.decision.placement import PlacementContext
    from reference_placement import BaceReading, bace_pipe

    env = GeoPipeEnv(_scenario(tmp_path, c_gpus=2))
    env.reset(seed=0)
    ctx = PlacementContext(env.sim)
    job = env.world.jobs[1]
    literal = functools.partial(bace_pipe, reading=BaceReading(single_region_first=False))
    assert literal(ctx, job).regions == (0, 2)
    assert bace_pipe(ctx, job).regions == (2,)


def test_registered_strategy_becomes_a_candidate_slot(tmp_path, monkeypatch):
    """``register_strategy`` adds a strategy the env accepts as a candidate slot: its Python rule gives the
    placement and the compiled table describes it as it does the built-in ones (with analytic and with exact
    timing); a taken name is refused."""
    from geopipe_env.decision import placement, strategies
    from geopipe_env.decision.backends import CompiledBackend

    monkeypatch.setattr(strategies, "_REGISTRY", dict(strategies._REGISTRY))
    strategies.register_strategy("all-in-c", lambda ctx, job: placement._placement((2,), (job.num_stages,)))
    envs = [GeoPipeEnv(_scenario(tmp_path, c_gpus=2), strategies=["lcf", "all-in-c"], timing=timing)
            for timing in ("analytic", "exact")]
    assert isinstance(envs[0]._backend, CompiledBackend)
    for env in envs:
        env.reset(seed=0)
        assert env.candidate(0, 1).placement.regions == (2,)
    with pytest.raises(ValueError, match="exists already"):
        strategies.register_strategy("lcf", lambda ctx, job: None)


def test_a_registered_strategy_describes_like_a_built_in_one(tmp_path, monkeypatch):
    """A registered rule that gives LCF's placement gets LCF's candidate: the same figures, from the one compiled
    description."""
    from geopipe_env.decision import strategies
    from reference_placement import lcf

    monkeypatch.setattr(strategies, "_REGISTRY", dict(strategies._REGISTRY))
    strategies.register_strategy("my-lcf", lcf)
    env = GeoPipeEnv(_scenario(tmp_path, c_gpus=2), strategies=["lcf", "my-lcf", "fastest"])
    env.reset(seed=0)
    built_in, registered = env.candidate(0, 0), env.candidate(0, 1)
    assert built_in is not None and registered == built_in


def test_a_registered_strategy_that_oversteps_the_cluster_is_one_clear_error(tmp_path, monkeypatch):
    """A rule that gives a placement the cluster cannot hold now (here: more stages in region a than its one GPU
    holds), or something that is not a placement, is refused with one error naming the strategy, not launched."""
    from geopipe_env.decision import placement, strategies

    monkeypatch.setattr(strategies, "_REGISTRY", dict(strategies._REGISTRY))
    strategies.register_strategy("too-much-in-a", lambda ctx, job: placement._placement((0,), (job.num_stages,)))
    env = GeoPipeEnv(_scenario(tmp_path, c_gpus=2), strategies=["lcf", "too-much-in-a"])
    with pytest.raises(ValueError, match="strategy 'too-much-in-a' gave job 0 a placement the cluster cannot hold"):
        env.reset(seed=0)
    strategies.register_strategy("not-a-placement", lambda ctx, job: ((2,), (job.num_stages,)))
    env = GeoPipeEnv(_scenario(tmp_path, c_gpus=2), strategies=["lcf", "not-a-placement"])
    with pytest.raises(ValueError, match="strategy 'not-a-placement' gave job 0 .*expected a Placement or None"):
        env.reset(seed=0)
