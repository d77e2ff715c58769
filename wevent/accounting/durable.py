"""Durable, tamper-evident ledger files: typed append-only writers, their integrity audit and the
repair of a crashed writer's tail.

Two layouts, both readable by the ordinary ledger reader (`wevent.accounting.formats.read_ledger`):

* **chained JSONL** (``LEDGER.jsonl``): the documented JSONL records, each carrying one extra key
  ``"chain"``: ``H_i = sha256(H_{i-1} || canonical(record_i))`` in hex, where ``canonical`` is the
  record without ``chain`` as sorted-key compact JSON (UTF-8) and ``H_0 = sha256(GENESIS)``. Its
  checkpoint sidecar ``LEDGER.jsonl.head`` (record count and head hash, optionally an Ed25519
  signature) is written when the ledger is created, before any record, and updated after every
  commit has written and fsynced its lines: it has two fixed 512-byte slots, written in turn in
  place and fdatasynced, so a crash while one is written leaves the previous checkpoint in the
  other (a file is created anew, atomically, when a writer starts).
* **Parquet segments** (a directory ``LEDGER.wledger/``): each commit writes the buffered records
  as one Parquet file ``NNNNNN.parquet`` in the documented columns and fsyncs it and the
  directory; only then is a line naming it (rows, sha256 of the file's bytes) appended to
  ``manifest.jsonl``, itself a chained JSONL file with its checkpoint. A segment file without
  its committed manifest line is an uncommitted segment (a crash, or a file put there).

Writers take typed records (`Charge`, a group's name and members, or a mapping that parses to
one) and refuse a bad one with a `RecordError` before anything of it is written: inexact amounts
(floats), unknown fields, slots out of order (a durable ledger is in slot order, as the guard
spends), a group charged before it is defined or defined again with other members, a member
listed twice, text that is not valid Unicode.

Whether a ledger is durable is not decided by its content alone: a ``.wledger`` directory, a
manifest, or a checkpoint sidecar make it durable, and a durable ledger without its chain or
checkpoint is an integrity failure. `audit_integrity` reports three states (``intact``,
``broken``, ``unprotected`` for a plain file) and, apart from them, an uncommitted tail: a torn
last line, records past the last checkpoint (a commit interrupted between its fsync and its
checkpoint, or records appended by someone else), or a segment without a committed manifest line.
A tail is never audited and never dropped silently; `repair` moves it to a side file.

A hash chain is tamper-*evident* relative to something the ledger's writer cannot change: the
checkpoint (only as trustworthy as the file system), a head recorded elsewhere (``expect_head``),
or a signature of the checkpoint under a key the auditor trusts (``public_key``). docs/audits.md
states what each protects against.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from wevent.accounting.budget import Budget, BudgetError, check_slot, format_exact, shown
from wevent.accounting.evidence import Evidence, evidence_from_json, evidence_to_json
from wevent.accounting.inputs import (
    check_input_file,
    loads,
    max_field,
    text_problem,
)
from wevent.accounting.ledger import Charge

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from wevent.accounting.signing import PrivateKeySource, PublicKeySource

__all__ = [
    "GENESIS",
    "GENESIS_HEAD",
    "ChainedJsonlWriter",
    "GroupRecord",
    "Integrity",
    "IntegrityProblem",
    "LedgerIntegrityError",
    "RecordError",
    "Repair",
    "SegmentWriter",
    "TornTail",
    "audit_integrity",
    "canonical",
    "chain_step",
    "charge_record",
    "check_expected_head",
    "file_sha256",
    "group_record",
    "is_durable_ledger",
    "parse_record",
    "read_checkpoint",
    "records_table",
    "repair",
    "run_header_path",
    "sync_rename",
    "verified_records",
]

GENESIS = b"wevent-ledger-chain-v1"
CHAIN_KEY = "chain"
MANIFEST = "manifest.jsonl"
SEGMENT_DIR_SUFFIX = ".wledger"
CUT_SUFFIX = ".cut"
CHECKPOINT_SLOT = 4096  # bytes per checkpoint slot: one JSON object padded with spaces, "\n"

# Characters that `str.splitlines` (and so many JSON Lines readers) treat as line breaks but
# `json.dumps(ensure_ascii=False)` leaves unescaped inside strings; json.dumps already escapes
# every character below U+0020 (\n, \r, \v, \f, \x1c-\x1e). tests/test_audit_durable.py checks
# this set against every code point.
LINE_BREAKS_UNESCAPED = ("\x85", "\u2028", "\u2029")


def canonical(record: Mapping[str, Any]) -> bytes:
    """The bytes a record's chain hash covers: sorted-key compact JSON without ``chain``."""
    body = {k: v for k, v in record.items() if k != CHAIN_KEY}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def chain_step(previous: str, record: Mapping[str, Any]) -> str:
    """``H_i`` from ``H_{i-1}`` (hex) and record i."""
    return hashlib.sha256(bytes.fromhex(previous) + canonical(record)).hexdigest()


GENESIS_HEAD = hashlib.sha256(GENESIS).hexdigest()


# The UTF-8 bytes of each unescaped line break, and its JSON escape. A lead byte (0xC2, 0xE2)
# never occurs inside another character's encoding, so these sequences are always the character.
_LINE_BREAK_BYTES = tuple(
    (ch.encode(), f"\\u{ord(ch):04x}".encode()) for ch in LINE_BREAKS_UNESCAPED
)


def _escape_breaks(data: bytes) -> bytes:
    """``data`` (compact UTF-8 JSON) with every line-break character escaped: they can only
    occur inside strings, where the escape means the same character."""
    for raw, escaped in _LINE_BREAK_BYTES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def _line(record: Mapping[str, Any]) -> bytes:
    """One JSON line (without its newline): UTF-8, every line-break character escaped."""
    return _escape_breaks(json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode())


def _chained_line(previous: str, body: bytes) -> tuple[str, bytes]:
    """The head after the record whose canonical bytes are ``body`` and its JSON line carrying
    that head (one serialization: the canonical bytes with the chain key added last)."""
    # body is a non-empty object: it ends with "}" after at least one field
    head = hashlib.sha256(bytes.fromhex(previous) + body).hexdigest()
    return head, _escape_breaks(
        body[:-1] + b',"' + CHAIN_KEY.encode() + b'":"' + head.encode() + b'"}'
    )


# ============================================================================ typed records


class RecordError(BudgetError):
    """A record a durable writer refuses; nothing of it was written."""


class LedgerIntegrityError(BudgetError):
    """A durable ledger a writer or `repair` will not touch: tampered, or (for a writer) with an
    uncommitted tail (`repair` moves it aside). ``integrity`` is what the audit found."""

    def __init__(self, message: str, integrity: Integrity) -> None:
        super().__init__(message)
        self.integrity = integrity


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group definition: the compact form's name and its members, in order."""

    name: str
    members: tuple[str, ...]


CHARGE_FIELDS = ("slot", "user", "group", "epsilon", "part", "mechanism", "evidence")
GROUP_FIELDS = ("group", "members")


def _text(value: object, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{what}: expected a string, got {shown(value)}")
    if not value and not allow_empty:
        raise RecordError(f"{what}: must not be empty")
    problem = text_problem(value)  # what every reader refuses, refused before it is written
    if problem is not None:
        raise RecordError(f"{what} {problem}")
    return value


def _amount(value: object) -> Budget:
    if isinstance(value, float):
        raise RecordError(
            f"epsilon: {value!r} is a float, which is not exact; write the amount as a string "
            "('0.1', '1/3') or a Fraction"
        )
    if value is None or value == "":
        raise RecordError("epsilon: missing")
    try:
        return value if isinstance(value, Budget) else Budget(value, what="epsilon")  # type: ignore[arg-type]
    except BudgetError as exc:
        raise RecordError(str(exc)) from None


def _evidence_keys(given: Mapping[str, Any], parsed: Evidence) -> None:
    """Refuse evidence fields the kind does not have (the parser would drop them silently)."""
    known = set(evidence_to_json(parsed)) | {"note"}
    unknown = sorted(set(given) - known)
    if unknown:
        raise RecordError(f"evidence: unknown field(s) {', '.join(map(repr, unknown))}")
    inner = given.get("inner")
    if isinstance(inner, Mapping):
        _evidence_keys(inner, evidence_from_json(inner))


def _evidence(value: object) -> Evidence | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = loads(value)  # the readers' rules: no key twice, bounded nesting
        except json.JSONDecodeError as exc:
            raise RecordError(f"evidence: not valid JSON ({exc.msg})") from None
        except ValueError as exc:
            raise RecordError(f"evidence: not usable JSON ({exc})") from None
    if _is_evidence(value):
        return value  # type: ignore[return-value]
    if not isinstance(value, Mapping):
        raise RecordError(f"evidence: expected a JSON object or evidence, got {value!r}")
    try:
        parsed = evidence_from_json(value)
    except BudgetError as exc:
        raise RecordError(str(exc)) from None
    _evidence_keys(value, parsed)
    return parsed


_EVIDENCE_TYPES: tuple[type, ...] = ()


def _is_evidence(value: object) -> bool:
    global _EVIDENCE_TYPES
    if not _EVIDENCE_TYPES:
        from typing import get_args

        _EVIDENCE_TYPES = get_args(Evidence)
    return isinstance(value, _EVIDENCE_TYPES)


def check_charge(charge: Charge) -> Charge:
    """``charge`` with its fields checked (slot, an exact non-negative amount, exactly one of
    user or group, text fields, evidence); `RecordError` otherwise."""
    if not isinstance(charge, Charge):
        raise RecordError(f"expected a Charge, got {type(charge).__name__}")
    try:
        check_slot(charge.slot)
    except BudgetError as exc:
        raise RecordError(str(exc)) from None
    amount = _amount(charge.amount)
    if (charge.user is None) == (charge.group is None):
        raise RecordError("a charge names exactly one of user or group")
    user = None if charge.user is None else _text(charge.user, "user")
    group = None if charge.group is None else _text(charge.group, "group")
    part = _text(charge.part, "part", allow_empty=True)
    mechanism = _text(charge.mechanism, "mechanism", allow_empty=True)
    if charge.evidence is not None and not _is_evidence(charge.evidence):
        raise RecordError(f"evidence: expected evidence, got {type(charge.evidence).__name__}")
    if amount is charge.amount:
        return charge
    return Charge(charge.slot, amount, user, group, part, mechanism, charge.evidence)


def check_group(name: object, members: Iterable[object]) -> GroupRecord:
    """A group definition with its fields checked: a name, members (possibly none) listed once
    each."""
    name = _text(name, "group")
    if isinstance(members, str | bytes) or not isinstance(members, Iterable):
        raise RecordError(f"group {name!r}: members must be a list of user ids")
    given = tuple(members)
    if set(map(type, given)) == {str}:  # the usual case, checked in bulk (C loops)
        strings = cast(tuple[str, ...], given)
        distinct = set(strings)
        if (
            len(distinct) == len(strings)
            and "" not in distinct
            and max(map(len, strings)) <= max_field()
        ):
            joined = "".join(strings)
            try:
                joined.encode("utf-8")
            except UnicodeEncodeError:
                pass  # the member-by-member check below names the member
            else:
                if "\x00" not in joined:
                    return GroupRecord(name, strings)
    listed = tuple(_text(m, f"group {name!r}: member") for m in given)
    seen: set[str] = set()
    for member in listed:
        if member in seen:
            raise RecordError(f"group {name!r} lists member {member!r} twice")
        seen.add(member)
    return GroupRecord(name, listed)


def parse_record(record: Mapping[str, Any]) -> Charge | GroupRecord:
    """The typed record of a documented JSONL record (a charge, or a group definition with
    ``members``); `RecordError` for anything else, naming what is wrong."""
    if not isinstance(record, Mapping):
        raise RecordError(f"a record is a mapping, got {type(record).__name__}")
    keys = set(record)
    if CHAIN_KEY in keys:
        raise RecordError(f"records may not carry their own {CHAIN_KEY!r} key")
    if "members" in keys:
        unknown = sorted(keys - set(GROUP_FIELDS))
        if unknown:
            raise RecordError(
                f"unknown field(s) {', '.join(map(repr, unknown))} in a group definition "
                "(it has group and members)"
            )
        return check_group(record.get("group"), record["members"])
    unknown = sorted(keys - set(CHARGE_FIELDS))
    if unknown:
        raise RecordError(
            f"unknown field(s) {', '.join(map(repr, unknown))} (a charge has "
            f"{', '.join(CHARGE_FIELDS)}; a group definition has group and members)"
        )
    if "slot" not in keys:
        raise RecordError("slot: missing")
    user, group = record.get("user"), record.get("group")
    return check_charge(
        Charge(
            slot=record["slot"],
            amount=_amount(record.get("epsilon")),
            user=None if user is None or user == "" else user,
            group=None if group is None or group == "" else group,
            part="" if record.get("part") is None else record["part"],
            mechanism="" if record.get("mechanism") is None else record["mechanism"],
            evidence=_evidence(record.get("evidence")),
        )
    )


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


# The optional text fields of a charge between "evidence" and "slot", in sorted-key order.
_TEXT_FIELDS = ((b',"group":', "group"), (b',"mechanism":', "mechanism"), (b',"part":', "part"))


class _RecordOrder:
    """What a durable ledger's next record must respect: the groups defined so far and the last
    slot charged. `accept` checks a typed record against them and returns its JSONL record (None
    for a group defined again with the same members, which adds nothing)."""

    _CACHE = 4096  # distinct amounts and evidence values whose text is kept

    def __init__(self) -> None:
        self.groups: dict[str, tuple[str, ...]] = {}
        self.last_slot = 0
        # A mechanism charges few distinct amounts and evidence values: their text once.
        self._amounts: dict[Fraction, str] = {}
        self._evidence: dict[Evidence, dict[str, Any]] = {}
        # canonical JSON of the texts and evidence values seen (by the evidence dict's id: the
        # dict is kept in _evidence while its entry here lives, so the id is not reused)
        self._texts: dict[str, bytes] = {}
        self._evidence_bytes: dict[int, tuple[dict[str, Any], bytes]] = {}

    def replay(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Take in the records already in the ledger (verified, without their chain key)."""
        for rec in records:
            if "members" in rec:
                self.groups.setdefault(str(rec["group"]), tuple(rec["members"]))
            elif isinstance(rec.get("slot"), int):
                self.last_slot = max(self.last_slot, rec["slot"])

    def accept(self, record: Charge | GroupRecord) -> dict[str, Any] | None:
        if isinstance(record, GroupRecord):
            known = self.groups.get(record.name)
            if known is not None:
                if known != record.members:
                    raise RecordError(
                        f"group {record.name!r} is already defined with other members"
                    )
                return None
            self.groups[record.name] = record.members
            return group_record(record.name, record.members)
        if record.group is not None and record.group not in self.groups:
            raise RecordError(f"group {record.group!r} is charged before it is defined")
        if record.slot < self.last_slot:
            raise RecordError(
                f"slot {record.slot} comes after slot {self.last_slot}: a durable ledger is "
                "written in slot order"
            )
        self.last_slot = record.slot
        rec: dict[str, Any] = {"slot": int(record.slot)}  # a plain int (an IntEnum prints apart)
        if record.user is not None:
            rec["user"] = record.user
        else:
            rec["group"] = record.group
        text = self._amounts.get(record.amount)
        if text is None:
            if len(self._amounts) >= self._CACHE:
                self._amounts.clear()
            text = self._amounts[record.amount] = format_exact(record.amount)
        rec["epsilon"] = text
        if record.part:
            rec["part"] = record.part
        if record.mechanism:
            rec["mechanism"] = record.mechanism
        if record.evidence is not None:
            ev = self._evidence.get(record.evidence)
            if ev is None:
                if len(self._evidence) >= self._CACHE:
                    self._evidence.clear()
                ev = self._evidence[record.evidence] = evidence_to_json(record.evidence)
            rec["evidence"] = ev
        return rec  # charge_record(record), with the texts of repeated values kept

    def _text_json(self, text: str) -> bytes:
        found = self._texts.get(text)
        if found is None:
            if len(self._texts) >= self._CACHE:
                self._texts.clear()
            found = self._texts[text] = json.dumps(text, ensure_ascii=False).encode()
        return found

    def canonical_charge(self, rec: dict[str, Any]) -> bytes:
        """``canonical(rec)`` for a charge record `accept` returned, assembled from cached
        pieces in sorted-key order (epsilon, evidence, group, mechanism, part, slot, user)."""
        out = [b'{"epsilon":', self._text_json(rec["epsilon"])]
        ev = rec.get("evidence")
        if ev is not None:
            known = self._evidence_bytes.get(id(ev))  # the entry keeps ev alive: id not reused
            if known is None:
                if len(self._evidence_bytes) >= self._CACHE:
                    self._evidence_bytes.clear()
                body = json.dumps(ev, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                known = self._evidence_bytes[id(ev)] = (ev, body.encode())
            out += (b',"evidence":', known[1])
        for key, name in _TEXT_FIELDS:
            if name in rec:
                out += (key, self._text_json(rec[name]))
        out += (b',"slot":', str(rec["slot"]).encode())
        if "user" in rec:
            out += (b',"user":', self._text_json(rec["user"]))
        out.append(b"}")
        return b"".join(out)


# ============================================================================ files


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


def _mark_sum(mark: Mapping[str, Any]) -> str:
    """The checksum a checkpoint slot carries: SHA-256 (16 hex digits) of its other fields."""
    body = json.dumps({k: v for k, v in mark.items() if k != "sum"}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _mark_slot(mark: Mapping[str, Any]) -> bytes:
    """One checkpoint slot: the mark with its checksum, as JSON padded to `CHECKPOINT_SLOT`."""
    data = json.dumps({**mark, "sum": _mark_sum(mark)}, separators=(",", ":")).encode()
    if len(data) >= CHECKPOINT_SLOT:  # cannot happen for the documented fields
        raise RecordError(f"checkpoint of {len(data)} bytes does not fit a slot")
    return data.ljust(CHECKPOINT_SLOT - 1) + b"\n"


def _datasync(fd: int) -> None:
    """fdatasync where the platform has it (the file's size does not change), else fsync."""
    getattr(os, "fdatasync", os.fsync)(fd)


def _head_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _signer(source: PrivateKeySource | None) -> Ed25519PrivateKey | None:
    if source is None:
        return None
    from wevent.accounting.signing import load_signing_key

    return load_signing_key(source)


def _verifier(source: PublicKeySource | None) -> Ed25519PublicKey | None:
    if source is None:
        return None
    from wevent.accounting.signing import load_public_key

    return load_public_key(source)


# ============================================================================ writers


class _ChainLog:
    """An append-only chained JSONL file with its checkpoint: the mechanics both writers share
    (the ledger itself, or a segment ledger's manifest). ``append_line`` buffers a checked
    record; ``commit`` writes the buffered lines, flushes and fsyncs, then replaces the
    checkpoint atomically (signed when a key is given)."""

    def __init__(self, path: Path, signing_key: PrivateKeySource | None, *, layout: str) -> None:
        self.path = path
        self._key = _signer(signing_key)
        self._pending: list[bytes] = []
        self._head = GENESIS_HEAD
        self._count = 0
        self._committed_head = GENESIS_HEAD
        self._mark_fd: int | None = None  # the checkpoint file, once this writer created it
        self._mark_next = 0  # the slot the next in-place checkpoint goes to
        if self.path.exists() or _head_path(self.path).exists():
            self._continue(layout)
        else:  # a new ledger: its checkpoint first, so a durable ledger never lacks one
            self._checkpoint()
        self._fh: BinaryIO = self.path.open("ab")
        _fsync_dir(self.path.parent)
        self._closed = False

    def _continue(self, layout: str) -> None:
        """Verify the existing file and continue its chain (refusing what it cannot vouch for)."""
        head_file = _head_path(self.path)
        if not head_file.exists() and self.path.exists() and self.path.stat().st_size == 0:
            self._checkpoint()  # an empty file and nothing else: a new ledger in it
            return
        found = _audit_chain(self.path, layout=layout)
        if found.layout == "plain":
            raise LedgerIntegrityError(
                f"{self.path}: cannot append: it is a plain ledger (no chain, no checkpoint); "
                "a durable ledger starts in a new file",
                found,
            )
        if not found.ok:
            action = (
                f"wevent ledger repair {self.path} moves it aside"
                if found.state == "intact"
                else "run wevent audit"
            )
            raise LedgerIntegrityError(
                f"{self.path}: cannot append: {found.summary()} ({action})", found
            )
        marks = _read_checkpoint(head_file)
        mark = marks.latest if isinstance(marks, _Marks) else None
        if mark is not None and mark.signature:
            # A signed ledger continues only under its own key (an unsigned one may start
            # signing: the writer signs the chain it has just verified).
            if self._key is None:
                raise LedgerIntegrityError(
                    f"{self.path}: cannot append: its checkpoints are signed; pass its signing key",
                    found,
                )
            from wevent.accounting.signing import verify_checkpoint

            if not verify_checkpoint(
                self._key.public_key(), mark.records, mark.head, mark.signature
            ):
                raise LedgerIntegrityError(
                    f"{self.path}: cannot append: its checkpoint is not signed by this key",
                    found,
                )
        self._head = self._committed_head = found.head
        self._count = found.records

    def existing(self) -> Iterator[dict[str, Any]]:
        """The records the file held when this writer opened it (streamed, verified again)."""
        return verified_records(self.path, limit=self._count - len(self._pending))

    @property
    def committed(self) -> int:
        return self._count - len(self._pending)

    @property
    def head(self) -> str:
        return self._head

    @property
    def committed_head(self) -> str:
        return self._committed_head

    def append_line(self, record: Mapping[str, Any]) -> None:
        if CHAIN_KEY in record:
            raise RecordError(f"records may not carry their own {CHAIN_KEY!r} key")
        self.append_canonical(canonical(record))

    def append_canonical(self, body: bytes) -> None:
        """`append_line` for a record given as its canonical bytes (`canonical`)."""
        if self._closed:
            raise RecordError(f"{self.path}: writer is closed")
        self._head, line = _chained_line(self._head, body)
        self._pending.append(line)
        self._count += 1

    def _write(self, data: bytes) -> None:
        """One write of raw bytes (a seam for crash tests)."""
        self._fh.write(data)

    def _checkpoint(self) -> None:
        """Record (count, head) in the checkpoint. The file has two fixed slots written in turn
        (`CHECKPOINT_SLOT` bytes each: a page, so a write to one never touches the other's
        sectors), each carrying a checksum of its content: a crash while one is written leaves
        the other, the previous checkpoint, intact, and the torn one unreadable (never a mix of
        old and new that reads as a checkpoint). The first checkpoint of a writer's session
        creates the file anew, atomically, with both slots holding it; later ones overwrite the
        older slot in place and fdatasync it: one sync instead of a rename and two."""
        mark: dict[str, Any] = {"records": self._count, "head": self._head}
        if self._key is not None:
            from wevent.accounting.signing import sign_checkpoint

            mark.update(sign_checkpoint(self._key, self._count, self._head))
        slot = _mark_slot(mark)
        path = _head_path(self.path)
        if self._mark_fd is None:  # both slots the same: a blank or torn one is never normal
            _replace_atomically(path, slot + slot)
            self._mark_fd = os.open(path, os.O_RDWR)
            self._mark_next = 1
        else:
            os.pwrite(self._mark_fd, slot, self._mark_next * CHECKPOINT_SLOT)
            _datasync(self._mark_fd)
            self._mark_next ^= 1

    def commit(self) -> int:
        """Write the pending lines, flush and fsync, then replace the checkpoint atomically."""
        if self._pending:
            for line in self._pending:
                self._write(line + b"\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._pending.clear()
            self._checkpoint()
            self._committed_head = self._head
        return self._count

    def close(self) -> None:
        if not self._closed:
            self.commit()
            self._fh.close()
            if self._mark_fd is not None:
                os.close(self._mark_fd)
                self._mark_fd = None
            self._closed = True


class ChainedJsonlWriter(_ChainLog):
    """Append-only chained JSONL ledger of typed records.

    `append_charge` and `define_group` (or `append`, for a mapping that parses to one of them)
    check a record and buffer it; a bad record raises `RecordError` and leaves nothing behind.
    `commit` makes the buffered records durable (write, flush, fsync, checkpoint) and returns
    the committed count. With ``signing_key`` (an Ed25519 private key or its PEM file; the
    ``sign`` extra) every checkpoint is signed.

    ``committed`` counts the records on disk and vouched for by the checkpoint; ``head`` is the
    chain head after every record appended so far, ``committed_head`` the checkpoint's (the
    value to anchor elsewhere after a commit).

    A new ledger's checkpoint is written before its first record. Opening an existing ledger
    verifies it and continues its chain; a tampered ledger, one with an uncommitted tail (run
    `wevent ledger repair`), a plain file, or a signed ledger opened without its key is refused
    with `LedgerIntegrityError`, so a writer never extends a ledger it cannot vouch for.
    """

    def __init__(self, path: Path | str, *, signing_key: PrivateKeySource | None = None) -> None:
        super().__init__(Path(path), signing_key, layout="chained-jsonl")
        self._order = _RecordOrder()
        if self._count:
            self._order.replay(self.existing())

    def _add(self, record: Charge | GroupRecord) -> None:
        try:
            rec = self._order.accept(record)
        except RecordError as exc:
            raise RecordError(f"{self.path}: record refused, nothing written: {exc}") from None
        if rec is not None:
            if isinstance(record, Charge):
                self.append_canonical(self._order.canonical_charge(rec))
            else:
                self.append_line(rec)

    def append(self, record: Mapping[str, Any]) -> None:
        """Append a documented JSONL record (a charge or a group definition), checked."""
        try:
            typed = parse_record(record)
        except RecordError as exc:
            raise RecordError(f"{self.path}: record refused, nothing written: {exc}") from None
        self._add(typed)

    def append_charge(self, charge: Charge) -> None:
        try:
            checked = check_charge(charge)
        except RecordError as exc:
            raise RecordError(f"{self.path}: record refused, nothing written: {exc}") from None
        self._add(checked)

    def define_group(self, name: str, members: Iterable[str]) -> None:
        """Define a group before its first charge; defining it again with the same members
        writes nothing, with other members is refused."""
        try:
            checked = check_group(name, members)
        except RecordError as exc:
            raise RecordError(f"{self.path}: record refused, nothing written: {exc}") from None
        self._add(checked)

    def __enter__(self) -> ChainedJsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _create_segment_directory(directory: Path, signing_key: PrivateKeySource | None) -> None:
    """Create a segment ledger's directory with its manifest's first checkpoint already in it:
    built under a temporary name beside it and renamed into place, so no crash leaves an empty
    ``.wledger`` directory (an empty one was emptied; the audit says so)."""
    import tempfile

    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.new-", dir=directory.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # as mkdir would make it (mkdtemp makes it private)
        _ChainLog(tmp / MANIFEST, signing_key, layout="segments").close()
        _fsync_dir(tmp)
        tmp.rename(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(directory.parent)


class SegmentWriter:
    """Append-only Parquet segment ledger in a directory (``*.wledger``) of typed records.

    Records are checked as `ChainedJsonlWriter` checks them. ``commit`` writes the buffered
    records as the next segment (temporary name, fsync, atomic rename, directory fsync) and
    then commits a manifest line naming the segment's row count and SHA-256 (the manifest is a
    chained JSONL file with its checkpoint, signed with ``signing_key`` when given).
    """

    def __init__(
        self, directory: Path | str, *, signing_key: PrivateKeySource | None = None
    ) -> None:
        self.directory = Path(directory)
        if not self.directory.exists():
            _create_segment_directory(self.directory, signing_key)
        elif self.directory.is_dir() and not any(self.directory.iterdir()):
            raise LedgerIntegrityError(
                f"{self.directory}: cannot append: an empty directory is not a segment ledger "
                "(a writer creates one with its manifest's checkpoint in place; an emptied "
                "ledger is not restarted silently): remove it, or name a new ledger",
                _audit_segments(self.directory, None, None),
            )
        if any(self.directory.iterdir()):
            found = _audit_segments(self.directory, None, None)
            if not found.ok:
                action = (
                    f"wevent ledger repair {self.directory} moves it aside"
                    if found.state == "intact"
                    else "run wevent audit"
                )
                raise LedgerIntegrityError(
                    f"{self.directory}: cannot append: {found.summary()} ({action})", found
                )
        self._manifest = _ChainLog(self.directory / MANIFEST, signing_key, layout="segments")
        self._order = _RecordOrder()
        if self._manifest.committed:
            named = [str(r["segment"]) for r in self._manifest.existing()]
            self._order.replay(_segment_records(self.directory, named))
        self._segments = self._manifest.committed
        self._pending: list[dict[str, Any]] = []

    @property
    def committed(self) -> int:
        """Committed segments."""
        return self._segments

    @property
    def head(self) -> str:
        """The manifest's chain head after the last commit (segments are bound into it by
        their SHA-256): the value to anchor elsewhere."""
        return self._manifest.head

    committed_head = head

    def _add(self, record: Charge | GroupRecord) -> None:
        try:
            rec = self._order.accept(record)
        except RecordError as exc:
            raise RecordError(f"{self.directory}: record refused, nothing written: {exc}") from None
        if rec is not None:
            self._pending.append(rec)

    def append(self, record: Mapping[str, Any]) -> None:
        """Append a documented JSONL record (a charge or a group definition), checked."""
        try:
            typed = parse_record(record)
        except RecordError as exc:
            raise RecordError(f"{self.directory}: record refused, nothing written: {exc}") from None
        self._add(typed)

    def append_charge(self, charge: Charge) -> None:
        try:
            checked = check_charge(charge)
        except RecordError as exc:
            raise RecordError(f"{self.directory}: record refused, nothing written: {exc}") from None
        self._add(checked)

    def define_group(self, name: str, members: Iterable[str]) -> None:
        try:
            checked = check_group(name, members)
        except RecordError as exc:
            raise RecordError(f"{self.directory}: record refused, nothing written: {exc}") from None
        self._add(checked)

    def commit(self) -> int:
        """Write the pending records as one segment; returns the number of committed segments."""
        if not self._pending:
            return self._segments
        import pyarrow as pa
        import pyarrow.parquet as pq

        name = f"{self._segments + 1:06d}.parquet"
        table = records_table(self._pending)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        data = sink.getvalue().to_pybytes()
        # Written under its final name: until its manifest line commits, a crash leaves it an
        # uncommitted segment (reported, moved aside by repair), so no rename is needed; the
        # directory is fsynced so the committed manifest never names a file a crash lost.
        with (self.directory / name).open("xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(self.directory)
        self._manifest.append_line(
            {"segment": name, "rows": table.num_rows, "sha256": hashlib.sha256(data).hexdigest()}
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


def _segment_records(directory: Path, segments: list[str]) -> Iterator[dict[str, Any]]:
    """The group definitions and the last charged slot of committed segments, as records
    (enough for `_RecordOrder.replay`)."""
    import pyarrow.parquet as pq

    groups: dict[str, list[str]] = {}
    last = 0
    for name in segments:
        table = pq.read_table(directory / name, columns=["slot", "group", "user"])
        slots = table.column("slot").to_pylist()
        for slot, group, user in zip(
            slots, table.column("group").to_pylist(), table.column("user").to_pylist(), strict=True
        ):
            if slot is None:
                listed = groups.setdefault(str(group), [])
                if user:  # a row without a user declares a group without members
                    listed.append(str(user))
            else:
                last = max(last, int(slot))
    for name, members in groups.items():
        yield {"group": name, "members": members}
    if last:
        yield {"slot": last}


def records_table(records: Iterable[Mapping[str, Any]]) -> Any:
    """JSONL records as an Arrow table in the documented Parquet columns (membership rows have a
    null slot)."""
    import pyarrow as pa

    cols: dict[str, list[Any]] = {
        k: [] for k in ("slot", "user", "group", "epsilon", "part", "mechanism", "evidence")
    }
    for rec in records:
        if "members" in rec:
            for m in rec["members"] or [""]:  # no members: one row without a user
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


# ============================================================================ audit


@dataclass(frozen=True, slots=True)
class TornTail:
    """Content at the end of a durable ledger that no commit vouches for, never audited:

    * ``torn-line``: a last line without its newline (an append a crash interrupted);
    * ``unanchored``: ``records`` complete records past the last checkpoint (a commit
      interrupted between the fsync of its lines and its checkpoint, or records appended by
      someone else: the two cannot be told apart);
    * ``uncommitted-segment``: a segment file without a committed manifest line.
    """

    file: str
    offset: int
    length: int
    line: int
    kind: str = "torn-line"
    records: int = 0

    def describe(self) -> str:
        if self.kind == "uncommitted-segment":
            return (
                f"{self.file}: uncommitted segment ({self.length} byte(s) written before a crash, "
                "no committed manifest line; not audited)"
            )
        if self.kind == "unanchored":
            return (
                f"{self.file}: unanchored tail from line {self.line} (byte {self.offset}): "
                f"{self.records} record(s) past the last checkpoint, a commit interrupted before "
                "its checkpoint or an append by someone else; not audited"
            )
        return (
            f"{self.file}: torn tail at line {self.line} (byte {self.offset}, {self.length} "
            "byte(s) of an append that never committed; not audited)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "file": self.file,
            "line": self.line,
            "offset": self.offset,
            "bytes": self.length,
            "records": self.records,
            "description": self.describe(),
        }


@dataclass(frozen=True, slots=True)
class IntegrityProblem:
    """Evidence that committed content was changed or that nothing vouches for it: an edit,
    deletion, insertion or reorder, a missing or mismatching checkpoint, a stripped chain, a
    head or signature that does not match."""

    file: str
    line: int
    message: str

    def describe(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Integrity:
    """The integrity of one ledger.

    ``state``: ``intact`` (the chain verifies and matches every anchor given), ``broken`` (any
    problem: an integrity failure) or ``unprotected`` (a plain file: nothing can show tampering).
    ``torn`` lists the uncommitted tail (apart from the state: a crashed writer's trace).
    ``records`` counts the records audited (ledger lines, or manifest lines = segments), ``rows``
    the ledger rows they hold, ``head`` is the chain head after them (full 64 hex digits);
    ``anchors`` what vouched for that head (``checkpoint``, ``signature``, ``expected head``);
    ``files`` the data files an engine should audit, in order (a prefix of a chained file is
    extracted with `verified_records`). A plain file's ``records`` and ``rows`` are counted by
    the audit that reads it (``counted``; `audit_integrity` alone does not read its content).
    ``expected_digits``: how many hex digits of the head ``--expect-head`` gave (0: none).
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
    anchors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    complete: bool = True  # every verified record of the file is audited (no prefix cut)
    counted: bool = True  # records and rows are known (a plain file's: once an audit read it)
    expected_digits: int = 0

    @property
    def state(self) -> str:
        if self.problems:
            return "broken"
        return "unprotected" if self.layout == "plain" else "intact"

    @property
    def ok(self) -> bool:
        """Intact and without an uncommitted tail (an unprotected ledger is never ok)."""
        return self.state == "intact" and not self.torn

    @property
    def chained(self) -> bool:
        return self.layout != "plain"

    def summary(self, *, tail: bool = True) -> str:
        """One line: the layout, what was audited, the first problem or the anchors and the
        full head, and (with ``tail``) the first piece of an uncommitted tail."""
        counts = f", {self.records} record(s), {self.rows} row(s)" if self.counted else ""
        if self.layout == "plain" and not self.problems:
            return (
                f"{self.path}: plain{counts}; not chained: no integrity protection (edits cannot "
                "be detected)"
            )
        if self.layout == "plain":
            return f"{self.path}: plain{counts}; {self.problems[0].message}"
        what = "segment(s)" if self.layout == "segments" else "record(s)"
        parts = [f"{self.path}: {self.layout}, {self.records} committed {what}, {self.rows} row(s)"]
        if self.problems:
            parts.append(
                f"{len(self.problems)} integrity problem(s): {self.problems[0].describe()}"
            )
        else:
            anchored = ", ".join(
                f"{a} (a {self.expected_digits}-digit prefix of the head)"
                if a == "expected head" and 0 < self.expected_digits < 64
                else a
                for a in self.anchors
            )
            parts.append(f"chain intact, anchored by {anchored or 'nothing'}, head {self.head}")
        if self.torn and tail:
            parts.append(self.torn[0].describe())
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "layout": self.layout,
            "state": self.state,
            "ok": self.ok,
            "records": self.records if self.counted else None,
            "rows": self.rows if self.counted else None,
            "head": self.head,
            "checkpoint": self.checkpoint,
            "anchors": list(self.anchors),
            "problems": [p.describe() for p in self.problems],
            "tail": [t.to_json() for t in self.torn],
            "notes": list(self.notes),
        }


def check_expected_head(text: str) -> str:
    """An expected head as given: the full head (64 hex digits) or a prefix of at least 16;
    returned in lower case. `BudgetError` otherwise."""
    value = text.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{16,64}", value):
        raise BudgetError(
            f"--expect-head {text!r}: give the full chain head (64 hex digits) or a prefix of at "
            "least 16 of them"
        )
    return value


def run_header_path(path: Path) -> Path:
    """The run header `wevent run` writes beside a write-ahead ledger (``NAME.run.json``,
    `wevent.accounting.recovery.open_durable`), before the ledger's checkpoint and file."""
    return path.with_name(path.name + ".run.json")


def is_durable_ledger(path: Path) -> bool:
    """A ledger whose layout says it is durable: a ``.wledger`` directory or one holding a
    manifest, a file with a checkpoint sidecar, a JSONL file whose first record carries a chain
    hash, or an empty or missing file beside a run header (``NAME.run.json``: written only
    beside a write-ahead ledger, so a ledger truncated to nothing with its checkpoint deleted
    still reads as durable). A file with content is judged by its content and checkpoint, not
    by a run header: a ledger rewritten on purpose as a plain file beside a leftover header is
    plain (whoever rewrites a ledger can delete its header too, so the header adds nothing
    there)."""
    if path.is_dir():
        return path.suffix == SEGMENT_DIR_SUFFIX or (path / MANIFEST).exists()
    if path.suffix == SEGMENT_DIR_SUFFIX or _head_path(path).exists():
        return True
    if run_header_path(path).is_file() and (not path.exists() or path.stat().st_size == 0):
        return True
    if path.suffix.lower() not in {".jsonl", ".ndjson"} or not path.exists():
        return False
    check_input_file(path)  # a FIFO or a device would block or never end
    with path.open("rb") as fh:
        first = fh.readline(1 << 20)  # a record's first line; a longer one is not a record
    try:
        obj = loads(first)
    except ValueError:  # malformed, nested too deep, bad UTF-8: not a chained record
        return False
    return isinstance(obj, dict) and CHAIN_KEY in obj


@dataclass
class _Scan:
    """What a streaming verification of a chained JSONL file keeps: the number of verified
    records, and only at the record counts asked for (and at the end) the head, the byte
    offset and the number of charge rows; the counts whose head starts with a given prefix."""

    count: int = 0
    heads: dict[int, str] = field(default_factory=dict)  # heads[k]: the head after k records
    offsets: dict[int, int] = field(default_factory=dict)  # offsets[k]: where record k+1 starts
    rows: dict[int, int] = field(default_factory=dict)  # rows[k]: charges among the first k
    prefixed: list[int] = field(default_factory=list)  # k whose head starts with the prefix
    problems: list[IntegrityProblem] = field(default_factory=list)
    torn: list[TornTail] = field(default_factory=list)


def _walk_chain(
    path: Path, problems: list[IntegrityProblem], torn: list[TornTail]
) -> Iterator[tuple[dict[str, Any], str, int]]:
    """Verify a chained JSONL file line by line, reading it as a stream: each verified record
    with the head after it and the byte offset after its line; the first problem and a torn
    last line go to ``problems`` and ``torn`` (the walk stops there)."""
    if not path.exists():
        return
    check_input_file(path)
    name = str(path)
    head = GENESIS_HEAD
    offset = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):  # a commit always ends its lines: never committed
                torn.append(TornTail(name, offset, len(raw), number))
                return
            try:
                obj = loads(raw)
            except ValueError as exc:  # malformed, a key twice, nested too deep, bad UTF-8
                # JSON syntax and encoding errors read alike; the readers' own refusals (a key
                # twice, nesting or an integer past its limit) say what they refuse
                what = (
                    "not a valid JSON record"
                    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError)
                    else str(exc)
                )
                problems.append(IntegrityProblem(name, number, what))
                return
            if not isinstance(obj, dict) or not isinstance(obj.get(CHAIN_KEY), str):
                problems.append(
                    IntegrityProblem(
                        name,
                        number,
                        "record has no chain hash: in a durable ledger every record has one "
                        "(stripped, or inserted by someone else)",
                    )
                )
                return
            try:
                head = chain_step(head, obj)
            except UnicodeEncodeError:  # a JSON escape of a lone surrogate: no UTF-8 holds it
                problems.append(
                    IntegrityProblem(
                        name,
                        number,
                        "record holds a lone surrogate (a \\ud800-\\udfff escape), which no "
                        "writer writes: it is not valid Unicode text",
                    )
                )
                return
            if obj[CHAIN_KEY] != head:
                problems.append(
                    IntegrityProblem(
                        name,
                        number,
                        "chain hash mismatch: this record or one before it was edited, deleted, "
                        "inserted or moved",
                    )
                )
                return
            offset += len(raw)
            yield obj, head, offset


def _scan_chain(path: Path, at: Iterable[int] = (), prefix: str | None = None) -> _Scan:
    """Verify a chained JSONL file (see `_walk_chain`) in constant memory, keeping the head,
    offset and charge count after 0 records, after each count in ``at`` and at the end, and
    the first two counts whose head starts with ``prefix``."""
    scan = _Scan()
    wanted = set(at)
    scan.heads[0], scan.offsets[0], scan.rows[0] = GENESIS_HEAD, 0, 0
    head, offset, rows, count = GENESIS_HEAD, 0, 0, 0
    if prefix is not None and head.startswith(prefix):
        scan.prefixed.append(0)
    for obj, head, offset in _walk_chain(path, scan.problems, scan.torn):
        count += 1
        rows += "slot" in obj
        if count in wanted:
            scan.heads[count], scan.offsets[count], scan.rows[count] = head, offset, rows
        if prefix is not None and len(scan.prefixed) < 2 and head.startswith(prefix):
            scan.prefixed.append(count)
    scan.count = count
    scan.heads[count], scan.offsets[count], scan.rows[count] = head, offset, rows
    return scan


@dataclass(frozen=True)
class _Checkpoint:
    records: int
    head: str
    signature: str = ""


def _parse_mark(raw: bytes) -> _Checkpoint | None:
    """A checkpoint slot's content; None when it is unreadable or its checksum does not match
    (a slot without a checksum is one line of an earlier version's file)."""
    try:
        mark = json.loads(raw)
        count, head = mark["records"], mark["head"]
        signature = mark.get("signature", "")
        if "sum" in mark and mark["sum"] != _mark_sum(mark):
            return None
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return None
    if (
        isinstance(count, bool)
        or not isinstance(count, int)
        or count < 0
        or not isinstance(head, str)
        or not re.fullmatch(r"[0-9a-f]{64}", head)
        or not isinstance(signature, str)
    ):
        return None
    return _Checkpoint(count, head, signature)


@dataclass(frozen=True, slots=True)
class _Marks:
    """A checkpoint file read: the latest checkpoint, the earlier one of the other slot (None
    when that slot is blank) and whether the other slot was unreadable (a slot write a crash
    interrupted: the latest is then the one before it)."""

    latest: _Checkpoint
    earlier: _Checkpoint | None
    torn_slot: bool


def _read_checkpoint(path: Path) -> _Marks | str | None:
    """The checkpoint file at ``path`` (two slots, see `_ChainLog._checkpoint`; a file of one
    line, as earlier versions wrote, is read too); None when there is none, a message when it
    is unreadable. One unreadable slot beside a readable one is a torn slot write, not an
    error: the readable slot is the checkpoint."""
    if not path.exists():
        return None
    data = path.read_bytes()
    if len(data) == 2 * CHECKPOINT_SLOT:  # the two slots (a blank one is not normal)
        lines = [data[:CHECKPOINT_SLOT], data[CHECKPOINT_SLOT:]]
    else:  # one line, as earlier versions wrote (without a checksum: one with it was cut)
        lines = [line for line in data.split(b"\n") if line.strip()]
        if any(b'"sum"' in line for line in lines):
            return "unreadable checkpoint (a two-slot checkpoint file cut short)"
    marks = [_parse_mark(line) for line in lines]
    good = sorted((m for m in marks if m is not None), key=lambda m: m.records)
    if not good or len(lines) > 2:
        return "unreadable checkpoint (records, head, signature or checksum malformed)"
    return _Marks(good[-1], good[0] if len(good) == 2 else None, len(good) < len(lines))


def read_checkpoint(path: Path | str) -> dict[str, Any]:
    """The latest checkpoint of the chained JSONL file ``path`` (read from ``path.head``) as
    its JSON object: ``records``, ``head``, and ``signature`` and ``key`` when signed.
    `BudgetError` when there is none or it is unreadable."""
    head_file = _head_path(Path(path))
    marks = _read_checkpoint(head_file)
    if not isinstance(marks, _Marks):
        raise BudgetError(f"{head_file}: {marks or 'no such file'}")
    data = head_file.read_bytes()
    slots = [data[:CHECKPOINT_SLOT], data[CHECKPOINT_SLOT:]]
    for line in slots if len(data) == 2 * CHECKPOINT_SLOT else data.split(b"\n"):
        mark = _parse_mark(line) if line.strip() else None
        if mark == marks.latest:
            found: dict[str, Any] = json.loads(line)
            found.pop("sum", None)  # the slot's checksum, not part of the checkpoint
            return found
    raise AssertionError("the latest checkpoint is one of the file's lines")


def _audit_chain(
    path: Path,
    *,
    layout: str,
    expect_head: str | None = None,
    public_key: Ed25519PublicKey | None = None,
) -> Integrity:
    """Verify one chained JSONL file (a ledger, or a segment ledger's manifest with ``layout
    == "segments"``: durable by its layout) against its checkpoint and the anchors given."""
    name = str(path)
    head_file = _head_path(path)
    marks = _read_checkpoint(head_file)
    durable = layout == "segments" or marks is not None or is_durable_ledger(path)
    if not durable:
        if not path.exists():
            raise BudgetError(f"{path}: no such file")
        problems = []
        if expect_head is not None or public_key is not None:
            given = "--expect-head" if expect_head is not None else "--public-key"
            problems.append(
                IntegrityProblem(
                    name,
                    0,
                    f"not a durable ledger (no chain, no checkpoint), so nothing vouches for its "
                    f"content: {given} cannot be checked",
                )
            )
        return Integrity(name, "plain", 0, 0, "", tuple(problems), files=(name,), counted=False)

    mark = marks.latest if isinstance(marks, _Marks) else None
    at = [] if mark is None else [mark.records]
    if isinstance(marks, _Marks) and marks.earlier is not None:
        at.append(marks.earlier.records)
    scan = _scan_chain(path, at, expect_head)
    problems = list(scan.problems)
    notes: list[str] = []
    n = scan.count
    checkpoint: int | None = None
    anchored: int | None = None  # records vouched for by the checkpoint
    anchors: list[str] = []
    if isinstance(marks, str):
        problems.append(IntegrityProblem(str(head_file), 0, marks))
    elif mark is None:
        if not path.exists():
            raise BudgetError(f"{path}: no such file")
    else:
        assert isinstance(marks, _Marks)
        checkpoint = mark.records
        earlier = marks.earlier
        if marks.torn_slot and not scan.problems and n <= mark.records:
            # A crash tears the slot being written only after that commit's lines are on
            # disk, so records follow the other slot's checkpoint; here none do.
            problems.append(
                IntegrityProblem(
                    str(head_file),
                    0,
                    "a checkpoint slot is unreadable and no record follows the other one: the "
                    "latest checkpoint was destroyed (and the records it vouched for removed?)",
                )
            )
        elif marks.torn_slot:
            notes.append("one checkpoint slot unreadable (a checkpoint write a crash interrupted)")
        if not scan.problems:
            if (
                earlier is not None
                and earlier.records <= n
                and scan.heads[earlier.records] != earlier.head
            ):
                problems.append(
                    IntegrityProblem(
                        name,
                        earlier.records,
                        "chain head differs from the earlier checkpoint's head",
                    )
                )
            if mark.records > n:
                problems.append(
                    IntegrityProblem(
                        name,
                        n + 1,
                        f"the checkpoint vouches for {mark.records} committed record(s), the file "
                        f"holds {n}: committed records were removed",
                    )
                )
            elif scan.heads[mark.records] != mark.head:
                problems.append(
                    IntegrityProblem(
                        name, mark.records, "chain head differs from the checkpoint's head"
                    )
                )
            else:
                anchored = mark.records
                anchors.append("checkpoint")
        if public_key is not None:
            from wevent.accounting.signing import verify_checkpoint

            if not mark.signature:
                problems.append(IntegrityProblem(str(head_file), 0, "checkpoint is not signed"))
            elif not verify_checkpoint(public_key, mark.records, mark.head, mark.signature):
                problems.append(
                    IntegrityProblem(
                        str(head_file),
                        0,
                        "checkpoint signature does not verify under the public key (forged, "
                        "altered, or signed with another key)",
                    )
                )
            elif anchored is not None:
                anchors.append("signature")
        elif mark.signature:
            notes.append("checkpoint signed (not verified: pass --public-key)")

    last = scan.heads[n]
    if expect_head is not None and not scan.problems:
        if last.startswith(expect_head):
            anchored = n
            anchors.append("expected head")
        elif anchored is not None and scan.heads[anchored].startswith(expect_head):
            anchors.append("expected head")
        else:
            at = scan.prefixed
            where = (
                f"; it is the head after record {at[0]}, and {n - at[0]} record(s) follow it"
                if len(at) == 1
                else ""
            )
            problems.append(
                IntegrityProblem(
                    name,
                    0,
                    f"head differs from the expected head: expected {expect_head}, the ledger's "
                    f"head is {scan.heads[anchored] if anchored is not None else last}{where}",
                )
            )
    if marks is None:
        problems.append(
            IntegrityProblem(
                str(head_file),
                0,
                "checkpoint is missing: a durable ledger's writer creates it before the first "
                "record, so it was deleted or left behind when the ledger was copied (a "
                "truncation would go unseen)",
            )
        )
        if run_header_path(path).is_file():
            notes.append(
                f"durable by its run header {run_header_path(path).name} (written only beside "
                "a write-ahead ledger)"
            )

    torn = list(scan.torn)
    if problems:
        audited = min(n, checkpoint) if checkpoint is not None else n
    else:
        audited = n if anchored is None else anchored
        if audited < n:
            torn.insert(
                0,
                TornTail(
                    name,
                    scan.offsets[audited],
                    scan.offsets[n] - scan.offsets[audited],
                    audited + 1,
                    "unanchored",
                    n - audited,
                ),
            )
    rows = scan.rows[audited]
    return Integrity(
        name,
        layout,
        audited,
        rows,
        scan.heads[audited],
        tuple(problems),
        tuple(torn),
        (name,) if path.exists() else (),  # a checkpoint of 0 records and no file yet: empty
        checkpoint,
        tuple(anchors) if not problems else (),
        tuple(notes),
        complete=audited == n and not torn and not problems,
        expected_digits=len(expect_head or ""),
    )


def verified_records(path: Path | str, *, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """The chain-verified records of a chained JSONL file (without their chain key), the first
    ``limit`` of them when given (`Integrity.records`: those an audit covers), read as a
    stream (the file is never held in memory)."""
    if limit is not None and limit <= 0:
        return
    for count, (rec, _, _) in enumerate(_walk_chain(Path(path), [], []), start=1):
        del rec[CHAIN_KEY]
        yield rec
        if count == limit:
            return


def audit_integrity(
    path: Path | str,
    *,
    expect_head: str | None = None,
    public_key: PublicKeySource | None = None,
) -> Integrity:
    """Verify a ledger (see the module docstring). ``expect_head``: the full head or a prefix of
    at least 16 hex digits, recorded where the writer cannot change it; ``public_key``: the key
    whose signature every checkpoint must carry. A plain file is ``unprotected``, or ``broken``
    when an anchor was given for it."""
    path = Path(path)
    expected = None if expect_head is None else check_expected_head(expect_head)
    key = _verifier(public_key)
    if path.is_dir() or path.suffix == SEGMENT_DIR_SUFFIX:
        return _audit_segments(path, expected, key)
    return _audit_chain(path, layout="chained-jsonl", expect_head=expected, public_key=key)


def _audit_segments(
    directory: Path, expect_head: str | None, public_key: Ed25519PublicKey | None
) -> Integrity:
    manifest = directory / MANIFEST
    name = str(directory)
    if not directory.is_dir():
        raise BudgetError(f"{directory}: no such directory")
    if not manifest.exists() and not _head_path(manifest).exists():
        if directory.suffix != SEGMENT_DIR_SUFFIX:
            raise BudgetError(f"{directory}: not a segment ledger (no {MANIFEST})")
        entries = sorted(p.name for p in directory.iterdir())
        if entries:
            problem = IntegrityProblem(
                name,
                0,
                f"{MANIFEST} is missing: a segment ledger's chain is its manifest, so nothing "
                f"vouches for {', '.join(entries[:3])}{' ...' if len(entries) > 3 else ''}",
            )
            return Integrity(name, "segments", 0, 0, "", (problem,))
        # A writer creates the directory with its manifest's checkpoint already in it, so an
        # empty one had its content removed (even a ledger that committed nothing has one).
        problem = IntegrityProblem(
            name,
            0,
            f"the directory is empty: a segment ledger is created with its {MANIFEST} checkpoint "
            "in place, so its manifest, checkpoint and segments were removed",
        )
        return Integrity(name, "segments", 0, 0, "", (problem,))
    found = _audit_chain(
        manifest, layout="segments", expect_head=expect_head, public_key=public_key
    )
    problems = list(found.problems)
    torn = list(found.torn)
    all_lines = list(verified_records(manifest))
    files: list[str] = []
    rows = 0
    named: set[str] = set()
    for number, rec in enumerate(all_lines, start=1):
        seg = rec.get("segment")
        if isinstance(seg, str):
            named.add(seg)
        if number > found.records:
            continue
        if not isinstance(seg, str) or "/" in seg or not seg.endswith(".parquet"):
            problems.append(IntegrityProblem(str(manifest), number, "bad segment name"))
            continue
        target = directory / seg
        if not target.exists():
            problems.append(
                IntegrityProblem(str(target), 0, "committed segment is missing (deleted)")
            )
            continue
        if not target.is_file():  # a directory would crash the hash and a FIFO block it
            problems.append(
                IntegrityProblem(
                    str(target), 0, "committed segment is not a regular file (replaced)"
                )
            )
            continue
        count = rec.get("rows", 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            problems.append(
                IntegrityProblem(
                    str(manifest), number, f"bad row count {shown(count)} (no writer wrote it)"
                )
            )
            continue
        if file_sha256(target) != rec.get("sha256"):
            problems.append(
                IntegrityProblem(
                    str(target), 0, "content differs from its committed SHA-256 (edited)"
                )
            )
            continue
        files.append(str(target))
        rows += count
    unanchored = {str(r.get("segment")) for r in all_lines[found.records :]}
    for extra in sorted(directory.glob("*.parquet*")):
        if extra.name in unanchored:
            continue  # part of the manifest's unanchored tail, reported there
        if extra.name not in named:
            torn.append(TornTail(str(extra), 0, extra.stat().st_size, 0, "uncommitted-segment"))
    return Integrity(
        name,
        "segments",
        found.records,
        rows,
        found.head,
        tuple(problems),
        tuple(torn),
        tuple(files),
        found.checkpoint,
        found.anchors if not problems else (),
        found.notes,
        complete=not problems and not torn,
        expected_digits=found.expected_digits,
    )


# ============================================================================ repair


@dataclass(frozen=True)
class Repair:
    """What `repair` did: the records kept, and each piece cut with the side file keeping it."""

    path: str
    kept: int
    head: str
    cut: tuple[tuple[TornTail, str], ...]

    def describe(self) -> str:
        if not self.cut:
            return f"{self.path}: nothing to repair ({self.kept} committed record(s), head {self.head})"
        lines = [f"{self.path}: kept {self.kept} committed record(s), head {self.head}; cut:"]
        lines += [f"  {tail.describe()} -> {side}" for tail, side in self.cut]
        return "\n".join(lines)


def _side_path(base: Path) -> Path:
    """``base`` + ``.cut`` (or ``.cut.2``, ...): never an existing file."""
    candidate = base.with_name(base.name + CUT_SUFFIX)
    k = 2
    while candidate.exists():
        candidate = base.with_name(f"{base.name}{CUT_SUFFIX}.{k}")
        k += 1
    return candidate


def _cut_file(path: Path, offset: int, side: Path) -> Path:
    """Move the bytes of ``path`` from ``offset`` on into the side file ``side`` (written and
    fsynced first, so a crash during the repair loses nothing), then truncate ``path`` there."""
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    tmp = side.with_name(side.name + ".tmp")
    tmp.write_bytes(data)
    sync_rename(tmp, side)
    with path.open("r+b") as fh:
        fh.truncate(offset)
        fh.flush()
        os.fsync(fh.fileno())
    return side


def _settle_checkpoint(path: Path) -> None:
    """After a cut: the checkpoint file anew with both slots holding its latest checkpoint, so
    a slot a crash tore is not left beside a file that now ends at the other slot's count."""
    slot = _mark_slot(read_checkpoint(path))
    _replace_atomically(_head_path(path), slot + slot)


def repair(path: Path | str, *, public_key: PublicKeySource | None = None) -> Repair:
    """Cut a durable ledger's uncommitted tail (a torn line, records past the last checkpoint,
    segments without a committed manifest line) into side files next to it, so that a writer
    can continue. A tampered ledger (any integrity problem) is refused with
    `LedgerIntegrityError`, untouched; a plain file is refused as not durable."""
    path = Path(path)
    found = audit_integrity(path, public_key=public_key)
    if found.layout == "plain":
        raise LedgerIntegrityError(
            f"{path}: not a durable ledger (no chain, no checkpoint): nothing to repair", found
        )
    if found.problems:
        raise LedgerIntegrityError(
            f"{path}: refusing to repair a ledger whose committed content does not verify: "
            f"{found.problems[0].describe()}",
            found,
        )
    cut: list[tuple[TornTail, str]] = []
    if found.layout == "chained-jsonl":
        if found.torn:
            # Settled first: both slots hold the anchored checkpoint, so a crash during the
            # cut leaves an ordinary tail to cut again, never a torn slot with nothing after.
            _settle_checkpoint(path)
            side = _cut_file(path, found.torn[0].offset, _side_path(path))
            cut.append((found.torn[0], str(side)))
            cut += [(t, cut[0][1]) for t in found.torn[1:]]
        return Repair(str(path), found.records, found.head, tuple(cut))
    manifest = path / MANIFEST
    side_dir = _side_path(path)
    for tail in found.torn:
        if tail.kind == "uncommitted-segment":
            side_dir.mkdir(exist_ok=True)
            source = Path(tail.file)
            target = side_dir / source.name
            source.replace(target)
            cut.append((tail, str(target)))
    manifest_tails = [t for t in found.torn if t.kind != "uncommitted-segment"]
    if manifest_tails:
        named = [str(r.get("segment")) for r in verified_records(manifest)][found.records :]
        side_dir.mkdir(exist_ok=True)
        _settle_checkpoint(manifest)  # first, as for a chained file
        side = _cut_file(manifest, manifest_tails[0].offset, _side_path(side_dir / MANIFEST))
        cut += [(t, str(side)) for t in manifest_tails]
        for seg in named:
            source = path / seg
            if source.exists():
                side_dir.mkdir(exist_ok=True)
                target = side_dir / seg
                source.replace(target)
                cut.append(
                    (
                        TornTail(str(source), 0, target.stat().st_size, 0, "uncommitted-segment"),
                        str(target),
                    )
                )
    if side_dir.exists():
        _fsync_dir(side_dir)
        _fsync_dir(path)
    return Repair(str(path), found.records, found.head, tuple(cut))
