"""`wevent audit`: exit codes, reports (JSON, Markdown, HTML), integrity in the verdict, and the
HTML report rendered by headless Chromium."""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from wevent.accounting.durable import (
    ChainedJsonlWriter,
    SegmentWriter,
    audit_integrity,
    charge_record,
)
from wevent.accounting.formats import read_ledger, read_requirements
from wevent.cli import cli
from wevent.cli._common import EXIT_INPUT, EXIT_INTEGRITY, EXIT_OK, EXIT_TAIL, EXIT_VIOLATION
from wevent.demo import example_path
from wevent.verifier.audit import run_audit, tool_version
from wevent.verifier.report import (
    SCHEMA_VERSION,
    figures,
    histogram,
    render_html,
    render_markdown,
    render_text,
    report_json,
)
from wevent.verifier.verdict import percent_text

REQS = [str(example_path("requirements.csv")), str(example_path("requirements.dynamic.csv"))]
REQ_ARGS = [a for r in REQS for a in ("-r", r)]


def _audit(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["audit", *args])
    return result.exit_code, result.stdout, result.stderr


def chained_copy(path: Path, source: str) -> None:
    """A chained JSONL copy of the bundled example ledger ``source`` at ``path``."""
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
    chained_copy(path, "compliant.jsonl")
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
    chained_copy(path, "violating.jsonl")
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
    # what was checked: the inputs with their hashes, the integrity state, the tool
    for source in ("violating.jsonl", *REQS):
        digest = hashlib.sha256(example_path(source).read_bytes()).hexdigest()
        assert digest in dom.stdout, source
    assert "UNPROTECTED (warning)" in dom.stdout and tool_version() in dom.stdout
    shot = tmp_path / "shot.png"
    _chrome(["--window-size=1000,2400", f"--screenshot={shot}", report.as_uri()], tmp_path)
    pixels = mpimg.imread(shot)[..., :3]
    # The histogram bars are drawn in #4477aa: the plots really rendered, not only the text.
    bar = np.all(np.abs(pixels - np.array([0x44, 0x77, 0xAA]) / 255) < 0.03, axis=-1)
    assert int(bar.sum()) > 200
    # The verdict line is red (#b2182b) for a non-compliant audit.
    red = np.all(np.abs(pixels - np.array([0xB2, 0x18, 0x2B]) / 255) < 0.05, axis=-1)
    assert int(red.sum()) > 50


# ---------------------------------------------------------------------------- exit codes


def _tamper(path: Path) -> None:
    lines = path.read_text().splitlines()
    lines[3], lines[4] = lines[4], lines[3]
    path.write_text("\n".join(lines) + "\n")


def _tear(path: Path) -> None:
    with path.open("a") as fh:
        fh.write('{"slot": 99, "user": "alice", "epsil')


@pytest.mark.parametrize(
    ("source", "change", "code", "status"),
    [
        ("compliant.jsonl", None, EXIT_OK, "COMPLIANT"),
        ("violating.jsonl", None, EXIT_VIOLATION, "NOT COMPLIANT"),
        ("compliant.jsonl", _tamper, EXIT_INTEGRITY, "INTEGRITY FAILURE"),
        ("compliant.jsonl", _tear, EXIT_TAIL, "UNCOMMITTED TAIL"),
        ("violating.jsonl", _tear, EXIT_VIOLATION, "NOT COMPLIANT"),
        ("violating.jsonl", _tamper, EXIT_INTEGRITY, "INTEGRITY FAILURE"),
    ],
)
def test_each_outcome_has_its_exit_code_most_severe_first(
    tmp_path: Path, source: str, change: object, code: int, status: str
) -> None:
    """An integrity failure (5) before a violation (1) before an uncommitted tail (6) before
    compliant (0): a crashed writer is told apart from a privacy violation and from tampering."""
    path = tmp_path / "run.jsonl"
    chained_copy(path, source)
    if callable(change):
        change(path)
    got, out, err = _audit(str(path), *REQ_ARGS)
    assert got == code, out + err
    assert out.splitlines()[-1].startswith(f"audit: {status}"), out


def test_a_plain_ledger_is_unprotected_and_cannot_meet_an_anchor(tmp_path: Path) -> None:
    code, out, _ = _audit(str(example_path("compliant.jsonl")), *REQ_ARGS)
    assert code == EXIT_OK and "integrity: UNPROTECTED (warning)" in out
    assert "audit: COMPLIANT (unprotected" in out and "integrity: INTACT" not in out
    code, out, _ = _audit(
        str(example_path("compliant.jsonl")), *REQ_ARGS, "--expect-head", "a" * 64
    )
    assert code == EXIT_INTEGRITY and "not a durable ledger" in out


def test_the_printed_full_head_round_trips_through_expect_head(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    chained_copy(path, "compliant.jsonl")
    code, out, _ = _audit(str(path), *REQ_ARGS)
    heads = re.findall(r"head ([0-9a-f]{64})\b", out)
    assert code == EXIT_OK and len(heads) == 1
    head = heads[0]
    for given in (head, head[:16], head.upper()):
        code, out, _ = _audit(str(path), *REQ_ARGS, "--expect-head", given)
        assert code == EXIT_OK and "anchored by checkpoint, expected head" in out, out
    code, _, err = _audit(str(path), *REQ_ARGS, "--expect-head", head[:15])
    assert code == EXIT_INPUT and "at least 16" in err and err.count("\n") == 1
    wrong = ("0" if head[0] != "0" else "1") + head[1:]
    code, out, _ = _audit(str(path), *REQ_ARGS, "--expect-head", wrong)
    assert code == EXIT_INTEGRITY and wrong in out and head in out


def test_one_expected_head_per_ledger_in_order(tmp_path: Path) -> None:
    """Several ledgers read as one (a group of the first charged in the second), each anchored
    by its own head."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with ChainedJsonlWriter(first) as w:
        w.define_group("team", ["alice", "bob"])
        w.append({"slot": 1, "group": "team", "epsilon": "0.1"})
    with ChainedJsonlWriter(second) as w:
        w.append({"slot": 2, "user": "alice", "epsilon": "0.1"})
    # a plain file that charges the first one's group
    second_plain = tmp_path / "c.jsonl"
    second_plain.write_text('{"slot": 2, "group": "team", "epsilon": "0.1"}\n')
    heads = [audit_integrity(p).head for p in (first, second)]
    code, out, _ = _audit(
        str(first), str(second), *REQ_ARGS, "--expect-head", heads[0], "--expect-head", heads[1]
    )
    assert code == EXIT_OK, out
    code, out, _ = _audit(
        str(first), str(second), *REQ_ARGS, "--expect-head", heads[1], "--expect-head", heads[0]
    )
    assert code == EXIT_INTEGRITY, out
    code, _, err = _audit(str(first), str(second), *REQ_ARGS, "--expect-head", heads[0])
    assert code == EXIT_INPUT and "one --expect-head per ledger" in err
    code, out, _ = _audit(str(first), str(second_plain), *REQ_ARGS)
    assert code == EXIT_OK and "4 per-user charges" in out, out


# ---------------------------------------------------------------------------- wevent ledger


def _ledger_cmd(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["ledger", *args])
    return result.exit_code, result.stdout, result.stderr


def test_ledger_repair_cuts_a_torn_tail_and_refuses_tampering(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    chained_copy(path, "compliant.jsonl")
    intact = path.read_bytes()
    _tear(path)
    assert _audit(str(path), *REQ_ARGS)[0] == EXIT_TAIL
    code, out, _ = _ledger_cmd("repair", str(path))
    assert code == EXIT_OK and "run.jsonl.cut" in out and "torn tail" in out
    assert path.read_bytes() == intact and _audit(str(path), *REQ_ARGS)[0] == EXIT_OK
    code, out, _ = _ledger_cmd("repair", str(path))
    assert code == EXIT_OK and "nothing to repair" in out
    _tamper(path)
    _tear(path)
    before = path.read_bytes()
    code, _, err = _ledger_cmd("repair", str(path))
    assert code == EXIT_INTEGRITY and "refusing to repair" in err and err.count("\n") == 1
    assert path.read_bytes() == before
    code, _, err = _ledger_cmd("repair", str(example_path("compliant.jsonl")))
    assert code == EXIT_INPUT and "not a durable ledger" in err
    code, _, err = _ledger_cmd("repair", str(tmp_path / "none.jsonl"))
    assert code == EXIT_INPUT and "no such file" in err


def test_signed_checkpoints_from_the_command_line(tmp_path: Path) -> None:
    key = tmp_path / "ledger.key"
    code, out, _ = _ledger_cmd("keygen", str(key))
    assert code == EXIT_OK and (tmp_path / "ledger.key.pub").exists()
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    code, _, err = _ledger_cmd("keygen", str(key))
    assert code == EXIT_INPUT and "never overwritten" in err
    _ledger_cmd("keygen", str(tmp_path / "other.key"))
    path = tmp_path / "run.jsonl"
    ledger = read_ledger(example_path("compliant.jsonl"))
    with ChainedJsonlWriter(path, signing_key=key) as w:
        for name, members in ledger.groups.items():
            w.define_group(name, members)
        for ch in ledger:
            w.append_charge(ch)
    code, out, _ = _audit(str(path), *REQ_ARGS, "--public-key", str(tmp_path / "ledger.key.pub"))
    assert code == EXIT_OK and "anchored by checkpoint, signature" in out
    code, out, _ = _audit(str(path), *REQ_ARGS, "--public-key", str(tmp_path / "other.key.pub"))
    assert code == EXIT_INTEGRITY and "does not verify" in out
    code, _, err = _audit(str(path), *REQ_ARGS, "--public-key", str(tmp_path / "none.pub"))
    assert code == EXIT_INPUT and "cannot read the public key" in err


# ---------------------------------------------------------------------------- reports


def test_reports_name_every_input_with_its_hash_and_the_full_head(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    chained_copy(path, "compliant.jsonl")
    out_json, out_md, out_html = tmp_path / "a.json", tmp_path / "a.md", tmp_path / "a.html"
    args = [str(path), *REQ_ARGS, "--json", str(out_json), "--markdown", str(out_md)]
    code, _, _ = _audit(*args, "--html", str(out_html))
    assert code == EXIT_OK
    report = json.loads(out_json.read_text())
    assert report["schema_version"] == SCHEMA_VERSION == 2
    assert report["tool"] == {"name": "wevent", "version": tool_version()}
    created = datetime.strptime(report["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - created).total_seconds()) < 600
    assert report["command"][:3] == ["wevent", "audit", str(path)]
    assert report["engine"] == "numpy" and report["status"] == "compliant"
    expected = {
        str(f): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in [path, Path(f"{path}.head"), *map(Path, REQS)]
    }
    assert {i["path"]: i["sha256"] for i in report["inputs"]} == expected
    assert {i["role"] for i in report["inputs"]} == {"ledger", "requirements"}
    assert report["requirements"] == REQS
    (integrity,) = report["integrity"]
    head = audit_integrity(path).head
    assert integrity["state"] == "intact" and integrity["head"] == head and len(head) == 64
    for text in (out_md.read_text(), out_html.read_text()):
        assert all(digest in text for digest in expected.values())
        assert head in text and "INTACT" in text and tool_version() in text
        assert report["created"] in text and "audit" in text


def test_a_plain_ledger_is_shown_unprotected_never_ok(tmp_path: Path) -> None:
    population = read_requirements([Path(r) for r in REQS])
    result = run_audit([example_path("compliant.jsonl")], population)
    assert result.status == "compliant" and result.unprotected  # compliant, with a warning
    assert not result.ok  # ... and not ok: nothing shows the content unchanged
    (integrity,) = report_json(result)["integrity"]
    assert integrity["state"] == "unprotected" and integrity["ok"] is False
    md, page = render_markdown(result), render_html(result)
    for text in (md, page):
        assert "UNPROTECTED" in text and "INTACT" not in text
        assert "COMPLIANT (unprotected" in text


def test_one_exact_percent_formatter_marks_approximations() -> None:
    assert percent_text(Fraction(133, 160)) == "~83.13%"  # 83.125% exactly: rounded, marked
    assert percent_text(Fraction(333, 400)) == "83.25%"
    assert percent_text(Fraction(1, 3)) == "~33.33%"
    assert percent_text(Fraction(1)) == "100% (at the bound)"
    assert percent_text(Fraction(5, 4)) == "125% (over the bound)"
    assert percent_text(Fraction(9999999, 10000000)) == "~99.99999%"  # never "100" below it
    assert percent_text(Fraction(10000001, 10000000)) == "~100.00001% (over the bound)"
    assert percent_text(Fraction(1, 10**9)) == "~0.0000001%"  # never "0" above it
    assert percent_text(Fraction(0)) == "0%"
    assert percent_text(None).startswith("unbounded")


def test_cli_and_reports_share_the_formatter_and_collapse_ties(tmp_path: Path) -> None:
    reqs = tmp_path / "req.csv"
    users = [f"u{k}" for k in range(6)]
    reqs.write_text("user,w,epsilon\n" + "".join(f"{u},1,1.6\n" for u in users) + "z,1,2\n")
    path = tmp_path / "run.jsonl"
    with ChainedJsonlWriter(path) as w:
        w.define_group("all", users)
        w.append({"slot": 1, "group": "all", "epsilon": "1.33"})  # 133/160 of the bound
        w.append({"slot": 1, "user": "z", "epsilon": "1"})
    out_md, out_html, out_json = tmp_path / "a.md", tmp_path / "a.html", tmp_path / "a.json"
    code, out, _ = _audit(
        str(path),
        "-r",
        str(reqs),
        "--markdown",
        str(out_md),
        "--html",
        str(out_html),
        "--json",
        str(out_json),
    )
    assert code == EXIT_OK
    assert "6 users of class-0 (u0, u1, u2, ...) at ~83.13%" in out and "~83.12" not in out
    for text in (out_md.read_text(), html.unescape(out_html.read_text())):
        assert "~83.13%" in text and "u0, u1, u2, ... (6 users)" in text and "83.12" not in text
    closest = json.loads(out_json.read_text())["utilization"]["closest"]
    assert closest[0] == {
        "utilization": "133/160",
        "class": "class-0",
        "users": 6,
        "examples": ["u0", "u1", "u2"],
    }
    assert closest[1]["users"] == 1 and closest[1]["examples"] == ["z"]


def test_violations_name_what_they_break_and_evidence_failures_are_a_table() -> None:
    population = read_requirements([Path(r) for r in REQS])
    result = run_audit([example_path("violating.jsonl")], population)
    violations = report_json(result)["verdict"]["violations"]
    by_kind = {v["kind"]: v["breaks"] for v in violations}
    assert by_kind["fixed"] == "fixed w=3 eps=0.3"
    assert by_kind["backward"] == "declaration B:(5, 3) F:(2, 0.8) from slot 5"
    assert by_kind["forward"] == "declaration B:(1, 1) F:(4, 2.4) from slot 1"
    md, page = render_markdown(result), render_html(result)
    assert "| 6 | forward | declaration B:(1, 1) F:(4, 2.4) from slot 1 | dave |" in md
    assert "## Evidence failures" in md and '| 1 | `{"kind": "laplace"' in md
    assert "<table id='evidence'>" in page and "certified cost in" in page
    text = render_text(result)
    assert "breaks declaration B:(5, 3) F:(2, 0.8) from slot 5" in text


def test_plots_start_at_zero_use_steps_keep_legends_off_the_data_and_show_forward_windows() -> None:
    population = read_requirements([Path(r) for r in REQS])
    result = run_audit([example_path("violating.jsonl")], population)
    titled = figures(result)
    assert any(t.startswith("Window sums of dave") for t, _ in titled)
    for title, fig in titled:
        (ax,) = fig.axes
        assert ax.get_ylim()[0] == 0, title
        fig.canvas.draw()
        legend = ax.get_legend()
        if legend is not None:  # entirely to the right of the plotting area
            assert legend.get_window_extent().x0 >= ax.get_window_extent().x1, title
        for line in ax.get_lines():
            assert line.get_drawstyle() == "steps-post", (title, line.get_label())
    dave = next(fig for t, fig in titled if t.startswith("Window sums of dave"))
    labels = [line.get_label() for line in dave.axes[0].get_lines()]
    assert "forward window sum (from t)" in labels and "forward bound" in labels
    # negative control: a plot drawn the default way fails these checks
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], label="x")
    ax.legend(loc="upper right")
    fig.canvas.draw()
    assert ax.get_ylim()[0] != 0 and ax.get_lines()[0].get_drawstyle() != "steps-post"
    default_legend = ax.get_legend()
    assert default_legend is not None
    assert default_legend.get_window_extent().x0 < ax.get_window_extent().x1
    plt.close("all")


def test_a_writer_that_stopped_before_its_first_commit_leaves_an_empty_intact_ledger(
    tmp_path: Path,
) -> None:
    """Not bad input: the empty ledger, intact and compliant, for either layout."""
    path = tmp_path / "run.jsonl"
    w = ChainedJsonlWriter(path)
    w.append({"slot": 1, "user": "alice", "epsilon": "0.1"})  # never committed
    segments = tmp_path / "run.wledger"
    SegmentWriter(segments).append({"slot": 1, "user": "alice", "epsilon": "0.1"})
    for ledger in (path, segments):
        code, out, err = _audit(str(ledger), *REQ_ARGS)
        assert code == EXIT_OK, out + err
        assert "integrity: INTACT" in out and "0 per-user charges" in out
    emptied = tmp_path / "emptied.wledger"  # a writer never leaves an empty directory
    emptied.mkdir()
    code, out, err = _audit(str(emptied), *REQ_ARGS)
    assert code == EXIT_INTEGRITY and "directory is empty" in out, out + err
    created = tmp_path / "created.jsonl"  # stopped between its checkpoint and its file
    ChainedJsonlWriter(created).close()
    created.unlink()
    code, out, err = _audit(str(created), *REQ_ARGS)
    assert code == EXIT_OK and "integrity: INTACT" in out, out + err
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b"")  # an empty plain file: unprotected, still not an error
    code, out, _ = _audit(str(plain), *REQ_ARGS)
    assert code == EXIT_OK and "UNPROTECTED" in out
