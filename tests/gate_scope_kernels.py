"""Broken allocators whose bug shows only past the proof's default scope (w <= 3, 2 classes, 9
slots): the wide search (`wevent.gate.search.WideScope`) must refute them, the old scope did
not (`tests/test_gate_search.py`). Each starts from a built-in kernel (the ``published``
variant, which has no safety clip, as a third party's would not) and changes one thing.
Loaded by the gate as ``tests.gate_scope_kernels:NAME``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorSpec, PopulationSpec
from wevent.mechanisms.allocators.dynamic import DynamicKernel
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

__all__ = [
    "SCOPE_KERNELS",
    "at_most_four_classes",
    "needs_many_users",
    "recycle_short_from_five",
]

F = Fraction


class _ShareShortAtFive(FixedKernel[Any, Any]):
    """PBD splitting the dissimilarity half of a window of 5 or more slots by w - 1 (a table of
    shares computed for w <= 4 and extrapolated wrongly)."""

    def _share(self, c: FixedClass[Any]) -> Any:
        w = c.w - 1 if c.w >= 5 else c.w
        return self.alg.scale(c.eps, F(1, 2 * w))


class _ThirdClassDoubled(FixedKernel[Any, Any]):
    """PBD that, with three or more classes, spends the last class's dissimilarity share twice
    (an index mix-up in a per-class loop that only a third class exposes)."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        dis = list(plan.dissimilarity)
        if len(dis) >= 3:
            dis[-1] = self.alg.scale(dis[-1], F(2))
        return Plan(plan.nullified, plan.forced, tuple(dis), plan.publication)


class _LateDoubleShare(FixedKernel[Any, Any]):
    """PBD whose dissimilarity share doubles after slot 4 max(w, 3) (a warm-up phase that ends
    with the wrong rate): every window of a run shorter than a dozen slots holds."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        dis = tuple(
            self.alg.scale(d, F(2)) if t > 4 * max(c.w, 3) else d
            for d, c in zip(plan.dissimilarity, self.served, strict=True)
        )
        return Plan(plan.nullified, plan.forced, dis, plan.publication)


class _HistoryOfEight(FixedKernel[Any, Any]):
    """PBD whose publication history is a ring buffer of 8 slots: the remaining publication
    budget subtracts only the last min(w - 1, 8) publications, so windows of 10 or more slots
    overspend (after about a dozen slots)."""

    def _distribution(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._share(c))
            back = min(c.w - 1, 8)
            remaining = alg.sub(alg.scale(c.eps, F(1, 2)), hist.total(t - back, t - 1))
            pub.append(alg.scale(remaining, F(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))


class _ShareTableToSeven(FixedKernel[Any, Any]):
    """PBD whose dissimilarity shares come from a table for windows 1..7 (eps / (2 min(w, 7))):
    a window of 8 or more slots spends more than half its budget on dissimilarities."""

    def _share(self, c: FixedClass[Any]) -> Any:
        return self.alg.scale(c.eps, F(1, 2 * min(c.w, 7)))


class _ShortWindowFromFour(FixedKernel[Any, Any]):
    """PBD whose remaining publication budget sums the last w - 2 publications once w >= 4
    (001 Algorithm 4 line 3, a window one slot short only for the longer windows)."""

    def _distribution(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._share(c))
            first = t - c.w + (2 if c.w >= 4 else 1)
            remaining = alg.sub(alg.scale(c.eps, F(1, 2)), hist.total(first, t - 1))
            pub.append(alg.scale(remaining, F(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))


class _AccountantResetsEvery4w(FixedKernel[Any, Any]):
    """PBD whose publication accountant is cleared every 4 w slots (a periodic reset meant for
    the log, applied to the budget): the slot after a reset ignores the window's earlier
    publications, so the bug needs more than 4 w slots."""

    def _distribution(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._share(c))
            since_reset = (t - 1) % (4 * c.w)  # slots since the last reset
            first = max(t - c.w + 1, t - since_reset)
            remaining = alg.sub(alg.scale(c.eps, F(1, 2)), hist.total(first, t - 1))
            pub.append(alg.scale(remaining, F(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))


class _ClockWrapsAt64(FixedKernel[Any, Any]):
    """PBD keeping its publication history in a 64-slot ring indexed by t mod 64: from slot 65
    on, a window straddling the wrap reads an empty stretch of the ring instead of the last
    publications, so nothing before slot 65 shows it."""

    def _distribution(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._share(c))
            wrapped = (t - 1) % 64 + 1
            first = t - min(c.w - 1, wrapped - 1)  # the ring holds no slot before the wrap
            remaining = alg.sub(alg.scale(c.eps, F(1, 2)), hist.total(first, t - 1))
            pub.append(alg.scale(remaining, F(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))


class _FifthClassBorrowsBudget(FixedKernel[Any, Any]):
    """PBD vectorized over blocks of four classes whose tail loop reads the first class's budget:
    a fifth class with a smaller budget than the first spends the first's."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        first = self.served[0]
        self.served = tuple(
            FixedClass(c.w, first.eps) if i >= 4 else c for i, c in enumerate(self.served)
        )


class _AbsorbPastWindowFromSix(FixedKernel[Any, Any]):
    """PBA capping the absorbed shares at w for windows up to 5 and at w + 1 from w = 6 (001
    Algorithm 5 line 12 with a cap table that is off by one for the longer windows)."""

    def _absorption(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        zero, one = alg.const(0), alg.const(1)
        shares = [self._share(c) for c in self.served]
        t_n = [
            alg.count_sub(alg.ratio(u, s), one) for u, s in zip(state.last_pub, shares, strict=True)
        ]
        since = alg.count_sub(alg.const(t), state.last)
        pub = []
        for c, share, tn in zip(self.served, shares, t_n, strict=True):
            cap = c.w + 1 if c.w >= 6 else c.w
            absorbed = vmax(alg, alg.count_sub(since, tn), zero)
            pub.append(alg.mul(share, vmin(alg, absorbed, alg.const(cap))))
        nullified = alg.le(since, vmax(alg, *t_n))
        return Plan(nullified, alg.truth(False), tuple(shares), tuple(pub))


def _fourth_class_forgotten(
    alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str
) -> Any:
    """Uniform serving everyone with the largest window and smallest budget of the first three
    classes (a fixed-size array of three): a fourth class with a smaller budget or a longer
    window overspends."""
    kernel = FixedKernel("uniform", alg, classes, "published")
    first = fixed_classes(classes, "uniform")[:3]
    one = FixedClass(max(c.w for c in first), vmin(alg, *(c.eps for c in first)))
    kernel.served = tuple(one for _ in kernel.classes)
    kernel._keep = one.w
    return kernel


class _TinyBudgetFloor:
    """Uniform in plain Python with a floor of 0.001 on every share (a noise-scale guard that
    keeps the Laplace scale finite): for budgets below 0.001 w a window spends more than eps,
    so only the awkward tiny budgets (1/1000) show it."""

    name = "tiny-floor"

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> None:
        self.variant = variant
        self.alg = alg
        self.classes = tuple(classes)
        self.fixed = fixed_classes(classes, "tiny-floor")

    def start(self) -> int:
        return 0

    def step(self, state: int, t: int, plan: Plan[Any, Any], published: Any) -> int:
        return t

    def plan(self, state: int, t: int) -> Plan[Any, Any]:
        pubs = []
        for c in self.fixed:
            share = c.eps / c.w
            if share < F(1, 1000):
                share = F(1, 1000)
            pubs.append(share)
        return Plan(False, True, tuple(F(0) for _ in pubs), tuple(pubs))


def _first_two_classes(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str) -> Any:
    """BD serving everyone with the largest window and smallest budget of the *first two*
    classes only (001 Section 6.2 takes them over all classes): a third class with a smaller
    budget overspends."""
    kernel = FixedKernel("bd", alg, classes, "published")
    first = fixed_classes(classes, "bd")[:2]
    one = FixedClass(max(c.w for c in first), vmin(alg, *(c.eps for c in first)))
    kernel.served = tuple(one for _ in kernel.classes)
    return kernel


def _fixed(cls: type[FixedKernel[Any, Any]]) -> Any:
    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str) -> Any:
        return cls("pbd", alg, classes, "published")

    return factory


LATE_CHANGE = 10


def _late_change_ignored(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str) -> Any:
    """DPBD that reads declarations only from a buffer of the first 10 slots: a requirement
    change after slot 10 is never picked up (the old 9-slot search never declares one)."""
    early: list[ClassReq[Any]] = [
        DynamicClass(tuple(d for d in c.decls if d.slot <= LATE_CHANGE) or c.decls[:1])
        if isinstance(c, DynamicClass)
        else c
        for c in classes
    ]
    kernel = DynamicKernel("dpbd", alg, early, "sound")
    kernel.classes = tuple(classes)
    return kernel


def _at_most_four_classes(
    alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str
) -> Any:
    """Sound PBD that serves at most four requirement classes (refuses more, as a third-party
    kernel may): the wide search must skip those inputs, not call the kernel unusable."""
    if len(classes) > 4:
        raise BudgetError("serves at most 4 requirement classes")
    return FixedKernel("pbd", alg, classes, variant)


def _spec(
    name: str, factory: Any, requirement: str = "fixed", scaling: str = "per-class"
) -> AllocatorSpec:
    return AllocatorSpec(name, requirement, scaling, f"scope-only bug: {name}", factory)


share_short_at_five = _spec("share_short_at_five", _fixed(_ShareShortAtFive))
share_table_to_seven = _spec("share_table_to_seven", _fixed(_ShareTableToSeven))
short_window_from_four = _spec("short_window_from_four", _fixed(_ShortWindowFromFour))
accountant_resets_every_4w = _spec("accountant_resets_every_4w", _fixed(_AccountantResetsEvery4w))
clock_wraps_at_64 = _spec("clock_wraps_at_64", _fixed(_ClockWrapsAt64))
fifth_class_borrows_budget = _spec(
    "fifth_class_borrows_budget", _fixed(_FifthClassBorrowsBudget), scaling="global"
)
absorb_past_window_from_six = AllocatorSpec(
    "absorb_past_window_from_six",
    "fixed",
    "per-class",
    "scope-only bug: absorb_past_window_from_six",
    lambda alg, classes, _: _AbsorbPastWindowFromSix("pba", alg, classes, "published"),
)
fourth_class_forgotten = _spec("fourth_class_forgotten", _fourth_class_forgotten, scaling="global")
tiny_budget_floor = AllocatorSpec(
    "tiny_budget_floor",
    "fixed",
    "none",
    "scope-only bug: tiny_budget_floor",
    lambda alg, classes, variant: _TinyBudgetFloor(alg, classes, variant),
    symbolic=False,
)
third_class_doubled = _spec("third_class_doubled", _fixed(_ThirdClassDoubled))
late_double_share = _spec("late_double_share", _fixed(_LateDoubleShare))
late_change_ignored = _spec("late_change_ignored", _late_change_ignored, "dynamic")
history_of_eight = _spec("history_of_eight", _fixed(_HistoryOfEight))
first_two_classes = _spec("first_two_classes", _first_two_classes, scaling="global")
at_most_four_classes = _spec("at_most_four_classes", _at_most_four_classes)

# Every scope-only bug: a window >= 5, three classes, a failing slot past 12, a declaration
# past slot 10, a window >= 10, a third class with a smaller budget; a window >= 8, a window
# >= 4, a run past 4 w slots, a run past slot 64, a fifth class, a window >= 6 (absorption), a
# fourth class, a budget below 0.001 w.
SCOPE_KERNELS: dict[str, AllocatorSpec] = {
    spec.name: spec
    for spec in (
        share_short_at_five,
        third_class_doubled,
        late_double_share,
        late_change_ignored,
        history_of_eight,
        first_two_classes,
        share_table_to_seven,
        short_window_from_four,
        accountant_resets_every_4w,
        clock_wraps_at_64,
        fifth_class_borrows_budget,
        absorb_past_window_from_six,
        fourth_class_forgotten,
        tiny_budget_floor,
    )
}


# ---------------------------------------------------------------------------- population kernels


def _lpa_setup(
    change: Any,
) -> Any:
    def setup(classes: Sequence[ClassReq[Any]], counts: Sequence[int], d: int, variant: str) -> Any:
        built = population_setup("lpa", classes, counts, d, "sound")
        return change(built, fixed_classes(classes, "lpa"), counts)

    return setup


def _lpa_kernel(alg: Algebra[Any, Any], config: PopulationConfig, variant: str) -> Any:
    return PopulationKernel("lpa", alg, config, variant)


def _recycle_short_from_five(built: Any, classes: Sequence[FixedClass[Any]], _: Any) -> Any:
    """LPA whose recycle period is w - 2 once the largest window is 5 or more (a lookup table
    of periods for w <= 4): a user comes back inside their own window and spends eps twice."""
    w = max(c.w for c in classes)
    if w < 5:
        return built
    return dataclasses.replace(built, config=dataclasses.replace(built.config, recycle=w - 2))


def _needs_many_users(built: Any, classes: Sequence[FixedClass[Any]], counts: Any) -> Any:
    """Sound LPA that refuses populations of fewer than 20 users per slot of the largest window
    (its frequency oracle needs them): the gate must skip those inputs, not call it unusable."""
    w = max(c.w for c in classes)
    if sum(counts) < 20 * w:
        raise BudgetError(f"needs at least {20 * w} users for a window of {w}")
    return built


def _recycle_short_for_large_pools(
    built: Any, classes: Sequence[FixedClass[Any]], counts: Any
) -> Any:
    """LPA whose recycle period is w - 1 once the pool holds 40 w users or more (a "large pool"
    shortcut): only populations far past the old search's 2w..3w users show it."""
    w = max(c.w for c in classes)
    if sum(counts) < 40 * w or w < 2:
        return built
    return dataclasses.replace(built, config=dataclasses.replace(built.config, recycle=w - 1))


recycle_short_for_large_pools = PopulationSpec(
    "recycle_short_for_large_pools",
    "scope-only bug: recycle period w - 1 for pools of 40 w users or more",
    _lpa_setup(_recycle_short_for_large_pools),
    _lpa_kernel,
)
recycle_short_from_five = PopulationSpec(
    "recycle_short_from_five",
    "scope-only bug: recycle period w - 2 for w >= 5",
    _lpa_setup(_recycle_short_from_five),
    _lpa_kernel,
)
needs_many_users = PopulationSpec(
    "needs_many_users", "sound LPA needing 20 w users", _lpa_setup(_needs_many_users), _lpa_kernel
)
