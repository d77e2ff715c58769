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
    """Neither proved nor searched is not a pass: UNCHECKED, exit 3, and a failing case in the
    JUnit XML (it exited 0 as "PASSED (neither proved nor searched)", and the XML was green)."""
    report = run_gate(
        "tests.test_gate_verdicts:PLAIN_SOUND",
        GateOptions(w_max=3, stages=("conformance", "proof")),
    )
    assert report.verdict == "unchecked" and report.exit_code == 3 and not report.ok
    assert report.headline().startswith("UNCHECKED: neither proved nor searched")
    assert "PASSED" not in report.headline()
    suite = ET.fromstring(report.junit_xml()).find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) == 1
    verdict_case = [c for c in suite.iter("testcase") if c.get("name") == "verdict"]
    assert len(verdict_case) == 1 and verdict_case[0].find("failure") is not None
    # the control: searched, not proved, is a pass (exit 0) with no failing case
    searched = run_gate("tests.test_gate_verdicts:PLAIN_SOUND", QUICK)
    assert searched.verdict == "passed" and searched.exit_code == 0
    suite = ET.fromstring(searched.junit_xml()).find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert not [c for c in suite.iter("testcase") if c.get("name") == "verdict"]
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


class _BigBudgetRule:
    """Thrifty's rule written on the algebra (it runs on Z3 terms), except that from a budget
    of 10^6 on the publication share is the whole budget: a window of 2 then spends more than
    eps. It declares per-class scaling, which the gate's conformance stage samples (factors
    1/9..9 of small budgets: it holds there); a proof normalizing budgets to 1 by that claim
    said "PROVED ... every positive budget"."""

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> None:
        from wevent.mechanisms.allocators.kernel import Prefix

        self.alg = alg
        self.classes = tuple(classes)
        self.fixed = fixed_classes(classes, "big-budget-rule")
        self._prefix = Prefix

    def start(self) -> tuple[Any, ...]:
        return tuple(self._prefix(self.alg, c.w) for c in self.fixed)

    def plan(self, state: tuple[Any, ...], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, spent in zip(self.fixed, state, strict=True):
            dis.append(alg.scale(c.eps, F(1, 2 * c.w)))
            half = alg.scale(c.eps, F(1, 2))
            half = alg.select(alg.le(alg.const(10**6), c.eps), c.eps, half)
            pub.append(alg.scale(alg.sub(half, spent.total(t - c.w + 1, t - 1)), F(1, 3)))
        no = alg.truth(False)
        return Plan(no, no, tuple(dis), tuple(pub))

    def step(self, state: tuple[Any, ...], t: int, plan: Plan[Any, Any], published: Any) -> Any:
        zero = self.alg.const(0)
        return tuple(
            h.push(self.alg.select(published, p, zero))
            for h, p in zip(state, plan.publication, strict=True)
        )


def _big(alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    return _BigBudgetRule(alg, classes, variant)


BIG_BUDGET_RULE = AllocatorSpec("big-budget-rule", "fixed", "per-class", "", _big)


def test_a_third_party_scaling_claim_is_not_what_a_proof_rests_on() -> None:
    """The proof of a kernel that is not built in keeps every budget symbolic, whatever scaling
    it declares (the claim is only sampled): the rule that breaks windows from eps = 10^6 is
    refuted by the proof, with a counterexample at such a budget that replays."""
    opts = GateOptions(w_max=2, classes=1, search_runs=5, examples=5)
    report = run_gate("tests.test_gate_verdicts:BIG_BUDGET_RULE", opts)
    assert report.stage("conformance/scaling").status == "passed"  # the sample misses it
    assert report.verdict == "refuted", report.headline()
    assert report.stage("proof").status == "failed"
    cex = report.counterexample
    assert cex is not None and any(getattr(r, "eps", 0) >= 10**6 for _, r in cex.requirements)
    # the control: a sound third-party kernel is still proved with symbolic budgets
    sound = run_gate("tests.gate_sound:half_uniform", opts)
    assert sound.verdict == "proved", sound.headline()
    assert "every positive budget" in sound.headline()


def test_the_search_reach_is_given_per_kind_and_junit_options_once() -> None:
    """A dynamic allocator's gate searches fixed and dynamic populations with different
    reaches: the headline gave the maxima over both as if one search had reached them. JUnit
    listed variant and arithmetic twice and a search length of 0 (the default's sentinel)."""
    report = run_gate("dpba", GateOptions(w_max=2, classes=1, search_runs=2, examples=5,
                                         stages=("search",)))  # fmt: skip
    scope = report.search_scope()
    assert scope is not None and len(scope["by_kind"]) >= 2
    head = report.headline()
    for k in scope["by_kind"]:
        assert f"{k['kind']}: {k['runs']:,} up to w = {k['w_max']}" in head, head
    names = [p.get("name") for p in ET.fromstring(report.junit_xml()).iter("property")]
    assert len(names) == len(set(names)), names
    props = {
        p.get("name"): p.get("value") for p in ET.fromstring(report.junit_xml()).iter("property")
    }
    assert (props["search_horizon"] or "").startswith("0 (default")
