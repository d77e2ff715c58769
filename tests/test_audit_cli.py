"""`wevent audit`: exit codes, reports (JSON, Markdown, HTML), integrity in the verdict, and the
HTML report rendered by headless Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from wevent.accounting.durable import ChainedJsonlWriter, SegmentWriter, charge_record
from wevent.accounting.formats import read_ledger, read_requirements
from wevent.cli import cli
from wevent.cli._common import EXIT_INTEGRITY
from wevent.demo import example_path
from wevent.verifier.audit import run_audit
from wevent.verifier.report import histogram, render_html, render_markdown, report_json

REQS = [str(example_path("requirements.csv")), str(example_path("requirements.dynamic.csv"))]
REQ_ARGS = [a for r in REQS for a in ("-r", r)]


def _audit(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["audit", *args])
    return result.exit_code, result.stdout, result.stderr


def _chained(path: Path, source: str) -> None:
    ledger = read_ledger(example_path(source))
    with ChainedJsonlWriter(path) as w:
        for name, members in ledger.groups.items():
            w.define_group(name, members)
        for ch in ledger:
            w.append_charge(ch)


def test_compliant_ledger_exits_0_and_violating_exits_1(tmp_path: Path) -> None:
    code, out, _ = _audit(str(example_path("compliant.jsonl")), *REQ_ARGS)
    assert code == 0 and "audit: COMPLIANT" in out and "not chained" in out
    code, out, _ = _audit(str(example_path("violating.jsonl")), *REQ_ARGS, "--engine", "duckdb")
    assert code == 1 and "NOT COMPLIANT" in out and "excess 0.000000000000000001" in out


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    code, _, err = _audit(str(tmp_path / "missing.jsonl"), *REQ_ARGS)
    assert code == 2 and err.count("\n") == 1 and "no such file" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"slot": 1, "user": "alice", "epsilon": "NaN"}\n')
    for engine in ("numpy", "duckdb"):
        code, _, err = _audit(str(bad), *REQ_ARGS, "--engine", engine)
        assert code == 2 and err.startswith("wevent audit: error:") and err.count("\n") == 1, err
    import pyarrow as pa
    import pyarrow.parquet as pq

    repeated = tmp_path / "repeated.parquet"  # group g lists alice twice
    table = {
        "slot": pa.array([None, None, 1], pa.int64()),
        "user": ["alice", "alice", ""],
        "group": ["g", "g", "g"],
        "epsilon": ["", "", "0.1"],
    }
    pq.write_table(pa.table(table), repeated)
    for engine in ("numpy", "duckdb"):
        code, _, err = _audit(str(repeated), *REQ_ARGS, "--engine", engine)
        assert code == 2 and err.count("\n") == 1 and "lists a member twice" in err, err
    code, _, err = _audit(str(bad), "-r", str(tmp_path / "none.csv"))
    assert code == 2 and "no such file" in err


def test_out_of_memory_is_one_line_pointing_to_duckdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The numpy engine holds the ledger in memory; running out is exit 2 and one line that
    names the out-of-core engine, not a traceback."""
    from wevent.verifier.engines import NumpyEngine

    def audit(*_args: object, **_kwargs: object) -> None:
        raise MemoryError("Unable to allocate 752. MiB for an array")

    monkeypatch.setattr(NumpyEngine, "audit", audit)
    code, _, err = _audit(str(example_path("compliant.jsonl")), *REQ_ARGS)
    assert code == 2 and err.count("\n") == 1, err
    assert "numpy engine ran out of memory: Unable to allocate 752. MiB" in err
    assert "--engine duckdb audits out of core" in err


def test_tampered_chain_fails_the_audit_even_when_windows_hold(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    _chained(path, "compliant.jsonl")
    code, out, _ = _audit(str(path), *REQ_ARGS)
    assert code == 0 and "chain intact" in out
    lines = path.read_text().splitlines()
    lines[3], lines[4] = lines[4], lines[3]
    path.write_text("\n".join(lines) + "\n")
    code, out, _ = _audit(str(path), *REQ_ARGS, "--json", str(tmp_path / "a.json"))
    assert code == EXIT_INTEGRITY and "integrity: BROKEN" in out and "chain hash mismatch" in out
    assert "audit: INTEGRITY FAILURE" in out and "NOT COMPLIANT" not in out
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["ok"] is False and report["verdict"]["ok"] is True
    assert report["status"] == "integrity-failure" and report["integrity"][0]["state"] == "broken"
    assert report["integrity"][0]["records"] == 3


def test_torn_tail_is_reported_and_the_committed_part_audited(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    _chained(path, "violating.jsonl")
    with path.open("a") as fh:
        fh.write('{"slot": 99, "user": "alice", "epsil')
    code, out, _ = _audit(str(path), *REQ_ARGS)
    assert code == 1 and "torn tail" in out
    assert "6 window violation(s)" in out  # everything committed is still audited


def test_segment_ledger_audit_and_expect_head(tmp_path: Path) -> None:
    root = tmp_path / "run.wledger"
    ledger = read_ledger(example_path("compliant.jsonl"))
    with SegmentWriter(root) as w:
        for name, members in ledger.groups.items():
            w.define_group(name, members)
        for k, ch in enumerate(ledger):
            w.append(charge_record(ch))
            if k % 5 == 4:
                w.commit()
    population = read_requirements([Path(r) for r in REQS])
    result = run_audit([root], population, engine="duckdb")
    assert result.ok and result.integrity[0].records >= 2
    head = result.integrity[0].head
    code, _, _ = _audit(str(root), *REQ_ARGS, "--expect-head", head)
    assert code == 0
    code, out, _ = _audit(str(root), *REQ_ARGS, "--expect-head", "ab" * 32)
    assert code == EXIT_INTEGRITY and "expected head" in out
    assert "ab" * 32 in out and head in out  # a mismatch prints both heads


def test_reports_carry_the_exact_verdict(tmp_path: Path) -> None:
    population = read_requirements([Path(r) for r in REQS])
    result = run_audit([example_path("violating.jsonl")], population)
    data = report_json(result)
    assert data["ok"] is False and len(data["verdict"]["violations"]) == 6
    assert data["utilization"]["classes"]["class-2"] == "5/4"
    assert data["utilization"]["closest"][0] == {
        "utilization": "5/4",
        "class": "class-2",
        "users": 1,
        "examples": ["carol"],
    }
    assert sum(data["utilization"]["histogram"].values()) == data["utilization"]["users"]
    assert data["spends_over_time"]["class-0"][0] == [1, "1/10"]
    md = render_markdown(result)
    assert (
        "**Verdict: NOT COMPLIANT" in md
        and "| 4 | whole-stream | whole-stream eps=2 | carol |" in md
    )
    page = render_html(result)
    assert page.count("<svg") >= 3 and "<script" not in page and "http" not in page.split("<svg")[0]


def test_histogram_bins_are_exact() -> None:
    population = read_requirements([Path(r) for r in REQS])
    result = run_audit([example_path("compliant.jsonl")], population)
    hist = histogram(result)
    utils = result.verdict.user_utilization
    at_bound = sum(1 for x in utils.values() if x == Fraction(1))
    assert at_bound >= 1 and hist["90-100%"] >= at_bound and hist["over 100%"] == 0


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _chrome(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    browser = _chromium()
    assert browser is not None
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
    ]
    return subprocess.run(
        [browser, *flags, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.skipif(
    _chromium() is None, reason="chromium is not installed (make browser / .ci/run install it)"
)
def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    import matplotlib.image as mpimg
    import numpy as np

    report = tmp_path / "report.html"
    code, _, _ = _audit(str(example_path("violating.jsonl")), *REQ_ARGS, "--html", str(report))
    assert code == 1
    dom = _chrome(["--dump-dom", report.as_uri()], tmp_path)
    assert "Verdict: NOT COMPLIANT" in dom.stdout, dom.stderr[-500:]
    assert dom.stdout.count("<svg") >= 3 and 'id="violations"' in dom.stdout
    shot = tmp_path / "shot.png"
    _chrome(["--window-size=1000,2400", f"--screenshot={shot}", report.as_uri()], tmp_path)
    pixels = mpimg.imread(shot)[..., :3]
    # The histogram bars are drawn in #4477aa: the plots really rendered, not only the text.
    bar = np.all(np.abs(pixels - np.array([0x44, 0x77, 0xAA]) / 255) < 0.03, axis=-1)
    assert int(bar.sum()) > 200
    # The verdict line is red (#b2182b) for a non-compliant audit.
    red = np.all(np.abs(pixels - np.array([0xB2, 0x18, 0x2B]) / 255) < 0.05, axis=-1)
    assert int(red.sum()) > 50
