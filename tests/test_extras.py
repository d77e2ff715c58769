"""Without an extra, a command that needs it says so in one line (exit 2), and the core commands
still work: each optional dependency is blocked in turn in a fresh interpreter, as if
`pip install wevent` had not installed it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wevent._extras import EXTRA_OF, missing_extra

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "wevent" / "examples"

RUNNER = textwrap.dedent(
    """\
    import importlib.abc, sys
    BLOCKED = set(sys.argv[1].split(","))

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    if sys.argv[2].endswith(".py"):  # a user script
        import runpy
        sys.argv = sys.argv[2:]
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:
        from wevent.cli import main
        main(sys.argv[2:])
    """
)

ALL_OPTIONAL = ",".join(EXTRA_OF)


def _run(blocked: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUNNER, blocked, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_the_core_checks_a_ledger_without_any_extra(tmp_path: Path) -> None:
    reqs = [
        a
        for kind in ("", ".dynamic", ".wholestream")
        for a in ("-r", str(EXAMPLES / f"requirements{kind}.csv"))
    ]
    good = _run(ALL_OPTIONAL, "check", str(EXAMPLES / "compliant.jsonl"), *reqs, cwd=tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "verdict: COMPLIANT" in good.stdout
    bad = _run(ALL_OPTIONAL, "check", str(EXAMPLES / "violating.jsonl"), *reqs, cwd=tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr


@pytest.mark.parametrize(
    ("extra", "args"),
    [
        ("prove", ["prove", "allocator", "pba", "--w-max", "2"]),
        ("prove", ["gate", "uniform", "--w-max", "2"]),
        ("audit", ["check", "LEDGER.parquet", "-r", "REQS"]),
        ("audit", ["audit", "LEDGER.jsonl", "-r", "REQS", "--engine", "duckdb"]),
        ("spark", ["audit", "LEDGER.jsonl", "-r", "REQS", "--engine", "spark"]),
        ("report", ["reproduce", "pwsm-w", "--quick", "--out", "rep"]),
        ("report", ["audit", "LEDGER.jsonl", "-r", "REQS", "--html", "out.html"]),
        ("sign", ["audit", "LEDGER.jsonl", "-r", "REQS", "--public-key", "key.pub"]),
        ("sign", ["ledger", "keygen", "ledger.key"]),
    ],
)
def test_a_missing_extra_is_one_line(extra: str, args: list[str], tmp_path: Path) -> None:
    args = [a.replace("REQS", str(EXAMPLES / "requirements.csv")) for a in args]
    args = [str(EXAMPLES / "compliant.jsonl") if a == "LEDGER.jsonl" else a for a in args]
    if "LEDGER.parquet" in args:  # a Parquet ledger needs pyarrow (audit extra) to be read
        from wevent.accounting.formats import read_ledger, write_ledger

        ledger = tmp_path / "run.parquet"
        write_ledger(read_ledger(EXAMPLES / "compliant.jsonl"), ledger)
        args = [str(ledger) if a == "LEDGER.parquet" else a for a in args]
    blocked = ",".join(m for m, e in EXTRA_OF.items() if e == extra)
    done = _run(blocked, *args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert f"`wevent {args[0]}" in lines[0] and f"needs the {extra} extra" in lines[0]
    assert f"pip install 'wevent[{extra}]'" in lines[0]
    assert not (tmp_path / "rep").exists()  # reproduce says so before it runs anything


def test_the_hint_names_only_optional_modules() -> None:
    assert missing_extra(ModuleNotFoundError("x", name="z3"), "prove") == (
        "`wevent prove` needs the prove extra (z3): pip install 'wevent[prove]'"
    )
    assert missing_extra(ModuleNotFoundError("x", name="numpy"), "check") is None
    assert missing_extra(ValueError("z3"), "prove") is None


def test_the_demo_names_every_extra_it_needs_before_it_starts(tmp_path: Path) -> None:
    done = _run(ALL_OPTIONAL, "demo", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "pip install 'wevent[audit,prove,report]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_facade_script_and_an_audit_run_in_the_core(tmp_path: Path) -> None:
    """The user script of `tests/test_facade.py` (guard, chained JSONL, check, audit against
    its head) and `wevent audit` of that ledger, with every optional module missing; a tampered
    line is an integrity failure (exit 5), not a missing extra."""
    from tests.test_facade import SCRIPT

    script = tmp_path / "task.py"
    script.write_text(textwrap.dedent(SCRIPT))
    ledger = tmp_path / "run.jsonl"
    done = _run(ALL_OPTIONAL, str(script), str(ledger), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "audit ok: True" in done.stdout
    reqs = tmp_path / "reqs.csv"
    reqs.write_text("user,w,epsilon\nalice,3,0.3\nbob,2,1/2\n")
    audit = _run(ALL_OPTIONAL, "audit", str(ledger), "-r", str(reqs), cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    lines = ledger.read_text().splitlines()
    lines[0] = lines[0].replace('"epsilon":"0.1"', '"epsilon":"0.01"')
    ledger.write_text("\n".join(lines) + "\n")
    tampered = _run(ALL_OPTIONAL, "audit", str(ledger), "-r", str(reqs), cwd=tmp_path)
    assert tampered.returncode == 5, tampered.stdout + tampered.stderr
    assert "integrity: BROKEN" in tampered.stdout and "extra" not in tampered.stderr


def test_a_run_on_a_synthetic_stream_needs_no_extra(tmp_path: Path) -> None:
    reqs = tmp_path / "reqs.csv"
    reqs.write_text("user,w,epsilon\nalice,3,0.3\nbob,2,1/2\n")
    done = _run(
        ALL_OPTIONAL,
        "run",
        "pba",
        "-r",
        str(reqs),
        "--stream",
        "sin",
        "--slots",
        "12",
        "--ledger",
        str(tmp_path / "run.jsonl"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_gate_fixture_fails_with_the_hint_without_the_prove_extra(tmp_path: Path) -> None:
    """A user's test that asks for `wevent_gate` without Z3 fails (never passes, never skips)
    with the install hint in one line, not an import traceback."""
    (tmp_path / "test_mine.py").write_text(
        "def test_gate(wevent_gate):\n    wevent_gate('uniform', w_max=2)\n", encoding="utf-8"
    )
    script = tmp_path / "run_pytest.py"
    script.write_text(
        "import sys, pytest\n"
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
        "'test_mine.py']))\n",
        encoding="utf-8",
    )
    # Only z3 is blocked: hypothesis's own pytest plugin (installed with it) would fail to load
    # under the blocker, which no real install without hypothesis sees.
    done = _run("z3", str(script), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error in" in done.stdout and "passed" not in done.stdout
    assert "skipped" not in done.stdout
    assert (
        "\nwevent_gate: `wevent gate` needs the prove extra(s): pip install 'wevent[prove]'\n"
        in done.stdout
    )
    assert "Traceback" not in done.stdout and "ModuleNotFoundError" not in done.stdout
