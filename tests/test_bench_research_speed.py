"""The ``--more`` table of benchmarks/bench_research_speed.py on a tiny input (no run timed),
its mechanisms against `run_batch`, and the recorded peer figures it reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks import bench_research_speed as bench
from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.mechanisms.batch import BatchUnsupported, batch_histograms, run_batch
from wevent.mechanisms.streams import SyntheticStream


def _peer(median: float) -> dict[str, Any]:
    return {"median_ms": median, "p10_ms": median / 2, "p90_ms": median * 2}


PEER = {"FAST_w": _peer(0.5), "BD": _peer(0.02)}
EXACT = {
    "fast-w": {"first_ms": 6.0, "median_ms": 5.0, "cpu_ms": 4.0},
    "bd-shift": {"first_ms": 90.0, "median_ms": 80.0, "cpu_ms": 70.0},
    "dsat": {"first_ms": 3.0, "median_ms": 2.0, "cpu_ms": 1.0},
}


FIRST = {"FAST_w": {"first_ms": 3.0}}


def test_rows_pair_each_mechanism_with_its_peer_class() -> None:
    rows = {r.mechanism: r for r in bench.more_rows(EXACT, {"bd-shift": 150.0}, PEER, FIRST)}
    assert list(rows) == ["fast-w", "bd-shift", "dsat"]  # the order of the exact runs
    assert rows["fast-w"].peer == "FAST_w" and rows["fast-w"].ratio == pytest.approx(10.0)
    assert rows["fast-w"].batch_ratio is None  # no batch
    assert rows["fast-w"].first_ratio == pytest.approx(2.0)  # 6 ms over the peer's 3 ms
    assert rows["bd-shift"].first_ratio is None  # no first run recorded
    assert rows["bd-shift"].peer == "BD" and rows["bd-shift"].ratio == pytest.approx(4000.0)
    assert rows["bd-shift"].batch_ratio == pytest.approx(7.5)  # 150 us over 20 us
    dsat = rows["dsat"]  # its class not recorded
    assert dsat.peer == "DSAT" and dsat.peer_run is None and dsat.ratio is None


def test_more_table() -> None:
    rows = bench.more_rows(EXACT, {"bd-shift": 150.0}, PEER, FIRST, {"bd-shift": 60.0})
    lines = bench.more_table(rows, 1000).splitlines()
    assert lines[0].endswith(
        "| within 10x | peer first ms (fresh JVM) | first / peer first | batch of 1000: per run us "
        "(wall) | per run us (CPU) | per run / peer median | within 10x |"
    )
    assert lines[1].count("|") == lines[0].count("|") == 15
    # exactly 10x is within
    assert lines[2] == (
        "| fast-w | 6.0 | 5.0 | 4.0 | FAST_w | 0.5000 (0.2500 - 1.0000) | 10x | yes | 3.000 "
        "| 2.0x | no batch | - | - | - |"
    )
    assert lines[3] == (
        "| bd-shift | 90.0 | 80.0 | 70.0 | BD | 0.0200 (0.0100 - 0.0400) | 4,000x | no "
        "| not recorded | - | 150 | 60 | 7.5x | yes |"
    )
    assert lines[4] == (
        "| dsat | 3.0 | 2.0 | 1.0 | DSAT | not recorded | - | - | not recorded | - | no batch "
        "| - | - | - |"
    )
    assert len(lines) == 5
    plain = bench.more_table(rows, 0).splitlines()  # no batch columns
    assert plain[0].count("|") == plain[2].count("|") == 11
    assert plain[2].endswith("| 10x | yes | 3.000 | 2.0x |")


def test_negative_controls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutants the checks above reject: a strict bound at 10x, and a row compared with another
    mechanism's peer class."""
    monkeypatch.setattr(bench, "WITHIN", 9.999)
    assert bench.within(bench.more_rows(EXACT, {}, PEER)[0].ratio) == "no"
    monkeypatch.undo()
    swapped = {**bench.MORE_PEER_OF, "fast-w": "BD"}
    monkeypatch.setattr(bench, "MORE_PEER_OF", swapped)
    assert bench.more_rows(EXACT, {}, PEER)[0].ratio != pytest.approx(10.0)


def test_batches_are_those_run_batch_accepts() -> None:
    """`MORE_BATCH` is exactly the mechanisms of ``--more`` that a batch runs (a batch of two
    runs of two slots each; the rest are refused before any slot)."""
    pop = Population.from_classes({Fixed(3, Budget(1)): 20})
    hists = batch_histograms(SyntheticStream("sin", 2, [20], 1, 4), 2, 1)
    accepted = []
    for mech in bench.MORE:
        try:
            run_batch(mech, pop, hists, slots=2, runs=2)
        except BatchUnsupported:
            continue
        accepted.append(mech)
    assert tuple(accepted) == bench.MORE_BATCH


def test_recorded_peer_figures_cover_every_class() -> None:
    record = json.loads(bench.PEER_MORE_FILE.read_text(encoding="utf-8"))
    runs = {r["mechanism"]: r for r in record["runs"]}
    assert set(bench.MORE_PEER_OF.values()) <= set(runs)
    assert (record["w"], record["epsilon"]) == (bench.W, bench.EPS)
    assert (record["slots"], record["domain"], record["users"]) == (
        bench.SLOTS,
        bench.DOMAIN,
        bench.USERS,
    )
    for r in runs.values():
        assert 0 < r["p10_ms"] <= r["median_ms"] <= r["p90_ms"]
        assert r["timed_runs"] > 0 and r["warmup_runs"] > 0
