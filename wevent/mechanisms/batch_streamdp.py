"""Batch runs of the streamdp mechanisms with data paths of their own: dsat, adapub, pegasus,
fast-w and rescuedp, R runs in one vectorized pass (`wevent.mechanisms.batch.run_batch`
dispatches here).

Everything `wevent.mechanisms.batch`'s module docstring says of a batch holds here: the
mechanism's own budget kernel runs on `BatchAlgebra` (double precision, no guard, no ledger, the
comparison tolerance and `BatchResult.near_zero`), one stream for every run, the runs differing
in their noise, `BATCH_LABEL` on the result. What differs is the data path: in place of 001's
(`PwsmPath`, vectorized in `run_batch`), each mechanism's own path is restated over *lanes* (one
per run) by a class here, holding per lane the state the exact path holds per run:

* **dsat** (`DsatLanes`, restating `wevent.mechanisms.streamdp.dsat.DsatPath`): slot 1's number
  of tuples; the threshold, drawn at a lane's first test; the threshold's feedback from the
  lane's publication count (all of them in the first window, then those of slots ``[t-w, t-2]``:
  running counts in a ring of w + 1 slots); publish iff ``dis >= threshold``;
* **adapub** (`AdaPubLanes`, `...adapub.AdaPubPath` with its defaults, the registered path): the
  deviation (answered and never read, as there), and the per-cell Laplace release, every cell a
  group of its own and every time group one slot long, so the median smoother returns it;
* **pegasus** (`PegasusLanes`, `...pegasus.PegasusPath(d, regroup=True)`, the registered path):
  a new group at every slot, so the grouper draws nothing and the release is the perturber's;
* **fast-w** (`FastLanes`, `...fast.FastPath`): per lane, each cell's Kalman filter, the PID
  schedule's last five feedback errors (a ring, summed oldest first as the list is), its
  interval and next sample;
* **rescuedp** (`RescueLanes`, `...rescuedp.RescuePath`): per lane the PID interval and its
  pending update, the last four releases, each cell's Kalman P and the running moments of its
  noisy answers; the grouping of cells is `rescuedp.groups_of` itself, called lane by lane
  (skipped where every cell of a lane is predicted above ``TAU_1``, where it returns one group
  per cell), and each lane draws one answer per group (ragged draws, lane after lane).

Noise is drawn in the exact runner's order, slot by slot: the dissimilarity (with DSAT's
threshold draws first, for the lanes that need one), then the release; each draw is one array
over the lanes that draw, in lane order. So a batch of one run with ``noise="numpy"`` draws
exactly the numbers `run_mechanism` draws at that seed (tests/test_batch_streamdp.py compares
the releases slot by slot, to 1e-9). The sums over cells are taken in another order than the
exact path's for d > 8 (numpy's pairwise sum against a sum down a column), a last-place
difference in a noisy value that a comparison could only tell apart at a tie.

Variants: those `wevent gate` proves sound (`wevent.mechanisms.batch.SOUND_VARIANTS`): ``sound``
for all five, ``published`` for adapub; dsat's ``streamdp-code`` is refuted and refused, and
rescuedp's ``published`` is refused too (not gated here: its gate takes about 19 minutes).

Not here: PeGaSus's grouping path (``PegasusPath(d)``, not the registered one), AdaPub's
dimension grouping and truncation (flags of `AdaPubPath`, off in the registered path).
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from wevent.mechanisms.allocators.kernel import Kernel
from wevent.mechanisms.batch_core import (
    LANE_PATHS,
    BatchAlgebra,
    BatchUnsupported,
    Budgets,
    check_signs,
    laplace,
    near_zero,
)
from wevent.mechanisms.streamdp import dsat as dsat_module
from wevent.mechanisms.streamdp import fast as fast_module
from wevent.mechanisms.streamdp import rescuedp as rescue

__all__ = [
    "LANE_PATHS",
    "AdaPubLanes",
    "DsatLanes",
    "FastLanes",
    "LanePath",
    "PegasusLanes",
    "RescueLanes",
    "run_lanes",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class LanePath(Protocol):
    """A data path over lanes (`wevent.mechanisms.datapath.DataPath`'s four calls, each for the
    lanes ``rows`` of the runs that make it, in the exact runner's order; ``end`` closes a slot).

    ``sampled``: the rows' sampled counts, (d, len(rows)) or a (d, 1) column shared by all of
    them; ``last``: their last releases, (d, len(rows)); ``scale``: their noise scales."""

    def dissimilarity(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        last: FloatArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray: ...

    def decide(self, t: int, rows: IntArray, dis: FloatArray, scale: FloatArray) -> BoolArray: ...

    def publish(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray: ...

    def approximate(self, t: int, rows: IntArray, last: FloatArray) -> FloatArray: ...

    def end(self, t: int) -> None: ...


class _Lanes:
    """What every lane path holds: the runs, the domain and the noise kind."""

    def __init__(self, runs: int, domain: int, noise: str) -> None:
        self.runs, self.domain, self.noise = runs, domain, noise

    def _noise(
        self, rng: np.random.Generator, scale: FloatArray, shape: tuple[int, ...], rows: IntArray
    ) -> Any:
        """Laplace(scale) noise of ``shape`` (the last axis: the lanes ``rows``), in one draw
        (`wevent.mechanisms.batch_core.laplace`); tests replace it with one generator per lane."""
        return laplace(rng, self.noise, scale, shape)

    def _perturb(
        self, rows: IntArray, sampled: IntArray, scale: FloatArray, rng: np.random.Generator
    ) -> FloatArray:
        """Laplace(scale) on every cell of the rows' counts (`PwsmPath.publish`, lane-wise)."""
        out: FloatArray = sampled + self._noise(rng, scale, (self.domain, len(rows)), rows)
        return out

    def _mean_abs(self, sampled: IntArray, last: FloatArray) -> FloatArray:
        """Per lane, the mean absolute difference of the counts to the last release."""
        out: FloatArray = np.abs(sampled - last).sum(axis=0) / self.domain
        return out

    def approximate(self, t: int, rows: IntArray, last: FloatArray) -> FloatArray:
        return last

    def end(self, t: int) -> None:
        return None


class DsatLanes(_Lanes):
    """`DsatPath` over lanes (module docstring; each step cites the exact path's)."""

    def __init__(self, runs: int, domain: int, noise: str, window: int) -> None:
        super().__init__(runs, domain, noise)
        self.window = window
        self.rate = dsat_module.cutoff(window) / window  # DsatPath._rate
        self.threshold = np.full(runs, np.nan)  # None until the lane's first test
        self.total = np.zeros(runs, dtype=np.int64)  # publications so far (len(published))
        # cum[s % (w + 1)]: the publications of slots 1..s, for the last w + 1 slots
        self.cum = np.zeros((window + 1, runs), dtype=np.int64)

    def dissimilarity(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        last: FloatArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        k = len(rows)
        if t == 1:  # the number of tuples, sum / d (sensitivity 1/d); code_k is not kept
            counts = np.broadcast_to(sampled, (self.domain, k))
            x: FloatArray = counts.sum(axis=0) / self.domain + self._noise(rng, scale, (k,), rows)
            return x
        need = np.isnan(self.threshold[rows])
        if need.any():  # the threshold's draw comes first, as in DsatPath.dissimilarity
            at = rows[need]
            drawn = self._noise(rng, scale[need], (len(at),), at)
            self.threshold[at] = dsat_module.THRESHOLD_T + drawn
        out: FloatArray = self._mean_abs(sampled, last) + self._noise(rng, scale, (k,), rows)
        return out

    def decide(self, t: int, rows: IntArray, dis: FloatArray, scale: FloatArray) -> BoolArray:
        w = self.window
        thr = self.threshold[rows]
        ask = ~(np.isnan(dis) | np.isnan(thr))  # else True: no test, or no threshold yet
        if t <= w + 1:  # the first window: every publication so far
            count = self.total[rows]
        else:  # those of slots [t-w, t-2]
            count = self.cum[(t - 2) % (w + 1), rows] - self.cum[(t - w - 1) % (w + 1), rows]
        error = (count // (t - 1)).astype(np.float64) - self.rate  # Java's int / int
        u = np.abs(np.abs(error) - dsat_module.TOLERANCE) / dsat_module.TOLERANCE
        u *= dsat_module.GAIN
        moved = np.where(
            error <= 0,
            np.maximum(0.0, thr - u),
            np.minimum(dsat_module.THRESHOLD_MAX, thr + u),
        )
        self.threshold[rows] = np.where(ask, moved, thr)
        out: BoolArray = ~ask | (dis >= moved)
        return out

    def publish(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        self.total[rows] += 1
        return self._perturb(rows, sampled, scale, rng)

    def end(self, t: int) -> None:
        self.cum[t % (self.window + 1)] = self.total


class AdaPubLanes(_Lanes):
    """`AdaPubPath` with its defaults (the registered path) over lanes: no dimension grouping
    (each cell a group of one: its noisy sum is its noisy count), no truncation, and time groups
    of one slot (the median of the fresh value alone)."""

    def __init__(self, runs: int, domain: int, noise: str) -> None:
        super().__init__(runs, domain, noise)

    def dissimilarity(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        last: FloatArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        """The deviation ``sum_j |x_j - last_j| / (2 d)`` plus Laplace(scale): drawn, never
        read (AdaPubPath.dissimilarity)."""
        stat = np.abs(sampled - last).sum(axis=0) / (2 * self.domain)
        out: FloatArray = stat + self._noise(rng, scale, (len(rows),), rows)
        return out

    def decide(self, t: int, rows: IntArray, dis: FloatArray, scale: FloatArray) -> BoolArray:
        return np.ones(len(rows), dtype=np.bool_)  # every slot is forced; asked, it publishes

    def publish(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        return self._perturb(rows, sampled, scale, rng)


class PegasusLanes(_Lanes):
    """`PegasusPath(d, regroup=True)` (the registered path) over lanes: every slot opens a new
    group in every cell, so the grouper tests nothing (no draw; answer 0) and the smoother's
    median is the perturbed count itself."""

    def dissimilarity(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        last: FloatArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        return np.zeros(len(rows))

    def decide(self, t: int, rows: IntArray, dis: FloatArray, scale: FloatArray) -> BoolArray:
        return np.ones(len(rows), dtype=np.bool_)

    def publish(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        return self._perturb(rows, sampled, scale, rng)


RING: Final = fast_module.WINDOW_PID  # the PID reads the last five feedback errors
_STEP_FLOOR: Final = -(2.0**62)  # FastLanes._schedule: a step below this is one to MIN_INTERVAL


class FastLanes(_Lanes):
    """`FastPath` over lanes: per lane the chunk's start, the filter's P, each cell's posterior,
    the last `RING` feedback errors with their chunk offsets, the PID interval and next
    sample (module docstring)."""

    def __init__(self, runs: int, domain: int, noise: str) -> None:
        super().__init__(runs, domain, noise)
        self.decided = np.zeros(runs, dtype=np.int64)  # the last slot decide chose
        self.predicted = np.zeros(runs, dtype=np.int64)  # the last slot predicted
        self.start = np.ones(runs, dtype=np.int64)
        self.p = np.full(runs, fast_module.P0)
        self.posterior = np.zeros((domain, runs))
        self.n_err = np.zeros(runs, dtype=np.int64)  # len(_errors)
        self.offsets = np.zeros((RING, runs), dtype=np.int64)
        self.errors = np.zeros((RING, domain, runs))
        self.interval = np.ones(runs, dtype=np.int64)
        self.next = np.full(runs, max(1, fast_module.WINDOW_PID), dtype=np.int64)

    def _predict(self, t: int, rows: IntArray) -> None:
        """``predictKF``: once per slot, P grows by Q."""
        fresh = rows[self.predicted[rows] != t]
        self.predicted[fresh] = t
        self.p[fresh] += fast_module.Q

    def dissimilarity(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        last: FloatArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        """The noise alone (FastPath.dissimilarity; the kernel never buys one)."""
        out: FloatArray = self._noise(rng, scale, (len(rows),), rows)
        return out

    def decide(self, t: int, rows: IntArray, dis: FloatArray, scale: FloatArray) -> BoolArray:
        self._predict(t, rows)
        sample: BoolArray = (self.n_err[rows] < fast_module.WINDOW_PID) | (
            t - self.start[rows] == self.next[rows]
        )
        self.decided[rows[sample]] = t
        return sample

    def publish(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        noisy = self._perturb(rows, sampled, scale, rng)
        forced = self.decided[rows] != t  # the chunk's first slot: a new chunk
        if forced.any():
            at = rows[forced]
            self.start[at] = t
            self.p[at] = fast_module.P0
            self.posterior[:, at] = 0.0
            self.n_err[at] = 0
            self.interval[at] = 1
            self.next[at] = max(1, fast_module.WINDOW_PID)
            self.predicted[at] = t
        prior = self.posterior[:, rows]
        prior_int = np.where(forced, 0.0, np.trunc(prior))
        p = self.p[rows]
        gain = p / (p + fast_module.R)
        corrected = prior + gain * (noisy - prior)
        release = np.where(forced, noisy, corrected)
        self.p[rows] = np.where(forced, p, p * (1.0 - gain))
        scheduled = self.n_err[rows] >= fast_module.WINDOW_PID
        error = np.abs(release - prior_int) / np.maximum(release, 1.0)
        slot = self.n_err[rows] % RING
        self.offsets[slot, rows] = t - self.start[rows]
        self.errors[slot, :, rows] = error.T
        self.n_err[rows] += 1
        self.posterior[:, rows] = release
        if scheduled.any():
            self._schedule(rows[scheduled])
        out: FloatArray = release
        return out

    def _schedule(self, rows: IntArray) -> None:
        """``PID`` and Algorithm 9's step for the lanes ``rows`` (FastPath._schedule): the
        errors summed oldest first, as the exact path's list is."""
        n = self.n_err[rows]
        oldest = n - RING
        total = self.errors[oldest % RING, :, rows]  # (k, d)
        for j in range(1, RING):
            total = total + self.errors[(oldest + j) % RING, :, rows]
        e_last = self.errors[(n - 1) % RING, :, rows]
        e_prev = self.errors[(n - 2) % RING, :, rows]
        gap = (self.offsets[(n - 1) % RING, rows] - self.offsets[(n - 2) % RING, rows])[:, None]
        ratios = (
            fast_module.CP * e_last
            + fast_module.CI * total
            + fast_module.CD * (e_last - e_prev) / gap
        )
        ratio = ratios.mean(axis=1)
        exponent = (ratio - fast_module.XI) / fast_module.XI
        over = exponent > fast_module._EXP_MAX
        step = np.trunc(fast_module.THETA * (1.0 - np.exp(np.where(over, 0.0, exponent))))
        # a step down to -5 e^700 leaves int64 (the exact path's Python int does not): clipped
        # at -2^62, below which every step already sets the interval to MIN_INTERVAL (an
        # interval grows by at most THETA a sample, far below 2^62), so the result is the same
        step = np.maximum(step, _STEP_FLOOR)
        grown = np.maximum(self.interval[rows] + step.astype(np.int64), fast_module.MIN_INTERVAL)
        self.interval[rows] = np.where(over, fast_module.MIN_INTERVAL, grown)
        self.next[rows] += self.interval[rows]

    def approximate(self, t: int, rows: IntArray, last: FloatArray) -> FloatArray:
        """The prior cut toward zero (FastPath.approximate)."""
        self._predict(t, rows)
        out: FloatArray = np.trunc(self.posterior[:, rows])
        return out


class RescueLanes(_Lanes):
    """`RescuePath` over lanes: per lane the PID interval, next and last publication slots, the
    last four releases (a ring), each cell's Kalman P and the running moments of its noisy
    answers. The grouping (`rescuedp.groups_of`) is the exact function, called lane by lane,
    except where every cell of a lane is predicted above ``TAU_1`` (one group per cell, in
    cell order, which `groups_of` returns then): those lanes skip the call. Each lane draws
    one answer per group, so the draws are ragged (`_ragged_noise`)."""

    def __init__(self, runs: int, domain: int, noise: str) -> None:
        super().__init__(runs, domain, noise)
        self.interval = np.ones(runs)
        self.next_slot = np.ones(runs, dtype=np.int64)
        self.last_slot = np.zeros(runs, dtype=np.int64)
        self.pending = np.zeros(runs, dtype=np.bool_)
        self.published = np.zeros(runs, dtype=np.int64)
        self.ring = np.zeros((rescue.PI + 1, domain, runs))  # release k at k % (PI + 1)
        self.p = np.full((domain, runs), rescue.P_INIT)
        self.mean = np.zeros((domain, runs))
        self.m2 = np.zeros((domain, runs))
        self.noise_var = np.zeros((domain, runs))

    def _ragged_noise(
        self, rng: np.random.Generator, scale: FloatArray, counts: IntArray, rows: IntArray
    ) -> FloatArray:
        """``counts[i]`` Laplace(``scale[i]``) draws for lane ``rows[i]``, lane after lane, in
        one flat array (one draw; tests replace it with one generator per lane)."""
        out: FloatArray = laplace(rng, self.noise, np.repeat(scale, counts), (int(counts.sum()),))
        return out

    def _release(self, k: IntArray, rows: IntArray) -> FloatArray:
        """Release number ``k[i]`` (from 0) of lane ``rows[i]``, shape (d, len(rows))."""
        out: FloatArray = self.ring[k % (rescue.PI + 1), :, rows].T
        return out

    def _process_variance(self, rows: IntArray) -> FloatArray:
        """`RescuePath._process_variance` for the lanes ``rows``."""
        n = np.maximum(self.published[rows], 1)
        out: FloatArray = np.maximum(self.m2[:, rows] / n - self.noise_var[:, rows] / n, 0.0)
        return out

    def dissimilarity(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        last: FloatArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        """RescuePath.dissimilarity (its kernel never funds one)."""
        out: FloatArray = self._mean_abs(sampled, last) + self._noise(
            rng, scale, (len(rows),), rows
        )
        return out

    def decide(self, t: int, rows: IntArray, dis: FloatArray, scale: FloatArray) -> BoolArray:
        """The PID update of the first slot asked after a publication, then ``t >= next``."""
        pend = self.pending[rows]
        if pend.any():
            at, lam = rows[pend], float(rescue.LOG_SHARES[1]) * scale[pend]
            n = self.published[at]
            held = np.minimum(n, rescue.PI + 1)  # releases in the deque
            pid = np.empty((self.domain, len(at)))
            for m in np.unique(held):  # the lanes holding m releases: m - 1 differences
                sel = np.flatnonzero(held == m)
                first = n[sel] - m
                diffs = [
                    np.abs(
                        self._release(first + i + 1, at[sel]) - self._release(first + i, at[sel])
                    )
                    for i in range(int(m) - 1)
                ][-rescue.PI :]
                total = diffs[0]
                for x in diffs[1:]:
                    total = total + x
                pid[:, sel] = rescue.K_P * diffs[-1] + rescue.K_I * (total / len(diffs))
            x = ((pid / lam) ** 2).mean(axis=0)
            self.interval[at] = np.maximum(1.0, self.interval[at] + rescue.THETA * (1.0 - x))
            self.next_slot[at] = self.last_slot[at] + np.trunc(self.interval[at]).astype(np.int64)
            self.pending[at] = False
        out: BoolArray = t >= self.next_slot[rows]
        return out

    def _groups(self, rows: IntArray) -> list[list[list[int]]] | None:
        """Each lane's groups of cells (None: one group per cell in every lane)."""
        n = self.published[rows]
        grouped = n >= rescue.KAPPA
        if not grouped.any():
            return None
        hist = [self._release(n - rescue.KAPPA + i, rows) for i in range(rescue.KAPPA)]
        pred = (hist[0] + hist[1] + hist[2]) / rescue.KAPPA  # groups_of's mean, in its order
        alone = ~grouped | (pred > rescue.TAU_1).all(axis=0)
        if alone.all():
            return None
        single = [[j] for j in range(self.domain)]
        return [
            single if alone[i] else rescue.groups_of([h[:, i] for h in hist])
            for i in range(len(rows))
        ]

    def publish(
        self,
        t: int,
        rows: IntArray,
        sampled: IntArray,
        scale: FloatArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        d, k = self.domain, len(rows)
        counts = np.broadcast_to(sampled, (d, k)).astype(np.float64)
        groups = self._groups(rows)
        if groups is None:  # one answer per cell, lane after lane
            answers = self._ragged_noise(rng, scale, np.full(k, d, dtype=np.int64), rows)
            noisy = counts + answers.reshape(k, d).T
            sizes = np.ones((d, k))
        else:  # one answer per group, the groups of lane after lane numbered in one sequence
            labels: list[int] = []
            per_lane = np.empty(k, dtype=np.int64)
            base = 0
            for i, lane in enumerate(groups):
                cell_group = [0] * d
                for gi, g in enumerate(lane):
                    for j in g:
                        cell_group[j] = base + gi
                labels.extend(cell_group)
                per_lane[i] = len(lane)
                base += len(lane)
            label = np.array(labels, dtype=np.int64).reshape(k, d).T  # (d, k)
            answers = self._ragged_noise(rng, scale, per_lane, rows)
            size_of = np.bincount(label.ravel(), minlength=base).astype(np.float64)
            sum_of = np.bincount(label.ravel(), weights=counts.ravel(), minlength=base)
            noisy = ((sum_of + answers) / size_of)[label]  # (sum + answer) / |g|, as RescuePath
            sizes = size_of[label]
        old = self.published[rows]
        n = old + 1
        delta = noisy - self.mean[:, rows]
        self.mean[:, rows] = self.mean[:, rows] + delta / n
        self.m2[:, rows] = self.m2[:, rows] + delta * (noisy - self.mean[:, rows])
        self.noise_var[:, rows] = self.noise_var[:, rows] + 2.0 * (scale / sizes) ** 2
        release = noisy.copy()
        later = old > 0  # the first release is not filtered
        if later.any():
            at_rows = rows[later]
            q = self._process_variance(at_rows)
            prev = self._release(old[later] - 1, at_rows)
            p = self.p[:, at_rows] + q
            s2 = scale[later] * scale[later]
            gain = p / (p + s2)
            release[:, later] = prev + gain * (noisy[:, later] - prev)
            self.p[:, at_rows] = p * (1.0 - gain)
        self.ring[old % (rescue.PI + 1), :, rows] = release.T
        self.published[rows] = n
        self.last_slot[rows] = t
        first = n == 1
        self.next_slot[rows[first]] = t + 1
        self.pending[rows[~first]] = True
        return release

    def approximate(self, t: int, rows: IntArray, last: FloatArray) -> FloatArray:
        """The last release; P grows by q where the lane has published."""
        some = rows[self.published[rows] > 0]
        if len(some):
            self.p[:, some] = self.p[:, some] + self._process_variance(some)
        return last


def _lanes_for(allocator: str, kernel: Any, runs: int, domain: int, noise: str) -> LanePath:
    if allocator == "dsat":
        return DsatLanes(runs, domain, noise, int(kernel.window))
    if allocator == "adapub":
        return AdaPubLanes(runs, domain, noise)
    if allocator == "pegasus":
        return PegasusLanes(runs, domain, noise)
    if allocator == "fast-w":
        return FastLanes(runs, domain, noise)
    if allocator == "rescuedp":
        return RescueLanes(runs, domain, noise)
    raise BatchUnsupported(f"{allocator}: no lane path (batch_streamdp.LANE_PATHS)")


def _check_dsat_window(lanes: DsatLanes, scales: tuple[FloatArray, FloatArray]) -> None:
    """DsatPath recovers w from slot 1's scales (`dsat.window_from_scales`); the lanes take the
    kernel's w, so they refuse a run where the two would differ (none known)."""
    both = np.stack(scales)
    pairs = np.unique(both[:, np.isfinite(both).all(axis=0)], axis=1)
    for n_scale, pub_scale in pairs.T:
        found = dsat_module.window_from_scales(lanes.domain, float(n_scale), float(pub_scale))
        if found != lanes.window:
            raise BatchUnsupported(
                f"dsat: slot 1's noise scales give w = {found}, the kernel's w is {lanes.window}; "
                "the exact path would run with the former (run it with `wevent run`)"
            )


def run_lanes(
    allocator: str,
    alg: BatchAlgebra,
    kernel: Kernel[Any, Any, Any],
    hists: IntArray,
    sizes: list[int],
    *,
    noise: str,
    rng: np.random.Generator,
    keep: bool,
) -> dict[str, Any]:
    """The slot loop of `run_batch` with the mechanism's lane path in place of 001's: returns
    `BatchResult`'s per-run fields (``amre``, ``mae``, counts, ``releases``)."""
    slots, _, d = hists.shape
    runs = alg.runs
    path = _lanes_for(allocator, kernel, runs, d, noise)
    has_users = np.array([n > 0 for n in sizes], dtype=np.bool_)
    every = np.arange(runs)
    last = np.zeros((d, runs))
    sq_err = np.zeros(runs)
    abs_err = np.zeros(runs)
    published = np.zeros(runs, dtype=np.int64)
    nullified_n = np.zeros(runs, dtype=np.int64)
    near_n = np.zeros(runs, dtype=np.int64)
    releases = np.empty((slots, d, runs)) if keep else None
    truth = hists.sum(axis=1)
    inv_d = 1.0 / d
    n_scale: FloatArray | None = None
    state = kernel.start()
    for t in range(1, slots + 1):
        hist = hists[t - 1]
        plan = kernel.plan(state, t)
        check_signs(alg, t, allocator, plan)
        near_n += near_zero(alg, plan, t)
        forced = alg.runs_of(plan.forced)
        nullified = alg.runs_of(plan.nullified)
        dis = np.full(runs, np.nan)
        dis_b = Budgets(alg, plan.dissimilarity, has_users, t, "dissimilarity")
        rows = every if dis_b.all else np.flatnonzero(dis_b.any)
        if len(rows):
            scale = inv_d / dis_b.theta[rows]
            if t == 1:
                n_scale = np.full(runs, np.nan)
                n_scale[rows] = scale
            dis[rows] = path.dissimilarity(
                t, rows, dis_b.counts(hist, None if dis_b.all else rows), last[:, rows], scale, rng
            )
        pub_b = Budgets(alg, plan.publication, has_users, t, "publication")
        pub_scale = 1.0 / pub_b.theta
        asked = ~forced & ~nullified & pub_b.any
        decision = np.zeros(runs, dtype=np.bool_)
        rows = every if asked.all() else np.flatnonzero(asked)
        if len(rows):
            decision[rows] = path.decide(t, rows, dis[rows], pub_scale[rows])
        publish = forced | (~nullified & decision)
        out = publish & pub_b.any
        rows = every if out.all() else np.flatnonzero(out)
        if t == 1 and isinstance(path, DsatLanes) and n_scale is not None and len(rows):
            _check_dsat_window(path, (n_scale[rows], pub_scale[rows]))
        if len(rows):
            counts = pub_b.counts(hist, None if pub_b.all else rows)
            last[:, rows] = path.publish(t, rows, counts, pub_scale[rows], rng)
        if len(rows) < runs:
            rest = np.flatnonzero(~out)
            last[:, rest] = path.approximate(t, rest, last[:, rest])
        path.end(t)
        state = kernel.step(state, t, plan, alg.lanes_of(publish, np.bool_))
        published += publish
        nullified_n += nullified & ~forced
        diff = last - truth[t - 1][:, None]
        abs_err += np.abs(diff).sum(axis=0)
        sq_err += (diff * diff).sum(axis=0)
        if releases is not None:
            releases[t - 1] = last
    return {
        "sq_err": sq_err,
        "abs_err": abs_err,
        "published": published,
        "nullified": nullified_n,
        "near_zero": near_n,
        "truth": truth,
        "releases": releases,
    }
