"""004's offline competitors (`wevent.mechanisms.exsub_competitors`): each randomizer's output
distribution against its stated probabilities, eps-LDP checked exhaustively on tiny inputs,
the estimators' means, and mutated mechanisms that these checks catch."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pytest

from wevent.accounting.budget import BudgetError
from wevent.mechanisms import exsub_competitors as C

IntArray = npt.NDArray[np.int64]
SLACK = 1 + 1e-9  # float rounding of the probabilities (all computed in double precision)
SIGMAS = 5.0


def _inputs(d_prime: int, s: int) -> list[tuple[int, ...]]:
    """Every ternary vector of d' entries with exactly s of them +-1."""
    out = []
    for support in itertools.combinations(range(d_prime), s):
        for signs in itertools.product((-1, 1), repeat=s):
            x = [0] * d_prime
            for j, b in zip(support, signs, strict=True):
                x[j] = b
            out.append(tuple(x))
    return out


def _rows(x: tuple[int, ...], n: int) -> IntArray:
    return np.tile(np.array(x, np.int64), (n, 1))


def _agree(counts: dict[tuple[int, ...], int], probs: dict[tuple[int, ...], float], n: int) -> None:
    """Every outcome's frequency within SIGMAS binomial standard deviations of its probability
    (and no outcome of probability 0 seen)."""
    assert math.isclose(sum(probs.values()), 1.0, rel_tol=1e-9)
    for out in counts:
        assert probs.get(out, 0.0) > 0, f"outcome {out} has probability 0"
    for out, p in probs.items():
        sd = math.sqrt(p * (1 - p) / n)
        assert abs(counts.get(out, 0) / n - p) <= SIGMAS * sd + 1e-12, (out, counts.get(out), p)


# --- Collision ---------------------------------------------------------------------------


def _collision_hit_pattern_probs(
    mech: C.Collision, x: tuple[int, ...]
) -> dict[tuple[int, ...], float]:
    """P[the server's hit map] by enumerating every hash of the 2 d' symbols."""
    d_prime = len(x)
    symbols = [j if b > 0 else j + d_prime for j, b in enumerate(x) if b != 0]
    out: dict[tuple[int, ...], float] = {}
    for h in itertools.product(range(mech.t), repeat=2 * d_prime):
        held = frozenset(h[i] for i in symbols)
        for z in range(mech.t):
            pat = tuple(int(v == z) for v in h)
            out[pat] = out.get(pat, 0.0) + mech.bucket_probability(z, held) / mech.t ** len(h)
    return out


def collision_worst_ratio(mech: C.Collision, d_prime: int) -> float:
    """max over hashes h, buckets z and inputs x, x' of P[z | h, x] / P[z | h, x'] (the hash
    is public and independent of the data), checking each P[. | h, x] sums to 1."""
    worst = 0.0
    xs = _inputs(d_prime, mech.s)
    for h in itertools.product(range(mech.t), repeat=2 * d_prime):
        rows = []
        for x in xs:
            held = frozenset(h[j if b > 0 else j + d_prime] for j, b in enumerate(x) if b)
            row = [mech.bucket_probability(z, held) for z in range(mech.t)]
            assert math.isclose(sum(row), 1.0, rel_tol=1e-9)
            assert min(row) >= 0
            rows.append(row)
        for z in range(mech.t):
            col = [r[z] for r in rows]
            worst = max(worst, max(col) / min(col))
    return worst


@pytest.mark.parametrize(("d_prime", "s", "eps"), [(2, 1, Fraction(1)), (2, 2, Fraction(1, 10))])
def test_collision_is_eps_ldp_over_every_hash_input_and_output(
    d_prime: int, s: int, eps: Fraction
) -> None:
    mech = C.Collision(s, eps)
    assert collision_worst_ratio(mech, d_prime) <= math.exp(float(eps)) * SLACK


@dataclass(frozen=True)
class _LouderCollision(C.Collision):
    """Negative control: the held buckets weighted e^(2 eps) with the same t."""

    @property
    def weight(self) -> float:
        return math.exp(2 * float(self.eps))

    @property
    def t(self) -> int:
        return int(self.s * math.exp(float(self.eps)) + 2 * self.s - 1)


def test_collision_ldp_check_catches_a_louder_weight() -> None:
    eps = Fraction(1)
    assert collision_worst_ratio(_LouderCollision(1, eps), 2) > math.exp(float(eps)) * 1.5


@pytest.mark.parametrize(
    ("x", "eps"), [((1, 0), Fraction(1)), ((1, -1), Fraction(1, 10)), ((-1, 1), Fraction(1, 10))]
)
def test_collision_hit_maps_follow_the_stated_probabilities(
    x: tuple[int, ...], eps: Fraction
) -> None:
    s = sum(1 for v in x if v)
    mech = C.Collision(s, eps)
    n = 200_000
    hits = C.collision_hits(_rows(x, n), s, eps, np.random.default_rng(1))
    pats, counts = np.unique(hits.astype(np.int64), axis=0, return_counts=True)
    got = {tuple(int(v) for v in p): int(k) for p, k in zip(pats, counts, strict=True)}
    _agree(got, _collision_hit_pattern_probs(mech, x), n)


def test_collision_estimates_are_unbiased_within_their_standard_error() -> None:
    rng = np.random.default_rng(7)
    s, n = 2, 200_000
    for eps in (Fraction(1, 2), Fraction(3)):
        mech = C.Collision(s, eps)
        x = (1, 0, -1, 0, 0, 0)
        est = C.collision_estimates(_rows(x, n), s, eps, rng)
        # Var(hit_+ - hit_-) <= P[hit_+] + P[hit_-] <= true rate + false rate
        se = math.sqrt((mech.true_rate + mech.false_rate) / n) / (mech.true_rate - mech.false_rate)
        assert np.all(np.abs(est.mean(axis=0) - np.array(x)) <= SIGMAS * se), eps


# --- FutureRand --------------------------------------------------------------------------


def _futurerand_probs(mech: C.FutureRand, x: tuple[int, ...]) -> dict[tuple[int, ...], float]:
    """P[report y | x] for every y in {-1, 1}^d' from the stated closed form."""
    out = {}
    for y in itertools.product((-1, 1), repeat=len(x)):
        h = sum(1 for a, b in zip(x, y, strict=True) if a != 0 and a != b)
        out[y] = mech.report_probability(h, len(x))
    return out


def futurerand_worst_ratio(mech: C.FutureRand, d_prime: int) -> float:
    tables = [_futurerand_probs(mech, x) for x in _inputs(d_prime, mech.s)]
    for t in tables:
        assert math.isclose(sum(t.values()), 1.0, rel_tol=1e-9)
    return max(max(t[y] for t in tables) / min(t[y] for t in tables) for y in tables[0])


def futurerand_class_ratio(mech: C.FutureRand) -> float:
    """The worst ratio when d' >= 2 s (every pair of reversal counts reachable): the report
    probability depends on the input only through the count h."""
    c = mech.clipped_ratios()
    return max(c) / min(c)


@pytest.mark.parametrize("eps", [Fraction(1, 1000), Fraction(1), Fraction(5)])
def test_futurerand_is_eps_ldp_over_every_input_and_report(eps: Fraction) -> None:
    assert futurerand_worst_ratio(C.FutureRand(2, eps), 4) <= math.exp(float(eps)) * SLACK
    for s in (8, 100):  # 100: the clip binds (it does from s = 25)
        assert futurerand_class_ratio(C.FutureRand(s, eps)) <= math.exp(float(eps)) * SLACK


@dataclass(frozen=True)
class _WideClip(C.FutureRand):
    """Negative control: the ratio to the uniform report clipped at e^+-eps (not eps/2)."""

    def clipped_ratios(self) -> list[float]:
        p, e = self.keep, float(self.eps)
        return [
            math.exp(
                min(
                    e,
                    max(
                        -e, self.s * math.log(2) + (self.s - h) * math.log(p) + h * math.log(1 - p)
                    ),
                )
            )
            for h in range(self.s + 1)
        ]


@dataclass(frozen=True)
class _LoudEntry(_WideClip):
    @property
    def eps_entry(self) -> float:
        return 4 * float(self.eps)


def test_futurerand_ldp_checks_catch_a_clip_twice_as_wide() -> None:
    eps = Fraction(1)
    assert futurerand_worst_ratio(_LoudEntry(2, eps), 4) > math.exp(float(eps)) * 1.5
    assert futurerand_class_ratio(_WideClip(100, eps)) > math.exp(float(eps)) * 1.5


def test_the_authors_futurerand_truncation_is_not_eps_ldp() -> None:
    # futurerand.py re-draws only the reversed entries outside its window; a report reversing
    # every non-zero entry is then far less likely than under an input with other support
    for s, eps in ((8, Fraction(1)), (100, Fraction(1, 1000))):
        assert C.authors_futurerand_ratio(s, eps) > math.exp(float(eps)) * 100


def _authors_final_reversal_sets(s: int, eps: Fraction) -> dict[tuple[int, ...], float]:
    """P[the set of non-zero entries finally reported reversed] under the authors' truncation
    read as reporting signs, by enumerating the first-pass reversal sets: each entry reversed
    independently with p = 1 / (e^eps' + 1); a set whose size is outside
    [s p - 2 sqrt(s), (s / eps') ln(2 e^eps' / (e^eps' + 1))] has each of its entries
    re-drawn by a fair coin (``futurerand.py`` lines 35-38, 80-89), the rest kept."""
    e1 = float(eps) / (5 * math.sqrt(s))
    p = 1 / (math.exp(e1) + 1)
    lo, hi = s * p - 2 * math.sqrt(s), s / e1 * math.log(2 * math.exp(e1) / (math.exp(e1) + 1))
    final: dict[tuple[int, ...], float] = {}
    for first in itertools.product((0, 1), repeat=s):
        k = sum(first)
        mass = p**k * (1 - p) ** (s - k)
        if lo <= k <= hi:
            final[first] = final.get(first, 0.0) + mass
            continue
        flipped = [i for i in range(s) if first[i]]
        for keep in itertools.product((0, 1), repeat=k):  # 1: still reversed after the coin
            out = [0] * s
            for i, b in zip(flipped, keep, strict=True):
                out[i] = b
            final[tuple(out)] = final.get(tuple(out), 0.0) + mass / 2**k
    return final


@pytest.mark.parametrize("eps", [Fraction(1, 1000), Fraction(1), Fraction(5)])
def test_the_authors_futurerand_worst_ratio_matches_an_enumeration_of_reversal_sets(
    eps: Fraction,
) -> None:
    """At s = 8: a report's probability is 2^-(d' - s) P[final reversal set]; flipping the
    input's signs reaches every set, so the worst ratio is max over min of the 2^8 sets."""
    final = _authors_final_reversal_sets(8, eps)
    assert len(final) == 2**8
    assert math.isclose(sum(final.values()), 1.0, rel_tol=1e-12)
    exact = max(final.values()) / min(final.values())
    assert math.isclose(C.authors_futurerand_ratio(8, eps), exact, rel_tol=1e-9)
    assert math.log(exact) > float(eps) + 4  # over 50 times e^eps


def test_futurerand_reports_follow_the_stated_probabilities() -> None:
    eps, n = Fraction(5), 200_000
    for x in ((1, 0, -1), (0, -1, -1)):
        mech = C.FutureRand(2, eps)
        y = C.futurerand_reports(_rows(x, n), 2, eps, np.random.default_rng(3))
        pats, counts = np.unique(y, axis=0, return_counts=True)
        got = {tuple(int(v) for v in p): int(k) for p, k in zip(pats, counts, strict=True)}
        _agree(got, _futurerand_probs(mech, x), n)


@dataclass(frozen=True)
class _HotEntry(C.FutureRand):
    """A FutureRand whose per-entry budget is 4 eps (not eps / (5 sqrt(s))), so that the clip
    to [e^-eps/2, e^eps/2] binds hard at s = 3: w(0) ~ e^2.0 is cut to e^0.5 and every other
    w(h) is raised to e^-0.5. Still eps-LDP (its report probabilities are the clipped ones)."""

    @property
    def eps_entry(self) -> float:
        return 4 * float(self.eps)


def _plain_reversals(mech: C.FutureRand) -> list[float]:
    """P[h reversals] of per-entry response at mech.eps_entry with no clip."""
    p = mech.keep
    return [math.comb(mech.s, h) * p ** (mech.s - h) * (1 - p) ** h for h in range(mech.s + 1)]


def test_futurerand_sampler_follows_the_clipped_probabilities_where_the_clip_binds() -> None:
    """Every report of {-1, 1}^4 for two inputs with s = 3, against `report_probability`;
    SIGMAS binomial standard deviations at n draws. The clipped and unclipped reversal
    distributions differ by far more than that tolerance (checked), so a sampler that draws
    h from the plain binomial fails here."""
    eps, n = Fraction(1), 100_000
    mech = _HotEntry(3, eps)
    clipped, plain = mech.reversal_probabilities(), _plain_reversals(mech)
    assert max(abs(a - b) for a, b in zip(clipped, plain, strict=True)) > 0.5
    for x, seed in (((1, -1, 0, 1), 13), ((0, -1, -1, -1), 14)):
        y = C.sample_futurerand(_rows(x, n), mech, np.random.default_rng(seed))
        pats, counts = np.unique(y, axis=0, return_counts=True)
        got = {tuple(int(v) for v in p): int(k) for p, k in zip(pats, counts, strict=True)}
        _agree(got, _futurerand_probs(mech, x), n)


@dataclass(frozen=True)
class _TwoReversals(C.FutureRand):
    """Structural probe: a reversal distribution with all its mass on h = 2."""

    def reversal_probabilities(self) -> list[float]:
        return [1.0 if h == 2 else 0.0 for h in range(self.s + 1)]


def test_futurerand_sampler_draws_the_reversal_count_from_reversal_probabilities() -> None:
    x = (1, 0, -1, 1, 0, -1, 0)
    n = 2_000
    y = C.sample_futurerand(_rows(x, n), _TwoReversals(4, Fraction(1)), np.random.default_rng(2))
    R = np.array(x)
    reversed_count = ((y != R[None, :]) & (R != 0)[None, :]).sum(axis=1)
    assert set(reversed_count.tolist()) == {2}
    # every one of the C(4, 2) = 6 reversal sets appears (a uniform choice of the 2)
    assert len({tuple(r) for r in ((y != R[None, :]) & (R != 0)[None, :]).tolist()}) == 6
    # and futurerand_reports is this sampler at FutureRand(s, eps): same draws, same seed
    a = C.futurerand_reports(_rows(x, 50), 4, Fraction(2), np.random.default_rng(4))
    b = C.sample_futurerand(_rows(x, 50), C.FutureRand(4, Fraction(2)), np.random.default_rng(4))
    assert np.array_equal(a, b)


def test_futurerand_estimates_are_unbiased_within_their_standard_error() -> None:
    rng = np.random.default_rng(11)
    n = 200_000
    for s, eps in ((2, Fraction(5)), (30, Fraction(3))):
        x = tuple([1, -1] * (s // 2) + [0] * 4)
        est = C.futurerand_estimates(_rows(x, n), s, eps, rng)
        se = 1 / abs(2 * C.FutureRand(s, eps).agreement - 1) / math.sqrt(n)  # |y| = 1
        assert np.all(np.abs(est.mean(axis=0) - np.array(x)) <= SIGMAS * se), (s, eps)


@pytest.mark.parametrize(
    ("eps", "first"),
    [
        (Fraction(1, 1000), 25),
        (Fraction(1), 25),
        (Fraction(3), 24),
        (Fraction(5), 23),
        (Fraction(10), 21),
    ],
)
def test_futurerand_reversal_probabilities_sum_to_one_and_where_the_clip_binds(
    eps: Fraction, first: int
) -> None:
    """ln w(h) stays inside +-eps/2 up to s = first - 1 and leaves it at s = first (the eps^2
    term of ln(2 (1 - p)) moves the threshold down as eps grows)."""
    for s in (8, first - 1, first, 100):
        mech = C.FutureRand(s, eps)
        assert math.isclose(sum(mech.reversal_probabilities()), 1.0, rel_tol=1e-12)
        unclipped = [2**s * mech.keep ** (s - h) * (1 - mech.keep) ** h for h in range(s + 1)]
        same = all(
            math.isclose(a, b) for a, b in zip(unclipped, mech.clipped_ratios(), strict=True)
        )
        assert same == (s < first), s


# --- SUCCINCT ----------------------------------------------------------------------------


def _laplace_density(y: float, mu: float, scale: float) -> float:
    return math.exp(-abs(y - mu) / scale) / (2 * scale)


def succinct_worst_ratio(mech: C.Succinct, d_prime: int) -> float:
    """max over public signs g, inputs x, x' and reports y on a grid (the extremes included)
    of the density ratio of y under x and x'."""
    ys = np.linspace(-4 * mech.clip - 10 * mech.scale, 4 * mech.clip + 10 * mech.scale, 201)
    worst = 0.0
    xs = _inputs(d_prime, mech.s)
    for g in itertools.product((-1, 1), repeat=d_prime):
        centres = sorted(
            {
                max(-mech.clip, min(mech.clip, sum(a * b for a, b in zip(x, g, strict=True))))
                for x in xs
            }
        )
        for y in ys:
            dens = [_laplace_density(float(y), c, mech.scale) for c in centres]
            worst = max(worst, max(dens) / min(dens))
    return worst


@pytest.mark.parametrize(("s", "users"), [(2, 10), (3, 10_000)])
def test_succinct_is_eps_ldp_over_every_sign_input_and_report(s: int, users: int) -> None:
    for eps in (Fraction(1, 100), Fraction(1), Fraction(5)):
        mech = C.Succinct(s, eps, users)
        assert succinct_worst_ratio(mech, 4) <= math.exp(float(eps)) * SLACK


@dataclass(frozen=True)
class _HalfScale(C.Succinct):
    """Negative control: Laplace scale D / eps, half the sensitivity's."""

    @property
    def scale(self) -> float:
        return self.clip / float(self.eps)


def test_succinct_ldp_check_catches_half_the_noise() -> None:
    eps = Fraction(1)
    assert succinct_worst_ratio(_HalfScale(3, eps, 10_000), 4) > math.exp(float(eps)) * 1.5


def test_succinct_reports_follow_the_stated_distribution() -> None:
    eps, users, n = Fraction(1), 10_000, 200_000
    mech = C.Succinct(3, eps, users)
    x = (1, 0, -1, 1)
    g, v = C.succinct_reports(_rows(x, n), 3, eps, np.random.default_rng(5), users)
    assert set(np.unique(g)) == {-1, 1}
    assert abs(g.mean()) <= SIGMAS / math.sqrt(g.size)
    centre = np.clip((g * np.array(x)).sum(axis=1), -mech.clip, mech.clip)
    noise = v - centre
    for q in (-2.0, -0.5, 0.0, 0.7, 3.0):  # Laplace(scale) distribution function at q scales
        p = 0.5 * math.exp(q) if q < 0 else 1 - 0.5 * math.exp(-q)
        got = float((noise <= q * mech.scale).mean())
        assert abs(got - p) <= SIGMAS * math.sqrt(p * (1 - p) / n), q


@pytest.mark.parametrize(("s", "users"), [(2, 10_000), (8, 10_000)])
def test_succinct_estimates_have_mean_gain_times_the_entry(s: int, users: int) -> None:
    """gain = 1 when the clip D >= s (s = 2: D ~ 1.72... < 2, so both cases shrink a little);
    the tolerance from Var(g_j v) <= E[v^2] <= D^2 + 2 scale^2."""
    eps, n = Fraction(3), 200_000
    mech = C.Succinct(s, eps, users)
    gain = C.succinct_gain(s, mech.clip)
    x = tuple([1, -1] * (s // 2) + [0] * 3)
    est = C.succinct_estimates(_rows(x, n), s, eps, np.random.default_rng(9), users)
    se = math.sqrt((mech.clip**2 + 2 * mech.scale**2) / n)
    assert np.all(np.abs(est.mean(axis=0) - gain * np.array(x)) <= SIGMAS * se)


def test_succinct_gain_is_one_when_nothing_is_clipped_and_below_otherwise() -> None:
    assert C.succinct_gain(8, 8.0) == 1.0
    assert C.succinct_gain(1, 1.0) == 1.0
    assert 0 < C.succinct_gain(8, C.Succinct(8, Fraction(1), 10_000).clip) < 1
    # restated: E[clip(1 + W)] over the 2^(s-1) sign patterns
    for s, clip in ((4, 1.5), (5, 2.2)):
        pats = itertools.product((-1, 1), repeat=s - 1)
        direct = sum(max(-clip, min(clip, 1 + sum(p))) for p in pats) / 2 ** (s - 1)
        assert math.isclose(C.succinct_gain(s, clip), direct)


# --- shared ------------------------------------------------------------------------------

ESTIMATORS: dict[str, Callable[[IntArray, int, Fraction, np.random.Generator], object]] = {
    "collision": C.collision_estimates,
    "futurerand": C.futurerand_estimates,
    "succinct": lambda R, s, eps, rng: C.succinct_estimates(R, s, eps, rng, 100),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_inputs_that_are_not_s_sparse_ternary_rows_are_refused(name: str) -> None:
    f = ESTIMATORS[name]
    rng = np.random.default_rng(0)
    with pytest.raises(BudgetError, match="exactly s = 2"):
        f(np.array([[1, 0, 0]]), 2, Fraction(1), rng)
    with pytest.raises(BudgetError, match="exactly s = 1"):
        f(np.array([[2, 0, 0]]), 1, Fraction(1), rng)
    with pytest.raises(BudgetError, match="eps > 0"):
        f(np.array([[1, 0, 0]]), 1, Fraction(0), rng)


def test_competitor_names_are_the_ones_exsub_tables_runs() -> None:
    assert C.COMPETITORS == ("collision", "succinct", "futurerand")
