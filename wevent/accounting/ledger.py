"""The privacy ledger: append-only, typed, columnar charges.

A charge is (slot, subject, amount, part, mechanism, evidence). The subject is one user or a named
group of users (the compact form: the group's members are listed once and a group charge means the
same charge to every member). Columns are stored as integer arrays with dictionary-encoded values
(distinct amounts, parts, mechanisms, evidence), which is what the vectorized checker works on.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import repeat
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import MAX_SLOT, Budget, BudgetError, check_slot
from wevent.accounting.evidence import Evidence

__all__ = ["Charge", "Ledger", "LedgerColumns", "take_codes"]

T = TypeVar("T")
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]


def take_codes(table: npt.NDArray[Any], codes: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``table[codes]`` (in ``table``'s dtype) without materializing what need not be: a
    constant column (a zero-stride broadcast view, e.g. an all-empty ``part``) stays a read-only
    broadcast view, and an identity ``table`` returns ``codes`` itself (converted only if its
    dtype differs)."""
    table = np.asarray(table)
    codes = np.asarray(codes)
    if codes.ndim == 1 and len(codes) > 1 and codes.strides[0] == 0:
        return np.broadcast_to(table[int(codes[0])], codes.shape)
    if len(codes) and bool((table == np.arange(len(table))).all()) and int(codes.min()) >= 0:
        return codes.astype(table.dtype, copy=False)
    return np.asarray(table[codes])


# Reductions through argmin / argmax: numpy's `all`, `any` and `max` on a 10^4-entry bool or
# uint8 array took 2-6 times as long as the arg-reduction plus one lookup here (numpy 2.x;
# `python -m benchmarks.bench_reductions`), and the guard takes several per drawn group.


def every(flags: npt.NDArray[Any]) -> bool:
    """``flags.all()`` for a 1-D array (through ``argmin`` for bool and unsigned entries, whose
    smallest is 0 exactly when one is 0; numpy's own for any other kind)."""
    if flags.dtype.kind not in "bu":
        return bool(flags.all())
    return not len(flags) or bool(flags[flags.argmin()])


def some(flags: npt.NDArray[Any]) -> bool:
    """``flags.any()`` for a 1-D array (through ``argmax`` for bool and unsigned entries, whose
    largest is 0 exactly when all are; numpy's own for any other kind)."""
    if flags.dtype.kind not in "bu":
        return bool(flags.any())
    return bool(len(flags)) and bool(flags[flags.argmax()])


def largest(values: npt.NDArray[Any]) -> int:
    """``int(values.max())`` for a non-empty 1-D integer array."""
    return int(values[values.argmax()])


def distinct(values: npt.NDArray[np.int64]) -> bool:
    """Whether a 1-D integer array holds no value twice (a sort: faster than `np.unique`)."""
    if len(values) < 2:
        return True
    if every(values[1:] > values[:-1]):  # strictly increasing (e.g. a sorted draw)
        return True
    ordered = np.sort(values)
    return every(ordered[1:] != ordered[:-1])


# A row `Ledger.append_validated_rows` takes: amount, subject code, part, mechanism, evidence,
# and the evidence's code in the ledger when the caller knows it.
ValidatedRow = tuple[Budget, int, str, str, Evidence | None, int | None]


class _Interner(Generic[T]):
    """Dictionary encoding: equal values share one small integer code."""

    __slots__ = ("_index", "by_id", "indexed", "values")

    def __init__(self) -> None:
        self.values: list[T] = []
        self._index: dict[T, int] = {}
        self.indexed = 0  # values[:indexed] are in the index; the rest are added on first use
        self.by_id: dict[int, int] = {}  # id of an interned object -> its code (see code_of)

    @property
    def index(self) -> dict[T, int]:
        if self.indexed < len(self.values):
            start = self.indexed
            self._index.update(
                zip(self.values[start:], range(start, len(self.values)), strict=True)
            )
            self.indexed = len(self.values)
        return self._index

    def extend_new(self, values: Sequence[T]) -> None:
        """Append values the caller guarantees are distinct and not interned yet, indexing them
        only when a lookup by value first needs it (bulk interning of a population's ids)."""
        self.values.extend(values)

    def code(self, value: T) -> int:
        index = self.index
        found = index.get(value)
        if found is None:
            found = len(self.values)
            index[value] = found
            self.values.append(value)
            self.indexed += 1
        return found

    def code_of(self, value: T) -> int:
        """`code`, looking the object itself up first: reused objects (a mechanism's evidence)
        skip hashing their fields. Safe: ``values`` keeps every interned object alive, so an id
        in ``by_id`` is never reused by another object."""
        found = self.by_id.get(id(value))
        if found is not None and self.values[found] is value:
            return found
        found = self.code(value)
        if self.values[found] is value:
            self.by_id[id(value)] = found
        return found


@dataclass(frozen=True, slots=True)
class Charge:
    """One ledger row: ``amount`` charged at ``slot`` to ``user`` or to every member of ``group``."""

    slot: int
    amount: Budget
    user: str | None = None
    group: str | None = None
    part: str = ""
    mechanism: str = ""
    evidence: Evidence | None = None

    @property
    def subject(self) -> str:
        return f"user {self.user!r}" if self.user is not None else f"group {self.group!r}"


@dataclass(frozen=True)
class LedgerColumns:
    """A columnar snapshot of a ledger.

    ``subject[i] >= 0`` is an index into ``users``; ``subject[i] < 0`` names group ``-subject-1``,
    whose member user indices are ``group_members[g]``. ``evidence[i] == -1`` means no evidence.
    """

    slot: I64
    subject: I64
    amount: I32
    part: I32
    mechanism: I32
    evidence: I32
    users: list[str]
    groups: list[str]
    group_members: list[I64]
    amounts: list[Budget]
    parts: list[str]
    mechanisms: list[str]
    evidences: list[Evidence]


def check_labels(part: object, mechanism: object) -> None:
    """Refuse a charge's ``part`` or ``mechanism`` that is not a string (before any check)."""
    for name, value in (("part", part), ("mechanism", mechanism)):
        if not isinstance(value, str):
            raise BudgetError(f"a charge's {name} must be a string, got {type(value).__name__}")


class Ledger:
    """An append-only ledger of exact charges, stored by column."""

    def __init__(self) -> None:
        self._slot = array("q")
        self._subject = array("q")
        self._amount = array("i")
        self._part = array("i")
        self._mechanism = array("i")
        self._evidence = array("i")
        # A ledger built by `from_codes` keeps its columns as read-only numpy arrays (constant
        # columns as zero-stride views) until the first append copies them into the arrays above.
        self._bulk: tuple[I64, I64, I32, I32, I32, I32] | None = None
        self._users: _Interner[str] = _Interner()
        self._groups: _Interner[str] = _Interner()
        self._members: list[tuple[str, ...] | None] = []  # None: materialized on demand
        # int64, or int32 for groups defined by codes while every code fits (`member_codes`
        # widens them): half the memory each drawn group's record takes for good.
        self._member_codes: list[I64 | I32] = []
        self._amounts: _Interner[Budget] = _Interner()
        self._amount_codes: dict[tuple[int, int], int] = {}  # (numerator, denominator) -> code
        self._parts: _Interner[str] = _Interner()
        self._mechanisms: _Interner[str] = _Interner()
        self._label_codes: dict[tuple[str, str], tuple[int, int]] = {}  # (part, mechanism)
        self._evidences: _Interner[Evidence] = _Interner()

    # ------------------------------------------------------------------ groups and users

    def define_group(self, name: str, members: Iterable[str]) -> None:
        """Name a set of users once. Redefining a name with other members is an error."""
        if not isinstance(name, str) or not name:
            raise BudgetError("group names must be non-empty strings")
        members_t = tuple(members)  # may be empty: a charge of the group then charges nobody
        known = self._users.index
        codes = [known.get(m, -1) for m in members_t] if known else [-1] * len(members_t)
        if -1 in codes:  # new user ids: validate them before interning (known ones already were)
            for m in members_t:
                if not isinstance(m, str) or not m:
                    raise BudgetError(f"group {name!r}: user ids must be non-empty strings")
        code_arr = np.array(codes, np.int64)
        if -1 not in codes and not distinct(code_arr):
            raise BudgetError(f"group {name!r} lists a member twice")
        if -1 in codes and len(set(members_t)) != len(members_t):
            raise BudgetError(f"group {name!r} lists a member twice")
        existing = self._groups.index.get(name)
        if existing is not None:
            if self.members(name) != members_t:
                raise BudgetError(f"group {name!r} is already defined with other members")
            return
        if -1 in codes:
            code_arr = np.array([self._users.code(m) for m in members_t], np.int64)
        code_arr.flags.writeable = False
        self._groups.code(name)
        self._members.append(members_t)
        self._member_codes.append(code_arr)

    def _define_coded_groups(
        self, groups: Mapping[str, tuple[str, ...]], codes: list[I64], table: list[str]
    ) -> None:
        """`define_group` for every group of a fresh ledger at once, members given as codes
        into ``table``; users are interned in the order `define_group` would intern them."""
        if self._groups.values:
            raise BudgetError("coded groups are defined on an empty ledger only")
        names = list(groups)
        if len(codes) != len(names):
            raise BudgetError("one code array per group is required")
        sizes = np.array([len(c) for c in codes], np.int64)
        flat = np.concatenate([np.asarray(c, np.int64) for c in codes] or [np.zeros(0, np.int64)])
        if len(flat) and (int(flat.min()) < 0 or int(flat.max()) >= len(table)):
            raise BudgetError("group member code out of range")
        owner = np.repeat(np.arange(len(names), dtype=np.int64), sizes)
        # define_group's checks, group by group: the first group with a problem raises, with
        # define_group's message for its first problem.
        blank_code = np.array([not isinstance(u, str) or not u for u in table] or [False], bool)
        blank = np.zeros(len(names), bool)
        blank[owner[blank_code[flat]]] = True
        pairs = np.sort(owner * max(len(table), 1) + flat)  # (group, member), sorted
        twice = np.zeros(len(names), bool)
        twice[pairs[1:][pairs[1:] == pairs[:-1]] // max(len(table), 1)] = True
        bad_name = np.array([not isinstance(n, str) or not n for n in names], bool)
        flagged = np.flatnonzero(bad_name | blank | twice)
        if len(flagged):
            g = int(flagged[0])
            if bad_name[g]:
                raise BudgetError("group names must be non-empty strings")
            if blank[g]:
                raise BudgetError(f"group {names[g]!r}: user ids must be non-empty strings")
            raise BudgetError(f"group {names[g]!r} lists a member twice")
        used, first = np.unique(flat, return_index=True)
        mapping = np.full(len(table), -1, np.int64)
        for k in np.argsort(first, kind="stable").tolist():  # first-appearance order
            mapping[used[k]] = self._users.code(table[int(used[k])])
        for name, members, member_codes in zip(names, groups.values(), codes, strict=True):
            self._groups.code(name)
            self._members.append(tuple(members))
            self._member_codes.append(mapping[member_codes])

    def intern_users(self, users: Sequence[str]) -> I64:
        """The user code of each id in ``users`` (the index into `users`), interning new ids in
        order of first appearance. Bulk form of what `define_group` does for its members."""
        index = self._users.index
        values = self._users.values
        start = len(values)
        got = list(map(index.get, users))
        if got.count(None) == len(got):  # all new (e.g. a population's first group)
            fresh = dict.fromkeys(users)
        elif None in got:
            fresh = dict.fromkeys(u for u, g in zip(users, got, strict=True) if g is None)
        else:
            return np.array(got, np.int64)
        # first appearance order, duplicates dropped; validated before anything is interned
        if not all(map(isinstance, fresh, repeat(str))) or "" in fresh:
            raise BudgetError("user ids must be non-empty strings")
        values.extend(fresh)
        index.update(zip(fresh, range(start, start + len(fresh)), strict=True))
        self._users.indexed = len(values)
        if len(fresh) == len(got):
            return np.arange(start, start + len(got), dtype=np.int64)
        return np.array(list(map(index.get, users)), np.int64)

    def intern_new_users(self, users: Sequence[str]) -> I64:
        """Intern ids the caller guarantees are distinct, valid and not in the ledger yet (the
        guard's bulk path for its population's canonical order); their codes, consecutive. The
        ids are indexed for lookup by id only when such a lookup first happens."""
        start = len(self._users.values)
        self._users.extend_new(users)
        return np.arange(start, start + len(users), dtype=np.int64)

    @property
    def user_count(self) -> int:
        """How many users the ledger mentions (len of `users`, without building the tuple)."""
        return len(self._users.values)

    def define_group_codes(
        self, name: str, codes: npt.ArrayLike, *, validated: bool = False
    ) -> int:
        """`define_group` with the members given as user codes (see `intern_users`): no per-member
        Python work. The members are materialized as ids only when asked for (`members`).
        ``validated``: the caller guarantees the codes exist and are distinct (not re-checked).
        Returns the group's code (`group_code`)."""
        if not isinstance(name, str) or not name:
            raise BudgetError("group names must be non-empty strings")
        arr = codes if type(codes) is np.ndarray else np.asarray(codes)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):  # (integer dtypes)
            raise BudgetError(f"group {name!r}: member codes must be a 1-D integer array")
        if not validated and arr.size:
            wide = arr.astype(np.int64)
            if int(wide.min()) < 0 or int(wide.max()) >= len(self._users.values):
                raise BudgetError(f"group {name!r}: member code out of range")
            if not distinct(wide):
                raise BudgetError(f"group {name!r} lists a member twice")
        # a copy: the caller may reuse its array
        code_arr: I64 | I32 = (
            arr.astype(np.int32) if len(self._users.values) <= 2**31 else arr.astype(np.int64)
        )
        existing = self._groups.index.get(name)
        if existing is not None:
            if not np.array_equal(self._member_codes[existing], code_arr):
                raise BudgetError(f"group {name!r} is already defined with other members")
            return existing
        code_arr.flags.writeable = False
        group = self._groups.code(name)
        self._members.append(None)
        self._member_codes.append(code_arr)
        return group

    def define_new_group_codes(self, name: str, codes: npt.NDArray[np.integer[Any]]) -> int:
        """`define_group_codes` for a caller that has validated ``codes`` (a 1-D integer array
        of distinct codes the ledger holds) and found that no group is named ``name`` (the
        guard's path for a drawn group: no check is repeated). Returns the group's code."""
        if not isinstance(name, str) or not name:
            raise BudgetError("group names must be non-empty strings")
        if name in self._groups.index:  # (the caller checked; one lookup keeps the table whole)
            raise BudgetError(f"group {name!r} is already defined")
        code_arr: I64 | I32 = (
            codes.astype(np.int32) if len(self._users.values) <= 2**31 else codes.astype(np.int64)
        )
        code_arr.flags.writeable = False  # a copy: the caller may reuse its array
        group = self._groups.code(name)
        self._members.append(None)
        self._member_codes.append(code_arr)
        return group

    def has_group(self, group: str) -> bool:
        return group in self._groups.index

    @property
    def group_index(self) -> Mapping[str, int]:
        """Every defined group's code by name (read only: `define_group` adds to it)."""
        return self._groups.index

    def group_code(self, group: str) -> int:
        """The index of a defined group (raises `BudgetError` for an undefined one)."""
        code = self._groups.index.get(group)
        if code is None:
            raise BudgetError(f"group {group!r} is not defined")
        return code

    def member_codes(self, group: str) -> I64:
        """The user codes of a defined group's members, in its order (a read-only int64
        array)."""
        stored = self._member_codes[self.group_code(group)]
        if stored.dtype == np.int64:
            return stored.view(np.int64)
        codes = stored.astype(np.int64)
        codes.flags.writeable = False
        return codes

    def group_size(self, group: str) -> int:
        """How many members a defined group has."""
        return len(self._member_codes[self.group_code(group)])

    @property
    def groups(self) -> Mapping[str, tuple[str, ...]]:
        return {name: self.members(name) for name in self._groups.values}

    def members(self, group: str) -> tuple[str, ...]:
        code = self.group_code(group)
        found = self._members[code]
        if found is None:  # defined by codes: materialize the ids once
            values = self._users.values
            found = self._members[code] = tuple(
                [values[i] for i in self._member_codes[code].tolist()]
            )
        return found

    @property
    def users(self) -> tuple[str, ...]:
        """Every user id the ledger mentions, directly or through a group."""
        return tuple(self._users.values)

    def user_code(self, user: str) -> int | None:
        """The code of a user the ledger mentions (its index in `users`), or None."""
        return self._users.index.get(user)

    def user_id(self, code: int) -> str:
        """The id of the user with code ``code``."""
        return self._users.values[code]

    # ------------------------------------------------------------------ appending

    def append(
        self,
        slot: int,
        amount: Budget | Fraction | int | str,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "",
        evidence: Evidence | None = None,
    ) -> int:
        """Append one charge and return its row number."""
        check_slot(slot)
        budget = amount if isinstance(amount, Budget) else Budget(amount)
        subject = self._subject_code(user, group)
        if type(part) is not str or type(mechanism) is not str:
            check_labels(part, mechanism)
        self.append_validated_rows(slot, ((budget, subject, part, mechanism, evidence, None),))
        return len(self._slot) - 1

    def intern_user(self, user: str) -> int:
        """The code of ``user``, interning a new id (validated)."""
        found = self._users.index.get(user)
        if found is None:
            if not isinstance(user, str) or not user:
                raise BudgetError("user ids must be non-empty strings")
            found = self._users.code(user)
        return found

    def append_validated(
        self,
        slot: int,
        amount: Budget,
        subject: int,
        part: str,
        mechanism: str,
        evidence: Evidence | None,
        *,
        evidence_code: int | None = None,
    ) -> None:
        """`append` for a caller that has validated the slot and the amount and resolved the
        subject to its code (a user code, or ``-group_code - 1``): the runtime guard's path.
        ``evidence_code``: what `evidence_code` returned for this ``evidence`` (trusted)."""
        self.append_validated_rows(
            slot, ((amount, subject, part, mechanism, evidence, evidence_code),)
        )

    def append_validated_rows(self, slot: int, rows: Iterable[ValidatedRow]) -> None:
        """`append_validated` for each of ``rows`` (amount, subject code, part, mechanism,
        evidence, evidence code or None), all at ``slot``, in order. All or nothing: if
        anything raises before the last row is in (a bad evidence code, evidence that cannot
        be interned, an interrupt between two columns), every column is cut back to where it
        was, so the ledger never holds part of a row or part of the call's rows."""
        if self._bulk is not None:
            self._thaw()
        start = len(self._slot)
        try:
            self._append_rows(slot, rows)
        except BaseException:
            self._cut(start)
            raise

    @property
    def amount_codes(self) -> Mapping[tuple[int, int], int]:
        """Every amount's code by its (numerator, denominator) (read only: appends add to it)."""
        return self._amount_codes

    def label_codes(self, part: str, mechanism: str) -> tuple[int, int] | None:
        """The codes of a (part, mechanism) pair some row already carries, or None."""
        return self._label_codes.get((part, mechanism))

    def append_coded_rows(
        self,
        slot: int,
        groups: list[int],
        amounts: list[int],
        evidences: list[int],
        labels: tuple[int, int],
    ) -> None:
        """Rows charging whole groups at ``slot``, each column given by its code here: group
        codes (`group_index`), amount codes (`amount_codes`), evidence codes (`evidence_code`;
        -1 for none) and one pair of label codes for every row (`label_codes`). The runtime
        guard's path for a slot's class charges once every value has a code (a value without
        one goes through `append_validated_rows`, which interns it): the columns are extended,
        not appended to row by row. A code out of range, or columns of unequal lengths, is
        refused before anything is appended; all or nothing like `append_validated_rows`."""
        n = len(groups)
        if len(amounts) != n or len(evidences) != n:
            raise BudgetError("coded rows need one amount and one evidence code per group")
        if not n:
            return
        part, mechanism = labels
        if (
            min(groups) < 0
            or max(groups) >= len(self._groups.values)
            or min(amounts) < 0
            or max(amounts) >= len(self._amounts.values)
            or min(evidences) < -1
            or max(evidences) >= len(self._evidences.values)
            or not 0 <= part < len(self._parts.values)
            or not 0 <= mechanism < len(self._mechanisms.values)
        ):
            raise BudgetError("a coded row's code is out of range")
        if self._bulk is not None:
            self._thaw()
        start = len(self._slot)
        try:
            # (`fromlist` adds a whole list or, on an item it cannot take, nothing)
            self._slot.fromlist([slot] * n)
            self._subject.fromlist([-code - 1 for code in groups])
            self._amount.fromlist(amounts)
            self._part.fromlist([part] * n)
            self._mechanism.fromlist([mechanism] * n)
            self._evidence.fromlist(evidences)
        except BaseException:
            self._cut(start)
            raise

    def _append_rows(self, slot: int, rows: Iterable[ValidatedRow]) -> None:
        evidences, amount_codes, label_codes = (
            self._evidences,
            self._amount_codes,
            self._label_codes,
        )
        slots, subjects, amounts = self._slot, self._subject, self._amount
        parts, mechanisms, evidence_col = self._part, self._mechanism, self._evidence
        held = len(evidences.values)
        for amount, subject, part, mechanism, evidence, evidence_code in rows:
            if evidence is None:
                ev = -1
            elif evidence_code is not None:
                if not 0 <= evidence_code < held:
                    raise BudgetError("evidence code out of range")
                ev = evidence_code  # the caller's `evidence_code(evidence)`: not compared again
            else:
                ev = evidences.code_of(evidence)
                held = len(evidences.values)
            pair = amount.as_integer_ratio()  # ints hash and compare cheaply
            amount_code = amount_codes.get(pair)
            if amount_code is None:
                amount_code = amount_codes[pair] = self._amounts.code(amount)
            labels = label_codes.get((part, mechanism))
            if labels is None:  # interned codes never change: the pair's codes can be kept
                labels = (self._parts.code(part), self._mechanisms.code(mechanism))
                label_codes[part, mechanism] = labels
            # Every check is done: the row's six columns are appended together.
            slots.append(slot)
            subjects.append(subject)
            amounts.append(amount_code)
            parts.append(labels[0])
            mechanisms.append(labels[1])
            evidence_col.append(ev)

    def _cut(self, rows: int) -> None:
        """Cut every column back to its first ``rows`` rows (codes interned stay: unused). An
        interrupt in the middle of the cut does not leave the columns apart: the cut is
        finished first (a column already cut is cut again, at no cost), then it is raised."""
        interrupted: BaseException | None = None
        for _ in range(8):  # (`del` of a slice does not fail: only an interrupt lands here)
            try:
                for column in self._columns():
                    del column[rows:]
                break
            except BaseException as exc:
                interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted

    def _columns(self) -> tuple[array[int], ...]:
        return (
            self._slot,
            self._subject,
            self._amount,
            self._part,
            self._mechanism,
            self._evidence,
        )

    def evidence_code(self, evidence: Evidence) -> int | None:
        """The code of evidence equal to ``evidence`` already in the ledger, or None (nothing
        is interned). The same object is found without hashing its fields."""
        interner = self._evidences
        found = interner.by_id.get(id(evidence))
        if found is not None and interner.values[found] is evidence:
            return found
        return interner.index.get(evidence)

    def holds_evidence_object(self, evidence: Evidence) -> bool:
        """Whether this very object (not only an equal one) is interned here: the ledger then
        keeps it alive, so its ``id`` names it for as long as the ledger lives."""
        interner = self._evidences
        found = interner.by_id.get(id(evidence))
        return found is not None and interner.values[found] is evidence

    def _subject_code(self, user: str | None, group: str | None) -> int:
        if (user is None) == (group is None):
            raise BudgetError("a charge names exactly one of user or group")
        if user is not None:
            if not isinstance(user, str) or not user:
                raise BudgetError("user ids must be non-empty strings")
            return self._users.code(user)
        assert group is not None
        code = self._groups.index.get(group)
        if code is None:
            raise BudgetError(f"group {group!r} is not defined (define_group first)")
        return -code - 1

    # ------------------------------------------------------------------ reading

    def _thaw(self) -> None:
        """Copy bulk numpy columns into the appendable arrays (before the first append)."""
        assert self._bulk is not None
        types = (np.int64, np.int64, np.int32, np.int32, np.int32, np.int32)
        try:
            for target, col, kind in zip(self._columns(), self._bulk, types, strict=True):
                target.frombytes(np.ascontiguousarray(col, dtype=kind).tobytes())
            self._bulk = None
        except BaseException:
            if self._bulk is not None:  # the arrays were empty: the bulk columns stay in use
                self._cut(0)
            raise

    def __len__(self) -> int:
        return len(self._slot) if self._bulk is None else len(self._bulk[0])

    def charge(self, row: int) -> Charge:
        if self._bulk is None:
            slot, subject, amount = self._slot[row], self._subject[row], self._amount[row]
            part, mechanism, ev = self._part[row], self._mechanism[row], self._evidence[row]
        else:
            if not -len(self) <= row < len(self):
                raise IndexError("ledger row out of range")
            slot, subject, amount, part, mechanism, ev = (int(c[row]) for c in self._bulk)
        return Charge(
            slot=slot,
            amount=self._amounts.values[amount],
            user=self._users.values[subject] if subject >= 0 else None,
            group=self._groups.values[-subject - 1] if subject < 0 else None,
            part=self._parts.values[part],
            mechanism=self._mechanisms.values[mechanism],
            evidence=None if ev < 0 else self._evidences.values[ev],
        )

    def __iter__(self) -> Iterator[Charge]:
        return (self.charge(i) for i in range(len(self)))

    def per_user_rows(self) -> int:
        """How many per-user charges the ledger stands for once group charges are expanded."""
        sizes = np.array([len(m) for m in self._member_codes] + [0], np.int64)
        subject = self.columns().subject
        grouped = subject[subject < 0]
        return int(len(subject) - len(grouped) + sizes[-grouped - 1].sum())

    def expanded(self) -> Iterator[tuple[str, Charge]]:
        """Every (user, charge) pair the ledger means: group charges expanded to their members."""
        for charge in self:
            if charge.user is not None:
                yield charge.user, charge
            else:
                assert charge.group is not None
                for m in self.members(charge.group):
                    yield m, charge

    def columns(self) -> LedgerColumns:
        """A columnar snapshot: numpy copies of the integer columns, or, for a ledger built by
        `from_codes` and not appended to since, its own read-only arrays (no copy)."""
        if self._bulk is not None:
            slot, subject, amount, part, mechanism, evidence = self._bulk
            return LedgerColumns(
                slot=slot,
                subject=subject,
                amount=amount,
                part=part,
                mechanism=mechanism,
                evidence=evidence,
                users=list(self._users.values),
                groups=list(self._groups.values),
                group_members=[m.astype(np.int64) for m in self._member_codes],
                amounts=list(self._amounts.values),
                parts=list(self._parts.values),
                mechanisms=list(self._mechanisms.values),
                evidences=list(self._evidences.values),
            )

        def i64(col: array[int]) -> I64:
            return np.frombuffer(col, dtype=np.int64).copy() if len(col) else np.zeros(0, np.int64)

        def i32(col: array[int]) -> I32:
            return np.frombuffer(col, dtype=np.int32).copy() if len(col) else np.zeros(0, np.int32)

        return LedgerColumns(
            slot=i64(self._slot),
            subject=i64(self._subject),
            amount=i32(self._amount),
            part=i32(self._part),
            mechanism=i32(self._mechanism),
            evidence=i32(self._evidence),
            users=list(self._users.values),
            groups=list(self._groups.values),
            group_members=[m.astype(np.int64) for m in self._member_codes],
            amounts=list(self._amounts.values),
            parts=list(self._parts.values),
            mechanisms=list(self._mechanisms.values),
            evidences=list(self._evidences.values),
        )

    # ------------------------------------------------------------------ bulk construction

    @classmethod
    def from_codes(
        cls,
        *,
        slot: I64,
        user_codes: I64,
        users: list[str],
        amount_codes: I32,
        amounts: list[Budget],
        part_codes: I32 | None = None,
        parts: list[str] | None = None,
        mechanism_codes: I32 | None = None,
        mechanisms: list[str] | None = None,
        evidence_codes: I32 | None = None,
        evidences: list[Evidence] | None = None,
        groups: Mapping[str, tuple[str, ...]] | None = None,
        group_codes: list[I64] | None = None,
        group_users: list[str] | None = None,
        copy: bool = True,
    ) -> Ledger:
        """Build a ledger from dictionary-encoded columns without a Python loop per row.

        ``user_codes[i] >= 0`` indexes ``users``; ``< 0`` names group ``-code-1`` in the order of
        ``groups``. Value tables are re-interned, so duplicate table entries are merged.
        ``group_codes`` (with ``group_users``) may give the members of each group of ``groups``
        as codes into ``group_users`` (``groups[name][k] == group_users[group_codes[g][k]]``):
        the same checks as `define_group` then run vectorized, not once per member.
        ``copy=False``: the ledger may keep the given arrays themselves (read-only views, until
        the first append); the caller must not modify them afterwards (a reader's fresh columns).
        """
        n = len(slot)
        ledger = cls()
        if group_codes is not None and group_users is not None and groups:
            ledger._define_coded_groups(groups, group_codes, group_users)
        else:
            for name, members in (groups or {}).items():
                ledger.define_group(name, members)
        if n and (int(slot.min()) < 1 or int(slot.max()) > MAX_SLOT):
            raise BudgetError("slot: slots are numbered from 1 to 2^62 - 1")
        ngroups = len(ledger._members)
        if n and (int(user_codes.max()) >= len(users) or int(user_codes.min()) < -ngroups):
            raise BudgetError("subject code out of range")

        def remap(
            codes: npt.NDArray[np.int32] | None,
            table: list[T] | None,
            interner: _Interner[T],
            default: T,
        ) -> npt.NDArray[np.int32]:
            if codes is None or table is None:
                return np.broadcast_to(np.int32(interner.code(default)), (n,))
            mapping = np.array([interner.code(v) for v in table] or [0], dtype=np.int32)
            return take_codes(mapping, codes) if n else np.zeros(0, np.int32)

        user_map = np.array([ledger._users.code(u) for u in users] or [0], dtype=np.int64)
        user_codes = np.asarray(user_codes)
        if not n:
            subj = np.zeros(0, np.int64)
        elif int(user_codes.min()) >= 0:
            subj = take_codes(user_map, user_codes)
        else:
            subj = np.where(user_codes >= 0, user_map[np.maximum(user_codes, 0)], user_codes)
        if evidence_codes is None or evidences is None:
            ev: npt.NDArray[np.int32] = np.broadcast_to(np.int32(-1), (n,))
        else:
            ev_map = np.array([ledger._evidences.code(e) for e in evidences] + [-1], np.int32)
            # -1 picks the sentinel
            ev = take_codes(ev_map, evidence_codes) if n else np.zeros(0, np.int32)
        bulk = (
            np.ascontiguousarray(slot, dtype=np.int64),
            np.asarray(subj, dtype=np.int64),
            remap(amount_codes, amounts, ledger._amounts, Budget(0)),
            remap(part_codes, parts, ledger._parts, ""),
            remap(mechanism_codes, mechanisms, ledger._mechanisms, ""),
            np.asarray(ev, dtype=np.int32),
        )
        if copy:
            bulk = _owned(bulk)
        ledger._bulk = _read_only(bulk)
        return ledger


_Col = TypeVar("_Col", I64, I32)


def _owned_one(col: _Col) -> _Col:
    return col if (len(col) > 1 and col.strides[0] == 0) else col.copy()


def _read_only_one(col: _Col) -> _Col:
    view = col.view()
    view.flags.writeable = False
    return view


def _owned(
    cols: tuple[I64, I64, I32, I32, I32, I32],
) -> tuple[I64, I64, I32, I32, I32, I32]:
    """Copies of the columns (constant broadcast views stay views: they own no data)."""
    s, u, a, p, m, e = cols
    return (
        _owned_one(s),
        _owned_one(u),
        _owned_one(a),
        _owned_one(p),
        _owned_one(m),
        _owned_one(e),
    )


def _read_only(
    cols: tuple[I64, I64, I32, I32, I32, I32],
) -> tuple[I64, I64, I32, I32, I32, I32]:
    """Read-only views of the columns (the caller's arrays stay writeable)."""
    s, u, a, p, m, e = cols
    return (
        _read_only_one(s),
        _read_only_one(u),
        _read_only_one(a),
        _read_only_one(p),
        _read_only_one(m),
        _read_only_one(e),
    )
