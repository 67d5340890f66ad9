"""Max-min fair bandwidth sharing and exact energy/cost integration."""

import numpy as np
import pytest

from geopipe_env.physics.energy import HourlyIntegral, energy_kwh, gpu_power_w
from geopipe_env.physics.network import is_stalled
from reference import max_min_fair


def _random_instance(rng, num_jobs, num_links):
    usage = (rng.random((num_jobs, num_links)) < 0.3).astype(float)
    demand = rng.uniform(0.1, 5.0, num_jobs)
    capacity = rng.uniform(0.5, 10.0, num_links)
    return demand, usage, capacity


@pytest.mark.parametrize("seed", range(50))
def test_capacities_never_exceeded(seed):
    """Allocated rates never exceed any link's capacity nor any job's demand, and are non-negative."""
    rng = np.random.default_rng(seed)
    demand, usage, capacity = _random_instance(rng, rng.integers(1, 12), rng.integers(1, 10))
    rates = max_min_fair(demand, usage, capacity)
    assert (rates >= 0).all() and (rates <= demand + 1e-12).all()
    assert (usage.T @ rates <= capacity * (1 + 1e-9)).all()


@pytest.mark.parametrize("seed", range(50))
def test_max_min_fair_is_bottlenecked(seed):
    """Every job is at its demand or crosses a saturated link where no other job has a larger rate."""
    rng = np.random.default_rng(seed)
    demand, usage, capacity = _random_instance(rng, rng.integers(1, 12), rng.integers(1, 10))
    rates = max_min_fair(demand, usage, capacity)
    load = usage.T @ rates
    for j in range(len(demand)):
        if rates[j] >= demand[j] - 1e-9:
            continue
        links = np.flatnonzero(usage[j])
        bottleneck = [
            l for l in links if load[l] >= capacity[l] * (1 - 1e-9) and rates[j] >= rates[usage[:, l] > 0].max() - 1e-9
        ]
        assert bottleneck, f"job {j} is neither satisfied nor bottlenecked"


@pytest.mark.parametrize("demand,capacity", [(1.0, 10.0), (10.0, 1.0), (2.5, 2.5)])
def test_single_job_gets_min_of_demand_and_capacity(demand, capacity):
    """A job alone on a link gets min(demand, capacity)."""
    rates = max_min_fair(np.array([demand]), np.array([[1.0, 1.0]]), np.array([capacity, 100.0]))
    assert rates[0] == pytest.approx(min(demand, capacity))


@pytest.mark.parametrize("seed", range(50))
def test_adding_flows_never_speeds_a_job_up(seed):
    """No job runs faster with competitors than alone, and adding a job never raises the slowest rate (leximin)."""
    rng = np.random.default_rng(seed)
    demand, usage, capacity = _random_instance(rng, rng.integers(1, 8), rng.integers(1, 8))
    before = max_min_fair(demand, usage, capacity)
    extra_usage = (rng.random((1, usage.shape[1])) < 0.5).astype(float)
    after = max_min_fair(np.append(demand, rng.uniform(0.1, 5.0)), np.vstack([usage, extra_usage]), capacity)
    for j in range(len(demand)):
        alone = max_min_fair(demand[j : j + 1], usage[j : j + 1], capacity)[0]
        assert after[j] <= alone + 1e-9 and before[j] <= alone + 1e-9
    # The old jobs' allocation after the addition is feasible for the old problem, so it cannot beat the
    # max-min (leximin-optimal) allocation: its sorted rate vector is lexicographically no larger.
    old_sorted, new_sorted = np.sort(before), np.sort(after[:-1])
    diff = new_sorted - old_sorted
    first = np.flatnonzero(np.abs(diff) > 1e-9)
    assert first.size == 0 or diff[first[0]] < 0


def test_max_min_is_not_per_job_monotone():
    """Documented limit: a new flow can speed up an unrelated job by slowing that job's competitor elsewhere.

    Job j uses links L1 and L2, job D uses L2 and L3, capacities (10, 2, 1). Adding C on L1 and L3 squeezes D
    on L3 from 1 to 0.5, which frees L2 for j: j goes from 1 to 1.5.
    """
    usage = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    capacity = np.array([10.0, 2.0, 1.0])
    before = max_min_fair(np.array([9.0, 9.0]), usage, capacity)
    after = max_min_fair(np.array([9.0, 9.0, 9.0]), np.vstack([usage, [1.0, 0.0, 1.0]]), capacity)
    assert before == pytest.approx([1.0, 1.0]) and after == pytest.approx([1.5, 0.5, 0.5])


def test_equal_split_on_shared_link():
    """Two equal jobs on one link each get half its capacity when both demand more."""
    rates = max_min_fair(np.array([5.0, 5.0]), np.ones((2, 1)), np.array([4.0]))
    assert np.allclose(rates, [2.0, 2.0])
    assert is_stalled(rates[0], 5.0) and not is_stalled(5.0, 5.0)


def test_job_without_links_gets_its_demand():
    """A job that uses no WAN link is never limited."""
    rates = max_min_fair(np.array([3.0, 1.0]), np.array([[0.0], [1.0]]), np.array([0.5]))
    assert rates[0] == 3.0 and rates[1] == pytest.approx(0.5)


def test_power_formula():
    """GPU power is n·(idle + u·(busy − idle))·PUE."""
    assert gpu_power_w(4, 50.0, 300.0, 0.5, 1.2) == pytest.approx(4 * (50 + 0.5 * 250) * 1.2)
    assert energy_kwh(1000.0, 3600.0) == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(10))
def test_hourly_integral_matches_fine_quadrature(seed):
    """The prefix-sum integral equals a fine Riemann sum over any interval, across hour boundaries."""
    rng = np.random.default_rng(seed)
    values = rng.normal(50.0, 20.0, size=(3, 30))
    integ = HourlyIntegral(values)
    t0, t1 = sorted(rng.uniform(0, 29 * 3600, size=2))
    ts = np.linspace(t0, t1, 200_001)
    mid = (ts[:-1] + ts[1:]) / 2
    hours = np.minimum((mid // 3600).astype(int), 29)
    riemann = (values[:, hours] * np.diff(ts)).sum(axis=1) / 3600
    assert np.allclose(integ.integral(t0, t1), riemann, rtol=1e-4, atol=1e-6)
    # Exactly additive over a split point.
    tm = (t0 + t1) / 2
    assert np.allclose(integ.integral(t0, tm) + integ.integral(tm, t1), integ.integral(t0, t1))


def test_hourly_integral_whole_hours_are_exact():
    """Integrating whole hours sums the hourly values exactly."""
    integ = HourlyIntegral(np.array([[1.0, 2.0, 4.0]]))
    assert integ.integral(0.0, 3 * 3600.0)[0] == pytest.approx(7.0)
    assert integ.integral(1800.0, 5400.0)[0] == pytest.approx(0.5 + 1.0)
    assert integ.at(3600.0)[0] == 2.0


@pytest.mark.parametrize("seed", range(5))
def test_weighted_integral_equals_the_vector_form(seed):
    """The scalar fast path of the candidate table equals ``weights @ integral(t0, t1)[rows]``, also for
    fractional hours, negative start times and ends past the series (held at its last value)."""
    rng = np.random.default_rng(seed)
    values = rng.normal(0.1, 0.2, size=(6, 30))  # negative prices included
    integ = HourlyIntegral(values)
    for _ in range(20):
        t0 = float(rng.uniform(-2.0, 35.0)) * 3600.0
        t1 = t0 + float(rng.uniform(0.0, 12.0)) * 3600.0
        rows = tuple(int(r) for r in rng.choice(6, size=int(rng.integers(1, 4)), replace=False))
        weights = tuple(float(w) for w in rng.uniform(0.1, 5.0, size=len(rows)))
        expected = float(np.asarray(weights) @ integ.integral(t0, t1)[list(rows)])
        assert integ.weighted_integral(rows, weights, t0, t1) == pytest.approx(expected, rel=1e-12, abs=1e-12)
