"""`wevent reproduce exsub-tables`: 004 Tables II-IV with our ExSub (quick size)."""

from __future__ import annotations

import csv
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from wevent.accounting.budget import BudgetError
from wevent.cli import cli
from wevent.experiments import exsub_tables as X
from wevent.experiments.harness import EXTRA_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS
from wevent.experiments.registry import EXPERIMENTS
from wevent.experiments.stats import interval
from wevent.mechanisms.exsub import ExSubDesign


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
        "004-table-III-T128-d1-s8-n20000": {"r=2", "r=4", "r=8", "r=16"},
    }
    offline = [r for r in rows if "table-III" not in r["dataset"]]
    assert {r["epsilon"] for r in offline} == {"0.001", "0.01", "1", "3", "5"}
    assert {r["mechanism"] for r in offline} == {"exsub", "exsub-authors-k"}
    online = [r for r in rows if "table-III" in r["dataset"]]
    assert {r["epsilon"] for r in online} == {"0.1", "1"} and len(online) == 4 * 2 * 2
    assert len(rows) == (2 + 1) * 5 * 2 * 2 + len(online)
    assert all(r["runs"] == "2" and float(r["ci_low"]) <= float(r["value"]) for r in rows)


def test_runs_csv_holds_every_repeat_and_the_means_are_theirs(quick: Path) -> None:
    runs = _read(quick / "runs.csv")
    assert list(runs[0]) == [*RUN_COLUMNS, *X.METRICS]
    assert {r["seed"] for r in runs} == {"0", "1"}
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


def test_table_md_puts_the_printed_rows_above_ours_in_sections_per_metric(quick: Path) -> None:
    text = (quick / "table.md").read_text(encoding="utf-8")
    assert text.count("### TVE\n") == 1 and text.count("### MAE\n") == 1
    for table in ("II", "III", "IV"):
        assert f"**004 Table {table}**" in text
    assert "| 004 printed ExSub | 4.0e+03 | 393.9 | 3.64 | 0.84 | 0.33 |" in text
    assert "| 004 printed ExSub | 1.13 | 1.19 | 1.22 | 1.31 | 0.0982 |" in text
    # every cell of ours says the ratio and whether the printed value is inside our interval
    ours = [ln for ln in text.splitlines() if ln.startswith("| exsub")]
    assert ours and all(", in)" in ln or ", out)" in ln for ln in ours if "(x" in ln)


def test_authors_output_size_matches_the_analysis_of_table_ii() -> None:
    # analysis/exsub_table2.py (an independent restatement over ExSubDesign's subgroup sums)
    got = [X.authors_output_size(128, 8, e) for e in X.OFFLINE_EPSILONS]
    assert got == [17, 16, 8, 2, 1]
    # d' + s > 300: the authors' narrower search bound applies (k < 111 at d' = 1024, s = 100)
    assert X.authors_output_size(1024, 100, Fraction(1, 1000)) == 10


def test_offline_tve_matches_lemma_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """One repeat's TVE over 128 entries is within 10% of the Gaussian prediction from 004
    Lemma 1, d' sqrt(2/pi) sqrt(MSE / (d' n)); halving n (a wrong average) misses it."""
    table, n, eps = X.Offline("II", 128, 8, (20_000,)), 20_000, Fraction(1)
    got = X.offline_errors(table, n, 0, mechanisms=("exsub",))[("exsub", eps)]["tve"]

    def predicted(users: int) -> float:
        mse = float(ExSubDesign.for_budget(128, 8, eps).value_mse())
        return 128 * math.sqrt(2 / math.pi) * math.sqrt(mse / (128 * users))

    assert got == pytest.approx(predicted(n), rel=0.10)
    assert got != pytest.approx(predicted(n // 2), rel=0.10)  # negative control
    # chunking does not bias the mean: the same check with small chunks
    monkeypatch.setattr(X, "CHUNK_USERS", 3_000)
    chunked = X.offline_errors(table, n, 0, mechanisms=("exsub",))[("exsub", eps)]["tve"]
    assert chunked == pytest.approx(predicted(n), rel=0.10)


def test_online_errors_take_every_fan_out_and_mae_is_the_largest_error() -> None:
    res = X.online_errors(X.Online(4_000), 0)
    assert set(res) == {(r, e) for r in X.FAN_OUTS for e in X.ONLINE_EPSILONS}
    for v in res.values():
        assert 0 < v["mae"] <= v["tve"] <= 128 * v["mae"]


def test_bad_repeats_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BudgetError, match="repeats"):
        X.run_exsub_tables(tmp_path, 0, True, 0)
    with pytest.raises(BudgetError, match="s < d'"):
        X.sparse_vectors(3, 4, 4, np.random.default_rng(0))


def test_registered_and_listed_by_the_cli() -> None:
    assert "exsub-tables" in EXPERIMENTS and EXPERIMENTS["exsub-tables"].sized is None
    result = CliRunner().invoke(cli, ["reproduce", "--help"])
    assert result.exit_code == 0 and "exsub-tables" in result.stdout
    refused = CliRunner().invoke(cli, ["reproduce", "exsub-tables", "--users", "5"])
    assert refused.exit_code == 2 and "does not take --users" in refused.stderr
