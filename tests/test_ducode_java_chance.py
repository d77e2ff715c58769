"""analysis/ducode_java/chance.py: 10-run means of the authors' BD against 001's printed BD and
PLBU, on small synthetic raw files whose answers are known."""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.analysis_import import analysis_module

# 001 Table 6, Log, w = 200: BD 8,658,570.30, PLBU 6,327,726.59.
# Runs 1-10 at 10 million (mean >= both), 11-30 at 1 million, 31-35 a short group (dropped).
LOG_W200 = (
    "# a comment line\n"
    "log order=fs E=0.6 w=200 BD " + " ".join(["10000000"] * 10) + " | BA 1 2\n"
    "\n"
    "log order=fs E=0.6 w=200 BD " + " ".join(["1000000"] * 20) + "\n"
    "log order=fs E=0.6 w=200 BD " + " ".join(["50000000"] * 5) + "\n"
)

SIN_E1 = "sin order=fs E=1.0 w=120 BD " + " ".join(["1000000"] * 10) + "\n"


@pytest.fixture(scope="module")
def chance() -> Iterator[ModuleType]:
    with analysis_module("ducode_java.chance") as module:
        yield module


def test_disjoint_groups_and_the_share_at_or_above_the_printed_value(
    chance: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "runs.txt"
    path.write_text(LOG_W200)
    (cell,) = chance.read_runs([path])
    assert (cell.stream, cell.order, cell.e, cell.w, len(cell.bd)) == ("log", "fs", 0.6, 200, 35)
    groups = chance.group_means(cell.bd)
    assert groups == [10e6, 1e6, 1e6]
    printed_bd = chance.printed("log", "bd", 0.6, 200)
    assert printed_bd == 8658570.30
    assert chance.share_at_least(groups, printed_bd) == (1, 3)
    assert chance.share_at_least([1.0, 2.0, 3.0], 2.0) == (2, 3)  # at the value counts
    assert chance.share_above([1.0, 2.0, 3.0], 2.0) == (1, 3)
    assert chance.percentile_of(groups, printed_bd) == pytest.approx(200 / 3)
    plbu = chance.printed("log", "plbu", 0.6, 200)
    assert plbu == 6327726.59
    assert chance.share_above(groups, plbu) == (1, 3)
    assert chance.where("log", 0.6, 200) == "Table 6, Log, w = 200"
    assert chance.where("tlns", 0.4, 120) == "Table 5, TLNS, E = 0.4"
    assert chance.where("sin", 0.6, 120) == "Tables 5-6, Sin, E = 0.6, w = 120"
    assert chance.printed("tlns", "bd", 0.4, 120) == 26932213.28


def test_clopper_pearson_closed_forms(chance: ModuleType) -> None:
    # x = 0: upper = 1 - (alpha/2)^(1/n); x = n: lower = (alpha/2)^(1/n); x = 1 of 2: lower =
    # 1 - (1 - alpha/2)^(1/2), upper = (1 - alpha/2)^(1/2)
    assert chance.clopper_pearson(0, 10) == pytest.approx((0.0, 1 - 0.025**0.1), abs=1e-12)
    assert chance.clopper_pearson(10, 10) == pytest.approx((0.025**0.1, 1.0), abs=1e-12)
    assert chance.clopper_pearson(1, 2) == pytest.approx(
        (1 - math.sqrt(0.975), math.sqrt(0.975)), abs=1e-12
    )
    lo, hi = chance.clopper_pearson(1, 3)  # tables: 0.0084, 0.9057
    assert (round(lo, 4), round(hi, 4)) == (0.0084, 0.9057)
    with pytest.raises(ValueError, match="0 <= x <= n"):
        chance.clopper_pearson(4, 3)


def test_bootstrap_share_matches_the_binomial_answer(chance: ModuleType) -> None:
    # half the runs 0, half 20 million: a mean of 10 draws is >= 8.66 million iff at least 5
    # of them are 20 million, P = P(Binomial(10, 1/2) >= 5) = 638/1024
    runs = [0.0, 20e6] * 50
    boot = chance.bootstrap_means(runs, 20_000, seed=3)
    assert boot == chance.bootstrap_means(runs, 20_000, seed=3)  # seeded: the same every time
    x, n = chance.share_at_least(boot, chance.printed("log", "bd", 0.6, 200))
    assert n == 20_000
    assert x / n == pytest.approx(638 / 1024, abs=0.015)  # sd of the estimate 0.0034


def test_the_command_prints_the_cell_and_reads_gzip(
    chance: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.txt.gz"
    path.write_bytes(gzip.compress(LOG_W200.encode()))
    assert chance.main([str(path), "--bootstrap", "100"]) == 0
    out = capsys.readouterr().out
    assert "| Table 6, Log, w = 200 | 35 | " in out
    assert (
        "| 1-50 | 50, 50, 50 | 8.66 | 3 | 1/1/1/1/10/10/10 | 1/3 = 33.33% [0.8%, 90.6%] | 66.7 | "
        in out
    )
    assert "order = fs: inside in 1 of 1 cells; outside: none" in out
    # 001 Table 5, Sin, E = 1: BD 2,875,381.82, above every mean of runs of 1 million
    path.write_bytes(gzip.compress((LOG_W200 + SIN_E1).encode()))
    assert chance.main([str(path), "--bootstrap", "100"]) == 0
    out = capsys.readouterr().out
    assert "order = fs: inside in 1 of 2 cells; outside: Table 5, Sin, E = 1 (100.0)" in out
    assert "| Table 6, Log, w = 200 | fs | 6.33 | 1/3 = 33.33% [0.8%, 90.6%] | " in out


def test_a_bad_line_is_one_error_naming_file_and_line(
    chance: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.txt"
    path.write_text(LOG_W200 + "log order=fs E=0.6 w=200 BD 1 x 3\n")
    assert chance.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:6: not a run line" in err
    assert err.count("\n") == 1
    path.write_text("log order=fs E=0.3 w=120 BD 1\n")
    assert chance.main([str(path)]) == 2
    assert "neither 001 Table 5 nor Table 6" in capsys.readouterr().err
    assert chance.main([str(tmp_path / "absent.txt")]) == 2
    assert "absent.txt: cannot read" in capsys.readouterr().err
