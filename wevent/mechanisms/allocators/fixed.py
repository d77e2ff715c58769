"""The central fixed-window family: kernels for fixed ``(w, eps)`` requirements (Uniform, Sample,
BD, BA, PBD, PBA) and its specs (`SPECS`, collected by `wevent.mechanisms.allocators.registry`).
The local budget-division allocators LBU, LSP, LBD, LBA, PLBU spend through the same kernel (their
specs are in `wevent.mechanisms.allocators.local`).

* Uniform, Sample (Kellaris et al.; 002 Sections 5.2.1-5.2.2 restate them): ``eps / w`` at every
  slot, or the whole ``eps`` at slots 1, w+1, 2w+1, ... with the slots between approximated.
* BD, PBD (002 Algorithm 1, 001 Algorithm 4): a dissimilarity share ``eps / (2w)`` at every slot
  and half of the remaining publication budget ``eps/2 - sum(last w-1 publications)``.
* BA, PBA (002 Algorithm 2, 001 Algorithm 5): one publication share ``eps / (2w)`` per slot,
  absorbed from skipped slots and paid back by nullifying the slots after a publication.

BD, BA, Uniform and Sample are not personalized: every class is served with the largest window
and the smallest budget of the population (001 Section 6.2). PBD and PBA give each class its own.

Variants. ``published`` is the pseudo-code as printed. ``sound`` (the default) adds an exact
safety clip: each class's spend is capped by what its tightest window has left, counting the
dissimilarity and publication halves together, and a slot whose publication budgets are all zero
is nullified (even a forced one: there is nothing to publish with). In exact arithmetic and with
positive budgets the clip never binds for these kernels (the property tests check that the two
variants then spend identically); it binds when the absorption counts are computed in floating
point (``--arithmetic float``), where the published variant overspends.

``du-code`` (bd, ba, pbd, pba only) is what Du et al.'s public Java code (DynamicWEventCode, the
authors' implementation of 001) computes, kept as an audited fixture (docs/peers.md); like
``published`` it has no clip. Two rules depart from the pseudo-code:

* absorption (BA, PBA): the last publication is set once, before slot 1 (slot 0, one share per
  class, so t_N = 0), and never updated when a slot publishes (002 Algorithm 2 line 14 sets
  l = t; 001 Algorithm 5 line 6 takes l as the last non-null publication, which line 19 makes
  t). Nothing is ever nullified and slot t publishes ``share * min(t, w)``, the whole ``eps/2``
  from slot w on: UNSOUND (w = 2, eps = 1, publishing at slots 1 and 2 spends 5/4 in window
  [1, 2]);
* distribution (BD, PBD): the remaining publication budget subtracts the last w publications,
  ``[t-w, t-1]``, instead of the last w-1 (002 Algorithm 1 line 7; 001 Algorithm 4 line 4):
  from the same state it never plans more than the printed rule, and over a run it never spends
  more in total than the sound kernel, though it can at one slot (tests/test_peers.py):
  CONSERVATIVE, still sound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, Generic, TypeVar

from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorError, AllocatorSpec, KernelFactory
from wevent.mechanisms.allocators.kernel import (
    DU_CODE,
    VARIANTS,
    ClassReq,
    FixedClass,
    Kernel,
    Plan,
    Prefix,
    check_variant,
    fixed_classes,
    pushed_histories,
    uniform_class,
)

__all__ = ["SPECS", "FixedKernel", "FixedState", "fixed_factory", "fixed_variants", "window_clip"]

V = TypeVar("V")
B = TypeVar("B")


# name -> (rule, personalized). The local budget-division allocators of 002 Section 5 (and the
# personalized uniform baseline of 001 Section 6.2) spend exactly like their central namesakes;
# only the data path differs (every user reports through a frequency oracle).
_RULES: dict[str, tuple[str, bool]] = {
    "uniform": ("uniform", False),
    "sample": ("sample", False),
    "bd": ("distribution", False),
    "ba": ("absorption", False),
    "pbd": ("distribution", True),
    "pba": ("absorption", True),
    "lbu": ("uniform", False),  # 002 Section 5.2.1
    "lsp": ("sample", False),  # 002 Section 5.2.2
    "lbd": ("distribution", False),  # 002 Algorithm 1
    "lba": ("absorption", False),  # 002 Algorithm 2
    "plbu": ("uniform", True),  # 001 Section 6.2: eps_i / w_i at every slot
}

# The allocators DynamicWEventCode implements, with the rule of its own they accept as the variant
# ``du-code`` (module docstring); every other name has the sound and published variants only.
_DU_CODE_NAMES = frozenset({"bd", "ba", "pbd", "pba"})


def fixed_variants(name: str) -> tuple[str, ...]:
    """The variants the fixed-window kernel accepts for ``name``."""
    return (*VARIANTS, DU_CODE) if name in _DU_CODE_NAMES else VARIANTS


# Absorption kernels that follow 001 Algorithm 5 (t_N starts at 0, t_A clipped at 0); the others
# follow 002 Algorithm 2 (eps_{l,2} starts at 0, so t_N = -1, and t_A = t - (l + t_N)).
_ALGORITHM_5 = frozenset({"pba"})


@dataclass(frozen=True, slots=True)
class FixedState(Generic[V]):
    """Per class: dissimilarity and publication spends of the recent slots; the last publication
    slot (0 before any) and each class's publication budget there."""

    dis: tuple[Prefix[V], ...]
    pub: tuple[Prefix[V], ...]
    last: V
    last_pub: tuple[V, ...]

    @staticmethod
    def empty(alg: Algebra[V, Any], classes: int, keep: int) -> FixedState[V]:
        """No spend yet for ``classes`` classes keeping ``keep`` slots; ``last`` and every
        ``last_pub`` at 0."""
        zero = alg.const(0)
        return FixedState(
            dis=tuple(Prefix(alg, keep) for _ in range(classes)),
            pub=tuple(Prefix(alg, keep) for _ in range(classes)),
            last=zero,
            last_pub=(zero,) * classes,
        )

    def pushed(
        self,
        alg: Algebra[V, B],
        plan: Plan[V, B],
        published: B,
        last: V | None = None,
        last_pub: tuple[V, ...] | None = None,
    ) -> FixedState[V]:
        """The state after a slot of ``plan``: its dissimilarity budgets pushed on ``dis``, its
        publication budgets on ``pub`` if the slot published (0 if not); ``last`` and
        ``last_pub`` as given (kept when None)."""
        dis, pub = pushed_histories(alg, self.dis, self.pub, plan, published)
        return FixedState(
            dis=dis,
            pub=pub,
            last=self.last if last is None else last,
            last_pub=self.last_pub if last_pub is None else last_pub,
        )

    def recorded(self, alg: Algebra[V, B], t: int, plan: Plan[V, B], published: B) -> FixedState[V]:
        """`pushed`, and a slot that published becomes the last publication: ``last = t`` and
        ``last_pub`` its publication budgets."""
        return self.pushed(
            alg,
            plan,
            published,
            alg.select(published, alg.const(t), self.last),
            tuple(
                alg.select(published, p, old)
                for p, old in zip(plan.publication, self.last_pub, strict=True)
            ),
        )


class FixedKernel(Generic[V, B]):
    """The kernel of one of ``uniform``, ``sample``, ``bd``, ``ba``, ``pbd``, ``pba``."""

    def __init__(
        self,
        name: str,
        alg: Algebra[V, B],
        classes: Sequence[ClassReq[V]],
        variant: str = "sound",
    ) -> None:
        if name not in _RULES:
            raise AllocatorError(
                f"unknown fixed-window allocator {name!r} (the kernel serves: {', '.join(_RULES)})"
            )
        check_variant(name, variant, fixed_variants(name))
        self.name = name
        self.variant = variant
        self.alg = alg
        self.classes: tuple[ClassReq[V], ...] = tuple(classes)
        self.rule, personalized = _RULES[name]
        if personalized:
            self.served: tuple[FixedClass[V], ...] = tuple(fixed_classes(classes, name))
        else:
            one = uniform_class(classes, alg, name)
            self.served = tuple(one for _ in self.classes)
        self._keep = max(c.w for c in self.served)
        self._algorithm_5 = name in _ALGORITHM_5
        # du-code: the absorption state is frozen at its start (the code never updates it).
        self._frozen_last = variant == DU_CODE and self.rule == "absorption"

    # ------------------------------------------------------------------ helpers

    def _share(self, c: FixedClass[V]) -> V:
        """One share: ``eps / (2w)`` (001 Algorithm 5 line 13; 002 Algorithm 2 line 9)."""
        return self.alg.scale(c.eps, Fraction(1, 2 * c.w))

    # Two hooks a subclass with another split overrides (`wevent.mechanisms.streamdp.shift`):
    # the dissimilarity budget of one slot, and the publication budget of one window (BD's
    # ``eps / 2``; BA's share is this over w).

    def _dis_share(self, c: FixedClass[V]) -> V:
        """One slot's dissimilarity budget: one share."""
        return self._share(c)

    def _pub_window(self, c: FixedClass[V]) -> V:
        """One window's publication budget: ``eps / 2``."""
        return self.alg.scale(c.eps, Fraction(1, 2))

    def start(self) -> FixedState[V]:
        alg = self.alg
        zero = alg.const(0)
        # 001 Algorithm 5 line 5 starts every t_N at 0 (as if slot 0 published one share);
        # 002 Algorithm 2 line 1 starts with eps_{l,2} = 0, so t_N = -1 and slot 1 may absorb two
        # shares (a phantom slot 0; still sound, see docs/deviations.md). du-code starts every
        # class, BA's too, at one share published at slot 0 (the code's slot -1, counting from 0).
        one_share = self._algorithm_5 or self._frozen_last
        initial = [self._share(c) if one_share else zero for c in self.served]
        return FixedState(
            dis=tuple(Prefix(alg, self._keep) for _ in self.served),
            pub=tuple(Prefix(alg, self._keep) for _ in self.served),
            last=zero,
            last_pub=tuple(initial),
        )

    def plan(self, state: FixedState[V], t: int) -> Plan[V, B]:
        alg = self.alg
        zero = alg.const(0)
        no, yes = alg.truth(False), alg.truth(True)
        n = len(self.served)
        if self.rule == "uniform":  # Kellaris: eps/w at every slot, always published
            pubs = tuple(alg.scale(c.eps, Fraction(1, c.w)) for c in self.served)
            plan = Plan(no, yes, (zero,) * n, pubs)
        elif self.rule == "sample":  # Kellaris: all of eps at slots 1, w+1, 2w+1, ...
            w = self.served[0].w
            on = (t - 1) % w == 0
            pubs = tuple(c.eps if on else zero for c in self.served)
            plan = Plan(alg.truth(not on), alg.truth(on), (zero,) * n, pubs)
        elif self.rule == "distribution":
            plan = self._distribution(state, t)
        else:
            plan = self._absorption(state, t)
        if self.variant == "sound":
            plan = self._clip(state, t, plan)
        return plan

    def _distribution(self, state: FixedState[V], t: int) -> Plan[V, B]:
        """001 Algorithm 4 lines 1-5 (PBD); 002 Algorithm 1 lines 3, 7-8 (BD).

        du-code subtracts the publications of ``[t-w, t-1]`` (w slots) where 001 Algorithm 4
        line 4 and 002 Algorithm 1 line 7 subtract those of ``[t-w+1, t-1]`` (w-1 slots)."""
        alg = self.alg
        dis, pub = [], []
        back = 0 if self.variant == DU_CODE else 1  # the first slot subtracted is t - w + back
        for c, hist in zip(self.served, state.pub, strict=True):
            dis.append(self._dis_share(c))
            remaining = alg.sub(self._pub_window(c), hist.total(t - c.w + back, t - 1))
            pub.append(alg.scale(remaining, Fraction(1, 2)))
        return Plan(alg.truth(False), alg.truth(False), tuple(dis), tuple(pub))

    def _absorption(self, state: FixedState[V], t: int) -> Plan[V, B]:
        """001 Algorithm 5 lines 4-13 (PBA); 002 Algorithm 2 lines 4-9 (BA).

        t_N = eps_l / share - 1 per class, nullified while ``t - l <= max t_N``; otherwise
        ``t_A = t - l - t_N`` slots are absorbed, at most ``w``. The counts go through the
        algebra's count operations, which are exact unless ``--arithmetic float``.
        """
        alg = self.alg
        zero, one = alg.const(0), alg.const(1)
        shares = [self._share(c) for c in self.served]
        t_n = [
            alg.count_sub(alg.ratio(used, share), one)
            for used, share in zip(state.last_pub, shares, strict=True)
        ]
        now = alg.const(t)
        since = alg.count_sub(now, state.last)  # t - l
        nullified = alg.le(since, vmax(alg, *t_n))
        pub = []
        for c, share, tn in zip(self.served, shares, t_n, strict=True):
            if not self._algorithm_5:  # 002 Algorithm 2 line 8: t_A = t - (l + t_N)
                absorbed = alg.count_sub(now, alg.count_add(state.last, tn))
            else:  # 001 Algorithm 5 line 12: t_A = max(t - l - t_N, 0)
                absorbed = vmax(alg, alg.count_sub(since, tn), zero)
            pub.append(alg.mul(share, vmin(alg, absorbed, alg.const(c.w))))
        dis = tuple(self._dis_share(c) for c in self.served)
        return Plan(nullified, alg.truth(False), dis, tuple(pub))

    def _clip(self, state: FixedState[V], t: int, plan: Plan[V, B]) -> Plan[V, B]:
        """The sound variant: `window_clip`."""
        return window_clip(self.alg, self.served, state, t, plan)

    def step(self, state: FixedState[V], t: int, plan: Plan[V, B], published: B) -> FixedState[V]:
        if self._frozen_last:
            # du-code: l and eps_l keep their start values whatever is published (002
            # Algorithm 2 line 14 sets l = t, and 001 Algorithm 5 lines 6, 19 make t the last
            # non-null publication; the code never updates either).
            return state.pushed(self.alg, plan, published)
        return state.recorded(self.alg, t, plan, published)


def window_clip(
    alg: Algebra[V, B],
    served: Sequence[FixedClass[V]],
    state: FixedState[V],
    t: int,
    plan: Plan[V, B],
) -> Plan[V, B]:
    """The sound variants' exact safety clip: cap each served class by its tightest window's
    remaining budget (both halves together, ``eps - spent in [t-w+1, t-1]``, the dissimilarity
    first), never below zero; nullify a slot in which no class has anything left to publish.
    Shared by every kernel whose state is a `FixedState` (here, and streamdp's AdaPub)."""
    zero = alg.const(0)
    dis, pub, empty = [], [], []
    for i, c in enumerate(served):
        spent = alg.add(
            state.dis[i].total(t - c.w + 1, t - 1), state.pub[i].total(t - c.w + 1, t - 1)
        )
        room = vmax(alg, alg.sub(c.eps, spent), zero)
        d = vmin(alg, vmax(alg, plan.dissimilarity[i], zero), room)
        p = vmin(alg, vmax(alg, plan.publication[i], zero), alg.sub(room, d))
        dis.append(d)
        pub.append(p)
        empty.append(alg.le(p, zero))
    nothing = alg.and_(*empty)
    return Plan(
        alg.or_(plan.nullified, nothing),
        alg.and_(plan.forced, alg.not_(nothing)),
        tuple(dis),
        tuple(pub),
    )


def fixed_factory(name: str) -> KernelFactory:
    """The kernel factory of the fixed-window allocator ``name`` (one of this kernel's rules:
    the central ones here and the local budget-division ones of `local`)."""

    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        kernel: Kernel[Any, Any, Any] = FixedKernel(name, alg, classes, variant)
        return kernel

    return factory


def _spec(name: str, scaling: str, summary: str) -> AllocatorSpec:
    return AllocatorSpec(
        name, "fixed", scaling, summary, fixed_factory(name), variants=fixed_variants(name)
    )


# The family's specs, in the order the command line lists them. ``scaling``: the non-personalized
# rules serve every class with one (w, eps), so only a common factor scales them ("global").
SPECS: Final = (
    _spec("uniform", "global", "eps/w at every slot (Kellaris et al.; 002 Section 5.2.1)"),
    _spec("sample", "global", "all of eps every w slots (Kellaris et al.; 002 Section 5.2.2)"),
    _spec("bd", "global", "budget distribution (002 Algorithm 1)"),
    _spec("ba", "global", "budget absorption (002 Algorithm 2)"),
    _spec("pbd", "per-class", "personalized distribution (001 Algorithm 4)"),
    _spec("pba", "per-class", "personalized absorption (001 Algorithm 5)"),
)
