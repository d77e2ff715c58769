"""The sampling mechanism SM and optimal budget selection OBS (001 Section 4.2-4.3, Algorithm 1).

SM (Jorgensen et al., as 001 uses it): pick a threshold eps_theta; users with eps_i >= eps_theta
are kept, users below it are kept with probability p_i = (e^eps_i - 1) / (e^eps_theta - 1); the
sampled data then goes through a Laplace mechanism achieving eps_theta-DP. By amplification, a user
sampled with p_i pays ln(1 + p_i (e^eps_theta - 1)) = eps_i.

Each user's charge is their allotted eps_i with evidence `Sampled(Laplace(...), p_i)` (or the plain
`Laplace` above the threshold). p_i is rounded *down* to a float and the Laplace scale *up*, so the
certified cost is <= eps_i.

Errors (001 Definitions 12-13): sampling error
err_s = sum_{eps_i < theta} n_i p_i (1 - p_i) + (sum_{eps_i < theta} n_i (1 - p_i))^2, and noise
error err_dp = 2 / theta^2; OBS returns the distinct budget minimizing their sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.evidence import Evidence, Laplace, Sampled
from wevent.accounting.ledger import Charge
from wevent.accounting.spending import Spender, spend_all
from wevent.mechanisms.noise import LaplaceMechanism
from wevent.mechanisms.rounding import exp_lower, exp_upper, float_down

__all__ = ["SamplingMechanism", "noise_error", "obs", "sampling_error"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _keep_probability(eps: float, theta: float) -> float:
    """(e^eps - 1) / (e^theta - 1), also for thresholds whose e^theta overflows a double."""
    if theta > 700:
        return math.exp(eps - theta) * math.expm1(-eps) / math.expm1(-theta)
    return math.expm1(eps) / math.expm1(theta)


def sampling_error(theta: float, budgets: Mapping[Budget, int]) -> float:
    """001 Definition 12: variance plus squared bias of the sampled count at threshold theta."""
    var = 0.0
    bias = 0.0
    for eps, count in budgets.items():
        if float(eps) < theta:
            p = _keep_probability(float(eps), theta)
            var += count * p * (1 - p)
            bias += count * (1 - p)
    return var + bias**2


def noise_error(theta: float) -> float:
    """001 Definition 13: the variance of Laplace noise at budget theta (sensitivity 1)."""
    square = theta * theta
    return 2.0 / square if square > 0 else math.inf  # a tiny threshold: unusable, not an error


def obs(budgets: Mapping[Budget, int]) -> tuple[Budget, float]:
    """001 Algorithm 1 (OBS): the distinct budget whose total error err_s + err_dp is smallest
    (the first such in ascending order on ties), and that error. ``budgets`` maps each distinct
    budget to its number of users."""
    best: tuple[Budget, float] | None = None
    for eps in sorted(budgets):
        if budgets[eps] <= 0:
            continue
        if eps <= 0:
            raise BudgetError("OBS needs positive budgets")
        err = sampling_error(float(eps), budgets) + noise_error(float(eps))
        if best is None or err < best[1]:
            best = (Budget(eps), err)
    if best is None:
        raise BudgetError("OBS needs at least one user")
    return best


# SamplingMechanism.evidence by (sensitivity, Laplace scale, keep probability).
_EVIDENCE: dict[tuple[Fraction, float, float], Evidence] = {}
_LARGE_THETA = 60  # above it, a keep-probability is bounded without computing e^theta


@dataclass(frozen=True)
class SamplingMechanism:
    """SM at threshold ``theta`` for classes with budgets ``budgets`` (eps -> number of users)."""

    theta: Budget
    laplace: LaplaceMechanism
    keep: dict[Budget, float]  # per distinct budget: the float keep-probability used (1 above)

    @classmethod
    def for_budgets(
        cls, budgets: Mapping[Budget, int], theta: Budget, sensitivity: Fraction | int = 1
    ) -> SamplingMechanism:
        theta_b = Budget(theta)
        if theta_b <= 0:
            raise BudgetError("the threshold must be positive")
        laplace = LaplaceMechanism.for_budget(sensitivity, theta_b)
        keep: dict[Budget, float] = {}
        for eps in budgets:
            e = Budget(eps)
            if e >= theta_b:
                keep[e] = 1.0
            elif theta_b > _LARGE_THETA:
                # p >= (e^eps - 1) / e^theta = e^(eps - theta) - e^-theta: exponents <= 0 only,
                # where e^theta would be a number of theta / 2.3 digits (a threshold of 2^62
                # hung the run); (e^eps - 1) / e^theta is p times 1 - e^-theta > 1 - e^-60.
                low = exp_lower(e - theta_b) - exp_upper(-theta_b)
                # For a tiny eps that difference cancels at 40 digits (0 at eps = 10^-41,
                # theta = 61); e^eps - 1 >= eps gives p >= eps e^-theta, also a lower bound.
                low = max(low, Fraction(e) * exp_lower(-theta_b))
                keep[e] = float_down(min(max(low, Fraction(0)), Fraction(1)))
            else:  # p = (e^eps - 1) / (e^theta - 1), a certified lower bound rounded down
                # e^x - 1 >= x and e^x - 1 <= x e^x keep tiny budgets meaningful where the
                # exp bounds alone would round to 1.
                num = max(exp_lower(e) - 1, Fraction(e))
                den = min(exp_upper(theta_b) - 1, theta_b * exp_upper(theta_b))
                keep[e] = float_down(min(num / den, Fraction(1)))
        return cls(theta_b, laplace, keep)

    def evidence(self, eps: Budget) -> Evidence:
        """What a user with budget ``eps`` is charged with. Equal evidence is one shared
        (immutable) object across slots, so the guard finds it by identity."""
        p = self.keep[Budget(eps)]
        key = (self.laplace.sensitivity, self.laplace.scale, p)
        found = _EVIDENCE.get(key)
        if found is None:
            inner = Laplace(self.laplace.sensitivity, Fraction(self.laplace.scale))
            found = inner if p == 1.0 else Sampled(inner, Fraction(p))
            if len(_EVIDENCE) >= 4096:
                _EVIDENCE.clear()
            _EVIDENCE[key] = found
        return found

    def check_counts(self, counts: Mapping[Budget, npt.ArrayLike]) -> int:
        """Every class histogram: known class, 1-D, non-negative integers, one common length
        (so one user moves exactly one count). Returns that length."""
        shapes = set()
        for eps, hist in counts.items():
            if Budget(eps) not in self.keep:
                raise BudgetError(f"no sampling probability for the class with budget {eps}")
            arr = np.asarray(hist)
            # dtype kinds "i"/"u": the integer types (np.issubdtype is several times slower)
            if arr.ndim != 1 or arr.dtype.kind not in "iu" or (arr.size and arr.min() < 0):
                raise BudgetError("class histograms are 1-D arrays of non-negative counts")
            shapes.add(arr.shape)
        if len(shapes) != 1:
            raise BudgetError("every class histogram needs the same number of values")
        return int(next(iter(shapes))[0])

    def sample_counts(
        self, counts: Mapping[Budget, npt.ArrayLike], rng: np.random.Generator
    ) -> IntArray:
        """SM_s on histograms: per class, each user is kept with its class's probability."""
        self.check_counts(counts)
        total: IntArray | None = None
        for eps, hist in counts.items():
            arr = np.asarray(hist, dtype=np.int64)
            p = self.keep[Budget(eps)]
            kept: IntArray = arr if p == 1.0 else rng.binomial(arr, p).astype(np.int64)
            total = kept if total is None else total + kept
        if total is None:
            raise BudgetError("no classes to sample")
        return total

    def charge(
        self,
        spender: Spender,
        slot: int,
        groups: Mapping[Budget, str],
        *,
        part: str,
        mechanism: str,
    ) -> None:
        """Charge the ledger group ``groups[eps]`` its ``eps`` for every class, with this
        mechanism's evidence, in one durable commit (before any noise is drawn)."""
        spend_all(
            spender,
            [
                Charge(
                    slot,
                    Budget(eps),
                    group=group,
                    part=part,
                    mechanism=mechanism,
                    evidence=self.evidence(eps),
                )
                for eps, group in groups.items()
            ],
        )

    def release(
        self,
        spender: Spender,
        slot: int,
        counts: Mapping[Budget, npt.ArrayLike],
        groups: Mapping[Budget, str],
        rng: np.random.Generator,
        *,
        part: str = "",
        mechanism: str = "sm",
    ) -> FloatArray:
        """Charge every class its allotted budget (guard first), then SM_s + SM_d: the sampled
        histogram plus Laplace noise at the threshold. ``groups[eps]`` names the ledger group of
        the class allotted ``eps``. Every class with data must be charged: ``counts`` and
        ``groups`` name the same classes (checked before anything is charged)."""
        self.check_counts(counts)
        if {Budget(e) for e in counts} != {Budget(e) for e in groups}:
            raise BudgetError("counts and groups must name the same classes")
        self.charge(spender, slot, groups, part=part, mechanism=mechanism)
        sampled = self.sample_counts(counts, rng)
        noisy: FloatArray = sampled + rng.laplace(0.0, self.laplace.scale, size=sampled.shape)
        return noisy
