"""ExSub's probability design (004 Definition 2), rates, estimators' variances, m and evidence."""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wevent.accounting.budget import BudgetError
from wevent.accounting.certified import exp_bounds
from wevent.accounting.evidence import (
    ExSub,
    certify_cost,
    cost_bounds,
    evidence_from_json,
    evidence_to_json,
)
from wevent.mechanisms.exsub import ExSubDesign, choose_m, exclusion_weight, subgroup_sizes


def _vectors(d: int, k: int) -> list[tuple[int, ...]]:
    out = []
    for support in itertools.combinations(range(d), k):
        for signs in itertools.product((1, -1), repeat=k):
            v = [0] * d
            for i, b in zip(support, signs, strict=True):
                v[i] = b
            out.append(tuple(v))
    return out


sizes = st.integers(2, 9).flatmap(
    lambda d: st.tuples(st.just(d), st.integers(1, d - 1), st.integers(1, d))
)
weights = st.fractions(min_value=Fraction(1, 50), max_value=1, max_denominator=50)


def test_worked_example_of_004_section_v_a() -> None:
    """d'=3, s=1, eps=ln 2 (x = 1/2), m=2, R=[0,-1] padded with one zero stub: the four outputs
    holding 2_- have probability 1/8 and the other eight 1/16. 004 prints {3_+, 1_+} twice in the
    second list; the formula gives the eighth output {3_+, 1_-} (pinned here)."""
    design = ExSubDesign(3, 1, 2, Fraction(1, 2))
    r = (0, -1, 0)
    assert design.omega == 8
    probs = {z: design.probability(z, r) for z in _vectors(3, 2)}
    high = {z for z, p in probs.items() if p == Fraction(1, 8)}
    assert high == {(-1, -1, 0), (1, -1, 0), (0, -1, -1), (0, -1, 1)}
    assert all(p == Fraction(1, 16) for z, p in probs.items() if z not in high)
    assert (-1, 0, 1) in probs and probs[(-1, 0, 1)] == Fraction(1, 16)  # {3_+, 1_-}
    assert len(probs) == 12 and sum(probs.values()) == 1


@given(sizes, weights)
def test_omega_is_definition_2s_formula(size: tuple[int, int, int], x: Fraction) -> None:
    d, s, m = size
    design = ExSubDesign(d, s, m, x)
    printed = 2**m * comb(d, m) + (x - 1) * sum(
        2 ** (m - k) * comb(s, k) * comb(d - s, m - k) for k in range(m + 1)
    )
    assert design.omega == printed
    assert sum(size for *_, size in subgroup_sizes(d, s, m)) == 2**m * comb(d, m)


@given(sizes, weights)
def test_rates_from_subgroups_equal_004_closed_forms(
    size: tuple[int, int, int], x: Fraction
) -> None:
    d, s, m = size
    design = ExSubDesign(d, s, m, x)
    assert design.rates() == design.rates_closed_form()


@pytest.mark.parametrize(("d", "s", "m"), [(3, 1, 2), (4, 2, 2), (5, 2, 3), (5, 1, 5)])
def test_probabilities_sum_to_one_and_rates_are_marginals(d: int, s: int, m: int) -> None:
    x = Fraction(2, 7)
    design = ExSubDesign(d, s, m, x)
    outputs = _vectors(d, m)
    r = (1, -1, *([0] * (d - 2))) if s == 2 else (-1, *([0] * (d - 1)))
    probs = {z: design.probability(z, r) for z in outputs}
    assert sum(probs.values()) == 1
    pt, pr, pf = design.rates()
    assert sum(p for z, p in probs.items() if z[0] == r[0]) == pt
    assert sum(p for z, p in probs.items() if z[0] == -r[0]) == pr
    assert sum(p for z, p in probs.items() if z[d - 1] == 1) == pf


@given(sizes, weights)
def test_every_likelihood_ratio_is_at_most_one_over_x(
    size: tuple[int, int, int], x: Fraction
) -> None:
    d, s, m = size
    design = ExSubDesign(d, s, m, x)
    values = {Fraction(1) / design.omega, x / design.omega}
    assert max(values) <= min(values) / x
    pt, pr, pf = design.rates()
    assert pr <= pt and pf <= pt and pt <= pr / x  # the estimators' denominators are positive
    if x < 1:
        assert pt > pr and design.value_scale() > 0
    else:
        with pytest.raises(BudgetError):
            design.value_scale()


def test_lemma_1_mse_matches_direct_variance_sum() -> None:
    design = ExSubDesign(12, 3, 3, Fraction(1, 3))
    pt, pr, pf = design.rates()
    scale = 1 / (pt - pr)
    # per entry: Var of (+1 w.p. pt, -1 w.p. pr) and of (+1/-1 w.p. pf each), times scale^2
    var_nonzero = ((pt + pr) - (pt - pr) ** 2) * scale**2
    var_zero = 2 * pf * scale**2
    assert design.value_mse() == 3 * var_nonzero + 9 * var_zero
    assert design.frequency_mse() > 0


def test_choice_of_m_follows_section_v_d() -> None:
    x = exclusion_weight(Fraction(1))
    # d'=512, s=4, eps=1 (004 Fig. 1's setting): 512 / (4e + 6) = 30.34... -> 31 for values,
    # 512 / (4e + 9) = 25.76... -> 26 for frequencies (Theorem 2)
    assert choose_m(512, 4, x) == 31
    assert choose_m(512, 4, x, "frequency") == 26
    assert choose_m(10, 9, x) == 1
    with pytest.raises(BudgetError):
        choose_m(10, 2, x, "median")


def test_exclusion_weight_is_rounded_up_and_certified() -> None:
    for eps in (Fraction(1, 100), Fraction(1, 2), Fraction(1), Fraction(7)):
        x = exclusion_weight(eps)
        lo, _ = exp_bounds(-eps, -eps, 60)
        assert x >= lo
        assert x.denominator & (x.denominator - 1) == 0  # a float, exactly
        assert certify_cost(ExSub(10, 2, 3, x), eps).ok
    with pytest.raises(BudgetError):
        exclusion_weight(Fraction(0))


def test_exclusion_weight_never_passes_one() -> None:
    """Found by fuzzing: at eps = 10^-400 the certified upper bound of e^-eps passed 1 and x
    was 1 + 2^-52 (the prover refuted the runtime's design, the evidence refused x > 1); x = 1
    is at least e^-eps and costs nothing."""
    for k in (17, 40, 41, 400):
        eps = Fraction(1, 10**k)
        x = exclusion_weight(eps)
        assert x <= 1
        assert x >= exp_bounds(-eps, -eps, 60)[0]
        assert certify_cost(ExSub(10, 2, 3, x), eps).ok
    assert exclusion_weight(Fraction(1, 10**400)) == 1


def test_exsub_evidence_round_trip_and_cost() -> None:
    ev = ExSub(51, 3, 4, Fraction(828390857088487, 2251799813685248))
    assert evidence_from_json(evidence_to_json(ev)) == ev
    assert evidence_to_json(ev)["kind"] == "exsub"
    assert certify_cost(ev, Fraction(1)).ok
    assert not certify_cost(ev, Fraction(99, 100)).ok
    lo, hi = cost_bounds(ExSub(5, 1, 2, Fraction(1)))
    assert lo == hi == 0
    # a claimed weight of 1/3 costs ln 3 > 1: a charge of 1 is not covered
    assert not certify_cost(ExSub(5, 1, 2, Fraction(1, 3)), Fraction(1)).ok


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "exsub", "d_prime": 3, "s": 3, "m": 1, "x": "1/2"},
        {"kind": "exsub", "d_prime": 3, "s": 1, "m": 4, "x": "1/2"},
        {"kind": "exsub", "d_prime": 3, "s": 1, "m": 1, "x": "0"},
        {"kind": "exsub", "d_prime": 3, "s": 1, "m": 1, "x": "3/2"},
        {"kind": "exsub", "d_prime": 3, "s": 1, "m": 1},
        {"kind": "exsub", "d_prime": True, "s": 1, "m": 1, "x": "1/2"},
    ],
)
def test_malformed_exsub_evidence_is_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(BudgetError):
        evidence_from_json(bad)


def test_design_rejects_bad_parameters() -> None:
    for args in [(3, 3, 1), (3, 1, 4), (0, 1, 1), (3, 1, 0)]:
        with pytest.raises(BudgetError):
            ExSubDesign(*args, Fraction(1, 2))
    with pytest.raises(BudgetError):
        ExSubDesign(3, 1, 1, Fraction(0))
