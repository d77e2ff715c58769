"""Certified rational bounds for exp and ln.

`decimal.Decimal.exp` and `Decimal.ln` are correctly rounded (the Python documentation guarantees
an error of at most half a unit in the last place). We evaluate them at a directed-rounded decimal
endpoint of a rational interval and widen the result by one full unit in the last place, so the
returned rational interval always contains the true value. Both functions are monotone, so the
image of ``[lo, hi]`` is bounded by the images of its endpoints.
"""

from __future__ import annotations

from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

__all__ = ["exp_bounds", "ln_bounds"]


def _wide(ctx: object) -> None:
    """Widen a decimal context's exponent range: exp of a large cost must not overflow."""
    ctx.Emax = MAX_EMAX  # type: ignore[attr-defined]
    ctx.Emin = MIN_EMIN  # type: ignore[attr-defined]


def _to_decimal(x: Fraction, digits: int, *, up: bool) -> Decimal:
    with localcontext() as ctx:
        _wide(ctx)
        ctx.prec = digits
        ctx.rounding = ROUND_CEILING if up else ROUND_FLOOR
        return Decimal(x.numerator) / Decimal(x.denominator)


def _ulp(value: Decimal, digits: int) -> Fraction:
    if value == 0:
        return Fraction(1, 10 ** (digits + 10))
    return Fraction(10) ** (value.adjusted() - digits + 1)


def exp_bounds(lo: Fraction, hi: Fraction, digits: int = 40) -> tuple[Fraction, Fraction]:
    """Rational bounds ``[a, b]`` with ``a <= exp(x) <= b`` for every x in ``[lo, hi]``."""
    if lo > hi:
        raise ValueError("empty interval")
    with localcontext() as ctx:
        _wide(ctx)
        ctx.prec = digits
        a = _to_decimal(lo, digits, up=False).exp()
        b = _to_decimal(hi, digits, up=True).exp()
    low = Fraction(a) - _ulp(a, digits)
    return (max(low, Fraction(0)), Fraction(b) + _ulp(b, digits))


def ln_bounds(lo: Fraction, hi: Fraction, digits: int = 40) -> tuple[Fraction, Fraction]:
    """Rational bounds ``[a, b]`` with ``a <= ln(x) <= b`` for every x in ``[lo, hi]`` (lo > 0)."""
    if lo <= 0:
        raise ValueError("ln is only defined for positive arguments")
    if lo > hi:
        raise ValueError("empty interval")
    if lo == hi == 1:
        return (Fraction(0), Fraction(0))
    with localcontext() as ctx:
        _wide(ctx)
        ctx.prec = digits
        dlo = _to_decimal(lo, digits, up=False)
        if dlo <= 0:  # lo is positive but tiny: fall back to a representable positive lower end
            dlo = Decimal(1).scaleb(-(digits + 10) * 10)
        a = dlo.ln()
        b = _to_decimal(hi, digits, up=True).ln()
    return (Fraction(a) - _ulp(a, digits), Fraction(b) + _ulp(b, digits))
