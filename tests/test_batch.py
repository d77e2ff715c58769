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

import wevent.mechanisms.batch as batch_module
import wevent.mechanisms.batch_core as batch_core
from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.errors import InputError
from wevent.experiments.running import run_mechanism
from wevent.experiments.stats import interval
from wevent.mechanisms.allocators import classes_of
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import (
    FixedClass,
    Plan,
    Prefix,
    published_now,
    scaled_classes,
)
from wevent.mechanisms.allocators.registry import AllocatorError, kernel_for
from wevent.mechanisms.batch import (
    MAX_SLOTS,
    BatchAlgebra,
    BatchUnsupported,
    batch_classes,
    batch_histograms,
    batch_variants,
    run_batch,
)
from wevent.mechanisms.batch_core import check_signs
from wevent.mechanisms.central import InvalidAllocation
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


def _spread_agrees(batch: Sequence[float], exact: Sequence[float], factor: float = 1.6) -> bool:
    """The per-run standard deviation of the batch within ``factor`` of the exact runs' (40 exact
    runs: their standard deviation is known to about 11%)."""
    b, e = float(np.std(batch, ddof=1)), float(np.std(exact, ddof=1))
    return e / factor <= b <= e * factor


def _publish_bits(releases: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Per run and slot: whether the release changed (a publication), shape (runs, slots - 1)."""
    return np.asarray((releases[:, 1:] != releases[:, :-1]).any(axis=2))


def lanes_independent(
    releases: np.ndarray[Any, Any], truth: np.ndarray[Any, Any], exact_bits: np.ndarray[Any, Any]
) -> bool:
    """Whether disjoint pairs of runs, (0, 1), (2, 3), ..., behave as independent runs.

    Given the stream, runs are independent. Decisions: at slot t two runs agree (both publish or
    both skip) with probability 1 - 2 p_t (1 - p_t), p_t the chance that a run publishes there,
    estimated without bias from the exact runs' publications ``exact_bits`` (runs, slots - 1);
    the batch pairs' agreement must lie within 0.03 of that. Noise: where both runs of a pair
    publish, their releases' errors (release - truth: the Laplace noise, as SM keeps every user
    of one class) must be uncorrelated, |correlation| <= 0.05."""
    bits = _publish_bits(releases)
    n = exact_bits.shape[0]
    p = exact_bits.mean(axis=0)
    expected = 1 - 2 * float((p * (1 - p)).mean()) * n / (n - 1)
    pairs = bits.shape[0] // 2
    first, second = bits[0 : 2 * pairs : 2], bits[1 : 2 * pairs : 2]
    if abs(float((first == second).mean()) - expected) > 0.03:
        return False
    err = releases[:, 1:] - truth[None, 1:]
    both = first & second
    a = err[0 : 2 * pairs : 2][both].ravel()
    b = err[1 : 2 * pairs : 2][both].ravel()
    return abs(float(np.corrcoef(a, b)[0, 1])) <= 0.05


_EXACT_RUNS: dict[str, tuple[list[float], list[float], np.ndarray[Any, Any]]] = {}


def _exact_runs(
    name: str, hists: np.ndarray[Any, Any]
) -> tuple[list[float], list[float], np.ndarray[Any, Any]]:
    """AMRE, published count and publications at slots 2.. of 40 exact runs (seeds 1..40) on
    ``hists`` (cached)."""
    if name not in _EXACT_RUNS:
        exact = [
            run_mechanism(name, POP, FixedStream(hists), slots=SLOTS, seed=s) for s in range(1, 41)
        ]
        _EXACT_RUNS[name] = (
            [x.errors()["amre"] for x in exact],
            [float(x.count("published")) for x in exact],
            np.array([[r.status == "published" for r in x.records[1:]] for x in exact]),
        )
    return _EXACT_RUNS[name]


def distribution_failures(name: str, runs: int = 2000) -> list[str]:
    """What tells a batch of ``name`` apart from exact runs on the same stream: the means and
    standard deviations of AMRE and published count, and the lanes' independence."""
    hists = batch_histograms(_stream(1), SLOTS, 1)
    e_amre, e_pub, e_bits = _exact_runs(name, hists)
    batch = run_batch(name, POP, hists, slots=SLOTS, runs=runs, seed=5, keep_releases=True)
    assert batch.releases is not None
    b_amre, b_pub = list(batch.amre), list(batch.published.astype(float))
    checks = {
        "amre mean": _agrees(b_amre, e_amre),
        "published mean": _agrees(b_pub, e_pub),
        "amre spread": _spread_agrees(b_amre, e_amre),
        "published spread": _spread_agrees(b_pub, e_pub),
        "lane independence": lanes_independent(batch.releases, batch.truth, e_bits),
    }
    return [k for k, ok in checks.items() if not ok]


@pytest.mark.parametrize("name", ["uniform", "bd", "ba", "dpba"])
def test_many_runs_agree_with_exact_runs_in_distribution(name: str) -> None:
    assert distribution_failures(name) == []
    # the control: twice the budget in every run is told apart
    hists = batch_histograms(_stream(1), SLOTS, 1)
    e_amre, _, _ = _exact_runs(name, hists)
    doubled = run_batch(
        name, POP, hists, slots=SLOTS, runs=2000, seed=5, factors=[Fraction(2)] * 2000
    )
    assert not _agrees(list(doubled.amre), e_amre)


def _lane0_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutant: every run takes run 0's publish decision."""
    original = published_now

    def mixed(alg: Any, plan: Any, decision: Any) -> Any:
        out = original(alg, plan, decision)
        return np.full_like(out, out[0])

    monkeypatch.setattr(batch_module, "published_now", mixed)


def _shared_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutant: every run draws the same noise."""
    original = batch_core.laplace

    def shared(rng: Any, noise: str, scale: Any, shape: tuple[int, ...]) -> Any:
        one = original(rng, noise, np.ones(1), (*shape[:-1], 1))
        return np.broadcast_to(one, shape) * scale

    monkeypatch.setattr(batch_module, "laplace", shared)


@pytest.mark.parametrize(
    ("name", "mutant"),
    [
        # uniform publishes at every slot, so run 0's decision is every run's: no mutant there
        ("ba", _lane0_decisions),
        ("dpba", _lane0_decisions),
        ("uniform", _shared_noise),
        ("dpba", _shared_noise),
    ],
)
def test_the_distribution_check_rejects_mixed_lanes(
    name: str, mutant: Callable[[pytest.MonkeyPatch], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both mutants keep the means (the means-only check passed them)."""
    _exact_runs(name, batch_histograms(_stream(1), SLOTS, 1))  # exact runs before the mutant
    mutant(monkeypatch)
    failures = distribution_failures(name)
    assert "lane independence" in failures
    assert any("spread" in f for f in failures)


# ---------------------------------------------------------------------- what a batch refuses


def test_a_personalized_allocator_on_two_classes_is_refused_before_any_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two classes whose budgets agree until slot 300 (the per-slot check would refuse at 302)
    late = Dynamic(
        (
            Declaration(1, 3, Budget(1), 3, Budget(1)),
            Declaration(300, 3, Budget(2), 3, Budget(2)),
        )
    )
    pop = Population.from_classes({Fixed(3, Budget(1)): 10, late: 10})
    stream = SyntheticStream("sin", 400, [10, 10], 1, 2)
    built: list[str] = []
    original = kernel_for

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(batch_module, "kernel_for", counting)
    for name in ("dpbd", "dpba"):
        with pytest.raises(BatchUnsupported, match="personalized and the population has 2"):
            run_batch(name, pop, stream, slots=400, runs=3)
    assert built == []  # refused before a kernel was built
    # the controls: bd serves both classes with one budget; dpbd on one class runs
    two = Population.from_classes({Fixed(3, Budget(1)): 10, Fixed(3, Budget(2)): 10})
    assert run_batch("bd", two, SyntheticStream("sin", 10, [10, 10], 1, 2), slots=10, runs=3)
    one = Population.from_classes({late: 10})
    assert run_batch("dpbd", one, SyntheticStream("sin", 10, [10], 1, 2), slots=10, runs=3)
    assert built == ["bd", "dpbd"]


@pytest.mark.parametrize("name", ["lbd", "lpa"])
def test_other_models_and_data_paths_are_refused(name: str) -> None:
    with pytest.raises(BatchUnsupported):
        run_batch(name, POP, _stream(1), slots=10, runs=2)


def test_an_unknown_name_gets_the_registrys_error() -> None:
    with pytest.raises(AllocatorError, match=r"unknown allocator 'bdd'.*did you mean"):
        run_batch("bdd", POP, _stream(1), slots=10, runs=2)
    with pytest.raises(BatchUnsupported, match="execute_many"):
        run_batch("mypkg.alloc:allocator", POP, _stream(1), slots=10, runs=2)
    # the control: the name it suggests runs
    assert run_batch("bd", POP, _stream(1), slots=10, runs=2).runs == 2


@pytest.mark.parametrize(
    ("name", "variant"),
    [
        ("ba", "du-code"),
        ("pba", "du-code"),
        ("dpbd", "published"),
        ("dpba", "published"),
        ("dpbd", "du-code"),
        ("dpba", "du-code"),
    ],
)
def test_variants_the_gate_does_not_prove_are_refused(name: str, variant: str) -> None:
    """du-code ba and pba overspend (the exact run is refused by the guard); the published
    dynamic rules and DynamicWEventCode's dynamic step (du-code dpbd, dpba) can overspend after
    a requirement change (`wevent gate NAME --variant V` refutes them)."""
    with pytest.raises(BatchUnsupported, match=r"proves sound, for .*: sound"):
        run_batch(name, POP, _stream(1), slots=10, runs=2, variant=variant)
    # the exact run of du-code ba is refused by its guard (the reason for the refusal above)
    if variant == "du-code" and name in ("ba", "pba"):
        assert run_mechanism(name, POP, _stream(1), slots=10, seed=1, variant=variant).refusal
    # the control: the variants the gate proves run (each one's exact runs are never refused)
    for accepted in batch_variants(name):
        exact = run_mechanism(name, POP, _stream(1), slots=10, seed=1, variant=accepted)
        assert exact.refusal is None
        assert run_batch(name, POP, _stream(1), slots=10, runs=2, variant=accepted).runs == 2


def test_du_code_bd_and_pbd_are_accepted() -> None:
    for name in ("bd", "pbd"):
        assert "du-code" in batch_variants(name)
        res = run_batch(name, POP, _stream(1), slots=SLOTS, runs=2, variant="du-code")
        assert res.variant == "du-code"


def test_more_than_max_slots_are_refused() -> None:
    short = _stream(1)
    with pytest.raises(BatchUnsupported, match="split the stream"):
        run_batch("bd", POP, short, slots=MAX_SLOTS + 1, runs=2)
    # the control: MAX_SLOTS passes that check (and meets the stream's length instead)
    with pytest.raises(InputError, match="more than the stream's"):
        run_batch("bd", POP, short, slots=MAX_SLOTS, runs=2)


def test_window_sums_drift_below_the_tolerance_up_to_max_slots() -> None:
    """The reason for `MAX_SLOTS`: a window total of `Prefix` running sums, w = 3, eps = 3/10,
    stays within a tenth of the tolerance at slot 100,000 (prefix drift)."""
    eps, w = Fraction(3, 10), 3
    alg = BatchAlgebra(2, float(eps))
    share = alg.const(eps / (2 * w))
    prefix = Prefix(alg, w)
    exact = float((w - 1) * eps / (2 * w))
    drift = {}
    for t in range(1, MAX_SLOTS + 1):
        if t in (1_000, MAX_SLOTS):
            drift[t] = abs(float(alg.runs_of(prefix.total(t - w + 1, t - 1))[0]) - exact)
        prefix = prefix.push(share)
    assert drift[MAX_SLOTS] <= alg.atol / 10
    # the control: the drift grows with the slot number (the measure sees it)
    assert drift[MAX_SLOTS] > 10 * drift[1_000] > 0


def test_a_negative_budget_within_the_tolerance_raises() -> None:
    alg = BatchAlgebra(3, 1.0)
    zero, no = alg.const(0), alg.truth(False)

    def plan(value: float) -> Plan[Any, Any]:
        return Plan(no, no, (zero,), (alg.lanes_of([0.5, value, 0.25]),))

    with pytest.raises(InvalidAllocation, match="within the comparison tolerance"):
        check_signs(alg, 7, "bd", plan(-alg.atol / 2))
    with pytest.raises(InvalidAllocation, match=r"negative publication budget .* in 1 of 3"):
        check_signs(alg, 7, "bd", plan(-1.0))
    # the controls: 0 and a positive budget within the tolerance pass; so does a negative
    # publication budget of a nullified slot (it is not spent)
    check_signs(alg, 7, "bd", plan(0.0))
    check_signs(alg, 7, "bd", plan(alg.atol / 2))
    check_signs(alg, 7, "bd", Plan(alg.truth(True), no, (zero,), plan(-1.0).publication))


def test_the_stream_origin_is_recorded() -> None:
    hists = batch_histograms(_stream(3), 10, 3)
    drawn = run_batch("bd", POP, _stream(3), slots=10, runs=2, seed=3)
    given = run_batch("bd", POP, hists, slots=10, runs=2, seed=3)
    assert drawn.stream_origin == "seed 3" and drawn.noise_origin == "seed 3"
    assert given.stream_origin == "given histograms"
    assert "stream: given histograms" in given.describe()
    # the control: the same stream and noise, so the same results; only the origin differs
    assert (drawn.amre == given.amre).all()
    other = run_batch("bd", POP, hists, slots=10, runs=2, noise_rng=np.random.default_rng(3))
    assert other.noise_origin == "given generator"


# ---------------------------------------------------------------------- the limit of the tolerance

HALVING = ("bd", "pbd", "dpbd", "bd-shift")


def _every_slot_published(slots: int) -> np.ndarray[Any, Any]:
    """Histograms that jump by 4e18 at every slot: the dissimilarity passes any threshold the
    halving budgets set (sqrt(2) / theta is about 1e13 at theta = 2^-40), so every slot that is
    not nullified publishes."""
    hists = np.zeros((slots, 1, DOMAIN), dtype=np.int64)
    hists[::2] = 4 * 10**18
    return hists


@pytest.mark.parametrize("name", HALVING)
def test_a_halving_budget_below_the_tolerance_is_nullified_and_counted(name: str) -> None:
    """The documented limit (module docstring, "The limit of the tolerance"): w = 40,
    eps = 3/10, every slot published; slot k + 1 plans eps / 2^(k+2), 2^-37 of eps at slot 36,
    below the tolerance (2^-36 of eps): the batch nullifies slots 36..40, where the exact run
    publishes every slot, and counts them in near_zero."""
    pop = Population.from_classes({Fixed(40, Budget("3/10")): USERS})
    hists = _every_slot_published(40)
    exact = run_mechanism(name, pop, FixedStream(hists), slots=40, seed=1)
    assert exact.count("published") == 40 and exact.count("nullified") == 0
    before = run_batch(name, pop, hists, slots=35, runs=3)
    assert (before.published == 35).all() and (before.near_zero == 0).all()
    res = run_batch(name, pop, hists, slots=40, runs=3)
    assert (res.published == 35).all()
    assert (res.nullified == 5).all()
    assert (res.near_zero == 5).all()
    assert "3 of 3 runs with a budget within the tolerance of 0" in res.describe()


def test_the_near_zero_count_is_seen_by_the_test_above(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: with the count's band empty (its floor at the tolerance), the test above
    fails."""
    monkeypatch.setattr(batch_core, "NEAR_ZERO_FLOOR", 1.0)
    with pytest.raises(AssertionError):
        test_a_halving_budget_below_the_tolerance_is_nullified_and_counted("bd")


def test_a_run_with_a_smaller_budget_factor_reaches_the_tolerance_sooner() -> None:
    """The tolerance is relative to the batch's largest budget: with factors 1/4 and 4 the
    first run's budgets are 2^-4 of the largest, so w = 33 already reaches it in that run."""
    pop = Population.from_classes({Fixed(33, Budget("3/10")): USERS})
    hists = _every_slot_published(120)
    res = run_batch("bd", pop, hists, slots=120, runs=2, factors=[Fraction(1, 4), Fraction(4)])
    assert res.nullified[0] > 0 and res.near_zero[0] == res.nullified[0]
    # the control: the other run, and the first run alone in a batch, never get there
    assert res.nullified[1] == 0 and res.near_zero[1] == 0
    alone = run_batch("bd", pop, hists, slots=120, runs=1, factors=[Fraction(1, 4)])
    assert alone.nullified[0] == 0 and alone.near_zero[0] == 0


def test_a_short_window_never_reaches_the_tolerance() -> None:
    """The other side of the limit: w = 30 cannot hold 35 publications, so the budget comes
    back up before it nears the tolerance; nothing is nullified or counted."""
    pop = Population.from_classes({Fixed(30, Budget("3/10")): USERS})
    res = run_batch("bd", pop, _every_slot_published(120), slots=120, runs=3)
    assert (res.published == 120).all() and (res.near_zero == 0).all()
