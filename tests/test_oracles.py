"""GRR and OUE: certified costs, unbiased estimates, the stated variances, and the per-user and
aggregate paths drawing from the same distribution. Tolerances come from the formulas (a number of
standard errors), not from tuning."""

from fractions import Fraction

import numpy as np
import pytest

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.evidence import cost_bounds
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.accounting.spending import BudgetExceeded
from wevent.mechanisms.oracles import GRR, OUE, FrequencyOracle
from wevent.verifier.check import check
from wevent.verifier.guard import Guard

ORACLES = [
    GRR.for_budget(5, Budget("1")),
    OUE.for_budget(5, Budget("1")),
    GRR.for_budget(2, Budget("0.3")),
    OUE.for_budget(8, Budget("2")),
]


@pytest.mark.parametrize("oracle", ORACLES, ids=repr)
def test_evidence_certifies_at_most_epsilon_and_nearly_all_of_it(oracle: FrequencyOracle) -> None:
    lo, hi = cost_bounds(oracle.evidence)
    assert hi <= oracle.eps
    assert lo >= oracle.eps - Fraction(1, 10**12)


def test_grr_probabilities_follow_000_pfo_p() -> None:
    grr = GRR.for_budget(5, Budget(1))
    e = np.e
    assert abs(float(grr.p) - e / (e + 4)) < 1e-15
    assert grr.p + 4 * grr.q == 1


def expected_counts(oracle: FrequencyOracle, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = counts.sum()
    p, q = float(oracle.p), float(oracle.q)
    mean = counts * p + (n - counts) * q
    var = counts * p * (1 - p) + (n - counts) * q * (1 - q)
    return mean, var


@pytest.mark.parametrize("oracle", ORACLES, ids=repr)
def test_per_user_and_aggregate_paths_match_the_distribution(oracle: FrequencyOracle) -> None:
    rng = np.random.default_rng(11)
    d = oracle.d
    counts = np.arange(1, d + 1, dtype=np.int64) * 40
    values = np.repeat(np.arange(d), counts)
    reps = 600
    mean, var = expected_counts(oracle, counts)
    for path in ("user", "aggregate"):
        hists = np.array(
            [
                oracle.histogram(oracle.perturb(values, rng))
                if path == "user"
                else oracle.perturb_counts(counts, rng)
                for _ in range(reps)
            ]
        )
        # Sample mean within 5 standard errors; sample variance within 5 of its standard errors
        # (for a count, kurtosis is close to normal: sd of s^2 is about var * sqrt(2/reps)).
        assert np.all(np.abs(hists.mean(axis=0) - mean) < 5 * np.sqrt(var / reps)), path
        assert np.all(np.abs(hists.var(axis=0, ddof=1) - var) < 5 * var * np.sqrt(2 / reps)), path
        if isinstance(oracle, GRR):
            assert np.all(hists.sum(axis=1) == counts.sum())  # GRR: one report per user


@pytest.mark.parametrize("oracle", ORACLES, ids=repr)
def test_estimates_are_unbiased_with_the_stated_variance(oracle: FrequencyOracle) -> None:
    rng = np.random.default_rng(5)
    d = oracle.d
    f = np.linspace(1, 3, d)
    f /= f.sum()
    n = 5_000
    counts = np.round(f * n).astype(np.int64)
    counts[-1] += n - counts.sum()
    f = counts / n
    reps = 800
    est = np.array([oracle.estimate(oracle.perturb_counts(counts, rng), n) for _ in range(reps)])
    var = oracle.variance(n, f)
    assert np.all(np.abs(est.mean(axis=0) - f) < 5 * np.sqrt(var / reps))
    assert np.all(np.abs(est.var(axis=0, ddof=1) - var) < 5 * var * np.sqrt(2 / reps))


def test_collect_charges_the_reporters_before_drawing() -> None:
    users = [f"u{i}" for i in range(10)]
    pop = Population({u: Fixed(2, Budget(1)) for u in users})
    guard = Guard(pop)
    grr = GRR.for_budget(4, Budget(1))
    rng = np.random.default_rng(0)
    values = np.arange(10) % 4
    hist = grr.collect(guard, 1, values, rng, users=users)
    assert hist.sum() == 10
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        grr.collect(guard, 2, values, rng, users=users)  # w=2: 1 + 1 > 1
    assert rng.bit_generator.state == state
    assert check(guard.ledger, pop).ok
    assert guard.ledger.per_user_rows() == 10


def test_bad_inputs() -> None:
    with pytest.raises(BudgetError):
        GRR.for_budget(1, Budget(1))
    with pytest.raises(BudgetError):
        OUE.for_budget(4, Budget(0))
    grr = GRR.for_budget(3, Budget(1))
    with pytest.raises(BudgetError):
        grr.perturb(np.array([0, 3]), np.random.default_rng(0))
    with pytest.raises(BudgetError):
        grr.perturb_counts(np.array([1, 2]), np.random.default_rng(0))


def test_000_example_4_grr_probability_lists() -> None:
    # d = 5 locations, budgets <0.2, 0.4, 0.6, 0.8>: the paper lists q = <0.19, 0.18, 0.17, 0.16>
    # and p = <0.23, 0.27, 0.31, 0.36> (two decimals).
    oracles = [GRR.for_budget(5, Budget(e)) for e in ("0.2", "0.4", "0.6", "0.8")]
    assert [round(float(o.q), 2) for o in oracles] == [0.19, 0.18, 0.17, 0.16]
    assert [round(float(o.p), 2) for o in oracles] == [0.23, 0.27, 0.31, 0.36]


def test_reporters_must_match_the_reports() -> None:
    # Found in review: an empty or short reporter list let reports through uncharged.
    users = [f"u{i}" for i in range(5)]
    pop = Population({u: Fixed(1, Budget(1)) for u in users})
    guard = Guard(pop)
    grr = GRR.for_budget(4, Budget(1))
    rng = np.random.default_rng(0)
    for who in ([], users[:1]):
        with pytest.raises(BudgetError, match="reports but"):
            grr.collect(guard, 1, np.array([0, 1, 2, 3, 0]), rng, users=who)
    guard.define_group("two", users[:2])
    with pytest.raises(BudgetError, match="has 2 members"):
        grr.collect(guard, 1, np.array([0, 1, 2]), rng, group="two")
    assert len(guard.ledger) == 0
    assert grr.collect(guard, 1, np.array([], np.int64), rng, users=[]).sum() == 0


def test_oue_refuses_an_epsilon_it_cannot_represent() -> None:
    with pytest.raises(BudgetError, match="too small"):
        OUE.for_budget(4, Budget("1e-17"))
