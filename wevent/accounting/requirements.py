"""Privacy requirements: fixed w-event windows, dynamic backward/forward windows, whole-stream.

* `Fixed(w, eps)`: every window of ``w`` consecutive slots sums to at most ``eps`` (001 Def. 8).
* `Dynamic`: declarations ``(slot, w_B, E_B, w_F, E_F)``; a declaration holds from its slot until
  the user's next one. At slot t the backward window ``[t-w_B+1, t]`` sums to at most ``E_B`` and
  the forward window ``[t, t+w_F-1]`` to at most ``E_F`` (001 Definition 10).
* `WholeStream(eps)`: the sum over the whole stream is at most ``eps`` (004, user-level LDP).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from fractions import Fraction

from wevent.accounting.budget import Budget, BudgetError, format_exact

__all__ = [
    "Declaration",
    "Dynamic",
    "Fixed",
    "Requirement",
    "WholeStream",
    "check_window",
    "requirement_bounds",
]


def check_window(w: object, *, what: str = "w") -> int:
    """Validate a window size: a whole number of slots, at least 1."""
    if isinstance(w, bool) or not isinstance(w, int):
        raise BudgetError(f"{what}: window size must be a whole number of slots, got {w!r}")
    if w < 1:
        raise BudgetError(f"{what}: window size must be at least 1 slot, got {w}")
    return w


def _budget(value: object, what: str) -> Budget:
    if isinstance(value, Budget):
        return value
    if isinstance(value, Fraction | int | str) and not isinstance(value, bool):
        return Budget(value, what=what)
    raise BudgetError(f"{what}: expected an exact budget, got {value!r}")


@dataclass(frozen=True, slots=True)
class Fixed:
    """Fixed w-event requirement: any ``w`` consecutive slots spend at most ``eps``."""

    w: int
    eps: Budget

    def __post_init__(self) -> None:
        check_window(self.w)
        object.__setattr__(self, "eps", _budget(self.eps, "epsilon"))

    def describe(self) -> str:
        return f"fixed w={self.w} eps={format_exact(self.eps)}"


@dataclass(frozen=True, slots=True)
class WholeStream:
    """Whole-stream requirement: the sum of all spends is at most ``eps``."""

    eps: Budget

    def __post_init__(self) -> None:
        object.__setattr__(self, "eps", _budget(self.eps, "epsilon"))

    def describe(self) -> str:
        return f"whole-stream eps={format_exact(self.eps)}"


@dataclass(frozen=True, slots=True)
class Declaration:
    """A dynamic requirement declared at ``slot`` (001 Definition 10, one row of 001 Table 3)."""

    slot: int
    w_back: int
    eps_back: Budget
    w_fwd: int
    eps_fwd: Budget

    def __post_init__(self) -> None:
        if isinstance(self.slot, bool) or not isinstance(self.slot, int) or self.slot < 1:
            raise BudgetError(f"slot: slots are numbered from 1, got {self.slot!r}")
        check_window(self.w_back, what="w_back")
        check_window(self.w_fwd, what="w_fwd")
        object.__setattr__(self, "eps_back", _budget(self.eps_back, "eps_back"))
        object.__setattr__(self, "eps_fwd", _budget(self.eps_fwd, "eps_fwd"))

    def describe(self) -> str:
        return (
            f"B:({self.w_back}, {format_exact(self.eps_back)}) "
            f"F:({self.w_fwd}, {format_exact(self.eps_fwd)}) from slot {self.slot}"
        )


@dataclass(frozen=True, slots=True)
class Dynamic:
    """A user's dynamic backward/forward requirement: declarations in strictly increasing slots.

    Before the first declaration no requirement is in force; a spend there has no bound to meet,
    which the checker reports (bound 0) rather than silently allowing.
    """

    declarations: tuple[Declaration, ...]

    def __post_init__(self) -> None:
        decls = tuple(self.declarations)
        if not decls:
            raise BudgetError("a dynamic requirement needs at least one declaration")
        for prev, cur in itertools.pairwise(decls):
            if cur.slot <= prev.slot:
                raise BudgetError(
                    f"dynamic declarations must have increasing slots; slot {cur.slot} follows "
                    f"slot {prev.slot}"
                )
        object.__setattr__(self, "declarations", decls)

    @property
    def slots(self) -> tuple[int, ...]:
        return tuple(d.slot for d in self.declarations)

    def index_in_force(self, slot: int) -> int:
        """Index of the declaration in force at ``slot``, or -1 before the first one."""
        return bisect.bisect_right(self.slots, slot) - 1

    def in_force(self, slot: int) -> Declaration | None:
        idx = self.index_in_force(slot)
        return self.declarations[idx] if idx >= 0 else None

    def governing(self, kind: str, anchor: int | None) -> Declaration | None:
        """The declaration a window of ``kind`` anchored at ``anchor`` belongs to: the one in
        force at the anchor (a backward window's last slot, a forward window's first; 001
        Definitions 9-10); None for another kind of window or before the first declaration."""
        if kind not in ("backward", "forward") or anchor is None:
            return None
        return self.in_force(anchor)

    @property
    def max_w_back(self) -> int:
        return max(d.w_back for d in self.declarations)

    @property
    def max_w_fwd(self) -> int:
        return max(d.w_fwd for d in self.declarations)

    def describe(self) -> str:
        first = self.declarations[0].slot
        return f"dynamic, {len(self.declarations)} declaration(s) from slot {first}"


Requirement = Fixed | WholeStream | Dynamic


def requirement_bounds(req: Requirement | None) -> list[Fraction]:
    """Every budget bound a requirement states (none for a missing requirement)."""
    if isinstance(req, Fixed | WholeStream):
        return [req.eps]
    if isinstance(req, Dynamic):
        return [b for d in req.declarations for b in (d.eps_back, d.eps_fwd)]
    return []
