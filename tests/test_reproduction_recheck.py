"""`wevent reproduce --check DIR`: the recorded command re-run and compared with the committed
files (wevent/experiments/recheck.py). Each test tampers with one thing a stale or edited
results directory could hold and asserts the check names it."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from wevent.accounting.durable import file_sha256
from wevent.cli import cli
from wevent.experiments import provenance, recheck, registry
from wevent.experiments.timing import WALL_CLOCK

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
    assert "  cfpu.png: not compared: a plot" in out


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
    # beyond the tolerance in a wide file, and a committed file missing (its record too)
    edit_cell(results / "runs.csv", "cfpu", lambda v: v * (1 + 1e-8))
    rehash(results, "runs.csv")
    (results / "table.md").unlink()
    path = results / provenance.PROVENANCE
    record = json.loads(path.read_text(encoding="utf-8"))
    del record["files"]["table.md"]
    path.write_text(json.dumps(record), encoding="utf-8")
    code, out = check(results)
    assert code == 1
    assert "fingerprint.csv: changed since the recorded run" in out
    assert "fingerprint.csv: differs" in out
    assert "runs.csv: differs" in out
    assert "table.md: differs" in out and "written by the re-run, not committed" in out
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
    assert len(out.strip().splitlines()) == 1  # checked before anything runs


@pytest.mark.parametrize(
    "extra",
    [
        ["cfpu"],
        ["--quick"],
        ["--users", "5"],
        ["--slots", "5"],
        ["--repeats", "2"],
        ["--seed", "0"],
        ["--out", "x"],
        ["--no-fingerprint"],
        ["--fingerprint"],
    ],
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


def corrupt(directory: Path, **fields: object) -> None:
    path = directory / provenance.PROVENANCE
    record = json.loads(path.read_text(encoding="utf-8"))
    record.update(fields)
    path.write_text(json.dumps(record), encoding="utf-8")


def command_for(directory: Path, **settings: object) -> str:
    record = json.loads((directory / provenance.PROVENANCE).read_text(encoding="utf-8"))
    record.update(settings)
    return provenance.command_line(
        EXPERIMENT,
        directory,
        record["repeats"],
        record["quick"],
        record["seeds"][0] if record["seeds"] else 0,
        record["users"],
        record["slots"],
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"files": ["results.csv"]},
        {"files": None},
        {"files": {"results.csv": 1}},
        {"experiment": ["cfpu"]},
        {"experiment": "nope"},
        {"seeds": 3},
        {"seeds": {"a": 1}},
        {"seeds": []},
        {"seeds": [3, 99]},
        {"seeds": [3]},
        {"command": "wevent reproduce 'cfpu"},
        {"command": ["wevent"]},
        {"repeats": "2"},
        {"quick": "no"},
        "negative seed",
        "zero users",
        "not json",
        "another schema",
    ],
)
def test_a_malformed_record_is_one_line_exit_2_before_any_run(
    results: Path, fields: dict[str, object] | str
) -> None:
    if fields == "negative seed":
        corrupt(results, seeds=[-1, 0], command=command_for(results, seeds=[-1, 0]))
    elif fields == "zero users":
        corrupt(results, users=0, command=command_for(results, users=0))
    elif fields == "not json":
        (results / provenance.PROVENANCE).write_text("{", encoding="utf-8")
    elif fields == "another schema":
        corrupt(results, schema_version=99)
    else:
        assert isinstance(fields, dict)
        corrupt(results, **fields)
    code, out = check(results)
    assert code == 2, out
    assert "Traceback" not in out
    assert len(out.strip().splitlines()) == 1, out
    assert str(results) in out


def test_a_committed_file_that_is_not_utf8_is_named_before_any_run(results: Path) -> None:
    (results / "results.csv").write_bytes(b"experiment\n\xff\n")
    rehash(results, "results.csv")
    code, out = check(results)
    assert code == 2
    assert "results.csv: not UTF-8" in out


def test_every_directory_is_read_before_the_first_runs(results: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    result = CliRunner().invoke(cli, ["reproduce", "--check", str(results), "--check", str(bad)])
    assert result.exit_code == 2
    assert "re-running" not in result.output  # the good one did not run first


def test_a_parent_of_result_directories_gets_a_hint(results: Path) -> None:
    code, out = check(results.parent)
    assert code == 2
    assert "give each" in out


def test_only_provenance_problems_say_the_numbers_are_the_same(results: Path) -> None:
    corrupt(results, sources_modified=True)
    code, out = check(results)
    assert code == 1
    assert "SAME NUMBERS, PROVENANCE NOT CLEAN" in out
    assert "not written from a clean git commit" in out


# The timed experiment, without a 14-minute run: the committed pwsm-time directory, and a
# "re-run" that copies it with every clock reading moved (as a real re-run moves them).
TIMED = Path(__file__).resolve().parent.parent / "docs" / "reproduction" / "pwsm-time"
CLOCK_SECTIONS = {m.upper() for m in WALL_CLOCK}


def moved_clocks(text: str, name: str) -> str:
    if name == "runs.csv":
        rows = list(csv.reader(io.StringIO(text)))
        for row in rows[1:]:
            for i, column in enumerate(rows[0]):
                if column in WALL_CLOCK:
                    row[i] = repr(float(row[i]) * 1.5)
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        return buf.getvalue()
    if name == "results.csv":
        rows = list(csv.reader(io.StringIO(text)))
        at = rows[0].index("metric")
        for row in rows[1:]:
            if row[at] in WALL_CLOCK:
                row[6:8] = [repr(float(row[6]) * 1.5), repr(float(row[7]) * 1.5)]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        return buf.getvalue()
    if name == "table.md":  # the clock sections' numbers, and the orderings' (rebuilt anyway)
        out = []
        for title, section in recheck._sections(text):
            if title in CLOCK_SECTIONS or title in ("ORDERINGS", "RATIOS"):
                section = re.sub(r"\d+\.\d+", "9.999", section)
            out.append(section)
        return "\n".join(out) + "\n"
    return text


@pytest.fixture
def timed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    directory = tmp_path / "pwsm-time"
    shutil.copytree(TIMED, directory)
    edits: dict[str, str] = {}  # name -> text the fake re-run writes instead

    def fake_run(name: str, out: Path, *args: object, **kwargs: object) -> list[Path]:
        assert name == "pwsm-time"
        for path in TIMED.iterdir():
            if path.suffix != ".png" and path.name not in ("provenance.json", "fingerprint.csv"):
                text = moved_clocks(path.read_text(encoding="utf-8"), path.name)
                (out / path.name).write_text(edits.get(path.name, text), encoding="utf-8")
        return []

    monkeypatch.setattr(registry, "run_experiment", fake_run)
    fingerprint = (TIMED / provenance.FINGERPRINT).read_text(encoding="utf-8")
    monkeypatch.setattr(provenance, "fingerprint", lambda name: fingerprint)
    return directory, edits


def test_a_timed_rerun_differs_only_in_clock_readings_and_is_the_same(
    timed: tuple[Path, dict[str, str]],
) -> None:
    directory, _ = timed
    result = recheck.recheck(directory)
    verdicts = {v.name: v for v in result.files}
    assert result.numbers_same, recheck.summary(result)
    assert verdicts["runs.csv"].same == "equal to a relative 1e-09"
    assert verdicts["table.md"].same.startswith("equal but for clock readings")


@pytest.mark.parametrize("where", ["count", "verdict", "header"])
def test_a_timed_table_change_outside_the_clocks_is_found(
    timed: tuple[Path, dict[str, str]], where: str
) -> None:
    directory, edits = timed
    text = moved_clocks((TIMED / "table.md").read_text(encoding="utf-8"), "table.md")
    sections = recheck._sections(text)
    if where == "count":  # a publication count of the re-run
        sections = [
            (t, re.sub(r"\| (\d)", r"| 1\1", s, count=1) if t == "PUBLICATIONS" else s)
            for t, s in sections
        ]
        edits["table.md"] = "\n".join(s for _, s in sections) + "\n"
    elif where == "header":
        edits["table.md"] = text.replace("10000 users", "10001 users", 1)
    else:  # the committed verdicts no longer what today's code gives from the committed runs
        table = directory / "table.md"
        committed = table.read_text(encoding="utf-8")
        assert "| does not hold" in committed or " does not hold" in committed
        table.write_text(committed.replace(" does not hold", " holds", 1), encoding="utf-8")
        rehash(directory, "table.md")
    result = recheck.recheck(directory)
    verdicts = {v.name: v for v in result.files}
    assert verdicts["table.md"].problems, recheck.summary(result)


def test_a_timed_count_in_runs_is_compared_exactly(timed: tuple[Path, dict[str, str]]) -> None:
    directory, edits = timed
    rows = list(csv.reader(io.StringIO((TIMED / "runs.csv").read_text(encoding="utf-8"))))
    at = rows[0].index("publications")
    rows[1][at] = repr(float(rows[1][at]) + 1)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    edits["runs.csv"] = moved_clocks(buf.getvalue(), "runs.csv")
    result = recheck.recheck(directory)
    verdicts = {v.name: v for v in result.files}
    assert verdicts["runs.csv"].problems
    assert any("publications" in p for p in verdicts["runs.csv"].problems)
