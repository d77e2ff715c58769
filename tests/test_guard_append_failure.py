"""A spend that breaks off after the engine may have changed its windows (an exception in the
check, the ledger append, the engine's commit, a rescale, or `spend_many`'s shortcut) records
nothing more and leaves the guard fail closed: every later spend is refused (`SinkFailed`).
Before this, a failed append after a passing check let a later charge at an earlier slot be
checked without the charges that had left (a vector-engine overspend). Labels and evidence of
the wrong type are refused before any check."""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from fractions import Fraction
from types import FrameType
from typing import Any

import numpy as np
import pytest

import wevent.accounting.evidence as ev
from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.evidence import EvidenceKind, Laplace, register_evidence_kind
from wevent.accounting.ledger import Charge
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.accounting.spending import BudgetExceeded
from wevent.verifier.check import check
from wevent.verifier.guard import Guard, SinkFailed
from wevent.verifier.tracing import class_groups

ENGINES = ("vector", "accounts")


def _guard(engine: str) -> tuple[Guard, Population]:
    pop = Population.from_classes({Fixed(3, Budget(1)): 3})
    guard = Guard(pop, engine=engine)
    guard.define_group_by_index("a", pop.users, np.array([0, 1], np.int64))
    guard.spend(1, Budget(1), group="a")  # users 0 and 1 spend their whole window [1, 3]
    return guard, pop


def _failing_append(guard: Guard, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger's next append raises (as a full disk or a bug would) after the check passed."""
    original = guard.ledger.append_validated

    def once(*args: Any, **kwargs: Any) -> None:
        monkeypatch.setattr(guard.ledger, "append_validated", original)
        raise OSError("append failed")

    monkeypatch.setattr(guard.ledger, "append_validated", once)


@pytest.mark.parametrize("engine", ENGINES)
def test_after_a_failed_append_every_later_spend_is_refused(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard, pop = _guard(engine)
    _failing_append(guard, monkeypatch)
    with pytest.raises(OSError, match="append failed"):
        guard.spend(4, Budget(1), user=pop.users[2])  # passes its check (slot 1's charge left)
    assert len(guard.ledger) == 1  # nothing recorded
    assert isinstance(guard.broken, OSError)
    for slot in (2, 4):  # slot 2: window [1, 3] already holds 1 (the check let it go)
        with pytest.raises(SinkFailed, match="the guard failed on an earlier charge"):
            guard.spend(slot, Budget(1), group="a")
    assert check(guard.ledger, pop).ok


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("field", ["part", "mechanism"])
def test_a_label_that_is_not_a_string_is_refused_before_the_check(engine: str, field: str) -> None:
    guard, pop = _guard(engine)
    kwargs: dict[str, Any] = {field: ["not", "a", "string"]}
    with pytest.raises(BudgetError, match=f"a charge's {field} must be a string, got list"):
        guard.spend(4, Budget(1), user=pop.users[2], **kwargs)
    assert len(guard.ledger) == 1
    with pytest.raises(BudgetExceeded):  # the guard is where it was: slot 2 is checked in full
        guard.spend(2, Budget(1), group="a")
    assert check(guard.ledger, pop).ok


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("check_evidence", [True, False])
def test_evidence_that_is_not_an_evidence_record_is_refused(
    engine: str, check_evidence: bool
) -> None:
    guard, pop = _guard(engine)
    guard.check_evidence = check_evidence
    with pytest.raises(TypeError, match="not evidence of a registered kind"):
        guard.spend(4, Budget(1), user=pop.users[2], evidence={"kind": "laplace"})  # type: ignore[arg-type]
    assert len(guard.ledger) == 1
    with pytest.raises(BudgetExceeded):
        guard.spend(2, Budget(1), group="a")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failed_engine_commit_refuses_every_later_spend(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger holds the charge but the windows may not count it: fail closed."""
    guard, pop = _guard(engine)
    inner = guard._engine

    def fail(*args: Any, **kwargs: Any) -> None:
        raise MemoryError("commit failed")

    monkeypatch.setattr(inner, "commit", fail)
    with pytest.raises(MemoryError, match="commit failed"):
        guard.spend(4, Budget(1), user=pop.users[2])
    monkeypatch.undo()
    assert isinstance(guard.broken, MemoryError)
    for slot, who in ((4, pop.users[2]), (9, pop.users[0])):
        with pytest.raises(SinkFailed, match="the guard failed on an earlier charge"):
            guard.spend(slot, Budget("1/10"), user=who)
    assert len(guard.ledger) == 2 and check(guard.ledger, pop).ok


def _once(monkeypatch: pytest.MonkeyPatch, obj: object, name: str) -> None:
    """``obj.name`` raises KeyboardInterrupt on its next call (an interrupt mid-spend), then is
    itself again."""
    original = getattr(obj, name)

    def fail(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(obj, name, original)
        raise KeyboardInterrupt

    monkeypatch.setattr(obj, name, fail)


class _MemorySink:
    def __init__(self) -> None:
        self.charges: list[Any] = []

    def define_group(self, name: str, members: Any) -> None:
        pass

    def append_charge(self, charge: Any) -> None:
        self.charges.append(charge)

    def commit(self) -> int:
        return len(self.charges)


def _interrupted_then_refused(guard: Guard, pop: Population, spend: Any) -> None:
    with pytest.raises(KeyboardInterrupt):
        spend()
    assert isinstance(guard.broken, KeyboardInterrupt)
    with pytest.raises(SinkFailed, match="failed on an earlier charge"):
        guard.spend(2, Budget("1/100"), group="a")
    with pytest.raises(SinkFailed, match="every spend is refused"):  # so no room either
        guard.headroom(guard.slot, group="a")
    assert check(guard.ledger, pop).ok


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("method", "amount"),
    [
        ("rescale", "1/7"),  # part of the state may be rescaled: another would scale it twice
        ("check", "1"),  # the check may have let charges leave without putting them back
    ],
)
def test_an_interrupted_engine_call_refuses_every_later_spend(
    engine: str, method: str, amount: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard, pop = _guard(engine)
    _once(monkeypatch, guard._engine, method)
    _interrupted_then_refused(guard, pop, lambda: guard.spend(4, Budget(amount), group="a"))


@pytest.mark.parametrize("engine", ENGINES)
def test_an_interrupt_between_the_append_and_the_commit_refuses_every_later_spend(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger holds the charge, the windows do not count it."""
    guard, pop = _guard(engine)
    _once(monkeypatch, guard, "_remember_certified")
    evidence = Laplace(sensitivity=Fraction(1), scale=Fraction(1))
    _interrupted_then_refused(
        guard, pop, lambda: guard.spend(4, Budget(1), group="a", evidence=evidence)
    )
    assert len(guard.ledger) == 2


@pytest.mark.parametrize("sink", [False, True])
def test_an_interrupted_shortcut_append_refuses_every_later_spend(
    sink: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`spend_many`'s shortcut commits to the engine before the ledger append."""
    pop = Population.from_classes({Fixed(3, Budget(1)): 3})
    guard = Guard(pop, engine="vector", sink=_MemorySink() if sink else None)
    guard.define_group_by_index("a", pop.users, np.array([0, 1, 2], np.int64))
    guard.spend_many([Charge(1, Budget(1), group="a")])  # window [1, 3] full
    _once(monkeypatch, guard.ledger, "append_validated_rows")
    _interrupted_then_refused(
        guard, pop, lambda: guard.spend_many([Charge(4, Budget("1/100"), group="a")])
    )


def test_an_interrupt_building_the_sinks_charge_refuses_every_later_spend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The charge counts in memory but never reached the sink: a recovery would give it back."""
    pop = Population.from_classes({Fixed(3, Budget(1)): 2})
    sink = _MemorySink()
    guard = Guard(pop, engine="vector", sink=sink)
    _once(monkeypatch, guard.ledger, "charge")
    with pytest.raises(KeyboardInterrupt):
        guard.spend(1, Budget(1), user=pop.users[0])
    with pytest.raises(SinkFailed, match="the durable ledger failed on an earlier charge"):
        guard.spend(2, Budget(0), user=pop.users[0])
    assert sink.charges == []


@dataclass(frozen=True)
class _Flat:
    eps: Fraction


def test_a_registered_third_party_evidence_kind_is_accepted_and_a_string_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The label and evidence checks refuse only what no registered kind is."""
    monkeypatch.setattr(ev, "_KINDS", dict(ev._KINDS))  # registration is process-wide
    monkeypatch.setattr(ev, "_BY_TYPE", dict(ev._BY_TYPE))
    register_evidence_kind(
        EvidenceKind(
            name="flat-test-append-failure",
            type=_Flat,
            fields=("eps",),
            cost=lambda e, d: (e.eps, e.eps),
            from_json=lambda o: _Flat(Fraction(o["eps"])),
            to_json=lambda e: {"eps": str(e.eps)},
        )
    )
    pop = Population.from_classes({Fixed(3, Budget(1)): 2})
    for check_evidence in (True, False):
        guard = Guard(pop)
        guard.check_evidence = check_evidence
        guard.define_group_by_index("a", pop.users, np.array([0, 1], np.int64))
        flat: Any = _Flat(Fraction(1, 10))  # a registered kind outside the built-in union
        guard.spend(1, Budget("1/10"), user=pop.users[0], evidence=flat)
        guard.spend_many([Charge(2, Budget("1/10"), group="a", evidence=flat)])
        with pytest.raises(TypeError, match="not evidence of a registered kind"):
            guard.spend_many([Charge(3, Budget("1/10"), group="a", evidence="laplace")])  # type: ignore[arg-type]
        assert len(guard.ledger) == 2


@pytest.mark.parametrize("by_index", [True, False])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_group_the_sink_failed_to_define_refuses_every_later_spend(
    engine: str, by_index: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger took the group, the durable ledger may not have: a charge to it could not be
    written (or, defined again, the guard would find it known and skip the sink), so every
    later spend is refused, to this group or any other."""
    pop = Population.from_classes({Fixed(3, Budget(1)): 3})
    sink = _MemorySink()
    guard = Guard(pop, engine=engine, sink=sink)
    guard.spend(1, Budget("1/2"), user=pop.users[2])
    _once(monkeypatch, sink, "define_group")
    with pytest.raises(KeyboardInterrupt):
        if by_index:
            guard.define_group_by_index("a", pop.users, np.array([0, 1], np.int64))
        else:
            guard.define_group("a", pop.users[:2])
    assert isinstance(guard.broken, KeyboardInterrupt)
    guard.define_group("a", pop.users[:2])  # known to the ledger now: nothing to write
    late = Charge(2, Budget("1/4"), group="a")
    with pytest.raises(SinkFailed, match="failed on an earlier group definition"):
        guard.spend(2, Budget("1/4"), group="a")
    with pytest.raises(SinkFailed, match="failed on an earlier group definition"):
        guard.spend(2, Budget("1/4"), user=pop.users[2])
    with pytest.raises(SinkFailed, match="failed on an earlier group definition"):
        guard.spend_many([late])
    assert len(sink.charges) == 1 and len(guard.ledger) == 1


@pytest.mark.parametrize("sink", [True, False])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_group_the_engine_failed_to_take_refuses_every_later_spend(
    engine: str, sink: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger took a group drawn by index, the engine's planning of it raised: the engine
    (and the sink, never told) may not know the group, and a retry would find it known."""
    pop = Population.from_classes({Fixed(3, Budget(1)): 3})
    guard = Guard(pop, engine=engine, sink=_MemorySink() if sink else None)
    _once(monkeypatch, guard._engine, "group_defined")
    with pytest.raises(KeyboardInterrupt):
        guard.define_group_by_index("a", pop.users, np.array([0, 1], np.int64))
    assert isinstance(guard.broken, KeyboardInterrupt)
    guard.define_group_by_index("a", pop.users, np.array([0, 1], np.int64))  # known: no-op
    with pytest.raises(SinkFailed, match="failed on an earlier group definition"):
        guard.spend(1, Budget("1/4"), group="a")
    assert len(guard.ledger) == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_an_interrupt_anywhere_in_a_rescale_never_undercharges(engine: str) -> None:
    """A KeyboardInterrupt at any line of `Guard._numerator` while the guard's denominator
    grows (the engine rescaled, the scale, the class charges `spend_many` kept over the old
    denominator): afterwards the guard either refuses everything or counts every charge at
    its cost, so an over-budget slot is refused and the ledger stays compliant."""
    path = inspect.getsourcefile(Guard)
    assert path is not None
    source, first = inspect.getsourcelines(Guard._numerator)
    lines = [first + k for k, text in enumerate(source) if text.strip()[:1] not in ("", "#")]
    landed = 0
    for lineno in lines:
        pop = Population.from_classes({Fixed(1, Budget(1)): 2})
        guard = Guard(pop, engine=engine)
        (group,) = class_groups(pop, guard)
        for t in (1, 2):  # slot 2's charge is resolved with every code known, and kept
            guard.spend_many([Charge(t, Budget("1/2"), group=group)])
        seen = 0

        def local(frame: FrameType, event: str, arg: object, at: int = lineno) -> Any:
            nonlocal seen
            if event == "line" and frame.f_lineno == at and frame.f_code.co_name == "_numerator":
                seen += 1
                if seen == 1:
                    sys.settrace(None)
                    frame.f_trace = None
                    raise KeyboardInterrupt
            return local

        sys.settrace(lambda frame, event, arg: local if frame.f_code.co_filename == path else None)
        try:
            guard.spend(3, Budget("1/3"), group=group)  # grows the denominator from 2 to 6
        except KeyboardInterrupt:
            landed += 1
        finally:
            sys.settrace(None)
        with pytest.raises((BudgetExceeded, SinkFailed)):  # two fit the window of one slot
            guard.spend_many([Charge(4, Budget("1/2"), group=group) for _ in range(3)])
        assert sum(c.amount for c in guard.ledger if c.slot == 4) <= 1, lineno
        assert check(guard.ledger, pop).ok, lineno
    assert landed >= 4
