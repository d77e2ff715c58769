"""The gate's verdict line says exactly what was proved and what was searched:
PROVED states its scope and the search's reach; a kernel that cannot run on Z3 terms is
"PASSED (searched, not proved)" with the line that stopped the proof, never "proved"."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from wevent.gate import GateOptions, run_gate
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.kernel import ClassReq, Plan, fixed_classes

F = Fraction
HERE = Path(__file__).name
QUICK = GateOptions(w_max=3, search_runs=40, examples=40)


class _PlainUniform:
    """Uniform written in plain Python: each slot spends min(eps / w, eps / 2), decided by an
    ``if`` on the budget (sound: w slots of at most eps / w)."""

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> None:
        self.alg = alg
        self.classes = tuple(classes)
        self.fixed = fixed_classes(classes, "plain-uniform")

    def start(self) -> int:
        return 0

    def step(self, state: int, t: int, plan: Plan[Any, Any], published: Any) -> int:
        return t

    def _share(self, eps: Any, w: int) -> Any:
        share = eps / w
        if share > eps / 2:  # the first branch on a budget
            share = eps / 2
        return share

    def plan(self, state: int, t: int) -> Plan[Any, Any]:
        pubs = tuple(self._share(c.eps, c.w) for c in self.fixed)
        return Plan(False, True, tuple(F(0) for _ in pubs), pubs)


class _PlainMiscount(_PlainUniform):
    """The same, but budgets of at least 1 are split over w - 1 slots (a miscount only for
    large budgets): a window of w slots spends eps * w / (w - 1)."""

    def _share(self, eps: Any, w: int) -> Any:
        if eps >= 1 and w > 1:
            return eps / (w - 1)
        return eps / w


class _EqualityBranch(_PlainUniform):
    """Sound, but decides with ``==`` on a budget: a window of 1 or a budget of exactly 1 gets
    eps / w, any other budget too (the branch only looks different). Z3 answers ``bool()`` of
    an equality between terms by structural identity and would silently pick a branch, so the
    kernel must not count as running on Z3 terms."""

    def _share(self, eps: Any, w: int) -> Any:
        if eps == 1:  # a branch on a budget, written as an equality
            return eps / w
        return eps / w


def _factory(cls: type[_PlainUniform]) -> Any:
    def factory(alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        return cls(alg, classes, variant)

    return factory


PLAIN_SOUND = AllocatorSpec("plain-sound", "fixed", "per-class", "", _factory(_PlainUniform))
PLAIN_BROKEN = AllocatorSpec("plain-broken", "fixed", "none", "", _factory(_PlainMiscount))
EQUALITY_BRANCH = AllocatorSpec(
    "equality-branch", "fixed", "per-class", "", _factory(_EqualityBranch)
)


def test_a_proof_states_its_scope_and_the_search_its_reach(tmp_path: Path) -> None:
    report = run_gate("pba", QUICK)
    head = report.headline()
    # a built-in fixed-requirement kernel: bounded proof, then k-induction for every horizon
    assert head.startswith(
        "PROVED for <= 2 classes, w <= 3, every horizon (k-induction), every positive budget; "
    )
    searched = report.search_scope()
    assert searched is not None and searched["w_max"] >= 32 and searched["horizon"] >= 128
    assert f"searched {searched['runs']:,} populations up to w = {searched['w_max']}" in head
    assert head.endswith(": no violation")
    data = report.to_json()
    assert data["proved"] == {
        "classes": "1..2",
        "w": "1..3",
        "horizon": "unbounded",
        "budgets": "positive reals",
    }
    bounded = report.stage("proof").data["bounded"]
    assert bounded["scope"]["horizon"] == 9 and bounded["result"] == "proved"
    assert data["searched"]["runs"] == searched["runs"] > 0
    props = {
        p.get("name"): p.get("value", "")
        for p in ET.fromstring(report.junit_xml()).iter("property")
    }
    assert json.loads(props["proved"])["w"] == "1..3"
    assert json.loads(props["searched"])["runs"] == searched["runs"]


def test_a_plain_python_kernel_is_searched_not_proved_and_says_where() -> None:
    report = run_gate("tests.test_gate_verdicts:PLAIN_SOUND", QUICK)
    assert report.verdict == "passed" and report.exit_code == 0
    head = report.headline()
    assert head.startswith("PASSED (searched, not proved: skipped: the kernel does not run on Z3")
    assert f"{HERE}:" in head and "if share > eps / 2:" in head
    assert "PROVED" not in head and "proved for" not in head.lower()
    assert report.proof_scope() is None and report.search_scope() is not None
    strict = run_gate(
        "tests.test_gate_verdicts:PLAIN_SOUND",
        GateOptions(w_max=3, search_runs=40, examples=40, require_proof=True),
    )
    assert strict.exit_code == 3 and strict.headline().startswith("UNPROVED (--require-proof")


def test_an_equality_on_a_budget_is_a_branch_too() -> None:
    report = run_gate(
        "tests.test_gate_verdicts:EQUALITY_BRANCH",
        GateOptions(w_max=3, search_runs=20, examples=20, stages=("conformance", "proof")),
    )
    symbolic = report.stage("conformance/symbolic")
    assert symbolic.status == "skipped" and "branched in Python" in symbolic.detail
    assert "if eps == 1:" in symbolic.detail
    assert report.stage("proof").status == "skipped"
    assert "PROVED" not in report.headline()


def test_a_broken_plain_python_kernel_is_refuted_by_the_search() -> None:
    report = run_gate("tests.test_gate_verdicts:PLAIN_BROKEN", QUICK)
    assert report.verdict == "refuted", report.describe()
    cex = report.counterexample
    assert cex is not None and cex.replays()
    assert report.headline().startswith("REFUTED by search/fixed: slot ")


def test_a_refutation_names_the_stage_that_found_its_counterexample() -> None:
    """du-code plpd+: the proof's replay fails at slot 5, the search's counterexample at slot 4
    (smaller, so the one shown): the headline names the search, not the first failed stage."""
    report = run_gate("plpd+", GateOptions(w_max=3, variant="du-code"))
    assert report.verdict == "refuted", report.describe()
    proof, search = report.stage("proof"), report.stage("search/population")
    cex = report.counterexample
    assert proof.counterexample is not None and cex is not None and search.counterexample is cex
    assert proof.counterexample.failure.describe() != cex.failure.describe()
    head = report.headline()
    assert head == f"REFUTED by search/population: {cex.failure.describe()}", head


def test_nothing_searched_is_said() -> None:
    report = run_gate(
        "tests.test_gate_verdicts:PLAIN_SOUND",
        GateOptions(w_max=3, stages=("conformance", "proof")),
    )
    assert report.headline().startswith("PASSED (neither proved nor searched")
    proved = run_gate("pba", GateOptions(w_max=3, stages=("conformance", "proof")))
    assert proved.headline().endswith("; not searched")
    third_party = run_gate(
        "tests.gate_sound:half_uniform", GateOptions(w_max=3, stages=("conformance", "proof"))
    )
    assert third_party.headline().startswith("PROVED for <= 2 classes, w <= 3, 9 slots, ")


class _Silent(_PlainUniform):
    """Nullifies every slot and spends nothing: private, but it never releases anything."""

    def plan(self, state: int, t: int) -> Plan[Any, Any]:
        zeros = tuple(F(0) for _ in self.fixed)
        return Plan(True, False, zeros, zeros)


SILENT = AllocatorSpec("silent", "fixed", "per-class", "", _factory(_Silent))


def test_a_kernel_that_never_publishes_is_not_said_to_pass_end_to_end() -> None:
    report = run_gate("tests.test_gate_verdicts:SILENT", QUICK)
    e2e = report.stage("end-to-end")
    assert e2e.status == "unknown" and "never published" in e2e.detail
    assert "end to end: never published" in report.headline()
    # negative control: a kernel that publishes passes the stage
    assert run_gate("pba", QUICK).stage("end-to-end").status == "passed"
