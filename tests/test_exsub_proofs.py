"""Exact small-size proofs of ExSub (wevent/proofs/exsub.py) and the printed variants they refute."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from wevent.mechanisms.exsub import ExSubDesign, OnlineSampler, offline_sample
from wevent.proofs.exsub import _quadratic_min, _ratio_ok, enumerate_outputs, prove_exsub

SMALL = [(d, s, m) for d in range(2, 5) for s in range(1, d) for m in range(1, d + 1)]
MEDIUM = [(5, 1, 2), (5, 2, 2), (5, 2, 3)]
FULL_5 = [(5, s, m) for s in range(1, 5) for m in range(1, 6)]


@pytest.mark.parametrize(("d", "s", "m"), SMALL + MEDIUM)
def test_exsub_is_proved_exactly_for_every_eps(d: int, s: int, m: int) -> None:
    proof = prove_exsub(d, s, m)
    assert proof.status == "proved", proof.counterexample
    assert len(proof.checks) == 3


@pytest.mark.slow
@pytest.mark.parametrize(("d", "s", "m"), FULL_5)
def test_exsub_is_proved_for_every_size_with_five_entries(d: int, s: int, m: int) -> None:
    assert prove_exsub(d, s, m).status == "proved"


@pytest.mark.parametrize("eps", [Fraction(1, 10), Fraction(1), Fraction(5)])
def test_exsub_is_proved_with_the_runtime_weight(eps: Fraction) -> None:
    proof = prove_exsub(4, 2, 2, eps)
    assert proof.status == "proved"
    assert any("runtime subgroup draw" in c for c in proof.checks)
    assert Fraction(proof.to_json()["eps"]) == eps


def test_printed_offline_line_13_is_refuted() -> None:
    proof = prove_exsub(3, 1, 2, variant="printed-offline")
    assert proof.status == "counterexample"
    assert "outside Z^(m+-)" in proof.counterexample


def test_printed_online_counters_are_refuted_from_s_2_and_agree_at_s_1() -> None:
    refuted = prove_exsub(4, 2, 2, variant="printed-online")
    assert refuted.status == "counterexample"
    assert "online sampler (Algorithm 4, printed-online)" in refuted.counterexample
    # with s = 1 the printed counters coincide with Algorithm S (wevent.mechanisms.exsub docstring)
    assert prove_exsub(3, 1, 2, variant="printed-online").status == "proved"


def test_enumeration_is_an_exact_distribution() -> None:
    design = ExSubDesign(5, 2, 3, Fraction(1, 2))
    r = (1, 0, -1, 0, 0)

    def run(ch: Any) -> tuple[int, ...]:
        return OnlineSampler(design, (1, 1), ch).run(r)

    dist = enumerate_outputs(run)
    assert sum(dist.values()) == 1
    # subgroup (1, 1): one true, one reversed, one false symbol; all such outputs equally likely
    assert len(dist) == 2 * 3 * 2 and len(set(dist.values())) == 1

    def off(ch: Any) -> tuple[int, ...]:
        return offline_sample(design, r, (1, 1), ch)

    assert enumerate_outputs(off) == dist


def test_quadratic_ratio_check_is_exact() -> None:
    one, x = (Fraction(1), Fraction(0)), (Fraction(0), Fraction(1))
    assert _ratio_ok(one, x, None) is None  # 1 <= x / x
    assert _ratio_ok(x, one, None) is None
    # 2 <= 1/x fails for x > 1/2: the check finds such an x
    bad = _ratio_ok((Fraction(2), Fraction(0)), one, None)
    assert bad is not None and bad > Fraction(1, 2)
    # x^2-weighted numerators: (0 + 2x) <= (0 + 1x)/x = 1 fails near x = 1
    assert _ratio_ok((Fraction(0), Fraction(2)), one, None) is not None
    assert _quadratic_min(Fraction(1), Fraction(-2), Fraction(1), Fraction(0), Fraction(2)) == 1


def test_bad_variant_is_rejected() -> None:
    from wevent.accounting.budget import BudgetError

    with pytest.raises(BudgetError):
        prove_exsub(3, 1, 2, variant="published")
