"""Directed conversion between exact rationals and the floats a sampler actually uses.

A mechanism draws its noise with floats. To keep the privacy accounting exact, every float
parameter is rounded in the direction that can only make the mechanism *more* private than its
budget needs (a larger noise scale, a smaller keep-probability, ...), and the ledger's evidence
records the float actually used, as its exact rational value.
"""

from __future__ import annotations

import math
from fractions import Fraction

from accounting.certified import exp_bounds

__all__ = ["exp_lower", "exp_upper", "float_down", "float_up"]


def float_up(x: Fraction) -> float:
    """The smallest float >= x."""
    f = float(x)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def float_down(x: Fraction) -> float:
    """The largest float <= x."""
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def exp_lower(x: Fraction) -> Fraction:
    """A rational certainly <= e^x."""
    return exp_bounds(x, x, 40)[0]


def exp_upper(x: Fraction) -> Fraction:
    """A rational certainly >= e^x."""
    return exp_bounds(x, x, 40)[1]
