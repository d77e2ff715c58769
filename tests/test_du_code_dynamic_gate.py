"""`wevent gate dpba|dpbd --variant du-code` refutes DynamicWEventCode's dynamic step, and the
counterexample replays through `wevent trace` to a real refusal by the guard.

The fast tests run the gate's conformance and proof stages (the bounded Z3 proof on the du-code
kernel's own terms, which is what refutes) and, separately, its search at a small scope; the
default gate (every stage, the wide search included: about 45 s for dpbd and 75 s for dpba on
this machine) is behind ``slow``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.replay import replay_on_the_command_line
from wevent.gate import GateOptions, GateReport, run_gate
from wevent.mechanisms.allocators.kernel import DU_CODE
from wevent.proofs.central import Scope, prove_allocator

NAMES = ("dpba", "dpbd")
FAST = GateOptions(
    variant=DU_CODE,
    w_max=2,
    examples=40,
    e2e_runs=1,
    conformance_inputs=10,
    search_runs=0,
)


def _replays_on_the_command_line(report: GateReport, tmp_path: Path) -> str:
    return replay_on_the_command_line(report, tmp_path / "cex.csv", DU_CODE).output


@pytest.mark.parametrize("name", NAMES)
def test_the_proof_refutes_du_code_and_the_trace_replays_it(name: str, tmp_path: Path) -> None:
    report = run_gate(name, replace(FAST, stages=("conformance", "proof")))
    assert report.verdict == "refuted" and report.exit_code == 1, "\n".join(report.describe())
    assert report.stage("conformance/symbolic").status == "passed"  # Z3 terms = exact values
    proof = report.stage("proof")
    assert proof.status == "failed" and proof.data["replays"]
    out = _replays_on_the_command_line(report, tmp_path)
    assert "REFUSED by the guard" in out or "negative" in out


@pytest.mark.parametrize("name", NAMES)
def test_the_search_refutes_du_code_on_its_own(name: str, tmp_path: Path) -> None:
    """Without the proof, the search's dynamic populations find a failure too (the fixed ones
    do not: with one declaration per user the search meets no broken window, as
    analysis/du_code_dynamic.py's exhaustive search did not)."""
    report = run_gate(name, replace(FAST, stages=("search",)))
    assert report.verdict == "refuted", "\n".join(report.describe())
    assert report.stage("search/dynamic").status == "failed"
    assert report.stage("search/fixed").status == "passed"
    _replays_on_the_command_line(report, tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_the_induction_is_not_offered_for_du_code(name: str) -> None:
    """The dynamic induction builds the sound and published kernels' states: --unbounded says
    so instead of proving another kernel than the one asked for."""
    with pytest.raises(Exception, match="bounded proofs only"):
        prove_allocator(name, variant=DU_CODE, scope=Scope(classes=1, w_max=2), unbounded=True)
    # the bounded proof at the same scope refutes (the counterexample is replayed inside)
    proof = prove_allocator(name, variant=DU_CODE, scope=Scope(classes=1, w_max=2))
    assert proof.status == "counterexample" and proof.counterexample is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_default_gate_refutes_du_code(name: str, tmp_path: Path) -> None:
    report = run_gate(name, GateOptions(variant=DU_CODE))
    assert report.verdict == "refuted", "\n".join(report.describe())
    assert all(s.status != "proved" for s in report.stages)
    _replays_on_the_command_line(report, tmp_path)
