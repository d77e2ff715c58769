"""Private dissimilarity between the current statistic and the last release.

* 002 Eq. 4 (and 000 Eq. 3), local model: the mean squared difference between an unbiased
  frequency estimate and the last release, minus the estimate's mean variance, which makes it an
  unbiased estimate of the true mean squared difference.
* 001 Algorithm 3 (DC), central personalized model: SM-sample the data at the OBS threshold, take
  the mean absolute difference to the last release and add Laplace noise of scale
  1 / (d eps_opt) (the mean over d values has sensitivity 1/d).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.spending import Spender
from wevent.mechanisms.sampling import SamplingMechanism, obs

__all__ = ["dc_dissimilarity", "ldp_dissimilarity"]


def ldp_dissimilarity(
    estimate: npt.ArrayLike, last_release: npt.ArrayLike, variances: npt.ArrayLike
) -> float:
    """002 Eq. 4: (1/d) sum (c_j - r_j)^2 - (1/d) sum Var[c_j]."""
    c = np.asarray(estimate, np.float64)
    r = np.asarray(last_release, np.float64)
    v = np.broadcast_to(np.asarray(variances, np.float64), c.shape)
    if c.shape != r.shape:
        raise BudgetError("estimate and last release must have the same length")
    return float(np.mean((c - r) ** 2) - np.mean(v))


def dc_dissimilarity(
    spender: Spender,
    slot: int,
    counts: Mapping[Budget, npt.ArrayLike],
    groups: Mapping[Budget, str],
    last_release: npt.ArrayLike,
    rng: np.random.Generator,
    *,
    mechanism: str = "dc",
) -> tuple[float, Budget]:
    """001 Algorithm 3: returns (dis, eps_opt). ``counts[eps]`` is the value histogram of the class
    whose dissimilarity budget is eps; every class is charged its budget (SM evidence) first."""
    if {Budget(e) for e in counts} != {Budget(e) for e in groups}:
        raise BudgetError("counts and groups must name the same classes")
    last = np.asarray(last_release, np.float64)
    d = len(last)
    if last.ndim != 1 or d == 0:
        raise BudgetError("the last release must be a non-empty 1-D histogram")
    sizes = {Budget(e): int(np.asarray(c).sum()) for e, c in counts.items()}
    theta, _ = obs(sizes)
    # The statistic is a mean over d values: sensitivity 1/d under add/remove of one user.
    sm = SamplingMechanism.for_budgets(sizes, theta, sensitivity=Fraction(1, d))
    if sm.check_counts(counts) != d:
        raise BudgetError(f"class histograms and the last release must both have {d} values")
    sm.charge(spender, slot, groups, part="dissimilarity", mechanism=mechanism)
    sampled = sm.sample_counts(counts, rng)
    mean_abs = float(np.mean(np.abs(sampled - last)))
    return mean_abs + float(rng.laplace(0.0, sm.laplace.scale)), theta
