"""`wevent reproduce exsub-tables`: 004 Tables II-IV with our ExSub (quick size)."""

from __future__ import annotations

import csv
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import BudgetError, format_exact
from wevent.cli import cli
from wevent.experiments import exsub_tables as X
from wevent.experiments.harness import EXTRA_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS
from wevent.experiments.registry import EXPERIMENTS
from wevent.experiments.stats import FAILS, HOLDS, Interval, interval, verdict
from wevent.mechanisms.exsub import ExSubDesign, exclusion_weight
from wevent.mechanisms.exsub_stream import level_variance_factors
from wevent.mechanisms.residues import levels


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exsub-tables")
    X.run_exsub_tables(out, 2, True, 0)
    return out


def test_quick_run_writes_the_long_form_with_every_table_and_setting(quick: Path) -> None:
    rows = _read(quick / "results.csv")
    assert list(rows[0]) == [*RESULT_COLUMNS, *EXTRA_COLUMNS]
    assert {r["experiment"] for r in rows} == {"exsub-tables"}
    assert {r["metric"] for r in rows} == {"tve", "mae"}
    by_ds: dict[str, set[str]] = {}
    for r in rows:
        by_ds.setdefault(r["dataset"], set()).add(r["setting"])
    assert by_ds == {
        "004-table-II-d128-s8": {"n=1000", "n=5000"},
        "004-table-IV-d1024-s100": {"n=1000"},
        "004-table-IV-d512-s100": {"n=1000"},
        "004-table-III-T128-d1-s8-n20000": {"r=2", "r=4", "r=8", "r=16"},
    }
    offline = [r for r in rows if "table-III" not in r["dataset"]]
    assert {r["epsilon"] for r in offline} == {"0.001", "0.01", "1", "3", "5"}
    assert {r["mechanism"] for r in offline} == {
        "exsub",
        "exsub-authors-k",
        "collision",
        "succinct",
        "futurerand",
    }
    online = [r for r in rows if "table-III" in r["dataset"]]
    assert {r["epsilon"] for r in online} == {"0.1", "1"} and len(online) == 4 * 2 * 2
    assert len(rows) == (2 + 1 + 1) * 5 * 5 * 2 + len(online)
    assert all(r["runs"] == "2" for r in rows)


def test_runs_csv_holds_every_repeat_and_the_intervals_are_theirs(quick: Path) -> None:
    runs = _read(quick / "runs.csv")
    assert list(runs[0]) == [*RUN_COLUMNS, *X.METRICS]
    assert {r["seed"] for r in runs} == {"0", "1"}
    users = {r["dataset"] + r["setting"]: r["users"] for r in runs}
    assert users["004-table-II-d128-s8n=5000"] == "5000"
    assert users["004-table-III-T128-d1-s8-n20000r=4"] == "20000"
    results = _read(quick / "results.csv")
    for res in results:
        key = (res["dataset"], res["mechanism"], res["epsilon"], res["setting"])
        vals = [
            float(r[res["metric"]])
            for r in runs
            if (r["dataset"], r["mechanism"], r["epsilon"], r["setting"]) == key
        ]
        iv = interval(vals)
        assert len(vals) == 2 and math.isclose(iv.mean, float(res["value"]))
        assert math.isclose(iv.low, float(res["ci_low"]))
        assert math.isclose(iv.high, float(res["ci_high"]))


def test_table_md_puts_the_printed_rows_above_ours_in_sections_per_metric(quick: Path) -> None:
    text = (quick / "table.md").read_text(encoding="utf-8")
    assert text.count("### TVE\n") == 1 and text.count("### MAE\n") == 1
    for table in ("II", "III", "IV"):
        assert f"**004 Table {table}**" in text
    assert "| 004 printed ExSub | 4.0e3 | 393.9 | 3.64 | 0.84 | 0.33 |" in text
    assert "| 004 printed ExSub | 1.13 | 1.19 | 1.22 | 1.31 | 0.0982 |" in text
    assert "| exsub, d' = 512, n = 1,000 |" in text and "| exsub, d' = 1024, n = 1,000 |" in text
    # 004's competitor rows, printed above ours, in the order of the printed tables
    assert "| 004 printed collision | 4.6e3 | 463.7 | 4.13 | 1.15 | 0.54 |" in text
    assert "| 004 printed succinct | 555.4 | 55.3 | 0.66 | 0.41 | 0.35 |" in text
    assert "| 004 printed futurerand | 3.4e4 | 3493.8 | 32.3 | 10.1 | 6.78 |" in text
    tve_ii = text.split("### TVE")[1].split("**004 Table IV**")[0]
    order = [tve_ii.index(f"| {m}, n = 1,000 |") for m in X.OFFLINE_MECHANISMS]
    assert order == sorted(order)
    assert tve_ii.index("| 004 printed collision |") < order[2]
    # every cell of ours says the ratio and where the printed value lies against our interval
    ours = [ln for ln in text.splitlines() if ln.startswith("| exsub")]
    cells = [c for ln in ours for c in ln.split(" | ")[1:] if "(x" in c]
    assert cells and all(c.rstrip(" |").endswith(("in)", "out)", "edge)")) for c in cells)


def test_table_iii_paired_verdicts_are_computed_from_the_repeats(quick: Path) -> None:
    """The fan-out comparison rows of table.md are the paired per-repeat reductions of
    runs.csv (recomputed here); an unpaired reading (repeats shuffled) gives other numbers."""
    text = (quick / "table.md").read_text(encoding="utf-8")
    runs = _read(quick / "runs.csv")
    for metric in X.METRICS:
        per_run = {
            (int(r["setting"][2:]), Fraction(r["epsilon"])): [
                float(x[metric])
                for x in sorted(runs, key=lambda x: int(x["seed"]))
                if x["dataset"] == r["dataset"]
                and x["setting"] == r["setting"]
                and x["epsilon"] == r["epsilon"]
            ]
            for r in runs
            if "table-III" in r["dataset"]
        }
        section = text.split(f"### {metric.upper()}")[1].split("###")[0]
        for eps in X.ONLINE_EPSILONS:
            row = [ln for ln in section.splitlines() if ln.startswith(f"| {format_exact(eps)} |")]
            assert len(row) == 1
            for r in (4, 8, 16):
                iv = X.paired_fan_out(per_run, eps, r)
                assert f"{iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}] {verdict(iv)}" in row[0]
                swapped = {**per_run, (r, eps): per_run[(r, eps)][::-1]}
                assert X.paired_fan_out(swapped, eps, r) != iv  # negative control


def test_competitor_comparisons_are_the_paired_reductions_of_the_repeats(quick: Path) -> None:
    """The comparison rows of table.md are 1 - exsub / competitor per repeat (recomputed from
    runs.csv); the printed reference rows come from 004's numbers; reversed repeats differ."""
    text = (quick / "table.md").read_text(encoding="utf-8")
    runs = _read(quick / "runs.csv")

    def per_run(dataset: str, mech: str, eps: str, metric: str) -> list[float]:
        rows = [
            r
            for r in runs
            if (r["dataset"], r["mechanism"], r["epsilon"], r["setting"])
            == (dataset, mech, eps, "n=1000")
        ]
        return [float(r[metric]) for r in sorted(rows, key=lambda r: int(r["seed"]))]

    for metric in X.METRICS:
        section = text.split(f"### {metric.upper()}")[1].split("**004 Table III**")[0]
        for comp in X.COMPETITORS:
            row = [ln for ln in section.splitlines() if ln.startswith(f"| II, {comp}, n = 1,000")]
            assert len(row) == 1
            for eps in ("0.001", "1", "5"):
                ours = per_run("004-table-II-d128-s8", "exsub", eps, metric)
                other = per_run("004-table-II-d128-s8", comp, eps, metric)
                iv = X.paired_reduction(ours, other)
                assert f"{iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}] {verdict(iv)}" in row[0]
                assert X.paired_reduction(ours, other[::-1]) != iv  # negative control
    printed = [ln for ln in text.splitlines() if ln.startswith("| II, collision, 004 printed |")]
    assert printed[0].split(" | ")[1] == f"{1 - 4.0e3 / 4.6e3:+.3f}"  # TVE, eps = 0.001


def test_paired_fan_out_decides_by_the_per_repeat_reductions() -> None:
    eps = Fraction(1)
    # r = 2 lower in every repeat by 10% while the repeats themselves spread widely
    base = {(2, eps): [0.9, 9.0, 90.0], (4, eps): [1.0, 10.0, 100.0]}
    iv = X.paired_fan_out(base, eps, 4)
    assert iv.mean == pytest.approx(0.1) and verdict(iv) == HOLDS
    assert not interval([1.0, 10.0, 100.0]).low > interval([0.9, 9.0, 90.0]).high  # unpaired
    worse = {(2, eps): [1.1, 11.2, 110.0], (4, eps): [1.0, 10.0, 100.0]}
    assert verdict(X.paired_fan_out(worse, eps, 4)) == FAILS


def test_printed_verdict_takes_the_rounding_of_the_printed_value() -> None:
    iv = Interval(0.47, 0.05, 0.41118, 0.54657, 5)
    assert X.printed_verdict(iv, "0.41") == "edge"  # 0.405 .. 0.415 straddles 0.41118
    assert X.printed_verdict(iv, "0.42") == "in"
    assert X.printed_verdict(iv, "0.40") == "out"
    assert X.printed_verdict(iv, "0.55") == "edge"
    assert X.printed_verdict(iv, "0.6") == "out"
    wide = Interval(4500.0, 100.0, 3960.0, 5000.0, 5)
    assert X.printed_verdict(wide, "4.0e3") == "edge"  # 3950 .. 4050
    assert X.printed_verdict(wide, "4.1e3") == "in"


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(1e-6, 1e5, allow_nan=False),
)
def test_cells_print_the_interval_to_two_significant_figures(mean: float, half: float) -> None:
    text = X._figures(mean, half)
    m, h = text.split(" +- ")
    assert float(h) == pytest.approx(half, rel=0.06)  # two significant figures
    assert abs(float(m) - mean) <= 0.06 * half + 1e-12  # the mean to the same place
    assert X._figures(0.1, 0.015) == "0.100 +- 0.015"
    assert X._figures(9900.0, 1100.0) == "9900 +- 1100"


def _independent_authors_size(d_prime: int, s: int, eps: Fraction) -> int:
    """The authors' search restated over ExSubDesign's subgroup sums (not the closed forms)."""
    best, best_k = math.inf, 0
    for k in range(1, min(d_prime, d_prime // 2 + s)):
        des = ExSubDesign(d_prime, s, k, exclusion_weight(eps))
        pt, pr, pf = (float(v) for v in des.rates())
        freq = (
            s * (pt + pr) * (1 - pt - pr)
            + (d_prime - s) * 2 * pf * (1 - 2 * pf) / (pt + pr - 2 * pf) ** 2
        )
        err = float(des.value_mse()) + 0.1 * freq
        if err < best:
            best, best_k = err, k
    return best_k


def test_authors_output_size_agrees_with_a_restatement_over_the_subgroup_sums() -> None:
    for eps in (Fraction(1, 1000), Fraction(1), Fraction(5)):
        assert X.authors_output_size(64, 8, eps) == _independent_authors_size(64, 8, eps)
    got = [X.authors_output_size(128, 8, e) for e in X.OFFLINE_EPSILONS]
    assert got == [17, 16, 8, 2, 1]  # the sizes behind the printed Table II (the analysis)
    # d' + s > 300: the authors' narrower search bound applies (k < 111 at d' = 1024, s = 100)
    assert X.authors_output_size(1024, 100, Fraction(1, 1000)) == 10


@pytest.mark.parametrize(("d_prime", "s", "eps"), [(200, 120, 1), (8, 8, 1), (10, 0, 1), (9, 5, 1)])
def test_authors_output_size_refuses_shapes_without_room(d_prime: int, s: int, eps: int) -> None:
    with pytest.raises(BudgetError, match="2 s <= d'"):
        X.authors_output_size(d_prime, s, Fraction(eps))
    with pytest.raises(BudgetError, match="eps > 0"):
        X.authors_output_size(16, 4, Fraction(0))


def test_competitors_leave_the_exsub_cells_as_they_were() -> None:
    """A cell's noise is the seed sequence's child at its place, so appending the competitors
    keeps every ExSub number; moving them first (a reordering) changes them."""
    table, eps = X.Offline("II", 32, 4, (500,)), (Fraction(1), Fraction(3))
    alone = X.offline_errors(table, 500, 0, X.MECHANISMS, eps)
    both = X.offline_errors(table, 500, 0, X.OFFLINE_MECHANISMS, eps)
    assert all(both[cell] == alone[cell] for cell in alone)
    first = X.offline_errors(table, 500, 0, X.COMPETITORS + X.MECHANISMS, eps)
    assert any(first[cell] != alone[cell] for cell in alone)  # negative control


def _competitor_entry_variances(mech: str, s: int, eps: Fraction) -> tuple[float, float]:
    """(zero, non-zero) per-user variance of one entry's estimate, restated from the stated
    probabilities: Collision's two symbols hit independently given the bucket (held: e^eps / N,
    other: 1 / t); FutureRand reports +-1 with mean R_j (2 q - 1); SUCCINCT's g_j v has second
    moment E[clip(W)^2] + 2 (2 D / eps)^2 (W a sum of s uniform signs, D = sqrt(s ln n) / 2.5 at
    n = 20,000) and mean gain R_j, a bias below 1% of the error here (the true means are
    ~0.002), left out."""
    if mech == "collision":
        e = math.exp(float(eps))
        t = int(s * e + 2 * s - 1)
        p, q = e / (s * e + t - s), 1 / t
        return 2 * q * (1 - q) / (p - q) ** 2, (p * (1 - p) + q * (1 - q)) / (p - q) ** 2
    if mech == "succinct":
        clip = math.sqrt(s * math.log(20_000)) / 2.5
        w2 = sum(math.comb(s, k) * min(clip, abs(2 * k - s)) ** 2 for k in range(s + 1)) / 2**s
        second = w2 + 2 * (2 * clip / float(eps)) ** 2
        return second, second
    keep = math.exp(float(eps) / (5 * math.sqrt(s)))
    agree = keep / (keep + 1)  # s <= 24: no clipping, q = the keep probability
    return 1 / (2 * agree - 1) ** 2, 1 / (2 * agree - 1) ** 2 - 1


@pytest.mark.parametrize("mech", ["collision", "futurerand", "succinct"])
def test_competitor_tve_matches_its_entry_variances(mech: str) -> None:
    """As for ExSub below: TVE over the 120 data entries, 6 seeds, within 8% of the Gaussian
    prediction from the per-entry variances; half the users (a wrong average) misses it."""
    table, n, eps = X.Offline("II", 128, 8, (20_000,)), 20_000, Fraction(1)
    got = np.mean(
        [X.offline_errors(table, n, seed, (mech,), (eps,))[(mech, eps)]["tve"] for seed in range(6)]
    )
    zero, nonzero = _competitor_entry_variances(mech, 8, eps)
    v = (8 * nonzero + (120 - 8) * zero) / 120

    def predicted(users: int) -> float:
        return 120 * math.sqrt(2 / math.pi) * math.sqrt(v / users)

    assert got == pytest.approx(predicted(n), rel=0.08)
    assert got != pytest.approx(predicted(n // 2), rel=0.08)  # negative control


def test_succinct_clip_takes_the_settings_number_of_users(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def spy(
        R: npt.NDArray[np.int64], s: int, eps: Fraction, rng: object, users: int
    ) -> npt.NDArray[np.float64]:
        seen.append(users)
        return np.zeros(R.shape)

    monkeypatch.setattr(X, "succinct_estimates", spy)
    X.offline_errors(X.Offline("II", 16, 2, (9_000,)), 9_000, 0, ("succinct",), (Fraction(1),))
    assert seen and set(seen) == {9_000}
    assert max(seen) == 9_000 and len(seen) == math.ceil(9_000 / X.SUB_CHUNK)


def test_an_unknown_mechanism_is_refused() -> None:
    with pytest.raises(BudgetError, match="unknown mechanism 'exsub-authors'"):
        X.offline_errors(X.Offline("II", 16, 2, (10,)), 10, 0, mechanisms=("exsub-authors",))


def _entry_variances(d_prime: int, s: int, eps: Fraction) -> tuple[float, float]:
    """(variance of one user's value estimate at a zero entry, at a non-zero one), 004 Lemma 1's
    per-entry terms; their sum over the entries is `value_mse`."""
    des = ExSubDesign.for_budget(d_prime, s, eps)
    pt, pr, pf = (float(v) for v in des.rates())
    zero, nonzero = 2 * pf / (pt - pr) ** 2, (pt + pr - (pt - pr) ** 2) / (pt - pr) ** 2
    assert s * nonzero + (d_prime - s) * zero == pytest.approx(float(des.value_mse()))
    return zero, nonzero


def test_offline_errors_are_over_the_data_entries_and_the_stubs_stay_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """004 Section V: d' = d T + s, the last s entries stubs; Section VI-A: the s non-zero
    entries are drawn among the d T data entries. An estimator that adds 1 to every entry
    gives TVE d' - s = 13 (not d' = 16) and MAE 1."""
    seen: list[npt.NDArray[np.int64]] = []

    def shifted(
        R: npt.NDArray[np.int64], s: int, eps: Fraction, rng: object, m: int | None = None
    ) -> npt.NDArray[np.float64]:
        seen.append(R.copy())
        return (R + 1).astype(np.float64)

    monkeypatch.setattr(X, "exsub_estimates", shifted)
    eps = Fraction(1)
    res = X.offline_errors(X.Offline("II", 16, 3, (400,)), 400, 0, ("exsub",), (eps,))
    (R,) = seen
    assert R.shape == (400, 16) and (R[:, 13:] == 0).all()
    assert ((R[:, :13] != 0).sum(axis=1) == 3).all() and (R[:, :13] != 0).any(axis=0).all()
    assert res[("exsub", eps)]["tve"] == pytest.approx(13)
    assert res[("exsub", eps)]["mae"] == pytest.approx(1)


def test_offline_tve_matches_lemma_1_over_the_data_entries() -> None:
    """TVE over the d' - s = 120 data entries, averaged over 6 seeds, is within 8% of the
    Gaussian prediction from 004 Lemma 1, (d' - s) sqrt(2/pi) sqrt(v / n) with v the per-entry
    variance averaged over the data entries; halving n (a wrong average) misses it."""
    table, n, eps = X.Offline("II", 128, 8, (20_000,)), 20_000, Fraction(1)
    got = np.mean(
        [
            X.offline_errors(table, n, seed, ("exsub",), (eps,))[("exsub", eps)]["tve"]
            for seed in range(6)
        ]
    )
    zero, nonzero = _entry_variances(128, 8, eps)
    v = (8 * nonzero + (120 - 8) * zero) / 120

    def predicted(users: int) -> float:
        return 120 * math.sqrt(2 / math.pi) * math.sqrt(v / users)

    assert got == pytest.approx(predicted(n), rel=0.08)
    assert got != pytest.approx(predicted(n // 2), rel=0.08)  # negative control


@pytest.mark.parametrize("chunk", [X.CHUNK_USERS, 3_000])
def test_offline_error_is_around_the_truth_of_same_sign_data_in_any_chunking(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """All non-zero entries +1 (the truth is s / (d' - s) per entry, far from 0): the mean
    squared error over the data entries, over 4 seeds, is 004 Lemma 1's v / n within 25%, with
    one chunk and with 7 chunks of users. A truth left at 0, or summed from one chunk only,
    adds about (s / (d' - s))^2 = 0.0044, hundreds of times v / n."""
    plain = X.sparse_vectors
    monkeypatch.setattr(X, "sparse_vectors", lambda *a: np.abs(plain(*a)))
    monkeypatch.setattr(X, "CHUNK_USERS", chunk)
    table, n, eps = X.Offline("II", 128, 8, (20_000,)), 20_000, Fraction(5)
    got = np.mean(
        [
            X.offline_errors(table, n, seed, ("exsub",), (eps,))[("exsub", eps)]["mse"]
            for seed in range(4)
        ]
    )
    zero, nonzero = _entry_variances(128, 8, eps)
    expected = (8 * nonzero + 112 * zero) / 120 / n
    assert got == pytest.approx(expected, rel=0.25)
    assert got != pytest.approx(expected * 2, rel=0.25)  # negative control


@pytest.mark.parametrize("chunk", [X.CHUNK_USERS, 5_000])
def test_online_error_matches_the_level_variances_in_any_chunking(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Table III's mean answers (r = 2, eps = 1, n = 20,000, 8 seeds): their mean squared
    error is the level-variance prediction `level_variance_factors(..., "mean")`,
    sum_h c_h H / n over T (uniform portions 1/H), within a factor in [0.6, 1.5] (the
    prediction averages 004 Lemma 1's per-entry variance over the padded d' entries). The
    streams are 0/1, so the true means are far from 0: a truth left at 0, or taken from the
    last of 4 chunks, puts the ratio above 1.5; a prediction at n / 2 misses."""
    monkeypatch.setattr(X, "CHUNK_USERS", chunk)
    n, r, eps = 20_000, 2, Fraction(1)
    H = len(levels(128, r))
    res = [X.online_errors(X.Online(n), seed, (r,), (eps,))[(r, eps)]["mse"] for seed in range(8)]
    pred = sum(c * H / n for c in level_variance_factors(128, r, 1, 8, eps, "mean")) / 128
    assert 0.6 < np.mean(res) / pred < 1.5
    assert not 0.6 < np.mean(res) / (2 * pred) < 1.5  # negative control


def test_online_errors_take_every_fan_out_and_mae_is_the_largest_error() -> None:
    res = X.online_errors(X.Online(4_000), 0)
    assert set(res) == {(r, e) for r in X.FAN_OUTS for e in X.ONLINE_EPSILONS}
    for v in res.values():
        assert 0 < v["mae"] <= v["tve"] <= 128 * v["mae"]
        assert v["mse"] <= v["mae"] ** 2


def test_bad_repeats_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BudgetError, match="repeats"):
        X.run_exsub_tables(tmp_path, 0, True, 0)
    with pytest.raises(BudgetError, match="s <= entries"):
        X.sparse_vectors(3, 4, 5, np.random.default_rng(0))
    assert X.sparse_vectors(3, 4, 4, np.random.default_rng(0)).all()


def test_registered_and_listed_by_the_cli() -> None:
    assert "exsub-tables" in EXPERIMENTS and EXPERIMENTS["exsub-tables"].sized is None
    result = CliRunner().invoke(cli, ["reproduce", "--help"])
    assert result.exit_code == 0 and "exsub-tables" in result.stdout
    refused = CliRunner().invoke(cli, ["reproduce", "exsub-tables", "--users", "5"])
    assert refused.exit_code == 2 and "does not take --users" in refused.stderr
