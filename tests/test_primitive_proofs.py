"""The primitive proofs run at small sizes, and they can fail: wrong claims and wrong parameters
come back as counterexamples, never as proofs."""

from fractions import Fraction

import pytest
import z3

from wevent.accounting.budget import Budget
from wevent.mechanisms.oracles import GRR
from wevent.proofs import primitives
from wevent.proofs.primitives import PRIMITIVES, prove_primitive


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
@pytest.mark.parametrize("d", [2, 5])
def test_primitives_are_proved(name: str, d: int) -> None:
    result = prove_primitive(name, d)
    assert result.status == "proved", result.counterexample
    assert result.checks
    assert result.to_json()["result"] == "proved"


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
