"""Durable ledgers: chained JSONL and Parquet segments; tampering and torn tails are detected."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from enum import Enum
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import Budget, BudgetError, format_exact
from wevent.accounting.durable import (
    CHECKPOINT_SLOT,
    GENESIS_HEAD,
    ChainedJsonlWriter,
    GroupRecord,
    SegmentWriter,
    _RecordOrder,
    audit_integrity,
    canonical,
    is_durable_ledger,
    read_checkpoint,
    repair,
    verified_records,
)
from wevent.accounting.evidence import Evidence, Laplace, Sampled
from wevent.accounting.formats import read_ledger, read_ledgers
from wevent.accounting.ledger import Charge

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


# ---------------------------------------------------------------------------- checkpoints


def test_a_new_ledger_has_its_checkpoint_before_its_first_record(tmp_path: Path) -> None:
    """A crash before the first commit leaves the empty ledger, intact (not bad input); a
    chained file without its checkpoint is an integrity failure (a truncation would hide)."""
    path = tmp_path / "l.jsonl"
    w = ChainedJsonlWriter(path)
    w.append({"slot": 1, "user": "a", "epsilon": "1"})  # pending: never committed
    head = read_checkpoint(tmp_path / "l.jsonl")
    assert head == {"records": 0, "head": GENESIS_HEAD}
    found = audit_integrity(path)
    assert found.ok and found.state == "intact" and found.records == 0
    assert found.anchors == ("checkpoint",)
    w.close()
    assert audit_integrity(path).records == 1
    (tmp_path / "l.jsonl.head").unlink()
    gone = audit_integrity(path)
    assert gone.state == "broken" and "checkpoint is missing" in gone.problems[0].message
    anchored = audit_integrity(path, expect_head=w.head)  # an expected head does not excuse it
    assert anchored.state == "broken" and "checkpoint is missing" in anchored.problems[0].message


def _strip(path: Path) -> None:
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "chain"}) + "\n" for r in lines)
    )


def test_a_durable_ledger_without_its_chain_is_an_integrity_failure(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(3))
    head = audit_integrity(path).head
    _strip(path)
    found = audit_integrity(path)  # the checkpoint says it is durable
    assert found.state == "broken" and "no chain hash" in found.problems[0].message
    (tmp_path / "l.jsonl.head").unlink()
    plain = audit_integrity(path)  # nothing left says it was durable: unprotected, a warning
    assert plain.state == "unprotected" and not plain.ok and not plain.problems
    anchored = audit_integrity(path, expect_head=head)  # ... but an anchor cannot be met
    assert anchored.state == "broken" and "not a durable ledger" in anchored.problems[0].message


def test_records_past_the_checkpoint_are_an_unanchored_tail(tmp_path: Path) -> None:
    """A commit interrupted between the fsync of its lines and its checkpoint leaves complete,
    chained records that nothing vouches for: reported, never audited."""
    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(2))
    committed = audit_integrity(path)

    class Crash(ChainedJsonlWriter):
        def _checkpoint(self) -> None:
            if self.committed > committed.records:
                raise OSError("killed before the checkpoint")
            super()._checkpoint()

    w = Crash(path)
    w.append({"slot": 9, "user": "a", "epsilon": "1"})
    w.append({"slot": 9, "user": "b", "epsilon": "1"})
    with pytest.raises(OSError, match="killed"):
        w.commit()
    tail_head = w.head
    found = audit_integrity(path)
    assert found.state == "intact" and not found.ok and found.records == committed.records
    assert found.head == committed.head
    (tail,) = found.torn
    assert tail.kind == "unanchored" and tail.records == 2 and tail.line == committed.records + 1
    assert tail.offset + tail.length == path.stat().st_size
    assert [r.get("slot") for r in verified_records(path, limit=found.records)][-1] == 3
    # The checkpoint's head, recorded elsewhere: the tail stays unanchored.
    assert audit_integrity(path, expect_head=committed.head).torn == found.torn
    # The head after the tail, recorded elsewhere: it vouches for the tail.
    full = audit_integrity(path, expect_head=tail_head)
    assert full.ok and full.records == committed.records + 2
    with pytest.raises(BudgetError, match="ledger repair"):
        ChainedJsonlWriter(path)


def test_expected_heads_are_full_or_a_prefix_of_at_least_16_digits(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(2))
    with ChainedJsonlWriter(path) as w:
        w.append({"slot": 9, "user": "a", "epsilon": "1"})
    head = audit_integrity(path).head
    earlier = json.loads(path.read_text().splitlines()[-2])["chain"]
    for value in (head, head[:16], head[:40].upper()):
        assert audit_integrity(path, expect_head=value).anchors == ("checkpoint", "expected head")
    for bad in (head[:15], "z" * 16, head + "0"):
        with pytest.raises(BudgetError, match="at least 16"):
            audit_integrity(path, expect_head=bad)
    stale = audit_integrity(path, expect_head=earlier[:20])
    message = stale.problems[0].message
    assert stale.state == "broken" and earlier[:20] in message and head in message
    assert "head after record 4, and 1 record(s) follow it" in message


# ---------------------------------------------------------------------------- signatures


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A signing key, its public key, and another public key."""
    from wevent.accounting.signing import generate_key_pair

    root = tmp_path_factory.mktemp("keys")
    generate_key_pair(root / "k", root / "k.pub")
    generate_key_pair(root / "other", root / "other.pub")
    return root / "k", root / "k.pub", root / "other.pub"


def test_signed_checkpoints_verify_under_the_public_key_only(
    tmp_path: Path, keys: tuple[Path, Path, Path]
) -> None:
    key, pub, other = keys
    path = tmp_path / "l.jsonl"
    with ChainedJsonlWriter(path, signing_key=key) as w:
        for r in _records(3):
            w.append(r)
    mark = read_checkpoint(tmp_path / "l.jsonl")
    assert len(mark["signature"]) == 128
    found = audit_integrity(path, public_key=pub)
    assert found.ok and found.anchors == ("checkpoint", "signature")
    assert "not verified" in audit_integrity(path).notes[0]  # signed, but no key given
    wrong = audit_integrity(path, public_key=other)
    assert wrong.state == "broken" and "does not verify" in wrong.problems[0].message
    unsigned = tmp_path / "u.jsonl"
    _write_jsonl(unsigned, _records(3))
    refused = audit_integrity(unsigned, public_key=pub)
    assert refused.state == "broken" and "not signed" in refused.problems[0].message
    # A writer continues a signed ledger only under its key; an unsigned one may start signing.
    with pytest.raises(BudgetError, match="signed"):
        ChainedJsonlWriter(path)
    from wevent.accounting.signing import generate_key_pair

    generate_key_pair(tmp_path / "third", tmp_path / "third.pub")
    with pytest.raises(BudgetError, match="not signed by this key"):
        ChainedJsonlWriter(path, signing_key=tmp_path / "third")
    with ChainedJsonlWriter(unsigned, signing_key=key) as w:
        w.append({"slot": 20, "user": "a", "epsilon": "1"})
    assert audit_integrity(unsigned, public_key=pub).ok


def test_a_public_key_file_may_hold_hex_and_bad_keys_are_bad_input(
    tmp_path: Path, keys: tuple[Path, Path, Path]
) -> None:
    from wevent.accounting.signing import key_id, load_public_key

    key, pub, _ = keys
    path = tmp_path / "l.jsonl"
    with ChainedJsonlWriter(path, signing_key=key) as w:
        w.append({"slot": 1, "user": "a", "epsilon": "1"})
    hexfile = tmp_path / "k.hex"
    hexfile.write_text(key_id(load_public_key(pub)) + "\n")
    assert audit_integrity(path, public_key=hexfile).ok
    junk = tmp_path / "junk.pub"
    junk.write_text("not a key")
    with pytest.raises(BudgetError, match="not a PEM public key"):
        audit_integrity(path, public_key=junk)
    with pytest.raises(BudgetError, match="cannot read"):
        ChainedJsonlWriter(tmp_path / "m.jsonl", signing_key=tmp_path / "none.key")


# ---------------------------------------------------------------------------- segments


def test_segment_ledgers_are_durable_by_layout(tmp_path: Path) -> None:
    root = tmp_path / "l.wledger"
    SegmentWriter(root)  # stopped before its first commit: the empty ledger, intact
    created = audit_integrity(root)
    assert created.ok and created.records == 0 and created.anchors == ("checkpoint",)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.wledger"]  # no temporary left
    shutil.rmtree(root)
    root.mkdir()
    empty = audit_integrity(root)  # a writer never leaves an empty directory: emptied
    assert empty.state == "broken" and "directory is empty" in empty.problems[0].message
    with pytest.raises(BudgetError, match="empty directory is not a segment ledger"):
        SegmentWriter(root)  # an emptied ledger is not restarted silently
    root.rmdir()
    with SegmentWriter(root) as w:
        for r in _records(3):
            w.append(r)
            w.commit()
    found = audit_integrity(root)
    assert found.ok and found.anchors == ("checkpoint",)
    manifest = root / "manifest.jsonl"
    _strip(manifest)
    stripped = audit_integrity(root)
    assert stripped.state == "broken" and "no chain hash" in stripped.problems[0].message
    (root / "manifest.jsonl.head").unlink()
    assert "no chain hash" in audit_integrity(root).problems[0].message
    manifest.unlink()
    gone = audit_integrity(root)
    assert gone.state == "broken" and "manifest.jsonl is missing" in gone.problems[0].message
    with pytest.raises(BudgetError, match="cannot append"):
        SegmentWriter(root)
    plain_dir = tmp_path / "notaledger"
    plain_dir.mkdir()
    with pytest.raises(BudgetError, match="not a segment ledger"):
        audit_integrity(plain_dir)


def test_a_segment_ledger_s_missing_checkpoint_is_an_integrity_failure(tmp_path: Path) -> None:
    root = tmp_path / "l.wledger"
    with SegmentWriter(root) as w:
        for r in _records(2):
            w.append(r)
    (root / "manifest.jsonl.head").unlink()
    found = audit_integrity(root)
    assert found.state == "broken" and "checkpoint is missing" in found.problems[0].message


# ---------------------------------------------------------------------------- repair


def test_repair_cuts_a_torn_line_into_a_side_file_and_the_writer_continues(
    tmp_path: Path,
) -> None:
    from wevent.accounting.durable import repair

    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(3))
    before = path.read_bytes()
    with path.open("ab") as fh:
        fh.write(b'{"slot": 9, "user": "a", "eps')
    done = repair(path)
    assert path.read_bytes() == before
    side = tmp_path / "l.jsonl.cut"
    assert [Path(s) for _, s in done.cut] == [side]
    assert side.read_bytes() == b'{"slot": 9, "user": "a", "eps'
    assert "torn tail" in done.describe()
    with ChainedJsonlWriter(path) as w:
        w.append({"slot": 9, "user": "a", "epsilon": "1"})
    assert audit_integrity(path).ok
    assert repair(path).cut == ()  # nothing left to repair
    # a second repair keeps the first side file
    with path.open("ab") as fh:
        fh.write(b"{")
    repair(path)
    assert (tmp_path / "l.jsonl.cut.2").read_bytes() == b"{"


def test_repair_cuts_an_unanchored_tail(tmp_path: Path) -> None:
    from wevent.accounting.durable import repair

    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(2))
    before = path.read_bytes()
    committed = audit_integrity(path)
    with ChainedJsonlWriter(path) as w:
        w.append({"slot": 9, "user": "a", "epsilon": "1"})
    extra = path.read_bytes()[len(before) :]
    (tmp_path / "l.jsonl.head").write_text(
        json.dumps({"records": committed.records, "head": committed.head}) + "\n"
    )
    assert audit_integrity(path).torn[0].kind == "unanchored"
    repair(path)
    assert path.read_bytes() == before and (tmp_path / "l.jsonl.cut").read_bytes() == extra
    assert audit_integrity(path).ok


def test_repair_refuses_a_tampered_or_plain_ledger_and_leaves_it_untouched(
    tmp_path: Path,
) -> None:
    from wevent.accounting.durable import LedgerIntegrityError, repair

    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(3))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    path.write_bytes(b"".join(lines) + b'{"torn')
    before = path.read_bytes()
    with pytest.raises(LedgerIntegrityError, match="refusing to repair") as refused:
        repair(path)
    assert refused.value.integrity.state == "broken"
    assert path.read_bytes() == before and not (tmp_path / "l.jsonl.cut").exists()
    plain = tmp_path / "p.jsonl"
    plain.write_text('{"slot": 1, "user": "a", "epsilon": "1"}\n')
    with pytest.raises(LedgerIntegrityError, match="not a durable ledger"):
        repair(plain)


def test_repair_of_a_segment_ledger_moves_uncommitted_segments_aside(tmp_path: Path) -> None:
    from wevent.accounting.durable import repair

    root = tmp_path / "l.wledger"
    with SegmentWriter(root) as w:
        for r in _records(3):
            w.append(r)
            w.commit()
    intact = audit_integrity(root)
    # a committed-looking segment whose manifest line is past the checkpoint
    mark = (root / "manifest.jsonl.head").read_bytes()
    with SegmentWriter(root) as w:
        w.append({"slot": 30, "user": "z", "epsilon": "1"})
    (root / "manifest.jsonl.head").write_bytes(mark)
    (root / "000099.parquet.tmp").write_bytes(b"PAR1 half")
    found = audit_integrity(root)
    assert {t.kind for t in found.torn} == {"unanchored", "uncommitted-segment"}
    with pytest.raises(BudgetError, match="ledger repair"):
        SegmentWriter(root)
    done = repair(root)
    side = tmp_path / "l.wledger.cut"
    assert sorted(p.name for p in side.iterdir()) == [
        f"{intact.records + 1:06d}.parquet",
        "000099.parquet.tmp",
        "manifest.jsonl.cut",
    ]
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [*(Path(f).name for f in intact.files), "manifest.jsonl", "manifest.jsonl.head"]
    )
    assert len(done.cut) == 3
    after = audit_integrity(root)
    assert after.ok and after.head == intact.head and after.files == intact.files
    with SegmentWriter(root) as w:  # the writer continues
        w.append({"slot": 40, "user": "z", "epsilon": "1"})
    assert audit_integrity(root).records == intact.records + 1


# ---------------------------------------------------------------------------- two-slot checkpoint


def _committed_in_steps(path: Path, steps: int) -> list[int]:
    """Write one record per commit; the committed count after each commit."""
    counts = []
    with ChainedJsonlWriter(path) as w:
        w.define_group("g", ["a", "b"])
        for slot in range(1, steps + 1):
            w.append({"slot": slot, "group": "g", "epsilon": "1/10"})
            counts.append(w.commit())
    return counts


def _stepped(tmp_path: Path, steps: int) -> tuple[Path, list[int], Path]:
    """A ledger of ``steps`` one-record commits: its path, the counts, its checkpoint file."""
    path = tmp_path / "l.jsonl"
    counts = _committed_in_steps(path, steps)
    return path, counts, path.with_name(path.name + ".head")


def _slots(path: Path) -> list[bytes]:
    data = path.with_name(path.name + ".head").read_bytes()
    assert len(data) == 2 * CHECKPOINT_SLOT
    return [data[:CHECKPOINT_SLOT], data[CHECKPOINT_SLOT:]]


def test_checkpoints_alternate_between_two_fixed_slots(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    counts = _committed_in_steps(path, 5)
    first, second = (json.loads(s) for s in _slots(path))
    # the last two commits' checkpoints, each in its own sector-sized slot
    assert sorted([first["records"], second["records"]]) == counts[-2:]
    assert read_checkpoint(path)["records"] == counts[-1] == audit_integrity(path).records
    assert audit_integrity(path).ok


def test_a_torn_checkpoint_slot_falls_back_to_the_previous_checkpoint(tmp_path: Path) -> None:
    """A crash while a slot is written tears that slot only: the other holds the checkpoint
    before it, so the last commit's records are an unanchored tail (its commit never
    returned), which repair cuts; the writer then continues."""
    path, counts, mark = _stepped(tmp_path, 4)
    slots = _slots(path)
    latest = 0 if json.loads(slots[0])["records"] == counts[-1] else 1
    torn = bytearray(mark.read_bytes())
    torn[latest * CHECKPOINT_SLOT + 5 : latest * CHECKPOINT_SLOT + 40] = b"\x00" * 35
    mark.write_bytes(bytes(torn))
    found = audit_integrity(path)
    assert found.state == "intact" and found.records == counts[-2]
    assert [t.kind for t in found.torn] == ["unanchored"] and found.torn[0].records == 1
    assert "checkpoint slot unreadable" in found.notes[0]
    assert repair(path).kept == counts[-2]
    with ChainedJsonlWriter(path) as w:
        w.append({"slot": 9, "group": "g", "epsilon": "1/10"})
    assert audit_integrity(path).ok and audit_integrity(path).records == counts[-2] + 1


def test_both_slots_unreadable_or_an_earlier_slot_off_the_chain_is_broken(
    tmp_path: Path,
) -> None:
    path, counts, mark = _stepped(tmp_path, 4)
    good = mark.read_bytes()
    mark.write_bytes(b"x" * (CHECKPOINT_SLOT - 1) + b"\n" + b"y" * (CHECKPOINT_SLOT - 1) + b"\n")
    assert "unreadable checkpoint" in audit_integrity(path).problems[0].message
    mark.write_bytes(good)
    latest = read_checkpoint(path)
    # the earlier slot claims a head the chain never had at its count
    earlier = {"records": counts[-2], "head": "0" * 64}
    mark.write_text(json.dumps(earlier) + "\n" + json.dumps(latest) + "\n")
    found = audit_integrity(path)
    assert found.state == "broken" and "earlier checkpoint" in found.problems[0].message
    mark.write_text(json.dumps(latest) + "\n")  # one line, as earlier versions wrote: read
    assert audit_integrity(path).ok


def test_a_one_line_checkpoint_of_an_earlier_version_is_continued_in_two_slots(
    tmp_path: Path,
) -> None:
    path, counts, mark = _stepped(tmp_path, 3)
    mark.write_text(json.dumps(read_checkpoint(path)) + "\n")
    assert audit_integrity(path).ok
    with ChainedJsonlWriter(path) as w:
        for slot in (4, 5):
            w.append({"slot": slot, "group": "g", "epsilon": "1/10"})
            w.commit()
    assert len(mark.read_bytes()) == 2 * CHECKPOINT_SLOT
    assert audit_integrity(path).ok and audit_integrity(path).records == counts[-1] + 2


def test_verification_reading_and_continuing_stream_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The integrity scan, the verified records, the ledger reader and a continuing writer
    read a chained JSONL ledger line by line, never whole (its size in memory was about 9x
    the file's): reading it whole is made to fail here."""
    path = tmp_path / "l.jsonl"
    _write_jsonl(path, _records(50))
    expected = audit_integrity(path)
    whole = (Path.read_bytes, Path.read_text)

    def refuse(kind: int) -> Any:
        def read(self: Path, *args: Any, **kwargs: Any) -> Any:
            if self == path:
                raise AssertionError(f"{path} read whole")
            return whole[kind](self, *args, **kwargs)

        return read

    monkeypatch.setattr(Path, "read_bytes", refuse(0))
    monkeypatch.setattr(Path, "read_text", refuse(1))
    found = audit_integrity(path)
    assert found.ok and (found.records, found.rows, found.head) == (
        expected.records,
        expected.rows,
        expected.head,
    )
    assert len(list(verified_records(path))) == expected.records
    assert len(read_ledger(path)) == expected.rows
    with ChainedJsonlWriter(path) as w:
        w.append({"slot": 99, "group": "g", "epsilon": "1"})
    assert audit_integrity(path).records == expected.records + 1


class _Slot(int, Enum):  # an int subclass that prints apart from its value
    FIRST = 1
    SECOND = 2


_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=6
)  # any valid Unicode, line breaks and quotes included


@settings(max_examples=150)
@given(
    slot=st.one_of(st.integers(1, 10**6), st.sampled_from(list(_Slot))),
    subject=_TEXT,
    by_group=st.booleans(),
    amount=st.fractions(min_value=0, max_value=5),
    part=st.one_of(st.just(""), _TEXT),
    mechanism=st.one_of(st.just(""), _TEXT),
    evidence=st.sampled_from(
        [
            None,
            Laplace(Fraction(1), Fraction(3, 7)),
            Sampled(Laplace(Fraction(2), Fraction(5)), Fraction(1, 3)),
        ]
    ),
)
def test_a_charge_line_is_serialized_as_its_canonical_json(
    slot: int,
    subject: str,
    by_group: bool,
    amount: Fraction,
    part: str,
    mechanism: str,
    evidence: Evidence | None,
) -> None:
    """The writer assembles a charge's canonical bytes from cached pieces: always exactly the
    sorted-key compact JSON the chain covers (what a verifier recomputes)."""
    order = _RecordOrder()
    if by_group:
        order.accept(GroupRecord(subject, ("a",)))
    charge = Charge(
        slot,
        Budget(amount),
        user=None if by_group else subject,
        group=subject if by_group else None,
        part=part,
        mechanism=mechanism,
        evidence=evidence,
    )
    for _ in range(2):  # the second time from the caches
        rec = order.accept(charge)
        assert rec is not None
        assert order.canonical_charge(rec) == canonical(rec)


def test_the_newest_checkpoint_slot_cannot_be_destroyed_to_hide_a_removed_commit(
    tmp_path: Path,
) -> None:
    """The file keeps the previous checkpoint beside the latest. Destroying the latest slot
    (blanked or garbled) and removing the commit it vouched for is not what a crash leaves (a
    crash tears a slot only after its commit's lines are on disk): an integrity failure. A
    torn slot write is unreadable by its checksum, never a mix of old and new."""
    path, counts, mark = _stepped(tmp_path, 3)
    good, lines = mark.read_bytes(), path.read_bytes().splitlines(keepends=True)
    latest = 0 if json.loads(_slots(path)[0])["records"] == counts[-1] else 1
    start = latest * CHECKPOINT_SLOT
    for damage in (b" " * 20, b"\x00" * 20):
        data = bytearray(good)
        data[start + 2 : start + 22] = damage
        mark.write_bytes(bytes(data))
        path.write_bytes(b"".join(lines[:-1]))  # the last commit removed
        found = audit_integrity(path)
        assert found.state == "broken" and "latest checkpoint was destroyed" in (
            found.problems[0].message
        )
    # a torn write: the new slot's first 40 bytes over the old one's content
    path.write_bytes(b"".join(lines))
    older = bytes(good[(1 - latest) * CHECKPOINT_SLOT :][:CHECKPOINT_SLOT])
    mixed = bytearray(good)
    mixed[start : start + CHECKPOINT_SLOT] = good[start : start + 40] + older[40:]
    mark.write_bytes(bytes(mixed))
    torn = audit_integrity(path)
    assert torn.state == "intact" and torn.records == counts[-2]
    assert "slot unreadable" in torn.notes[0] and torn.torn[0].kind == "unanchored"
    repair(path)  # cuts the tail and settles the checkpoint: both slots hold it
    assert audit_integrity(path).ok and len(set(_slots(path))) == 1


def test_a_new_checkpoint_file_holds_its_checkpoint_in_both_slots(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    ChainedJsonlWriter(path).close()
    first, second = _slots(path)
    assert first == second and json.loads(first)["records"] == 0


def test_a_segment_ledger_directory_is_made_as_mkdir_would_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built under a private temporary name, the directory is given the mode mkdir gives
    (readable by an auditor running as another user, under the umask); a failed creation
    leaves nothing behind."""
    (tmp_path / "plain").mkdir()
    SegmentWriter(tmp_path / "l.wledger").close()
    assert (tmp_path / "l.wledger").stat().st_mode == (tmp_path / "plain").stat().st_mode

    def fail(self: Path, target: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(Path, "rename", fail)
    with pytest.raises(OSError, match="disk full"):
        SegmentWriter(tmp_path / "m.wledger")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.wledger", "plain"]
