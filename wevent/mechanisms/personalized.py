"""The personalized frequency oracle (000 Section IV-A: GPRR, PFO.P / PFO.A / PFO.E).

Users are grouped by distinct budget; each group reports through GRR with its own budget, and the
per-group estimates are combined with weights inversely proportional to each group's *average*
variance (000 Eq. 1, with the variance averaged over values because the true frequency is unknown).

Error formulas (000 Eq. 2, 4-7) for a population of n users where group k holds a share g_k:
* V_PLDP (Eq. 2): total variance over all d values, 1 / sum_k n / (d lambda_k + mu_k) with
  lambda_k = q_k (1 - q_k) / (g_k (p_k - q_k)^2), mu_k = (1 - p_k - q_k) / (g_k (p_k - q_k)).
* V_smpl (Eq. 4, 5): sampling z of n users, (n - z) / (z (n - 1)) (1 - sum f_j^2), bounded by
  (n - z) / (z (n - 1)).
* err (Eq. 7): (V_smpl(n, z) + V_PLDP(z)) / d.

Where the paper writes PFO.A as Count / (n q_k), we use the group's observed frequency
Count / n_k: that is what PFO.E's ``(h - q) / (p - q)`` needs to be unbiased.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.spending import Spender
from wevent.mechanisms.oracles import GRR, charge_reporters, check_values

__all__ = [
    "PersonalizedFO",
    "grr_count_variance",
    "reporting_error",
    "sampling_variance",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def grr_count_variance(eps: float, n: int, d: int) -> float:
    """Var_FO[eps, n] of 000 Example 1: n (d - 2 + e^eps) / (e^eps - 1)^2 (the variance of one
    estimated count of n GRR reports, frequency term dropped)."""
    e = math.exp(eps)
    return n * (d - 2 + e) / (e - 1) ** 2


def sampling_variance(n: int, z: int, f: npt.ArrayLike | None = None) -> float:
    """000 Eq. 4 (with frequencies ``f``) or its upper bound Eq. 5 (without): the variance of a
    frequency estimate from a sample of z of n users, summed over values."""
    if not 0 < z <= n or n < 2:
        raise BudgetError(f"need 0 < z <= n and n >= 2, got z={z}, n={n}")
    base = (n - z) / (z * (n - 1))
    if f is None:
        return base
    f_arr = np.asarray(f, dtype=np.float64)
    return float(base * (1 - np.sum(f_arr**2)))


@dataclass(frozen=True)
class PersonalizedFO:
    """GRR per distinct budget, combined by 000 Eq. 1. ``sizes[k]`` users hold ``oracles[k].eps``."""

    d: int
    oracles: tuple[GRR, ...]
    sizes: tuple[int, ...]

    @classmethod
    def for_budgets(cls, d: int, budgets: Mapping[Budget, int]) -> PersonalizedFO:
        """Groups by distinct budget (ascending); ``budgets`` maps each budget to its user count."""
        items = sorted((Budget(e), int(c)) for e, c in budgets.items() if int(c) > 0)
        if not items:
            raise BudgetError("the personalized oracle needs at least one reporting user")
        return cls(d, tuple(GRR.for_budget(d, e) for e, _ in items), tuple(c for _, c in items))

    @property
    def n(self) -> int:
        return sum(self.sizes)

    def average_variances(self) -> FloatArray:
        """Per group: the GRR variance of one value's estimate averaged over values (f = 1/d)."""
        return np.array(
            [o.average_variance(size) for o, size in zip(self.oracles, self.sizes, strict=True)]
        )

    def weights(self) -> FloatArray:
        """alpha_k of 000 Eq. 1: inverse average variance, normalized."""
        inverse = 1.0 / self.average_variances()
        weights: FloatArray = inverse / inverse.sum()
        return weights

    def total_variance(self, n: int | None = None) -> float:
        """V_PLDP of 000 Eq. 2: the combined estimate's variance summed over the d values, for
        ``n`` reporting users split in the same shares (default: the oracle's own sizes)."""
        total = self.n
        n_eff = total if n is None else n
        acc = 0.0
        for oracle, size in zip(self.oracles, self.sizes, strict=True):
            g = size / total
            p, q = float(oracle.p), float(oracle.q)
            lam = q * (1 - q) / (g * (p - q) ** 2)
            mu = (1 - p - q) / (g * (p - q))
            acc += n_eff / (self.d * lam + mu)
        return 1.0 / acc

    def estimate(self, histograms: Sequence[npt.ArrayLike]) -> FloatArray:
        """PFO.A + PFO.E (000 Eq. 1): combine each group's unbiased estimate by its weight.
        Each GRR histogram holds one report per user: its total must be the group's size
        (build a `PersonalizedFO` with the enhanced sizes to estimate from PUE output)."""
        if len(histograms) != len(self.oracles):
            raise BudgetError("one histogram per budget group is needed")
        est = np.zeros(self.d)
        for w, oracle, size, hist in zip(
            self.weights(), self.oracles, self.sizes, histograms, strict=True
        ):
            total = int(np.asarray(hist).sum())
            if total != size:
                raise BudgetError(f"a histogram of {total} reports for a group of {size} users")
            est += w * oracle.estimate(hist, size)
        return est

    def perturb_counts(
        self, counts: Sequence[npt.ArrayLike], rng: np.random.Generator
    ) -> list[IntArray]:
        """Aggregate path: each group's report histogram from its true value counts."""
        return [o.perturb_counts(c, rng) for o, c in zip(self.oracles, counts, strict=True)]

    def collect(
        self,
        spender: Spender,
        slot: int,
        values: Sequence[npt.ArrayLike],
        rng: np.random.Generator,
        *,
        users: Sequence[list[str]] | None = None,
        groups: Sequence[str] | None = None,
        part: str = "report",
        mechanism: str = "pfo",
    ) -> list[IntArray]:
        """PFO.P for every group: each group's reporters are charged their budget through the
        guard (all groups before any report is drawn), then report through GRR."""
        if len(values) != len(self.oracles):
            raise BudgetError("one value array per budget group is needed")
        vals = [check_values(v, self.d) for v in values]  # validated before anything is charged
        for k, v in enumerate(vals):
            if len(v) != self.sizes[k]:
                raise BudgetError(f"group {k} has {self.sizes[k]} users but {len(v)} values")
        for k, oracle in enumerate(self.oracles):
            charge_reporters(
                spender,
                slot,
                oracle.eps,
                oracle.evidence,
                reports=len(vals[k]),
                users=None if users is None else list(users[k]),
                group=None if groups is None else groups[k],
                part=part,
                mechanism=mechanism,
            )
        counts = [np.bincount(v, minlength=self.d) for v in vals]
        return self.perturb_counts(counts, rng)


def reporting_error(pfo: PersonalizedFO, n: int, z: int) -> float:
    """000 Eq. 7: (V_smpl(n, z) + V_PLDP with z reporters) / d."""
    return (sampling_variance(n, z) + pfo.total_variance(z)) / pfo.d
