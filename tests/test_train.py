"""train.py and geopipe_agents.training / geopipe_agents.callbacks: run folders, saved agents, resume, held-out evaluation, bad input."""

import csv
import math

import gymnasium as gym
import numpy as np
import pytest
from conftest import load_script
import torch
import yaml
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import geopipe_env  # noqa: F401
from geopipe_agents import learning_curve, load_agent, training
from geopipe_agents.learning_curve import read_references
from geopipe_baselines import make_policy
from geopipe_baselines.policy import play_episode
from geopipe_agents.training import (
    ALGOS,
    HYPERPARAM_KEYS,
    check_hyperparams,
    hyperparams_file,
    load_hyperparams,
    make_vec_env,
    parse_overrides,
    resume_source,
    saved_num_timesteps,
)

train = load_script("train")

pytestmark = pytest.mark.filterwarnings("ignore::tqdm.TqdmExperimentalWarning")  # SB3's rich progress bar

TOY = "GeoPipe-Toy-v0"
SMOKE_ARGS = ["--env", TOY, "--n-timesteps", "256", "--eval-freq", "128", "--eval-episodes", "1", "--checkpoint-freq", "128", "--verbose", "0"]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One toy MaskablePPO run shared by the tests below (torch's thread count restored afterwards)."""
    threads = torch.get_num_threads()
    log_dir = tmp_path_factory.mktemp("runs")
    try:
        assert train.main([*SMOKE_ARGS, "--log-dir", str(log_dir), "--run-name", "smoke"]) == 0
    finally:
        torch.set_num_threads(threads)
    return log_dir / "smoke"


def test_smoke_run_writes_its_folder(smoke_run):
    """A toy run writes the models with their normalisation stats, config, args, command, evaluations and checkpoints."""
    for name in ("model.zip", "model_vecnormalize.pkl", "best_model.zip", "best_model_vecnormalize.pkl", "config.yml", "args.yml", "command.txt"):
        assert (smoke_run / name).is_file(), name
    for steps in (128, 256):
        assert (smoke_run / "checkpoints" / f"model_{steps}_steps.zip").is_file()
        assert (smoke_run / "checkpoints" / f"model_{steps}_steps_vecnormalize.pkl").is_file()
    config = yaml.safe_load((smoke_run / "config.yml").read_text())
    assert config["n_timesteps"] == 256 and config["n_steps"] == 64 and set(config) <= set(HYPERPARAM_KEYS)
    args = yaml.safe_load((smoke_run / "args.yml").read_text())
    assert args["algo"] == "maskable_ppo" and args["env"] == TOY
    assert (smoke_run / "command.txt").read_text().startswith("python train.py --env GeoPipe-Toy-v0")
    with open(smoke_run / "evaluations.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["timesteps"]) for r in rows] == [128, 256]
    assert all(math.isfinite(float(r["mean_return"])) and float(r["mean_total_cost_usd"]) > 0 for r in rows)


def test_learning_curve_has_the_scripted_references(smoke_run):
    """bace-pipe and sjf play the evaluation seeds once; their returns are those of a direct play, and the curve
    is drawn as a PNG."""
    references = read_references(smoke_run)
    assert list(references) == ["bace-pipe", "sjf"]
    env = gym.make(TOY)
    direct, _ = play_episode(env, make_policy("bace-pipe"), 1000)  # SMOKE_ARGS: one evaluation seed, 1000
    assert references["bace-pipe"] == pytest.approx(direct, abs=1e-9)
    png = (smoke_run / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    out = smoke_run / "redrawn.png"
    assert learning_curve.main([str(smoke_run), "--out", str(out)]) == 0 and out.is_file()


def test_learning_curve_references_can_be_replaced(smoke_run, tmp_path):
    """--references plays the named policies (rollout, and one that needs extra candidate strategies) on the run's env
    and seeds and draws them."""
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(smoke_run, run)
    assert learning_curve.main([str(run), "--references", "bace-pipe-no-pathfinder", "rollout", "--out", str(tmp_path / "c.png")]) == 0
    references = read_references(run)
    assert list(references) == ["bace-pipe-no-pathfinder", "rollout"]
    direct, _ = play_episode(gym.make(TOY), make_policy("rollout"), 1000)
    assert references["rollout"] == pytest.approx(direct, abs=1e-9) and math.isfinite(references["bace-pipe-no-pathfinder"])


def test_tensorboard_holds_geopipe_metrics(smoke_run):
    """The TensorBoard events carry SB3's scalars and the episode metrics under geopipe/."""
    events = EventAccumulator(str(smoke_run / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert any(t.startswith("geopipe/") for t in tags), tags
    assert "geopipe/avg_jct_h" in tags and "rollout/ep_rew_mean" in tags and "eval/mean_return" in tags


def test_saved_model_loads_and_acts_validly(smoke_run):
    """model.zip loads with geopipe_agents.load_agent (with its stats) and finishes a toy episode with only valid actions."""
    agent = load_agent(smoke_run / "model.zip")
    assert agent.obs_normalizer is not None
    env = gym.make(TOY)
    obs, info = env.reset(seed=1000)
    agent.reset(env)
    while True:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        if terminated or truncated:
            break
    assert info["episode_metrics"]["invalid_actions"] == 0
    assert info["episode_metrics"]["jobs_completed"] == 3


def test_resume_continues_the_timestep_count(smoke_run, tmp_path):
    """Resuming a run loads its latest model and stats and keeps counting timesteps in a new run folder."""
    source = resume_source(smoke_run, needs_stats=True)
    assert source.path == smoke_run / "model.zip" and source.unreadable == ()  # ties with the 256-step checkpoint go to model.zip
    first = saved_num_timesteps(smoke_run / "model.zip")
    args = ["--resume", str(smoke_run), "--n-timesteps", "64", "--eval-freq", "0", "--checkpoint-freq", "0", "--verbose", "0", "--no-progress-bar"]
    threads = torch.get_num_threads()
    try:
        assert train.main([*args, "--log-dir", str(tmp_path), "--run-name", "resumed"]) == 0
    finally:
        torch.set_num_threads(threads)
    resumed = tmp_path / "resumed"
    assert saved_num_timesteps(resumed / "model.zip") == first + 64
    assert (resumed / "model_vecnormalize.pkl").is_file()
    assert yaml.safe_load((resumed / "args.yml").read_text())["resume_model"] == str(smoke_run / "model.zip")


def test_plain_ppo_run_evaluates_and_saves(tmp_path):
    """--algo ppo trains, evaluates on a held-out seed and saves a model that load_agent runs as plain PPO."""
    threads = torch.get_num_threads()
    args = ["--algo", "ppo", "--env", TOY, "--n-timesteps", "64", "--eval-freq", "64", "--eval-episodes", "1", "--checkpoint-freq", "0"]
    try:
        assert train.main([*args, "--verbose", "0", "--no-progress-bar", "--log-dir", str(tmp_path), "--run-name", "ppo"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert (tmp_path / "ppo" / "best_model.zip").is_file() and (tmp_path / "ppo" / "evaluations.csv").is_file()
    assert type(load_agent(tmp_path / "ppo" / "model.zip").model).__name__ == "PPO"


def test_a_run_with_a_decaying_learning_rate_ends_at_zero(tmp_path):
    """learning_rate=lin_1e-3 trains with the rate falling to 0 over the run: the last update's rate is 0, and the
    run's config.yml keeps the schedule as written."""
    threads = torch.get_num_threads()
    args = ["--env", TOY, "--n-timesteps", "128", "--eval-freq", "0", "--checkpoint-freq", "0", "--hyperparams",
            "learning_rate=lin_1e-3"]
    try:
        assert train.main([*args, "--verbose", "0", "--no-progress-bar", "--log-dir", str(tmp_path), "--run-name", "lin"]) == 0
    finally:
        torch.set_num_threads(threads)
    model = load_agent(tmp_path / "lin" / "model.zip").model
    assert [group["lr"] for group in model.policy.optimizer.param_groups] == [0.0]
    assert model.lr_schedule(1.0) == 1e-3
    assert yaml.safe_load((tmp_path / "lin" / "config.yml").read_text())["learning_rate"] == "lin_1e-3"


@pytest.mark.parametrize("vec_env, cls", [("dummy", DummyVecEnv), ("subproc", SubprocVecEnv)])
def test_vector_envs_are_seeded_seed_plus_i(vec_env, cls):
    """n_envs envs in this process (default) or in SubprocVecEnv workers (module-qualified id), env i seeded seed + i,
    with masks."""
    hyperparams = load_hyperparams("maskable_ppo", "GeoPipe-v0", {"n_envs": 2, "normalize": False, "vec_env": vec_env})
    venv = make_vec_env("GeoPipe-v0", hyperparams, seed=5)
    try:
        assert isinstance(venv, cls)
        obs = venv.reset()
        masks = np.stack(venv.env_method("action_masks"))
    finally:
        venv.close()
    singles = [gym.make("GeoPipe-v0", **hyperparams["env_kwargs"]).reset(seed=seed) for seed in (5, 6)]
    for i, (single_obs, single_info) in enumerate(singles):
        for key, value in single_obs.items():
            np.testing.assert_array_equal(obs[key][i], value)
        np.testing.assert_array_equal(masks[i], single_info["action_mask"])
    assert any(not np.array_equal(singles[0][0][k], singles[1][0][k]) for k in singles[0][0])  # seeds 5 and 6 differ


@pytest.mark.parametrize(
    "args, message",
    [
        (["--algo", "nope"], "invalid choice"),
        (["--hyperparams", "no_such_key=1"], "unknown hyperparameter(s) no_such_key"),
        (["--hyperparams", "n_steps=0"], "n_steps"),
        (["--hyperparams", "vec_env=threads"], "vec_env"),
        (["--env", "NoSuch-v0"], "NoSuch"),
        (["--hyperparams", "env_kwargs={scenario: no-such-file.yaml}"], "no-such-file.yaml"),
        (["--seed", "999", "--hyperparams", "n_envs=2"], "held out"),
        (["--resume", "no-such-run"], "no such run folder"),
        (["--eval-seed-start", "999"], "must be held out"),
        (["--hyperparams", "policy=CnnPolicy"], "You must use `MultiInputPolicy`"),
        (["--hyperparams", "env_kwargs={queue_slots: 0}"], "queue_slots: got 0; expected an integer >= 1"),
        (["--hyperparams", "policy_kwargs={net_arch: [64], no_such_kwarg: 1}"], "no_such_kwarg"),
        (["--hyperparams", "normalize={norm_obs_keys: [no_such_key]}"], "KeyError: 'no_such_key'"),
        (["--hyperparams", "learning_rate=lin_fast"], "lin_<number>"),
        (["--hyperparams", "gamma=lin_0.99"], "gamma: got 'lin_0.99'; expected a finite number >= 0"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message, tmp_path, capsys):
    """Bad input, including hyperparameters the model cannot be built from, stops before any run folder is made,
    with a one-line message and exit code 2."""
    with pytest.raises(SystemExit) as exit_info:
        train.main([*args, "--log-dir", str(tmp_path / "runs")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("algo", list(ALGOS))
def test_hyperparameter_files_are_valid(algo):
    """Every entry of hyperparams/<algo>.yml passes the checks, and the toy entry is tiny."""
    table = yaml.safe_load(hyperparams_file(algo).read_text())
    assert {"default", "GeoPipe-v0", TOY} <= set(table)
    for entry in table.values():
        check_hyperparams(entry)
    assert table[TOY]["n_envs"] == 1 and table[TOY]["n_timesteps"] <= 256


def test_a_learning_rate_can_decay_linearly_to_zero():
    """``lin_<number>`` (rl-baselines3-zoo's notation) is a schedule from that value at the start to 0 at the end;
    a plain number stays a constant."""
    hp = check_hyperparams({"n_timesteps": 100, "learning_rate": "lin_1e-3", "clip_range": "lin_0.2"})
    assert hp["learning_rate"] == "lin_1e-3"  # kept as written, so the run's config.yml reads back the same
    kwargs = training.model_kwargs(hp)
    assert kwargs["learning_rate"](1.0) == 1e-3 and kwargs["learning_rate"](0.25) == 0.25e-3
    assert kwargs["clip_range"](0.5) == 0.1
    assert training.model_kwargs(check_hyperparams({"n_timesteps": 100, "learning_rate": 3e-4}))["learning_rate"] == 3e-4


def test_overrides_are_native_yaml():
    """--hyperparams values are read as YAML, with 3e-4 and 1e6 as numbers."""
    overrides = parse_overrides(["learning_rate=3e-4", "n_timesteps=1e6", "normalize=false", "policy_kwargs={net_arch: [64, 64]}"])
    assert overrides == {"learning_rate": 3e-4, "n_timesteps": 1e6, "normalize": False, "policy_kwargs": {"net_arch": [64, 64]}}
