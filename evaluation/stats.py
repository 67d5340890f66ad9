"""Statistics of per-seed results: t confidence intervals, the interquartile mean with bootstrap intervals, the
probability of improvement, and Holm's adjustment of p-values for many comparisons.

The interquartile mean (IQM), the percentile bootstrap stratified by task and the probability of improvement
follow rliable (Agarwal et al., "Deep Reinforcement Learning at the Edge of the Statistical Precipice", NeurIPS
2021), written here with numpy alone: rliable brings arch, statsmodels, pandas, scipy and seaborn (about 480 MB,
twice the base install), and its arch dependency fails to import under pandas 3. One deliberate difference: the
policies compared here ran on the same seeds, so a bootstrap replicate draws one set of seeds for both policies
(rliable draws each policy's runs independently, which ignores that pairing). In GeoPipe a "task" is an env and a
"run" is an episode on one seed.

Holm's step-down method (Holm, "A Simple Sequentially Rejective Multiple Test Procedure", Scand. J. Statist. 1979)
keeps the chance of any false "better"/"worse" verdict among all of an evaluation's comparisons at ``alpha``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_REPS = 10_000  # percentile-interval endpoints move by well under 1% of the interval between reruns
BOOTSTRAP_SEED = 0  # a fixed stream, so the same results give the same intervals
IQM_TRIM = 0.25  # the interquartile mean drops the lowest and the highest quarter of the values


class Estimate(NamedTuple):
    """A sample mean with the half-width of its confidence interval (NaN below two values)."""

    mean: float
    ci95: float
    n: int


class Interval(NamedTuple):
    """A point estimate with a percentile bootstrap interval (NaN below two values per task)."""

    estimate: float
    low: float
    high: float
    n: int


# ---------------------------------------------------------------------------------------------------- t statistics
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


def _finite(values: Iterable[float]) -> np.ndarray:
    x = np.asarray(list(values), dtype=float)
    return x[np.isfinite(x)]


def mean_ci(values: Iterable[float], confidence: float = CONFIDENCE) -> Estimate:
    """Mean and t-distribution CI half-width of the finite values (a NaN metric, e.g. no job done, is skipped)."""
    x = _finite(values)
    if x.size == 0:
        return Estimate(math.nan, math.nan, 0)
    if x.size == 1:
        return Estimate(float(x[0]), math.nan, 1)
    spread = float(x.std(ddof=1)) if np.ptp(x) > 0 else 0.0  # equal values: exactly 0, not rounding noise
    half = t_critical(confidence, x.size - 1) * spread / math.sqrt(x.size)
    return Estimate(float(x.mean()), half, int(x.size))


def t_test_p_value(values: Iterable[float]) -> float:
    """The two-sided one-sample t-test p-value of mean zero over the finite values (paired differences).

    NaN below two values; with no spread, 1 when every value is 0 and 0 otherwise.
    """
    x = _finite(values)
    if x.size < 2:
        return math.nan
    if np.ptp(x) == 0:
        return 1.0 if x[0] == 0 else 0.0
    t = abs(float(x.mean())) / (float(x.std(ddof=1)) / math.sqrt(x.size))
    return max(0.0, 1.0 - _t_central_probability(t, x.size - 1))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the given order: a comparison is significant at family-wise level ``alpha``
    when its adjusted p-value is at most ``alpha``. NaN entries stay NaN and do not count in the family."""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    tested = np.flatnonzero(np.isfinite(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    m = order.size
    running = 0.0
    for rank, i in enumerate(order):  # step down: the k-th smallest is multiplied by m - k + 1, kept monotone
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


# ---------------------------------------------------------------------------------------------------- bootstrap
def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """The interquartile mean along ``axis``: the mean after dropping ``floor(n/4)`` values at each end (as
    ``scipy.stats.trim_mean(values, 0.25)``). Robust to the odd extreme episode, yet uses half the data."""
    x = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = x.shape[axis]
    cut = int(IQM_TRIM * n)
    return np.take(x, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def _percentiles(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail])
    return float(low), float(high)


def iqm_interval(values: Iterable[float], confidence: float = CONFIDENCE, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED) -> Interval:
    """The IQM of the finite values with a percentile bootstrap interval over them (seeds resampled with
    replacement)."""
    x = _finite(values)
    if x.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    point = float(iqm(x))
    if x.size == 1:
        return Interval(point, math.nan, math.nan, 1)
    draws = np.random.default_rng(seed).integers(0, x.size, size=(reps, x.size))
    low, high = _percentiles(iqm(x[draws]), confidence)
    return Interval(point, low, high, int(x.size))


def probability_of_improvement(
    tasks: Sequence[tuple[np.ndarray, np.ndarray]],
    confidence: float = CONFIDENCE,
    reps: int = BOOTSTRAP_REPS,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """``P(X > Y)``, averaged over tasks, with a bootstrap interval stratified by task.

    Each task is a pair of arrays of per-seed scores, ``x[i]`` and ``y[i]`` from the same seed (higher is better).
    Within a task the estimate is the Mann-Whitney statistic ``mean_ij S(x_i, y_j)`` with ``S`` = 1 if
    ``x_i > y_j``, 1/2 on a tie, 0 otherwise; 0.5 means neither tends to score higher. Each bootstrap replicate
    resamples the seeds of every task on its own, the same seeds for ``x`` and ``y``. ``n`` is the number of seeds
    of the smallest task.
    """
    tasks = [(np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in tasks]
    if not tasks or any(x.shape != y.shape or x.ndim != 1 or x.size == 0 for x, y in tasks):
        raise ValueError("each task needs two equal-length, non-empty 1-d arrays of per-seed scores")
    rng = np.random.default_rng(seed)
    points, replicates = [], np.zeros(reps)
    for x, y in tasks:
        wins = 0.5 * (np.sign(x[:, None] - y[None, :]) + 1.0)  # (num_seeds, num_seeds): S(x_i, y_j)
        n = x.size
        points.append(float(wins.mean()))
        # A replicate's statistic, sum over drawn (i, j) of S / n², is c·S·c / n² with c the draw counts per seed.
        draws = rng.integers(0, n, size=(reps, n)) + n * np.arange(reps)[:, None]
        counts = np.bincount(draws.ravel(), minlength=reps * n).reshape(reps, n)
        replicates += np.einsum("ri,ij,rj->r", counts, wins, counts) / n**2
    point = float(np.mean(points))
    smallest = min(x.size for x, _ in tasks)
    if smallest < 2:
        return Interval(point, math.nan, math.nan, smallest)
    low, high = _percentiles(replicates / len(tasks), confidence)
    return Interval(point, low, high, smallest)
