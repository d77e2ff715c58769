"""The local allocators by CLI name, and the population setups they run with.

Budget division (every user reports every slot; the budget kernels of `fixed.py`):
``lbu``, ``lsp``, ``lbd``, ``lba`` (002 Section 5) and ``plbu`` (001 Section 6.2).

Population division (users sampled from a pool; the kernels of `population.py`):

=========== ============ ================= =================== ===========
name        rule         sample size z     recycle R, budgets  PUE
=========== ============ ================= =================== ===========
lpu         uniform      floor(n / w)      w, eps              no
lpd, lpa    distr./abs.  floor(n / (2w))   w, eps              no
plpd, plpa  distr./abs.  floor(n/(2w_max)) w_max, eps_i        no
plbd-rp ... distr./abs.  floor(n/(2w_max)) w_max, eps_i        yes
plbd-ops .. distr./abs.  OPS z_opt         OPS R, eps_i / k_i  no
plpd+ ...   distr./abs.  OPS z_opt         OPS R, eps_i / k_i  yes
=========== ============ ================= =================== ===========

The non-personalized ones (lbu, lsp, lbd, lba, lpu, lpd, lpa) serve every user with the largest
window and the smallest budget of the population (as the central BD/BA do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.allocators.kernel import ClassReq, check_variant, fixed_classes
from wevent.mechanisms.allocators.population import PopulationConfig
from wevent.mechanisms.ops import OPSChoice, OPSClass, ops, sample_size

__all__ = [
    "LOCAL",
    "LOCAL_BUDGET",
    "ORACLE_CHOICE",
    "POPULATION",
    "PopulationSetup",
    "population_setup",
]

LOCAL_BUDGET: Final = ("lbu", "lsp", "lbd", "lba", "plbu")
POPULATION: Final = (
    "lpu",
    "lpd",
    "lpa",
    "plpd",
    "plpa",
    "plpd+",
    "plpa+",
    "plbd-rp",
    "plba-rp",
    "plbd-ops",
    "plba-ops",
)
LOCAL: Final = LOCAL_BUDGET + POPULATION
# Allocators whose reports go through one oracle at one budget, where --oracle grr|oue applies;
# the personalized ones report through the personalized frequency oracle (GRR per budget).
ORACLE_CHOICE: Final = ("lbu", "lsp", "lbd", "lba", "lpu", "lpd", "lpa")

# name -> (rule, personalized, ops, pue)
_POPULATION: dict[str, tuple[str, bool, bool, bool]] = {
    "lpu": ("uniform", False, False, False),
    "lpd": ("distribution", False, False, False),
    "lpa": ("absorption", False, False, False),
    "plpd": ("distribution", True, False, False),
    "plpa": ("absorption", True, False, False),
    "plbd-rp": ("distribution", True, False, True),
    "plba-rp": ("absorption", True, False, True),
    "plbd-ops": ("distribution", True, True, False),
    "plba-ops": ("absorption", True, True, False),
    "plpd+": ("distribution", True, True, True),
    "plpa+": ("absorption", True, True, True),
}


@dataclass(frozen=True)
class PopulationSetup:
    """Everything a population allocator fixes before the stream starts."""

    name: str
    variant: str
    config: PopulationConfig
    budgets: tuple[Fraction, ...]  # per class: what one report spends
    splits: tuple[int, ...]  # per class: k_i (budgets[i] = eps_i / k_i)
    personalized: bool
    pue: bool
    ops: OPSChoice | None


def population_setup(
    name: str,
    classes: Sequence[ClassReq[Fraction]],
    counts: Sequence[int],
    d: int,
    variant: str = "sound",
) -> PopulationSetup:
    """The configuration of population allocator ``name`` for classes of ``counts`` users."""
    if name not in _POPULATION:
        raise BudgetError(f"unknown population allocator {name!r}")
    check_variant(name, variant)
    rule, personalized, use_ops, use_pue = _POPULATION[name]
    fixed = fixed_classes(classes, name)
    if not any(k > 0 for k in counts):
        raise BudgetError(f"{name}: the population has no users")
    if not personalized and any(c.eps <= 0 for c, k in zip(fixed, counts, strict=True) if k):
        raise BudgetError(
            f"{name} serves every user with the smallest budget, and some users have eps = 0: "
            "nobody could report; use a personalized allocator (plpd, plpa, ...), which leaves "
            "the eps = 0 users out"
        )
    # Users with eps = 0 never report: they are not in the pool and not in n (000 Section IV
    # samples reporters among the users who can report at all).
    counts = [k if c.eps > 0 else 0 for c, k in zip(fixed, counts, strict=True)]
    live = [c for c, k in zip(fixed, counts, strict=True) if k > 0]
    n = sum(counts)
    if not live:
        raise BudgetError(f"{name}: every user has eps = 0, so nobody can report")
    w_max = max(c.w for c in live)
    eps_min = min(c.eps for c in live)
    choice: OPSChoice | None = None
    if use_ops:
        choice = ops(
            [OPSClass(c.w, c.eps, k) for c, k in zip(fixed, counts, strict=True)],
            d,
            variant=variant,
        )
        unit, recycle, splits = choice.z_opt, choice.recycle, choice.splits
        budgets = tuple(
            c.eps / k if count else Fraction(0)
            for c, k, count in zip(fixed, splits, counts, strict=True)
        )
        absorb_cap = choice.w_opt
    else:
        recycle = w_max
        unit = n // w_max if rule == "uniform" else sample_size(n, w_max)
        if unit < 1:
            raise BudgetError(
                f"{name}: {n} users cannot serve a window of {w_max} slots: the per-slot sample "
                f"floor(n/{'w' if rule == 'uniform' else '(2w)'}) is 0 "
                f"(needs at least {w_max if rule == 'uniform' else 2 * w_max} users)"
            )
        splits = tuple(1 for _ in fixed)
        budgets = tuple(
            (c.eps if personalized else eps_min) if count else Fraction(0)
            for c, count in zip(fixed, counts, strict=True)
        )
        absorb_cap = Fraction(w_max)
    config = PopulationConfig(
        n=n,
        rule=rule,
        unit=unit,
        recycle=recycle,
        capacity=n // 2,
        absorb_cap=absorb_cap,
    )
    return PopulationSetup(name, variant, config, budgets, splits, personalized, use_pue, choice)
