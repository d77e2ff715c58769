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
    ReleaseOptions(post="simplex", project_test=True),
    ReleaseOptions(pool=True),
    ReleaseOptions(first=True),
    ReleaseOptions(post="simplex", project_test=True, pool=True, first=True),
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


def test_pooled_takes_the_smaller_variance_side_and_skips_unusable_ones() -> None:
    a = Estimate(np.array([0.2, 0.8]), 0.03)
    b = Estimate(np.array([0.6, 0.4]), 0.01)
    assert np.allclose(pooled(a, b).freq, [0.5, 0.5])  # weights 1/4 and 3/4
    for bad in (float("nan"), -0.01, 0.0):
        assert pooled(Estimate(a.freq, bad), b) is b
        assert pooled(b, Estimate(a.freq, bad)) is b
    with pytest.raises(BudgetError, match="cannot pool estimates of 2 and 3 values"):
        pooled(a, Estimate(np.zeros(3), 0.01))


def test_simplex_projection_refuses_what_is_not_finite() -> None:
    for bad in ([float("nan"), 0.5], [float("inf"), 0.0], []):
        with pytest.raises(BudgetError, match="finite values"):
            project_simplex(np.array(bad, dtype=np.float64))
    assert project_simplex(np.array([1e20, 1.0])).tolist() == [1.0, 0.0]


def test_clip_and_the_test_estimate() -> None:
    clip = ReleaseOptions(post="clip")
    assert clip.finish(np.array([-0.2, 0.5, 0.7])).tolist() == [0.0, 0.5, 0.7]
    est = Estimate(np.array([1.3, -0.3]), 0.01)
    last = np.array([0.5, 0.5])
    raw = float(np.mean((est.freq - last) ** 2)) - 0.01
    assert ReleaseOptions(post="simplex").distance(est, last) == pytest.approx(raw)
    projected = float(np.mean((np.array([1.0, 0.0]) - last) ** 2)) - 0.01
    tested = ReleaseOptions(post="simplex", project_test=True)
    assert tested.distance(est, last) == pytest.approx(projected)
    with pytest.raises(BudgetError, match="choose a post"):
        ReleaseOptions(project_test=True)


def test_unknown_post_processing_is_refused() -> None:
    with pytest.raises(BudgetError, match="unknown post-processing 'round'"):
        ReleaseOptions(post="round")
    assert ReleaseOptions().describe() == "papers"
    assert ReleaseOptions(post="simplex", pool=True).describe() == "post=simplex, pool"
    both = ReleaseOptions(post="clip", project_test=True, first=True)
    assert both.describe() == "post=clip, project-test, first"


# ------------------------------------------------------------ no charge changes with an option


def _population(mechanism: str, users: int = 400) -> Population:
    if mechanism.startswith("p"):  # personalized: three classes
        return Population.from_classes(
            {
                Fixed(4, Budget(1)): 150,
                Fixed(6, Budget(Fraction(3, 2))): 150,
                Fixed(5, Budget(2)): 120,
            }
        )
    return Population.from_classes({Fixed(4, Budget(1)): users})


def _run(mechanism: str, options: ReleaseOptions, seed: int, users: int = 400) -> RunSummary:
    pop = _population(mechanism, users)
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


def _charges(summary: RunSummary) -> list[tuple[str, int, Budget, str, str, str, str]]:
    """Every per-user charge with all its fields (the evidence by its repr)."""
    assert summary.ledger is not None
    return sorted(
        (u, c.slot, c.amount, c.part, c.mechanism, c.group or "", repr(c.evidence))
        for u, c in summary.ledger.expanded()
    )


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


@contextmanager
def _reports() -> Iterator[list[tuple[int, str, Estimate | None]]]:
    """Every report a local runner makes, as (slot, the part charged just before it, the
    estimate); a report with no charge since the previous one fails the test at once."""
    seen: list[tuple[int, str, Estimate | None]] = []
    pending: dict[str, Any] = {"part": None, "slot": 0}
    original_report = local.report
    charges = {cls: cls._charge for cls in (local.LocalBudgetRunner, local.PopulationRunner)}

    def charging(cls: Any) -> Any:
        def charge(self: Any, t: int, what: Any, part: str) -> None:
            charges[cls](self, t, what, part)
            pending["part"], pending["slot"] = part, t

        return charge

    def report(*args: Any, **kwargs: Any) -> Estimate | None:
        assert pending["part"] is not None, "a report with no charge before it"
        est = original_report(*args, **kwargs)
        seen.append((pending["slot"], pending["part"], est))
        pending["part"] = None
        return est

    try:
        local.report = report
        for cls in charges:
            cls._charge = charging(cls)  # type: ignore[method-assign]
        yield seen
    finally:
        local.report = original_report
        for cls, method in charges.items():
            cls._charge = method  # type: ignore[method-assign]


@pytest.mark.parametrize("mechanism", ("lbd", "lba", "lpd", "lpa", "plpd", "plpa+"))
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: o.describe())
def test_every_release_is_made_of_the_slots_charged_reports(
    mechanism: str, options: ReleaseOptions
) -> None:
    """Each published release is exactly ``options.release`` of the slot's publication estimate
    and, with pooling, its dissimilarity estimate: nothing else (no truth, no report without a
    charge, no third round) goes into it."""
    # Budget division's dissimilarity round is noisy at 400 users: a projected test would never
    # publish there (test_a_projected_test_can_stop_publishing), so it gets more users.
    users = 20_000 if options.project_test and mechanism in ("lbd", "lba") else 400
    with _reports() as seen:
        run = _run(mechanism, options, 2, users)
    n = len(_population(mechanism, users))
    published = [r for r in run.records if r.status == "published"]
    assert published, "the run must publish for the check to mean anything"
    for record in published:
        rounds = {part: est for slot, part, est in seen if slot == record.slot}
        assert len([1 for slot, _, _ in seen if slot == record.slot]) <= 2
        pub = rounds["publication"]
        assert pub is not None
        expected = options.release(pub, rounds.get("dissimilarity"))
        assert np.allclose(record.release / n, expected, rtol=0, atol=1e-12)


def test_first_publication_changes_slot_one_only() -> None:
    """Where slot 1 publishes anyway, ``first`` changes nothing at all: every later decision is
    the test's."""
    for mechanism in ("lbd", "lba", "lpd", "lpa", "plpd+"):
        base = _run(mechanism, ReleaseOptions(), 1)
        assert base.records[0].status == "published"
        first = _run(mechanism, ReleaseOptions(first=True), 1)
        assert [r.status for r in first.records] == [r.status for r in base.records]
        assert _charges(first) == _charges(base)


def test_a_projected_test_can_stop_publishing() -> None:
    """The documented hazard of ``project_test``: with 400 users lbd's dissimilarity round has a
    variance above 2/d per value, which no projected estimate can exceed, so the test never
    publishes; with the release alone projected it does."""
    tested = _run("lbd", ReleaseOptions(post="simplex", project_test=True), 2)
    assert tested.count("published") == 0
    assert _run("lbd", ReleaseOptions(post="simplex"), 2).count("published") > 0
