"""The table code of benchmarks/bench_utility_parity.py on a tiny input (no peer, no run)."""

from __future__ import annotations

import argparse
import math

import pytest

from benchmarks import bench_utility_parity as bench

WEVENT = {
    ("lpd", "w3"): [2.0, 2.0, 2.0],
    ("lbd", "w3"): [1.1, 1.1, 1.1],
    ("lbu", "w3"): [5.0, 6.0, 7.0],
}
PEERS = {
    ("lpd", "w3"): {"LDP-IDS": [1.0, 1.0, 1.0], "WEventPLDPCode": [1.9, 2.0, 2.1]},
    ("lbd", "w3"): {"LDP-IDS": [1.0, 1.0, 1.0]},
}


def test_rows_take_the_best_peer_and_the_ten_percent_rule() -> None:
    rows = {r.allocator: r for r in bench.build_rows(WEVENT, PEERS)}
    assert list(rows) == ["lpd", "lbd", "lbu"]  # wevent's order
    lpd = rows["lpd"]
    best = lpd.best_peer
    assert best is not None and best[0] == "LDP-IDS"  # the lowest mean, not the highest
    assert lpd.ratio == pytest.approx(2.0)
    assert lpd.within is False
    assert rows["lbd"].ratio == pytest.approx(1.1)
    assert rows["lbd"].within is True  # exactly 10% above is within
    assert rows["lbu"].best_peer is None
    assert math.isnan(rows["lbu"].ratio) and rows["lbu"].within is None
    iv = rows["lbu"].wevent
    assert iv.mean == pytest.approx(6.0) and iv.low < 6.0 < iv.high


def test_markdown_table() -> None:
    table = bench.markdown(bench.build_rows(WEVENT, PEERS)).splitlines()
    assert table[0] == (
        "| allocator | setting | wevent AMSE | LDP-IDS | WEventPLDPCode | wevent / best peer "
        "| within 10% |"
    )
    assert table[2] == "| lpd | w3 | 2 [2, 2] | 1 [1, 1] | 2 [1.75, 2.25] | 2.00 | no |"
    assert table[3] == "| lbd | w3 | 1.1 [1.1, 1.1] | 1 [1, 1] | - | 1.10 | yes |"
    assert table[4].endswith("| - | - | - | - |")
    assert len(table) == 5


def test_negative_controls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutants of the rules above that the checks reject: the best peer taken as the highest
    mean, and a strict 10% bound."""
    lpd = bench.build_rows(WEVENT, PEERS)[0]
    worst = max(lpd.peers.items(), key=lambda kv: kv[1].mean)
    assert worst[1].mean / lpd.peers["LDP-IDS"].mean != pytest.approx(1.0)
    assert lpd.wevent.mean / worst[1].mean != pytest.approx(lpd.ratio)
    monkeypatch.setattr(bench, "WITHIN", 1.0999)
    assert bench.build_rows(WEVENT, PEERS)[1].within is False


def test_wevent_options() -> None:
    assert bench.parse_option("pool=true") == ("pool", True)
    assert bench.parse_option("k=3") == ("k", 3)
    assert bench.parse_option("x=0.5") == ("x", 0.5)
    assert bench.parse_option("mode=simplex") == ("mode", "simplex")
    for bad in ("novalue", "1x=2", "=3"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench.parse_option(bad)
