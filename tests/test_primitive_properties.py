"""Invariants of the primitives over random parameters (hypothesis)."""

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import Budget
from wevent.accounting.evidence import certify_cost, cost_bounds
from wevent.mechanisms.noise import DiscreteLaplaceMechanism, LaplaceMechanism
from wevent.mechanisms.oracles import GRR, OUE
from wevent.mechanisms.pue import Reperturbation

eps_values = st.builds(
    lambda n, d: Budget(Fraction(n, d)), st.integers(1, 400), st.sampled_from([10, 100, 7, 3])
)
domains = st.integers(2, 64)


@settings(max_examples=150)
@given(eps_values, domains)
def test_oracle_evidence_never_exceeds_the_budget(eps: Budget, d: int) -> None:
    for oracle in (GRR.for_budget(d, eps), OUE.for_budget(d, eps)):
        assert certify_cost(oracle.evidence, eps).ok
        # Rounding costs little utility: probabilities move by at most 2^-52, which moves
        # ln(p/q) by at most 2^-52 (1/p + 1/q) <= 2^-51 (e^eps + d).
        slack = Fraction(math.ceil((math.exp(float(eps)) + d) * 1e6), 10**6) / 2**51
        assert cost_bounds(oracle.evidence)[0] >= eps - slack


@settings(max_examples=150)
@given(eps_values, st.integers(1, 20))
def test_noise_evidence_never_exceeds_the_budget(eps: Budget, sensitivity: int) -> None:
    lap = LaplaceMechanism.for_budget(sensitivity, eps)
    assert Fraction(lap.scale) >= sensitivity / eps
    assert certify_cost(lap.evidence, eps).ok
    dl = DiscreteLaplaceMechanism.for_budget(sensitivity, eps)
    assert certify_cost(dl.evidence, eps).ok


@settings(max_examples=150)
@given(eps_values, eps_values, domains)
def test_reperturbation_is_exact_for_every_ordered_pair(a: Budget, b: Budget, d: int) -> None:
    low, high = sorted((a, b))
    if low == high:
        return
    g_low, g_high = GRR.for_budget(d, low), GRR.for_budget(d, high)
    rp = Reperturbation.between(g_high, g_low)
    assert rp.beta >= 0 and rp.gamma >= 0
    assert rp.beta + (d - 1) * rp.gamma == 1
    assert g_high.p * rp.beta + (1 - g_high.p) * rp.gamma == g_low.p
