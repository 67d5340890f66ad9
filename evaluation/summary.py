"""Summarising evaluation rows: mean ± CI per (env, policy, metric), the % change against the reference policy,
the return's interquartile mean, and paired comparisons between policies (t intervals, probability of improvement,
verdicts held to a family-wise error by Holm's method; :mod:`geopipe_evaluation.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from geopipe_evaluation.stats import CONFIDENCE, Interval, holm, iqm_interval, mean_ci, probability_of_improvement, t_test_p_value

REFERENCE_POLICY = "bace-pipe"  # the % change columns compare every policy with this one when it is evaluated
ID_COLUMNS = ("env", "policy", "seed")
SERIES_KEYS = ("jct_h", "comm_slowdown", "timeline")  # per-episode lists, kept out of the CSV
RETURN_KEY = "return"


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
            diff.mean, diff.ci95, diff.n, p, p_holm, verdict(diff.mean, p_holm, diff.n, 1.0 - confidence), *improvement[:3]
        )
    return out


def verdict(mean: float, p_holm: float, n: int, alpha: float = 1.0 - CONFIDENCE) -> str:
    """``better`` or ``worse`` (the sign of a paired ``mean`` difference in a metric where higher is better) when its
    Holm-adjusted p-value is at most ``alpha``, else ``not significant``; ``n/a`` below two seeds."""
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


