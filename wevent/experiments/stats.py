"""Means with 95% intervals over repeats, and the verdict an interval supports.

The interval of a mean over ``n`` repeats is Student's t interval, ``mean +- t(0.975, n-1) *
std / sqrt(n)`` with the sample standard deviation (``ddof = 1``). One repeat has no interval
(its bounds are NaN), never a zero-width one. Student's quantile is found by bisection on the
exact distribution function (a finite series for an integer number of degrees of freedom), so
no statistics package is needed.

A claim "A is lower than B" is decided per seed (all mechanisms of one seed see the same stream,
population and noise seeds; `wevent.experiments.harness.run_sweep`): the paired reductions
``1 - A/B`` of the seeds give a mean and an interval, and the verdict is `HOLDS` when the whole
interval is above zero, `FAILS` when it is below, `INCONCLUSIVE` otherwise (also with fewer than
two seeds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

__all__ = [
    "FAILS",
    "HOLDS",
    "INCONCLUSIVE",
    "LEVEL",
    "Interval",
    "interval",
    "t_quantile",
    "verdict",
]

LEVEL = 0.95
HOLDS = "holds"
FAILS = "does not hold"
INCONCLUSIVE = "inconclusive"


def _t_two_sided(x: float, df: int) -> float:
    """P(|T| <= x) for Student's t with ``df`` degrees of freedom (x >= 0): the exact finite
    series for integer ``df`` in theta = atan(x / sqrt(df)) (Abramowitz and Stegun 26.7.3-4)."""
    theta = math.atan(x / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:  # sin(theta) * (1 + c2/2 + (1*3)/(2*4) c2^2 + ... up to c2^((df-2)/2))
        term = total = 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    # (2/pi) (theta + sin cos (1 + (2/3) c2 + (2*4)/(3*5) c2^2 + ... up to c2^((df-3)/2)))
    term = total = 1.0
    for k in range(1, (df - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + s * math.cos(theta) * total)


@cache
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, for 0.5 <= p < 1: the
    root of the exact distribution function, by bisection to double precision."""
    if df < 1:
        raise ValueError(f"Student's t needs at least 1 degree of freedom, got {df}")
    if not 0.5 <= p < 1:
        raise ValueError(f"quantile {p} outside [0.5, 1)")
    target = 2 * p - 1  # P(|T| <= x) at the quantile
    lo, hi = 0.0, 1.0
    while _t_two_sided(hi, df) < target:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if _t_two_sided(mid, df) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Interval:
    """Mean, sample standard deviation and the 95% interval of the mean over ``n`` values
    (NaN values left out; ``std``, ``low`` and ``high`` are NaN when ``n < 2``)."""

    mean: float
    std: float
    low: float
    high: float
    n: int

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


def interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    n = int(arr.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, 0)
    mean = float(arr.mean())
    if n == 1:
        return Interval(mean, math.nan, math.nan, math.nan, 1)
    std = float(arr.std(ddof=1))
    half = t_quantile((1 + level) / 2, n - 1) * std / math.sqrt(n)
    return Interval(mean, std, mean - half, mean + half, n)


def verdict(iv: Interval) -> str:
    """`HOLDS` if the interval lies above zero, `FAILS` if below, else `INCONCLUSIVE`."""
    if iv.n < 2 or math.isnan(iv.low):
        return INCONCLUSIVE
    if iv.low > 0:
        return HOLDS
    if iv.high < 0:
        return FAILS
    return INCONCLUSIVE
