"""benchmarks/bench_guard_replay.py runs (a smoke test at a tiny size; its figures are
docs/performance.md's, measured, never asserted here)."""

from __future__ import annotations

import sys

import pytest

from benchmarks import bench_guard_replay
from wevent.verifier.guard import Guard


@pytest.mark.parametrize("mechanism", ["pba", "lpa"])
def test_a_run_is_recorded_and_replayed_to_the_same_ledger(mechanism: str) -> None:
    before = (Guard.__init__, Guard.spend, Guard.spend_many, Guard.define_group_by_index)
    made, calls = bench_guard_replay.record(mechanism, 3_200, 12)
    after = (Guard.__init__, Guard.spend, Guard.spend_many, Guard.define_group_by_index)
    assert after == before  # every method put back
    assert any(name.startswith("spend") for name, _, _ in calls)
    per = bench_guard_replay.replay(made, calls, 12, evict_mb=1)
    assert per and all(us >= 0 for us in per.values())
    # the replay makes the run's calls again: a fresh guard fed them ends where the run did
    args, kwargs = made
    guard = Guard(*args, **kwargs)
    for name, call_args, call_kwargs in calls:
        getattr(guard, name)(*call_args, **call_kwargs)
    assert guard.slot == 12 and len(guard.ledger) > 0


def test_the_command_prints_each_replay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench_guard_replay", "pba", "--users", "3200", "--slots", "6", "--repeats", "2"]
    monkeypatch.setattr(sys, "argv", argv)
    bench_guard_replay.main()
    out = capsys.readouterr().out
    assert out.count("replay ") == 2 and "guard" in out.splitlines()[-1]
