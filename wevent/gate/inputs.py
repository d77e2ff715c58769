"""The inputs the gate draws: requirement populations (fixed or dynamic) and decision sequences.

Budgets come from a list of decimals and small fractions on purpose: values such as 0.3 and 0.7
are not doubles, so a share count computed in floating point lands just below an integer
(``0.3 / 0.1 == 2.9999999999999996``), the published bug DESIGN.md describes; 1/3 does not
terminate, so a budget rounded to a few decimals shows. Every budget is positive (the window
theorems of `wevent.proofs.central` are stated for positive budgets).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction

from hypothesis import strategies as st

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.mechanisms.allocators.kernel import ClassReq, Decl, DynamicClass, FixedClass

__all__ = [
    "AWKWARD_BUDGETS",
    "BUDGETS",
    "CHANGE_LADDER",
    "PATTERNS",
    "SYSTEMATIC_BUDGETS",
    "WINDOW_LADDER",
    "budgets",
    "decision_lists",
    "dynamic_requirements",
    "fixed_requirements",
    "kernel_classes",
    "one_user_per_class",
    "pattern",
    "periodic_patterns",
    "random_decisions",
    "random_requirements",
    "requirement_lists",
    "structured_changes",
    "structured_one_class",
    "wide_budget",
    "wide_dynamic",
    "wide_fixed",
    "wide_horizon",
    "wide_window",
]

F = Fraction

# The simplest first: hypothesis shrinks a sampled value towards the start of the list.
BUDGETS: tuple[Fraction, ...] = (
    F(1),
    F(1, 10),
    F(3, 10),
    F(1, 2),
    F(7, 10),
    F(1, 3),
    F(2),
    F(1, 5),
    F(9, 10),
    F(3),
    F(1, 100),
    F(2, 3),
    F(6, 10),
)

# The systematic pass (`search._systematic`) tries these with every window and rhythm: whole
# numbers and decimals that are not doubles (0.1, 0.3, 0.7, 0.6) or do not terminate (1/3).
SYSTEMATIC_BUDGETS: tuple[Fraction, ...] = (F(1), F(1, 10), F(3, 10), F(7, 10), F(6, 10), F(1, 3))

_BUDGET_STRATEGY: st.SearchStrategy[Fraction] = st.one_of(
    st.sampled_from(BUDGETS),
    st.builds(F, st.integers(1, 40), st.sampled_from([1, 3, 7, 10, 100])),
)


def budgets() -> st.SearchStrategy[Fraction]:
    """A positive exact budget: a listed value, or a small fraction."""
    return _BUDGET_STRATEGY


def fixed_requirements(w_max: int) -> st.SearchStrategy[Requirement]:
    return st.builds(lambda w, e: Fixed(w, Budget(e)), st.integers(1, w_max), budgets())


def _dynamic(rows: list[tuple[int, tuple[int, Fraction, int, Fraction]]]) -> Requirement:
    return Dynamic(
        tuple(
            Declaration(slot, wb, Budget(eb), wf, Budget(ef))
            for slot, (wb, eb, wf, ef) in sorted(rows)
        )
    )


def dynamic_requirements(w_max: int, horizon: int) -> st.SearchStrategy[Requirement]:
    """1..3 declarations (001 Definition 10) at distinct slots of the horizon. (Built from
    fixed strategies, not a composite: drawing a fresh strategy per example costs more than
    the kernel run.)"""
    window = st.integers(1, w_max)
    decl = st.tuples(window, budgets(), window, budgets())
    rows = st.lists(
        st.tuples(st.integers(1, max(horizon, 1)), decl),
        min_size=1,
        max_size=3,
        unique_by=lambda row: row[0],
    )
    return rows.map(_dynamic)


def requirement_lists(
    kind: str, classes: int, w_max: int, horizon: int
) -> st.SearchStrategy[list[Requirement]]:
    """1..classes distinct requirements, all fixed or all dynamic (``kind``). Distinct because
    users with equal requirements form one class (`Population`): a list with a repeated
    requirement would run as fewer classes than it shows, and its printed counterexample would
    not be the input that failed."""
    one = (
        fixed_requirements(w_max)
        if kind == "fixed"
        else dynamic_requirements(w_max=w_max, horizon=horizon)
    )
    return st.lists(one, min_size=1, max_size=classes, unique=True)


def _periodic(period: int, first: int, slots: int) -> list[bool]:
    """Publish at slots first, first + period, ...; skip the others."""
    return [t >= first and (t - first) % period == 0 for t in range(1, slots + 1)]


def periodic_patterns(period_max: int, slots: int) -> list[list[bool]]:
    """Every periodic decision sequence of ``slots`` slots with period p = 1..period_max, first
    publishing at slot 1..p + 1 (later starts repeat a shorter run's skipped prefix)."""
    return [
        _periodic(period, first, slots)
        for period in range(1, period_max + 1)
        for first in range(1, min(period + 1, slots) + 1)
    ]


def decision_lists(horizon: int) -> st.SearchStrategy[list[bool]]:
    """Publish (True) / skip decisions for 1..horizon slots: free sequences, or periodic ones
    (publish every k-th slot), the rhythm that makes absorption kernels absorb and nullify
    the most."""
    return st.one_of(
        st.lists(st.booleans(), min_size=1, max_size=horizon),
        st.builds(_periodic, st.integers(1, 4), st.integers(1, 5), st.integers(1, max(horizon, 1))),
    )


def random_requirements(
    rng: random.Random, kind: str, classes: int, w_max: int, horizon: int
) -> list[Requirement]:
    """The same space as `requirement_lists` (distinct requirements), drawn with ``rng``
    (conformance, end to end). A repeated draw is left out, so a list may be shorter."""
    out: list[Requirement] = []
    for _ in range(rng.randint(1, classes)):
        req: Requirement
        if kind == "fixed":
            req = Fixed(rng.randint(1, w_max), Budget(rng.choice(BUDGETS)))
        else:
            count = rng.randint(1, min(3, horizon))
            slots = sorted(rng.sample(range(1, horizon + 1), count))
            req = Dynamic(
                tuple(
                    Declaration(
                        s,
                        rng.randint(1, w_max),
                        Budget(rng.choice(BUDGETS)),
                        rng.randint(1, w_max),
                        Budget(rng.choice(BUDGETS)),
                    )
                    for s in slots
                )
            )
        if req not in out:
            out.append(req)
    return out


def random_decisions(rng: random.Random, slots: int) -> list[bool]:
    p = rng.choice((0.3, 0.6, 0.9))
    return [rng.random() < p for _ in range(slots)]


def kernel_classes(reqs: Sequence[Requirement]) -> list[ClassReq[Fraction]]:
    """Requirements as kernel classes with exact budgets, one per requirement, in order."""
    out: list[ClassReq[Fraction]] = []
    for r in reqs:
        if isinstance(r, Fixed):
            out.append(FixedClass(r.w, Fraction(r.eps)))
        elif isinstance(r, Dynamic):
            out.append(
                DynamicClass(
                    tuple(
                        Decl(d.slot, d.w_back, Fraction(d.eps_back), d.w_fwd, Fraction(d.eps_fwd))
                        for d in r.declarations
                    )
                )
            )
        else:
            raise TypeError(f"no window to allocate over: {r!r}")
    return out


def one_user_per_class(reqs: Sequence[Requirement]) -> Population:
    """Users u1, u2, ... holding ``reqs`` (equal requirements form one class)."""
    return Population({f"u{i + 1}": r for i, r in enumerate(reqs)})


# ---------------------------------------------------------------------------- the wide search
#
# The wide search (`search.run_search`, `population`) runs far past the proof's scope: windows
# up to 64, populations of up to 6 classes, runs of up to max(256, 4 * the largest window) slots.
# Concrete runs are cheap, so it samples seeded populations and structured decision patterns
# instead of enumerating them; `WidePlan` says which runs, in a fixed order.

# Budgets that break arithmetic: non-terminating (1/3, 1/7), not doubles (7/10, 3/10, 6/10, 9/10),
# tiny (1/1000), and whole numbers. Drawn first with equal budgets for different windows, equal
# windows for different budgets, and mixed.
AWKWARD_BUDGETS: tuple[Fraction, ...] = (
    F(1, 3),
    F(7, 10),
    F(1, 1000),
    F(1),
    F(3, 10),
    F(1, 10),
    F(6, 10),
    F(2, 3),
    F(9, 10),
    F(1, 7),
    F(1, 2),
    F(3),
)

# The window ladder of the structured one-class pass (a bug at w >= 4 shows on its first rungs).
WINDOW_LADDER: tuple[int, ...] = (4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 48, 64)

PATTERNS: tuple[str, ...] = (
    "all-publish",
    "all-skip",
    "periodic",
    "after-k-skips",
    "bursts",
    "late-start",
    "random",
)


def wide_horizon(horizon: int, w_max: int) -> int:
    """The longest run of the wide search: ``horizon`` if set, else max(256, 4 w_max)."""
    return horizon or max(256, 4 * w_max)


def wide_window(rng: random.Random, w_max: int) -> int:
    """A window in 1..w_max: small ones (where most kernels branch) and large ones equally often;
    the largest (and its neighbours) now and then."""
    roll = rng.random()
    if roll < 0.35:
        return rng.randint(1, min(8, w_max))
    if roll < 0.7:
        return rng.randint(1, w_max)
    if roll < 0.85:
        return max(1, w_max - rng.randint(0, 3))
    return max(1, min(w_max, round(2 ** rng.uniform(0, max(w_max, 1).bit_length()))))


def wide_budget(rng: random.Random) -> Fraction:
    """A positive budget: an awkward one (`AWKWARD_BUDGETS`) or a random fraction."""
    if rng.random() < 0.7:
        return rng.choice(AWKWARD_BUDGETS)
    return F(rng.randint(1, 40), rng.choice((1, 3, 7, 10, 100, 1000)))


def wide_fixed(rng: random.Random, classes: int, w_max: int) -> list[Requirement]:
    """1..classes distinct fixed requirements with heterogeneous windows and budgets, in one of
    four shapes: random; equal budgets with different windows; equal windows with different
    budgets; neighbouring windows (w, w + 1, ...)."""
    count = rng.randint(1, classes) if rng.random() < 0.5 else classes
    shape = rng.randrange(4)
    w0, eps0 = wide_window(rng, w_max), wide_budget(rng)
    out: list[Requirement] = []
    for i in range(count):
        if shape == 0:
            w, eps = wide_window(rng, w_max), wide_budget(rng)
        elif shape == 1:
            w, eps = wide_window(rng, w_max), eps0
        elif shape == 2:
            w, eps = w0, wide_budget(rng)
        else:
            w, eps = min(w_max, w0 + i), wide_budget(rng)
        req = Fixed(w, Budget(eps))
        if req not in out:
            out.append(req)
    return out


def wide_dynamic(
    rng: random.Random, classes: int, w_max: int, slots: int
) -> tuple[list[Requirement], int]:
    """1..classes distinct dynamic requirements, each declared at slot 1 and changed 0..2 times
    later; returns them and one change slot (a decision pattern aligns publications with it)."""
    count = rng.randint(1, classes) if rng.random() < 0.5 else classes
    change = rng.randint(2, max(2, slots - 1))
    out: list[Requirement] = []
    for i in range(count):
        at = [1]
        if i == 0 or rng.random() < 0.7:
            at.append(change)
        if rng.random() < 0.3:
            at.append(rng.randint(2, max(2, slots)))
        decls = []
        for s in sorted(set(at)):
            decls.append(
                Declaration(
                    s,
                    wide_window(rng, w_max),
                    Budget(wide_budget(rng)),
                    wide_window(rng, w_max),
                    Budget(wide_budget(rng)),
                )
            )
        req = Dynamic(tuple(decls))
        if req not in out:
            out.append(req)
    return out, change


def pattern(
    kind: str, rng: random.Random, slots: int, w: int, anchor: int | None = None
) -> list[bool]:
    """A structured decision sequence of ``slots`` slots for window ``w`` (PATTERNS):
    all publish; all skip; periodic with period 1..w + 1; k skips then a publication, repeated,
    for k = 0..w + 1, after a burst of publications; bursts of publications and skips of up to
    w + 1 slots; a late start (up to 4w skipped slots) then every slot; random with a density.
    With ``anchor`` (a requirement change) the periodic kinds put a publication at
    ``anchor + o`` for an offset o of -w..w."""
    if kind == "all-publish":
        return [True] * slots
    if kind == "all-skip":
        return [False] * slots
    if kind == "random":
        p = rng.choice((0.1, 0.3, 0.5, 0.7, 0.9))
        return [rng.random() < p for _ in range(slots)]
    if kind == "bursts":
        out: list[bool] = []
        on = rng.random() < 0.5
        while len(out) < slots:
            out += [on] * rng.randint(1, w + 1)
            on = not on
        return out[:slots]
    if kind == "late-start":
        skip = rng.randint(1, 4 * w)
        return [t > skip for t in range(1, slots + 1)]
    period = rng.randint(1, w + 1) if kind == "periodic" else rng.randint(0, w + 1) + 1
    first = rng.randint(1, period)
    if anchor is not None:
        first = ((anchor + rng.randint(-w, w) - 1) % period) + 1
    out = _periodic(period, first, slots)
    if kind == "after-k-skips":
        burst = rng.randint(0, 2 * w)
        out = ([True] * burst + out[burst:])[:slots]
    return out


def structured_one_class(
    w_max: int, horizon: int, budgets: Sequence[Fraction]
) -> list[tuple[list[Requirement], list[bool]]]:
    """The structured one-class pass: for each window w of `WINDOW_LADDER` up to ``w_max`` (and
    ``w_max`` itself), all skip and every period 1..w + 2 first publishing at slot 1 (period 1
    is all publish; period k + 1 publishes after every k skips, k <= w + 1), over
    min(horizon, 5w + 1) slots (at least 16), the budgets taken in turn. Smallest windows first."""
    out: list[tuple[list[Requirement], list[bool]]] = []
    ladder = [w for w in WINDOW_LADDER if w <= w_max]
    if w_max not in ladder:
        ladder.append(w_max)
    i = 0
    for w in ladder:
        slots = min(horizon, max(5 * w + 1, 16))
        runs = [[False] * slots] + [_periodic(p, 1, slots) for p in range(1, w + 3)]
        for decisions in runs:
            out.append(([Fixed(w, Budget(budgets[i % len(budgets)]))], decisions))
            i += 1
    return out


CHANGE_LADDER: tuple[int, ...] = (2, 3, 4, 5, 8, 16)


def structured_changes(w_max: int, horizon: int) -> list[tuple[list[Requirement], list[bool]]]:
    """The structured pass for dynamic requirements: one class declaring (w, 1) both ways at
    slot 1 and changing at slot c = 3w + 1 (past any warm-up of the old scope's 9 slots for
    w >= 3) to a tighter ((w + 1, 1/3) backward, (w, 1/3) forward) or a looser ((w - 1 or 1,
    2) both ways) requirement, alternately; for every offset o = -w..w the run publishes every
    w-th slot from c + o (so a publication falls at c + o), over c + 3w slots. Windows of
    `CHANGE_LADDER` up to ``w_max``, smallest first."""
    out: list[tuple[list[Requirement], list[bool]]] = []
    one, third, two = Budget(1), Budget(F(1, 3)), Budget(2)
    for w in (w for w in CHANGE_LADDER if w <= w_max):
        change = 3 * w + 1
        slots = min(horizon, change + 3 * w)
        if change >= slots:
            continue
        for i, offset in enumerate(range(-w, w + 1)):
            later = (
                Declaration(change, w + 1, third, w, third)
                if i % 2 == 0
                else Declaration(change, max(w - 1, 1), two, max(w - 1, 1), two)
            )
            req = Dynamic((Declaration(1, w, one, w, one), later))
            first = change + offset
            decisions = [t >= first and (t - first) % w == 0 for t in range(1, slots + 1)]
            out.append(([req], decisions))
    return out
