"""Opening a durable ledger to write ahead to, fresh or after a crash.

`open_durable(path, resume=...)` gives the sink a guard commits to (`wevent.accounting.sinks`):
a chained JSONL file (``.jsonl``) or a Parquet segment directory (``.wledger``). A fresh ledger
must not exist yet (nothing is ever overwritten). Resuming verifies the ledger first: a
tampered one is refused; a torn tail (an append a crash interrupted before its commit returned,
so no noise was drawn for it: a torn line, records past the last checkpoint, a segment without
its manifest line) is cut off into side files beside the ledger (`durable.repair`) and is
reported; then the committed records are read back and the writer
continues their chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wevent.accounting.durable import (
    MANIFEST,
    SEGMENT_DIR_SUFFIX,
    ChainedJsonlWriter,
    SegmentWriter,
    audit_integrity,
    repair,
)
from wevent.accounting.ledger import Ledger
from wevent.errors import InputError

__all__ = ["DURABLE_SUFFIXES", "Recovered", "is_durable_path", "open_durable"]

DURABLE_SUFFIXES = (".jsonl", SEGMENT_DIR_SUFFIX)


def is_durable_path(path: Path) -> bool:
    """Whether ``path`` names a format the guard can write ahead to."""
    return path.suffix.lower() in DURABLE_SUFFIXES


@dataclass
class Recovered:
    """What resuming found: the committed ledger and what was cut from its end."""

    path: str
    records: int
    head: str
    ledger: Ledger
    cut: list[str] = field(default_factory=list)  # one line per torn tail, with its side file

    def describe(self) -> list[str]:
        lines = [f"resumed {self.path}: {self.records} committed record(s), head {self.head}"]
        return lines + [f"  cut an uncommitted tail: {c}" for c in self.cut]


def open_durable(
    path: Path | str, *, resume: bool
) -> tuple[ChainedJsonlWriter | SegmentWriter, Recovered | None]:
    """The writer for a durable ledger at ``path``, and what resuming recovered (None fresh)."""
    path = Path(path)
    if not is_durable_path(path):
        raise InputError(
            f"{path}: a write-ahead ledger is chained JSONL (.jsonl) or Parquet segments "
            f"(a {SEGMENT_DIR_SUFFIX} directory)"
        )
    segments = path.suffix.lower() == SEGMENT_DIR_SUFFIX
    if not resume:
        if path.exists():
            raise InputError(
                f"{path} exists: a ledger is never overwritten (--resume continues it after a "
                "crash; otherwise choose another name)"
            )
        return (SegmentWriter(path) if segments else ChainedJsonlWriter(path)), None
    if not path.exists() or (segments and not (path / MANIFEST).exists()):
        raise InputError(f"--resume: {path} does not exist (nothing to resume)")
    found = audit_integrity(path)
    if found.problems:
        raise InputError(
            f"--resume: {path} fails its integrity check, it is not resumed: {found.summary()}"
        )
    if found.layout == "plain":
        raise InputError(f"--resume: {path} is not a durable (chained) ledger")
    cut: list[str] = []
    if found.torn:  # a crashed writer's tail: cut into side files, reported
        done = repair(path)
        cut = [f"{tail.describe()}; kept in {side}" for tail, side in done.cut]
        found = audit_integrity(path)
        if not found.ok:  # pragma: no cover - a repair leaves only committed records
            raise InputError(f"--resume: {path}: {found.summary()}")
    from wevent.accounting.formats import read_ledger, read_ledgers

    if segments:
        ledger = read_ledgers(found.files) if found.files else Ledger()
    else:
        ledger = read_ledger(path)
    writer = SegmentWriter(path) if segments else ChainedJsonlWriter(path)
    return writer, Recovered(str(path), found.records, found.head, ledger, cut)
