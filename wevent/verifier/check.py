"""The batch checker: ledger + population -> exact verdict, vectorized.

Exactness: every amount and bound is scaled to an integer numerator over one common denominator L.
When all sums fit comfortably in int64 the work runs on int64 arrays; otherwise the same code runs
on arrays of Python integers (exact, slower). No float is involved anywhere.

Speed: users whose spends are provably identical (no direct charges, the same groups, the same
requirement) are checked once, as one *representative*. A screening pass computes every window
sum with array arithmetic and no sort (a representatives x slots prefix-sum table for fixed and
dynamic classes, totals for whole-stream ones); only representatives that fail it (or that it
cannot take) go to the sparse pass, which sorts their charges and finds the exact minimal
violations. Semantics of the reported violations: `wevent.verifier.verdict`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError, check_common_denominator
from wevent.accounting.evidence import certify_cost
from wevent.accounting.ledger import Ledger, LedgerColumns
from wevent.accounting.population import Population
from wevent.accounting.requirements import (
    Dynamic,
    Fixed,
    Requirement,
    WholeStream,
    requirement_bounds,
)
from wevent.verifier.verdict import EvidenceFailure, Verdict, Violation, ratio

__all__ = [
    "KIND_DYNAMIC",
    "KIND_FIXED",
    "KIND_NONE",
    "KIND_WHOLE",
    "check",
    "checked_horizon",
    "requirement_kind",
]

Arr = npt.NDArray[Any]
_INT64_SAFE = 2**62
_CHUNK = 1 << 23  # rows per step where a pass over every charge would build large temporaries
# The kinds of requirement, as small integers (array- and SQL-friendly); `wevent.verifier.sql` uses
# the same codes.
KIND_FIXED, KIND_WHOLE, KIND_DYNAMIC, KIND_NONE = 0, 1, 2, 3


def requirement_kind(req: Requirement | None) -> int:
    """The kind code of a requirement (`KIND_NONE` for an unregistered user's None)."""
    if isinstance(req, Fixed):
        return KIND_FIXED
    if isinstance(req, WholeStream):
        return KIND_WHOLE
    if isinstance(req, Dynamic):
        return KIND_DYNAMIC
    return KIND_NONE


def _distinct(values: Arr) -> Arr:
    """``np.unique(values)`` (sorted distinct values) by one sort: numpy 2's hash-based unique
    takes seconds on 10^7 values of high cardinality, a sort a fraction of one."""
    flat = np.sort(np.asarray(values).reshape(-1))
    return flat[np.concatenate(([True], flat[1:] != flat[:-1]))] if len(flat) else flat


class _Reps:
    """Representatives: classes of users with provably identical spends and requirement.

    A user with direct charges is its own representative; users charged only through groups
    share one when they have the same requirement and belong to the same groups.
    """

    def __init__(self, cols: LedgerColumns, population: Population) -> None:
        n_users = len(cols.users)
        n_classes = len(population.classes)
        self.requirements: list[Requirement | None] = [c.requirement for c in population.classes]
        self.requirements.append(None)
        self.class_names = [c.name for c in population.classes] + ["unregistered"]
        user_class = np.array(population.class_indices(cols.users) or [0], dtype=np.int64)[:n_users]
        user_class[user_class < 0] = n_classes
        direct = np.zeros(n_users, dtype=bool)
        direct[cols.subject[cols.subject >= 0]] = True
        rep_of = np.full(n_users, -1, dtype=np.int64)
        direct_users = np.flatnonzero(direct)
        rep_of[direct_users] = np.arange(len(direct_users))
        rep_class = [user_class[direct_users]]
        n_reps = len(direct_users)
        if cols.group_members:
            mem_user = np.concatenate(cols.group_members)
            mem_group = np.concatenate(
                [np.full(len(m), g, dtype=np.int64) for g, m in enumerate(cols.group_members)]
            )
            keep = ~direct[mem_user]
            mem_user, mem_group = mem_user[keep], mem_group[keep]
            counts = np.bincount(mem_user, minlength=n_users)
            if len(mem_user) and int(counts.max()) == 1:
                # Each group-only user is in exactly one group: signature = (class, group).
                sig = user_class[mem_user] * (len(cols.group_members) + 1) + mem_group
                uniq, inverse = np.unique(sig, return_inverse=True)
                rep_of[mem_user] = n_reps + inverse
                rep_class.append(user_class[mem_user][np.unique(inverse, return_index=True)[1]])
                n_reps += len(uniq)
            elif len(mem_user):
                found, extra = _group_signatures(mem_user, mem_group, user_class, n_reps)
                rep_of[mem_user] = found[mem_user]
                rep_class.append(extra)
                n_reps += len(extra)
        self.n = n_reps
        self.rep_of = rep_of
        self.rep_class = np.concatenate(rep_class) if rep_class else np.zeros(0, np.int64)
        kinds = np.array([requirement_kind(r) for r in self.requirements], dtype=np.int8)
        self.rep_kind = kinds[self.rep_class] if n_reps else np.zeros(0, np.int8)
        self.group_reps = _group_reps(cols.group_members, rep_of)
        # Classes with at least one representative; only their bounds enter the arithmetic
        # (the common denominator does not cover the others).
        self.present: set[int] = set(_distinct(self.rep_class).tolist())
        self.users = cols.users
        self._order: Arr | None = None
        self._starts: Arr | None = None

    def members(self, rep: int) -> tuple[str, ...]:
        if self._order is None:
            self._order = np.argsort(self.rep_of, kind="stable")
            self._starts = np.searchsorted(self.rep_of[self._order], np.arange(self.n + 1))
        assert self._starts is not None
        idx = self._order[self._starts[rep] : self._starts[rep + 1]]
        return tuple(sorted(self.users[i] for i in idx.tolist()))


def _group_reps(group_members: list[Arr], rep_of: Arr) -> list[Arr]:
    """The distinct representatives of each group's members (sorted), one `np.unique` over
    all (group, representative) pairs rather than one per group."""
    if not group_members:
        return []
    sizes = np.array([len(m) for m in group_members], np.int64)
    reps = rep_of[np.concatenate(group_members)]
    width = int(reps.max(initial=0)) + 1  # groups may all be empty
    pairs = np.sort(np.repeat(np.arange(len(sizes), dtype=np.int64), sizes) * width + reps)
    keep = np.ones(len(pairs), bool)
    keep[1:] = pairs[1:] != pairs[:-1]
    pairs = pairs[keep]
    owner = pairs // width
    bounds = np.searchsorted(owner, np.arange(len(sizes) + 1))
    values = pairs % width
    return [values[bounds[g] : bounds[g + 1]] for g in range(len(sizes))]


def _group_signatures(
    mem_user: Arr, mem_group: Arr, user_class: Arr, first_rep: int
) -> tuple[Arr, Arr]:
    """Representatives of group-only users, vectorized: users with the same class and the same
    set of groups share one. Returns (representative per user code, -1 for users not listed;
    class of each new representative), numbered from ``first_rep``.

    Memberships are sorted by (user, group), so a user's groups form one sorted run; users with
    runs of equal length n are compared exactly as rows (class, g_1, ..., g_n) of one matrix
    (`np.unique` over rows), one matrix per distinct n."""
    order = np.lexsort((mem_group, mem_user))
    users_sorted, groups_sorted = mem_user[order], mem_group[order]
    users, starts, counts = np.unique(users_sorted, return_index=True, return_counts=True)
    small = max(int(mem_group.max()), int(user_class.max(initial=0))) < 2**31
    groups_sorted = groups_sorted.astype(np.int32 if small else np.int64)
    rep_of = np.full(len(user_class), -1, dtype=np.int64)
    classes: list[Arr] = []
    next_rep = first_rep
    for n in _distinct(counts).tolist():
        chosen = np.flatnonzero(counts == n)
        rows = groups_sorted[starts[chosen][:, None] + np.arange(n, dtype=np.int64)]
        key = np.column_stack((user_class[users[chosen]].astype(rows.dtype), rows))
        uniq, inverse = np.unique(key, axis=0, return_inverse=True)
        rep_of[users[chosen]] = next_rep + inverse.reshape(-1)
        classes.append(uniq[:, 0].astype(np.int64))
        next_rep += len(uniq)
    return rep_of, np.concatenate(classes)


def _expand(cols: LedgerColumns, reps: _Reps) -> tuple[Arr, Arr | None]:
    """Per-representative rows: (representative, row index into the ledger); the row index is
    None when there are no group charges (the rows are the ledger's own, in order)."""
    is_direct = cols.subject >= 0
    if bool(is_direct.all()):
        return reps.rep_of[cols.subject], None
    direct_rows = np.flatnonzero(is_direct)
    rep_parts = [reps.rep_of[cols.subject[direct_rows]]]
    row_parts = [direct_rows]
    group_rows = np.flatnonzero(~is_direct)
    if len(group_rows):
        gidx = -cols.subject[group_rows] - 1
        order = np.argsort(gidx, kind="stable")
        group_rows, gidx = group_rows[order], gidx[order]
        for chunk in np.split(group_rows, np.flatnonzero(np.diff(gidx)) + 1):
            g_reps = reps.group_reps[int(-cols.subject[chunk[0]] - 1)]
            rep_parts.append(np.repeat(g_reps, len(chunk)))
            row_parts.append(np.tile(chunk, len(g_reps)))
    return np.concatenate(rep_parts), np.concatenate(row_parts)


class _Utilization(Mapping[str, Fraction | None]):
    """Per-user utilization, materialized on access (a large population costs nothing until
    read). A zero bound with a positive spend is reported as None (unbounded)."""

    def __init__(
        self, reps: _Reps, num: Arr, den: Arr, special: dict[int, Fraction | None]
    ) -> None:
        self._reps, self._num, self._den, self._special = reps, num, den, special
        self._index: dict[str, int] | None = None

    def _rep(self, user: str) -> int:
        if self._index is None:
            self._index = {u: i for i, u in enumerate(self._reps.users)}
        return int(self._reps.rep_of[self._index[user]])

    def rep_value(self, rep: int) -> Fraction | None:
        if rep in self._special:
            return self._special[rep]
        num, den = int(self._num[rep]), int(self._den[rep])
        if den == 0:
            return Fraction(0) if num == 0 else None
        return Fraction(num, den)

    def __getitem__(self, user: str) -> Fraction | None:
        return self.rep_value(self._rep(user))

    def __iter__(self) -> Iterator[str]:
        return iter(self._reps.users)

    def __len__(self) -> int:
        return len(self._reps.users)


def checked_horizon(last_slot: int, horizon: int | None) -> int:
    """The last slot whose windows are checked: ``horizon`` (``--until``), or the ledger's last
    slot. A horizon before the ledger's last slot is refused: the charges after it would go
    unchecked while the verdict reads as a verdict on the whole ledger."""
    if horizon is not None and horizon < last_slot:
        raise BudgetError(
            f"horizon (--until) {horizon} is before the ledger's last slot {last_slot}: every "
            "charge is checked, so the check cannot stop before the last one"
        )
    return max(last_slot, horizon or 0)


def check(
    ledger: Ledger,
    population: Population,
    *,
    horizon: int | None = None,
    progress: Callable[[str], None] | None = None,
    dense_limit: int | None = None,
) -> Verdict:
    """Check every evidence cost and every window of every charged user; see `wevent.verifier.verdict`.

    ``dense_limit`` caps the cells (representatives x slots) of the dense screening table for
    fixed requirements (default: 4 per charge plus 4M); 0 disables dense screening.
    """
    say = progress or (lambda _msg: None)
    cols = ledger.columns()
    say("evidence")
    evidence_failures = _check_evidence(cols)
    say("representatives")
    reps = _Reps(cols, population)
    rep_idx, rows = _expand(cols, reps)
    sizes = np.array([len(m) for m in cols.group_members] + [0], dtype=np.int64)
    per_user = int(
        np.count_nonzero(cols.subject >= 0) + sizes[-cols.subject[cols.subject < 0] - 1].sum()
    )

    # Common denominator over amounts and the bounds of the classes present; integer numerators.
    bounds = [b for c in sorted(reps.present) for b in requirement_bounds(reps.requirements[c])]
    lcd = 1
    for d in {a.denominator for a in cols.amounts} | {b.denominator for b in bounds}:
        lcd = check_common_denominator(lcd * d // math.gcd(lcd, d), "ledger")
    numerators = [int(a * lcd) for a in cols.amounts]
    biggest = max([*numerators, *(int(b * lcd) for b in bounds), 1])
    dtype: Any = np.int64 if biggest * (len(rep_idx) + 1) < _INT64_SAFE else object
    amount_num = np.array(numerators or [0], dtype=dtype)

    last_slot = int(cols.slot.max()) if len(cols.slot) else 0
    horizon_t = checked_horizon(last_slot, horizon)
    slots_all = cols.slot if rows is None else cols.slot[rows]
    vals_all = amount_num[cols.amount if rows is None else cols.amount[rows]]

    say("screening")
    # Utilization of representative r is util_num[r] / class_den[class of r]; the sparse pass
    # records dynamic and unregistered representatives' utilization exactly in `special`.
    util_num = np.zeros(reps.n, dtype=dtype)
    class_den = np.array(
        [_plain_bound(r, lcd) if c in reps.present else 1 for c, r in enumerate(reps.requirements)],
        dtype=dtype,
    )
    need_detail = np.ones(reps.n, dtype=bool)  # representatives the sparse pass must examine
    if dtype is np.int64:
        limit = 4 * len(rep_idx) + 2**22 if dense_limit is None else dense_limit
        screen = _Screen(
            reps, rep_idx, slots_all, vals_all, horizon_t, lcd, util_num, class_den, need_detail
        )
        screen.dense(limit)
        screen.whole()
    if not bool(need_detail.all()):
        selected = need_detail[rep_idx]
        rep_idx, slots_all, vals_all = rep_idx[selected], slots_all[selected], vals_all[selected]

    # The sparse pass keys rows by (representative, slot rank): ranks keep the key far from int64
    # limits whatever the slot numbers are.
    distinct = _distinct(slots_all)
    modulus = len(distinct) + 2
    say("sorting")
    key = rep_idx * modulus + (np.searchsorted(distinct, slots_all) + 1)
    order = np.argsort(key, kind="stable")
    key = key[order]
    vals = vals_all[order]
    if len(key) and not bool(np.all(key[1:] != key[:-1])):
        # Merge the charges of one representative in one slot.
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        key = key[starts]
        vals = np.add.reduceat(vals, starts)
    if len(vals) and bool(np.any(vals == 0)):  # zero charges cannot break a window
        nonzero = vals != 0
        key, vals = key[nonzero], vals[nonzero]
    rep = key // modulus
    slot = distinct[key % modulus - 1] if len(key) else np.zeros(0, np.int64)
    cum = np.concatenate((np.zeros(1, dtype=dtype), np.cumsum(vals, dtype=dtype)))
    ctx = _Ctx(reps, rep, slot, vals, cum, key, modulus, lcd, dtype, horizon_t, distinct)

    say("windows")
    special: dict[int, Fraction | None] = {}
    violations: list[Violation] = []
    row_kind = reps.rep_kind[rep] if len(rep) else np.zeros(0, np.int8)
    _check_fixed(ctx, np.flatnonzero(row_kind == KIND_FIXED), violations, util_num)
    _check_whole(ctx, np.flatnonzero(row_kind == KIND_WHOLE), violations, util_num)
    for r in _distinct(rep[row_kind >= KIND_DYNAMIC]).tolist():
        special[int(r)] = _check_dynamic_or_unregistered(ctx, int(r), violations)
    util_den = class_den[reps.rep_class] if reps.n else np.zeros(0, dtype=dtype)
    user_util = _Utilization(reps, util_num, util_den, special)
    class_util = _class_utilization(reps, util_num, class_den, special)
    return Verdict(
        violations=tuple(sorted(violations, key=Violation.sort_key)),
        evidence_failures=evidence_failures,
        user_utilization=user_util,
        class_utilization=class_util,
        horizon=horizon_t,
        per_user_charges=per_user,
        charges=len(cols.slot),
        evidence_charges=int(np.count_nonzero(cols.evidence >= 0)),
    )


def _plain_bound(req: Requirement | None, lcd: int) -> int:
    """The bound numerator utilization is measured against (1 for dynamic classes until the
    screening sets a common denominator; 0 for no requirement)."""
    if isinstance(req, Fixed | WholeStream):
        return int(req.eps * lcd)
    return 1 if isinstance(req, Dynamic) else 0


class _Screen:
    """Vectorized screening without sorting: window sums for every representative at once.

    Representatives that pass keep the utilization computed here; those that fail (or cannot be
    screened) stay marked in ``need_detail`` for the sparse pass, which finds their exact
    minimal violations.
    """

    def __init__(
        self,
        reps: _Reps,
        rep_idx: Arr,
        slots: Arr,
        vals: Arr,
        horizon: int,
        lcd: int,
        util_num: Arr,
        class_den: Arr,
        need_detail: Arr,
    ) -> None:
        self.reps, self.rep_idx, self.slots, self.vals = reps, rep_idx, slots, vals
        self.horizon, self.lcd = horizon, lcd
        self.util_num, self.class_den, self.need_detail = util_num, class_den, need_detail

    def dense(self, limit: int) -> None:
        """Fixed and dynamic classes: a representatives x slots prefix-sum table."""
        reps = self.reps
        chosen = np.flatnonzero((reps.rep_kind == KIND_FIXED) | (reps.rep_kind == KIND_DYNAMIC))
        width = self.horizon + 1
        if not len(chosen) or len(chosen) * width > limit:
            return
        pos = np.full(reps.n, -1, dtype=np.int64)
        pos[chosen] = np.arange(len(chosen))
        table = np.zeros(len(chosen) * width, dtype=np.int64)
        for a in range(0, len(self.rep_idx), _CHUNK):  # bounded temporaries
            row_pos = pos[self.rep_idx[a : a + _CHUNK]]
            slots, vals = self.slots[a : a + _CHUNK], self.vals[a : a + _CHUNK]
            if bool((row_pos >= 0).all()):
                np.add.at(table, row_pos * width + slots, vals)
            else:
                mask = row_pos >= 0
                np.add.at(table, row_pos[mask] * width + slots[mask], vals[mask])
        prefix = table.reshape(len(chosen), width)
        np.cumsum(prefix, axis=1, out=prefix)  # in place; [:, t]: slots <= t
        del table
        cls_of = reps.rep_class[chosen]
        for c in _distinct(cls_of).tolist():
            idx = np.flatnonzero(cls_of == c)
            req = reps.requirements[c]
            if isinstance(req, Fixed):
                self._fixed(req, chosen[idx], prefix[idx])
            else:
                assert isinstance(req, Dynamic)
                self._dynamic(c, req, chosen[idx], prefix[idx])

    def _fixed(self, req: Fixed, members: Arr, block: Arr) -> None:
        sums = block.copy()
        if req.w < block.shape[1]:
            sums[:, req.w :] -= block[:, : -req.w]  # window [t-w+1, t] for t >= w
        top = sums.max(axis=1)
        self.util_num[members] = top
        self.need_detail[members] = top > int(req.eps * self.lcd)

    def _dynamic(self, c: int, req: Dynamic, members: Arr, block: Arr) -> None:
        """001 Definition 10 for a whole class at once (the same declarations for all)."""
        decls = req.declarations
        first = decls[0].slot
        t = np.arange(first, self.horizon + 1, dtype=np.int64)
        early = block[:, min(first - 1, self.horizon)] > 0  # spends before the first declaration
        if not len(t):
            self.need_detail[members] = early
            return
        k = np.searchsorted(np.array(req.slots), t, side="right") - 1
        clip = self.horizon + 1  # longer windows behave the same; keeps slot arithmetic in int64
        w_b = np.array([min(d.w_back, clip) for d in decls], np.int64)[k]
        w_f = np.array([min(d.w_fwd, clip) for d in decls], np.int64)[k]
        back = block[:, t] - block[:, np.maximum(t - w_b, 0)]
        fwd = block[:, np.minimum(t + w_f - 1, self.horizon)] - block[:, t - 1]
        lcd = self.lcd
        eb = np.array([int(d.eps_back * lcd) for d in decls], np.int64)
        ef = np.array([int(d.eps_fwd * lcd) for d in decls], np.int64)
        bad = early | (back > eb[k]).any(axis=1) | (fwd > ef[k]).any(axis=1)
        # Utilization: the largest sum/bound over all windows, exactly, as integers over the
        # least common multiple of the class's bounds (if that fits in int64).
        columns: list[tuple[Arr, int]] = []
        segs = _distinct(k).tolist()
        starts = np.searchsorted(k, segs, side="left")
        for sums, bounds in ((back, eb), (fwd, ef)):
            tops = np.maximum.reduceat(sums, starts, axis=1)
            for j, seg in enumerate(segs):
                columns.append((tops[:, j], int(bounds[seg])))
        positive = [b for _, b in columns if b > 0]
        common = 1
        for b in positive:
            common = common * b // math.gcd(common, b)
        biggest = max([int(col.max(initial=0)) for col, _ in columns] + [0])
        if common >= _INT64_SAFE or biggest * common >= _INT64_SAFE:
            self.need_detail[members] = True  # let the sparse pass compute utilization exactly
            return
        best = np.zeros(len(members), dtype=np.int64)
        for col, bound in columns:
            if bound == 0:
                bad |= col > 0  # a positive spend against a zero bound is a violation
            else:
                best = np.maximum(best, col * (common // bound))
        self.class_den[c] = common
        self.util_num[members] = best
        self.need_detail[members] = bad

    def whole(self) -> None:
        """Whole-stream totals per representative."""
        reps = self.reps
        whole = np.flatnonzero(reps.rep_kind == KIND_WHOLE)
        if not len(whole):
            return
        totals = np.zeros(reps.n, dtype=np.int64)
        np.add.at(totals, self.rep_idx, self.vals)
        self.util_num[whole] = totals[whole]
        self.need_detail[whole] = totals[whole] > self.class_den[reps.rep_class[whole]]


def _class_utilization(
    reps: _Reps, util_num: Arr, class_den: Arr, special: dict[int, Fraction | None]
) -> dict[str, Fraction | None]:
    """Largest utilization per class: representatives measured in the class's common
    denominator compare by numerator; exactly computed ones are merged one by one."""
    out: dict[str, Fraction | None] = {}
    plain = np.ones(reps.n, dtype=bool)
    plain[list(special)] = False
    class_max = np.zeros(len(reps.requirements), dtype=util_num.dtype)
    np.maximum.at(class_max, reps.rep_class[plain], util_num[plain])
    for c in _distinct(reps.rep_class[plain]).tolist():
        num, den = int(class_max[c]), int(class_den[c])
        out[reps.class_names[c]] = (
            Fraction(num, den) if den else (Fraction(0) if num == 0 else None)
        )
    for r, value in special.items():
        name = reps.class_names[int(reps.rep_class[r])]
        prev = out.get(name, Fraction(0))
        out[name] = None if (value is None or prev is None) else max(prev, value)
    return out


class _Ctx:
    def __init__(
        self,
        reps: _Reps,
        rep: Arr,
        slot: Arr,
        vals: Arr,
        cum: Arr,
        key: Arr,
        modulus: int,
        lcd: int,
        dtype: Any,
        horizon: int,
        distinct: Arr,
    ) -> None:
        self.reps, self.rep, self.slot, self.vals, self.cum = reps, rep, slot, vals, cum
        self.key, self.modulus, self.lcd, self.dtype, self.horizon = (
            key,
            modulus,
            lcd,
            dtype,
            horizon,
        )
        self.distinct = distinct  # the distinct slots, ascending; a row's key holds its rank

    def window(self, w: int) -> int:
        """A window size clipped to the horizon (longer windows behave the same), so slot
        arithmetic stays within int64."""
        return min(w, self.horizon + 1)

    def frac(self, numerator: Any) -> Fraction:
        return Fraction(int(numerator), self.lcd)

    def num(self, value: Fraction) -> int:
        return int(value * self.lcd)

    def spends(self, lo: int, hi: int) -> tuple[tuple[int, Fraction], ...]:
        """Rows lo..hi inclusive as (slot, amount)."""
        return tuple(
            (int(s), self.frac(v))
            for s, v in zip(
                self.slot[lo : hi + 1].tolist(), self.vals[lo : hi + 1].tolist(), strict=True
            )
        )

    def per_class(self, values: Callable[[Requirement | None], int]) -> Arr:
        """A value per class; 0 for classes with no representative."""
        present = self.reps.present
        return np.array(
            [values(r) if c in present else 0 for c, r in enumerate(self.reps.requirements)],
            dtype=self.dtype,
        )

    def segments(self, rows: Arr) -> tuple[Arr, Arr]:
        """Start offsets (into ``rows``) of each representative's run, and those reps."""
        r = self.rep[rows]
        starts = np.flatnonzero(np.concatenate(([True], r[1:] != r[:-1])))
        return starts, r[starts]


def _check_fixed(ctx: _Ctx, rows: Arr, out: list[Violation], util_num: Arr) -> None:
    if not len(rows):
        return
    reqs = ctx.reps.requirements
    w_class = np.array(
        [ctx.window(r.w) if isinstance(r, Fixed) else 1 for r in reqs], dtype=np.int64
    )
    eps_class = ctx.per_class(lambda r: ctx.num(r.eps) if isinstance(r, Fixed) else 0)
    everything = len(rows) == len(ctx.rep)  # all rows are fixed: skip the row gathers
    r = ctx.rep if everything else ctx.rep[rows]
    rep_cls = ctx.reps.rep_class
    w = w_class[rep_cls][r]
    eps = eps_class[rep_cls][r]
    slot = ctx.slot if everything else ctx.slot[rows]
    # First row of the window of w slots ending at this row's slot: the first rank above the
    # number of distinct slots <= slot - w.
    below = np.searchsorted(ctx.distinct, slot - w, side="right")
    lo = np.searchsorted(ctx.key, r * ctx.modulus + below, side="right")
    wsum = (ctx.cum[1:] if everything else ctx.cum[rows + 1]) - ctx.cum[lo]
    starts, seg_reps = ctx.segments(rows)
    util_num[seg_reps] = np.maximum.reduceat(wsum, starts)
    bad = np.flatnonzero(wsum > eps)
    if not len(bad):
        return
    ends = rows[bad]
    target = ctx.cum[ends + 1] - eps[bad]
    first = np.searchsorted(ctx.cum, target, side="left") - 1  # largest k with cum[k] < target
    _, keep = np.unique(first, return_index=True)  # the earliest end for each start is minimal
    for i, j in zip(first[keep].tolist(), ends[keep].tolist(), strict=True):
        rr = int(ctx.rep[j])
        req = reqs[int(ctx.reps.rep_class[rr])]
        assert isinstance(req, Fixed)
        spends = ctx.spends(i, j)
        out.append(
            Violation.from_spends(
                "fixed",
                ctx.reps.members(rr),
                spends,
                ctx.frac(ctx.cum[j + 1] - ctx.cum[i]),
                req.eps,
                req.describe(),
            )
        )


def _check_whole(ctx: _Ctx, rows: Arr, out: list[Violation], util_num: Arr) -> None:
    if not len(rows):
        return
    reqs = ctx.reps.requirements
    eps_class = ctx.per_class(lambda r: ctx.num(r.eps) if isinstance(r, WholeStream) else 0)
    starts, seg_reps = ctx.segments(rows)
    first_rows = rows[starts]
    last_rows = rows[np.append(starts[1:], len(rows)) - 1]
    totals = ctx.cum[last_rows + 1] - ctx.cum[first_rows]
    eps = eps_class[ctx.reps.rep_class[seg_reps]]
    util_num[seg_reps] = totals
    for k in np.flatnonzero(totals > eps).tolist():
        rr = int(seg_reps[k])
        req = reqs[int(ctx.reps.rep_class[rr])]
        assert isinstance(req, WholeStream)
        spends = ctx.spends(int(first_rows[k]), int(last_rows[k]))
        out.append(
            Violation.from_spends(
                "whole-stream",
                ctx.reps.members(rr),
                spends,
                ctx.frac(totals[k]),
                req.eps,
                req.describe(),
                anchor=0,
            )
        )


def _check_dynamic_or_unregistered(ctx: _Ctx, r: int, out: list[Violation]) -> Fraction | None:
    """Exact check of one dynamic (or unregistered) representative; returns its utilization."""
    lo = int(np.searchsorted(ctx.key, r * ctx.modulus, side="left"))
    hi = int(np.searchsorted(ctx.key, (r + 1) * ctx.modulus, side="left")) - 1
    req = ctx.reps.requirements[int(ctx.reps.rep_class[r])]
    users = ctx.reps.members(r)
    slots = ctx.slot[lo : hi + 1]
    if not isinstance(req, Dynamic):
        spends = ctx.spends(lo, hi)
        total = ctx.frac(ctx.cum[hi + 1] - ctx.cum[lo])
        out.append(
            Violation.from_spends(
                "unregistered", users, spends, total, Fraction(0), "no requirement"
            )
        )
        return None
    best: Fraction | None = Fraction(0)
    first_decl = req.declarations[0].slot
    early = int(np.searchsorted(slots, first_decl, side="left"))
    if early > 0:
        spends = ctx.spends(lo, lo + early - 1)
        out.append(
            Violation.from_spends(
                "unregistered",
                users,
                spends,
                ctx.frac(ctx.cum[lo + early] - ctx.cum[lo]),
                Fraction(0),
                req.describe(),
            )
        )
        best = None
    horizon = ctx.horizon
    decls = req.declarations
    spend_slots = np.asarray(slots, dtype=np.int64)
    w_b_all = np.array([ctx.window(d.w_back) for d in decls], np.int64)
    w_f_all = np.array([ctx.window(d.w_fwd) for d in decls], np.int64)
    # Candidate anchors: window sums only change where a spend enters or leaves a window, so
    # every distinct (spends, bound) window and every maximum shows up at one of these slots,
    # with its smallest anchor among them. O(spends x declarations), not O(horizon).
    candidates = _distinct(
        np.concatenate(
            [
                np.array(req.slots, np.int64),
                spend_slots,
                spend_slots + 1,
                (spend_slots[:, None] + w_b_all[None, :]).ravel(),
                (spend_slots[:, None] - w_f_all[None, :] + 1).ravel(),
            ]
        )
    )
    t = candidates[(candidates >= first_decl) & (candidates <= horizon)]
    if not len(t):
        return best
    decl_idx = np.searchsorted(np.array(req.slots, np.int64), t, side="right") - 1
    own = ctx.cum[lo : hi + 2] - ctx.cum[lo]  # this representative's prefix sums

    def window_sums(first: Arr, last: Arr) -> tuple[Arr, Arr, Arr]:
        i0 = np.searchsorted(spend_slots, first, side="left")
        i1 = np.searchsorted(spend_slots, last, side="right")
        return own[i1] - own[i0], i0, i1

    e_b = [d.eps_back for d in decls]
    e_f = [d.eps_fwd for d in decls]
    seen: set[tuple[str, int, int, Fraction]] = set()
    for kind, first, last, bounds in (
        ("backward", t - w_b_all[decl_idx] + 1, t, e_b),
        ("forward", t, np.minimum(t + w_f_all[decl_idx] - 1, horizon), e_f),
    ):
        sums, i0, i1 = window_sums(first, last)
        bound_num = np.array([ctx.num(e) for e in bounds], dtype=ctx.dtype)[decl_idx]
        for k in _distinct(decl_idx).tolist():  # utilization: the largest sum per declaration
            top = ctx.frac(sums[decl_idx == k].max())
            share = ratio(top, bounds[k])
            best = None if best is None or share is None else max(best, share)
        for i in np.flatnonzero(sums > bound_num).tolist():  # ascending anchors
            spends = ctx.spends(lo + int(i0[i]), lo + int(i1[i]) - 1)
            bound = bounds[int(decl_idx[i])]
            key = (kind, spends[0][0], spends[-1][0], bound)
            if key in seen:
                continue
            seen.add(key)
            out.append(
                Violation.from_spends(
                    kind, users, spends, ctx.frac(sums[i]), bound, req.describe(), anchor=int(t[i])
                )
            )
    return best


def _check_evidence(cols: LedgerColumns) -> tuple[EvidenceFailure, ...]:
    has = np.flatnonzero(cols.evidence >= 0)
    if not len(has):
        return ()
    width = len(cols.evidences) + 1
    pair = cols.amount[has].astype(np.int64) * width + cols.evidence[has]
    uniq, first, counts = np.unique(pair, return_index=True, return_counts=True)
    failures = []
    for p, f, c in zip(uniq.tolist(), first.tolist(), counts.tolist(), strict=True):
        amount = cols.amounts[p // width]
        evidence = cols.evidences[p % width]
        result = certify_cost(evidence, amount)
        if not result.ok:
            row = int(has[f])
            failures.append(
                EvidenceFailure(
                    evidence, amount, result.lower, result.upper, c, row, int(cols.slot[row])
                )
            )
    return tuple(sorted(failures, key=lambda e: e.first_row))
