"""Resuming training after the process was stopped: Ctrl-C (SIGINT), SIGKILL and a truncated checkpoint.

Each stop is real: ``geopipe-train`` runs in its own process on the toy world and is signalled once the files a
stop is about exist. Saves are atomic (a temporary file renamed into place), so every file a stop leaves is whole.
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from conftest import finish, start_training, wait_for

from geopipe_agents import train_cli
from geopipe_agents.callbacks import checkpoints, replace_atomically
from geopipe_agents.training import TrainingInputError, resume_source, saved_num_timesteps

pytestmark = pytest.mark.filterwarnings("ignore::tqdm.TqdmExperimentalWarning")

ROOT = Path(__file__).resolve().parents[1]
TOY = "GeoPipe-Toy-v0"
# Small rollouts so that checkpoints and evaluations come within a second or two of training.
FAST = ["--env", TOY, "--eval-episodes", "1", "--verbose", "0", "--no-progress-bar", "--hyperparams", "n_steps=32", "batch_size=32", "n_epochs=1"]


def start(log_dir: Path, *args: str):
    """SB3 training on the toy world, with small rollouts, for far longer than any test waits."""
    return start_training(log_dir, *FAST, "--n-timesteps", "1000000", *args)


def resume(run: Path, log_dir: Path, *args: str) -> int:
    """``geopipe-train --resume run`` for 64 more timesteps, in this process (torch's thread count restored)."""
    threads = torch.get_num_threads()
    try:
        return train_cli.main(["--resume", str(run), "--n-timesteps", "64", "--no-progress-bar", "--verbose", "0", "--log-dir", str(log_dir), *args])
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory):
    """A run stopped by Ctrl-C once it wrote its third checkpoint: (run folder, exit code, stderr)."""
    log_dir = tmp_path_factory.mktemp("sigint")
    process = start(log_dir, "--eval-freq", "128", "--checkpoint-freq", "64", "--keep-checkpoints", "0")
    wait_for(process, lambda: len(checkpoints(log_dir / "run" / "checkpoints")) >= 3)
    os.killpg(process.pid, signal.SIGINT)
    return log_dir / "run", *finish(process)


def test_ctrl_c_saves_the_model_and_exits_130(interrupted_run):
    """Ctrl-C stops training with exit code 130 and one line, after saving model.zip at the step it stopped."""
    run, code, err = interrupted_run
    assert code == 130, err
    last = err.splitlines()[-1]  # lines before it, if any, are the kernel compile's notice in a fresh install
    assert last.startswith("geopipe-train: interrupted at") and "Traceback" not in err
    stopped_at = int(last.split("interrupted at ")[1].split()[0])
    newest = checkpoints(run / "checkpoints")[-1]
    assert saved_num_timesteps(run / "model.zip") == stopped_at >= saved_num_timesteps(newest)
    assert (run / "model_vecnormalize.pkl").is_file()
    assert not list(run.rglob(".*.tmp"))


def test_resume_keeps_the_runs_settings_unless_given_again(interrupted_run, tmp_path, capsys):
    """A resumed run continues from model.zip, keeps the resumed run's evaluation and checkpoint settings, and
    takes a setting given on its command line instead."""
    run, _, _ = interrupted_run
    assert resume(run, tmp_path, "--run-name", "kept", "--checkpoint-freq", "32") == 0
    assert f"resuming from {run / 'model.zip'} ({saved_num_timesteps(run / 'model.zip'):,} timesteps)" in capsys.readouterr().out
    args = yaml.safe_load((tmp_path / "kept" / "args.yml").read_text())
    assert (args["eval_freq"], args["eval_episodes"], args["keep_checkpoints"], args["checkpoint_freq"]) == (128, 1, 0, 32)
    assert saved_num_timesteps(tmp_path / "kept" / "model.zip") == saved_num_timesteps(run / "model.zip") + 64


def test_a_truncated_checkpoint_is_passed_over_with_one_line(interrupted_run, tmp_path):
    """Cut the newest checkpoint short (with model.zip and best_model.zip gone): resume takes the checkpoint before
    it and says so."""
    run = tmp_path / "copy"
    shutil.copytree(interrupted_run[0], run)
    (run / "model.zip").unlink()
    (run / "best_model.zip").unlink()
    *_, previous, newest = checkpoints(run / "checkpoints")
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])
    source = resume_source(run, needs_stats=True)
    assert source.path == previous and source.num_timesteps == saved_num_timesteps(previous)
    assert len(source.unreadable) == 1 and str(newest) in source.unreadable[0]
    assert "\n" not in source.describe() and "passed over, unreadable" in source.describe()
    stats = previous.with_name(previous.stem + "_vecnormalize.pkl")  # a model whose stats are cut short is unusable too
    stats.write_bytes(stats.read_bytes()[:10])
    assert resume_source(run, needs_stats=True).path == checkpoints(run / "checkpoints")[-3]
    assert resume(run, tmp_path) == 0


def test_sigkill_before_the_first_checkpoint_resumes_from_the_best_model(tmp_path, capsys):
    """SIGKILL after the first evaluation but before any checkpoint: no model.zip, no checkpoint, and resume
    continues from best_model.zip with one line saying so."""
    process = start(tmp_path, "--eval-freq", "64", "--checkpoint-freq", "1000000")
    run = tmp_path / "run"
    wait_for(process, lambda: (run / "best_model.zip").is_file())
    os.killpg(process.pid, signal.SIGKILL)
    assert finish(process)[0] == -signal.SIGKILL
    assert not (run / "model.zip").exists() and checkpoints(run / "checkpoints") == []
    best = saved_num_timesteps(run / "best_model.zip")
    assert resume(run, tmp_path, "--run-name", "resumed") == 0
    out = capsys.readouterr().out
    assert f"resuming from {run / 'best_model.zip'} ({best:,} timesteps)" in out
    assert saved_num_timesteps(tmp_path / "resumed" / "model.zip") == best + 64


def test_no_readable_model_is_one_clear_error(tmp_path):
    """A run folder whose only model is cut short cannot be resumed; the error names the file and why."""
    (tmp_path / "best_model.zip").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(TrainingInputError, match="no saved model to resume from.*best_model.zip.*not a Stable-Baselines3 model file"):
        resume_source(tmp_path, needs_stats=False)


def test_a_save_killed_midway_leaves_the_previous_file_whole(tmp_path):
    """SIGKILL while a file is being replaced leaves the old file as it was (and a hidden temporary file)."""
    target = tmp_path / "best_model.zip"
    target.write_bytes(b"old" * 1000)
    code = f"""
        import os, signal
        from pathlib import Path
        from geopipe_agents.callbacks import replace_atomically
        def write(temp):
            with open(temp, "wb") as f:
                f.write(b"new" * 500)
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        replace_atomically(write, Path({str(target)!r}))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert target.read_bytes() == b"old" * 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == [".best_model.zip.tmp", "best_model.zip"]
    replace_atomically(lambda temp: temp.write_bytes(b"new"), target)  # the next save takes the leftover's place
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["best_model.zip"]


def test_checkpoints_beyond_the_newest_kept_are_deleted(tmp_path):
    """--keep-checkpoints N keeps the newest N checkpoints with their stats (by timesteps, not by name)."""
    run = tmp_path / "run"
    threads = torch.get_num_threads()
    try:
        assert train_cli.main([*FAST, "--n-timesteps", "320", "--eval-freq", "0", "--checkpoint-freq", "32", "--keep-checkpoints", "2",
                               "--log-dir", str(tmp_path), "--run-name", "run"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert [p.name for p in checkpoints(run / "checkpoints")] == ["model_288_steps.zip", "model_320_steps.zip"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "model_288_steps.zip", "model_288_steps_vecnormalize.pkl", "model_320_steps.zip", "model_320_steps_vecnormalize.pkl"
    ]
