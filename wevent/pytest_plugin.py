"""pytest plugin (entry point ``pytest11``): run `wevent gate` inside a project's own tests.

The fixture ``wevent_gate`` is a callable::

    def test_my_allocator_is_safe(wevent_gate):
        wevent_gate("mypkg.alloc:allocator", w_max=3, examples=200)

It runs the gate (`wevent.gate.run_gate`; keyword arguments are `GateOptions` fields) and
fails the test with the gate's report, counterexample and ``wevent trace`` replay command
included, unless the verdict is the expected one (``expect="pass"``: proved or passed;
``expect="refuted"`` for a known-broken allocator kept as a regression fixture). It returns the
`GateReport`. Command-line options (``--wevent-examples``, ``--wevent-w-max``,
``--wevent-classes``, ``--wevent-seed``, ``--wevent-unroll``, ``--wevent-search-runs``,
``--wevent-search-w-max``) override the defaults for every call, so CI can run a
larger scope than a developer's machine without editing the tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from wevent.gate import GateReport
    from wevent.mechanisms.allocators.api import Allocator

__all__ = ["GateFixture", "pytest_addoption", "wevent_gate"]

_OVERRIDES = (
    ("--wevent-examples", "examples", "inputs the adversarial search tries per requirement kind"),
    ("--wevent-w-max", "w_max", "largest window the gate checks"),
    ("--wevent-classes", "classes", "largest number of requirement classes"),
    ("--wevent-seed", "seed", "seed of the gate's search and synthetic streams"),
    ("--wevent-unroll", "horizon", "slots the proof unrolls (0: 3 x the largest window)"),
    ("--wevent-search-runs", "search_runs", "runs of the wide search per requirement kind"),
    ("--wevent-search-w-max", "search_w_max", "largest window the wide search draws"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wevent", "wevent gate (privacy allocators)")
    for flag, _, text in _OVERRIDES:
        group.addoption(flag, type=int, default=None, help=f"wevent_gate: {text}")


class GateFixture(Protocol):
    def __call__(
        self,
        target: str,
        *,
        expect: str = "pass",
        allocator: Allocator | None = None,
        **options: Any,
    ) -> GateReport: ...


@pytest.fixture
def wevent_gate(request: pytest.FixtureRequest) -> GateFixture:
    """Run the gate on a target and fail the test unless the verdict is ``expect``.

    Without the prove extra (Z3, hypothesis) the test fails with the one-line install hint: a
    gate that cannot run must never read as a pass, so it is not a skip either."""
    from wevent._extras import require

    missing = require("gate", "prove")
    if missing is not None:
        pytest.fail(f"wevent_gate: {missing}", pytrace=False)
    from wevent.gate import GateOptions, run_gate

    overrides = {
        field: request.config.getoption(flag)
        for flag, field, _ in _OVERRIDES
        if request.config.getoption(flag) is not None
    }

    def gate(
        target: str,
        *,
        expect: str = "pass",
        allocator: Allocator | None = None,
        **options: Any,
    ) -> GateReport:
        if expect not in ("pass", "refuted"):
            raise ValueError(f"expect must be 'pass' or 'refuted', got {expect!r}")
        try:
            opts = GateOptions(**{**options, **overrides})
        except TypeError as exc:
            raise TypeError(f"wevent_gate: {exc} (options are GateOptions fields)") from None
        report = run_gate(target, opts, allocator=allocator)
        wanted = report.ok if expect == "pass" else report.verdict == "refuted"
        if not wanted:
            lines = [f"wevent gate: expected {expect}, got {report.verdict}", *report.describe()]
            pytest.fail("\n".join(lines), pytrace=False)
        return report

    return gate
