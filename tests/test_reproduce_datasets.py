"""Real data set loaders (wevent.mechanisms.datasets) and `wevent prepare`, on fixture files written in
the public formats of T-Drive and Foursquare."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from wevent.accounting.budget import BudgetError
from wevent.accounting.formats import FormatError
from wevent.cli import cli
from wevent.mechanisms.datasets import (
    TDRIVE_AREA,
    foursquare_observations,
    grid_cell,
    tdrive_observations,
    write_observations,
)
from wevent.mechanisms.streams import CsvStream


def _taxi(tmp_path: Path) -> list[Path]:
    one = tmp_path / "1.txt"
    one.write_text(
        "1,2008-02-02 15:36:08,116.51172,39.92123\n"
        "1,2008-02-02 15:36:08,116.51172,39.92123\n"  # duplicate: removed
        "1,2008-02-02 15:36:50,116.05,39.55\n"  # same minute, later: wins (cell 0)
        "1,2008-02-02 15:38:10,116.79,40.29\n"  # slot 3, cell 99
        "1,2008-02-02 15:39:00,117.5,39.9\n"  # outside the area: dropped
    )
    two = tmp_path / "2.txt"
    two.write_text("2,2008-02-02 15:37:30,116.45,39.95\n")  # slot 2: column 5, row 5 -> 55
    return [one, two]


def test_grid_cells_by_hand() -> None:
    lon = np.array([116.0, 116.8, 116.45, 116.79, 115.0])
    lat = np.array([39.5, 40.3, 39.95, 39.51, 39.6])
    np.testing.assert_array_equal(grid_cell(lon, lat, TDRIVE_AREA, 10), [0, 99, 55, 9, -1])


def test_tdrive_grids_and_slots(tmp_path: Path) -> None:
    obs = tdrive_observations(_taxi(tmp_path))
    assert obs.users == ("1", "2") and len(obs.values) == 100
    got = list(zip(obs.user.tolist(), obs.slot.tolist(), obs.value.tolist(), strict=True))
    assert got == [(0, 1, 0), (1, 2, 55), (0, 3, 99)]


def test_tdrive_fill_gives_every_user_every_slot(tmp_path: Path) -> None:
    obs = tdrive_observations(_taxi(tmp_path), fill=True)
    got = sorted(zip(obs.user.tolist(), obs.slot.tolist(), obs.value.tolist(), strict=True))
    assert got == [(0, 1, 0), (0, 2, 0), (0, 3, 99), (1, 1, 55), (1, 2, 55), (1, 3, 55)]


def test_tdrive_bad_line_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "3.txt"
    bad.write_text("3,2008-02-02 15:36:08,116.5,39.9\n3,yesterday,116.5,39.9\n")
    with pytest.raises(FormatError, match=r"3\.txt:2"):
        tdrive_observations([bad])
    with pytest.raises(BudgetError, match="grid"):
        tdrive_observations([bad], grid=0)


def _foursquare(tmp_path: Path) -> tuple[Path, Path]:
    pois = tmp_path / "pois.txt"
    pois.write_text(
        "v1\t40.7\t-74.0\tBar\tUS\nv2\t35.6\t139.7\tCafe\tJP\nv3\t48.8\t2.3\tMuseum\tFR\n"
    )
    checkins = tmp_path / "checkins.txt"
    checkins.write_text(
        "50\tv1\tTue Apr 03 18:00:09 +0000 2012\t-240\n"
        "50\tv2\tTue Apr 03 18:30:00 +0000 2012\t540\n"  # same 100-minute slot, later: JP
        "51\tv3\tTue Apr 03 21:00:09 +0000 2012\t120\n"  # 3 hours later: slot 2
        "52\tv9\tTue Apr 03 18:00:09 +0000 2012\t0\n"  # venue without a country: dropped
    )
    return checkins, pois


def test_foursquare_maps_venues_to_countries(tmp_path: Path) -> None:
    obs = foursquare_observations(*_foursquare(tmp_path))
    assert obs.values == ("FR", "JP", "US") and obs.users == ("50", "51")
    got = list(zip(obs.user.tolist(), obs.slot.tolist(), obs.value.tolist(), strict=True))
    assert got == [(0, 1, 1), (1, 2, 0)]


def test_foursquare_user_fraction_is_seeded(tmp_path: Path) -> None:
    a = foursquare_observations(*_foursquare(tmp_path), fraction=0.5, seed=1)
    b = foursquare_observations(*_foursquare(tmp_path), fraction=0.5, seed=1)
    assert len(a.users) == 1 and a.users == b.users
    with pytest.raises(BudgetError, match="fraction"):
        foursquare_observations(*_foursquare(tmp_path), fraction=0)


def test_prepared_file_is_a_stream_wevent_run_reads(tmp_path: Path) -> None:
    obs = tdrive_observations(_taxi(tmp_path), fill=True)
    path = write_observations(obs, tmp_path / "taxi.csv")
    with path.open() as fh:
        assert next(csv.reader(fh)) == ["user", "slot", "value"]
    stream = CsvStream.load(path, {"1": 0, "2": 0}, 1, domain=100)
    assert stream.slots == 3 and stream.domain == 100
    assert stream.histograms(3, np.random.default_rng(0))[0, 99] == 1


def test_prepare_commands(tmp_path: Path) -> None:
    files = _taxi(tmp_path)
    out = tmp_path / "taxi.csv"
    result = CliRunner().invoke(cli, ["prepare", "tdrive", str(tmp_path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 users, 3 slots, d = 100" in result.output and out.exists()
    result = CliRunner().invoke(cli, ["prepare", "tdrive", *map(str, files), "--out", str(out)])
    assert result.exit_code == 0
    checkins, pois = _foursquare(tmp_path)
    out2 = tmp_path / "fsq.csv"
    result = CliRunner().invoke(
        cli, ["prepare", "foursquare", str(checkins), str(pois), "--out", str(out2), "--fill"]
    )
    assert result.exit_code == 0, result.output
    assert "d = 3 values" in result.output
    result = CliRunner().invoke(
        cli, ["prepare", "tdrive", str(tmp_path / "missing.txt"), "--out", str(out)]
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "missing.txt" in result.stderr
