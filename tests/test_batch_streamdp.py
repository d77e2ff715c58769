"""Batch runs of dsat, adapub, pegasus and fast-w (`wevent.mechanisms.batch_streamdp`): a batch
of one run draws what `run_mechanism` draws; every lane of a batch is the exact run of its own
seed and budget when each lane draws from that run's generator; many lanes agree with exact runs
in distribution; the refused variants and rescuedp are refused. Each check has mutants of the
lane paths that it rejects."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import wevent.mechanisms.batch_streamdp as lanes_module
from tests.test_batch import (
    FixedStream,
    _agrees,
    _exact_runs,
    _spread_agrees,
    distribution_failures,
)
from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.experiments.running import run_mechanism
from wevent.mechanisms.batch import (
    BATCH_LABEL,
    LANE_PATHS,
    BatchUnsupported,
    batch_histograms,
    batch_variants,
    run_batch,
)
from wevent.mechanisms.batch import (
    near_zero as batch_near_zero,
)
from wevent.mechanisms.batch_streamdp import (
    AdaPubLanes,
    DsatLanes,
    FastLanes,
    PegasusLanes,
    RescueLanes,
)
from wevent.mechanisms.streamdp import dsat, rescuedp
from wevent.mechanisms.streamdp import fast as fast_module
from wevent.mechanisms.streams import SyntheticStream

USERS = 2000

# (mechanism, w, domain, slots, users): fast-w needs w >= 80 for M >= 6 samples a chunk, so that its
# PID schedule decides (the first five samples of a chunk are taken at once); w = 3 gives M = 1.
CASES = [
    ("dsat", 3, 4, 120, USERS),
    ("dsat", 12, 4, 200, USERS),
    ("adapub", 3, 4, 60, USERS),
    ("adapub", 4, 3, 60, USERS),
    ("pegasus", 3, 4, 60, USERS),
    ("fast-w", 3, 4, 60, USERS),
    ("fast-w", 100, 4, 400, USERS),
    ("rescuedp", 3, 4, 60, USERS),
    # 100 users over 8 cells: cells predicted below TAU_1 = 30, so RescueDP groups them
    ("rescuedp", 5, 8, 150, 100),
]


def _pop(w: int, eps: Fraction = Fraction(1), users: int = USERS) -> Population:
    return Population.from_classes({Fixed(w, Budget(eps)): users})


def _stream(seed: int, d: int, slots: int, users: int = USERS) -> SyntheticStream:
    return SyntheticStream("sin", slots, [users], seed, d)


def _same(batch_releases: Any, exact: Any) -> None:
    """Releases slot by slot to 1e-9 relative, and the slot counts by status."""
    rel = np.stack([r.release for r in exact.records])
    assert np.allclose(batch_releases, rel, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("name", "w", "d", "slots", "users"), CASES)
def test_one_run_draws_what_run_mechanism_draws(
    name: str, w: int, d: int, slots: int, users: int
) -> None:
    pop = _pop(w, users=users)
    for seed in (1, 2):
        exact = run_mechanism(name, pop, _stream(seed, d, slots, users), slots=slots, seed=seed)
        batch = run_batch(
            name,
            pop,
            _stream(seed, d, slots, users),
            slots=slots,
            runs=1,
            seed=seed,
            noise="numpy",
            keep_releases=True,
        )
        assert batch.releases is not None and batch.label == BATCH_LABEL
        _same(batch.releases[0], exact)
        truth = np.stack([r.truth for r in exact.records])
        assert (batch.truth == truth).all()
        for status in ("published", "skipped", "nullified"):
            assert int(getattr(batch, status)[0]) == exact.count(status)
        errors = exact.errors()
        for metric in ("amre", "amse", "mae"):
            assert getattr(batch, metric)[0] == pytest.approx(errors[metric], rel=1e-9)
        assert int(batch.near_zero[0]) == 0


def test_the_cases_exercise_each_path() -> None:
    """The cases above reach what each path decides: dsat and fast-w skip and nullify slots,
    fast-w's PID schedule runs (a sample decided by the schedule, not by the first five), and
    rescuedp skips slots and groups cells."""
    dsat = run_mechanism("dsat", _pop(3), _stream(1, 4, 120), slots=120, seed=1)
    assert dsat.count("skipped") > 0 and dsat.count("nullified") > 0
    scheduled = []
    original = fast_module.FastPath._schedule

    def spy(self: fast_module.FastPath) -> None:
        scheduled.append(self._next)
        original(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_module.FastPath, "_schedule", spy)
        fast = run_mechanism("fast-w", _pop(100), _stream(1, 4, 400), slots=400, seed=1)
    assert scheduled and fast.count("skipped") > 0
    # rescuedp: its PID skips slots, and the 100-user case groups cells (a group of two or more)
    sizes: list[int] = []
    original_groups = rescuedp.groups_of

    def spy_groups(history: Any) -> Any:
        out = original_groups(history)
        sizes.extend(len(g) for g in out)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rescuedp, "groups_of", spy_groups)
        rescue = run_mechanism(
            "rescuedp", _pop(5, users=100), _stream(1, 8, 150, 100), slots=150, seed=1
        )
    assert max(sizes) >= 2 and rescue.count("skipped") > 0


def test_adapub_published_draws_what_run_mechanism_draws() -> None:
    """adapub's ``published`` variant (the code's rule without the clip; the gate proves it)."""
    assert batch_variants("adapub") == ("sound", "published")
    exact = run_mechanism("adapub", _pop(3), _stream(1, 4, 60), slots=60, seed=1)
    plain = run_mechanism(
        "adapub", _pop(3), _stream(1, 4, 60), slots=60, seed=1, variant="published"
    )
    batch = run_batch(
        "adapub",
        _pop(3),
        _stream(1, 4, 60),
        slots=60,
        runs=1,
        seed=1,
        noise="numpy",
        keep_releases=True,
        variant="published",
    )
    assert batch.releases is not None
    _same(batch.releases[0], plain)
    _same(batch.releases[0], exact)  # the clip never binds: the same run


# ---------------------------------------------------------------------- lane by lane


def _noise_rng(seed: int) -> np.random.Generator:
    """The noise generator `run_mechanism` builds at ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[1])


def _per_lane_noise(monkeypatch: pytest.MonkeyPatch, seeds: list[int]) -> None:
    """Each lane draws from the noise generator of its own exact run (lane r: ``seeds[r]``), in
    the shape that run draws."""
    gens = [_noise_rng(s) for s in seeds]

    def per_lane(self: Any, rng: Any, scale: Any, shape: tuple[int, ...], rows: Any) -> Any:
        out = np.empty(shape)
        for i, r in enumerate(rows):
            out[..., i] = gens[int(r)].laplace(0.0, float(scale[i]), size=shape[:-1])
        return out

    def ragged(self: Any, rng: Any, scale: Any, counts: Any, rows: Any) -> Any:
        parts = [
            gens[int(r)].laplace(0.0, float(scale[i]), size=int(counts[i]))
            for i, r in enumerate(rows)
        ]
        return np.concatenate(parts)

    monkeypatch.setattr(lanes_module._Lanes, "_noise", per_lane)
    monkeypatch.setattr(RescueLanes, "_ragged_noise", ragged)


FACTORS = [Fraction(1), Fraction(1, 2), Fraction(2), Fraction(1), Fraction(3, 2)]


def lane_mismatches(
    name: str, w: int, d: int, slots: int, users: int, mp: pytest.MonkeyPatch
) -> list[int]:
    """The lanes of a batch of five (seeds 3..7, budget factors `FACTORS`) whose releases or
    slot counts differ from the exact run at that seed and budget on the same histograms."""
    seeds = [3, 4, 5, 6, 7]
    hists = batch_histograms(_stream(1, d, slots, users), slots, 1)
    exact = [
        run_mechanism(name, _pop(w, f, users), FixedStream(hists), slots=slots, seed=s)
        for s, f in zip(seeds, FACTORS, strict=True)
    ]
    _per_lane_noise(mp, seeds)
    batch = run_batch(
        name, _pop(w, users=users), hists, slots=slots, runs=5, factors=FACTORS, keep_releases=True
    )
    assert batch.releases is not None
    bad = []
    for r, x in enumerate(exact):
        rel = np.stack([s.release for s in x.records])
        same = np.allclose(batch.releases[r], rel, rtol=1e-9, atol=1e-9)
        counts = all(
            int(getattr(batch, k)[r]) == x.count(k) for k in ("published", "skipped", "nullified")
        )
        if not (same and counts):
            bad.append(r)
    return bad


@pytest.mark.parametrize(("name", "w", "d", "slots", "users"), CASES)
def test_every_lane_is_the_exact_run_of_its_seed_and_budget(
    name: str, w: int, d: int, slots: int, users: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert lane_mismatches(name, w, d, slots, users, monkeypatch) == []


# Mutants of the lane paths, each a plausible slip; the lane check above rejects every one.


def _dsat_redraws_threshold(mp: pytest.MonkeyPatch) -> None:
    """DSAT draws a fresh threshold at every test (the exact path draws it once per run)."""
    original = DsatLanes.dissimilarity

    def redraw(self: DsatLanes, t: int, rows: Any, *args: Any) -> Any:
        if t > 1:
            self.threshold[rows] = np.nan
        return original(self, t, rows, *args)

    mp.setattr(DsatLanes, "dissimilarity", redraw)


def _dsat_feedback_reversed(mp: pytest.MonkeyPatch) -> None:
    """DSAT's feedback (Lines 6-8) moves the threshold up where the error is <= 0 (and down
    otherwise): `DsatLanes.decide` with its two branches swapped."""

    def reversed_(self: DsatLanes, t: int, rows: Any, dis: Any, scale: Any) -> Any:
        w = self.window
        thr = self.threshold[rows]
        ask = ~(np.isnan(dis) | np.isnan(thr))
        if t <= w + 1:
            count = self.total[rows]
        else:
            count = self.cum[(t - 2) % (w + 1), rows] - self.cum[(t - w - 1) % (w + 1), rows]
        error = (count // (t - 1)).astype(np.float64) - self.rate
        u = np.abs(np.abs(error) - dsat.TOLERANCE) / dsat.TOLERANCE * dsat.GAIN
        moved = np.where(
            error <= 0, np.minimum(dsat.THRESHOLD_MAX, thr + u), np.maximum(0.0, thr - u)
        )
        self.threshold[rows] = np.where(ask, moved, thr)
        return ~ask | (dis >= moved)

    mp.setattr(DsatLanes, "decide", reversed_)


def _adapub_skips_deviation(mp: pytest.MonkeyPatch) -> None:
    """AdaPub answers the deviation without its noise (it is never read, but drawn)."""
    mp.setattr(AdaPubLanes, "dissimilarity", lambda self, t, rows, *a: np.zeros(len(rows)))


def _pegasus_tests_groups(mp: pytest.MonkeyPatch) -> None:
    """PeGaSus draws the grouper's test noise (the grouping path, not the registered one)."""

    def grouper(
        self: PegasusLanes, t: int, rows: Any, s: Any, last: Any, scale: Any, rng: Any
    ) -> Any:
        return self._noise(rng, scale, (len(rows),), rows)

    mp.setattr(PegasusLanes, "dissimilarity", grouper)


def _fast_keeps_p(mp: pytest.MonkeyPatch) -> None:
    """FAST's Kalman step leaves P as it was after a correction."""
    original = FastLanes.publish

    def keep(self: FastLanes, t: int, rows: Any, *args: Any) -> Any:
        p = self.p[rows].copy()
        out = original(self, t, rows, *args)
        fresh = self.start[rows] != t
        self.p[rows[fresh]] = p[fresh]
        return out

    mp.setattr(FastLanes, "publish", keep)


def _fast_schedule_off_by_one(mp: pytest.MonkeyPatch) -> None:
    """FAST's scheduled sample one slot late."""
    original = FastLanes.decide

    def late(self: FastLanes, t: int, rows: Any, dis: Any, scale: Any) -> Any:
        self.next[rows] += 1
        try:
            return original(self, t, rows, dis, scale)
        finally:
            self.next[rows] -= 1

    mp.setattr(FastLanes, "decide", late)


def _fast_lane_zero_state(mp: pytest.MonkeyPatch) -> None:
    """FAST's correction reads the first lane's filter (its posterior) for every lane."""
    original = FastLanes.publish

    def shared(self: FastLanes, t: int, rows: Any, *args: Any) -> Any:
        self.posterior[:, rows] = self.posterior[:, rows[:1]]
        return original(self, t, rows, *args)

    mp.setattr(FastLanes, "publish", shared)


def _rescue_variance_new_count(mp: pytest.MonkeyPatch) -> None:
    """RescueDP's q divided by the publication count after the answer (RescuePath divides by
    the count before it, as its ``published`` is updated last)."""
    original = RescueLanes.publish

    def later(self: RescueLanes, t: int, rows: Any, *args: Any) -> Any:
        mp.setattr(
            RescueLanes,
            "_process_variance",
            lambda self, r: np.maximum(
                (self.m2[:, r] - self.noise_var[:, r]) / (self.published[r] + 1), 0.0
            ),
        )
        try:
            return original(self, t, rows, *args)
        finally:
            mp.setattr(RescueLanes, "_process_variance", plain)

    plain = RescueLanes._process_variance
    mp.setattr(RescueLanes, "publish", later)


def _rescue_never_groups(mp: pytest.MonkeyPatch) -> None:
    """RescueDP answers every cell alone (the grouping skipped)."""
    mp.setattr(RescueLanes, "_groups", lambda self, rows: None)


def _rescue_pid_last_diff_only(mp: pytest.MonkeyPatch) -> None:
    """RescueDP's PID without its integral term's other differences (the last one alone)."""
    original = RescueLanes.decide

    def short(self: RescueLanes, t: int, rows: Any, dis: Any, scale: Any) -> Any:
        kept = self.published.copy()
        self.published[:] = np.minimum(self.published, 2)  # two releases held: one difference
        try:
            return original(self, t, rows, dis, scale)
        finally:
            self.published[:] = kept

    mp.setattr(RescueLanes, "decide", short)


@pytest.mark.parametrize(
    ("case", "mutant"),
    [
        (CASES[0], _dsat_redraws_threshold),
        (CASES[1], _dsat_feedback_reversed),
        (CASES[2], _adapub_skips_deviation),
        (CASES[4], _pegasus_tests_groups),
        (CASES[6], _fast_keeps_p),
        (CASES[6], _fast_schedule_off_by_one),
        (CASES[6], _fast_lane_zero_state),
        (CASES[7], _rescue_variance_new_count),
        (CASES[8], _rescue_never_groups),
        (CASES[8], _rescue_pid_last_diff_only),
    ],
)
def test_the_lane_check_rejects_mutants(
    case: tuple[str, int, int, int, int],
    mutant: Callable[[pytest.MonkeyPatch], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mutant(monkeypatch)
    assert lane_mismatches(*case, monkeypatch) != []


def dsat_decide_mismatches(w: int, pattern: list[bool], seed: int = 1) -> list[int]:
    """Slots where `DsatLanes` (one lane) and `DsatPath` part ways when both are driven through
    the calls the runner makes, publishing where ``pattern`` says (slot 1 always), fed the same
    generator's noise: their decisions or thresholds. A pattern publishing at slots 2 and 3,
    which the kernel nullifies, reaches the counts' feedback (``count // (t - 1) > 0``), which
    no run of the kernel reaches (the count stays below t - 1)."""
    d = 4
    exact, lanes = dsat.DsatPath(d, window=w), DsatLanes(1, d, "numpy", w)
    rng_e, rng_l = np.random.default_rng(seed), np.random.default_rng(seed)
    row = np.array([0])
    hist = np.array([5, 0, 3, 9])
    last_e, last_l = np.zeros(d), np.zeros((d, 1))
    bad = []
    for t, publish in enumerate([True, *pattern], start=1):
        scale = np.array([0.1 * t])
        dis_e = exact.dissimilarity(t, hist, last_e, float(scale[0]), rng_e)
        dis_l = lanes.dissimilarity(t, row, hist[:, None], last_l, scale, rng_l)
        if t > 1:
            go_e = exact.decide(t, dis_e, 0.0, 1.0)
            go_l = bool(lanes.decide(t, row, dis_l, scale)[0])
            same = exact.threshold == pytest.approx(float(lanes.threshold[0]), abs=1e-12)
            if go_e != go_l or not same:
                bad.append(t)
        if publish:
            last_e = exact.publish(t, hist, 1.0, rng_e)
            last_l = lanes.publish(t, row, hist[:, None], np.ones(1), rng_l)
        lanes.end(t)
    return bad


@pytest.mark.parametrize("w", [3, 5, 12])
def test_dsat_feedback_counts_as_the_exact_path(w: int) -> None:
    rng = np.random.default_rng(w)
    for pattern in ([True] * 40, list(rng.random(60) < 0.8), list(rng.random(60) < 0.4)):
        assert dsat_decide_mismatches(w, pattern) == []


def test_dsat_feedback_check_rejects_a_shifted_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutants: the count ring written one slot late (the window [t-w+1, t-1]), and the first
    window's count one too many; the check above rejects both."""
    monkeypatch.setattr(
        DsatLanes,
        "end",
        lambda self, t: self.cum.__setitem__((t + 1) % (self.window + 1), self.total),
    )
    assert dsat_decide_mismatches(5, [True] * 40) != []
    monkeypatch.undo()
    original = DsatLanes.publish

    def extra(self: DsatLanes, t: int, rows: Any, *args: Any) -> Any:
        if t == 1:
            self.total[rows] += 1
        return original(self, t, rows, *args)

    monkeypatch.setattr(DsatLanes, "publish", extra)
    assert dsat_decide_mismatches(5, [True] + [False] * 20) != []  # slot 4: 3 // 3, not 2 // 3


# ---------------------------------------------------------------------- many lanes


@pytest.mark.parametrize("name", ["adapub", "pegasus"])
def test_many_runs_agree_with_exact_runs_in_distribution(name: str) -> None:
    """The batch's own noise (``fast``, one generator for every lane) against 40 exact runs
    (tests/test_batch.py's check: means and spreads of AMRE and published count, the lanes'
    independence)."""
    assert distribution_failures(name) == []


@pytest.mark.parametrize("name", ["dsat", "fast-w", "rescuedp"])
def test_many_runs_agree_with_exact_runs_in_amre(name: str) -> None:
    """dsat and fast-w against 40 exact runs, AMRE's mean and spread only: on this stream the
    40 exact dsat runs all publish 40 times while about 1 batch run in 100 publishes 39 (a
    skipped test shifts its later publications), so a published count, or publications slot by
    slot, estimated from 40 runs cannot be compared; fast-w's releases change between its
    publications (the filter's prior), which tests/test_batch.py's lane check reads as
    publications; rescuedp's PID schedule shifts a run's later publications as dsat's does.
    The lane-by-lane test above holds each lane to its exact run."""
    hists = batch_histograms(_stream(1, 4, 120), 120, 1)
    e_amre, _, _ = _exact_runs(name, hists)
    batch = run_batch(name, _pop(3), hists, slots=120, runs=2000, seed=5)
    assert _agrees(list(batch.amre), e_amre) and _spread_agrees(list(batch.amre), e_amre)
    # the control: twice the budget in every run is told apart
    doubled = run_batch(
        name, _pop(3), hists, slots=120, runs=2000, seed=5, factors=[Fraction(2)] * 2000
    )
    assert not _agrees(list(doubled.amre), e_amre)


# ---------------------------------------------------------------------- what is refused


def test_dsat_streamdp_code_is_refused() -> None:
    """The code's own DSAT rule overspends (`wevent gate dsat --variant streamdp-code` refutes
    it): a batch, which has no guard, refuses it before any slot."""
    with pytest.raises(BatchUnsupported, match=r"proves sound, for dsat: sound"):
        run_batch("dsat", _pop(3), _stream(1, 4, 10), slots=10, runs=2, variant="streamdp-code")
    assert run_batch("dsat", _pop(3), _stream(1, 4, 10), slots=10, runs=2).runs == 2


def test_rescuedp_published_is_refused() -> None:
    """rescuedp runs its ``sound`` variant only: the gate was run on that one (docs/allocators.md:
    18 min 44 s at the default scope on the earlier rounding, w <= 4 on the current one);
    ``published`` (the exact room, proved by `wevent prove allocator rescuedp --variant
    published` only if someone runs it) is refused, as every unchecked variant."""
    assert "rescuedp" in LANE_PATHS and batch_variants("rescuedp") == ("sound",)
    with pytest.raises(BatchUnsupported, match=r"proves sound, for rescuedp: sound"):
        run_batch("rescuedp", _pop(3), _stream(1, 4, 10), slots=10, runs=2, variant="published")


def test_a_dsat_window_the_scales_do_not_give_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lanes take the kernel's w; were slot 1's scales to give another (the exact path's
    w), the batch refuses rather than run another rule."""
    monkeypatch.setattr(dsat, "window_from_scales", lambda d, n, p: 7)  # a mutant recovery
    with pytest.raises(BatchUnsupported, match="w = 7"):
        run_batch("dsat", _pop(3), _stream(1, 4, 10), slots=10, runs=2)


def test_rescuedp_a_room_far_below_eps_is_the_exact_run_or_flagged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counts swinging between 0 and 10^12 make RescueDP publish at every slot of a 400-slot
    window, so its room shrinks by about 14 % a slot, to 10^-26 eps. The kernel rounds the room
    comparing budgets with budgets (a unitless share was snapped to 0 by the batch from 2^-24,
    and compared against a tolerance in budget units from 2^-36): a batch of one equals the
    exact run at every slot until the first slot whose budget falls within the batch's tolerance
    of 0, which `near_zero` flags; it never differs silently."""
    w = slots = 400
    hists = np.zeros((slots, 1, 2), dtype=np.int64)
    hists[::2] = 10**12
    pop = _pop(w, users=100)
    flagged: list[int] = []
    real_near_zero = batch_near_zero  # what run_lanes calls (imported from batch.py)

    def spy(alg: Any, plan: Any, t: int) -> Any:
        hit = real_near_zero(alg, plan, t)
        if hit.any():
            flagged.append(t)
        return hit

    monkeypatch.setattr(lanes_module, "near_zero", spy)
    exact = run_mechanism("rescuedp", pop, FixedStream(hists), slots=slots, seed=1)
    batch = run_batch(
        "rescuedp", pop, hists, slots=slots, runs=1, seed=1, noise="numpy", keep_releases=True
    )
    assert batch.releases is not None
    rel = np.stack([r.release for r in exact.records])
    differ = ~np.isclose(batch.releases[0], rel, rtol=1e-9, atol=1e-9).all(axis=1)
    first_diff = int(np.flatnonzero(differ)[0]) + 1 if differ.any() else None
    assert exact.count("published") == 186
    # the rounding of a unitless share departed at slot 113, 43 slots before any flag
    assert flagged and first_diff is not None and first_diff >= flagged[0] > 150
    assert int(batch.near_zero[0]) == len(flagged) > 0
    assert (flagged[0], first_diff, len(flagged)) == (156, 156, 240)  # batch.py's docstring


def test_near_zero_counts_the_lanes_whose_budgets_fall_into_the_tolerance() -> None:
    """dsat with w = 333 spends about eps / 666 a slot; a lane at budget factor 1/1000 next to
    one at 10^6 has budgets below the batch's tolerance (2^-36 of the largest budget): every one
    of its 30 slots is counted, and no slot of the other lanes."""
    factors = [Fraction(1, 3), Fraction(7, 11), Fraction(1, 1000), Fraction(1000), Fraction(10**6)]
    batch = run_batch("dsat", _pop(333), _stream(1, 4, 30), slots=30, runs=5, factors=factors)
    assert batch.near_zero.tolist() == [0, 0, 30, 0, 0]
    assert "1 of 5 runs with a budget within the tolerance of 0" in batch.describe()


def test_fast_w_schedule_steps_far_below_int64_are_the_exact_runs_steps() -> None:
    """fast-w's PID can ask for a step of -5 e^700 (its exponent just below the cap); the
    lanes clip it before the int64 cast (no RuntimeWarning, here an error) and keep the exact
    path's interval (Python ints): one run draws what run_mechanism draws."""
    pop = _pop(120, users=300)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        exact = run_mechanism("fast-w", pop, _stream(1, 5, 3000, 300), slots=3000, seed=1)
        batch = run_batch(
            "fast-w",
            pop,
            _stream(1, 5, 3000, 300),
            slots=3000,
            runs=1,
            seed=1,
            noise="numpy",
            keep_releases=True,
        )
    assert batch.releases is not None
    _same(batch.releases[0], exact)
    assert int(batch.published[0]) == exact.count("published")


@pytest.mark.parametrize(
    ("name", "w", "d", "slots", "users", "coupled"),
    [
        ("uniform", 3, 4, 60, USERS, False),
        ("bd", 3, 4, 120, USERS, True),
        ("dsat", 3, 4, 120, USERS, False),
        ("adapub", 3, 4, 60, USERS, False),
        ("pegasus", 3, 4, 60, USERS, False),
        ("fast-w", 100, 4, 400, USERS, True),
        ("rescuedp", 5, 8, 150, 100, True),
    ],
)
def test_the_shared_generator_ties_a_run_to_the_rest_of_its_batch(
    name: str, w: int, d: int, slots: int, users: int, coupled: bool
) -> None:
    """What batch.py's docstring ("The stream") and docs/performance.md say of the batch's one
    noise generator: run 0's noise changes when the batch gains a run, and where a slot draws
    for the publishing (sampling) runs only, changing run 0's budget factor moves the others."""
    hists = batch_histograms(_stream(1, d, slots, users), slots, 1)
    pop = _pop(w, users=users)
    f = [Fraction(1), Fraction(1, 2), Fraction(2), Fraction(1), Fraction(3, 2)]

    def releases(factors: list[Fraction]) -> Any:
        out = run_batch(
            name,
            pop,
            hists,
            slots=slots,
            runs=len(factors),
            factors=factors,
            seed=9,
            keep_releases=True,
        ).releases
        assert out is not None
        return out

    five = releases(f)
    assert not np.array_equal(releases(f[:4])[0], five[0])
    moved = releases([Fraction(7), *f[1:]])
    assert any(not np.array_equal(moved[i], five[i]) for i in range(1, 5)) == coupled
