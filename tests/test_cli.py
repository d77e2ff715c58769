import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from wevent.cli import cli
from wevent.demo import example_path

REQ = [str(example_path("requirements.csv")), str(example_path("requirements.dynamic.csv"))]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def req_args() -> list[str]:
    return [a for r in REQ for a in ("-r", r)]


def test_compliant_example_passes() -> None:
    code, out, _ = run("check", str(example_path("compliant.jsonl")), *req_args())
    assert code == 0
    assert "COMPLIANT" in out and "NOT COMPLIANT" not in out


def test_violating_example_reports_each_kind_exactly() -> None:
    code, out, _ = run("check", str(example_path("violating.jsonl")), *req_args(), "--json")
    assert code == 1
    verdict = json.loads(out)
    assert verdict["ok"] is False
    kinds = {(v["kind"], v["users"][0], v["excess"]) for v in verdict["violations"]}
    assert ("fixed", "alice", "1/1000000000000000000") in kinds
    assert ("whole-stream", "carol", "1/2") in kinds
    assert ("backward", "dave", "1/10") in kinds
    assert ("forward", "dave", "1/10") in kinds
    backward = next(v for v in verdict["violations"] if v["kind"] == "backward")
    assert backward["window"] == [1, 5] and backward["anchor"] == 5
    assert backward["spends"] == [[1, "9/10"], [2, "9/10"], [3, "7/10"], [5, "3/5"]]
    assert backward["sum"] == "31/10" and backward["bound"] == "3"
    assert verdict["evidence_failures"][0]["evidence"]["scale"] == "5"
    assert verdict["utilization"]["classes"]["class-2"] == "5/4"


def test_three_tenths_pass_and_an_excess_of_1e_18_fails(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\nu,3,0.3\n")
    ok = tmp_path / "ok.csv"
    ok.write_text("slot,user,epsilon\n1,u,0.1\n2,u,0.1\n3,u,0.1\n")
    assert run("check", str(ok), "-r", str(req))[0] == 0
    bad = tmp_path / "bad.csv"
    bad.write_text("slot,user,epsilon\n1,u,0.1\n2,u,0.1\n3,u,0.100000000000000001\n")
    code, out, _ = run("check", str(bad), "-r", str(req))
    assert code == 1
    assert "excess 0.000000000000000001" in out


@pytest.mark.parametrize(
    "ledger_text, req_text, message",
    [
        ("slot,user,epsilon\n1,u,abc\n", "user,w,epsilon\nu,3,0.3\n", "not an exact number"),
        ("slot,user\n1,u\n", "user,w,epsilon\nu,3,0.3\n", "missing column"),
        ("slot,user,epsilon\n0,u,0.1\n", "user,w,epsilon\nu,3,0.3\n", "numbered from 1"),
        ("slot,user,epsilon\n1,u,0.1\n", "user,w,epsilon\nu,0,0.3\n", "at least 1 slot"),
        ("slot,user,epsilon\n1,u,0.1\n", "user,w,epsilon\nu,3,-0.3\n", "negative"),
        ("slot,user,epsilon\n1,u,NaN\n", "user,w,epsilon\nu,3,0.3\n", "not a finite number"),
    ],
)
def test_malformed_input_is_one_line_and_exit_2(
    tmp_path: Path, ledger_text: str, req_text: str, message: str
) -> None:
    ledger = tmp_path / "l.csv"
    ledger.write_text(ledger_text)
    req = tmp_path / "r.csv"
    req.write_text(req_text)
    code, out, err = run("check", str(ledger), "-r", str(req))
    assert code == 2
    assert out == ""
    assert err.startswith("wevent check: error: ") and message in err
    assert err.count("\n") == 1


def test_missing_requirements_is_a_usage_error() -> None:
    code, _, err = run("check", str(example_path("compliant.jsonl")))
    assert code == 2 and "--requirements" in err


def test_help_teaches() -> None:
    code, out, _ = run("--help")
    assert code == 0 and "wevent demo" in out and "check" in out
    code, out, _ = run("check", "--help")
    text = " ".join(out.split())
    assert code == 0 and "COMPLIANT (exit 0)" in text and "w=inf" in text


def test_demo_prints_both_verdicts() -> None:
    code, out, _ = run("demo")
    assert code == 0
    assert "compliant.jsonl" in out and "violating.jsonl" in out
    assert out.count("NOT COMPLIANT") == 1
    assert "4 spend(s) refused" in out
    # Three primitives proved by Z3 (scope given), SM only checked at a finite set.
    assert out.count(": proved (Z3: ") == 3 and out.count("sm: checked (finite exact checks") == 1
    assert out.count("300 of 300 slots run") == 2  # pba and plpa+
    assert out.count("refused spend at slot") == 7  # 4 replayed + 3 published variants
    assert "dpbd (sound), same input: guard accepted 2 slots" in out
    assert "plpd+ (sound): split ceil(5/2) = 3; guard accepted 6 slots" in out
    # The demo ends with the HTML audit reports of its runs, paths printed.
    last = out.strip().splitlines()[-1].strip()
    assert last.startswith("HTML audit report: ") and last.endswith("-audit.html")
    report = Path(last.removeprefix("HTML audit report: "))
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    # ... naming every input file with its SHA-256: the ledger and the requirements
    requirements = report.parent / "audit-requirements.csv"
    assert hashlib.sha256(requirements.read_bytes()).hexdigest() in page
    assert str(requirements) in page and page.count("<td>ledger</td>") >= 1


def test_prove_prints_the_proved_statement() -> None:
    code, out, _ = run("prove", "primitive", "grr", "--domain", "5")
    assert code == 0
    assert "grr: PROVED" in out and "P[y|x] <= e^eps P[y|x']" in out
    code, out, _ = run("prove", "primitive", "all", "--json")
    assert code == 0
    results = {r["name"]: r for r in json.loads(out)}
    assert set(results) == {"grr", "oue", "pue", "sm"}
    # Found in review: SM's finite grid of exact checks was reported as "proved" by "z3".
    assert results["sm"]["result"] == "checked" and "solver" not in results["sm"]
    assert results["sm"]["proved_for"] is None and "1000" in results["sm"]["checked_at"]
    for name in ("grr", "oue", "pue"):
        assert results[name]["result"] == "proved" and results[name]["solver"].startswith("z3")
        assert "every" in results[name]["proved_for"] and "{0.05" in results[name]["checked_at"]
    code, _, err = run("prove", "laplace")
    assert code == 2 and "laplace" in err


def test_prove_primitive_first_lines_give_their_scope() -> None:
    # Found in review: "grr: PROVED (0.05 s)" gave no scope, and "sm: PROVED" covered a finite
    # grid checked without a solver. A checked-only result exits 0 but is not called a proof.
    code, out, _ = run("prove", "primitive", "sm")
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("sm: CHECKED, not proved (finite exact checks, no solver")
    assert "PROVED" not in out and "60, 61, 100, 700, 1000" in first
    code, out, _ = run("prove", "primitive", "grr", "--domain", "3")
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("grr: PROVED (Z3: the formulas p, q at every real d")
    assert "finite exact checks, no solver: the code's rounded p, q for d = 3" in first


def test_extreme_ratios_display_without_crashing(tmp_path: Path) -> None:
    # Found in review: float() of a huge utilization overflowed in the text output.
    req = tmp_path / "r.csv"
    req.write_text("user,w,epsilon\nu,2,1e-300\n")
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(
        '{"slot": 1, "user": "u", "epsilon": "1e300", "evidence": {"kind": "laplace", '
        '"sensitivity": "1e300", "scale": "1e-300"}}\n'
    )
    code, out, err = run("check", str(ledger), "-r", str(req))
    assert code == 1 and err == ""
    assert "E+600" in out  # the utilization, shown approximately for display
