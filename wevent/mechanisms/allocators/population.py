"""The population-division family: its kernels, the setups they run with, and its specs.

Population division (002 Section 6; 000 Sections IV-C and V) spends users instead of budget: each
sampled user reports once with their (possibly split) budget and is recycled ``R`` slots later, so
a user never reports twice within ``R`` slots. Per slot the kernel says how many users report for
the dissimilarity step, how many would report for a publication, and whether the slot is
nullified; the pool (`wevent.mechanisms.pool`) draws the actual users and the guard checks every one.

* uniform (LPU, 002 Section 6.1): ``floor(n / R)`` users publish at every slot.
* distribution (LPD, 002 Algorithm 3; PLPD, 000 Algorithm 5; PLPD+, 000 Algorithm 3): ``z`` users
  for the dissimilarity; ``N_rm = floor(n/2) - (publication users of the last R - 1 slots)`` and a
  publication would take ``floor(N_rm / 2)`` users; below ``u_min`` (1) the slot is nullified.
* absorption (LPA, 002 Algorithm 4; PLPA, 000 Algorithm 6; PLPA+, 000 Algorithm 4): one unit of
  ``z`` users per slot; ``t_N = |U_l| / z - 1`` slots after a publication are nullified and a
  publication absorbs the units of the ``t_A = t - (l + t_N)`` slots since, at most ``cap``.

The family's members (`SPECS`, collected by `wevent.mechanisms.allocators.registry`) fix their
integers before the stream starts (`population_setup`):

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

The non-personalized ones (lpu, lpd, lpa) serve every user with the largest window and the
smallest budget of the population (as the central BD/BA do).

Variants. ``published`` follows the listings: PLPA+ absorbs ``z_opt * min(t_A, w_opt)`` users with
the fractional ``w_opt = n / (2 z_opt)`` (rounded down to whole users), and no request is checked
against the pool. ``sound`` (the default) absorbs at most ``R`` units (the integer recycle period)
and caps every request by the users the pool has (``n`` minus those out since ``t - R + 1``); a
slot with no publication user left is nullified. In the sound variant the cap never binds (the
property tests and proofs check it): at most ``R z <= n/2`` users are out for dissimilarity and
at most ``floor(n/2)`` (distribution) or ``R z`` (absorption) for publications.

``du-code`` (the OPS members only: plpd+, plpa+, plbd-ops, plba-ops) is what Du et al.'s public
code (WEventPLDPCode, docs/peers.md) does: the published split, recycled after the window of the
first listed user whose sample size is ``z_opt`` (`wevent.mechanisms.ops`; the distribution's
window and the absorption's cap are that period too), no request checked against the pool, and
the absorption's last publication starting at slot -1 with no users (the code's
``AbsorptionLastInfo(-1, 0)``), so slot 1 may absorb three units where the listings' start
absorbs two. Unsound: the period can be shorter than ``floor(n / (2 z_opt))``, and the published
split is unsound already; `wevent gate NAME --variant du-code` refutes it.

Counts are computed through the kernel's `Algebra`, so the same code runs on Z3 terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, Generic, TypeVar

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorError, PopulationSpec
from wevent.mechanisms.allocators.kernel import (
    DU_CODE,
    VARIANTS,
    ClassReq,
    Prefix,
    check_variant,
    fixed_classes,
)
from wevent.mechanisms.ops import OPSChoice, OPSClass, ops, sample_size

__all__ = [
    "ONE_ORACLE",
    "OPS_SPLIT",
    "POPULATION_RULES",
    "SPECS",
    "Draw",
    "PopulationConfig",
    "PopulationKernel",
    "PopulationSetup",
    "PopulationState",
    "population_setup",
    "variants_of",
]

V = TypeVar("V")
B = TypeVar("B")

POPULATION_RULES: Final = ("uniform", "distribution", "absorption")


@dataclass(frozen=True, slots=True)
class PopulationConfig:
    """The integers a population kernel allocates with (fixed for the whole stream).

    ``n`` users; ``unit`` users per slot (the dissimilarity sample, or LPU's reporters);
    ``recycle`` R; ``capacity`` publication users per R slots (distribution); ``absorb_cap`` the
    most slots one publication absorbs (absorption; a fraction only in published PLPA+);
    ``u_min`` the fewest users a publication needs.
    """

    n: int
    rule: str
    unit: int
    recycle: int
    capacity: int
    absorb_cap: Fraction
    u_min: int = 1

    def __post_init__(self) -> None:
        if self.rule not in POPULATION_RULES:
            raise BudgetError(f"unknown population rule {self.rule!r}")
        if self.unit < 1 or self.recycle < 1:
            raise BudgetError(
                f"population division with {self.n} users cannot serve a window of "
                f"{self.recycle} slots: the per-slot sample floor(n/(2w)) is 0 (needs n >= 2w)"
            )


@dataclass(frozen=True, slots=True)
class Draw(Generic[V, B]):
    """A population kernel's decision for one slot (user counts in the kernel's algebra)."""

    nullified: B
    forced: B
    dissimilarity: V  # users drawn now for the dissimilarity step
    publication: V  # users drawn if the slot publishes
    available: V  # users in the pool before this slot's draws


@dataclass(frozen=True, slots=True)
class PopulationState(Generic[V]):
    dis: Prefix[V]  # dissimilarity users drawn per slot
    pub: Prefix[V]  # publication users drawn per slot (0 when the slot did not publish)
    last: V  # last publication slot (0 before any)
    last_pub: V  # users of that publication


class PopulationKernel(Generic[V, B]):
    """The population kernel of one allocator (see the module docstring)."""

    def __init__(
        self, name: str, alg: Algebra[V, B], config: PopulationConfig, variant: str = "sound"
    ) -> None:
        check_variant(name, variant, variants_of(name))
        self.name = name
        self.variant = variant
        self.alg = alg
        self.config = config

    def start(self) -> PopulationState[V]:
        alg = self.alg
        keep = self.config.recycle
        zero = alg.const(0)
        # 002 Algorithm 4 line 1 / 000 Algorithm 6 (Example 7): |U_{l,2}| = 0 at l = 0, so
        # t_N = -1 and slot 1 may absorb two units (a phantom slot 0, as in 002's LBA).
        # du-code: the code's last publication is at slot -1 with no users, so slot 1 may
        # absorb three units (a count of users, not of budget; docs/peers.md).
        last = alg.const(-1) if self.variant == DU_CODE else zero
        return PopulationState(Prefix(alg, keep), Prefix(alg, keep), last, zero)

    def _out(self, state: PopulationState[V], t: int) -> V:
        """Users drawn in slots ``t - R + 1 .. t - 1``: not back in the pool before slot t."""
        r = self.config.recycle
        return self.alg.add(state.dis.total(t - r + 1, t - 1), state.pub.total(t - r + 1, t - 1))

    def plan(self, state: PopulationState[V], t: int) -> Draw[V, B]:
        alg, cfg = self.alg, self.config
        zero = alg.const(0)
        no, yes = alg.truth(False), alg.truth(True)
        available = alg.sub(alg.const(cfg.n), self._out(state, t))
        if cfg.rule == "uniform":  # 002 Section 6.1: a fresh group of floor(n / R) every slot
            draw = Draw(no, yes, zero, alg.const(cfg.unit), available)
        elif cfg.rule == "distribution":
            draw = self._distribution(state, t, available)
        else:
            draw = self._absorption(state, t, available)
        if self.variant == "sound":
            draw = self._cap(draw)
        return draw

    def _distribution(self, state: PopulationState[V], t: int, available: V) -> Draw[V, B]:
        """002 Algorithm 3 lines 7-8, 10; 000 Algorithm 5 lines 9-10, 12; 000 Algorithm 3 lines
        12-13, 17 (with the window ``w_opt`` taken as the integer recycle period)."""
        alg, cfg = self.alg, self.config
        r = cfg.recycle
        remaining = alg.sub(alg.const(cfg.capacity), state.pub.total(t - r + 1, t - 1))
        candidate = alg.floor(alg.scale(remaining, Fraction(1, 2)))
        nullified = alg.not_(alg.le(alg.const(cfg.u_min), candidate))
        return Draw(nullified, alg.truth(False), alg.const(cfg.unit), candidate, available)

    def _absorption(self, state: PopulationState[V], t: int, available: V) -> Draw[V, B]:
        """002 Algorithm 4 lines 4-9; 000 Algorithm 6 lines 4-9; 000 Algorithm 4 lines 4-9."""
        alg, cfg = self.alg, self.config
        unit = alg.const(cfg.unit)
        t_n = alg.count_sub(alg.ratio(state.last_pub, unit), alg.const(1))
        now = alg.const(t)
        nullified = alg.le(alg.count_sub(now, state.last), t_n)
        absorbed = alg.count_sub(now, alg.count_add(state.last, t_n))
        cap = alg.const(cfg.recycle if self.variant == "sound" else cfg.absorb_cap)
        candidate = alg.floor(alg.mul(unit, vmin(alg, absorbed, cap)))
        return Draw(nullified, alg.truth(False), unit, candidate, available)

    def _cap(self, draw: Draw[V, B]) -> Draw[V, B]:
        """The sound variant: never ask the pool for more users than it has; nullify a slot
        whose publication would have fewer than ``u_min`` users."""
        alg = self.alg
        zero = alg.const(0)
        dis = vmin(alg, vmax(alg, draw.dissimilarity, zero), vmax(alg, draw.available, zero))
        left = alg.sub(draw.available, dis)
        pub = vmin(alg, vmax(alg, draw.publication, zero), vmax(alg, left, zero))
        empty = alg.not_(alg.le(alg.const(self.config.u_min), pub))
        return Draw(
            alg.or_(draw.nullified, empty),
            alg.and_(draw.forced, alg.not_(empty)),
            dis,
            pub,
            draw.available,
        )

    def step(
        self, state: PopulationState[V], t: int, draw: Draw[V, B], published: B
    ) -> PopulationState[V]:
        alg = self.alg
        used = alg.select(published, draw.publication, alg.const(0))
        return PopulationState(
            dis=state.dis.push(draw.dissimilarity),
            pub=state.pub.push(used),
            last=alg.select(published, alg.const(t), state.last),
            last_pub=alg.select(published, draw.publication, state.last_pub),
        )


# ---------------------------------------------------------------------------- the family


@dataclass(frozen=True, slots=True)
class _Member:
    """How one member of the family sets up its run: its rule, whether every class keeps its
    own budget, whether the OPS split (000 Algorithm 1) fixes z, R and the splits, and whether
    its reports go through PUE."""

    name: str
    rule: str
    personalized: bool
    ops: bool
    pue: bool
    summary: str


_MEMBERS: Final = (
    _Member("lpu", "uniform", False, False, False, "LDP population uniform (002 Section 6.1)"),
    _Member(
        "lpd", "distribution", False, False, False, "LDP population distribution (002 Algorithm 3)"
    ),
    _Member(
        "lpa", "absorption", False, False, False, "LDP population absorption (002 Algorithm 4)"
    ),
    _Member(
        "plpd",
        "distribution",
        True,
        False,
        False,
        "personalized population distribution (000 Algorithm 5)",
    ),
    _Member(
        "plpa",
        "absorption",
        True,
        False,
        False,
        "personalized population absorption (000 Algorithm 6)",
    ),
    _Member(
        "plpd+", "distribution", True, True, True, "PLPD+: OPS split and PUE (000 Algorithm 3)"
    ),
    _Member("plpa+", "absorption", True, True, True, "PLPA+: OPS split and PUE (000 Algorithm 4)"),
    _Member(
        "plbd-rp",
        "distribution",
        True,
        False,
        True,
        "ablation of PLPD+: PUE without OPS (000 Figures 4-5)",
    ),
    _Member(
        "plba-rp",
        "absorption",
        True,
        False,
        True,
        "ablation of PLPA+: PUE without OPS (000 Figures 4-5)",
    ),
    _Member(
        "plbd-ops",
        "distribution",
        True,
        True,
        False,
        "ablation of PLPD+: OPS without PUE (000 Figures 4-5)",
    ),
    _Member(
        "plba-ops",
        "absorption",
        True,
        True,
        False,
        "ablation of PLPA+: OPS without PUE (000 Figures 4-5)",
    ),
)
_BY_NAME: Final = {m.name: m for m in _MEMBERS}

# The members whose reports go through one frequency oracle at one budget (the non-personalized
# ones), where ``--oracle grr|oue`` applies; the others report through the personalized frequency
# oracle (GRR per budget).
ONE_ORACLE: Final = tuple(m.name for m in _MEMBERS if not m.personalized)
# The members whose setup is the OPS split (000 Algorithm 1), which `wevent prove` proves first.
OPS_SPLIT: Final = tuple(m.name for m in _MEMBERS if m.ops)


def variants_of(name: str) -> tuple[str, ...]:
    """The variants of member ``name``: sound and published, and du-code for the OPS members
    (WEventPLDPCode's recycle period and absorption start; the module docstring)."""
    return (*VARIANTS, DU_CODE) if name in OPS_SPLIT else VARIANTS


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
    member = _BY_NAME.get(name)
    if member is None:
        raise AllocatorError(
            f"unknown population allocator {name!r} (the family has: {', '.join(_BY_NAME)})"
        )
    check_variant(name, variant, variants_of(name))
    rule, personalized, use_ops, use_pue = member.rule, member.personalized, member.ops, member.pue
    fixed = fixed_classes(classes, name)
    if not any(k > 0 for k in counts):
        raise BudgetError(f"{name}: the population has no users")
    if not personalized and any(c.eps <= 0 for c, k in zip(fixed, counts, strict=True) if k):
        raise BudgetError(
            f"{name} serves every user with the smallest budget, and some users have eps = 0: "
            "nobody could report; use a personalized allocator (plpd, plpa, ...), which leaves "
            "the eps = 0 users out"
        )
    if variant == DU_CODE and any(c.eps <= 0 for c, k in zip(fixed, counts, strict=True) if k):
        # The code keeps them in n and may take its recycle period from one listed first; the
        # variant, like the paper, leaves them out, so it would not be the code's run.
        raise BudgetError(
            f"{name} --variant du-code does not model users with eps = 0: Du et al.'s code counts "
            "them in n and may take its recycle period from their window, where wevent leaves "
            "them out; remove them, or use the published or sound variant"
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


def _spec(member: _Member) -> PopulationSpec:
    name = member.name

    def setup(
        classes: Sequence[ClassReq[Any]], counts: Sequence[int], d: int, variant: str
    ) -> PopulationSetup:
        return population_setup(name, classes, counts, d, variant)

    def kernel(
        alg: Algebra[Any, Any], config: PopulationConfig, variant: str
    ) -> PopulationKernel[Any, Any]:
        return PopulationKernel(name, alg, config, variant)

    return PopulationSpec(name, member.summary, setup, kernel, variants_of(name))


# The family's specs, in the order the command line lists them.
SPECS: Final = tuple(_spec(m) for m in _MEMBERS)
