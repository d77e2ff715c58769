"""The batch checker: ledger + population -> exact verdict, vectorized.

Exactness: every amount and bound is scaled to an integer numerator over one common denominator L.
When all sums fit comfortably in int64 the work runs on int64 arrays; otherwise the same code runs on
arrays of Python integers (exact, slower). No float is involved anywhere.

Speed: users whose spends are provably identical (no direct charges, the same groups, the same
requirement) are checked once (a *representative*); fixed and whole-stream requirements are checked
with sorted-array searches, dynamic ones per representative over dense per-slot arrays.
Semantics of the reported violations: see `verifier.verdict`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from accounting.evidence import certify_cost
from accounting.ledger import Ledger, LedgerColumns
from accounting.population import Population
from accounting.requirements import Dynamic, Fixed, Requirement, WholeStream
from verifier.verdict import EvidenceFailure, Verdict, Violation

__all__ = ["check"]

Arr = npt.NDArray[Any]
_INT64_SAFE = 2**62


class _Reps:
    """Representatives: classes of users with provably identical spends and requirement."""

    def __init__(self, cols: LedgerColumns, population: Population) -> None:
        n_users = len(cols.users)
        direct = np.zeros(n_users, dtype=bool)
        direct[cols.subject[cols.subject >= 0]] = True
        groups_of: list[list[int]] = [[] for _ in range(n_users)]
        for g, members in enumerate(cols.group_members):
            for m in members.tolist():
                groups_of[m].append(g)
        index: dict[tuple[Requirement | None, tuple[int, ...]], int] = {}
        self.members: list[list[str]] = []
        self.requirement: list[Requirement | None] = []
        rep_of = np.empty(n_users, dtype=np.int64)
        for u, name in enumerate(cols.users):
            req = population.get(name)
            if direct[u]:
                rep = len(self.members)
                self.members.append([])
                self.requirement.append(req)
            else:
                key = (req, tuple(groups_of[u]))
                found = index.get(key)
                if found is None:
                    found = len(self.members)
                    index[key] = found
                    self.members.append([])
                    self.requirement.append(req)
                rep = found
            rep_of[u] = rep
            self.members[rep].append(name)
        self.rep_of = rep_of
        self.group_reps = [np.unique(rep_of[m]) if len(m) else m for m in cols.group_members]

    def __len__(self) -> int:
        return len(self.members)


def _expand(cols: LedgerColumns, reps: _Reps) -> tuple[Arr, Arr]:
    """Per-representative rows: (representative, row index into the ledger)."""
    is_direct = cols.subject >= 0
    direct_rows = np.flatnonzero(is_direct)
    rep_parts = [reps.rep_of[cols.subject[direct_rows]]]
    row_parts = [direct_rows]
    group_rows = np.flatnonzero(~is_direct)
    if len(group_rows):
        gidx = -cols.subject[group_rows] - 1
        order = np.argsort(gidx, kind="stable")
        group_rows, gidx = group_rows[order], gidx[order]
        bounds = np.flatnonzero(np.diff(gidx)) + 1
        for chunk in np.split(group_rows, bounds):
            g = int(-cols.subject[chunk[0]] - 1)
            g_reps = reps.group_reps[g]
            rep_parts.append(np.repeat(g_reps, len(chunk)))
            row_parts.append(np.tile(chunk, len(g_reps)))
    return np.concatenate(rep_parts), np.concatenate(row_parts)


def _bounds_of(req: Requirement | None) -> list[Fraction]:
    if isinstance(req, Fixed | WholeStream):
        return [req.eps]
    if isinstance(req, Dynamic):
        return [b for d in req.declarations for b in (d.eps_back, d.eps_fwd)]
    return []


def check(
    ledger: Ledger,
    population: Population,
    *,
    horizon: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Verdict:
    """Check every evidence cost and every window of every charged user; see `verifier.verdict`."""
    say = progress or (lambda _msg: None)
    cols = ledger.columns()
    say("evidence")
    evidence_failures = _check_evidence(cols)
    say("representatives")
    reps = _Reps(cols, population)
    rep_idx, rows = _expand(cols, reps)
    sizes = np.array([len(m) for m in cols.group_members] + [0], dtype=np.int64)
    group_rows = cols.subject[cols.subject < 0]
    per_user = int(np.count_nonzero(cols.subject >= 0) + sizes[-group_rows - 1].sum())

    # Common denominator over amounts and bounds; integer numerators.
    denominators = {a.denominator for a in cols.amounts}
    for req in reps.requirement:
        denominators.update(b.denominator for b in _bounds_of(req))
    lcd = 1
    for d in denominators:
        lcd = lcd * d // math.gcd(lcd, d)
    numerators = [int(a * lcd) for a in cols.amounts]
    biggest = max(
        numerators + [int(b * lcd) for r in reps.requirement for b in _bounds_of(r)] + [1]
    )
    fits = biggest * (len(rows) + 1) < _INT64_SAFE
    dtype: Any = np.int64 if fits else object
    amount_num = np.array(numerators or [0], dtype=dtype)

    slots = cols.slot[rows]
    last_slot = int(cols.slot.max()) if len(cols.slot) else 0
    horizon_t = max(last_slot, horizon or 0)
    modulus = horizon_t + 2
    say("sorting")
    key = rep_idx * modulus + slots
    order = np.argsort(key, kind="stable")
    key = key[order]
    vals = amount_num[cols.amount[rows[order]]] if len(rows) else np.zeros(0, dtype=dtype)
    if len(key):
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        key = key[starts]
        vals = np.add.reduceat(vals, starts)
        nonzero = vals != 0
        key, vals = key[nonzero], vals[nonzero]
    rep = key // modulus
    slot = key % modulus
    cum = np.concatenate((np.zeros(1, dtype=dtype), np.cumsum(vals, dtype=dtype)))

    ctx = _Ctx(reps, rep, slot, vals, cum, key, modulus, lcd, dtype, horizon_t)
    say("windows")
    violations: list[Violation] = []
    rep_util: list[Fraction | None] = [Fraction(0)] * len(reps)
    kinds = np.array([_kind(r) for r in reps.requirement] or [0], dtype=np.int8)
    row_kind = kinds[rep] if len(rep) else np.zeros(0, np.int8)
    _check_fixed(ctx, np.flatnonzero(row_kind == 0), violations, rep_util)
    _check_whole(ctx, np.flatnonzero(row_kind == 1), violations, rep_util)
    for r in np.unique(rep[row_kind >= 2]).tolist():
        _check_dynamic_or_unregistered(ctx, int(r), violations, rep_util)

    user_util: dict[str, Fraction | None] = {}
    class_util: dict[str, Fraction | None] = {}
    for r, members in enumerate(reps.members):
        u = rep_util[r]
        for name in members:
            user_util[name] = u
        cname = (
            population.class_of(members[0]).name if members[0] in population else ("unregistered")
        )
        prev = class_util.get(cname, Fraction(0))
        class_util[cname] = None if (u is None or prev is None) else max(prev, u)
    return Verdict(
        violations=tuple(sorted(violations, key=Violation.sort_key)),
        evidence_failures=evidence_failures,
        user_utilization=user_util,
        class_utilization=class_util,
        horizon=horizon_t,
        per_user_charges=per_user,
    )


def _kind(req: Requirement | None) -> int:
    if isinstance(req, Fixed):
        return 0
    if isinstance(req, WholeStream):
        return 1
    return 2


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
    ) -> None:
        self.reps, self.rep, self.slot, self.vals, self.cum = reps, rep, slot, vals, cum
        self.key, self.modulus, self.lcd, self.dtype, self.horizon = (
            key,
            modulus,
            lcd,
            dtype,
            horizon,
        )

    def frac(self, numerator: Any) -> Fraction:
        return Fraction(int(numerator), self.lcd)

    def spends(self, lo: int, hi: int) -> tuple[tuple[int, Fraction], ...]:
        """Rows lo..hi inclusive as (slot, amount)."""
        return tuple(
            (int(s), self.frac(v))
            for s, v in zip(
                self.slot[lo : hi + 1].tolist(), self.vals[lo : hi + 1].tolist(), strict=True
            )
        )

    def users(self, r: int) -> tuple[str, ...]:
        return tuple(sorted(self.reps.members[r]))

    def rep_segments(self, rows: Arr) -> tuple[Arr, Arr]:
        """Start offsets (into ``rows``) of each representative's run, and the reps."""
        if not len(rows):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        r = self.rep[rows]
        starts = np.flatnonzero(np.concatenate(([True], r[1:] != r[:-1])))
        return starts, r[starts]


def _check_fixed(ctx: _Ctx, rows: Arr, out: list[Violation], util: list[Fraction | None]) -> None:
    if not len(rows):
        return
    reqs = ctx.reps.requirement
    w_rep = np.array([r.w if isinstance(r, Fixed) else 1 for r in reqs], dtype=np.int64)
    eps_rep = np.array(
        [int(r.eps * ctx.lcd) if isinstance(r, Fixed) else 0 for r in reqs], dtype=ctx.dtype
    )
    r = ctx.rep[rows]
    s = ctx.slot[rows]
    w = w_rep[r]
    eps = eps_rep[r]
    # First row of the window of w slots ending at this row's slot.
    lo = np.searchsorted(ctx.key, r * ctx.modulus + np.maximum(s - w, 0), side="right")
    wsum = ctx.cum[rows + 1] - ctx.cum[lo]
    starts, seg_reps = ctx.rep_segments(rows)
    maxima = np.maximum.reduceat(wsum, starts)
    for rr, m in zip(seg_reps.tolist(), maxima.tolist(), strict=True):
        req = reqs[rr]
        assert isinstance(req, Fixed)
        util[rr] = _ratio(ctx.frac(m), req.eps)
    bad = np.flatnonzero(wsum > eps)
    if not len(bad):
        return
    ends = rows[bad]
    target = ctx.cum[ends + 1] - eps[bad]
    first = np.searchsorted(ctx.cum, target, side="left") - 1  # largest k with cum[k] < target
    _, keep = np.unique(first, return_index=True)  # the earliest end for each start is minimal
    for i, j in zip(first[keep].tolist(), ends[keep].tolist(), strict=True):
        rr = int(ctx.rep[j])
        req = reqs[rr]
        assert isinstance(req, Fixed)
        spends = ctx.spends(i, j)
        out.append(
            Violation(
                "fixed",
                ctx.users(rr),
                spends[0][0],
                spends[-1][0],
                spends[-1][0],
                spends,
                ctx.frac(ctx.cum[j + 1] - ctx.cum[i]),
                req.eps,
                req.describe(),
            )
        )


def _check_whole(ctx: _Ctx, rows: Arr, out: list[Violation], util: list[Fraction | None]) -> None:
    if not len(rows):
        return
    starts, seg_reps = ctx.rep_segments(rows)
    ends = np.append(starts[1:], len(rows)) - 1
    for st, en, rr in zip(starts.tolist(), ends.tolist(), seg_reps.tolist(), strict=True):
        req = ctx.reps.requirement[rr]
        assert isinstance(req, WholeStream)
        i, j = int(rows[st]), int(rows[en])
        total = ctx.frac(ctx.cum[j + 1] - ctx.cum[i])
        util[rr] = _ratio(total, req.eps)
        if total > req.eps:
            spends = ctx.spends(i, j)
            out.append(
                Violation(
                    "whole-stream",
                    ctx.users(rr),
                    spends[0][0],
                    spends[-1][0],
                    0,
                    spends,
                    total,
                    req.eps,
                    req.describe(),
                )
            )


def _ratio(total: Fraction, bound: Fraction) -> Fraction | None:
    if bound == 0:
        return Fraction(0) if total == 0 else None
    return total / bound


def _check_dynamic_or_unregistered(
    ctx: _Ctx, r: int, out: list[Violation], util: list[Fraction | None]
) -> None:
    lo = int(np.searchsorted(ctx.key, r * ctx.modulus, side="left"))
    hi = int(np.searchsorted(ctx.key, (r + 1) * ctx.modulus, side="left")) - 1
    req = ctx.reps.requirement[r]
    users = ctx.users(r)
    slots = ctx.slot[lo : hi + 1]
    if not isinstance(req, Dynamic):
        spends = ctx.spends(lo, hi)
        total = ctx.frac(ctx.cum[hi + 1] - ctx.cum[lo])
        out.append(
            Violation(
                "unregistered",
                users,
                spends[0][0],
                spends[-1][0],
                spends[-1][0],
                spends,
                total,
                Fraction(0),
                "no requirement",
            )
        )
        util[r] = None
        return
    best: Fraction | None = Fraction(0)
    first_decl = req.declarations[0].slot
    early = int(np.searchsorted(slots, first_decl, side="left"))
    if early > 0:
        spends = ctx.spends(lo, lo + early - 1)
        out.append(
            Violation(
                "unregistered",
                users,
                spends[0][0],
                spends[-1][0],
                spends[-1][0],
                spends,
                ctx.frac(ctx.cum[lo + early] - ctx.cum[lo]),
                Fraction(0),
                req.describe(),
            )
        )
        best = None
    horizon = ctx.horizon
    dense = np.zeros(horizon + 1, dtype=ctx.dtype)
    dense[slots] = ctx.vals[lo : hi + 1]
    prefix = np.cumsum(dense, dtype=ctx.dtype)  # prefix[t] = spends over slots 1..t
    t = np.arange(first_decl, horizon + 1, dtype=np.int64)
    if not len(t):
        util[r] = best
        return
    decl_idx = np.searchsorted(np.array(req.slots), t, side="right") - 1
    w_b = np.array([d.w_back for d in req.declarations], np.int64)[decl_idx]
    w_f = np.array([d.w_fwd for d in req.declarations], np.int64)[decl_idx]
    e_b = [d.eps_back for d in req.declarations]
    e_f = [d.eps_fwd for d in req.declarations]
    eb_num = np.array([int(e * ctx.lcd) for e in e_b], dtype=ctx.dtype)[decl_idx]
    ef_num = np.array([int(e * ctx.lcd) for e in e_f], dtype=ctx.dtype)[decl_idx]
    b_lo = np.maximum(t - w_b, 0)
    b_sum = prefix[t] - prefix[b_lo]
    f_hi = np.minimum(t + w_f - 1, horizon)
    f_sum = prefix[f_hi] - prefix[t - 1]
    seen: set[tuple[str, int, int, Fraction]] = set()
    for kind, sums, bound_num, a_arr, b_arr, bounds in (
        ("backward", b_sum, eb_num, b_lo + 1, t, e_b),
        ("forward", f_sum, ef_num, t, f_hi, e_f),
    ):
        # Utilization: the largest sum/bound, compared exactly per declaration segment.
        for k in np.unique(decl_idx).tolist():
            seg = decl_idx == k
            top = ctx.frac(sums[seg].max())
            best = None if best is None else _max_opt(best, _ratio(top, bounds[k]))
        for i in np.flatnonzero(sums > bound_num).tolist():
            a, b = int(a_arr[i]), int(b_arr[i])
            i0 = lo + int(np.searchsorted(slots, a, side="left"))
            i1 = lo + int(np.searchsorted(slots, b, side="right")) - 1
            spends = ctx.spends(i0, i1)
            bound = bounds[int(decl_idx[i])]
            key = (kind, spends[0][0], spends[-1][0], bound)
            if key in seen:
                continue
            seen.add(key)
            out.append(
                Violation(
                    kind,
                    users,
                    spends[0][0],
                    spends[-1][0],
                    int(t[i]),
                    spends,
                    ctx.frac(sums[i]),
                    bound,
                    req.describe(),
                )
            )
    util[r] = best


def _max_opt(a: Fraction, b: Fraction | None) -> Fraction | None:
    return None if b is None else max(a, b)


def _check_evidence(cols: LedgerColumns) -> tuple[EvidenceFailure, ...]:
    has = np.flatnonzero(cols.evidence >= 0)
    if not len(has):
        return ()
    pair = cols.amount[has].astype(np.int64) * (len(cols.evidences) + 1) + cols.evidence[has]
    uniq, first, counts = np.unique(pair, return_index=True, return_counts=True)
    failures = []
    for p, f, c in zip(uniq.tolist(), first.tolist(), counts.tolist(), strict=True):
        amount = cols.amounts[p // (len(cols.evidences) + 1)]
        evidence = cols.evidences[p % (len(cols.evidences) + 1)]
        result = certify_cost(evidence, amount)
        if not result.ok:
            row = int(has[f])
            failures.append(
                EvidenceFailure(
                    evidence, amount, result.lower, result.upper, c, row, int(cols.slot[row])
                )
            )
    return tuple(sorted(failures, key=lambda e: e.first_row))
