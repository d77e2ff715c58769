"""AdaPub as streamdp-benchmark's ``src/mechanisms/AdaPub.java`` runs it: a budget kernel and a
data path.

Source. Wang et al.'s AdaPub (*Adaptive Differentially Private Data Stream Publishing in
Spatio-temporal Monitoring of IoT*), re-implemented in the Java code of Schäler et al.'s
streamdp-benchmark (VLDB 2023). The paper is not among the project's papers: every rule below
was read through streamdp-benchmark's code (snapshot ``c9ccc471c71f``), with its flags at their
defaults (`AdaPub.run`):

* ``SHARE_EPS_P = 0.8``, ``SHARE_EPS_C = 0.2`` (``DEBUG_ENABLE_TIMEGROUPINGFILTER`` is true): the
  perturbation adds Laplace noise of scale ``w / eps_p`` (``eps_p / w`` of budget, sensitivity 1)
  to every count at every slot, the first one included;
* ``DEBUG_ENABLE_DIMENSIONGROUPING`` is false: ``get_dummy_partition`` puts every cell in a group
  of its own, so the grouped perturbation (``laplace_pertubation``: one noisy sum per group,
  spread evenly over the group's cells) is the per-cell Laplace mechanism. ``get_partition`` (the
  DimParti grouping by ``g = 20`` random pivots drawn between the smallest and largest value of
  the last release) runs only with the flag set;
* the time grouping (``Cluster.cluster``, AdaCluster) measures, while a cell's group is open, the
  deviation of the group's counts from their mean with Laplace noise of scale ``2 w / eps_c``
  (``eps_c / w`` of budget at sensitivity 2), then sets ``noisy_dev = theta + 1``, overwriting the
  measurement: the comparison ``noisy_dev < theta`` is always false, so an open group closes at
  once and the next slot opens a new one. Groups alternate closed and open whatever the data, so
  the deviation is measured at every second slot, and every group holds one slot:
  ``median_smoother`` returns the fresh noisy count unchanged.

So, in the code's defaults, AdaPub's release is the per-cell Laplace mechanism at ``4 eps /
(5 w)`` per slot (Uniform at four fifths of the budget), and the remaining fifth buys deviation
measurements that nothing reads.

Kernel (`AdaPubKernel`). Every class is served with the largest window and the smallest budget
(`uniform_class`, 001 Section 6.2), like Kellaris's Uniform. Every slot is forced and its
publication budget is ``4 eps / (5 w)``; slots 2, 4, 6, ... (the code's slots 1, 3, 5, ...,
counting from 0: the slots at which its clusters are open) also spend ``eps / (5 w)`` on the
deviation, the dissimilarity budget. A window of ``w`` slots spends ``4 eps / 5`` on publications
and at most ``ceil(w / 2) eps / (5 w) <= eps / 5`` on deviations: the code's rule is sound.
Departures: slots are counted from 1; the shares are the exact rationals 4/5 and 1/5 (the code's
doubles 0.8 and 0.2); the ``sound`` variant (default) adds the fixed-window kernels' exact clip
(each spend capped by what its window has left; it never binds here, tests/test_streamdp_adapub.py
checks it), which makes the window invariant 1-inductive for the k-induction proof;
``published`` is the code's rule without the clip.

Data path (`AdaPubPath`), within the protocol of `wevent.mechanisms.datapath`:

* ``dissimilarity``: the code measures one deviation per cell over the group's raw counts,
  slots ``[t-1, t]``, which for a group of two slots is ``|x_{t-1} - x_t|``. The path may read
  only the current slot's counts, and answers one scalar: here the previous slot's count is
  replaced by its release, and the per-cell deviations are summed over the ``d`` cells and
  divided by ``2 d``. One user changes the histogram by 1 in L1, so the sum changes by at most
  1 and the statistic by at most ``1 / (2 d) <= 1 / d``; halving keeps the code's
  signal-to-noise ratio, as ``2 d`` times the noisy answer is the summed deviation plus Laplace
  noise of scale ``2 w / eps_c`` (the code's per-cell noise, exactly so at ``d = 1``). As in the
  code, the answer is kept (`AdaPubPath.deviations`) and never decides anything.
* ``decide``: never asked (every slot is forced); it answers publish, as the code does.
* ``publish``: sums over a partition of the cells, Laplace noise of the given scale per sum,
  each sum spread evenly over its cells; the partition is the code's ``get_dummy_partition`` (one
  cell per group) unless ``dimension_grouping`` is set, then ``get_partition``'s pivots on the
  path's last release (post-processing; drawn with the noise generator, where the code uses its
  own ``java.util.Random``). Then the time grouping's median over the open group's releases and
  the fresh one: one value, returned unchanged (module text above). ``truncate`` is the code's
  ``Mechansim.TRUNCATE`` (false by default, true in its real-world experiments): the noisy group
  sum and the smoothed release are rounded to the nearest non-negative integer.
* ``approximate``: the last release (only reached when no class has a publication budget).

The theta of the time grouping (a PID controller over feedback errors of the releases, ``KP =
0.9``, ``KI = 0.1``, ``KD = 0``) is not computed: the overwrite above makes the comparison
independent of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Final, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from wevent.mechanisms.allocators.algebra import Algebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.fixed import FixedState, window_clip
from wevent.mechanisms.allocators.kernel import (
    VARIANTS,
    ClassReq,
    FixedClass,
    Kernel,
    Plan,
    check_variant,
    uniform_class,
)
from wevent.mechanisms.datapath import DataPath

__all__ = [
    "CLUSTERING_SHARE",
    "PERTURBATION_SHARE",
    "PIVOTS",
    "SPECS",
    "AdaPubKernel",
    "AdaPubPath",
    "adapub_kernel",
    "adapub_path",
    "measures_deviation",
]

V = TypeVar("V")
B = TypeVar("B")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# AdaPub.java's SHARE_EPS_P and SHARE_EPS_C (0.8 and 0.2 as doubles), as exact rationals.
PERTURBATION_SHARE: Final = Fraction(4, 5)
CLUSTERING_SHARE: Final = Fraction(1, 5)
# AdaPub.java's g: the number of pivots get_partition draws (dimension grouping only).
PIVOTS: Final = 20


def measures_deviation(t: int) -> bool:
    """Whether slot ``t`` (from 1) measures the time grouping's deviation: the code's clusters
    open at its slot 0 and then alternate closed (no measurement) and open (a measurement that
    closes them), so its slots 1, 3, 5, ..., which are slots 2, 4, 6, ... here."""
    return t >= 2 and t % 2 == 0


class AdaPubKernel(Generic[V, B]):
    """AdaPub's budgets (module docstring): ``4 eps / (5 w)`` published at every slot, forced;
    ``eps / (5 w)`` on the deviation at slots 2, 4, 6, ...; every class served with the largest
    window and the smallest budget. ``sound`` clips each spend to what its window has left."""

    name = "adapub"

    def __init__(
        self, alg: Algebra[V, B], classes: Sequence[ClassReq[V]], variant: str = "sound"
    ) -> None:
        check_variant(self.name, variant)
        self.variant = variant
        self.alg = alg
        self.classes: tuple[ClassReq[V], ...] = tuple(classes)
        one = uniform_class(classes, alg, self.name)
        self.served: tuple[FixedClass[V], ...] = tuple(one for _ in self.classes)
        self._keep = one.w

    def start(self) -> FixedState[V]:
        return FixedState.empty(self.alg, len(self.served), self._keep)

    def induction_schedule(self) -> tuple[int, int]:
        """For `wevent prove --unbounded`: the deviation is measured at even slots, so the plan
        depends on the slot's parity; the steps cover both."""
        return 1, 2

    def plan(self, state: FixedState[V], t: int) -> Plan[V, B]:
        alg = self.alg
        zero = alg.const(0)
        on = measures_deviation(t)
        # AdaPub.run: lambda_perturb = sensitivity / (eps_p / w), at every slot.
        pub = tuple(alg.scale(c.eps, PERTURBATION_SHARE / c.w) for c in self.served)
        # Cluster.cluster: Laplace 2 w / eps_c on a deviation of sensitivity 2, when open.
        dis = tuple(alg.scale(c.eps, CLUSTERING_SHARE / c.w) if on else zero for c in self.served)
        plan: Plan[V, B] = Plan(alg.truth(False), alg.truth(True), dis, pub)
        if self.variant == "sound":
            plan = self._clip(state, t, plan)
        return plan

    def _clip(self, state: FixedState[V], t: int, plan: Plan[V, B]) -> Plan[V, B]:
        """Cap each class's spend by what its window ``[t-w+1, t]`` has left (the dissimilarity
        first); nullify a slot in which no class has anything left to publish (`window_clip`,
        the fixed-window kernels' clip)."""
        return window_clip(self.alg, self.served, state, t, plan)

    def step(self, state: FixedState[V], t: int, plan: Plan[V, B], published: B) -> FixedState[V]:
        return state.pushed(self.alg, plan, published)


def adapub_kernel(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    """The kernel factory of the spec."""
    kernel: Kernel[Any, Any, Any] = AdaPubKernel(alg, classes, variant)
    return kernel


def _java_round(x: FloatArray) -> FloatArray:
    """``Mechansim.forceTruncate``: ``max(0, Math.round(x))``, rounding halves up."""
    out: FloatArray = np.maximum(0.0, np.floor(x + 0.5))
    return out


class AdaPubPath:
    """AdaPub's data path (module docstring: what each call reads and where it departs from
    the code). ``dimension_grouping`` and ``truncate`` are the code's
    ``DEBUG_ENABLE_DIMENSIONGROUPING`` and ``Mechansim.TRUNCATE``, both off by default."""

    def __init__(
        self,
        domain: int,
        *,
        dimension_grouping: bool = False,
        truncate: bool = False,
        pivots: int = PIVOTS,
    ) -> None:
        if domain < 1:
            raise ValueError(f"AdaPub needs a domain of at least one cell, got {domain}")
        if pivots < 1:
            raise ValueError(f"AdaPub needs at least one pivot, got {pivots}")
        self.domain = domain
        self.dimension_grouping = dimension_grouping
        self.truncate = truncate
        self.pivots = pivots
        self.last: FloatArray = np.zeros(domain, dtype=np.float64)
        # The time grouping (one state for every cell: the code's per-cell clusters move in
        # step). The group opened at slot `begin` and holds the releases of [begin, t-1].
        self.begin = 1
        self.closed = False
        self._group: list[FloatArray] = []
        # The noisy deviations answered, by slot (kept, as in the code, and never read).
        self.deviations: dict[int, float] = {}

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        """The deviation of each cell's group ``[t-1, t]``, ``|release_{t-1} - x_t|``, summed
        over the cells and divided by ``2 d`` (sensitivity ``1 / (2 d)``), plus Laplace noise."""
        statistic = float(np.abs(sampled - last).sum()) / (2 * self.domain)
        noisy = statistic + float(rng.laplace(0.0, scale))
        self.deviations[t] = noisy
        return noisy

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        """Publish: the code releases a fresh perturbation at every slot."""
        return True

    def partition(self, t: int, rng: np.random.Generator) -> IntArray:
        """Each cell's group (0, 1, ...), from the last release only: one cell per group
        (``get_dummy_partition``) unless ``dimension_grouping``; then ``get_partition``: the
        pivots are ``g`` integers drawn uniformly from ``[min, max(1, max))`` of the last
        release (truncated to integers, as Java's cast does), and a cell joins the group of the
        largest pivot below its last release (a group of its own below every pivot). Slot 1 has
        no release to group by: one cell per group, as the code's slot 0."""
        if not self.dimension_grouping or t < 2:
            return np.arange(self.domain, dtype=np.int64)
        low, high = math.trunc(float(self.last.min())), math.trunc(float(self.last.max()))
        if low == high:
            drawn = np.full(self.pivots, low, dtype=np.int64)
        else:
            drawn = rng.integers(low, max(1, high), size=self.pivots, dtype=np.int64)
        ordered = np.unique(drawn)  # ascending; duplicates are one group (as in the code)
        below = np.searchsorted(ordered, self.last, side="left")  # pivots strictly below
        _, labels = np.unique(below, return_inverse=True)
        out: IntArray = labels.astype(np.int64)
        return out

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        """``laplace_pertubation``: one noisy sum per group, spread over its cells (sensitivity
        1: the groups partition the cells), then the time grouping's median."""
        labels = self.partition(t, rng)
        groups = int(labels.max()) + 1
        sizes = np.bincount(labels, minlength=groups).astype(np.float64)
        sums = np.bincount(labels, weights=sampled.astype(np.float64), minlength=groups)
        noisy = sums + rng.laplace(0.0, scale, size=groups)
        if self.truncate:
            noisy = _java_round(noisy)
        fresh: FloatArray = (noisy / sizes)[labels]
        return self._smooth(t, fresh)

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        """The last release (never reached while the publication budget is positive)."""
        return self._smooth(t, last)

    def _smooth(self, t: int, fresh: FloatArray) -> FloatArray:
        """``Cluster.cluster`` then ``median_smoother`` from slot 2 on: a closed group makes way
        for a new one opened now; an open one is measured and, the measurement overwritten by
        ``theta + 1``, closes with the slot as a group of its own. Either way the group starts
        at ``t``, so the median is over the fresh value alone."""
        if t >= 2:
            self.closed = not self.closed  # open -> measured and closed; closed -> reopened
            self.begin = t
            self._group = []
        stacked = np.stack([*self._group, fresh])
        out: FloatArray = np.median(stacked, axis=0)
        if self.truncate:
            out = _java_round(out)
        self._group.append(out)
        self.last = out
        return out


def adapub_path(domain: int) -> DataPath:
    """The data path factory of the spec (the code's defaults)."""
    return AdaPubPath(domain)


SPECS: Final = (
    AllocatorSpec(
        "adapub",
        "fixed",
        "global",
        "AdaPub (Wang et al.) as streamdp-benchmark's AdaPub.java runs it: 4 eps/(5w) published "
        "every slot, eps/(5w) on a deviation every second slot; one class as 001 Section 6.2",
        adapub_kernel,
        variants=VARIANTS,
        data_path=adapub_path,
    ),
)
