"""PeGaSus as streamdp-benchmark runs it for w-event privacy: a budget kernel and a data path.

PeGaSus (Chen, Machanavajjhala, Hay and Miklau, CCS 2017: Perturber, Grouper, Smoother) is an
event-level mechanism; Schäler et al.'s streamdp-benchmark (`src/mechanisms/Pegasus.java`, read
at the snapshot named in docs/peers.md) runs it for w-event privacy by giving every slot
``eps / w`` (``init``: ``eps_per_ts = epsilon / w``), split 0.8 / 0.2:

* the **perturber** (``perturber``): Laplace noise of scale ``1 / eps_p`` on the slot's count,
  ``eps_p = 0.8 eps / w``, at every slot;
* the **grouper** (``grouper``), ``eps_g = 0.2 eps / w``: the slots are cut into groups; a group
  opened at slot s draws a noisy threshold ``5 / eps_g + Lap(4 / eps_g)``; each later slot t
  adds its true count to the group's true counts, takes their total absolute deviation from
  their mean (``dev``), and stays in the group iff ``|dev + Lap(8 / eps_g)| < |threshold|``;
  otherwise slot t is a group of its own and the next slot opens a new one;
* the **smoother** (``smoother``): the release is the median (``USE_SMOOTHER =
  MEDIAN_SMOOTHER``; ``AVG_SMOOTHER`` and ``JS_SMOOTHER`` are the others) of the perturbed
  counts of the slot's group.

The code runs one such PeGaSus per dimension of the stream (``run``); here, one per histogram
cell.

Kernel (`PegasusKernel`). Every slot is forced (published whatever the data) with a
dissimilarity budget ``0.2 eps / w`` (the grouper) and a publication budget ``0.8 eps / w`` (the
perturber), ``eps / w`` being computed first and then multiplied, as ``init`` does (in
``--arithmetic float`` the doubles are the code's: ``epsilon / w``, then ``* 0.8`` and ``* 0.2``).
Any w consecutive slots spend ``w * eps / w = eps`` in exact arithmetic: the code's rule is
sound, so the kernel has one variant, ``sound``. In the code's doubles a window can round past
eps, as Uniform's does (docs/float.md): with w = 8, eps = 0.4 the eighth slot exceeds the bound
by 7/90071992547409920 (about 7.8e-17), and ``wevent run --arithmetic float`` stops there. It is not personalized: every class is served
with the largest window and the smallest budget (`uniform_class`). The code counts slots from
0; here, from 1 (no rule depends on the slot number).

Data path (`PegasusPath`). ``publish`` is the perturber and the smoother; ``dissimilarity`` is
the grouper, restated to fit `wevent.mechanisms.datapath`'s contract (one query of L1
sensitivity at most 1/d, Laplace noise of the given scale). Where it departs from the code:

* the deviation of a group is taken over the group's **perturbed** counts (the perturber's
  outputs of its earlier slots, kept from ``publish``) and the current slot's count, where the
  code takes the group's true counts: a test may read raw counts of its own slot only;
* the test is one Laplace draw of the given scale against a fixed threshold (the code's
  ``5 / eps_g``), where the code draws the threshold's noise once per group (scale ``4 /
  eps_g``) and the deviation's at every test (scale ``8 / eps_g``, a sparse-vector test whose
  one budget covers every test of a group). Here every test is paid for at its own slot, so a
  plain Laplace test suffices; in the deviation's units its noise has scale ``2 / eps_g``;
* the per-cell statistic is ``dev / (2 d)`` (``PegasusPath.dissimilarity``: why its L1
  sensitivity is at most 1/d);
* the code's ``DEBUG_FORCE_NEW_GROUP_EACH_TIMESTAMP`` is ``true`` at the snapshot read: every
  slot opens a new group, the threshold is drawn and never compared, and each release is the
  perturbed count alone (the median of one value). ``PegasusPath(d, regroup=True)`` runs that
  (the grouper's budget is then spent and unused); the registered path groups (``regroup=False``),
  as the paper's mechanism does;
* no truncation (the code's ``Mechansim.TRUNCATE`` rounds releases to non-negative integers in
  its real-data experiments; no wevent data path rounds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from wevent.mechanisms.allocators.algebra import Algebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.kernel import (
    ClassReq,
    FixedClass,
    Kernel,
    Plan,
    check_variant,
    uniform_class,
)
from wevent.mechanisms.datapath import DataPath

__all__ = [
    "DISSIMILARITY_SHARE",
    "PUBLICATION_SHARE",
    "SMOOTHERS",
    "SPECS",
    "THRESHOLD",
    "PegasusKernel",
    "PegasusPath",
    "pegasus_path",
]

V = TypeVar("V")
B = TypeVar("B")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NAME: Final = "pegasus"
# Pegasus.java ``init``: eps_p = eps_per_ts * 0.8 (perturber), eps_g = eps_per_ts * 0.2 (grouper).
PUBLICATION_SHARE: Final = Fraction(4, 5)
DISSIMILARITY_SHARE: Final = Fraction(1, 5)
# Pegasus.java ``init``: init_theta = 5 / eps_g, the grouper's threshold on a group's deviation.
THRESHOLD: Final = 5
SMOOTHERS: Final = ("median", "average", "js")


@dataclass(frozen=True, slots=True)
class PegasusState:
    """The kernel has no budget state (every slot spends the same): only the slots run."""

    slots: int


class PegasusKernel(Generic[V, B]):
    """PeGaSus's budget rule (Pegasus.java ``init``): every slot forced, ``eps / w`` of which 0.2
    to the dissimilarity (the grouper) and 0.8 to the publication (the perturber)."""

    def __init__(
        self, alg: Algebra[V, B], classes: Sequence[ClassReq[V]], variant: str = "sound"
    ) -> None:
        check_variant(NAME, variant, ("sound",))
        self.name = NAME
        self.variant = variant
        self.alg = alg
        self.classes: tuple[ClassReq[V], ...] = tuple(classes)
        self.served: FixedClass[V] = uniform_class(classes, alg, NAME)
        per_slot = alg.scale(self.served.eps, Fraction(1, self.served.w))  # eps_per_ts
        # ``eps_per_ts * 0.8`` and ``* 0.2``: the constants as literals (doubles in float mode)
        self._publication = alg.mul(per_slot, alg.const(PUBLICATION_SHARE))
        self._dissimilarity = alg.mul(per_slot, alg.const(DISSIMILARITY_SHARE))

    def start(self) -> PegasusState:
        return PegasusState(0)

    def plan(self, state: PegasusState, t: int) -> Plan[V, B]:
        n = len(self.classes)
        return Plan(
            self.alg.truth(False),
            self.alg.truth(True),
            (self._dissimilarity,) * n,
            (self._publication,) * n,
        )

    def step(self, state: PegasusState, t: int, plan: Plan[V, B], published: B) -> PegasusState:
        return PegasusState(t)


def _factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    kernel: Kernel[Any, Any, Any] = PegasusKernel(alg, classes, variant)
    return kernel


class PegasusPath:
    """PeGaSus's perturber, grouper and smoother over a histogram of ``domain`` cells, one
    PeGaSus per cell (module docstring: where it departs from Pegasus.java).

    ``regroup=True`` opens a new group at every slot, as the code does with its
    ``DEBUG_FORCE_NEW_GROUP_EACH_TIMESTAMP = true``; ``smoother`` is ``median`` (the code's
    choice), ``average`` or ``js``.
    """

    def __init__(self, domain: int, *, regroup: bool = False, smoother: str = "median") -> None:
        if domain < 1:
            raise ValueError(f"pegasus: the domain needs at least one cell, got {domain}")
        if smoother not in SMOOTHERS:
            raise ValueError(
                f"pegasus: unknown smoother {smoother!r} (expected {', '.join(SMOOTHERS)})"
            )
        self.domain = domain
        self.regroup = regroup
        self.smoother = smoother
        # Per cell: the perturbed counts of its current group (earlier answers of ``publish``),
        # and whether its group is closed (the code's ``last_group_closed``: the next slot
        # opens a new group without a test).
        self._groups: list[list[float]] = [[] for _ in range(domain)]
        self._closed = np.ones(domain, dtype=bool)
        # The grouper's verdicts for slot ``_tested`` (from ``dissimilarity``): per cell, whether
        # the slot joins its open group.
        self._tested = 0
        self._joins = np.zeros(domain, dtype=bool)

    def group(self, cell: int) -> tuple[float, ...]:
        """The perturbed counts of ``cell``'s current group, oldest first."""
        return tuple(self._groups[cell])

    def deviation(self, sampled: IntArray) -> FloatArray:
        """Per cell, Pegasus.java's ``dev`` of the group's perturbed counts with the slot's count
        appended: the total absolute deviation from their mean (0 for a closed group's cell)."""
        dev = np.zeros(self.domain, dtype=np.float64)
        for j in range(self.domain):
            if self._closed[j] or not self._groups[j]:
                continue
            values = np.array([*self._groups[j], float(sampled[j])], dtype=np.float64)
            dev[j] = float(np.abs(values - values.mean()).sum())
        return dev

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        """The grouper (Pegasus.java ``grouper``, lines 9-16 of its algorithm as the code numbers
        them): per cell with an open group, whether slot ``t`` joins it.

        Privacy. The query is the vector ``q_j = dev_j / (2 d)`` over the cells. ``dev_j`` reads
        one raw count, this slot's ``sampled[j]``; the group's other values are earlier
        releases of ``publish`` (post-processing). Adding or removing one user changes one cell's
        count by 1; with k perturbed values p_i and the count c, the mean moves by 1/(k+1), so
        each of the k terms ``|p_i - mean|`` moves by at most 1/(k+1) and ``|c - mean|`` by at
        most k/(k+1): ``dev_j`` moves by at most 2k/(k+1) < 2, and no other cell's moves. The
        vector ``q`` therefore has L1 sensitivity below 2 / (2 d) = 1/d, and Laplace noise of
        scale ``scale`` on each of its answers is the Laplace mechanism the charge's evidence
        certifies (a closed group's cell asks nothing: a constant answer). The verdicts, and the
        value returned (the mean of the noisy answers), are post-processing.

        The threshold: ``scale = (1/d) / eps_g`` when every user holds the grouper's budget
        (one served class), so the code's ``5 / eps_g`` on ``dev_j`` is ``(5/2) * scale`` on
        ``q_j``. A cell stays in its group iff ``|q_j + Lap(scale)| < (5/2) * scale`` (the code's
        ``|noisy_dev| < |noisy_theta|`` with the threshold's noise folded into the one draw)."""
        # At a slot that opens every group (regroup, or every cell closed) the code tests
        # nothing; the budget charged for it is spent unused, and nothing is drawn.
        self._tested = t
        self._joins = np.zeros(self.domain, dtype=bool)
        if self.regroup or bool(self._closed.all()):
            return 0.0
        q = self.deviation(sampled) / (2 * self.domain)
        noisy = q + rng.laplace(0.0, scale, size=self.domain)
        threshold = THRESHOLD / 2 * scale
        self._joins = ~self._closed & (np.abs(noisy) < threshold)
        return float(noisy[~self._closed].mean())

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        """PeGaSus publishes every slot (its kernel forces them): asked by another kernel, it
        publishes."""
        return True

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        """The perturber (Laplace(scale) on every count: a query of L1 sensitivity 1), the
        grouper's verdicts applied, then the smoother over each cell's group."""
        perturbed = sampled + rng.laplace(0.0, scale, size=sampled.shape)
        tested = self._tested == t and not self.regroup
        out = np.empty(self.domain, dtype=np.float64)
        for j in range(self.domain):
            value = float(perturbed[j])
            if self._closed[j] or not tested:  # the code's lines 6-8: a new group
                self._groups[j] = [value]
                self._closed[j] = False
            elif self._joins[j]:  # the slot joins the group
                self._groups[j].append(value)
            else:  # a group of its own, closed: the next slot opens a new one
                self._groups[j] = [value]
                self._closed[j] = True
            out[j] = self._smooth(self._groups[j])
        return out

    def _smooth(self, values: list[float]) -> float:
        """Pegasus.java's ``medianSmoother`` (commons-math's 50th percentile: the middle value,
        or the mean of the two middle ones), ``averageSmoother`` or ``jsSmoother``."""
        if self.smoother == "median":
            return float(np.median(values))
        avg = float(np.mean(values))
        if self.smoother == "average":
            return avg
        return (values[-1] - avg) / len(values) + avg  # js: shrink the last value to the mean

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        """The last release (a slot without a publication budget); every group closes."""
        self._closed[:] = True
        return last


def pegasus_path(domain: int) -> DataPath:
    """The registered data path: PeGaSus as streamdp-benchmark runs it, whose
    ``DEBUG_FORCE_NEW_GROUP_EACH_TIMESTAMP = true`` opens a new group at every slot (the release
    is the perturbed count; the grouper's budget is spent and its answer unused), as the
    benchmark's headline runs compare it. ``PegasusPath(domain)`` groups."""
    return PegasusPath(domain, regroup=True)


SPECS: Final = (
    AllocatorSpec(
        NAME,
        "fixed",
        "global",
        "PeGaSus: eps/w per slot, 0.8 perturber, 0.2 grouper (Chen et al. 2017; "
        "streamdp-benchmark's Pegasus.java)",
        _factory,
        data_path=pegasus_path,
    ),
)
