"""The personalized frequency oracle (000 Section IV-A) and its error formulas."""

import math

import numpy as np
import pytest

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.mechanisms.personalized import (
    PersonalizedFO,
    grr_count_variance,
    reporting_error,
    sampling_variance,
)
from wevent.verifier.check import check
from wevent.verifier.guard import Guard


def test_000_example_1_absolute_errors() -> None:
    # 8-event privacy for all 100 users, eps = 1, d = 5: the paper prints 152.68; the formula
    # gives 152.6878..., so the printed value is truncated, not rounded.
    assert math.sqrt(grr_count_variance(1 / 8, 100, 5)) == pytest.approx(152.6878, abs=1e-4)
    # Personalized: 98 users with w = 4, 2 users with w = 8: 75.3 as printed.
    two = grr_count_variance(1 / 4, 98, 5) + grr_count_variance(1 / 8, 2, 5)
    assert math.sqrt(two) == pytest.approx(75.3033, abs=1e-4)


def test_weights_are_inverse_average_variances() -> None:
    pfo = PersonalizedFO.for_budgets(5, {Budget("0.5"): 300, Budget("1"): 100, Budget(2): 50})
    w = pfo.weights()
    assert w.sum() == pytest.approx(1.0)
    inv = 1 / pfo.average_variances()
    assert np.allclose(w, inv / inv.sum())
    # Eq. 2 is the inverse-variance combination summed over the d values.
    assert pfo.total_variance() == pytest.approx(pfo.d / inv.sum())


def test_estimate_is_unbiased_with_the_eq2_variance() -> None:
    rng = np.random.default_rng(2)
    d = 4
    pfo = PersonalizedFO.for_budgets(d, {Budget("0.5"): 2000, Budget("1.5"): 1000})
    f = np.array([0.1, 0.2, 0.3, 0.4])
    counts = [np.round(f * size).astype(np.int64) for size in pfo.sizes]
    reps = 600
    est = np.array([pfo.estimate(pfo.perturb_counts(counts, rng)) for _ in range(reps)])
    # Per-value variance of the combined estimate, exactly: sum_k w_k^2 Var_k(f_j).
    var = sum(
        w**2 * o.variance(n, f)
        for w, o, n in zip(pfo.weights(), pfo.oracles, pfo.sizes, strict=True)
    )
    assert np.all(np.abs(est.mean(axis=0) - f) < 5 * np.sqrt(var / reps))
    assert np.all(np.abs(est.var(axis=0, ddof=1) - var) < 5 * var * np.sqrt(2 / reps))
    # Eq. 2 uses the average variance (f = 1/d): it equals the exact total when f is uniform
    # and is within the spread of the per-value variances otherwise.
    assert pfo.total_variance() == pytest.approx(
        float(
            sum(
                w**2 * o.variance(n, 1 / d)
                for w, o, n in zip(pfo.weights(), pfo.oracles, pfo.sizes, strict=True)
            )
            * d
        ),
        rel=1e-9,
    )


def test_sampling_variance_and_reporting_error() -> None:
    assert sampling_variance(100, 100) == 0
    assert sampling_variance(101, 1) == pytest.approx(1.0)
    f = [0.5, 0.5]
    assert sampling_variance(11, 5, f) == pytest.approx((6 / 50) * 0.5)
    pfo = PersonalizedFO.for_budgets(3, {Budget(1): 10})
    err = reporting_error(pfo, 100, 10)
    assert err == pytest.approx((sampling_variance(100, 10) + pfo.total_variance(10)) / 3)
    with pytest.raises(BudgetError):
        sampling_variance(10, 0)


def test_collect_charges_each_group_its_budget() -> None:
    users = {Budget("0.5"): [f"a{i}" for i in range(6)], Budget(1): [f"b{i}" for i in range(4)]}
    pop = Population({u: Fixed(1, eps) for eps, us in users.items() for u in us})
    guard = Guard(pop)
    pfo = PersonalizedFO.for_budgets(3, {e: len(u) for e, u in users.items()})
    rng = np.random.default_rng(0)
    hists = pfo.collect(
        guard,
        1,
        [np.zeros(6, np.int64), np.ones(4, np.int64)],
        rng,
        users=[users[Budget("0.5")], users[Budget(1)]],
    )
    assert [int(h.sum()) for h in hists] == [6, 4]
    verdict = check(guard.ledger, pop)
    assert verdict.ok
    assert verdict.class_utilization == {"class-0": 1, "class-1": 1}
