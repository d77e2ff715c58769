"""The allocator kernels' `Algebra` on Z3 terms: real-valued budgets, Boolean decisions.

The kernels in `wevent.mechanisms.allocators` compute only through an algebra, so running one with
`Z3Algebra` turns its budget logic into Z3 terms over symbolic requirement budgets and symbolic
publish/skip decisions: the proofs reason about the code that runs, not about a model of it.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import z3

__all__ = ["BRANCHED", "Z3Algebra", "real", "strict_truth", "where_it_left_the_algebra"]

BRANCHED = (
    "the kernel branched in Python on a Z3 term (an if or == on a budget); it must decide "
    "through the algebra (select, vmin, vmax)"
)
_Z3_BOOL = z3.AstRef.__bool__
_strict_depth = 0


def _strict_bool(self: Any) -> bool:
    if z3.is_true(self):
        return True
    if z3.is_false(self):
        return False
    raise z3.Z3Exception(BRANCHED)


@contextmanager
def strict_truth() -> Iterator[None]:
    """While kernels run on Z3 terms for a proof: ``bool()`` of any Z3 term but the literals
    True and False raises. Z3's own ``bool(a == b)`` answers by *structural* identity, so a
    kernel's ``if budget == x:`` would silently take one branch for a symbolic budget (a
    placeholder or parameter is never structurally a number) and the proof would be about other
    code than the one that runs. Re-entrant; restores Z3's behaviour on exit."""
    global _strict_depth
    if _strict_depth == 0:
        z3.AstRef.__bool__ = _strict_bool
    _strict_depth += 1
    try:
        yield
    finally:
        _strict_depth -= 1
        if _strict_depth == 0:
            z3.AstRef.__bool__ = _Z3_BOOL


def real(q: Fraction | int) -> Any:
    """An exact Z3 rational constant (Z3 terms are immutable, so one term per value is reused:
    proofs build hundreds of thousands of constants from a few dozen values)."""
    q = Fraction(q)
    return _real(q.numerator, q.denominator)


@lru_cache(maxsize=4096)
def _real(numerator: int, denominator: int) -> Any:
    return z3.RealVal(f"{numerator}/{denominator}")


def where_it_left_the_algebra(exc: BaseException, *also_skip: str) -> str | None:
    """Where a kernel stopped running on Z3 terms: the innermost frame of the traceback outside
    Z3, this module (`strict_truth` raises here) and the files ``also_skip`` (typically the
    kernel's ``if budget > x:`` or ``float(budget)``), as ``file:line: source``."""
    z3_dir = str(Path(z3.__file__).parent)
    skip = {str(Path(__file__)), *also_skip}
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(z3_dir) and f.filename not in skip
    ]
    if not frames:
        return None
    f = frames[-1]
    code = (f.line or "").strip()
    return f"{f.filename}:{f.lineno}" + (f": {code}" if code else "")


class Z3Algebra:
    """Z3 reals and Booleans (counts are exact reals too: no float emulation here)."""

    name = "z3"

    def const(self, q: Fraction | int) -> Any:
        return real(q)

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def sub(self, a: Any, b: Any) -> Any:
        return a - b

    def mul(self, a: Any, b: Any) -> Any:
        return a * b

    def scale(self, a: Any, k: Fraction | int) -> Any:
        return a * real(k)

    def le(self, a: Any, b: Any) -> Any:
        return a <= b

    def select(self, cond: Any, then: Any, other: Any) -> Any:
        return z3.If(cond, then, other)

    def and_(self, *terms: Any) -> Any:
        return z3.And(*terms) if terms else z3.BoolVal(True)

    def or_(self, *terms: Any) -> Any:
        return z3.Or(*terms) if terms else z3.BoolVal(False)

    def not_(self, a: Any) -> Any:
        return z3.Not(a)

    def truth(self, value: bool) -> Any:
        return z3.BoolVal(value)

    def ratio(self, a: Any, b: Any) -> Any:
        return z3.If(b == 0, real(0), a / b)

    def count_add(self, a: Any, b: Any) -> Any:
        return a + b

    def count_sub(self, a: Any, b: Any) -> Any:
        return a - b

    def floor(self, a: Any) -> Any:
        return z3.ToReal(z3.ToInt(a))
