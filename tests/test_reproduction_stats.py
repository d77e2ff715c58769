"""Means with 95% intervals and the verdicts they support (wevent.experiments.stats)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wevent.experiments import stats


def test_t_quantile_matches_the_closed_forms_and_the_normal_limit() -> None:
    # one degree of freedom is Cauchy: tan(pi (p - 1/2)); two: (2p - 1) / sqrt(2 p (1 - p))
    assert stats.t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-9)
    assert stats.t_quantile(0.975, 2) == pytest.approx(
        0.95 / math.sqrt(2 * 0.975 * 0.025), rel=1e-9
    )
    assert stats.t_quantile(0.9, 2) == pytest.approx(0.8 / math.sqrt(2 * 0.9 * 0.1), rel=1e-9)
    assert stats.t_quantile(0.975, 100_000) == pytest.approx(1.959964, abs=1e-4)
    assert stats.t_quantile(0.5, 7) == pytest.approx(0.0, abs=1e-12)
    # far in the tails too (a numerical integral of the density misses them by factors)
    for p in (0.9995, 0.9999, 0.99999, 0.999999):
        assert stats.t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
        two = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
        assert stats.t_quantile(p, 2) == pytest.approx(two, rel=1e-9)


@pytest.mark.parametrize(
    ("df", "want"),
    # R's qt(0.975, df) to 15 digits
    [(3, 3.18244630528371), (4, 2.77644510519779), (9, 2.26215716279820), (30, 2.04227245630124)],
)
def test_t_quantile_matches_published_quantiles(df: int, want: float) -> None:
    assert stats.t_quantile(0.975, df) == pytest.approx(want, rel=1e-12)


@given(st.integers(1, 60), st.floats(0.55, 0.995))
def test_t_quantiles_shrink_with_more_freedom(df: int, p: float) -> None:
    assert stats.t_quantile(p, df + 1) < stats.t_quantile(p, df)
    assert stats.t_quantile(p, df) < stats.t_quantile(min(p + 0.004, 0.999), df)


def test_t_quantile_refuses_what_it_cannot_answer() -> None:
    with pytest.raises(ValueError, match="degree"):
        stats.t_quantile(0.975, 0)
    with pytest.raises(ValueError, match="outside"):
        stats.t_quantile(0.2, 3)


def test_one_value_has_no_interval_and_decides_nothing() -> None:
    iv = stats.interval([0.3])
    assert iv.mean == 0.3 and iv.n == 1
    assert math.isnan(iv.std) and math.isnan(iv.low) and math.isnan(iv.high)
    assert stats.verdict(iv) == stats.INCONCLUSIVE
    assert stats.interval([]).n == 0 and stats.verdict(stats.interval([])) == stats.INCONCLUSIVE
    assert stats.interval([math.nan, 2.0]).n == 1  # NaN runs are left out


def test_verdicts_follow_the_side_of_zero_the_interval_is_on() -> None:
    assert stats.verdict(stats.interval([0.1, 0.2, 0.15])) == stats.HOLDS
    assert stats.verdict(stats.interval([-0.1, -0.2, -0.15])) == stats.FAILS
    assert stats.verdict(stats.interval([0.3, -0.1, 0.2])) == stats.INCONCLUSIVE
    assert stats.verdict(stats.interval([0.0, 0.0])) == stats.INCONCLUSIVE  # no reduction at all


def _coverage(quantile: float, n: int, trials: int) -> float:
    rng = np.random.default_rng(7)
    x = rng.normal(1.0, 2.0, size=(trials, n))
    half = quantile * x.std(axis=1, ddof=1) / math.sqrt(n)
    mean = x.mean(axis=1)
    return float(np.mean((mean - half <= 1.0) & (mean + half >= 1.0)))


def test_the_interval_covers_the_mean_95_percent_of_the_time() -> None:
    """Normal samples of 3 and of 5: the t interval covers the true mean about 95% of the time,
    and the normal quantile 1.96 in its place (a mutant) covers markedly less."""
    for n in (3, 5):
        got = _coverage(stats.t_quantile(0.975, n - 1), n, 40_000)
        assert 0.94 < got < 0.96
        assert _coverage(1.959964, n, 40_000) < 0.90  # the control: too narrow with few repeats


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=20))
def test_the_interval_holds_the_mean_and_widens_with_the_spread(values: list[float]) -> None:
    iv = stats.interval(values)
    assert iv.n == len(values)
    assert iv.low <= iv.mean <= iv.high
    wider = stats.interval([2 * v for v in values])
    assert wider.high - wider.low == pytest.approx(2 * (iv.high - iv.low), rel=1e-9, abs=1e-6)
