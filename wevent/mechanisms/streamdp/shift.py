"""Kellaris et al.'s BD and BA with budget shifting, as streamdp-benchmark runs them.

Read from Schäler et al.'s code (``src/mechanisms/BD.java``, ``BA.java`` and their base class
``Mechansim.java``, snapshot ``c9ccc471c71f``), which cites Kellaris et al. 2014, Section 4.5 for
the shift (the paper is not among this project's; docs/peers.md, "streamdp-benchmark").

Budget shifting. The dissimilarity (the mean absolute difference of the d cells to the last
release) has sensitivity 1/d, so it needs less budget than the half split of BD and BA gives it.
When the publications would keep at least half of the window, ``eps - w eps / d >= eps / 2``
(that is ``2w <= d``: a test on the integers w and d only, since eps > 0), every slot's
dissimilarity gets ``eps / d`` (its Laplace scale is then ``1 / eps``) and the publications
share ``eps_2 = eps - w eps / d`` per window; otherwise the dissimilarity gets ``eps / (2w)``
per slot and the publications ``eps_2 = eps / 2`` (wevent's ``bd`` and ``ba``). Over any w
slots the dissimilarity spends at most ``w eps / d`` (or ``eps / 2``) and the publications at
most ``eps_2`` (BD: half of what the last w-1 publications left; BA: shares ``eps_2 / w``,
absorbed from skipped slots and paid back by nullifying the slots after a publication), so no
window passes eps.

The kernel (`ShiftKernel`) is `FixedKernel`'s distribution (``bd-shift``) and absorption
(``ba-shift``) rules with the split above, through FixedKernel's two split hooks, and with the
code's schedule:

* slot 1 always publishes (forced), with no dissimilarity: BD spends ``eps_2 / 2``, BA one share
  (the code's ``t = 0`` before its loop). wevent follows it: leaving out a dissimilarity spends
  less and changes no later budget (docs/peers.md);
* BA's slots nullified after a publication that absorbed k skipped slots spend no dissimilarity
  (the code skips them without computing one);
* BA counts absorbed slots as 001 Algorithm 5 does (one share at a phantom slot 0, so slot 1
  spends one share and the next slot absorbs from 1): the code's ``timePointsSkipped``, capped
  at ``w - 1``, plus the slot itself.

Variants. ``published`` is the rule as its source states it, here the code; ``sound`` (the
default) adds FixedKernel's safety clip (each slot capped by what its window has left), which
never binds in exact arithmetic (the code's rule is sound there, so no ``streamdp-code``
variant is needed) and binds only when absorption counts are doubles (``--arithmetic float``).
Departures from the code: budgets are exact rationals where the code computes doubles (its
``eps - w * (eps / dim)`` can round either way, and BA only prints a message when a share
exceeds what its window has left); slots count from 1 where the code counts from 0.

The domain size d. A kernel sees requirement classes, never the stream, and the registry builds
it as ``factory(alg, classes, variant)``; the split needs d. The split is therefore a property of
the allocator, fixed when it is made: the kernel takes d as a parameter, `SPLIT_DOMAIN` = 2 for
the registered ``bd-shift`` and ``ba-shift`` (the default domain of `wevent run`'s synthetic
streams and of the gate's end-to-end runs), and `shift_spec(name, d)` makes the allocator for
another d, named as ``module:attribute`` (`wevent run`, `gate`, `trace`). A proof or a gate of
the allocator covers the kernel at its d. The data path never changes a budget: the runner
derives every noise scale from the kernel's budget and the stream's sensitivity (1/d for the
dissimilarity), so a stream whose d is not the allocator's still gets w-event privacy, with the
split made for the allocator's d (its dissimilarity scale is then ``d_split / (d eps)``, not
``1 / eps``). With d = 2 the shift applies to w = 1 only, where it equals the half split; the
shift proper needs an allocator made for the stream's d.

Why not refuse a stream of another d: the gate's end-to-end stage runs every allocator on
two-valued synthetic streams, so an allocator made for d = 8 could not be gated at all.

The data path (`ShiftPath`) is Kellaris' publication rule as the code runs it (`KellarisPath`):
the noisy mean absolute difference of the sampled histogram to the last release, publish iff it
exceeds the publication's Laplace scale (``sensitivity / eps_pub``), Laplace noise of that
scale on every cell, the last release repeated otherwise. The code's ``run`` works on the whole
``dim``-cell histogram of a slot; wevent's d cells are those dims. The code's options
``TRUNCATE`` (round releases to non-negative integers) and ``USE_NON_PRIVATE_SAMPLING`` are off
by default and not kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Final, TypeVar

from wevent.errors import AllocatorError
from wevent.mechanisms.allocators.algebra import Algebra
from wevent.mechanisms.allocators.api import AllocatorSpec, KernelFactory
from wevent.mechanisms.allocators.fixed import FixedKernel, FixedState
from wevent.mechanisms.allocators.kernel import ClassReq, FixedClass, Kernel, Plan, check_variant
from wevent.mechanisms.datapath import DataPath, DataPathFactory, KellarisPath

__all__ = [
    "SHIFT_VARIANTS",
    "SPECS",
    "SPLIT_DOMAIN",
    "ShiftKernel",
    "ShiftPath",
    "shift_factory",
    "shift_path",
    "shift_spec",
]

V = TypeVar("V")
B = TypeVar("B")

SPLIT_DOMAIN: Final = 2  # the d the registered allocators split for (module docstring)
SHIFT_VARIANTS: Final = ("sound", "published")

# name -> the FixedKernel rule it shifts
_BASE: Final = {"bd-shift": "bd", "ba-shift": "ba"}


def _check_domain(domain: object, what: str) -> int:
    if isinstance(domain, bool) or not isinstance(domain, int) or domain < 1:
        raise AllocatorError(
            f"{what}: the domain size d must be a positive integer, got {domain!r}"
        )
    return domain


class ShiftKernel(FixedKernel[V, B]):
    """``bd-shift`` or ``ba-shift`` for a domain of ``domain`` cells (module docstring)."""

    def __init__(
        self,
        name: str,
        alg: Algebra[V, B],
        classes: Sequence[ClassReq[V]],
        variant: str = "sound",
        domain: int = SPLIT_DOMAIN,
    ) -> None:
        if name not in _BASE:
            raise AllocatorError(
                f"unknown budget-shifting allocator {name!r} (expected {' or '.join(_BASE)})"
            )
        check_variant(name, variant, SHIFT_VARIANTS)
        self.domain = _check_domain(domain, name)
        super().__init__(_BASE[name], alg, classes, "sound")
        self.name = name
        self.variant = variant
        # BA: one share at a phantom slot 0, so slot 1 spends one share (module docstring)
        self._algorithm_5 = True
        # BD.java / BA.java: shift iff eps - w eps / d >= eps / 2, i.e. 2w <= d (eps > 0)
        self.shifted = 2 * self.served[0].w <= self.domain

    def _dis_share(self, c: FixedClass[V]) -> V:
        """``eps / d`` when shifted (Laplace scale 1/eps at sensitivity 1/d), else
        ``eps / (2w)`` (the code's ``lambda_1_per_timestamp``)."""
        if self.shifted:
            return self.alg.scale(c.eps, Fraction(1, self.domain))
        return self.alg.scale(c.eps, Fraction(1, 2 * c.w))

    def _pub_window(self, c: FixedClass[V]) -> V:
        """``eps - w eps / d`` when shifted, else ``eps / 2`` (``epsilon_2_per_window``)."""
        if self.shifted:
            return self.alg.scale(c.eps, Fraction(self.domain - c.w, self.domain))
        return self.alg.scale(c.eps, Fraction(1, 2))

    def _share(self, c: FixedClass[V]) -> V:
        """BA's share, ``eps_2 / w`` (BA.java: ``epsilon_2_per_window / w``)."""
        return self.alg.scale(self._pub_window(c), Fraction(1, c.w))

    def plan(self, state: FixedState[V], t: int) -> Plan[V, B]:
        alg = self.alg
        zero = alg.const(0)
        if self.rule == "distribution":
            base = self._distribution(state, t)
        else:
            base = self._absorption(state, t)
        if t == 1:  # the code's t = 0: published, no dissimilarity
            base = Plan(
                alg.truth(False), alg.truth(True), (zero,) * len(self.served), base.publication
            )
        else:  # a nullified slot computes no dissimilarity (BA's skip_until loop)
            base = Plan(
                base.nullified,
                base.forced,
                tuple(alg.select(base.nullified, zero, d) for d in base.dissimilarity),
                base.publication,
            )
        return self._clip(state, t, base) if self.variant == "sound" else base


class ShiftPath(KellarisPath):
    """BD.java's and BA.java's data side for a stream of ``domain`` cells (module docstring):
    `KellarisPath`'s dissimilarity (``avg_dissimilarity``: the mean absolute difference to the
    last release, sensitivity 1/d), decision (publish iff it exceeds ``sensitivity / eps_pub``,
    the publication's Laplace scale), release (``sanitize``: Laplace noise of that scale on every
    cell) and approximation (the last release). ``split_domain`` is the d the allocator's
    kernel split its budget for; a run whose stream has another d is `matched` False."""

    def __init__(self, domain: int, split_domain: int = SPLIT_DOMAIN) -> None:
        super().__init__(domain)
        self.split_domain = split_domain

    @property
    def matched(self) -> bool:
        """Whether the kernel's split was made for this stream's d (Kellaris' rule exactly)."""
        return self.domain == self.split_domain


def shift_factory(name: str, domain: int = SPLIT_DOMAIN) -> KernelFactory:
    """The kernel factory of ``name`` (``bd-shift`` or ``ba-shift``) splitting for ``domain``."""

    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        kernel: Kernel[Any, Any, Any] = ShiftKernel(name, alg, classes, variant, domain)
        return kernel

    return factory


def shift_path(split_domain: int = SPLIT_DOMAIN) -> DataPathFactory:
    """The data-path factory of an allocator whose kernel splits for ``split_domain`` cells."""

    def factory(domain: int) -> DataPath:
        return ShiftPath(domain, split_domain)

    return factory


_SUMMARIES: Final = {
    "bd-shift": "BD (002 Algorithm 1) with Kellaris budget shifting, as streamdp-benchmark's BD.java",
    "ba-shift": "BA (002 Algorithm 2) with Kellaris budget shifting, as streamdp-benchmark's BA.java",
}


def shift_spec(name: str, domain: int = SPLIT_DOMAIN) -> AllocatorSpec:
    """The allocator ``name`` (``bd-shift`` or ``ba-shift``) whose kernel splits its budget for
    a domain of ``domain`` cells."""
    if name not in _BASE:
        raise AllocatorError(
            f"unknown budget-shifting allocator {name!r} (expected {' or '.join(_BASE)})"
        )
    _check_domain(domain, name)
    summary = _SUMMARIES[name] + (f" (d = {domain})" if domain != SPLIT_DOMAIN else "")
    return AllocatorSpec(
        name,
        "fixed",
        "global",  # one (w, eps) for every class, and eps / d, eps - w eps / d are linear in eps
        summary,
        shift_factory(name, domain),
        variants=SHIFT_VARIANTS,
        data_path=shift_path(domain),
    )


SPECS: Final = (shift_spec("bd-shift"), shift_spec("ba-shift"))
