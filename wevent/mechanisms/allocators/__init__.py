"""Budget kernels of the central and local w-event allocators, and a registry by CLI name.

`make_kernel(name, algebra, classes, variant)` builds the kernel; `run_trace` runs one against a
publish/skip decision sequence in exact (or float-count) arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, TypeVar

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.allocators.algebra import ARITHMETICS, Algebra, ExactAlgebra, algebra_for
from wevent.mechanisms.allocators.dynamic import DynamicKernel
from wevent.mechanisms.allocators.fixed import FixedKernel
from wevent.mechanisms.allocators.kernel import (
    VARIANTS,
    ClassReq,
    Kernel,
    Plan,
    classes_of,
    published_now,
)
from wevent.mechanisms.allocators.local import LOCAL, LOCAL_BUDGET, ORACLE_CHOICE, POPULATION

__all__ = [
    "ARITHMETICS",
    "CENTRAL",
    "LOCAL",
    "LOCAL_BUDGET",
    "MECHANISMS",
    "ORACLE_CHOICE",
    "POPULATION",
    "VARIANTS",
    "TraceSlot",
    "algebra_for",
    "classes_of",
    "make_kernel",
    "run_trace",
    "status_of",
]

V = TypeVar("V")
B = TypeVar("B")

CENTRAL: Final = ("uniform", "sample", "bd", "ba", "pbd", "pba", "dpbd", "dpba")
MECHANISMS: Final = CENTRAL + LOCAL


def make_kernel(
    name: str, alg: Algebra[V, B], classes: Sequence[ClassReq[V]], variant: str = "sound"
) -> Kernel[V, B, Any]:
    """The budget kernel of allocator ``name`` over ``classes`` (in population class order): a
    central allocator or a local budget-division one (population-division allocators have
    population kernels, see `wevent.mechanisms.allocators.local.population_setup`)."""
    if name in ("dpbd", "dpba"):
        return DynamicKernel(name, alg, classes, variant)
    if name in CENTRAL or name in LOCAL_BUDGET:
        return FixedKernel(name, alg, classes, variant)
    if name in POPULATION:
        raise BudgetError(f"{name} allocates users, not budgets: it has a population kernel")
    raise BudgetError(f"unknown allocator {name!r} (expected one of {', '.join(MECHANISMS)})")


@dataclass(frozen=True, slots=True)
class TraceSlot:
    """One slot of an exact trace: status and, per class, the budgets spent (and the candidate
    publication budget, spent only when published)."""

    slot: int
    status: str  # "published", "skipped" or "nullified"
    dissimilarity: tuple[Fraction, ...]
    publication: tuple[Fraction, ...]
    candidate: tuple[Fraction, ...]


def status_of(plan: Plan[Fraction, bool], decision: bool) -> str:
    if plan.forced:
        return "published"
    if plan.nullified:
        return "nullified"
    return "published" if decision else "skipped"


def run_trace(kernel: Kernel[Fraction, bool, Any], decisions: Sequence[bool]) -> list[TraceSlot]:
    """Run the kernel over ``len(decisions)`` slots; a decision on a nullified or forced slot is
    ignored."""
    if not isinstance(kernel.alg, ExactAlgebra):
        raise BudgetError("run_trace needs an exact (or float-count) algebra")
    alg = kernel.alg
    state = kernel.start()
    out = []
    for t, decision in enumerate(decisions, start=1):
        plan = kernel.plan(state, t)
        published = published_now(alg, plan, decision)
        zero = Fraction(0)
        out.append(
            TraceSlot(
                t,
                status_of(plan, decision),
                plan.dissimilarity,
                tuple(p if published else zero for p in plan.publication),
                plan.publication,
            )
        )
        state = kernel.step(state, t, plan, published)
    return out
