"""`Guard.spend_many` takes exactly what `Guard.spend` one charge at a time takes: the same
charges recorded, the same refusal (type and message) at the same charge, the same window state
afterwards, the same durable records. Its shortcut for class-level slots
(`Guard._charge_whole_classes`, `VectorEngine.charge_whole_classes`) is held to that here,
with negative controls that break it. A shortcut that refuses too much is invisible to the
property (what it leaves goes through `spend`, which takes it): that it takes a class-level
slot whole is a test of its own."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import budgets, populations, windows
from wevent.accounting.budget import Budget
from wevent.accounting.evidence import Laplace
from wevent.accounting.ledger import Charge
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, Requirement, WholeStream
from wevent.errors import WeventError
from wevent.verifier.check import check
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups
from wevent.verifier.vector import VectorEngine, _Common

flat_requirements: st.SearchStrategy[Requirement] = st.one_of(
    st.builds(Fixed, windows, budgets), st.builds(WholeStream, budgets)
)
# A few shared evidence objects (certified once, then found by identity), one that certifies
# more than most amounts (refused), and fresh equal copies (found by value).
EVIDENCE = [None, Laplace(Fraction(1), Fraction(10)), Laplace(Fraction(1), Fraction(1, 10))]


class Recorder:
    """A durable sink that keeps what it is asked to write; ``fail_at``: the append (counted
    from 1) that raises, as a disk or a replayed ledger that disagrees would."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.events: list[object] = []
        self.fail_at = fail_at
        self.appends = 0

    def define_group(self, name: str, members: Iterable[str]) -> None:
        self.events.append(("group", name, tuple(members)))

    def append_charge(self, charge: Charge) -> None:
        self.appends += 1
        if self.appends == self.fail_at:
            raise OSError(5, "Input/output error")
        self.events.append(charge)

    def commit(self) -> int:
        self.events.append("commit")
        return 0


def outcome(action: Callable[[], None]) -> str | None:
    try:
        action()
    except (WeventError, TypeError, ValueError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def one_by_one(guard: Guard, charges: list[Charge]) -> None:
    with guard.batch():  # spend_many's group commit, without its shortcut
        for c in charges:
            guard.spend_charge(c)  # `spend` with the charge's fields


@st.composite
def batch(
    draw: st.DrawFn, slot: int, groups: list[str], users: list[str]
) -> tuple[int, list[Charge]]:
    """Mostly charges to whole classes at one slot (a class-level allocator's slot), with the
    odd user charge, other group, later slot, undefined group or non-Budget amount."""
    charges = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["class"] * 5 + ["some"] * 2 + ["user", "later", "odd"] * 2))
        # Small amounts add up to a bound over a few slots; larger ones are refused at once.
        small = st.sampled_from([Budget("1/10"), Budget("1/5"), Budget("1/7"), Budget(0)])
        amount = draw(st.one_of(small, small, budgets))
        evidence = draw(st.sampled_from(EVIDENCE[:1] * 3 + EVIDENCE))
        if evidence is not None and draw(st.integers(0, 4)) == 0:
            evidence = Laplace(evidence.sensitivity, evidence.scale)  # equal, not the same
        part, mech = draw(
            st.sampled_from(
                [("dissimilarity", "pba"), ("publication", "pba"), ("publication", "ba")]
            )
        )
        if kind == "later":
            slot += draw(st.integers(1, 3))
        if kind == "user":
            target: dict[str, Any] = {"user": draw(st.sampled_from(users))}
        elif kind == "some" and "some" in groups:
            target = {"group": "some"}
        elif kind == "odd":
            odd = draw(
                st.sampled_from(
                    [
                        "undefined",
                        "both",
                        "fraction",
                        "slot0",
                        "slot type",
                        "unregistered evidence",
                        "unhashable part",
                    ]
                )
            )
            if odd == "undefined":
                target = {"group": "nobody"}
            elif odd == "both":
                target = {"group": groups[0], "user": users[0]}
            elif odd == "fraction":
                target = {"group": draw(st.sampled_from(groups))}
                amount = Fraction(amount)  # type: ignore[assignment]  # not a Budget: converted
            elif odd == "slot type":  # equal to the slot, not an int: refused as a slot
                bad = draw(st.sampled_from([np.int64(slot), float(slot), slot == 1]))
                charges.append(Charge(bad, amount, group=draw(st.sampled_from(groups))))  # type: ignore[arg-type]
                continue
            elif odd == "unregistered evidence":  # raises when certified
                target = {"group": draw(st.sampled_from(groups))}
                evidence = object()  # type: ignore[assignment]
            elif odd == "unhashable part":  # raises when the ledger appends it
                target = {"group": draw(st.sampled_from(groups))}
                part = ["x"]  # type: ignore[assignment]
            else:
                charges.append(Charge(0, amount, group=groups[0]))
                continue
        else:
            target = {"group": draw(st.sampled_from(groups))}
        charges.append(Charge(slot, amount, part=part, mechanism=mech, evidence=evidence, **target))
    return slot, charges


# 100 examples in the default suite (about 15 s of the 400's 65 s on a loaded 2-core machine),
# the full 400 under `make slow` (the same property, test_..._at_full_count below).
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_spend_many_takes_exactly_what_spend_takes(data: st.DataObject) -> None:
    spend_many_agrees_with_spend(data)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_spend_many_takes_exactly_what_spend_takes_at_full_count(data: st.DataObject) -> None:
    spend_many_agrees_with_spend(data)


def spend_many_agrees_with_spend(data: st.DataObject) -> None:
    pop = data.draw(populations(max_users=6, reqs=flat_requirements))
    engine = data.draw(st.sampled_from(["vector", "vector", "accounts"]))
    fail_at = data.draw(st.one_of(st.none(), st.integers(1, 12)))
    sinks = (Recorder(fail_at), Recorder(fail_at))
    many, single = (Guard(pop, engine=engine, sink=sinks[i]) for i in range(2))
    groups: list[str] = []
    for g in (many, single):
        groups = class_groups(pop, g)
    table = pop.users
    if len(table) > 1:  # a group of part of a class: its members hold partial charges
        # the first and the last user (one run of a class, or two), or the first alone
        some = [0, len(table) - 1] if data.draw(st.booleans()) else [0]
        if pop.classes[0].count > len(some) or len(some) == 2:
            for g in (many, single):
                g.define_group_by_index("some", table, np.array(some, np.int64))
            groups.append("some")
    users = [*table, "stranger"]
    slot = 1
    for _ in range(data.draw(st.integers(1, 20))):
        slot += data.draw(st.integers(0, 2))
        end, charges = data.draw(batch(slot, groups, users))
        assert many.broken is None or single.broken is not None
        got = outcome(partial(many.spend_many, charges))
        assert got == outcome(partial(one_by_one, single, charges)), charges
        assert list(many.ledger) == list(single.ledger)
        assert many.slot == single.slot
        slot = max(slot, end)
        probe = slot + data.draw(st.integers(0, 4))
        for u in table:
            assert many.headroom(probe, user=u) == single.headroom(probe, user=u)
    assert sinks[0].events == sinks[1].events
    assert (many.broken is None) == (single.broken is None)
    assert check(many.ledger, pop).ok


def whole_classes(n: int = 4) -> tuple[Population, list[str], Guard]:
    pop = Population.from_classes(
        {Fixed(3, Budget("0.5")): n, Fixed(2, Budget("1")): n, WholeStream(Budget("1.5")): n}
    )
    guard = Guard(pop)
    return pop, class_groups(pop, guard), guard


def test_the_shortcut_takes_class_level_slots() -> None:
    # The path the property above holds equal is the one class-level allocators take.
    pop, groups, guard = whole_classes()
    seen: list[int] = []
    real = VectorEngine.charge_whole_classes

    def counting(self: VectorEngine, slot: int, charges: Any) -> int:
        seen.append(real(self, slot, charges))
        return seen[-1]

    ev = Laplace(Fraction(1), Fraction(10))  # certifies 0.1
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(VectorEngine, "charge_whole_classes", counting)
        for t in range(1, 6):
            guard.spend_many(
                [Charge(t, Budget("0.1"), group=g, part="x", evidence=ev) for g in groups]
            )
    # Evidence is certified by the ordinary path until the guard holds it, then the shortcut
    # takes every charge of the slot.
    assert seen[-3:] == [3, 3, 3]
    assert check(guard.ledger, pop).ok
    with pytest.raises(WeventError, match=r"slot 6 for group 'class-0'.*window \[4, 6\]"):
        guard.spend_many(
            [Charge(6, Budget("0.1"), group=groups[1]), Charge(6, Budget("0.4"), group=groups[0])]
        )
    assert len(guard.ledger) == 15 + 1  # the charge before the refused one stays recorded


def test_a_shortcut_that_skips_the_window_check_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Negative control: a shortcut that never compares against the bound lets an over-budget
    # slot through; the batch checker flags the ledger, and the property above fails on it.
    monkeypatch.setattr(_Common, "spent", lambda self, slot: 0)
    pop, groups, guard = whole_classes()
    for t in range(1, 5):
        guard.spend_many([Charge(t, Budget("0.3"), group=g) for g in groups])
    assert not check(guard.ledger, pop).ok


def test_the_class_window_drops_exactly_what_leaves_it() -> None:
    # A charge leaves a window of w slots w slots later, not one sooner nor one later.
    common = _Common(3)
    common.add(1, 5)
    common.add(2, 7)
    assert [common.spent(t) for t in (2, 3, 4, 5)] == [12, 12, 7, 0]
    common.add(4, 1)  # drops slot 1
    assert common.total == 8 and [s for s, _ in common.recent] == [2, 4]
    assert common.spent(6) == 1 and common.spent(7) == 0  # a later look changes nothing ...
    assert common.spent(4) == 8  # ... for a spend at the current slot
    whole = _Common(None)
    whole.add(1, 5)
    whole.add(9, 5)
    assert whole.spent(100) == 10


def test_fresh_equal_evidence_is_not_kept_by_identity() -> None:
    # A mechanism that builds a new (equal) evidence object for every spend: only the object
    # the ledger holds is remembered by identity, so nothing grows with the number of spends.
    _, groups, guard = whole_classes()
    for t in range(1, 401):
        ev = Laplace(Fraction(1), Fraction(100))  # certifies 0.01: a fresh object each time
        guard.spend_many([Charge(t, Budget("0.01"), group=g, evidence=ev) for g in groups[:2]])
    assert len(guard.ledger) == 800
    assert len(guard._certified) <= 2


def test_a_mixed_batch_is_looked_at_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Whole classes alternating with a partial group: each charge the shortcut leaves goes
    # through `spend`, and the shortcut's next look is bounded, so the work stays linear.
    pop = Population.from_classes({Fixed(4000, Budget(4000)): 2, Fixed(4000, Budget(4000)): 3})
    guard = Guard(pop)
    groups = class_groups(pop, guard)
    guard.define_group_by_index("part", pop.users, np.array([2], np.int64))
    looked: list[int] = []
    real = VectorEngine.charge_whole_classes

    def counting(self: VectorEngine, slot: int, charges: Any) -> int:
        looked.append(len(charges))
        return real(self, slot, charges)

    monkeypatch.setattr(VectorEngine, "charge_whole_classes", counting)
    n = 2000
    charges = [Charge(1, Budget(1), group=groups[0] if k % 2 else "part") for k in range(n)]
    guard.spend_many(charges)
    assert len(guard.ledger) == n
    assert len(looked) <= n // 2 + 1 and sum(looked) <= 64 * len(looked)  # not ~n^2 / 4


@pytest.mark.parametrize("bad", [True, np.int64(1), 1.0])
def test_a_later_charge_at_a_slot_that_is_no_int_is_refused(bad: Any) -> None:
    # Equal to the batch's slot but not an int: `spend` refuses it, after the charge before
    # (amounts over the guard's denominator, so the shortcut looks at both).
    _, groups, guard = whole_classes()
    first = Charge(1, Budget("1/2"), group=groups[0])
    with pytest.raises(WeventError, match="slots are whole numbers"):
        guard.spend_many([first, Charge(bad, Budget("1/2"), group=groups[1])])
    assert [c.group for c in guard.ledger] == [groups[0]]


def test_rows_keep_their_own_part_and_mechanism() -> None:
    # The ledger keeps the codes of each (part, mechanism) pair: rows that share a part but not
    # a mechanism (or the reverse) keep their own, through both paths.
    _, groups, guard = whole_classes()
    labels = [("publication", "pba"), ("publication", "ba"), ("dissimilarity", "ba")]
    guard.spend_many(
        [Charge(1, Budget("1/2"), group=groups[1], part=p, mechanism=m) for p, m in labels[:2]]
        + [Charge(1, Budget("1/2"), group=groups[2], part=p, mechanism=m) for p, m in labels[2:]]
    )
    guard.spend(2, Budget("1/2"), group=groups[0], part="publication", mechanism="x")
    got = [(c.part, c.mechanism) for c in guard.ledger]
    assert got == [*labels, ("publication", "x")]
