"""Running episodes: one (env, policy, seed) at a time, in this process, a ``spawn`` process pool or Ray tasks.

The unit of work is :func:`run_episode` ``(env, policy_spec, seed, cost_weight, record_timeline) -> dict``: a
top-level function of picklable arguments returning a plain dict, so it runs the same in-process, in a worker
process and in a Ray task (:mod:`geopipe_evaluation.ray_backend`). :func:`run_episodes` fans the episodes out.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np
from tqdm import tqdm

from geopipe_baselines.policy import play_episode
from geopipe_evaluation.specs import EnvSpec, build_policy, is_scripted, source_loaded
from geopipe_evaluation.summary import RETURN_KEY
from geopipe_evaluation.threads import limit_worker_threads
from geopipe_env.env import GeoPipeEnv
from geopipe_env.base.units import SECONDS_PER_HOUR

# Episodes already run one per process; a saved agent's small MLP gains nothing from more torch threads and loses
# to contention between the processes.
TORCH_THREADS_PER_PROCESS = 1
_PRELOADED: dict[str, Any] = {}  # spec -> a policy a pool worker built at its start, unused yet (start_worker)


def run_episode(env_spec: EnvSpec, policy_spec: str, seed: int, cost_weight: float | None, record_timeline: bool = False) -> dict[str, Any]:
    """One episode; a plain, picklable dict of its results.

    Keys: ``env``, ``policy``, ``seed``, ``return`` (sum of step rewards), every ``info["episode_metrics"]`` key,
    ``jct_h`` (the finished jobs' JCTs in hours), ``comm_slowdown`` (per launched job, in job order: its mean
    iteration time ÷ the same stages with no WAN boundary) and ``timeline`` (None unless ``record_timeline``: ``t_h``,
    ``gpus`` (allocated GPUs per region after each launch and completion, closed at the episode's end),
    ``regions`` and ``capacity``).
    """
    policy = _PRELOADED.pop(policy_spec, None) or build_policy(policy_spec)
    env = env_spec.make(cost_weight, **policy.env_kwargs)
    try:
        episode_return, info = play_episode(env, policy, seed)
        core = env.unwrapped
        sim = core.sim
        arrival_s = np.array([j.arrival_s for j in core.world.jobs])
        done = ~np.isnan(sim.finish_s)
        row: dict[str, Any] = {"env": env_spec.label, "policy": policy.name, "seed": int(seed), RETURN_KEY: episode_return}
        row.update({k: int(v) if isinstance(v, (int, np.integer)) else float(v) for k, v in info["episode_metrics"].items()})
        row["jct_h"] = ((sim.finish_s - arrival_s)[done] / SECONDS_PER_HOUR).tolist()
        slowdown = sim.comm_slowdown()
        row["comm_slowdown"] = slowdown[~np.isnan(slowdown)].tolist()
        row["timeline"] = _timeline(core) if record_timeline else None
        return row
    finally:
        env.close()


def _timeline(core: GeoPipeEnv) -> dict[str, Any]:
    points = [*core.sim.gpu_timeline, (core.sim.now_s, core.sim.gpu_timeline[-1][1])]
    return {
        "t_h": [t / SECONDS_PER_HOUR for t, _ in points],
        "gpus": [np.asarray(g).tolist() for _, g in points],  # (num_points, num_regions)
        "regions": list(core.scenario.region_ids),
        "capacity": np.asarray(core.world.num_gpus).tolist(),
    }


def run_episodes(
    envs: Sequence[EnvSpec],
    policy_specs: Sequence[str],
    seeds: Sequence[int],
    cost_weight: float | None,
    workers: int,
    progress: bool = True,
    backend: str = "process",
    ray_address: str | None = None,
) -> list[dict[str, Any]]:
    """Every (env, policy, seed) episode, in that order; the first seed's episodes record their GPU timeline.

    ``workers > 1`` runs them in a ``spawn`` process pool (safe whatever the parent has imported, e.g. torch);
    ``workers == 1`` runs them in this process. ``backend="ray"`` runs them as Ray tasks instead, on a local Ray
    instance with ``workers`` CPUs or on the cluster at ``ray_address`` (:mod:`geopipe_evaluation.ray_backend`). Either way a
    saved agent runs torch on one thread per process. A pool's workers build the policies that are not scripted
    when they start, so that a saved agent's several seconds of loading come before the progress bar moves, not
    in its middle; with ``progress``, one line on stderr says so first.
    """
    tasks = [(e, p, s, cost_weight, s == seeds[0]) for e in envs for p in policy_specs for s in seeds]
    if backend == "ray":
        from geopipe_evaluation import ray_backend  # imports ray, which reads its settings when imported

        return ray_backend.run_tasks(run_episode, tasks, ray_address, workers, progress)
    if backend != "process":
        raise ValueError(f"unknown backend {backend!r}; expected process or ray")
    learned = [spec for spec in policy_specs if not is_scripted(spec)]
    slow = source_loaded(learned)
    pool_size = min(workers, len(tasks))
    if progress and slow and workers > 1:
        # The bar waits at its start while each worker loads them (worker_pool); say why, so it is not taken for a hang.
        who = "the worker loads" if pool_size == 1 else f"each of the {pool_size} workers loads"
        print(f"episodes: {who} {', '.join(slow)} before its first episode (importing torch: several seconds)",
              file=sys.stderr, flush=True)
    bar = tqdm(total=len(tasks), desc="episodes", unit="ep", disable=not progress)
    try:
        if workers <= 1:
            rows = []
            with _torch_threads(TORCH_THREADS_PER_PROCESS) if learned else nullcontext():
                for task in tasks:
                    rows.append(run_episode(*task))
                    bar.update()
            return rows
        with worker_pool(pool_size, preload=learned) as pool:
            futures = [pool.submit(run_episode, *task) for task in tasks]
            for _ in as_completed(futures):
                bar.update()
            return [f.result() for f in futures]
    finally:
        bar.close()


def worker_pool(workers: int, preload: Sequence[str] = ()) -> ProcessPoolExecutor:
    """A ``spawn`` process pool whose workers run torch on one thread (:func:`geopipe_evaluation.threads.limit_worker_threads`)
    and build each policy of ``preload`` once when they start (:func:`start_worker`)."""
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker,
        initargs=(tuple(preload),),
    )


def start_worker(preload: Sequence[str] = ()) -> None:
    """A pool worker's start: one compute thread, then each policy of ``preload`` built once, so that a saved
    agent's imports (torch, stable-baselines3) happen before the worker's first episode, with the progress bar at
    its start, and not in the middle of the bar where the agent's episodes begin. A policy that fails to build
    here raises its error in the episode that needs it; one built here serves the worker's first episode of it."""
    limit_worker_threads()
    for spec in preload:
        try:
            _PRELOADED[spec] = build_policy(spec)
        except Exception:  # noqa: BLE001  (reported by the episode, with its traceback)
            pass


@contextmanager
def _torch_threads(num_threads: int) -> Iterator[None]:
    """Run the block with torch (if a policy imported it) on ``num_threads`` threads, and give the caller's thread
    count back after it."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


