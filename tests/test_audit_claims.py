"""What `wevent check` and `wevent audit` say never claims more than they checked: check says it
did not verify a chain, "0 evidence failures" is counted against the charges that carry evidence,
an empty ledger is named empty, an unprotected ledger is not "ok", and a head given as a prefix is
called a prefix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.test_audit_cli import chained_copy
from wevent.accounting.durable import audit_integrity
from wevent.accounting.formats import count_records, read_ledger, read_requirements
from wevent.cli import cli
from wevent.cli._common import EXIT_INTEGRITY, EXIT_OK
from wevent.demo import example_path
from wevent.verifier.audit import run_audit
from wevent.verifier.check import check
from wevent.verifier.reference import reference_check
from wevent.verifier.report import SCHEMA_VERSION, render_html, render_markdown, report_json

FIXED = str(example_path("requirements.fixed.csv"))
REQS = [str(example_path("requirements.csv")), str(example_path("requirements.dynamic.csv"))]
REQ_ARGS = [a for r in REQS for a in ("-r", r)]
# Three charges without evidence (alice twice, bob once), within their fixed bounds.
NO_EVIDENCE = "".join(
    json.dumps({"slot": s, "user": u, "epsilon": "0.1"}) + "\n"
    for s, u in ((1, "alice"), (2, "alice"), (3, "bob"))
)


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout


def _chained(path: Path, source: str = "compliant.jsonl") -> None:
    chained_copy(path, source)


# ---------------------------------------------------------------- check: integrity (finding 4)


def test_check_says_a_durable_ledgers_chain_was_not_verified(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    _chained(path)
    lines = path.read_text().splitlines()
    record = json.loads(lines[-1])
    del record["evidence"]  # an edit the chain shows and the windows do not
    lines[-1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    assert not audit_integrity(path).ok  # the chain is stale: audit says so
    code, _ = _run("audit", str(path), *REQ_ARGS)
    assert code == EXIT_INTEGRITY
    code, out = _run("check", str(path), *REQ_ARGS)
    assert code == EXIT_OK and "verdict: COMPLIANT" in out
    assert (
        "integrity: not checked (wevent check reads the content only; run wevent audit to "
        "verify the chain)" in out
    )
    code, out = _run("check", str(path), *REQ_ARGS, "--json", "-")
    assert code == EXIT_OK and json.loads(out)["integrity"] == "not checked"


def test_check_calls_a_plain_ledger_unprotected(tmp_path: Path) -> None:
    code, out = _run("check", str(example_path("compliant.jsonl")), *REQ_ARGS)
    assert code == EXIT_OK and "integrity: unprotected (a plain ledger" in out
    assert "not checked" not in out
    code, out = _run("check", str(example_path("compliant.jsonl")), *REQ_ARGS, "--json", "-")
    assert json.loads(out)["integrity"] == "unprotected"


def test_check_help_says_what_it_does_not_check() -> None:
    code, out = _run("check", "--help")
    assert code == EXIT_OK and "What it does not check: the ledger's integrity" in out
    assert "wevent audit" in out and "not certified" in out


# ---------------------------------------------------------------- evidence counts (finding 5)


def test_no_evidence_is_never_read_as_costs_certified(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text(NO_EVIDENCE)
    code, out = _run("check", str(path), "-r", FIXED)
    assert code == EXIT_OK
    assert (
        "0 evidence failure(s) in 0 charge(s) with evidence, 3 charge(s) carry none: their "
        "costs are not certified" in out
    )
    code, out = _run("check", str(path), "-r", FIXED, "--json", "-")
    counts = json.loads(out)
    assert (counts["charges"], counts["charges_with_evidence"]) == (3, 0)
    assert counts["charges_without_evidence"] == 3
    md, page, js = tmp_path / "a.md", tmp_path / "a.html", tmp_path / "a.json"
    code, out = _run(
        "audit",
        str(path),
        "-r",
        FIXED,
        "--markdown",
        str(md),
        "--html",
        str(page),
        "--json",
        str(js),
    )
    assert code == EXIT_OK and "in 0 charge(s) with evidence" in out
    wanted = "No charge carries evidence: no cost was certified"
    evidence_md = md.read_text().split("## Evidence failures")[1].split("##")[0]
    assert wanted in evidence_md and "None." not in evidence_md
    assert wanted in page.read_text() and "None: every evidence record" not in page.read_text()
    verdict = json.loads(js.read_text())["verdict"]
    assert (verdict["charges"], verdict["charges_with_evidence"]) == (3, 0)


def test_evidence_section_counts_certified_and_uncertified_charges(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    with_evidence = example_path("compliant.jsonl").read_text()
    path.write_text(with_evidence + NO_EVIDENCE.replace('"slot": 1', '"slot": 7'))
    population = read_requirements([Path(r) for r in REQS])
    result = run_audit([path], population)
    v = result.verdict
    assert (v.charges, v.evidence_charges) == (16, 13)  # compliant.jsonl: 13, all with evidence
    md = render_markdown(result)
    assert "13 of 16 charge(s) carry evidence; every one certifies its charge." in md
    assert "3 charge(s) carry none: their costs are not certified." in md


@pytest.mark.parametrize("source", ["compliant.jsonl", "violating.jsonl"])
def test_every_engine_counts_the_same_charges_with_evidence(tmp_path: Path, source: str) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        example_path(source).read_text() + NO_EVIDENCE.replace('"slot": 1', '"slot": 9')
    )
    population = read_requirements([Path(r) for r in REQS])
    ledger = read_ledger(path)
    expected = sum(1 for ch in ledger if ch.evidence is not None)
    counts = {
        (v.charges, v.evidence_charges)
        for v in (
            check(ledger, population),
            reference_check(ledger, population),
            run_audit([path], population, engine="numpy").verdict,
            run_audit([path], population, engine="duckdb").verdict,
        )
    }
    assert counts == {(len(ledger), expected)} and expected < len(ledger)


# ---------------------------------------------------------------- per-file counts (finding 7)


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_an_empty_ledger_among_several_is_named_empty(tmp_path: Path, engine: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    util = example_path("compliant.jsonl")
    md, page, js = tmp_path / "a.md", tmp_path / "a.html", tmp_path / "a.json"
    code, out = _run(
        "audit",
        str(util),
        str(empty),
        *REQ_ARGS,
        "--engine",
        engine,
        "--markdown",
        str(md),
        "--html",
        str(page),
        "--json",
        str(js),
    )
    assert code == EXIT_OK
    charges = len(read_ledger(util))
    records = count_records(util)
    assert records == charges + len(read_ledger(util).groups)  # a group line is a record
    assert f"{util}: plain, {records} record(s), {charges} row(s)" in out
    assert f"{empty}: plain, 0 record(s), 0 row(s)" in out
    assert "  note: empty: no charge" in out and out.count("empty: no charge") == 1
    assert "empty: no charge" in md.read_text() and "empty: no charge" in page.read_text()
    first, second = json.loads(js.read_text())["integrity"]
    assert (first["records"], first["rows"], first["notes"]) == (records, charges, [])
    assert (second["records"], second["rows"], second["notes"]) == (0, 0, ["empty: no charge"])


@pytest.mark.spark
def test_spark_counts_what_numpy_counts(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text(NO_EVIDENCE.replace('"slot": 1', '"slot": 9'))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    files = [example_path("violating.jsonl"), plain, empty]
    population = read_requirements([Path(r) for r in REQS])
    seen = set()
    for engine in ("numpy", "spark"):
        result = run_audit(files, population, engine=engine)
        v = result.verdict
        per_file = tuple((i.records, i.rows, i.notes) for i in result.integrity)
        seen.add((v.charges, v.evidence_charges, per_file))
    assert len(seen) == 1


def test_plain_counts_follow_the_files_in_a_mixed_audit(tmp_path: Path) -> None:
    chained = tmp_path / "run.jsonl"
    _chained(chained, "violating.jsonl")
    plain = tmp_path / "plain.jsonl"
    plain.write_text(NO_EVIDENCE.replace('"slot": 1', '"slot": 9'))
    population = read_requirements([Path(r) for r in REQS])
    for engine in ("numpy", "duckdb"):
        result = run_audit([chained, plain], population, engine=engine)
        first, second = result.integrity
        assert first.layout == "chained-jsonl" and first.rows == len(read_ledger(chained))
        assert (second.records, second.rows) == (3, 3), engine
        assert result.verdict.charges == first.rows + second.rows


def test_integrity_alone_does_not_claim_counts_it_did_not_take() -> None:
    found = audit_integrity(example_path("compliant.jsonl"))
    assert not found.counted and "record(s)" not in found.summary()
    assert found.to_json()["records"] is None and found.to_json()["rows"] is None


# ---------------------------------------------------------------- top-level ok (finding 8)


def test_json_ok_is_false_for_an_unprotected_ledger(tmp_path: Path) -> None:
    js = tmp_path / "a.json"
    code, _ = _run("audit", str(example_path("compliant.jsonl")), *REQ_ARGS, "--json", str(js))
    report = json.loads(js.read_text())
    assert code == EXIT_OK and report["status"] == "compliant"  # a warning, exit 0
    assert report["ok"] is False and report["compliant"] is True
    assert report["integrity"][0]["state"] == "unprotected"
    assert report["schema_version"] == SCHEMA_VERSION == 2
    path = tmp_path / "run.jsonl"
    _chained(path)
    code, _ = _run("audit", str(path), *REQ_ARGS, "--json", str(js))
    report = json.loads(js.read_text())
    assert code == EXIT_OK and report["ok"] is True and report["compliant"] is True


def test_html_marks_an_unprotected_compliant_audit_as_a_warning() -> None:
    population = read_requirements([Path(r) for r in REQS])
    result = run_audit([example_path("compliant.jsonl")], population)
    assert result.status == "compliant" and not result.ok
    assert "<p id='verdict' class='warn'>" in render_html(result)
    assert report_json(result)["ok"] is False


# ---------------------------------------------------------------- a head prefix (finding 13c)


def test_a_head_prefix_is_called_a_prefix(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    _chained(path)
    head = audit_integrity(path).head
    code, out = _run("audit", str(path), *REQ_ARGS, "--expect-head", head[:16])
    assert code == EXIT_OK
    assert "anchored by checkpoint, expected head (a 16-digit prefix of the head)" in out
    code, out = _run("audit", str(path), *REQ_ARGS, "--expect-head", head[:20])
    assert "expected head (a 20-digit prefix of the head)" in out
    code, out = _run("audit", str(path), *REQ_ARGS, "--expect-head", head)
    assert code == EXIT_OK and "anchored by checkpoint, expected head, head" in out
    assert "prefix of the head" not in out


# ---------------------------------------------------------------- a run header (finding 7, part 2)


def test_a_truncated_durable_ledger_with_its_run_header_is_not_plain(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    code, _ = _run(
        "run", "pba", "-r", FIXED, "--stream", "sin", "--slots", "5", "--seed", "1",
        "--ledger", str(path),
    )  # fmt: skip
    header = path.with_name("run.jsonl.run.json")
    assert code == EXIT_OK and json.loads(header.read_text())["format"] == "wevent-run/1"
    path.write_bytes(b"")  # truncated, and the checkpoint that would show it deleted
    path.with_name("run.jsonl.head").unlink()
    code, out = _run("audit", str(path), "-r", FIXED)
    assert code == EXIT_INTEGRITY and "checkpoint is missing" in out
    assert "note: durable by its run header run.jsonl.run.json" in out
    code, out = _run("check", str(path), "-r", FIXED)
    assert code == EXIT_OK and "integrity: not checked" in out
    header.unlink()  # without the header nothing shows the file was ever durable
    code, out = _run("audit", str(path), "-r", FIXED)
    assert code == EXIT_OK and "not chained" in out and "empty: no charge" in out


def test_a_ledger_rewritten_as_plain_beside_its_old_run_header_is_plain(tmp_path: Path) -> None:
    """A run header marks only an empty or missing file durable: a ledger rewritten on purpose
    as plain JSONL (its checkpoint deleted, the header left behind) was an integrity failure
    (exit 5); it is audited as a plain ledger, unprotected, as it would be without the header."""
    from wevent.accounting.formats import read_ledger, write_ledger

    path = tmp_path / "run.jsonl"
    code, _ = _run(
        "run", "pba", "-r", FIXED, "--stream", "sin", "--slots", "5", "--seed", "1",
        "--ledger", str(path),
    )  # fmt: skip
    assert code == EXIT_OK and path.with_name("run.jsonl.run.json").is_file()
    path.with_name("run.jsonl.head").unlink()
    write_ledger(read_ledger(path), path)  # the same charges, plain: no chain
    code, out = _run("audit", str(path), "-r", FIXED)
    assert code == EXIT_OK and "UNPROTECTED" in out and "not chained" in out, out
    code, out = _run("check", str(path), "-r", FIXED)
    assert code == EXIT_OK and "integrity: unprotected" in out, out
