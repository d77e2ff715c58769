"""Batch runs (`wevent.mechanisms.batch`): the kernels on `BatchAlgebra` plan what the exact
kernels plan, run by run; the vectorized data path draws what the exact runner draws (one run)
and agrees with it in distribution (many runs); a Python branch on a batch value raises. Each
check has a mutant it rejects."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.experiments.running import run_mechanism
from wevent.experiments.stats import interval
from wevent.mechanisms.allocators import classes_of
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import FixedClass, Plan, published_now, scaled_classes
from wevent.mechanisms.allocators.registry import kernel_for
from wevent.mechanisms.batch import (
    BatchAlgebra,
    BatchUnsupported,
    batch_classes,
    batch_histograms,
    run_batch,
)
from wevent.mechanisms.streams import SyntheticStream

FIXED = ("uniform", "sample", "bd", "ba", "pbd", "pba", "bd-shift", "ba-shift")
DYNAMIC = ("dpbd", "dpba")
VARIANTS = {
    "bd": ("sound", "published", "du-code"),
    "ba": ("sound", "published", "du-code"),
    "pbd": ("sound", "published", "du-code"),
    "pba": ("sound", "published", "du-code"),
}

small_budgets = st.builds(Fraction, st.integers(1, 12), st.sampled_from([1, 2, 3, 5, 10]))


@st.composite
def dynamic_reqs(draw: st.DrawFn) -> Dynamic:
    slots = sorted(draw(st.sets(st.integers(1, 8), min_size=1, max_size=3)))
    w = st.integers(1, 4)
    return Dynamic(
        tuple(
            Declaration(
                s, draw(w), Budget(draw(small_budgets)), draw(w), Budget(draw(small_budgets))
            )
            for s in slots
        )
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, list[Requirement], int, list[list[bool]], Any]:
    """An allocator, a variant, 1-3 requirement classes, R runs, each run's decisions over the
    slots, and optional per-run budget factors."""
    name = draw(st.sampled_from(FIXED + DYNAMIC))
    variant = draw(st.sampled_from(VARIANTS.get(name, ("sound", "published"))))
    if name in DYNAMIC and draw(st.booleans()):
        reqs: list[Requirement] = draw(st.lists(dynamic_reqs(), min_size=1, max_size=2))
    else:
        fixed = st.builds(Fixed, st.integers(1, 5), st.builds(Budget, small_budgets))
        reqs = draw(st.lists(fixed, min_size=1, max_size=3, unique=True))
    runs = draw(st.integers(1, 4))
    slots = draw(st.integers(1, 16))
    decisions = [draw(st.lists(st.booleans(), min_size=slots, max_size=slots)) for _ in range(runs)]
    factors = (
        draw(st.lists(small_budgets, min_size=runs, max_size=runs)) if draw(st.booleans()) else None
    )
    return name, variant, reqs, runs, decisions, factors


def _population(reqs: Sequence[Requirement]) -> Population:
    return Population.from_classes({r: 1 for r in reqs})


def plan_gap(
    name: str,
    variant: str,
    reqs: Sequence[Requirement],
    runs: int,
    decisions: Sequence[Sequence[bool]],
    factors: Sequence[Fraction] | None,
    algebra: Callable[[int, float], BatchAlgebra] = BatchAlgebra,
) -> float:
    """The largest difference between a batch plan and the exact plan of the same run (budgets
    relative to the largest budget; a flag that differs counts as infinity)."""
    exact_classes = classes_of(_population(reqs), name)
    budgets = [
        x
        for c in exact_classes
        for x in (
            [c.eps]
            if isinstance(c, FixedClass)
            else [v for d in c.decls for v in (d.eps_back, d.eps_fwd)]
        )
    ]
    top = max(budgets) * (max(factors) if factors else 1)
    alg = algebra(runs, float(top))
    batch = kernel_for(name, alg, batch_classes(alg, exact_classes, factors), variant)
    ex = ExactAlgebra()
    exact = [
        kernel_for(
            name,
            ex,
            exact_classes
            if factors is None
            else scaled_classes(exact_classes, [factors[r]] * len(exact_classes)),
            variant,
        )
        for r in range(runs)
    ]
    b_state = batch.start()
    e_states = [k.start() for k in exact]
    worst = 0.0
    for t in range(1, len(decisions[0]) + 1):
        bp: Plan[Any, Any] = batch.plan(b_state, t)
        published = []
        for r, k in enumerate(exact):
            ep = k.plan(e_states[r], t)
            if bool(alg.runs_of(bp.nullified)[r]) != ep.nullified:
                return float("inf")
            if bool(alg.runs_of(bp.forced)[r]) != ep.forced:
                return float("inf")
            for bs, es in ((bp.dissimilarity, ep.dissimilarity), (bp.publication, ep.publication)):
                for bv, ev in zip(bs, es, strict=True):
                    worst = max(worst, abs(float(alg.runs_of(bv)[r]) - float(ev)) / float(top))
            pub = published_now(ex, ep, decisions[r][t - 1])
            published.append(pub)
            e_states[r] = k.step(e_states[r], t, ep, pub)
        b_pub = published_now(
            alg, bp, alg.lanes_of([decisions[r][t - 1] for r in range(runs)], np.bool_)
        )
        assert list(alg.runs_of(b_pub)) == published
        b_state = batch.step(b_state, t, bp, b_pub)
    return worst


@settings(max_examples=300, deadline=None)
@given(cases())
def test_batch_kernels_plan_what_the_exact_kernels_plan(case: Any) -> None:
    assert plan_gap(*case) <= 1e-12


class SwappedSelect(BatchAlgebra):
    def select(self, cond: Any, then: Any, other: Any) -> Any:
        return super().select(cond, other, then)


class NoTolerance(BatchAlgebra):
    """Comparisons and counts in plain doubles: the published code's hazards."""

    def le(self, a: Any, b: Any) -> Any:
        return np.less_equal(a, b)

    @staticmethod
    def _count(x: Any) -> Any:
        return x


# Inputs the mutants must fail on: every allocator, one and two classes, alternating and random
# decisions.
def _control_cases() -> list[tuple[str, str, list[Requirement], int, list[list[bool]], Any]]:
    rng = np.random.default_rng(7)
    out = []
    for name in FIXED + DYNAMIC:
        pairs: tuple[list[Requirement], ...] = (
            [Fixed(3, Budget("3/10"))],
            [Fixed(2, Budget("7/10")), Fixed(4, Budget("1/10"))],
        )
        for reqs in pairs:
            decisions = [[bool(x) for x in rng.random(14) < 0.5] for _ in range(3)]
            out.append((name, "sound", reqs, 3, decisions, None))
    return out


@pytest.mark.parametrize("mutant", [SwappedSelect, NoTolerance])
def test_the_equivalence_check_rejects_a_wrong_batch_algebra(mutant: type[BatchAlgebra]) -> None:
    cases_ = _control_cases()
    assert all(plan_gap(*c) <= 1e-12 for c in cases_)  # the control inputs pass unmutated
    failed = [c[0] for c in cases_ if plan_gap(*c, algebra=mutant) > 1e-12]
    assert failed, f"{mutant.__name__} passed every control input"


# ---------------------------------------------------------------------- bool() refused


@pytest.mark.parametrize("runs", [1, 2, 5])
def test_bool_of_a_batch_value_raises(runs: int) -> None:
    alg = BatchAlgebra(runs)
    one, two = alg.const(1), alg.const(Fraction(2, 3))
    values = [
        one,
        alg.add(one, two),
        alg.le(one, two),
        alg.truth(True),
        alg.truth(False),
        alg.select(alg.le(one, two), one, two),
        alg.ratio(one, two),
        alg.and_(),
    ]
    for v in values:
        with pytest.raises(ValueError, match="ambiguous"):
            bool(v)

    class Branching:  # a kernel that decides in Python on a budget
        def plan(self, budget: Any) -> Any:
            return one if alg.le(budget, two) else two

    with pytest.raises(ValueError, match="ambiguous"):
        Branching().plan(one)
    # the control: the same code on the exact algebra runs
    ex = ExactAlgebra()
    assert (Fraction(1) if ex.le(Fraction(1), Fraction(2, 3)) else 2) == 2


def test_a_batch_value_on_the_exact_algebra_would_branch_silently() -> None:
    """Why the second lane: numpy's bool() of a one-element array does not raise."""
    assert bool(np.array([True])) is True
    assert BatchAlgebra(1).lanes == 2


# ---------------------------------------------------------------------- the data path

USERS, DOMAIN, SLOTS = 2000, 4, 120
POP = Population.from_classes({Fixed(3, Budget(1)): USERS})


def _stream(seed: int) -> SyntheticStream:
    return SyntheticStream("sin", SLOTS, [USERS], seed, DOMAIN)


@pytest.mark.parametrize("name", [*FIXED, *DYNAMIC])
def test_one_run_draws_what_run_mechanism_draws(name: str) -> None:
    for seed in (1, 2):
        exact = run_mechanism(name, POP, _stream(seed), slots=SLOTS, seed=seed)
        batch = run_batch(
            name,
            POP,
            _stream(seed),
            slots=SLOTS,
            runs=1,
            seed=seed,
            noise="numpy",
            keep_releases=True,
        )
        assert batch.releases is not None
        rel = np.stack([r.release for r in exact.records])
        assert np.allclose(batch.releases[0], rel, rtol=0, atol=1e-9)
        truth = np.stack([r.truth for r in exact.records])
        assert (batch.truth == truth).all()
        for status in ("published", "skipped", "nullified"):
            assert int(getattr(batch, status)[0]) == exact.count(status)
        errors = exact.errors()
        for metric in ("amre", "amse", "mae"):
            assert getattr(batch, metric)[0] == pytest.approx(errors[metric], rel=1e-9)


def test_one_run_with_another_noise_generator_draws_otherwise() -> None:
    """The control of the test above: the comparison sees a different noise stream."""
    exact = run_mechanism("ba", POP, _stream(1), slots=SLOTS, seed=1)
    batch = run_batch(
        "ba",
        POP,
        _stream(1),
        slots=SLOTS,
        runs=1,
        seed=1,
        noise="numpy",
        keep_releases=True,
        noise_rng=np.random.default_rng(99),
    )
    assert batch.releases is not None
    rel = np.stack([r.release for r in exact.records])
    assert not np.allclose(batch.releases[0], rel, rtol=0, atol=1e-9)


class FixedStream:
    """The same histograms whatever the generator: exact runs over seeds then vary their noise
    only, as a batch's runs do."""

    def __init__(self, hists: np.ndarray[Any, Any]) -> None:
        self._h = hists

    @property
    def domain(self) -> int:
        return int(self._h.shape[2])

    @property
    def slots(self) -> int:
        return int(self._h.shape[0])

    def histograms(self, slot: int, rng: np.random.Generator) -> Any:
        return self._h[slot - 1].copy()


def _agrees(batch: Sequence[float], exact: Sequence[float]) -> bool:
    """The batch mean inside the 99.9% interval of the exact runs' mean, widened by the batch
    mean's own 99.9% half-width."""
    e, b = interval(exact, level=0.999), interval(batch, level=0.999)
    return e.low - (b.high - b.mean) <= b.mean <= e.high + (b.high - b.mean)


@pytest.mark.parametrize("name", ["uniform", "bd", "ba", "dpba"])
def test_many_runs_agree_with_exact_runs_in_distribution(name: str) -> None:
    hists = batch_histograms(_stream(1), SLOTS, 1)
    exact = [
        run_mechanism(name, POP, FixedStream(hists), slots=SLOTS, seed=s) for s in range(1, 41)
    ]
    e_amre = [x.errors()["amre"] for x in exact]
    e_pub = [float(x.count("published")) for x in exact]
    batch = run_batch(name, POP, hists, slots=SLOTS, runs=2000, seed=5)
    assert _agrees(list(batch.amre), e_amre)
    assert _agrees(list(batch.published.astype(float)), e_pub)
    # the control: twice the budget in every run is told apart
    doubled = run_batch(
        name, POP, hists, slots=SLOTS, runs=2000, seed=5, factors=[Fraction(2)] * 2000
    )
    assert not _agrees(list(doubled.amre), e_amre)


# ---------------------------------------------------------------------- what a batch refuses


def test_different_budgets_within_a_run_are_refused() -> None:
    pop = Population.from_classes({Fixed(3, Budget(1)): 10, Fixed(3, Budget(2)): 10})
    stream = SyntheticStream("sin", 10, [10, 10], 1, 2)
    with pytest.raises(BatchUnsupported, match="different dissimilarity budgets"):
        run_batch("pbd", pop, stream, slots=10, runs=3)
    # the control: bd serves both classes with one budget, and runs
    assert run_batch("bd", pop, stream, slots=10, runs=3).runs == 3


@pytest.mark.parametrize("name", ["lbd", "fast-w", "lpa"])
def test_other_models_and_data_paths_are_refused(name: str) -> None:
    with pytest.raises(BatchUnsupported):
        run_batch(name, POP, _stream(1), slots=10, runs=2)
