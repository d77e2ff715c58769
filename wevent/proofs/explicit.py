"""Exhaustive search over every publish/skip sequence for concrete budgets (explicit states).

Used where the symbolic encoding is out of reach: ``--arithmetic float``. Z3's floating-point
theory can mirror `FloatCountAlgebra` (``fpRealToFP`` / ``fpDiv`` with round-to-nearest-even),
but the kernels' counts convert *non-constant* real terms to doubles, and Z3 did not decide even
slot 2 of BA (w = 3) within 120 s. Here the kernel runs on `FloatCountAlgebra` itself, so what
is checked is exactly what runs; every decision sequence up to the horizon is explored
breadth-first, merging runs whose kernel state and recent spends are equal (their futures are
equal), so the first failing slot found is the earliest one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from wevent.mechanisms.allocators.kernel import Prefix, published_now
from wevent.proofs.symbolic import WindowSpec

__all__ = ["ExplicitOutcome", "explore", "state_digest"]


@dataclass
class ExplicitOutcome:
    """``status`` "proved" or "counterexample" (with the decisions up to the failing slot)."""

    status: str
    seconds: float
    states: int
    slot: int | None = None
    decisions: tuple[bool, ...] = ()
    # the failure: ("negative", subject, part, value) or ("window", window, spent)
    failure: tuple[Any, ...] = ()


def state_digest(value: Any, depth: int) -> Any:
    """A hashable summary of a kernel state that determines its future."""
    if isinstance(value, Prefix):
        last = value.last
        return (
            "P",
            last,
            tuple(value.total(s, s) for s in range(max(1, last - depth + 1), last + 1)),
        )
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(state_digest(getattr(value, f.name), depth) for f in dataclasses.fields(value))
    if isinstance(value, tuple | list):
        return tuple(state_digest(v, depth) for v in value)
    return value


def explore(
    kernel: Any, windows: Sequence[WindowSpec], horizon: int, depth: int
) -> ExplicitOutcome:
    """Explore every decision sequence of ``horizon`` slots; ``depth`` is the longest window
    (how much history decides the future)."""
    start = time.perf_counter()
    alg = kernel.alg
    subjects = len(kernel.classes)
    # node: (state, decisions, recent spends per slot)
    frontier: list[tuple[Any, tuple[bool, ...], tuple[tuple[Fraction, ...], ...]]] = [
        (kernel.start(), (), ())
    ]
    states = 0
    for t in range(1, horizon + 1):
        active = [w for w in windows if w.first <= t <= w.last]
        seen: dict[Any, tuple[Any, tuple[bool, ...], tuple[tuple[Fraction, ...], ...]]] = {}
        for state, decisions, recent in frontier:
            plan = kernel.plan(state, t)
            choices = [False, True] if not (plan.forced or plan.nullified) else [False]
            for d in choices:
                published = published_now(alg, plan, d)
                for c in range(subjects):
                    dis, pub = plan.dissimilarity[c], plan.publication[c]
                    if dis < 0:
                        return ExplicitOutcome(
                            "counterexample",
                            time.perf_counter() - start,
                            states,
                            t,
                            (*decisions, d),
                            ("negative", c, "dissimilarity", dis),
                        )
                    if published and pub < 0:
                        return ExplicitOutcome(
                            "counterexample",
                            time.perf_counter() - start,
                            states,
                            t,
                            (*decisions, d),
                            ("negative", c, "publication", pub),
                        )
                spend = tuple(
                    plan.dissimilarity[c] + (plan.publication[c] if published else 0)
                    for c in range(subjects)
                )
                history = (*recent, spend)[-depth:] if depth else ()
                for w in active:
                    first = max(w.first, 1, t - len(history) + 1)
                    total = sum(
                        (history[s - t - 1][w.subject] for s in range(first, t + 1)), Fraction(0)
                    )
                    if total > w.bound:
                        return ExplicitOutcome(
                            "counterexample",
                            time.perf_counter() - start,
                            states,
                            t,
                            (*decisions, d),
                            ("window", w, total),
                        )
                nxt = kernel.step(state, t, plan, published)
                key = (state_digest(nxt, depth), history)
                if key not in seen:
                    seen[key] = (nxt, (*decisions, d), history)
        frontier = list(seen.values())
        states += len(frontier)
    return ExplicitOutcome("proved", time.perf_counter() - start, states)
