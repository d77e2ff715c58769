"""Deeper default proofs: a bounded dynamic scope too large to enumerate is
proved by the induction (every horizon, which covers the horizon asked) and says so; the gate
proves the built-in dynamic kernels for every horizon; a proof over restricted budgets (DPBA's
forward ratios) says which budgets, never "every positive budget"."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from wevent.gate import GateOptions, run_gate
from wevent.gate.report import _proved_text
from wevent.proofs import central
from wevent.proofs.central import Scope, bounded_case_count, prove_allocator
from wevent.proofs.dynamic import budget_cases


def test_the_bounded_case_count_matches_the_enumeration() -> None:
    scope = Scope(classes=2, w_max=2)
    for name in ("dpbd", "dpba"):
        alloc = central.ALLOCATORS[name]
        enumerated = sum(1 for _ in central._bounded_cases(alloc, "sound", "exact", scope))
        assert bounded_case_count(alloc, scope) == enumerated
    # w <= 6 with 2 classes: far too many cases to enumerate one by one
    assert bounded_case_count(central.ALLOCATORS["dpbd"], Scope(classes=2, w_max=6)) == 841_752


def test_a_large_bounded_dynamic_scope_is_proved_by_the_induction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(central, "BOUNDED_DYNAMIC_CASES_MAX", 10)
    proof = prove_allocator("dpbd", scope=Scope(classes=2, w_max=2, horizon=6))
    assert proof.status == "proved" and proof.method == "induction"
    assert proof.scope["horizon"] == "unbounded" and "every horizon" in proof.statement
    assert "covers it" in proof.notes[0] and "horizon 6" in proof.notes[0]
    # below the threshold the bounded proof runs as asked
    monkeypatch.setattr(central, "BOUNDED_DYNAMIC_CASES_MAX", 10_000)
    bounded = prove_allocator("dpbd", scope=Scope(classes=1, w_max=2, horizon=6))
    assert bounded.method == "bounded" and bounded.scope["horizon"] == 6


def test_the_switch_still_refutes_a_broken_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The published DPBD is not inductive; the fallback (bounded, one class) finds the replayed
    counterexample instead of recursing into the induction again."""
    monkeypatch.setattr(central, "BOUNDED_DYNAMIC_CASES_MAX", 1)
    proof = prove_allocator("dpbd", variant="published", scope=Scope(classes=2, w_max=2))
    assert proof.status == "counterexample"
    assert proof.method == "induction (refuted by the bounded search)"
    assert proof.counterexample is not None and proof.counterexample.replays()


def test_a_third_party_dynamic_kernel_is_never_switched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The induction's obligations build the built-in kernels: another allocator object (even
    one with the same factory) keeps the bounded proof it asked for."""
    monkeypatch.setattr(central, "BOUNDED_DYNAMIC_CASES_MAX", 0)
    builtin = central.ALLOCATORS["dpbd"]
    copy = replace(builtin)
    assert copy is not builtin
    scope = Scope(classes=1, w_max=1, horizon=4)
    proof = prove_allocator("dpbd", scope=scope, allocator=copy)
    assert proof.method == "bounded" and proof.status == "proved"
    # the control: the built-in object itself is switched under the same settings
    assert prove_allocator("dpbd", scope=scope, allocator=builtin).method == "induction"


def test_dpba_states_the_forward_budgets_it_covers() -> None:
    proof = prove_allocator("dpba", scope=Scope(classes=1, w_max=1, horizon=3))
    assert proof.status == "proved"
    assert "every positive real budget" not in proof.statement
    assert "{1/2, 1, 2} times the class's first" in proof.statement
    assert proof.scope["budgets"] != "positive reals"
    text = _proved_text(proof.scope)
    assert "every positive budget" not in text and "1/2, 1, 2" in text
    # dpbd has no such restriction
    dpbd = prove_allocator("dpbd", scope=Scope(classes=1, w_max=1, horizon=3))
    assert "every positive real budget" in dpbd.statement
    assert _proved_text(dpbd.scope).endswith("every positive budget, declarations at slots [1, 2]")


def test_the_induction_proves_the_ratios_it_states(monkeypatch: pytest.MonkeyPatch) -> None:
    """The statement names ``scope.ratios``; the induction's obligations use the same ratios
    (one budget case per ratio), and the proof's ratio restriction is decided by the same
    allocator property for every built-in."""
    for name, alloc in central.ALLOCATORS.items():
        if alloc.requirement == "dynamic":
            assert (budget_cases(name, 2) != [None]) == central._forward_ratios(alloc)
    monkeypatch.setattr(central, "BOUNDED_DYNAMIC_CASES_MAX", 0)
    third = (Fraction(1, 3),)
    one = prove_allocator("dpba", scope=Scope(classes=1, w_max=1, ratios=third))
    three = prove_allocator("dpba", scope=Scope(classes=1, w_max=1))
    assert one.status == three.status == "proved"
    assert one.method == three.method == "induction"
    assert "{1/3} times" in one.statement and 3 * one.cases == three.cases


# That the gate proves the built-in dynamic kernels for every horizon (and DPBA's headline) is
# checked on the gates of tests/test_gate_mutants.py::test_gate_accepts_sound_builtins_with_a_proof
# (the same proof scope: w <= 2, 2 classes), not on gates of their own.


def test_a_third_party_dynamic_kernel_keeps_its_bounded_proof_in_the_gate() -> None:
    report = run_gate(
        "tests.gate_sound:halved_dynamic", GateOptions(w_max=2, stages=("conformance", "proof"))
    )
    assert report.verdict == "proved", report.describe()
    proof = report.stage("proof").data["proof"]
    assert proof["method"] == "bounded" and proof["scope"]["classes"] == "1..1"
    assert report.headline().startswith("PROVED for <= 1 classes, w <= 2, 6 slots, ")


def test_the_default_gate_scope_is_the_deeper_one() -> None:
    opts = GateOptions()
    assert opts.w_max >= 6 and opts.classes >= 2 and opts.slots == 3 * opts.w_max
