"""Re-perturbation and Personalized Utility Enhancement (000 Theorem V.1, Eq. 8, Algorithm 2).

A GRR report made under a larger budget eps_H can be re-perturbed so that it is distributed exactly
as a report made under a smaller eps_L: keep the reported value with beta, move it to each other
value with gamma, where (000 Eq. 8)

    beta = (d p_L - p_L + p_H - 1) / (d p_H - 1),   gamma = (p_H - p_L) / (d p_H - 1).

beta, gamma >= 0 and beta + (d - 1) gamma = 1 exactly when p_L <= p_H (eps_L <= eps_H), and then
p_H beta + (1 - p_H) gamma = p_L: the re-perturbed report is an eps_L report (proved in `proofs`).
The sampler uses beta rounded down to its float grid, so its composed keep-probability is at most
p_L (a hair more private than eps_L; certified in `proofs`).
Re-perturbation is post-processing of an already-paid report: it costs nothing and is recorded as a
zero charge with `PostProcessing` evidence.

PUE (Algorithm 2) enhances each budget group with the re-perturbed reports of every group with a
larger budget. (Line 6 of the published listing reads RP(Y_i, eps_i, eps_i); the text and Theorem
V.1 make clear it is RP(Y_j, eps_j, eps_i) for each j > i, which is what we implement.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.evidence import PostProcessing
from wevent.accounting.spending import Spender
from wevent.mechanisms.oracles import GRR, randomized_response, randomized_response_counts
from wevent.mechanisms.rounding import grid_down

__all__ = ["Reperturbation", "pue", "reperturbation_probabilities"]

IntArray = npt.NDArray[np.int64]


def reperturbation_probabilities(
    d: int, p_low: Fraction, p_high: Fraction
) -> tuple[Fraction, Fraction]:
    """000 Eq. 8: (beta, gamma) taking GRR keep-probability p_high to p_low, exactly."""
    den = d * p_high - 1
    if den == 0:
        raise BudgetError("re-perturbation is undefined when d * p_H = 1 (no information)")
    beta = (d * p_low - p_low + p_high - 1) / den
    gamma = (p_high - p_low) / den
    if beta < 0 or gamma < 0:
        raise BudgetError("re-perturbation needs eps_L <= eps_H")
    return beta, gamma


@dataclass(frozen=True)
class Reperturbation:
    """RP from the GRR of a larger budget (``high``) to the GRR of a smaller one (``low``)."""

    high: GRR
    low: GRR
    beta: Fraction
    gamma: Fraction
    beta_float: float

    @classmethod
    def between(cls, high: GRR, low: GRR) -> Reperturbation:
        if high.d != low.d:
            raise BudgetError("both oracles need the same domain")
        if low.eps > high.eps:
            raise BudgetError(f"cannot re-perturb eps {high.eps} reports to the larger {low.eps}")
        beta, gamma = reperturbation_probabilities(high.d, low.p, high.p)
        # Rounding beta down (onto the generator's 2^-53 grid) moves the output towards uniform:
        # never less private than eps_L.
        return cls(high, low, beta, gamma, grid_down(beta))

    def apply(self, reports: npt.ArrayLike, rng: np.random.Generator) -> IntArray:
        """Per-report path (000 Eq. 8)."""
        return randomized_response(np.asarray(reports, np.int64), self.beta_float, self.high.d, rng)

    def apply_counts(self, histogram: npt.ArrayLike, rng: np.random.Generator) -> IntArray:
        """Aggregate path: the re-perturbed histogram directly."""
        return randomized_response_counts(np.asarray(histogram, np.int64), self.beta_float, rng)

    def record(self, spender: Spender, slot: int, group: str, mechanism: str = "pue") -> None:
        """A zero charge documenting the post-processing of ``group``'s reports."""
        note = f"reperturb eps {self.high.eps} -> {self.low.eps}"
        spender.spend(
            slot,
            Budget(0),
            group=group,
            part="reperturbation",
            mechanism=mechanism,
            evidence=PostProcessing(note),
        )


def pue(
    oracles: Sequence[GRR], histograms: Sequence[npt.ArrayLike], rng: np.random.Generator
) -> list[IntArray]:
    """000 Algorithm 2 on histograms: for each group (ascending budgets), its own reports plus the
    re-perturbed reports of every group with a larger budget. Returns one enhanced histogram per
    group; group i's holds sum_{j >= i} n_j reports, all distributed as eps_i reports."""
    order = sorted(range(len(oracles)), key=lambda k: oracles[k].eps)
    if [oracles[k].eps for k in order] != [o.eps for o in oracles]:
        raise BudgetError("pass the groups in ascending budget order")
    enhanced: list[IntArray] = []
    for i, low in enumerate(oracles):
        total = np.asarray(histograms[i], np.int64).copy()
        for j in range(i + 1, len(oracles)):
            total += Reperturbation.between(oracles[j], low).apply_counts(histograms[j], rng)
        enhanced.append(total)
    return enhanced
