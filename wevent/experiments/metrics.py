"""Utility metrics of the papers' experiments, computed from released and true histograms.

Every function takes per-slot arrays of shape (T, d): ``release`` (what the mechanism published,
repeated on skipped slots) and ``truth`` (the true statistic), either both counts or both
frequencies as the metric says. Metrics are reporting numbers, not privacy verdicts, so they are
floats.

* AMSE (000 Section VI-B): mean over slots and cells of the squared frequency error.
* AMRE (001 Eq. 5): (1/T) sum_t (1/d) ||r_t - c_t||^2 on counts. Despite its name the paper
  defines it as a squared error (its Tables 5-6 are counts squared: millions for N users).
* MRE (002 Section 7.1.4): mean relative error. 002 names it without a formula; we use the usual
  form (1/T) sum_t (1/d) sum_j |r_t(j) - c_t(j)| / max(c_t(j), delta), frequencies, with a sanity
  bound delta (default 0.001, i.e. 0.1% of the users) so that empty cells do not divide by zero.
* AJSD (000 Section VI-B, 001 Eq. 6): mean Jensen-Shannon divergence (natural log, so at most
  ln 2) between the released and the true distribution of each slot. A release may have negative
  cells (noise); it is clipped at 0 and renormalized first (an all-zero release is uniform).
* CFPU (002 Sections 5.4.3, 6.3.3): per-user reports per user per slot.
* TVE and MAE (004 Section VI-A): the sum and the largest of the absolute errors of every
  released entry (mean values of every slot, or the entries of an offline mean vector).
* Event-monitoring ROC (002 Section 7.4): a slot is an event when its true statistic exceeds
  delta = 0.75 (max - min) + min; a detector flags slots whose released statistic exceeds a
  threshold, and the ROC curve sweeps that threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "MRE_SANITY",
    "Roc",
    "ajsd",
    "amre",
    "amse",
    "as_distributions",
    "cfpu",
    "event_roc",
    "event_statistic",
    "event_threshold",
    "jsd",
    "mae",
    "mean_abs_error",
    "mre",
    "tve",
]

FloatArray = npt.NDArray[np.float64]

MRE_SANITY = 0.001  # 0.1% of the users: the floor of MRE's denominator (frequencies)


def _pair(release: npt.ArrayLike, truth: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    r = np.asarray(release, dtype=np.float64)
    c = np.asarray(truth, dtype=np.float64)
    if r.ndim == 1:
        r = r[None, :]
    if c.ndim == 1:
        c = c[None, :]
    if r.shape != c.shape or r.ndim != 2 or r.shape[0] < 1 or r.shape[1] < 1:
        raise ValueError(
            f"release and truth need the same shape (slots >= 1, d >= 1), got "
            f"{np.shape(release)} and {np.shape(truth)}"
        )
    if not (np.isfinite(r).all() and np.isfinite(c).all()):
        raise ValueError("release and truth must be finite")
    return r, c


def amse(release: npt.ArrayLike, truth: npt.ArrayLike) -> float:
    """000 Section VI-B: (1/(dT)) sum_t sum_j (f_hat_j,t - f_j,t)^2, on frequencies."""
    r, c = _pair(release, truth)
    return float(np.mean((r - c) ** 2))


def amre(release: npt.ArrayLike, truth: npt.ArrayLike) -> float:
    """001 Eq. 5: (1/T) sum_t (1/d) ||r_t - c_t||_2^2, on counts (the same formula as AMSE,
    applied to counts instead of frequencies: AMRE = n^2 AMSE for n users)."""
    r, c = _pair(release, truth)
    return float(np.mean(np.mean((r - c) ** 2, axis=1)))


def mre(release: npt.ArrayLike, truth: npt.ArrayLike, sanity: float = MRE_SANITY) -> float:
    """002 Section 7.1.4 (formula ours, see the module docstring): mean over slots and cells of
    |r - c| / max(c, sanity), on frequencies."""
    if not sanity > 0:
        raise ValueError(f"the sanity bound must be positive, got {sanity!r}")
    r, c = _pair(release, truth)
    return float(np.mean(np.abs(r - c) / np.maximum(c, sanity)))


def tve(release: npt.ArrayLike, truth: npt.ArrayLike) -> float:
    """004 Section VI-A: total variation error, ``sum_t ||x_hat_t - x_bar_t||_1``, the sum over
    slots and entries of the absolute error (004 applies it as well to range answers and to
    the mean residue vector of its offline tables, a single row)."""
    r, c = _pair(release, truth)
    return float(np.abs(r - c).sum())


def mae(release: npt.ArrayLike, truth: npt.ArrayLike) -> float:
    """004 Section VI-A: maximum absolute error, ``max_t ||x_hat_t - x_bar_t||_inf``, the
    largest absolute error over slots and entries of one run. 004 reports the average over its
    runs ("the average of 100 independent simulations"), so its tables estimate the expected
    maximum; our tables average it over the repeats the same way."""
    r, c = _pair(release, truth)
    return float(np.abs(r - c).max())


def mean_abs_error(release: npt.ArrayLike, truth: npt.ArrayLike) -> float:
    """streamdp-benchmark's MAE (Schäler et al., VLDB 2023; its ``Mechansim.mae``): the mean
    over slots and cells of ``|r - c|``, on counts. Not 004's MAE (`mae`, a maximum)."""
    r, c = _pair(release, truth)
    return float(np.mean(np.abs(r - c)))


def as_distributions(freq: npt.ArrayLike) -> FloatArray:
    """Each row clipped at 0 and scaled to sum 1 (an all-zero row becomes uniform)."""
    f = np.clip(np.asarray(freq, dtype=np.float64), 0.0, None)
    if f.ndim == 1:
        f = f[None, :]
    total = f.sum(axis=1, keepdims=True)
    d = f.shape[1]
    out: FloatArray = np.where(total > 0, f / np.where(total > 0, total, 1.0), 1.0 / d)
    return out


def jsd(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """Jensen-Shannon divergence (natural log) of each row pair of two distributions
    (001 Eq. 6): (1/2) KL(p || v) + (1/2) KL(q || v) with v = (p + q) / 2; 0 log 0 = 0."""
    a, b = _pair(p, q)
    v = (a + b) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ka = np.where(a > 0, a * np.log(a / np.where(v > 0, v, 1.0)), 0.0)
        kb = np.where(b > 0, b * np.log(b / np.where(v > 0, v, 1.0)), 0.0)
    out: FloatArray = np.clip(0.5 * (ka.sum(axis=1) + kb.sum(axis=1)), 0.0, math.log(2.0))
    return out


def ajsd(release: npt.ArrayLike, truth: npt.ArrayLike) -> float:
    """000 Section VI-B, 001 Eq. 6: the mean over slots of JSD(release_t || truth_t), each row
    made a distribution by `as_distributions`."""
    r, c = _pair(release, truth)
    return float(np.mean(jsd(as_distributions(r), as_distributions(c))))


def cfpu(reports: int, users: int, slots: int) -> float:
    """002 Sections 5.4.3, 6.3.3: per-user reports / (users x slots)."""
    if users < 1 or slots < 1 or reports < 0:
        raise ValueError(f"cfpu needs users, slots >= 1 and reports >= 0, got {users}, {slots}")
    return reports / (users * slots)


def event_statistic(freq: npt.ArrayLike) -> FloatArray:
    """002 Section 7.4: the monitored statistic per slot. Binary streams (d = 2): the frequency
    of value 1. d > 2: the histogram's mean value sum_j j f_t(j) / sum_j f_t(j) (our reading
    of 'the mean-value c_mean of the histogram'; the mean cell count would be constant)."""
    f = np.asarray(freq, dtype=np.float64)
    if f.ndim != 2 or f.shape[1] < 2:
        raise ValueError(f"event monitoring needs (slots, d >= 2) frequencies, got {f.shape}")
    if f.shape[1] == 2:
        return np.asarray(f[:, 1], dtype=np.float64)
    total = f.sum(axis=1)
    mean = (f * np.arange(f.shape[1])).sum(axis=1) / np.where(total != 0, total, 1.0)
    return np.asarray(mean, dtype=np.float64)


def event_threshold(series: npt.ArrayLike) -> float:
    """002 Section 7.4: delta = 0.75 (max(c) - min(c)) + min(c)."""
    s = np.asarray(series, dtype=np.float64)
    lo, hi = float(s.min()), float(s.max())
    return 0.75 * (hi - lo) + lo


@dataclass(frozen=True)
class Roc:
    """An ROC curve: false and true positive rates, from (0, 0) up to (1, 1), and its area."""

    fpr: FloatArray
    tpr: FloatArray
    auc: float
    events: int
    slots: int


def event_roc(released: npt.ArrayLike, true: npt.ArrayLike, delta: float | None = None) -> Roc:
    """002 Section 7.4: events are the slots whose true statistic exceeds ``delta`` (default
    `event_threshold` of the true series); the detector 'released > theta' is swept over every
    threshold theta. The area is NaN when the slots are all events or all non-events."""
    r = np.asarray(released, dtype=np.float64)
    c = np.asarray(true, dtype=np.float64)
    if r.shape != c.shape or r.ndim != 1 or len(r) < 1:
        raise ValueError(f"two series of the same length are needed, got {r.shape}, {c.shape}")
    d = event_threshold(c) if delta is None else delta
    positive = c > d
    p, n = int(positive.sum()), int((~positive).sum())
    order = np.argsort(-r, kind="stable")
    # Flag the slots in decreasing order of their released value; ties enter together.
    tp = np.cumsum(positive[order])
    fp = np.cumsum(~positive[order])
    last_of_tie = np.append(np.diff(r[order]) != 0, True)
    tp_pts = np.concatenate([[0], tp[last_of_tie]]).astype(np.float64)
    fp_pts = np.concatenate([[0], fp[last_of_tie]]).astype(np.float64)
    tpr = tp_pts / p if p else np.full_like(tp_pts, math.nan)
    fpr = fp_pts / n if n else np.full_like(fp_pts, math.nan)
    auc = float(np.trapezoid(tpr, fpr)) if p and n else math.nan
    return Roc(fpr, tpr, auc, p, len(c))
