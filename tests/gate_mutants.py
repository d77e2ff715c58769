"""Deliberately broken allocators, each in the spirit of a real bug, for the gate's mutation suite
(`tests/test_gate_mutants.py`). Every one is an `Allocator` (budget kernels, `MUTANTS`) or a
`PopulationAllocator` (population kernels, `POPULATION_MUTANTS`) the gate loads as
``tests.gate_mutants:NAME``.

Most start from a built-in kernel and change one thing; the built-ins' ``published`` variant
is used underneath where the sound variant's safety clip would otherwise hide the bug (a third
party has no such clip). Some are written from scratch in plain Python with ``if`` on budgets
and floats, as outside code often is: those do not run on Z3 terms, so only the adversarial
search and the end-to-end run can refute them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorSpec, PopulationSpec
from wevent.mechanisms.allocators.dynamic import DynamicKernel, DynamicState
from wevent.mechanisms.allocators.fixed import FixedKernel, FixedState
from wevent.mechanisms.allocators.kernel import (
    ClassReq,
    DynamicClass,
    FixedClass,
    Plan,
    fixed_classes,
)
from wevent.mechanisms.allocators.local import population_setup
from wevent.mechanisms.allocators.population import PopulationConfig, PopulationKernel
from wevent.mechanisms.ops import sample_size

__all__ = ["MUTANTS", "NOT_WINDOW_BUGS", "POPULATION_MUTANTS"]

F = Fraction


# ---------------------------------------------------------------------------- fixed kernels


class _OffByOneWindow(FixedKernel[Any, Any]):
    """PBD whose remaining publication budget sums the last w-2 publications instead of the
    last w-1 (001 Algorithm 4 line 3 with the window one slot short)."""

    def _distribution(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._share(c))
            remaining = alg.sub(alg.scale(c.eps, F(1, 2)), hist.total(t - c.w + 2, t - 1))
            pub.append(alg.scale(remaining, F(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))


class _NullificationNeverUpdated(FixedKernel[Any, Any]):
    """BA whose step forgets to record the last publication (slot and budget), so t_N never
    grows and no slot is ever nullified after an absorbing publication."""

    def step(self, state: FixedState[Any], t: int, plan: Plan[Any, Any], published: Any) -> Any:
        moved = super().step(state, t, plan, published)
        return FixedState(moved.dis, moved.pub, state.last, state.last_pub)


class _AbsorbUncapped(FixedKernel[Any, Any]):
    """BA absorbing every skipped slot's share, with no cap at w (002 Algorithm 2 line 8
    without the min)."""

    cap_extra: int | None = None  # None: no cap; k: at most w + k shares

    def _absorption(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        one = alg.const(1)
        shares = [self._share(c) for c in self.served]
        t_n = [
            alg.count_sub(alg.ratio(used, share), one)
            for used, share in zip(state.last_pub, shares, strict=True)
        ]
        now = alg.const(t)
        nullified = alg.le(alg.count_sub(now, state.last), vmax(alg, *t_n))
        pub = []
        for c, share, tn in zip(self.served, shares, t_n, strict=True):
            absorbed = alg.count_sub(now, alg.count_add(state.last, tn))
            if self.cap_extra is not None:
                absorbed = vmin(alg, absorbed, alg.const(c.w + self.cap_extra))
            pub.append(alg.mul(share, absorbed))
        return Plan(nullified, alg.truth(False), tuple(shares), tuple(pub))


class _AbsorbOneTooMany(_AbsorbUncapped):
    """BA capping the absorbed shares at w + 1 instead of w."""

    cap_extra = 1


class _ClipForgetsDissimilarity(_AbsorbUncapped):
    """Uncapped BA behind a safety clip that caps the publication by what the window has left
    but forgets that the dissimilarity share is spent in the same slot."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        plan = self._absorption(state, t)
        alg = self.alg
        zero = alg.const(0)
        pub = []
        for i, c in enumerate(self.served):
            spent = alg.add(
                state.dis[i].total(t - c.w + 1, t - 1), state.pub[i].total(t - c.w + 1, t - 1)
            )
            room = vmax(alg, alg.sub(c.eps, spent), zero)
            pub.append(vmin(alg, plan.publication[i], room))
        return Plan(plan.nullified, plan.forced, plan.dissimilarity, tuple(pub))


class _PublicationIgnoresDissimilarity(FixedKernel[Any, Any]):
    """BD whose publication half is computed from the whole eps (``eps - published``) instead of
    eps/2: the dissimilarity part of every window is not counted."""

    def _distribution(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._share(c))
            remaining = alg.sub(c.eps, hist.total(t - c.w + 1, t - 1))
            pub.append(alg.scale(remaining, F(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))


class _SplitByWrongCount(FixedKernel[Any, Any]):
    """PBD splitting the dissimilarity half by w - 1 slots instead of w."""

    def _share(self, c: FixedClass[Any]) -> Any:
        return self.alg.scale(c.eps, F(1, 2 * max(c.w - 1, 1)))


def _fixed(base: str, cls: type[FixedKernel[Any, Any]], variant: str = "published") -> Any:
    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str) -> Any:
        return cls(base, alg, classes, variant)

    return factory


def _serve_wrong(pick: str, base: str) -> Any:
    """Uniform serving everyone with the *smallest* window (eps_min / w_min at every slot), or
    BD serving everyone with the *largest* budget: both break the classes they misread
    (001 Section 6.2 serves the largest window and the smallest budget)."""

    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str) -> Any:
        fixed = fixed_classes(classes, base)
        if pick == "smallest window":
            one = FixedClass(min(c.w for c in fixed), vmin(alg, *(c.eps for c in fixed)))
        else:
            one = FixedClass(max(c.w for c in fixed), vmax(alg, *(c.eps for c in fixed)))
        kernel = FixedKernel(base, alg, classes, "published")
        kernel.served = tuple(one for _ in kernel.classes)
        kernel._keep = max(c.w for c in fixed)
        return kernel

    return factory


class _SampleRecycledEarly(FixedKernel[Any, Any]):
    """Sample re-spending its whole eps every w - 1 slots (the budget recycled one slot early)."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        zero = alg.const(0)
        period = max(self.served[0].w - 1, 1)
        on = (t - 1) % period == 0
        pubs = tuple(c.eps if on else zero for c in self.served)
        return Plan(alg.truth(not on), alg.truth(on), (zero,) * len(pubs), pubs)


class _SampleWithDissimilarity(FixedKernel[Any, Any]):
    """Sample that also spends a dissimilarity share eps/(2w) every slot, a part its schedule
    (all of eps every w slots) does not count."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        return Plan(
            plan.nullified,
            plan.forced,
            tuple(self._share(c) for c in self.served),
            plan.publication,
        )


# ------------------------------------------------------------------ plain-Python fixed kernels


@dataclass(frozen=True)
class _PlainState:
    spends: tuple[tuple[Fraction, ...], ...]  # per slot, per class (both parts)
    last: int
    last_pub: tuple[Fraction, ...]


class _PlainBase:
    """A kernel written without the algebra: Fractions, ``if`` and ``float`` (not symbolic)."""

    name = "plain"
    variant = "sound"

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> None:
        self.alg = alg
        self.classes = tuple(classes)
        self.fixed = fixed_classes(classes, "plain")

    def start(self) -> _PlainState:
        zero = tuple(F(0) for _ in self.fixed)
        return _PlainState((), 0, zero)

    def step(self, state: _PlainState, t: int, plan: Plan[Any, Any], published: bool) -> Any:
        spent = tuple(
            d + (p if published else 0)
            for d, p in zip(plan.dissimilarity, plan.publication, strict=True)
        )
        last_pub = tuple(plan.publication) if published else state.last_pub
        return _PlainState((*state.spends, spent), t if published else state.last, last_pub)


class _FloatShareCount(_PlainBase):
    """PBA (001 Algorithm 5) as published code computes it: the absorption count
    ``t_N = eps_l / share - 1`` in doubles, truncated with ``int()``, budgets exact."""

    def plan(self, state: _PlainState, t: int) -> Plan[Fraction, bool]:
        shares = [c.eps / (2 * c.w) for c in self.fixed]
        t_n = [
            int(float(used) / float(share)) - 1 if used else 0
            for used, share in zip(state.last_pub, shares, strict=True)
        ]
        since = t - state.last
        if since <= max(t_n):
            return Plan(True, False, tuple(shares), tuple(F(0) for _ in shares))
        pub = [
            share * min(max(since - tn, 0), c.w)
            for c, share, tn in zip(self.fixed, shares, t_n, strict=True)
        ]
        return Plan(False, False, tuple(shares), tuple(pub))


class _RoundedUpShare(_PlainBase):
    """Uniform spending ``eps / w`` rounded *up* to two decimals at every slot."""

    def plan(self, state: _PlainState, t: int) -> Plan[Fraction, bool]:
        pubs = tuple(F(math.ceil(c.eps / c.w * 100), 100) for c in self.fixed)
        return Plan(False, True, tuple(F(0) for _ in pubs), pubs)


class _FloorBudget(FixedKernel[Any, Any]):
    """Uniform with a floor of 1/10 per slot ("never publish with less than 0.1"): safe while
    eps/w >= 1/10, which every normalized budget eps = 1 with w <= 10 is. It claims per-class
    scale invariance, which is false; the conformance check must catch the claim, or a proof
    normalizing budgets to 1 would pass it."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        floor = alg.const(F(1, 10))
        pubs = tuple(vmax(alg, alg.scale(c.eps, F(1, c.w)), floor) for c in self.served)
        zero = alg.const(0)
        return Plan(alg.truth(False), alg.truth(True), (zero,) * len(pubs), pubs)


class _Forgetful(_PlainBase):
    """Uniform whose state is one list shared by every run of the kernel: ``start()`` returns
    the same object and ``step`` appends to it, so a second run starts with the first run's
    history (and spends less). Windows hold, but the kernel is not deterministic."""

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> None:
        super().__init__(alg, classes, variant)
        self._history: list[bool] = []

    def start(self) -> Any:
        return self._history

    def plan(self, state: Any, t: int) -> Plan[Fraction, bool]:
        runs = 1 + sum(1 for x in state if x)
        pubs = tuple(c.eps / c.w / runs for c in self.fixed)
        return Plan(False, True, tuple(F(0) for _ in pubs), pubs)

    def step(self, state: Any, t: int, plan: Plan[Any, Any], published: bool) -> Any:
        state.append(t == 1)
        return state


# ---------------------------------------------------------------------------- dynamic kernels


def _stale_declaration(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str) -> Any:
    """DPBD that keeps allocating for each class's first declaration: a requirement change is
    never picked up."""
    first: list[ClassReq[Any]] = [
        DynamicClass(c.decls[:1]) if isinstance(c, DynamicClass) else c for c in classes
    ]
    kernel = DynamicKernel("dpbd", alg, first, "sound")
    kernel.classes = tuple(classes)
    return kernel


class _LaterDeclarationsIgnored:
    """Sound DPBD that reads each declaration only from its slot on, as if requirements arrived
    as they took effect: the joint room then leaves out the backward windows of later
    declarations that already cover t (the look-ahead 001 Section 5.1 needs for a declared
    schedule)."""

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> None:
        self.name, self.variant, self.alg = "dpbd", "sound", alg
        self.classes = tuple(classes)
        self._full = DynamicKernel("dpbd", alg, classes, "sound")

    def start(self) -> DynamicState[Any]:
        return self._full.start()

    def plan(self, state: DynamicState[Any], t: int) -> Plan[Any, Any]:
        known: list[ClassReq[Any]] = [
            DynamicClass(tuple(d for d in c.decls if d.slot <= t) or c.decls[:1])
            if isinstance(c, DynamicClass)
            else c
            for c in self.classes
        ]
        return DynamicKernel("dpbd", self.alg, known, "sound").plan(state, t)

    def step(
        self, state: DynamicState[Any], t: int, plan: Plan[Any, Any], published: Any
    ) -> DynamicState[Any]:
        return self._full.step(state, t, plan, published)


class _NegativeAfterChange(DynamicKernel[Any, Any]):
    """DPBD capping the published candidates by the sound budgets but not clipping them at
    zero: after a requirement change the candidate is negative, and so is the allocation."""

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> None:
        super().__init__("dpbd", alg, classes, "published")
        self._sound = DynamicKernel("dpbd", alg, classes, "sound")

    def plan(self, state: DynamicState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        raw = super().plan(state, t)
        safe = self._sound.plan(state, t)
        return Plan(
            safe.nullified,
            safe.forced,
            tuple(
                vmin(alg, a, b) for a, b in zip(raw.dissimilarity, safe.dissimilarity, strict=True)
            ),
            tuple(vmin(alg, a, b) for a, b in zip(raw.publication, safe.publication, strict=True)),
        )


# ---------------------------------------------------------------------------- registry


def _spec(
    name: str,
    factory: Any,
    *,
    requirement: str = "fixed",
    scaling: str = "per-class",
    symbolic: bool = True,
) -> AllocatorSpec:
    return AllocatorSpec(name, requirement, scaling, f"mutant: {name}", factory, symbolic=symbolic)


def _plain(cls: type[_PlainBase]) -> Any:
    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        return cls(alg, classes, variant)

    return factory


def _negative_after_change(
    alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str
) -> Any:
    return _NegativeAfterChange(alg, classes, variant)


off_by_one_window = _spec("off_by_one_window", _fixed("pbd", _OffByOneWindow))
nullification_never_updated = _spec(
    "nullification_never_updated", _fixed("pba", _NullificationNeverUpdated)
)
absorb_uncapped = _spec("absorb_uncapped", _fixed("pba", _AbsorbUncapped))
absorb_one_too_many = _spec("absorb_one_too_many", _fixed("pba", _AbsorbOneTooMany))
clip_forgets_dissimilarity = _spec(
    "clip_forgets_dissimilarity", _fixed("pba", _ClipForgetsDissimilarity)
)
publication_ignores_dissimilarity = _spec(
    "publication_ignores_dissimilarity", _fixed("pbd", _PublicationIgnoresDissimilarity)
)
split_by_wrong_count = _spec("split_by_wrong_count", _fixed("pbd", _SplitByWrongCount))
smallest_window_for_all = _spec(
    "smallest_window_for_all", _serve_wrong("smallest window", "uniform"), scaling="global"
)
largest_budget_for_all = _spec(
    "largest_budget_for_all", _serve_wrong("largest budget", "bd"), scaling="global"
)
sample_recycled_early = _spec(
    "sample_recycled_early", _fixed("sample", _SampleRecycledEarly), scaling="global"
)
sample_with_dissimilarity = _spec(
    "sample_with_dissimilarity", _fixed("sample", _SampleWithDissimilarity), scaling="global"
)
float_share_count = _spec("float_share_count", _plain(_FloatShareCount), symbolic=False)
rounded_up_share = _spec("rounded_up_share", _plain(_RoundedUpShare), symbolic=False)
floor_budget = _spec("floor_budget", _fixed("plbu", _FloorBudget, "sound"))
forgetful_state = _spec("forgetful_state", _plain(_Forgetful), symbolic=False)
stale_declaration = _spec("stale_declaration", _stale_declaration, requirement="dynamic")
later_declarations_ignored = _spec(
    "later_declarations_ignored",
    lambda alg, classes, variant: _LaterDeclarationsIgnored(alg, classes, variant),
    requirement="dynamic",
)
negative_after_change = _spec(
    "negative_after_change", _negative_after_change, requirement="dynamic"
)

MUTANTS: dict[str, AllocatorSpec] = {
    spec.name: spec
    for spec in (
        off_by_one_window,
        nullification_never_updated,
        absorb_uncapped,
        absorb_one_too_many,
        clip_forgets_dissimilarity,
        publication_ignores_dissimilarity,
        split_by_wrong_count,
        smallest_window_for_all,
        largest_budget_for_all,
        sample_recycled_early,
        sample_with_dissimilarity,
        float_share_count,
        rounded_up_share,
        floor_budget,
        forgetful_state,
        stale_declaration,
        later_declarations_ignored,
        negative_after_change,
    )
}

# Mutants whose defect is not a window the guard sees: the gate refutes them on conformance.
NOT_WINDOW_BUGS = frozenset({"forgetful_state"})


# ---------------------------------------------------------------------------- population kernels
# Population allocators (002 Section 6; 000) draw users from a pool; these change one integer of
# a built-in's setup (`wevent.mechanisms.allocators.local.population_setup`) the way a port might.


def _population(
    name: str, base: str, change: Any, kernel_variant: str | None = None
) -> PopulationSpec:
    """``base``'s setup with ``change(setup, classes, counts)`` applied to its configuration;
    ``kernel_variant`` pins the kernel's variant (``published``: no pool cap)."""

    def setup(classes: Sequence[ClassReq[Any]], counts: Sequence[int], d: int, variant: str) -> Any:
        built = population_setup(base, classes, counts, d, "sound")
        return dataclasses.replace(built, config=change(built.config, classes, counts))

    def kernel(alg: Algebra[Any, Any], config: PopulationConfig, variant: str) -> Any:
        return PopulationKernel(base, alg, config, kernel_variant or variant)

    return PopulationSpec(name, f"mutant of {base}", setup, kernel)


def _recycle_one_early(cfg: PopulationConfig, *_: Any) -> PopulationConfig:
    """The pool hands users back after w - 1 slots: a user reports twice in one window."""
    return dataclasses.replace(cfg, recycle=max(1, cfg.recycle - 1))


def _recycle_by_smallest_window(
    cfg: PopulationConfig, classes: Sequence[ClassReq[Any]], counts: Sequence[int]
) -> PopulationConfig:
    """PLPD with R and z from the smallest window instead of the largest (000 Algorithm 5
    line 2 with w_min): users of a longer window report again inside it."""
    w = min(c.w for c, k in zip(fixed_classes(classes, "mutant"), counts, strict=True) if k)
    return dataclasses.replace(cfg, recycle=w, unit=max(1, sample_size(cfg.n, w)))


def _capacity_all_users(cfg: PopulationConfig, *_: Any) -> PopulationConfig:
    """Publications may take all n users per R slots (not n/2), and no draw is capped by the
    pool: the dissimilarity draws then find it empty."""
    return dataclasses.replace(cfg, capacity=cfg.n)


recycled_user_reused_early = _population("recycled_user_reused_early", "lpd", _recycle_one_early)
recycle_by_smallest_window = _population(
    "recycle_by_smallest_window", "plpd", _recycle_by_smallest_window
)
draw_not_capped_by_pool = _population(
    "draw_not_capped_by_pool", "lpd", _capacity_all_users, kernel_variant="published"
)

POPULATION_MUTANTS: dict[str, PopulationSpec] = {
    spec.name: spec
    for spec in (recycled_user_reused_early, recycle_by_smallest_window, draw_not_capped_by_pool)
}
