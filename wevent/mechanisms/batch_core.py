"""The shared core of a batch (`wevent.mechanisms.batch`): the kernel algebra over runs
(`BatchAlgebra`), the comparison tolerances, a slot's budgets over the runs (`Budgets`), the sign
and near-zero checks, the noise, and the result (`BatchResult`, `batch_result`). Both 001's path
(`batch.run_batch`) and the lane paths of the streamdp mechanisms (`batch_streamdp`) build on it;
the module docstring of `wevent.mechanisms.batch` says what a batch is and is not."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import reduce
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from wevent.errors import InputError
from wevent.mechanisms.allocators.kernel import Plan
from wevent.mechanisms.central import InvalidAllocation

__all__ = [
    "BATCH_LABEL",
    "BUDGET_TOLERANCE",
    "COUNT_TOLERANCE",
    "LANE_PATHS",
    "NEAR_ZERO_FLOOR",
    "NOISES",
    "BatchAlgebra",
    "BatchResult",
    "BatchUnsupported",
    "Budgets",
    "batch_result",
    "check_signs",
    "laplace",
    "near_zero",
    "near_zero_floor",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

# A count within this (relative) of an integer is that integer; a budget comparison allows this
# times the batch's largest budget (module docstring, "Comparisons").
COUNT_TOLERANCE: Final = 2.0**-24
BUDGET_TOLERANCE: Final = 2.0**-36
# `near_zero`'s floor, relative to the tolerance at slot 1 (2^-44 of the largest budget).
NEAR_ZERO_FLOOR: Final = 2.0**-8
# The mechanisms with data paths of their own that a batch runs over lanes
# (`wevent.mechanisms.batch_streamdp`, one class per path).
LANE_PATHS: Final = ("dsat", "adapub", "pegasus", "fast-w", "rescuedp")

BATCH_LABEL: Final = (
    "batch run: budgets in double precision, no guard, no ledger; one stream for every run, "
    "the noise varying; for utility sweeps (privacy rests on the proved kernel; audit the exact "
    "guarded run, `wevent run`)"
)


class BatchUnsupported(InputError):
    """A batch cannot run this allocator, population or slot (the message says why and what
    runs it exactly)."""


class BatchAlgebra:
    """The kernel algebra over R runs: values are float64 arrays, truth values bool arrays, one
    element (a *lane*) per run.

    A batch has at least two lanes (one run gets a second lane that repeats it), so every value
    and truth value holds two or more elements and numpy refuses ``bool()`` of it: a kernel that
    branched in Python on a budget or a decision raises instead of silently taking one run's
    branch for all. Constants are shared read-only arrays. Counts (``ratio``, ``count_add``,
    ``count_sub``, ``floor``) are rounded to a nearby integer and budgets compared with a
    tolerance (module docstring, "Comparisons").
    """

    name = "batch"

    def __init__(self, runs: int, budget_scale: float = 1.0) -> None:
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise InputError(f"a batch needs a positive number of runs, got {runs!r}")
        if not (np.isfinite(budget_scale) and budget_scale > 0):
            raise InputError(f"the budget scale must be positive and finite, got {budget_scale}")
        self.runs = runs
        self.lanes = max(runs, 2)
        self.atol = float(budget_scale) * BUDGET_TOLERANCE
        self._consts: dict[Fraction | int, FloatArray] = {}
        self._true = self._frozen(np.ones(self.lanes, dtype=np.bool_))
        self._false = self._frozen(np.zeros(self.lanes, dtype=np.bool_))

    @staticmethod
    def _frozen(a: Any) -> Any:
        a.setflags(write=False)
        return a

    def lanes_of(self, per_run: npt.ArrayLike, dtype: Any = np.float64) -> Any:
        """A per-run array (R values) as a lane array (the extra lane repeats run 0)."""
        a = np.asarray(per_run, dtype=dtype)
        if a.shape != (self.runs,):
            raise InputError(f"expected one value per run ({self.runs}), got shape {a.shape}")
        if self.lanes > self.runs:
            a = np.concatenate([a, a[:1]])
        return a

    def runs_of(self, lanes: Any) -> Any:
        """The per-run part of a lane array."""
        if lanes.shape != (self.lanes,):
            raise InputError(f"expected a lane array of {self.lanes} values, got {lanes.shape}")
        return lanes[: self.runs] if self.lanes > self.runs else lanes

    # ------------------------------------------------------------------ the Algebra protocol

    def const(self, q: Fraction | int) -> FloatArray:
        if type(q) is not int:  # a Fraction's hash is slow; kernels ask for ints every slot
            return self._frozen(np.full(self.lanes, float(q)))  # type: ignore[no-any-return]
        found = self._consts.get(q)
        if found is None:
            found = self._frozen(np.full(self.lanes, float(q)))
            if len(self._consts) < 4096:
                self._consts[q] = found
        return found

    def add(self, a: FloatArray, b: FloatArray) -> FloatArray:
        return np.add(a, b)

    def sub(self, a: FloatArray, b: FloatArray) -> FloatArray:
        return np.subtract(a, b)

    def mul(self, a: FloatArray, b: FloatArray) -> FloatArray:
        return np.multiply(a, b)

    def scale(self, a: FloatArray, k: Fraction | int) -> FloatArray:
        k = Fraction(k)
        if k.numerator == 1:  # as published code writes eps / (2 w)
            return np.divide(a, float(k.denominator))
        return np.divide(np.multiply(a, float(k.numerator)), float(k.denominator))

    def le(self, a: FloatArray, b: FloatArray) -> BoolArray:
        return np.less_equal(a, np.add(b, self.atol))

    def select(self, cond: BoolArray, then: FloatArray, other: FloatArray) -> FloatArray:
        out: FloatArray = np.where(cond, then, other)
        return out

    def and_(self, *terms: BoolArray) -> BoolArray:
        if not terms:
            return self._true  # type: ignore[no-any-return]
        return reduce(np.logical_and, terms)

    def or_(self, *terms: BoolArray) -> BoolArray:
        if not terms:
            return self._false  # type: ignore[no-any-return]
        return reduce(np.logical_or, terms)

    def not_(self, a: BoolArray) -> BoolArray:
        return np.logical_not(a)

    def truth(self, value: bool) -> BoolArray:
        return self._true if value else self._false  # type: ignore[no-any-return]

    def minimum(self, a: FloatArray, b: FloatArray) -> FloatArray:
        """`vmin`'s elementwise operation (algebra.vmin)."""
        return np.minimum(a, b)

    def maximum(self, a: FloatArray, b: FloatArray) -> FloatArray:
        """`vmax`'s elementwise operation (algebra.vmax)."""
        return np.maximum(a, b)

    @staticmethod
    def _count(x: FloatArray) -> FloatArray:
        """``x`` with every element within `COUNT_TOLERANCE` of an integer set to it."""
        near = np.rint(x)
        out: FloatArray = np.where(np.abs(x - near) <= COUNT_TOLERANCE, near, x)
        return out

    def ratio(self, a: FloatArray, b: FloatArray) -> FloatArray:
        """``a / b`` (0 where ``b`` is 0), rounded to an integer within `COUNT_TOLERANCE`."""
        if b.min() > self.atol:  # a share: positive in every run
            return self._count(np.divide(a, b))
        zero = np.abs(b) <= self.atol
        return self._count(np.where(zero, 0.0, np.divide(a, np.where(zero, 1.0, b))))

    # The kernels' counts are slot numbers (integers, exact in doubles) combined with at most one
    # ratio, which `ratio` has rounded: their sums and differences are exact, or not integers.
    def count_add(self, a: FloatArray, b: FloatArray) -> FloatArray:
        return np.add(a, b)

    def count_sub(self, a: FloatArray, b: FloatArray) -> FloatArray:
        return np.subtract(a, b)

    def floor(self, a: FloatArray) -> FloatArray:
        return np.floor(self._count(a))


@dataclass(frozen=True)
class BatchResult:
    """Per-run metrics of a batch (arrays of length ``runs``), with `BATCH_LABEL`'s caveats.

    ``seed``: `run_batch`'s seed; ``stream_origin``: where the stream came from, ``"seed N"``
    (drawn from seed N's data generator) or ``"given histograms"`` (passed in: the batch does
    not know what drew them); ``noise_origin``: ``"seed N"`` (seed N's noise generator) or
    ``"given generator"`` (``noise_rng``). ``amre``: 001 Eq. 5, (1/T) sum_t
    (1/d) ||r_t - c_t||^2 on counts; ``amse``: 000 Section VI-B's on frequencies
    (``amre / users^2``); ``mae``: the mean absolute frequency error (as `RunSummary.errors`
    names them). ``published``, ``skipped``, ``nullified``: slot counts by status (as
    `status_of` gives them). ``near_zero``: slots with a budget within the comparison tolerance
    of 0 but above the rounding of an exact 0 (`near_zero`), where the run may differ from the
    exact run (module docstring, "The limit of the tolerance").
    ``releases`` (runs, slots, d) when asked for; ``truth`` (slots, d): the stream's
    totals."""

    allocator: str
    variant: str
    runs: int
    slots: int
    seed: int
    stream_origin: str
    noise_origin: str
    users: int
    amre: FloatArray
    amse: FloatArray
    mae: FloatArray
    published: IntArray
    skipped: IntArray
    nullified: IntArray
    near_zero: IntArray
    truth: IntArray
    releases: FloatArray | None
    label: str = BATCH_LABEL

    def describe(self) -> str:
        """One line: what ran, on which stream, and whether the tolerance decided a slot."""
        runs_near = int((self.near_zero > 0).sum())
        return (
            f"{self.allocator} ({self.variant}), {self.runs} runs x {self.slots} slots; stream: "
            f"{self.stream_origin}; noise: {self.noise_origin}; {runs_near} of {self.runs} runs "
            "with a budget within the tolerance of 0"
        )


class Budgets:
    """One part's budgets of a slot over the runs: whether each run spends (``any``), its one
    budget (``theta``, NaN where it spends nothing) and the users it samples (every user of a
    class with a positive budget)."""

    def __init__(
        self, alg: BatchAlgebra, parts: tuple[FloatArray, ...], sizes: BoolArray, t: int, what: str
    ) -> None:
        runs = alg.runs
        self.live: BoolArray | None = None  # (classes, runs); None: one class
        if len(parts) == 1:
            b = alg.runs_of(parts[0])
            live = b > alg.atol
            if not sizes[0]:
                live = np.zeros(runs, dtype=np.bool_)
            self.any: BoolArray = live
            self.all = bool(live.all())
            self.theta: FloatArray = b if self.all else np.where(live, b, np.nan)
            return
        b2 = np.stack([alg.runs_of(p) for p in parts])  # (classes, runs)
        live2 = (b2 > alg.atol) & sizes[:, None]
        self.any = np.asarray(live2.any(axis=0))
        self.all = bool(self.any.all())
        hi = np.where(live2, b2, -np.inf).max(axis=0)
        lo = np.where(live2, b2, np.inf).min(axis=0)
        spread = self.any & (hi - lo > alg.atol)
        if spread.any():
            r = int(np.flatnonzero(spread)[0])
            raise BatchUnsupported(
                f"slot {t}: run {r} of {runs} gives its classes different {what} budgets "
                f"({', '.join(f'{x:.6g}' for x in b2[:, r])}); SM would sample users with keep "
                "probabilities computed from exact budgets, which a batch does not hold (run "
                "such sweeps with execute_many)"
            )
        self.theta = np.where(self.any, hi, np.nan)
        self.live = live2

    def counts(self, hist: IntArray, rows: IntArray | None) -> IntArray:
        """The sampled counts (every user of the live classes), shape (d, runs) for the runs
        ``rows`` (None: every run; a column that broadcasts when one class)."""
        if self.live is None:
            column: IntArray = hist[0][:, None]
            return column
        live = self.live if rows is None else self.live[:, rows]
        out: IntArray = hist.T @ live.astype(np.int64)
        return out


def check_signs(alg: BatchAlgebra, t: int, allocator: str, plan: Plan[Any, Any]) -> None:
    """Refuse a negative budget that would be spent (dissimilarity always, publication unless
    the slot is nullified), as the exact runner does: any negative value, one within the
    tolerance of 0 too."""
    for part, values in (("dissimilarity", plan.dissimilarity), ("publication", plan.publication)):
        for c, v in enumerate(values):
            if v.min() >= 0:
                continue
            runs_v = alg.runs_of(v)
            bad = runs_v < 0
            if part == "publication":
                bad &= ~alg.runs_of(plan.nullified)
            if bad.any():
                low = float(runs_v[bad].min())
                near = (
                    " (within the comparison tolerance of 0: a rounding of 0 or of a positive "
                    "budget cannot be told from a negative one)"
                    if low >= -alg.atol
                    else ""
                )
                raise InvalidAllocation(
                    f"slot {t}: {allocator} allocated a negative {part} budget to class {c} in "
                    f"{int(bad.sum())} of {alg.runs} batch runs (down to {low:.3g}){near}"
                )


def near_zero(alg: BatchAlgebra, plan: Plan[Any, Any], t: int) -> BoolArray:
    """Per run: whether a budget of slot ``t``'s plan (dissimilarity or publication, any class)
    lies within the comparison tolerance of 0 but above the rounding of an exact 0
    (`near_zero_floor`): a budget the batch takes for 0 that may be positive in exact arithmetic
    (module docstring, "The limit of the tolerance")."""
    floor = near_zero_floor(alg, t)
    out: BoolArray | None = None
    for v in (*plan.dissimilarity, *plan.publication):
        a = np.abs(v)
        if a.min() > alg.atol or a.max() <= floor:  # clear of the band in every run
            continue
        hit = (a > floor) & (a <= alg.atol)
        out = hit if out is None else out | hit
    if out is None:
        return np.zeros(alg.runs, dtype=np.bool_)
    found: BoolArray = alg.runs_of(out)
    return found


def near_zero_floor(alg: BatchAlgebra, t: int) -> float:
    """What the doubles make of an exact 0 stays below this at slot ``t``: ``2^-44`` of the
    largest budget up to slot 1,024, growing in proportion to t after (a window sum is a
    difference of running sums from slot 1; prefix drift measured: about 2^-45.7 of the budget
    at slot 1,000, 2^-43.6 at 10,000, 2^-39.6 at 100,000)."""
    return alg.atol * NEAR_ZERO_FLOOR * max(1.0, t / 1024)


NOISES: Final = ("fast", "numpy")


def laplace(
    rng: np.random.Generator, noise: str, scale: FloatArray, shape: tuple[int, ...]
) -> FloatArray:
    """Laplace noise of the given scales (broadcast to ``shape``): ``numpy`` draws with
    ``Generator.laplace``, as the exact runner does (a batch of one run then draws exactly its
    numbers); ``fast`` as the difference of two standard exponential draws (numpy's ziggurat),
    which is Laplace(0, 1) distributed and takes about half the time."""
    if noise == "numpy":
        out: FloatArray = rng.laplace(0.0, scale, size=shape)
        return out
    std = rng.standard_exponential(shape)
    std -= rng.standard_exponential(shape)
    std *= scale
    return std


def batch_result(
    allocator: str,
    variant: str,
    runs: int,
    slots: int,
    seed: int,
    origin: str,
    noise_origin: str,
    users: int,
    fields: dict[str, Any],
) -> BatchResult:
    """A `BatchResult` from a batch loop's sums (``fields``: per run ``sq_err``, ``abs_err``,
    ``published``, ``nullified``, ``near_zero``; ``truth``, and ``releases`` or None), the
    metrics computed alike for 001's path (`run_batch`) and the lane paths (`batch_streamdp`)."""
    d = fields["truth"].shape[1]
    amre = fields["sq_err"] / (slots * d)
    abs_err, rel = fields["abs_err"], fields["releases"]
    return BatchResult(
        allocator=allocator,
        variant=variant,
        runs=runs,
        slots=slots,
        seed=seed,
        stream_origin=origin,
        noise_origin=noise_origin,
        users=users,
        amre=amre,
        amse=amre / (users * users) if users else amre * np.nan,
        mae=abs_err / (slots * d) / users if users else abs_err * np.nan,
        published=fields["published"],
        skipped=slots - fields["published"] - fields["nullified"],
        nullified=fields["nullified"],
        near_zero=fields["near_zero"],
        truth=fields["truth"],
        releases=None if rel is None else rel.transpose(2, 0, 1),
    )
