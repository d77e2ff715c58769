import contextlib
from collections.abc import Iterator
from fractions import Fraction
from fractions import Fraction as F
from typing import Any

import pytest

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.evidence import Laplace
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, WholeStream
from wevent.accounting.spending import BudgetExceeded, EvidenceRejected, Spender
from wevent.verifier.check import check
from wevent.verifier.guard import Guard


def fixed_pop(n: int = 1, w: int = 3, eps: str = "0.3") -> Population:
    return Population({f"u{i}": Fixed(w, Budget(eps)) for i in range(n)})


def test_three_spends_of_a_tenth_fit_a_bound_of_three_tenths() -> None:
    guard = Guard(fixed_pop())
    for t in (1, 2, 3):
        guard.spend(t, "0.1", user="u0")
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(3, "1e-18", user="u0")
    err = info.value
    assert err.excess == Fraction(1, 10**18)
    assert err.window.kind == "fixed" and (err.window.first, err.window.last) == (1, 3)
    assert err.window.spent == Fraction(3, 10) and err.window.bound == Fraction(3, 10)
    msg = str(err)
    for piece in ("u0", "[1, 3]", "already spent 0.3", "asked 0.000000000000000001", "bound 0.3"):
        assert piece in msg
    assert len(guard.ledger) == 3  # nothing recorded after the refusal
    guard.spend(4, "0.1", user="u0")  # the window slid: slot 1 left it


def test_whole_stream() -> None:
    guard = Guard(Population({"a": WholeStream(Budget(1))}))
    guard.spend(1, "0.5", user="a")
    guard.spend(50, "0.5", user="a")
    with pytest.raises(BudgetExceeded, match="whole-stream window"):
        guard.spend(1000, "0.001", user="a")
    assert guard.headroom(1000, user="a") == 0


def test_unregistered_users_can_only_spend_zero() -> None:
    guard = Guard(fixed_pop())
    guard.spend(1, 0, user="stranger")
    with pytest.raises(BudgetExceeded, match="no requirement"):
        guard.spend(1, "0.1", user="stranger")


def test_slots_must_not_go_back() -> None:
    guard = Guard(fixed_pop())
    guard.spend(5, "0.1", user="u0")
    with pytest.raises(BudgetError, match="slot order"):
        guard.spend(4, "0.1", user="u0")
    with pytest.raises(BudgetError, match="numbered from 1"):
        guard.spend(0, "0.1", user="u0")


def test_evidence_must_certify_the_charge() -> None:
    guard = Guard(fixed_pop(eps="1"))
    guard.spend(1, "0.1", user="u0", evidence=Laplace(F(1), F(10)))
    with pytest.raises(EvidenceRejected, match=r"cost is 0\.2, more than the 0\.1 charged"):
        guard.spend(2, "0.1", user="u0", evidence=Laplace(F(1), F(5)))
    assert len(guard.ledger) == 1


def test_group_charges_split_accounts_only_where_needed() -> None:
    guard = Guard(fixed_pop(n=4))
    guard.define_group("all", ["u0", "u1", "u2", "u3"])
    guard.spend(1, "0.1", group="all")
    guard.spend(2, "0.1", user="u2")  # u2 now differs from the rest
    guard.spend(2, "0.1", group="all")
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(3, "0.1", group="all")
    assert "member 'u2'" in str(info.value)
    assert info.value.affected_users == 1
    guard.spend(3, "0.1", user="u0")
    assert guard.headroom(3, user="u1") == Fraction(1, 10)
    assert guard.headroom(3, group="all") == 0
    assert check(guard.ledger, guard.population).ok


def test_dynamic_backward_and_forward_are_enforced() -> None:
    # Forward requirement at slot 1: at most 1 over [1, 4]; backward: at most 0.8 over 2 slots.
    dyn = Dynamic((Declaration(1, 2, Budget("0.8"), 4, Budget(1)),))
    guard = Guard(Population({"d": dyn}))
    guard.spend(1, "0.4", user="d")
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(2, "0.5", user="d")
    assert info.value.window.kind == "backward"
    assert info.value.excess == Fraction(1, 10)
    guard.spend(3, "0.4", user="d")
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(4, "0.3", user="d")
    # Backward [3, 4] would hold 0.7 <= 0.8; the forward window [1, 4] from slot 1 breaks.
    assert info.value.window.kind == "forward"
    assert (info.value.window.first, info.value.window.last) == (1, 4)
    assert info.value.excess == Fraction(1, 10)


def test_dynamic_spend_before_first_declaration_is_refused() -> None:
    dyn = Dynamic((Declaration(3, 2, Budget(1), 2, Budget(1)),))
    guard = Guard(Population({"d": dyn}))
    with pytest.raises(BudgetExceeded, match="unregistered"):
        guard.spend(1, "0.1", user="d")
    guard.spend(3, "0.5", user="d")


def test_guard_is_a_spender_and_resumes_from_a_ledger() -> None:
    guard: Spender = Guard(fixed_pop())
    guard.spend(1, Budget("0.2"), user="u0")
    assert isinstance(guard, Guard)
    resumed = Guard(guard.population, guard.ledger)
    with pytest.raises(BudgetExceeded):
        resumed.spend(2, "0.2", user="u0")


def test_probing_a_later_slot_changes_nothing() -> None:
    # Found in review: a refused spend or a headroom probe at slot 10 used to advance the forward
    # windows, so a later spend at slot 2 was checked against the wrong windows.
    dyn = Dynamic((Declaration(1, 1, Budget(10), 3, Budget(1)),))
    pop = Population({"a": dyn})
    guard = Guard(pop)
    guard.spend(1, Budget(1), user="a")
    assert guard.headroom(10, user="a") == 1
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(2, Budget(1), user="a")  # the forward window [1, 3] is full
    assert info.value.window.kind == "forward"
    assert check(guard.ledger, pop).ok


def test_future_backward_windows_are_enforced_in_advance() -> None:
    # Slot 5 declares: at most 1 over [1, 5]. Spending 0.8 at slot 1 and 0.3 at slot 2 would make
    # that declaration impossible to meet, so the second spend is refused now.
    dyn = Dynamic(
        (Declaration(1, 1, Budget(10), 1, Budget(10)), Declaration(5, 5, Budget(1), 1, Budget(10)))
    )
    guard = Guard(Population({"d": dyn}))
    guard.spend(1, "0.8", user="d")
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(2, "0.3", user="d")
    assert info.value.window.kind == "backward"
    assert (info.value.window.first, info.value.window.last) == (1, 5)
    assert info.value.excess == Fraction(1, 10)
    guard.spend(2, "0.2", user="d")


def test_a_forwarding_spender_passes_every_call_to_the_guard_unchanged() -> None:
    import numpy as np

    from wevent.accounting.ledger import Charge
    from wevent.accounting.spending import ForwardingSpender, batched

    pop = fixed_pop(n=3)
    direct, through = Guard(pop), Guard(pop)
    wrapper: Spender = ForwardingSpender(through)
    for spender in (direct, wrapper):
        spender.define_group("g", ("u0", "u1"))
        spender.define_group_by_index("h", list(pop.users), np.array([1, 2], dtype=np.int64))
        spender.spend(1, Budget("0.1"), user="u0", mechanism="m", evidence=Laplace(F(1), F(10)))
        spender.spend(2, Budget("0.1"), group="g", part="p")
        ForwardingSpender.spend_many(  # the wrapper's batch path, or one spend each
            ForwardingSpender(spender), [Charge(3, Budget("0.1"), group="h")]
        )
    assert wrapper.members("h") == direct.members("h") == ("u1", "u2")
    assert wrapper.group_size("g") == direct.group_size("g") == 2
    assert list(through.ledger.expanded()) == list(direct.ledger.expanded())
    # and a refusal reaches the caller as the guard's own, recording nothing
    with pytest.raises(BudgetExceeded):
        wrapper.spend(3, Budget("0.2"), user="u1")
    assert len(through.ledger) == len(direct.ledger)
    # the wrapper keeps the inner spender's group commit: its spends commit inside the guard's
    # batch (a ForwardingSpender without `batch` would fall back to no batch at all)
    entered: list[bool] = []

    class Watched(Guard):
        @contextlib.contextmanager
        def batch(self) -> Iterator[None]:
            entered.append(True)
            with super().batch():
                yield

    with batched(ForwardingSpender(Watched(pop))):
        pass
    assert entered == [True]


class _ShiftedTable(tuple):  # type: ignore[type-arg]
    """Iterates as the population's table, but ``[i]`` answers the id at ``i + 1``."""

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, int):
            return tuple.__getitem__(self, (i + 1) % len(self))
        return tuple.__getitem__(self, i)


@pytest.mark.parametrize("engine", ["vector", "accounts"])
def test_a_table_equal_by_iteration_is_not_trusted_to_index(engine: str) -> None:
    """A group drawn by index from a table equal to the population's (by iteration) takes its
    members from the population's own table: a table whose ``[]`` disagrees put user u4 (eps
    1) in the ledger where the vector engine counted index 2 (u3, eps 5), so the guard let u4
    spend 3 in a window of 1."""
    import numpy as np

    pop = Population.from_classes({Fixed(2, Budget(5)): 3, Fixed(3, Budget(1)): 3})
    guard = Guard(pop, engine=engine)
    guard.define_group_by_index("x", _ShiftedTable(pop.users), np.array([0, 2], np.int64))
    assert guard.members("x") == (pop.users[0], pop.users[2])
    for _ in range(3):
        guard.spend(1, Budget(1), group="x")
    assert check(guard.ledger, pop).ok
