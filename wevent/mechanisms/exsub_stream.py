"""004's online protocol: hierarchy level selection, ExSub per user, server reconstruction.

Each user (004 Section IV):

1. before the stream, draws a level h with the public portions ``W`` (data-independent), charges
   its whole-stream budget eps once (one `wevent.accounting.ExSub` evidence), and draws the ExSub
   subgroup (Algorithm 4 line 1);
2. at every slot t with ``t mod r^h = 0`` computes the level-h residue (Algorithm 1) and feeds its d
   entries to the online sampler (Algorithm 4 lines 5-24), sending the selected symbols at once;
3. after the stream, the s - k stub entries (004 Section V "Data Preparation": ``i_+`` for the
   first s - k stub positions, k the non-zero residues seen) are fed too; their outputs are never
   sent (a function of the output: post-processing), they only complete the sampler.

The server averages the unbiased value estimates ``z / (p_t - p_r)`` of the users at each level
(004 Section IV (3)) and reconstructs ``x_t`` with Algorithm 2, using only residues already
reported at slot t.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.exsub import (
    Chooser,
    ExSubDesign,
    OnlineSampler,
    SparsityExceeded,
    choose_subgroup,
)
from wevent.mechanisms.residues import (
    WEIGHTS,
    level_count,
    level_weights,
    levels,
    reconstruct,
    reconstruction_terms,
)

__all__ = [
    "ExSubClient",
    "ExSubProtocol",
    "ExSubServer",
    "change_count",
    "level_variance_factors",
    "sparse_streams",
    "variance_optimal_weights",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ExSubProtocol:
    """The public parameters: horizon T, dimension d, fan-out r, sparsity s, level portions."""

    T: int
    d: int
    s: int
    r: int = 2
    weights: str = "uniform"

    def __post_init__(self) -> None:
        for name in ("T", "d", "s", "r"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise BudgetError(f"exsub: {name} must be a positive integer, got {v!r}")
        if self.weights not in WEIGHTS:
            raise BudgetError(f"unknown level weights {self.weights!r} ({', '.join(WEIGHTS)})")
        levels(self.T, self.r)  # validates r >= 2

    @property
    def levels(self) -> list[int]:
        return levels(self.T, self.r)

    @property
    def portions(self) -> list[Fraction]:
        return level_weights(self.T, self.r, self.weights)

    def d_prime(self, h: int) -> int:
        """004 Section V: ``d' = d T_h + s`` (the level-h residues plus s stub entries)."""
        return self.d * level_count(self.T, self.r, h) + self.s

    def design(self, h: int, eps: Fraction) -> ExSubDesign:
        return ExSubDesign.for_budget(self.d_prime(h), self.s, eps)

    def draw_level(self, chooser: Chooser) -> int:
        """A level with probability ``W_h`` exactly (one uniform integer below the common
        denominator)."""
        portions = self.portions
        den = 1
        for w in portions:
            den = den * w.denominator // _gcd(den, w.denominator)
        u = chooser.below(den)
        for h, w in zip(self.levels, portions, strict=True):
            k = int(w * den)
            if u < k:
                return h
            u -= k
        raise AssertionError("unreachable")  # pragma: no cover


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


class ExSubClient:
    """One user's side of the protocol (see the module docstring); `observe` takes ``x_t``."""

    def __init__(
        self, protocol: ExSubProtocol, eps: Fraction, chooser: Chooser, level: int | None = None
    ) -> None:
        self.protocol = protocol
        self.level = protocol.draw_level(chooser) if level is None else level
        if self.level not in protocol.levels:
            raise BudgetError(f"exsub: level {self.level} is not one of {protocol.levels}")
        self.design = protocol.design(self.level, eps)
        self.chooser = chooser
        self.sampler: OnlineSampler | None = None
        self.previous = np.zeros(protocol.d, np.int64)
        self.t = 0
        self.nonzeros = 0

    def start(self) -> None:
        """Draw the subgroup (Algorithm 4 line 1). Call after the budget is charged."""
        self.sampler = OnlineSampler(
            self.design, choose_subgroup(self.design, self.chooser), self.chooser
        )

    def observe(self, x_t: npt.ArrayLike) -> list[tuple[int, int]]:
        """Slot t's report: ``(index in the level vector (0-based), sign)`` for each sent symbol."""
        if self.sampler is None:
            raise BudgetError("exsub: start() the client (after charging its budget) first")
        x = np.asarray(x_t, dtype=np.int64)
        if x.shape != (self.protocol.d,) or ((x != 0) & (x != 1)).any():
            raise BudgetError(f"exsub: x_t must be a 0/1 vector of length {self.protocol.d}")
        self.t += 1
        if self.t > self.protocol.T:
            raise BudgetError(f"exsub: more than T = {self.protocol.T} slots")
        step = self.protocol.r**self.level
        if self.t % step:
            return []
        residue = x - self.previous  # Algorithm 1, line 6
        self.previous = x
        t_prime = self.t // step
        report = []
        for j, v in enumerate(residue.tolist()):
            if v:
                self.nonzeros += 1
                if self.nonzeros > self.protocol.s:
                    raise SparsityExceeded(
                        f"exsub: more than s = {self.protocol.s} changes at level {self.level} "
                        f"by slot {self.t}"
                    )
            out = self.sampler.step(v)
            if out:
                report.append(((t_prime - 1) * self.protocol.d + j, out))
        return report

    def finish(self) -> None:
        """Feed the stub entries (never sent); afterwards every symbol has been placed."""
        if self.sampler is None:
            raise BudgetError("exsub: start() the client first")
        real = self.design.d_prime - self.protocol.s
        if self.sampler.seen < real:
            raise BudgetError(f"exsub: finish() after {self.t} of {self.protocol.T} slots")
        for k in range(self.protocol.s):
            self.sampler.step(1 if k < self.protocol.s - self.nonzeros else 0)


class ExSubServer:
    """Averages value estimates per level (004 Section IV (3)) and reconstructs (Algorithm 2)."""

    def __init__(self, protocol: ExSubProtocol) -> None:
        self.protocol = protocol
        self.sums = {
            h: np.zeros((level_count(protocol.T, protocol.r, h), protocol.d))
            for h in protocol.levels
        }
        self.users = dict.fromkeys(protocol.levels, 0)

    def enroll(self, client: ExSubClient) -> None:
        self.users[client.level] += 1

    def receive(self, client: ExSubClient, report: list[tuple[int, int]]) -> None:
        scale = float(client.design.value_scale())
        d = self.protocol.d
        for index, sign in report:
            self.sums[client.level][index // d, index % d] += sign * scale

    def residue_estimates(self) -> list[FloatArray]:
        return [
            self.sums[h] / self.users[h] if self.users[h] else np.zeros_like(self.sums[h])
            for h in self.protocol.levels
        ]

    def estimates(self) -> FloatArray:
        """``x_hat_t`` for t = 1..T, shape (T, d): the population mean of x_t, unbiased."""
        return reconstruct(self.residue_estimates(), self.protocol.r, self.protocol.T)


def change_count(x: npt.ArrayLike) -> IntArray:
    """Changes per user of (n, T, d) 0/1 streams, with ``x_0 = 0``: ``sum_t ||x_t - x_{t-1}||_1``."""
    arr = np.asarray(x, dtype=np.int64)
    first = np.abs(arr[:, :1]).sum(axis=(1, 2))
    rest = np.abs(np.diff(arr, axis=1)).sum(axis=(1, 2))
    out: IntArray = (first + rest).astype(np.int64)
    return out


def sparse_streams(n: int, T: int, d: int, s: int, rng: np.random.Generator) -> IntArray:
    """004 Section VI-A's synthetic data: each user has exactly s changes at cells drawn uniformly
    from the T d (slot, dimension) cells; in each dimension the changes alternate +1, -1 starting
    from ``x_0 = 0``, so the stream stays 0/1. Shape (n, T, d)."""
    if s > T * d:
        raise BudgetError(f"s = {s} changes do not fit in T d = {T * d} cells")
    keys = rng.random((n, T * d))
    cells = np.argsort(keys, axis=1)[:, :s]
    flips = np.zeros((n, T * d), np.int64)
    np.put_along_axis(flips, cells, 1, axis=1)
    x: IntArray = (np.cumsum(flips.reshape(n, T, d), axis=1) % 2).astype(np.int64)
    return x


def level_variance_factors(
    T: int, r: int, d: int, s: int, eps: Fraction, task: str = "range"
) -> list[float]:
    """``c_h = sigma_h^2 A_h`` per level (see `variance_optimal_weights`): the total variance of
    the task's answers is ``sum_h c_h / (n W_h)``."""
    if task not in {"mean", "range"}:
        raise BudgetError(f"unknown task {task!r} (mean or range)")
    hs = levels(T, r)
    top = len(hs) - 1
    use = {h: np.zeros((T, level_count(T, r, h))) for h in hs}
    for t in range(1, T + 1):
        for h, lo, hi in reconstruction_terms(t, r, top):
            use[h][t - 1, lo - 1 : hi] = 1
    out = []
    for h in hs:
        if task == "mean":
            a = float(use[h].sum())
        else:  # sum over i < j of (P_j - P_i)^2 = N sum P^2 - (sum P)^2, per residue
            prefix = np.vstack([np.zeros((1, use[h].shape[1])), np.cumsum(use[h], axis=0)])
            a = float(((T + 1) * (prefix**2).sum(axis=0) - prefix.sum(axis=0) ** 2).sum())
        d_prime = d * level_count(T, r, h) + s
        design = ExSubDesign.for_budget(d_prime, s, eps)
        out.append(float(design.value_mse()) / d_prime * a)
    return out


def variance_optimal_weights(
    T: int, r: int, d: int, s: int, eps: Fraction, task: str = "range"
) -> list[Fraction]:
    """Level portions minimizing the total variance of the task's answers (our derivation, not
    004's): a level-h residue average has variance ``sigma_h^2 / (n W_h)`` with ``sigma_h^2`` the
    ExSub per-entry variance at that level (004 Lemma 1's total over d'_h entries, divided by
    d'_h); it enters the answers with the exact coefficients of Algorithm 2, ``A_h`` = the sum of
    their squares over all answers (every x_t for ``mean``, every range [t1, t2] for ``range``).
    ``sum_h sigma_h^2 A_h / W_h`` is minimal over the simplex at ``W_h`` proportional to
    ``sqrt(sigma_h^2 A_h)`` (Lagrange). The sampling error of drawing users into levels is
    ignored (as 004 does). Rounded to rationals (1e-9), exact sum 1."""
    raw = [
        Fraction(float(np.sqrt(c))).limit_denominator(10**9)
        for c in level_variance_factors(T, r, d, s, eps, task)
    ]
    total = sum(raw, Fraction(0))
    return [w / total for w in raw]
