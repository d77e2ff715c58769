"""analysis/du_code_dynamic.py: DynamicWEventCode's DPBA/DPBD step restated as a ledger.

* 001 Table 3, slot 1: the code plans 0.5, 0.3, 0.4 where 001 Example 7 (and wevent's
  ``published`` dpba) gives 0.3, 0.3, 0.2.
* The search's counterexample (one user, two declarations, skip, skip, publish): the code's
  spends break a backward window that was feasible when declared, `wevent.check` says so, and
  the printed rules (wevent's ``published`` dpba) and the ``sound`` kernel stay within every
  window on the same input and decisions (the negative control).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import pytest

import wevent
from tests.analysis_import import analysis_module
from wevent.mechanisms.allocators import make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import classes_of
from wevent.verifier.tracing import trace_with_guard

ROOT = Path(__file__).resolve().parent.parent
ANALYSIS = ROOT / "analysis"
TABLE3 = ROOT / "wevent" / "examples" / "001-table3.csv"
F = Fraction

# The search's first window failure (re-declared scope, budgets {1, 2}, w <= 2, <= 3 slots).
CEX = "user,slot,w_back,eps_back,w_fwd,eps_fwd\nu1,1,1,2,2,2\nu1,2,2,1,1,2\n"
CEX_DECISIONS = [False, False, True]


@pytest.fixture
def code() -> Iterator[ModuleType]:
    with analysis_module("du_code_dynamic") as module:
        yield module


@pytest.fixture
def cex(tmp_path: Path) -> Path:
    path = tmp_path / "cex.csv"
    path.write_text(CEX, encoding="utf-8")
    return path


def _script(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ANALYSIS / "du_code_dynamic.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )


def test_table3_slot1_plans_what_the_clock_offset_gives(code: ModuleType) -> None:
    pop = wevent.read_requirements(TABLE3)
    slot1 = code.run(pop, [True])[0]
    assert slot1.status == "published"
    assert slot1.candidate == (F("0.5"), F("0.3"), F("0.4"))
    assert slot1.dissimilarity == (F("0.3"), F("0.3"), F("0.2"))
    # in doubles: the same up to the doubles of the decimals (u3's share 1.2 / 2 / 3)
    doubles = code.run(pop, [True], arithmetic="double")[0]
    assert [float(c) for c in doubles.candidate] == [0.5, 0.3, 1.2 / 2 / 3 * 2]
    # 001 Example 7 as printed (wevent's published kernel): one share each, 0.3, 0.3, 0.2
    kernel = make_kernel("dpba", ExactAlgebra(), classes_of(pop, "dpba"), "published")
    printed = run_trace(kernel, [True])[0]
    assert printed.publication == (F("0.3"), F("0.3"), F("0.2"))


def test_table3_slot1_mutant_without_the_offset_gives_the_printed_budgets(
    code: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control of the test above: an element whose first border is its slot (the
    printed t_FN = tau - 1, in the code's clock) plans Example 7's budgets, which the test
    rejects."""
    original = code.Element.__init__

    def shifted(
        self: object,
        code_slot: int,
        eps: object,
        w: int,
        usage: object,
        remain: object,
        border: Fraction,
    ) -> None:
        original(self, code_slot, eps, w, usage, remain, border + 1)

    monkeypatch.setattr(code.Element, "__init__", shifted)
    slot1 = code.run(wevent.read_requirements(TABLE3), [True])[0]
    assert slot1.candidate == (F("0.3"), F("0.3"), F("0.2"))


@pytest.mark.parametrize("arithmetic", ["exact", "double"])
def test_the_codes_spends_break_a_window_the_printed_rules_keep(
    code: ModuleType, cex: Path, arithmetic: str
) -> None:
    pop = wevent.read_requirements(cex)
    slots = code.run(pop, CEX_DECISIONS, arithmetic=arithmetic)
    assert [s.status for s in slots] == ["skipped", "skipped", "published"]
    # slot 1 plans two shares (1), recorded though skipped; slot 2's backward cap is then
    # 0.5 - 1 = -0.5, recorded too; slot 3's cap is 0.5 + 0.5.
    assert [s.candidate for s in slots] == [(F(1),), (F(-1, 2),), (F(1),)]
    assert slots[2].dissimilarity == (F(1, 2),) and slots[2].publication == (F(1),)
    verdict = wevent.check(code.ledger_of(pop, slots), pop)
    assert not verdict.ok
    (v,) = verdict.violations
    assert (v.kind, v.anchor, v.total, v.bound) == ("backward", 3, F(3, 2), F(1))
    assert code.feasible_when_declared(pop, slots, v)
    # Negative control: 001 Algorithm 7 as printed, and wevent's sound kernel, on the same
    # input and decisions: every window holds.
    for variant in ("published", "sound"):
        result = trace_with_guard("dpba", pop, CEX_DECISIONS, variant=variant)
        assert result.ok, (variant, result.refusal, result.negative)
        assert result.slots[2].publication == (F(1, 2),)


def test_the_codes_spends_keep_the_window_without_the_last_publication(
    code: ModuleType, cex: Path
) -> None:
    """Negative control of the check: the same run skipping slot 3 is compliant."""
    pop = wevent.read_requirements(cex)
    slots = code.run(pop, [False, False, False])
    assert wevent.check(code.ledger_of(pop, slots), pop).ok


def test_feasibility_filter_rejects_a_declaration_already_broken(code: ModuleType) -> None:
    """A declaration whose window already holds more than its bound is not the allocator's
    fault: slot 1 spends 2 under B:(1, 2), then B:(2, 1) is declared at slot 2."""
    pop = code.population_of([((1, 1, "2", 1, "2"), (2, 2, "1", 1, "1"))])
    assert code.violates(pop, [True, False], "dpba") == (
        "infeasible",
        "user 'u1' [dynamic, 2 declaration(s) from slot 1]: backward window at slot 2, spends "
        "in slots [1, 1]: sum 2 > bound 1, excess 1 (spends 1:2)",
    )


def test_cli_writes_a_ledger_wevent_check_refuses(cex: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "dpba-code-log.csv"
    done = _script("-r", str(cex), "--decisions", "0,0,1", "--ledger", str(ledger), "--check")
    assert done.returncode == 0, done.stderr
    assert "slot 1: skipped    u1 dis=0.5 cand=1 pub=0" in done.stdout
    assert "slot 3: published  u1 dis=0.5 cand=1 pub=1" in done.stdout
    assert "verdict: NOT COMPLIANT" in done.stdout
    checked = subprocess.run(
        [sys.executable, "-m", "wevent", "check", str(ledger), "-r", str(cex)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 1, checked.stderr
    assert "backward window at slot 3" in checked.stdout and "sum 1.5 > bound 1" in checked.stdout


def test_cli_search_finds_the_counterexample_and_none_with_fixed_requirements() -> None:
    done = _script("--search", "--budgets", "1,2", "--w-max", "2", "--slots-max", "3")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "fixed, negative: none in this scope" in out
    assert "fixed, window: none in this scope" in out
    assert "fixed, window, printed rules hold: none in this scope" in out
    held = out[out.index("re-declared, window, printed rules hold") :]
    assert "u1,1,1,2,2,2\n  u1,2,2,1,1,2\n  decisions: 0,0,1" in held
    assert "sum 1.5 > bound 1, excess 0.5 (spends 3:1.5); the printed rules hold" in held
    window = out[out.index("re-declared, window:") :]
    assert "u1,1,1,2,1,2\n  u1,2,2,1,1,2\n  decisions: 0,0,1" in window
    assert "the printed rules fail on this input" in window
    negative = out[out.index("re-declared, negative") :]
    assert "u1,1,1,2,1,2\n  u1,2,2,1,1,1\n  decisions: 0,1" in negative


def test_cli_ledger_is_the_log_docs_peers_md_quotes(cex: Path, tmp_path: Path) -> None:
    """docs/peers.md builds this log through the API (its tests have no analysis/): the script
    writes exactly these rows."""
    ledger = tmp_path / "log.csv"
    done = _script("-r", str(cex), "--decisions", "0,0,1", "--ledger", str(ledger))
    assert done.returncode == 0, done.stderr
    rows = [(c.slot, c.amount, c.part) for c in wevent.read_ledger(ledger)]
    assert rows == [
        (1, F("0.5"), "dissimilarity"),
        (2, F(0), "dissimilarity"),
        (3, F("0.5"), "dissimilarity"),
        (3, F(1), "publication"),
    ]


def test_dpbd_code_breaks_the_printed_rules_own_counterexample_alike(code: ModuleType) -> None:
    """DPBD_BACKWARD of tests/test_allocator_soundness.py: the code spends what 001 Algorithm 6
    spends and breaks the same backward window (0.325 > 0.3)."""
    pop = code.population_of([((1, 3, "0.9", 3, "0.7"), (2, 2, "0.3", 2, "0.6"))])
    slots = code.run(pop, [True, False], mechanism="dpbd")
    verdict = wevent.check(code.ledger_of(pop, slots, "dpbd"), pop)
    (v,) = verdict.violations
    assert (v.kind, v.anchor, v.total, v.bound) == ("backward", 2, F("0.325"), F("0.3"))
    printed = trace_with_guard("dpbd", pop, [True, False], variant="published")
    assert printed.refusal is not None and printed.refusal.slot == 2
    assert [s.dissimilarity + s.publication for s in printed.slots] == [
        (s.dissimilarity[0], s.publication[0]) for s in slots
    ]
    assert trace_with_guard("dpbd", pop, [True, False]).ok  # the sound kernel
