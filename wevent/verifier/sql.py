"""The batch audit as SQL: the same verdict as `wevent.verifier.check`, computed by a SQL engine over
Parquet ledger files (DuckDB embedded and out-of-core, or Spark), exactly.

Exact arithmetic. Budgets are rationals; SQL engines have no rational type and their DOUBLE
would make a verdict depend on rounding. So, before any SQL runs, the distinct amount strings of
the ledger (``SELECT DISTINCT epsilon``: a handful in practice) and the bounds of every
requirement are parsed in Python to `fractions.Fraction` and brought to one common denominator
L (their least common multiple). Every amount becomes the integer numerator ``a * L``, every
bound ``eps * L``. These integers are shipped to the engine as a small lookup table
(``BIGINT`` when every possible sum fits in 63 bits, else ``DECIMAL(38,0)``: scale 0, i.e. a
128-bit integer, in both DuckDB and Spark) and joined to the charges; all window sums are then
sums of integers, and every comparison ``sum > bound`` is an integer comparison, exactly the
comparison of the rationals ``sum/L > bound/L``. No float is ever
involved. Before running we prove that no sum can leave the type: every sum is at most
(number of charges) x (largest numerator), and we refuse (`EngineError`, pointing to the numpy
engine, which falls back to Python integers) unless that is below 10^37 (and we use BIGINT only
when it is below 2^63). Both engines also raise on integer and DECIMAL overflow (DuckDB always,
Spark with ``spark.sql.ansi.enabled``), a second net.

What runs in SQL (the O(charges) work, out of core on DuckDB): validation of the rows, users'
*representatives* (users with no direct charge, the same requirement class and the same set of
groups have identical spends; the same partition `wevent.verifier.check` uses, formed by joins and plain
aggregates that spill, see `_representatives`), the charges expanded to representatives and
summed per (representative, slot), every representative's largest fixed window sum and
whole-stream total (sliding window frames, or on Spark one running total over "enter at slot,
leave at slot + w" events: `_window_tops`), and the screen: a fixed or whole-stream
representative whose largest sum is within its bound is compliant and its utilization is that
sum over the bound.

What runs in Python (small): the representatives that fail the screen, plus every dynamic and
unregistered representative with a positive spend, are fetched as their per-slot sums and checked
by `wevent.verifier.check` itself on a ledger of just those representatives, with the same horizon. Its
violations are therefore the reference's violations, not a re-implementation; the memory this
needs grows with the violators (and dynamic users), not with the ledger. Evidence records are
certified per distinct (amount, evidence) pair in one streaming pass over the files (pyarrow
batches), with the same first row and count the numpy checker reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from wevent.accounting.budget import Budget, BudgetError, check_common_denominator, shown
from wevent.accounting.evidence import Evidence, certify_cost, evidence_from_json
from wevent.accounting.formats import FormatError
from wevent.accounting.ledger import Ledger
from wevent.accounting.parquet_rows import MEMBERSHIP_ROW
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, Requirement, WholeStream, requirement_bounds
from wevent.errors import EngineError

# The requirement kinds are the batch checker's own, so the SQL screen classifies users alike.
from wevent.verifier.check import (
    KIND_DYNAMIC,
    KIND_FIXED,
    KIND_NONE,
    KIND_WHOLE,
    check,
    checked_horizon,
    requirement_kind,
)
from wevent.verifier.verdict import EvidenceFailure, Verdict, Violation, ratio

__all__ = ["EngineError", "SqlBackend", "SqlDetails", "sql_audit"]

_EXACT = "DECIMAL(38,0)"
_SAFE = 10**37


class SqlBackend(Protocol):
    """What the shared SQL audit needs from an engine: a dialect and a way to run statements."""

    name: str
    #: True when the engine computes a sliding ``RANGE`` window frame incrementally (DuckDB,
    #: with segment trees); False when it re-aggregates every frame (Spark), so that window
    #: sums run as one running total over enter/leave events instead (`_window_tops`).
    sliding_frames: bool

    def load(self, view: str, files: Sequence[Path]) -> None:
        """Create ``view(src INT, slot BIGINT, usr STRING, grp STRING, eps STRING)`` over the
        files' rows (``src``: the file's position in ``files``; membership rows have a null
        slot; empty strings may stand for null)."""

    def table(
        self, name: str, columns: dict[str, list[Any]], exact: Sequence[str], text: Sequence[str]
    ) -> None:
        """Create a small table from Python columns: ``text`` columns hold strings, ``exact``
        columns integer strings that become DECIMAL(38,0), the others integers (BIGINT). The
        types are declared, never guessed from values: an empty column keeps its type."""

    def materialize(self, name: str, select: str) -> None:
        """Create (or replace) ``name`` as the result of ``select``, stored for reuse."""

    def view(self, name: str, select: str) -> None:
        """Create (or replace) ``name`` as a view of ``select`` (recomputed on each use)."""

    def rows(self, select: str) -> list[tuple[Any, ...]]:
        """Run a query and return its rows."""

    def hash64(self, expr: str) -> str:
        """A deterministic 64-bit integer hash of the string ``expr`` (any such hash is exact
        here: `_representatives` checks every collision)."""

    def sorted_concat(self, expr: str) -> str:
        """An aggregate expression: the values of ``expr`` sorted and joined with ','."""

    def close(self) -> None:
        """Release the engine's resources."""


@dataclass(frozen=True)
class SqlDetails:
    """What the SQL pass learned beyond the verdict, for reports: per-class totals of per-user
    charges per slot, and the per-slot spends of chosen users."""

    class_timeline: dict[str, tuple[tuple[int, Fraction], ...]]
    user_spends: dict[str, tuple[tuple[int, Fraction], ...]]
    file_charges: tuple[int, ...]  # the charge records of each audited file, in order


def _lcm(values: Sequence[int]) -> int:
    out = 1
    for d in values:  # bounded as the numpy checker bounds it (WEVENT_MAX_DIGITS)
        out = check_common_denominator(out * d // math.gcd(out, d), "ledger")
    return out


def sql_audit(
    backend: SqlBackend,
    files: Sequence[Path],
    population: Population,
    *,
    horizon: int | None = None,
    progress: Callable[[str], None] | None = None,
    detail_users: int = 5,
    shown_as: Sequence[Path] | None = None,
) -> tuple[Verdict, SqlDetails]:
    """Audit the ledger made of ``files`` (Parquet, in order) with ``backend``; see the module
    docstring. The verdict equals ``wevent.verifier.check`` on the same ledger. ``shown_as``:
    the names errors give the files (the user's, where ``files`` are converted copies)."""
    say = progress or (lambda _s: None)
    b = backend
    say("loading")
    b.load("raw", files)
    b.view("charges", "SELECT slot, usr, grp, eps FROM raw WHERE slot IS NOT NULL")
    # Integer ids for groups (those with membership rows) and users: the memberships, up to
    # 10^8 rows, are joined and aggregated as integer pairs. DuckDB spills those; a DISTINCT over
    # 10^8 (group, user) string pairs does not fit in 1 GB.
    b.materialize(
        "gids",
        """SELECT grp, DENSE_RANK() OVER (ORDER BY grp) AS gid
           FROM (SELECT DISTINCT grp FROM raw WHERE slot IS NULL AND grp IS NOT NULL) t""",
    )
    b.materialize(
        "uids",
        """SELECT usr, DENSE_RANK() OVER (ORDER BY usr) AS uid
           FROM (SELECT DISTINCT usr FROM raw WHERE usr IS NOT NULL) t""",
    )
    # Membership rows as integer pairs counted per file: a pair listed twice in one file is a
    # malformed ledger (rejected in `_validate`, as the numpy reader does); the same group
    # defined again in a later file (each text file lists the groups it charges) is one group.
    b.materialize(
        "member_rows",
        """SELECT r.src, g.gid, u.uid, COUNT(*) AS n FROM raw r
           JOIN gids g ON r.grp = g.grp JOIN uids u ON r.usr = u.usr WHERE r.slot IS NULL
           GROUP BY r.src, g.gid, u.uid""",
    )
    b.materialize(
        "members",
        "SELECT gid, uid FROM member_rows"
        if len(files) == 1
        else "SELECT DISTINCT gid, uid FROM member_rows",
    )
    given = files if shown_as is None else shown_as  # the user's files, for messages
    _validate(b, given)
    say("amounts")
    # The amounts that reach someone: a charge of a group without members charges nobody, so
    # its amount (however large) enters no sum and no common denominator, as in numpy.
    b.view(
        "reaching",
        """SELECT eps FROM charges c WHERE c.grp IS NULL OR c.grp IN
             (SELECT g.grp FROM gids g JOIN (SELECT DISTINCT gid FROM members) m ON g.gid = m.gid)""",
    )
    amount_strings = [str(r[0]) for r in b.rows("SELECT DISTINCT eps FROM reaching")]
    try:
        amounts = {s: Budget(s, what="epsilon") for s in amount_strings}
    except BudgetError as exc:
        raise FormatError(f"{given[0]}: {exc}") from None
    classes = population.classes
    n_classes = len(classes)
    reqs: list[Requirement | None] = [c.requirement for c in classes] + [None]
    names = [c.name for c in classes] + ["unregistered"]
    bounds = [x for r in reqs if r is not None for x in requirement_bounds(r)]
    lcd = _lcm([a.denominator for a in amounts.values()] + [x.denominator for x in bounds])
    numerators = {s: int(a * lcd) for s, a in amounts.items()}
    (last_slot,) = b.rows("SELECT MAX(slot) FROM charges")[0]
    (n_charges,) = b.rows("SELECT COUNT(*) FROM reaching")[0]
    n_charges = int(n_charges)
    biggest = max([*numerators.values(), *(int(x * lcd) for x in bounds), 1])
    if biggest * (n_charges + 1) >= _SAFE:
        raise EngineError(
            f"exact sums of this ledger need more than 37 decimal digits over the common "
            f"denominator {shown(lcd)}; use --engine numpy (Python integers)"
        )
    h = checked_horizon(int(last_slot or 0), horizon)
    # Sums fit in a 64-bit integer on most ledgers; BIGINT arithmetic is several times faster
    # than DECIMAL(38,0) in Spark (which computes the latter with Java BigDecimal).
    narrow = bool(numerators) and biggest * (n_charges + 1) < 2**63
    sum_type = "BIGINT" if narrow else _EXACT
    if narrow:
        b.table("amounts", {"eps": list(numerators), "num": list(numerators.values())}, [], ["eps"])
    else:
        b.table(
            "amounts",
            {"eps": list(numerators), "num": [str(v) for v in numerators.values()]},
            ["num"],
            ["eps"],
        )
    b.table(
        "classes",
        {
            "cls": list(range(n_classes + 1)),
            "kind": [requirement_kind(r) for r in reqs],
            "w": [min(r.w, h + 1) if isinstance(r, Fixed) else 0 for r in reqs],
            "bound": [
                str(int(r.eps * lcd)) if isinstance(r, Fixed | WholeStream) else "0" for r in reqs
            ],
        },
        ["bound"],
        [],
    )
    users = [u for c in classes for u in c.members]
    b.table(
        "reqs",
        {"usr": users, "cls": [c.index for c in classes for _ in c.members]},
        [],
        ["usr"],
    )

    say("representatives")
    _representatives(b, n_classes)
    say("sums per slot")
    b.materialize(
        "agg",
        f"""
        SELECT x.rep, x.slot, CAST(SUM(x.num) AS {sum_type}) AS v FROM (
            SELECT u.rep, c.slot, a.num FROM charges c
                JOIN user_rep u ON c.usr = u.usr JOIN amounts a ON c.eps = a.eps
            UNION ALL
            SELECT g.rep, c.slot, a.num FROM charges c JOIN gids i ON c.grp = i.grp
                JOIN grp_reps g ON i.gid = g.gid JOIN amounts a ON c.eps = a.eps
        ) x GROUP BY x.rep, x.slot
        """,
    )

    say("windows")
    _window_tops(b, reqs, n_classes, h)
    say("screening")
    rep_rows = b.rows(
        """SELECT r.rep, r.cls, r.size, k.kind, k.bound, CAST(COALESCE(t.top, 0) AS STRING)
           FROM reps r JOIN classes k ON r.cls = k.cls LEFT JOIN tops t ON r.rep = t.rep
           ORDER BY r.rep"""
    )
    n_reps = len(rep_rows)
    rep_cls = [0] * n_reps
    util: list[Fraction | None] = [Fraction(0)] * n_reps
    candidates: list[int] = []
    shares: dict[tuple[int, int], Fraction | None] = {}
    for rep, cls, _size, kind, bound, top_s in rep_rows:
        rep, cls, kind, top, bound_i = int(rep), int(cls), int(kind), int(top_s), int(bound)
        rep_cls[rep] = cls
        if kind in (KIND_FIXED, KIND_WHOLE):
            if top > bound:
                candidates.append(rep)
            else:
                share = shares.get((top, bound_i), Fraction(-1))
                if share is not None and share < 0:
                    share = ratio(Fraction(top, lcd), Fraction(bound_i, lcd))
                    shares[(top, bound_i)] = share
                util[rep] = share
        elif top > 0:
            candidates.append(rep)

    say("users")
    user_rows = b.rows("SELECT usr, rep FROM user_rep")
    members_of: dict[int, list[str]] = {}
    user_rep: dict[str, int] = {}
    for usr, rep in user_rows:
        user_rep[str(usr)] = int(rep)
        members_of.setdefault(int(rep), []).append(str(usr))
    direct_users = {
        str(r[0]) for r in b.rows("SELECT u.usr FROM direct d JOIN uids u ON d.uid = u.uid")
    }

    violations: tuple[Violation, ...] = ()
    if candidates:
        say("exact check of candidates")
        spends = _rep_spends(b, candidates, "cand")
        sub = _candidate_ledger(candidates, spends, members_of, direct_users, lcd)
        sub_pop = Population(
            {
                u: r
                for rep in candidates
                for u in members_of[rep]
                if (r := population.get(u)) is not None
            }
        )
        sub_verdict = check(sub, sub_pop, horizon=h)
        violations = sub_verdict.violations
        for rep in candidates:
            util[rep] = sub_verdict.user_utilization[members_of[rep][0]]

    class_util: dict[str, Fraction | None] = {}
    for rep in range(n_reps):
        name = names[rep_cls[rep]]
        prev = class_util.get(name, Fraction(0))
        value = util[rep]
        class_util[name] = None if (value is None or prev is None) else max(prev, value)

    say("evidence")
    scanned = evidence_scan(files)
    (direct_n,) = b.rows("SELECT COUNT(*) FROM charges WHERE usr IS NOT NULL")[0]
    (group_n,) = b.rows(
        """SELECT COALESCE(SUM(s.size), 0) FROM charges c
           JOIN gids i ON c.grp = i.grp
           JOIN (SELECT gid, COUNT(*) AS size FROM members GROUP BY gid) s ON i.gid = s.gid"""
    )[0]
    verdict = Verdict(
        violations=tuple(sorted(violations, key=Violation.sort_key)),
        evidence_failures=scanned.failures,
        user_utilization=_RepUtilization(user_rep, util),
        class_utilization=class_util,
        horizon=h,
        per_user_charges=int(direct_n) + int(group_n),
        charges=sum(scanned.file_charges),
        evidence_charges=scanned.with_evidence,
    )

    say("report data")
    per_user = int(direct_n) + int(group_n)
    timeline_rows = (
        []
        if biggest * (per_user + 1) >= _SAFE
        else b.rows(
            f"""SELECT r.cls, g.slot, CAST(SUM(CAST(g.v AS {_EXACT}) * r.size) AS STRING)
           FROM agg g
           JOIN reps r ON g.rep = r.rep GROUP BY r.cls, g.slot ORDER BY r.cls, g.slot"""
        )
    )
    timeline: dict[str, list[tuple[int, Fraction]]] = {}
    for cls, slot, total in timeline_rows:
        if int(total) == 0:
            continue
        timeline.setdefault(names[int(cls)], []).append((int(slot), Fraction(int(total), lcd)))
    chosen = tightest_users(verdict, detail_users, population)
    chosen_reps = sorted({user_rep[u] for u in chosen})
    rep_spends = _rep_spends(b, chosen_reps, "chosen") if chosen_reps else {}
    details = SqlDetails(
        {k: tuple(v) for k, v in timeline.items()},
        {
            u: tuple((s, Fraction(v, lcd)) for s, v in rep_spends.get(user_rep[u], []))
            for u in chosen
        },
        scanned.file_charges,
    )
    return verdict, details


def _window_tops(b: SqlBackend, reqs: Sequence[Requirement | None], n_classes: int, h: int) -> None:
    """Materialize ``tops(rep, top)``: each representative's largest fixed-window sum, or its
    total for whole-stream, dynamic and unregistered classes (a window's largest sum is
    attained at a window ending at a spend).

    Two equal formulations, by engine. With incremental sliding frames (DuckDB): one
    ``SUM(v) OVER (PARTITION BY rep ORDER BY slot RANGE BETWEEN w-1 PRECEDING AND CURRENT ROW)``
    per distinct w. Otherwise (Spark, whose sliding frames cost O(rows x w)): one running total
    over events. A per-slot sum v enters at its slot and, for a fixed window w, leaves again at
    slot + w; ordered by slot with the leaving events first, the running total after a slot's
    entering event is the sum of the w slots ending there (nothing leaves for the other kinds:
    the total so far). Sums are never negative, so the largest running total is the largest
    window sum. A running total (ROWS UNBOUNDED PRECEDING) is O(rows) in every engine, but it
    sorts twice the rows, which made DuckDB 2x slower at 10^8 charges.
    """
    if not b.sliding_frames:
        b.materialize(
            "tops",
            f"""
            SELECT rep, MAX(run) AS top FROM (
                SELECT rep, SUM(d) OVER (PARTITION BY rep ORDER BY slot, ord
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run
                FROM (
                    SELECT rep, slot, 1 AS ord, v AS d FROM agg
                    UNION ALL
                    SELECT g.rep, g.slot + k.w AS slot, 0 AS ord, -g.v AS d
                    FROM agg g JOIN reps r ON g.rep = r.rep JOIN classes k ON r.cls = k.cls
                    WHERE k.kind = {KIND_FIXED} AND g.slot + k.w <= {h}
                ) e
            ) t GROUP BY rep
            """,
        )
        return
    window_sizes = sorted(
        {min(r.w, h + 1) for c, r in enumerate(reqs) if isinstance(r, Fixed) and c < n_classes}
    )
    parts = [
        f"""SELECT rep, MAX(ws) AS top FROM (
              SELECT g.rep, SUM(g.v) OVER (PARTITION BY g.rep ORDER BY g.slot
                     RANGE BETWEEN {w - 1} PRECEDING AND CURRENT ROW) AS ws
              FROM agg g JOIN reps r ON g.rep = r.rep JOIN classes k ON r.cls = k.cls
              WHERE k.kind = {KIND_FIXED} AND k.w = {w}) t GROUP BY rep"""
        for w in window_sizes
    ]
    parts.append(
        f"""SELECT g.rep, SUM(g.v) AS top
            FROM agg g JOIN reps r ON g.rep = r.rep JOIN classes k ON r.cls = k.cls
            WHERE k.kind IN ({KIND_WHOLE}, {KIND_DYNAMIC}, {KIND_NONE}) GROUP BY g.rep"""
    )
    b.materialize("tops", " UNION ALL ".join(f"({p})" for p in parts))


def _representatives(b: SqlBackend, n_classes: int) -> None:
    """Materialize ``user_rep(usr, uid, cls, rep)``, ``reps(rep, cls, size, canon)`` and
    ``grp_reps(gid, rep)``: the partition of users into representatives, exactly the one
    `wevent.verifier.check` forms (violations name a representative's users together).

    Users with the same requirement class and the same set of groups, and no direct charge,
    share a representative. Comparing sets by sorting each user's list of groups makes one
    aggregate that holds every list (about 100 groups per user in a population-division
    ledger) and a sort over the lists: neither spills well. Instead every step here is a plain
    join or aggregate that spills: a user's signature is (class, number of groups, sum of a
    64-bit hash of each group) as an exact integer; the users of each shared signature are
    checked against its first user, group by group (a join on (user, group)). Only the
    signatures where that finds a difference (a hash collision: in practice none) are split by
    the users' sorted group lists, the former method, on just their users.
    """
    b.materialize(
        "direct",
        """SELECT u.uid FROM (SELECT DISTINCT usr FROM charges WHERE usr IS NOT NULL) d
           JOIN uids u ON d.usr = u.usr""",
    )
    b.materialize(
        "gsig",
        f"""SELECT uid, COUNT(*) AS n, SUM(CAST({b.hash64("gid")} AS {_EXACT})) AS h
            FROM members GROUP BY uid""",
    )
    b.materialize(
        "sig",
        f"""
        SELECT x.uid, COALESCE(r.cls, {n_classes}) AS cls, x.direct, x.n, x.h FROM (
            SELECT COALESCE(d.uid, g.uid) AS uid, d.uid IS NOT NULL AS direct,
                   COALESCE(g.n, 0) AS n, CAST(COALESCE(g.h, 0) AS {_EXACT}) AS h
            FROM direct d FULL OUTER JOIN gsig g ON d.uid = g.uid) x
        LEFT JOIN (SELECT u.uid, q.cls FROM reqs q JOIN uids u ON q.usr = u.usr) r
               ON x.uid = r.uid
        """,
    )
    # Signatures shared by several group-only users, with their first user.
    b.materialize(
        "shared",
        """SELECT cls, n, h, MIN(uid) AS first FROM sig WHERE NOT direct
           GROUP BY cls, n, h HAVING COUNT(*) > 1""",
    )
    # Shared signatures with a user whose groups are not exactly the first user's: fewer than
    # n of its n (distinct) groups are among the first user's n groups.
    b.materialize(
        "collided",
        """SELECT DISTINCT cls, n, h FROM (
             SELECT s.uid, s.cls, s.n, s.h FROM sig s
             JOIN shared f ON s.cls = f.cls AND s.n = f.n AND s.h = f.h AND s.uid <> f.first
             JOIN members m ON m.uid = s.uid
             LEFT JOIN members o ON o.uid = f.first AND o.gid = m.gid
             WHERE NOT s.direct
             GROUP BY s.uid, s.cls, s.n, s.h HAVING COUNT(o.uid) < s.n) t""",
    )
    # Group ids are integers: their decimal strings joined by ',' identify a sorted set.
    b.materialize(
        "exact_sets",
        f"""SELECT m.uid, {b.sorted_concat("CAST(m.gid AS STRING)")} AS gs FROM members m
            JOIN sig s ON m.uid = s.uid
            JOIN collided c ON s.cls = c.cls AND s.n = c.n AND s.h = c.h
            WHERE NOT s.direct GROUP BY m.uid""",
    )
    b.materialize(
        "user_rep",
        """SELECT u.usr, s.uid, s.cls, DENSE_RANK() OVER (ORDER BY s.direct, s.cls, s.n, s.h,
                  CASE WHEN s.direct THEN CAST(s.uid AS STRING) ELSE COALESCE(e.gs, '') END)
                  - 1 AS rep
           FROM sig s JOIN uids u ON s.uid = u.uid LEFT JOIN exact_sets e ON s.uid = e.uid""",
    )
    b.materialize(
        "reps",
        """SELECT rep, MIN(cls) AS cls, COUNT(*) AS size, MIN(uid) AS canon
           FROM user_rep GROUP BY rep""",
    )
    # A representative's groups are those of any one member: no DISTINCT over all memberships.
    b.materialize(
        "grp_reps",
        "SELECT m.gid, r.rep FROM members m JOIN reps r ON m.uid = r.canon",
    )


def tightest_users(verdict: Verdict, k: int, population: Population | None = None) -> list[str]:
    """The k users closest to (or over) their bounds: largest utilization first (unbounded
    first of all), ties by user id; with ``population``, at most one user per requirement
    class (the tightest of each), so plots show different classes."""
    util = verdict.user_utilization
    # Rank the distinct values once (there are few): sorting users by an int is fast, sorting
    # them by Fraction keys is not.
    distinct = {x for x in util.values() if x is not None}
    rank: dict[Fraction | None, int] = {
        x: k + 1 for k, x in enumerate(sorted(distinct, reverse=True))
    }
    rank[None] = 0
    scored = sorted(util.items(), key=lambda p: (rank[p[1]], p[0]))
    if population is None:
        return [u for u, _ in scored[:k]]
    chosen: list[str] = []
    classes: set[str] = set()
    for u, _ in scored:
        name = population.class_of(u).name if u in population else "unregistered"
        if name not in classes:
            classes.add(name)
            chosen.append(u)
            if len(chosen) == k:
                break
    return chosen


def _rep_spends(b: SqlBackend, reps: Sequence[int], name: str) -> dict[int, list[tuple[int, int]]]:
    b.table(name, {"rep": list(reps)}, [], [])
    out: dict[int, list[tuple[int, int]]] = {}
    for rep, slot, v in b.rows(
        f"""SELECT g.rep, g.slot, CAST(g.v AS STRING) FROM agg g JOIN {name} c ON g.rep = c.rep
            WHERE g.v <> 0 ORDER BY g.rep, g.slot"""
    ):
        out.setdefault(int(rep), []).append((int(slot), int(v)))
    return out


def _candidate_ledger(
    candidates: Sequence[int],
    spends: dict[int, list[tuple[int, int]]],
    members_of: dict[int, list[str]],
    direct_users: set[str],
    lcd: int,
) -> Ledger:
    """A ledger of just the candidate representatives' per-slot sums: a directly charged user
    keeps direct charges; a group-only representative becomes one group of its members, so
    `wevent.verifier.check` forms exactly the same representatives."""
    ledger = Ledger()
    for rep in candidates:
        members = members_of[rep]
        direct = len(members) == 1 and members[0] in direct_users
        if not direct:
            ledger.define_group(f"rep-{rep}", members)
        for slot, v in spends.get(rep, []):
            amount = Budget(Fraction(v, lcd))
            if direct:
                ledger.append(slot, amount, user=members[0])
            else:
                ledger.append(slot, amount, group=f"rep-{rep}")
    return ledger


class _RepUtilization(dict[str, Fraction | None]):
    """Per-user utilization from representatives (a plain mapping user -> value)."""

    def __init__(self, user_rep: dict[str, int], util: list[Fraction | None]) -> None:
        super().__init__((u, util[r]) for u, r in user_rep.items())


def _validate(b: SqlBackend, files: Sequence[Path]) -> None:
    where = str(files[0]) if len(files) == 1 else " + ".join(str(f) for f in files)
    neither, no_eps, lo, hi = b.rows(
        """SELECT SUM(CASE WHEN (usr IS NULL) = (grp IS NULL) THEN 1 ELSE 0 END),
                  SUM(CASE WHEN eps IS NULL THEN 1 ELSE 0 END), MIN(slot), MAX(slot)
           FROM charges"""
    )[0]
    if int(neither or 0):
        raise FormatError(f"{where}: {neither} charge(s) do not name exactly one of user or group")
    if int(no_eps or 0):
        raise FormatError(f"{where}: {no_eps} charge(s) have no epsilon")
    # The row rules (`wevent.accounting.parquet_rows`) were checked file by file before the load,
    # with the messages every engine gives; what follows needs the files' rows together.
    (bad,) = b.rows(
        "SELECT COUNT(*) FROM raw WHERE slot IS NULL AND (grp IS NULL OR eps IS NOT NULL)"
    )[0]
    if int(bad):
        raise FormatError(f"{where}: {bad} row(s): {MEMBERSHIP_ROW}")
    if lo is not None and (int(lo) < 1 or int(hi) > 2**62 - 1):
        raise FormatError(f"{where}: slot: slots are numbered from 1 to 2^62 - 1")
    repeated = b.rows(
        """SELECT MIN(g.grp) FROM member_rows m JOIN gids g ON m.gid = g.gid WHERE m.n > 1"""
    )[0][0]
    if repeated is not None:
        raise FormatError(f"{where}: group {repeated!r} lists a member twice")
    if len(files) > 1:
        # A group listed again in a later file must list the same members (as the numpy reader
        # requires): every file's member count of a group equals the count of their union.
        # A file declaring the group without members (a row without a user) counts 0.
        redefined = b.rows(
            """SELECT MIN(g.grp) FROM
                 (SELECT src, gid, COUNT(*) AS k FROM member_rows GROUP BY src, gid
                  UNION ALL
                  SELECT DISTINCT r.src, g.gid, 0 AS k FROM raw r JOIN gids g ON r.grp = g.grp
                  WHERE r.slot IS NULL AND r.usr IS NULL) f
               LEFT JOIN (SELECT gid, COUNT(*) AS k FROM members GROUP BY gid) u
                 ON f.gid = u.gid
               JOIN gids g ON g.gid = f.gid
               WHERE f.k <> COALESCE(u.k, 0)"""
        )[0]
        if redefined[0] is not None:
            raise FormatError(
                f"{where}: group {redefined[0]!r} is defined in more than one file with "
                "other members"
            )
    missing = b.rows(
        """SELECT MIN(c.grp) FROM (SELECT DISTINCT grp FROM charges WHERE grp IS NOT NULL) c
           LEFT JOIN gids m ON c.grp = m.grp WHERE m.grp IS NULL"""
    )[0][0]
    if missing is not None:
        raise FormatError(f"{where}: group {missing!r} is charged but its members are not listed")


@dataclass(frozen=True, slots=True)
class EvidenceScan:
    """What `evidence_scan` found: the failures, how many charges carry evidence, and the
    charge records of each file (in order)."""

    failures: tuple[EvidenceFailure, ...]
    with_evidence: int
    file_charges: tuple[int, ...]


def evidence_scan(files: Sequence[Path], batch_rows: int = 1 << 20) -> EvidenceScan:
    """Certify every distinct (amount, evidence) pair of the charges in ``files`` (streamed in
    batches); failures carry the count and the first charge row, as the numpy checker's do.
    Counts the charges of each file and those carrying evidence on the way."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    seen: dict[tuple[Fraction, Evidence], list[int]] = {}  # -> [count, first row, first slot]
    amounts: dict[str, Budget] = {}
    evidences: dict[str, Evidence] = {}
    row_base = 0
    with_evidence = 0
    file_charges: list[int] = []
    for f in files:
        file_base = row_base
        pf = pq.ParquetFile(f)
        names = set(pf.schema_arrow.names)
        if "evidence" not in names:
            for batch in pf.iter_batches(batch_size=batch_rows, columns=["slot"]):
                row_base += batch.num_rows - batch.column(0).null_count
            file_charges.append(row_base - file_base)
            continue
        for batch in pf.iter_batches(
            batch_size=batch_rows, columns=["slot", "epsilon", "evidence"]
        ):
            slot = batch.column(0)
            is_charge = pc.is_valid(slot)
            ev = pc.fill_null(batch.column(2).cast(pa.large_string()), "")
            charge_ev = pc.and_(is_charge, pc.not_equal(ev, ""))
            index = np.cumsum(np.asarray(is_charge.to_numpy(zero_copy_only=False), np.int64)) - 1
            rows = np.flatnonzero(np.asarray(charge_ev.to_numpy(zero_copy_only=False), bool))
            with_evidence += len(rows)
            if len(rows):
                eps_l = batch.column(1).cast(pa.large_string()).take(pa.array(rows)).to_pylist()
                ev_l = ev.take(pa.array(rows)).to_pylist()
                slot_l = slot.take(pa.array(rows)).to_pylist()
                for k, (e, x, s) in enumerate(zip(eps_l, ev_l, slot_l, strict=True)):
                    try:
                        amount = amounts.get(e) or amounts.setdefault(e, Budget(e, what="epsilon"))
                        evidence = evidences.get(x) or evidences.setdefault(
                            x, evidence_from_json(x)
                        )
                    except BudgetError as exc:
                        raise FormatError(f"{f}: {exc}") from None
                    entry = seen.get((amount, evidence))
                    if entry is None:
                        seen[(amount, evidence)] = [1, row_base + int(index[rows[k]]), int(s)]
                    else:
                        entry[0] += 1
            row_base += int(index[-1]) + 1 if len(index) else 0
        file_charges.append(row_base - file_base)
    failures = []
    for (charged, evidence), (count, first, slot_v) in seen.items():
        result = certify_cost(evidence, charged)
        if not result.ok:
            failures.append(
                EvidenceFailure(evidence, charged, result.lower, result.upper, count, first, slot_v)
            )
    return EvidenceScan(
        tuple(sorted(failures, key=lambda e: e.first_row)), with_evidence, tuple(file_charges)
    )
