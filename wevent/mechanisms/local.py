"""The data path of the local allocators: frequency oracles, dissimilarity and error, the pool.

Budget division (002 Algorithms 1-2; 001 Section 6.2's PLBU), per slot:

1. the budget kernel plans each class's dissimilarity and publication budgets;
2. every user reports with the dissimilarity budget (charged per class first); the server
   estimates the frequencies and the dissimilarity of 002 Eq. 4,
   ``dis = mean((c_bar - r_l)^2) - mean(Var c_bar)``;
3. unless nullified or forced, publish iff ``dis > err`` with ``err`` the average variance of an
   estimate made with the publication budgets (002 Eq. 6);
4. on publication every user reports again with the publication budget.

Population division (002 Algorithms 3-4; 000 Algorithms 3-6), per slot:

1. the pool recycles the users drawn ``R`` slots ago; the population kernel says how many users
   to draw;
2. ``z`` users are drawn for the dissimilarity; each is charged their class's per-report budget
   (the full eps, or eps_i / k_i after OPS) before reporting;
3. the publication error is 002 Eq. 6 (one budget) or 000 Eq. 7 (personalized: sampling plus
   PLDP variance); the PLPD+/PLPA+ family draws the publication users first and uses their
   budget mix (000 Algorithm 3 line 14), putting them back untouched if the slot does not publish;
4. on publication the drawn users are charged and report.

One budget reports through the chosen oracle (GRR or OUE); several budgets through the
personalized frequency oracle (GRR per budget, 000 Eq. 1), optionally enhanced by PUE (000
Algorithm 2). Everything is simulated on histograms: a class's reporters' values are drawn without
replacement from the class's true histogram (multivariate hypergeometric), which is the
distribution of the values of a uniform sample of its users.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.spending import Spender, batched, spend_all
from wevent.mechanisms.allocators import status_of
from wevent.mechanisms.allocators.kernel import Plan
from wevent.mechanisms.allocators.population import Draw, PopulationKernel, PopulationSetup
from wevent.mechanisms.central import KernelRunner, SlotRecord
from wevent.mechanisms.oracles import (
    GRR,
    OUE,
    FrequencyOracle,
    charge_reporters,
    reporters_charge,
)
from wevent.mechanisms.personalized import PersonalizedFO, sampling_variance
from wevent.mechanisms.pool import UserPool
from wevent.mechanisms.pue import pue
from wevent.mechanisms.streams import PerUserStream, Stream

__all__ = [
    "POST_PROCESSING",
    "Estimate",
    "LocalBudgetRunner",
    "PopulationRunner",
    "ReleaseOptions",
    "Reporters",
    "pooled",
    "population_arrays",
    "project_simplex",
    "report",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ORACLES = ("grr", "oue")
POST_PROCESSING: Final = ("none", "clip", "simplex")


@dataclass(frozen=True)
class Estimate:
    """Frequencies estimated from one round of reports, and their average variance per value."""

    freq: FloatArray
    variance: float


def project_simplex(v: FloatArray) -> FloatArray:
    """The Euclidean projection of ``v`` onto the probability simplex {x >= 0, sum x = 1}: the
    closest frequency vector (Norm-Sub of Wang et al., NDSS 2020; computed by sorting, as in
    Duchi et al., ICML 2008): subtract one constant from every value and clip at 0, the constant
    chosen so that the result sums to 1. ``v`` must be finite and non-empty."""
    if v.size == 0 or not np.isfinite(v).all():
        raise BudgetError("the simplex projection needs a non-empty vector of finite values")
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1.0
    rank = np.arange(1, len(u) + 1)
    positive = np.flatnonzero(u - cumulative / rank > 0)
    if len(positive) == 0:  # the largest value dwarfs the rest beyond double precision
        out_max: FloatArray = np.zeros_like(v)
        out_max[int(np.argmax(v))] = 1.0
        return out_max
    rho = int(positive[-1])
    theta = cumulative[rho] / (rho + 1)
    out: FloatArray = np.maximum(v - theta, 0.0)
    return out


def _usable(variance: float) -> bool:
    return math.isfinite(variance) and variance > 0


def pooled(first: Estimate, second: Estimate) -> Estimate:
    """Two independent unbiased estimates of the same frequencies, weighted by the inverse of
    their average variances: unbiased again, with variance ``v1 v2 / (v1 + v2)``, below both. An
    estimate whose variance is not a positive finite number is not used (the other is returned;
    ``second`` when neither is usable)."""
    if first.freq.shape != second.freq.shape:
        raise BudgetError(
            f"cannot pool estimates of {len(first.freq)} and {len(second.freq)} values"
        )
    v1, v2 = first.variance, second.variance
    if not _usable(v1) or not _usable(v2):
        return first if _usable(v1) and not _usable(v2) else second
    freq: FloatArray = (v2 * first.freq + v1 * second.freq) / (v1 + v2)
    return Estimate(freq, v1 * v2 / (v1 + v2))


@dataclass(frozen=True)
class ReleaseOptions:
    """How a local allocator turns the reports it has charged into releases. None of these costs
    privacy: each is a function of reports already charged, or a publish/skip choice the budget
    kernel already covers (its proofs hold for every sequence of decisions), so with the same
    decisions a run spends exactly what it spends without them (tests/test_release_options.py).

    * ``post``: ``none`` releases the oracle's unbiased estimate (the papers); ``clip`` sets its
      negative values to 0; ``simplex`` projects it onto the probability simplex
      (`project_simplex`). The post-processed release is the one later slots measure their
      dissimilarity against, and the one approximated on skipped slots.
    * ``project_test``: the publication test's own estimate is post-processed too before its
      distance to the last release is taken (WEventPLDPCode projects it; the variance
      subtracted stays the oracle's, benchmarks/peer/utility/README.md). A projected estimate
      lies within ``2/d`` of any frequency vector (mean squared distance), so when the
      dissimilarity round's variance per value is ``2/d`` or more the test never publishes;
      the run's summary counts its publications.
    * ``pool``: at a publishing slot, the release also uses the slot's dissimilarity reports,
      weighted by inverse variance (`pooled`). The reports are different users' (population
      division) or the same users' independent second reports (budget division), all charged
      before they are drawn. The publication test stays the papers' (002 Eq. 6, the
      publication sample's error alone).
    * ``first``: slot 1 publishes whenever its publication budget allows, whatever the test says
      (a choice made before any data is seen).

    ``pool``, ``project_test`` and ``first`` act on the publication test and so do nothing for
    the allocators without one (lbu, lsp, lpu, plbu publish on a schedule). The proofs of the
    sound kernels hold for every decision sequence; an unsound variant (``published`` where
    docs/peers.md or docs/deviations.md says so) is held to its windows by the runtime guard, as
    without the options.
    """

    post: str = "none"
    pool: bool = False
    first: bool = False
    project_test: bool = False

    def __post_init__(self) -> None:
        if self.post not in POST_PROCESSING:
            raise BudgetError(
                f"unknown post-processing {self.post!r} (expected {', '.join(POST_PROCESSING)})"
            )
        if self.project_test and self.post == "none":
            raise BudgetError("project_test post-processes the test's estimate: choose a post")

    @property
    def default(self) -> bool:
        return self == ReleaseOptions()

    def describe(self) -> str:
        """``post=simplex, project-test, pool, first``; ``papers`` for the defaults."""
        parts = [] if self.post == "none" else [f"post={self.post}"]
        flags = (("project-test", self.project_test), ("pool", self.pool), ("first", self.first))
        parts += [name for name, on in flags if on]
        return ", ".join(parts) or "papers"

    def finish(self, freq: FloatArray) -> FloatArray:
        """The release made of the estimate ``freq``."""
        if self.post == "clip":
            out: FloatArray = np.maximum(freq, 0.0)
            return out
        if self.post == "simplex":
            return project_simplex(freq)
        return freq

    def distance(self, est: Estimate, last: FloatArray) -> float:
        """The dissimilarity (002 Eq. 4) of the estimate ``est`` to ``last``; of ``est``
        post-processed with ``project_test``."""
        if not self.project_test:
            return dissimilarity(est, last)
        return dissimilarity(Estimate(self.finish(est.freq), est.variance), last)

    def release(self, pub: Estimate, dissimilarity: Estimate | None) -> FloatArray:
        """The published frequencies: pooled when asked, then post-processed."""
        if self.pool and dissimilarity is not None:
            pub = pooled(dissimilarity, pub)
        return self.finish(pub.freq)


def _single(oracle: str, d: int, eps: Budget) -> FrequencyOracle:
    if oracle == "oue":
        return OUE.for_budget(d, eps)
    if oracle == "grr":
        return GRR.for_budget(d, eps)
    raise BudgetError(f"unknown oracle {oracle!r} (expected grr or oue)")


def _oracles(
    budgets: Sequence[Fraction], oracle: str, d: int
) -> tuple[list[Budget], dict[Budget, FrequencyOracle]]:
    """The distinct positive budgets (ascending) and one oracle per budget."""
    distinct = sorted({Budget(b) for b in budgets if b > 0})
    if len(distinct) == 1:
        return distinct, {distinct[0]: _single(oracle, d, distinct[0])}
    return distinct, {b: GRR.for_budget(d, b) for b in distinct}


def error_for(budgets: Sequence[Fraction], reporters: Sequence[int], d: int, oracle: str) -> float:
    """The average variance per value of an estimate from ``reporters[c]`` users of class c
    reporting with ``budgets[c]`` (002 Eq. 6 for one budget, 000 Eq. 1-2 for several)."""
    by_budget: dict[Budget, int] = {}
    for b, k in zip(budgets, reporters, strict=True):
        if b > 0 and k > 0:
            by_budget[Budget(b)] = by_budget.get(Budget(b), 0) + k
    if not by_budget:
        return math.inf
    if len(by_budget) == 1:
        ((b, k),) = by_budget.items()
        return _single(oracle, d, b).average_variance(k)
    return PersonalizedFO.for_budgets(d, by_budget).total_variance() / d


def report(
    budgets: Sequence[Fraction],
    counts: IntArray,
    d: int,
    oracle: str,
    rng: np.random.Generator,
    *,
    enhance: bool = False,
) -> Estimate | None:
    """Perturb the true value counts ``counts[c]`` of each class's reporters with the class's
    budget and estimate the frequencies (aggregate path). ``enhance`` applies PUE (000
    Algorithm 2) across the budget groups. None when nobody reports with a positive budget."""
    distinct, oracles = _oracles(budgets, oracle, d)
    if not distinct:
        return None
    grouped = {b: np.zeros(d, np.int64) for b in distinct}
    for b, row in zip(budgets, counts, strict=True):
        if b > 0:
            grouped[Budget(b)] += row
    sizes = [int(grouped[b].sum()) for b in distinct]
    live = [i for i, s in enumerate(sizes) if s > 0]
    if not live:
        return None
    distinct = [distinct[i] for i in live]
    sizes = [sizes[i] for i in live]
    if len(distinct) == 1:
        o = oracles[distinct[0]]
        hist = o.perturb_counts(grouped[distinct[0]], rng)
        return Estimate(o.estimate(hist, sizes[0]), o.average_variance(sizes[0]))
    grrs = [GRR.for_budget(d, b) for b in distinct]
    pfo = PersonalizedFO(d, tuple(grrs), tuple(sizes))
    hists = pfo.perturb_counts([grouped[b] for b in distinct], rng)
    if enhance:
        hists = pue(grrs, hists, rng)
        pfo = PersonalizedFO(d, tuple(grrs), tuple(int(h.sum()) for h in hists))
    return Estimate(pfo.estimate(hists), pfo.total_variance() / d)


def population_arrays(population: Population) -> tuple[tuple[str, ...], IntArray]:
    """The users in the population's canonical (class) order and each one's class index: the
    order draws index into, so drawn users are charged by index (`Population.users`)."""
    return population.users, population.class_index_array()


def dissimilarity(estimate: Estimate, last: FloatArray) -> float:
    """002 Eq. 4 (000 Algorithm 5 line 8): the squared distance to the last release minus the
    estimate's own average variance, an unbiased estimate of the true squared distance."""
    return float(np.mean((estimate.freq - last) ** 2)) - estimate.variance


def _evidence(oracle: str, d: int, eps: Fraction, personalized: bool) -> Any:
    if personalized:
        return GRR.for_budget(d, Budget(eps)).evidence
    return _single(oracle, d, Budget(eps)).evidence


@dataclass
class LocalBudgetRunner(KernelRunner):
    """Drives a budget kernel with every user reporting through a frequency oracle."""

    oracle: str = "grr"
    options: ReleaseOptions = field(default_factory=ReleaseOptions)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._n = sum(self.sizes)

    def _charge(self, t: int, budgets: Sequence[Fraction], part: str) -> None:
        distinct = {Budget(b) for b in budgets if b > 0}
        personalized = len(distinct) > 1
        with batched(self.spender):  # one durable commit for the step's charges
            self._charge_each(t, budgets, part, personalized)

    def _charge_each(
        self, t: int, budgets: Sequence[Fraction], part: str, personalized: bool
    ) -> None:
        d = self.stream.domain
        charges = [
            reporters_charge(
                self.spender,
                t,
                Budget(b),
                _evidence(self.oracle, d, b, personalized),
                reports=self.sizes[c],
                group=self.groups[c],
                part=part,
                mechanism=self.mechanism,
            )
            for c, b in enumerate(budgets)
            if b > 0 and self.sizes[c] > 0
        ]
        # every class's charge in one call (the guard takes a class-level slot in one pass)
        spend_all(self.spender, [c for c in charges if c is not None])

    def _round(
        self, t: int, budgets: Sequence[Fraction], hist: IntArray, part: str
    ) -> Estimate | None:
        live = [b if self.sizes[c] > 0 else Fraction(0) for c, b in enumerate(budgets)]
        if not any(b > 0 for b in live):
            return None
        self._charge(t, live, part)
        return report(live, hist, self.stream.domain, self.oracle, self.noise_rng)

    def step(self) -> SlotRecord:
        t = self.slot + 1
        hist = self.stream.histograms(t, self.data_rng)
        truth = hist.sum(axis=0).astype(np.int64)
        plan: Plan[Fraction, bool] = self.kernel.plan(self._state, t)
        self._check_signs(t, plan)
        est = self._round(t, plan.dissimilarity, hist, "dissimilarity")
        decision = False
        if not plan.forced and not plan.nullified:
            err = error_for(plan.publication, self.sizes, self.stream.domain, self.oracle)
            decision = (self.options.first and t == 1 and math.isfinite(err)) or (
                est is not None and self.options.distance(est, self.last_release) > err
            )
        publish = plan.forced or (not plan.nullified and decision)
        if publish:
            pub = self._round(t, plan.publication, hist, "publication")
            if pub is not None:
                self.last_release = self.options.release(pub, est)
        self._state = self.kernel.step(self._state, t, plan, publish)
        self.slot = t
        return SlotRecord(t, status_of(plan, decision), self.last_release * self._n, truth)


class Reporters:
    """The users of a population allocator who can report (a positive per-report budget), the
    pool they are drawn from, and the charging of drawn users: shared by `PopulationRunner` and
    `wevent trace`, so a trace draws exactly as a run does.

    ``users[i]`` is the id of user i and ``class_of[i]`` its class index; draws return user
    indices."""

    def __init__(
        self,
        users: Sequence[str],
        class_of: IntArray,
        budgets: Sequence[Fraction],
        recycle: int,
        rng: np.random.Generator,
    ) -> None:
        self.users, self.class_of, self.budgets = users, class_of, budgets
        can_report = np.array([b > 0 for b in budgets], dtype=bool)
        self.eligible: IntArray = np.flatnonzero(can_report[class_of]).astype(np.int64)
        self._position = np.full(len(users), -1, np.int64)
        self._position[self.eligible] = np.arange(len(self.eligible))
        self.pool = UserPool(len(self.eligible), recycle, rng)

    def draw(self, k: int, what: str) -> IntArray:
        out: IntArray = self.eligible[self.pool.draw(k, what=what)]
        return out

    def putback(self, idx: IntArray) -> None:
        self.pool.putback(self._position[idx])

    def charge(
        self,
        spender: Spender,
        t: int,
        idx: IntArray,
        part: str,
        mechanism: str,
        evidence: Callable[[Fraction], Any] | None = None,
    ) -> None:
        """Charge every drawn user their class's per-report budget: one group charge per
        distinct budget (classes with the same budget share it; a charge means the same amount
        to every member), defined by index into ``users``, so there is no per-user work when that
        is the population's canonical order."""
        by_budget: dict[Budget, list[int]] = {}
        for c, b in enumerate(self.budgets):
            if b > 0:
                by_budget.setdefault(Budget(b), []).append(c)
        drawn_classes = self.class_of[idx]
        for b, classes in sorted(by_budget.items()):
            wanted = np.zeros(len(self.budgets), bool)
            wanted[classes] = True
            members = idx[wanted[drawn_classes]]
            if len(members) == 0:
                continue
            charge_reporters(
                spender,
                t,
                b,
                None if evidence is None else evidence(b),
                reports=len(members),
                table=self.users,
                indices=members,
                part=part,
                mechanism=mechanism,
            )


@dataclass
class PopulationRunner:
    """Drives a population kernel: users drawn from the pool report through the oracle.

    ``users[i]`` is the id of user i and ``class_of[i]`` its class index; ``step()`` runs the
    next slot and returns its record together with the users drawn per part."""

    setup: PopulationSetup
    kernel: PopulationKernel[Fraction, bool]
    spender: Spender
    users: Sequence[str]
    class_of: IntArray
    stream: Stream
    data_rng: np.random.Generator
    noise_rng: np.random.Generator
    pool_rng: np.random.Generator
    # The reporters' values of a synthetic stream: a generator of their own, so the stream
    # (``data_rng``) is the same whatever the allocator draws, as for every other runner.
    value_rng: np.random.Generator
    mechanism: str
    oracle: str = "grr"
    options: ReleaseOptions = field(default_factory=ReleaseOptions)
    slot: int = 0
    last_release: FloatArray = field(init=False)
    pool: UserPool = field(init=False)
    reporters: Reporters = field(init=False)
    drawn: dict[str, IntArray] = field(init=False)
    _state: Any = field(init=False)

    def __post_init__(self) -> None:
        self.last_release = np.zeros(self.stream.domain, dtype=np.float64)
        self._state = self.kernel.start()
        self.n_classes = len(self.setup.budgets)
        self.reporters = Reporters(
            self.users, self.class_of, self.setup.budgets, self.setup.config.recycle, self.pool_rng
        )
        if len(self.reporters.eligible) != self.setup.config.n:
            raise BudgetError("the population does not match the allocator's set-up")
        self.pool = self.reporters.pool
        self._class_sizes: IntArray = self._counts(self.reporters.eligible)
        self._codes: IntArray | None = None
        if isinstance(self.stream, PerUserStream):
            self._codes = self.stream.user_codes(self.users)
        self.drawn = {}

    def _counts(self, idx: IntArray) -> IntArray:
        out: IntArray = np.bincount(self.class_of[idx], minlength=self.n_classes).astype(np.int64)
        return out

    def _values(self, t: int, idx: IntArray, remaining: IntArray) -> IntArray:
        """Per class, the value counts of the drawn users ``idx``.

        A stream with per-user values (a CSV) gives the drawn users' own values; a synthetic
        stream has no per-user data, so the values are drawn without replacement from the
        class's values not yet drawn this slot (``remaining`` is updated)."""
        d = self.stream.domain
        out = np.zeros_like(remaining)
        if self._codes is not None:
            assert isinstance(self.stream, PerUserStream)
            vals = self.stream.user_values(t, self._codes[idx])
            missing = np.flatnonzero(vals < 0)
            if len(missing):
                raise BudgetError(
                    f"slot {t}: user {self.users[int(idx[missing[0]])]!r} has no value in the "
                    "stream; population allocators need every user's value at every slot"
                )
            np.add.at(out, (self.class_of[idx], vals), 1)
            return out
        for c, k in enumerate(self._counts(idx).tolist()):
            if k:
                out[c] = self.value_rng.multivariate_hypergeometric(remaining[c], k)
        remaining -= out
        assert out.shape[1] == d
        return out

    def _charge(self, t: int, idx: IntArray, part: str) -> None:
        d, personalized = self.stream.domain, self.setup.personalized
        with batched(self.spender):  # one durable commit for the step's charges
            self.reporters.charge(
                self.spender,
                t,
                idx,
                part,
                self.mechanism,
                lambda b: _evidence(self.oracle, d, b, personalized),
            )

    def _report(self, values: IntArray) -> Estimate | None:
        d, setup = self.stream.domain, self.setup
        return report(setup.budgets, values, d, self.oracle, self.noise_rng, enhance=setup.pue)

    def _error(self, per_class: IntArray, k: int) -> float:
        """The publication error with ``k`` reporters of mix ``per_class``: 002 Eq. 6 for one
        budget; 000 Eq. 7 (sampling + PLDP variance) for the personalized allocators."""
        d = self.stream.domain
        if k <= 0:
            return math.inf
        if not self.setup.personalized:
            return _single(self.oracle, d, Budget(self.setup.budgets[0])).average_variance(k)
        by_budget: dict[Budget, int] = {}
        for b, m in zip(self.setup.budgets, per_class.tolist(), strict=True):
            if m > 0:
                by_budget[Budget(b)] = by_budget.get(Budget(b), 0) + m
        pfo = PersonalizedFO.for_budgets(d, by_budget)
        n = len(self.users)
        smpl = sampling_variance(n, k) if n >= 2 else 0.0
        return (smpl + pfo.total_variance(k)) / d

    def step(self) -> SlotRecord:
        t = self.slot + 1
        self.pool.release(t)
        hist = self.stream.histograms(t, self.data_rng)
        truth = hist.sum(axis=0).astype(np.int64)
        remaining = hist.astype(np.int64).copy()
        draw: Draw[Fraction, bool] = self.kernel.plan(self._state, t)
        self.drawn = {}
        est: Estimate | None = None
        z = int(draw.dissimilarity)
        if z > 0:
            idx = self.reporters.draw(z, "dissimilarity")
            values = self._values(t, idx, remaining)  # checked before anyone is charged
            self._charge(t, idx, "dissimilarity")
            self.drawn["dissimilarity"] = idx
            est = self._report(values)
        k = int(draw.publication)
        decision = False
        pub_idx: IntArray | None = None
        if not draw.forced and not draw.nullified and k > 0:
            if self.setup.ops is not None:  # 000 Algorithm 3 line 14: draw before deciding
                pub_idx = self.reporters.draw(k, "publication")
                mix = self._counts(pub_idx)
            else:
                mix = self._class_sizes
            err = self._error(mix, k)
            decision = (self.options.first and t == 1) or (
                est is not None and self.options.distance(est, self.last_release) > err
            )
            if not decision and pub_idx is not None:
                self.reporters.putback(pub_idx)
                pub_idx = None
        publish = bool(draw.forced) or (not draw.nullified and decision)
        if publish and k > 0:
            if pub_idx is None:
                pub_idx = self.reporters.draw(k, "publication")
            values = self._values(t, pub_idx, remaining)
            self._charge(t, pub_idx, "publication")
            self.drawn["publication"] = pub_idx
            pub = self._report(values)
            if pub is not None:
                self.last_release = self.options.release(pub, est)
        self._state = self.kernel.step(self._state, t, draw, publish)
        self.slot = t
        status = "published" if publish else ("nullified" if draw.nullified else "skipped")
        return SlotRecord(t, status, self.last_release * len(self.users), truth)
