"""DSAT (Li et al., 2015: dynamic sampling with adaptive thresholds) as streamdp-benchmark runs it
for w-event privacy (`src/mechanisms/DSAT.java`, named ``DSAT-WEvent`` by the experiment): a
budget kernel (`DsatKernel`) and a data path (`DsatPath`). Read through the benchmark's code; Li
et al.'s paper is not among this project's papers.

The code's rule, with its defaults (``OWN_EPS_1 = false``, so the "paper" split of
``computeK`` runs; ``USE_PERTURBED_NUMBER_TUPLES = true`` with ``SHARE_EPS_NO_TUPLES = 0.1``;
``CUTOFFPOINT_RATION = 0.15``; ``skipping_points_M = 2``). The code counts slots from 0; here
they count from 1, so its slot ``t`` is slot ``t + 1``. A window of w slots may hold
``c = ceil(0.15 w)`` sampling points (computed in doubles, as the code does; for w <= 2000 that
is the exact ceiling, tests/test_streamdp_dsat.py).

* ``run``, before the loop: ``eps_n = eps / 10`` buys a noisy number of tuples n (the sum of slot
  1's histogram, Laplace of scale ``1 / eps_n``); ``computeK`` turns n into the share k of a
  window's budget that goes to the sampling test: ``k = min(round(cbrt(n^2 (8 delta^2 +
  32 c^2 delta^2) / (d c^2))), 1 - c/w)`` with ``delta = 2/d``. Per window ``eps_1 = k eps``
  buys tests, ``eps_2 = eps - eps_1`` publications, ``eps_2 / c`` each. The first window's test
  budget is ``eps_1f = (eps - eps_n) k`` and its publication budget ``eps_2f = eps - eps_1f``.
* slot 1 publishes with ``eps_2f / c`` (and draws the threshold's noise); slots 2 and 3 repeat it
  (``t <= M``); slots 4 .. w+1 (the code's ``t <= w``, w + 1 slots) test and may publish while
  fewer than c slots have published, with a test of noise scale ``2 c delta / eps_1f`` and a
  publication of ``eps_2f / c``;
* from slot w+2: ``eps_rm = eps_2`` minus the publications of the code's slots
  ``[t-w, t-2]`` (``Arrays.copyOfRange`` excludes its end); while ``eps_rm > 1e-5`` the slot
  tests (scale ``2 c delta / eps_1``) and may publish ``eps_2 / c``; else it repeats.

What this kernel changes, and why:

* **k is fixed to ``1 - c/w``**, data-independently. ``computeK`` returns that value whenever
  the rounded cube root is at least 1 (n above about ``(d / 10)^1.5``, rounded); it returns 0
  (no test budget, infinite test noise) only for tiny noisy n against a large domain. The kernel
  never sees data, so the n estimate cannot steer it; its spend is still charged: ``eps_n`` is
  slot 1's dissimilarity part, and `DsatPath` measures n with it (``sum / d``, sensitivity
  ``1/d``, rescaled) and records the k the code would have chosen (``code_k``).
* **Every test is charged** (sequential composition, the guard's accounting). The code accounts
  the tests as a sparse-vector-style threshold test that pays for sampling points only, and tests
  at every slot it does not skip; charged one by one, its tests alone can spend more than
  ``eps_1`` in a window. The sound kernel gives each test ``eps_1 / w`` (``eps_1f / w`` in the
  first window), so w tests stay within ``eps_1``; the threshold's noise reads no data and is
  not charged.
* **The first window splits ``eps - eps_n``**: ``eps_2f = (eps - eps_n)(1 - k)``, so slot 1's
  estimate, the tests and the publications of window [1, w] sum to at most eps (the code's
  ``eps_2f = eps - eps_1f`` spends ``eps_n`` on top of eps).
* **The window is the window**: from slot w+2 a slot may publish only when its ``eps_2 / c`` fits
  in ``eps_2`` minus the publications of the last w - 1 slots ``[s-w+1, s-1]``; the code's
  ``[t-w, t-2]`` leaves out the previous slot, so a window can take c + 1 publications.
* exact rationals, so the code's ``1e-5`` rounding tolerance is ``> 0`` (a fixed tolerance
  would break the scale invariance the proof relies on).
* the sound variant adds the fixed kernels' exact safety clip (`wevent.mechanisms.allocators.
  fixed`): each class's spend is capped by what its window has left, both parts together. In
  exact arithmetic it never binds (tests/test_streamdp_dsat.py); it makes the window invariant
  1-inductive, so the k-induction proves the theorem for every horizon.

``streamdp-code`` is the code's rule as a kernel (for the gate to refute): k fixed as above, slot
1's ``eps_n``, each test charged what its noise certifies at sensitivity ``1/d``, ``eps_1 / (4c)``
(the code's scale ``2 c delta / eps_1`` with ``delta = 2/d``), ``eps_2f = eps - eps_1f``, the
publication window ``[s-w, s-2]`` with ``eps_rm > 0``. w = 2, eps = 1 (c = 1) breaks window [4, 5]
with 5/4: both slots test (1/8 each) and publish 1/2.

Like Kellaris' BD and BA, DSAT is not personalized: every class is served with the largest
window and the smallest budget (`uniform_class`). The state is a `FixedState` (its ``last`` holds
the number of first-window publications; ``last_pub`` is unused), so the k-induction's step
obligations, which build that state, apply to this kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Final, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.fixed import FixedState
from wevent.mechanisms.allocators.kernel import (
    STREAMDP_CODE,
    ClassReq,
    FixedClass,
    Kernel,
    Plan,
    check_variant,
    uniform_class,
)

__all__ = ["SPECS", "VARIANTS", "DsatKernel", "DsatPath", "cutoff", "dsat_path"]

V = TypeVar("V")
B = TypeVar("B")
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NAME: Final = "dsat"
VARIANTS: Final = ("sound", STREAMDP_CODE)

# DSAT.java's constants (static fields and defaults).
CUTOFF_RATIO: Final = 0.15  # CUTOFFPOINT_RATION: sampling points per window, c = ceil(0.15 w)
SKIP_M: Final = 2  # skipping_points_M: the code's slots 1..M repeat slot 0's release
EPS_N_SHARE: Final = Fraction(1, 10)  # SHARE_EPS_NO_TUPLES
THRESHOLD_T: Final = 0.025  # THRESHOLD_T
TOLERANCE: Final = 0.05  # TOLERANCE_DELTA
GAIN: Final = 0.5  # PROP_GAIN_THETA
THRESHOLD_MAX: Final = 2.0  # the threshold's cap when it rises
NO_TUPLES_FALLBACK: Final = 500_000  # NO_TUPELS_n, used when the noisy n is exactly 0


def cutoff(w: int) -> int:
    """``c = ceil(w * 0.15)`` in doubles, as the code computes it (``Math.ceil(w *
    CUTOFFPOINT_RATION)``)."""
    return max(1, math.ceil(w * CUTOFF_RATIO))


class DsatKernel(Generic[V, B]):
    """DSAT's budget rule (module docstring): ``sound`` (default) or ``streamdp-code``."""

    def __init__(
        self,
        alg: Algebra[V, B],
        classes: Sequence[ClassReq[V]],
        variant: str = "sound",
        *,
        clip: bool = True,
    ) -> None:
        check_variant(NAME, variant, VARIANTS)
        self.name = NAME
        self.variant = variant
        self.alg = alg
        self.classes: tuple[ClassReq[V], ...] = tuple(classes)
        self.served: FixedClass[V] = uniform_class(classes, alg, NAME)
        w = self.served.w
        c = cutoff(w)
        self.window, self.points = w, c
        code = variant == STREAMDP_CODE
        self._clip = clip and not code
        eps = self.served.eps
        k = Fraction(w - c, w)  # computeK's value when its rounded root is >= 1
        self.eps_n = alg.scale(eps, EPS_N_SHARE)
        first = alg.sub(eps, self.eps_n)
        eps_1f = alg.scale(first, k)
        eps_1 = alg.scale(eps, k)
        eps_2 = alg.sub(eps, eps_1)
        # first window: the code adds eps_n to the publications; sound splits eps - eps_n
        eps_2f = alg.sub(eps, eps_1f) if code else alg.scale(first, 1 - k)
        tests = Fraction(1, 4 * c) if code else Fraction(1, w)  # per test, of eps_1
        self.test_first, self.test = alg.scale(eps_1f, tests), alg.scale(eps_1, tests)
        self.pub_first, self.pub = (
            alg.scale(eps_2f, Fraction(1, c)),
            alg.scale(eps_2, Fraction(1, c)),
        )
        self.eps_2 = eps_2

    def start(self) -> FixedState[V]:
        # ``last`` counts the publications of the first window (the code's slots 0..w)
        return FixedState.empty(self.alg, len(self.classes), self.window)

    def induction_schedule(self) -> tuple[int, int]:
        """For `wevent prove --unbounded`: slot 1 and the first window (slots up to w + 1) have
        rules of their own; the steady rule holds from w + 2, where the steps start."""
        return self.window + 2, 1

    def _each(self, v: V) -> tuple[V, ...]:
        return (v,) * len(self.classes)

    def plan(self, state: FixedState[V], t: int) -> Plan[V, B]:
        alg = self.alg
        zero = alg.const(0)
        no, yes = alg.truth(False), alg.truth(True)
        w, c = self.window, self.points
        if t == 1:  # the code's slot 0: n's estimate, then a publication
            plan = Plan(no, yes, self._each(self.eps_n), self._each(self.pub_first))
        elif t <= w + 1:  # the code's first window, t <= w
            # Line 2: the code's t <= M repeats the release (no test); Line 4: no test once
            # c slots have published
            nullified = yes if t <= SKIP_M + 1 else alg.le(alg.const(c), state.last)
            test = alg.select(nullified, zero, self.test_first)
            plan = Plan(nullified, no, self._each(test), self._each(self.pub_first))
        else:
            pubs = state.pub[0]  # every class spends alike (one served requirement)
            if self.variant == STREAMDP_CODE:  # eps_rm over the code's [t-w, t-2], > 0
                room = alg.sub(self.eps_2, pubs.total(t - w, t - 2))
                nullified = alg.le(room, zero)
            else:  # the publication must fit in the window [t-w+1, t]
                room = alg.sub(self.eps_2, pubs.total(t - w + 1, t - 1))
                nullified = alg.not_(alg.le(self.pub, room))
            test = alg.select(nullified, zero, self.test)
            plan = Plan(nullified, no, self._each(test), self._each(self.pub))
        return self._clipped(state, t, plan) if self._clip else plan

    def _clipped(self, state: FixedState[V], t: int, plan: Plan[V, B]) -> Plan[V, B]:
        """Cap each class by its window's room, both parts together; nullify (and test nothing)
        when no class can publish. Never binds in exact arithmetic (module docstring)."""
        alg = self.alg
        zero = alg.const(0)
        w, eps = self.served.w, self.served.eps
        dis, pub, empty = [], [], []
        for i in range(len(self.classes)):
            spent = alg.add(
                state.dis[i].total(t - w + 1, t - 1), state.pub[i].total(t - w + 1, t - 1)
            )
            room = vmax(alg, alg.sub(eps, spent), zero)
            d = vmin(alg, plan.dissimilarity[i], room)
            dis.append(d)
            p = vmin(alg, plan.publication[i], alg.sub(room, d))
            pub.append(p)
            empty.append(alg.le(p, zero))
        nothing = alg.and_(*empty)
        return Plan(
            alg.or_(plan.nullified, nothing),
            alg.and_(plan.forced, alg.not_(nothing)),
            tuple(alg.select(nothing, zero, d) for d in dis),
            tuple(pub),
        )

    def step(self, state: FixedState[V], t: int, plan: Plan[V, B], published: B) -> FixedState[V]:
        alg = self.alg
        last = alg.select(published, alg.add(state.last, alg.const(1)), state.last)
        return state.pushed(alg, plan, published, last)


def _factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    kernel: Kernel[Any, Any, Any] = DsatKernel(alg, classes, variant)
    return kernel


# ------------------------------------------------------------------------------ data path


def window_from_scales(domain: int, n_scale: float, pub_scale: float) -> int | None:
    """The window w of a DSAT run, recovered from slot 1's two noise scales: the n estimate's
    ``(1/d) / eps_n`` gives eps, the publication's ``c / eps_2f`` then gives w (the sound split
    first, then the code's). None when no w up to ``10^6`` fits (not a DSAT kernel's scales).

    The data path protocol hands a path the domain size and per-call scales, not the window,
    and DSAT's threshold feedback needs the target rate c / w (docs/allocators.md)."""
    if not (n_scale > 0 and pub_scale > 0 and math.isfinite(n_scale * pub_scale)):
        return None
    eps = float(1 / EPS_N_SHARE) / (domain * n_scale)
    x = eps * pub_scale  # w / 0.9 (sound), c w / (0.1 w + 0.9 c) (code)
    top = min(int(7 * x) + 2, 1_000_000)
    ws = np.arange(1, top + 1, dtype=np.float64)
    cs = np.maximum(1.0, np.ceil(ws * CUTOFF_RATIO))
    for predicted in (ws / 0.9, cs * ws / (0.1 * ws + 0.9 * cs)):
        hit = np.flatnonzero(np.abs(predicted - x) <= 1e-6 * x)
        if hit.size:
            return int(hit[0]) + 1
    return None


class DsatPath:
    """DSAT.java's data side, per slot (module docstring for the budgets):

    * slot 1's dissimilarity query is the number of tuples: ``sum(sampled) / d`` (sensitivity
      ``1/d``: the code's count ``sum`` has sensitivity 1, so it is divided by d and the answer
      multiplied back, ``n = d x``, which is the code's ``sum + Laplace(1 / eps_n)``); it sets
      ``tuples`` and ``code_k`` (the k ``computeK`` would take from it; the kernel fixes k);
    * every later dissimilarity query is the code's ``avg_dissimilarity``: the mean absolute
      difference of the sampled counts to the last release (sensitivity ``1/d``), plus
      Laplace(scale). The first one also draws the threshold's noise, ``THRESHOLD_T +
      Laplace(scale)`` (the code gives the threshold and the tests one scale; the draw reads no
      data);
    * ``decide``: the feedback of Lines 6-8, then publish iff ``dis >= threshold``. The code
      divides two ints (``no_sampling_points_window / t``), which is 0 at every slot that tests
      (a window holds fewer publications than the slot's index), so the error is ``c / w``, the
      threshold falls by ``GAIN * |c/w - TOLERANCE| / TOLERANCE`` per test and stops at 0; this
      path computes the same integer quotient. Without a dissimilarity (a zero test budget,
      w = 1) it publishes whenever the kernel lets it (the code's infinite noise decides by a
      coin);
    * ``publish``: Laplace(scale) on every cell (``sanitize``; the artificial-data experiment
      leaves ``TRUNCATE`` off); ``approximate``: the last release.

    The code's streams are histograms too; its test is the mean over cells, as here. ``window``
    fixes w; by default it is recovered from slot 1's scales (`window_from_scales`).
    """

    def __init__(self, domain: int, window: int | None = None) -> None:
        self.domain = domain
        self.window = window
        self.threshold: float | None = None
        self.tuples: float | None = None
        self.code_k: float | None = None
        self.published: list[int] = []
        self._n_scale: float | None = None

    # -- what the rate needs
    def _rate(self) -> float:
        w = self.window
        return cutoff(w) / w if w else CUTOFF_RATIO

    def _code_k(self, n: float) -> float | None:
        w, d = self.window, self.domain
        if not w:
            return None
        c = float(cutoff(w))
        delta = 2.0 / d
        root2 = (8 * delta * delta + 32 * c * c * delta * delta) / (d * c * c)
        root = math.floor((n * n * root2) ** (1.0 / 3.0) + 0.5)  # Math.round
        return min(float(root), 1.0 - c / w)

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        if t == 1:  # the number of tuples, as sum / d (sensitivity 1/d)
            x = float(sampled.sum()) / self.domain + float(rng.laplace(0.0, scale))
            n = x * self.domain
            self.tuples = n if n != 0 else float(NO_TUPLES_FALLBACK)
            self._n_scale = scale
            return x
        if self.threshold is None:
            self.threshold = THRESHOLD_T + float(rng.laplace(0.0, scale))
        mean_abs = float(np.abs(sampled - last).sum()) / self.domain
        return mean_abs + float(rng.laplace(0.0, scale))

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        if dis is None or self.threshold is None:
            return True
        w = self.window
        if w is None or t <= w + 1:  # the code's first window: every publication so far
            count = len(self.published)
        else:  # then those of the slots [t-w, t-2] (the same range in the code's 0-based slots)
            count = sum(1 for s in self.published if t - w <= s <= t - 2)
        error = count // (t - 1) - self._rate()  # Java's int / int (t - 1: the code's slot)
        u = abs(abs(error) - TOLERANCE) / TOLERANCE * GAIN
        if error <= 0:
            self.threshold = max(0.0, self.threshold - u)
        else:
            self.threshold = min(THRESHOLD_MAX, self.threshold + u)
        return dis >= self.threshold

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        if t == 1 and self.window is None and self._n_scale is not None:
            self.window = window_from_scales(self.domain, self._n_scale, scale)
        if t == 1 and self.tuples is not None:
            self.code_k = self._code_k(self.tuples)
        self.published.append(t)
        out: FloatArray = sampled + rng.laplace(0.0, scale, size=sampled.shape)
        return out

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        return last


def dsat_path(domain: int) -> DsatPath:
    """DSAT's data path for a domain of ``domain`` cells (the spec's ``data_path``)."""
    return DsatPath(domain)


SPECS: Final = (
    AllocatorSpec(
        NAME,
        "fixed",
        "global",
        "DSAT, dynamic sampling with adaptive thresholds (Li et al. 2015, as streamdp-benchmark's "
        "DSAT.java runs it for w-event)",
        _factory,
        variants=VARIANTS,
        data_path=dsat_path,
    ),
)
