"""Certified rational bounds for exp and ln.

`decimal.Decimal.exp` and `Decimal.ln` are correctly rounded (the Python documentation guarantees
an error of at most half a unit in the last place). We evaluate them at a directed-rounded decimal
endpoint of a rational interval and widen the result by one full unit in the last place, so the
returned rational interval always contains the true value. Both functions are monotone, so the
image of ``[lo, hi]`` is bounded by the images of its endpoints.
"""

from __future__ import annotations

import decimal
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

__all__ = ["exp_above", "exp_below", "exp_bounds", "ln_bounds"]


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


# Past |x| = _FAR, e^x as a rational has more than 4,000 digits, and Decimal's exp (its exponent
# range widened) gives one of |x| / 2.3 digits: for x = -2^62, a denominator no machine can hold
# (a requirement's epsilon of 2^62 hung `wevent run`). No evaluation is needed there:
# e^x < e^-_FAR < _TINY for x < -_FAR, and e^x >= e^_FAR is a (weaker) lower bound for x >= _FAR.
_FAR = 10_000
_TINY = Fraction(1, 10**4000)  # e^-10000 is about 10^-4343


def exp_below(x: Fraction, digits: int = 40) -> Fraction:
    """A rational ``a <= exp(x)``: 0 below -10,000, and ``e^10000``'s bound above 10,000."""
    if x < -_FAR:
        return Fraction(0)
    with localcontext() as ctx:
        _wide(ctx)
        ctx.prec = digits
        a = _to_decimal(min(x, Fraction(_FAR)), digits, up=False).exp()
    return max(Fraction(a) - _ulp(a, digits), Fraction(0))


def exp_above(x: Fraction, digits: int = 40) -> Fraction:
    """A rational ``b >= exp(x)``: ``10^-4000`` below -10,000. Above 10,000 it is a number of
    x / 2.3 digits, evaluated (`OverflowError` past Decimal's exponent range, x > 2.3 10^18):
    a caller keeps x within what it can afford."""
    if x < -_FAR:
        return _TINY
    with localcontext() as ctx:
        _wide(ctx)
        ctx.prec = digits
        try:
            b = _to_decimal(x, digits, up=True).exp()
        except decimal.Overflow:
            raise OverflowError("e^x has too many digits to bound (x above 2.3 10^18)") from None
    return Fraction(b) + _ulp(b, digits)


def exp_bounds(lo: Fraction, hi: Fraction, digits: int = 40) -> tuple[Fraction, Fraction]:
    """Rational bounds ``[a, b]`` with ``a <= exp(x) <= b`` for every x in ``[lo, hi]``
    (`exp_below` of lo, `exp_above` of hi)."""
    if lo > hi:
        raise ValueError("empty interval")
    return (exp_below(lo, digits), exp_above(hi, digits))


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
