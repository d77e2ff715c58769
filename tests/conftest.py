"""Hypothesis settings: no per-example deadline (CI machines are shared and slow at times), and
on CI (CI=true) a derandomized run, so a submission's verdict does not depend on a random seed.
Locally each run explores new examples.

Tests marked ``heavy`` (proofs of tens of seconds) are moved to the front of the collection, so
that pytest-xdist starts them first and the short tests fill the workers' tails. The input
limits are forgotten after each test."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from wevent.accounting.inputs import reset_limits

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable: heavy first


@pytest.fixture(autouse=True)
def _limits_read_afresh() -> Iterator[None]:
    """The WEVENT_MAX_* limits are read once and kept: a test that sets one (with monkeypatch)
    must not leave its value to the next test in the same process."""
    yield
    reset_limits()
