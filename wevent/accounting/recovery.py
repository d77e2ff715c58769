"""Opening a durable ledger to write ahead to, fresh or after a crash.

`open_durable(path, resume=...)` gives the sink a guard commits to (`wevent.accounting.sinks`):
a chained JSONL file (``.jsonl``) or a Parquet segment directory (``.wledger``). A fresh ledger
must not exist yet (nothing is ever overwritten). Resuming verifies the ledger first: a
tampered one is refused; a torn tail (an append a crash interrupted before its commit returned,
so no noise was drawn for it) is cut off and kept beside the ledger in a side file
``NAME.torn-N`` (an uncommitted segment moves out of its directory, ``DIR.SEGMENT.torn-N``),
and is reported; then the committed records are read back and the writer
continues their chain.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from wevent.accounting.durable import (
    GENESIS_HEAD,
    MANIFEST,
    SEGMENT_DIR_SUFFIX,
    ChainedJsonlWriter,
    SegmentWriter,
    TornTail,
    audit_integrity,
)
from wevent.accounting.ledger import Ledger
from wevent.errors import InputError

__all__ = ["DURABLE_SUFFIXES", "Recovered", "cut_torn_tails", "is_durable_path", "open_durable"]

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
        return lines + [f"  cut a torn tail: {c}" for c in self.cut]


def _side_file(path: Path) -> Path:
    n = 1
    while True:
        side = path.with_name(f"{path.name}.torn-{n}")
        if not side.exists():
            return side
        n += 1


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def cut_torn_tails(torn: tuple[TornTail, ...]) -> list[str]:
    """Cut each torn tail off its file, keeping the bytes in a side file; one line per cut."""
    done = []
    for tail in torn:
        path = Path(tail.file)
        if tail.line == 0:  # a whole segment file no manifest line committed: moved out of
            # the segment directory (beside it), where no audit of the ledger looks
            side = _side_file(path.parent.with_name(f"{path.parent.name}.{path.name}"))
            path.rename(side)
            _fsync(path.parent)
            _fsync(side.parent)
        else:
            side = _side_file(path)
            with path.open("rb") as fh:
                fh.seek(tail.offset)
                data = fh.read()
            side.write_bytes(data)
            _fsync(side)
            os.truncate(path, tail.offset)
            _fsync(path)
        done.append(f"{tail.describe()}; kept in {side}")
    return done


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
    cut: list[str] = []
    if not segments:
        data = path.read_bytes()
        if b"\n" not in data:  # a crash before the first commit: nothing, or a torn first line
            cut = cut_torn_tails((TornTail(str(path), 0, len(data), 1),)) if data else []
            return ChainedJsonlWriter(path), Recovered(str(path), 0, GENESIS_HEAD, Ledger(), cut)
    found = audit_integrity(path)
    if found.problems:
        raise InputError(
            f"--resume: {path} fails its integrity check, it is not resumed: {found.summary()}"
        )
    if found.layout == "plain":
        raise InputError(f"--resume: {path} is not a durable (chained) ledger")
    cut = cut_torn_tails(found.torn)
    if cut:
        found = audit_integrity(path)
        if not found.ok:  # pragma: no cover - a cut leaves only committed records
            raise InputError(f"--resume: {path}: {found.summary()}")
    from wevent.accounting.formats import read_ledger, read_ledgers

    if segments:
        ledger = read_ledgers(found.files) if found.files else Ledger()
    else:
        ledger = read_ledger(path)
    writer = SegmentWriter(path) if segments else ChainedJsonlWriter(path)
    return writer, Recovered(str(path), found.records, found.head, ledger, cut)
