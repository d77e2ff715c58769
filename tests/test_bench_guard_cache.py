"""benchmarks/bench_guard_cache.py runs (a smoke test at a tiny size; its figures are
docs/performance.md's, measured, never asserted here)."""

from __future__ import annotations

import pytest

from benchmarks.bench_guard_cache import run


def test_the_cache_benchmark_runs_and_counts_the_calls() -> None:
    define_us, spend_us, calls = run(users=20_000, drawn=200, slots=5, evict_mb=1)
    assert define_us > 0 and spend_us > 0
    assert calls > 10  # the two guard calls and what they call


def test_a_draw_that_would_repeat_a_user_within_a_window_is_refused() -> None:
    with pytest.raises(SystemExit, match="repeats a user within 80 slots"):
        run(users=20_000, drawn=500, slots=5, evict_mb=0)
