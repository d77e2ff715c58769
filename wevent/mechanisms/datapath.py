"""The data side of a central mechanism: how a slot's data become a decision and a release.

A central mechanism is a budget kernel (`wevent.mechanisms.allocators.kernel.Kernel`, which never
sees data) and a data path. The runner (`wevent.mechanisms.central.CentralRunner`) asks the
kernel for the slot's budgets, charges every budget through the guard *before* it hands the
data path anything bought with it, and calls the data path for the rest:

1. ``dissimilarity(t, sampled, last, scale, rng)``, when the slot has a dissimilarity budget:
   ``sampled`` are the slot's counts as the sampling mechanism kept them (001 Algorithm 1, SM;
   every user kept when every class has the same budget), ``last`` the last release. The path
   may answer **one query of L1 sensitivity at most 1/d** (d the domain size) of ``sampled``
   (and of anything it kept from earlier releases) with Laplace noise of scale ``scale``, added
   to each coordinate when the query is a vector (the Laplace mechanism: a vector query of L1
   sensitivity D answered with scale D / eps per coordinate is eps-DP): that is what the
   charge's evidence certifies. Raw counts of earlier slots are not among what it may read.
   001 Algorithm 3's mean absolute difference to the last release is such a query.
2. ``decide(t, dis, err, scale)``, when the kernel leaves the slot to the data (neither nullified
   nor forced): publish or not, from the noisy dissimilarity (None without a dissimilarity
   budget), the error of a publication at the planned budgets (001 Definition 13, OBS's
   ``err``) and the publication's noise scale. Post-processing only: it sees no raw count.
3. ``publish(t, sampled, scale, rng)``, when the slot publishes: the release, from **one query of
   L1 sensitivity at most 1** of ``sampled`` (the histogram itself, or sums over a partition of
   its cells) with Laplace noise of scale ``scale`` per answer, then any post-processing (which
   may read earlier releases, never earlier raw counts).
4. ``approximate(t, last)``, when it does not: the release built from earlier releases only.

A path that reads a raw count outside ``dissimilarity`` and ``publish``, or adds less noise
than it is given, breaks the privacy the guard's ledger records: the guard checks the budgets
spent and their evidence, not the path's arithmetic. Paths are deterministic given their
generator, so a run is reproduced by its seed.

`PwsmPath` is the data path of every built-in allocator but the benchmark mechanisms (001
Algorithms 2-5; 002 Algorithms 1-2 restated with 001's publication rule): DC's mean absolute
difference, publish iff ``dis > sqrt(err)``, Laplace noise on every cell, the last release
repeated. An `AllocatorSpec` names its path with a factory of the domain size
(``data_path``); None means `PwsmPath`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError

__all__ = [
    "THRESHOLDS",
    "DataPath",
    "DataPathFactory",
    "KellarisPath",
    "PwsmPath",
    "central_path",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class DataPath(Protocol):
    """What a central mechanism does with data (module docstring: what each call may read)."""

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        """Slot ``t``'s noisy dissimilarity: a query of L1 sensitivity <= 1/d, Laplace(scale)."""
        ...

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        """Whether slot ``t`` publishes (only asked when the kernel leaves it to the data)."""
        ...

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        """Slot ``t``'s release: a query of L1 sensitivity <= 1 with Laplace(scale) noise."""
        ...

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        """Slot ``t``'s release when it does not publish, from earlier releases only."""
        ...


DataPathFactory = Callable[[int], DataPath]


class PwsmPath:
    """001 Algorithms 2-5 (PWSM with DC): the built-in allocators' data path."""

    def __init__(self, domain: int) -> None:
        self.domain = domain

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        """001 Algorithm 3 (DC): the mean absolute difference of the sampled counts to the last
        release (sensitivity 1/d), plus Laplace noise."""
        # the mean as np.mean computes it for float64 (the pairwise sum, then one division)
        mean_abs = float(np.abs(sampled - last).sum()) / self.domain
        return mean_abs + float(rng.laplace(0.0, scale))

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        """001 Algorithm 4 line 7: publish iff the dissimilarity exceeds the publication's
        expected error, ``dis > sqrt(err)``."""
        return dis is not None and dis > math.sqrt(err)

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        """001 Algorithm 2 (PWSM): Laplace noise on every sampled count."""
        out: FloatArray = sampled + rng.laplace(0.0, scale, size=sampled.shape)
        return out

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        """The last release, repeated."""
        return last


class KellarisPath(PwsmPath):
    """PWSM's path with Kellaris et al.'s publication rule (their BD and BA, as 002 restates
    them and streamdp-benchmark runs them): publish iff the dissimilarity exceeds the
    publication's noise scale, ``dis > 1 / eps`` at sensitivity 1 (docs/peers.md)."""

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        return dis is not None and dis > scale


THRESHOLDS: Final = ("sqrt", "kellaris")


def central_path(threshold: str, domain: int) -> PwsmPath:
    """001's data path with the publication rule ``threshold``: ``sqrt`` (001 Algorithm 4 line
    7, `PwsmPath`) or ``kellaris`` (1/eps, `KellarisPath`)."""
    if threshold == "sqrt":
        return PwsmPath(domain)
    if threshold == "kellaris":
        return KellarisPath(domain)
    raise BudgetError(f"unknown threshold rule {threshold!r} (expected {', '.join(THRESHOLDS)})")
