"""Budget kernels of the central and local w-event allocators, and their registry by name.

Each family module declares its allocators (`fixed`, `dynamic`, `local`, `population`: ``SPECS``);
`registry` collects them, and the names here come from it: `make_kernel(name, algebra, classes,
variant)` builds a built-in's kernel, `CENTRAL`, `LOCAL_BUDGET`, `POPULATION`, `LOCAL`,
`MECHANISMS` and `ORACLE_CHOICE` list the names. `run_trace` runs a kernel against a publish/skip
decision sequence in exact (or float-count) arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.allocators.algebra import ARITHMETICS, ExactAlgebra, algebra_for
from wevent.mechanisms.allocators.kernel import (
    VARIANTS,
    Kernel,
    Plan,
    classes_of,
    published_now,
)
from wevent.mechanisms.allocators.registry import (
    CENTRAL,
    LOCAL,
    LOCAL_BUDGET,
    MECHANISMS,
    ORACLE_CHOICE,
    POPULATION,
    make_kernel,
)

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
