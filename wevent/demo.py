"""`wevent demo`: the main job on bundled examples.

Until allocators exist, the demo checks two bundled ledgers against bundled requirements and prints
the verdicts, shows the runtime guard refusing the spends that would break a window, and proves
the primitives' privacy theorems. Later issues grow it into run -> audit -> prove -> report.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

from accounting.formats import read_ledger, read_requirements
from accounting.spending import BudgetExceeded, EvidenceRejected
from verifier.check import check
from verifier.guard import Guard

__all__ = ["example_path", "run_demo"]


def example_path(name: str) -> Path:
    """Path of a bundled example file (``requirements.csv``, ``compliant.jsonl``, ...)."""
    return Path(str(resources.files("wevent").joinpath("examples", name)))


def run_demo(echo: Callable[[str], None]) -> bool:
    """Check the bundled ledgers and replay the violating one through the guard.

    Returns True when every verdict came out as the examples intend (compliant ledger passes,
    violating ledger fails, guard refuses).
    """
    from wevent.cli import render_verdict

    req_files = [example_path("requirements.csv"), example_path("requirements.dynamic.csv")]
    population = read_requirements(req_files)
    echo("wevent demo: exact w-event accounting on bundled example ledgers")
    echo("requirements: alice fixed (w=3, 0.3); bob fixed (w=5, 1); carol whole-stream 2;")
    echo("              dave dynamic backward/forward windows (paper 001, Table 3, user u_1)")
    intended = True
    for name, expect_ok in (("compliant.jsonl", True), ("violating.jsonl", False)):
        ledger = read_ledger(example_path(name))
        verdict = check(ledger, population)
        echo("")
        echo(f"== {name}: {len(ledger)} charges ({ledger.per_user_rows()} per user)")
        echo(render_verdict(verdict, population))
        intended &= verdict.ok == expect_ok
    echo("")
    echo("== runtime guard: replaying violating.jsonl spend by spend (fail closed)")
    guard = Guard(population, check_evidence=True)
    violating = read_ledger(example_path("violating.jsonl"))
    for name, members in violating.groups.items():
        guard.define_group(name, members)
    refused = 0
    for charge in violating:
        try:
            guard.spend_charge(charge)
        except (BudgetExceeded, EvidenceRejected) as exc:
            refused += 1
            echo(f"  refused: {exc}")
    kept = check(guard.ledger, population)
    echo(
        f"  {refused} spend(s) refused; the {len(guard.ledger)} accepted charges are "
        f"{'COMPLIANT' if kept.ok else 'NOT COMPLIANT'} under the batch checker"
    )
    intended &= refused > 0 and kept.ok
    echo("")
    echo("== proofs of the primitives every mechanism spends through (wevent prove all)")
    from proofs.primitives import PRIMITIVES, prove_primitive

    for name in sorted(PRIMITIVES):
        result = prove_primitive(name, 5)
        echo(f"  {name}: {result.status} - {result.statement}")
        intended &= result.status == "proved"
    return intended
