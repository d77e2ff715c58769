"""`RunSummary.errors`: the papers' metrics under their own names."""

import numpy as np
import pytest

from wevent.accounting.budget import float_display
from wevent.experiments import metrics
from wevent.experiments.running import RunSummary
from wevent.mechanisms.central import SlotRecord


def summary() -> RunSummary:
    s = RunSummary("pba", "sound", "exact", users=10, classes=1, slots_requested=2)
    s.records = [
        SlotRecord(1, "published", np.array([4.0, 6.0]), np.array([5, 5])),
        SlotRecord(2, "skipped", np.array([4.0, 6.0]), np.array([2, 8])),
    ]
    return s


def test_errors_are_amse_on_frequencies_and_amre_on_counts() -> None:
    errs = summary().errors()
    # squared count errors: slot 1: 1, 1; slot 2: 4, 4 -> AMRE (001 Eq. 5) = mean = 2.5
    assert errs["amre"] == pytest.approx(2.5)
    # the same on frequencies (counts / 10 users): AMSE (000) = 2.5 / 100
    assert errs["amse"] == pytest.approx(0.025)
    assert errs["amre"] == pytest.approx(10**2 * errs["amse"])
    assert errs["mae"] == pytest.approx((1 + 1 + 2 + 2) / 4 / 10)
    release = np.array([[4.0, 6.0], [4.0, 6.0]])
    truth = np.array([[5, 5], [2, 8]])
    assert errs["amre"] == pytest.approx(metrics.amre(release, truth))


def test_describe_names_each_metric() -> None:
    text = "\n".join(summary().describe())
    # amse is 0.02500000000000001 in doubles: shown rounded, so marked
    assert "AMSE (000, frequencies) ~0.025," in text and "AMRE (001 Eq. 5, counts) 2.5" in text
    assert RunSummary("pba", "sound", "exact", 0, 0, 0).errors() == {}


def test_rounded_metrics_are_marked_and_exact_ones_are_not() -> None:
    # Found in review: "AMRE (001 Eq. 5, counts) 2.87816e+06" printed a rounded value unmarked.
    s = RunSummary("pba", "sound", "exact", users=3, classes=1, slots_requested=1)
    s.records = [SlotRecord(1, "published", np.array([1.0, 2.0]), np.array([0, 0]))]
    s.reports = 1
    text = "\n".join(s.describe())
    # mae = 1.5 / 3 = 0.5 (exact); amse = 2.5 / 9 and CFPU = 1/3 are rounded for display
    assert "mean absolute (frequencies) 0.5," in text and "AMRE (001 Eq. 5, counts) 2.5" in text
    assert "AMSE (000, frequencies) ~0.277778" in text
    assert "communication: ~0.3333 reports per user per slot" in text


def test_float_display() -> None:
    assert float_display(2.5) == "2.5" and float_display(0.025) == "0.025"
    assert float_display(2878160.4) == "~2.87816e+06" and float_display(1 / 3, 4) == "~0.3333"
    assert float_display(float("nan")) == "nan" and float_display(3e6) == "3e+06"
