"""The arithmetic an allocator kernel runs on: exact rationals at runtime, Z3 terms in proofs.

A kernel never branches in Python on a budget or a decision: it combines values only through an
`Algebra` (``add``, ``sub``, ``mul``, ``le``, ``select``, ...), so the same code computes exact
budgets for a run and symbolic budgets for a proof (DESIGN.md, "one source of truth").

The published pseudo-code divides budgets to count absorbed and nullified slots
(``t_N = eps_l / share - 1``, 002 Algorithm 2 line 4; 001 Algorithm 5 line 6 and Algorithm 7
line 7). Those *count* operations go through ``ratio``, ``count_add`` and ``count_sub``:
`ExactAlgebra` evaluates them exactly, `FloatCountAlgebra` in IEEE double precision as the published
code does, so the hazard (``0.3 / 0.1 == 2.9999999999999996``) can be reproduced and refuted.
Budget arithmetic itself stays exact in both, so any violation the guard then reports is caused by
the counts, not by the representation of a budget.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Final, Protocol, TypeVar

from accounting.budget import BudgetError, approx

__all__ = [
    "ARITHMETICS",
    "Algebra",
    "ExactAlgebra",
    "FloatCountAlgebra",
    "algebra_for",
    "vmax",
    "vmin",
]

V = TypeVar("V")
B = TypeVar("B")

ARITHMETICS: Final = ("exact", "float")


class Algebra(Protocol[V, B]):
    """Values ``V`` (budgets, slot counts) and truth values ``B`` a kernel computes with."""

    name: str

    def const(self, q: Fraction | int) -> V: ...
    def add(self, a: V, b: V) -> V: ...
    def sub(self, a: V, b: V) -> V: ...
    def mul(self, a: V, b: V) -> V: ...
    def scale(self, a: V, k: Fraction | int) -> V:
        """``a`` times a constant."""
        ...

    def le(self, a: V, b: V) -> B: ...
    def select(self, cond: B, then: V, other: V) -> V: ...
    def and_(self, *terms: B) -> B: ...
    def or_(self, *terms: B) -> B: ...
    def not_(self, a: B) -> B: ...
    def truth(self, value: bool) -> B: ...

    def ratio(self, a: V, b: V) -> V:
        """``a / b`` for an absorption count (0 when ``b`` is 0: a zero share occupies no slot)."""
        ...

    def count_add(self, a: V, b: V) -> V: ...
    def count_sub(self, a: V, b: V) -> V: ...
    def floor(self, a: V) -> V:
        """The largest integer ``<= a`` (user counts of the population allocators)."""
        ...


def vmin(alg: Algebra[V, B], first: V, *rest: V) -> V:
    """The smallest of the values, as a select chain."""
    out = first
    for x in rest:
        out = alg.select(alg.le(x, out), x, out)
    return out


def vmax(alg: Algebra[V, B], first: V, *rest: V) -> V:
    """The largest of the values, as a select chain."""
    out = first
    for x in rest:
        out = alg.select(alg.le(out, x), x, out)
    return out


class ExactAlgebra:
    """Exact rationals (`fractions.Fraction`) and Python booleans: the runtime arithmetic."""

    name = "exact"

    def const(self, q: Fraction | int) -> Fraction:
        return Fraction(q)

    def add(self, a: Fraction, b: Fraction) -> Fraction:
        return a + b

    def sub(self, a: Fraction, b: Fraction) -> Fraction:
        return a - b

    def mul(self, a: Fraction, b: Fraction) -> Fraction:
        return a * b

    def scale(self, a: Fraction, k: Fraction | int) -> Fraction:
        return a * k

    def le(self, a: Fraction, b: Fraction) -> bool:
        return a <= b

    def select(self, cond: bool, then: Fraction, other: Fraction) -> Fraction:
        return then if cond else other

    def and_(self, *terms: bool) -> bool:
        return all(terms)

    def or_(self, *terms: bool) -> bool:
        return any(terms)

    def not_(self, a: bool) -> bool:
        return not a

    def truth(self, value: bool) -> bool:
        return value

    def ratio(self, a: Fraction, b: Fraction) -> Fraction:
        return a / b if b else Fraction(0)

    def count_add(self, a: Fraction, b: Fraction) -> Fraction:
        return a + b

    def count_sub(self, a: Fraction, b: Fraction) -> Fraction:
        return a - b

    def floor(self, a: Fraction) -> Fraction:
        return Fraction(math.floor(a))


def _float(x: Fraction) -> float:
    """A count operand as a double, refusing what a double cannot hold."""
    try:
        f = float(x)
    except OverflowError:
        f = math.inf
    if math.isinf(f) or (f == 0 and x != 0):
        raise BudgetError(
            f"--arithmetic float: {approx(x)} is not representable as a double; "
            "use --arithmetic exact"
        )
    return f


def _double(x: float) -> Fraction:
    if not math.isfinite(x):
        raise BudgetError("--arithmetic float: a count overflowed a double; use --arithmetic exact")
    return Fraction(x)


class FloatCountAlgebra(ExactAlgebra):
    """Exact budgets, but absorption counts in IEEE double precision, as the published code.

    Every count operation rounds its operands and its result to doubles (Python floats), so a
    count like ``0.3 / 0.1 - 1`` comes out as 1.9999999999999996 exactly as in the published
    implementations; the result is carried on as the exact value of that double.
    """

    name = "float"

    def ratio(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) / _float(b)) if b else Fraction(0)

    def count_add(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) + _float(b))

    def count_sub(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) - _float(b))


def algebra_for(arithmetic: str) -> ExactAlgebra:
    """The runtime algebra for ``--arithmetic exact|float``."""
    if arithmetic == "exact":
        return ExactAlgebra()
    if arithmetic == "float":
        return FloatCountAlgebra()
    raise ValueError(
        f"unknown arithmetic {arithmetic!r} (expected one of {', '.join(ARITHMETICS)})"
    )
