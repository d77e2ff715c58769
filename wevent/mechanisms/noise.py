"""Central-model noise: the Laplace and discrete Laplace mechanisms, spending through a guard.

Each mechanism charges its budget through a `Spender` (the runtime guard) *before* any noise is
drawn, with evidence of the exact parameter the sampler uses; a refused spend raises and no
randomness is consumed.

Directed rounding: the Laplace scale is the smallest float >= sensitivity/eps, so the certified cost
sensitivity/scale is <= eps. The discrete Laplace (two-sided geometric) sampler uses a ratio
alpha = 1 - p_geo with p_geo rounded down, i.e. alpha >= e^(-eps/sensitivity) (more noise), and the
evidence records the scale -1/ln(alpha) rounded down, so the recomputed cost never undercounts.
(numpy's own Laplace and geometric samplers are floating-point algorithms; their deviation from
the ideal distributions is outside this claim, as it is for every float-based DP library.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.certified import ln_bounds
from wevent.accounting.evidence import DiscreteLaplace, Laplace, certify_cost
from wevent.accounting.spending import Spender
from wevent.mechanisms.rounding import exp_upper, float_down, float_up

__all__ = ["DiscreteLaplaceMechanism", "LaplaceMechanism"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Smallest geometric success probability we sample with: typical draws are ~1/p and the tail to
# 50/p stays far below the int64 limit.
_MIN_P_GEO = 2.0**-40


def _positive(value: Fraction, what: str) -> Fraction:
    if value <= 0:
        raise BudgetError(f"{what} must be positive, got {value}")
    return value


class _Charged:
    """Shared by the noise mechanisms: charge ``eps`` with this mechanism's evidence."""

    eps: Budget

    @property
    def evidence(self) -> Laplace | DiscreteLaplace:
        raise NotImplementedError

    def charge(
        self,
        spender: Spender,
        slot: int,
        user: str | None,
        group: str | None,
        part: str,
        mechanism: str,
    ) -> None:
        spender.spend(
            slot,
            self.eps,
            user=user,
            group=group,
            part=part,
            mechanism=mechanism,
            evidence=self.evidence,
        )


@dataclass(frozen=True)
class LaplaceMechanism(_Charged):
    """Adds Laplace(scale) noise to a query of the given L1 sensitivity; costs ``eps``."""

    sensitivity: Fraction
    eps: Budget
    scale: float  # the float the sampler uses: the smallest float >= sensitivity / eps

    @classmethod
    def for_budget(cls, sensitivity: Fraction | int, eps: Budget) -> LaplaceMechanism:
        sens = _positive(Fraction(sensitivity), "sensitivity")
        budget = Budget(_positive(Fraction(eps), "epsilon"))
        try:
            scale = float_up(sens / budget)
        except OverflowError:
            raise BudgetError(
                f"sensitivity/epsilon = {sens / budget} is beyond a float scale"
            ) from None
        if scale == math.inf:
            raise BudgetError(f"sensitivity/epsilon = {sens / budget} is beyond a float scale")
        return cls(sens, budget, scale)

    @property
    def evidence(self) -> Laplace:
        return Laplace(self.sensitivity, Fraction(self.scale))

    @property
    def variance(self) -> float:
        """Variance of one noise draw, 2 scale^2 (display/estimation only)."""
        return 2 * self.scale**2

    def release(
        self,
        spender: Spender,
        slot: int,
        values: npt.ArrayLike,
        rng: np.random.Generator,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "laplace",
    ) -> FloatArray:
        """Charge ``eps`` (guard first), then return ``values`` plus independent noise."""
        self.charge(spender, slot, user, group, part, mechanism)
        data = np.asarray(values, dtype=np.float64)
        return data + rng.laplace(0.0, self.scale, size=data.shape)


@dataclass(frozen=True)
class DiscreteLaplaceMechanism(_Charged):
    """Adds two-sided geometric noise, P(k) proportional to alpha^|k|, to integer counts."""

    sensitivity: int
    eps: Budget
    p_geo: float  # success probability of each geometric draw; alpha = 1 - p_geo
    scale: Fraction  # recorded scale, <= -1/ln(alpha): the evidence never undercounts

    @classmethod
    def for_budget(cls, sensitivity: int, eps: Budget) -> DiscreteLaplaceMechanism:
        if isinstance(sensitivity, bool) or not isinstance(sensitivity, int) or sensitivity < 1:
            raise BudgetError(f"sensitivity must be a positive integer, got {sensitivity!r}")
        budget = Budget(_positive(Fraction(eps), "epsilon"))
        # alpha >= e^(-eps/sens): p_geo <= 1 - e^(-eps/sens), one float step lower for margin.
        alpha_min = exp_upper(-budget / sensitivity)
        p_geo = math.nextafter(float_down(1 - alpha_min), 0.0)
        if p_geo < _MIN_P_GEO:
            # numpy's geometric draws saturate at the int64 limit for tiny p: the difference of two
            # saturated draws is 0, which would release the count without noise.
            raise BudgetError(
                f"epsilon/sensitivity {budget / sensitivity} is too small for the discrete Laplace "
                "sampler (noise would exceed int64 counts); use the continuous Laplace mechanism"
            )
        alpha = 1 - Fraction(p_geo)
        lo, _ = ln_bounds(alpha, alpha, 60)  # ln(alpha) >= lo (both negative)
        scale = Fraction(-1) / lo  # rounding down the scale rounds the recorded cost up
        mech = cls(sensitivity, budget, p_geo, scale)
        if not certify_cost(mech.evidence, budget).ok:  # the rounding margin guarantees it
            raise BudgetError("discrete Laplace parameters do not certify the budget")
        return mech

    @property
    def evidence(self) -> DiscreteLaplace:
        return DiscreteLaplace(Fraction(self.sensitivity), self.scale)

    @property
    def variance(self) -> float:
        """Variance of one draw: 2 alpha / (1 - alpha)^2."""
        alpha = 1.0 - self.p_geo
        return 2 * alpha / self.p_geo**2

    def release(
        self,
        spender: Spender,
        slot: int,
        counts: npt.ArrayLike,
        rng: np.random.Generator,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "discrete-laplace",
    ) -> IntArray:
        """Charge ``eps`` (guard first), then return integer ``counts`` plus noise."""
        data: Any = np.asarray(counts)
        if not np.issubdtype(data.dtype, np.integer):  # checked before anything is charged
            raise BudgetError("discrete Laplace adds noise to integer counts")
        self.charge(spender, slot, user, group, part, mechanism)
        shape = data.shape
        noise = rng.geometric(self.p_geo, size=shape) - rng.geometric(self.p_geo, size=shape)
        out: IntArray = np.asarray(data, dtype=np.int64) + noise
        return out
