"""Incremental per-account window state for the runtime guard.

Each state answers, for a spend at the current slot, the binding window of every constraint the
spend touches, in amortized O(1) (fixed, whole-stream) or O(log w) (dynamic) time, and keeps memory
bounded by the largest window, not the stream length.

Values are exact integers: every amount and bound is stored as its numerator over the guard's
common denominator D (``value * D``). When a spend brings a denominator D does not cover, the guard
multiplies D by a factor and calls `AccountState.rescale` on every account, so integer arithmetic
stays exact and the hot path never touches `Fraction`.
"""

from __future__ import annotations

import bisect
import heapq
from fractions import Fraction
from typing import NamedTuple

from wevent.accounting.requirements import Dynamic, Fixed, Requirement, WholeStream

__all__ = ["AccountState", "Window", "make_state"]


class Window(NamedTuple):
    """A constraint window at a slot, in scaled integers: ``spent`` so far and its ``bound``."""

    kind: str  # "fixed", "backward", "forward", "whole-stream", "unregistered"
    first: int
    last: int | None  # None: unbounded (whole stream)
    spent: int
    bound: int


def _scaled(value: Fraction, scale: int) -> int:
    scaled = value * scale
    if scaled.denominator != 1:  # the guard chooses the scale to cover every bound
        raise ValueError(f"{value} is not a multiple of 1/{scale}")
    return scaled.numerator


class _Prefix:
    """Cumulative spends by slot, retaining only what windows of size ``retain`` can reach."""

    __slots__ = ("base", "cums", "retain", "slots", "start", "total")

    def __init__(self, retain: int) -> None:
        self.retain = retain
        self.slots: list[int] = []
        self.cums: list[int] = []
        self.start = 0
        self.base = 0  # cumulative spend of everything dropped
        self.total = 0

    def clone(self) -> _Prefix:
        other = _Prefix(self.retain)
        other.slots = self.slots[self.start :]
        other.cums = self.cums[self.start :]
        other.base = self.base
        other.total = self.total
        return other

    def rescale(self, factor: int) -> None:
        self.cums = [c * factor for c in self.cums]
        self.base *= factor
        self.total *= factor

    def add(self, slot: int, amount: int) -> None:
        self.total += amount
        if self.slots and self.slots[-1] == slot:
            self.cums[-1] = self.total
        else:
            self.slots.append(slot)
            self.cums.append(self.total)
        # Drop entries no window can start before any more.
        horizon = slot - self.retain
        while self.start < len(self.slots) - 1 and self.slots[self.start] <= horizon:
            self.base = self.cums[self.start]
            self.start += 1
        if self.start > 64 and self.start * 2 > len(self.slots):
            del self.slots[: self.start]
            del self.cums[: self.start]
            self.start = 0

    def through(self, slot: int) -> int:
        """Cumulative spend over slots ``<= slot`` (``slot`` within the retained horizon)."""
        i = bisect.bisect_right(self.slots, slot, lo=self.start) - 1
        return self.cums[i] if i >= self.start else self.base


class AccountState:
    """Window state of one account (users sharing a requirement and a charge history)."""

    __slots__ = ()

    def windows(self, slot: int) -> list[Window]:
        """The binding window of each constraint touched by a spend at ``slot`` (spent so far)."""
        raise NotImplementedError

    def commit(self, slot: int, amount: int) -> None:
        raise NotImplementedError

    def clone(self) -> AccountState:
        raise NotImplementedError

    def rescale(self, factor: int) -> None:
        """Multiply every stored value by ``factor`` (the guard's denominator grew)."""
        raise NotImplementedError


class _FixedState(AccountState):
    __slots__ = ("eps", "prefix", "w")

    def __init__(self, req: Fixed, scale: int) -> None:
        self.w = req.w
        self.eps = _scaled(req.eps, scale)
        self.prefix = _Prefix(req.w)

    def windows(self, slot: int) -> list[Window]:
        spent = self.prefix.total - self.prefix.through(slot - self.w)
        return [Window("fixed", max(1, slot - self.w + 1), slot, spent, self.eps)]

    def commit(self, slot: int, amount: int) -> None:
        self.prefix.add(slot, amount)

    def clone(self) -> AccountState:
        other = _FixedState.__new__(_FixedState)
        other.w, other.eps, other.prefix = self.w, self.eps, self.prefix.clone()
        return other

    def rescale(self, factor: int) -> None:
        self.eps *= factor
        self.prefix.rescale(factor)


class _WholeState(AccountState):
    __slots__ = ("eps", "total")

    def __init__(self, req: WholeStream, scale: int) -> None:
        self.eps = _scaled(req.eps, scale)
        self.total = 0

    def windows(self, slot: int) -> list[Window]:
        return [Window("whole-stream", 1, None, self.total, self.eps)]

    def commit(self, slot: int, amount: int) -> None:
        self.total += amount

    def clone(self) -> AccountState:
        other = _WholeState.__new__(_WholeState)
        other.eps, other.total = self.eps, self.total
        return other

    def rescale(self, factor: int) -> None:
        self.eps *= factor
        self.total *= factor


class _DynamicState(AccountState):
    """001 Definition 10 / Section 5.1 for one account.

    A spend at slot s touches: the backward window anchored at s; the backward windows of
    *future* declarations that reach back to s (requirements are known in advance, so a spend that
    would make a declared future window impossible is refused now; for each such declaration the
    binding anchor is its own slot); and every open forward window.

    Forward windows are kept in a heap keyed by ``P(tau-1) + E_F(tau)``: a spend at slot s fits all
    open windows iff ``P(s) + amount <= min key``. Between two spend slots the prefix P is constant,
    so per declaration segment only the latest-starting window matters (same key, latest expiry).
    Probing a slot (a refused spend, `Guard.headroom`) changes nothing: the heap only advances on
    commit, and commits come in slot order.
    """

    __slots__ = ("decl_slots", "decls", "e_back", "e_fwd", "heap", "max_w_back", "prefix", "seen")

    def __init__(self, req: Dynamic, scale: int) -> None:
        self.decls = req.declarations
        self.decl_slots = req.slots
        self.e_back = [_scaled(d.eps_back, scale) for d in self.decls]
        self.e_fwd = [_scaled(d.eps_fwd, scale) for d in self.decls]
        self.max_w_back = req.max_w_back
        self.prefix = _Prefix(req.max_w_back)
        self.heap: list[tuple[int, int, int, int]] = []  # (key, expiry, tau, bound)
        self.seen = 0  # forward windows for slots <= seen are in the heap

    def clone(self) -> AccountState:
        other = _DynamicState.__new__(_DynamicState)
        other.decls, other.decl_slots = self.decls, self.decl_slots
        other.e_back, other.e_fwd = list(self.e_back), list(self.e_fwd)
        other.max_w_back = self.max_w_back
        other.prefix = self.prefix.clone()
        other.heap = list(self.heap)
        other.seen = self.seen
        return other

    def rescale(self, factor: int) -> None:
        self.e_back = [e * factor for e in self.e_back]
        self.e_fwd = [e * factor for e in self.e_fwd]
        self.prefix.rescale(factor)
        # Multiplying by a positive factor keeps the heap order.
        self.heap = [(k * factor, x, t, b * factor) for k, x, t, b in self.heap]

    def _opened(self, slot: int) -> list[tuple[int, int, int, int]]:
        """Forward windows opened in (seen, slot] and still open at ``slot`` (not yet in the heap):
        per declaration segment, the latest-starting one."""
        out = []
        key_base = self.prefix.total  # P(t-1) for every t in (seen, slot]
        j = max(bisect.bisect_right(self.decl_slots, self.seen + 1) - 1, 0)
        while j < len(self.decls) and self.decls[j].slot <= slot:
            d = self.decls[j]
            seg_end = self.decls[j + 1].slot - 1 if j + 1 < len(self.decls) else slot
            tau = min(slot, seg_end)
            if tau > self.seen and tau >= d.slot and tau + d.w_fwd - 1 >= slot:
                bound = self.e_fwd[j]
                out.append((key_base + bound, tau + d.w_fwd - 1, tau, bound))
            j += 1
        return out

    def _tightest_forward(self, slot: int) -> tuple[int, int, int, int] | None:
        """The open forward window with the smallest key at ``slot``, without changing state."""
        expired = []
        while self.heap and self.heap[0][1] < slot:
            expired.append(heapq.heappop(self.heap))
        best = self.heap[0] if self.heap else None
        for entry in expired:  # a probe must not lose windows an earlier slot still needs
            heapq.heappush(self.heap, entry)
        if slot > self.seen:
            for entry in self._opened(slot):
                if best is None or entry < best:
                    best = entry
        return best

    def windows(self, slot: int) -> list[Window]:
        i = bisect.bisect_right(self.decl_slots, slot) - 1
        total = self.prefix.total
        if i < 0:
            return [Window("unregistered", slot, slot, 0, 0)]
        d = self.decls[i]
        back = total - self.prefix.through(slot - d.w_back)
        out = [Window("backward", max(1, slot - d.w_back + 1), slot, back, self.e_back[i])]
        k = i + 1
        while k < len(self.decls) and self.decls[k].slot <= slot + self.max_w_back - 1:
            future = self.decls[k]
            start = future.slot - future.w_back + 1
            if start <= slot:  # its window at its own slot reaches back over this slot
                spent = total - self.prefix.through(start - 1)
                out.append(Window("backward", max(1, start), future.slot, spent, self.e_back[k]))
            k += 1
        tight = self._tightest_forward(slot)
        if tight is not None:
            key, expiry, tau, bound = tight
            out.append(Window("forward", tau, expiry, total - (key - bound), bound))
        return out

    def commit(self, slot: int, amount: int) -> None:
        if slot > self.seen:
            for entry in self._opened(slot):
                heapq.heappush(self.heap, entry)
            self.seen = slot
        # Commits come in slot order: windows that ended before this slot are done for good.
        while self.heap and self.heap[0][1] < slot:
            heapq.heappop(self.heap)
        self.prefix.add(slot, amount)


class _UnregisteredState(AccountState):
    """A user with no declared requirement: only zero spends are allowed."""

    __slots__ = ()

    def windows(self, slot: int) -> list[Window]:
        return [Window("unregistered", slot, slot, 0, 0)]

    def commit(self, slot: int, amount: int) -> None:
        return None

    def clone(self) -> AccountState:
        return self

    def rescale(self, factor: int) -> None:
        return None


def make_state(req: Requirement | None, scale: int) -> AccountState:
    """Fresh state for a requirement; ``scale`` (the guard's D) must cover its bounds."""
    if isinstance(req, Fixed):
        return _FixedState(req, scale)
    if isinstance(req, WholeStream):
        return _WholeState(req, scale)
    if isinstance(req, Dynamic):
        return _DynamicState(req, scale)
    return _UnregisteredState()
