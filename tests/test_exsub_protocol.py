"""004 Section IV: residues (Algorithm 1), reconstruction (Algorithm 2), level weights, and the
online protocol (client, server) built on the exact sampler."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import BudgetError
from wevent.errors import InputError, SparsityExceeded
from wevent.experiments.exsub_experiment import METRICS, errors, padded_residues, range_sums
from wevent.mechanisms.exsub import RandomChooser
from wevent.mechanisms.exsub_stream import (
    ExSubClient,
    ExSubProtocol,
    ExSubServer,
    change_count,
    level_variance_factors,
    sparse_streams,
    variance_optimal_weights,
)
from wevent.mechanisms.residues import (
    level_weights,
    levels,
    reconstruct,
    reconstruction_terms,
    residues,
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    T = draw(st.integers(1, 40))
    d = draw(st.integers(1, 3))
    r = draw(st.integers(2, 4))
    bits = draw(st.lists(st.integers(0, 1), min_size=T * d, max_size=T * d))
    return np.array(bits, np.int64).reshape(T, d), r


@given(streams())
def test_reconstruction_from_exact_residues_is_the_stream(case: tuple[np.ndarray, int]) -> None:
    x, r = case
    T = x.shape[0]
    ests = [residues(x, r, h) for h in levels(T, r)]
    assert np.array_equal(reconstruct(ests, r, T), x)


@given(st.integers(1, 200), st.integers(2, 5))
def test_reconstruction_reads_only_residues_reported_by_slot_t(T: int, r: int) -> None:
    """Algorithm 2 for slot t uses residue (t'', h) only when it was reported, t'' r^h <= t, and
    at most r - 1 residues per level (004 Section IV (1) a)."""
    top = len(levels(T, r)) - 1
    for t in range(1, T + 1):
        for h, lo, hi in reconstruction_terms(t, r, top):
            assert hi * r**h <= t
            assert 1 <= hi - lo + 1 <= r - 1


def test_residues_golden() -> None:
    x = np.array([[0], [1], [1], [0], [1], [1], [1], [0]])
    assert residues(x, 2, 0)[:, 0].tolist() == [0, 1, 0, -1, 1, 0, 0, -1]
    assert residues(x, 2, 1)[:, 0].tolist() == [1, -1, 1, -1]  # x_2, x_4 - x_2, ...
    assert residues(x, 2, 3)[:, 0].tolist() == [0]  # x_8 - x_0
    assert reconstruction_terms(5, 2, 3) == [(2, 1, 1), (0, 5, 5)]  # x_5 = R_{1,2} + R_{5,0}


def test_level_weights() -> None:
    assert levels(16, 2) == [0, 1, 2, 3, 4]
    assert levels(10, 2) == [0, 1, 2, 3]  # 2^4 = 16 > 10: no residue at level 4
    assert level_weights(16, 2, "uniform") == [Fraction(1, 5)] * 5
    assert level_weights(4, 2, "range") == [Fraction(1, 7), Fraction(2, 7), Fraction(4, 7)]
    # calibrated (004 Section VI-D) with T = 4, r = 2: K = 2^h, F_h = sum_{t<=K} t^2 +
    # max(0, T - 2^{h+1} + 1) K^2, W_h proportional to F_h / 2^h: F = 1 + 3 = 4, 5 + 4 = 9, 30
    # + 0, so W is proportional to 4, 9/2, 15/2 (sum 16)
    assert level_weights(4, 2, "calibrated") == [Fraction(1, 4), Fraction(9, 32), Fraction(15, 32)]
    for kind in ("uniform", "range", "calibrated", "sqrt-calibrated"):
        ws = level_weights(128, 2, kind)
        assert sum(ws) == 1 and all(w > 0 for w in ws)
    with pytest.raises(BudgetError):
        level_weights(8, 2, "optimal")
    with pytest.raises(BudgetError):
        levels(8, 1)


@settings(max_examples=30)
@given(st.integers(0, 2**32), st.integers(1, 6), st.integers(1, 20), st.integers(1, 3))
def test_synthetic_streams_have_exactly_s_changes(seed: int, s: int, T: int, d: int) -> None:
    if s > T * d:
        return
    x = sparse_streams(5, T, d, s, np.random.default_rng(seed))
    assert set(np.unique(x)) <= {0, 1}
    assert change_count(x).tolist() == [s] * 5
    for h in levels(T, 2):
        padded = padded_residues(x, 2, h, s)
        assert ((padded != 0).sum(axis=1) == s).all()


def test_protocol_residue_estimates_are_unbiased() -> None:
    """Every client on the same stream at level 1: the server's residue averages are within
    Z = 5 standard deviations (exact per-entry variances) of the true residues."""
    protocol = ExSubProtocol(T=8, d=2, s=3)
    x = np.zeros((8, 2), np.int64)
    x[1:, 0] = 1  # dimension 0 switches on at slot 2
    x[3:6, 1] = 1  # dimension 1 on at slots 4..6
    server = ExSubServer(protocol)
    chooser = RandomChooser(7)
    n = 800
    for _ in range(n):
        client = ExSubClient(protocol, Fraction(1), chooser, level=1)
        client.start()
        server.enroll(client)
        for t in range(8):
            server.receive(client, client.observe(x[t]))
        client.finish()
        assert client.sampler is not None and client.sampler.complete
    truth = residues(x, 2, 1)
    est = server.residue_estimates()[1]
    design = protocol.design(1, Fraction(1))
    pt, pr, pf = (float(v) for v in design.rates())
    scale = float(design.value_scale())
    var = np.where(truth != 0, ((pt + pr) - (pt - pr) ** 2) * scale**2, 2 * pf * scale**2)
    assert np.all(np.abs(est - truth) <= 5 * np.sqrt(var / n))


def test_client_refuses_more_changes_than_s_and_misuse() -> None:
    protocol = ExSubProtocol(T=4, d=1, s=1)
    client = ExSubClient(protocol, Fraction(1), RandomChooser(0), level=0)
    with pytest.raises(BudgetError):
        client.observe([1])  # not started
    client.start()
    client.observe([1])
    with pytest.raises(SparsityExceeded) as got:
        client.observe([0])  # a second change: bad input named for what it is, no budget error
    assert isinstance(got.value, InputError) and not isinstance(got.value, BudgetError)
    with pytest.raises(BudgetError):
        ExSubClient(protocol, Fraction(1), RandomChooser(0), level=9)
    with pytest.raises(BudgetError):
        ExSubProtocol(T=4, d=1, s=1, weights="best")


def test_level_draw_follows_the_portions() -> None:
    protocol = ExSubProtocol(T=4, d=1, s=1, weights="range")  # 1/7, 2/7, 4/7
    chooser = RandomChooser(3)
    n = 7000
    counts = np.bincount([protocol.draw_level(chooser) for _ in range(n)], minlength=3)
    p = np.array([1, 2, 4]) / 7
    assert np.all(np.abs(counts / n - p) <= 5 * np.sqrt(p * (1 - p) / n))


def test_error_metrics() -> None:
    truth = np.zeros((3, 1))
    est = np.array([[1.0], [0.0], [-1.0]])
    m = errors(est, truth)
    assert m["mean_mse"] == pytest.approx(2 / 3)
    # ranges: [1,1]=1 [1,2]=1 [1,3]=0 [2,2]=0 [2,3]=-1 [3,3]=-1
    assert m["range_mse"] == pytest.approx(4 / 6)
    assert m["mean_tve"] == 2 and m["range_tve"] == 4
    assert m["mean_mae"] == 1 and m["range_mae"] == 1


def test_mae_is_the_largest_absolute_error_of_the_answers() -> None:
    """004 Section VI-A's MAE of the mean and range answers: the largest |error|, not the largest
    signed error nor the mean |error|; the truth against itself scores 0 in every metric."""
    truth = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    err = np.array([[-1.0, 0.0], [-1.0, 0.25], [0.5, 0.0]])
    m = errors(truth + err, truth)
    # dimension 0's ranges: [1,1]=-1 [1,2]=-2 [1,3]=-1.5 [2,2]=-1 [2,3]=-0.5 [3,3]=0.5
    assert m["mean_mae"] == 1 and m["range_mae"] == 2
    assert errors(truth, truth) == dict.fromkeys(METRICS, 0.0)
    assert range_sums(truth)[:, 0].tolist() == [1, 3, 6, 2, 5, 3]


@settings(max_examples=50)
@given(
    st.integers(1, 9),
    st.integers(1, 3),
    st.integers(0, 2**32 - 1),
)
def test_mae_bounds_the_other_metrics(T: int, d: int, seed: int) -> None:
    """Per query kind with N answers: MAE <= TVE <= N MAE and MSE <= MAE^2 (the mean |error|
    breaks the last one whenever the errors differ)."""
    rng = np.random.default_rng(seed)
    truth, est = rng.random((T, d)), rng.normal(size=(T, d))
    m = errors(est, truth)
    for kind, count in (("mean", T * d), ("range", T * (T + 1) // 2 * d)):
        mae, tve, mse = m[f"{kind}_mae"], m[f"{kind}_tve"], m[f"{kind}_mse"]
        assert 0 < mae <= tve * (1 + 1e-12) and tve <= count * mae * (1 + 1e-12)
        assert mse <= mae**2 * (1 + 1e-12)


@settings(max_examples=30)
@given(
    st.sampled_from(["mean", "range"]),
    st.lists(st.floats(0.01, 1.0), min_size=6, max_size=6),
)
def test_variance_optimal_weights_minimize_the_variance(task: str, other: list[float]) -> None:
    """No other portions (here: any point of the simplex) give a smaller sum_h c_h / W_h."""
    T, r, d, s, eps = 32, 2, 3, 4, Fraction(1)
    c = level_variance_factors(T, r, d, s, eps, task)
    best = [float(w) for w in variance_optimal_weights(T, r, d, s, eps, task)]
    assert sum(variance_optimal_weights(T, r, d, s, eps, task)) == 1
    alt = [w / sum(other) for w in other]

    def objective(ws: list[float]) -> float:
        return sum(ci / wi for ci, wi in zip(c, ws, strict=True))

    assert objective(best) <= objective(alt) * (1 + 1e-9)
    for kind in ("uniform", "calibrated"):
        assert objective(best) <= objective([float(w) for w in level_weights(T, r, kind)])


def test_mean_task_coefficients_count_algorithm_2_terms() -> None:
    # T = 4, r = 2, one ExSub variance per level: A_h for the mean task counts how often the
    # level's residues are used: x_1..x_4 use level 0 at t = 1, 3; level 1 at t = 2, 3; level 2
    # at t = 4.
    c = level_variance_factors(4, 2, 1, 1, Fraction(1), "mean")
    sigma = []
    for h, uses in zip(range(3), (2, 2, 1), strict=True):
        from wevent.mechanisms.exsub import ExSubDesign

        d_prime = 4 // 2**h + 1
        design = ExSubDesign.for_budget(d_prime, 1, Fraction(1))
        sigma.append(float(design.value_mse()) / d_prime * uses)
    assert c == pytest.approx(sigma)
    with pytest.raises(BudgetError):
        level_variance_factors(4, 2, 1, 1, Fraction(1), "median")


def test_range_mae_takes_every_range_not_only_prefixes() -> None:
    """004's range queries are all [t1, t2] (Section IV (4) c), so the MAE is over every range."""
    truth = np.zeros((3, 1))
    # ranges [1,1]=1 [1,2]=-1 [1,3]=-3 [2,2]=-2 [2,3]=-4 [3,3]=-2: the largest is no prefix
    assert errors(truth + np.array([[1.0], [-2.0], [-2.0]]), truth)["range_mae"] == 4
