"""The analysis scripts behind docs/reproduction.md's explanations run, and print the numbers the
page quotes (analytic modes only: seconds; their simulations are documented in
analysis/README.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parent.parent / "analysis"


def output(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ANALYSIS / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_exsub_portions_shows_the_calibrated_rule_ties_uniform() -> None:
    out = output("exsub_portions.py", "--settings", "T32", "--no-best")
    # 004 Algorithm 2's exact prefix coefficient sums per level at T = 32: the top residue
    # serves x_T alone, yet 004 VI-D's portions give it 43% of the users.
    assert "|          272 | 0.039 |" in out and "|            1 | 0.432 | 0.000 |" in out
    assert out.count("prop-c == uniform == H C exactly: True") == 3
    assert "| prefix | 3.006 | 467 | 1.449 / 1.234 |" in out


def test_exsub_table2_shows_the_printed_numbers_fit_fifty_thousand_users() -> None:
    out = output("exsub_table2.py")
    assert (
        "| 1 | 5 | 8 | 3.64 | 8.436 (x2.32) | 8.052 (x2.21) | 3.773 (x1.04) | 3.601 (x0.99) |"
        in out
    )
    assert "| 1 | 36 | 4.13 | 8.96 (x2.17) | 4.007 (x0.97) |" in out  # the Collision row


def test_pldp_baselines_bounds_the_gain_over_budget_division() -> None:
    out = output("pldp_baselines.py")
    assert "| 1.5 | 120 | 288.5 | 2.29 | 0.439 | >= 80.9% | 56.1% |" in out
    assert "Fig. 2 81.0%, Fig. 3 80.9%" in out


def test_pwsm_absolute_pins_the_papers_user_count() -> None:
    out = output("pwsm_absolute.py", "--slots", "2000", "--seeds", "1", "--no-check")
    assert "Sin   exact     10000   18,182,987   T5 0.9915-0.9969x" in out
    assert "Log   exact     10000    6,350,190   T5 0.9919-0.9976x" in out


def test_roc_staleness_predicts_lsp_falls_on_faster_streams() -> None:
    out = output("roc_staleness.py", "--no-simulate")
    assert "| 144 | 2.88 | 0.314 | 0.877 | 0.715 |" in out


def test_pwsm_ratio_users_finds_where_obs_switches() -> None:
    out = output("pwsm_ratio_users.py", "--no-simulate")
    assert (
        "| 10,000 | 0.887 | 0.6 | 0.6 | 0.6 | 0.6 | 0.6 | 0.6 | 0.6 | 0.6 | 1.0 | 200 | 3 |" in out
    )
