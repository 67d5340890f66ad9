"""geopipe_agents.policies.CandidateScoringPolicy: one shared scorer per candidate row, trainable and loadable."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import load_script

import geopipe_env  # noqa: F401
from geopipe_agents import load_agent
from geopipe_agents.policies import CandidateScoringPolicy
from geopipe_baselines.policy import ScriptedPolicy, WaitCounter, play_episode
from geopipe_env.decision.observation import CANDIDATE_FEATURES, QUEUE_FEATURES

train = load_script("train")


def _policy(env) -> CandidateScoringPolicy:
    torch.manual_seed(0)
    return CandidateScoringPolicy(env.observation_space, env.action_space, lambda _: 3e-4)


def _swap_slots(obs: dict, a: int, b: int, k: int) -> dict:
    """The observation with queue slots a and b (their queue rows and their K candidate rows) exchanged."""
    out = {key: value.copy() for key, value in obs.items()}
    queue = out["queue"].reshape(-1, len(QUEUE_FEATURES))
    cand = out["candidates"].reshape(-1, k, len(CANDIDATE_FEATURES))
    queue[[a, b]] = queue[[b, a]]
    cand[[a, b]] = cand[[b, a]]
    return out


def test_logits_follow_the_slots():
    """Swapping two queue slots swaps their K logits and leaves every other logit unchanged (shared scorer,
    pooled context)."""
    env = gym.make("GeoPipe-v0").unwrapped
    obs, _ = env.reset(seed=3)
    k = env.num_strategies
    policy = _policy(env)
    # Give the scorer non-trivial output weights (its initial ones are near zero on purpose).
    torch.nn.init.normal_(policy.action_net.score[-1].weight)

    def logits(o):
        tensor, _ = policy.obs_to_tensor(o)
        with torch.no_grad():
            return policy.action_net(policy.extract_features(tensor)).numpy()[0]

    before, after = logits(obs), logits(_swap_slots(obs, 0, 1, k))
    assert not np.allclose(before[:k], before[k : 2 * k])  # the two slots differ, so the check means something
    np.testing.assert_allclose(after[:k], before[k : 2 * k], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(after[k : 2 * k], before[:k], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(after[2 * k :], before[2 * k :], rtol=1e-5, atol=1e-6)


def test_masked_actions_get_no_probability():
    """MaskablePPO's masks apply to the scorer's logits: only valid actions are ever chosen."""
    env = gym.make("GeoPipe-v0").unwrapped
    obs, info = env.reset(seed=4)
    policy = _policy(env)
    tensor, _ = policy.obs_to_tensor(obs)
    dist = policy.get_distribution(tensor, action_masks=info["action_mask"][None])
    probs = dist.distribution.probs.detach().numpy()[0]
    assert probs[~info["action_mask"]].max(initial=0.0) == 0.0 and probs.sum() == pytest.approx(1.0)


def test_train_load_and_play_with_the_scoring_policy(tmp_path):
    """train.py trains it from the hyperparameter name; load_agent restores it and plays the toy with valid actions."""
    threads = torch.get_num_threads()
    args = ["--env", "GeoPipe-Toy-v0", "--n-timesteps", "128", "--eval-freq", "0", "--checkpoint-freq", "0",
            "--hyperparams", "policy=CandidateScoringPolicy", "--verbose", "0", "--no-progress-bar",
            "--log-dir", str(tmp_path), "--run-name", "cs"]
    try:
        assert train.main(args) == 0
    finally:
        torch.set_num_threads(threads)
    agent = load_agent(tmp_path / "cs" / "model.zip")
    assert isinstance(agent.model.policy, CandidateScoringPolicy)
    _, info = play_episode(gym.make("GeoPipe-Toy-v0"), agent, 1000)  # 128 steps teach little: only validity counts
    assert info["episode_metrics"]["invalid_actions"] == 0


def test_plain_ppo_cannot_use_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--algo", "ppo", "--hyperparams", "policy=CandidateScoringPolicy", "--log-dir", str(tmp_path)])
    assert exit_info.value.code == 2 and "needs --algo maskable_ppo" in capsys.readouterr().err


def test_deterministic_play_takes_the_mode_of_the_decision():
    """With launch probability spread over many actions, the argmax over all actions is wait although launching is
    the likelier decision; deterministic play launches (the most probable launch), and waits only when wait holds
    at least half the probability."""
    env = gym.make("GeoPipe-v0").unwrapped
    obs, info = env.reset(seed=5)
    mask = info["action_mask"]
    valid_launches = int(mask[:-1].sum())
    assert valid_launches >= 3
    policy = _policy(env)
    with torch.no_grad():  # every launch logit 0, wait's logit set so that P(wait) = p
        policy.action_net.score[-1].weight.zero_()
        policy.action_net.score[-1].bias.zero_()
        policy.action_net.wait.weight.zero_()
    tensor, _ = policy.obs_to_tensor(obs)
    for p_wait, expect_wait in ((0.3, False), (0.6, True)):
        with torch.no_grad():
            policy.action_net.wait.bias.fill_(float(np.log(p_wait / (1 - p_wait))))
            probs = policy.get_distribution(tensor, action_masks=mask[None]).distribution.probs[0].numpy()
        assert probs[-1] == pytest.approx(p_wait, rel=1e-4)
        assert int(np.argmax(probs)) == env.wait_action  # the plain mode waits in both cases
        action, _ = policy.predict(obs, action_masks=mask, deterministic=True)
        assert (int(action) == env.wait_action) == expect_wait
        assert mask[int(action)]


def test_wait_competes_with_the_best_launch_not_their_sum():
    """P(wait) depends on the best valid launch's score, not on how many launches share it: hiding all but one of
    equal-scoring launches leaves P(wait) as it was (a flat softmax would raise it with their count), and the
    launches share the rest in proportion to exp(score); masked rows get no probability."""
    env = gym.make("GeoPipe-v0").unwrapped
    obs, info = env.reset(seed=5)
    mask = info["action_mask"]
    launches = np.flatnonzero(mask[:-1])
    assert launches.size >= 3
    candidates = obs["candidates"].reshape(mask.size - 1, -1)
    assert np.array_equal(candidates[:, 0] > 0.5, mask[:-1])  # the feasible feature is the launch mask
    policy = _policy(env)
    with torch.no_grad():
        policy.action_net.score[-1].weight.zero_()
        policy.action_net.score[-1].bias.zero_()
        policy.action_net.wait.weight.zero_()
        policy.action_net.wait.bias.fill_(0.5)
    waits = []
    for kept in (launches, launches[:1]):
        obs_k = {key: value.copy() for key, value in obs.items()}
        rows = obs_k["candidates"].reshape(mask.size - 1, -1)
        hidden = np.setdiff1d(launches, kept)
        rows[hidden, 0] = 0.0
        mask_k = mask.copy()
        mask_k[hidden] = False
        tensor, _ = policy.obs_to_tensor(obs_k)
        with torch.no_grad():
            probs = policy.get_distribution(tensor, action_masks=mask_k[None]).distribution.probs[0].numpy()
        assert probs[~mask_k].sum() == 0.0
        assert probs[kept] == pytest.approx((1.0 - probs[-1]) / kept.size, rel=1e-5)
        waits.append(probs[-1])
    assert waits[0] == pytest.approx(waits[1], rel=1e-5)
    assert waits[0] == pytest.approx(1.0 / (1.0 + np.exp(-0.5)), rel=1e-5)


def test_valid_launches_are_read_from_normalised_observations_too():
    """With VecNormalize's observation statistics the feasible column is (x − mean) / std, not 0 or 1: a mean of 0.9
    and a std of 0.3 (most candidates feasible) put a valid row at 0.33. P(wait) still competes with the best valid
    score (here 2 for every row): sigmoid(0.5 − 2), not the sigmoid(0.5) of a state with no valid launch."""
    env = gym.make("GeoPipe-v0").unwrapped
    obs, info = env.reset(seed=5)
    policy = _policy(env)
    with torch.no_grad():
        policy.action_net.score[-1].weight.zero_()
        policy.action_net.score[-1].bias.fill_(2.0)
        policy.action_net.wait.weight.zero_()
        policy.action_net.wait.bias.fill_(0.5)
    rows = obs["candidates"].reshape(info["action_mask"].size - 1, -1)
    rows[:, 0] = (rows[:, 0] - 0.9) / 0.3
    tensor, _ = policy.obs_to_tensor(obs)
    with torch.no_grad():
        probs = policy.get_distribution(tensor, action_masks=info["action_mask"][None]).distribution.probs[0].numpy()
    assert probs[-1] == pytest.approx(1.0 / (1.0 + np.exp(1.5)), rel=1e-5)


def test_a_short_default_run_does_not_collapse_to_waiting(tmp_path):
    """A few thousand steps of the default GeoPipe-v0 hyperparameters give a deterministic agent that launches:
    it waits at under half of the decisions where it could launch, and scores far above waiting throughout."""
    threads = torch.get_num_threads()
    args = ["--env", "GeoPipe-v0", "--n-timesteps", "4096", "--eval-freq", "0", "--checkpoint-freq", "0",
            "--verbose", "0", "--no-progress-bar", "--log-dir", str(tmp_path), "--run-name", "young"]
    try:
        assert train.main(args) == 0
    finally:
        torch.set_num_threads(threads)
    agent = load_agent(tmp_path / "young" / "model.zip")

    class AlwaysWait(ScriptedPolicy):
        def choose(self, mask):
            return self.env.wait_action

    for seed in (1000, 1001):
        counted = WaitCounter(agent)
        agent_return, _ = play_episode(gym.make("GeoPipe-v0"), counted, seed)
        wait_return, _ = play_episode(gym.make("GeoPipe-v0"), AlwaysWait(), seed)
        assert counted.waited < 0.5 * counted.could
        assert agent_return > 0.5 * wait_return  # returns are negative: at least twice as good as waiting
