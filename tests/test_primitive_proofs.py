"""The primitive proofs run at small sizes, and they can fail: wrong claims and wrong parameters
come back as counterexamples, never as proofs."""

from fractions import Fraction

import pytest
import z3

from wevent.accounting.budget import Budget
from wevent.mechanisms.oracles import GRR
from wevent.mechanisms.sampling import SamplingMechanism
from wevent.proofs import primitives
from wevent.proofs.primitives import PRIMITIVES, prove_primitive


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
@pytest.mark.parametrize("d", [2, 5])
def test_primitives_are_proved(name: str, d: int) -> None:
    result = prove_primitive(name, d)
    # SM's obligation is a finite set of exact checks (no solver): "checked", never "proved".
    expected = "checked" if name == "sm" else "proved"
    assert result.status == expected, result.counterexample
    assert result.checks and result.checked_at
    assert bool(result.proved_for) == (expected == "proved")
    assert result.to_json()["result"] == expected
    assert ("solver" in result.to_json()) == (expected == "proved")


def test_a_finite_check_is_never_reported_as_a_proof() -> None:
    # Found in review: `prove primitive sm` said "proved" with "solver": "z3" for a grid of
    # 6 x 6 exact checks that never reached the large-threshold branch (theta > 60).
    result = prove_primitive("sm")
    assert result.status == "checked" and result.proved_for == ""
    assert "no solver" in result.scope() and "not proved" in result.statement
    for theta in ("60", "61", "100", "1000"):
        assert theta in result.checked_at


@pytest.mark.parametrize("name", ["grr", "oue", "pue"])
def test_a_proof_states_both_its_universal_and_its_finite_scope(name: str) -> None:
    result = prove_primitive(name, 3)
    scope = result.scope()
    assert scope.startswith("Z3: the formulas") and "every" in scope
    assert "finite exact checks, no solver: the code's rounded" in scope
    assert "{0.05, 0.1, 0.5, 1, 2, 4}" in scope and "['" not in scope  # text, not a list repr


def test_oue_states_the_capped_domain_of_its_exact_check() -> None:
    assert "d = 8 (all 256 outputs)" in prove_primitive("oue", 9).checked_at


def test_sm_checks_the_large_threshold_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    # A keep-probability rounded up above theta = 60 (the branch the old grid never reached)
    # makes the certified cost exceed the budget: refuted.
    real = SamplingMechanism.for_budgets.__func__  # type: ignore[attr-defined]

    def generous(
        cls: type[SamplingMechanism], budgets: dict[Budget, int], theta: Budget
    ) -> SamplingMechanism:
        sm: SamplingMechanism = real(cls, budgets, theta)
        if theta <= 60:
            return sm
        keep = {e: (p if p == 1.0 else min(1.0, p * 1.001)) for e, p in sm.keep.items()}
        return SamplingMechanism(sm.theta, sm.laplace, keep)

    monkeypatch.setattr(SamplingMechanism, "for_budgets", classmethod(generous))
    result = prove_primitive("sm")
    assert result.status == "counterexample" and "> eps" in result.counterexample


def test_a_false_claim_is_refuted_with_a_model() -> None:
    e, p, q = z3.Reals("E p q")
    assume = [e >= 1, p * (e + 4) == e, q * (e + 4) == 1]
    with pytest.raises(primitives._Refuted):
        primitives._z3_valid(p <= q, assume, "p <= q (false for E > 1)")


def test_vacuous_assumptions_are_not_a_proof() -> None:
    e = z3.Real("E")
    with pytest.raises(TimeoutError, match="vacuous"):
        primitives._z3_valid(e > 100, [e >= 1, e < 0], "anything")


def test_grr_with_a_keep_probability_rounded_the_wrong_way_is_refuted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = GRR.for_budget

    def too_generous(d: int, eps: Budget) -> GRR:
        g = real(d, eps)
        p_float = g.p_float + 2.0**-20  # keep slightly more often than e^eps allows
        p = Fraction(p_float)
        return GRR(d, g.eps, p, (1 - p) / (d - 1), p_float)

    monkeypatch.setattr(GRR, "for_budget", staticmethod(too_generous))
    result = prove_primitive("grr", 3)
    assert result.status == "counterexample"
    assert "exceeds e^eps" in result.counterexample


def test_a_sampler_float_that_differs_from_the_evidence_is_refuted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found in review: the exact checks used the evidence's p, not the float the sampler uses.
    real = GRR.for_budget

    def drifting(d: int, eps: Budget) -> GRR:
        g = real(d, eps)
        return GRR(d, g.eps, g.p, g.q, g.p_float * 1.01)

    monkeypatch.setattr(GRR, "for_budget", staticmethod(drifting))
    result = prove_primitive("grr", 3)
    assert result.status == "counterexample" and "sampler" in result.counterexample
