"""Means with 95% intervals over repeats, and the verdict an interval supports.

The interval of a mean over ``n`` repeats is Student's t interval, ``mean +- t(0.975, n-1) *
std / sqrt(n)`` with the sample standard deviation (``ddof = 1``). One repeat has no interval
(its bounds are NaN), never a zero-width one. Student's quantile is found by bisection on the
distribution function, which is the integral of the density (Simpson's rule on 4,096 panels:
accurate to about 1e-12 for the quantiles used here); numpy is the only dependency.

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


def _t_cdf_from_zero(x: float, df: int) -> float:
    """P(0 <= T <= x) for Student's t with ``df`` degrees of freedom (x >= 0)."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    grid = np.linspace(0.0, x, 4097)
    dens = np.exp(log_c - (df + 1) / 2 * np.log1p(grid * grid / df))
    h = x / 4096
    return float(h / 3 * (dens[0] + dens[-1] + 4 * dens[1:-1:2].sum() + 2 * dens[2:-1:2].sum()))


@cache
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, for 0.5 <= p < 1."""
    if df < 1:
        raise ValueError(f"Student's t needs at least 1 degree of freedom, got {df}")
    if not 0.5 <= p < 1:
        raise ValueError(f"quantile {p} outside [0.5, 1)")
    target = p - 0.5
    lo, hi = 0.0, 1.0
    while _t_cdf_from_zero(hi, df) < target:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if _t_cdf_from_zero(mid, df) < target:
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
