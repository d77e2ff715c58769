"""Malformed, ambiguous and hostile inputs: each refused with one line naming the file (and the
line where there is one), exit 2, no traceback, no hang; valid inputs beside them accepted."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wevent.accounting import inputs
from wevent.accounting.budget import DIGITS_VARIABLE, BudgetError
from wevent.cli import cli
from wevent.cli._common import EXIT_INPUT

REQ = "user,w,epsilon\nalice,3,0.3\nbob,5,1\n"
CHARGE = {"slot": 1, "user": "alice", "epsilon": "0.1"}


def _check(tmp: Path, ledger: str | bytes, name: str = "l.jsonl", reqs: str = REQ) -> Result:
    path = tmp / name
    if isinstance(ledger, str):
        path.write_text(ledger, encoding="utf-8")
    else:
        path.write_bytes(ledger)
    (tmp / "r.csv").write_text(reqs, encoding="utf-8")
    return CliRunner().invoke(cli, ["check", str(path), "-r", str(tmp / "r.csv")])


def _one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == EXIT_INPUT, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("wevent check: error: ") and "Traceback" not in result.output
    assert len(lines[0]) < 400, lines[0]  # nothing echoed whole
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _jsonl(*records: dict[str, Any] | str) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


CASES: dict[str, tuple[str | bytes, str, tuple[str, ...]]] = {
    "JSON nested 100,000 deep": (
        '{"slot":1,"user":"alice","epsilon":"0.1","evidence":'
        + "[" * 100_000
        + "]" * 100_000
        + "}\n",
        "l.jsonl",
        ("l.jsonl:1", "nested deeper than the JSON parser can follow"),
    ),
    "a CSV field past the csv module's own limit": (
        "slot,user,epsilon\n1," + "a" * 140_000 + ",0.1\n",
        "l.csv",
        ("l.csv:2", "longer than the CSV reader's limit of 131,072 characters"),
    ),
    "a JSON integer of 3,000,000 digits (converting it took 37 s)": (
        '{"slot": ' + "1" * 3_000_000 + ', "user": "alice", "epsilon": "0.1"}\n',
        "l.jsonl",
        ("l.jsonl:1", "an integer of 3,000,000 digits is longer than the limit of 1,000"),
    ),
    "a superscript digit in an evidence integer (int() refused what isdigit() took)": (
        _jsonl(
            {
                **CHARGE,
                "evidence": {"kind": "grr", "d": "\u00b2", "p": "1/2", "q": "1/2"},
            }
        ),
        "l.jsonl",
        ("l.jsonl:1", "grr.d must be a whole number in ASCII digits"),
    ),
    "a 1 MB user id": (
        _jsonl({**CHARGE, "user": "a" * 1_000_000}),
        "l.jsonl",
        ("l.jsonl:1", "limit of 4,096"),
    ),
    "a duplicate JSON key": (
        '{"slot":1,"user":"alice","user":"bob","epsilon":"0.1"}\n',
        "l.jsonl",
        ("l.jsonl:1", "key 'user' appears twice"),
    ),
    "a duplicate key inside evidence": (
        '{"slot":1,"user":"alice","epsilon":"0.1","evidence":{"kind":"laplace","scale":"1","scale":"2"}}\n',
        "l.jsonl",
        ("l.jsonl:1", "key 'scale' appears twice"),
    ),
    "a slot given as a JSON string": (
        _jsonl({**CHARGE, "slot": "1"}),
        "l.jsonl",
        ("l.jsonl:1", "JSON integer"),
    ),
    "a 5,000-digit slot": (
        '{"slot":' + "9" * 5000 + ',"user":"alice","epsilon":"0.1"}\n',
        "l.jsonl",
        ("l.jsonl:1",),
    ),
    "a NUL in a JSON id": (
        _jsonl({**CHARGE, "user": "al\u0000ice"}),
        "l.jsonl",
        ("l.jsonl:1", "NUL"),
    ),
    "a group listing a member twice (JSONL)": (
        _jsonl(
            {"group": "g", "members": ["alice", "alice"]},
            {"slot": 1, "group": "g", "epsilon": "0.1"},
        ),
        "l.jsonl",
        ("l.jsonl:1", "lists member 'alice' twice"),
    ),
    "a group listing a member twice (CSV)": (
        "slot,user,group,epsilon\n,alice,g,\n,alice,g,\n1,,g,0.1\n",
        "l.csv",
        ("l.csv:3", "lists member 'alice' twice", "first at"),
    ),
    "a column twice in a CSV header": (
        "slot,user,user,epsilon\n1,alice,bob,0.1\n",
        "l.csv",
        ("l.csv:1", "'user' appears twice"),
    ),
    "Arabic-Indic digits": (
        "slot,user,epsilon\n\u0661,alice,0.1\n",
        "l.csv",
        ("l.csv:2", "ASCII digits"),
    ),
    "fullwidth digits": (
        "slot,user,epsilon\n1,alice,\uff10.\uff11\n",
        "l.csv",
        ("l.csv:2", "ASCII digits"),
    ),
    "a trailing non-breaking space": (
        "slot,user,epsilon\n1,alice,0.1\u00a0\n",
        "l.csv",
        ("l.csv:2", "epsilon"),
    ),
    "a trailing vertical tab": (
        "slot,user,epsilon\n1,alice,0.1\x0b\n",
        "l.csv",
        ("l.csv:2", "epsilon"),
    ),
    "a NUL in a CSV field": (b"slot,user,epsilon\n1,al\x00ice,0.1\n", "l.csv", ("l.csv:2", "NUL")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_ledger_is_one_line_naming_file_and_line(case: str, tmp_path: Path) -> None:
    content, name, fragments = CASES[case]
    _one_line_error(_check(tmp_path, content, name), *fragments)


@pytest.mark.parametrize(
    ("case", "reqs", "fragments"),
    [
        (
            "fixed and dynamic columns in one header",
            "user,w,epsilon,w_back\nalice,3,0.3,2\n",
            ("r.csv:1", "both the fixed columns"),
        ),
        (
            "two declarations for one slot",
            "user,slot,w_back,eps_back,w_fwd,eps_fwd\ndave,1,2,1,2,1\ndave,1,3,1,3,1\n",
            ("r.csv:3", "second requirement for slot 1", "r.csv:2"),
        ),
        (
            "an Arabic-Indic window",
            "user,w,epsilon\nalice,\u0663,0.3\n",
            ("r.csv:2", "ASCII digits"),
        ),
        ("a NUL in a user id", "user,w,epsilon\nal\x00ice,3,0.3\n", ("r.csv:2", "NUL")),
    ],
)
def test_a_hostile_requirements_file_is_one_line(
    case: str, reqs: str, fragments: tuple[str, ...], tmp_path: Path
) -> None:
    _one_line_error(_check(tmp_path, _jsonl(CHARGE), reqs=reqs), *fragments)


@pytest.mark.parametrize("what", ["ledger", "requirements"])
def test_a_fifo_or_a_directory_is_refused_without_blocking(what: str, tmp_path: Path) -> None:
    """A FIFO would block the reader forever (and /dev/zero never end): only regular files."""
    fifo = tmp_path / ("f.jsonl" if what == "ledger" else "f.csv")
    os.mkfifo(fifo)
    folder = tmp_path / ("d.jsonl" if what == "ledger" else "d.csv")
    folder.mkdir()
    (tmp_path / "l.jsonl").write_text(_jsonl(CHARGE))
    (tmp_path / "r.csv").write_text(REQ)
    for special, kind in ((fifo, "a FIFO"), (folder, "a directory")):
        ledger, reqs = (
            (special, tmp_path / "r.csv") if what == "ledger" else (tmp_path / "l.jsonl", special)
        )
        result = CliRunner().invoke(cli, ["check", str(ledger), "-r", str(reqs)])
        _one_line_error(result, str(special), kind, "not a regular file")


def _wide(count: int) -> str:
    """``count`` charges whose amounts have distinct 400-digit denominators."""
    return _jsonl(
        *({"slot": k, "user": "alice", "epsilon": f"1/{10**399 + k}"} for k in range(1, count + 1))
    )


def test_many_distinct_huge_denominators_are_bounded_and_the_limit_configurable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their common denominator grows with each (2,000 distinct 1/(10^900+i) used to hang the
    checker): past WEVENT_MAX_DIGITS (10,000) digits it is refused, naming the limit; a single
    1e-400, within it, is exact as before."""
    _one_line_error(_check(tmp_path, _wide(40)), "more than 10,000 digits", DIGITS_VARIABLE)
    assert _check(tmp_path, _wide(3)).exit_code == 0
    monkeypatch.setenv(DIGITS_VARIABLE, "20000")
    assert _check(tmp_path, _wide(40)).exit_code == 0
    monkeypatch.setenv(DIGITS_VARIABLE, "many")
    _one_line_error(_check(tmp_path, _wide(3)), DIGITS_VARIABLE)


@pytest.mark.parametrize(
    "content",
    [
        _jsonl(CHARGE),
        _jsonl({**CHARGE, "user": "a\u2028b\u0085c"}),  # line separators are characters in JSON
        "slot,user,epsilon\n1,alice, 0.1 \n",  # spaces and tabs around a number are padding
        "slot,user,epsilon\r\n1,alice,1 / 10\r\n",
    ],
)
def test_valid_inputs_beside_them_are_accepted(content: str, tmp_path: Path) -> None:
    name = "l.csv" if content.startswith("slot,") else "l.jsonl"
    result = _check(tmp_path, content, name, reqs=REQ + "a\u2028b\u0085c,3,1\n")
    assert result.exit_code == 0, result.output


_VALID = _jsonl(
    {"group": "g", "members": ["alice", "bob"]}, {"slot": 1, "group": "g", "epsilon": "0.1"}, CHARGE
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_mutation_of_a_valid_ledger_is_accepted_or_one_line(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Fuzzing: bytes inserted, deleted or replaced anywhere in a valid JSONL or CSV ledger. The
    checker accepts the result (exit 0 or 1: a verdict) or refuses it in one line naming the
    file (exit 2); never a traceback."""
    csv = data.draw(st.booleans())
    base = (
        b"slot,user,group,epsilon\n,alice,g,\n,bob,g,\n1,,g,0.1\n1,alice,,1/10\n"
        if csv
        else _VALID.encode()
    )
    out = bytearray(base)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(out)))
        junk = data.draw(
            st.sampled_from(
                [
                    b"\x00",
                    b"\xff",
                    b'"',
                    b"{",
                    b"}",
                    b",",
                    b"\n",
                    b"9" * 40,
                    b"\xc2\xa0",
                    b"\\",
                    b"-",
                    b"/0",
                    b"e999",
                ]
            )
        )
        if data.draw(st.booleans()) and at < len(out):
            del out[at : at + data.draw(st.integers(1, 5))]
        else:
            out[at:at] = junk
    tmp = tmp_path_factory.mktemp("fuzz")
    result = _check(tmp, bytes(out), "l.csv" if csv else "l.jsonl")
    if result.exit_code in (0, 1):
        return
    _one_line_error(result, str(tmp / ("l.csv" if csv else "l.jsonl")))


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _one_line(result: Result, command: str, *fragments: str) -> None:
    assert result.exit_code == EXIT_INPUT, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"wevent {command}: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_flags_that_would_mean_no_limit_or_a_silent_guess_are_refused(tmp_path: Path) -> None:
    (tmp_path / "l.jsonl").write_text(_jsonl(CHARGE))
    (tmp_path / "r.csv").write_text(REQ)
    audit = ["audit", str(tmp_path / "l.jsonl"), "-r", str(tmp_path / "r.csv"), "--engine"]
    for bad in ("-1GB", "0MB", "lots", "4 parsecs"):
        _one_line(_invoke(*audit, "duckdb", "--memory-limit", bad), "audit", "--memory-limit")
    assert _invoke(*audit, "duckdb", "--memory-limit", "512MB").exit_code == 0
    trace = ["trace", "pba", "-r", str(tmp_path / "r.csv"), "--decisions"]
    for bad in ("1,,0", "1,0,", ",1"):
        _one_line(_invoke(*trace, bad), "trace", "is empty")
    assert _invoke(*trace, "1, 0, 1").exit_code == 0 and _invoke(*trace, "1 0").exit_code == 0


def test_a_domain_is_bounded_before_anything_is_allocated(tmp_path: Path) -> None:
    """A synthetic stream of 10^9 values, or a CSV stream whose largest value implies as many,
    used to exhaust memory: refused naming the limit."""
    from wevent.mechanisms.streams import MAX_DOMAIN

    (tmp_path / "r.csv").write_text(REQ)
    run = ["run", "pba", "-r", str(tmp_path / "r.csv"), "--slots", "3"]
    _one_line(_invoke(*run, "--stream", "sin", "--domain", "1000000000"), "run", f"{MAX_DOMAIN:,}")
    stream = tmp_path / "s.csv"
    stream.write_text(f"user,slot,value\nalice,1,{MAX_DOMAIN * 10}\nbob,1,0\n")
    _one_line(_invoke(*run, "--stream", str(stream)), "run", str(stream), f"{MAX_DOMAIN:,}")
    assert _invoke(*run, "--stream", "sin", "--domain", "1000").exit_code == 0


def test_filling_a_long_span_of_short_slots_is_bounded_before_allocating() -> None:
    import numpy as np

    from wevent.accounting.budget import BudgetError
    from wevent.mechanisms.datasets import MAX_FILL_CELLS, _fill

    one = np.array([0], np.int64)
    with pytest.raises(BudgetError, match="choose a longer --interval"):
        _fill(one, one + 1, one, 2, MAX_FILL_CELLS)  # 22 years at 1 s is 6.9e8 slots
    assert len(_fill(one, one + 1, one, 2, 3)[0]) == 3


# ------------------------------------------------------------------ found in review


def test_evidence_nested_too_deep_in_a_csv_field_is_one_line(tmp_path: Path) -> None:
    deep = "[" * 30_000 + "]" * 30_000
    _one_line_error(
        _check(tmp_path, f'slot,user,epsilon,evidence\n1,alice,0.1,"{deep}"\n', "l.csv"),
        "l.csv:2",
        "evidence",
    )
    twice = '"{""kind"":""laplace"",""sensitivity"":""1"",""scale"":""1"",""scale"":""2""}"'
    _one_line_error(
        _check(tmp_path, f"slot,user,epsilon,evidence\n1,alice,0.1,{twice}\n", "l.csv"),
        "l.csv:2",
        "appears twice",
    )


def test_a_chained_ledger_with_a_hostile_line_is_an_integrity_failure_not_a_crash(
    tmp_path: Path,
) -> None:
    from wevent.accounting.durable import ChainedJsonlWriter, audit_integrity, repair

    path = tmp_path / "l.jsonl"
    with ChainedJsonlWriter(path) as w:
        w.append(CHARGE)
    committed = path.read_bytes()
    for line in (b"[" * 100_000 + b"]" * 100_000, b'{"slot":2,"slot":3}'):
        path.write_bytes(committed + line + b"\n")
        found = audit_integrity(path)
        assert found.state == "broken" and found.problems[0].line == 2
        with pytest.raises(BudgetError):
            repair(path)  # refused, untouched: not a traceback
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")  # a plain file's first line
    (tmp_path / "l.jsonl.head").unlink()
    _one_line_error(_check(tmp_path, path.read_bytes()), "l.jsonl:1", "nested deeper than")


def test_a_fifo_is_refused_by_every_reader(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text(REQ)
    reqs = ["-r", str(tmp_path / "r.csv")]
    for name in ("f.parquet", "f.jsonl", "s.csv", "checkins.txt"):
        os.mkfifo(tmp_path / name)
    fifo = str(tmp_path / "f.parquet")
    for args, command in (
        (["check", fifo, *reqs], "check"),
        (["audit", fifo, *reqs, "--engine", "duckdb"], "audit"),
        (["audit", str(tmp_path / "f.jsonl"), *reqs], "audit"),
        (["run", "pba", *reqs, "--stream", str(tmp_path / "s.csv"), "--slots", "2"], "run"),
    ):
        _one_line(_invoke(*args), command, "a FIFO")
    from wevent.mechanisms.datasets import foursquare_observations, tdrive_observations

    with pytest.raises(BudgetError, match="a FIFO"):
        tdrive_observations([tmp_path / "checkins.txt"])
    with pytest.raises(BudgetError, match="a FIFO"):
        foursquare_observations(tmp_path / "checkins.txt", tmp_path / "r.csv")


def test_a_repair_that_crashes_after_settling_leaves_a_repairable_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit whose checkpoint slot write was torn: repair settles the checkpoint first, so
    a crash before its cut leaves an ordinary tail that the next repair cuts."""
    from wevent.accounting import durable
    from wevent.accounting.durable import CHECKPOINT_SLOT, ChainedJsonlWriter, audit_integrity

    path = tmp_path / "l.jsonl"
    w = ChainedJsonlWriter(path)
    w.append(CHARGE)
    w.commit()
    w.append({**CHARGE, "slot": 2})
    w.commit()
    mark = path.with_name(path.name + ".head")
    data = bytearray(mark.read_bytes())
    latest = 0 if json.loads(data[:CHECKPOINT_SLOT])["records"] == 2 else 1
    data[latest * CHECKPOINT_SLOT + 3 : latest * CHECKPOINT_SLOT + 30] = b"\x00" * 27
    mark.write_bytes(bytes(data))
    assert audit_integrity(path).torn[0].kind == "unanchored"

    def crash(*args: object) -> None:
        raise OSError("power lost")

    monkeypatch.setattr(durable, "_cut_file", crash)
    with pytest.raises(OSError):
        durable.repair(path)
    monkeypatch.undo()
    assert audit_integrity(path).state == "intact"
    durable.repair(path)
    assert audit_integrity(path).ok and audit_integrity(path).records == 1


def test_the_verified_prefix_of_a_ledger_with_a_tail_is_read_under_every_rule(
    tmp_path: Path,
) -> None:
    """A committed record the reader would refuse is refused whether or not a torn tail
    follows it (the prefix the audit covers used to skip the reader's rules), naming the
    user's ledger and the line."""
    from wevent.accounting.durable import ChainedJsonlWriter

    path = tmp_path / "l.jsonl"
    with ChainedJsonlWriter(path) as w:
        w.append(CHARGE)
    (tmp_path / "r.csv").write_text(REQ)
    lines = path.read_bytes()
    from wevent.accounting.durable import GENESIS_HEAD, chain_step

    record = {"slot": "2", "user": "alice", "epsilon": "0.1"}  # a string slot, chained
    head = chain_step(chain_step(GENESIS_HEAD, json.loads(lines)), record)
    path.write_bytes(lines + json.dumps({**record, "chain": head}).encode() + b"\n")
    mark = path.with_name(path.name + ".head")
    mark.write_text(json.dumps({"records": 2, "head": head}) + "\n")
    for tail in (b"", b'{"slot":3'):
        with path.open("ab") as fh:
            fh.write(tail)
        result = _invoke("audit", str(path), "-r", str(tmp_path / "r.csv"))
        _one_line(result, "audit", f"{path}:2", "JSON integer")


def test_the_sql_engines_bound_the_common_denominator_as_numpy_does(tmp_path: Path) -> None:
    wide = tmp_path / "w.jsonl"
    wide.write_text(_wide(40))
    (tmp_path / "r.csv").write_text(REQ)
    messages = set()
    for engine in ("numpy", "duckdb"):
        result = _invoke("audit", str(wide), "-r", str(tmp_path / "r.csv"), "--engine", engine)
        _one_line(result, "audit", DIGITS_VARIABLE)
        messages.add(result.stderr)
    assert len(messages) == 1


def test_the_digit_bound_holds_from_python_past_str_limits(tmp_path: Path) -> None:
    """From Python (no CLI lifting the 4,300-digit str() limit) the bound is a BudgetError."""
    from wevent.accounting.formats import read_ledger, read_requirements
    from wevent.verifier.check import check

    (tmp_path / "w.jsonl").write_text(
        _jsonl(*({"slot": k, "user": "alice", "epsilon": f"1/{10**899 + k}"} for k in range(1, 13)))
    )
    (tmp_path / "r.csv").write_text(REQ)
    with pytest.raises(BudgetError, match=DIGITS_VARIABLE):
        check(read_ledger(tmp_path / "w.jsonl"), read_requirements(tmp_path / "r.csv"))


def test_a_checkpoint_file_cut_to_one_slot_is_unreadable(tmp_path: Path) -> None:
    from wevent.accounting.durable import CHECKPOINT_SLOT, ChainedJsonlWriter, audit_integrity

    path = tmp_path / "l.jsonl"
    with ChainedJsonlWriter(path) as w:
        for slot in (1, 2, 3):
            w.append({**CHARGE, "slot": slot})
            w.commit()
    mark = path.with_name(path.name + ".head")
    for keep in (0, 1):  # either slot alone
        data = mark.read_bytes()
        mark.write_bytes(data[keep * CHECKPOINT_SLOT :][:CHECKPOINT_SLOT])
        found = audit_integrity(path)
        assert found.state == "broken" and "cut short" in found.problems[0].message
        mark.write_bytes(data)


def test_what_review_found_refused_too_eagerly_is_accepted(tmp_path: Path) -> None:
    """Trailing unnamed CSV columns (a spreadsheet's export), a fixed requirements file with a
    'slot' column, DuckDB's other size forms; and a writer refuses what readers refuse."""
    from wevent.accounting.durable import ChainedJsonlWriter, RecordError

    assert _check(tmp_path, "slot,user,epsilon,,\n1,alice,0.1,,\n", "l.csv").exit_code == 0
    assert (
        _check(tmp_path, _jsonl(CHARGE), reqs="user,w,epsilon,slot\nalice,3,0.3,7\n").exit_code == 0
    )
    (tmp_path / "l.jsonl").write_text(_jsonl(CHARGE))
    audit = [
        "audit",
        str(tmp_path / "l.jsonl"),
        "-r",
        str(tmp_path / "r.csv"),
        "--engine",
        "duckdb",
    ]
    for size in ("4G", "80%", "1.5GiB"):
        assert _invoke(*audit, "--memory-limit", size).exit_code == 0, size
    for bad in ("1B", "150%"):
        _one_line(_invoke(*audit, "--memory-limit", bad), "audit", "--memory-limit")
    trace = ["trace", "pba", "-r", str(tmp_path / "r.csv"), "--decisions"]
    for bad in ("1,\n,0", "1,0,\n"):
        _one_line(_invoke(*trace, bad), "trace", "is empty")
    with ChainedJsonlWriter(tmp_path / "w.jsonl") as w:
        for user in ("al\x00ice", "a" * 5000):
            with pytest.raises(RecordError):
                w.append({**CHARGE, "user": user})
        with pytest.raises(RecordError):
            w.define_group("g", ["a", "b\x00"])


def test_a_key_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    from wevent.accounting.signing import load_public_key, load_signing_key

    os.mkfifo(tmp_path / "k")
    for load in (load_public_key, load_signing_key):
        with pytest.raises(BudgetError, match="a FIFO"):
            load(tmp_path / "k")


# ------------------------------------------------------------------ configurable limits


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """``monkeypatch`` for the limit variables, with the limits re-read (they are read once per
    command) before and after the test."""
    inputs.reset_limits()
    yield monkeypatch
    monkeypatch.undo()
    inputs.reset_limits()


def _nested(depth: int) -> dict[str, Any]:
    """A charge whose evidence nests ``depth`` levels (the charge object is one more)."""
    value: Any = "x"
    for _ in range(depth - 1):
        value = [value]
    return {**CHARGE, "evidence": {"kind": "postprocessing", "note": value}}


@pytest.mark.parametrize("name", ["l.jsonl", "l.csv", "l.parquet"])
def test_the_field_limit_is_configurable_and_named_in_the_error(
    name: str, tmp_path: Path, limits: pytest.MonkeyPatch
) -> None:
    from wevent.accounting.formats import write_ledger
    from wevent.accounting.ledger import Ledger

    ledger = Ledger()
    ledger.append(1, "0.1", user="alice-in-a-long-name")
    write_ledger(ledger, tmp_path / name)
    reqs = REQ + "alice-in-a-long-name,3,1\n"
    assert _check(tmp_path, (tmp_path / name).read_bytes(), name, reqs).exit_code == 0
    limits.setenv(inputs.FIELD_VARIABLE, "8")
    _one_line_error(  # (the requirements file would be refused first: it names the user too)
        _check(tmp_path, (tmp_path / name).read_bytes(), name),
        name,
        "of 20 characters is longer than the limit of 8",
        inputs.FIELD_VARIABLE,
    )
    limits.setenv(inputs.FIELD_VARIABLE, "-3")
    _one_line_error(
        _check(tmp_path, (tmp_path / name).read_bytes(), name, reqs), inputs.FIELD_VARIABLE
    )


def test_the_depth_and_evidence_limits_are_configurable_and_named(
    tmp_path: Path, limits: pytest.MonkeyPatch
) -> None:
    # the default depth (64) holds what a ledger needs and refuses what no evidence needs
    assert _check(tmp_path, _jsonl(_nested(10))).exit_code == 0
    _one_line_error(
        _check(tmp_path, _jsonl(_nested(80))),
        "l.jsonl:1",
        "deeper than the limit of 64 levels",
        inputs.DEPTH_VARIABLE,
    )
    limits.setenv(inputs.DEPTH_VARIABLE, "100")
    assert _check(tmp_path, _jsonl(_nested(80))).exit_code == 0
    limits.setenv(inputs.DEPTH_VARIABLE, "5")
    _one_line_error(_check(tmp_path, _jsonl(_nested(6))), "l.jsonl:1", "limit of 5 levels")
    assert _check(tmp_path, _jsonl(_nested(4))).exit_code == 0
    limits.setenv(inputs.EVIDENCE_VARIABLE, "30")
    _one_line_error(
        _check(tmp_path, _jsonl(_nested(4))), "l.jsonl:1", "evidence", inputs.EVIDENCE_VARIABLE
    )
    # An invalid value is refused when the command starts, naming the variable, whatever the
    # input (it is never blamed on a file, nor read as a broken durable ledger).
    for variable in (inputs.DEPTH_VARIABLE, inputs.EVIDENCE_VARIABLE, DIGITS_VARIABLE):
        limits.setenv(variable, "1x")
        result = _check(tmp_path, _jsonl(CHARGE))
        _one_line_error(result, f"{variable}='1x'")
        assert "l.jsonl" not in result.stderr
        limits.delenv(variable)


def test_an_invalid_limit_never_reads_as_a_tampered_durable_ledger(
    tmp_path: Path, limits: pytest.MonkeyPatch
) -> None:
    from wevent.accounting.durable import ChainedJsonlWriter

    path = tmp_path / "run.jsonl"
    with ChainedJsonlWriter(path) as writer:
        writer.append({**CHARGE, "evidence": {"kind": "postprocessing"}})  # 2 levels deep
    (tmp_path / "r.csv").write_text(REQ)
    limits.setenv(inputs.DEPTH_VARIABLE, "-1")
    result = _invoke("audit", str(path), "-r", str(tmp_path / "r.csv"))
    _one_line(result, "audit", inputs.DEPTH_VARIABLE)
    limits.setenv(inputs.DEPTH_VARIABLE, "1")  # valid, and too small for a ledger line
    result = _invoke("audit", str(path), "-r", str(tmp_path / "r.csv"))
    assert "limit of 1 level" in result.output + result.stderr, result.output


def test_an_invalid_limit_in_a_library_call_is_a_limit_error_not_a_broken_ledger(
    tmp_path: Path, limits: pytest.MonkeyPatch
) -> None:
    """Without the CLI's check at start, the readers meet the invalid value first: it is a
    `LimitError` naming the variable, never a ValueError they would take for a bad file."""
    from wevent.accounting.durable import ChainedJsonlWriter, audit_integrity
    from wevent.errors import LimitError

    path = tmp_path / "run.jsonl"
    with ChainedJsonlWriter(path) as writer:
        writer.append(CHARGE)
    limits.setenv(inputs.DEPTH_VARIABLE, "deep")
    with pytest.raises(LimitError, match="WEVENT_MAX_DEPTH='deep'"):
        audit_integrity(path)
    limits.delenv(inputs.DEPTH_VARIABLE)
    inputs.reset_limits()
    assert audit_integrity(path).state == "intact"


def test_evidence_integers_are_bounded_where_they_are_made(tmp_path: Path) -> None:
    """An ExSub or GRR integer of more than 1,000 digits is refused when the evidence is built,
    so no writer writes what every reader refuses (a durable ledger holding one read back as
    tampered)."""
    from wevent.accounting.evidence import GRR, ExSub

    with pytest.raises(BudgetError, match="longer than 1,000 digits"):
        ExSub(10**1000, 1, 1, Fraction(1, 2))
    with pytest.raises(BudgetError, match="whole number"):
        GRR("2.0", "1/2", "1/2")  # type: ignore[arg-type]
    assert ExSub("51", " 3", "4\t", "1/2").d_prime == 51  # type: ignore[arg-type]


def test_a_csv_field_within_a_raised_limit_is_read(
    tmp_path: Path, limits: pytest.MonkeyPatch
) -> None:
    """Raising WEVENT_MAX_EVIDENCE past the csv module's own field limit (131,072) works for CSV
    as for JSONL."""
    note = "x" * 200_000
    evidence = json.dumps({"kind": "postprocessing", "note": note}).replace('"', '""')
    text = f'slot,user,epsilon,evidence\n1,alice,0.1,"{evidence}"\n'
    _one_line_error(_check(tmp_path, text, "l.csv"), "l.csv:2", inputs.EVIDENCE_VARIABLE)
    limits.setenv(inputs.EVIDENCE_VARIABLE, "1000000")
    assert _check(tmp_path, text, "l.csv").exit_code == 0


def test_a_crash_is_exit_4_with_its_traceback_never_a_verdicts_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected exception is a bug in wevent: its traceback, one line saying so, exit 4.
    It used to leave Python's exit 1, which reads as NOT COMPLIANT."""
    import importlib

    # `wevent check` imports the checker when it runs (the package re-exports its function
    # under the module's name, so the module is taken from importlib)
    checker = importlib.import_module("wevent.verifier.check")

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(checker, "check", broken)
    result = _check(tmp_path, _jsonl(CHARGE))
    assert result.exit_code == 4, result.output
    assert "Traceback" in result.stderr and "RuntimeError: boom" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("wevent: error: internal error")
