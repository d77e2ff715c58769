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

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wevent.accounting.budget import BudgetError
from wevent.accounting.durable import (
    MANIFEST,
    SEGMENT_DIR_SUFFIX,
    ChainedJsonlWriter,
    SegmentWriter,
    audit_integrity,
    read_checkpoint,
    repair,
    run_header_path,
    sync_rename,
)
from wevent.accounting.inputs import check_input_file, loads
from wevent.accounting.ledger import Charge, Ledger
from wevent.errors import InputError

__all__ = [
    "DURABLE_SUFFIXES",
    "DurableSink",
    "Recovered",
    "is_durable_path",
    "open_durable",
    "run_header_path",
]

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
    what: str = "record(s)"

    def describe(self) -> list[str]:
        lines = [f"resumed {self.path}: {self.records} committed {self.what}, head {self.head}"]
        return lines + [f"  cut an uncommitted tail: {c}" for c in self.cut]


class DurableSink:
    """A write-ahead ledger held for one writer: the durable writer, the exclusive lock that
    keeps every other writer, repair and resume away while it is open, and the run header that
    a resumed run must match."""

    def __init__(self, writer: ChainedJsonlWriter | SegmentWriter, lock: int) -> None:
        self.writer = writer
        self._lock = lock
        self.layout = "segments" if isinstance(writer, SegmentWriter) else "chained-jsonl"

    def define_group(self, name: str, members: Iterable[str]) -> None:
        self.writer.define_group(name, members)

    def append_charge(self, charge: Charge) -> None:
        self.writer.append_charge(charge)

    def commit(self) -> int:
        return self.writer.commit()

    @property
    def head(self) -> str:
        return self.writer.head

    @property
    def committed(self) -> int:
        return self.writer.committed

    def close(self) -> None:
        """Commit what is pending, close the writer and release the lock."""
        try:
            self.writer.close()
        finally:
            os.close(self._lock)
            self._lock = -1

    def abandon(self) -> None:
        """Release the lock without committing (after a failed commit the writer's state is
        unknown; the ledger is recovered by the next --resume)."""
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1


def _lock(path: Path) -> int:
    """An exclusive lock on ``path`` (a ``NAME.lock`` file beside it), or an error at once."""
    import fcntl

    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise InputError(
            f"{path} is being written by another process (its lock {lock_path} is held)"
        ) from None
    return fd


def _write_header(path: Path, header: Mapping[str, object]) -> None:
    tmp = run_header_path(path).with_name(run_header_path(path).name + ".tmp")
    tmp.write_text(json.dumps(dict(header), sort_keys=True, indent=1) + "\n", encoding="utf-8")
    sync_rename(tmp, run_header_path(path))


def _check_header(path: Path, header: Mapping[str, object]) -> None:
    """A resumed run must be the run that wrote the ledger: the same allocator, flags, seed,
    stream and requirements (compared through their digests), or it is refused untouched."""
    stored_path = run_header_path(path)
    try:
        check_input_file(stored_path)  # not a FIFO that would block
        stored = loads(stored_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, BudgetError):
        raise InputError(
            f"--resume: {stored_path} is missing or unreadable: without the run's header a "
            "resumed run cannot be shown to be the run that wrote the ledger"
        ) from None
    wanted = json.loads(json.dumps(dict(header), sort_keys=True))
    differ = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
    if differ:
        raise InputError(
            f"--resume: this run differs from the one that wrote {path} in {', '.join(differ)}: "
            "resume with the allocator, requirements, stream, seed and flags of that run"
        )


def open_durable(
    path: Path | str, *, resume: bool, header: Mapping[str, object] | None = None
) -> tuple[DurableSink, Recovered | None]:
    """The locked sink for a durable ledger at ``path``, and what resuming recovered (None
    fresh). ``header`` describes the run (allocator, flags, digests of the seed, stream and
    requirements): written beside a fresh ledger (``NAME.run.json``), and compared, before
    anything is touched, when resuming."""
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
        lock = _lock(path)
        try:
            if header is not None:
                _write_header(path, header)
            writer = SegmentWriter(path) if segments else ChainedJsonlWriter(path)
        except BaseException:
            os.close(lock)
            raise
        return DurableSink(writer, lock), None
    if not path.exists() or (segments and not (path / MANIFEST).exists()):
        raise InputError(f"--resume: {path} does not exist (nothing to resume)")
    lock = _lock(path)
    try:
        return _resume(path, segments, header, lock)
    except BaseException:
        os.close(lock)
        raise


def _resume(
    path: Path, segments: bool, header: Mapping[str, object] | None, lock: int
) -> tuple[DurableSink, Recovered]:
    if header is not None:
        _check_header(path, header)
    found = audit_integrity(path)
    if found.problems:
        raise InputError(
            f"--resume: {path} fails its integrity check, it is not resumed: {found.summary()}"
        )
    if found.layout == "plain":
        raise InputError(f"--resume: {path} is not a durable (chained) ledger")
    if "signature" in found.anchors or _signed(path, segments):
        raise InputError(
            f"--resume: {path} has signed checkpoints; a resumed run writes unsigned ones, so "
            "it is not resumed (continue it from Python with a writer given its signing key)"
        )
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
    what = "segment(s)" if segments else "record(s)"
    return DurableSink(writer, lock), Recovered(
        str(path), found.records, found.head, ledger, cut, what
    )


def _signed(path: Path, segments: bool) -> bool:
    """Whether the ledger's latest checkpoint carries a signature."""
    try:
        return bool(read_checkpoint((path / MANIFEST) if segments else path).get("signature"))
    except (OSError, BudgetError):
        return False
