"""Vectorized ternary-vector mechanisms for utility experiments: ExSub and 004's baselines.

Each mechanism maps n padded s-sparse ternary vectors (shape (n, d'), exactly s non-zero entries
per row) to n unbiased estimates of those vectors (``E[estimate] = R``), every row eps-LDP. They
feed 004's hierarchical protocol in `wevent.experiments.exsub_experiment`. These are *simulations* for
measuring error: the ledger-producing runtime path is `wevent.mechanisms.exsub_stream` (exact sampler,
charged through the guard); the tests tie the two together statistically.

* ``exsub``: 004 Definition 2 (subgroup drawn with float probabilities computed from the exact
  design, then uniform subsets), value estimator of Proposition 1.
* ``sample-grr`` (the PCKV-GRR / EFMRTT pattern of 004 Sections I, II: sample one non-zero entry,
  sanitize it with the full budget): one of the s symbols of S_R uniformly, reported through GRR
  over the 2d' symbols (p = e^eps / (e^eps + 2d' - 1)); estimate of R_j is
  ``s ([y = j_+] - [y = j_-]) / (p - q)``.
* ``sample-oue`` (the PCKV-UE / ToPL / DDRM(k=1) pattern): the sampled symbol one-hot over the
  2d' symbols, optimized unary encoding (p = 1/2, q = 1/(e^eps + 1)); estimate
  ``s (b_{j_+} - b_{j_-}) / (p - q)``.
* ``split-rr`` (per-dimension randomized response with the budget split): every entry through
  ternary GRR on {-1, 0, 1} with eps / (2s) (two padded s-sparse inputs differ in at most 2s
  entries); estimate ``([y_j = 1] - [y_j = -1]) / (p - q)``.

These baselines follow the papers' descriptions in 004, not the cited papers' code: PCKV's
budget split between key and value, DDRM's choice of k and EFMRTT's tree-node sampling are not
modelled (see docs/reproduction.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.exsub import ExSubDesign

__all__ = ["TERNARY", "exsub_estimates", "sample_grr", "sample_oue", "split_rr"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Ternary = Callable[[IntArray, int, Fraction, np.random.Generator], FloatArray]


def _support(R: IntArray, s: int) -> tuple[IntArray, IntArray]:
    """Per row: the s non-zero positions and the d' - s zero positions (each ascending)."""
    if ((R != 0).sum(axis=1) != s).any():
        raise BudgetError(f"every row needs exactly s = {s} non-zero entries (pad with stubs)")
    order = np.argsort(R == 0, axis=1, kind="stable")
    return order[:, :s], order[:, s:]


def _ranks(n: int, k: int, rng: np.random.Generator) -> IntArray:
    """n independent uniform permutations of range(k), as ranks."""
    if k == 0:
        return np.zeros((n, 0), np.int64)
    perm = np.argsort(rng.random((n, k)), axis=1)
    ranks: IntArray = np.empty((n, k), np.int64)
    np.put_along_axis(ranks, perm, np.broadcast_to(np.arange(k), (n, k)), axis=1)
    return ranks


def exsub_estimates(
    R: IntArray, s: int, eps: Fraction, rng: np.random.Generator, m: int | None = None
) -> FloatArray:
    """ExSub outputs (004 Algorithm 3 with exclusive false symbols) times ``1 / (p_t - p_r)``."""
    n, d_prime = R.shape
    design = ExSubDesign.for_budget(d_prime, s, eps, m)
    omega = design.omega
    probs = np.array([float(size * design.weight(nt) / omega) for nt, _, size in design.subgroups])
    pick = rng.choice(len(probs), size=n, p=probs / probs.sum())
    groups = np.array([(nt, nr) for nt, nr, _ in design.subgroups], np.int64)[pick]
    nt, nr = groups[:, :1], groups[:, 1:]
    nf = design.m - nt - nr
    nonzero, zero = _support(R, s)
    out = np.zeros((n, d_prime), np.int64)
    rank = _ranks(n, s, rng)
    values = np.take_along_axis(R, nonzero, axis=1)
    sign = np.where(rank < nt, 1, np.where(rank < nt + nr, -1, 0))
    np.put_along_axis(out, nonzero, values * sign, axis=1)
    zrank = _ranks(n, d_prime - s, rng)
    zsign = np.where(zrank < nf, rng.choice(np.array([-1, 1]), size=zrank.shape), 0)
    np.put_along_axis(out, zero, zsign, axis=1)
    est: FloatArray = out.astype(np.float64) * float(design.value_scale())
    return est


def _sampled_symbol(R: IntArray, s: int, rng: np.random.Generator) -> tuple[IntArray, IntArray]:
    nonzero, _ = _support(R, s)
    which = rng.integers(0, s, size=R.shape[0])
    j = nonzero[np.arange(R.shape[0]), which]
    return j, R[np.arange(R.shape[0]), j]


def sample_grr(R: IntArray, s: int, eps: Fraction, rng: np.random.Generator) -> FloatArray:
    """One sampled symbol through GRR over the 2d' symbols (see the module docstring)."""
    n, d_prime = R.shape
    k = 2 * d_prime
    e = math.exp(float(eps))
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    j, b = _sampled_symbol(R, s, rng)
    symbol = 2 * j + (b < 0)  # j_+ -> 2j, j_- -> 2j + 1
    keep = rng.random(n) < p
    other = rng.integers(0, k - 1, size=n)
    other = other + (other >= symbol)  # uniform over the other k - 1 symbols
    y = np.where(keep, symbol, other)
    out = np.zeros((n, d_prime))
    out[np.arange(n), y // 2] = np.where(y % 2 == 0, 1.0, -1.0)
    est: FloatArray = out * (s / (p - q))
    return est


def sample_oue(R: IntArray, s: int, eps: Fraction, rng: np.random.Generator) -> FloatArray:
    """One sampled symbol one-hot over the 2d' symbols, through OUE (see the module docstring)."""
    n, d_prime = R.shape
    p, q = 0.5, 1 / (math.exp(float(eps)) + 1)
    j, b = _sampled_symbol(R, s, rng)
    bits = np.zeros((n, d_prime, 2), bool)
    bits[np.arange(n), j, (b < 0).astype(np.int64)] = True
    noisy = np.where(bits, rng.random(bits.shape) < p, rng.random(bits.shape) < q)
    est: FloatArray = (noisy[:, :, 0].astype(float) - noisy[:, :, 1]) * (s / (p - q))
    return est


def split_rr(R: IntArray, s: int, eps: Fraction, rng: np.random.Generator) -> FloatArray:
    """Every entry through ternary GRR with eps / (2s) (see the module docstring)."""
    _support(R, s)
    e = math.exp(float(eps) / (2 * s))
    p, q = e / (e + 2), 1 / (e + 2)
    keep = rng.random(R.shape) < p
    shift = rng.integers(1, 3, size=R.shape)  # one of the two other values, uniformly
    y = np.where(keep, R, (R + 1 + shift) % 3 - 1)
    est: FloatArray = y.astype(float) / (p - q)
    return est


TERNARY: dict[str, Ternary] = {
    "exsub": exsub_estimates,
    "sample-grr": sample_grr,
    "sample-oue": sample_oue,
    "split-rr": split_rr,
}
