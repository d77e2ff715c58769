"""Peer implementations as audited fixtures: the variant ``du-code`` runs the rules of Du et al.'s
public Java code (DynamicWEventCode) for BA, PBA, BD and PBD (docs/peers.md).

* absorption (BA, PBA): the last publication is set once and never updated, so nothing is
  nullified and every publication from slot w on spends eps/2; golden numbers on the smallest
  case (w = 2, eps = 1, publish at slots 1 and 2: window [1, 2] spends 5/4), and the gate refutes
  both with that counterexample, which `wevent trace` replays to exit 1;
* distribution (BD, PBD): the remaining publication budget subtracts the last w publications
  instead of the last w - 1; the gate proves both at a small scope, and property tests state
  what "conservative" means exactly (from the same state it never plans more than the printed
  rule; over a run its cumulative spend never passes the sound kernel's), with a negative
  control (a kernel that subtracts one publication too few breaks the property). The per-slot
  claim does not hold, and a test pins the input where it fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.replay import replay_on_the_command_line
from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.formats import read_ledger, read_requirements, write_requirements
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.cli import cli
from wevent.cli._common import VARIANT_CHOICES
from wevent.demo import example_path
from wevent.gate import GateOptions, GateReport, run_gate
from wevent.mechanisms.allocators import make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.fixed import FixedKernel, FixedState
from wevent.mechanisms.allocators.kernel import (
    DU_CODE,
    STREAMDP_CODE,
    VARIANTS,
    ClassReq,
    FixedClass,
    Kernel,
    Plan,
    classes_of,
    published_now,
)
from wevent.mechanisms.allocators.registry import BUILTIN, kernel_for
from wevent.verifier.tracing import trace_with_guard

F = Fraction
ALG = ExactAlgebra()
W2 = Population({"u1": Fixed(2, Budget(1))})  # the smallest case: w = 2, eps = 1
PEERS = ("bd", "ba", "pbd", "pba")
DYNAMIC_PEERS = ("dpbd", "dpba")  # their own kernel: tests/test_du_code_kernel.py
STREAMDP_CODE_NAMES = ("dsat",)
GATE = GateOptions(w_max=2, classes=2, examples=40, e2e_runs=1, conformance_inputs=10)


def _gate(name: str, **changes: Any) -> GateReport:
    return run_gate(name, dataclasses.replace(GATE, variant=DU_CODE, **changes))


def _spends(
    name: str, classes: Sequence[ClassReq[Fraction]], variant: str, decisions: list[bool]
) -> list[tuple[Fraction, ...]]:
    """Per slot, per class: dissimilarity plus the publication actually spent."""
    trace = run_trace(make_kernel(name, ALG, classes, variant), decisions)
    return [
        tuple(d + p for d, p in zip(s.dissimilarity, s.publication, strict=True)) for s in trace
    ]


# ---------------------------------------------------------------------------- selection


def test_du_code_is_a_variant_of_du_et_al_s_allocators_only_and_sound_stays_the_default() -> None:
    # streamdp-benchmark's mechanisms: the sound variant, and the code's rule where it is a
    # small, refutable change (dsat); adapub keeps the clip-free rule as `published`
    streamdp: dict[str, tuple[str, ...]] = {
        "fast-w": ("sound",),
        "pegasus": ("sound",),
        "adapub": VARIANTS,
    }
    for name, spec in BUILTIN.items():
        peer = name in PEERS or name in DYNAMIC_PEERS
        expected: tuple[str, ...] = (*VARIANTS, DU_CODE) if peer else VARIANTS
        expected = streamdp.get(name, expected)
        if name in STREAMDP_CODE_NAMES:  # streamdp-benchmark's rule instead of the paper's
            expected = ("sound", STREAMDP_CODE)
        assert spec.variants == expected, name
        assert spec.variants[0] == "sound"
    assert (*VARIANTS, DU_CODE, STREAMDP_CODE) == VARIANT_CHOICES  # what --variant offers
    fixed = [FixedClass(2, F(1))]
    for name in ("uniform", "sample", "lba", "lbd"):
        with pytest.raises(BudgetError, match=f"{name}: no variant 'du-code'"):
            kernel_for(name, ALG, fixed, DU_CODE)
    with pytest.raises(BudgetError, match=r"unknown variant 'x' \(expected sound or published\)"):
        kernel_for("uniform", ALG, fixed, "x")


def test_other_allocators_refuse_du_code_on_the_command_line(tmp_path: Path) -> None:
    csv = tmp_path / "w2.csv"
    write_requirements(W2, csv)
    runner = CliRunner()
    trace = runner.invoke(
        cli, ["trace", "uniform", "-r", str(csv), "--decisions", "1", "--variant", DU_CODE]
    )
    assert trace.exit_code == 2 and "uniform: no variant 'du-code'" in trace.output
    gate = runner.invoke(cli, ["gate", "lba", "--variant", DU_CODE, "--w-max", "1"])
    assert gate.exit_code == 2 and "no variant 'du-code'" in gate.output


@pytest.mark.parametrize("name", PEERS)
def test_the_default_and_published_variants_are_unchanged(name: str) -> None:
    """The sound and published kernels spend what they spent before du-code existed (001
    Example 3's and 4's populations are pinned in test_allocator_golden.py; here a longer run)."""
    classes: list[ClassReq[Fraction]] = [FixedClass(3, F(1)), FixedClass(2, F(1, 2))]
    decisions = [True, True, False, True, True, True, False, False, True, True]
    sound = _spends(name, classes, "sound", decisions)
    assert sound == _spends(name, classes, "published", decisions)
    assert sound != _spends(name, classes, DU_CODE, decisions)


# ---------------------------------------------------------------------------- absorption: unsound


@pytest.mark.parametrize("name", ["ba", "pba"])
def test_du_code_absorption_spends_five_quarters_in_the_smallest_window(name: str) -> None:
    trace = run_trace(make_kernel(name, ALG, [FixedClass(2, F(1))], DU_CODE), [True, True])
    assert [s.status for s in trace] == ["published", "published"]  # slot 2 is not nullified
    assert [(s.dissimilarity, s.publication) for s in trace] == [
        ((F(1, 4),), (F(1, 4),)),  # one share
        ((F(1, 4),), (F(1, 2),)),  # min(t, w) = 2 shares: eps/2, the most absorbable
    ]
    assert sum(s.dissimilarity[0] + s.publication[0] for s in trace) == F(5, 4)
    result = trace_with_guard(name, W2, [True, True], variant=DU_CODE)
    assert result.refusal is not None and result.refusal.slot == 2
    assert (result.refusal.window.spent, result.refusal.asked) == (F(3, 4), F(1, 2))
    assert result.refusal.excess == F(1, 4)
    # The printed rule on the same input stays within the window.
    assert trace_with_guard(name, W2, [True, True], variant="published").ok


@pytest.mark.parametrize("name", ["ba", "pba"])
def test_du_code_absorption_never_nullifies_and_spends_eps_over_2_from_slot_w(name: str) -> None:
    classes: list[ClassReq[Fraction]] = [FixedClass(4, F(2)), FixedClass(3, F(3, 5))]
    decisions = [True, False, True, True, False, True, True, True]
    trace = run_trace(make_kernel(name, ALG, classes, DU_CODE), decisions)
    kernel_classes = make_kernel(name, ALG, classes, DU_CODE)
    assert isinstance(kernel_classes, FixedKernel)
    for s, decided in zip(trace, decisions, strict=True):
        assert s.status == ("published" if decided else "skipped")
        for c, candidate in zip(kernel_classes.served, s.candidate, strict=True):
            share = c.eps / (2 * c.w)
            assert candidate == share * min(s.slot, c.w)


@pytest.mark.parametrize("name", ["ba", "pba"])
def test_gate_refutes_du_code_absorption_and_trace_replays_it(name: str, tmp_path: Path) -> None:
    report = _gate(name, search_runs=40)
    assert report.verdict == "refuted" and report.exit_code == 1, "\n".join(report.describe())
    cex = report.counterexample
    assert cex is not None and cex.replays()
    assert [(u, r.describe()) for u, r in cex.requirements] == [("u1", "fixed w=2 eps=1")]
    assert cex.decision_text == "1,1" and cex.variant == DU_CODE
    assert (cex.failure.spent, cex.failure.bound) == (F(5, 4), F(1))
    assert report.stage("proof").status == "failed"
    assert report.stage("search/fixed").status == "failed"
    replay = replay_on_the_command_line(report, tmp_path / "counterexample.csv", DU_CODE)
    assert "excess 0.25" in replay.output


def test_the_bundled_peer_log_is_what_du_code_pba_spends() -> None:
    """wevent/examples/peer-spends.csv (docs/peers.md, "Audit your own implementation") holds
    exactly the spends of du-code PBA on its two users for slots published, skipped, published."""
    population = read_requirements(example_path("peer-requirements.csv"))
    decisions = [True, False, True]
    trace = run_trace(make_kernel("pba", ALG, classes_of(population, "pba"), DU_CODE), decisions)
    expected = set()
    for s in trace:
        for c in population.classes:
            for user in c.members:
                expected.add((s.slot, user, "dissimilarity", s.dissimilarity[c.index]))
                if s.status == "published":
                    expected.add((s.slot, user, "publication", s.publication[c.index]))
    logged = read_ledger(example_path("peer-spends.csv"))
    rows = [(ch.slot, ch.user, ch.part, Fraction(ch.amount)) for ch in logged]
    assert len(rows) == len(set(rows)) and set(rows) == expected


# ---------------------------------------------------------------------------- distribution: sound


@pytest.mark.parametrize("name", ["bd", "pbd"])
def test_du_code_distribution_subtracts_the_last_w_publications(name: str) -> None:
    """w = 2, eps = 1, publish at slots 1-3: slot 3 subtracts slots 1 and 2 (1/4 + 1/8), where
    002 Algorithm 1 line 7 (001 Algorithm 4 line 4) subtracts slot 2 alone."""
    classes: list[ClassReq[Fraction]] = [FixedClass(2, F(1))]
    du = run_trace(make_kernel(name, ALG, classes, DU_CODE), [True] * 3)
    sound = run_trace(make_kernel(name, ALG, classes, "sound"), [True] * 3)
    assert [s.publication[0] for s in du] == [F(1, 4), F(1, 8), F(1, 16)]
    assert [s.publication[0] for s in sound] == [F(1, 4), F(1, 8), F(3, 16)]
    assert all(s.dissimilarity == (F(1, 4),) for s in du)


@pytest.mark.parametrize("name", ["bd", "pbd"])
def test_gate_proves_du_code_distribution_at_a_small_scope(name: str) -> None:
    report = _gate(name, w_max=3, search_runs=40)
    assert report.verdict == "proved", "\n".join(report.describe())
    assert report.stage("proof").status == "proved"
    assert [s.status for s in report.stages if s.status == "failed"] == []


def test_du_code_distribution_can_spend_more_than_sound_at_one_slot() -> None:
    """The conservative claim is about the rule and the totals, not every slot: w = 2, eps = 1,
    decisions 1,0,1,1: du-code spends less at slot 3 (1/8 against 1/4 published), so less is
    subtracted at slot 4, where it spends 7/16 against the sound kernel's 3/8."""
    classes: list[ClassReq[Fraction]] = [FixedClass(2, F(1))]
    decisions = [True, False, True, True]
    assert _spends("bd", classes, DU_CODE, decisions)[3] == (F(7, 16),)
    assert _spends("bd", classes, "sound", decisions)[3] == (F(3, 8),)


# The property tests: populations of 1-3 classes with small windows and exact budgets.
classes_strategy = st.lists(
    st.builds(
        FixedClass,
        st.integers(1, 5),
        st.builds(Fraction, st.integers(1, 12), st.sampled_from([1, 2, 3, 5, 10])),
    ),
    min_size=1,
    max_size=3,
)
decisions_strategy = st.lists(st.booleans(), min_size=1, max_size=30)


class _OneTooFew(FixedKernel[Any, Any]):
    """A broken distribution (the negative control): it subtracts the last w - 2 publications,
    one fewer than the printed rule, so it spends more than the sound kernel."""

    def _distribution(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._share(c))
            left = alg.sub(alg.scale(c.eps, F(1, 2)), hist.total(t - c.w + 2, t - 1))
            pub.append(alg.scale(left, F(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))


def _kernel(
    name: str, variant: str, classes: Sequence[ClassReq[Fraction]]
) -> Kernel[Any, Any, Any]:
    if variant == "one-too-few":
        return _OneTooFew(name, ALG, classes, "published")
    return make_kernel(name, ALG, classes, variant)


def _cumulative_never_exceeds_sound(
    name: str, variant: str, classes: list[ClassReq[Fraction]], decisions: list[bool]
) -> None:
    """Through every slot, each class's total spend under ``variant`` is at most the sound
    kernel's on the same decisions."""
    mine = run_trace(_kernel(name, variant, classes), decisions)
    sound = run_trace(make_kernel(name, ALG, classes, "sound"), decisions)
    totals_mine = [F(0)] * len(classes)
    totals_sound = [F(0)] * len(classes)
    for a, b in zip(mine, sound, strict=True):
        for i in range(len(classes)):
            totals_mine[i] += a.dissimilarity[i] + a.publication[i]
            totals_sound[i] += b.dissimilarity[i] + b.publication[i]
            assert totals_mine[i] <= totals_sound[i], (a.slot, i)


@pytest.mark.parametrize("name", ["bd", "pbd"])
@settings(max_examples=150, deadline=None)
@given(classes=classes_strategy, decisions=decisions_strategy)
def test_du_code_distribution_never_plans_more_than_the_printed_rule_from_the_same_state(
    name: str, classes: list[ClassReq[Fraction]], decisions: list[bool]
) -> None:
    """The rule itself: on every state du-code reaches, its publication budget is the printed
    rule's minus half of the publication w slots back (never more), and its dissimilarity
    budget is the same."""
    du = make_kernel(name, ALG, classes, DU_CODE)
    printed = make_kernel(name, ALG, classes, "published")
    assert isinstance(du, FixedKernel)
    state = du.start()
    for t, decision in enumerate(decisions, start=1):
        mine, theirs = du.plan(state, t), printed.plan(state, t)
        assert mine.dissimilarity == theirs.dissimilarity
        for i, c in enumerate(du.served):
            oldest = state.pub[i].total(t - c.w, t - c.w)  # the publication at slot t - w
            assert oldest >= 0
            assert mine.publication[i] == theirs.publication[i] - oldest / 2
            assert mine.publication[i] <= theirs.publication[i]
        state = du.step(state, t, mine, published_now(ALG, mine, decision))


@pytest.mark.parametrize("name", ["bd", "pbd"])
@settings(max_examples=150, deadline=None)
@given(classes=classes_strategy, decisions=decisions_strategy)
def test_du_code_distribution_never_spends_more_in_total_than_sound(
    name: str, classes: list[ClassReq[Fraction]], decisions: list[bool]
) -> None:
    _cumulative_never_exceeds_sound(name, DU_CODE, classes, decisions)


@pytest.mark.parametrize("name", ["bd", "pbd"])
def test_the_total_spend_property_fails_for_a_kernel_that_spends_more(name: str) -> None:
    """Negative control: the same property, held against a kernel subtracting one publication
    too few, fails (hypothesis finds a run), and on a fixed input too."""
    with pytest.raises(AssertionError):
        _cumulative_never_exceeds_sound(name, "one-too-few", [FixedClass(3, F(1))], [True] * 3)

    @settings(max_examples=200, deadline=None, database=None)
    @given(classes=classes_strategy, decisions=decisions_strategy)
    def prop(classes: list[ClassReq[Fraction]], decisions: list[bool]) -> None:
        _cumulative_never_exceeds_sound(name, "one-too-few", classes, decisions)

    with pytest.raises(AssertionError):
        prop()
