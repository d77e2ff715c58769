"""benchmarks/bench_reductions.py runs (a smoke test at a tiny size; its figures are
docs/performance.md's, measured, never asserted here)."""

from __future__ import annotations

import sys

import pytest

from benchmarks import bench_reductions


def test_the_reductions_benchmark_prints_every_question(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_reductions", "--size", "50", "--number", "5"])
    bench_reductions.main()
    out = capsys.readouterr().out
    assert out.count("\n| ") == 6  # the header and the five questions
    assert "max, uint8 stamps" in out
