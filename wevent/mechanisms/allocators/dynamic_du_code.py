"""The ``du-code`` variant of dpba and dpbd: the five-argument step of Du et al.'s public Java code
(DynamicWEventCode, snapshot 286adeaf92e8), as a kernel that `wevent gate` refutes.

The rules, restated from reading the code (no code copied; `analysis/du_code_dynamic.py` restates
the same step per user, independently of this kernel, and `tests/test_du_code_kernel.py` holds the
two to the same spends). Paths are under ``src/main/java/ecnu/dll/``: ``DPWSM`` is
``schemes/main_scheme/b_dynamic_windown_size/DynamicPersonalizedWindowSizeMechanism.java``,
``DPBA`` and ``DPBD`` its subclasses ``DynamicPersonalizedBudgetAbsorption.java`` and
``DynamicPersonalizedBudgetDistribution.java``; ``struts/direct_stream/`` holds the streams.
Slots count from 1; a fixed requirement ``(w, eps)`` is the declaration B = F = (w, eps).

* Forward elements: slot s adds one element with the forward requirement in force at s; it
  covers the slots ``[s, s + w_F - 1]`` (DPWSM:53-64, ForwardImpactStream.java:19-37).
* Recording: a slot that is not nullified appends its dissimilarity budget and its candidate
  publication budget to the class's backward history whether it published or skipped
  (DPWSM:66-73, 185; DPBA:148). The history is indexed by *record*, not by slot: "the last
  w_B - 1 entries" (BackwardHistoricalStream.java:41-56) reach back past nullified slots.
  Here it is kept as the sums of the newest 1, 2, ..., L records (a fixed-length tuple, each
  entry updated by ``alg.select`` when the slot records, so "the last n" is one lookup); L
  covers the longest sum the rules take (the code keeps the largest
  configured window plus one entries, ``_config/Constant.java:60``, which never binds).
* Dissimilarity (both): ``min( min over elements of E_F / (2 w_F), max(E_B / 2 - the last
  w_B - 1 recorded dissimilarity budgets, 0) )`` (DPWSM:85-95, ForwardImpactStreamTools.java:
  26-39), spent every slot, a nullified one included (DPBA:136 runs it before the test).
* DPBA's usage and border: an element's usage is the sum of the candidates recorded since its
  slot (ImpactElementAbsorption.java:19-23): a slot-indexed `Prefix` of the recorded candidates,
  0 at a slot that records nothing. Its border is ``ceil(usage / (E_F / (2 w_F))) + s - 2``
  (ForwardImpactStreamAbsorption.java:12-16; the element's clock counts from 0, so a fresh
  element's border is ``s - 2``, ImpactElementAbsorption.java:9-14). ``ceil(x) = -floor(-x)``.
* DPBA's nullification: the slot t is nullified iff ``t <= `` the largest border over every
  element of every user (DPBA:110-128, 139-144 with ``MaximalNullifiedBound``, the bound the
  repository's runners construct DPBA with; they call another step, which never nullifies, and
  only the repository's JUnit test calls this one, with the average bound): an OR over classes. The code's other bounds (average, min over users) are no variant here.
  A nullified slot returns at once: nothing is recorded.
* DPBA's candidate: ``min( min(max(0, max over elements (t - border) E_F / (2 w_F)), min over
  elements (E_F / 2 - usage)), E_B / 2 - the last w_B - 1 recorded candidates )`` (DPBA:52-79),
  with no clip at zero.
* DPBD's candidate: ``min( 1/2 min over elements (E_F / 2 - the last t - s recorded
  candidates), E_B / 2 - the last w_B - 1 recorded candidates )`` (DPBD:17-36,
  ForwardImpactStreamTools.java:47-61), no clip at zero, no nullification.

The candidate is spent only when the slot publishes (DPWSM:144, the data path decides). A
candidate can be negative after a requirement change; the code would spend it, wevent refuses it
(the trace says INVALID, the runner raises). Before a class's first declaration the code has no
requirement to run with; here such a class spends nothing, records nothing and adds no element.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Generic, TypeVar

from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorError
from wevent.mechanisms.allocators.kernel import (
    DU_CODE,
    ClassReq,
    Decl,
    DynamicClass,
    Plan,
    Prefix,
)

__all__ = ["DuCodeDynamicKernel", "DuCodeDynamicState"]

V = TypeVar("V")
B = TypeVar("B")

_RULES: Final = {"dpbd": "distribution", "dpba": "absorption"}


@dataclass(frozen=True, slots=True)
class DuCodeDynamicState(Generic[V]):
    """Per class: the sums of the newest 1, 2, ..., L recorded dissimilarity and candidate
    budgets (fewer records count as 0) and the recorded candidates by slot (0 where nothing
    was recorded), whose sums are DPBA's usages."""

    calc: tuple[tuple[V, ...], ...]
    pub: tuple[tuple[V, ...], ...]
    usage: tuple[Prefix[V], ...]


@dataclass(frozen=True, slots=True)
class _Schedule(Generic[V]):
    decls: tuple[Decl[V], ...]
    starts: tuple[int, ...]
    share: tuple[V, ...]  # E_F / (2 w_F)
    half_fwd: tuple[V, ...]  # E_F / 2
    half_back: tuple[V, ...]  # E_B / 2

    def index(self, t: int) -> int:
        """The declaration in force at t, -1 before the first."""
        return bisect.bisect_right(self.starts, t) - 1


def _declarations(c: ClassReq[V]) -> tuple[Decl[V], ...]:
    if isinstance(c, DynamicClass):
        return c.decls
    return (Decl(1, c.w, c.eps, c.w, c.eps),)  # the step's four arguments for a fixed (w, eps)


def _last(alg: Algebra[V, B], sums: tuple[V, ...], count: int) -> V:
    """The sum of the newest ``count`` recorded entries (BackwardHistoricalStream.java:41-56),
    from the sums of the newest 1, 2, ..., L."""
    return sums[count - 1] if count > 0 else alg.const(0)


def _ceil(alg: Algebra[V, B], x: V) -> V:
    zero = alg.const(0)
    return alg.sub(zero, alg.floor(alg.sub(zero, x)))


class DuCodeDynamicKernel(Generic[V, B]):
    """dpba or dpbd as DynamicWEventCode's five-argument step (module docstring)."""

    def __init__(self, name: str, alg: Algebra[V, B], classes: Sequence[ClassReq[V]]) -> None:
        if name not in _RULES:
            raise AllocatorError(
                f"unknown dynamic allocator {name!r} (the du-code kernel serves: "
                f"{', '.join(_RULES)})"
            )
        self.name = name
        self.variant = DU_CODE
        self.alg = alg
        self.classes: tuple[ClassReq[V], ...] = tuple(classes)
        half = Fraction(1, 2)
        scheds = []
        for c in self.classes:
            decls = _declarations(c)
            scheds.append(
                _Schedule(
                    decls,
                    tuple(d.slot for d in decls),
                    tuple(alg.scale(d.eps_fwd, Fraction(1, 2 * d.w_fwd)) for d in decls),
                    tuple(alg.scale(d.eps_fwd, half) for d in decls),
                    tuple(alg.scale(d.eps_back, half) for d in decls),
                )
            )
        self._sched = tuple(scheds)
        self._max_fwd = max(d.w_fwd for s in self._sched for d in s.decls)
        # Long enough for every sum the rules take: w_B - 1 entries back, t - s <= w_F - 1 forward.
        self._length = max(max(d.w_back, d.w_fwd) for s in self._sched for d in s.decls)

    def start(self) -> DuCodeDynamicState[V]:
        zero = self.alg.const(0)
        empty = (zero,) * self._length
        n = len(self._sched)
        return DuCodeDynamicState(
            calc=(empty,) * n,
            pub=(empty,) * n,
            # (as long as the records: a proof's state digest reads back the longest window)
            usage=tuple(Prefix(self.alg, self._length) for _ in range(n)),
        )

    def _elements(self, s: _Schedule[V], t: int) -> list[tuple[int, int]]:
        """``(slot, declaration index)`` of every forward element alive at t."""
        out = []
        for slot in range(max(t - self._max_fwd + 1, 1), t + 1):
            j = s.index(slot)
            if j >= 0 and slot + s.decls[j].w_fwd - 1 >= t:
                out.append((slot, j))
        return out

    def plan(self, state: DuCodeDynamicState[V], t: int) -> Plan[V, B]:
        alg = self.alg
        zero = alg.const(0)
        now = alg.const(t)
        absorption = _RULES[self.name] == "absorption"
        dis_out, pub_out, nullify = [], [], []
        for s, calc, pub, usage in zip(
            self._sched, state.calc, state.pub, state.usage, strict=True
        ):
            idx = s.index(t)
            if idx < 0:  # no requirement yet: nothing spent, nothing recorded
                dis_out.append(zero)
                pub_out.append(zero)
                continue
            d = s.decls[idx]
            elements = self._elements(s, t)
            # DPWSM:85-95: the least forward share and the backward remainder clipped at 0.
            dis_fwd = vmin(alg, *(s.share[j] for _, j in elements))
            dis_back = alg.sub(s.half_back[idx], _last(alg, calc, d.w_back - 1))
            dis_out.append(vmin(alg, dis_fwd, vmax(alg, dis_back, zero)))
            back = alg.sub(s.half_back[idx], _last(alg, pub, d.w_back - 1))
            if absorption:  # DPBA:52-79, 110-128
                absorb, remain = [zero], []
                for slot, j in elements:
                    used = usage.total(slot, t - 1)
                    border = alg.count_add(
                        _ceil(alg, alg.ratio(used, s.share[j])), alg.const(slot - 2)
                    )
                    nullify.append(alg.le(now, border))
                    absorb.append(alg.mul(alg.count_sub(now, border), s.share[j]))
                    remain.append(alg.sub(s.half_fwd[j], used))
                forward = vmin(alg, vmax(alg, *absorb), vmin(alg, *remain))
                pub_out.append(vmin(alg, forward, back))
            else:  # DPBD:17-36, ForwardImpactStreamTools.java:47-61
                left = [alg.sub(s.half_fwd[j], _last(alg, pub, t - slot)) for slot, j in elements]
                half = alg.scale(vmin(alg, *left), Fraction(1, 2))
                pub_out.append(vmin(alg, half, back))
        return Plan(alg.or_(*nullify), alg.truth(False), tuple(dis_out), tuple(pub_out))

    def step(
        self, state: DuCodeDynamicState[V], t: int, plan: Plan[V, B], published: B
    ) -> DuCodeDynamicState[V]:
        """Record the slot unless it is nullified, published or skipped alike (DPWSM:185,
        DPBA:148-149): ``published`` changes nothing the code records."""
        alg = self.alg
        zero = alg.const(0)
        records = alg.not_(plan.nullified)

        def shifted(sums: tuple[V, ...], value: V) -> tuple[V, ...]:
            """The sums of the newest 1..L after ``value`` is recorded, if the slot records."""
            new = (value, *(alg.add(value, x) for x in sums[:-1]))
            return tuple(alg.select(records, a, b) for a, b in zip(new, sums, strict=True))

        calc, pub, usage = [], [], []
        for i, s in enumerate(self._sched):
            if s.index(t) < 0:
                calc.append(state.calc[i])
                pub.append(state.pub[i])
                usage.append(state.usage[i].push(zero))
                continue
            cand = plan.publication[i]
            calc.append(shifted(state.calc[i], plan.dissimilarity[i]))
            pub.append(shifted(state.pub[i], cand))
            usage.append(state.usage[i].push(alg.select(records, cand, zero)))
        return DuCodeDynamicState(tuple(calc), tuple(pub), tuple(usage))
