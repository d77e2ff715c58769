"""Committed reproduction results cannot go stale: each directory carries the command, seeds and
commit that wrote it and the hashes of its files, and a tiny-size fingerprint that this suite
re-runs (a change to a stream, a mechanism or a metric moves it, and the suite fails until the
results are regenerated with the recorded command)."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest

from wevent.experiments import docs_tables, provenance
from wevent.experiments.registry import EXPERIMENTS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reproduction.md"


def committed() -> dict[str, Path]:
    """Experiment name -> the docs directory holding its committed results."""
    found: dict[str, Path] = {}
    for path in sorted((ROOT / "docs").glob("*/*/" + provenance.PROVENANCE)):
        name = provenance.read_provenance(path)["experiment"]
        assert name not in found, f"{name} has results in {found[name]} and {path.parent}"
        found[name] = path.parent
    return found


def test_every_experiment_has_committed_results_from_its_documented_command() -> None:
    dirs = committed()
    assert set(dirs) == set(EXPERIMENTS), "experiments without committed results (or extra)"
    text = DOC.read_text(encoding="utf-8")
    for name, directory in dirs.items():
        assert provenance.check_directory(directory) == [], name
        record = provenance.read_provenance(directory / provenance.PROVENANCE)
        command = record["command"]
        assert command in text, f"docs/reproduction.md does not show the command of {name}"
        out = command.rsplit("--out ", 1)[1]
        assert (ROOT / out).resolve() == directory.resolve(), (name, out)


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_committed_results_are_not_stale(name: str) -> None:
    directory = committed()[name]
    want = (directory / provenance.FINGERPRINT).read_text(encoding="utf-8")
    got = provenance.fingerprint(name)
    if got != want:
        record = provenance.read_provenance(directory / provenance.PROVENANCE)
        diff = "".join(
            list(
                difflib.unified_diff(
                    want.splitlines(keepends=True),
                    got.splitlines(keepends=True),
                    "committed fingerprint",
                    "this code",
                )
            )[:40]
        )
        pytest.fail(
            f"{name}: the code no longer gives the committed results; regenerate them with "
            f"`{record['command']}` and update the prose that quotes them\n{diff}"
        )


def test_a_changed_added_or_missing_file_is_found(tmp_path: Path) -> None:
    # Negative controls for `check_directory`: a pristine copy passes, each alteration fails.
    source = committed()["roc"]
    pristine = tmp_path / "pristine"
    shutil.copytree(source, pristine)
    assert provenance.check_directory(pristine) == []

    def altered(how: str) -> list[str]:
        copy = tmp_path / how
        shutil.copytree(pristine, copy)
        if how == "edit":
            with (copy / "results.csv").open("a", encoding="utf-8") as fh:
                fh.write("\n")
        elif how == "add":
            (copy / "extra.csv").write_text("x\n", encoding="utf-8")
        elif how == "delete":
            (copy / "runs.csv").unlink()
        elif how == "no-fingerprint":
            record = json.loads((copy / provenance.PROVENANCE).read_text(encoding="utf-8"))
            record["fingerprint"] = None
            (copy / provenance.PROVENANCE).write_text(json.dumps(record), encoding="utf-8")
        elif how == "dirty":
            record = json.loads((copy / provenance.PROVENANCE).read_text(encoding="utf-8"))
            record["sources_modified"] = True
            (copy / provenance.PROVENANCE).write_text(json.dumps(record), encoding="utf-8")
        elif how == "no-provenance":
            (copy / provenance.PROVENANCE).unlink()
        return provenance.check_directory(copy)

    assert "changed since the recorded run" in " ".join(altered("edit"))
    assert "not written by the recorded run" in " ".join(altered("add"))
    assert "recorded but missing" in " ".join(altered("delete"))
    assert "without a fingerprint" in " ".join(altered("no-fingerprint"))
    assert "clean git commit" in " ".join(altered("dirty"))
    assert "no readable provenance.json" in " ".join(altered("no-provenance"))


def test_the_command_line_is_canonical(tmp_path: Path) -> None:
    got = provenance.command_line("pwsm-w", Path("docs/reproduction/pwsm-w"), 3, True, 0, None, 40)
    assert got == (
        "wevent reproduce pwsm-w --quick --slots 40 --repeats 3 --seed 0 "
        "--out docs/reproduction/pwsm-w"
    )
    odd = provenance.command_line("roc", tmp_path / "a b", 1, False, 7, 10, None)
    assert odd.endswith(f"--seed 7 --out '{(tmp_path / 'a b').as_posix()}'")


def test_the_page_shows_the_committed_tables(tmp_path: Path) -> None:
    results = ROOT / "docs" / "reproduction"
    assert docs_tables.sync(DOC, results, write=False) == []
    text = DOC.read_text(encoding="utf-8")
    assert text.count("<!-- results: ") == len(EXPERIMENTS) - 1  # every one but ExSub's
    assert text.count("<!-- claims -->") == 1
    # Negative controls: a number changed on the page, or in the results, is reported, and
    # --write puts the committed one back.
    page = tmp_path / "reproduction.md"
    page.write_text(text.replace("| lns | lbu |", "| lns | lbu | 9 |", 1), encoding="utf-8")
    assert len(docs_tables.sync(page, results, write=False)) == 1
    assert len(docs_tables.sync(page, results, write=True)) == 1
    assert page.read_text(encoding="utf-8") == text
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    table = copy / "roc" / "table.md"
    table.write_text(table.read_text(encoding="utf-8").replace("0.", "1.", 1), encoding="utf-8")
    stale = docs_tables.sync(DOC, copy, write=False)
    assert len(stale) == 1 and "roc auc" in stale[0]
    (copy / "pwsm-w" / "results.csv").write_text(
        (copy / "pwsm-w" / "results.csv").read_text(encoding="utf-8").replace(",amre,", ",amre,9")
    )
    assert any("claims table" in line for line in docs_tables.sync(DOC, copy, write=False))
