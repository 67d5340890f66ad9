"""train.py --algo rllib_ppo and geopipe_agents.rllib: masked PPO on RLlib, its run folder, and its agents in the policy protocol."""

import csv
import os
import shutil
import signal
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml
from conftest import finish, load_script, start_training, wait_for

from geopipe_evaluation import ray_backend

ray_backend.prepare_environment()  # before ray is imported: 127.0.0.1 only, token auth, files in the temp folder
pytest.importorskip("ray.rllib")

import geopipe_env  # noqa: E402,F401
from geopipe_agents import ObservationSpaceMismatch, load_agent  # noqa: E402
from geopipe_agents import rllib_training  # noqa: E402
from geopipe_agents.callbacks import checkpoints, prune_checkpoints, replace_atomically  # noqa: E402
from geopipe_agents.rllib import MODULE_IN_CHECKPOINT, MaskedFlatObservation, RLlibAgentPolicy, RunFolderPPO, load_rllib_agent, make_masked_env  # noqa: E402
from geopipe_agents.training import TrainingInputError  # noqa: E402
from geopipe_baselines.policy import play_episode  # noqa: E402

train = load_script("train")
evaluate = load_script("evaluate")

TOY = "GeoPipe-Toy-v0"
HOME_FOLDERS = (Path.home() / "ray_results", Path.home() / ".ray")
ACTIONS_TAKEN: list[bool] = []  # whether each action an env runner took was valid, filled by _RecordValidity


class _RecordValidity(gym.Wrapper):
    """Records, before each step, whether the action is valid under the env's current mask."""

    def step(self, action):
        ACTIONS_TAKEN.append(bool(self.env.unwrapped.action_masks()[action]))
        return self.env.step(action)


def _recording_env(config):
    return MaskedFlatObservation(_RecordValidity(gym.make(config["env_id"], **config["env_kwargs"])))


def _home_entries() -> set[Path]:
    return {p for folder in HOME_FOLDERS if folder.is_dir() for p in folder.iterdir()} | {f for f in HOME_FOLDERS if f.exists()}


def test_one_iteration_never_takes_a_masked_action(tmp_path):
    """One PPO iteration on the toy world, where most actions are masked at every step, takes only valid actions."""
    from ray.tune.registry import register_env

    plan = rllib_training.plan_run(None, TOY, 0, {"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 2}, 1)
    ray_backend.connect(num_cpus=1, extra="rllib")
    try:
        register_env(rllib_training.ENV_NAME, _recording_env)
        algo = RunFolderPPO(config=rllib_training.build_config(plan), run_dir=tmp_path)
        try:
            result = algo.train()
        finally:
            algo.stop()
    finally:
        ray_backend.disconnect()
    assert result["num_env_steps_sampled_lifetime"] >= 128
    assert len(ACTIONS_TAKEN) >= 128 and all(ACTIONS_TAKEN), f"{ACTIONS_TAKEN.count(False)} masked actions taken"
    env = gym.make(TOY)
    env.reset(seed=0)
    assert env.unwrapped.action_masks().mean() < 0.5  # the check has teeth: a random action is usually masked


@pytest.fixture(scope="module")
def rllib_run(tmp_path_factory):
    """A toy run through train.py, with two evaluations and two checkpoints."""
    log_dir = tmp_path_factory.mktemp("runs")
    before = _home_entries()
    args = ["--algo", "rllib_ppo", "--env", TOY, "--n-timesteps", "128", "--eval-freq", "64", "--eval-episodes", "1", "--checkpoint-freq", "64"]
    assert train.main([*args, "--hyperparams", "train_batch_size=64", "--log-dir", str(log_dir), "--run-name", "rl", "--verbose", "0"]) == 0
    assert _home_entries() == before  # nothing new in ~/ray_results or ~/.ray
    return log_dir / "rl"


def test_run_folder_has_the_sb3_layout(rllib_run):
    """The run writes config, args, command, final and best models, checkpoints, evaluations, references and the curve."""
    for name in ("config.yml", "args.yml", "command.txt", "evaluations.csv", "reference_returns.csv", "learning_curve.png"):
        assert (rllib_run / name).is_file(), name
    for folder in ("model", "best_model", "checkpoints/model_64_steps", "checkpoints/model_128_steps", "tensorboard"):
        assert (rllib_run / folder).is_dir(), folder
    config = yaml.safe_load((rllib_run / "config.yml").read_text())
    assert config["train_batch_size"] == 64 and config["n_timesteps"] == 128
    with open(rllib_run / "evaluations.csv") as f:
        assert [int(r["timesteps"]) for r in csv.DictReader(f)] == [64, 128]


def test_trained_agent_finishes_an_episode_with_valid_actions(rllib_run):
    """load_agent reads an RLlib checkpoint folder; the policy plays a whole episode, every action valid under its mask."""
    policy = load_agent(rllib_run / "best_model")
    assert isinstance(policy, RLlibAgentPolicy) and policy.name == "best_model"
    env = gym.make(TOY)
    obs, info = env.reset(seed=1000)
    policy.reset(env)
    for _ in range(10_000):
        action = policy.act(obs, info)
        assert info["action_mask"][action]
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert terminated or truncated
    assert info["episode_metrics"]["invalid_actions"] == 0
    assert play_episode(env, policy, 1000)[0] == pytest.approx(play_episode(env, policy, 1000)[0])  # greedy: repeatable


def test_agent_refuses_another_observation_space(rllib_run):
    """An RLlib agent trained with 8 queue slots refuses an env with 4, naming both layouts."""
    policy = load_agent(rllib_run / "model")
    with pytest.raises(ObservationSpaceMismatch, match="queue_slots"):
        policy.reset(gym.make(TOY, queue_slots=4))


def test_evaluate_compares_the_rllib_agent(rllib_run, tmp_path, capsys):
    """evaluate.py takes the checkpoint folder as a policy and pairs its returns against the scripted ones."""
    argv = ["--env", TOY, "--policies", "bace-pipe", str(rllib_run / "best_model"), "--seeds", "2", "--workers", "1", "--out", str(tmp_path), "--no-plots"]
    assert evaluate.main(argv) == 0
    assert "paired return difference, best_model − policy" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hyperparams", "no_such_key=1"], "no_such_key"),
        (["--hyperparams", "num_env_runners=-1"], "num_env_runners"),
        (["--hyperparams", "fcnet_activation=sigmoid"], "fcnet_activation"),
        (["--seed", "999", "--hyperparams", "num_env_runners=2"], "held out"),
        (["--resume", "."], "not a training run folder"),
    ],
)
def test_bad_input_exits_2_before_writing(args, message, tmp_path, capsys):
    """Bad hyperparameters, training seeds that reach 1000, or --resume of a folder that is no run stop with exit
    code 2 and one line."""
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--algo", "rllib_ppo", "--env", TOY, *args, "--log-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_ray_address_needs_rllib(tmp_path, capsys):
    """--ray-address with an SB3 algorithm is refused."""
    with pytest.raises(SystemExit):
        train.main(["--env", TOY, "--ray-address", "127.0.0.1:6379", "--log-dir", str(tmp_path)])
    assert "--ray-address needs --algo rllib_ppo" in capsys.readouterr().err


def test_masked_layout_matches_the_env():
    """The wrapper's observations lie in its space: the mask as float32 and the boxes flattened."""
    env = MaskedFlatObservation(gym.make(TOY))
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    np.testing.assert_array_equal(obs["action_mask"], info["action_mask"].astype(np.float32))


# ---------------------------------------------------------------------------------------------------- resume
def _resume(run: Path, log_dir: Path, *args: str) -> int:
    return train.main(["--resume", str(run), "--n-timesteps", "64", "--verbose", "0", "--log-dir", str(log_dir), *args])


def test_resume_continues_the_run_with_its_settings(rllib_run, tmp_path, capsys):
    """--resume continues from model/ with one line, counts env steps on from it, and keeps the run's settings."""
    assert _resume(rllib_run, tmp_path, "--run-name", "resumed") == 0
    assert f"resuming from {rllib_run / 'model'} (128 timesteps)" in capsys.readouterr().out
    resumed = tmp_path / "resumed"
    assert rllib_training.saved_env_steps(resumed / "model") == 192
    assert [p.name for p in checkpoints(resumed / "checkpoints", suffix="")] == ["model_192_steps"]
    args = yaml.safe_load((resumed / "args.yml").read_text())
    assert (args["algo"], args["eval_freq"], args["checkpoint_freq"], args["resume_model"]) == ("rllib_ppo", 64, 64, str(rllib_run / "model"))
    assert yaml.safe_load((resumed / "config.yml").read_text())["train_batch_size"] == 64
    with open(resumed / "evaluations.csv") as f:
        assert [int(r["timesteps"]) for r in csv.DictReader(f)] == [192]


@pytest.mark.parametrize(("args", "message"), [
    (["--hyperparams", "fcnet_hiddens=[8]"], "fcnet_hiddens is fixed by the saved model"),
    (["--algo", "ppo"], "that run used --algo rllib_ppo, not ppo"),
    (["--env", "GeoPipe-v0"], f"that run used --env {TOY}, not GeoPipe-v0"),
])
def test_resume_refuses_what_the_checkpoint_fixes(rllib_run, tmp_path, capsys, args, message):
    """A resumed RLlib run keeps its module's shape, algorithm and env: asking for others exits 2 with one line."""
    with pytest.raises(SystemExit) as exit_info:
        _resume(rllib_run, tmp_path, *args)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and message in err and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_restore_takes_the_saved_weights(rllib_run):
    """The resumed algorithm starts from the checkpoint's module weights and env step count, not from fresh ones."""
    import torch
    from ray.tune.registry import register_env

    plan = rllib_training.plan_run(None, None, 0, {"n_timesteps": 64}, 1, resume=rllib_run)
    saved = load_rllib_agent(plan.resume.path).module.state_dict()
    ray_backend.connect(num_cpus=1, extra="rllib")
    try:
        register_env(rllib_training.ENV_NAME, make_masked_env)
        algo = RunFolderPPO(config=rllib_training.build_config(plan), run_dir=None)
        try:
            fresh = {k: v.clone() for k, v in algo.get_module().state_dict().items()}
            algo.restore_from_path(str(plan.resume.path.resolve()))
            restored = algo.get_module().state_dict()
        finally:
            algo.stop()
    finally:
        ray_backend.disconnect()
    assert restored and restored.keys() <= saved.keys()  # the sampling module: the saved one less its value network
    assert all(torch.equal(torch.as_tensor(restored[k]), torch.as_tensor(saved[k])) for k in restored)
    assert not all(torch.equal(torch.as_tensor(fresh[k]), torch.as_tensor(saved[k])) for k in restored)


def test_resume_passes_over_a_checkpoint_cut_short(rllib_run, tmp_path):
    """With model/ and best_model/ gone and the newest checkpoint's weights cut short, resume takes the checkpoint
    before it and says why in one line; with only a replaced best_model/'s whole old copy left, it takes that."""
    run = tmp_path / "copy"
    shutil.copytree(rllib_run, run)
    shutil.rmtree(run / "model")
    *_, previous, newest = checkpoints(run / "checkpoints", suffix="")
    weights = newest / MODULE_IN_CHECKPOINT / "module_state.pkl"
    weights.write_bytes(weights.read_bytes()[:1000])
    (run / "best_model").rename(run / ".best_model.old")  # a replacement killed between its two renames
    source = rllib_training.resume_source(run)
    assert (source.path, source.num_timesteps) == (previous, 64)
    assert len(source.unreadable) == 1 and f"{newest} (its {weights.relative_to(newest)} is unreadable" in source.describe()
    for folder in checkpoints(run / "checkpoints", suffix=""):
        shutil.rmtree(folder)
    assert rllib_training.resume_source(run).path == run / ".best_model.old"
    shutil.rmtree(run / ".best_model.old")
    with pytest.raises(TrainingInputError, match="no saved model to resume from"):
        rllib_training.resume_source(run)


def test_a_folder_save_killed_midway_keeps_the_old_folder(tmp_path):
    """A checkpoint folder replaced by a save that fails partway keeps its old content; the next save replaces it whole."""
    target = tmp_path / "model"
    target.mkdir()
    (target / "state.pkl").write_bytes(b"old")

    def fail_partway(temp: Path) -> None:
        temp.mkdir()
        (temp / "state.pkl").write_bytes(b"new, cut")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replace_atomically(fail_partway, target)
    assert [p.name for p in tmp_path.iterdir()] == ["model"] and (target / "state.pkl").read_bytes() == b"old"

    def write(temp: Path) -> None:
        temp.mkdir()
        (temp / "state.pkl").write_bytes(b"new")

    replace_atomically(write, target)
    assert [p.name for p in tmp_path.iterdir()] == ["model"] and (target / "state.pkl").read_bytes() == b"new"


def test_keep_checkpoints_deletes_the_oldest_folders(tmp_path):
    """--keep-checkpoints N keeps the newest N checkpoint folders, by the env steps in their names, and nothing else."""
    for steps in (64, 128, 640, 1280):
        (tmp_path / f"model_{steps}_steps").mkdir()
    (tmp_path / "model_9_steps.zip").write_bytes(b"")  # an SB3 checkpoint is not an RLlib one
    prune_checkpoints(tmp_path, keep=2, suffix="")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_1280_steps", "model_640_steps", "model_9_steps.zip"]


RLLIB_RUN = ["--algo", "rllib_ppo", "--env", TOY, "--n-timesteps", "1000000", "--eval-episodes", "1", "--verbose", "0",
             "--hyperparams", "train_batch_size=64"]


def test_ctrl_c_saves_the_model_and_exits_130(tmp_path):
    """Ctrl-C stops an RLlib training process with exit code 130 and one line, after saving model/ at the step it
    stopped; no save is left half-written."""
    process = start_training(tmp_path, *RLLIB_RUN, "--eval-freq", "128", "--checkpoint-freq", "64")
    run = tmp_path / "run"
    wait_for(process, lambda: len(checkpoints(run / "checkpoints", suffix="")) >= 2)
    os.killpg(process.pid, signal.SIGINT)
    code, err = finish(process)
    assert code == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("geopipe-train: interrupted at") and "Traceback" not in err
    stopped_at = int(last.split("interrupted at ")[1].split()[0])
    assert rllib_training.saved_env_steps(run / "model") == stopped_at >= rllib_training.saved_env_steps(checkpoints(run / "checkpoints", suffix="")[-1])
    assert not [p for p in run.rglob(".*") if p.name.endswith((".tmp", ".old"))]


def test_sigkill_before_the_first_checkpoint_resumes_from_the_best_model(tmp_path, capsys):
    """SIGKILL after the first evaluation but before any checkpoint: resume continues from best_model/."""
    process = start_training(tmp_path, *RLLIB_RUN, "--eval-freq", "64", "--checkpoint-freq", "1000000")
    run = tmp_path / "run"
    wait_for(process, lambda: (run / "best_model").is_dir())
    os.killpg(process.pid, signal.SIGKILL)
    assert finish(process)[0] == -signal.SIGKILL
    assert not (run / "model").exists() and checkpoints(run / "checkpoints", suffix="") == []
    best = rllib_training.saved_env_steps(run / "best_model")
    assert _resume(run, tmp_path, "--run-name", "resumed") == 0
    assert f"resuming from {run / 'best_model'} ({best:,} timesteps)" in capsys.readouterr().out
    assert rllib_training.saved_env_steps(tmp_path / "resumed" / "model") == best + 64
