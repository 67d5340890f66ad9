"""Shared helpers for the test suite, the hypothesis profiles and the property-test tally.

Hypothesis profiles: ``ci`` (the default, 40 worlds) and ``thorough`` (500 worlds), chosen with the
``HYPOTHESIS_PROFILE`` environment variable, e.g. ``HYPOTHESIS_PROFILE=thorough python -m pytest
tests/test_properties.py``. The terminal summary reports how many worlds, steps and invalid actions the property
test tried.
"""

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# The suite counts executor runs, which a machine's timing store (geopipe_env.base.caches.DiskStore, turned on by
# GEOPIPE_TIMING_STORE) would answer from earlier runs: it is off here whatever the shell says, and
# tests/test_timing_memo.py turns it on in a folder of its own.
os.environ["GEOPIPE_TIMING_STORE"] = "off"

# The benchmark scripts import as the package ``benchmarks`` of the checkout (``python -m pytest`` puts the current
# folder on sys.path; a bare ``pytest`` from elsewhere does not).
_CHECKOUT = str(Path(__file__).resolve().parents[1])
if _CHECKOUT not in sys.path:
    sys.path.insert(0, _CHECKOUT)

settings.register_profile("ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Filled by tests/test_properties.py: worlds, steps, invalid actions, ended episodes (one per world checked).
PROPERTY_TALLY: Counter = Counter()


def pytest_terminal_summary(terminalreporter):
    if PROPERTY_TALLY["worlds"]:
        t = PROPERTY_TALLY
        terminalreporter.write_line(
            f"property test: {t['worlds']:,} random worlds, {t['steps']:,} steps ({t['invalid']:,} invalid actions sent), "
            f"{t['jobs_done']:,} jobs finished, {t['interruptions']:,} interrupted by a failure or a capacity loss; "
            "every invariant "
            "checked at every step"
        )


def readme_link_targets() -> list[str]:
    """The relative link and image targets of README.md (anchors dropped; absolute URLs left out)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    return re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# subprocess.Popen keywords that start a child as a terminal's foreground job: its own process group, with Ctrl-C's
# default action, which Python turns into KeyboardInterrupt (a test run in the background of a shell inherits SIGINT
# ignored, and the child would never see the Ctrl-C a test sends it).
FOREGROUND_JOB = {"start_new_session": True, "preexec_fn": _default_sigint}
TRAINING_START_TIMEOUT_S = 300.0  # the first gym.make of a fresh install compiles the kernels (about a minute, more on a busy machine)
TRAINING_STOP_TIMEOUT_S = 60.0


def start_training(log_dir: Path, *args: str) -> subprocess.Popen:
    """``geopipe-train ARGS`` writing ``log_dir/run``, as a terminal's foreground job (:data:`FOREGROUND_JOB`), so
    that a test can stop it the way Ctrl-C does, with ``os.killpg(process.pid, signal.SIGINT)``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "geopipe_agents.train_cli", *args, "--log-dir", str(log_dir), "--run-name", "run"]
    return subprocess.Popen(command, cwd=log_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **FOREGROUND_JOB)


def wait_for(process: subprocess.Popen, ready) -> None:
    """Poll until ``ready()``; fail with the process's stderr if it ends first or the wait times out."""
    deadline = time.monotonic() + TRAINING_START_TIMEOUT_S
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"training ended with {process.returncode} first: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("training did not get there in time")
        time.sleep(0.05)


def finish(process: subprocess.Popen) -> tuple[int, str]:
    """(exit code, stderr) of a signalled process; fail with its stderr if it is still running a minute later."""
    try:
        _, err = process.communicate(timeout=TRAINING_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"training went on after the signal: {err[-2000:]}")
    return process.returncode, err


def load_script(name: str):
    """A top-level CLI script (``evaluate.py``, ``train.py``) as a module: scripts are not installed packages."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def masked_random_rollout(env, seed: int, policy_seed: int | None = None, record: bool = False, max_steps: int = 100_000):
    """Run one episode with uniformly random valid actions; return (steps, total reward, last info, trace)."""
    rng = np.random.default_rng(seed if policy_seed is None else policy_seed)
    obs, info = env.reset(seed=seed)
    trace = []
    total = 0.0
    for step in range(max_steps):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        if record:
            trace.append((obs, reward, info["action_mask"].copy()))
        if terminated or truncated:
            return step + 1, total, info, trace
    raise AssertionError("episode did not end")
