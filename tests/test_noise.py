from fractions import Fraction

import numpy as np
import pytest

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.evidence import certify_cost, cost_bounds
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.accounting.spending import BudgetExceeded
from wevent.mechanisms.noise import DiscreteLaplaceMechanism, LaplaceMechanism
from wevent.verifier.check import check
from wevent.verifier.guard import Guard


def guard_for(eps: str) -> Guard:
    return Guard(Population({"c": Fixed(1, Budget(eps))}))


@pytest.mark.parametrize("eps", ["0.1", "1/3", "0.7", "2", "1e-6"])
def test_laplace_scale_is_rounded_up_and_certified(eps: str) -> None:
    mech = LaplaceMechanism.for_budget(1, Budget(eps))
    assert Fraction(mech.scale) >= 1 / Budget(eps)
    lo, hi = cost_bounds(mech.evidence)
    assert hi <= Budget(eps) and lo > Budget(eps) * (1 - Fraction(1, 10**12))


def test_laplace_spends_before_drawing_and_refusal_draws_nothing() -> None:
    guard = guard_for("0.5")
    mech = LaplaceMechanism.for_budget(1, Budget("0.5"))
    rng = np.random.default_rng(7)
    out = mech.release(guard, 1, [10.0, 20.0], rng, user="c", part="publication")
    assert out.shape == (2,)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        mech.release(guard, 1, [10.0], rng, user="c")
    assert rng.bit_generator.state == state  # no randomness consumed after the refusal
    assert check(guard.ledger, guard.population).ok


def test_laplace_noise_has_the_stated_variance() -> None:
    mech = LaplaceMechanism.for_budget(2, Budget("0.5"))  # scale 4, variance 32
    rng = np.random.default_rng(1)
    guard = Guard(Population({"c": Fixed(1, Budget(1000))}))
    n = 200_000
    noise = mech.release(guard, 1, np.zeros(n), rng, user="c")
    # mean: sd of the sample mean is sqrt(32/n); variance: sd of the sample variance of a
    # Laplace is sqrt((mu4 - sigma^4)/n) with mu4 = 24 b^4 = 6144, sigma^4 = 1024.
    assert abs(noise.mean()) < 5 * (32 / n) ** 0.5
    assert abs(noise.var() - 32) < 5 * ((6144 - 1024) / n) ** 0.5


@pytest.mark.parametrize("eps", ["0.05", "0.5", "1", "3"])
def test_discrete_laplace_parameters_certify_the_budget(eps: str) -> None:
    mech = DiscreteLaplaceMechanism.for_budget(1, Budget(eps))
    result = certify_cost(mech.evidence, Budget(eps))
    assert result.ok
    assert result.upper > Budget(eps) * (1 - Fraction(1, 10**9))  # not wastefully loose


def test_discrete_laplace_variance_and_integrality() -> None:
    mech = DiscreteLaplaceMechanism.for_budget(1, Budget("0.5"))
    guard = Guard(Population({"c": Fixed(1, Budget(1000))}))
    rng = np.random.default_rng(3)
    n = 200_000
    noisy = mech.release(guard, 1, np.zeros(n, dtype=np.int64), rng, group=None, user="c")
    assert noisy.dtype == np.int64
    var = mech.variance  # 2 a / (1 - a)^2 with a = e^-0.5: about 7.835
    a = np.exp(-0.5)
    assert abs(var - 2 * a / (1 - a) ** 2) < 1e-9
    # The sd of a sample variance is sqrt((mu4 - var^2) / n), mu4 summed from the pmf
    # P(k) = (1 - a) / (1 + a) a^|k| (the tail beyond |k| = 400 is below 1e-80).
    k = np.arange(-400, 401)
    pmf = (1 - a) / (1 + a) * a ** np.abs(k)
    mu4 = float(np.sum(pmf * k.astype(float) ** 4))
    assert abs(noisy.var() - var) < 5 * ((mu4 - var**2) / n) ** 0.5
    assert abs(noisy.mean()) < 5 * (var / n) ** 0.5


def test_discrete_laplace_refuses_a_scale_the_sampler_cannot_draw() -> None:
    # Found in review: for eps below ~1e-18 numpy's geometric draws saturate at the int64 limit
    # and their difference is 0: the count would be released without noise.
    with pytest.raises(BudgetError, match="too small"):
        DiscreteLaplaceMechanism.for_budget(1, Budget("1e-20"))
    DiscreteLaplaceMechanism.for_budget(1, Budget("1e-9"))


def test_inputs_are_checked_before_anything_is_charged() -> None:
    guard = guard_for("1")
    mech = DiscreteLaplaceMechanism.for_budget(1, Budget("0.5"))
    with pytest.raises(BudgetError, match="integer counts"):
        mech.release(guard, 1, [1.5], np.random.default_rng(0), user="c")
    assert len(guard.ledger) == 0
    with pytest.raises(BudgetError, match="float scale"):
        LaplaceMechanism.for_budget(1, Budget("1e-400"))
