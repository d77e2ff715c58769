"""Sound allocators that are not built-ins, for the gate's acceptance side:
the default `wevent gate` must accept each (exit 0; PROVED where the kernel runs on Z3 terms,
PASSED (searched, not proved) where it cannot). Written against the public allocator API as a
researcher would; each docstring says why it is sound. Loaded as ``tests.gate_sound:NAME``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from tests.gate_scope_kernels import _lpa_kernel, _lpa_setup, needs_many_users
from tests.test_gate_verdicts import PLAIN_SOUND
from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorSpec, PopulationSpec
from wevent.mechanisms.allocators.dynamic import DynamicKernel
from wevent.mechanisms.allocators.fixed import FixedKernel, FixedState
from wevent.mechanisms.allocators.kernel import ClassReq, FixedClass, Plan, fixed_classes

__all__ = ["SOUND", "SOUND_POPULATION"]

F = Fraction


class _HalfUniform(FixedKernel[Any, Any]):
    """Uniform spending eps / (2 w) per slot: half of Kellaris' rate, every window holds eps/2."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        half = tuple(self.alg.scale(p, F(1, 2)) for p in plan.publication)
        return Plan(plan.nullified, plan.forced, plan.dissimilarity, half)


class _CappedDistribution(FixedKernel[Any, Any]):
    """PBD (001 Algorithm 4) whose publication budget is also capped at eps / 4: a cap only
    lowers spends, so the published PBD's proof carries over."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        pubs = tuple(
            vmin(self.alg, p, self.alg.scale(c.eps, F(1, 4)))
            for p, c in zip(plan.publication, self.served, strict=True)
        )
        return Plan(plan.nullified, plan.forced, plan.dissimilarity, pubs)


class _WholeWindowDistribution(FixedKernel[Any, Any]):
    """PBD subtracting the last w publications instead of w - 1 (DynamicWEventCode's
    conservative rule): it subtracts more, so it spends less."""

    def _distribution(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        dis, pub = [], []
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._share(c))
            remaining = alg.sub(alg.scale(c.eps, F(1, 2)), hist.total(t - c.w, t - 1))
            pub.append(alg.scale(vmax(alg, remaining, alg.const(0)), F(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))


class _ThirdOfWhatIsLeft(FixedKernel[Any, Any]):
    """Publishes every slot, spending a third of what the window has left (eps minus the last
    w - 1 slots' spends): the room never goes below zero, so no window passes eps."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        zero = alg.const(0)
        pubs = []
        for i, c in enumerate(self.served):
            spent = alg.add(
                state.dis[i].total(t - c.w + 1, t - 1), state.pub[i].total(t - c.w + 1, t - 1)
            )
            pubs.append(alg.scale(vmax(alg, alg.sub(c.eps, spent), zero), F(1, 3)))
        return Plan(alg.truth(False), alg.truth(True), tuple(zero for _ in pubs), tuple(pubs))


class _PeriodicPerClass(FixedKernel[Any, Any]):
    """Each class spends its whole eps at slots 1, w_i + 1, 2 w_i + 1, ... (Kellaris' sampling,
    personalized): any w_i consecutive slots hold exactly one of them."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        zero = alg.const(0)
        pubs = tuple(c.eps if (t - 1) % c.w == 0 else zero for c in self.served)
        return Plan(alg.truth(False), alg.truth(True), tuple(zero for _ in pubs), pubs)


class _ThirdShares(FixedKernel[Any, Any]):
    """PBA (001 Algorithm 5, sound variant) with every budget multiplied by 1/3 (a researcher
    keeping two thirds for other queries): awkward budgets, still within each window."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        third = self.alg.const(F(1, 3))
        return Plan(
            plan.nullified,
            plan.forced,
            tuple(self.alg.mul(d, third) for d in plan.dissimilarity),
            tuple(self.alg.mul(p, third) for p in plan.publication),
        )


def _uniform_for_all(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str) -> Any:
    """Uniform serving everyone with the largest window and the smallest budget over all
    classes (001 Section 6.2), reimplemented: every class gets at most its own rate."""
    kernel = FixedKernel("uniform", alg, classes, "published")
    fixed = fixed_classes(classes, "uniform")
    one = FixedClass(max(c.w for c in fixed), vmin(alg, *(c.eps for c in fixed)))
    kernel.served = tuple(one for _ in kernel.classes)
    kernel._keep = one.w
    return kernel


class _HalvedDynamic(DynamicKernel[Any, Any]):
    """DPBD (001 Algorithm 6, sound variant) with every budget halved: dynamic requirements,
    requirement changes included, with half the room."""

    def plan(self, state: Any, t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        half = F(1, 2)
        return Plan(
            plan.nullified,
            plan.forced,
            tuple(self.alg.scale(d, half) for d in plan.dissimilarity),
            tuple(self.alg.scale(p, half) for p in plan.publication),
        )


def _kernel(base: str, cls: Any, variant: str = "published") -> Any:
    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], _: str) -> Any:
        return cls(base, alg, classes, variant)

    return factory


def _spec(name: str, factory: Any, scaling: str = "per-class", requirement: str = "fixed") -> Any:
    return AllocatorSpec(name, requirement, scaling, f"sound: {name}", factory)


half_uniform = _spec("half_uniform", _kernel("pbd", _HalfUniform), "per-class")
capped_distribution = _spec("capped_distribution", _kernel("pbd", _CappedDistribution))
whole_window_distribution = _spec(
    "whole_window_distribution", _kernel("pbd", _WholeWindowDistribution)
)
third_of_what_is_left = _spec("third_of_what_is_left", _kernel("pbd", _ThirdOfWhatIsLeft))
periodic_per_class = _spec("periodic_per_class", _kernel("pbd", _PeriodicPerClass))
third_shares = _spec("third_shares", _kernel("pba", _ThirdShares, "sound"))
uniform_for_all = _spec("uniform_for_all", _uniform_for_all, "global")
halved_dynamic = _spec(
    "halved_dynamic", _kernel("dpbd", _HalvedDynamic, "sound"), requirement="dynamic"
)
plain_uniform = dataclasses.replace(PLAIN_SOUND, name="plain_uniform")


def _recycle_long(built: Any, classes: Sequence[FixedClass[Any]], _: Any) -> Any:
    """LPA whose users wait w + 1 slots before they are drawn again (one slot longer than
    needed): fewer reports per window."""
    config = built.config
    return dataclasses.replace(
        built, config=dataclasses.replace(config, recycle=config.recycle + 1)
    )


recycle_one_longer = PopulationSpec(
    "recycle_one_longer", "sound LPA waiting w + 1 slots", _lpa_setup(_recycle_long), _lpa_kernel
)

SOUND: dict[str, AllocatorSpec] = {
    spec.name: spec
    for spec in (
        half_uniform,
        capped_distribution,
        whole_window_distribution,
        third_of_what_is_left,
        periodic_per_class,
        third_shares,
        uniform_for_all,
        halved_dynamic,
        plain_uniform,
    )
}
SOUND_POPULATION: dict[str, PopulationSpec] = {
    spec.name: spec for spec in (recycle_one_longer, needs_many_users)
}
