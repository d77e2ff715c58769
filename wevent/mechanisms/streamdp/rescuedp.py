"""RescueDP (Wang et al., 2016), as streamdp-benchmark's ``RescueDP_MD`` runs it: adaptive
sampling by a PID controller, adaptive budget allocation, dynamic grouping, Laplace perturbation
and a Kalman filter (read through streamdp-benchmark's code, ``src/mechanisms/RescueDP_MD.java``;
the paper is not among this project's).

Budget (the kernel, `RescueKernel`). At a slot that publishes, ``I`` slots after the previous
publication, the code's ``adaptive_budget_allocation`` spends

    e = min(p(I) * room, eps / 5),   p(I) = min(phi * ln(I + 1), 3/5),   phi = 1/5,

where ``room = eps - (what slots [t-w+1, t-1] spent)`` (the code's ``eps_remaining``: ``run``
drops ``used_budget[t-w]`` from the window sum at every slot, ``publish`` adds what it spends).
Slots that do not publish spend nothing; there is no dissimilarity budget (the PID schedule reads
released values only). The kernel reads ``I = t - l`` (``l`` the last publication slot, 0 before
any, so slot 1 has ``I = 1``: the code's initial interval) and the window's spends: both are
functions of the publish/skip history.

``ln`` is not in the `Algebra`. For ``I >= 20``, ``ln(I + 1) / 5 > 3/5`` and ``p`` is the cap
3/5 exactly; for ``I = 1 .. 19`` the kernel uses `LOG_SHARES`, ``ln(I + 1) / 5`` rounded *down*
to a multiple of 10^-6 (computed with 40 significant decimal digits, so the rounding direction is
certain). A smaller ``p`` spends less, and whatever ``p`` is in ``[0, 3/5]``, ``e <= 3/5 * room``:
the slot leaves two fifths of the room free, so every window of w slots spends at most eps
(below: the window bound). The budget is exactly what is charged and is data-independent.

Variants. ``published`` is the rule above on the exact room: every publication multiplies the
room by a table entry, so exact budgets gain about six decimal digits of denominator per
publication and a long run slows down and writes long numbers to its ledger. ``sound`` (the
default, and the one to run) first rounds the room down to ``BITS`` = 8 bits after its leading one
(``eps 2^-k (1 + m / 256)``, at most 0.4 % below it), through comparisons of budgets with
budgets (the room times powers of 2 against eps and its multiples by constants: no division, so a
proof stays in linear real arithmetic; a floor would bring in integers, which Z3 handles slowly
here, and a double-precision run compares like with like, `RescueKernel._round_room`); budgets
then keep denominators of the form ``2^a 5^6`` times eps's. Both are sound (a
smaller room spends less); neither is the code's doubles, which the kernel cannot see.

Window bound (one class ``(w, eps)``, every publish/skip sequence). Let ``S(t)`` be the spend in
``[t-w+1, t]``. If every earlier window holds at most eps, then ``room(t) = eps - S'(t) >= 0``
with ``S'(t)`` the spend of ``[t-w+1, t-1]`` (a part of the window ending at t - 1), and slot t
spends ``0 <= e <= 3/5 * room(t) <= room(t)`` (the sound variant spends p(I) of a smaller room),
so ``S(t) = S'(t) + e <= eps``. By induction on t every window holds. The kernel keeps the clip
``room >= 0`` (it never binds in exact arithmetic); `wevent prove allocator rescuedp` checks the
bound with Z3 on this code.

Departures from the code (all on the data side but the first three):

* the room rounded down (the sound variant, above);
* the code spends ``phi * ln(I + 1)`` with ``I`` the PID controller's *real* interval, of which
  the slots between publications are the integer part; the kernel sees slots only, so it uses
  the integer gap (``ln`` is increasing: it spends no more than the code) and the rounded-down
  table above (doubles there, exact rationals here);
* the code keeps one schedule and one budget per histogram cell (location); wevent's kernel has
  one budget per slot for the whole histogram (a histogram's cells are disjoint: one Laplace per
  cell, or per group of cells, at the slot's budget is eps-DP for the whole histogram). So one
  PID controller runs for the histogram: its update ``I + theta (1 - x)`` takes for ``x`` the
  mean over cells of the code's per-cell ``(delta_j / lambda_r)^2`` (the mean of the d updates
  the code would make from the same interval), and every cell publishes at the same slots;
* the code's ``lambda_r`` is ``1 / room`` of the slot after a publication (its
  ``USE_LAMBDA_R_PAPER``). A data path does not know eps or w; it reads ``room`` from the
  publication scale the runner offers at that slot: there ``I = 1``, the budget is
  ``LOG_SHARES[1] * room`` (below eps / 5; the sound variant's rounded room, within 0.4 % of
  it), so ``lambda_r = LOG_SHARES[1] * scale``;
* Kalman filter: the code sets the process variance ``q`` of each cell to the variance of the
  cell's *raw* series over the whole stream (data read outside any noisy query, future slots
  included: not private); here ``q`` is the variance of the cell's noisy answers so far less
  their mean Laplace noise variance, never below 0. The
  code's measurement variance ``r = (w / eps)^2`` is the squared scale of Uniform's budget; here
  it is the squared scale of the publication's own noise;
* grouped cells: the code's filter reads the cell's entry of the current release before it is
  written (a zero) instead of the group's noisy average; here the filter takes the group's
  noisy average, as the comment in the code says it means to;
* the code's optional truncation (``TRUNCATE``, false by default) is left out.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from typing import Any, Final, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from wevent.mechanisms.allocators.algebra import Algebra, vmax, vmin
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.fixed import FixedState
from wevent.mechanisms.allocators.kernel import (
    VARIANTS,
    ClassReq,
    FixedClass,
    Kernel,
    Plan,
    check_variant,
    uniform_class,
)

__all__ = [
    "BITS",
    "E_MAX",
    "LOG_SHARES",
    "P_MAX",
    "SPECS",
    "RescueKernel",
    "RescuePath",
    "log_share",
]

V = TypeVar("V")
B = TypeVar("B")
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NAME: Final = "rescuedp"
PHI: Final = Fraction(1, 5)  # the code's phi = 0.2
P_MAX: Final = Fraction(3, 5)  # the code's p_max = 0.6
E_MAX: Final = Fraction(1, 5)  # the code's e_max = eps / 5, as a fraction of eps
_DIGITS: Final = 10**6  # the table's resolution
BITS: Final = 8  # a budget is eps 2^-k (1 + m 2^-BITS), rounded down: at most 2^-BITS lost
_SHIFTS: Final = (32, 16, 8, 4, 2, 1)  # the exponent's binary search (k <= 64)
_CAP_FROM: Final = 20  # ln(21) / 5 > 3/5 >= ln(20) / 5: from I = 20 on, p is the cap


def log_share(interval: int) -> Fraction:
    """``p(I) = min(ln(I + 1) / 5, 3/5)``, the ln part rounded down to a multiple of 10^-6.

    40 significant digits put ``ln(I + 1) / 5 * 10^6`` within 10^-30 of its value; it is not
    within that distance of an integer for these I (checked by the tests against a 60-digit
    evaluation), so the floor is that of the true value."""
    if interval < 1:
        raise ValueError(f"an interval is at least one slot, got {interval}")
    if interval >= _CAP_FROM:
        return P_MAX
    with localcontext() as ctx:
        ctx.prec = 40
        scaled = Decimal(interval + 1).ln() * Decimal(PHI.numerator) / PHI.denominator * _DIGITS
        floor = int(scaled.to_integral_value(rounding=ROUND_FLOOR))
    return min(Fraction(floor, _DIGITS), P_MAX)


# p(I) for I = 1 .. 19 (index I; index 0 unused, never read: I >= 1).
LOG_SHARES: Final = (Fraction(0), *(log_share(i) for i in range(1, _CAP_FROM)))


class RescueKernel(Generic[V, B]):
    """RescueDP's budget rule (module docstring): at a publication ``min(p(I) room, eps / 5)``,
    nothing otherwise; never nullifies, never forces (the data path's PID schedule decides)."""

    def __init__(
        self, alg: Algebra[V, B], classes: Sequence[ClassReq[V]], variant: str = "sound"
    ) -> None:
        check_variant(NAME, variant, VARIANTS)
        self.name = NAME
        self.variant = variant
        self.alg = alg
        self.classes: tuple[ClassReq[V], ...] = tuple(classes)
        one = uniform_class(classes, alg, NAME)  # not personalized: (max w, min eps) for all
        self.served: tuple[FixedClass[V], ...] = tuple(one for _ in self.classes)
        self._keep = one.w

    def start(self) -> FixedState[V]:
        # FixedState: the spends of the last w slots, the last publication slot (0: none) and
        # its budget; the shape `wevent prove --unbounded` builds symbolic states of.
        return FixedState.empty(self.alg, len(self.served), self._keep)

    def induction_schedule(self) -> tuple[int, int]:
        """For `wevent prove --unbounded`: `_share`'s chain reads the slot number up to
        ``_CAP_FROM`` (from there on it holds every entry of the table), so the induction's
        steps start there."""
        return _CAP_FROM, 1

    def _share(self, room: V, gap: V, t: int) -> V:
        """``p(I) * room`` for ``I = gap``: a select chain over the table. In a run ``1 <= gap
        <= t`` (the last publication is a slot before t, or 0), so the chain starts at ``p(t)``
        (branching on the slot number only); a gap below 1 reads p(1)."""
        alg = self.alg
        top = min(t, _CAP_FROM)
        out = alg.scale(room, P_MAX if top == _CAP_FROM else LOG_SHARES[top])
        for i in range(top - 1, 0, -1):
            out = alg.select(alg.le(gap, alg.const(i)), alg.scale(room, LOG_SHARES[i]), out)
        return out

    def _round_down(self, x: V) -> V:
        """``x`` (``0 <= x <= 1``) rounded down to ``BITS`` bits after its leading one: the
        largest ``2^-k (1 + m 2^-BITS)`` not above it (``1 <= k <= 64``), or 0 below
        ``2^-64``; 1 stays 1. `_round_room` with eps = 1."""
        return self._round_room(x, self.alg.const(1))

    def _round_room(self, room: V, eps: V) -> V:
        """``room`` (``0 <= room <= eps``, ``eps > 0``) rounded down to ``BITS`` bits after its
        leading one *as a fraction of eps*: ``eps 2^-k (1 + m 2^-BITS)``, the largest such
        budget not above it (``1 <= k <= 64``), or 0 below ``eps 2^-64``; eps stays eps.

        In exact arithmetic this is ``eps * round_down(room / eps)`` (the rounding of the
        module docstring): every comparison of the unitless share ``y`` with a constant
        ``c`` is made as ``c * eps <= y * eps``, the same truth value for ``eps > 0``
        (tests/test_streamdp_rescuedp.py checks the two agree on random rationals). Every
        comparison is between two budgets of about eps's size (a shifted room is compared with
        eps itself, never eps with a shifted-down threshold), so a floating-point run (the
        lane batch, whose comparisons allow an absolute slack in budget units) decides each one
        as the exact run does unless the two sides agree to about 2^-36 of eps; no division,
        and products with constants only (a proof stays in linear real arithmetic): a binary
        search for the exponent, then one bit at a time."""
        alg = self.alg
        y, shifted = room, []
        for s in _SHIFTS:  # y < eps 2^-s (y 2^s < eps): y * 2^s stays below eps
            small = alg.not_(alg.le(eps, alg.scale(y, 2**s)))
            y = alg.select(small, alg.scale(y, 2**s), y)
            shifted.append((s, small))
        normal = alg.scale(y, 2)  # in [eps, 2 eps) unless room < eps 2^-64
        mantissa = eps
        for bit in range(1, BITS + 1):
            longer = alg.add(mantissa, alg.scale(eps, Fraction(1, 2**bit)))
            mantissa = alg.select(alg.le(longer, normal), longer, mantissa)
        out = alg.scale(mantissa, Fraction(1, 2))
        for s, small in reversed(shifted):
            out = alg.select(small, alg.scale(out, Fraction(1, 2**s)), out)
        out = alg.select(alg.le(eps, normal), out, alg.const(0))  # eps / 2 <= y
        return alg.select(alg.le(eps, room), eps, out)  # room = eps stays eps

    def plan(self, state: FixedState[V], t: int) -> Plan[V, B]:
        """The code's ``publish`` (single cell), steps (3)-(4): ``eps_rm = epsilon -
        used_budget_in_this_window``, then ``adaptive_budget_allocation(eps_rm)``."""
        alg = self.alg
        zero = alg.const(0)
        gap = alg.count_sub(alg.const(t), state.last)  # I = t - l
        pubs = []
        for i, c in enumerate(self.served):
            spent = alg.add(
                state.dis[i].total(t - c.w + 1, t - 1), state.pub[i].total(t - c.w + 1, t - 1)
            )
            room = vmax(alg, alg.sub(c.eps, spent), zero)  # the clip never binds (docstring)
            # the room rounded down (a fraction of eps, BITS bits), p(I) of it, capped at eps / 5
            rounded = room
            if self.variant == "sound":
                rounded = self._round_room(room, c.eps)
            pubs.append(vmin(alg, self._share(rounded, gap, t), alg.scale(c.eps, E_MAX)))
        no = alg.truth(False)
        return Plan(no, no, tuple(zero for _ in self.served), tuple(pubs))

    def step(self, state: FixedState[V], t: int, plan: Plan[V, B], published: B) -> FixedState[V]:
        return state.recorded(self.alg, t, plan, published)


# The data path's constants, the code's (RescueDP_MD.java, its fields).
K_P: Final = 0.9  # PID proportional gain
K_I: Final = 0.1  # PID integral gain (K_d = 0: no derivative term)
PI: Final = 3  # feedback errors in the integral term
THETA: Final = 10.0  # the interval's step scale
TAU_1: Final = 30.0  # grouping: a cell predicted above this is published alone; a group's cap
TAU_2: Final = 0.5  # grouping: the least Pearson correlation with the group's pivot
TAU_3: Final = 25.0  # grouping: the largest prediction difference to the pivot
KAPPA: Final = 3  # grouping: releases a prediction averages (and a cell needs before grouping)
P_INIT: Final = 100.0  # the Kalman filter's initial estimate variance


def groups_of(history: Sequence[FloatArray]) -> list[list[int]]:
    """The code's ``performGroupedRelases`` steps 1-7: a partition of the cells from the last
    ``KAPPA`` releases (``history``, oldest first), by post-processing only.

    A cell's prediction is the mean of its last KAPPA releases. Cells predicted above TAU_1 are
    groups of one; the others, sorted by prediction (stable), are grouped greedily: a pivot (the
    smallest left) takes each later cell whose prediction is within TAU_3 of its own and whose
    releases correlate above TAU_2 with its own, while the group's predicted sum is below TAU_1;
    the first cell failing the distance or sum test closes the group."""
    rows = np.asarray(history[-KAPPA:], dtype=np.float64)  # KAPPA x d
    d = rows.shape[1]
    if rows.shape[0] < KAPPA:
        return [[j] for j in range(d)]
    pred = rows.mean(axis=0)
    centred = rows - pred
    var = (centred * centred).sum(axis=0)
    out = [[j] for j in range(d) if pred[j] > TAU_1]
    left = sorted((j for j in range(d) if not pred[j] > TAU_1), key=lambda j: float(pred[j]))
    while left:
        pivot = left.pop(0)
        group, total = [pivot], float(pred[pivot])
        i = 0
        while i < len(left):
            j = left[i]
            if abs(float(pred[pivot] - pred[j])) < TAU_3 and total < TAU_1:
                denom = math.sqrt(float(var[pivot] * var[j]))
                corr = float((centred[:, pivot] * centred[:, j]).sum()) / denom if denom else 0.0
                if corr > TAU_2:  # the code's NaN (a constant series) compares false: skip
                    total += float(pred[j])
                    group.append(j)
                    left.pop(i)
                    continue
                i += 1
            else:
                break
        out.append(group)
    return out


class RescuePath:
    """RescueDP's data path (module docstring): PID-scheduled publications, grouped Laplace
    answers, a Kalman filter per cell, the last release repeated between publications."""

    def __init__(self, domain: int) -> None:
        self.domain = domain
        self.interval = 1.0  # the code's sampleIntervalLength (real), initial 1
        self.next_slot = 1  # the code's nextSamplePoint (slot 1 always publishes)
        self.last_slot = 0
        self.pending = False  # a PID update waits for the next slot's publication scale
        self.published = 0
        self.releases: deque[FloatArray] = deque(maxlen=PI + 1)  # at the last publications
        self.p = np.full(domain, P_INIT)  # Kalman estimate variance per cell
        # Welford's running mean and sum of squares of each cell's noisy answers (for q)
        self._mean = np.zeros(domain)
        self._m2 = np.zeros(domain)
        self._noise = np.zeros(domain)  # the sum of the answers' Laplace noise variances

    def _process_variance(self) -> FloatArray:
        """q per cell: the variance of its noisy answers so far less their mean noise variance
        (the Laplace noise's part of it), never below 0; the code's q is the variance of the
        cell's raw series."""
        n = max(self.published, 1)
        out: FloatArray = np.maximum(self._m2 / n - self._noise / n, 0.0)
        return out

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        """RescueDP measures no dissimilarity (its kernel never funds one); were one funded,
        the mean absolute difference to the last release (sensitivity 1/d) with Laplace(scale)
        would be the answer."""
        return float(np.abs(sampled - last).sum()) / self.domain + float(rng.laplace(0.0, scale))

    def pid_error(self) -> FloatArray:
        """The code's ``pid_error`` per cell: K_P times the last feedback error (the change
        between the last two releases) plus K_I times the mean of the last PI of them."""
        rel = list(self.releases)
        diffs = [np.abs(b - a) for a, b in itertools.pairwise(rel)][-PI:]
        out: FloatArray = K_P * diffs[-1] + K_I * np.mean(diffs, axis=0)
        return out

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        """Publish iff the PID schedule has reached slot t. The first slot asked after a
        publication first sets the next interval (the code's ``next_sampling_interval``):
        ``max(1, I + theta (1 - x))`` with x the mean over cells of ``(delta_j / lambda_r)^2``,
        ``lambda_r = p(1) * scale`` (module docstring)."""
        if self.pending:
            self.pending = False
            lambda_r = float(LOG_SHARES[1]) * scale
            x = float(np.mean((self.pid_error() / lambda_r) ** 2))
            self.interval = max(1.0, self.interval + THETA * (1.0 - x))
            self.next_slot = self.last_slot + int(self.interval)
        return t >= self.next_slot

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        """One Laplace(scale) answer per group of cells (the sum of its counts: a partition,
        sensitivity 1), spread evenly over the group's cells; then, from the second publication
        on, each cell's Kalman filter between its last release and that noisy value."""
        if self.published >= KAPPA:
            groups = groups_of(list(self.releases)[-KAPPA:])
        else:  # the code groups a cell only after KAPPA releases of it
            groups = [[j] for j in range(self.domain)]
        noisy = np.empty(self.domain, dtype=np.float64)
        answers = rng.laplace(0.0, scale, size=len(groups))
        for g, noise in zip(groups, answers, strict=True):
            noisy[g] = (float(sampled[g].sum()) + float(noise)) / len(g)
        n = self.published + 1
        delta = noisy - self._mean
        self._mean = self._mean + delta / n
        self._m2 = self._m2 + delta * (noisy - self._mean)
        sizes = np.empty(self.domain)
        for g in groups:
            sizes[g] = len(g)
        self._noise = self._noise + 2.0 * (scale / sizes) ** 2  # each answer's noise variance
        if self.published == 0:  # the code's first release is not filtered
            release = noisy
        else:
            q = self._process_variance()
            prev = self.releases[-1]
            self.p = self.p + q
            gain = self.p / (self.p + scale * scale)
            release = prev + gain * (noisy - prev)
            self.p = self.p * (1.0 - gain)
        self.releases.append(release)
        self.published = n
        self.last_slot = t
        if n == 1:  # the code's initial interval: the next slot publishes, no PID update
            self.next_slot = t + 1
        else:
            self.pending = True
        out: FloatArray = release.copy()
        return out

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        """The last release; each cell's Kalman estimate variance grows by q (the code's
        predict step at a skipped slot)."""
        if self.published:
            self.p = self.p + self._process_variance()
        return last


def rescue_factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    """The `RescueKernel` over ``classes``."""
    kernel: Kernel[Any, Any, Any] = RescueKernel(alg, classes, variant)
    return kernel


SPECS: Final = (
    AllocatorSpec(
        NAME,
        "fixed",
        "global",
        "min(phi ln(I+1) of the window's remaining budget, eps/5) at PID-scheduled slots "
        "(RescueDP, Wang et al. 2016, as streamdp-benchmark's RescueDP_MD runs it)",
        rescue_factory,
        variants=VARIANTS,
        data_path=RescuePath,
    ),
)
