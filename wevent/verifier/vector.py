"""The runtime guard's vectorized state for fixed-window and whole-stream requirements.

Every user's spend in a window is the sum of two parts: what was charged to their whole
requirement class (kept once per class, in scaled integers) and what was charged
to them with only part of their class (population sampling: the drawn users). The second part is
kept per user over the ledger's user codes, for the partial charges the user holds (those still
inside their window, queued in ``events``, one queue per window length, and every one to a
whole-stream member). While every charge held has one amount (population division: the same
budget for every drawn user) it is ``held[code]``, how many they hold, one byte per user (wider
only once a count would pass 255), and their own spend is that count times the amount; once two
amounts are held it is ``own[code]``, their own spend itself (built once from the counts; back to
counts when nothing is held). A charge leaving the window takes one from its members' counts, or
its amount from their ``own``; while no member of it was charged again since (how population
sampling draws: a user is not drawn twice within their window) it leaves by setting them to 0,
with no read. The counts are a quarter of ``own``'s size, so the check and commit of a drawn
group and the expiry of its charges touch a quarter of the memory.

Before that, while no user holds two partial charges at once and every class has a fixed window
of at most 2^15 - 1 slots (population division's usual state), the byte is a *stamp*: the slot
the user's one charge leaves its window, counted from a base slot (0: none). A user holds a
charge at slot ``t`` iff their stamp is above ``t - base``, so a charge leaves its window with
no write at all; the stamps are shifted to a new base (one pass) before one would pass the top
of its type (one byte for windows up to 127 slots, two up to 2^15 - 1). The first commit that
would give a user a second charge, or a second amount, turns the stamps into counts (a user
with a live stamp holds one charge), and counts are kept from then on. The check of a drawn
group while stamped takes one maximum over its members' stamps: if none is live (the usual
draw) every own spend is 0 and only the class rooms decide; else one maximum per class run.
The per-user counts or stamps, when `_grow` allocates them at 512 KB or more, start on a 2 MB
boundary (`_huge_zeros`), so the kernel may back them with huge pages: a drawn group's 10,000
random users then cost cache misses but few page walks. (The other per-user arrays, and the
counts that replace stamps, are plain allocations.)

So a charge to ``k`` drawn users, whatever their classes, is a handful of numpy operations over
``k`` integers, and a charge to a whole class is O(1) while no member of a class with its window
length holds a partial charge. The arithmetic is exact: amounts and bounds are numerators over
the guard's common denominator; the arrays are int32 while every bound stays below 2^31 - 1,
int64 while below 2^62 (a window's retained spends never exceed its bound, so nothing stored can
overflow), and Python integers (object arrays) beyond that.

A group defined by ascending population index (how the mechanisms draw reporting users) has its
members sorted by class: its plan keeps where each class's run starts instead of a class per
member, so planning it is a binary search per class (not per member), its split by window
length is slices, and its check is one gather of counts (and of ``own`` only for members
holding a charge) and a maximum per run. The gathered spends are kept for the commit that
follows an accepted check, which then only writes.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from wevent.accounting.ledger import Ledger, every, largest, some
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, WholeStream
from wevent.verifier.state import Window, _scaled

__all__ = ["Refusal", "VectorEngine", "vectorizable"]

I64 = npt.NDArray[np.int64]
_INT32_SAFE = 2**31 - 1  # bounds below this: int32 arrays cannot overflow (module docstring)
_INT64_SAFE = 2**62  # bounds below this: int64 arrays cannot overflow
_UNKNOWN = -2  # class of a user code not resolved yet (-1: a user without a requirement)
_PLANS = 64  # group plans kept (class groups are charged every slot; drawn groups once)
_ROOM_CACHE = 64  # `_rooms` results kept while no class-wide charge was committed
_STAMP_BYTE_MAX_W = 127  # longest window stamped in one byte (a rebase at most every 128 slots)
_STAMP_MAX_W = 2**15 - 1  # longest window stamped at all (in two bytes); longer: counts only
_HUGE_PAGE = 2 * 2**20  # per-user arrays of at least _HUGE_FROM bytes start on this boundary
_HUGE_FROM = 2**19

_EMPTY: I64 = np.zeros(0, np.int64)
Event = tuple[int, I64, int, int]  # (slot, user codes, amount, number): a partial charge in
# its window; numbers grow in commit order
Log = list[tuple[int, Event]]  # (window length, event) left the window in a check (to undo)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a spend is refused: the window it breaks, for whom, and how many users it breaks."""

    window: Window
    member: str | None  # for a group charge: the member named in the message
    affected: int  # users the spend would push over a bound
    requirement: str


def _huge_zeros(size: int, dtype: Any) -> npt.NDArray[Any]:
    """``np.zeros(size, dtype)``, starting on a 2 MB boundary when it is 512 KB or more.

    The per-user counts or stamps are read and written at about 10,000 random users a slot
    after the data path has evicted them (population division at 10^6 users): in 4 KB pages
    that is a page walk for most of the 256 pages of a 1 MB array as well as a cache miss. numpy
    asks the kernel for transparent huge pages on allocations of 4 MB or more (where the
    kernel allows them, ``madvise`` or ``always``), so a buffer 6 MB larger than needed is
    allocated and the array starts at its first 2 MB boundary (one or two huge pages; the rest
    is never touched, so never backed by memory)."""
    nbytes = size * np.dtype(dtype).itemsize
    if nbytes < _HUGE_FROM:
        return np.zeros(size, dtype)
    buf = np.zeros(nbytes + 3 * _HUGE_PAGE, np.uint8)
    start = -buf.ctypes.data % _HUGE_PAGE
    return buf[start : start + nbytes].view(dtype)


def vectorizable(population: Population) -> bool:
    """Whether every class of the population has a requirement `VectorEngine` handles."""
    return all(isinstance(c.requirement, Fixed | WholeStream) for c in population.classes)


class _Common:
    """What was charged to a whole class: the charges a window can still reach, by slot, and
    their sum (a fixed window of ``w`` slots), or the running total (``w`` None: the whole
    stream). Charges arrive in slot order (the guard's); queries at any later slot change
    nothing, so a look ahead (`Guard.headroom` at a later slot) cannot drop what a spend at an
    earlier slot still needs."""

    __slots__ = ("recent", "total", "w")

    def __init__(self, w: int | None) -> None:
        self.w = w
        self.recent: deque[list[int]] = deque()  # [slot, amount] in slot order, one per slot
        self.total = 0  # the amounts in ``recent`` (fixed window) or of every charge

    def add(self, slot: int, amount: int) -> None:
        self.total += amount
        if self.w is None:
            return
        recent = self.recent
        if recent and recent[-1][0] == slot:
            recent[-1][1] += amount
        else:
            recent.append([slot, amount])
        horizon = slot - self.w  # no later window reaches a slot <= horizon
        while recent[0][0] <= horizon:
            self.total -= recent.popleft()[1]

    def take(self, slot: int, asked: int, bound: int) -> bool:
        """`add` ``asked`` at ``slot`` if ``spent(slot) + asked <= bound``, and say whether it
        did: both in one pass over what leaves the window (`VectorEngine.charge_whole_classes`
        takes a slot's class charges through here)."""
        total = self.total
        if self.w is None:
            if total + asked > bound:
                return False
            self.total = total + asked
            return True
        recent = self.recent
        horizon = slot - self.w  # what a window ending at ``slot`` no longer reaches
        leaving = 0
        for s, amount in recent:
            if s > horizon:
                break
            leaving += 1
            total -= amount
        if total + asked > bound:
            return False
        for _ in range(leaving):
            recent.popleft()
        self.total = total + asked
        if recent and recent[-1][0] == slot:
            recent[-1][1] += asked
        else:
            recent.append([slot, asked])
        return True

    def spent(self, slot: int) -> int:
        """The class-wide spend in the window ending at ``slot`` (no earlier than the last
        charge's slot)."""
        total = self.total
        if self.w is not None:
            horizon = slot - self.w
            for s, amount in self.recent:
                if s > horizon:
                    break
                total -= amount
        return total

    def rescale(self, factor: int) -> None:
        for entry in self.recent:
            entry[1] *= factor
        self.total *= factor


class _Class:
    """One requirement class: its bound and the charges made to the whole class."""

    __slots__ = ("common", "describe", "eps", "partial", "size", "w")

    def __init__(self, req: Fixed | WholeStream, size: int, scale: int) -> None:
        self.w: int | None = req.w if isinstance(req, Fixed) else None  # None: whole stream
        self.eps = _scaled(req.eps, scale)
        self.size = size
        self.describe = req.describe()
        self.common = _Common(self.w)
        self.partial = False  # whole stream: a member holds a partial charge (for good)

    def common_spent(self, slot: int) -> int:
        return self.common.spent(slot)

    def window(self, slot: int, spent: int) -> Window:
        if self.w is None:
            return Window("whole-stream", 1, None, spent, self.eps)
        return Window("fixed", max(1, slot - self.w + 1), slot, spent, self.eps)


@dataclass(slots=True, eq=False)
class _Plan:
    """A charge's members, resolved once per group: codes in group order, each member's index
    into ``present`` (the classes the group touches, -1 for users without a requirement), which
    present classes it covers whole, and how its partial members are committed. Never changed
    once made; not a frozen dataclass only because building one (once per drawn group, every
    slot of population division) then costs several times as much (its generated ``__init__``
    sets each field through ``object.__setattr__``)."""

    codes: I64
    present: tuple[int, ...]
    member_shifted: I64 | None  # each member's class + 1 (0: no requirement); None: one class,
    # or the classes are given by ``runs``
    full: tuple[bool, ...]
    windows: tuple[int, ...]  # window lengths of the present fixed classes
    # The members sorted by class (a group defined by ascending population index): where each
    # present class's run of members starts in ``codes`` (None: see ``member_shifted``; a list
    # when every class is present: read only on the rare paths, which take either).
    runs: I64 | list[int] | None
    partial_codes: I64  # members of registered classes the group does not cover whole
    partial_by_w: tuple[tuple[int, I64], ...]  # those of fixed classes, by window length
    partial_whole: tuple[int, ...]  # whole-stream classes with partial members
    whole: _Class | None  # the class the group is exactly (all its members, nobody else)


@dataclass(frozen=True, slots=True)
class _UserPlan:
    """A charge to one user: their code (None if the ledger has not met them: nothing spent
    of their own yet) and class."""

    user: str
    code: int | None
    cls: int


class VectorEngine:
    """Checks and commits charges for a population whose classes are all `Fixed` or
    `WholeStream` (`vectorizable`). Users the population does not know may only be charged 0.

    The `Guard` drives it: `check` a charge (nothing changes if it is refused), append it to the
    ledger, then `commit` it; `headroom` and `check` never change what a later check sees."""

    def __init__(self, population: Population, ledger: Ledger, scale: int) -> None:
        self.population = population
        self.ledger = ledger
        self.classes: list[_Class] = []
        for c in population.classes:
            req = c.requirement
            assert isinstance(req, Fixed | WholeStream)
            self.classes.append(_Class(req, c.count, scale))
        self._events: dict[int, deque[Event]] = {
            k.w: deque() for k in self.classes if k.w is not None
        }
        self._sizes = [k.size for k in self.classes]
        self._smallest = min(self._sizes, default=0)
        # Where each class ends in the population's canonical order (classes are contiguous).
        self._class_ends = np.cumsum(np.array(self._sizes, np.int64))
        # Window lengths of the fixed classes, and each class's index among them (shifted by one
        # like member classes: entry 0 is "no requirement"; whole-stream classes get len(windows)).
        self._windows = sorted(self._events)
        at = {w: i for i, w in enumerate(self._windows)}
        self._w_index = np.array(
            [len(self._windows)]
            + [len(self._windows) if k.w is None else at[k.w] for k in self.classes],
            np.int16,  # small keys: the stable sort below is a radix sort
        )
        # For `_plan_runs`: per window length, the runs [a, b) of consecutive classes with it.
        self._spans: list[tuple[int, list[tuple[int, int]]]] = []
        for w in self._windows:
            spans: list[tuple[int, int]] = []
            for i, kind in enumerate(self.classes):
                if kind.w == w:
                    if spans and spans[-1][1] == i:
                        spans[-1] = (spans[-1][0], i + 1)
                    else:
                        spans.append((i, i + 1))
            self._spans.append((w, spans))
        # When each window length's classes are consecutive (one span each), the members of a
        # draw from every class of a length are one slice: (length, first class, last class).
        self._one_span: tuple[tuple[int, int, int], ...] | None = (
            tuple((w, spans[0][0], spans[0][1] - 1) for w, spans in self._spans)
            if all(len(spans) == 1 for _, spans in self._spans)
            else None
        )
        self._every_class = tuple(range(len(self.classes)))
        self._windows_t = tuple(self._windows)
        self._whole = [k for k in self.classes if k.w is None]
        self._none_full = (False,) * len(self.classes)
        self._whole_classes = tuple(i for i, kind in enumerate(self.classes) if kind.w is None)
        self._dtype: Any = np.int32
        self._own: npt.NDArray[Any] = np.zeros(0, np.int32)
        # Per user: how many partial charges they hold (those in their window, and every one to
        # a whole-stream member); uint8, widened when a count would pass its top. While
        # ``_stamped``, it holds stamps instead (see `_stamp`).
        top_w = max(self._windows, default=0)
        self._stamped = bool(self._windows) and not self._whole and top_w <= _STAMP_MAX_W
        held_type: Any = np.uint8 if top_w <= _STAMP_BYTE_MAX_W or not self._stamped else np.uint16
        self._held: npt.NDArray[Any] = np.zeros(0, held_type)
        self._stamp_top = int(np.iinfo(held_type).max)  # (tests lower it to rebase often)
        self._base = 0  # stamps count slots from here (`_rebase`)
        # While every partial charge held has the same amount, a user's own spend is their count
        # times it and ``own`` is not kept (``_amount``: that amount, None before any charge);
        # else ``_materialized``: ``own`` holds every user's own spend and the counts are not
        # kept (they are 0 again when nothing is held).
        self._amount: int | None = None
        self._materialized = False
        self._seq = 0  # the next partial charge's number
        # Per window length: the number of the last queued charge that found one of its
        # members already holding one (-1: none). A charge leaves its window first in its
        # queue; if it is not older than that one, no later charge has a member of it, so each
        # holds only it: it leaves by setting their counts to 0 (no read, no ``own``).
        self._again: dict[int, int] = dict.fromkeys(self._events, -1)
        self._w_of = [k.w for k in self.classes]
        self._cls_of: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self._plans: OrderedDict[int, _Plan] = OrderedDict()
        # `_rooms` by (asked, present classes) until the first class-wide charge (None after).
        self._room_cache: dict[tuple[int, tuple[int, ...]], list[int]] | None = {}
        # An accepted check's gathered own spends (None: all zero, or only counts were read),
        # for the commit right after; their counts (None: nobody held a partial charge); and
        # the largest count of each of the plan's runs, if the check read counts only.
        self._pending: (
            tuple[_Plan, int, npt.NDArray[Any] | None, npt.NDArray[Any] | None, list[int] | None]
            | None
        ) = None
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
        held = _huge_zeros(size, self._held.dtype)
        held[:have] = self._held
        cls = np.full(size, _UNKNOWN, np.int32)
        cls[:have] = self._cls_of
        self._own, self._held, self._cls_of = own, held, cls

    def users_interned(self, codes: I64, indices: I64) -> None:
        """Record the classes of users the guard interned by population index (``codes[i]`` is
        the ledger code of the population user at ``indices[i]``)."""
        if len(codes):
            self._grow(int(codes.max()) + 1)
            self._cls_of[codes] = self.population.classes_at(indices)

    def _classes_of(self, codes: I64) -> I64:
        if len(codes):
            self._grow(int(codes.max()) + 1)
        cls = self._cls_of[codes]
        unknown = np.flatnonzero(cls == _UNKNOWN)
        if len(unknown):  # users interned by id: resolve them once, through the population
            name = self.ledger.user_id
            found = self.population.class_indices([name(i) for i in codes[unknown].tolist()])
            self._cls_of[codes[unknown]] = found
            cls = self._cls_of[codes]
        return cls.astype(np.int64)

    def _widen_if_needed(self) -> None:
        """Widen the per-user integers once a bound reaches 2^31 - 1 (to int64) or 2^62 (to
        Python integers); never narrowed."""
        top = max((c.eps for c in self.classes), default=0)
        dtype: Any = np.int32 if top < _INT32_SAFE else np.int64 if top < _INT64_SAFE else object
        order = (np.int32, np.int64, object)
        if order.index(dtype) > order.index(self._dtype):
            self._dtype = dtype
            self._own = self._own.astype(dtype)

    def rescale(self, factor: int) -> None:
        """Multiply every stored value by ``factor`` (the guard's common denominator grew)."""
        self._pending = None
        if self._room_cache is not None:
            self._room_cache.clear()  # the bounds change
        for c in self.classes:
            c.eps *= factor
            c.common.rescale(factor)
        for w, events in self._events.items():
            self._events[w] = deque((s, codes, a * factor, q) for s, codes, a, q in events)
        if self._amount is not None:
            self._amount *= factor
        self._widen_if_needed()
        if not self._materialized:
            return  # ``own`` is not read until it is materialized again (from the counts)
        if self._dtype is object or factor <= np.iinfo(self._dtype).max:
            self._own *= factor
        else:  # every stored value fits after the product (it is at most a bound), not factor
            self._own = (self._own.astype(object) * factor).astype(self._dtype)

    # ------------------------------------------------------------------ plans

    def _plan_codes(self, codes: I64, classes: I64 | None = None) -> _Plan:
        cls = self._classes_of(codes) if classes is None else classes
        shifted = cls + 1  # -1 (no requirement) -> 0
        counts = np.bincount(shifted, minlength=len(self.classes) + 1).tolist()
        present = tuple(i - 1 for i, k in enumerate(counts) if k)
        sizes = self._sizes
        full = tuple(c >= 0 and counts[c + 1] == sizes[c] for c in present)
        member_shifted = shifted if len(present) > 1 else None
        partial_classes = [c for c, f in zip(present, full, strict=True) if c >= 0 and not f]
        partial_codes, by_w, whole = _EMPTY, [], []
        if partial_classes:
            if len(partial_classes) == len(present):  # the usual case: every member is partial
                partial_codes, partial_shifted = codes, shifted
            else:
                in_partial = np.zeros(len(self.classes) + 1, bool)
                in_partial[[c + 1 for c in partial_classes]] = True
                mask = in_partial[shifted]
                partial_codes, partial_shifted = codes[mask], shifted[mask]
            ws = sorted({w for c in partial_classes if (w := self.classes[c].w) is not None})
            if len(ws) == 1 and all(self.classes[c].w == ws[0] for c in partial_classes):
                by_w.append((ws[0], partial_codes))
            elif ws:  # split by window length: one stable (radix) sort, then runs (views)
                wi = self._w_index[partial_shifted]
                by_length = partial_codes[np.argsort(wi, kind="stable")]
                counts_w = np.bincount(wi, minlength=len(self._windows) + 1).tolist()
                lo = 0
                for k, w in enumerate(self._windows):
                    hi = lo + counts_w[k]
                    if hi > lo:
                        by_w.append((w, by_length[lo:hi]))
                    lo = hi
            whole = [c for c in partial_classes if self.classes[c].w is None]
        windows = sorted({w for c in present if c >= 0 and (w := self.classes[c].w) is not None})
        return _Plan(
            codes,
            present,
            member_shifted,
            full,
            tuple(windows),
            None,
            partial_codes,
            tuple(by_w),
            tuple(whole),
            self._whole_class(present, full),
        )

    def _plan_runs(self, codes: I64, indices: I64) -> _Plan:
        """`_plan_codes` for members at ascending population ``indices`` (so sorted by class):
        each class's members are one run of ``codes``, found by a binary search per class."""
        ends = indices.searchsorted(self._class_ends).tolist()
        sizes, classes = self._sizes, self.classes
        starts_all = [0, *ends[:-1]]
        # A part of every class: each has a member (the ends ascend strictly from above 0:
        # they never descend) and none has all of its members (impossible with fewer members
        # than the smallest class has, else counted class by class).
        every_part = bool(ends) and ends[0] > 0 and len(set(ends)) == len(ends)
        if every_part and len(indices) >= self._smallest:
            every_part = all(hi - lo < n for hi, lo, n in zip(ends, starts_all, sizes, strict=True))
        if every_part:
            # The usual draw: a part of every class. Which classes share a window length is
            # static (`_spans`): each length's members are slices of ``codes``, no merging.
            by_length: list[tuple[int, I64]]
            if self._one_span is not None:
                by_length = [
                    (length, codes[starts_all[a] : ends[b]]) for length, a, b in self._one_span
                ]
            else:
                by_length = []
                for length, runs in self._spans:
                    cut = [codes[starts_all[a] : ends[b - 1]] for a, b in runs]
                    by_length.append((length, cut[0] if len(cut) == 1 else np.concatenate(cut)))
            return _Plan(
                codes,
                self._every_class,
                None,
                self._none_full,
                self._windows_t,
                starts_all if len(classes) > 1 else None,
                codes,
                tuple(by_length),
                self._whole_classes,
                None,  # part of every class: no class whole
            )
        present: list[int] = []
        starts: list[int] = []
        full: list[bool] = []
        partial: list[tuple[int, int, int]] = []  # (class, start, end) of partial classes
        lo = 0
        for c, hi in enumerate(ends):
            if hi > lo:
                present.append(c)
                starts.append(lo)
                full.append(hi - lo == sizes[c])
                if not full[-1]:
                    partial.append((c, lo, hi))
            lo = hi
        partial_codes, by_w = _EMPTY, []
        if partial:
            if len(partial) == len(present):
                partial_codes = codes
            else:
                partial_codes = np.concatenate([codes[a:b] for _, a, b in partial])
            for w in sorted({w for c, _, _ in partial if (w := classes[c].w) is not None}):
                spans: list[list[int]] = []  # adjacent runs merged: a single span is a view
                for c, a, b in partial:
                    if classes[c].w == w:
                        if spans and spans[-1][1] == a:
                            spans[-1][1] = b
                        else:
                            spans.append([a, b])
                parts = [codes[a:b] for a, b in spans]
                by_w.append((w, parts[0] if len(parts) == 1 else np.concatenate(parts)))
        windows = sorted({w for c in present if (w := classes[c].w) is not None})
        return _Plan(
            codes,
            tuple(present),
            None,
            tuple(full),
            tuple(windows),
            np.array(starts, np.int64) if len(present) > 1 else None,
            partial_codes,
            tuple(by_w),
            tuple(c for c, _, _ in partial if classes[c].w is None),
            self._whole_class(tuple(present), tuple(full)),
        )

    def _whole_class(self, present: tuple[int, ...], full: tuple[bool, ...]) -> _Class | None:
        """`_Plan.whole` of a plan with these present classes and coverage."""
        one = len(present) == 1 and present[0] >= 0 and full[0]
        return self.classes[present[0]] if one else None

    def group_defined(
        self, group_code: int, codes: I64, indices: I64, *, ascending: bool | None = None
    ) -> None:
        """Plan a group just defined by population index (its members' classes are known;
        ``ascending``: whether ``indices`` ascend, None to find out)."""
        if ascending is None:
            ascending = every(indices[1:] > indices[:-1])
        if ascending and len(indices) > 1:
            plan = self._plan_runs(codes, indices)
        else:
            plan = self._plan_codes(codes, self.population.classes_at(indices))
        self._plans[group_code] = plan
        if len(self._plans) > _PLANS:
            self._plans.popitem(last=False)

    def plan(self, user: str | None, group: str | None) -> _Plan | _UserPlan:
        """The plan of a charge to ``group``, or else to ``user``."""
        return self.plan_group(group) if group is not None else self.plan_user(user or "")

    def plan_group(self, group: str) -> _Plan:
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

    def plan_user(self, user: str) -> _UserPlan:
        code = self.ledger.user_code(user)
        if code is not None and code < len(self._cls_of):
            known = int(self._cls_of[code])
            if known != _UNKNOWN:
                return _UserPlan(user, code, known)
        return _UserPlan(user, code, self.population.class_indices([user])[0])

    # ------------------------------------------------------------------ checking

    def _expire(self, w: int, slot: int, log: Log) -> None:
        """Take the partial charges of window length ``w`` that the window at ``slot`` no longer
        holds out of ``own`` (logged, so `_restore` can put them back)."""
        events = self._events[w]
        horizon = slot - w
        if self._stamped:  # a stamp tells by itself when its charge left: nothing to write
            while events and events[0][0] <= horizon:
                log.append((w, events.popleft()))
            return
        kept = self._own if self._materialized else self._held
        again = self._again[w]
        while events and events[0][0] <= horizon:
            ev = events.popleft()
            codes = ev[1]
            if again <= ev[3]:  # each member holds this charge only (the older ones left)
                kept[codes] = 0
            else:
                kept[codes] -= ev[2] if self._materialized else 1
            log.append((w, ev))

    def _restore(self, log: Log) -> None:
        if self._stamped:  # (`_expire` wrote nothing)
            for w, ev in reversed(log):
                self._events[w].appendleft(ev)
            return
        kept = self._own if self._materialized else self._held
        for w, ev in reversed(log):
            codes = ev[1]
            step = ev[2] if self._materialized else 1
            if self._again[w] <= ev[3]:
                kept[codes] = step
            else:
                kept[codes] += step
            self._events[w].appendleft(ev)

    def _gather(
        self, codes: I64, slot: int
    ) -> tuple[npt.NDArray[Any] | None, npt.NDArray[Any] | None]:
        """The own spends of ``codes`` at ``slot`` and which of them hold a partial charge (their
        counts, or a mask while ``own`` is kept); (None, None) when none does (every own spend is
        0). While every charge held has one amount this reads the counts (or stamps) only."""
        if self._stamped:
            live = self._held[codes] > self._live_above(slot)
            if not some(live):
                return None, None
            counts = live.view(np.uint8)  # (a stamped user holds one charge at most)
            return counts.astype(self._dtype) * self._held_amount(), counts
        if self._materialized:
            own = self._own[codes]
            holds = own > 0  # (a charge committed is never 0)
            return (own, holds) if some(holds) else (None, None)
        held = self._held[codes]
        if not some(held):
            return None, None
        return held.astype(self._dtype) * self._amount, held

    def _note_amount(self, asked: int) -> None:
        """Before a partial charge of ``asked`` is committed: keep the counts' amount, or start
        keeping ``own`` (materialized from the counts) when ``asked`` is another amount."""
        if not self._materialized and self._amount == asked:
            return
        if not any(self._events.values()) and not any(k.partial for k in self._whole):
            if self._materialized:  # nobody holds anything: counts again, all 0
                self._held = np.zeros(len(self._held), self._held.dtype)
            self._materialized, self._amount = False, asked
            return
        if not self._materialized:  # every own spend, exactly, from the counts
            self._own = (self._held.astype(self._dtype) * self._amount).astype(
                self._dtype, copy=False
            )
            self._materialized = True

    def _live_above(self, slot: int) -> int:
        """While stamped: a user holds a partial charge at ``slot`` iff their stamp is above
        this (stamps count from ``_base``, never after the slot of a check or a commit)."""
        live = slot - self._base
        if live < 0:  # (a query before the last commit: the guard refuses it first)
            raise RuntimeError(f"vector engine: slot {slot} is before stamp base {self._base}")
        return min(live, self._stamp_top)

    def _stamp(self, slot: int, by_w: tuple[tuple[int, I64], ...]) -> None:
        """Commit one partial charge at ``slot`` to members holding none, by window length:
        each member's stamp becomes the slot its charge leaves the window (``slot + w``),
        counted from ``_base``. No stamp is ever decremented: one at or below ``slot -
        _base`` is a charge that left (or none, 0), so expiries write nothing."""
        for length, members in by_w:
            value = slot + length - self._base
            if value > self._stamp_top:
                self._rebase(slot)
                value = length
            self._held[members] = value

    def _rebase(self, slot: int) -> None:
        """Count stamps from ``slot`` (the slot being committed) instead of ``_base``: one
        dense pass, every ``_stamp_top - w`` slots at most. A stamp at or below the shift (a
        charge that left by ``slot``) becomes 0; the others keep what they tell."""
        shift = slot - self._base
        held = self._held
        if shift > self._stamp_top:
            held.fill(0)
        elif shift > 0:
            np.maximum(held, shift, out=held)
            held -= held.dtype.type(shift)
        self._base = slot

    def _unstamp(self, slot: int) -> None:
        """Leave stamps for counts at ``slot`` (being committed): a member is charged again
        while holding a charge, or a second amount comes. Every window's charges that left by
        ``slot`` leave their queues first, so each queued charge is one a count holds."""
        for w in self._events:
            self._expire(w, slot, [])
        counts = self._held > self._live_above(slot)
        self._stamped = False
        self._held = counts.astype(self._held.dtype)

    def _held_amount(self) -> int:
        """The one amount every counted charge has (fails closed if no charge set it)."""
        if self._amount is None:
            raise RuntimeError("vector engine: partial charges counted without an amount")
        return self._amount

    def _count(self, codes: I64, held: npt.NDArray[Any] | None, top: int | None = None) -> None:
        """Add one partial charge to the counts of ``codes`` (``held``: their counts now, None
        if all 0; ``top``: their largest, if known), widening the counts first if one would pass
        the top of its type."""
        if held is None:
            self._held[codes] = 1
            return
        if (int(held.max()) if top is None else top) >= np.iinfo(self._held.dtype).max:
            self._widen_held()
        self._held[codes] = held.astype(self._held.dtype, copy=False) + 1

    def _classes_holding(
        self, plan: _Plan, codes: I64, held: npt.NDArray[Any], tops: list[int] | None = None
    ) -> list[int]:
        """The classes of the members among ``codes`` (part of ``plan``; ``held``: their
        counts, some above 0; ``tops``: each run's largest, if the check found them) that hold
        a partial charge, from the plan's layout if it can."""
        if codes is plan.codes:
            if plan.runs is not None:
                top = np.maximum.reduceat(held, plan.runs).tolist() if tops is None else tops
                return [c for c, t in zip(plan.present, top, strict=True) if t]
            if plan.member_shifted is None:
                return [plan.present[0]]
            shifted = plan.member_shifted[held > 0]
        else:
            shifted = self._cls_of[codes[held > 0]].astype(np.int64) + 1
        found = np.bincount(shifted, minlength=len(self.classes) + 1)
        return (np.flatnonzero(found) - 1).tolist()

    def _widen_held(self) -> None:
        order = (np.uint8, np.uint16, np.uint32, np.uint64)
        self._held = self._held.astype(order[order.index(self._held.dtype.type) + 1])

    def _has_partial(self, c: int) -> bool:
        """Whether a member of class ``c`` may hold a partial charge (else all own spends are 0;
        a queue shared with other classes of the same window only makes this conservative)."""
        k = self.classes[c]
        return k.partial if k.w is None else bool(self._events[k.w])

    def _rooms(self, slot: int, asked: int, present: tuple[int, ...]) -> tuple[list[int], bool]:
        """Per present class: what each member's own spend may be after ``asked`` (bound minus
        the class-wide spend minus ``asked``; -1 stands for any negative room), and whether any
        member may hold an own spend. While no class-wide charge was ever committed (population
        division charges drawn users only) the rooms depend on ``asked`` and ``present`` alone
        and are kept (callers only read them)."""
        cache = self._room_cache
        if cache is not None:
            rooms = cache.get((asked, present))
            if rooms is not None:
                for c in present:  # the first class with a partial charge held ends this
                    if c >= 0 and self._has_partial(c):
                        return rooms, True
                return rooms, False
        rooms = []
        partial = False
        classes = self.classes
        for c in present:
            if c < 0:  # no requirement: only a zero charge fits
                rooms.append(0 if asked == 0 else -1)
                continue
            k = classes[c]
            # (nothing charged to the whole class: nothing of it in any window)
            room = k.eps - (k.common_spent(slot) if k.common.total else 0) - asked
            rooms.append(room if room > -1 else -1)
            if not partial:
                partial = self._has_partial(c)
        if cache is not None and len(cache) < _ROOM_CACHE:
            cache[asked, present] = rooms
        return rooms, partial

    def _add_common(self, k: _Class, slot: int, asked: int) -> None:
        """Commit a class-wide charge (every one goes through here but `charge_whole_classes`'
        loop, which does the same inline): the kept rooms are forgotten first, for good (rooms
        depend on the slot from now on)."""
        self._room_cache = None
        k.common.add(slot, asked)

    def check(self, slot: int, asked: int, plan: _Plan | _UserPlan) -> Refusal | None:
        """The refusal of the spend (its first breaking member in group order), or None. The
        windows' expiries it applies are what `commit` keeps (a refused check has undone them)."""
        self._pending = None
        if type(plan) is _Plan and plan.whole is not None:
            # A whole class whose members hold no partial charge: the class-wide spend decides
            # (refusals take the general path below, which names the member).
            k = plan.whole
            holding = k.partial if k.w is None else self._events[k.w]
            if not holding and k.common_spent(slot) + asked <= k.eps:
                return None
        log: Log = []
        if isinstance(plan, _UserPlan):
            return self._check_user(slot, asked, plan, log)
        if self._stamped:  # `_expire` while stamped, inline (no write: stamps tell the slot)
            events = self._events
            for w in plan.windows:
                queue, horizon = events[w], slot - w
                while queue and queue[0][0] <= horizon:
                    log.append((w, queue.popleft()))
        else:
            for w in plan.windows:
                self._expire(w, slot, log)
        rooms, partial = self._rooms(slot, asked, plan.present)
        tops: list[int] | None = None
        if partial and plan.runs is not None and not self._materialized:
            # Counts kept (every charge held has one amount): a run's largest own spend is its
            # largest count times that amount, compared in Python integers (exact). One gather
            # of the counts (or stamps) and one maximum per run, nothing else, when it fits.
            counts = self._held[plan.codes]
            if self._stamped:  # a stamp above ``live`` holds one charge; below, none
                live = self._live_above(slot)
                if largest(counts) <= live:  # nobody holds one: one maximum, not one per run
                    if min(rooms) >= 0:  # (every own spend is 0)
                        self._pending = (plan, slot, None, None, None)
                        return None
                    tops = [0] * len(rooms)
                else:
                    tops = [int(t > live) for t in np.maximum.reduceat(counts, plan.runs).tolist()]
                    counts = (counts > live).view(np.uint8)  # the counts the stamps stand for
            else:
                tops = np.maximum.reduceat(counts, plan.runs).tolist()
            holding = any(tops)
            amount = self._amount if holding else 0
            if amount is None:
                amount = self._held_amount()  # (raises: a count above 0 has an amount)
            if all(t * amount <= r for t, r in zip(tops, rooms, strict=True)):
                self._pending = (plan, slot, None, counts if holding else None, tops)
                return None
            gathered, held = (
                (counts.astype(self._dtype) * amount, counts) if holding else (None, None)
            )
        else:
            gathered, held = self._gather(plan.codes, slot) if partial else (None, None)
        if gathered is None:  # every own spend is 0
            if min(rooms, default=0) >= 0:  # no member (an empty group) fits
                self._pending = (plan, slot, None, None, tops)
                return None
            own = np.zeros(len(plan.codes), self._dtype)
        else:
            own = gathered
            if plan.runs is not None and all(  # the largest own spend of each class's run
                m <= r
                for m, r in zip(np.maximum.reduceat(own, plan.runs).tolist(), rooms, strict=True)
            ):
                self._pending = (plan, slot, own, held, None)
                return None
        member_room = self._member_rooms(plan, rooms, self._dtype)
        bad = np.flatnonzero(own > member_room)
        if not len(bad):
            self._pending = (plan, slot, gathered, held, tops)
            return None
        self._restore(log)
        i = int(bad[0])
        if plan.runs is not None:
            c = plan.present[int(np.searchsorted(plan.runs, i, side="right")) - 1]
        else:
            c = plan.present[0] if plan.member_shifted is None else int(plan.member_shifted[i]) - 1
        name = self.ledger.user_id(int(plan.codes[i]))
        if c < 0:
            return self._unregistered(slot, name, len(bad))
        k = self.classes[c]
        window = k.window(slot, k.common_spent(slot) + int(own[i]))
        return Refusal(window, name, len(bad), k.describe)

    def charge_whole_classes(self, slot: int, charges: Sequence[tuple[int, int]]) -> int:
        """Check and commit charges of ``(group code, asked)`` at ``slot``, in order, while each
        is to a group planned as exactly one whole class (`_Plan.whole`) whose members hold no
        partial charge, and fits its class-wide window; return how many were taken. This is
        `check` and `commit`'s own fast path for such a plan, without the calls in between;
        the first charge not taken goes through them (and is refused there if it must be)."""
        self._pending = None
        plans, events = self._plans, self._events
        taken = 0
        kept = self._room_cache is not None
        for code, asked in charges:
            plan = plans.get(code)
            k = None if plan is None else plan.whole
            if k is None:
                break
            if k.partial if k.w is None else events[k.w]:
                break
            if asked:
                if not k.common.take(slot, asked, k.eps):
                    break
                if kept:  # `_add_common`, inline: this loop takes a slot's class charges
                    self._room_cache, kept = None, False
            taken += 1
        return taken

    def _check_user(self, slot: int, asked: int, plan: _UserPlan, log: Log) -> Refusal | None:
        if plan.cls < 0:
            return self._unregistered(slot, plan.user, 1) if asked > 0 else None
        k = self.classes[plan.cls]
        if k.w is not None:
            self._expire(k.w, slot, log)
        own = self._own_of(plan.code, slot)
        spent = k.common_spent(slot) + own
        if spent + asked <= k.eps:
            return None
        self._restore(log)
        return Refusal(k.window(slot, spent), plan.user, 1, k.describe)

    def _member_rooms(self, plan: _Plan, rooms: list[int], dtype: Any) -> Any:
        """Each member's room (an array in group order), or the one class's room (an int)."""
        if plan.runs is not None:
            lengths = np.diff(plan.runs, append=len(plan.codes))
            return np.repeat(np.array(rooms, dtype), lengths)
        if plan.member_shifted is None:
            return rooms[0]
        by_class = np.zeros(len(self.classes) + 1, dtype)
        by_class[[c + 1 for c in plan.present]] = rooms
        return by_class[plan.member_shifted]

    def _own_of(self, code: int | None, slot: int) -> int:
        """A user's own spend in window at ``slot`` (0 for a user nothing was committed to
        yet)."""
        if code is None or code >= len(self._held):
            return 0
        if self._stamped:
            live = int(self._held[code]) > self._live_above(slot)
            return self._held_amount() if live else 0
        if self._materialized:
            return int(self._own[code])
        held = int(self._held[code])
        if not held:
            return 0
        assert self._amount is not None  # a count above 0: a partial charge was committed
        return held * self._amount

    @staticmethod
    def _unregistered(slot: int, name: str | None, affected: int) -> Refusal:
        return Refusal(Window("unregistered", slot, slot, 0, 0), name, affected, "no requirement")

    def commit(self, slot: int, asked: int, plan: _Plan | _UserPlan) -> None:
        """Record an accepted spend (after `check` and the ledger append)."""
        pending, self._pending = self._pending, None
        if asked == 0:
            return
        if type(plan) is _Plan and plan.whole is not None:  # a whole class: its class-wide spend
            self._add_common(plan.whole, slot, asked)
            return
        if isinstance(plan, _UserPlan):
            self._commit_user(slot, asked, plan)
            return
        if True in plan.full:
            for c, full in zip(plan.present, plan.full, strict=True):
                if full:
                    self._add_common(self.classes[c], slot, asked)
        if len(plan.partial_codes):
            codes = plan.partial_codes
            if (
                pending is not None
                and pending[0] is plan
                and pending[1] == slot
                and codes is plan.codes
            ):  # the check just gathered these spends and nothing ran since: only write
                own, held, tops = pending[2], pending[3], pending[4]
            else:
                (own, held), tops = self._gather(codes, slot), None
            if self._stamped and (held is not None or self._amount not in (None, asked)):
                self._unstamp(slot)  # a member charged again, or a second amount: counts
                (own, held), tops = self._gather(codes, slot), None
            if self._materialized or self._amount != asked:
                self._note_amount(asked)
            if self._stamped:
                self._stamp(slot, plan.partial_by_w)
            elif self._materialized:
                if own is None and held is not None:  # the check read counts only
                    own = held.astype(self._dtype) * self._held_amount()
                self._own[codes] = asked if own is None else own + asked
            else:
                self._count(codes, held, None if tops is None else max(tops))
            numbers: dict[int, int] = {}
            for length, members in plan.partial_by_w:
                q = numbers[length] = self._seq
                self._seq += 1
                self._events[length].append((slot, members, asked, q))
            if held is not None:  # members charged again: their window lengths' numbers
                for c in self._classes_holding(plan, codes, held, tops):
                    w = self._w_of[c] if c >= 0 else None
                    if w is not None:
                        self._again[w] = numbers[w]
            for c in plan.partial_whole:
                self.classes[c].partial = True

    def _commit_user(self, slot: int, asked: int, plan: _UserPlan) -> None:
        if plan.cls < 0:
            return
        code = plan.code if plan.code is not None else self.ledger.user_code(plan.user)
        assert code is not None  # the charge was appended: the ledger knows the user now
        self._grow(code + 1)
        self._cls_of[code] = plan.cls
        k = self.classes[plan.cls]
        if k.size == 1:  # the user is the whole class
            self._add_common(k, slot, asked)
            return
        own = self._own_of(code, slot)
        if self._stamped and (own or self._amount not in (None, asked)):
            self._unstamp(slot)  # charged again while holding a charge, or a second amount
        held = self._held[code : code + 1].copy()  # (a count, read while counts are kept)
        self._note_amount(asked)
        codes = np.array([code], np.int64)
        if self._stamped:
            assert k.w is not None  # (stamped: no whole-stream class)
            self._stamp(slot, ((k.w, codes),))
        elif self._materialized:
            self._own[code] = own + asked
        else:
            self._count(codes, held if own else None)
        if k.w is None:
            k.partial = True
        else:
            q = self._seq
            self._seq += 1
            self._events[k.w].append((slot, codes, asked, q))
            if own:  # the user held a charge already
                self._again[k.w] = q

    def headroom(self, slot: int, user: str | None, group: str | None) -> int:
        """The smallest room (bound minus spent, scaled) over the windows of ``user`` or of the
        members of ``group`` at ``slot``; changes nothing."""
        self._pending = None
        plan = self.plan(user, group)
        log: Log = []
        try:
            if isinstance(plan, _UserPlan):
                if plan.cls < 0:
                    return 0
                k = self.classes[plan.cls]
                if k.w is not None:
                    self._expire(k.w, slot, log)
                own = self._own_of(plan.code, slot)
                return k.eps - k.common_spent(slot) - own
            for w in plan.windows:
                self._expire(w, slot, log)
            rooms = [
                0 if c < 0 else self.classes[c].eps - self.classes[c].common_spent(slot)
                for c in plan.present
            ]
            partial = any(c >= 0 and self._has_partial(c) for c in plan.present)
            if not partial:
                return min(rooms)
            member_room = self._member_rooms(plan, rooms, object)  # exact, any magnitude
            spent, _ = self._gather(plan.codes, slot)
            if spent is None:
                return min(rooms)
            return int(np.min(member_room - spent.astype(object)))
        finally:
            self._restore(log)

    def describe(self) -> str:
        held = sum(len(e) for e in self._events.values())
        return f"vector engine, {len(self.classes)} classes, {held} partial charges in window"
