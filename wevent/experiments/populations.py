"""Requirement populations as the papers' experiments build them (exact budgets, seeded).

* 001 Section 6.2, Table 4 (PWSM): each user draws a budget uniformly from
  {E, E + 0.2, ..., 1.0} and a window from {40, 80, ..., w}, so E is the smallest budget and w the
  largest window (what the non-personalized BD/BA serve everyone with). The dynamic variant adds
  a forward requirement drawn from {E_i, ..., 1.0} and {40, ..., w_i}, with the backward one
  (w_B = 1, E_B = 10) large enough never to bind.
* 001 Section 6.5 (ratio sweep): budgets {0.6, 1.0} with a fraction o of users at 1.0 (windows
  all 120), or windows {40, 120} with a fraction o at 40 (budgets all 0.6).
* 000 Section VI-B, Table IV (PLDP-IDS): budgets from {eps, eps + 0.5, ..., 2.5}, windows from
  {40, 80, ..., w}.
* 002 Section 7 (LDP-IDS): everyone has the same (w, eps).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement

__all__ = [
    "budget_grid",
    "budget_ratio_population",
    "personalized_population",
    "pldp_population",
    "pwsm_dynamic_population",
    "pwsm_population",
    "uniform_population",
    "window_grid",
    "window_ratio_population",
]

WINDOW_STEP = 40  # 001 Table 4, 000 Table IV: windows 40, 80, ..., w
PWSM_TOP, PWSM_STEP = Fraction(1), Fraction(1, 5)  # 001 Table 4: E, ..., 0.8, 1.0
PLDP_TOP, PLDP_STEP = Fraction(5, 2), Fraction(1, 2)  # 000 Table IV: eps, ..., 2.0, 2.5
BACKWARD = (1, Budget(10))  # 001 Section 6.2: w_B = 1, E_B = 10 never binds


def _user(i: int) -> str:
    return f"u{i}"


def budget_grid(lowest: Fraction, top: Fraction, step: Fraction) -> list[Fraction]:
    """lowest, lowest + step, ... up to top (exact; the top is included when on the grid, and
    the grid is never empty: a lowest above the top gives [lowest])."""
    out = [lowest]
    while out[-1] + step <= top:
        out.append(out[-1] + step)
    return out


def window_grid(largest: int, step: int = WINDOW_STEP) -> list[int]:
    """step, 2 step, ... up to ``largest``; ``largest`` itself is always included."""
    out = list(range(step, largest, step)) if largest > step else []
    return [*out, largest]


def uniform_population(n: int, w: int, eps: Fraction) -> Population:
    """002 Section 7: every user has (w, eps)."""
    req = Fixed(w, Budget(eps))
    return Population({_user(i): req for i in range(n)})


def personalized_population(
    n: int, budgets: Sequence[Fraction], windows: Sequence[int], seed: int
) -> Population:
    """Each user draws a budget and a window independently and uniformly (seeded)."""
    rng = np.random.default_rng(seed)
    b = rng.integers(len(budgets), size=n).tolist()
    w = rng.integers(len(windows), size=n).tolist()
    reqs = {
        (i, j): Fixed(windows[j], Budget(budgets[i]))
        for i in range(len(budgets))
        for j in range(len(windows))
    }
    return Population({_user(k): reqs[(b[k], w[k])] for k in range(n)})


def pwsm_population(n: int, eps: Fraction, w: int, seed: int) -> Population:
    """001 Table 4: budgets {E, ..., 0.8, 1.0}, windows {40, 80, ..., w}."""
    return personalized_population(n, budget_grid(eps, PWSM_TOP, PWSM_STEP), window_grid(w), seed)


def pldp_population(n: int, eps: Fraction, w: int, seed: int) -> Population:
    """000 Table IV: budgets {eps, ..., 2.0, 2.5}, windows {40, 80, ..., w}."""
    return personalized_population(n, budget_grid(eps, PLDP_TOP, PLDP_STEP), window_grid(w), seed)


def pwsm_dynamic_population(n: int, eps: Fraction, w: int, seed: int) -> Population:
    """001 Table 4 for DPBD/DPBA: the static requirement of `pwsm_population` (same seed, same
    draws) plus one declaration at slot 1 with a forward budget from {E_i, ..., 1.0}, a forward
    window from {40, ..., w_i}, and the non-binding backward (1, 10)."""
    static = pwsm_population(n, eps, w, seed)
    rng = np.random.default_rng([seed, 1])
    cache: dict[tuple[int, Budget], Requirement] = {}
    out: dict[str, Requirement] = {}
    for cls in static.classes:
        req = cls.requirement
        assert isinstance(req, Fixed)
        budgets = budget_grid(Fraction(req.eps), PWSM_TOP, PWSM_STEP)
        windows = window_grid(req.w)
        bi = rng.integers(len(budgets), size=cls.count).tolist()
        wi = rng.integers(len(windows), size=cls.count).tolist()
        for user, i, j in zip(cls.members, bi, wi, strict=True):
            key = (windows[j], Budget(budgets[i]))
            if key not in cache:
                cache[key] = Dynamic((Declaration(1, *BACKWARD, key[0], key[1]),))
            out[user] = cache[key]
    return Population(out)


def _two_types(
    n: int, ratio: Fraction, first: Requirement, second: Requirement, seed: int
) -> Population:
    if not 0 <= ratio <= 1:
        raise ValueError(f"a ratio is between 0 and 1, got {ratio}")
    k = round(ratio * n)
    rng = np.random.default_rng(seed)
    chosen = set(rng.permutation(n)[:k].tolist())
    return Population({_user(i): first if i in chosen else second for i in range(n)})


def budget_ratio_population(n: int, ratio: Fraction, seed: int) -> Population:
    """001 Section 6.5, Figure 11: round(o n) users with (120, 1.0), the rest (120, 0.6)."""
    return _two_types(n, ratio, Fixed(120, Budget("1.0")), Fixed(120, Budget("0.6")), seed)


def window_ratio_population(n: int, ratio: Fraction, seed: int) -> Population:
    """001 Section 6.5, Figure 12: round(o n) users with (40, 0.6), the rest (120, 0.6)."""
    return _two_types(n, ratio, Fixed(40, Budget("0.6")), Fixed(120, Budget("0.6")), seed)
