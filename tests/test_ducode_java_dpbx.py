"""analysis/ducode_java/summarize.py's part for the authors' DPBD and DPBA (`dpbx.txt`, the
dpbx mode of RunDuCode): the segment lines are read, grouped into cells with slot weights and set
beside 001's printed rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.analysis_import import analysis_module

LINES = """# 19:10:41 load 6.93 6.78 5.50 stream=tlns order=fs cells=0.6:120
tlns order=fs E=0.6 w=120 run=0 segment=5 slots=250 DPBD 4000000.00 DPBA 1000.00 seconds 200
tlns order=fs E=0.6 w=120 run=0 segment=15 slots=50 DPBD 10000000.00 DPBA 4000.00 seconds 100
tlns order=sorted E=0.6 w=40 run=1 segment=5 slots=250 DPBD 35790.34 DPBA 22.551 seconds 10
"""


@pytest.fixture(scope="module")
def summarize() -> Iterator[ModuleType]:
    with analysis_module("ducode_java.summarize") as module:
        yield module


def test_cells_are_slot_weighted_means_of_the_segments(
    summarize: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "dpbx.txt"
    path.write_text(LINES)
    segments = summarize.read_dpbx(path)
    assert [s.segment for s in segments] == [5, 15, 5]
    fs, so = summarize.dpbx_cells(segments)
    assert (fs.stream, fs.order, fs.e, fs.w, fs.segments, fs.runs) == (
        "tlns",
        "fs",
        0.6,
        120,
        (5, 15),
        1,
    )
    assert fs.dpbd == pytest.approx((4e6 * 250 + 1e7 * 50) / 300)
    assert fs.dpba == pytest.approx((1000 * 250 + 4000 * 50) / 300)
    assert fs.seconds == 150
    # 001 Table 5, TLNS, E = 0.6: DPBD 4,254,805.65, DPBA 1,309.7
    assert fs.ratio("dpbd") == pytest.approx(5e6 / 4254805.65)
    assert fs.ratio("dpba") == pytest.approx(1500 / 1309.7)
    # 001 Table 6, TLNS, w = 40: DPBD 3,579,033.68, DPBA 225.51
    assert so.ratio("dpbd") == pytest.approx(0.01)
    assert so.ratio("dpba") == pytest.approx(0.1)


def test_band_and_printed_values(summarize: ModuleType) -> None:
    assert [summarize.in_band(r) for r in (0.69, 0.7, 1.4, 1.41)] == ["no", "yes", "yes", "no"]
    assert summarize.printed_value("log", "dpba", 0.2, 120) == 1788.03
    assert summarize.printed_value("sin", "dpbd", 0.6, 200) == summarize.pa.TABLE6["sin"]["dpbd"][4]
    with pytest.raises(ValueError, match="neither 001 Table 5 nor Table 6"):
        summarize.printed_value("tlns", "dpbd", 0.2, 40)


def test_a_malformed_line_names_its_file_and_line(summarize: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "dpbx.txt"
    path.write_text(LINES + "tlns order=fs E=0.6 w=120 DPBD 1 | DPBA 2\n")
    with pytest.raises(ValueError, match=r"dpbx.txt:5: not a dpbx segment line"):
        summarize.read_dpbx(path)


def test_the_table_prints_each_cell_beside_001(
    summarize: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dpbx.txt").write_text(LINES)
    summarize.dpbx_table(tmp_path)
    out = capsys.readouterr().out
    assert "| tlns | E = 0.6 | as listed | 5,15; 1 | 5,000,000 | 4,254,806 | 1.18 | yes " in out
    assert "| 1,500 | 1,310 | 1.15 | yes | 150 (100 min) |" in out
    assert "| tlns | w = 40 | sorted | 5; 1 | 35,790 | 3,579,034 | 0.01 | no | 23 " in out
    assert "as listed (1 cells): DPBD / printed 1.18-1.18, in band in 1;" in out
    summarize.dpbx_table(tmp_path / "absent")
    assert "dpbx.txt absent: not run" in capsys.readouterr().out
