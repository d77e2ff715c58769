"""`wevent reproduce --check DIR`: the recorded command re-run and compared with the committed
files (wevent/experiments/recheck.py). Each test tampers with one thing a stale or edited
results directory could hold and asserts the check names it."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from wevent.accounting.durable import file_sha256
from wevent.cli import cli
from wevent.experiments import provenance, recheck

# the cheapest sweep that writes every kind of file a run writes (results, runs, table)
EXPERIMENT = "cfpu"
ARGS = ["--users", "500", "--slots", "30", "--repeats", "2", "--seed", "3"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recheck") / EXPERIMENT
    with pytest.MonkeyPatch.context() as mp:  # as if from a clean commit
        mp.setattr(provenance, "source_commit", lambda: ("0" * 40, False))
        result = CliRunner().invoke(cli, ["reproduce", EXPERIMENT, *ARGS, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def results(written: Path, tmp_path: Path) -> Path:
    """A private copy of the run's directory, its recorded --out pointing at the copy."""
    copy = tmp_path / EXPERIMENT
    shutil.copytree(written, copy)
    return copy


def rehash(directory: Path, name: str) -> None:
    """Record ``name``'s new hash, so the tampering hides from `check_directory`: only the
    re-run can find it."""
    path = directory / provenance.PROVENANCE
    record = json.loads(path.read_text(encoding="utf-8"))
    record["files"][name] = file_sha256(directory / name)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def check(directory: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["reproduce", "--check", str(directory)])
    return result.exit_code, result.output


def test_an_untouched_directory_is_the_same_file_for_file(results: Path) -> None:
    code, out = check(results)
    assert code == 0, out
    assert f"{results}: SAME" in out
    for name in ("results.csv", "runs.csv", "table.md", "fingerprint.csv"):
        assert f"  {name}: byte-identical" in out


def edit_cell(path: Path, column: str, change: Callable[[float], float]) -> None:
    """Change one number of the first data row of a CSV file."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    at = rows[0].index(column)
    rows[1][at] = repr(change(float(rows[1][at])))
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def test_each_kind_of_tampering_is_found_by_the_rerun(results: Path) -> None:
    # a number moved by 0.1% and rehashed: only the re-run can see it
    edit_cell(results / "results.csv", "value", lambda v: v * 1.001)
    rehash(results, "results.csv")
    # last-digit noise: within the tolerance, and said to be
    edit_cell(results / "runs.csv", "cfpu", lambda v: v * (1 + 1e-12))
    rehash(results, "runs.csv")
    table = results / "table.md"
    table.write_text(table.read_text(encoding="utf-8").replace("500 users", "501 users"), "utf-8")
    rehash(results, "table.md")
    (results / "notes.txt").write_text("mine\n", encoding="utf-8")
    rehash(results, "notes.txt")
    assert provenance.check_directory(results) == []  # the hashes alone see none of it
    code, out = check(results)
    assert code == 1
    assert f"{results}: DIFFERENT" in out
    assert "results.csv: differs" in out
    assert "runs.csv: equal to a relative 1e-09" in out
    assert "table.md: differs" in out and "501 users" in out
    assert "notes.txt: differs" in out and "committed, not written by the re-run" in out
    assert "fingerprint.csv: byte-identical" in out


def test_an_edited_file_not_rehashed_is_reported_as_changed(results: Path) -> None:
    edit_cell(results / provenance.FINGERPRINT, "value", lambda v: v * 2)
    code, out = check(results)
    assert code == 1
    assert "fingerprint.csv: changed since the recorded run" in out
    assert "fingerprint.csv: differs" in out
    assert "results.csv: byte-identical" in out


def test_a_command_that_does_not_match_its_settings_is_an_input_error(results: Path) -> None:
    path = results / provenance.PROVENANCE
    record = json.loads(path.read_text(encoding="utf-8"))
    record["command"] = record["command"].replace("--repeats 2", "--repeats 3")
    path.write_text(json.dumps(record), encoding="utf-8")
    code, out = check(results)
    assert code == 2
    assert "does not match the recorded settings" in out
    assert "Traceback" not in out
    assert len(out.strip().splitlines()) == 2  # the progress line and the error


@pytest.mark.parametrize(
    "extra",
    [["cfpu"], ["--quick"], ["--users", "5"], ["--out", "x"], ["--no-fingerprint"]],
)
def test_check_takes_no_experiment_or_run_option(results: Path, extra: list[str]) -> None:
    result = CliRunner().invoke(cli, ["reproduce", "--check", str(results), *extra])
    assert result.exit_code == 2
    assert "cannot go with it" in result.output


def test_check_of_a_missing_directory_or_provenance_is_an_input_error(tmp_path: Path) -> None:
    code, out = check(tmp_path / "nowhere")
    assert code == 2
    code, out = check(tmp_path)
    assert code == 2
    assert "provenance.json" in out


def test_no_experiment_and_no_check_is_an_input_error() -> None:
    result = CliRunner().invoke(cli, ["reproduce"])
    assert result.exit_code == 2
    assert "missing EXPERIMENT" in result.output


def test_wide_csv_keys_compare_as_text_and_numbers_to_the_tolerance() -> None:
    head = "experiment,seed,cfpu,time-us\n"
    same = recheck.compare_wide(head + "x,1,0.5,3.0\n", head + "x,1,0.5000000000001,3.0\n")
    assert same == []
    # a key column never gets the numeric tolerance
    assert recheck.compare_wide(head + "x,1,0.5,3\n", head + "x,1.0,0.5,3\n") != []
    assert recheck.compare_wide(head + "x,1,0.5,3\n", head + "x,1,0.51,3\n") != []
    # a clock column: any positive time on both sides; a missing time is a difference
    clocked = frozenset({"time-us"})
    assert recheck.compare_wide(head + "x,1,0.5,3\n", head + "x,1,0.5,9\n", clocked=clocked) == []
    assert recheck.compare_wide(head + "x,1,0.5,3\n", head + "x,1,0.5,nan\n", clocked=clocked)
    assert recheck.compare_wide(head + "x,1,0.5,3\n", head + "x,1,0.5,9\n") != []
    assert recheck.compare_wide(head + "x,1,0.5,3\n", "experiment,seed\nx,1\n") != []
    assert recheck.compare_wide(head + "x,1,0.5,3\n", head) != []
    assert recheck.compare_wide(head + "x,1,nan,3\n", head + "x,1,nan,3.0\n") == []


def test_a_timed_experiments_table_is_not_compared_and_says_so(tmp_path: Path) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("| 812.3 |\n", encoding="utf-8")
    b.write_text("| 790.1 |\n", encoding="utf-8")
    timed = recheck._compare_file("table.md", a, b, True, frozenset())
    assert timed.problems == () and timed.same.startswith("not compared")
    untimed = recheck._compare_file("table.md", a, b, False, frozenset())
    assert untimed.problems
