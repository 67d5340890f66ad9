"""geopipe_evaluation.stats: the interquartile mean, bootstrap intervals, the probability of improvement and Holm's method,
against values worked out by hand and against their stated error rates."""

import math

import numpy as np
import pytest

from geopipe_evaluation.stats import holm, iqm, iqm_interval, probability_of_improvement, t_test_p_value


def test_iqm_drops_a_quarter_at_each_end():
    """The IQM of 8 values is the mean of the middle 4, so one extreme episode does not move it."""
    assert iqm(np.arange(1.0, 9.0)) == 4.5
    assert iqm(np.array([1.0, 2, 3, 4, 5, 6, 7, 1000])) == 4.5
    assert iqm(np.array([7.0, 1, 3])) == 11 / 3  # fewer than 4 values: nothing to drop
    np.testing.assert_allclose(iqm(np.array([[1.0, 2, 3, 4], [10, 0, 0, 10]]), axis=1), [2.5, 5.0])


def test_iqm_interval_is_deterministic_and_nan_for_one_value():
    """The interval holds the point, repeats exactly, is a point for equal values, and is NaN for one value."""
    values = [3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0, 6.0]
    first, second = iqm_interval(values), iqm_interval(values)
    assert first == second and first.low <= first.estimate <= first.high and first.n == 8
    assert iqm_interval([2.0, 2.0, 2.0])[:3] == (2.0, 2.0, 2.0)
    one = iqm_interval([5.0, math.nan])
    assert one.estimate == 5.0 and one.n == 1 and math.isnan(one.low) and math.isnan(one.high)


def test_iqm_interval_covers_the_true_iqm_about_95_percent_of_the_time():
    """Over 200 samples of 20 normal values the 95% bootstrap interval holds the true IQM (0) 88-99% of the time."""
    rng = np.random.default_rng(7)
    covered = sum(
        (est := iqm_interval(rng.normal(size=20), reps=1000, seed=i)).low <= 0.0 <= est.high for i in range(200)
    )
    assert 176 <= covered <= 198


def test_probability_of_improvement_by_hand():
    """P(X > Y) counts every (seed, seed) pair, a tie as one half: x = [1, 2, 3] vs y = [0, 2, 4] gives 4.5 / 9."""
    est = probability_of_improvement([(np.array([1.0, 2.0, 3.0]), np.array([0.0, 2.0, 4.0]))])
    assert est.estimate == 0.5 and est.n == 3 and est.low <= 0.5 <= est.high
    always = probability_of_improvement([(np.array([5.0, 6.0, 7.0]), np.array([1.0, 2.0, 3.0]))])
    assert always[:3] == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="equal-length"):
        probability_of_improvement([(np.array([1.0, 2.0]), np.array([1.0]))])


def test_bootstrap_of_improvement_is_stratified_by_task():
    """One task always won and one always lost average to 0.5 in every replicate, because seeds are resampled
    within each task (pooling the seeds of both tasks would make the replicates vary)."""
    won = (np.array([2.0, 3.0, 4.0, 5.0]), np.array([0.0, 0.5, 1.0, 1.5]))
    lost = (np.array([0.0, 10.0, 20.0, 30.0]), np.array([100.0, 110.0, 120.0, 130.0]))
    assert probability_of_improvement([won, lost])[:3] == (0.5, 0.5, 0.5)


def test_t_test_p_value_matches_the_closed_form():
    """For df = 2 the two-sided p-value is 1 − t/√(t² + 2); no spread gives 0 or 1; one value gives NaN."""
    t = 4.0  # differences [1, 1, 2]: mean 4/3, standard error (1/√3)/√3
    assert t_test_p_value([1.0, 1.0, 2.0]) == pytest.approx(1 - t / math.sqrt(t * t + 2), rel=1e-12)
    assert t_test_p_value([2.0, 2.0]) == 0.0 and t_test_p_value([0.0, 0.0]) == 1.0
    assert math.isnan(t_test_p_value([1.0]))


def test_holm_by_hand():
    """Holm multiplies the k-th smallest of m p-values by m − k + 1 and keeps them non-decreasing; NaN is skipped."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = holm([0.01, math.nan, 0.04])
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.04)
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # 0.8·2 is capped at 1, and 0.9·1 may not fall below it


def test_holm_holds_the_family_wise_error_that_unadjusted_tests_exceed():
    """Eleven comparisons with no real difference: some unadjusted 5% test rejects in about 40% of families,
    Holm's adjusted tests in about 5%."""
    rng = np.random.default_rng(3)
    any_raw = any_holm = 0
    families = 400
    for _ in range(families):
        p_values = [t_test_p_value(rng.normal(size=10)) for _ in range(11)]
        any_raw += min(p_values) <= 0.05
        any_holm += min(holm(p_values)) <= 0.05
    assert any_raw / families > 0.3 and any_holm / families < 0.09
