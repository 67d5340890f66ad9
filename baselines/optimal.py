"""Exact optima of the env's own decision problem on small worlds, by branch and bound over copies of the env.

The optimum of an episode (a seed, so a fixed world, workload and price window) is the highest return that any
sequence of actions earns in the env that ``gym.make`` gives: the same action space, candidates, timing and
reward. :func:`solve` finds it by depth-first search over the env itself. Each node is a decision of an env copy;
its children are the actions valid there; a child is the copy after ``step``. Every return it reports is the sum
of the rewards the env paid along the plan, so a plan replays to exactly its return.

Three rules cut the tree without losing the optimum:

* **Identical launches.** Actions of one queue slot whose strategies give the same placement lead to the same
  state: one of them is expanded.
* **Equal states.** A state reached again (by launches taken in another order, or with identical jobs swapped)
  with no more return so far than before is not expanded again: its best future is the one already searched.
  States are keyed by the clock, the waiting jobs (in queue order when the queue slots cannot show them all) and
  the running jobs with their placements and the iterations they have left; jobs are keyed by their shape (what
  their timing, power and placements read, and their iterations), since the reward counts jobs in the system and
  their cost, not which job is which.
* **Bounds.** A node is cut when its return so far plus an upper bound on what the rest of the episode can still
  earn is no better than the best plan found. The bound (:class:`FutureBound`) sums per-job lower bounds on the
  time each unfinished job still spends in the system and the electricity it still buys, built from the env's
  per-job lower bounds (``Job.lower_bound_s``, ``Job.lower_bound_energy_kwh``: the fastest GPU it fits and the
  best link; the least energy), a running job's own iteration time and power, and the hourly prices: a job that
  ends at ``f`` buys its energy at no less than the lowest prices it can meet before ``f``, so it reaches a cheap
  hour only by staying in the system until then. Lagrange multipliers on the regions' GPU capacity charge the jobs
  that wait for the cheap regions they would crowd.

Both cuts allow a relative slack of :data:`RELATIVE_TOLERANCE` for rounding, so "optimal" means that no plan
earns more than the reported return by more than that fraction of it.

The search starts from the best plan of the scripted policies (each played on a copy) and tries, at each node,
the launches in the order of the candidate table's estimates (scored like the reward) and wait last. It reports
progress on a stream every few seconds, stops at a time limit or on Ctrl-C, and then returns the best plan found
with ``proven=False``. Worlds beyond :data:`MAX_JOBS` jobs or :data:`MAX_REGIONS` regions are refused with one line
(:class:`WorldTooLarge`): the tree grows exponentially with both.

Only the env's public surface is used: ``step``, ``action_masks``, ``candidate``, read-only ``sim`` and ``world``
attributes, and copies of the env by ``pickle`` (as ``geopipe_baselines.rollout`` makes them) that keep the episode's
unchanging scenario, world and spaces by reference; a copy searched without foreknowledge of arrivals
(:class:`KnownJobsOptimalPolicy`) drops its arrivals still to come (``ClusterSim.drop_arrivals_to_come``).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from geopipe_env.base.compiled import jit
from geopipe_env.env import GeoPipeEnv
from geopipe_baselines.rollout import EnvCopier, distinct_launches
from geopipe_env.base.units import SECONDS_PER_HOUR, WATTS_PER_KW

MAX_JOBS = 8  # the largest workload the solver takes (GeoPipe-Small-v0 draws 4 to 8 jobs)
MAX_REGIONS = 4
DEFAULT_PROGRESS_EVERY_S = 10.0
TICK_EVERY_NODES = 64  # nodes between looks at the clock (progress lines, time limit)
# Bounds add in another order than the env adds its rewards: a node is cut when its bound exceeds the best return by
# no more than this fraction of it, and a state seen before when its return so far is not higher by more than this.
RELATIVE_TOLERANCE = 1e-9
# Scripted policies whose plans seed the search (the best one is the first incumbent).
SEED_POLICIES = ("bace-pipe", "sjf", "price-aware", "lcf", "ldf", "cr-lcf", "cr-ldf", "bace-pipe-no-priority")


class WorldTooLarge(ValueError):
    """A world with more jobs or regions than the exact solver takes; the message is one line."""


@dataclass
class Solution:
    """The best plan a search found.

    Attributes:
        actions: the plan, one action per decision from the decision the search started at.
        episode_return: the sum of the rewards the env paid for the plan, from that decision on.
        proven: True if the search ran to the end, so that no plan earns more; False if it stopped early (time
            limit or Ctrl-C) with this plan as the best so far.
        metrics: ``info["episode_metrics"]`` at the plan's last step.
        nodes: decisions expanded.
        cut_by_bound: nodes cut by the bound.
        cut_as_seen: nodes cut as equal states already searched.
        wall_s: the search's wall time, the seeding plans included.
        first_return: the return of the first incumbent (the best scripted plan), and ``first_source`` its policy.
        improvements: ``(wall s, return)`` of each better plan the search found.
        stopped_by: why an unproven search stopped: ``"time limit"`` or ``"interrupted"`` (Ctrl-C); None if proven.
    """

    actions: list[int]
    episode_return: float
    proven: bool
    metrics: dict[str, float]
    nodes: int = 0
    cut_by_bound: int = 0
    cut_as_seen: int = 0
    wall_s: float = 0.0
    first_return: float = -math.inf
    first_source: str = ""
    improvements: list[tuple[float, float]] = field(default_factory=list)
    stopped_by: str | None = None


def check_world(env: Any) -> None:
    """Raise :class:`WorldTooLarge` (one line) if ``env``'s world has more than :data:`MAX_JOBS` jobs or
    :data:`MAX_REGIONS` regions. Before a reset only the scenarios are read (each one's largest job count; every
    scenario of a mixture)."""
    core = env.unwrapped
    if core.world is not None:
        sizes = [(core.scenario, len(core.world.jobs))]
    else:
        sizes = []
        for scenario in core.scenarios:
            drawn = scenario.randomize.num_jobs if scenario.randomize is not None else None
            sizes.append((scenario, drawn[1] if drawn is not None else scenario.workload.num_jobs))
    for scenario, jobs in sizes:
        regions = scenario.num_regions
        if jobs > MAX_JOBS or regions > MAX_REGIONS:
            raise WorldTooLarge(
                f"optimal: scenario {scenario.name!r} has up to {jobs} jobs and {regions} regions; the exact solver "
                f"takes at most {MAX_JOBS} jobs and {MAX_REGIONS} regions (GeoPipe-Small-v0 and the small-* scenarios)"
            )


def copy_env(env: GeoPipeEnv) -> GeoPipeEnv:
    """A copy of ``env`` that continues exactly as it would (:class:`EnvCopier`)."""
    return EnvCopier(env).copy(env)


def job_shapes(jobs: Iterable[Any]) -> tuple[int, ...]:
    """Each job's shape as a small number: jobs with equal ``profile_key`` (every field their timing, power, memory
    and candidate placements read: ``geopipe_env.simulation.core_types.JOB_PROFILE_FIELDS``) and equal iterations get the same
    one. Jobs of one shape are interchangeable: the dynamics see nothing else of a job besides its arrival."""
    ids: dict[tuple, int] = {}
    return tuple(ids.setdefault((job.profile_key, job.iterations), len(ids)) for job in jobs)


class FutureBound:
    """An upper bound on the return an env can still earn from its current state, over every continuation.

    The future reward is ``−(Σ_j time in system / T_ref + w·Σ_j cost / C_ref)`` over the unfinished jobs. Per job:

    * **Time.** A job in the system from ``t_in`` (now, or its arrival) finishes at some ``f ≥ t_in + R·t_min``:
      ``R`` iterations left, each at least ``t_min`` long (its iteration time if it runs unstalled, since a job is
      never given more than its demand and iterations only slow down below it; otherwise the job's lower bound
      ``lower_bound_s`` per iteration: the fastest GPU it fits and the best link).
    * **Cost.** Each iteration needs at least ``e_min`` of energy (a running unstalled job's current energy per
      iteration, which is the least on its placement since an iteration's energy grows with its time; otherwise
      ``lower_bound_energy_kwh`` per iteration), bought at no less than the lowest price it can meet in that hour
      (its own regions if it runs, else the regions it fits), and it can run at most ``3600/t_min`` iterations in an
      hour, all of them in ``[t_in, f]``. In an hour of negative price the job pays at least its largest power
      times that price. The least cost for a given ``f`` is then a fractional fill of its iterations into the
      cheapest hours; the bound takes the best ``f`` per job (a later finish can reach cheaper hours), and stops
      at the horizon, past which nothing is counted.
    * **Capacity.** Jobs compete for the cheap regions. The constraint that a region's GPUs in an hour hold no
      more than its size (less what running jobs certainly hold) is relaxed with Lagrange multipliers
      ``λ[r, h] ≥ 0``: jobs not yet running pay ``price + λ`` per kWh (a GPU-hour draws at most the GPU's busy
      power times PUE) and the bound is credited ``λ`` times each region-hour's capacity, which keeps it valid for
      any ``λ ≥ 0``. ``λ`` lifts each hour's regions to that hour's clearing price: the price of the region at
      which the regions, cheapest first, hold the energy the waiting and arriving jobs would draw then if each
      ran at once at its least time and energy.

    Everything else that couples jobs (GPU counts in time, shared links) is left out, so the sum is optimistic, as
    a bound must be.
    """

    def __init__(self, env: GeoPipeEnv, unknown_jobs: frozenset[int] = frozenset()) -> None:
        """``unknown_jobs``: jobs the searched world will never see arrive (``ClusterSim.drop_arrivals_to_come``),
        which the bound leaves out."""
        world = env.world
        self.t_ref_s, self.c_ref_usd, self.cost_weight = env.t_ref_s, env.c_ref_usd, env.cost_weight
        self.horizon_s = float(env.scenario.horizon_s)
        self.num_hours = int(math.ceil(self.horizon_s / SECONDS_PER_HOUR))
        self.price = np.asarray(world.price.values, dtype=float)[:, : self.num_hours]  # (R, H) USD/kWh
        self.jobs = world.jobs
        self.num_gpus = np.asarray(world.num_gpus, dtype=float)
        facility_w = np.asarray(world.busy_watts, dtype=float) * np.asarray(world.pue, dtype=float)
        self.gpu_kw = facility_w / WATTS_PER_KW  # (R,) the most one GPU draws, kW
        self.max_power_kw = [job.num_gpus * float(self.gpu_kw[job.fits].max()) for job in self.jobs]
        self.fits = [np.flatnonzero(job.fits) for job in self.jobs]
        self.lb_iteration_s = [job.lower_bound_s / job.iterations for job in self.jobs]
        self.lb_energy_kwh = [job.lower_bound_energy_kwh / job.iterations for job in self.jobs]  # per iteration
        if unknown_jobs:  # the per-job lists above stay indexed by job id
            self.jobs = [job for job in self.jobs if job.job_id not in unknown_jobs]

    def upper_bound(self, env: GeoPipeEnv) -> float:
        """The most return ``env`` can still earn (0 at the episode's end)."""
        sim = env.sim
        now = float(sim.now_s)
        first = min(int(now // SECONDS_PER_HOUR), self.num_hours - 1)
        hours = np.arange(first, self.num_hours)
        starts = hours * SECONDS_PER_HOUR
        price = self.price[:, first:]
        # Running jobs: fixed regions, charged at the price; the GPUs they hold until their earliest end are taken
        # out of the regions' capacity.
        held = np.zeros_like(price)  # GPU-hours certainly held, per region and hour
        total = 0.0
        waiting = set(sim.waiting)
        later = []  # (job, t_in) of the jobs not yet running
        for job in self.jobs:
            jid = job.job_id
            rj = sim.running.get(jid)
            if rj is None:
                if jid in waiting:
                    later.append((job, now))
                elif now < job.arrival_s:  # not yet arrived (an arrival at ``now`` has been processed)
                    later.append((job, float(job.arrival_s)))
                continue
            remaining = float(rj.remaining_iters)
            regions = list(rj.placement.regions)
            gpus = np.asarray(rj.placement.stages, dtype=float) * (job.gpus_per_stage * job.data_parallel)
            most_kw = gpus * self.gpu_kw[regions]  # (regions,) the most it draws in each of its regions
            if rj.stalled:
                t_min, e_min = self.lb_iteration_s[jid], self.lb_energy_kwh[jid]
                negative, positive = _split(price[regions].min(axis=0), float(most_kw.sum()))
            else:
                t_min = float(rj.iteration_s)
                energy = np.asarray(rj.power_w, dtype=float)[regions] / WATTS_PER_KW * t_min / SECONDS_PER_HOUR
                e_min = float(energy.sum())
                mine = price[regions]
                negative = most_kw @ np.minimum(mine, 0.0)
                positive = energy @ np.maximum(mine, 0.0) / e_min
            earliest_end = now + remaining * t_min
            overlap = np.clip(np.minimum(starts + SECONDS_PER_HOUR, earliest_end) - np.maximum(starts, now), 0.0, None)
            held[regions] += gpus[:, None] * overlap[None, :] / SECONDS_PER_HOUR
            total += self._job_value(now, remaining, t_min, e_min, negative, positive, first)
        credit = 0.0
        if later:
            lift, credit = self._multipliers(now, first, starts, price, held, later)
            augmented = price + lift
        for job, t_in in later:
            jid = job.job_id
            negative, positive = _split(augmented[self.fits[jid]].min(axis=0), self.max_power_kw[jid])
            total += self._job_value(t_in, float(job.iterations), self.lb_iteration_s[jid], self.lb_energy_kwh[jid],
                                     negative, positive, first)
        return -(total - self.cost_weight * credit / self.c_ref_usd)

    def _multipliers(self, now: float, first: int, starts: np.ndarray, price: np.ndarray, held: np.ndarray,
                     later: list) -> tuple[np.ndarray, float]:
        """``(λ (R, H'), Σ λ·capacity)``: each hour's regions lifted to its clearing price (class docstring)."""
        hour_s = np.clip(np.minimum(starts + SECONDS_PER_HOUR, self.horizon_s) - np.maximum(starts, now), 0.0, None)
        capacity = np.clip(self.num_gpus[:, None] * hour_s[None, :] / SECONDS_PER_HOUR - held, 0.0, None)
        capacity_kwh = capacity * self.gpu_kw[:, None]
        demand = np.zeros(price.shape[1])
        for job, t_in in later:
            jid = job.job_id
            t_min = self.lb_iteration_s[jid]
            end = t_in + job.iterations * t_min
            overlap = np.clip(np.minimum(starts + SECONDS_PER_HOUR, end) - np.maximum(starts, t_in), 0.0, None)
            demand += overlap / t_min * self.lb_energy_kwh[jid]
        order = np.argsort(price, axis=0, kind="stable")
        sorted_price = np.take_along_axis(price, order, axis=0)
        held_kwh = np.cumsum(np.take_along_axis(capacity_kwh, order, axis=0), axis=0)
        marginal = np.minimum((held_kwh < demand[None, :]).sum(axis=0), price.shape[0] - 1)
        clearing = sorted_price[marginal, np.arange(price.shape[1])]
        clearing = np.where(demand > 0.0, clearing, -np.inf)
        lift = np.clip(clearing[None, :] - price, 0.0, None)
        return lift, float((lift * capacity_kwh).sum())

    def _job_value(self, t_in: float, remaining: float, t_min: float, e_min: float, negative: np.ndarray,
                   positive: np.ndarray, first: int) -> float:
        """The least ``(f − t_in)/T_ref + w·cost/C_ref`` of one job over its finishes ``f`` (class docstring).

        ``t_min`` and ``e_min`` are an iteration's least time (s) and energy (kWh); per hour from hour ``first`` on,
        ``negative`` (≤ 0, USD/h) is the least cost of an hour's running at negative prices and ``positive`` (≥ 0,
        USD/kWh) the least price of an iteration's energy elsewhere."""
        return job_value(negative, positive, first * SECONDS_PER_HOUR, t_in, remaining, t_min, e_min, self.horizon_s,
                         self.t_ref_s, self.cost_weight / self.c_ref_usd)


def _split(per_kwh: np.ndarray, most_kw: float) -> tuple[np.ndarray, np.ndarray]:
    """A job's least price per kWh in each hour as ``job_value``'s two parts: an hour at a negative price costs at
    least the job's largest power ``most_kw`` bought at it (and its iterations nothing more); other hours cost the
    price of each iteration's energy."""
    return most_kw * np.minimum(per_kwh, 0.0), np.maximum(per_kwh, 0.0)


@jit
def job_value(negative: np.ndarray, positive: np.ndarray, first_s: float, t_in: float, remaining: float, t_min: float,
              e_min: float, horizon_s: float, t_ref_s: float, weight: float) -> float:
    """:meth:`FutureBound._job_value` compiled: the least ``(f − t_in)/t_ref_s + weight·cost`` over finishes ``f``.

    Hour ``h`` starts at ``first_s + 3600·h``. A finish ``f`` allows at most ``seconds/t_min`` iterations in each
    hour's part of ``[t_in, f]``; that part costs ``negative[h]·seconds/3600`` (≤ 0) plus ``e_min·positive[h]`` per
    iteration run in it. The least cost for ``f`` fills the ``remaining`` iterations into the hours of lowest
    ``positive`` first. Candidate finishes: the earliest, ``t_in + remaining·t_min``, and every later hour boundary
    up to the horizon (between two of them time and cost are linear); staying past the horizon counts the time up
    to it and the negative parts."""
    if t_in >= horizon_s:
        return 0.0
    hour_s = 3600.0
    n = positive.shape[0]
    least_cost = 0.0  # every negative part until the horizon: no finish pays less
    for h in range(n):
        start = first_s + hour_s * h
        seconds = min(start + hour_s, horizon_s) - max(start, t_in)
        if seconds > 0.0:
            least_cost += negative[h] * seconds / hour_s
    best = (horizon_s - t_in) / t_ref_s + weight * least_cost
    f_min = t_in + remaining * t_min
    prices = np.empty(n)
    caps = np.empty(n)
    f = f_min
    while f <= horizon_s:
        jct = (f - t_in) / t_ref_s
        if jct + weight * least_cost >= best:
            break  # later finishes only add time
        cost = 0.0
        count = 0
        for h in range(n):
            start = first_s + hour_s * h
            seconds = min(start + hour_s, f) - max(start, t_in)
            if seconds <= 0.0:
                continue
            cost += negative[h] * seconds / hour_s
            prices[count] = positive[h]
            caps[count] = seconds / t_min
            count += 1
        need = remaining
        order = np.argsort(prices[:count])
        for i in order:
            take = min(caps[i], need)
            cost += e_min * take * prices[i]
            need -= take
            if need <= 0.0:
                break
        best = min(best, jct + weight * cost)
        f = first_s + hour_s * (math.floor((f - first_s) / hour_s) + 1)  # the next hour boundary after f
    return best


def state_key(env: GeoPipeEnv, shapes: tuple[int, ...]) -> tuple:
    """What decides every future reward of ``env``: the clock, the waiting jobs' shapes, and the running jobs'
    shapes with their placements and iterations left (jobs yet to arrive follow from the clock); ``shapes`` is
    :func:`job_shapes` of the episode's jobs. The waiting jobs are sorted when the queue slots show them all;
    otherwise their order decides which ones show, and is kept."""
    sim = env.sim
    waiting = [shapes[j] for j in sim.waiting]
    waiting = tuple(waiting if len(waiting) > env.queue_slots else sorted(waiting))
    running = tuple(sorted(
        (shapes[jid], rj.placement.regions, rj.placement.stages, float(rj.remaining_iters))
        for jid, rj in sim.running.items()
    ))
    return (float(sim.now_s), waiting, running)


def play_plan(env: GeoPipeEnv, actions: Iterable[int]) -> tuple[float, dict[str, Any], bool]:
    """Step ``env`` through ``actions``; (the rewards' sum, the last info, whether the episode ended)."""
    total = 0.0
    info: dict[str, Any] = {}
    for a in actions:
        _, reward, terminated, truncated, info = env.step(int(a))
        total += float(reward)
        if terminated or truncated:
            return total, info, True
    return total, info, False


def policy_plan(env: GeoPipeEnv, name: str) -> tuple[list[int], float, dict[str, float]]:
    """The plan a scripted policy plays from ``env``'s decision on (on a copy): (actions, return, metrics)."""
    from geopipe_baselines import make_policy

    policy = make_policy(name)
    sim_env = copy_env(env)
    policy.reset(sim_env)
    info = {"action_mask": sim_env.action_masks()}
    obs = None
    actions, total = [], 0.0
    while True:
        a = int(policy.act(obs, info))
        actions.append(a)
        obs, reward, terminated, truncated, info = sim_env.step(a)
        total += float(reward)
        if terminated or truncated:
            return actions, total, info["episode_metrics"]


class _Stop(Exception):
    """The search's time limit was reached."""


class Search:
    """One branch-and-bound search from an env's current decision (the env itself is never stepped).

    Args:
        env: the unwrapped env, reset and not ended.
        time_limit_s: stop after this long with the best plan so far (``proven=False``); None: no limit.
        progress_every_s: a progress line on ``stream`` this often (nodes, rate, cuts, best return); None: silent.
        stream: where progress goes (default stderr).
        seed_policies: scripted policies whose best plan is the first incumbent (empty: the search's first dive).
        label: names the search in its progress lines (e.g. the seed).
        stop_on_interrupt: on Ctrl-C, end the search and return the best plan so far with ``proven=False``
            (True), or let the ``KeyboardInterrupt`` through after saying where the search stood (False).
        unknown_jobs: jobs whose arrivals ``env`` has dropped (``ClusterSim.drop_arrivals_to_come``): the bound
            leaves them out.
    """

    def __init__(self, env: GeoPipeEnv, time_limit_s: float | None = None,
                 progress_every_s: float | None = DEFAULT_PROGRESS_EVERY_S, stream: TextIO | None = None,
                 seed_policies: Iterable[str] = SEED_POLICIES, label: str = "", stop_on_interrupt: bool = True,
                 unknown_jobs: frozenset[int] = frozenset()) -> None:
        self.root = env
        self.time_limit_s = time_limit_s
        self.progress_every_s = progress_every_s
        self.stream = sys.stderr if stream is None else stream
        self.seed_policies = tuple(seed_policies)
        self.label = label
        self.stop_on_interrupt = stop_on_interrupt
        self.bound = FutureBound(env, unknown_jobs)
        self.copier = EnvCopier(env)
        self.shapes = job_shapes(env.world.jobs)
        self.seen: dict[tuple, float] = {}
        self.path: list[int] = []
        self.best_actions: list[int] = []
        self.best_return = -math.inf
        self.best_metrics: dict[str, float] = {}
        self.nodes = self.cut_by_bound = self.cut_as_seen = 0
        self.improvements: list[tuple[float, float]] = []
        self.started = self.next_report = 0.0

    def run(self) -> Solution:
        """Search to the end (or to the time limit or Ctrl-C) and return the best plan."""
        self.started = time.perf_counter()
        self.next_report = self.started + (self.progress_every_s if self.progress_every_s is not None else math.inf)
        first_source = ""
        for name in self.seed_policies:
            actions, total, metrics = policy_plan(self.root, name)
            if total > self.best_return:
                self.best_actions, self.best_return, self.best_metrics, first_source = actions, total, metrics, name
        first_return = self.best_return
        stopped_by = None
        try:
            self._expand(self.copier.copy(self.root), 0.0)
        except _Stop:
            stopped_by = "time limit"
            self._say(f"time limit of {self.time_limit_s:g} s reached; the best plan so far is not proven optimal")
        except KeyboardInterrupt:
            if not self.stop_on_interrupt:
                self._say("interrupted")
                raise
            stopped_by = "interrupted"
            self._say("interrupted; the best plan so far is not proven optimal")
        wall_s = time.perf_counter() - self.started
        if stopped_by is None and self.progress_every_s is not None and wall_s >= self.progress_every_s:
            self._say("done, proven optimal")
        return Solution(
            list(self.best_actions), self.best_return, stopped_by is None, self.best_metrics, self.nodes,
            self.cut_by_bound, self.cut_as_seen, wall_s, first_return, first_source, self.improvements, stopped_by,
        )

    def _say(self, what: str) -> None:
        elapsed = time.perf_counter() - self.started
        rate = self.nodes / elapsed if elapsed > 0 else 0.0
        name = f"optimal {self.label}" if self.label else "optimal"
        print(f"{name}: {elapsed:.0f} s, {self.nodes:,} nodes ({rate:,.0f}/s), {self.cut_by_bound:,} cut by the bound, "
              f"{self.cut_as_seen:,} as seen; best return {self.best_return:.4f}; {what}", file=self.stream, flush=True)

    def _tick(self) -> None:
        """A progress line when one is due; :class:`_Stop` at the time limit."""
        now = time.perf_counter()
        if now >= self.next_report:
            self._say("searching")
            self.next_report = now + self.progress_every_s
        if self.time_limit_s is not None and now - self.started >= self.time_limit_s:
            raise _Stop

    def _expand(self, env: GeoPipeEnv, so_far: float) -> None:
        """Search every continuation of ``env`` (at a decision, ``so_far`` earned since the root); ``env`` is used
        up."""
        self.nodes += 1
        if self.nodes % TICK_EVERY_NODES == 0:
            self._tick()
        key = state_key(env, self.shapes)
        earlier = self.seen.get(key)
        if earlier is not None and so_far <= earlier + RELATIVE_TOLERANCE * (abs(earlier) + 1.0):
            self.cut_as_seen += 1
            return
        self.seen[key] = so_far
        bound = so_far + self.bound.upper_bound(env)
        if bound <= self.best_return + RELATIVE_TOLERANCE * (abs(self.best_return) + 1.0):
            self.cut_by_bound += 1
            return
        children = self._children(env)
        last = len(children) - 1
        snapshot = self.copier.snapshot(env) if last else b""
        for i, action in enumerate(children):
            child = env if i == last else self.copier.load(snapshot)
            _, reward, terminated, truncated, info = child.step(action)
            self.path.append(action)
            total = so_far + float(reward)
            if terminated or truncated:
                if total > self.best_return:
                    self.best_return, self.best_actions = total, list(self.path)
                    self.best_metrics = info["episode_metrics"]
                    self.improvements.append((time.perf_counter() - self.started, total))
            else:
                self._expand(child, total)
            self.path.pop()

    @staticmethod
    def _children(env: GeoPipeEnv) -> list[int]:
        """The distinct valid launches, best estimated first (duration ÷ T_ref + w·cost ÷ C_ref, as the reward
        weighs them), then wait."""
        launches = distinct_launches(env, env.action_masks())
        k = env.num_strategies

        def score(a: int) -> float:
            info = env.candidate(a // k, a % k)
            value = info.duration_s / env.t_ref_s + env.cost_weight * info.cost_usd / env.c_ref_usd
            return value if math.isfinite(value) else math.inf

        return [*sorted(launches.values(), key=lambda a: (score(a), a)), env.wait_action]


def solve(env: Any, time_limit_s: float | None = None, progress_every_s: float | None = DEFAULT_PROGRESS_EVERY_S,
          stream: TextIO | None = None, seed_policies: Iterable[str] = SEED_POLICIES, label: str = "",
          stop_on_interrupt: bool = True, known_jobs_only: bool = False) -> Solution:
    """The best plan from ``env``'s current decision (a GeoPipe env or a wrapper of one, reset and not ended); the
    env is copied, never stepped. The arguments are :class:`Search`'s; with ``known_jobs_only`` the search is over a
    copy in which the jobs still to arrive never do (:meth:`ClusterSim.drop_arrivals_to_come`): the best plan for
    the jobs already here, as a planner without foreknowledge of arrivals would find it (its return counts only
    those jobs).

    Raises:
        WorldTooLarge: the world has more than :data:`MAX_JOBS` jobs or :data:`MAX_REGIONS` regions.
        RuntimeError: the env has not been reset, or its episode has ended.
    """
    core = env.unwrapped
    if core.sim is None:
        raise RuntimeError("reset the env before solving it")
    if core.terminated or core.truncated:
        raise RuntimeError("the episode has ended; reset the env before solving it")
    check_world(core)
    unknown: frozenset[int] = frozenset()
    if known_jobs_only:
        core = copy_env(core)
        unknown = core.sim.drop_arrivals_to_come()
    return Search(core, time_limit_s, progress_every_s, stream, seed_policies, label, stop_on_interrupt,
                  unknown).run()


class OptimalPolicy:
    """The exact optimum as a policy: at the start of each episode it solves the episode (:func:`solve`) and then
    plays the plan. Slow, and for small worlds only: it refuses a world of more than :data:`MAX_JOBS` jobs or
    :data:`MAX_REGIONS` regions with one line (:class:`WorldTooLarge`) as soon as it is bound to its env.

    ``stats`` holds the last episode's search: ``proven``, ``nodes``, ``wall_s`` and the plan's ``return``. A search
    stopped by ``time_limit_s`` plays its best plan so far (``proven`` False); Ctrl-C stops the evaluation.
    """

    def __init__(self, name: str = "optimal", time_limit_s: float | None = None,
                 progress_every_s: float | None = DEFAULT_PROGRESS_EVERY_S) -> None:
        self.name = name
        self.env_kwargs: dict[str, Any] = {}
        self.time_limit_s = time_limit_s
        self.progress_every_s = progress_every_s
        self.plan: list[int] = []
        self.stats: dict[str, Any] = {}

    def reset(self, env: Any) -> None:
        check_world(env)
        core = env.unwrapped
        self.plan, self.stats = [], {}
        if core.sim is None or core.terminated or core.truncated:
            return  # bound before a reset (e.g. to check that it takes this env): nothing to solve yet
        solution = solve(core, self.time_limit_s, self.progress_every_s, stop_on_interrupt=False)
        self.plan = solution.actions[::-1]  # popped from the end
        self.stats = {"proven": solution.proven, "nodes": solution.nodes, "wall_s": solution.wall_s,
                      "return": solution.episode_return}

    def act(self, obs: Any, info: dict[str, Any]) -> int:
        if not self.plan:
            raise RuntimeError("optimal: the plan ended before the episode; reset the policy after each env.reset")
        action = self.plan.pop()
        if not info["action_mask"][action]:
            raise RuntimeError(f"optimal: the plan's action {action} is not valid here; the env is not the one solved")
        return action


class KnownJobsOptimalPolicy:
    """The exact optimum without foreknowledge of arrivals: at each decision it solves the world of the jobs already
    here (:func:`solve` with ``known_jobs_only``: every job that has arrived, the cluster's state, the prices and the
    physics exactly, but no job still to come) and plays the first action of that plan. It is a causal policy, as a
    learned one is, so the gap between it and :class:`OptimalPolicy`, which knows every arrival in advance, is a
    measure of what foreknowledge is worth; it is not an upper bound on causal policies, which may anticipate
    arrivals. Slow, and for small worlds only (as :class:`OptimalPolicy`).

    ``stats`` holds the last episode's searches: ``decisions``, ``unproven`` (searches stopped by ``time_limit_s``)
    and ``wall_s``.
    """

    def __init__(self, name: str = "known-jobs-optimal", time_limit_s: float | None = None) -> None:
        self.name = name
        self.env_kwargs: dict[str, Any] = {}
        self.time_limit_s = time_limit_s
        self.stats: dict[str, Any] = {}
        self._env: GeoPipeEnv | None = None

    def reset(self, env: Any) -> None:
        check_world(env)
        self.stats = {"decisions": 0, "unproven": 0, "wall_s": 0.0}
        self._env = env.unwrapped

    def act(self, obs: Any, info: dict[str, Any]) -> int:
        if self._env is None:
            raise RuntimeError("known-jobs-optimal: reset the policy with its env before it acts")
        started = time.perf_counter()
        solution = solve(self._env, self.time_limit_s, progress_every_s=None, stop_on_interrupt=False,
                         known_jobs_only=True)
        self.stats["decisions"] += 1
        self.stats["unproven"] += not solution.proven
        self.stats["wall_s"] += time.perf_counter() - started
        return solution.actions[0]
