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
from wevent.accounting.ledger import Charge, Ledger
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


def outcome(action: Callable[[], object]) -> str | None:
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
    # Without a sink the shortcut commits a slot's class charges at once (and, once every
    # value has its ledger code, appends them as codes); with one, charge by charge.
    durable = data.draw(st.booleans())
    fail_at = data.draw(st.one_of(st.none(), st.integers(1, 12)))
    sinks = (Recorder(fail_at), Recorder(fail_at))
    many, single = (Guard(pop, engine=engine, sink=sinks[i] if durable else None) for i in range(2))
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
        for u in table:  # (a broken guard has none: both raise)
            room = partial(many.headroom, probe, user=u)
            assert outcome(room) == outcome(partial(single.headroom, probe, user=u))
            if many.broken is None:
                assert room() == single.headroom(probe, user=u)
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
    monkeypatch.setattr(_Common, "take", lambda self, slot, asked, bound: self.add(slot, asked) or True)  # fmt: skip
    pop, groups, guard = whole_classes()
    for t in range(1, 5):
        guard.spend_many([Charge(t, Budget("0.3"), group=g) for g in groups])
    assert not check(guard.ledger, pop).ok


@settings(max_examples=300, deadline=None)
@given(
    w=st.one_of(st.none(), st.integers(1, 5)),
    steps=st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 5), st.integers(0, 12)), max_size=30
    ),
)
def test_take_is_spent_then_add(w: int | None, steps: list[tuple[int, int, int]]) -> None:
    # `take` (the shortcut's one call per class charge) adds exactly when `spent` + the asked
    # amount fits the bound, and leaves the state `add` leaves; a refusal changes nothing.
    fused, apart = _Common(w), _Common(w)
    slot = 1
    for step, asked, bound in steps:
        slot += step
        fits = apart.spent(slot) + asked <= bound
        if fits:
            apart.add(slot, asked)
        assert fused.take(slot, asked, bound) == fits
        assert (fused.total, list(fused.recent)) == (apart.total, list(apart.recent))
        for later in range(slot, slot + 7):
            assert fused.spent(later) == apart.spent(later)


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
    # through `spend`, and the shortcut's next look is bounded, so the work stays linear. The
    # partial group's class has a window of its own length, so its charges never keep the
    # shortcut from class 0 (partial charges in a window of class 0's length would).
    pop = Population.from_classes({Fixed(4000, Budget(4000)): 2, Fixed(3000, Budget(4000)): 3})
    guard = Guard(pop)
    groups = class_groups(pop, guard)
    guard.define_group_by_index("part", pop.users, np.array([2], np.int64))
    looked: list[int] = []
    real = VectorEngine.charge_whole_classes

    took: list[int] = []

    def counting(self: VectorEngine, slot: int, charges: Any) -> int:
        looked.append(len(charges))
        took.append(real(self, slot, charges))
        return took[-1]

    monkeypatch.setattr(VectorEngine, "charge_whole_classes", counting)
    n = 2000
    charges = [Charge(1, Budget(1), group=groups[0] if k % 2 else "part") for k in range(n)]
    guard.spend_many(charges)
    assert len(guard.ledger) == n
    assert sum(took) == n // 2  # the shortcut took every class charge ...
    assert len(looked) <= n // 2 + 1 and sum(looked) <= 64 * len(looked)  # ... not ~n^2 / 4


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


def test_class_slots_go_in_as_codes_once_every_value_has_one() -> None:
    # A class-level slot whose amounts, evidence and labels the ledger already holds is
    # appended as codes (`Ledger.append_coded_rows`); one with a value the ledger lacks goes
    # in by rows (which interns it). Both record what `spend` records.
    pop, groups, guard = whole_classes()
    single = Guard(pop)
    class_groups(pop, single)
    ev, half = Laplace(Fraction(1), Fraction(10)), Laplace(Fraction(1), Fraction(20))
    appends: list[tuple[str, int, int]] = []
    coded, by_rows = Ledger.append_coded_rows, Ledger.append_validated_rows

    def counting_coded(self: Ledger, slot: int, g: Any, a: Any, e: Any, labels: Any) -> None:
        appends.append(("codes", slot, len(g)))
        coded(self, slot, g, a, e, labels)

    def counting_rows(self: Ledger, slot: int, rows: Any) -> None:
        rows = list(rows)
        appends.append(("rows", slot, len(rows)))
        by_rows(self, slot, rows)

    amounts = ["1/10", "1/10", "1/20", "1/10", "3/10"]
    for t, amount in enumerate(amounts, start=1):
        e = half if amount == "1/20" else ev
        charges = [Charge(t, Budget(amount), group=g, part="x", evidence=e) for g in groups]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(Ledger, "append_coded_rows", counting_coded)
            mp.setattr(Ledger, "append_validated_rows", counting_rows)
            guard.spend_many(charges)
        one_by_one(single, charges)
    assert list(guard.ledger) == list(single.ledger)
    # Slots 1 and 3: the guard's denominator grows with the first charge, which goes through
    # `spend` (one row, interning its values); the rest of the slot goes in as codes. Slot 5's
    # amount is new over the same denominator: the shortcut takes the slot by rows.
    assert appends == [
        ("rows", 1, 1),
        ("codes", 1, 2),
        ("codes", 2, 3),
        ("rows", 3, 1),
        ("codes", 3, 2),
        ("codes", 4, 3),
        ("rows", 5, 3),
    ]
    assert check(guard.ledger, pop).ok


def test_a_refusal_inside_a_coded_slot_appends_only_the_charges_taken() -> None:
    # The engine takes the first charge and refuses the second: the coded append holds the
    # first row only, and `spend` refuses the second as it would alone.
    pop, groups, guard = whole_classes()
    single = Guard(pop)
    class_groups(pop, single)
    for g in (guard, single):
        # every amount of slot 2 is in the ledger after slot 1: slot 2 goes in as codes
        g.spend_many([Charge(1, Budget("1/2" if k == 1 else "1/4"), group=name) for k, name in enumerate(groups)])  # fmt: skip
    charges = [Charge(2, Budget("1/4"), group=groups[1]), Charge(2, Budget("1/2"), group=groups[0])]
    charges += [Charge(2, Budget("1/4"), group=groups[2])]
    got = outcome(partial(guard.spend_many, charges))
    assert got is not None and "class-0" in got
    assert got == outcome(partial(one_by_one, single, charges))
    assert list(guard.ledger) == list(single.ledger)
    assert [c.group for c in guard.ledger][-2:] == [groups[2], groups[1]]


def test_a_known_class_charge_is_taken_again_over_a_grown_denominator() -> None:
    # The shortcut keeps each class charge it resolved (amount over the guard's denominator);
    # a charge over a new denominator grows it, and the kept ones are resolved again: the
    # same charge then counts what it costs over the new denominator.
    pop, groups, guard = whole_classes()
    single = Guard(pop)
    class_groups(pop, single)
    batches = [
        [Charge(1, Budget("1/10"), group=g) for g in groups],
        [Charge(2, Budget("1/10"), group=g) for g in groups],  # taken from what was kept
        [Charge(3, Budget("1/7"), group=groups[0])],  # the denominator grows to 70
        [Charge(3, Budget("1/10"), group=g) for g in groups],
        [Charge(4, Budget("1/10"), group=g) for g in groups],
    ]
    for charges in batches:
        assert outcome(partial(guard.spend_many, charges)) == outcome(
            partial(one_by_one, single, charges)
        )
    assert list(guard.ledger) == list(single.ledger)
    for probe in range(4, 9):  # class-0 (w 3, bound 1/2): 1/10 + 1/7 + 1/10 + 1/10 at 2-4
        for u in pop.users:
            assert guard.headroom(probe, user=u) == single.headroom(probe, user=u)
    assert guard.headroom(4, group=groups[0]) == Fraction(1, 2) - Fraction(1, 7) - Fraction(3, 10)


def test_a_class_charge_taken_unchecked_is_certified_once_checking_is_on() -> None:
    # Evidence costing more than the amount passes while the guard does not check evidence;
    # once it does, the same charge is refused: nothing taken unchecked is kept as certified.
    _, groups, guard = whole_classes()
    guard.check_evidence = False
    costly = Laplace(Fraction(1), Fraction(2))  # costs 1/2
    for t in (1, 2, 3):
        guard.spend_many([Charge(t, Budget("1/10"), group=g, evidence=costly) for g in groups])
    guard.check_evidence = True
    with pytest.raises(WeventError, match=r"the evidence's cost is 0\.5, more than the 0\.1 "):
        guard.spend_many([Charge(4, Budget("1/10"), group=g, evidence=costly) for g in groups])
    assert len(guard.ledger) == 9
