"""Statistical tests of the samplers and estimators at sizes too large to enumerate.

Tolerances come from the estimators' exact variances (004 Lemma 1's per-entry terms): the mean of
N independent estimates is within Z standard deviations ``sqrt(var / N)`` of its expectation, with
Z = 5 (a false alarm has probability below 6e-7 per compared entry; the seeds are fixed, so a run
is deterministic)."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.mechanisms.exsub import (
    ExSubDesign,
    OnlineSampler,
    RandomChooser,
    SparsityExceeded,
    choose_subgroup,
    offline_sample,
)
from wevent.mechanisms.exsub_baselines import TERNARY, exsub_estimates

Z = 5.0


def _input(d: int, s: int, seed: int) -> tuple[int, ...]:
    rng = random.Random(seed)
    r = [0] * d
    for i in rng.sample(range(d), s):
        r[i] = rng.choice((1, -1))
    return tuple(r)


def _per_entry_variance(design: ExSubDesign, r: tuple[int, ...]) -> np.ndarray:
    pt, pr, pf = (float(v) for v in design.rates())
    scale = float(design.value_scale())
    nonzero = ((pt + pr) - (pt - pr) ** 2) * scale**2
    zero = 2 * pf * scale**2
    return np.array([nonzero if v else zero for v in r])


@pytest.mark.parametrize("online", [False, True])
def test_exact_samplers_are_unbiased_at_d_40(online: bool) -> None:
    design = ExSubDesign.for_budget(40, 4, Fraction(1))
    r = _input(40, 4, seed=3)
    chooser = RandomChooser(11 if online else 12)
    n = 4000
    total = np.zeros(40)
    freq = np.zeros(40)
    for _ in range(n):
        group = choose_subgroup(design, chooser)
        if online:
            sampler = OnlineSampler(design, group, chooser)
            z = sampler.run(r)
            assert sampler.complete
        else:
            z = offline_sample(design, r, group, chooser)
        assert sum(1 for v in z if v) == design.m
        total += design.estimate_values(z)
        freq += design.estimate_frequencies(z)
    sd = np.sqrt(_per_entry_variance(design, r) / n)
    assert np.all(np.abs(total / n - np.array(r)) <= Z * sd)
    # frequencies (Proposition 1): Bernoulli(p_t + p_r) or Bernoulli(2 p_f), rescaled
    pt, pr, pf = (float(v) for v in design.rates())
    den = pt + pr - 2 * pf
    var = np.array([(pt + pr) * (1 - pt - pr) if v else 2 * pf * (1 - 2 * pf) for v in r])
    assert np.all(np.abs(freq / n - np.abs(r)) <= Z * np.sqrt(var / den**2 / n))


def test_vectorized_exsub_matches_the_exact_design() -> None:
    """The experiments' vectorized ExSub: unbiased, and its total variance is 004 Lemma 1's."""
    d, s, n = 60, 5, 40000
    design = ExSubDesign.for_budget(d, s, Fraction(1, 2))
    r = np.array(_input(d, s, seed=5))
    est = exsub_estimates(np.tile(r, (n, 1)), s, Fraction(1, 2), np.random.default_rng(0))
    var = _per_entry_variance(design, tuple(int(v) for v in r))
    assert np.all(np.abs(est.mean(axis=0) - r) <= Z * np.sqrt(var / n))
    # the sample variance of the summed squared error: its own sd from the 4th moment
    sq = ((est - r) ** 2).sum(axis=1)
    assert abs(sq.mean() - float(design.value_mse())) <= Z * sq.std() / np.sqrt(n)


@pytest.mark.parametrize("name", sorted(TERNARY))
def test_every_ternary_mechanism_is_unbiased(name: str) -> None:
    d, s, n = 30, 3, 30000
    r = np.array(_input(d, s, seed=8))
    est = TERNARY[name](np.tile(r, (n, 1)), s, Fraction(1), np.random.default_rng(1))
    # tolerance from each entry's sample variance (the estimators' variances are finite)
    sd = est.std(axis=0, ddof=1) / np.sqrt(n)
    assert np.all(np.abs(est.mean(axis=0) - r) <= Z * sd + 1e-12)


def test_vectorized_mechanisms_need_exactly_s_non_zeros() -> None:
    from wevent.accounting.budget import BudgetError

    for f in TERNARY.values():
        with pytest.raises(BudgetError):
            f(np.zeros((2, 5), np.int64), 1, Fraction(1), np.random.default_rng(0))


def test_online_sampler_refuses_too_many_non_zeros() -> None:
    design = ExSubDesign(6, 2, 2, Fraction(1, 2))
    sampler = OnlineSampler(design, (1, 0), RandomChooser(0))
    sampler.step(1)
    sampler.step(-1)
    with pytest.raises(SparsityExceeded):
        sampler.step(1)
    with pytest.raises(SparsityExceeded):
        offline_sample(design, (1, 1, 1, 0, 0, 0), (1, 0), RandomChooser(0))


@settings(max_examples=40)
@given(st.integers(0, 10**6), st.integers(3, 12), st.data())
def test_online_output_is_always_exclusive_and_of_size_m(
    seed: int, d: int, data: st.DataObject
) -> None:
    s = data.draw(st.integers(1, d - 1))
    m = data.draw(st.integers(1, d))
    design = ExSubDesign(d, s, m, Fraction(1, 3))
    chooser = RandomChooser(seed)
    r = _input(d, s, seed)
    sampler = OnlineSampler(design, choose_subgroup(design, chooser), chooser)
    z = sampler.run(r)
    assert sampler.complete
    assert sum(1 for v in z if v) == m and all(v in (-1, 0, 1) for v in z)
