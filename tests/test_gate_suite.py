"""The mutation suite (`tests/gate_suite.py`): its size, that its scope-only bugs are invisible
at the old small scope (the negative control: the wide search is what kills them), and that the
default gate kills every broken allocator and accepts every sound one."""

from __future__ import annotations

import pytest

from tests.gate_suite import BROKEN, SCOPE_ONLY, SOUND_TARGETS
from wevent.gate import GateOptions, run_gate


def test_the_suite_is_as_large_as_promised() -> None:
    assert len(BROKEN) >= 40 and len(SCOPE_ONLY) >= 15 and len(SOUND_TARGETS) >= 10


@pytest.mark.parametrize("target", SCOPE_ONLY)
def test_a_scope_only_bug_hides_from_the_small_scope(target: str) -> None:
    """Conformance and the proof at w <= 3, 2 classes, 9 slots, no wide search: not refuted.

    Z3 may spend 3 s on a proof case here (the default is 60): the kernels are third-party, so
    their budgets are symbolic, and absorb_past_window_from_six's cases time out at the default
    too (its proof stage waited 8 min for "unknown", 2026-11-27); a case that gives up
    leaves the verdict "passed", which is what this test asks of every scope-only bug."""
    small = GateOptions(
        w_max=3, stages=("conformance", "proof", "search"), search_runs=0, examples=60, timeout=3
    )
    assert run_gate(target, small).verdict in ("proved", "passed")


@pytest.mark.parametrize("target", SCOPE_ONLY)
def test_the_default_wide_search_kills_a_scope_only_bug(target: str) -> None:
    """The default wide search (w <= 64, 6 classes, 256 slots, its default runs) alone, beside
    the proof's small scope above (w <= 3: its own first pass and inputs stay there), refutes
    each with a replayable counterexample that the wide search found: the test above, with the
    wide search turned off, is its negative control. The default scope (w <= 6) is the `slow`
    test below (113 s of the suite's CPU on 2026-11-27's loaded run; this one about 50 s)."""
    report = run_gate(target, GateOptions(w_max=3, stages=("search",)))
    assert report.verdict == "refuted", report.describe()
    failed = [s for s in report.stages if s.name.startswith("search/") and s.status == "failed"]
    assert failed and "found by the wide search" in failed[0].detail, report.describe()
    cex = report.counterexample
    assert cex is not None and cex.replays()


@pytest.mark.slow
@pytest.mark.parametrize("target", SCOPE_ONLY)
def test_the_default_wide_search_kills_a_scope_only_bug_at_the_default_scope(target: str) -> None:
    """As above at the default scope (w <= 6; the whole default gate is the test below)."""
    report = run_gate(target, GateOptions(stages=("search",)))
    assert report.verdict == "refuted", report.describe()
    assert any(s.status == "failed" for s in report.stages if s.name.startswith("search/"))
    cex = report.counterexample
    assert cex is not None and cex.replays()


@pytest.mark.slow
@pytest.mark.parametrize("target", SCOPE_ONLY)
def test_the_default_gate_kills_a_scope_only_bug(target: str) -> None:
    report = run_gate(target, GateOptions())
    assert report.verdict == "refuted", report.describe()
    cex = report.counterexample
    assert cex is not None and cex.replays()


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(set(BROKEN) - set(SCOPE_ONLY)))
def test_the_default_gate_kills_every_other_broken_one(target: str) -> None:
    report = run_gate(target, GateOptions())
    assert report.verdict == "refuted", report.describe()
    cex = report.counterexample
    if cex is not None:  # (a conformance refutation, e.g. a forgetful state, has none)
        assert cex.replays()


@pytest.mark.slow
@pytest.mark.parametrize("target", SOUND_TARGETS)
def test_the_default_gate_accepts_every_sound_one(target: str) -> None:
    report = run_gate(target, GateOptions())
    assert report.exit_code == 0, report.describe()
