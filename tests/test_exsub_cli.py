"""`wevent run exsub`, `wevent prove exsub` and `wevent reproduce exsub` end to end."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from wevent.accounting.durable import audit_integrity
from wevent.accounting.formats import read_ledger, read_ledgers
from wevent.cli import cli
from wevent.demo import example_path
from wevent.experiments.stats import interval
from wevent.mechanisms.exsub_stream import ExSubClient

WHOLE = str(example_path("requirements.wholestream.csv"))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_run_exsub_writes_a_ledger_the_checker_accepts(tmp_path: Path) -> None:
    ledger, releases = tmp_path / "run.jsonl", tmp_path / "rel.csv"
    args = ["run", "exsub", "-r", WHOLE, "--stream", "sparse", "--slots", "8", "--domain", "2"]
    code, out, err = run(
        *args, "--sparsity", "2", "--ledger", str(ledger), "--releases", str(releases)
    )
    assert code == 0, err
    assert "40 of 40 users report" in out
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(rows) == 40 and {r["slot"] for r in rows} == {1}
    assert all(r["evidence"]["kind"] == "exsub" and r["mechanism"] == "exsub" for r in rows)
    by_user = {r["user"]: r["epsilon"] for r in rows}
    assert by_user["u1"] == "0.5" and by_user["u4"] == "2" and by_user["u2"] == "1"
    code, out, _ = run("check", str(ledger), "-r", WHOLE)
    assert code == 0 and "COMPLIANT" in out and "0 evidence failure" in out
    with releases.open() as fh:
        assert len(list(csv.DictReader(fh))) == 8 * 2
    # same seed, same ledger
    again = tmp_path / "again.jsonl"
    run(*args, "--sparsity", "2", "--ledger", str(again))
    assert again.read_text() == ledger.read_text()


def test_a_tampered_exsub_ledger_fails_the_evidence_check(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    code, _, _ = run(
        "run",
        "exsub",
        "-r",
        WHOLE,
        "--stream",
        "sparse",
        "--slots",
        "4",
        "--ledger",
        str(ledger),
        "--sparsity",
        "1",
    )
    assert code == 0
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    rows[0]["evidence"]["x"] = "1/10"  # ln 10 > 0.5, the charge of u1
    ledger.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, out, _ = run("check", str(ledger), "-r", WHOLE)
    assert code == 1 and "1 evidence failure" in out
    assert len(read_ledger(ledger)) == 40


def test_run_exsub_on_a_csv_stream(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\na,inf,1\nb,inf,2\n")
    stream = tmp_path / "s.csv"
    stream.write_text("user,slot,value\na,1,0\na,3,1\nb,2,2\nb,3,2\nb,4,2\n")
    code, out, err = run(
        "run", "exsub", "-r", str(req), "--stream", str(stream), "--sparsity", "3", "--domain", "3"
    )
    assert code == 0, err
    assert "2 of 2 users report, 4 slots, d = 3" in out
    # a: value 0 (1 change), then 1 (2 changes): 3 changes > 2
    code, _, err = run("run", "exsub", "-r", str(req), "--stream", str(stream), "--sparsity", "2")
    assert code == 2 and "user 'a' has 3 changes, more than --sparsity 2" in err
    assert err.count("\n") == 1


def test_run_exsub_user_mistakes_are_one_line(tmp_path: Path) -> None:
    fixed = str(example_path("requirements.csv"))
    cases = [
        (["-r", fixed, "--stream", "sparse", "--slots", "4"], "whole-stream requirements"),
        (["-r", WHOLE, "--stream", "sparse"], "--slots is required"),
        (["-r", WHOLE, "--stream", "nope", "--slots", "4"], "neither the synthetic stream"),
        (["-r", WHOLE, "--stream", "sparse", "--slots", "4", "--oracle", "oue"], "no --oracle"),
        (
            ["-r", WHOLE, "--stream", "sparse", "--slots", "2", "--domain", "1", "--sparsity", "3"],
            "do not fit",
        ),
    ]
    for args, message in cases:
        code, _, err = run("run", "exsub", *args)
        assert code == 2, (args, err)
        assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_prove_exsub_exit_codes() -> None:
    code, out, _ = run("prove", "exsub", "--domain", "4", "--sparsity", "2", "--m", "2")
    assert code == 0 and "PROVED" in out
    code, out, _ = run(
        "prove", "exsub", "--domain", "4", "--sparsity", "2", "--m", "2", "--eps", "1/2"
    )
    assert code == 0 and "runtime's x" in out
    code, out, _ = run(
        "prove",
        "exsub",
        "--domain",
        "4",
        "--sparsity",
        "2",
        "--m",
        "2",
        "--variant",
        "printed-online",
    )
    assert code == 1 and "REFUTED" in out and "counterexample" in out
    code, out, _ = run("prove", "exsub", "--domain", "3", "--sparsity", "1", "--m", "2", "--json")
    assert code == 0 and json.loads(out)["result"] == "proved"
    for bad in (
        ["--sparsity", "4", "--domain", "4"],
        ["--eps", "0"],
        ["--eps", "abc"],
        ["--variant", "published"],
    ):
        code, _, err = run("prove", "exsub", *bad)
        assert code == 2 and err.count("\n") == 1, (bad, err)
    code, _, err = run("prove", "primitive", "grr", "--variant", "printed-online")
    assert code == 2 and "No such option '--variant'" in err


def test_reproduce_exsub_quick_writes_results(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    code, _, err = run(
        "reproduce", "exsub", "--quick", "--repeats", "1", "--no-fingerprint", "--out", str(out_dir)
    )
    assert code == 0, err
    with (out_dir / "results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [
        "experiment",
        "dataset",
        "mechanism",
        "epsilon",
        "w",
        "metric",
        "value",
        "std",
        "runs",
        "ci_low",
        "ci_high",
    ]
    assert {r["runs"] for r in rows} == {"1"} and {r["ci_low"] for r in rows} == {"nan"}
    assert {r["mechanism"] for r in rows} >= {"exsub", "sample-grr", "sample-oue", "split-rr"}
    assert {r["w"] for r in rows} == {"inf"}
    assert "reduction of exsub vs sample-oue" in (out_dir / "table.md").read_text()
    with (out_dir / "runs.csv").open() as fh:
        runs = list(csv.DictReader(fh))
    metrics = ["mean_mse", "range_mse", "mean_tve", "range_tve", "mean_mae", "range_mae"]
    assert list(runs[0])[5:] == metrics  # the four earlier columns first, then MAE
    assert len(runs) == len(rows) // 6  # six metrics per result row, one repeat
    cells = {(r["dataset"], r["epsilon"], r["mechanism"]) for r in runs}
    for metric in metrics:  # one row per (data set, eps, mechanism) and metric
        assert sorted(
            (r["dataset"], r["epsilon"], r["mechanism"]) for r in rows if r["metric"] == metric
        ) == sorted(cells)
    for metric in ("range_tve", "mean_mae", "range_mae"):
        first = next(r for r in rows if r["metric"] == metric)
        line = next(
            r
            for r in runs
            if (r["dataset"], r["epsilon"], r["mechanism"])
            == (first["dataset"], first["epsilon"], first["mechanism"])
        )
        assert line["repeat"] == "0" and float(line[metric]) == float(first["value"])
    for r in runs:  # an average error is at most the largest one
        assert 0 < float(r["mean_tve"]) / (16 * 2) <= float(r["mean_mae"]) <= float(r["mean_tve"])
    table = (out_dir / "table.md").read_text()
    assert "## synthetic-n4000-T16-d2-s4: mean_mae" in table
    assert "reduction of exsub-calibrated vs sample-oue" in table.split(": range_mae")[1]
    assert (out_dir / "exsub.png").read_bytes()[:4] == b"\x89PNG"
    code, _, err = run("reproduce", "nope")
    assert code == 2


def test_help_teaches_exsub() -> None:
    code, out, _ = run("run", "--help")
    assert code == 0 and "Whole-stream local model (004)" in out and "--sparsity" in out
    code, out, _ = run("prove", "exsub", "--help")
    assert code == 0 and "wevent prove exsub --domain 5 --sparsity 2 --m 3" in out
    code, out, _ = run("reproduce", "--help")
    assert code == 0 and "sample-grr" in out


def test_exsub_ledgers_round_trip_in_every_format(tmp_path: Path) -> None:
    ledgers = []
    for suffix in (".jsonl", ".csv", ".parquet", ".wledger"):
        path = tmp_path / f"run{suffix}"
        code, _, err = run(
            "run", "exsub", "-r", WHOLE, "--stream", "sparse", "--slots", "4",
            "--sparsity", "1", "--ledger", str(path),
        )  # fmt: skip
        assert code == 0, err
        if suffix == ".wledger":  # a segment ledger is audited (and check says so)
            assert "wevent audit" in run("check", str(path), "-r", WHOLE)[2]
            assert run("audit", str(path), "-r", WHOLE)[0] == 0
            ledgers.append(list(read_ledgers(sorted(path.glob("*.parquet")))))
            continue
        assert run("check", str(path), "-r", WHOLE)[0] == 0
        ledgers.append(list(read_ledger(path)))
    assert ledgers[0] == ledgers[1] == ledgers[2] == ledgers[3]


def test_run_exsub_writes_ahead_every_charge_before_any_subgroup_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .jsonl or .wledger ledger is written ahead: all 40 charges are committed (on disk,
    anchored by the checkpoint) before the first client draws its subgroup; the run prints the
    head, and the audit against it is intact and compliant."""
    for suffix in (".jsonl", ".wledger"):
        path = tmp_path / f"run{suffix}"
        seen: list[int] = []

        def spy(
            client: ExSubClient,
            path: Path = path,
            seen: list[int] = seen,
            start: Callable[[ExSubClient], None] = ExSubClient.start,
        ) -> None:
            if not seen:
                found = audit_integrity(path)
                seen.append(found.rows if found.ok else -1)
            start(client)

        monkeypatch.setattr(ExSubClient, "start", spy)
        code, out, err = run(
            "run", "exsub", "-r", WHOLE, "--stream", "sparse", "--slots", "4",
            "--sparsity", "1", "--ledger", str(path),
        )  # fmt: skip
        monkeypatch.undo()
        assert code == 0, err
        assert seen == [40], suffix
        head = out.split("  head ")[1].split()[0]
        assert "written ahead" in out and len(head) == 64
        code, out, _ = run("audit", str(path), "-r", WHOLE, "--expect-head", head)
        assert code == 0 and "integrity: INTACT" in out, out


def test_exsub_reductions_are_paired_per_repeat_with_an_interval() -> None:
    """A reduction is the mean over repeats of 1 - ExSub/baseline on the repeat's shared data
    (not 1 - mean/mean), with its 95% interval; the table prints both."""
    from wevent.experiments import exsub_experiment as ex

    def row(mech: str, vals: tuple[float, ...]) -> ex.Row:
        iv = interval(vals)
        return ex.Row(
            "exsub", "d", mech, "1", "inf", "mean_tve", iv.mean, iv.std, iv.n, iv.low, iv.high, vals
        )

    mine, base = row("exsub", (1.0, 4.0, 2.0)), row("sample-oue", (2.0, 5.0, 4.0))
    iv = ex.paired_reduction(mine, base)
    assert iv.mean == pytest.approx((0.5 + 0.2 + 0.5) / 3)
    assert iv.mean != pytest.approx(ex.reduction(mine.value, base.value))  # not the ratio of means
    assert iv.low < iv.mean < iv.high and iv.n == 3
    assert "40.0% [" in ex._pct(iv)
    assert ex._pct(interval([0.25])) == "25.0%"  # one repeat: no interval
