"""Evaluating policies: episodes over fixed seeds, in parallel, summarised with 95% confidence intervals.

The unit of work is :func:`run_episode` ``(env, policy_spec, seed, cost_weight, record_timeline) -> dict``: a
top-level function of picklable arguments returning a plain dict, so it runs the same in-process and in a
``spawn`` process pool. :func:`run_episodes` fans the episodes out; :func:`summarize` turns the rows into
mean ± CI per (env, policy, metric) with the % change against :data:`REFERENCE_POLICY`; :func:`markdown_tables`,
:func:`write_csv` and :func:`write_json` report them (``baselines.plots`` draws them). ``evaluate.py`` is the CLI.

Seeds: evaluation uses ``seed_start .. seed_start + n - 1`` with ``seed_start = 1000`` by default. Seeds from
1000 up are held out for evaluation; train on seeds below 1000.
"""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import re
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from tqdm import tqdm

import geopipe_env  # noqa: F401  (registers the env ids)
from baselines import make_policy, policy_names
from baselines.policy import Policy, play_episode
from baselines.threads import limit_worker_threads
from geopipe_env.env import GeoPipeEnv
from geopipe_env.units import SECONDS_PER_HOUR

DEFAULT_ENV_ID = "GeoPipe-v0"
DEFAULT_SEED_START = 1000  # evaluation seeds are >= 1000; training should draw seeds below
REFERENCE_POLICY = "bace-pipe"  # the % change columns compare every policy with this one when it is evaluated
CONFIDENCE = 0.95
SCENARIO_SUFFIXES = (".yaml", ".yml")
AGENT_SUFFIX = ".zip"

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


def default_policy_specs() -> list[str]:
    """Every scripted policy (aliases left out), then every ``agents/pretrained/*.zip`` that exists (sorted)."""
    import agents

    pretrained = Path(agents.__file__).resolve().parent / "pretrained"
    return [*policy_names(include_aliases=False), *sorted(str(p) for p in pretrained.glob(f"*{AGENT_SUFFIX}"))]


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
    ...) as EvaluationInputError."""
    try:
        yield
    except (ValueError, TypeError, FileNotFoundError, gym.error.Error) as exc:
        raise EvaluationInputError(str(exc)) from exc


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
    instance with ``workers`` CPUs or on the cluster at ``ray_address`` (:mod:`baselines.ray_backend`). Each worker
    process runs torch on one thread.
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
            rows = []
            for task in tasks:
                rows.append(run_episode(*task))
                bar.update()
            return rows
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(workers, len(tasks)), context, initializer=limit_worker_threads) as pool:
            futures = [pool.submit(run_episode, *task) for task in tasks]
            for _ in as_completed(futures):
                bar.update()
            return [f.result() for f in futures]
    finally:
        bar.close()


# ---------------------------------------------------------------------------------------------------- statistics
class Estimate(NamedTuple):
    """A sample mean with the half-width of its confidence interval (NaN below two values)."""

    mean: float
    ci95: float
    n: int


def t_critical(confidence: float, df: int) -> float:
    """The two-sided Student-t critical value: ``P(|T| < t) = confidence`` with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    lo, hi = 0.0, 1.0
    while _t_central_probability(hi, df) < confidence:
        lo, hi = hi, 2.0 * hi
    for _ in range(100):  # bisection to double precision
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _t_central_probability(mid, df) < confidence else (lo, mid)
    return 0.5 * (lo + hi)


def _t_central_probability(t: float, df: int) -> float:
    """``P(|T| < t)`` for integer ``df``, in closed form (Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    term = total = 1.0
    if df % 2 == 0:
        for k in range(1, df // 2):
            term *= cos2 * (2 * k - 1) / (2 * k)
            total += term
        return math.sin(theta) * total
    if df == 1:
        return 2.0 * theta / math.pi
    for k in range(1, (df - 1) // 2):
        term *= cos2 * (2 * k) / (2 * k + 1)
        total += term
    return 2.0 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)


def mean_ci(values: Iterable[float], confidence: float = CONFIDENCE) -> Estimate:
    """Mean and t-distribution CI half-width of the finite values (a NaN metric, e.g. no job done, is skipped)."""
    x = np.asarray(list(values), dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return Estimate(math.nan, math.nan, 0)
    if x.size == 1:
        return Estimate(float(x[0]), math.nan, 1)
    spread = float(x.std(ddof=1)) if np.ptp(x) > 0 else 0.0  # equal values: exactly 0, not rounding noise
    half = t_critical(confidence, x.size - 1) * spread / math.sqrt(x.size)
    return Estimate(float(x.mean()), half, int(x.size))


def metric_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The scalar result columns of the rows (``return`` and the episode metrics), in row order."""
    return [k for k in rows[0] if k not in ID_COLUMNS and k not in SERIES_KEYS] if rows else []


def change_vs_reference_pct(rows: Sequence[dict[str, Any]], policy: str, reference: str, metric: str) -> float:
    """``100·(mean − mean_ref) / |mean_ref|`` over the seeds where both have a finite value (NaN if none).

    The denominator is ``|mean_ref|`` so the sign says whether the value went up or down, also for the (negative)
    return: −10% JCT is faster, +10% return is better.
    """
    by_seed = {(r["policy"], r["seed"]): r[metric] for r in rows}
    pairs = [
        (by_seed[(policy, s)], by_seed[(reference, s)])
        for (p, s) in by_seed
        if p == policy and (reference, s) in by_seed and math.isfinite(by_seed[(policy, s)]) and math.isfinite(by_seed[(reference, s)])
    ]
    if not pairs:
        return math.nan
    mine, ref = (float(np.mean(v)) for v in zip(*pairs))
    return 100.0 * (mine - ref) / abs(ref) if ref != 0 else math.nan


def paired_differences(
    rows: Sequence[dict[str, Any]], subjects: Sequence[str], metric: str = RETURN_KEY, confidence: float = CONFIDENCE
) -> dict[str, dict[str, dict[str, Estimate]]]:
    """``{env: {subject: {other: Estimate}}}``: the mean ± CI (t) of ``subject − other`` in ``metric`` over the
    seeds both ran, for each subject evaluated on that env and every other policy there.

    Pairing by seed removes the variation that both policies share (the workload, the prices), which dominates
    the spread of either policy's own values; a CI above zero says the subject is better on this metric.
    """
    out: dict[str, dict[str, dict[str, Estimate]]] = {}
    for env in dict.fromkeys(r["env"] for r in rows):
        by_key = {(r["policy"], r["seed"]): r[metric] for r in rows if r["env"] == env}
        policies = list(dict.fromkeys(p for p, _ in by_key))
        out[env] = {}
        for subject in (s for s in subjects if s in policies):
            out[env][subject] = {
                other: mean_ci(
                    (by_key[(subject, seed)] - value for (p, seed), value in by_key.items() if p == other and (subject, seed) in by_key),
                    confidence,
                )
                for other in policies
                if other != subject
            }
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

    The % change is present for every policy other than ``reference`` when ``reference`` ran on that env.
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


def markdown_tables(summary: dict[str, Any], seeds: Sequence[int], reference: str = REFERENCE_POLICY) -> str:
    """One markdown table per env: mean ± 95% CI per metric, with the % change vs ``reference`` in brackets."""
    blocks = []
    for env, policies in summary.items():
        note = f"; (±x%) = change of the mean vs {reference} on the same seeds" if reference in policies else ""
        seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}–{seeds[-1]}"
        lines = [
            f"### {env}: {len(seeds)} episode(s), {seed_text}; mean ± {CONFIDENCE:.0%} CI (t){note}",
            "",
            "| policy | " + " | ".join(header for _, header in TABLE_COLUMNS) + " |",
            "|---" * (len(TABLE_COLUMNS) + 1) + "|",
        ]
        for policy, stats in policies.items():
            lines.append(f"| {policy} | " + " | ".join(_cell(stats[key]) for key, _ in TABLE_COLUMNS) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def paired_tables(differences: dict[str, dict[str, dict[str, Estimate]]], metric: str = RETURN_KEY) -> str:
    """Markdown tables of :func:`paired_differences`: one per (env, subject), a row per other policy."""
    blocks = []
    for env, subjects in differences.items():
        for subject, others in subjects.items():
            lines = [
                f"#### {env}: paired {metric} difference, {subject} − policy, same seeds; mean ± {CONFIDENCE:.0%} CI (t)",
                "",
                f"| policy | {subject} − policy | {CONFIDENCE:.0%} CI | verdict |",
                "|---|---|---|---|",
            ]
            for other, est in others.items():
                low, high = est.mean - est.ci95, est.mean + est.ci95
                verdict = "better" if low > 0 else "worse" if high < 0 else "not significant"
                lines.append(f"| {other} | {est.mean:+.3f} ± {_number(est.ci95)} | [{low:+.3f}, {high:+.3f}] | {verdict} (n={est.n}) |")
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


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
