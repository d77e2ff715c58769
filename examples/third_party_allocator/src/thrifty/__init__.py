"""Thrifty: a w-event budget allocator (an example of the wevent Allocator protocol).

Per requirement class ``(w, eps)`` and slot t (the budget-distribution scheme of 002 Algorithm 1,
spending a third instead of half):

* dissimilarity: ``eps / (2 w)`` at every slot, so any w slots spend at most eps/2 on it;
* publication: a third of what the publication half has left in the window,
  ``(eps/2 - published in [t-w+1, t-1]) / 3``, so the publications of any w slots stay
  below eps/2 as well (each one is at most what is left).

The kernel computes only through the algebra (``alg.scale``, ``alg.sub``, ...), so the same code
runs on exact rationals and on Z3 terms, and ``wevent gate`` can prove it. ``broken`` is the
same kernel with a classic bug kept as a negative control: its publication half is computed from
the whole eps, forgetting the dissimilarity part of the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from wevent.api import AllocatorSpec, ClassReq, Plan, Prefix, fixed_classes

__all__ = ["Thrifty", "allocator", "broken"]


@dataclass(frozen=True)
class State:
    published: tuple[Prefix[Any], ...]  # per class: publication spends of the last w slots


class Thrifty:
    """The kernel: ``start``, ``plan`` and ``step`` over an algebra (the Kernel protocol)."""

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> None:
        self.name, self.variant, self.alg = "thrifty", variant, alg
        self.classes = tuple(classes)
        self.fixed = fixed_classes(classes, "thrifty")  # refuses dynamic requirements
        self.half = Fraction(1, 2) if variant == "sound" else Fraction(1)  # the bug: all of eps

    def start(self) -> State:
        return State(tuple(Prefix(self.alg, c.w) for c in self.fixed))

    def plan(self, state: State, t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, spent in zip(self.fixed, state.published, strict=True):
            dis.append(alg.scale(c.eps, Fraction(1, 2 * c.w)))
            left = alg.sub(alg.scale(c.eps, self.half), spent.total(t - c.w + 1, t - 1))
            pub.append(alg.scale(left, Fraction(1, 3)))
        no = alg.truth(False)
        return Plan(nullified=no, forced=no, dissimilarity=tuple(dis), publication=tuple(pub))

    def step(self, state: State, t: int, plan: Plan[Any, Any], published: Any) -> State:
        zero = self.alg.const(0)
        return State(
            tuple(
                h.push(self.alg.select(published, p, zero))
                for h, p in zip(state.published, plan.publication, strict=True)
            )
        )


def _kernel(alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> Thrifty:
    return Thrifty(alg, classes, variant)


allocator = AllocatorSpec(
    name="thrifty",
    requirement="fixed",  # (w, eps) requirements only
    scaling="per-class",  # each class's budgets scale with its own eps
    summary="budget distribution spending a third of what is left",
    factory=_kernel,
)

broken = AllocatorSpec(
    name="thrifty-broken",
    requirement="fixed",
    scaling="per-class",
    summary="thrifty with its publication half computed from the whole eps (a bug)",
    factory=lambda alg, classes, _variant: Thrifty(alg, classes, "broken"),
)
