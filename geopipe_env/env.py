"""Layer 6: the Gymnasium environment.

## Description
Multi-tenant pipeline-parallel LLM training jobs arrive at a set of geo-distributed GPU regions. At each decision
the agent picks which waiting job to launch next and which candidate placement its K* pipeline stages take, or
waits. Regions differ in GPUs and hourly electricity prices; WAN links differ in bandwidth and latency and are
shared max-min fairly by running pipelines.

## Action Space
``Discrete(Q·K + 1)``: action ``a < Q·K`` launches the job in queue slot ``a // K`` on the candidate placement of
strategy ``a % K`` (``STRATEGY_NAMES``); action ``Q·K`` waits until the next event. ``action_masks()`` (and
``info["action_mask"]``) marks valid actions. An invalid action (masked, or out of range) is a no-op that acts as
a wait, costs ``invalid_action_penalty`` reward and is counted in the metrics; a non-integer action raises
``TypeError``. Wait is valid in every mask, including the one returned with the terminal or truncated step,
where it is the only valid action: vector envs (``gymnasium.make_vec``, default autoreset) hand that mask to the
policy, send its action with the next ``step``, and reset the sub-env instead of stepping it, so an all-False
mask would leave a masked policy with nothing to choose. Calling ``step`` on the ended env itself still raises.

## Observation Space
A ``Dict`` of flat float32 boxes, padded to ``max_regions``; each is a row-major table (``observation.obs_layout``):

| key | shape | content |
|---|---|---|
| regions | (max_regions, 9) | present, free GPU fraction, GPU share, price now and 6 h forecast (normalised across regions), carbon, PUE−1, link utilisation, GPUs in service |
| links | (max_regions², 3) | row i·max_regions+j is link i→j: capacity (÷ max), utilisation, latency (÷ max) |
| queue | (Q, 7) | present, GPU share, log in-region duration of the work left ÷ T_local, log bandwidth demand ÷ median link, waiting time ÷ T_local, can start, work lost to failures |
| candidates | (Q·K, 9) | row a describes action a: feasible, log est. iteration ÷ in-region iteration, log est. duration ÷ T_local, est. cost ÷ C_ref, WAN hops, bandwidth slack, stall flag, est. carbon ÷ ref, schedule |
| global | (9,) | hour of day sin/cos, queue beyond window, running jobs, GPU utilisation, time ÷ horizon, mean link utilisation, wait gap, time scale |

## Rewards
A step covering Δt earns ``−(Σ_jobs-in-system Δt / T_ref + cost_weight · Δcost / C_ref)``, so an episode sums to
``−(ΣJCT / T_ref + cost_weight · Cost / C_ref)``. ``T_ref`` is the jobs' mean isolated duration and ``C_ref`` their
mean isolated energy at the mean price. The observation's durations are scaled by ``T_local``, the jobs' mean
in-region duration (docs/environment.md, "Time scale").

## Starting State
``reset(seed)`` samples the episode's world (randomisation, price start day, job arrivals) from the env's RNG
and advances to the first decision.

## Episode End
* Termination: every job of the workload has finished.
* Truncation: the scenario's horizon is reached (the env enforces it itself).

## Arguments
``scenario`` (built-in name, YAML path or a ``Scenario``; or a non-empty list of them, a mixture: each ``reset``
draws one uniformly from the env's RNG, and ``env.scenario`` is the episode's), ``cost_weight`` (default: the scenario's),
``render_mode`` (``"ansi"`` or ``"rgb_array"``), ``queue_slots`` (Q, 8), ``max_regions`` (16),
``invalid_action_penalty`` (1.0), ``timing`` (``"analytic"`` or ``"exact"``), ``strategies`` (the K candidate
strategies, default ``strategies.STRATEGY_NAMES``; ``strategies.strategy_names()`` lists every choice). ``cost_weight`` and
``invalid_action_penalty`` must be finite and >= 0, ``queue_slots`` and ``max_regions`` integers >= 1 (and
``max_regions`` at least the scenario's regions). Every argument is checked when the env is made, before the
scenario is read: a bad one raises :class:`EnvArgumentError` (a ``ValueError``) with one line naming it, in the
form of the scenario loader's errors, e.g. ``queue_slots: got 0; expected an integer >= 1``.

## Version History
* v0: initial release.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

import gymnasium as gym
import numpy as np

from geopipe_env.base import caches
from geopipe_env.simulation import layout_table
from geopipe_env.base.caches import BoundedDict
from geopipe_env.decision.backends import DecisionBackend, make_backend
from geopipe_env.simulation.core_types import CandidateInfo, JobStatus, World
from geopipe_env.simulation.generator import new_profile_cache, sample_world
from geopipe_env.scenario.loader import (
    KeyedValueError,
    builtin_names,
    did_you_mean,
    check_integer,
    check_number,
    check_string,
    load_builtin,
    load_scenario,
)
from geopipe_env.decision.observation import ObservationEncoder, observation_space
from geopipe_env.scenario.types import Scenario
from geopipe_env.decision.strategies import STRATEGY_NAMES, is_built_in, strategy_names
from geopipe_env.simulation.simulator import ClusterSim, shared_layout_cache
from geopipe_env.base.units import BYTES_PER_TB, SECONDS_PER_HOUR, WATTS_PER_KW

DEFAULT_QUEUE_SLOTS = 8
DEFAULT_MAX_REGIONS = 16
DEFAULT_INVALID_ACTION_PENALTY = 1.0
TIMINGS = ("analytic", "exact")
_DONE = int(JobStatus.DONE)


class EnvArgumentError(KeyedValueError):
    """A ``GeoPipeEnv`` (``gym.make``) argument that is out of range or of the wrong type; one line, in the form of
    :class:`~geopipe_env.scenario.loader.ScenarioError`: ``<argument>: <problem>; expected <what>``."""


COMPILE_NOTICE_AFTER_S = 5.0  # loading from numba's disk cache takes about 1.5 s; compiling, about 40 s


@contextlib.contextmanager
def _notice_if_slow(after_s: float, doing: str, stream: TextIO | None = None) -> Iterator[None]:
    """Say on ``stream`` (stderr) what is going on if the block runs past ``after_s`` seconds, and how long it took
    once it ends: a silent half-minute pause would look like a hang."""
    stream = sys.stderr if stream is None else stream
    start = time.perf_counter()
    said = threading.Event()

    def notice() -> None:
        said.set()
        print(f"geopipe_env: {doing} ...", file=stream, flush=True)

    timer = threading.Timer(after_s, notice)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()  # a notice being printed finishes first
        if said.is_set():
            print(f"geopipe_env: done in {time.perf_counter() - start:.0f} s", file=stream, flush=True)


@functools.cache
def _load_compiled() -> None:
    """Load the compiled decision path (numba's disk cache; a compile the first time on a machine) once per
    process, when the first env is made, so that no episode pays for it."""
    with _notice_if_slow(COMPILE_NOTICE_AFTER_S, "compiling the simulator's kernels, once per machine (about 40 s; "
                         "numba caches them on disk)"):
        _warm_up_kernels()


_WARMING_UP = threading.Event()  # set while the warm-up's own envs are made, which must not wait for it


def _warm_up_world(background: bool) -> dict:
    """A tiny world whose episode calls every kernel an episode can call from Python: two regions (one on an hourly
    market, one at a constant price) joined by one WAN link, calibrated compute, Poisson arrivals, and jobs of two
    replicas that accept the closed-form schedules (1F1B, GPipe) and the executor's (interleaved 1F1B, the greedy
    schedule); with ``background``, other traffic on the link."""
    model = {"name": "warm-up-1b", "params_b": 1.0, "layers": 4, "hidden": 1024}
    link = {"bandwidth_gbps": 1.0, "latency_ms": 20.0}
    network: dict[str, Any] = {"rule": "matrix", "matrix": {"a": {"b": link, "c": link}, "b": {"c": link}}}
    if background:
        network["background"] = {"mean_fraction": 0.2, "amplitude_fraction": 0.1}
    return {
        "name": "warm-up", "horizon_h": 48, "start_utc": "2023-01-01T00:00Z",
        "regions": [
            {"id": "a", "gpu": "H100", "num_gpus": 4, "price_market": "GB", "carbon_zone": "GB"},
            {"id": "b", "gpu": "H100", "num_gpus": 4, "price_usd_per_kwh": 0.2},
            {"id": "c", "gpu": "A100", "num_gpus": 4, "price_usd_per_kwh": 0.1},
        ],
        "network": network,
        "workload": {
            "num_jobs": 8, "arrival": {"process": "poisson", "mean_interarrival_h": 0.5}, "datasets": ["alpaca"],
            "models": [model], "pipeline_stages": 2, "data_parallel": 2, "num_microbatches": 4, "seq_len": 1024,
            "job_classes": [
                {"name": "closed-form", "pipeline_schedules": ["1f1b", "gpipe"]},
                {"name": "executor", "virtual_stages": 2, "pipeline_schedules": ["interleaved-1f1b", "crosspipe-greedy"]},
                {"name": "larger", "models": [{**model, "name": "warm-up-2b", "params_b": 2.0}], "pipeline_schedules": ["1f1b"]},
            ],
        },
    }


def _warm_up_kernels() -> None:
    """Play two tiny episodes, one with analytic timing on fixed line rates and one with exact timing and background
    traffic, taking the first valid action at every step, so that every kernel an episode calls from Python is
    loaded (or compiled) with the types a real episode gives it; then grow a layout table once, which a real
    episode does only past its table's first rows. The episodes neither read nor fill the machine's timing store,
    and the process caches they filled are emptied after, so that no env sees a trace of them
    (``tests/test_compiled.py`` checks that later episodes compile nothing)."""
    _WARMING_UP.set()
    try:
        with caches.stores_paused():
            _play_warm_up_episodes()
        layout_table.warm_up_growth()
    finally:
        _WARMING_UP.clear()
        caches.clear_all()


def _play_warm_up_episodes() -> None:
    """One episode of :func:`_warm_up_world` for each timing (the exact one with background traffic), the first valid
    action at every step."""
    for background, timing in ((False, "analytic"), (True, "exact")):
        env = GeoPipeEnv(scenario=load_scenario(_warm_up_world(background)), timing=timing)
        _, info = env.reset(seed=0)
        done = False
        while not done:
            action = int(np.flatnonzero(info["action_mask"])[0])
            _, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        env.episode_metrics()


def _resolve_scenarios(scenario: Any) -> tuple[Scenario, ...]:
    """The env's scenarios: one, or each of a non-empty list or tuple (a mixture)."""
    if not isinstance(scenario, (list, tuple)):
        return (resolve_scenario(scenario),)
    if not scenario:
        raise EnvArgumentError("scenario", "an empty list", "a scenario, or a non-empty list of scenarios")
    return tuple(resolve_scenario(s) for s in scenario)


def resolve_scenario(scenario: str | os.PathLike | Scenario) -> Scenario:
    """A ``Scenario`` from a built-in name, a YAML path, or a ``Scenario`` (returned as is)."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, str) and scenario in builtin_names():
        return load_builtin(scenario)
    return load_scenario(scenario)


class GeoPipeEnv(gym.Env):
    __doc__ = __doc__
    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        scenario: str | os.PathLike | Scenario | list | tuple = "geopipe-v0",
        cost_weight: float | None = None,
        render_mode: str | None = None,
        queue_slots: int = DEFAULT_QUEUE_SLOTS,
        max_regions: int = DEFAULT_MAX_REGIONS,
        invalid_action_penalty: float = DEFAULT_INVALID_ACTION_PENALTY,
        timing: str = "analytic",
        strategies: tuple[str, ...] | list[str] | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:  # a misspelt keyword: one line naming it, before anything loads (Python's TypeError names no fix)
            key = sorted(unknown)[0]
            known = [name for name in inspect.signature(GeoPipeEnv.__init__).parameters if name not in ("self", "unknown")]
            raise EnvArgumentError(key, "not an argument of GeoPipeEnv" + did_you_mean(key, known),
                                   "one of " + ", ".join(known))
        # Every argument is checked before the scenario is read, and both before the compiled kernels load, so a bad
        # one fails here at once with one line (EnvArgumentError) rather than later inside reset or the simulator.
        if cost_weight is not None:
            cost_weight = check_number(cost_weight, "cost_weight", minimum=0.0, error=EnvArgumentError)
        if render_mode is not None:
            check_string(render_mode, "render_mode", self.metadata["render_modes"], error=EnvArgumentError)
        self.queue_slots = check_integer(queue_slots, "queue_slots", minimum=1, error=EnvArgumentError)
        self.max_regions = check_integer(max_regions, "max_regions", minimum=1, error=EnvArgumentError)
        self.invalid_action_penalty = check_number(
            invalid_action_penalty, "invalid_action_penalty", minimum=0.0, error=EnvArgumentError
        )
        self.timing = check_string(timing, "timing", TIMINGS, error=EnvArgumentError)
        self.strategies = _check_strategies(strategies)
        self.render_mode = render_mode
        # A list of scenarios is a mixture: each reset draws one of them uniformly from the env's RNG.
        self.scenarios = _resolve_scenarios(scenario)
        most = max(s.num_regions for s in self.scenarios)
        if most > self.max_regions:
            raise EnvArgumentError(
                "max_regions", f"got {self.max_regions}, fewer than the scenario's {most} regions", f"an integer >= {most}"
            )
        if not _WARMING_UP.is_set():
            _load_compiled()  # after every check: bad input is refused before the kernels load (or compile, ~40 s)
        self.num_strategies = len(self.strategies)
        # The built-in strategies' feasibility does not depend on prices, so hour ticks with no launch possible
        # before them hold none after them either; a registered strategy might, so it sees every tick.
        self._skip_quiet_hours = all(is_built_in(name) for name in self.strategies)
        # Per scenario: its reward's cost weight, its decision backend and its model profiles across episodes
        # (generator.sample_world).
        self._mixture: list[tuple[Scenario, float, DecisionBackend, dict]] = [
            (s, s.cost_weight if cost_weight is None else cost_weight, make_backend(self.strategies, self.queue_slots),
             new_profile_cache())
            for s in self.scenarios
        ]
        self._use_scenario(0)
        self.wait_action = self.queue_slots * self.num_strategies
        self.action_space = gym.spaces.Discrete(self.wait_action + 1)
        self.observation_space = observation_space(self.max_regions, self.queue_slots, self.num_strategies)
        self.world: World | None = None
        self.sim: ClusterSim | None = None
        self._encoder_constants = BoundedDict(1)  # the observation's constants of the last world physics

    def _use_scenario(self, index: int) -> None:
        """Make the mixture's ``index``-th scenario the one the next episode runs."""
        self.scenario, self.cost_weight, self._backend, self._profile_cache = self._mixture[index]

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode: draw its scenario if the env has several (a mixture, uniformly), sample its world
        (randomisation, price start day, job arrivals), both from the env's RNG, and advance to the first decision.

        Args:
            seed: seeds the env's RNG (``np_random``); None keeps drawing from the current one.
            options: accepted for the Gymnasium API and not read.

        Returns:
            ``(observation, info)``: the observation ``Dict`` of the first decision, and ``info`` with
                ``action_mask`` (the ``(Q·K + 1,)`` bool mask), ``time_h``, ``waiting``, ``running`` and
                ``cost_usd``.
        """
        super().reset(seed=seed)
        if len(self._mixture) > 1:
            self._use_scenario(int(self.np_random.integers(len(self._mixture))))
        self.world = sample_world(self.scenario, self.np_random, self._profile_cache)
        exact = self.timing == "exact"
        layouts = shared_layout_cache(self.world, exact) if self.scenario.network.fixed_line_rates else None
        self.sim = ClusterSim(self.world, exact_timing=exact, layout_cache=layouts)
        jobs = self.world.jobs
        # np.mean's arithmetic (numpy's sum, then ÷ the count) without its general path: 4 µs where it costs 9 µs.
        self.t_ref_s = _mean(np.array([j.isolated_duration_s for j in jobs]))
        # The observation's time scale: the jobs' mean duration with every pipeline inside one region.
        self.t_local_s = _mean(np.array([j.local_duration_s for j in jobs]))
        iso_energy_kwh = _mean(
            np.array([j.isolated_power_w / WATTS_PER_KW * j.isolated_duration_s / SECONDS_PER_HOUR for j in jobs])
        )
        mean_price = float(self.world.price.values.mean())
        self.c_ref_usd = iso_energy_kwh * (mean_price if mean_price > 0 else float(np.abs(self.world.price.values).mean()) + 1e-9)
        carbon_ref_kg = iso_energy_kwh * float(self.world.carbon.values.mean()) / 1000.0
        self.encoder = ObservationEncoder(
            self.world, self.max_regions, self.queue_slots, self.num_strategies, self.t_local_s, self.t_ref_s,
            self.c_ref_usd, carbon_ref_kg, self._encoder_constants,
        )
        self.invalid_actions = 0
        self.decisions = 0
        self.terminated = self.truncated = False
        self._backend.start(self.sim, self.encoder)
        self._mask = np.zeros(self.action_space.n, dtype=bool)
        self._advance_until_decision()
        return self._observe(), self._info()

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Take one decision and advance to the next one (or to the episode's end).

        Args:
            action: an integer in ``[0, Q·K]``. ``a < Q·K`` launches the job in queue slot ``a // K`` on strategy
                ``a % K``'s candidate; ``Q·K`` waits until the next event. A masked or out-of-range action acts as
                a wait and costs ``invalid_action_penalty``.

        Returns:
            ``(observation, reward, terminated, truncated, info)``. ``reward`` is
                ``−(Σ_jobs-in-system Δt / T_ref + cost_weight · Δcost / C_ref)`` minus any penalty; ``terminated``
                once every job has finished, ``truncated`` at the scenario's horizon; ``info`` has the keys of
                ``reset``'s, and on the last step ``episode_metrics`` (``episode_metrics()``).

        Raises:
            TypeError: ``action`` is not an integer.
            RuntimeError: before ``reset``, or after the episode has ended.
        """
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        if self.terminated or self.truncated:
            raise RuntimeError("the episode has ended; call reset()")
        a = _as_action(action)
        sim = self.sim
        job_s0, cost0 = sim.job_seconds, sim.cost_usd
        penalty = 0.0
        self.decisions += 1
        if 0 <= a < self.wait_action and self._mask[a]:
            slot, k = divmod(a, self.num_strategies)
            backend = self._backend
            sim.launch(sim.waiting[slot], backend.placement(slot, k), checked=backend.checked)
            self._advance_until_decision()
        else:
            if a != self.wait_action or not self._mask[a]:
                self.invalid_actions += 1
                penalty = self.invalid_action_penalty
            self._wait()
        reward = -((sim.job_seconds - job_s0) / self.t_ref_s + self.cost_weight * (sim.cost_usd - cost0) / self.c_ref_usd)
        reward -= penalty
        info = self._info()
        if self.terminated or self.truncated:
            info["episode_metrics"] = self.episode_metrics()
        return self._observe(), float(reward), self.terminated, self.truncated, info

    def action_masks(self) -> np.ndarray:
        """(Q·K + 1,) bool, True = valid. Wait is always valid, also in the mask returned with the episode's last
        step, so that a masked policy under an autoresetting vector env has an action to send there."""
        return self._mask.copy()

    def render(self) -> str | np.ndarray | None:
        """Draw the current state in the env's ``render_mode``.

        Returns:
            With ``"ansi"``, a text dashboard (``str``: regions, queue, running jobs with their paths, loaded
                links), every line at most 120 characters. With ``"rgb_array"``, a ``(500, 1000, 3)`` uint8
                picture of the same state: regions on a circle coloured by price with a ring of used GPUs, links by
                capacity and utilisation, GPUs per region stacked by job. With no render mode, None (and a
                warning).

        Raises:
            RuntimeError: before ``reset``, with a render mode.
        """
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='ansi' or 'rgb_array'")
            return None
        from geopipe_env import render

        if self.render_mode == "ansi":
            return render.render_ansi(self)
        return render.render_rgb(self)

    # ------------------------------------------------------------------ dynamics
    def _wait(self) -> None:
        """Advance to the next event (or to the horizon), then on to the next decision."""
        if self._next_event_or_truncate():
            self._advance_until_decision()

    def _next_event_or_truncate(self, quiet_hours: bool = False) -> bool:
        """Process the next event, or stop at the horizon if it lies beyond. False once truncated. With
        ``quiet_hours``, the hour ticks before the next arrival or completion go first (``advance_quiet_hours``)."""
        if not self.sim.step_event_within(self.scenario.horizon_s, quiet_hours):
            self.truncated = True
            self._set_mask_ended()
            return False
        return True

    def _advance_until_decision(self) -> None:
        while True:
            if self.sim.done:
                self.terminated = True
                self._set_mask_ended()
                return
            if self.sim.waiting and self._compute_candidates():
                return
            # No launch is possible now, and hour ticks change only prices and carbon, which decide no
            # candidate's feasibility: the ticks before the next arrival or completion hold no decision.
            if not self._next_event_or_truncate(quiet_hours=self._skip_quiet_hours):
                return

    def _set_mask_ended(self) -> None:
        """No candidates once the episode has ended, and wait alone stays valid (see ``action_masks``)."""
        self._backend.end(self.sim.waiting[: self.queue_slots])
        self._mask = np.zeros(self.action_space.n, dtype=bool)
        self._mask[self.wait_action] = True

    def _compute_candidates(self) -> bool:
        """Fill the candidate table and mask for the visible queue; True if any launch is possible."""
        mask = np.empty(self.wait_action + 1, dtype=bool)  # a new array: observations and infos hold copies only
        launches = self._backend.compute(self.sim.waiting[: self.queue_slots], mask)
        self._mask = mask
        return launches > 0

    # ------------------------------------------------------------------ outputs
    def _observe(self) -> dict[str, np.ndarray]:
        return self._backend.observe(self.sim.waiting)

    def _info(self) -> dict[str, Any]:
        sim = self.sim
        return {
            "action_mask": self._mask.copy(),
            "time_h": sim.now_s / SECONDS_PER_HOUR,
            "waiting": len(sim.waiting),
            "running": len(sim.running),
            "cost_usd": sim.cost_usd,
        }

    def candidate(self, slot: int, strategy: int) -> CandidateInfo | None:
        """The candidate behind action ``slot·K + strategy`` at the current decision (None if masked)."""
        return self._backend.info(slot, strategy)

    def episode_metrics(self) -> dict[str, float]:
        """The episode's metrics so far (finished jobs only for JCT statistics; docs/environment.md lists them)."""
        sim, w = self.sim, self.world
        done = sim.status == _DONE  # an int: comparing an array with the IntEnum member costs 5 µs
        arrival = np.array([j.arrival_s for j in w.jobs])
        jct = (sim.finish_s - arrival)[done]
        arrived = arrival <= sim.now_s
        in_system = np.where(done, sim.finish_s, sim.now_s)[arrived] - arrival[arrived]
        started = ~np.isnan(sim.start_s)
        wait = (sim.start_s - arrival)[started]
        # GPU-hours of launched jobs (to their finish, or to now), and of those placed across regions.
        gpu_s = cross_gpu_s = 0.0
        crossing = 0
        runs = sim.run_totals() if w.failures is not None else None
        if runs is not None:  # a job may wait between runs, on other placements: its runs' GPU-seconds
            _, held_s, cross_s = runs
            gpu_s, cross_gpu_s = float(held_s.sum()), float(cross_s.sum())
            crossing = int(np.count_nonzero(cross_s))
        else:  # one run per launched job, from its start to its finish or now
            for jid, placement in sim.placements.items():
                held = w.jobs[jid].num_gpus * ((sim.finish_s[jid] if done[jid] else sim.now_s) - sim.start_s[jid])
                gpu_s += held
                if len(placement.regions) > 1:
                    cross_gpu_s += held
                    crossing += 1
        lower = np.array([j.lower_bound_s for j in w.jobs])
        lb_energy = sum(j.lower_bound_energy_kwh for j in w.jobs)
        horizon_hours = int(np.ceil(self.scenario.horizon_s / SECONDS_PER_HOUR))
        makespan = float(sim.finish_s[done].max()) if done.any() else sim.now_s
        total_gpu_s = float(w.num_gpus.sum()) * max(sim.now_s, 1e-9)
        hours = lambda x: float(x) / SECONDS_PER_HOUR  # noqa: E731
        p50, p95 = _percentiles(jct, (50, 95)) if jct.size else (float("nan"), float("nan"))
        return {
            "avg_jct_h": hours(_mean(jct)) if jct.size else float("nan"),
            "p50_jct_h": hours(p50),
            "p95_jct_h": hours(p95),
            "avg_wait_h": hours(_mean(wait)) if wait.size else float("nan"),
            "avg_time_in_system_h": hours(_mean(in_system)) if in_system.size else float("nan"),
            "avg_slowdown": _mean(jct / lower[done]) if jct.size else float("nan"),
            "makespan_h": hours(makespan),
            "total_cost_usd": sim.cost_usd,
            "energy_kwh": sim.energy_kwh,
            "carbon_kg": sim.carbon_kg,
            "gpu_utilization": sim.gpu_seconds / total_gpu_s,
            "wan_traffic_tb": sim.wan_bytes / BYTES_PER_TB,
            "stalled_job_fraction": _mean(sim.ever_stalled[started]) if started.any() else 0.0,
            "avg_comm_slowdown": _nanmean(sim.comm_slowdown()) if started.any() else float("nan"),
            "max_link_utilization": sim.max_link_utilization,
            "jobs_completed": int(done.sum()),
            "cross_region_job_fraction": crossing / len(sim.placements) if sim.placements else 0.0,
            "cross_region_gpu_share": cross_gpu_s / gpu_s if gpu_s > 0.0 else 0.0,
            "invalid_actions": self.invalid_actions,
            "jct_lower_bound_h": hours(_mean(lower)),
            "cost_lower_bound_usd": lb_energy * float(w.price.values[:, :horizon_hours].min()),
            **self._failure_metrics(arrived, runs),
        }

    def _failure_metrics(self, arrived: np.ndarray, runs: tuple | None) -> dict[str, float]:
        """Goodput (the running GPU-time that advanced training: not restarting, writing checkpoints or computing
        work a failure lost), the GPU-hours failures lost (restarts and lost work) and interruptions per arrived
        job, from ``runs`` (``ClusterSim.run_totals``); 1, 0 and 0 in a world where nothing fails (no ``runs``)."""
        if runs is None:
            return {"goodput": 1.0, "gpu_hours_lost_to_failures": 0.0, "interruptions_per_job": 0.0}
        totals = runs[0]
        running = sum(totals.values())
        return {
            "goodput": totals["saved_s"] / running if running > 0.0 else 1.0,
            "gpu_hours_lost_to_failures": (totals["lost_s"] + totals["restart_s"]) / SECONDS_PER_HOUR,
            "interruptions_per_job": _mean(self.sim.interruptions[arrived]) if arrived.any() else 0.0,
        }


def _mean(values: np.ndarray) -> float:
    """``float(values.mean())`` of a non-empty 1-D float or bool array, by its arithmetic (numpy's sum ÷ the count) without
    its general path: about 2 µs where it costs about 5 µs."""
    return float(values.sum()) / values.shape[0]


def _nanmean(values: np.ndarray) -> float:
    """``np.nanmean(values)`` of a 1-D float array with a number in it, by its arithmetic (NaN replaced by 0,
    summed, divided by the count of numbers): numpy's general path costs about 18 µs, this about 4 µs."""
    numbers = ~np.isnan(values)
    return float(np.where(numbers, values, 0.0).sum() / np.count_nonzero(numbers))


def _percentiles(values: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """``np.percentile(values, qs)`` for a non-empty 1-D array, by the same arithmetic (its default linear method:
    index ``(n − 1)·q/100`` into the sorted values, interpolated as numpy's ``_lerp`` does). numpy's general path
    costs 35–55 µs on an episode's few tens of jobs; this costs 2–3 µs."""
    x = np.sort(values).tolist()
    out = []
    for q in qs:
        pos = (len(x) - 1) * (q / 100.0)
        lo = math.floor(pos)
        a, b = x[lo], x[min(lo + 1, len(x) - 1)]
        t, d = pos - lo, b - a
        out.append(b - d * (1.0 - t) if t >= 0.5 else a + d * t)
    return out


def _check_strategies(strategies: Any) -> tuple[str, ...]:
    """The K candidate strategies: ``STRATEGY_NAMES`` for None, else a non-empty list of names from
    ``strategy_names()`` (the built-in ones and any registered); :class:`EnvArgumentError` otherwise."""
    if strategies is None:
        return tuple(STRATEGY_NAMES)
    known = strategy_names()
    expected = f"a non-empty list of names from {', '.join(known)}"
    if not isinstance(strategies, (list, tuple)) or not strategies:
        problem = "an empty list" if isinstance(strategies, (list, tuple)) else f"got {type(strategies).__name__} {strategies!r}"
        raise EnvArgumentError("strategies", problem, expected)
    return tuple(check_string(name, f"strategies[{i}]", known, error=EnvArgumentError) for i, name in enumerate(strategies))


def _as_action(action) -> int:
    """An int from a Python or numpy integer (0-d or single-element array); TypeError otherwise."""
    if isinstance(action, (bool, np.bool_)):
        raise TypeError(f"action must be an integer, got {type(action).__name__}")
    if isinstance(action, (int, np.integer)):
        return int(action)
    if isinstance(action, np.ndarray) and action.size == 1 and np.issubdtype(action.dtype, np.integer):
        return int(action.reshape(()))
    raise TypeError(f"action must be an integer (int, numpy integer or 1-element integer array), got {action!r}")
