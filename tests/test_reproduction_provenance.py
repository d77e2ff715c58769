"""Committed reproduction results cannot go stale: each directory carries the command, seeds and
commit that wrote it and the hashes of its files, and a tiny-size fingerprint that this suite
re-runs (a change to a stream, a mechanism or a metric moves it, and the suite fails until the
results are regenerated with the recorded command)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from wevent.experiments import docs_tables, harness, provenance
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
    moved = provenance.compare_fingerprints(want, got)
    if moved:
        record = provenance.read_provenance(directory / provenance.PROVENANCE)
        shown = "\n".join(moved[:20])
        pytest.fail(
            f"{name}: the code no longer gives the committed results; regenerate them with "
            f"`{record['command']}` and update the prose that quotes them\n{shown}"
        )


def test_a_fingerprint_draws_no_plot(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fingerprint reads results.csv only; drawing the plots was half its time.
    import matplotlib.figure

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a fingerprint drew a plot")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", refuse)
    # a sweep (write_plots), the ROC experiment and ExSub's: each draws its plots its own way
    for name in ("ldp-ids-volatility", "roc", "exsub"):
        assert provenance.fingerprint(name).startswith("experiment,"), name
    with harness.without_plots():
        assert not harness.plots_wanted()
    assert harness.plots_wanted()
    import matplotlib.pyplot as plt

    try:
        with pytest.raises(AssertionError, match="drew a plot"):  # the control: outside, it draws
            harness.write_plots(
                [harness.Row("e", "lns", "lbd", Fraction(1), 3, "mre", 1.0, 0.0)],
                Path("unused"),
                "w",
                ["3"],
            )
    finally:
        plt.close("all")


def test_fingerprints_compare_numbers_to_a_relative_tolerance() -> None:
    want = "experiment,dataset,value,std\npwsm-w,lns,0.030022792754264428,0.0\n"
    same = "experiment,dataset,value,std\npwsm-w,lns,0.030022792754264418,0.0\n"
    assert provenance.compare_fingerprints(want, same) == []  # last digits of a float kernel
    moved = "experiment,dataset,value,std\npwsm-w,lns,0.03002279,0.0\n"
    assert (
        "0.030022792754264428 became 0.03002279" in provenance.compare_fingerprints(want, moved)[0]
    )
    assert provenance.compare_fingerprints(want, want.replace("lns", "sin")) != []
    assert provenance.compare_fingerprints(want, want + "pwsm-w,log,1,0\n") != []
    assert provenance.compare_fingerprints(want, want.replace(",0.0", ",nan")) != []
    assert provenance.compare_fingerprints(want, want.replace(",0.0", ",1e999")) != []
    # Only the measured columns are numbers; the others are compared as written
    keyed = "experiment,w,value,std\npwsm-w,1000,1.5,0.0\n"
    assert provenance.compare_fingerprints(keyed, keyed.replace(",1000,", ",1e3,")) != []
    assert provenance.compare_fingerprints(keyed, keyed.replace(",1.5,", ",1.50,")) == []


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
    # every experiment but ExSub's has a table on the page (exsub-tables and pwsm-time: two)
    shown = set(re.findall(r"<!-- results: ([a-z0-9-]+) ", text))
    assert shown == set(EXPERIMENTS) - {"exsub"}
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
    runs = copy / "pwsm-w" / "runs.csv"  # the claims are decided on the per-run values
    per_run = runs.read_text(encoding="utf-8")
    assert per_run.splitlines()[1].split(",")[2] == "bd"  # the first run's AMRE enters pbd < bd
    runs.write_text(per_run.replace(",accepted,", ",accepted,9", 1), encoding="utf-8")
    assert any("claims table" in line for line in docs_tables.sync(DOC, copy, write=False))


def test_a_malformed_marker_is_reported(tmp_path: Path) -> None:
    results = ROOT / "docs" / "reproduction"
    text = DOC.read_text(encoding="utf-8")
    page = tmp_path / "reproduction.md"
    for bad in (
        text.replace("<!-- results: roc auc -->", "<!-- results: roc AUC -->", 1),
        text.replace("<!-- results: roc auc -->", "<!-- results: roc auc-->", 1),
        text.replace("<!-- /results -->", "", 1),
        text.replace("<!-- /claims -->", "<!-- /claim -->", 1),
        text.replace("<!-- results: roc auc -->", "<!-- Results: roc auc -->", 1).replace(
            "<!-- /results -->", "<!-- /Results -->", 1
        ),
        text.replace("<!-- results: roc auc -->", "<!--results: roc auc -->", 1),
        text.replace("<!-- claims -->", "<!-- Claims -->").replace(
            "<!-- /claims -->", "<!-- /Claims -->"
        ),
    ):
        assert bad != text
        page.write_text(bad, encoding="utf-8")
        assert docs_tables.sync(page, results, write=False), bad[:0]


def test_the_recorded_commit_is_that_of_the_package_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An installed copy inside another project's checkout is not that project's commit.
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    (tmp_path / "README").write_text("x\n", encoding="utf-8")
    git("add", "README")
    git("commit", "-q", "-m", "other project")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(provenance, "_PACKAGE", package)
    assert provenance.source_commit() == (None, None)  # untracked there
    git("add", "pkg")
    git("commit", "-q", "-m", "the package")
    head, modified = provenance.source_commit()
    assert head is not None and len(head) == 40 and modified is False
    (package / "__init__.py").write_text("changed = 1\n", encoding="utf-8")
    assert provenance.source_commit() == (head, True)
