"""The inputs the gate draws: requirement populations (fixed or dynamic) and decision sequences.

Budgets come from a list of decimals and small fractions on purpose: values such as 0.3 and 0.7
are not doubles, so a share count computed in floating point lands just below an integer
(``0.3 / 0.1 == 2.9999999999999996``), the published bug DESIGN.md describes; 1/3 does not
terminate, so a budget rounded to a few decimals shows. Every budget is positive (the window
theorems of `proofs.central` are stated for positive budgets).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction

from hypothesis import strategies as st

from accounting.budget import Budget
from accounting.population import Population
from accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from mechanisms.allocators.kernel import ClassReq, Decl, DynamicClass, FixedClass

__all__ = [
    "BUDGETS",
    "SYSTEMATIC_BUDGETS",
    "budgets",
    "decision_lists",
    "dynamic_requirements",
    "fixed_requirements",
    "kernel_classes",
    "one_user_per_class",
    "periodic_patterns",
    "random_decisions",
    "random_requirements",
    "requirement_lists",
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
