"""The central dynamic family: kernels for dynamic backward/forward requirements, DPBD and DPBA
(001 Algorithms 6-7), and their specs (`SPECS`, collected by
`wevent.mechanisms.allocators.registry`).

Notation (001 Section 5): at slot t a class's declaration in force gives the backward window
``[t - w_B + 1, t]`` with bound ``E_B`` and the forward window ``[t, t + w_F - 1]`` with bound
``E_F``. ``T_B(t)`` is the set of slots tau <= t whose forward window still covers t.

Published rules (variant ``published``), per class:

* dissimilarity (Algorithm 6 lines 2-5, Algorithm 7 lines 2-5):
  ``min( min_{tau in T_B} E_F(tau) / (2 w_F(tau)),  E_B(t)/2 - dis[t-w_B+1 .. t-1] )``;
* DPBD publication (Algorithm 6 lines 9-13):
  ``min( 1/2 min_tau (E_F(tau)/2 - pub[tau .. t-1]),  E_B(t)/2 - pub[t-w_B+1 .. t-1] )``;
* DPBA (Algorithm 7 lines 6-25): ``t_FN(tau) = pub[tau .. t-1] / share(tau) + tau - 1`` with
  ``share(tau) = E_F(tau) / (2 w_F(tau))``; the slot is nullified if ``t <= t_FN(tau)`` for any
  class and tau; otherwise the publication budget is
  ``min( min(max_tau (t - t_FN(tau)) share(tau), min_tau (E_F(tau)/2 - pub[tau .. t-1])),
  E_B(t)/2 - pub[t-w_B+1 .. t-1] )``.

Why the published rules are unsound: each half is capped against half of the *current*
declaration only. After a requirement change one half can already hold more than its new cap, so
the rule allocates a negative budget; and a backward window holds both halves, so when the
dissimilarity half is over its new cap the publication half can still take a full ``E_B/2`` and
the window sum passes a requirement that was feasible when it was declared. Nor do the rules look
at declarations ahead of t, whose backward windows already cover t.

Sound rule (variant ``sound``, the default): compute the published candidates, clip them at zero,
then cap them by the *joint* room of every declared window that covers t — the backward window at
t, the backward window of every later declaration that reaches back over t, and the forward window
of every tau in T_B(t) — counting dissimilarity and publication together:
``room = min_W (bound(W) - spent in W before t)``; dissimilarity gets ``min(dis, room)`` and
publication ``min(pub, room - dis)``. A slot where no class has a positive publication budget is
nullified. Every spend then fits every window containing it, so no window is ever exceeded. The
declaration schedule is part of the input (as in 001 Table 3 and the requirements file), which is
what lets the kernel reserve room for declared future windows; a deployment whose declarations
arrive late must check each new one against the ledger (`Guard.headroom`) and reject it when
infeasible, as 001 Section 5.1 prescribes. Before a class's first declaration it spends nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, Generic, TypeVar

from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorError, AllocatorSpec, KernelFactory
from wevent.mechanisms.allocators.dynamic_du_code import DuCodeDynamicKernel
from wevent.mechanisms.allocators.kernel import (
    DU_CODE,
    VARIANTS,
    ClassReq,
    Decl,
    DynamicClass,
    Kernel,
    Plan,
    Prefix,
    check_variant,
    pushed_histories,
)

__all__ = ["SPECS", "DynamicKernel", "DynamicState", "as_dynamic"]

V = TypeVar("V")
B = TypeVar("B")


def as_dynamic(c: ClassReq[V]) -> DynamicClass[V]:
    """A fixed ``(w, eps)`` is the dynamic schedule B = F = (w, eps) from slot 1: every window
    of w slots is then both some slot's backward and some slot's forward window."""
    if isinstance(c, DynamicClass):
        return c
    return DynamicClass((Decl(1, c.w, c.eps, c.w, c.eps),))


@dataclass(frozen=True, slots=True)
class DynamicState(Generic[V]):
    dis: tuple[Prefix[V], ...]
    pub: tuple[Prefix[V], ...]


@dataclass(frozen=True, slots=True)
class _Schedule(Generic[V]):
    """A class's declarations with their spans ``[slot, end]`` (end = next slot - 1) and the
    per-declaration constants the rules use every slot (computed once)."""

    decls: tuple[Decl[V], ...]
    starts: tuple[int, ...]
    ends: tuple[int | None, ...]
    max_fwd: int
    max_back: int
    share: tuple[V, ...]  # E_F / (2 w_F)
    half_fwd: tuple[V, ...]  # E_F / 2
    half_back: tuple[V, ...]  # E_B / 2


def _schedule(alg: Algebra[V, B], c: DynamicClass[V]) -> _Schedule[V]:
    starts = tuple(d.slot for d in c.decls)
    ends: tuple[int | None, ...] = (*(s - 1 for s in starts[1:]), None)
    half = Fraction(1, 2)
    return _Schedule(
        c.decls,
        starts,
        ends,
        max(d.w_fwd for d in c.decls),
        max(d.w_back for d in c.decls),
        tuple(alg.scale(d.eps_fwd, Fraction(1, 2 * d.w_fwd)) for d in c.decls),
        tuple(alg.scale(d.eps_fwd, half) for d in c.decls),
        tuple(alg.scale(d.eps_back, half) for d in c.decls),
    )


# name -> its publication rule (001 Algorithm 6: distribution; 001 Algorithm 7: absorption)
_RULES: Final = {"dpbd": "distribution", "dpba": "absorption"}


class DynamicKernel(Generic[V, B]):
    """The kernel of ``dpbd`` or ``dpba`` (see the module docstring for the rules)."""

    def __init__(
        self,
        name: str,
        alg: Algebra[V, B],
        classes: Sequence[ClassReq[V]],
        variant: str = "sound",
    ) -> None:
        if name not in _RULES:
            raise AllocatorError(
                f"unknown dynamic allocator {name!r} (the kernel serves: {', '.join(_RULES)})"
            )
        check_variant(name, variant)
        self.name = name
        self.variant = variant
        self.alg = alg
        self.classes: tuple[ClassReq[V], ...] = tuple(classes)
        self._sched = tuple(_schedule(alg, as_dynamic(c)) for c in self.classes)
        self._keep = max(max(s.max_fwd, s.max_back) for s in self._sched)

    def start(self) -> DynamicState[V]:
        return DynamicState(
            dis=tuple(Prefix(self.alg, self._keep) for _ in self._sched),
            pub=tuple(Prefix(self.alg, self._keep) for _ in self._sched),
        )

    def plan(self, state: DynamicState[V], t: int) -> Plan[V, B]:
        """Each class's budgets come from `_class_plan` on that class's schedule and histories
        alone; classes share only the slot's nullification (an OR over classes) and so its
        publication bit. This is the non-interference the multi-class proofs rest on
        (`wevent.proofs.dynamic`)."""
        alg = self.alg
        dis_out, pub_out, nullify = [], [], []
        for s, dis_h, pub_h in zip(self._sched, state.dis, state.pub, strict=True):
            dis, pub, null = _class_plan(alg, self.name, self.variant, s, dis_h, pub_h, t)
            dis_out.append(dis)
            pub_out.append(pub)
            nullify.extend(null)
        nullified = alg.or_(*nullify)
        if self.variant == "sound":
            zero = alg.const(0)
            nullified = alg.or_(nullified, alg.and_(*(alg.le(p, zero) for p in pub_out)))
        return Plan(nullified, alg.truth(False), tuple(dis_out), tuple(pub_out))

    def step(
        self, state: DynamicState[V], t: int, plan: Plan[V, B], published: B
    ) -> DynamicState[V]:
        dis, pub = pushed_histories(self.alg, state.dis, state.pub, plan, published)
        return DynamicState(dis=dis, pub=pub)


# ---------------------------------------------------------------------- one class
# Module-level on purpose: a class's budgets are a function of its own schedule and histories
# (and t) only, which is what lets `wevent.proofs.dynamic` prove one class at a time.


def _covering(s: _Schedule[V], t: int, idx: int) -> list[tuple[int, int, int]]:
    """``T_B(t)`` grouped by declaration: ``(declaration index, first tau, last tau)`` for every
    declaration in force at some tau <= t whose forward window still covers t.

    Within one declaration the bound is the same for every tau, and the earliest tau has the
    most spent since it (spends are never negative), so the earliest tau is the binding one
    for the remaining-budget rules; DPBA's absorption counts still visit every tau."""
    out = []
    j = idx
    while j >= 0:
        d, start, end = s.decls[j], s.starts[j], s.ends[j]
        last = t if end is None else min(end, t)
        if last < t - s.max_fwd + 1:
            break
        first = max(start, t - d.w_fwd + 1)
        if first <= last:
            out.append((j, first, last))
        j -= 1
    return out


def _class_plan(
    alg: Algebra[V, B],
    name: str,
    variant: str,
    s: _Schedule[V],
    dis_h: Prefix[V],
    pub_h: Prefix[V],
    t: int,
) -> tuple[V, V, list[B]]:
    """One class's dissimilarity and publication budgets at t and its nullification conditions
    (001 Algorithm 6 lines 2-13, Algorithm 7 lines 2-25; the sound clip and joint room of the
    module docstring)."""
    zero = alg.const(0)
    half = Fraction(1, 2)
    idx = bisect.bisect_right(s.starts, t) - 1
    if idx < 0:  # no requirement in force yet: nothing may be spent
        return zero, zero, []
    d = s.decls[idx]
    cover = _covering(s, t, idx)
    nullify: list[B] = []
    # Part_DC: Algorithm 6/7 lines 3-5.
    dis_fwd = vmin(alg, *(s.share[j] for j, _, _ in cover))
    dis_back = alg.sub(s.half_back[idx], dis_h.total(t - d.w_back + 1, t - 1))
    dis = vmin(alg, dis_fwd, dis_back)
    pub_back = alg.sub(s.half_back[idx], pub_h.total(t - d.w_back + 1, t - 1))
    fwd_left = [alg.sub(s.half_fwd[j], pub_h.total(first, t - 1)) for j, first, _ in cover]
    if _RULES[name] == "distribution":  # Algorithm 6 lines 9-13
        pub = vmin(alg, alg.scale(vmin(alg, *fwd_left), half), pub_back)
    else:  # Algorithm 7 lines 6-8 and 15-25
        absorb = []
        for j, first, last in cover:
            for tau in range(first, last + 1):
                right = alg.count_add(
                    alg.ratio(pub_h.total(tau, t - 1), s.share[j]), alg.const(tau - 1)
                )
                nullify.append(alg.le(alg.const(t), right))
                absorb.append(alg.mul(alg.count_sub(alg.const(t), right), s.share[j]))
        pub = vmin(alg, vmin(alg, vmax(alg, *absorb), *fwd_left), pub_back)
    if variant == "sound":
        room = _room(alg, s, dis_h, pub_h, t, idx, cover)
        dis = vmin(alg, vmax(alg, dis, zero), room)
        pub = vmin(alg, vmax(alg, pub, zero), alg.sub(room, dis))
    return dis, pub, nullify


def _room(
    alg: Algebra[V, B],
    s: _Schedule[V],
    dis_h: Prefix[V],
    pub_h: Prefix[V],
    t: int,
    idx: int,
    cover: list[tuple[int, int, int]],
) -> V:
    """The joint room at t: the least ``bound - spent before t`` over every declared window
    covering t (clipped at zero)."""

    def spent(a: int) -> V:
        return alg.add(dis_h.total(a, t - 1), pub_h.total(a, t - 1))

    d = s.decls[idx]
    rooms = [alg.sub(d.eps_back, spent(t - d.w_back + 1))]
    # Later declarations whose backward window (at their first slot, the tightest) covers t.
    j = idx + 1
    while j < len(s.decls) and s.starts[j] <= t + s.max_back - 1:
        dj = s.decls[j]
        if s.starts[j] - dj.w_back + 1 <= t:
            rooms.append(alg.sub(dj.eps_back, spent(s.starts[j] - dj.w_back + 1)))
        j += 1
    rooms.extend(alg.sub(s.decls[j].eps_fwd, spent(first)) for j, first, _ in cover)
    return vmax(alg, vmin(alg, *rooms), alg.const(0))


def _factory(name: str) -> KernelFactory:
    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        kernel: Kernel[Any, Any, Any]
        if variant == DU_CODE:  # DynamicWEventCode's step (`dynamic_du_code`)
            kernel = DuCodeDynamicKernel(name, alg, classes)
        else:
            kernel = DynamicKernel(name, alg, classes, variant)
        return kernel

    return factory


# The variants of both: the sound and printed rules (`DynamicKernel`) and DynamicWEventCode's own
# step (``du-code``, `wevent.mechanisms.allocators.dynamic_du_code`: unsound, refuted by the gate).
DYNAMIC_VARIANTS: Final = (*VARIANTS, DU_CODE)

# The family's specs. DPBA's absorption counts divide spends by the forward budgets (``divides``:
# its proof fixes forward budgets to ratios of the first, `wevent.proofs.dynamic.budget_cases`).
SPECS: Final = (
    AllocatorSpec(
        "dpbd",
        "dynamic",
        "per-class",
        "dynamic distribution (001 Algorithm 6)",
        _factory("dpbd"),
        variants=DYNAMIC_VARIANTS,
    ),
    AllocatorSpec(
        "dpba",
        "dynamic",
        "per-class",
        "dynamic absorption (001 Algorithm 7)",
        _factory("dpba"),
        divides=True,
        variants=DYNAMIC_VARIANTS,
    ),
)
