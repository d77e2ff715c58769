"""Durable ledgers: chained JSONL and Parquet segments; tampering and torn tails are detected."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import BudgetError, format_exact
from wevent.accounting.durable import (
    ChainedJsonlWriter,
    SegmentWriter,
    audit_integrity,
    is_durable_ledger,
    verified_records,
)
from wevent.accounting.formats import read_ledger, read_ledgers

ROOT = Path(__file__).resolve().parent.parent


def _records(n: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"group": "g", "members": ["a", "b"]}]
    for i in range(n):
        out.append(
            {"slot": i + 1, "user": f"u{i % 3}", "epsilon": format_exact(Fraction(i % 4, 10))}
        )
    out.append({"slot": n + 1, "group": "g", "epsilon": "1/3", "part": "publication"})
    return out


def _write_jsonl(path: Path, records: list[dict[str, object]]) -> None:
    with ChainedJsonlWriter(path) as w:
        for r in records:
            w.append(r)


def test_chained_jsonl_round_trips_and_is_readable_by_the_plain_reader(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    recs = _records(7)
    _write_jsonl(path, recs)
    found = audit_integrity(path)
    assert found.ok and found.layout == "chained-jsonl"
    assert found.records == len(recs) and found.checkpoint == len(recs)
    assert list(verified_records(path)) == recs
    assert is_durable_ledger(path)
    ledger = read_ledger(path)  # the chain key is ignored by the ordinary reader
    assert len(ledger) == 8 and ledger.members("g") == ("a", "b")


def test_reopening_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    recs = _records(5)
    _write_jsonl(path, recs[:3])
    with ChainedJsonlWriter(path) as w:
        assert w.committed == 3
        for r in recs[3:]:
            w.append(r)
    assert audit_integrity(path).records == len(recs)
    assert list(verified_records(path)) == recs


def test_plain_files_are_reported_unprotected(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text('{"slot": 1, "user": "a", "epsilon": "0.1"}\n')
    found = audit_integrity(path)
    assert found.state == "unprotected" and not found.ok  # a warning, never "ok"
    assert not found.chained and "not chained" in found.summary()
    with pytest.raises(BudgetError, match="no such file"):
        audit_integrity(tmp_path / "missing.jsonl")


def _edit(lines: list[bytes], kind: str, i: int, j: int) -> list[bytes]:
    out = list(lines)
    if kind == "delete":
        del out[i]
    elif kind == "swap":
        out[i], out[j] = out[j], out[i]
    elif kind == "duplicate":
        out.insert(j, out[i])
    else:  # edit a value inside the record, keeping its chain hash
        obj = json.loads(out[i])
        if "epsilon" in obj:
            obj["epsilon"] = obj["epsilon"] + "1"
        else:
            obj["members"] = [*obj["members"], "intruder"]
        out[i] = json.dumps(obj).encode()
    return out


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(2, 12),
    kind=st.sampled_from(["delete", "swap", "duplicate", "edit"]),
    data=st.data(),
)
def test_any_edit_of_committed_records_is_detected(
    tmp_path_factory: pytest.TempPathFactory, n: int, kind: str, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("chain") / "l.jsonl"
    _write_jsonl(path, _records(n))
    lines = path.read_bytes().splitlines()
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(0, len(lines) - 1).filter(lambda k: k != i))
    edited = _edit(lines, kind, i, j)
    path.write_bytes(b"".join(x + b"\n" for x in edited))
    found = audit_integrity(path)
    assert not found.ok and found.problems, kind
    assert not found.torn
    # Records before the first changed line stay verified; none from it on.
    first_changed = {"delete": i, "swap": min(i, j), "duplicate": j, "edit": i}[kind]
    assert found.records == first_changed


def test_truncating_committed_records_is_detected_by_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(6))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-2]))
    found = audit_integrity(path)
    assert not found.ok
    assert "removed" in found.problems[0].message


def test_expect_head_anchors_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(3))
    head = audit_integrity(path).head
    assert audit_integrity(path, expect_head=head).ok
    assert not audit_integrity(path, expect_head="0" * 64).ok


def test_torn_tail_is_reported_and_the_writer_refuses_to_extend_it(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    recs = _records(4)
    _write_jsonl(path, recs)
    size = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(b'{"slot": 9, "user": "a", "eps')
    found = audit_integrity(path)
    assert not found.ok and not found.problems
    assert found.records == len(recs)
    (torn,) = found.torn
    assert torn.offset == size and torn.length == 29 and torn.line == len(recs) + 1
    assert "torn tail" in found.summary()
    with pytest.raises(BudgetError, match="cannot append"):
        ChainedJsonlWriter(path)


def test_segments_round_trip_and_detect_edits(tmp_path: Path) -> None:
    root = tmp_path / "l.wledger"
    recs = _records(9)
    with SegmentWriter(root) as w:
        for k, r in enumerate(recs):
            w.append(r)
            if k % 4 == 3:
                w.commit()
    found = audit_integrity(root)
    assert found.ok and found.layout == "segments" and found.records == 3
    assert len(found.files) == 3
    combined = read_ledgers(found.files)  # the group is defined in the first segment only
    assert len(combined) == 10 and combined.members("g") == ("a", "b")
    # continuing a segment ledger
    with SegmentWriter(root) as w:
        w.append({"slot": 20, "user": "z", "epsilon": "1"})
    assert audit_integrity(root).records == 4

    # an edited row in a committed segment
    seg = Path(found.files[1])
    table = pq.read_table(seg)
    eps = table.column("epsilon").to_pylist()
    eps[0] = "9"
    pq.write_table(table.set_column(3, "epsilon", __import__("pyarrow").array(eps)), seg)
    bad = audit_integrity(root)
    assert not bad.ok and "edited" in bad.problems[0].message


def test_segments_detect_deleted_and_uncommitted_segments(tmp_path: Path) -> None:
    root = tmp_path / "l.wledger"
    with SegmentWriter(root) as w:
        for r in _records(3):
            w.append(r)
            w.commit()
    files = audit_integrity(root).files
    (root / "000999.parquet.tmp").write_bytes(b"PAR1 half")
    torn = audit_integrity(root)
    assert not torn.ok and not torn.problems and "uncommitted segment" in torn.summary()
    (root / "000999.parquet.tmp").unlink()
    Path(files[2]).unlink()
    gone = audit_integrity(root)
    assert not gone.ok and "missing" in gone.problems[0].message


_CHILD = textwrap.dedent(
    """
    import sys, time
    from wevent.accounting.durable import ChainedJsonlWriter

    class Slow(ChainedJsonlWriter):
        def _write(self, data):
            # Split every line in two writes and pause between them, so the parent's SIGKILL
            # lands in the middle of an append.
            half = len(data) // 2
            self._fh.write(data[:half])
            self._fh.flush()
            if self.committed >= 5:
                print("mid", flush=True)
                time.sleep(60)
            self._fh.write(data[half:])

    w = Slow(sys.argv[1])
    for i in range(1000):
        w.append({"slot": i + 1, "user": "u", "epsilon": "1/100"})
        n = w.commit()
        print(f"committed {n}", flush=True)
    """
)


def test_killing_the_writer_mid_append_reports_the_torn_tail_and_keeps_commits(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    committed = 0
    for line in child.stdout:
        if line.startswith("committed"):
            committed = int(line.split()[1])
        if line.strip() == "mid":
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert committed == 5
    found = audit_integrity(path)
    assert found.records == committed  # nothing committed is lost
    assert not found.problems
    assert len(found.torn) == 1 and found.torn[0].line == committed + 1
    assert [r["slot"] for r in verified_records(path)] == [1, 2, 3, 4, 5]
