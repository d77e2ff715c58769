"""Optimal Population Selection (OPS, 000 Algorithm 1) with a sound budget split.

Population-division allocators sample ``z`` users per slot for the dissimilarity step and recycle
every sampled user after a fixed number of slots. A user whose window ``w_i`` is longer than that
recycle period can report several times inside one of their windows, so their budget is split
into ``k_i`` equal shares and each report spends one share.

Published rule (000 Algorithm 1 lines 5-9, Algorithm 3 lines 2-3 and 11): per-user sample sizes
``z_i = floor(n / (2 w_i))``; for each candidate ``z~`` among them, users with ``z_i < z~`` split
by ``ceil(z~ / z_i)``; the candidate with the least reporting error (000 Eq. 6) wins; users are
recycled after ``w_opt = n / (2 z_opt)`` slots, which the paper rounds down (000 Example 4:
``w_opt = 3.003``, recycled at slot 3). With the floors, ``ceil(z~ / z_i)`` can be smaller than
the number of reports the recycle period allows inside ``w_i`` slots: for n = 10, windows {2, 5}
(z = 2, 1), z_opt = 2 recycles every 2 slots, so a w = 5 user reports at slots 1, 3 and 5 with
shares of eps / 2 each, 3 eps / 2 in one window.

Sound rule (ours, the default): the recycle period is the integer ``R = floor(n / (2 z~))`` and
every user splits by the number of reports actually possible inside their window,
``k_i = ceil(w_i / R)``. Any ``w_i`` consecutive slots contain at most ``ceil(w_i / R)`` slots that
are ``R`` or more apart, so each window spends at most ``k_i * eps_i / k_i = eps_i``. The pool
never runs short: ``R z~ <= n / 2`` users are out for dissimilarity at any time, leaving at least
``n / 2`` for publications. Candidates with ``z~ = 0`` (every window longer than ``n / 2``) are
not candidates; users whose own ``z_i`` is 0 are served by the split (the published rule cannot
split by ``z~ / 0`` and refuses them).

Du et al.'s public code (WEventPLDPCode, docs/peers.md), the ``du-code`` variant: the published
split, and the recycle period ``w_opt`` taken as the window of the first listed user whose own
sample size ``z_i`` equals ``z_opt`` (the first class in population order, as classes keep the
order of their first member). Since ``z_i = floor(n / (2 w_i))``, that window is at most
``floor(n / (2 z_opt))``, and shorter when another window with the same sample size is listed
first: for n = 10, one user with w = 3 listed before nine with w = 4 (z = 1 for both), users are
recycled after 3 slots, so a w = 4 user reports twice in [1, 4] with their whole budget. Listed
the other way round the period is 4 and every window holds: the rule depends on the input order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from wevent.accounting.budget import Budget, BudgetError
from wevent.mechanisms.personalized import PersonalizedFO, sampling_variance

__all__ = ["OPSChoice", "OPSClass", "ops", "reports_within", "sample_size"]


@dataclass(frozen=True, slots=True)
class OPSClass:
    """A requirement class as OPS sees it: window, budget, number of users."""

    w: int
    eps: Fraction
    count: int


@dataclass(frozen=True, slots=True)
class OPSChoice:
    """The selected sample size, its recycle period and every class's budget split."""

    z_opt: int
    recycle: int  # R: a sampled user is available again R slots later
    w_opt: Fraction  # n / (2 z_opt), the paper's (fractional) optimal window; du-code: the code's
    splits: tuple[int, ...]  # k_i per class: each report spends eps_i / k_i
    error: float  # 000 Eq. 7 at z_opt
    candidates: tuple[tuple[int, float], ...]  # every (z~, error) evaluated, in ascending z~


def sample_size(n: int, w: int) -> int:
    """``floor(n / (2 w))`` (000 Algorithm 3 line 2; 002 Algorithm 3 line 3)."""
    return n // (2 * w)


def _error(
    classes: Sequence[OPSClass], shares: Sequence[Fraction], n: int, z: int, d: int
) -> float:
    """000 Eq. 7, the reporting error (V_smpl(n, z) + V_PLDP of the split budgets) / d. Algorithm 1
    line 12 cites Eq. 6, which is d times Eq. 7 and has the same minimizer; Example 4's printed
    errors (0.042, 0.035, 0.0329, 0.0349) are Eq. 7's."""
    by_budget: dict[Budget, int] = {}
    for c, share in zip(classes, shares, strict=True):
        if c.count:
            b = Budget(share)
            by_budget[b] = by_budget.get(b, 0) + c.count
    pfo = PersonalizedFO.for_budgets(d, by_budget)
    return (sampling_variance(n, z) + pfo.total_variance(z)) / d


def _published_splits(
    classes: Sequence[OPSClass], n: int, z: int, variant: str = "published"
) -> tuple[int, ...]:
    """000 Algorithm 1 lines 5-9: ``ceil(z~ / z_i)`` for ``z_i < z~``, else 1."""
    out = []
    for c in classes:
        zi = sample_size(n, c.w)
        if c.count == 0:  # nobody to split for
            out.append(1)
            continue
        if zi == 0:
            raise BudgetError(
                f"{variant} OPS: a window of {c.w} slots exceeds n/2 = {Fraction(n, 2)} users, so "
                "its sample size floor(n/(2w)) is 0 and ceil(z/0) is undefined; use the sound "
                "variant, which splits by the reports possible within the window"
            )
        out.append(-(-z // zi) if zi < z else 1)
    return tuple(out)


def _code_window(classes: Sequence[OPSClass], zs: Sequence[int], z: int) -> int:
    """The du-code recycle period for candidate ``z``: the window of the first class (with users)
    whose sample size is ``z`` (WEventPLDPCode takes the first listed user's)."""
    return next(c.w for c, zi in zip(classes, zs, strict=True) if c.count > 0 and zi == z)


def _sound_splits(classes: Sequence[OPSClass], recycle: int) -> tuple[int, ...]:
    """``ceil(w_i / R)``: the most reports a user recycled every R slots makes in w_i slots."""
    return tuple(-(-c.w // recycle) for c in classes)


def ops(
    classes: Sequence[OPSClass],
    d: int,
    *,
    variant: str = "sound",
    sizes: Sequence[int] | None = None,
) -> OPSChoice:
    """Run OPS over the requirement classes (000 Algorithm 1).

    ``sizes`` overrides the per-class sample sizes ``floor(n / (2 w_i))`` with given ones (000
    Example 2 states sample sizes directly); only the published split can use it, since the sound
    split is defined by the windows. ``variant`` ``du-code``: the published split, recycled after
    the window of the first class whose sample size is ``z_opt`` (module docstring); the class
    order is the population's.
    """
    live = [c for c in classes if c.count > 0]
    n = sum(c.count for c in live)
    if n < 2:
        raise BudgetError(f"OPS needs at least 2 users, got {n}")
    if variant not in ("sound", "published", "du-code"):
        raise BudgetError(f"unknown OPS variant {variant!r} (expected sound, published or du-code)")
    if sizes is not None:
        if variant != "published":
            raise BudgetError("explicit sample sizes only apply to the published OPS split")
        if len(sizes) != len(classes) or any(s < 1 for s in sizes):
            raise BudgetError("give one positive sample size per class")
        zs = list(sizes)
    else:
        zs = [sample_size(n, c.w) for c in classes]
    candidates = sorted({z for z, c in zip(zs, classes, strict=True) if z >= 1 and c.count > 0})
    if not candidates:
        raise BudgetError(
            f"OPS: with {n} users every window ({', '.join(str(c.w) for c in live)} slots) is "
            f"longer than n/2 = {Fraction(n, 2)}, so no sample size floor(n/(2w)) is positive; "
            "population division needs n >= 2w for some class"
        )
    best: OPSChoice | None = None
    evaluated = []
    for z in candidates:
        recycle = n // (2 * z)
        w_opt = Fraction(n, 2 * z)
        if variant == "du-code":
            recycle = _code_window(classes, zs, z)
            w_opt = Fraction(recycle)
        if variant != "sound":
            if sizes is not None:
                splits = tuple(-(-z // zi) if zi < z else 1 for zi in zs)
            else:
                splits = _published_splits(classes, n, z, variant)
        else:
            splits = _sound_splits(classes, recycle)
        shares = [c.eps / k for c, k in zip(classes, splits, strict=True)]
        err = _error(classes, shares, n, z, d)
        evaluated.append((z, err))
        if best is None or err < best.error:  # 000 Algorithm 1 line 13: strictly smaller
            best = OPSChoice(z, recycle, w_opt, splits, err, ())
    assert best is not None
    return OPSChoice(
        best.z_opt, best.recycle, best.w_opt, best.splits, best.error, tuple(evaluated)
    )


def reports_within(w: int, recycle: int) -> int:
    """The most reports a user recycled every ``recycle`` slots can make in ``w`` slots."""
    return -(-w // recycle)
