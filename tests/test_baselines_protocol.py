"""The policy protocol and the FCFS scripted baselines."""

import gymnasium as gym
import pytest

import geopipe_env  # noqa: F401
from geopipe_baselines import Policy, make_policy, policy_names


def _run(env_id, name, seed):
    """One episode of policy ``name`` on a registered env, or on a bundled scenario under GeoPipe-v0."""
    policy = make_policy(name)
    scenario = {} if env_id in gym.registry else {"scenario": env_id}
    env = gym.make("GeoPipe-v0" if scenario else env_id, **scenario, **policy.env_kwargs)
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    launched = []
    while True:
        action = policy.act(obs, info)
        assert info["action_mask"][action], f"{name} chose a masked action"
        if action != env.unwrapped.wait_action:
            launched.append(env.unwrapped.sim.waiting[action // env.unwrapped.num_strategies])
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return env.unwrapped, info["episode_metrics"], launched


@pytest.mark.parametrize("name", policy_names())
@pytest.mark.parametrize("env_id", ["GeoPipe-Toy-v0", "geopipe-abundant"])
def test_every_policy_finishes_without_invalid_actions(env_id, name):
    """Every scripted policy satisfies the protocol and finishes the episode with only valid actions (in worlds
    where every job fits one region, so that even the single-region policies can run them all)."""
    policy = make_policy(name)
    assert isinstance(policy, Policy)
    env, metrics, _ = _run(env_id, name, seed=3)
    assert metrics["invalid_actions"] == 0 and env.terminated
    assert metrics["jobs_completed"] == len(env.world.jobs)


@pytest.mark.parametrize("name", policy_names())
def test_every_policy_runs_the_flagship_without_invalid_actions(name):
    """On GeoPipe-v0, where some jobs are larger than any region, every scripted policy plays valid actions to the
    episode's end; the single-region ones (lcf, ldf) leave those jobs waiting to the horizon."""
    env, metrics, launched = _run("GeoPipe-v0", name, seed=3)
    assert metrics["invalid_actions"] == 0 and (env.terminated or env.truncated)
    largest = max(env.world.num_gpus)
    big = [j.job_id for j in env.world.jobs if j.num_gpus > largest]
    assert big
    if name in ("lcf", "ldf"):
        assert not set(big) & set(launched)


@pytest.mark.parametrize("name", ["ldf", "lcf", "cr-ldf", "cr-lcf"])
def test_fcfs_launches_in_arrival_order(name):
    """The paper's baselines launch jobs strictly in arrival order (FCFS)."""
    env, _, launched = _run("geopipe-abundant", name, seed=5)
    arrivals = [env.world.jobs[j].arrival_s for j in launched]
    assert arrivals == sorted(arrivals) and len(launched) == len(env.world.jobs)


def test_lcf_uses_the_cheapest_fitting_region():
    """LCF puts each job whole into the cheapest region that holds it at launch."""
    env = gym.make("GeoPipe-Paper-v0").unwrapped
    obs, info = env.reset(seed=0)
    policy = make_policy("lcf")
    policy.reset(env)
    action = policy.act(obs, info)
    placement = env.candidate(0, action % env.num_strategies).placement
    job = env.world.jobs[env.sim.waiting[0]]
    prices = env.world.price.at(0.0)
    fitting = [r for r in range(env.world.num_regions) if env.sim.free_gpus[r] >= job.num_gpus and job.fits[r]]
    assert placement.regions == (min(fitting, key=lambda r: prices[r]),)


def test_unknown_policy_name_is_a_clear_error():
    """make_policy names the valid choices when given an unknown name."""
    with pytest.raises(ValueError, match="cr-ldf"):
        make_policy("no-such-policy")


@pytest.mark.parametrize("name, close", [("bace_pipe", "bace-pipe"), ("SJF", "sjf"), ("price aware", "price-aware"), ("cr-ldff", "cr-ldf")])
def test_a_near_miss_policy_name_gets_a_did_you_mean(name, close):
    """Underscores, capitals, spaces and typos get the valid name offered, before the list of all names."""
    with pytest.raises(ValueError, match=rf"^unknown policy {name!r} \(did you mean {close!r}\?\); expected one of bace-pipe"):
        make_policy(name)


def test_policy_randomness_is_seeded_by_the_env():
    """fcfs-random gives the same episode for the same env seed, and does not consume the env's RNG."""
    a = _run("GeoPipe-v0", "fcfs-random", seed=11)[1]
    b = _run("GeoPipe-v0", "fcfs-random", seed=11)[1]
    assert a == b
    env = gym.make("GeoPipe-v0")
    env.reset(seed=1)
    before = env.unwrapped.np_random.bit_generator.state
    make_policy("fcfs-random").reset(env)
    assert env.unwrapped.np_random.bit_generator.state == before


def test_a_scripted_policy_reads_the_envs_strategy_order():
    """A scripted policy launches on the strategy it names in the env's own column, in an env whose strategies come
    in another order than the default; a strategy the env does not offer is one error naming it."""
    from geopipe_baselines.policy import FcfsPolicy
    from geopipe_env.decision.strategies import STRATEGY_NAMES

    order = tuple(reversed(STRATEGY_NAMES))
    env = gym.make("GeoPipe-v0", strategies=list(order)).unwrapped
    env.reset(seed=3)
    policy = FcfsPolicy("fastest")
    policy.reset(env)
    assert policy.action(0, "fastest") % env.num_strategies == order.index("fastest")
    assert policy.action(2, "bace-pipe") == 2 * env.num_strategies + order.index("bace-pipe")
    narrow = gym.make("GeoPipe-v0", strategies=["ldf", "lcf"]).unwrapped
    narrow.reset(seed=3)
    policy.reset(narrow)
    with pytest.raises(ValueError, match="fastest.*ldf, lcf"):
        policy.action(0, "fastest")
