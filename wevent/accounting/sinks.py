"""Where the guard writes ahead: a durable ledger sink, and the replay sink a resumed run uses.

A `LedgerSink` is what `wevent.verifier.guard.Guard` appends every accepted charge (and every group
definition) to and commits before a spend returns, so no noise is ever drawn for a charge that
is not on disk. `ChainedJsonlWriter` and `SegmentWriter` (`wevent.accounting.durable`) are sinks;
a user's own store is one if it has these three methods and makes ``commit`` durable (it
returns only once everything appended so far survives a crash).

`ReplaySink` resumes a run: the run starts again from slot 1 with the same seed, so it asks for
the very charges the durable ledger already holds; the replay sink checks each against the
ledger instead of writing it again, and passes everything past the ledger's end on to the
writer. A run that asks for anything else is refused (`ReplayMismatch`): it is not the run that
wrote the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from wevent.accounting.durable import charge_record
from wevent.accounting.ledger import Charge, Ledger
from wevent.errors import InputError

__all__ = ["LedgerSink", "ReplayMismatch", "ReplaySink"]


@runtime_checkable
class LedgerSink(Protocol):
    """An append-only, durable ledger the guard writes ahead to."""

    def define_group(self, name: str, members: Iterable[str]) -> None:
        """Append a group definition (made durable by the next `commit`)."""
        ...

    def append_charge(self, charge: Charge) -> None:
        """Append an accepted charge (made durable by the next `commit`)."""
        ...

    def commit(self) -> int:
        """Make everything appended so far durable; return once it is."""
        ...


class ReplayMismatch(InputError):
    """A resumed run asked for a charge or group the durable ledger does not hold there."""


class ReplaySink:
    """Checks a resumed run's charges against the ``recovered`` ledger's, in order, then writes
    on through ``writer`` (the sink that continues that ledger, e.g. a `ChainedJsonlWriter`
    reopened on it). A group the recovered ledger defines is checked member for member and not
    written again."""

    def __init__(self, recovered: Ledger, writer: LedgerSink) -> None:
        self._groups = dict(recovered.groups)
        self._charges = list(recovered)
        self._next = 0
        self._writer = writer

    @property
    def replaying(self) -> bool:
        """True while the run is still inside the recovered ledger."""
        return self._next < len(self._charges)

    @property
    def replayed(self) -> int:
        """How many recovered charges the run has asked for again."""
        return self._next

    def _mismatch(self, expected: str, got: str) -> ReplayMismatch:
        return ReplayMismatch(
            f"--resume: the ledger holds {expected}, but the resumed run asks for {got}: resume "
            "with the allocator, requirements, stream, seed and flags of the run that wrote it"
        )

    def define_group(self, name: str, members: Iterable[str]) -> None:
        members = tuple(members)
        known = self._groups.get(name)
        if known is not None:
            if tuple(known) != members:
                raise self._mismatch(f"group {name!r} with {len(known)} members", "other members")
            return
        if self.replaying:
            raise self._mismatch(f"no group {name!r} before charge {self._next + 1}", "one")
        self._writer.define_group(name, members)

    def append_charge(self, charge: Charge) -> None:
        if not self.replaying:
            self._writer.append_charge(charge)
            return
        expected = self._charges[self._next]
        if charge != expected:
            raise self._mismatch(
                f"charge {self._next + 1} {charge_record(expected)}", str(charge_record(charge))
            )
        self._next += 1

    def commit(self) -> int:
        return self._writer.commit()
