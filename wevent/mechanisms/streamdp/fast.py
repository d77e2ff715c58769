"""FAST_w: Fan and Xiong's FAST (a Kalman filter and PID-controlled adaptive sampling) cut into
chunks of w slots, as streamdp-benchmark runs it (`src/mechanisms/FAST_w.java`).

Source. Schäler et al.'s streamdp-benchmark re-implements FAST (Fan and Xiong, CIKM 2012, the
paper its header cites; the journal version in IEEE TKDE, 2014) and extends it from event-level to
w-event privacy by a uniform split over fixed chunks (the paper is not among this project's: the
rules below were read through the benchmark's code, snapshot `c9ccc471c71f`, docs/peers.md).

The rules the code follows (its ``run`` and ``publish``), restated for one chunk:

* the stream is cut into chunks; each chunk runs FAST afresh with a total budget of ``eps / 2``,
  at most ``M = max(1, floor(0.075 * L))`` samples (``ratioM = 0.075``; L the chunk's length),
  each a Laplace release of budget ``eps / (2M)`` (``epsilon_per_sample = total_budget / M``);
* the chunk's first slot is always sampled and released as it is; the next slots are sampled
  until ``windowPID = 5`` samples are held; after that a slot is sampled when it is the one the
  PID controller scheduled (``nextQuery``, first the chunk's sixth slot), and never once M
  samples are held;
* Kalman filter (``predictKF``, ``correctKF``; P = 100 at the chunk's start, Q = 1e5, R = 1e6):
  every slot after the first predicts the last sample's posterior and adds Q to P; a sample is
  corrected to ``prior + K (noisy - prior)`` with ``K = P / (P + R)``, then ``P *= 1 - K``; a
  slot that is not sampled releases the prior cut to an integer (Java's ``(int)``, toward zero);
* PID (``PID``, Algorithm 9 of the paper): the feedback error of a sample is
  ``|posterior - int(prior)| / max(posterior, 1)`` (the chunk's first sample has prior 0); at a
  scheduled sample, ``ratio = Cp e_last + Ci (sum of the last 5 errors) + Cd (e_last - e_prev) /
  (gap between them)`` with Cp = 0.9, Ci = 0.1, Cd = 0, the interval grows by
  ``int(theta (1 - exp((ratio - xi) / xi)))`` (theta = 5, xi = 0.1), at least ``minIntvl = 1``,
  and the next sample is that interval later.

The kernel (`FastKernel`, variant ``sound``: the code's budget rule is sound). Chunks of w slots,
starting at slots 1, w + 1, 2w + 1, ...; a chunk's first slot is forced; its other slots are
left to the data path and each offers ``eps / (2M)`` with ``M = max(1, floor(3w / 40))`` until
the chunk has published M times, after which they are nullified. The window theorem: a window of
w consecutive slots meets at most two chunks, each publishing at most M times at ``eps / (2M)``,
so it spends at most ``eps``. The half is needed: a chunk that publishes its last samples at its
end and the next chunk that publishes its first ones put up to 2M samples into one window.

Where this departs from the code, and why:

* chunks of w slots, one after the other. The code steps ``t += w + 1`` with chunks of w slots:
  the slot after every chunk (and the stream's last slot) gets no release at all (the output
  stays at its initial 0), with no budget spent; those slots are wasted, not unsafe, and here
  they belong to the next chunk;
* M from w: the code's last chunk is shorter and takes M from its length; online the end of the
  stream is unknown, and a chunk of fewer than w slots still spends at most ``eps / 2``;
* one sampling schedule for every histogram cell. The code runs one FAST per dimension, each with
  its own schedule and its own ``eps / 2`` per chunk (``sanitize`` assumes the dimensions do not
  share the budget): right for one dimension, or when a user stays in one cell, but a user who
  moves between cells can be in a sampled cell at more than M slots of a chunk, as the cells'
  schedules differ. wevent publishes a slot for every cell at once (one query of sensitivity 1,
  the whole histogram), so the cells share one schedule: each cell keeps its own Kalman filter,
  and the PID controller runs on the mean over cells of the cells' ratios; with one cell this
  is the code's schedule exactly;
* exact budgets (``eps / (2M)`` as a fraction; the code divides doubles) and slots counted from
  1 (the code's chunk offset i is ``(t - 1) mod w`` here); ``TRUNCATE`` off (the code's default,
  which its artificial-data experiments keep; its real-data experiments round releases to
  non-negative integers);
* ``exp`` of a large PID ratio overflows a double to infinity in Java, making the interval's step
  the most negative int and the interval ``minIntvl``; here an exponent past 700 gives the same
  interval without the overflow.

The data path (`FastPath`) learns where a chunk starts from the kernel's schedule, which is
public: a chunk's first slot is forced, so ``publish`` is called for it without a ``decide``
(every other slot that publishes was decided first). It reads raw counts only in ``publish``
(Laplace noise of the given scale on every cell); the filter, the schedule and every release in
between are post-processing of earlier releases.
"""

from __future__ import annotations

import math
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

__all__ = ["NAME", "RATIO_M", "SPECS", "FastKernel", "FastPath", "FastState", "samples_per_chunk"]

V = TypeVar("V")
B = TypeVar("B")
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NAME: Final = "fast-w"
VARIANTS: Final = ("sound",)

# FAST_w.java's fields: the sample ratio (``ratioM``), the chunk's share of eps (``run`` sets
# ``total_budget = epsilon / 2``), the Kalman filter's P, Q, R, the PID gains and constants.
RATIO_M: Final = Fraction(3, 40)  # 0.075 (as a double, floor(0.075 w) equals floor(3w/40))
CHUNK_SHARE: Final = Fraction(1, 2)
P0: Final = 100.0
Q: Final = 100000.0
R: Final = 1000000.0
CP: Final = 0.9
CI: Final = 0.1
CD: Final = 0.0
THETA: Final = 5.0
XI: Final = 0.1
MIN_INTERVAL: Final = 1
WINDOW_PID: Final = 5
_EXP_MAX: Final = 700.0  # exp(700) is finite in a double; beyond it the step is -infinity


def samples_per_chunk(w: int, ratio: Fraction = RATIO_M) -> int:
    """M, a chunk's most samples: ``max(1, floor(ratio * w))`` (``publish``'s first lines)."""
    return max(1, math.floor(ratio * w))


@dataclass(frozen=True, slots=True)
class FastState(Generic[V]):
    """Publications so far in the current chunk (a count in the kernel's algebra)."""

    count: V


class FastKernel(Generic[V, B]):
    """FAST_w's budget rule (module docstring): chunks of w slots, the first forced, at most M
    publications of ``eps / (2M)`` each, the chunk's later slots nullified once M are spent.

    ``ratio`` and ``share`` are the code's ``ratioM`` and the chunk's share of eps; the tests
    build kernels with other values (a larger ratio gives M >= 2 at the small windows a proof
    reaches; a share above 1/2 overspends)."""

    def __init__(
        self,
        alg: Algebra[V, B],
        classes: Sequence[ClassReq[V]],
        variant: str = "sound",
        *,
        ratio: Fraction = RATIO_M,
        share: Fraction = CHUNK_SHARE,
        name: str = NAME,
    ) -> None:
        check_variant(name, variant, VARIANTS)
        self.name = name
        self.variant = variant
        self.alg = alg
        self.classes: tuple[ClassReq[V], ...] = tuple(classes)
        self.served: FixedClass[V] = uniform_class(classes, alg, name)
        self.w = self.served.w
        self.samples = samples_per_chunk(self.w, ratio)
        # epsilon_per_sample = total_budget / M, total_budget = eps / 2 (FAST_w.run, publish)
        self._budget = alg.scale(self.served.eps, share / self.samples)

    def start(self) -> FastState[V]:
        return FastState(self.alg.const(0))

    def _used(self, state: FastState[V], t: int) -> V:
        """The chunk's publications before slot t (0 at a chunk's first slot)."""
        return self.alg.const(0) if (t - 1) % self.w == 0 else state.count

    def plan(self, state: FastState[V], t: int) -> Plan[V, B]:
        alg = self.alg
        first = (t - 1) % self.w == 0  # publish(): i == 0 is always sampled
        full = alg.le(alg.const(self.samples), self._used(state, t))  # query.cardinality() >= M
        pub = alg.select(full, alg.const(0), self._budget)
        n = len(self.classes)
        return Plan(full, alg.truth(first), (alg.const(0),) * n, (pub,) * n)

    def step(self, state: FastState[V], t: int, plan: Plan[V, B], published: B) -> FastState[V]:
        alg = self.alg
        used = self._used(state, t)
        return FastState(alg.select(published, alg.add(used, alg.const(1)), used))


def _factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    kernel: Kernel[Any, Any, Any] = FastKernel(alg, classes, variant)
    return kernel


class FastPath:
    """FAST's Kalman filter and PID schedule on the releases, one filter per histogram cell and
    one schedule for all of them (module docstring)."""

    def __init__(self, domain: int) -> None:
        self.domain = domain
        self._decided = 0  # the last slot ``decide`` chose to publish
        self._predicted = 0  # the last slot whose prediction step ran
        self._reset(1)

    def _reset(self, start: int) -> None:
        """A new chunk starting at slot ``start`` (a fresh FAST_w object in the code's ``run``)."""
        self._start = start
        self._p = P0
        self._posterior: FloatArray = np.zeros(self.domain)  # the last sample's release
        self._errors: list[tuple[int, FloatArray]] = []  # (chunk offset, feedback error)
        self._interval = 1
        self._next = max(1, WINDOW_PID) + self._interval - 1  # nextQuery

    def _predict(self, t: int) -> None:
        """``predictKF``: once per slot after the chunk's first, P grows by Q."""
        if t != self._predicted:
            self._predicted = t
            self._p += Q

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        """FAST has no dissimilarity query (its kernel never buys one); answered with the noise
        alone, reading no count, should a kernel ever ask."""
        return float(rng.laplace(0.0, scale))

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        """``publish()``'s branches: sample until ``windowPID`` samples are held, then at the
        slot the PID controller scheduled (the kernel nullifies the chunk once M are held)."""
        self._predict(t)
        sample = len(self._errors) < WINDOW_PID or t - self._start == self._next
        if sample:
            self._decided = t
        return sample

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        """Laplace noise of scale ``scale`` on every cell (``sanitize``); at a chunk's first
        slot the noisy counts as they are, else the Kalman correction of each cell's prior."""
        noisy: FloatArray = sampled + rng.laplace(0.0, scale, size=sampled.shape)
        if self._decided != t:  # forced: the chunk's first slot
            self._reset(t)
            self._predicted = t
            prior_int: FloatArray = np.zeros(self.domain)  # predict[0] is never set: 0
            release = noisy
        else:
            prior = self._posterior
            prior_int = np.trunc(prior)  # predict[i] = (int) predct
            gain = self._p / (self._p + R)  # correctKF
            release = prior + gain * (noisy - prior)
            self._p *= 1.0 - gain
        scheduled = len(self._errors) >= WINDOW_PID  # the PID branch of publish()
        error = np.abs(release - prior_int) / np.maximum(release, 1.0)
        self._errors.append((t - self._start, error))
        self._posterior = release
        if scheduled:
            self._schedule()
        out: FloatArray = release.copy()
        return out

    def _schedule(self) -> None:
        """``PID`` and Algorithm 9's step: the next sample's offset in the chunk."""
        recent = self._errors[-WINDOW_PID:]
        (t_prev, e_prev), (t_last, e_last) = recent[-2], recent[-1]
        total = np.sum([e for _, e in recent], axis=0)
        ratios = CP * e_last + CI * total + CD * (e_last - e_prev) / (t_last - t_prev)
        ratio = float(np.mean(ratios))  # one schedule for every cell: the mean of their ratios
        exponent = (ratio - XI) / XI
        if exponent > _EXP_MAX:
            self._interval = MIN_INTERVAL
        else:
            self._interval += int(THETA * (1.0 - math.exp(exponent)))  # (int): toward zero
            self._interval = max(self._interval, MIN_INTERVAL)
        self._next += self._interval

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        """A slot not sampled releases its prior, the last sample's release, cut to an integer
        toward zero (``publish[i] = (int) predct``)."""
        self._predict(t)
        out: FloatArray = np.trunc(self._posterior)
        return out


def fast_path(domain: int) -> FastPath:
    """`FastPath` for a domain of ``domain`` cells (the spec's data-path factory)."""
    return FastPath(domain)


SPECS: Final = (
    AllocatorSpec(
        NAME,
        "fixed",
        "global",
        "FAST in chunks of w slots: at most M = max(1, floor(0.075 w)) samples of eps/(2M) per "
        "chunk, Kalman filter and PID sampling (streamdp-benchmark's FAST_w; Fan and Xiong)",
        _factory,
        variants=VARIANTS,
        data_path=fast_path,
    ),
)
