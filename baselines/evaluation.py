"""Evaluating policies: episodes over fixed seeds, in parallel, summarised with 95% confidence intervals.

The unit of work is :func:`run_episode` ``(env, policy_spec, seed, cost_weight, record_timeline) -> dict``: a
top-level function of picklable arguments returning a plain dict, so it runs the same in-process and in a
``spawn`` process pool. :func:`run_episodes` fans the episodes out; :func:`summarize` turns the rows into
mean ± CI per (env, policy, metric) with the % change against :data:`REFERENCE_POLICY` and the return's
interquartile mean; :func:`paired_differences` compares policies seed by seed (t intervals, probability of
improvement, verdicts held to a family-wise error by Holm's method; ``baselines.stats``); :func:`markdown_tables`,
:func:`write_csv` and :func:`write_json` report them (``baselines.plots`` draws them). The CLI is
``baselines.evaluate_cli`` (``geopipe-evaluate``, or ``python evaluate.py`` in a source checkout).

Seeds: evaluation uses ``seed_start .. seed_start + n - 1`` with ``seed_start = 1000`` by default. Seeds from
1000 up are held out for evaluation; train on seeds below 1000.
"""

from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
import json
import math
import multiprocessing
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from tqdm import tqdm

import geopipe_env  # registers the env ids; provenance() reads its version and location
from baselines import make_policy, policy_names
from baselines.policy import Policy, play_episode
from baselines.stats import CONFIDENCE, Interval, holm, iqm_interval, mean_ci, probability_of_improvement, t_test_p_value
from baselines.threads import limit_worker_threads
from geopipe_env.env import GeoPipeEnv
from geopipe_env.units import SECONDS_PER_HOUR

DEFAULT_ENV_ID = "GeoPipe-v0"
DEFAULT_SEED_START = 1000  # evaluation seeds are >= 1000; training should draw seeds below
REFERENCE_POLICY = "bace-pipe"  # the % change columns compare every policy with this one when it is evaluated
SCENARIO_SUFFIXES = (".yaml", ".yml")
AGENT_SUFFIX = ".zip"
RESULTS_FILES = ("results.csv", "results.json")  # an --out folder holding either has an earlier evaluation in it
# Episodes already run one per process; a saved agent's small MLP gains nothing from more torch threads and loses
# to contention between the processes.
TORCH_THREADS_PER_PROCESS = 1
# Distributions whose versions a results file records, by import name (recorded only when importable).
RECORDED_PACKAGES = {"gymnasium": "gymnasium", "numpy": "numpy", "torch": "torch", "stable_baselines3": "stable-baselines3", "sb3_contrib": "sb3-contrib"}
GIT_TIMEOUT_S = 10.0

ID_COLUMNS = ("env", "policy", "seed")
SERIES_KEYS = ("jct_h", "comm_slowdown", "timeline")  # per-episode lists, kept out of the CSV
RETURN_KEY = "return"
# Columns of the markdown table: (metric key, header).
TABLE_COLUMNS = (
    ("avg_jct_h", "avg JCT (h)"),
    ("p95_jct_h", "p95 JCT (h)"),
    ("total_cost_usd", "cost ($)"),
    ("energy_kwh", "energy (kWh)"),
    ("carbon_kg", "carbon (kg)"),
    ("gpu_utilization", "GPU util."),
    ("stalled_job_fraction", "stalled frac."),
    ("avg_comm_slowdown", "comm slowdown"),
    ("max_link_utilization", "peak link util."),
    (RETURN_KEY, "return"),
)


class EvaluationInputError(ValueError):
    """A policy, agent file, env id or scenario file that cannot be evaluated; the message says why."""


# ---------------------------------------------------------------------------------------------------- inputs
@dataclass(frozen=True, slots=True)
class EnvSpec:
    """What to ``gym.make``: a registered env id, or ``GeoPipe-v0`` on a scenario file."""

    label: str  # as given on the command line; names the env in tables and files
    env_id: str
    scenario: str | None = None

    @property
    def slug(self) -> str:
        """A file-name-safe prefix for this env's plots."""
        stem = Path(self.scenario).stem if self.scenario is not None else self.env_id
        return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "env"

    def make(self, cost_weight: float | None = None, **policy_kwargs: Any) -> gym.Env:
        """The env, with ``cost_weight`` (None: the scenario's) and the policy's extra kwargs."""
        kwargs = {} if self.scenario is None else {"scenario": self.scenario}
        if cost_weight is not None:
            kwargs["cost_weight"] = cost_weight
        return gym.make(self.env_id, **kwargs, **policy_kwargs)


def parse_env(arg: str) -> EnvSpec:
    """An :class:`EnvSpec` from a command-line argument: a path ending in .yaml/.yml, else an env id."""
    if arg.lower().endswith(SCENARIO_SUFFIXES):
        return EnvSpec(label=arg, env_id=DEFAULT_ENV_ID, scenario=arg)
    return EnvSpec(label=arg, env_id=arg)


def is_agent_spec(spec: str) -> bool:
    """True for a saved agent: an SB3 ``.zip``, or a folder (an RLlib checkpoint)."""
    return spec.lower().endswith(AGENT_SUFFIX) or Path(spec).is_dir()


def build_policy(spec: str) -> Policy:
    """A fresh policy from a scripted name, or from a saved agent (:func:`is_agent_spec`)."""
    if is_agent_spec(spec):
        from agents import load_agent  # imports torch only when an agent is evaluated

        return load_agent(spec)
    return make_policy(spec)


def default_policy_specs(include_agent: bool = True) -> list[str]:
    """Every scripted policy (aliases left out), then the shipped agent's file unless ``include_agent`` is False
    (the CLI leaves it out when the ``[train]`` extra that loads it is not installed)."""
    from agents import pretrained_path

    return [*policy_names(include_aliases=False), *([str(pretrained_path())] if include_agent else [])]


def check_inputs(envs: Sequence[EnvSpec], policy_specs: Sequence[str], cost_weight: float | None) -> list[str]:
    """Build every policy and every (env, policy) pair once; return the policies' names.

    Raises:
        EvaluationInputError: an unknown policy name, a missing or broken agent file, an unknown env id, an env
            that is not a GeoPipe env, a bad scenario file, or an agent trained on another observation space.
    """
    slugs = [e.slug for e in envs]
    if len(set(slugs)) < len(slugs):
        raise EvaluationInputError(f"two envs share the plot prefix in {', '.join(slugs)}; rename a scenario file")
    names = []
    for spec in policy_specs:
        with _input_errors():
            policy = build_policy(spec)
        for env_spec in envs:
            with _input_errors():
                env = env_spec.make(cost_weight, **policy.env_kwargs)
            try:
                if not isinstance(env.unwrapped, GeoPipeEnv):
                    raise EvaluationInputError(f"{env_spec.label} is not a GeoPipe env (got {type(env.unwrapped).__name__})")
                with _input_errors():
                    policy.reset(env)
            finally:
                env.close()
        names.append(policy.name)
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise EvaluationInputError(f"more than one policy is named {', '.join(duplicated)}; give each once")
    return names


@contextmanager
def _input_errors() -> Iterator[None]:
    """Re-raise input errors (ScenarioError, ObservationSpaceMismatch, NameNotFound, a kwarg an env does not take,
    an agent without the ``[train]`` extra installed, ...) as EvaluationInputError."""
    try:
        yield
    except (ValueError, TypeError, FileNotFoundError, ImportError, gym.error.Error) as exc:
        raise EvaluationInputError(str(exc)) from exc


def check_output_folder(out: Path, force: bool = False) -> None:
    """Make sure the results can be written to ``out`` before any episode runs, without creating anything.

    Raises:
        EvaluationInputError: ``out`` is a file, lies below a file, cannot be written, or already holds the
            results of an earlier evaluation (unless ``force``).
    """
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise EvaluationInputError(f"--out {out}: {existing} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):  # a real write, also where os.access says yes (as root)
            pass
    except OSError as exc:
        raise EvaluationInputError(f"--out {out}: cannot write in {existing} ({exc.strerror or exc})") from exc
    earlier = [name for name in RESULTS_FILES if (out / name).exists()]
    if earlier and not force:
        raise EvaluationInputError(
            f"--out {out} holds an earlier evaluation ({', '.join(earlier)}); pass --force to overwrite it, or choose another folder"
        )


def held_out_warning(seeds: Sequence[int]) -> str | None:
    """A one-line warning when some seeds lie below :data:`DEFAULT_SEED_START`, where training draws its seeds."""
    low = [s for s in seeds if s < DEFAULT_SEED_START]
    if not low:
        return None
    return (
        f"seeds {low[0]}..{low[-1]} lie below {DEFAULT_SEED_START}, among the training seeds; "
        f"a trained agent may have seen those episodes (use --seed-start {DEFAULT_SEED_START} or above for held-out results)"
    )


def provenance() -> dict[str, Any]:
    """What produced a results file: the versions of geopipe and the packages it ran on (those importable here),
    and the git commit of the geopipe source (None outside a git checkout) with whether it had local changes."""
    versions: dict[str, str | None] = {"geopipe": geopipe_env.__version__}
    for module, distribution in RECORDED_PACKAGES.items():
        if importlib.util.find_spec(module) is not None:
            try:
                versions[distribution] = importlib.metadata.version(distribution)
            except importlib.metadata.PackageNotFoundError:
                versions[distribution] = None
    commit, dirty = _git_state(Path(geopipe_env.__file__).resolve().parent)
    return {"versions": versions, "git_commit": commit, "git_dirty": dirty}


def _git_state(package_dir: Path) -> tuple[str | None, bool | None]:
    """(commit, has local changes) of the checkout that tracks ``package_dir``; (None, None) if there is none
    (an installed copy, no git, or a git repository that merely contains site-packages)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(package_dir), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    if git("ls-files", "--error-unmatch", "__init__.py") is None:
        return None, None
    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return (commit.strip() if commit else None), (bool(status.strip()) if status is not None else None)


# ---------------------------------------------------------------------------------------------------- episodes
def run_episode(env_spec: EnvSpec, policy_spec: str, seed: int, cost_weight: float | None, record_timeline: bool = False) -> dict[str, Any]:
    """One episode; a plain, picklable dict of its results.

    Keys: ``env``, ``policy``, ``seed``, ``return`` (sum of step rewards), every ``info["episode_metrics"]`` key,
    ``jct_h`` (the finished jobs' JCTs in hours), ``comm_slowdown`` (per launched job, in job order: its mean
    iteration time ÷ the same stages with no WAN boundary) and ``timeline`` (None unless ``record_timeline``: ``t_h``,
    ``gpus`` (allocated GPUs per region after each launch and completion, closed at the episode's end),
    ``regions`` and ``capacity``).
    """
    policy = build_policy(policy_spec)
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
    instance with ``workers`` CPUs or on the cluster at ``ray_address`` (:mod:`baselines.ray_backend`). Either way a
    saved agent runs torch on one thread per process.
    """
    tasks = [(e, p, s, cost_weight, s == seeds[0]) for e in envs for p in policy_specs for s in seeds]
    if backend == "ray":
        from baselines.ray_backend import run_tasks

        return run_tasks(tasks, ray_address, workers, progress)
    if backend != "process":
        raise ValueError(f"unknown backend {backend!r}; expected process or ray")
    bar = tqdm(total=len(tasks), desc="episodes", unit="ep", disable=not progress)
    try:
        if workers <= 1:
            with_agent = any(is_agent_spec(spec) for spec in policy_specs)
            rows = []
            with _torch_threads(TORCH_THREADS_PER_PROCESS) if with_agent else nullcontext():
                for task in tasks:
                    rows.append(run_episode(*task))
                    bar.update()
            return rows
        with worker_pool(min(workers, len(tasks))) as pool:
            futures = [pool.submit(run_episode, *task) for task in tasks]
            for _ in as_completed(futures):
                bar.update()
            return [f.result() for f in futures]
    finally:
        bar.close()


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A ``spawn`` process pool whose workers run torch on one thread (:func:`baselines.threads.limit_worker_threads`)."""
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=limit_worker_threads
    )


@contextmanager
def _torch_threads(num_threads: int) -> Iterator[None]:
    """Run the block with torch on ``num_threads`` threads, and give the caller's thread count back after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------------- statistics
class Comparison(NamedTuple):
    """``subject − other`` in a metric where higher is better (the return), over the seeds both ran.

    ``mean`` ± ``ci95`` is the paired t interval (unadjusted); ``p_value`` the paired t-test's, ``p_holm`` the same
    adjusted by Holm over every comparison of the evaluation, which decides ``verdict`` ("better", "worse", "not
    significant", or "n/a" with one seed); ``prob_improvement`` is P(subject > other) with its bootstrap interval.
    """

    mean: float
    ci95: float
    n: int
    p_value: float
    p_holm: float
    verdict: str
    prob_improvement: float
    prob_improvement_low: float
    prob_improvement_high: float


def metric_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The scalar result columns of the rows (``return`` and the episode metrics), in row order."""
    return [k for k in rows[0] if k not in ID_COLUMNS and k not in SERIES_KEYS] if rows else []


def paired_values(rows: Sequence[dict[str, Any]], a: str, b: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """``metric`` of policies ``a`` and ``b`` on the seeds where both have a finite value, aligned by seed (rows of
    one env)."""
    by_seed = {(r["policy"], r["seed"]): float(r[metric]) for r in rows}
    pairs = [
        (value, by_seed[(b, seed)])
        for (policy, seed), value in by_seed.items()
        if policy == a and (b, seed) in by_seed and math.isfinite(value) and math.isfinite(by_seed[(b, seed)])
    ]
    x, y = (np.array(v, dtype=float) for v in zip(*pairs)) if pairs else (np.array([]), np.array([]))
    return x, y


def change_vs_reference_pct(rows: Sequence[dict[str, Any]], policy: str, reference: str, metric: str) -> float:
    """``100·(mean − mean_ref) / |mean_ref|`` over the seeds where both have a finite value (NaN if none).

    The denominator is ``|mean_ref|`` so the sign says whether the value went up or down, also for the (negative)
    return: −10% JCT is faster, +10% return is better.
    """
    mine, ref = paired_values(rows, policy, reference, metric)
    if not mine.size:
        return math.nan
    ref_mean = float(ref.mean())
    return 100.0 * (float(mine.mean()) - ref_mean) / abs(ref_mean) if ref_mean != 0 else math.nan


def paired_differences(
    rows: Sequence[dict[str, Any]], subjects: Sequence[str], metric: str = RETURN_KEY, confidence: float = CONFIDENCE
) -> dict[str, dict[str, dict[str, Comparison]]]:
    """``{env: {subject: {other: Comparison}}}``: ``subject − other`` in ``metric`` (higher is better) over the
    seeds both ran, for each subject evaluated on that env and every other policy there.

    Pairing by seed removes the variation that both policies share (the workload, the prices), which dominates
    the spread of either policy's own values. Every comparison returned is one member of the family whose
    family-wise error Holm's method holds at ``1 − confidence``: with 11 comparisons an unadjusted 5% test would
    call some difference significant by chance far more often than 5% of the time.
    """
    found: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = {}
    for env in dict.fromkeys(r["env"] for r in rows):
        env_rows = [r for r in rows if r["env"] == env]
        policies = list(dict.fromkeys(r["policy"] for r in env_rows))
        for subject in (s for s in subjects if s in policies):
            for other in policies:
                if other != subject:
                    found[(env, subject, other)] = paired_values(env_rows, subject, other, metric)
    p_values = [t_test_p_value(x - y) for x, y in found.values()]
    out: dict[str, dict[str, dict[str, Comparison]]] = {env: {} for env in dict.fromkeys(r["env"] for r in rows)}
    for ((env, subject, other), (x, y)), p, p_holm in zip(found.items(), p_values, holm(p_values)):
        diff = mean_ci(x - y, confidence)
        improvement = probability_of_improvement([(x, y)], confidence) if x.size else Interval(math.nan, math.nan, math.nan, 0)
        out[env].setdefault(subject, {})[other] = Comparison(
            diff.mean, diff.ci95, diff.n, p, p_holm, _verdict(diff.mean, p_holm, diff.n, 1.0 - confidence), *improvement[:3]
        )
    return out


def _verdict(mean: float, p_holm: float, n: int, alpha: float) -> str:
    if n < 2:
        return "n/a"
    if p_holm <= alpha:
        return "better" if mean > 0 else "worse"
    return "not significant"


def improvement_across_envs(
    rows: Sequence[dict[str, Any]], subjects: Sequence[str], metric: str = RETURN_KEY, confidence: float = CONFIDENCE
) -> dict[str, dict[str, Interval]]:
    """``{subject: {other: Interval}}``: P(subject > other) in ``metric`` averaged over the envs both ran, with a
    bootstrap interval stratified by env. The probability is free of each env's scale of returns, so unlike a mean
    it can be pooled over envs."""
    envs = list(dict.fromkeys(r["env"] for r in rows))
    by_env = {env: [r for r in rows if r["env"] == env] for env in envs}
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    out: dict[str, dict[str, Interval]] = {}
    for subject in (s for s in subjects if s in policies):
        out[subject] = {}
        for other in (p for p in policies if p != subject):
            tasks = [pair for env in envs if (pair := paired_values(by_env[env], subject, other, metric))[0].size]
            if tasks:
                out[subject][other] = probability_of_improvement(tasks, confidence)
    return out


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (lower or equal in both coordinates, lower in one)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        dominated = any(
            (xo <= x and yo <= y) and (xo < x or yo < y) for j, (xo, yo) in enumerate(points) if j != i
        )
        if not dominated:
            front.append(i)
    return front


def summarize(rows: Sequence[dict[str, Any]], reference: str = REFERENCE_POLICY) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """``{env: {policy: {metric: {mean, ci95, n[, change_vs_reference_pct]}}}}`` in the rows' order.

    The % change is present for every policy other than ``reference`` when ``reference`` ran on that env. The
    return also carries its interquartile mean with a bootstrap interval (``iqm``, ``iqm_ci_low``, ``iqm_ci_high``):
    less swayed than the mean by the odd episode whose workload or prices are extreme.
    """
    keys = metric_keys(rows)
    summary: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for env in dict.fromkeys(r["env"] for r in rows):
        env_rows = [r for r in rows if r["env"] == env]
        policies = list(dict.fromkeys(r["policy"] for r in env_rows))
        summary[env] = {}
        for policy in policies:
            mine = [r for r in env_rows if r["policy"] == policy]
            stats = {}
            for key in keys:
                entry = mean_ci(r[key] for r in mine)._asdict()
                if reference in policies and policy != reference:
                    entry["change_vs_reference_pct"] = change_vs_reference_pct(env_rows, policy, reference, key)
                stats[key] = entry
            if RETURN_KEY in stats:
                robust = iqm_interval(r[RETURN_KEY] for r in mine)
                stats[RETURN_KEY].update(iqm=robust.estimate, iqm_ci_low=robust.low, iqm_ci_high=robust.high)
            summary[env][policy] = stats
    return summary


# ---------------------------------------------------------------------------------------------------- reports
def _number(x: float) -> str:
    if not math.isfinite(x):
        return "nan"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def _cell(entry: dict[str, float]) -> str:
    text = _number(entry["mean"])
    if entry["n"] > 1:
        text += f" ± {_number(entry['ci95'])}"
    if "change_vs_reference_pct" in entry and math.isfinite(entry["change_vs_reference_pct"]):
        text += f" ({entry['change_vs_reference_pct']:+.1f}%)"
    return text


def _bracket(low: float, high: float, fmt: str = "+.3f") -> str:
    """``[low, high]``, or "" when the interval is undefined (one seed)."""
    return f"[{low:{fmt}}, {high:{fmt}}]" if math.isfinite(low) and math.isfinite(high) else ""


def markdown_tables(summary: dict[str, Any], seeds: Sequence[int], reference: str = REFERENCE_POLICY) -> str:
    """One markdown table per env: mean ± 95% CI per metric, with the % change vs ``reference`` in brackets, and
    the return's IQM with its bootstrap interval."""
    blocks = []
    for env, policies in summary.items():
        note = f"; (±x%) = change of the mean vs {reference} on the same seeds" if reference in policies else ""
        seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}–{seeds[-1]}"
        lines = [
            f"### {env}: {len(seeds)} episode(s), {seed_text}; mean ± {CONFIDENCE:.0%} CI (t){note}; "
            f"IQM = interquartile mean over seeds, {CONFIDENCE:.0%} bootstrap CI",
            "",
            "| policy | " + " | ".join(header for _, header in TABLE_COLUMNS) + " | return IQM |",
            "|---" * (len(TABLE_COLUMNS) + 2) + "|",
        ]
        for policy, stats in policies.items():
            ret = stats[RETURN_KEY]
            iqm_text = f"{_number(ret['iqm'])} {_bracket(ret['iqm_ci_low'], ret['iqm_ci_high'], '.4g')}".rstrip()
            lines.append(f"| {policy} | " + " | ".join(_cell(stats[key]) for key, _ in TABLE_COLUMNS) + f" | {iqm_text} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def paired_tables(
    differences: dict[str, dict[str, dict[str, Comparison]]], metric: str = RETURN_KEY, confidence: float = CONFIDENCE
) -> str:
    """Markdown tables of :func:`paired_differences`: one per (env, subject), a row per other policy, and a note on
    how the verdicts were reached."""
    blocks = []
    family = sum(len(others) for subjects in differences.values() for others in subjects.values())
    for env, subjects in differences.items():
        for subject, others in subjects.items():
            lines = [
                f"#### {env}: paired {metric} difference, {subject} − policy, same seeds",
                "",
                f"| policy | mean ± {confidence:.0%} CI (t) | {confidence:.0%} CI | P({subject} > policy) | p (Holm) | verdict |",
                "|---|---|---|---|---|---|",
            ]
            for other, c in others.items():
                spread = f" ± {_number(c.ci95)}" if c.n > 1 else ""
                ci = _bracket(c.mean - c.ci95, c.mean + c.ci95) or "—"
                improvement = f"{c.prob_improvement:.2f} {_bracket(c.prob_improvement_low, c.prob_improvement_high, '.2f')}".rstrip()
                p_holm = f"{c.p_holm:.3g}" if math.isfinite(c.p_holm) else "—"
                lines.append(f"| {other} | {c.mean:+.3f}{spread} | {ci} | {improvement} | {p_holm} | {c.verdict} (n={c.n}) |")
            blocks.append("\n".join(lines))
    if not blocks:
        return ""
    blocks.append(
        f"Verdict: better / worse when the paired t-test's p-value, Holm-adjusted over all {family} comparisons above, is at "
        f"most {1 - confidence:.2g} (family-wise error {1 - confidence:.0%}); the CIs are per comparison, unadjusted. "
        f"P(a > policy): the chance that a's {metric} on one seed beats the policy's on another (0.5: neither tends "
        f"higher), with a {confidence:.0%} bootstrap CI over seeds."
    )
    return "\n\n".join(blocks) + "\n"


def improvement_table(improvement: dict[str, dict[str, Interval]], num_envs: int, metric: str = RETURN_KEY) -> str:
    """A markdown table of :func:`improvement_across_envs`: one row per (subject, other policy)."""
    lines = [
        f"#### all {num_envs} envs: P(subject > policy) in {metric}, averaged over envs; {CONFIDENCE:.0%} bootstrap CI stratified by env",
        "",
        "| subject | policy | P(subject > policy) | CI |",
        "|---|---|---|---|",
    ]
    for subject, others in improvement.items():
        for other, est in others.items():
            lines.append(f"| {subject} | {other} | {est.estimate:.2f} | {_bracket(est.low, est.high, '.2f') or '—'} |")
    return "\n".join(lines) + "\n"


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """One line per episode: env, policy, seed, return and every episode metric."""
    columns = [*ID_COLUMNS, *metric_keys(rows)]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_json(rows: Sequence[dict[str, Any]], summary: dict[str, Any], envs: Sequence[EnvSpec], meta: dict[str, Any], path: Path) -> None:
    """The summary per env and policy, the Pareto front (avg JCT vs cost), the episodes (without timelines) and
    ``meta`` (command line, seeds, ...). NaN is written as null."""
    by_label = {e.label: e for e in envs}
    out_envs = {}
    for env, policies in summary.items():
        names = list(policies)
        front = pareto_front([(policies[p]["avg_jct_h"]["mean"], policies[p]["total_cost_usd"]["mean"]) for p in names])
        out_envs[env] = {
            "env_id": by_label[env].env_id,
            "scenario": by_label[env].scenario,
            "policies": policies,
            "pareto_front_jct_cost": [names[i] for i in front],
        }
    episodes = [{k: v for k, v in r.items() if k != "timeline"} for r in rows]
    document = {**meta, "reference_policy": REFERENCE_POLICY, "envs": out_envs, "episodes": episodes}
    with open(path, "w") as f:
        json.dump(_json_safe(document), f, indent=1, allow_nan=False)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
