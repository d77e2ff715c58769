"""Soundness of the allocator kernels, through the runtime guard.

* Every sound variant's traces pass the guard for random requirement populations and random
  publish/skip decisions, in exact and in float-count arithmetic.
* For the fixed-window kernels the sound variant's clip never binds in exact arithmetic: its
  traces equal the published pseudo-code's.
* The published DPBD/DPBA rules and the float-count BA/PBA break windows on concrete inputs
  (regression fixtures found by the searches these tests replaced).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import budgets, dynamics, populations, positive_budgets
from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.mechanisms.allocators import CENTRAL, TraceSlot, make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import classes_of
from wevent.verifier.tracing import trace_with_guard

F = Fraction
FIXED_KERNELS = ("uniform", "sample", "bd", "ba", "pbd", "pba")

fixed_reqs = st.builds(Fixed, st.integers(1, 6), positive_budgets)
fixed_reqs_with_zero = st.builds(Fixed, st.integers(1, 6), budgets)
any_reqs: st.SearchStrategy[Requirement] = st.one_of(fixed_reqs, dynamics(max_slot=12))


decisions = st.lists(st.booleans(), min_size=1, max_size=40)


@pytest.mark.parametrize("mechanism", FIXED_KERNELS)
@settings(max_examples=60)
@given(
    pop=populations(max_users=4, reqs=fixed_reqs_with_zero),
    dec=decisions,
    arithmetic=st.just("exact"),  # in doubles a window can round past eps (docs/float.md)
)
def test_sound_fixed_kernels_pass_the_guard(
    mechanism: str, pop: Population, dec: list[bool], arithmetic: str
) -> None:
    result = trace_with_guard(mechanism, pop, dec, arithmetic=arithmetic)
    assert result.ok, result.refusal or result.negative


@pytest.mark.parametrize("mechanism", ["dpbd", "dpba"])
@settings(max_examples=150)
@given(
    pop=populations(max_users=4, reqs=any_reqs),
    dec=decisions,
    arithmetic=st.just("exact"),  # in doubles a window can round past eps (docs/float.md)
)
def test_sound_dynamic_kernels_pass_the_guard(
    mechanism: str, pop: Population, dec: list[bool], arithmetic: str
) -> None:
    result = trace_with_guard(mechanism, pop, dec, arithmetic=arithmetic)
    assert result.ok, result.refusal or result.negative
    for s in result.slots:
        assert min(s.dissimilarity + s.publication) >= 0


@pytest.mark.parametrize("mechanism", FIXED_KERNELS)
@settings(max_examples=60)
@given(pop=populations(max_users=4, reqs=fixed_reqs), dec=decisions)
def test_fixed_clip_never_binds_in_exact_arithmetic(
    mechanism: str, pop: Population, dec: list[bool]
) -> None:
    classes = classes_of(pop, mechanism)
    sound = run_trace(make_kernel(mechanism, ExactAlgebra(), classes, "sound"), dec)
    published = run_trace(make_kernel(mechanism, ExactAlgebra(), classes, "published"), dec)

    # Candidates on nullified slots are never spent (and may differ); what is spent must agree.
    def spent(trace: list[TraceSlot]) -> list[tuple[object, ...]]:
        return [(s.status, s.dissimilarity, s.publication) for s in trace]

    assert spent(sound) == spent(published)
    assert trace_with_guard(mechanism, pop, dec, variant="published").ok


@pytest.mark.parametrize("mechanism", CENTRAL)
@settings(max_examples=5)
@given(dec=st.lists(st.booleans(), min_size=300, max_size=300))
def test_long_horizon(mechanism: str, dec: list[bool]) -> None:
    if mechanism in ("dpbd", "dpba"):
        req: Requirement = Dynamic(
            (
                Declaration(1, 20, Budget("1"), 30, Budget("1.5")),
                Declaration(100, 5, Budget("0.4"), 10, Budget("0.9")),
                Declaration(200, 40, Budget("2"), 15, Budget("0.7")),
            )
        )
    else:
        req = Fixed(30, Budget("1"))
    pop = Population({"a": req, "b": Fixed(7, Budget("0.3"))})
    assert trace_with_guard(mechanism, pop, dec).ok


def _dyn(*decls: tuple[int, str, int, str]) -> Population:
    return Population(
        {
            "u": Dynamic(
                tuple(
                    Declaration(i + 1, wb, Budget(eb), wf, Budget(ef))
                    for i, (wb, eb, wf, ef) in enumerate(decls)
                )
            )
        }
    )


# A change of requirement at slot 2: the publication half of slot 1 (0.175) is already above the
# new cap 0.3/2; the dissimilarity half then takes its full 0.15 and the backward window [1, 2]
# gets 7/24 + 1/30 > 0.3. The declaration was feasible when made (7/24 <= 0.3).
DPBD_BACKWARD = (_dyn((3, "0.9", 3, "0.7"), (2, "0.3", 2, "0.6")), [True, False])
# DPBA: slot 2 spends 0.1 + 0.2 under B:(1, 0.9); slot 3 declares B:(2, 0.3), feasible since the
# window [2, 3] holds 0.3, yet the dissimilarity half (0.1 of it, below 0.3/2) still gets
# min(0.1/6, 0.15 - 0.1) = 1/60 at slot 3 (which is nullified): 0.3 + 1/60 > 0.3.
DPBA_BACKWARD = (
    _dyn((1, "0.9", 3, "0.6"), (1, "0.9", 3, "0.6"), (2, "0.3", 3, "0.1")),
    [False, True, True],
)
# A backward cap below what the dissimilarity half already spent: a negative budget -0.15.
NEGATIVE = (
    _dyn((4, "0.8", 2, "0.7"), (4, "0.8", 2, "0.7"), (3, "0.4", 1, "0.2")),
    [False, False, True],
)


@pytest.mark.parametrize(
    ("mechanism", "case", "kind"),
    [
        ("dpbd", DPBD_BACKWARD, "backward"),
        ("dpba", DPBA_BACKWARD, "backward"),
        ("dpbd", NEGATIVE, "negative"),
        ("dpba", NEGATIVE, "negative"),
    ],
)
def test_published_dynamic_rules_break_windows(
    mechanism: str, case: tuple[Population, list[bool]], kind: str
) -> None:
    pop, dec = case
    bad = trace_with_guard(mechanism, pop, dec, variant="published")
    assert not bad.ok
    if kind == "negative":
        assert bad.negative is not None and "negative dissimilarity budget -0.15" in bad.negative
    else:
        assert bad.refusal is not None and bad.refusal.window.kind == "backward"
        # The window of the declaration in force, not of a future one.
        assert bad.refusal.window.last == bad.refusal.slot
        # Feasible when declared: the window's spends before the declaration fit its bound.
        req = pop.requirement_of("u")
        assert isinstance(req, Dynamic)
        decl = req.in_force(bad.refusal.slot)
        assert decl is not None and decl.slot == bad.refusal.slot
        before = sum(
            (
                s.dissimilarity[0] + s.publication[0]
                for s in bad.slots
                if decl.slot - decl.w_back < s.slot < decl.slot
            ),
            F(0),
        )
        assert before <= decl.eps_back
    assert trace_with_guard(mechanism, pop, dec, variant="sound").ok


# 0.3 / 0.1 == 2.9999999999999996 in doubles: with E = 0.6 and w = 3 a publication of three shares
# (0.3) counts as t_N = 1.9999999999999996 nullified slots, so the slot two after it publishes again
# with t_A = 4.4e-16 shares while the window already holds E.
# 001 Algorithm 5 (PBA) in doubles end to end, the heterogeneous case: class A
# (w 4, eps 0.7) beside class B (w 2, eps 1); the sound variant's clip computes A's room in
# doubles, and window [7, 10] of A ends 2.2e-17 over 0.7 (also over the double nearest 0.7,
# which is below 0.7: an arithmetic overspend, not the parsing of the requirement).
HETEROGENEOUS = {"a": Fixed(4, Budget("0.7")), "b": Fixed(2, Budget("1"))}
HETEROGENEOUS_DECISIONS = [False, False, True, False, True, False, True, False, True, True]


def test_full_doubles_overspend_heterogeneous_pba() -> None:
    pop = Population(HETEROGENEOUS)
    bad = trace_with_guard("pba", pop, HETEROGENEOUS_DECISIONS, arithmetic="float")
    assert bad.refusal is not None and bad.failed_slot == 10
    window = bad.refusal.window
    assert (window.first, window.kind) == (7, "fixed") and "member 'a'" in bad.refusal.subject
    spent = window.spent + bad.refusal.asked
    assert F(0.7) < F(7, 10) < spent < F(7, 10) + F(1, 10**16)
    # exact arithmetic, same decisions: compliant (the sound variant is proved)
    assert trace_with_guard("pba", pop, HETEROGENEOUS_DECISIONS).ok


def test_full_doubles_are_the_exact_values_of_the_doubles_computed() -> None:
    """Negative control and meaning: every charge in float mode is exactly a double, and a
    uniform allocator on a budget and window whose share is exact (1/2 over 4 slots: 1/8)
    spends it exactly: float mode refutes roundings, not everything."""
    pop = Population({"a": Fixed(4, Budget("0.5"))})
    run = trace_with_guard("uniform", pop, [True] * 12, arithmetic="float")
    assert run.ok
    assert {s.publication[0] for s in run.slots} == {F(1, 8)}
    pop = Population(HETEROGENEOUS)
    bad = trace_with_guard("pba", pop, HETEROGENEOUS_DECISIONS, arithmetic="float")
    for s in bad.slots:
        for x in (*s.dissimilarity, *s.publication):
            assert F(float(x)) == x
