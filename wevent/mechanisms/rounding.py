"""Directed conversion between exact rationals and the floats a sampler actually uses.

A mechanism draws its noise with floats. To keep the privacy accounting exact, every float
parameter is rounded in the direction that can only make the mechanism *more* private than its
budget needs (a larger noise scale, a smaller keep-probability, ...), and the ledger's evidence
records the float actually used, as its exact rational value.
"""

from __future__ import annotations

import math
from fractions import Fraction

from wevent.accounting.certified import exp_above, exp_below

__all__ = ["exp_lower", "exp_upper", "float_down", "float_up", "grid_down", "grid_up"]

# numpy's Generator.random() returns k / 2^53 for a uniform integer k < 2^53, so the event
# random() < t has probability exactly t when t lies on that grid (ceil(t 2^53) / 2^53 otherwise).
_GRID = 2**53


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
    return exp_below(x, 40)


def exp_upper(x: Fraction) -> Fraction:
    """A rational certainly >= e^x."""
    return exp_above(x, 40)


def grid_down(x: Fraction) -> float:
    """The largest multiple of 2^-53 that is <= x (x in [0, 1]): a threshold for random() < t
    whose probability is exactly the returned value."""
    return math.floor(x * _GRID) / _GRID


def grid_up(x: Fraction) -> float:
    """The smallest multiple of 2^-53 that is >= x (x in [0, 1])."""
    return math.ceil(x * _GRID) / _GRID
