"""The arithmetic an allocator kernel runs on: exact rationals at runtime, Z3 terms in proofs.

A kernel never branches in Python on a budget or a decision: it combines values only through an
`Algebra` (``add``, ``sub``, ``mul``, ``le``, ``select``, ...), so the same code computes exact
budgets for a run and symbolic budgets for a proof (DESIGN.md, "one source of truth").

The published pseudo-code divides budgets to count absorbed and nullified slots
(``t_N = eps_l / share - 1``, 002 Algorithm 2 line 4; 001 Algorithm 5 line 6 and Algorithm 7
line 7). Those *count* operations go through ``ratio``, ``count_add`` and ``count_sub``:
`ExactAlgebra` evaluates them exactly; `FloatCountAlgebra` evaluates every operation (budgets,
shares, sums and counts) in IEEE double precision as the published code does, so the hazards
(``0.3 / 0.1 == 2.9999999999999996``; a window of rounded shares summing past its budget) can be
reproduced and refuted: the guard checks the exact value of every double spent.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import reduce
from typing import Final, Protocol, TypeVar

from wevent.accounting.budget import BudgetError, approx

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
    """The smallest of the values, as a select chain (or the algebra's own ``minimum``, which
    `wevent.mechanisms.batch.BatchAlgebra` offers: the same value up to its comparison
    tolerance, in one elementwise operation instead of a comparison and a select)."""
    fast = getattr(alg, "minimum", None)
    if fast is not None:
        return reduce(fast, rest, first)
    out = first
    for x in rest:
        out = alg.select(alg.le(x, out), x, out)
    return out


def vmax(alg: Algebra[V, B], first: V, *rest: V) -> V:
    """The largest of the values, as a select chain (or the algebra's own ``maximum``, as
    `vmin`)."""
    fast = getattr(alg, "maximum", None)
    if fast is not None:
        return reduce(fast, rest, first)
    out = first
    for x in rest:
        out = alg.select(alg.le(out, x), x, out)
    return out


_SMALL = {k: Fraction(k) for k in range(-2, 3)}


class ExactAlgebra:
    """Exact rationals (`fractions.Fraction`) and Python booleans: the runtime arithmetic."""

    name = "exact"

    def const(self, q: Fraction | int) -> Fraction:
        if type(q) is int and -2 <= q <= 2:  # the kernels' 0 and 1 at every slot: shared
            return _SMALL[q]  # (a Fraction is immutable)
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
    """IEEE double precision end to end, as the published code computes (Du et al.'s Java
    code and streamdp-benchmark carry budgets, shares, sums and counts in doubles).

    Every operation rounds its operands to doubles (a requirement's ``eps = 7/10`` enters as the
    double nearest 0.7, as a parsed ``0.7`` does) and its result to a double (round to nearest,
    ties to even: Python floats), so ``0.3 / 0.1 - 1`` comes out as 1.9999999999999996 and
    ``0.7 / 8`` as the double the Java code gets. Values are carried as the *exact* value of
    each double (a `Fraction`), so the runtime guard checks the exact amount every double spends
    against the exact requirement: a rounding that overspends a window is a refusal.

    ``scale(a, k)`` divides when ``k`` is ``1/n`` (published code writes ``eps / (2 * w)``,
    not ``eps * 0.125``), else multiplies by the numerator and divides by the denominator.
    Comparisons compare the doubles. ``const`` rounds to a double as a literal does.
    """

    name = "float"

    def const(self, q: Fraction | int) -> Fraction:
        return _double(_float(Fraction(q)))

    def add(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) + _float(b))

    def sub(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) - _float(b))

    def mul(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) * _float(b))

    def scale(self, a: Fraction, k: Fraction | int) -> Fraction:
        k = Fraction(k)
        x = _float(a)
        if k.numerator != 1:
            x = x * k.numerator
        return _double(x / k.denominator)

    def le(self, a: Fraction, b: Fraction) -> bool:
        return _float(a) <= _float(b)

    def ratio(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) / _float(b)) if b else Fraction(0)

    def count_add(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) + _float(b))

    def count_sub(self, a: Fraction, b: Fraction) -> Fraction:
        return _double(_float(a) - _float(b))

    def floor(self, a: Fraction) -> Fraction:
        return Fraction(math.floor(_float(a)))


def algebra_for(arithmetic: str) -> ExactAlgebra:
    """The runtime algebra for ``--arithmetic exact|float``."""
    if arithmetic == "exact":
        return ExactAlgebra()
    if arithmetic == "float":
        return FloatCountAlgebra()
    raise ValueError(
        f"unknown arithmetic {arithmetic!r} (expected one of {', '.join(ARITHMETICS)})"
    )
