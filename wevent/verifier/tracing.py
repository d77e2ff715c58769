"""`wevent trace`: run an allocator's budget kernel on a decision sequence, through the guard.

Only the kernel runs (no data, no noise): each slot's dissimilarity budget and, when the slot
publishes, its publication budget are charged per requirement class to the runtime guard. The
trace stops at the first refused charge (a window the variant breaks) or at the first negative
budget (which no mechanism can spend), and says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from wevent.accounting.budget import Budget, BudgetError, format_exact, ratio_text, shown
from wevent.accounting.population import Population
from wevent.accounting.spending import BudgetExceeded, Spender
from wevent.mechanisms.allocators import (
    TraceSlot,
    algebra_for,
    classes_of,
    run_trace,
)
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import Kernel, Plan, first_negative, published_now
from wevent.mechanisms.allocators.population import (
    PopulationKernel,
    PopulationSetup,
    population_setup,
)
from wevent.mechanisms.allocators.registry import POPULATION_BUILTIN, kernel_for, resolve_population
from wevent.mechanisms.local import Reporters, population_arrays
from wevent.mechanisms.pool import PoolExhausted
from wevent.verifier.guard import Guard

__all__ = [
    "PopulationSlot",
    "PopulationTrace",
    "TraceResult",
    "charge_slot",
    "class_groups",
    "parse_decisions",
    "refusal_json",
    "trace_kernel",
    "trace_population",
    "trace_with_guard",
]


@dataclass
class TraceResult:
    """A kernel trace and how the guard took it."""

    mechanism: str
    variant: str
    arithmetic: str
    population: Population
    slots: list[TraceSlot]  # every slot run, up to and including a failing one
    refusal: BudgetExceeded | None = None
    negative: str | None = None  # description of a negative budget, if one was allocated
    failed_slot: int | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None and self.negative is None

    def to_json(self) -> dict[str, Any]:
        classes = self.population.classes
        slots = []
        for s in self.slots:
            budgets = {}
            for c in classes:
                entry = {
                    "dissimilarity": ratio_text(s.dissimilarity[c.index]),
                    "publication": ratio_text(s.publication[c.index]),
                }
                for user in c.members:
                    budgets[user] = entry
            slots.append({"slot": s.slot, "status": s.status, "budgets": budgets})
        out: dict[str, Any] = {
            "mechanism": self.mechanism,
            "variant": self.variant,
            "arithmetic": self.arithmetic,
            "ok": self.ok,
            "slots": slots,
        }
        if self.refusal is not None:
            out["refusal"] = refusal_json(self.refusal)
        if self.negative is not None:
            out["negative"] = {"slot": self.failed_slot, "message": self.negative}
        return out


def refusal_json(r: BudgetExceeded) -> dict[str, Any]:
    """A guard refusal as JSON (exact values as 'a/b')."""
    return {
        "slot": r.slot,
        "subject": r.subject,
        "requirement": r.requirement,
        "declaration": r.declaration,  # the dynamic declaration broken (None: not dynamic)
        "window": [r.window.first, r.window.last],
        "kind": r.window.kind,
        "spent": ratio_text(r.window.spent),
        "asked": ratio_text(r.asked),
        "bound": ratio_text(r.window.bound),
        "excess": ratio_text(r.excess),
        "message": str(r),
    }


def parse_decisions(text: str) -> list[bool]:
    """``"1,0,1"`` (commas or spaces) into publish/skip decisions."""
    items = [p.strip() for p in text.split(",")] if "," in text else text.split()
    if not any(items):
        raise BudgetError("--decisions: give at least one decision, e.g. 1,0,1")
    empty = [i for i, p in enumerate(items, start=1) if not p]
    if empty:
        raise BudgetError(
            f"--decisions: item {empty[0]} is empty (two commas in a row, or one at an end); "
            "give 1 (publish) or 0 (skip) for every slot"
        )
    parts = [q for p in items for q in p.split()]
    out = []
    for i, p in enumerate(parts, start=1):
        if p not in ("0", "1"):
            raise BudgetError(f"--decisions: item {i} is {shown(p)}; use 1 (publish) or 0 (skip)")
        out.append(p == "1")
    return out


def class_groups(population: Population, spender: Spender) -> list[str]:
    """Define one ledger group per requirement class (``class-0``, ...) and return their names."""
    names = []
    start = 0
    for c in population.classes:  # class c holds a contiguous range of the canonical order
        indices = np.arange(start, start + c.count, dtype=np.int64)
        spender.define_group_by_index(c.name, population.users, indices)
        start += c.count
        names.append(c.name)
    return names


def charge_slot(
    spender: Spender,
    groups: Sequence[str],
    slot: TraceSlot,
    mechanism: str,
) -> None:
    """Charge one slot's budgets per class (positive amounts only)."""
    for part, amounts in (("dissimilarity", slot.dissimilarity), ("publication", slot.publication)):
        for group, amount in zip(groups, amounts, strict=True):
            if amount > 0:
                spender.spend(
                    slot.slot, Budget(amount), group=group, part=part, mechanism=mechanism
                )


def _negative(slot: TraceSlot, population: Population) -> str | None:
    bad = first_negative([("dissimilarity", slot.dissimilarity), ("publication", slot.publication)])
    if bad is None:
        return None
    part, index, value = bad
    c = population.classes[index]
    return (
        f"slot {slot.slot}: the kernel allocated a negative {part} budget "
        f"{format_exact(value)} to {c.name} [{c.requirement.describe()}]"
    )


def trace_with_guard(
    mechanism: str,
    population: Population,
    decisions: Sequence[bool],
    *,
    variant: str = "sound",
    arithmetic: str = "exact",
) -> TraceResult:
    """Run the kernel of ``mechanism`` (a built-in name, an entry point of ``wevent.allocators``
    or ``module:attribute``, see `wevent.mechanisms.allocators.registry`) and charge every slot to a
    fresh guard."""
    alg = algebra_for(arithmetic)
    kernel = kernel_for(mechanism, alg, classes_of(population, mechanism), variant)
    return trace_kernel(
        kernel, population, decisions, mechanism=mechanism, variant=variant, arithmetic=arithmetic
    )


def trace_kernel(
    kernel: Kernel[Fraction, bool, Any],
    population: Population,
    decisions: Sequence[bool],
    *,
    mechanism: str,
    variant: str = "sound",
    arithmetic: str = "exact",
) -> TraceResult:
    """Run ``kernel`` (built over ``population``'s classes) on ``decisions`` and charge every
    slot to a fresh guard; the trace stops at the first refusal or negative budget."""
    trace = run_trace(kernel, decisions)
    result = TraceResult(mechanism, variant, arithmetic, population, [])
    guard = Guard(population)
    groups = class_groups(population, guard)
    for slot in trace:
        result.slots.append(slot)
        negative = _negative(slot, population)
        if negative is not None:
            result.negative, result.failed_slot = negative, slot.slot
            break
        try:
            charge_slot(guard, groups, slot, mechanism)
        except BudgetExceeded as exc:
            result.refusal, result.failed_slot = exc, slot.slot
            break
    return result


@dataclass
class PopulationSlot:
    """One slot of a population trace: status, users drawn per part, the budget each pays."""

    slot: int
    status: str
    sampled: dict[str, list[str]]  # part -> user ids drawn (and charged)
    available: int  # users in the pool before the slot's draws


@dataclass
class PopulationTrace:
    """A population kernel run against decisions, with users drawn from a seeded pool and every
    drawn user charged to the guard."""

    mechanism: str
    variant: str
    population: Population
    setup: PopulationSetup
    slots: list[PopulationSlot]
    refusal: BudgetExceeded | None = None
    shortage: PoolExhausted | None = None
    failed_slot: int | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None and self.shortage is None

    def budget_of(self, user: str) -> Fraction:
        return self.setup.budgets[self.population.class_of(user).index]

    def to_json(self) -> dict[str, Any]:
        cfg = self.setup.config
        slots = []
        for s in self.slots:
            budgets: dict[str, dict[str, str]] = {}
            for part, users in s.sampled.items():
                for u in users:
                    budgets.setdefault(u, {})[part] = ratio_text(self.budget_of(u))
            slots.append(
                {
                    "slot": s.slot,
                    "status": s.status,
                    "available": s.available,
                    "sampled": {part: len(users) for part, users in s.sampled.items()},
                    "budgets": budgets,
                }
            )
        out: dict[str, Any] = {
            "mechanism": self.mechanism,
            "variant": self.variant,
            "ok": self.ok,
            "setup": {
                "users": cfg.n,
                "rule": cfg.rule,
                "sample_size": cfg.unit,
                "recycle": cfg.recycle,
                "splits": {
                    c.name: k
                    for c, k in zip(self.population.classes, self.setup.splits, strict=True)
                },
            },
            "slots": slots,
        }
        if self.refusal is not None:
            out["refusal"] = refusal_json(self.refusal)
        if self.shortage is not None:
            out["shortage"] = {"slot": self.failed_slot, "message": str(self.shortage)}
        return out


def trace_population(
    mechanism: str,
    population: Population,
    decisions: Sequence[bool],
    *,
    variant: str = "sound",
    seed: int = 0,
    d: int = 2,
) -> PopulationTrace:
    """Run the population kernel of ``mechanism`` (a built-in population allocator or a
    third-party `PopulationAllocator`, `registry.resolve_population`): each slot draws its users
    from a pool seeded with ``seed`` and charges every drawn user their per-report budget to a
    fresh guard. A publication's users are drawn only when the slot publishes."""
    classes = classes_of(population, mechanism)
    counts = [c.count for c in population.classes]
    alloc = resolve_population(mechanism)
    if alloc is None:
        raise BudgetError(f"{mechanism} is not a population allocator")
    if alloc is POPULATION_BUILTIN.get(mechanism):  # the module's own names (tests patch them)
        setup = population_setup(mechanism, classes, counts, d, variant)
        kernel: PopulationKernel[Fraction, bool] = PopulationKernel(
            mechanism, ExactAlgebra(), setup.config, variant
        )
    else:
        if variant not in alloc.variants:
            raise BudgetError(
                f"{mechanism}: no variant {variant!r} (it has: {', '.join(alloc.variants)})"
            )
        setup = alloc.setup(classes, counts, d, variant)
        kernel = alloc.kernel(ExactAlgebra(), setup.config, variant)
    users, class_of = population_arrays(population)
    reporters = Reporters(
        users, class_of, setup.budgets, setup.config.recycle, np.random.default_rng(seed)
    )
    guard = Guard(population)
    result = PopulationTrace(mechanism, variant, population, setup, [])
    state = kernel.start()
    for t, decision in enumerate(decisions, start=1):
        reporters.pool.release(t)
        draw = kernel.plan(state, t)
        published = published_now(kernel.alg, Plan(draw.nullified, draw.forced, (), ()), decision)
        published = published and draw.publication > 0
        status = "published" if published else ("nullified" if draw.nullified else "skipped")
        slot = PopulationSlot(t, status, {}, reporters.pool.available)
        result.slots.append(slot)
        try:
            parts = [("dissimilarity", int(draw.dissimilarity))]
            if published:
                parts.append(("publication", int(draw.publication)))
            for part, k in parts:
                if k > 0:
                    idx = reporters.draw(k, part)
                    slot.sampled[part] = [users[i] for i in idx.tolist()]
                    reporters.charge(guard, t, idx, part, mechanism)
        except PoolExhausted as exc:
            result.shortage, result.failed_slot = exc, t
            break
        except BudgetExceeded as exc:
            result.refusal, result.failed_slot = exc, t
            break
        state = kernel.step(state, t, draw, published)
    return result
