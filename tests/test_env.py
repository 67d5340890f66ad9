"""The Gymnasium contract of every registered GeoPipe env: checkers, determinism, pickling, episode end."""

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import geopipe_env
from conftest import masked_random_rollout
from geopipe_env.env import EnvArgumentError
from geopipe_env.simulation.generator import sample_world
from geopipe_env.scenario.loader import load_builtin
from geopipe_env.simulation.core_types import JobStatus

ENV_IDS = list(geopipe_env.ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_checker_passes(env_id):
    """gymnasium's env checker accepts every registered id."""
    gym_check_env(gym.make(env_id).unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_checker_passes(env_id):
    """stable-baselines3's env checker accepts every registered id without warnings."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(gym.make(env_id).unwrapped, warn=True)


def _obs_equal(a, b):
    return all(np.array_equal(a[k], b[k]) for k in a)


def test_same_seed_same_episode():
    """Two envs with the same seed give identical observations, rewards, masks and metrics."""
    runs = [masked_random_rollout(gym.make("GeoPipe-v0"), seed=7, record=True) for _ in range(2)]
    (steps_a, ret_a, info_a, trace_a), (steps_b, ret_b, info_b, trace_b) = runs
    assert steps_a == steps_b and ret_a == ret_b
    for (oa, ra, ma), (ob, rb, mb) in zip(trace_a, trace_b):
        assert _obs_equal(oa, ob) and ra == rb and np.array_equal(ma, mb)
    assert info_a["episode_metrics"] == info_b["episode_metrics"]


def test_different_seeds_different_workloads():
    """Different seeds draw different job arrivals and models."""
    env = gym.make("GeoPipe-v0").unwrapped
    env.reset(seed=1)
    jobs_1 = [(j.arrival_s, j.model, j.dataset) for j in env.world.jobs]
    env.reset(seed=2)
    jobs_2 = [(j.arrival_s, j.model, j.dataset) for j in env.world.jobs]
    assert jobs_1 != jobs_2


def test_pickled_env_continues_identically():
    """An env pickled mid-episode continues exactly like the original."""
    env = gym.make("GeoPipe-v0").unwrapped
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=3)
    for _ in range(5):
        obs, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    clone = pickle.loads(pickle.dumps(env))
    actions = []
    while True:
        a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        actions.append(a)
        obs, r, term, trunc, info = env.step(a)
        obs_c, r_c, term_c, trunc_c, info_c = clone.step(a)
        assert _obs_equal(obs, obs_c) and r == r_c and term == term_c and trunc == trunc_c
        if term or trunc:
            break
    assert info["episode_metrics"] == info_c["episode_metrics"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_masked_random_loop_runs_under_make_vec_autoreset(mode):
    """The README's masked-random loop runs for hundreds of steps under gymnasium.make_vec (default autoreset):
    the mask returned with an episode's last step holds wait alone, so there is always an action to send, and
    every action sent is valid."""
    vec = gym.make_vec("GeoPipe-Toy-v0", num_envs=2, vectorization_mode=mode)
    rng = np.random.default_rng(0)
    ended = invalid = 0
    try:
        obs, info = vec.reset(seed=[0, 1])
        for _ in range(300):
            actions = np.array([rng.choice(np.flatnonzero(mask)) for mask in info["action_mask"]])
            obs, rewards, terminated, truncated, info = vec.step(actions)
            done = terminated | truncated
            for i in np.flatnonzero(done):
                assert np.flatnonzero(info["action_mask"][i]).tolist() == [vec.single_action_space.n - 1]  # wait alone
                invalid += int(info["episode_metrics"]["invalid_actions"][i])
            ended += int(done.sum())
    finally:
        vec.close()
    assert ended >= 100 and invalid == 0  # a toy episode takes three decisions


def test_async_vector_env_steps():
    """gymnasium.make_vec with async vectorisation resets and steps two GeoPipe-v0 envs."""
    vec = gym.make_vec("GeoPipe-v0", num_envs=2, vectorization_mode="async")
    try:
        obs, info = vec.reset(seed=[0, 1])
        for _ in range(5):
            actions = np.array([int(np.flatnonzero(m)[0]) for m in info["action_mask"]])
            obs, rewards, term, trunc, info = vec.step(actions)
        assert obs["candidates"].shape[0] == 2 and rewards.shape == (2,)
    finally:
        vec.close()


@pytest.mark.parametrize("seed", range(20))
def test_random_policy_terminates(seed):
    """A masked random policy finishes every geopipe-abundant job before the horizon (termination, not truncation)."""
    env = gym.make("GeoPipe-v0", scenario="geopipe-abundant")
    _, _, info, _ = masked_random_rollout(env, seed=seed)
    m = info["episode_metrics"]
    assert m["jobs_completed"] == len(env.unwrapped.world.jobs)
    assert env.unwrapped.terminated and not env.unwrapped.truncated


@pytest.mark.parametrize("env_id", ["GeoPipe-v0", "GeoPipe-Toy-v0", "GeoPipe-Paper-v0"])
def test_always_wait_is_truncated_at_horizon(env_id):
    """A policy that always waits is truncated exactly at the horizon, with no job done and no error."""
    env = gym.make(env_id).unwrapped
    obs, info = env.reset(seed=0)
    while True:
        obs, r, term, trunc, info = env.step(env.wait_action)
        if term or trunc:
            break
    assert trunc and not term
    assert env.sim.now_s == pytest.approx(env.scenario.horizon_s)
    assert info["episode_metrics"]["jobs_completed"] == 0
    assert info["episode_metrics"]["invalid_actions"] == 0


@pytest.mark.parametrize("seed", range(5))
def test_conservation_invariants(seed):
    """GPUs stay within capacity, links within capacity, clocks monotone, and rewards sum to the episode formula."""
    env = gym.make("GeoPipe-v0").unwrapped
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    total, last_t = 0.0, 0.0
    while True:
        obs, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        total += r
        sim = env.sim
        assert (sim.free_gpus >= 0).all() and (sim.free_gpus <= env.world.num_gpus).all()
        held = sum(rj.gpus for rj in sim.running.values()) if sim.running else 0
        assert np.array_equal(env.world.num_gpus - sim.free_gpus, held + np.zeros_like(sim.free_gpus))
        assert (sim.link_load_gbps <= sim.capacity_gbps * (1 + 1e-9) + 1e-12).all()
        assert sim.now_s >= last_t and sim.energy_kwh >= 0
        last_t = sim.now_s
        if term or trunc:
            break
    m = info["episode_metrics"]
    sim, w = env.sim, env.world
    done = sim.status == JobStatus.DONE
    arrival = np.array([j.arrival_s for j in w.jobs])
    lower = np.array([j.lower_bound_s for j in w.jobs])
    assert (sim.start_s[done] >= arrival[done]).all()
    assert (sim.finish_s[done] - arrival[done] >= lower[done] * (1 - 1e-9)).all()
    jct_sum = float((sim.finish_s[done] - arrival[done]).sum())
    expected = -(jct_sum / env.t_ref_s + env.cost_weight * m["total_cost_usd"] / env.c_ref_usd)
    assert total == pytest.approx(expected, rel=1e-6)


def test_invalid_actions_are_penalised_noops():
    """A masked or out-of-range action acts as a wait, costs the penalty and is counted; a float raises TypeError."""
    env = gym.make("GeoPipe-Toy-v0").unwrapped
    obs, info = env.reset(seed=0)
    with pytest.raises(TypeError):
        env.step(1.5)
    assert env.decisions == 0 and env.sim.now_s == 0.0  # a rejected action changes nothing
    masked = int(np.flatnonzero(~info["action_mask"])[0])
    twin = pickle.loads(pickle.dumps(env))
    _, r_bad, *_ = env.step(masked)
    _, r_wait, *_ = twin.step(twin.wait_action)
    assert r_bad == pytest.approx(r_wait - env.invalid_action_penalty)
    assert env.sim.now_s == twin.sim.now_s and env.sim.waiting == twin.sim.waiting
    assert env.invalid_actions == 1
    env.reset(seed=0)
    env.step(10_000)
    assert env.invalid_actions == 1
    env.reset(seed=0)
    env.step(np.int64(0))
    env.step(np.array([0]))
    assert env.invalid_actions == 0 and len(env.sim.running) == 2


def test_cost_weight_and_scenario_kwargs():
    """gym.make passes cost_weight and a scenario file path through to the env."""
    from pathlib import Path

    toy = Path(geopipe_env.__file__).parent / "data" / "scenarios" / "toy.yaml"
    env = gym.make("GeoPipe-v0", scenario=str(toy), cost_weight=2.5).unwrapped
    assert env.cost_weight == 2.5 and env.scenario.name == "toy"


def test_a_list_of_scenarios_is_a_mixture_drawn_by_the_seed():
    """scenario=[a, b]: each reset runs one of them, drawn from the env's RNG (so the seed fixes it), with that
    scenario's own world and cost weight; one scenario in a list is that scenario."""
    env = gym.make("GeoPipe-v0", scenario=["toy", "paper"]).unwrapped
    drawn = {}
    for seed in range(12):
        env.reset(seed=seed)
        drawn[seed] = env.scenario.name
        assert env.world.scenario is env.scenario and env.world.num_gpus.size == env.scenario.num_regions
        assert env.cost_weight == env.scenario.cost_weight
    assert set(drawn.values()) == {"toy", "paper"}
    twin = gym.make("GeoPipe-v0", scenario=["toy", "paper"]).unwrapped
    for seed in (11, 3, 7):
        twin.reset(seed=seed)
        assert twin.scenario.name == drawn[seed]
    single, listed = gym.make("GeoPipe-Toy-v0").unwrapped, gym.make("GeoPipe-v0", scenario=["toy"]).unwrapped
    single.reset(seed=5)
    listed.reset(seed=5)
    assert [j.arrival_s for j in single.world.jobs] == [j.arrival_s for j in listed.world.jobs]
    assert gym.make("GeoPipe-v0", scenario=["toy", "paper"], cost_weight=0.0).unwrapped.cost_weight == 0.0


def test_a_bad_mixture_is_refused_at_construction():
    """An empty list, or a mixture with more regions than max_regions, raises EnvArgumentError naming the argument."""
    with pytest.raises(EnvArgumentError, match="^scenario: an empty list"):
        gym.make("GeoPipe-v0", scenario=[])
    with pytest.raises(EnvArgumentError, match="^max_regions: got 3, fewer than the scenario's 6 regions"):
        gym.make("GeoPipe-v0", scenario=["toy", "paper"], max_regions=3)


@pytest.mark.parametrize("bad", [1.0, np.float32(2.0), "3", None, True, np.bool_(False), np.array([1, 2]), [0]])
def test_non_integer_actions_raise_and_change_nothing(bad):
    """Non-integer actions raise TypeError and leave the env exactly as it was."""
    env = gym.make("GeoPipe-Toy-v0").unwrapped
    env.reset(seed=0)
    before = pickle.dumps(env)
    with pytest.raises(TypeError):
        env.step(bad)
    assert pickle.dumps(env) == before


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
def test_numpy_integer_actions_are_accepted(dtype):
    """Every numpy integer type, scalar or 1-element array, is the same action as the Python int."""
    for action in (dtype(0), np.array([0], dtype=dtype), np.array(0, dtype=dtype)):
        env = gym.make("GeoPipe-Toy-v0").unwrapped
        env.reset(seed=0)
        env.step(action)
        assert env.invalid_actions == 0 and len(env.sim.running) == 1


@pytest.mark.parametrize("action", [-1, -10_000, 65, 10**9])
def test_out_of_range_action_equals_a_wait(action):
    """An out-of-range action leaves the env in the state a wait produces, plus the penalty and the count."""
    env = gym.make("GeoPipe-v0").unwrapped
    env.reset(seed=4)
    twin = pickle.loads(pickle.dumps(env))
    obs, r, *_ = env.step(action)
    obs_w, r_w, *_ = twin.step(twin.wait_action)
    assert env.sim.now_s == twin.sim.now_s and env.sim.waiting == twin.sim.waiting
    assert all(np.array_equal(obs[k], obs_w[k]) for k in obs)
    assert r == pytest.approx(r_w - env.invalid_action_penalty) and env.invalid_actions == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cost_weight": float("nan")}, "cost_weight: got nan; expected a finite number >= 0"),
        ({"cost_weight": float("inf")}, "cost_weight: got inf; expected a finite number >= 0"),
        ({"cost_weight": -0.5}, "cost_weight: got -0.5; expected a finite number >= 0"),
        ({"cost_weight": "1"}, "cost_weight: got the string '1'; expected a finite number >= 0"),
        ({"invalid_action_penalty": float("nan")}, "invalid_action_penalty: got nan; expected a finite number >= 0"),
        ({"invalid_action_penalty": -1}, "invalid_action_penalty: got -1; expected a finite number >= 0"),
        ({"queue_slots": 0}, "queue_slots: got 0; expected an integer >= 1"),
        ({"queue_slots": 2.0}, "queue_slots: got 2.0; expected an integer >= 1"),
        ({"queue_slots": True}, "queue_slots: got the boolean true; expected an integer >= 1"),
        ({"max_regions": 0}, "max_regions: got 0; expected an integer >= 1"),
        ({"max_regions": 1}, "max_regions: got 1, fewer than the scenario's 2 regions; expected an integer >= 2"),
        ({"render_mode": "vr"}, "render_mode: unknown value 'vr'; expected one of ansi, rgb_array"),
        ({"timing": "fast"}, "timing: unknown value 'fast'; expected one of analytic, exact"),
        ({"strategies": []}, "strategies: an empty list; expected a non-empty list of names from bace-pipe"),
        ({"strategies": "cheapest"}, "strategies: got str 'cheapest'; expected a non-empty list of names from"),
        ({"strategies": ["cheapst"]}, "strategies[0]: unknown value 'cheapst' (did you mean 'cheapest'?); expected one of"),
        ({"cost_wieght": 1}, "cost_wieght: not an argument of GeoPipeEnv (did you mean 'cost_weight'?); expected one of "
                             "scenario, cost_weight, render_mode, queue_slots, max_regions, invalid_action_penalty, timing, "
                             "strategies"),
        ({"Timing": "exact"}, "Timing: not an argument of GeoPipeEnv (did you mean 'timing'?)"),
        ({"seed": 3}, "seed: not an argument of GeoPipeEnv; expected one of scenario"),
    ],
)
def test_bad_env_arguments_raise_one_line_naming_the_argument(kwargs, message):
    """Each bad gym.make argument raises EnvArgumentError (a ValueError) at construction, one line naming it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium's own warning about an unknown render_mode
        with pytest.raises(EnvArgumentError) as err:
            gym.make("GeoPipe-Toy-v0", **kwargs)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)
    assert str(pickle.loads(pickle.dumps(err.value))) == str(err.value)  # survives a SubprocVecEnv worker


def test_env_arguments_are_checked_before_the_scenario_is_read():
    """A bad argument is reported even when the scenario file is missing too: arguments come first."""
    with pytest.raises(EnvArgumentError, match="queue_slots"):
        gym.make("GeoPipe-v0", scenario="no-such-world.yaml", queue_slots=0)


def test_queue_slots_zero_no_longer_reaches_reset():
    """queue_slots=0, which used to divide by zero at reset, is refused when the env is made; 1 slot runs."""
    with pytest.raises(EnvArgumentError):
        gym.make("GeoPipe-Toy-v0", queue_slots=0)
    steps, _, info, _ = masked_random_rollout(gym.make("GeoPipe-Toy-v0", queue_slots=1), seed=0)
    assert steps > 0 and info["episode_metrics"]["jobs_completed"] == 3


def test_numpy_numbers_and_zero_are_valid_env_arguments():
    """numpy scalars and the bounds themselves (cost_weight 0, penalty 0, one queue slot) are accepted."""
    env = gym.make(
        "GeoPipe-Toy-v0", cost_weight=np.float32(0.0), invalid_action_penalty=0, queue_slots=np.int64(1), max_regions=np.int32(2)
    ).unwrapped
    assert (env.cost_weight, env.invalid_action_penalty, env.queue_slots, env.max_regions) == (0.0, 0.0, 1, 2)
    assert type(env.queue_slots) is int and env.action_space.n == env.num_strategies + 1


def test_episode_percentiles_equal_numpys():
    """The metrics' percentiles are numpy's linear percentiles to the last bit, on sizes and ties like an episode's."""
    from geopipe_env.env import _percentiles

    rng = np.random.default_rng(7)
    for size in list(range(1, 12)) + [40, 97, 250]:
        for values in (rng.exponential(3.6e5, size), np.round(rng.exponential(10.0, size)), np.full(size, 2.5)):
            qs = (0, 50, 95, 100, float(rng.uniform(0, 100)))
            assert _percentiles(values, qs) == np.percentile(values, qs).tolist()


def test_slow_kernel_loading_is_announced_and_fast_loading_is_silent():
    """A compile (the first env on a machine) says what is going on once it passes the threshold, and how long it
    took; loading from the disk cache, under the threshold, prints nothing."""
    import io
    import time

    from geopipe_env.env import _notice_if_slow

    slow, fast = io.StringIO(), io.StringIO()
    with _notice_if_slow(0.05, "compiling", slow):
        time.sleep(0.3)
    with _notice_if_slow(5.0, "compiling", fast):
        pass
    lines = slow.getvalue().splitlines()
    assert lines[0] == "geopipe_env: compiling ..." and lines[1].startswith("geopipe_env: done in ")
    assert fast.getvalue() == ""


def test_price_forecast_feature_is_the_mean_of_the_next_hours():
    """The regions table's forecast column holds, per hour, each region's mean price over the next FORECAST_H
    hours (fewer at the end of the series), normalised across regions like the price now."""
    from geopipe_env.decision.observation import FORECAST_H
    from reference import normalise_prices as _normalise_prices

    env = gym.make("GeoPipe-v0").unwrapped
    env.reset(seed=4)
    price = env.world.price.values
    hours = price.shape[1]
    mean_ahead = np.stack([price[:, h:min(h + FORECAST_H, hours)].mean(axis=1) for h in range(hours)], axis=1)
    assert np.allclose(env.encoder._hourly[:, :, 1], _normalise_prices(mean_ahead).T, rtol=1e-6, atol=1e-7)
    assert np.allclose(env.encoder._hourly[:, :, 0], _normalise_prices(price).T, rtol=1e-6, atol=1e-7)


def test_hourly_features_kernel_equals_numpy():
    """The compiled hourly table equals the whole-array numpy computation (reference.hourly_features) bit for bit: on
    the built-in worlds, and
    on random series of 1 to 70 regions, with negative and zero prices and series shorter than the forecast."""
    import reference
    from geopipe_env.decision.observation import hourly_features
    from geopipe_env.physics.energy import HourlyIntegral

    cases = []
    for name in ("geopipe-v0", "paper", "toy"):
        world = sample_world(load_builtin(name), np.random.default_rng(3))
        cases.append((world.price, world.carbon.values, 7.5))
    rng = np.random.default_rng(12)
    for num_regions in [*range(1, 20), 33, 64, 70]:
        hours = int(rng.choice([1, 3, 6, 7, 50, 722]))
        price = rng.normal(0.1, 0.2, size=(num_regions, hours)) * rng.uniform(0.0, 3.0, size=(num_regions, 1))
        price[rng.random(price.shape) < 0.1] = 0.0
        cases.append((HourlyIntegral(price), rng.uniform(0.0, 900.0, size=(num_regions, hours)), rng.uniform(1.0, 500.0)))
    for series, carbon, scale in cases:
        got = np.empty((series.values.shape[1], series.values.shape[0], 3), dtype=np.float32)
        hourly_features(series.values, series.prefix_h, carbon, scale, got)
        want = reference.hourly_features(series.values, series.prefix_h, carbon, scale)
        assert np.array_equal(got, want)


def test_time_scale_gives_the_rewards_time_unit_in_the_observations():
    """The global ``time_scale`` is log(T_ref ÷ T_local) at every decision of an episode: the reward divides time by
    T_ref, the duration features by T_local, so a slow WAN (T_ref far above T_local) shows in it."""
    from geopipe_env.base.tables import G_TIME_SCALE

    scales = {}
    for name, kwargs in (("flagship", {}), ("slow WAN", {"scenario": "geopipe-v0-bw0.3"})):
        env = gym.make("GeoPipe-v0", **kwargs)
        obs, info = env.reset(seed=3)
        want = np.log(env.unwrapped.t_ref_s / env.unwrapped.t_local_s)
        rng = np.random.default_rng(0)
        for _ in range(20):
            assert obs["global"][G_TIME_SCALE] == pytest.approx(want, rel=1e-6)
            obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            if terminated or truncated:
                break
        scales[name] = want
    assert scales["slow WAN"] > scales["flagship"] > 0.0
