"""Ray as an optional layer: connecting to (or starting) a Ray cluster, and evaluation episodes as Ray tasks.

Needs the ``ray`` extra (``pip install -e ".[ray]"``); this module imports ``ray`` only inside its functions, so
``geopipe_env``, ``geopipe_baselines``, ``geopipe_evaluation`` and ``geopipe_agents`` import without it, and a missing extra is one
:class:`MissingExtraError` naming the install command.

:func:`connect` prepares the process environment before ``ray`` is first imported (Ray reads these variables at
import time), then starts a local Ray instance or joins the cluster at an address. The project's packages reach
the workers through ``runtime_env["py_modules"]``, so a worker node needs the dependencies but not the project.

:func:`run_tasks` runs :func:`geopipe_evaluation.episodes.run_episode` tasks in chunks, one Ray task per chunk, so that
scheduling and result transfer are paid per chunk rather than per episode (a toy episode takes milliseconds), and
returns the rows in the order of the tasks.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import importlib.metadata
import ipaddress
import math
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tqdm import tqdm

import geopipe_baselines
import geopipe_env
import geopipe_evaluation
from geopipe_evaluation.cli import install_hint
from geopipe_evaluation.specs import ENTRY_POINT_GROUP, portable_spec
from geopipe_evaluation.threads import limit_worker_threads, one_thread_env

INSTALL_COMMANDS = {extra: install_hint(extra) for extra in ("ray", "rllib")}
RAY_TEMP_DIR_NAME = "geopipe-ray"  # under the system temp folder: Ray's sessions, sockets and logs
CHUNKS_PER_CPU = 4  # enough chunks to even out the load, few enough to keep scheduling cheap


class MissingExtraError(ImportError):
    """An optional extra (``ray`` or ``rllib``) is not installed; the message names the install command."""


def import_ray(extra: str = "ray", address: str | None = None) -> ModuleType:
    """The ``ray`` module (importing ``ray.rllib`` too for the ``rllib`` extra), with the environment prepared for
    a local instance or the cluster at ``address`` (:func:`prepare_environment`).

    Raises:
        MissingExtraError: the extra is not installed.
    """
    if extra not in INSTALL_COMMANDS:
        raise ValueError(f"unknown extra {extra!r}; expected one of {', '.join(INSTALL_COMMANDS)}")
    prepare_environment(address)
    try:
        importlib.import_module("ray.rllib" if extra == "rllib" else "ray")
    except ImportError as exc:
        raise MissingExtraError(f"{exc.name or 'ray'} is not installed; install the {extra!r} extra: {INSTALL_COMMANDS[extra]}") from exc
    return sys.modules["ray"]


def is_loopback(address: str | None) -> bool:
    """True for no address (a local instance) and for a loopback ``host[:port]`` (127.x.x.x, ::1, localhost)."""
    if address is None:
        return True
    host = address.split("://")[-1].rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def prepare_environment(address: str | None = None) -> None:
    """Set Ray's environment variables before ``ray`` is imported (values already set by the user are kept).

    Always: no usage statistics, and Ray's files under ``<tmp>/geopipe-ray`` (never the home folder). For a local
    instance or a loopback address: every process on 127.0.0.1 (Ray otherwise binds the machine's network address).
    For a local instance Ray itself starts: token authentication with a fresh token held in the environment, not
    written to ``~/.ray``, and workers at the priority of the process pool's (Ray lowers them to niceness 15, which on
    a shared machine hands their CPU to any other work). A cluster at another address keeps the user's settings
    (see the README's recipe).
    Does nothing once ``ray`` is imported, since Ray has read them by then.
    """
    if "ray" in sys.modules:
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_TMPDIR", os.path.join(tempfile.gettempdir(), RAY_TEMP_DIR_NAME))
    if is_loopback(address):
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray's single-machine mode: loopback only
    if address is None:
        os.environ.setdefault("RAY_worker_niceness", "0")
        if "RAY_AUTH_MODE" not in os.environ:
            os.environ["RAY_AUTH_MODE"] = "token"
            os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def runtime_env() -> dict[str, Any]:
    """The job's runtime environment: the project's packages and those of the registered policy sources
    (``geopipe_evaluation.specs``) as ``py_modules``, and one compute thread per worker."""
    packages = {"geopipe_env": geopipe_env, "geopipe_baselines": geopipe_baselines,
                "geopipe_evaluation": geopipe_evaluation}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        top = ep.module.split(".")[0]
        packages.setdefault(top, importlib.import_module(top))
    modules = [shipped_module(package) for package in packages.values()]
    return {"py_modules": modules, "env_vars": one_thread_env(), "excludes": ["__pycache__", "*.pyc"]}


def shipped_module(package: ModuleType) -> ModuleType | str:
    """``package`` as a ``py_modules`` entry. Ray names a shipped package by its folder, so a package whose folder has
    another name (an editable install maps ``agents/`` to ``geopipe_agents``) goes as a copy in a folder named by its
    import name, removed when this process exits."""
    folder = Path(package.__file__).parent
    if folder.name == package.__name__:
        return package
    staging = Path(tempfile.mkdtemp(prefix="geopipe-ray-modules-"))
    atexit.register(shutil.rmtree, staging, ignore_errors=True)
    shutil.copytree(folder, staging / package.__name__, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return str(staging / package.__name__)


def connect(address: str | None = None, num_cpus: int | None = None, extra: str = "ray") -> ModuleType:
    """Start a local Ray instance (``address`` None, with ``num_cpus`` CPUs) or join the cluster at ``address``;
    return the ``ray`` module. Call :func:`disconnect` when done.

    Raises:
        MissingExtraError: the extra is not installed.
        RuntimeError: a local instance would bind the network address: ``ray`` was imported before
            :func:`prepare_environment` ran.
    """
    ray = import_ray(extra, address)
    if is_loopback(address) and os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") != "0":
        raise RuntimeError("ray was imported before geopipe_evaluation.ray_backend.prepare_environment(); call it first")
    kwargs: dict[str, Any] = {"runtime_env": runtime_env(), "logging_level": "WARNING", "log_to_driver": True}
    if address is None:
        kwargs.update(num_cpus=num_cpus, include_dashboard=False)
    ray.init(address=address, **kwargs)
    return ray


def disconnect() -> None:
    """Leave the cluster (and stop the local instance, if this process started one)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def chunk_indices(num_tasks: int, num_cpus: float) -> list[list[int]]:
    """Task indices split into about ``CHUNKS_PER_CPU`` chunks per CPU, strided so that each chunk mixes the
    policies (their episodes differ in cost) and the chunks take about equally long."""
    num_chunks = max(1, min(num_tasks, math.ceil(CHUNKS_PER_CPU * num_cpus)))
    return [list(range(i, num_tasks, num_chunks)) for i in range(num_chunks)]


def portable_task(task: tuple) -> tuple:
    """``task`` with its scenario file and saved agent as absolute paths: a worker's working folder differs from the
    driver's (on another node, the same paths must exist there). Rows name envs and agents as before."""
    env_spec, policy_spec, *rest = task
    if env_spec.scenario is not None and Path(env_spec.scenario).exists():
        env_spec = dataclasses.replace(env_spec, scenario=str(Path(env_spec.scenario).resolve()))
    return (env_spec, portable_spec(policy_spec), *rest)


def run_chunk(episode: Callable[..., dict[str, Any]], tasks: Sequence[tuple]) -> list[dict[str, Any]]:
    """``episode(*task)`` for each of ``tasks``, in order; the body of one Ray task."""
    limit_worker_threads()
    return [episode(*task) for task in tasks]


def run_tasks(episode: Callable[..., dict[str, Any]], tasks: Sequence[tuple], address: str | None,
              num_cpus: int | None, progress: bool = True) -> list[dict[str, Any]]:
    """``episode(*task)`` for every task (``geopipe_evaluation.episodes.run_episode`` and its argument tuples), in the order
    of ``tasks``, computed by Ray tasks of several episodes each.

    Starts a local instance with ``num_cpus`` CPUs (``address`` None) or joins the cluster at ``address``, and
    leaves it when done.
    """
    ray = connect(address, num_cpus)
    try:
        remote_chunk = ray.remote(num_cpus=1)(run_chunk)
        chunks = chunk_indices(len(tasks), ray.cluster_resources().get("CPU", 1))
        pending = {remote_chunk.remote(episode, [portable_task(tasks[i]) for i in chunk]): chunk for chunk in chunks}
        rows: list[dict[str, Any] | None] = [None] * len(tasks)
        with tqdm(total=len(tasks), desc="episodes", unit="ep", disable=not progress) as bar:
            while pending:
                (done,), _ = ray.wait(list(pending), num_returns=1)
                chunk = pending.pop(done)
                for i, row in zip(chunk, ray.get(done)):
                    rows[i] = row
                bar.update(len(chunk))
        return rows  # type: ignore[return-value]  (every index was filled)
    finally:
        disconnect()
