"""Durable, tamper-evident ledger files: append-only writers and their integrity audit.

Two layouts, both readable by the ordinary ledger reader (`wevent.accounting.formats.read_ledger`):

* **chained JSONL** (``LEDGER.jsonl``): the documented JSONL records, each carrying one extra key
  ``"chain"``: ``H_i = sha256(H_{i-1} || canonical(record_i))`` in hex, where ``canonical`` is the
  record without ``chain`` as sorted-key compact JSON (UTF-8) and ``H_0 = sha256(GENESIS)``. A
  commit writes whole lines, flushes and fsyncs; then a checkpoint sidecar ``LEDGER.jsonl.head``
  (record count and head hash) is replaced atomically (write, fsync, rename, fsync directory).
* **Parquet segments** (a directory ``LEDGER.wledger/``): each commit writes the buffered records
  as one Parquet file in the documented columns to a temporary name, fsyncs it and renames it to
  ``NNNNNN.parquet``; only then is a line naming it (rows, sha256 of the file's bytes) appended to
  ``manifest.jsonl``, itself a chained JSONL file with its checkpoint. A segment without a
  committed manifest line is an uncommitted tail.

Integrity, as `audit_integrity` reports it: a chain mismatch at line i means line i (or one
before it) was edited, deleted, inserted or moved; a segment whose hash differs from its manifest
line was edited; fewer valid records than the checkpoint means committed records were removed
from the end. A last line without its newline (or not valid JSON) is a *torn tail*: an append
that a crash interrupted before its commit returned. It is reported with its byte offset and
length, never dropped silently, and the records before it are audited as usual.

A hash chain is tamper-*evident* relative to a trusted head: whoever can rewrite the whole file
and its checkpoint can forge a consistent chain, so `Integrity.head` is what an operator anchors
elsewhere (and `expect_head` checks).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from wevent.accounting.budget import BudgetError, format_exact
from wevent.accounting.evidence import evidence_to_json
from wevent.accounting.ledger import Charge

__all__ = [
    "GENESIS",
    "ChainedJsonlWriter",
    "Integrity",
    "IntegrityProblem",
    "SegmentWriter",
    "TornTail",
    "audit_integrity",
    "canonical",
    "chain_step",
    "charge_record",
    "group_record",
    "is_durable_ledger",
    "records_table",
    "sync_rename",
    "verified_records",
]

GENESIS = b"wevent-ledger-chain-v1"
CHAIN_KEY = "chain"
MANIFEST = "manifest.jsonl"
SEGMENT_DIR_SUFFIX = ".wledger"


def canonical(record: Mapping[str, Any]) -> bytes:
    """The bytes a record's chain hash covers: sorted-key compact JSON without ``chain``."""
    body = {k: v for k, v in record.items() if k != CHAIN_KEY}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def chain_step(previous: str, record: Mapping[str, Any]) -> str:
    """``H_i`` from ``H_{i-1}`` (hex) and record i."""
    return hashlib.sha256(bytes.fromhex(previous) + canonical(record)).hexdigest()


GENESIS_HEAD = hashlib.sha256(GENESIS).hexdigest()


def charge_record(charge: Charge) -> dict[str, Any]:
    """A charge as its documented JSONL record (exact strings)."""
    rec: dict[str, Any] = {"slot": charge.slot}
    if charge.user is not None:
        rec["user"] = charge.user
    else:
        rec["group"] = charge.group
    rec["epsilon"] = format_exact(charge.amount)
    if charge.part:
        rec["part"] = charge.part
    if charge.mechanism:
        rec["mechanism"] = charge.mechanism
    if charge.evidence is not None:
        rec["evidence"] = evidence_to_json(charge.evidence)
    return rec


def group_record(name: str, members: Iterable[str]) -> dict[str, Any]:
    """A group definition as its documented JSONL record."""
    return {"group": name, "members": list(members)}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_rename(tmp: Path, final: Path) -> None:
    """Publish the fully written file ``tmp`` as ``final``, durably: fsync its content, rename it
    over ``final`` (atomic), then fsync the directory so the rename itself survives a crash. A
    crash leaves either the old ``final`` or the new one, never a partial file under its name."""
    with tmp.open("rb") as fh:
        os.fsync(fh.fileno())
    tmp.replace(final)
    _fsync_dir(final.parent)


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
    sync_rename(tmp, path)


def _head_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


# ============================================================================ writers


class ChainedJsonlWriter:
    """Append-only chained JSONL ledger. ``append`` buffers; ``commit`` makes the buffered records
    durable (write, flush, fsync, checkpoint) and returns the committed count.

    Opening an existing file verifies it first and continues its chain; a file with a torn tail
    or a broken chain is refused (audit it, then repair by hand), so a writer never extends a
    ledger it cannot vouch for.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._pending: list[bytes] = []
        self._head = GENESIS_HEAD
        self._count = 0
        if self.path.exists():
            found = audit_integrity(self.path)
            if not found.ok:
                raise BudgetError(
                    f"{self.path}: cannot append: {found.summary()} (run wevent audit)"
                )
            self._head, self._count = found.head, found.records
        self._fh: BinaryIO = self.path.open("ab")
        self._closed = False

    @property
    def committed(self) -> int:
        return self._count - len(self._pending)

    @property
    def head(self) -> str:
        return self._head

    def append(self, record: Mapping[str, Any]) -> None:
        if self._closed:
            raise BudgetError(f"{self.path}: writer is closed")
        if CHAIN_KEY in record:
            raise BudgetError(f"records may not carry their own {CHAIN_KEY!r} key")
        self._head = chain_step(self._head, record)
        line = dict(record)
        line[CHAIN_KEY] = self._head
        self._pending.append(json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode())
        self._count += 1

    def append_charge(self, charge: Charge) -> None:
        self.append(charge_record(charge))

    def define_group(self, name: str, members: Iterable[str]) -> None:
        self.append(group_record(name, members))

    def _write(self, data: bytes) -> None:
        """One write of raw bytes (a seam for crash tests)."""
        self._fh.write(data)

    def commit(self) -> int:
        """Write the pending lines, flush and fsync, then replace the checkpoint atomically."""
        if self._pending:
            for line in self._pending:
                self._write(line + b"\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._pending.clear()
            _replace_atomically(
                _head_path(self.path),
                json.dumps({"records": self._count, "head": self._head}).encode() + b"\n",
            )
        return self._count

    def close(self) -> None:
        if not self._closed:
            self.commit()
            self._fh.close()
            self._closed = True

    def __enter__(self) -> ChainedJsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SegmentWriter:
    """Append-only Parquet segment ledger in a directory (``*.wledger``).

    ``commit`` writes the buffered records as the next segment (temporary name, fsync, atomic
    rename, directory fsync) and then commits a manifest line naming the segment's row count and
    SHA-256 through a `ChainedJsonlWriter`.
    """

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._manifest = ChainedJsonlWriter(self.directory / MANIFEST)
        self._segments = self._manifest.committed
        self._pending: list[dict[str, Any]] = []

    @property
    def committed(self) -> int:
        """Committed segments."""
        return self._segments

    @property
    def head(self) -> str:
        """The manifest chain's head: what anchors the whole segment ledger."""
        return self._manifest.head

    def append(self, record: Mapping[str, Any]) -> None:
        self._pending.append(dict(record))

    def append_charge(self, charge: Charge) -> None:
        self.append(charge_record(charge))

    def define_group(self, name: str, members: Iterable[str]) -> None:
        self.append(group_record(name, members))

    def commit(self) -> int:
        """Write the pending records as one segment; returns the number of committed segments."""
        if not self._pending:
            return self._segments
        import pyarrow.parquet as pq

        name = f"{self._segments + 1:06d}.parquet"
        final = self.directory / name
        tmp = self.directory / (name + ".tmp")
        table = records_table(self._pending)
        pq.write_table(table, tmp)
        sync_rename(tmp, final)
        self._manifest.append(
            {"segment": name, "rows": table.num_rows, "sha256": _file_sha256(final)}
        )
        self._manifest.commit()
        self._segments += 1
        self._pending.clear()
        return self._segments

    def close(self) -> None:
        self.commit()
        self._manifest.close()

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def records_table(records: Iterable[Mapping[str, Any]]) -> Any:
    """JSONL records as an Arrow table in the documented Parquet columns (membership rows have a
    null slot)."""
    import pyarrow as pa

    cols: dict[str, list[Any]] = {
        k: [] for k in ("slot", "user", "group", "epsilon", "part", "mechanism", "evidence")
    }
    for rec in records:
        if "members" in rec:
            for m in rec["members"]:
                row = {"slot": None, "user": m, "group": rec["group"]}
                for k in cols:
                    cols[k].append(row.get(k, ""))
            continue
        ev = rec.get("evidence")
        row = {
            "slot": rec["slot"],
            "user": rec.get("user", ""),
            "group": rec.get("group", ""),
            "epsilon": rec.get("epsilon", ""),
            "part": rec.get("part", ""),
            "mechanism": rec.get("mechanism", ""),
            "evidence": "" if ev in (None, "") else ev if isinstance(ev, str) else json.dumps(ev),
        }
        for k in cols:
            cols[k].append(row[k])
    return pa.table(
        {
            k: pa.array(v, type=pa.int64() if k == "slot" else pa.large_string())
            for k, v in cols.items()
        }
    )


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ============================================================================ audit


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes at the end of a file that no commit covered: an interrupted append."""

    file: str
    offset: int
    length: int
    line: int

    def describe(self) -> str:
        if self.line == 0:
            return (
                f"{self.file}: uncommitted segment ({self.length} byte(s) written before a crash, "
                "no manifest line; not audited)"
            )
        return (
            f"{self.file}: torn tail at line {self.line} (byte {self.offset}, {self.length} "
            "byte(s) of an append that never committed; not audited)"
        )


@dataclass(frozen=True, slots=True)
class IntegrityProblem:
    """Evidence that committed content was changed: an edit, deletion, insertion or reorder."""

    file: str
    line: int
    message: str

    def describe(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Integrity:
    """The chain-integrity result of one durable ledger.

    ``ok`` is False on any problem (tampering) *or* torn tail; ``records`` counts the verified
    records (ledger lines, or manifest lines = segments), ``rows`` the ledger rows they hold;
    ``files`` are the verified data files an engine should audit, in order.
    """

    path: str
    layout: str  # "chained-jsonl", "segments" or "plain"
    records: int
    rows: int
    head: str
    problems: tuple[IntegrityProblem, ...] = ()
    torn: tuple[TornTail, ...] = ()
    files: tuple[str, ...] = field(default=())
    checkpoint: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and not self.torn

    @property
    def chained(self) -> bool:
        return self.layout != "plain"

    def summary(self) -> str:
        if self.layout == "plain":
            return f"{self.path}: not chained (no integrity protection)"
        what = "segment(s)" if self.layout == "segments" else "record(s)"
        parts = [f"{self.path}: {self.layout}, {self.records} committed {what}, {self.rows} row(s)"]
        if self.problems:
            parts.append(
                f"{len(self.problems)} integrity problem(s): {self.problems[0].describe()}"
            )
        if self.torn:
            parts.append(self.torn[0].describe())
        if self.ok:
            parts.append(f"chain intact, head {self.head[:16]}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "layout": self.layout,
            "ok": self.ok,
            "records": self.records,
            "rows": self.rows,
            "head": self.head,
            "checkpoint": self.checkpoint,
            "problems": [p.describe() for p in self.problems],
            "torn_tail": [t.describe() for t in self.torn],
        }


def is_durable_ledger(path: Path) -> bool:
    """A segment directory, or a JSONL file whose first record carries a chain hash."""
    if path.is_dir():
        return (path / MANIFEST).exists()
    if path.suffix.lower() not in {".jsonl", ".ndjson"} or not path.exists():
        return False
    with path.open("rb") as fh:
        first = fh.readline()
    try:
        obj = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and CHAIN_KEY in obj


def _scan_chain(
    path: Path,
) -> tuple[list[dict[str, Any]], str, list[IntegrityProblem], list[TornTail]]:
    """Verify a chained JSONL file line by line: the records up to the first problem, the head
    hash after them, the problems and the torn tail."""
    data = path.read_bytes()
    problems: list[IntegrityProblem] = []
    torn: list[TornTail] = []
    records: list[dict[str, Any]] = []
    head = GENESIS_HEAD
    offset = 0
    number = 0
    name = str(path)
    while offset < len(data):
        end = data.find(b"\n", offset)
        number += 1
        if end < 0:  # no newline: a commit always ends its lines, so this append never committed
            torn.append(TornTail(name, offset, len(data) - offset, number))
            break
        raw = data[offset:end]
        offset = end + 1
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            problems.append(IntegrityProblem(name, number, "not a valid JSON record"))
            break
        if not isinstance(obj, dict) or not isinstance(obj.get(CHAIN_KEY), str):
            problems.append(IntegrityProblem(name, number, "record has no chain hash"))
            break
        expected = chain_step(head, obj)
        if obj[CHAIN_KEY] != expected:
            problems.append(
                IntegrityProblem(
                    name,
                    number,
                    "chain hash mismatch: this record or one before it was edited, deleted, "
                    "inserted or moved",
                )
            )
            break
        head = expected
        records.append(obj)
    return records, head, problems, torn


def _check_checkpoint(
    path: Path, records: list[dict[str, Any]], problems: list[IntegrityProblem]
) -> int | None:
    head_file = _head_path(path)
    if not head_file.exists():
        return None
    try:
        mark = json.loads(head_file.read_bytes())
        count, head = int(mark["records"]), str(mark["head"])
    except (ValueError, KeyError, TypeError):
        problems.append(IntegrityProblem(str(head_file), 0, "unreadable checkpoint"))
        return None
    if problems:  # the chain already failed; the checkpoint adds nothing
        return count
    if count > len(records):
        problems.append(
            IntegrityProblem(
                str(path),
                len(records) + 1,
                f"the checkpoint vouches for {count} committed record(s), the file holds "
                f"{len(records)}: committed records were removed",
            )
        )
    elif count and records[count - 1][CHAIN_KEY] != head:
        problems.append(
            IntegrityProblem(str(path), count, "chain head differs from the checkpoint")
        )
    return count


def verified_records(path: Path | str) -> Iterator[dict[str, Any]]:
    """The verified records of a chained JSONL file (without their chain key)."""
    records, _, _, _ = _scan_chain(Path(path))
    for rec in records:
        yield {k: v for k, v in rec.items() if k != CHAIN_KEY}


def audit_integrity(path: Path | str, *, expect_head: str | None = None) -> Integrity:
    """Verify a durable ledger (see the module docstring); a plain ledger file is reported as
    unprotected (``layout == "plain"``, ok)."""
    path = Path(path)
    if path.is_dir():
        return _audit_segments(path, expect_head)
    if not is_durable_ledger(path):
        if not path.exists():
            raise BudgetError(f"{path}: no such file")
        return Integrity(str(path), "plain", 0, 0, "", files=(str(path),))
    records, head, problems, torn = _scan_chain(path)
    checkpoint = _check_checkpoint(path, records, problems)
    if expect_head is not None and not problems and head != expect_head:
        problems.append(IntegrityProblem(str(path), 0, "head differs from the expected head"))
    rows = sum(1 for r in records if "slot" in r)
    return Integrity(
        str(path),
        "chained-jsonl",
        len(records),
        rows,
        head,
        tuple(problems),
        tuple(torn),
        (str(path),),
        checkpoint,
    )


def _audit_segments(directory: Path, expect_head: str | None) -> Integrity:
    manifest = directory / MANIFEST
    if not manifest.exists():
        raise BudgetError(f"{directory}: not a segment ledger (no {MANIFEST})")
    records, head, problems, torn = _scan_chain(manifest)
    checkpoint = _check_checkpoint(manifest, records, problems)
    files: list[str] = []
    rows = 0
    named: set[str] = set()
    for number, rec in enumerate(records, start=1):
        seg = rec.get("segment")
        if not isinstance(seg, str) or "/" in seg or not seg.endswith(".parquet"):
            problems.append(IntegrityProblem(str(manifest), number, "bad segment name"))
            continue
        named.add(seg)
        target = directory / seg
        if not target.exists():
            problems.append(
                IntegrityProblem(str(target), 0, "committed segment is missing (deleted)")
            )
            continue
        if _file_sha256(target) != rec.get("sha256"):
            problems.append(
                IntegrityProblem(
                    str(target), 0, "content differs from its committed SHA-256 (edited)"
                )
            )
            continue
        files.append(str(target))
        rows += int(rec.get("rows", 0))
    for extra in sorted(directory.glob("*.parquet*")):
        if extra.name not in named:
            torn.append(TornTail(str(extra), 0, extra.stat().st_size, 0))
    if expect_head is not None and not problems and head != expect_head:
        problems.append(IntegrityProblem(str(manifest), 0, "head differs from the expected head"))
    return Integrity(
        str(directory),
        "segments",
        len(records),
        rows,
        head,
        tuple(problems),
        tuple(torn),
        tuple(files),
        checkpoint,
    )
