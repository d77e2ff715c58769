"""The local allocators' release options (`ReleaseOptions`: post-processing, pooling, a forced
first publication) cost no privacy: with the same publish/skip decisions a run with an option
charges exactly what a run without it charges, and the budget kernels are proved for every
decision sequence. Also the simplex projection and the pooled estimate, by hand and as
properties."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.experiments.running import RunSummary, run_mechanism
from wevent.mechanisms import local
from wevent.mechanisms.local import Estimate, ReleaseOptions, pooled, project_simplex
from wevent.mechanisms.streams import SyntheticStream

LOCAL = ("lbu", "lsp", "lbd", "lba", "plbu", "lpu", "lpd", "lpa", "plpd", "plpa", "plpd+", "plpa+")
OPTIONS = (
    ReleaseOptions(post="clip"),
    ReleaseOptions(post="simplex"),
    ReleaseOptions(pool=True),
    ReleaseOptions(first=True),
    ReleaseOptions(post="simplex", pool=True, first=True),
)
SLOTS, DOMAIN = 30, 3

# ------------------------------------------------------------------------- simplex projection


def test_simplex_projection_by_hand() -> None:
    assert project_simplex(np.array([0.5, 0.5])).tolist() == [0.5, 0.5]
    # 1.2 and -0.2: subtract 0.1 from both and clip: (1.1, -0.3) -> theta found at rank 1 = 0.2
    assert np.allclose(project_simplex(np.array([1.2, -0.2])), [1.0, 0.0])
    assert np.allclose(project_simplex(np.array([0.6, 0.6, -0.1])), [0.5, 0.5, 0.0])
    assert np.allclose(project_simplex(np.array([0.2, 0.2, 0.2])), [1 / 3, 1 / 3, 1 / 3])


vectors = st.lists(
    st.floats(min_value=-3, max_value=3, allow_nan=False), min_size=1, max_size=8
).map(lambda xs: np.array(xs, dtype=np.float64))


@settings(max_examples=200, deadline=None)
@given(vectors, st.integers(0, 2**32 - 1))
def test_simplex_projection_is_the_closest_frequency_vector(v: Any, seed: int) -> None:
    p = project_simplex(v)
    assert (p >= 0).all() and abs(p.sum() - 1) < 1e-9
    assert np.allclose(project_simplex(p), p, atol=1e-12)  # a frequency vector stays put
    rng = np.random.default_rng(seed)
    for x in rng.dirichlet(np.ones(len(v)), size=20):  # no frequency vector is closer
        assert np.sum((v - p) ** 2) <= np.sum((v - x) ** 2) + 1e-9


def test_simplex_property_rejects_clip_and_renormalize() -> None:
    """Negative control: clipping then renormalizing lands on the simplex but is not the
    closest point, which the property's comparison sees."""
    v = np.array([0.9, 0.5, -0.4])
    mutant = np.maximum(v, 0) / np.maximum(v, 0).sum()
    assert np.sum((v - project_simplex(v)) ** 2) < np.sum((v - mutant) ** 2) - 1e-3


# ---------------------------------------------------------------------------- pooled estimate


def test_pooled_weights_by_inverse_variance() -> None:
    a = Estimate(np.array([0.2, 0.8]), 0.01)
    b = Estimate(np.array([0.6, 0.4]), 0.03)
    p = pooled(a, b)
    assert np.allclose(p.freq, [0.3, 0.7])  # weights 3/4 and 1/4
    assert p.variance == pytest.approx(0.0075)
    none = Estimate(np.array([0.0, 0.0]), float("inf"))
    assert pooled(none, b) is b and pooled(b, none) is b


@settings(max_examples=100, deadline=None)
@given(st.floats(1e-6, 10), st.floats(1e-6, 10))
def test_pooled_variance_is_below_both(v1: float, v2: float) -> None:
    p = pooled(Estimate(np.zeros(2), v1), Estimate(np.ones(2), v2))
    assert p.variance <= min(v1, v2) * (1 + 1e-12)
    # unbiased: the weights sum to 1 (a constant estimate stays that constant)
    q = pooled(Estimate(np.full(2, 0.5), v1), Estimate(np.full(2, 0.5), v2))
    assert np.allclose(q.freq, 0.5)


def test_unknown_post_processing_is_refused() -> None:
    with pytest.raises(BudgetError, match="unknown post-processing 'round'"):
        ReleaseOptions(post="round")
    assert ReleaseOptions().describe() == "papers"
    assert ReleaseOptions(post="simplex", pool=True).describe() == "post=simplex, pool"


# ------------------------------------------------------------ no charge changes with an option


def _population(mechanism: str) -> Population:
    if mechanism.startswith("p"):  # personalized: three classes
        return Population.from_classes(
            {
                Fixed(4, Budget(1)): 150,
                Fixed(6, Budget(Fraction(3, 2))): 150,
                Fixed(5, Budget(2)): 120,
            }
        )
    return Population.from_classes({Fixed(4, Budget(1)): 400})


def _run(mechanism: str, options: ReleaseOptions, seed: int) -> RunSummary:
    pop = _population(mechanism)
    stream = SyntheticStream("sin", SLOTS, [c.count for c in pop.classes], seed, DOMAIN)
    return run_mechanism(mechanism, pop, stream, slots=SLOTS, seed=seed, release=options)


@contextmanager
def _decisions(published: set[int]) -> Iterator[None]:
    """Every dissimilarity test says "publish" exactly at the slots ``published``."""
    original = local.dissimilarity
    slot = {"t": 0}

    def forced(est: Estimate, last: Any) -> float:
        return float("inf") if slot["t"] in published else float("-inf")

    runners = (local.LocalBudgetRunner, local.PopulationRunner)
    steps = {cls: cls.step for cls in runners}

    def stepping(cls: Any) -> Any:
        def step(self: Any) -> Any:
            slot["t"] = self.slot + 1
            return steps[cls](self)

        return step

    try:
        local.dissimilarity = forced  # type: ignore[assignment]
        for cls in runners:
            cls.step = stepping(cls)  # type: ignore[method-assign]
        yield
    finally:
        local.dissimilarity = original
        for cls in runners:
            cls.step = steps[cls]  # type: ignore[method-assign]


def _charges(summary: RunSummary) -> list[tuple[str, int, Budget, str]]:
    assert summary.ledger is not None
    return sorted((u, c.slot, c.amount, c.part) for u, c in summary.ledger.expanded())


def _replayed(mechanism: str, summary: RunSummary, seed: int) -> RunSummary:
    published = {r.slot for r in summary.records if r.status == "published"}
    with _decisions(published):
        return _run(mechanism, ReleaseOptions(), seed)


@pytest.mark.parametrize("mechanism", LOCAL)
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: o.describe())
def test_an_option_changes_no_charge_of_the_decisions_it_takes(
    mechanism: str, options: ReleaseOptions
) -> None:
    for seed in (1, 2):
        with_option = _run(mechanism, options, seed)
        replay = _replayed(mechanism, with_option, seed)
        assert with_option.ok and replay.ok
        assert [r.status for r in replay.records] == [r.status for r in with_option.records]
        assert _charges(replay) == _charges(with_option)


def test_the_replay_check_sees_an_extra_charge() -> None:
    """Negative control: a pooling mutant that asks every user for a third report at each
    publication (a charge the kernel did not plan) is caught by the same comparison."""
    runner_step = local.LocalBudgetRunner.step

    def mutant_step(self: Any) -> Any:
        record = runner_step(self)
        if record.status == "published" and self.options.pool:
            plan = self.kernel.plan(self._state, record.slot)  # the next slot's plan, spent now
            self._charge(record.slot, plan.dissimilarity, "dissimilarity")
        return record

    options = ReleaseOptions(pool=True)
    try:
        local.LocalBudgetRunner.step = mutant_step  # type: ignore[method-assign]
        with_option = _run("lbd", options, 1)
    finally:
        local.LocalBudgetRunner.step = runner_step  # type: ignore[method-assign]
    replay = _replayed("lbd", with_option, 1)
    assert _charges(replay) != _charges(with_option)


def test_the_replay_follows_the_decisions_it_is_given() -> None:
    """The forced decisions really drive the run: two schedules give two ledgers."""
    with _decisions({1, 5, 9}):
        a = _run("lpd", ReleaseOptions(), 3)
    with _decisions({1, 5}):
        b = _run("lpd", ReleaseOptions(), 3)
    assert [r.slot for r in a.records if r.status == "published"] == [1, 5, 9]
    assert _charges(a) != _charges(b)


def test_options_change_releases() -> None:
    """The options do something: simplex releases are frequency vectors, and each option moves
    some release of an lbd run away from the papers' default."""
    base = _run("lbd", ReleaseOptions(), 1)
    for options in OPTIONS:
        if options == ReleaseOptions(first=True):
            continue  # slot 1 publishes here anyway: test_first_publication_publishes_slot_one
        other = _run("lbd", options, 1)
        assert any(
            not np.allclose(a.release, b.release)
            for a, b in zip(base.records, other.records, strict=True)
        ), options
    simplex = _run("lpd", ReleaseOptions(post="simplex"), 1)
    for r in simplex.records:
        if r.status == "published":
            freq = r.release / 400
            assert (freq >= 0).all() and freq.sum() == pytest.approx(1)


def test_first_publication_publishes_slot_one() -> None:
    """With a small budget and a long window the test skips slot 1 (the error of a publication
    is larger than the distance to the empty release); the option publishes it."""
    pop = Population.from_classes({Fixed(40, Budget(Fraction(1, 5))): 400})
    stream = SyntheticStream("sin", 3, [400], 0, DOMAIN)
    for mechanism in ("lbd", "lba", "lpd", "lpa"):
        runs = [
            run_mechanism(mechanism, pop, stream, slots=3, seed=0, release=ReleaseOptions(first=f))
            for f in (False, True)
        ]
        assert [r.records[0].status for r in runs] == ["skipped", "published"], mechanism
    assert _run("plpa+", ReleaseOptions(first=True), 4).records[0].status == "published"


def test_options_are_refused_where_they_do_not_apply() -> None:
    pop = _population("bd")
    stream = SyntheticStream("sin", 5, [400], 0, 2)
    with pytest.raises(BudgetError, match="apply to the local allocators"):
        run_mechanism("bd", pop, stream, slots=5, seed=0, release=ReleaseOptions(pool=True))
    with pytest.raises(BudgetError, match="--threshold applies to the central"):
        run_mechanism("lbd", pop, stream, slots=5, seed=0, threshold="kellaris")
    with pytest.raises(BudgetError, match="data path of its own"):
        run_mechanism("bd-shift", pop, stream, slots=5, seed=0, threshold="sqrt")


def test_the_kellaris_threshold_decides_only() -> None:
    """``threshold="kellaris"`` publishes on other slots than 001's rule, and with the same
    decisions forced on 001's path the charges are the same."""
    from wevent.mechanisms import datapath

    pop = Population.from_classes({Fixed(4, Budget(1)): 400})
    stream = SyntheticStream("sin", SLOTS, [400], 5, DOMAIN)
    runs = {
        rule: run_mechanism("bd", pop, stream, slots=SLOTS, seed=5, threshold=rule)
        for rule in ("sqrt", "kellaris")
    }
    statuses = {rule: [r.status for r in run.records] for rule, run in runs.items()}
    assert statuses["sqrt"] != statuses["kellaris"]
    published = {r.slot for r in runs["kellaris"].records if r.status == "published"}
    original = datapath.PwsmPath.decide
    try:
        datapath.PwsmPath.decide = (  # type: ignore[method-assign]
            lambda self, t, dis, err, scale: t in published
        )
        replay = run_mechanism("bd", pop, stream, slots=SLOTS, seed=5)
    finally:
        datapath.PwsmPath.decide = original  # type: ignore[method-assign]
    assert [r.status for r in replay.records] == statuses["kellaris"]
    assert _charges(replay) == _charges(runs["kellaris"])
