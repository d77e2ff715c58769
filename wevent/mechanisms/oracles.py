"""Local frequency oracles: generalized randomized response (GRR) and optimized unary encoding (OUE).

Each user with budget eps perturbs their value locally; the server aggregates reports into a
histogram and estimates frequencies without bias.

* GRR (002 Section 3.4; 000 PFO.P): keep the true value with p = e^eps / (e^eps + d - 1), else
  report one of the other d-1 values uniformly (each with q = 1 / (e^eps + d - 1)).
* OUE (Wang et al., restated in 002): one bit per value; the user's bit stays 1 with p = 1/2, every
  other bit becomes 1 with q = 1 / (e^eps + 1).

Estimate (both): f_j = (c_j / n - q) / (p - q); variance
q (1 - q) / (n (p - q)^2) + f_j (1 - p - q) / (n (p - q)).

Two sampling paths with the same distribution: per user (each report, when reports are kept or
re-perturbed) and aggregate (the output histogram directly from binomials and multinomials).

Directed rounding: GRR's keep-probability p is rounded *down* and q set to exactly (1 - p)/(d - 1),
so p/q <= e^eps; OUE's q is rounded *up*. Both land on the 2^-53 grid of numpy's uniform
generator, so the per-user path's comparisons ``random() < p`` happen with exactly the recorded
probabilities. The evidence records those values. (The aggregate path draws from numpy's binomial
and multinomial samplers, whose own floating-point algorithms are outside this exactness claim.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.evidence import GRR as GRREvidence
from wevent.accounting.evidence import OUE as OUEEvidence
from wevent.accounting.ledger import Charge
from wevent.accounting.spending import Spender
from wevent.mechanisms.rounding import exp_lower, exp_upper, grid_down, grid_up

__all__ = [
    "GRR",
    "OUE",
    "FrequencyOracle",
    "charge_reporters",
    "check_values",
    "randomized_response",
    "randomized_response_counts",
    "reporters_charge",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
# GRR.for_budget / OUE.for_budget results by (class, d, budget); a run uses a handful of budgets.
_ORACLES: dict[tuple[type, int, Fraction], FrequencyOracle] = {}


def _check_domain(d: int) -> int:
    if isinstance(d, bool) or not isinstance(d, int) or d < 2:
        raise BudgetError(f"domain size d must be an integer >= 2, got {d!r}")
    return d


def _oracle_budget(d: int, eps: Budget, name: str) -> Budget:
    _check_domain(d)
    budget = Budget(eps)
    if budget <= 0:
        raise BudgetError(f"{name} needs a positive epsilon")
    return budget


def check_values(values: npt.ArrayLike, d: int) -> IntArray:
    arr = np.asarray(values)
    if arr.ndim != 1 or (
        arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() >= d)
    ):
        raise BudgetError(f"values must be a 1-D array of integers in [0, {d})")
    return arr.astype(np.int64, copy=False)


def _check_counts(counts: npt.ArrayLike, d: int) -> IntArray:
    arr = np.asarray(counts)
    if arr.shape != (d,) or not np.issubdtype(arr.dtype, np.integer) or (arr < 0).any():
        raise BudgetError(f"counts must be {d} non-negative integers")
    return arr.astype(np.int64, copy=False)


def reporters_charge(
    spender: Spender,
    slot: int,
    eps: Budget,
    evidence: Any,
    *,
    reports: int,
    users: list[str] | None = None,
    group: str | None = None,
    part: str = "report",
    mechanism: str = "",
    table: Sequence[str] | None = None,
    indices: IntArray | None = None,
) -> Charge | None:
    """The charge of ``eps`` to every reporting user as one group (None: no reporter), for
    `charge_reporters` or for a batch of such charges (`spend_all`). The reporters are ``users`` (one per report), or ``table[i] for i in
    indices`` (no per-user work when ``table`` is the population's canonical order), either
    defining a group named after the slot, the mechanism and the members; or ``group`` names one
    already defined, whose size must equal ``reports``."""
    given = (users is not None) + (group is not None) + (indices is not None)
    if given != 1 or (indices is None) != (table is None):
        raise BudgetError("name the reporters: exactly one of users, group or table + indices")
    if users is not None or indices is not None:
        count = len(users) if users is not None else len(indices if indices is not None else ())
        if count != reports:
            raise BudgetError(f"{reports} reports but {count} reporting users")
        if not count:
            return None
        if users is not None:
            key = "\x00".join(users).encode()
        else:
            assert indices is not None
            key = b"#" + np.ascontiguousarray(indices, np.int64).tobytes()
        digest = hashlib.blake2b(key, digest_size=6).hexdigest()
        group = f"{mechanism or 'report'}@{slot}#{digest}"  # deterministic: same run, same name
        if users is not None:
            spender.define_group(group, tuple(users))
        else:
            assert table is not None and indices is not None
            spender.define_group_by_index(group, table, np.asarray(indices, np.int64))
    else:
        assert group is not None
        size = spender.group_size(group)
        if size != reports:
            raise BudgetError(f"{reports} reports but group {group!r} has {size} members")
    return Charge(slot, eps, group=group, part=part, mechanism=mechanism, evidence=evidence)


def charge_reporters(
    spender: Spender, slot: int, eps: Budget, evidence: Any, **reporters: Any
) -> None:
    """Charge every reporting user ``eps`` in one atomic spend (a group charge), before any
    report is drawn; ``reporters`` name them as `reporters_charge` takes them (``reports``,
    and ``users``, ``group`` or ``table`` with ``indices``; ``part``, ``mechanism``)."""
    charge = reporters_charge(spender, slot, eps, evidence, **reporters)
    if charge is not None:
        spender.spend(
            slot,
            eps,
            group=charge.group,
            part=charge.part,
            mechanism=charge.mechanism,
            evidence=evidence,
        )


def randomized_response_counts(counts: IntArray, keep: float, rng: np.random.Generator) -> IntArray:
    """Histogram after each of ``counts[j]`` items keeps value j with probability ``keep`` and
    otherwise moves to one of the other d-1 values uniformly: Binomial(c_j, keep) stay, the rest
    spread multinomially. O(d^2) work, independent of the number of items."""
    d = len(counts)
    kept = rng.binomial(counts, keep)
    out = kept.astype(np.int64)
    others = np.full(d - 1, 1.0 / (d - 1))
    for j in np.flatnonzero(counts - kept).tolist():
        moved = rng.multinomial(int(counts[j] - kept[j]), others)
        out[:j] += moved[:j]
        out[j + 1 :] += moved[j:]
    return out


def randomized_response(
    values: IntArray, keep: float, d: int, rng: np.random.Generator
) -> IntArray:
    """Each value stays with probability ``keep``, else moves to a uniform other value."""
    stay = rng.random(values.shape) < keep
    shift = rng.integers(1, d, size=values.shape)  # uniform over the d-1 other values
    moved: IntArray = (values + shift) % d
    return np.where(stay, values, moved)


@dataclass(frozen=True)
class FrequencyOracle:
    """Shared estimation for GRR and OUE: both are 'pure' oracles with support probabilities p, q."""

    d: int
    eps: Budget
    p: Fraction  # exact rational values of the floats the sampler uses
    q: Fraction

    @classmethod
    def for_budget(cls, d: int, eps: Budget) -> Self:
        """The oracle for budget ``eps`` (memoized: oracles are immutable and certifying their
        probabilities costs exact exp bounds, so repeated slots reuse the same oracle and
        evidence objects)."""
        key = (cls, d, eps)
        found = _ORACLES.get(key)
        if found is None:
            found = _ORACLES[key] = cls._for_budget(d, eps)
        assert isinstance(found, cls)
        return found

    @classmethod
    def _for_budget(cls, d: int, eps: Budget) -> Self:
        raise NotImplementedError

    @property
    def evidence(self) -> Any:
        raise NotImplementedError

    def estimate(self, histogram: npt.ArrayLike, n: int) -> FloatArray:
        """Unbiased frequency estimates from the report histogram of ``n`` users."""
        if n <= 0:
            raise BudgetError("cannot estimate from zero reports")
        p, q = float(self.p), float(self.q)
        return (np.asarray(histogram, dtype=np.float64) / n - q) / (p - q)

    def variance(self, n: int, f: npt.ArrayLike | float = 0.0) -> FloatArray:
        """Variance of each estimate for true frequency ``f`` (approximate when f is unknown)."""
        p, q = float(self.p), float(self.q)
        f_arr = np.asarray(f, dtype=np.float64)
        return np.asarray(
            q * (1 - q) / (n * (p - q) ** 2) + f_arr * (1 - p - q) / (n * (p - q)), np.float64
        )

    def average_variance(self, n: int) -> float:
        """Variance averaged over values (f = 1/d), as 000 uses for its weights."""
        return float(self.variance(n, 1.0 / self.d))

    def collect(
        self,
        spender: Spender,
        slot: int,
        values: npt.ArrayLike,
        rng: np.random.Generator,
        *,
        users: list[str] | None = None,
        group: str | None = None,
        part: str = "report",
        mechanism: str = "",
        aggregate: bool = True,
    ) -> IntArray:
        """Charge the reporters (guard first), then return the report histogram.

        ``aggregate=True`` samples the histogram directly from the true counts; ``False``
        perturbs each report. Both have the same distribution."""
        vals = check_values(values, self.d)
        charge_reporters(
            spender,
            slot,
            self.eps,
            self.evidence,
            reports=len(vals),
            users=users,
            group=group,
            part=part,
            mechanism=mechanism or type(self).__name__.lower(),
        )
        if aggregate:
            return self.perturb_counts(np.bincount(vals, minlength=self.d), rng)
        return self.histogram(self.perturb(vals, rng))

    def perturb(self, values: npt.ArrayLike, rng: np.random.Generator) -> Any:
        raise NotImplementedError

    def histogram(self, reports: Any) -> IntArray:
        raise NotImplementedError

    def perturb_counts(self, counts: npt.ArrayLike, rng: np.random.Generator) -> IntArray:
        raise NotImplementedError


@dataclass(frozen=True)
class GRR(FrequencyOracle):
    """Generalized randomized response over values 0..d-1."""

    p_float: float = 0.0

    @classmethod
    def _for_budget(cls, d: int, eps: Budget) -> GRR:
        budget = _oracle_budget(d, eps, "GRR")
        # p = 1 / (1 + (d-1) e^-eps): a certified lower bound, rounded down to the 2^-53 grid of
        # the uniform generator, so that P[random() < p_float] is exactly the recorded p.
        p_float = grid_down(1 / (1 + (d - 1) * exp_upper(-budget)))
        p = Fraction(p_float)
        q = (1 - p) / (d - 1)
        if p <= q:
            raise BudgetError(f"epsilon {budget} is too small to represent for GRR")
        return cls(d, budget, p, q, p_float)

    @cached_property
    def evidence(self) -> GRREvidence:
        return GRREvidence(self.d, self.p, self.q)

    def perturb(self, values: npt.ArrayLike, rng: np.random.Generator) -> IntArray:
        """Each user's report: the true value with probability p, else a uniform other value."""
        return randomized_response(check_values(values, self.d), self.p_float, self.d, rng)

    def histogram(self, reports: Any) -> IntArray:
        return np.bincount(np.asarray(reports, np.int64), minlength=self.d).astype(np.int64)

    def perturb_counts(self, counts: npt.ArrayLike, rng: np.random.Generator) -> IntArray:
        """Output histogram for true counts: per true value, Binomial(c_j, p) keep their value and
        the rest spread multinomially over the other d-1 values. O(d^2), independent of n."""
        return randomized_response_counts(_check_counts(counts, self.d), self.p_float, rng)


@dataclass(frozen=True)
class OUE(FrequencyOracle):
    """Optimized unary encoding: p = 1/2 for the user's own bit, q = 1/(e^eps + 1) for others."""

    q_float: float = 0.0

    @classmethod
    def _for_budget(cls, d: int, eps: Budget) -> OUE:
        budget = _oracle_budget(d, eps, "OUE")
        # q rounded up (cost ln((1-q)/q) <= eps) onto the generator's grid, so P[random() < q]
        # is exactly the recorded q; p = 1/2 is on the grid.
        q_float = grid_up(1 / (1 + exp_lower(budget)))
        if q_float >= 0.5:
            raise BudgetError(f"epsilon {budget} is too small to represent for OUE")
        return cls(d, budget, Fraction(1, 2), Fraction(q_float), q_float)

    @cached_property
    def evidence(self) -> OUEEvidence:
        return OUEEvidence(self.p, self.q)

    def perturb(self, values: npt.ArrayLike, rng: np.random.Generator) -> npt.NDArray[np.bool_]:
        """Each user's report: a bit vector of length d."""
        vals = check_values(values, self.d)
        bits = rng.random((len(vals), self.d)) < self.q_float
        bits[np.arange(len(vals)), vals] = rng.random(len(vals)) < 0.5
        return bits

    def histogram(self, reports: Any) -> IntArray:
        ones: IntArray = np.asarray(reports, dtype=bool).sum(axis=0).astype(np.int64)
        return ones

    def perturb_counts(self, counts: npt.ArrayLike, rng: np.random.Generator) -> IntArray:
        """Count of 1-bits per value: Binomial(c_j, 1/2) + Binomial(n - c_j, q)."""
        c = _check_counts(counts, self.d)
        n = int(c.sum())
        ones: IntArray = rng.binomial(c, 0.5) + rng.binomial(n - c, self.q_float)
        return ones.astype(np.int64)
