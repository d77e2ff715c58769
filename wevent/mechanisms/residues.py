"""Hierarchical ternary residues of a binary vector stream (004 Section IV).

A user holds ``x_t`` in {0,1}^d at slots t = 1..T, with ``x_0 = 0``. At level h (granularity
``r^h``) the t'-th residue is ``R_{t',h} = x_{t' r^h} - x_{(t'-1) r^h}`` in {-1,0,1}^d (004
Algorithm 1). Any ``x_t`` is the sum of at most ``(r-1)`` residues per level, read off the base-r
digits of t (004 Algorithm 2); a range sum is a sum of such reconstructions.

Derivations the printed text leaves implicit (written down here):

* Levels. 004 takes ``h in [0 : ceil(log_r T)]``. Algorithm 1 emits a level-h residue only when
  ``t mod r^h = 0``, so level h holds ``T_h = floor(T / r^h)`` residues (004 writes ``ceil``; the
  two agree when r^h divides T) and a level with ``r^h > T`` holds none. We keep exactly the levels
  with ``r^h <= T``: ``H = floor(log_r T) + 1`` (= 004's ``ceil(log_r T) + 1`` when T is a power
  of r).
* Level weights (004 Section IV (4) b, c and Section VI-D). Mean queries: ``W_h = 1/H``. Range
  queries: 004 prints ``W_h proportional to r^h``. Calibrated range weights (VI-D): the variance
  factor of a level-h residue over the T prefix queries is
  ``F_h = sum_{t'=0}^{K} t'^2 + sum_{t'=K}^{T-r^h} K^2`` with ``K = (r-1) r^h`` (the second sum is
  empty when ``T - r^h < K``; 004's closed form drops that case and goes negative at the top
  level), and 004 sets ``W_h`` proportional to ``F_h / r^h`` (its printed ``(...) r^h`` equals
  ``F_h / ((r-1)^2 r^h)``). Note: minimizing ``sum_h c_h / W_h`` over the simplex gives
  ``W_h`` proportional to ``sqrt(c_h)``, not ``c_h``; we implement 004's weights as printed and
  offer ``"sqrt-calibrated"`` (the Lagrange minimizer of the same objective) as an option.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError

__all__ = [
    "WEIGHTS",
    "level_count",
    "level_weights",
    "levels",
    "reconstruct",
    "reconstruction_terms",
    "residues",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

WEIGHTS = ("uniform", "range", "calibrated", "sqrt-calibrated")


def _check(T: int, r: int) -> None:
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise BudgetError(f"the number of slots T must be a positive integer, got {T!r}")
    if isinstance(r, bool) or not isinstance(r, int) or r < 2:
        raise BudgetError(f"the fan-out r must be an integer >= 2, got {r!r}")


def levels(T: int, r: int) -> list[int]:
    """The levels h with ``r^h <= T`` (each holds at least one residue)."""
    _check(T, r)
    out, h = [], 0
    while r**h <= T:
        out.append(h)
        h += 1
    return out


def level_count(T: int, r: int, h: int) -> int:
    """``T_h = floor(T / r^h)``: how many residues Algorithm 1 emits at level h."""
    _check(T, r)
    return T // int(r**h)


def residues(x: npt.ArrayLike, r: int, h: int) -> IntArray:
    """004 Algorithm 1: the level-h residues of a (T, d) 0/1 stream, shape ``(T_h, d)``.

    Row t'-1 is ``x_{t' r^h} - x_{(t'-1) r^h}`` with ``x_0 = 0``."""
    arr = np.asarray(x, dtype=np.int64)
    if arr.ndim != 2:
        raise BudgetError("a stream is a (T, d) array of 0/1 values")
    T = arr.shape[0]
    _check(T, r)
    if ((arr != 0) & (arr != 1)).any():
        raise BudgetError("stream values must be 0 or 1")
    step = r**h
    picked = arr[step - 1 :: step]  # x at slots step, 2 step, ... (0-based index t - 1)
    previous = np.vstack([np.zeros((1, arr.shape[1]), np.int64), picked[:-1]])
    out: IntArray = (picked - previous).astype(np.int64)
    return out


def reconstruction_terms(t: int, r: int, top: int) -> list[tuple[int, int, int]]:
    """004 Algorithm 2 for slot t: the residues ``(h, first t', last t')`` whose sum is ``x_t``.

    Line 3: at level h the block offset is ``floor(t / r^{h+1}) r`` and the digit is
    ``floor(rest / r^h)``; line 6 adds residues ``offset+1 .. offset+digit``. The levels used run
    from ``top`` down to 0."""
    if t < 0:
        raise BudgetError(f"slot {t} is negative")
    out: list[tuple[int, int, int]] = []
    rest = t
    for h in range(top, -1, -1):
        offset = (t // r ** (h + 1)) * r
        digit = rest // r**h
        rest %= r**h
        if digit > 0:
            out.append((h, offset + 1, offset + digit))
    return out


def reconstruct(estimates: Sequence[npt.ArrayLike], r: int, T: int) -> FloatArray:
    """004 Algorithm 2 for every slot: ``estimates[h]`` has shape ``(T_h, d)``; returns ``(T, d)``.

    With exact residues this returns the stream itself (telescoping sums)."""
    ests = [np.asarray(e, dtype=np.float64) for e in estimates]
    top = len(ests) - 1
    d = ests[0].shape[1]
    # Prefix sums per level make each term O(d).
    prefix = [np.vstack([np.zeros((1, d)), np.cumsum(e, axis=0)]) for e in ests]
    out = np.zeros((T, d))
    for t in range(1, T + 1):
        for h, lo, hi in reconstruction_terms(t, r, top):
            out[t - 1] += prefix[h][hi] - prefix[h][lo - 1]
    return out


def _prefix_factor(T: int, r: int, h: int) -> int:
    step = int(r**h)
    k = (r - 1) * step
    first = k * (k + 1) * (2 * k + 1) // 6  # sum_{t'=0}^{K} t'^2
    count = max(0, T - step - k + 1)  # terms t' = K .. T - r^h
    return first + count * k * k


def level_weights(T: int, r: int, kind: str = "uniform") -> list[Fraction]:
    """Hierarchy selection portions ``W_h`` over `levels` (exact, summing to 1), 004 Section IV
    (4) b (``uniform``), c (``range``: proportional to r^h), Section VI-D (``calibrated``), and
    ``sqrt-calibrated`` (square roots of the calibrated factors, rounded down to 1e-12 relative;
    the minimizer of the same variance objective, see the module docstring)."""
    hs = levels(T, r)
    if kind == "uniform":
        raw = [Fraction(1)] * len(hs)
    elif kind == "range":
        raw = [Fraction(r**h) for h in hs]
    elif kind in {"calibrated", "sqrt-calibrated"}:
        raw = [Fraction(_prefix_factor(T, r, h), r**h) for h in hs]
        if kind == "sqrt-calibrated":
            raw = [Fraction(math.isqrt(int(f * 10**24)), 10**12) for f in raw]
    else:
        raise BudgetError(f"unknown level weights {kind!r} (known: {', '.join(WEIGHTS)})")
    total = sum(raw, Fraction(0))
    return [w / total for w in raw]
