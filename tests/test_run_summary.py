"""`RunSummary.errors`: the papers' metrics under their own names."""

import numpy as np
import pytest

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
    assert "AMSE (000, frequencies) 0.025" in text and "AMRE (001 Eq. 5, counts) 2.5" in text
    assert RunSummary("pba", "sound", "exact", 0, 0, 0).errors() == {}
