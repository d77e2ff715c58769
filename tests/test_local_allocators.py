"""Local allocators: the user pool, OPS, population kernels (golden sequences of 000 and 002),
soundness through the guard for every decision sequence, and the published OPS refutation."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, Requirement
from wevent.mechanisms.allocators import LOCAL_BUDGET, POPULATION, make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import FixedClass
from wevent.mechanisms.allocators.local import population_setup
from wevent.mechanisms.allocators.population import PopulationConfig, PopulationKernel
from wevent.mechanisms.ops import OPSClass, ops, reports_within, sample_size
from wevent.mechanisms.pool import PoolExhausted, UserPool
from wevent.verifier.tracing import trace_population, trace_with_guard


def fx(w: int, eps: int | str) -> Fixed:
    return Fixed(w, Budget(eps))


# ---------------------------------------------------------------------------------------- pool


def test_pool_draws_distinct_users_and_recycles_after_r_slots() -> None:
    pool = UserPool(10, 3, np.random.default_rng(0))
    pool.release(1)
    first = pool.draw(4)
    assert len(set(first.tolist())) == 4 and pool.available == 6
    pool.release(2)
    second = pool.draw(6)
    assert not set(first.tolist()) & set(second.tolist())
    assert pool.available == 0
    pool.release(3)
    with pytest.raises(PoolExhausted, match="asked for 1 users but only 0"):
        pool.draw(1)
    assert pool.release(4) == 4  # slot 1's users are back at slot 1 + R
    assert pool.available == 4


def test_putback_returns_unused_users() -> None:
    pool = UserPool(5, 2, np.random.default_rng(1))
    pool.release(1)
    pool.draw(2)
    tried = pool.draw(2)
    pool.putback(tried)
    assert pool.available == 3 and pool.out == 2
    pool.release(2)
    with pytest.raises(BudgetError, match="current slot"):
        pool.putback(tried)


@settings(max_examples=60)
@given(
    n=st.integers(1, 40),
    recycle=st.integers(1, 6),
    asks=st.lists(st.integers(0, 15), min_size=1, max_size=25),
    seed=st.integers(0, 2**16),
)
def test_pool_never_reuses_a_user_within_the_recycle_period(
    n: int, recycle: int, asks: list[int], seed: int
) -> None:
    pool = UserPool(n, recycle, np.random.default_rng(seed))
    last: dict[int, int] = {}
    for t, k in enumerate(asks, start=1):
        pool.release(t)
        k = min(k, pool.available)
        for u in pool.draw(k).tolist():
            assert u not in last or t - last[u] >= recycle
            last[u] = t
        assert pool.available + pool.out == n


# ---------------------------------------------------------------------------------------- OPS


def test_ops_example_2_picks_z_5() -> None:
    """000 Example 2 (d = 2, sample sizes given). The paper prints errors 1.121, 0.596, 0.988,
    0.721, 1.124; Eq. 7 gives the values below (the choice z_opt = 5 agrees). We pin the
    formula's values."""
    z = [3, 5, 9, 8, 9, 5, 6, 5, 8, 9]
    eps = ["0.1", "0.4", "0.4", "0.1", "0.4", "0.4", "0.8", "0.8", "0.8", "0.4"]
    classes = [OPSClass(1, Fraction(e), 1) for e in eps]
    choice = ops(classes, 2, variant="published", sizes=z)
    assert choice.z_opt == 5
    assert [c for c, _ in choice.candidates] == [3, 5, 6, 8, 9]
    assert [round(e, 4) for _, e in choice.candidates] == [1.297, 0.7578, 0.8341, 0.8065, 1.0576]
    assert choice.splits == (2, 1, 1, 1, 1, 1, 1, 1, 1, 1)  # only z = 3 < 5 splits: ceil(5/3)


TABLE_III = {  # 000 Table III(a): (eps, w) -> users
    ("0.2", 1): 29, ("0.2", 2): 59, ("0.2", 3): 92, ("0.2", 4): 56,
    ("0.4", 1): 98, ("0.4", 2): 176, ("0.4", 3): 273, ("0.4", 4): 207,
    ("0.6", 1): 62, ("0.6", 2): 124, ("0.6", 3): 188, ("0.6", 4): 114,
    ("0.8", 1): 64, ("0.8", 2): 115, ("0.8", 3): 202, ("0.8", 4): 141,
}  # fmt: skip


@pytest.mark.parametrize("variant", ["sound", "published"])
def test_ops_example_4_table_3(variant: str) -> None:
    """000 Example 4: z~ = (1000, 500, 333, 250), errors (0.042, 0.035, 0.0329, 0.0349) by Eq. 7,
    z_opt = 333, and the w = 4 users split in 2 (Table III(b)). The published and sound splits
    agree here (R = 3, ceil(4 / 3) = 2 = ceil(333 / 250)); at z~ = 1000 they differ (R = 1: the
    sound split is w_i, the published one ceil(1000 / z_i))."""
    classes = [OPSClass(w, Fraction(e), k) for (e, w), k in TABLE_III.items()]
    choice = ops(classes, 5, variant=variant)
    assert choice.z_opt == 333 and choice.recycle == 3 and choice.w_opt == Fraction(1000, 333)
    errors = dict(choice.candidates)
    assert round(errors[500], 3) == 0.035
    assert round(errors[333], 4) == 0.0328  # paper: 0.0329
    assert round(errors[250], 4) == 0.0348  # paper: 0.0349
    assert round(errors[1000], 3) == (0.042 if variant == "published" else 0.039)
    assert choice.splits == tuple(2 if w == 4 else 1 for (_, w) in TABLE_III)


def test_published_ops_split_is_smaller_than_the_reports_possible() -> None:
    """n = 10, windows {2, 5}: z = (2, 1), z_opt = 2, R = 2; a w = 5 user can report at slots
    1, 3, 5 but the published split is ceil(2 / 1) = 2."""
    classes = [OPSClass(2, Fraction(1), 5), OPSClass(5, Fraction(1), 5)]
    published = ops(classes, 2, variant="published")
    sound = ops(classes, 2, variant="sound")
    assert published.z_opt == sound.z_opt == 2 and published.recycle == 2
    assert published.splits == (1, 2) and reports_within(5, 2) == 3
    assert sound.splits == (1, 3)


@settings(max_examples=200)
@given(
    n=st.integers(2, 400),
    windows=st.lists(st.integers(1, 60), min_size=1, max_size=4),
)
def test_sound_ops_split_covers_every_window(n: int, windows: list[int]) -> None:
    n = max(n, len(windows) + 1)
    counts = [n - len(windows) + 1] + [1] * (len(windows) - 1)
    classes = [OPSClass(w, Fraction(1), k) for w, k in zip(windows, counts, strict=True)]
    if all(sample_size(n, w) == 0 for w in windows):
        with pytest.raises(BudgetError, match="n >= 2w"):
            ops(classes, 3)
        return
    choice = ops(classes, 3)
    assert 2 * choice.z_opt * choice.recycle <= n  # dissimilarity users out at once <= n/2
    for c, k in zip(classes, choice.splits, strict=True):
        # the most reports R apart in any w consecutive slots, by placing them greedily
        most = len(range(0, c.w, choice.recycle))
        assert most <= k
        assert most * (c.eps / k) <= c.eps


# ------------------------------------------------------------------ population kernels (golden)


def _sizes(
    name: str, pop: Population, decisions: list[bool], variant: str = "sound"
) -> list[tuple[str, int, int]]:
    trace = trace_population(name, pop, decisions, variant=variant, d=5)
    assert trace.ok, trace.refusal or trace.shortage
    return [
        (s.status, len(s.sampled.get("dissimilarity", ())), len(s.sampled.get("publication", ())))
        for s in trace.slots
    ]


def test_lpd_allocates_n_over_4_n_over_8() -> None:
    """002 Section 6.3.2: publications take N/4, N/8, ... of the users within a window."""
    pop = Population.from_classes({fx(10, 1): 1600})
    sizes = _sizes("lpd", pop, [True] * 4)
    assert [p for _, _, p in sizes] == [400, 200, 100, 50]
    assert all(z == 80 for _, z, _ in sizes)  # floor(N / (2w))


def test_lbd_allocates_eps_over_4_eps_over_8() -> None:
    """002 Algorithm 1: publication budgets eps/4, eps/8, ... and eps/(2w) for dissimilarity."""
    kernel = make_kernel("lbd", ExactAlgebra(), [FixedClass(10, Fraction(1))])
    trace = run_trace(kernel, [True] * 3)
    assert [s.publication[0] for s in trace] == [Fraction(1, 4), Fraction(1, 8), Fraction(1, 16)]
    assert all(s.dissimilarity[0] == Fraction(1, 20) for s in trace)


def _example_6_population() -> Population:
    # 000 Example 6: 1000 users, windows up to 4 (only w_max and n matter for PLPD/PLPA sizes).
    return Population.from_classes({fx(4, "0.2"): 350, fx(2, "0.8"): 650})


def test_plpd_example_6() -> None:
    """000 Example 6: z_min = 125; publications of 250 and 125 users at slots 1-2, none at
    slot 3, and floor((500 - 375) / 2) = 62 at slot 4."""
    sizes = _sizes("plpd", _example_6_population(), [True, True, False, True])
    assert sizes == [
        ("published", 125, 250),
        ("published", 125, 125),
        ("skipped", 125, 0),
        ("published", 125, 62),
    ]


def test_plpa_example_7() -> None:
    """000 Example 7: slot 1 absorbs two units (t_N = -1, t_A = 2): 250 users; slot 2 is
    nullified. The paper prints t_N = 250 / 125 = 2 at slot 2, dropping Algorithm 6 line 4's
    "- 1"; with it t_N = 1 and t - l = 1 <= 1, so the slot is nullified either way."""
    sizes = _sizes("plpa", _example_6_population(), [True, True, True])
    assert sizes[:2] == [("published", 125, 250), ("nullified", 125, 0)]
    assert sizes[2] == ("published", 125, 125)  # t_A = 3 - 1 - 1 = 1 unit


def _example_4_population() -> Population:
    return Population.from_classes({fx(w, e): k for (e, w), k in TABLE_III.items()})


def test_plpd_plus_example_4() -> None:
    """000 Example 4: z_opt = 333; a publication of 500 at slot 1, none at slot 2 (the candidate
    is floor(500 / 2) = 250; the paper then says "samples 125", a slip), 250 at slot 3, and 251
    users left in the pool after slot 3 (1084 once slot 1's users return at slot 4)."""
    trace = trace_population("plpd+", _example_4_population(), [True, False, True, True], d=5)
    assert trace.ok
    got = [(s.status, len(s.sampled.get("publication", ()))) for s in trace.slots]
    assert got[:3] == [("published", 500), ("skipped", 0), ("published", 250)]
    assert all(len(s.sampled["dissimilarity"]) == 333 for s in trace.slots)
    assert trace.slots[3].available == 251 + 333 + 500  # slot 1's users back at slot 4


def test_plpa_plus_example_5() -> None:
    """000 Example 5: 666 users at slot 1 (t_A = 2), slot 2 nullified (t_N = 1), 333 at slot 3."""
    trace = trace_population("plpa+", _example_4_population(), [True, True, True], d=5)
    got = [(s.status, len(s.sampled.get("publication", ()))) for s in trace.slots]
    assert got == [("published", 666), ("nullified", 0), ("published", 333)]


def test_plpa_plus_published_absorbs_fractional_w_opt() -> None:
    """Published PLPA+ caps absorption at the fractional w_opt = 1000/333 (floor(333 * w_opt) =
    1000 users); the sound variant caps it at the integer recycle period R = 3 (999 users)."""
    pop = _example_4_population()
    decisions = [False] * 5 + [True]
    published = trace_population("plpa+", pop, decisions, variant="published", d=5)
    sound = trace_population("plpa+", pop, decisions, variant="sound", d=5)
    assert len(published.slots[-1].sampled["publication"]) == 1000
    assert len(sound.slots[-1].sampled["publication"]) == 999
    assert published.ok and sound.ok


def test_population_needs_n_at_least_2w() -> None:
    pop = Population.from_classes({fx(6, 1): 5})
    for name in ("lpd", "plpa", "plpd+"):
        with pytest.raises(BudgetError, match=r"n >= 2w|needs at least"):
            trace_population(name, pop, [True])


def test_published_ops_rejects_windows_beyond_n_over_2() -> None:
    pop = Population.from_classes({fx(1, 1): 4, fx(5, 1): 4})
    with pytest.raises(BudgetError, match="exceeds n/2"):
        trace_population("plpd+", pop, [True], variant="published")
    assert trace_population("plpd+", pop, [True, True, True]).ok  # sound: split ceil(5/R)


def test_population_config_rejects_zero_sample() -> None:
    with pytest.raises(BudgetError, match="needs n >= 2w"):
        PopulationConfig(
            n=3, rule="distribution", unit=0, recycle=2, capacity=1, absorb_cap=Fraction(2)
        )


# ----------------------------------------------------------- soundness: every decision sequence


@st.composite
def small_populations(draw: st.DrawFn) -> Population:
    k = draw(st.integers(1, 3))
    reqs: dict[Requirement, int] = {}
    for _ in range(k):
        w = draw(st.integers(1, 7))
        eps = draw(st.sampled_from(["1", "0.3", "2", "1/3"]))
        reqs[fx(w, eps)] = draw(st.integers(1, 12))
    return Population.from_classes(reqs)


@settings(max_examples=40)
@given(
    name=st.sampled_from(POPULATION),
    pop=small_populations(),
    decisions=st.lists(st.booleans(), min_size=1, max_size=16),
    seed=st.integers(0, 1000),
)
def test_sound_population_allocators_pass_the_guard(
    name: str, pop: Population, decisions: list[bool], seed: int
) -> None:
    try:
        trace = trace_population(name, pop, decisions, seed=seed)
    except BudgetError as exc:  # too few users for the windows: refused up front
        assert "n >= 2w" in str(exc) or "needs at least" in str(exc)
        return
    assert trace.ok, trace.refusal or trace.shortage
    cfg = trace.setup.config
    assert all(s.available >= 0 for s in trace.slots)
    assert cfg.unit * cfg.recycle <= cfg.n  # LPU: n/R per slot; others 2 z R <= n


@settings(max_examples=30)
@given(
    name=st.sampled_from(LOCAL_BUDGET),
    pop=small_populations(),
    decisions=st.lists(st.booleans(), min_size=1, max_size=20),
)
def test_budget_division_allocators_pass_the_guard(
    name: str, pop: Population, decisions: list[bool]
) -> None:
    assert trace_with_guard(name, pop, decisions).ok


def test_population_cap_never_binds_in_the_sound_variant() -> None:
    """On the sound kernel's own history, the uncapped requests (the same arithmetic without the
    pool cap: the published kernel with the sound absorption limit R) always fit the pool, and
    the sound requests equal them."""
    alg = ExactAlgebra()
    rng = np.random.default_rng(3)
    populations = [{3: 7, 5: 13}, {3: 14}, {1: 3, 4: 9, 6: 12}]
    for name in POPULATION:
        for counts in populations:
            windows = sorted(counts)
            classes = [FixedClass(w, Fraction(1)) for w in windows]
            setup = population_setup(name, classes, [counts[w] for w in windows], 2)
            cfg = setup.config
            uncapped_cfg = PopulationConfig(
                cfg.n, cfg.rule, cfg.unit, cfg.recycle, cfg.capacity, Fraction(cfg.recycle)
            )
            sound = PopulationKernel(name, alg, cfg, "sound")
            uncapped = PopulationKernel(name, alg, uncapped_cfg, "published")
            state = sound.start()
            for t in range(1, 40):
                draw, raw = sound.plan(state, t), uncapped.plan(state, t)
                raw_pub = raw.publication if not raw.nullified else Fraction(0)
                assert raw.dissimilarity + max(raw_pub, Fraction(0)) <= raw.available
                assert draw.dissimilarity == raw.dissimilarity
                if not draw.nullified:
                    assert draw.publication == raw.publication
                else:  # nullified by the rule itself, or because nobody is left (u_min)
                    assert raw.nullified or raw.publication < cfg.u_min
                publish = (not draw.nullified and bool(rng.random() < 0.6)) or bool(draw.forced)
                state = sound.step(state, t, draw, publish)


# ------------------------------------------------------------ published OPS: regression fixture


def test_published_ops_breaks_a_window_and_sound_does_not() -> None:
    """Found by the property search: n = 10, windows {2, 5}, every slot publishing. Published
    PLPD+ recycles every 2 slots but splits the w = 5 budget in 2 only, so a w = 5 user drawn at
    slots 1, 3 and 5 spends 3/2 in the window [1, 5]; the guard refuses at slot 5."""
    pop = Population.from_classes({fx(2, 1): 5, fx(5, 1): 5})
    decisions = [True] * 8
    for name in ("plpd+", "plbd-ops"):
        published = trace_population(name, pop, decisions, variant="published")
        assert published.refusal is not None and published.failed_slot is not None
        assert published.refusal.window.kind == "fixed"
        assert published.refusal.window.bound == 1
        assert published.refusal.window.spent + published.refusal.asked > 1
        assert trace_population(name, pop, decisions, variant="sound").ok


def test_search_finds_the_published_ops_counterexample() -> None:
    """The smallest counterexample in a systematic search (n, then windows, then class sizes;
    every slot publishing) is the regression fixture's shape: n = 10, windows {2, 5}. The sound
    variant passes every population the search tried."""
    found = None
    for n in range(2, 13):
        for w1, w2 in itertools.combinations(range(1, 7), 2):
            for k1 in range(1, n):
                pop = Population.from_classes({fx(w1, 1): k1, fx(w2, 1): n - k1})
                decisions = [True] * (2 * w2)
                try:
                    sound = trace_population("plpd+", pop, decisions)
                except BudgetError:  # every window longer than n/2: refused up front
                    continue
                assert sound.ok
                try:
                    published = trace_population("plpd+", pop, decisions, variant="published")
                except BudgetError:  # a window beyond n/2: the published split is undefined
                    continue
                if published.refusal is not None:
                    found = (n, w1, w2, k1, published.failed_slot)
                    break
            if found:
                break
        if found:
            break
    assert found == (10, 2, 5, 2, 5)


def test_putback_of_nothing_is_a_no_op() -> None:
    pool = UserPool(4, 2, np.random.default_rng(0))
    pool.release(1)
    pool.draw(2)
    pool.draw(0)
    pool.putback(np.zeros(0, np.int64))
    assert pool.available == 2 and pool.out == 2


def test_trace_draws_only_users_who_can_report() -> None:
    """Users with eps = 0 are outside the pool in a trace exactly as in a run (the trace and the
    runner share `Reporters`), and the pool size is the kernel's n."""
    pop = Population.from_classes({fx(3, 1): 12, fx(3, 0): 6})
    trace = trace_population("plpd", pop, [True] * 9)
    assert trace.ok and trace.setup.config.n == 12
    assert trace.slots[0].available == 12
    drawn = {u for s in trace.slots for users in s.sampled.values() for u in users}
    eps_of = {u: r.eps for u, r in pop.items() if isinstance(r, Fixed)}
    assert drawn and all(eps_of[u] > 0 for u in drawn)
