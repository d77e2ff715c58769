"""The runner that drives a central kernel over a stream, and its default data path.

Per slot (001 Algorithms 2-5, PWSM; Kellaris's BD/BA with one class; a mechanism with a data
path of its own, `wevent.mechanisms.datapath`, replaces steps 2-4's dissimilarity query,
decision rule and release, never the charges):

1. the kernel plans the slot's budgets per requirement class;
2. dissimilarity (001 Algorithm 3, DC): OBS picks a threshold among the classes' dissimilarity
   budgets, SM samples each class's histogram, and the mean absolute difference to the last
   release gets Laplace noise of scale 1 / (d theta); every class is charged first;
3. unless the slot is nullified or forced, publish iff ``dis > sqrt(err)`` with ``err`` the OBS
   error of the publication budgets (001 Algorithm 4 line 7);
4. publication: SM at the OBS threshold of the publication budgets, Laplace noise of scale
   1 / theta per histogram cell (sensitivity 1), every class charged first;
5. the kernel records whether the slot published.

Every charge goes through the `Spender` (the guard) before noise is drawn; a refusal propagates
and nothing more is sampled. Classes with a zero budget are left out of that step (their users are
sampled with probability 0, so leaving them out is the same distribution) and are not charged.
OBS weighs each budget by the number of users holding it (class sizes, 001 Definition 12), not by
data-dependent counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError, format_exact
from wevent.accounting.ledger import Charge
from wevent.accounting.spending import Spender, spend_all
from wevent.errors import WeventError
from wevent.mechanisms.allocators import status_of
from wevent.mechanisms.allocators.kernel import Kernel, Plan, first_negative
from wevent.mechanisms.datapath import DataPath, PwsmPath
from wevent.mechanisms.sampling import SamplingMechanism, obs
from wevent.mechanisms.streams import Stream

__all__ = ["CentralRunner", "InvalidAllocation", "KernelRunner", "SlotRecord", "clear_sm_cache"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class InvalidAllocation(WeventError):
    """The kernel allocated a negative budget (the published dynamic rules can); nothing of the
    slot was charged or sampled."""


@dataclass(frozen=True, slots=True)
class SlotRecord:
    slot: int
    status: str  # "published", "skipped" or "nullified"
    release: FloatArray
    truth: IntArray


@dataclass(frozen=True)
class _SM:
    """SM over the classes with a positive budget: per-class keep evidence and sampling."""

    mech: SamplingMechanism
    classes: tuple[int, ...]
    budgets: tuple[Budget, ...]
    err: float


# _sm's results by the exact budgets, class sizes and sensitivity (as integer pairs: they hash
# fast). Allocators repeat their per-class budgets from slot to slot (a dissimilarity budget is
# the same every slot), and OBS with the certified keep probabilities is most of a small run's
# time; the result is a pure function of the key, so the cache changes no release.
_SM_CACHE: dict[tuple[tuple[int, ...], tuple[int, ...], int, int], _SM | None] = {}


def clear_sm_cache() -> None:
    """Empty the SM cache, so that the next run computes OBS afresh for every budget vector it
    meets (a timed run then pays its own cost, whatever ran before it in the process)."""
    _SM_CACHE.clear()


def _sm(budgets: Sequence[Fraction], sizes: Sequence[int], sensitivity: Fraction) -> _SM | None:
    key = (
        tuple(x for b in budgets for x in (b.numerator, b.denominator)),
        tuple(sizes),
        sensitivity.numerator,
        sensitivity.denominator,
    )
    if key in _SM_CACHE:
        return _SM_CACHE[key]
    live = [c for c, b in enumerate(budgets) if b > 0 and sizes[c] > 0]
    found: _SM | None = None
    if live:
        by_budget: dict[Budget, int] = {}
        for c in live:
            b = Budget(budgets[c])
            by_budget[b] = by_budget.get(b, 0) + sizes[c]
        theta, err = obs(by_budget)
        mech = SamplingMechanism.for_budgets(by_budget, theta, sensitivity=sensitivity)
        found = _SM(mech, tuple(live), tuple(Budget(budgets[c]) for c in live), err)
    if len(_SM_CACHE) >= 4096:
        _SM_CACHE.clear()
    _SM_CACHE[key] = found
    return found


@dataclass
class KernelRunner:
    """What a runner of a budget kernel holds: the kernel, the guard (``spender``), the ledger
    group and size of every requirement class, the stream and the random generators.

    ``groups[c]`` is the ledger group of requirement class c and ``sizes[c]`` its number of users.
    ``step()`` runs the next slot and returns its record; a refused charge raises out of it.
    """

    kernel: Kernel[Fraction, bool, Any]
    spender: Spender
    groups: Sequence[str]
    sizes: Sequence[int]
    stream: Stream
    data_rng: np.random.Generator
    noise_rng: np.random.Generator
    mechanism: str
    slot: int = 0
    last_release: FloatArray = field(init=False)
    _state: Any = field(init=False)

    def __post_init__(self) -> None:
        self.last_release = np.zeros(self.stream.domain, dtype=np.float64)
        self._state = self.kernel.start()

    def _check_signs(self, t: int, plan: Plan[Fraction, bool]) -> None:
        """Refuse a negative budget that would be spent (dissimilarity always, publication unless
        the slot is nullified)."""
        parts = [("dissimilarity", plan.dissimilarity)]
        if not plan.nullified:
            parts.append(("publication", plan.publication))
        bad = first_negative(parts)
        if bad is not None:
            part, c, value = bad
            raise InvalidAllocation(
                f"slot {t}: {self.mechanism} allocated a negative {part} budget "
                f"{format_exact(value)} to {self.groups[c]}"
            )


@dataclass
class CentralRunner(KernelRunner):
    """Drives ``kernel`` over ``stream`` with ``spender`` (the guard) in the loop; ``data_path``
    decides and releases (`wevent.mechanisms.datapath`; None: `PwsmPath`, 001's)."""

    data_path: DataPath | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self._path: DataPath = (
            PwsmPath(self.stream.domain) if self.data_path is None else self.data_path
        )

    def _charge(self, t: int, sm: _SM, part: str) -> None:
        spend_all(  # every class's charge is durable before any noise is drawn (group commit)
            self.spender,
            [
                Charge(
                    t,
                    b,
                    group=self.groups[c],
                    part=part,
                    mechanism=self.mechanism,
                    evidence=sm.mech.evidence(b),
                )
                for c, b in zip(sm.classes, sm.budgets, strict=True)
            ],
        )

    def _sample(self, sm: _SM, hist: IntArray) -> IntArray:
        counts: dict[Budget, IntArray] = {}
        for c, b in zip(sm.classes, sm.budgets, strict=True):
            counts[b] = counts[b] + hist[c] if b in counts else hist[c].astype(np.int64)
        return sm.mech.sample_counts(counts, self.noise_rng)

    def _dissimilarity(self, t: int, plan: Plan[Fraction, bool], hist: IntArray) -> float | None:
        """001 Algorithm 3 (DC)."""
        d = self.stream.domain
        sm = _sm(plan.dissimilarity, self.sizes, Fraction(1, d))
        if sm is None:
            return None
        self._charge(t, sm, "dissimilarity")
        sampled = self._sample(sm, hist)
        return self._path.dissimilarity(
            t, sampled, self.last_release, sm.mech.laplace.scale, self.noise_rng
        )

    def step(self) -> SlotRecord:
        """Run the next slot (a refused charge raises out of it, nothing more is sampled)."""
        try:
            return self._step()
        except (OverflowError, ZeroDivisionError) as exc:
            raise BudgetError(
                f"slot {self.slot + 1}: a budget of this run is outside what the floating-point "
                f"data path can use (noise scale or sampling probability overflows a double: {exc})"
            ) from exc

    def _step(self) -> SlotRecord:
        t = self.slot + 1
        hist = self.stream.histograms(t, self.data_rng)
        truth = hist.sum(axis=0).astype(np.int64)
        plan = self.kernel.plan(self._state, t)
        self._check_signs(t, plan)
        dis = self._dissimilarity(t, plan, hist)
        pub_sm = _sm(plan.publication, self.sizes, Fraction(1))
        decision = False
        if not plan.forced and not plan.nullified and pub_sm is not None:
            decision = self._path.decide(t, dis, pub_sm.err, pub_sm.mech.laplace.scale)
        # The kernel's rule (forced, else not nullified and decided); a publication with no
        # positive budget charges nothing and repeats the last release.
        publish = plan.forced or (not plan.nullified and decision)
        status = status_of(plan, decision)
        if publish and pub_sm is not None:
            self._charge(t, pub_sm, "publication")
            sampled = self._sample(pub_sm, hist)
            self.last_release = self._path.publish(
                t, sampled, pub_sm.mech.laplace.scale, self.noise_rng
            )
        else:
            self.last_release = self._path.approximate(t, self.last_release)
        self._state = self.kernel.step(self._state, t, plan, publish)
        self.slot = t
        return SlotRecord(t, status, self.last_release.copy(), truth)
