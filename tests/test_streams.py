"""Input streams: the synthetic sequences of 001 Section 6.1 and CSV observation streams."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.streams import (
    SYNTHETIC_KINDS,
    CsvStream,
    Stream,
    SyntheticStream,
    probability_sequence,
)

# ---------------------------------------------------------------------------------------------
# synthetic streams (001 Section 6.1)


def test_sin_matches_the_formula() -> None:
    t = np.arange(1, 501, dtype=np.float64)
    p = probability_sequence("sin", 500, np.random.default_rng(0))
    np.testing.assert_array_equal(p, 0.05 * np.sin(0.01 * t) + 0.075)
    assert p.dtype == np.float64 and p.shape == (500,)


def test_log_matches_the_formula() -> None:
    t = np.arange(1, 501, dtype=np.float64)
    p = probability_sequence("log", 500, np.random.default_rng(0))
    np.testing.assert_array_equal(p, 0.25 / (1 + np.exp(-0.01 * t)))


def test_sin_and_log_do_not_use_the_generator() -> None:
    for kind in ("sin", "log"):
        a = probability_sequence(kind, 50, np.random.default_rng(1))
        b = probability_sequence(kind, 50, np.random.default_rng(2))
        np.testing.assert_array_equal(a, b)


def test_lns_is_a_clipped_random_walk_from_0_05() -> None:
    p = probability_sequence("lns", 2000, np.random.default_rng(7))
    steps = np.random.default_rng(7).normal(0.0, 0.0025, size=2000)
    assert p[0] == min(1.0, max(0.0, 0.05 + steps[0]))
    prev = 0.05
    for t in range(2000):
        prev = min(1.0, max(0.0, prev + steps[t]))
        assert p[t] == prev
    assert ((p >= 0) & (p <= 1)).all()


def test_lns_clipping_continues_from_the_clipped_value() -> None:
    # Starting at 0.05 with sd 0.0025 the walk reaches 0 within 100000 steps for this seed.
    p = probability_sequence("lns", 100_000, np.random.default_rng(3))
    assert ((p >= 0) & (p <= 1)).all()
    zeros = np.flatnonzero(p == 0.0)
    assert len(zeros) > 0  # the clip is exercised
    steps = np.random.default_rng(3).normal(0.0, 0.0025, size=100_000)
    t = int(zeros[0])
    if t + 1 < len(p):
        assert p[t + 1] == max(0.0, steps[t + 1])


def test_lns_same_seed_same_sequence_different_seed_different() -> None:
    a = SyntheticStream("lns", 300, [10], seed=1).probabilities
    b = SyntheticStream("lns", 300, [10], seed=1).probabilities
    c = SyntheticStream("lns", 300, [10], seed=2).probabilities
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(a, probability_sequence("lns", 300, np.random.default_rng(1)))


def test_probabilities_are_read_only() -> None:
    p = SyntheticStream("sin", 10, [1], seed=0).probabilities
    with pytest.raises(ValueError):
        p[0] = 0.5


@pytest.mark.parametrize("kind", SYNTHETIC_KINDS)
def test_histograms_rows_sum_to_class_sizes(kind: str) -> None:
    sizes = [100, 0, 7, 2500]
    stream = SyntheticStream(kind, 40, sizes, seed=5)
    assert isinstance(stream, Stream)
    assert stream.domain == 2 and stream.slots == 40 and stream.classes == 4
    rng = np.random.default_rng(11)
    for slot in range(1, 41):
        h = stream.histograms(slot, rng)
        assert h.shape == (4, 2) and h.dtype == np.int64
        assert h.sum(axis=1).tolist() == sizes
        assert (h >= 0).all()
        assert h[1].tolist() == [0, 0]


def test_histograms_reproducible_with_the_same_rng_seed() -> None:
    stream = SyntheticStream("log", 20, [50, 60], seed=0)
    a = [stream.histograms(t, np.random.default_rng(42)) for t in range(1, 21)]
    b = [stream.histograms(t, np.random.default_rng(42)) for t in range(1, 21)]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    for t in range(1, 21):
        np.testing.assert_array_equal(stream.histograms(t, g1), stream.histograms(t, g2))


@pytest.mark.parametrize("kind", SYNTHETIC_KINDS)
def test_mean_fraction_of_ones_is_p_t(kind: str) -> None:
    n, draws = 1000, 4000
    stream = SyntheticStream(kind, 300, [n], seed=4)
    rng = np.random.default_rng(2024)
    for slot in (1, 150, 300):
        p = float(stream.probabilities[slot - 1])
        frac = np.array([stream.histograms(slot, rng)[0, 1] / n for _ in range(draws)])
        se = np.sqrt(p * (1 - p) / (n * draws))
        assert abs(frac.mean() - p) < 5 * se + 1e-12


def test_synthetic_validation() -> None:
    with pytest.raises(BudgetError, match="lns, sin, log"):
        SyntheticStream("tlns", 10, [1], seed=0)
    with pytest.raises(BudgetError, match="lns, sin, log"):
        probability_sequence("cos", 10, np.random.default_rng(0))
    for slots in (0, -3):
        with pytest.raises(BudgetError, match="at least one slot"):
            SyntheticStream("sin", slots, [1], seed=0)
    with pytest.raises(BudgetError, match="non-negative"):
        SyntheticStream("sin", 10, [3, -1], seed=0)
    stream = SyntheticStream("sin", 10, [3], seed=0)
    rng = np.random.default_rng(0)
    for slot in (0, 11, -1):
        with pytest.raises(BudgetError, match=r"outside the stream's slots 1\.\.10"):
            stream.histograms(slot, rng)
    assert stream.histograms(np.int64(10), rng).shape == (1, 2)  # type: ignore[arg-type]


def test_no_classes_gives_an_empty_histogram() -> None:
    h = SyntheticStream("sin", 3, [], seed=0).histograms(1, np.random.default_rng(0))
    assert h.shape == (0, 2) and h.dtype == np.int64


# ---------------------------------------------------------------------------------------------
# CSV streams


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


CLASSES = {"alice": 0, "bob": 1, "carol": 0, "dave": 1}

ROUND_TRIP = """user,slot,value
alice,1,0
bob,1,2
carol,1,0

dave,2,1
alice,3,2
carol,3,1
bob,3,2
"""


def test_csv_round_trip(tmp_path: Path) -> None:
    stream = CsvStream.load(write(tmp_path / "obs.csv", ROUND_TRIP), CLASSES, 2)
    assert isinstance(stream, Stream)
    assert (stream.slots, stream.classes, stream.domain) == (3, 2, 3)
    rng = np.random.default_rng(0)
    h1 = stream.histograms(1, rng)
    assert h1.dtype == np.int64 and h1.shape == (2, 3)
    assert h1.tolist() == [[2, 0, 0], [0, 0, 1]]
    # Only dave reports at slot 2: the others contribute nothing there.
    assert stream.histograms(2, rng).tolist() == [[0, 0, 0], [0, 1, 0]]
    assert stream.histograms(3, rng).tolist() == [[0, 1, 1], [0, 0, 1]]
    # histograms returns a copy: the stream stays as loaded
    h1[0, 0] = 99
    assert stream.histograms(1, rng)[0, 0] == 2


def test_csv_explicit_domain_and_idle_slots(tmp_path: Path) -> None:
    path = write(tmp_path / "obs.csv", "user,slot,value\nalice,4,1\n")
    stream = CsvStream.load(path, CLASSES, 3, domain=5)
    assert (stream.slots, stream.classes, stream.domain) == (4, 3, 5)
    rng = np.random.default_rng(0)
    for slot in (1, 2, 3):
        assert not stream.histograms(slot, rng).any()
    assert stream.histograms(4, rng).tolist() == [[0, 1, 0, 0, 0], [0] * 5, [0] * 5]
    inferred = CsvStream.load(path, CLASSES, 3)
    assert inferred.domain == 2


def test_csv_domain_of_all_zero_values_is_one(tmp_path: Path) -> None:
    stream = CsvStream.load(write(tmp_path / "z.csv", "user,slot,value\nbob,1,0\n"), CLASSES, 2)
    assert stream.domain == 1
    assert stream.histograms(1, np.random.default_rng(0)).tolist() == [[0], [1]]


def test_csv_is_deterministic_and_checks_slots(tmp_path: Path) -> None:
    stream = CsvStream.load(write(tmp_path / "obs.csv", ROUND_TRIP), CLASSES, 2)
    a = stream.histograms(3, np.random.default_rng(1))
    b = stream.histograms(3, np.random.default_rng(2))
    np.testing.assert_array_equal(a, b)
    for slot in (0, 4):
        with pytest.raises(BudgetError, match=r"outside the stream's slots 1\.\.3"):
            stream.histograms(slot, np.random.default_rng(0))


def test_csv_accepts_crlf_bom_quotes_and_padded_integers(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_bytes(b'\xef\xbb\xbfuser,slot,value\r\n"alice",1, 1\r\n"x,y",2,0\r\n')
    stream = CsvStream.load(path, {"alice": 0, "x,y": 0}, 1)
    assert stream.counts.tolist() == [[[0, 1]], [[1, 0]]]


def one_line_error(path: Path, *args: object, **kwargs: object) -> str:
    with pytest.raises(BudgetError) as info:
        CsvStream.load(path, *args, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    assert str(path) in message
    return message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty file"),
        ("user,slot,value\n", "empty file"),
        ("user,time,value\nalice,1,0\n", ":1: expected the header user,slot,value"),
        ("user,slot\nalice,1\n", ":1: expected the header"),
        ("user,slot,value,extra\nalice,1,0,0\n", ":1: expected the header"),
        ("user,slot,value\nalice,1,0\nbob,2\n", ":3: expected 3 fields"),
        ("user,slot,value\nalice,1,0\nbob,1,0,7\n", ":3: expected 3 fields"),
        ("user,slot,value\nalice,1,0\n\nbob,x,0\n", ":4: slot: expected an integer, got 'x'"),
        ("user,slot,value\nalice,1.5,0\n", ":2: slot: expected an integer, got '1.5'"),
        ("user,slot,value\nalice,,0\n", ":2: slot: expected an integer, got ''"),
        ("user,slot,value\nalice,1,0.0\n", ":2: value: expected an integer, got '0.0'"),
        ("user,slot,value\nalice,1,NA\n", ":2: value: expected an integer, got 'NA'"),
        ("user,slot,value\nalice,99999999999999999999,0\n", ":2: slot: expected an integer"),
        ("user,slot,value\nalice,1,0\nbob,0,0\n", ":3: slot: slots are numbered from 1"),
        ("user,slot,value\nalice,-2,0\n", ":2: slot: slots are numbered from 1"),
        ("user,slot,value\nalice,1,0\nbob,1,-1\n", ":3: value: values are non-negative"),
        ("user,slot,value\nalice,1,0\n,1,0\n", ":3: empty user id"),
        (
            "user,slot,value\nalice,1,0\n\nmallory,1,0\n",
            ":4: user 'mallory' has no declared requirement",
        ),
        (
            "user,slot,value\nalice,1,0\nbob,1,0\nalice,2,0\nalice,1,1\n",
            ":5: user 'alice' has a second row for slot 1 (the first is at line 2)",
        ),
        ("user,slot,value\nalice,100000000000000,0\n", "too large to hold densely"),
    ],
)
def test_csv_errors_are_one_line_and_name_the_file(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path / "bad.csv", text)
    assert expected in one_line_error(path, CLASSES, 2)


def test_csv_value_outside_the_given_domain(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "user,slot,value\nalice,1,1\nbob,1,3\n")
    assert ":3: value: 3 is outside the domain 0..2" in one_line_error(path, CLASSES, 2, domain=3)
    assert CsvStream.load(path, CLASSES, 2, domain=4).domain == 4


def test_csv_reports_the_earliest_problem(tmp_path: Path) -> None:
    text = "user,slot,value\nalice,1,0\nmallory,1,0\nbob,0,0\nalice,1,0\n"
    assert ":3: user 'mallory'" in one_line_error(write(tmp_path / "e.csv", text), CLASSES, 2)


def test_csv_missing_file_directory_and_binary(tmp_path: Path) -> None:
    assert "no such file" in one_line_error(tmp_path / "missing.csv", CLASSES, 2)
    assert "a directory, not a regular file" in one_line_error(tmp_path, CLASSES, 2)
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"user,slot,value\nalice,1,0\n\xff\xfe,1,0\n")
    assert ":3: not UTF-8 text" in one_line_error(binary, CLASSES, 2)
    binary.write_bytes(b"\xff\xfe\x00\x00garbage")
    assert ":1: not UTF-8 text" in one_line_error(binary, CLASSES, 2)


def test_csv_argument_validation(tmp_path: Path) -> None:
    path = write(tmp_path / "obs.csv", ROUND_TRIP)
    with pytest.raises(BudgetError, match="domain must be a positive integer"):
        CsvStream.load(path, CLASSES, 2, domain=0)
    with pytest.raises(BudgetError, match="number of classes"):
        CsvStream.load(path, CLASSES, -1)
    with pytest.raises(BudgetError, match=r"maps user 'bob' to 1, not a class index in 0\.\.0"):
        CsvStream.load(path, CLASSES, 1)


# ---------------------------------------------------------------------------------------------
# property: loading equals a naive count

USERS = [f"u{i}" for i in range(6)]
observations = st.lists(
    st.tuples(st.sampled_from(USERS), st.integers(1, 6), st.integers(0, 4)),
    min_size=1,
    max_size=40,
    unique_by=lambda row: (row[0], row[1]),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=observations,
    classes=st.lists(st.integers(0, 2), min_size=len(USERS), max_size=len(USERS)),
    extra_domain=st.none() | st.integers(0, 2),
)
def test_loaded_histograms_equal_a_naive_count(
    tmp_path: Path,
    rows: list[tuple[str, int, int]],
    classes: list[int],
    extra_domain: int | None,
) -> None:
    class_of = dict(zip(USERS, classes, strict=True))
    path = tmp_path / "prop.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["user", "slot", "value"])
        writer.writerows(rows)
    max_value = max(v for _, _, v in rows)
    domain = None if extra_domain is None else max_value + 1 + extra_domain
    stream = CsvStream.load(path, class_of, 3, domain=domain)
    d = max_value + 1 if domain is None else domain
    slots = max(s for _, s, _ in rows)
    assert (stream.slots, stream.classes, stream.domain) == (slots, 3, d)
    naive = Counter((s, class_of[u], v) for u, s, v in rows)
    rng = np.random.default_rng(0)
    for slot in range(1, slots + 1):
        h = stream.histograms(slot, rng)
        expected = [[naive[(slot, c, v)] for v in range(d)] for c in range(3)]
        assert h.tolist() == expected


@pytest.mark.parametrize("kind", SYNTHETIC_KINDS)
@pytest.mark.parametrize("d", [2, 5])
def test_the_stream_does_not_depend_on_the_class_partition(kind: str, d: int) -> None:
    # Found in review: each class used to draw its own Binomial, so the same seed gave other data
    # when the same users were split into other classes (e.g. 16 classes for PBA, 1 for BA).
    partitions = ([1200], [200, 0, 1000], [400, 400, 400], [1, 1198, 1])
    totals = []
    for sizes in partitions:
        stream = SyntheticStream(kind, 30, sizes, seed=7, d=d)
        rng = np.random.default_rng(3)
        hists = [stream.histograms(t, rng) for t in range(1, 31)]
        for h in hists:
            assert h.sum(axis=1).tolist() == sizes and (h >= 0).all()
        totals.append(np.stack([h.sum(axis=0) for h in hists]))
        assert rng.integers(2**32) == totals_next(kind, d)  # the caller's generator, too
    for other in totals[1:]:
        np.testing.assert_array_equal(other, totals[0])


def totals_next(kind: str, d: int) -> int:
    """The next draw of the caller's generator after 30 slots of a one-class stream."""
    stream = SyntheticStream(kind, 30, [1200], seed=7, d=d)
    rng = np.random.default_rng(3)
    for t in range(1, 31):
        stream.histograms(t, rng)
    return int(rng.integers(2**32))


def test_a_class_share_has_its_users_distribution() -> None:
    # Split without replacement, a class of 300 among 1,000 users holds ones at rate p_t.
    n, draws = 300, 3000
    stream = SyntheticStream("log", 50, [n, 700], seed=0)
    rng = np.random.default_rng(5)
    p = float(stream.probabilities[49])
    frac = np.array([stream.histograms(50, rng)[0, 1] / n for _ in range(draws)])
    se = np.sqrt(p * (1 - p) / (n * draws))
    assert abs(frac.mean() - p) < 5 * se
    # Binomial(300, p) variance: the split adds no variance of its own
    assert frac.var() * n == pytest.approx(p * (1 - p), rel=0.1)


def test_a_sin_stream_takes_another_period() -> None:
    own = SyntheticStream("sin", 400, [10], seed=0)
    assert np.array_equal(
        SyntheticStream("sin", 400, [10], seed=0, sin_period=None).probabilities, own.probabilities
    )
    fast = SyntheticStream("sin", 400, [10], seed=0, sin_period=144).probabilities
    assert fast[143] == pytest.approx(0.075, abs=1e-12)  # slot 144: sin(2 pi) = 0
    assert fast[35] == pytest.approx(0.125)  # a quarter period: the top, 0.05 + 0.075
    for bad in (0, -3, float("inf"), float("nan")):
        with pytest.raises(BudgetError, match="sin_period"):
            SyntheticStream("sin", 10, [1], seed=0, sin_period=bad)
    with pytest.raises(BudgetError, match="sin stream only"):
        SyntheticStream("log", 10, [1], seed=0, sin_period=100)


def test_an_lns_stream_takes_another_step_deviation() -> None:
    # 002 Section 7.3 varies Q of LNS; the default stays 0.0025 (002 Section 7.1.1).
    own = SyntheticStream("lns", 400, [10], seed=3).probabilities
    np.testing.assert_array_equal(own, probability_sequence("lns", 400, np.random.default_rng(3)))
    for same in (None, 0.0025):
        np.testing.assert_array_equal(
            SyntheticStream("lns", 400, [10], seed=3, lns_sqrt_q=same).probabilities, own
        )
    # The same standard normal steps, scaled: without a clip, p_t - p_0 scales with sqrt(Q)
    calm = SyntheticStream("lns", 50, [10], seed=3, lns_sqrt_q=0.001).probabilities
    rough = SyntheticStream("lns", 50, [10], seed=3, lns_sqrt_q=0.002).probabilities
    assert ((calm > 0) & (rough > 0)).all()  # no clip in 50 slots at these deviations
    np.testing.assert_allclose(rough - 0.05, 2 * (calm - 0.05), rtol=1e-9, atol=1e-15)
    steps = np.diff(np.concatenate([[0.05], calm]))
    np.testing.assert_allclose(
        steps, np.random.default_rng(3).normal(0.0, 1.0, size=50) * 0.001, rtol=1e-6, atol=1e-15
    )
    for bad in (0, -0.001, float("inf"), float("nan"), "0.001"):
        with pytest.raises(BudgetError, match="lns_sqrt_q must be a positive"):
            SyntheticStream("lns", 10, [1], seed=0, lns_sqrt_q=bad)  # type: ignore[arg-type]
    for kind in ("sin", "log"):
        with pytest.raises(BudgetError, match="lns stream only"):
            SyntheticStream(kind, 10, [1], seed=0, lns_sqrt_q=0.001)


@pytest.mark.parametrize(
    ("kind", "options"),
    [("lns", {}), ("lns", {"lns_sqrt_q": 0.004}), ("sin", {}), ("sin", {"sin_period": 157.0})],
)
def test_the_probability_sequence_does_not_depend_on_the_population(
    kind: str, options: dict[str, float]
) -> None:
    # 002 Section 7.3 keeps the frequency fixed while N varies: for one seed, every N (and every
    # split into classes) sees the same p_1..p_T, and only the draws of the users' values differ.
    seqs = [
        SyntheticStream(kind, 300, sizes, seed=11, **options).probabilities  # type: ignore[arg-type]
        for sizes in ([62], [5_000], [200_000], [10_000, 30_000])
    ]
    for other in seqs[1:]:
        np.testing.assert_array_equal(other, seqs[0])
    if kind == "lns":  # the walk comes from the seed (Sin is deterministic)
        other_seed = SyntheticStream(kind, 300, [62], seed=12, **options)  # type: ignore[arg-type]
        assert not np.array_equal(other_seed.probabilities, seqs[0])
