"""The runtime guard's vectorized state for fixed-window and whole-stream requirements.

Every user's spend in a window is the sum of two parts: what was charged to their whole
requirement class (kept once per class, as a `_Prefix` of scaled integers) and what was charged
to them with only part of their class (population sampling: the drawn users). The second part is
one integer per user, ``own[code]`` over the ledger's user codes, plus the charges still inside
the class's window (``events``), which leave ``own`` when the window slides past them.

So a charge to ``k`` drawn users is a handful of numpy operations over ``k`` integers, and a
charge to a whole class is O(1) while no member of it holds a partial charge in the window. The
arithmetic is exact: amounts and bounds are numerators over the guard's common denominator; the
arrays are int64 while every bound stays below 2^62 (a window's retained spends never exceed its
bound, so nothing stored can overflow), and Python integers (object arrays) beyond that.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from accounting.ledger import Ledger
from accounting.population import Population
from accounting.requirements import Fixed, WholeStream
from verifier.state import Window, _Prefix, _scaled

__all__ = ["Refusal", "VectorEngine", "vectorizable"]

I64 = npt.NDArray[np.int64]
_INT64_SAFE = 2**62  # bounds below this: int64 arrays cannot overflow (see the module docstring)
_UNKNOWN = -2  # class of a user code not resolved yet (-1: a user without a requirement)
_PLANS = 64  # group plans kept (class groups are charged every slot; drawn groups once)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a spend is refused: the window it breaks, for whom, and how many users it breaks."""

    window: Window
    member: str | None  # for a group charge: the member named in the message
    affected: int  # users the spend would push over a bound (with identical histories)
    requirement: str


def vectorizable(population: Population) -> bool:
    """Whether every class of the population has a requirement `VectorEngine` handles."""
    return all(isinstance(c.requirement, Fixed | WholeStream) for c in population.classes)


class _Class:
    """One requirement class: its bound, the class-wide charges, the partial charges in window."""

    __slots__ = ("common", "describe", "eps", "events", "partial", "size", "w")

    def __init__(self, req: Fixed | WholeStream, size: int, scale: int) -> None:
        self.w: int | None = req.w if isinstance(req, Fixed) else None  # None: whole stream
        self.eps = _scaled(req.eps, scale)
        self.size = size
        self.describe = req.describe()
        self.common = _Prefix(req.w if isinstance(req, Fixed) else 1)
        self.events: deque[tuple[int, I64, int]] = deque()  # (slot, codes, amount), slot order
        self.partial = False  # whole stream: a member holds a partial charge (for good)

    def has_partial(self) -> bool:
        """Whether some member may hold a partial charge (else every member's own spend is 0)."""
        return bool(self.events) or self.partial

    def common_spent(self, slot: int) -> int:
        if self.w is None:
            return self.common.total
        return self.common.total - self.common.through(slot - self.w)

    def window(self, slot: int, spent: int) -> Window:
        if self.w is None:
            return Window("whole-stream", 1, None, spent, self.eps)
        return Window("fixed", max(1, slot - self.w + 1), slot, spent, self.eps)


@dataclass(frozen=True, slots=True)
class _Part:
    """The members of a charge that fall in one class: their codes and positions in the group
    (``pos`` None: positions 0..k-1). ``full``: the part is the whole class."""

    cls: int
    codes: I64
    pos: I64 | None
    full: bool


class VectorEngine:
    """Checks and commits charges for a population whose classes are all `Fixed` or
    `WholeStream` (`vectorizable`). Users the population does not know may only be charged 0.

    The `Guard` drives it: `check` a charge (nothing changes if it is refused), append it to the
    ledger, then `commit` it; `headroom` and `check` never change what a later check sees."""

    def __init__(self, population: Population, ledger: Ledger, scale: int) -> None:
        self.population = population
        self.ledger = ledger
        self.classes = []
        for c in population.classes:
            req = c.requirement
            assert isinstance(req, Fixed | WholeStream)
            self.classes.append(_Class(req, c.count, scale))
        self._dtype: Any = np.int64
        self._own: npt.NDArray[Any] = np.zeros(0, np.int64)
        self._cls_of: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self._plans: OrderedDict[int, list[_Part]] = OrderedDict()
        self._widen_if_needed()

    # ------------------------------------------------------------------ user codes and classes

    def _grow(self, n: int) -> None:
        """Make room for user codes below ``n`` (new codes: nothing spent, class unknown)."""
        have = len(self._own)
        if n <= have:
            return
        size = max(n, 2 * have, 1024)
        own = np.zeros(size, self._dtype)
        own[:have] = self._own
        cls = np.full(size, _UNKNOWN, np.int32)
        cls[:have] = self._cls_of
        self._own, self._cls_of = own, cls

    def note_classes(self, codes: I64, classes: I64) -> None:
        """Record the classes of users the guard interned by population index."""
        if len(codes):
            self._grow(int(codes.max()) + 1)
            self._cls_of[codes] = classes

    def _classes_of(self, codes: I64) -> npt.NDArray[np.int32]:
        if len(codes):
            self._grow(int(codes.max()) + 1)
        cls = self._cls_of[codes]
        unknown = np.flatnonzero(cls == _UNKNOWN)
        if len(unknown):  # users interned by id: resolve them once, through the population
            name = self.ledger.user_id
            found = self.population.class_indices([name(i) for i in codes[unknown].tolist()])
            self._cls_of[codes[unknown]] = found
            cls = self._cls_of[codes]
        return cls

    def _widen_if_needed(self) -> None:
        """Switch the per-user integers to Python integers once a bound reaches 2^62."""
        if self._dtype is not object and any(c.eps >= _INT64_SAFE for c in self.classes):
            self._dtype = object
            self._own = self._own.astype(object)

    def rescale(self, factor: int) -> None:
        """Multiply every stored value by ``factor`` (the guard's common denominator grew)."""
        for c in self.classes:
            c.eps *= factor
            c.common.rescale(factor)
            c.events = deque((s, codes, a * factor) for s, codes, a in c.events)
        self._widen_if_needed()
        self._own *= factor

    # ------------------------------------------------------------------ charge plans

    def _plan_codes(self, codes: I64) -> list[_Part]:
        cls = self._classes_of(codes)
        if len(cls) and (cls == cls[0]).all():  # one class: the common case
            c = int(cls[0])
            full = c >= 0 and len(codes) == self.classes[c].size
            return [_Part(c, codes, None, full)]
        order = np.argsort(cls, kind="stable")
        sorted_cls = cls[order]
        cuts = np.flatnonzero(np.diff(sorted_cls)) + 1
        parts = []
        for pos in np.split(order, cuts):
            c = int(cls[pos[0]])
            full = c >= 0 and len(pos) == self.classes[c].size
            parts.append(_Part(c, codes[pos], pos.astype(np.int64), full))
        return parts

    def plan_group(self, group: str) -> list[_Part]:
        code = self.ledger.group_code(group)
        plan = self._plans.get(code)
        if plan is None:
            plan = self._plan_codes(self.ledger.member_codes(group))
            self._plans[code] = plan
            if len(self._plans) > _PLANS:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(code)
        return plan

    def plan_user(self, user: str) -> list[_Part] | int:
        """A user's plan, or their class index when the ledger has not met them yet (their
        own spends are then zero; the code exists only once the charge is appended)."""
        code = self.ledger.user_code(user)
        if code is None:
            req_cls = self.population.class_indices([user])[0]
            return req_cls
        return self._plan_codes(np.array([code], np.int64))

    # ------------------------------------------------------------------ checking

    def _expire(self, c: _Class, slot: int, log: list[tuple[_Class, tuple[int, I64, int]]]) -> None:
        """Take the partial charges the window at ``slot`` no longer holds out of ``own``
        (recorded in ``log`` so `_restore` can put them back)."""
        if c.w is None:
            return
        horizon = slot - c.w
        events = c.events
        while events and events[0][0] <= horizon:
            ev = events.popleft()
            self._own[ev[1]] -= ev[2]
            log.append((c, ev))

    def _restore(self, log: list[tuple[_Class, tuple[int, I64, int]]]) -> None:
        for c, ev in reversed(log):
            self._own[ev[1]] += ev[2]
            c.events.appendleft(ev)

    def _spent(self, part: _Part, slot: int) -> tuple[int, npt.NDArray[Any] | None]:
        """The class-wide spend in the window and the members' own spends (None: all zero)."""
        c = self.classes[part.cls]
        own = self._own[part.codes] if c.has_partial() else None
        return c.common_spent(slot), own

    def check(
        self, slot: int, asked: int, plan: list[_Part] | int
    ) -> tuple[Refusal | None, list[tuple[_Class, tuple[int, I64, int]]]]:
        """The refusal of the spend (first breaking member in group order), or None; with the
        expiry log `commit` makes permanent (a refusal has already been rolled back)."""
        log: list[tuple[_Class, tuple[int, I64, int]]] = []
        if isinstance(plan, int):  # a user the ledger has not met
            if plan < 0:
                if asked > 0:
                    return self._unregistered(slot, None, 1), log
                return None, log
            c = self.classes[plan]
            self._expire(c, slot, log)
            spent = c.common_spent(slot)
            if spent + asked > c.eps:
                self._restore(log)
                return Refusal(c.window(slot, spent), None, 1, c.describe), log
            return None, log
        best: tuple[int, Refusal] | None = None
        for part in plan:
            if part.cls < 0:
                if asked > 0:
                    first = 0 if part.pos is None else int(part.pos[0])
                    name = self.ledger.user_id(int(part.codes[0]))
                    cand = self._unregistered(slot, name, len(part.codes))
                    if best is None or first < best[0]:
                        best = (first, cand)
                continue
            c = self.classes[part.cls]
            self._expire(c, slot, log)
            common, own = self._spent(part, slot)
            room = c.eps - common - asked  # each member's own spend must stay within it
            if own is None:
                if room >= 0:
                    continue
                i, own_i, affected = 0, 0, len(part.codes)
            else:
                if room >= 0 and int(own.max()) <= room:
                    continue
                over = np.flatnonzero(own > room) if room >= 0 else np.arange(len(own))
                i, affected = int(over[0]), len(over)
                own_i = int(own[i])
            first = i if part.pos is None else int(part.pos[i])
            if best is None or first < best[0]:
                name = self.ledger.user_id(int(part.codes[i]))
                window = c.window(slot, common + own_i)
                best = (first, Refusal(window, name, affected, c.describe))
        if best is not None:
            self._restore(log)
            return best[1], log
        return None, log

    @staticmethod
    def _unregistered(slot: int, name: str | None, affected: int) -> Refusal:
        return Refusal(Window("unregistered", slot, slot, 0, 0), name, affected, "no requirement")

    def commit(self, slot: int, asked: int, plan: list[_Part] | int, user: str | None) -> None:
        """Record an accepted spend (after `check` and the ledger append)."""
        if asked == 0:
            return
        if isinstance(plan, int):  # the user now has a code: charge it as a one-member plan
            assert user is not None
            code = self.ledger.user_code(user)
            assert code is not None
            self._grow(code + 1)
            self._cls_of[code] = plan
            plan = self._plan_codes(np.array([code], np.int64))
        for part in plan:
            if part.cls < 0:
                continue
            c = self.classes[part.cls]
            if part.full:
                c.common.add(slot, asked)
            else:
                self._own[part.codes] += asked
                if c.w is None:
                    c.partial = True
                else:
                    c.events.append((slot, part.codes, asked))

    def headroom(self, slot: int, plan: list[_Part] | int) -> int:
        """The smallest room (bound minus spent, scaled) over the members' windows at ``slot``;
        changes nothing."""
        log: list[tuple[_Class, tuple[int, I64, int]]] = []
        try:
            if isinstance(plan, int):
                if plan < 0:
                    return 0
                c = self.classes[plan]
                self._expire(c, slot, log)
                return c.eps - c.common_spent(slot)
            room: int | None = None
            for part in plan:
                if part.cls < 0:
                    r = 0
                else:
                    c = self.classes[part.cls]
                    self._expire(c, slot, log)
                    common, own = self._spent(part, slot)
                    r = c.eps - common - (0 if own is None else int(own.max()))
                room = r if room is None else min(room, r)
            return 0 if room is None else room
        finally:
            self._restore(log)

    def describe(self) -> str:
        held = sum(len(c.events) for c in self.classes)
        return f"vector engine, {len(self.classes)} classes, {held} partial charges in window"
