"""The allocator passes wevent's CI gate; the deliberately broken variant is refuted.

`wevent_gate` is the fixture of wevent's pytest plugin (loaded automatically once wevent is
installed). It runs `wevent gate` in-process and fails the test with the counterexample and the
`wevent trace` command that replays it.
"""

from typing import Any


def test_thrifty_is_proved(wevent_gate: Any) -> None:
    report = wevent_gate("thrifty", w_max=3, classes=2, examples=150)
    assert report.verdict == "proved"


def test_thrifty_module_attribute_target(wevent_gate: Any) -> None:
    wevent_gate("thrifty:allocator", w_max=2, examples=50)


def test_broken_thrifty_is_refuted(wevent_gate: Any) -> None:
    report = wevent_gate("thrifty:broken", expect="refuted", w_max=3, examples=100)
    cex = report.counterexample
    assert cex is not None and cex.replays()
