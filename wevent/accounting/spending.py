"""The interface a mechanism spends against, and the refusal it may receive.

Mechanisms depend only on this module: the runtime guard (in `verifier`) implements `Spender`, so a
mechanism is checked at runtime without importing verifier internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, cost_phrase, format_exact
from wevent.accounting.evidence import Evidence
from wevent.accounting.ledger import Charge
from wevent.errors import Refused

__all__ = [
    "BudgetExceeded",
    "EvidenceRejected",
    "ForwardingSpender",
    "Spender",
    "WindowState",
    "batched",
    "spend_all",
]


@dataclass(frozen=True, slots=True)
class WindowState:
    """A constraint window at the moment a spend was refused."""

    kind: str  # "fixed", "backward", "forward", "whole-stream", "unregistered"
    first: int  # first slot of the window
    last: int | None  # last slot, None for an unbounded (whole-stream) window
    spent: Fraction  # already spent inside the window
    bound: Fraction

    def describe(self) -> str:
        end = "end" if self.last is None else str(self.last)
        return f"{self.kind} window [{self.first}, {end}]"


def _remake(cls: type[Refused], fields: dict[str, Any]) -> Refused:
    """Rebuild a refusal from its keyword fields (pickling: a refusal crosses processes)."""
    return cls(**fields)


class BudgetExceeded(Refused):
    """A spend was refused because it would break a constraint. Nothing was recorded."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_remake, (type(self), self._fields))

    def __init__(
        self,
        *,
        subject: str,
        slot: int,
        asked: Fraction,
        window: WindowState,
        requirement: str,
        affected_users: int = 1,
        declaration: str | None = None,
    ) -> None:
        """``declaration``: for a dynamic user's backward or forward window, the declaration
        the window belongs to (`Dynamic.governing`), as `Declaration.describe` gives it."""
        self.subject = subject
        self.slot = slot
        self.asked = asked
        self.window = window
        self.requirement = requirement
        self.affected_users = affected_users
        self.declaration = declaration
        self.excess = window.spent + asked - window.bound
        self._fields: dict[str, Any] = {
            "subject": subject,
            "slot": slot,
            "asked": asked,
            "window": window,
            "requirement": requirement,
            "affected_users": affected_users,
            "declaration": declaration,
        }
        users = "" if affected_users == 1 else f" ({affected_users} users)"
        broken = "" if declaration is None else f"; breaks declaration {declaration}"
        super().__init__(
            f"refused spend at slot {slot} for {subject}{users} [{requirement}{broken}]: "
            f"{window.describe()} already spent {format_exact(window.spent)}, "
            f"asked {format_exact(asked)}, bound {format_exact(window.bound)}, "
            f"excess {format_exact(self.excess)}"
        )


class EvidenceRejected(Refused):
    """A spend was refused because its evidence certifies a cost above the amount charged."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_remake, (type(self), self._fields))

    def __init__(
        self,
        *,
        subject: str,
        slot: int,
        amount: Fraction,
        lower: Fraction,
        upper: Fraction | None = None,
    ) -> None:
        self.subject = subject
        self.slot = slot
        self.amount = amount
        self.lower = lower
        self.upper = upper
        self._fields = {
            "subject": subject,
            "slot": slot,
            "amount": amount,
            "lower": lower,
            "upper": upper,
        }
        # (undecided at the finest precision is refused too: fail closed, never "more than")
        why = "the evidence's cost " + cost_phrase(
            lower, upper, amount, f"the {format_exact(amount)} charged"
        )
        super().__init__(f"refused spend at slot {slot} for {subject}: {why}")


def batched(spender: Spender) -> AbstractContextManager[None]:
    """The spender's group commit (`Guard.batch`) when it has one, else nothing: the spends
    inside share one durable commit. No noise may be drawn inside."""
    batch = getattr(spender, "batch", None)
    return batch() if batch is not None else nullcontext()


def spend_all(spender: Spender, charges: Sequence[Charge]) -> None:
    """Charge every one of ``charges`` (each a `Charge`: the spend's fields) before any noise is
    drawn: through the spender's ``spend_many`` when it has one (the guard: one durable commit
    for all of them), else one `Spender.spend` each."""
    many = getattr(spender, "spend_many", None)
    if many is not None:
        many(charges)
        return
    for c in charges:
        spender.spend(
            c.slot,
            c.amount,
            user=c.user,
            group=c.group,
            part=c.part,
            mechanism=c.mechanism,
            evidence=c.evidence,
        )


class Spender(Protocol):
    """Something a mechanism charges before it draws noise (the runtime guard implements it)."""

    def spend(
        self,
        slot: int,
        amount: Budget,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "",
        evidence: Evidence | None = None,
    ) -> None:
        """Record the charge, or raise `BudgetExceeded` / `EvidenceRejected` and record nothing."""
        ...

    def define_group(self, name: str, members: tuple[str, ...]) -> None:
        """Name a set of users once, so later charges can address them together."""
        ...

    def define_group_by_index(
        self, name: str, table: Sequence[str], indices: npt.NDArray[np.int64]
    ) -> None:
        """`define_group` with the members ``table[i] for i in indices``. A spender that knows
        ``table`` (the guard knows its population's canonical order, `Population.users`) defines
        the group without per-member work; any other table is resolved member by member."""
        ...

    def members(self, group: str) -> tuple[str, ...]:
        """The members of a defined group."""
        ...

    def group_size(self, group: str) -> int:
        """How many members a defined group has."""
        ...


class ForwardingSpender:
    """A `Spender` that passes every call to ``inner``: the base of wrappers that change or
    observe some calls (time them, shift their slots) and forward the rest unchanged."""

    def __init__(self, inner: Spender) -> None:
        self.inner = inner

    def spend(
        self,
        slot: int,
        amount: Budget,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "",
        evidence: Evidence | None = None,
    ) -> None:
        self.inner.spend(
            slot,
            amount,
            user=user,
            group=group,
            part=part,
            mechanism=mechanism,
            evidence=evidence,
        )

    def spend_many(self, charges: Sequence[Charge]) -> None:
        spend_all(self.inner, charges)

    def batch(self) -> AbstractContextManager[None]:
        """The inner spender's group commit (`batched`), so a wrapper keeps it."""
        return batched(self.inner)

    def define_group(self, name: str, members: tuple[str, ...]) -> None:
        self.inner.define_group(name, members)

    def define_group_by_index(
        self, name: str, table: Sequence[str], indices: npt.NDArray[np.int64]
    ) -> None:
        self.inner.define_group_by_index(name, table, indices)

    def members(self, group: str) -> tuple[str, ...]:
        return self.inner.members(group)

    def group_size(self, group: str) -> int:
        return self.inner.group_size(group)
