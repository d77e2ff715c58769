"""A spend whose check passed but whose ledger append failed records nothing and leaves the guard
fail closed: the check applied the windows' expiries up to its slot, so no charge at an earlier
slot may be checked against them (a vector-engine overspend before this was fixed). Labels and
evidence of the wrong type are refused before any check."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.accounting.spending import BudgetExceeded
from wevent.verifier.check import check
from wevent.verifier.guard import Guard, SinkFailed

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
def test_after_a_failed_append_no_earlier_slot_is_checked_again(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard, pop = _guard(engine)
    _failing_append(guard, monkeypatch)
    with pytest.raises(OSError, match="append failed"):
        guard.spend(4, Budget(1), user=pop.users[2])  # passes its check (slot 1's charge left)
    assert len(guard.ledger) == 1  # nothing recorded
    with pytest.raises(BudgetError, match="before the guard's current slot 4"):
        guard.spend(2, Budget(1), group="a")  # window [1, 3] already holds 1
    guard.spend(4, Budget(1), group="a")  # slot 4 on is still open
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
    with pytest.raises(BudgetError, match="evidence must be an Evidence record or None, got dict"):
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
        with pytest.raises(SinkFailed, match="the guard failed to record an earlier charge"):
            guard.spend(slot, Budget("1/10"), user=who)
    assert len(guard.ledger) == 2 and check(guard.ledger, pop).ok
