"""The vector engine's stamps: while no user holds two partial charges at once and every charge
held has one amount (population division), each user's byte is the slot their charge leaves
the window (counted from a base), so a charge leaves without a write. Every sequence is refused
and accepted exactly as the accounts engine does, through rebases, a member charged again
(counts), a second amount (own spends) and counts past a byte."""

from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import budgets, populations
from tests.test_guard_engines import _both, _same_verdict, refusal
from tests.test_properties import admissible
from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, WholeStream
from wevent.verifier.check import check
from wevent.verifier.guard import Guard
from wevent.verifier.vector import VectorEngine, _huge_zeros

fixed = st.builds(Fixed, st.integers(1, 5), budgets)
amounts = st.one_of(budgets, st.sampled_from([Budget("0.1"), Budget("1/7")]))


def _engine(guard: Guard) -> VectorEngine:
    engine = guard._engine
    assert isinstance(engine, VectorEngine)
    return engine


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_stamped_engine_agrees_with_the_accounts_engine(data: st.DataObject) -> None:
    # Fixed windows only (stamped from the start), stamps rebased every few slots (a lowered
    # top), slots that jump past the top, members drawn again within their window, user
    # charges, a second amount: verdicts, refusals and headrooms equal the accounts engine's.
    pop = data.draw(populations(max_users=7, reqs=fixed))
    table = pop.users
    fast, ref = _both(pop)
    engine = _engine(fast)
    assert engine._stamped
    engine._stamp_top = max(engine._windows) + data.draw(st.integers(0, 3))
    slot = 1
    accepted: dict[str, dict[int, Fraction]] = defaultdict(dict)
    for n in range(data.draw(st.integers(1, 40))):
        slot += data.draw(st.sampled_from([0, 0, 1, 1, 2, 3, 9]))
        amount = data.draw(amounts) if data.draw(st.booleans()) else Budget("1/10")
        members = sorted(
            data.draw(st.lists(st.sampled_from(table), min_size=1, unique=True)), key=table.index
        )
        user: str | None = None
        group: str | None = f"g{n}"
        if data.draw(st.integers(0, 4)) == 0:
            members = members[:1]
            user, group = members[0], None
        else:
            idx = np.array([table.index(m) for m in members], np.int64)
            for g in (fast, ref):
                g.define_group_by_index(f"g{n}", table, idx)
        got = refusal(fast, slot, amount, user, group)
        assert got == refusal(ref, slot, amount, user, group), (slot, members, amount)
        expect = all(admissible(accepted[u], pop.get(u), slot, amount) for u in members)
        assert (got is None) == expect
        if got is None:
            for u in members:
                accepted[u][slot] = accepted[u].get(slot, Fraction(0)) + amount
        probe = slot + data.draw(st.integers(0, 6))
        for u in table:
            assert fast.headroom(probe, user=u) == ref.headroom(probe, user=u)
    assert list(fast.ledger) == list(ref.ledger)
    assert check(fast.ledger, pop).ok


def test_a_charge_leaves_its_window_without_a_write() -> None:
    pop = Population.from_classes({Fixed(3, Budget(1)): 4})
    guards = _both(pop)
    fast = guards[0]
    engine = _engine(fast)
    table = pop.users
    for g in guards:
        g.define_group_by_index("a", table, np.array([0, 1, 2], np.int64))
        g.define_group_by_index("b", table, np.array([3], np.int64))
    assert _same_verdict(guards, 1, "1", group="a")
    stamps = engine._held[:4].tolist()
    assert stamps == [4, 4, 4, 0]  # slot 1 + window 3: held through slot 3, left at 4
    assert not _same_verdict(guards, 3, "1e-18", group="a")  # [1, 3] holds the charge
    assert _same_verdict(guards, 4, "1", group="b")  # expires a's charge from the queue ...
    assert [event[0] for event in engine._events[3]] == [4]  # (only b's, of slot 4, is left)
    assert engine._held.tolist()[:3] == stamps[:3]  # ... without writing a's stamps
    assert fast.headroom(4, group="a") == guards[1].headroom(4, group="a") == 1
    assert _same_verdict(guards, 4, "1", group="a")
    assert engine._stamped and not engine._materialized


def test_stamps_rebase_and_stay_exact() -> None:
    # Top 4 with windows of 2 and 3: a rebase every slot or two, and a jump past the top.
    pop = Population.from_classes({Fixed(2, Budget(1)): 3, Fixed(3, Budget(1)): 3})
    guards = _both(pop)
    fast = guards[0]
    engine = _engine(fast)
    engine._stamp_top = 4
    table = pop.users
    draws = [[0, 3], [1, 4], [2, 5]]
    for g in guards:
        for i, idx in enumerate(draws):
            g.define_group_by_index(f"d{i}", table, np.array(idx, np.int64))
    verdicts = []
    for slot in [*range(1, 25), 40, 41, 42]:  # each member drawn every third slot
        verdicts.append(_same_verdict(guards, slot, "1/2", group=f"d{slot % 3}"))
        verdicts.append(_same_verdict(guards, slot, "0.6", group=f"d{slot % 3}"))
        for u in table:
            assert fast.headroom(slot, user=u) == guards[1].headroom(slot, user=u)
    assert engine._stamped and engine._base >= 40
    assert True in verdicts and False in verdicts
    assert int(engine._held.max()) <= 4


def test_a_member_charged_again_leaves_stamps_for_counts() -> None:
    pop = Population.from_classes({Fixed(3, Budget(1)): 4})
    guards = _both(pop)
    fast = guards[0]
    engine = _engine(fast)
    table = pop.users
    for g in guards:
        g.define_group_by_index("a", table, np.array([0, 1], np.int64))
        g.define_group_by_index("b", table, np.array([1, 2], np.int64))
    assert _same_verdict(guards, 1, "1/2", group="a")
    assert engine._stamped
    assert not _same_verdict(guards, 2, "0.6", group="b")  # table[1]: 1/2 + 0.6 > 1
    assert engine._stamped  # a refusal changes nothing
    assert _same_verdict(guards, 2, "1/2", group="b")  # table[1] holds two: counts
    assert not engine._stamped and engine._held[:4].tolist() == [1, 2, 1, 0]
    assert not _same_verdict(guards, 3, "1e-18", user=table[1])
    assert _same_verdict(guards, 4, "1/2", user=table[1])  # slot 1 left: 1/2 in [2, 4]
    assert not _same_verdict(guards, 4, "1e-18", user=table[1])
    assert _same_verdict(guards, 5, "1/2", group="a")
    for u in table:
        assert fast.headroom(5, user=u) == guards[1].headroom(5, user=u)


def test_a_second_amount_leaves_stamps_for_own_spends() -> None:
    pop = Population.from_classes({Fixed(2, Budget(1)): 3})
    guards = _both(pop)
    engine = _engine(guards[0])
    table = pop.users
    assert _same_verdict(guards, 1, "1/4", user=table[0])
    assert engine._stamped
    assert _same_verdict(guards, 1, "1/3", user=table[1])  # a second amount while one held
    assert engine._materialized and not engine._stamped
    assert not _same_verdict(guards, 2, "0.8", user=table[0])  # 1/4 + 0.8 > 1
    assert _same_verdict(guards, 2, "3/4", user=table[0])
    assert _same_verdict(guards, 3, "2/3", user=table[1])  # slot 1 left: 1/3 is gone
    assert not _same_verdict(guards, 3, "1/2", user=table[0])  # 3/4 + 1/2 > 1 in [2, 3]


def test_counts_from_stamps_widen_past_a_byte() -> None:
    # A window of 2 stamps in a byte; one user charged 300 times in one slot leaves stamps for
    # counts at the second charge, and the count passes 255 exactly.
    pop = Population.from_classes({Fixed(2, Budget(3)): 2})
    guards = _both(pop)
    engine = _engine(guards[0])
    table = pop.users
    assert engine._stamped and engine._held.dtype == np.uint8
    for _ in range(300):
        assert _same_verdict(guards, 1, "1/100", user=table[0])
    assert not engine._stamped and engine._held.dtype == np.uint16
    assert int(engine._held[guards[0].ledger.user_code(table[0]) or 0]) == 300
    assert not _same_verdict(guards, 2, "1/100", user=table[0])  # 3 of 3 in [1, 2]
    assert _same_verdict(guards, 3, "3", user=table[0])  # slot 1 left


def test_which_populations_are_stamped() -> None:
    def engine(pop: Population) -> VectorEngine:
        return _engine(Guard(pop))

    short = engine(Population.from_classes({Fixed(127, Budget(1)): 2}))
    assert short._stamped and short._held.dtype == np.uint8
    long = engine(Population.from_classes({Fixed(128, Budget(1)): 2}))
    assert long._stamped and long._held.dtype == np.uint16
    longest = engine(Population.from_classes({Fixed(2**15, Budget(1)): 2}))
    assert not longest._stamped and longest._held.dtype == np.uint8
    whole = engine(Population.from_classes({Fixed(3, Budget(1)): 2, WholeStream(Budget(1)): 2}))
    assert not whole._stamped  # a whole-stream charge never leaves: counts


def test_counts_past_a_byte_through_a_drawn_groups_runs() -> None:
    # A group drawn by ascending index across two classes (its plan has runs) while a
    # whole-stream class keeps counts: the check reads one largest count per run and the commit
    # widens from that largest (`_count`'s ``top``). 300 charges of 1/100 fill the bound of 3;
    # a count that wrapped at 256 would accept charges past it.
    pop = Population.from_classes({WholeStream(Budget(3)): 2, Fixed(400, Budget(3)): 2})
    guards = _both(pop)
    engine = _engine(guards[0])
    table = pop.users
    for g in guards:
        g.define_group_by_index("d", table, np.array([1, 2], np.int64))
    plan = engine.plan_group("d")
    assert plan.runs is not None and plan.present == (0, 1)
    assert not engine._stamped and engine._held.dtype == np.uint8
    verdicts = [_same_verdict(guards, slot, "1/100", group="d") for slot in range(1, 401)]
    assert verdicts == [True] * 300 + [False] * 100
    assert not engine._materialized and engine._held.dtype == np.uint16
    codes = [guards[0].ledger.user_code(u) for u in table[1:3]]
    assert [int(engine._held[c or 0]) for c in codes] == [300, 300]
    for u in table:
        assert guards[0].headroom(400, user=u) == guards[1].headroom(400, user=u)


def _last_slot_stamped() -> tuple[tuple[Guard, Guard], VectorEngine, tuple[str, ...]]:
    """Guards on three users with windows of 3 where table[0] holds 1/2 charged at slot 1,
    stamped as leaving at slot 4: at slot 3 the charge is in the last slot of its window."""
    pop = Population.from_classes({Fixed(3, Budget(1)): 3})
    guards = _both(pop)
    engine = _engine(guards[0])
    table = pop.users
    for g in guards:
        g.define_group_by_index("pair", table, np.array([0, 1], np.int64))
    assert _same_verdict(guards, 1, "1/2", user=table[0])
    assert _same_verdict(guards, 2, "1/2", user=table[1])
    code = guards[0].ledger.user_code(table[0])
    assert code is not None and engine._stamped
    assert int(engine._held[code]) == engine._live_above(3) + 1  # held at 3, left at 4
    return guards, engine, table


@pytest.mark.parametrize("turn", ["member charged again", "user charged again", "second amount"])
def test_leaving_stamps_keeps_a_charge_in_the_last_slot_of_its_window(turn: str) -> None:
    # Each way stamps turn into counts or own spends at slot 3 must keep table[0]'s 1/2 of
    # slot 1 (a charge in the last slot of its window): in [1, 3] table[0] has 1/2 left.
    guards, engine, table = _last_slot_stamped()
    if turn == "member charged again":
        assert _same_verdict(guards, 3, "1/2", group="pair")  # table[1] holds 1/2 too: counts
        assert not engine._stamped and not engine._materialized
        assert not _same_verdict(guards, 3, "1e-18", user=table[0])  # 1/2 + 1/2 spent
    elif turn == "user charged again":
        assert _same_verdict(guards, 3, "1/2", user=table[0])  # counts
        assert not engine._stamped and not engine._materialized
        assert not _same_verdict(guards, 3, "1e-18", user=table[0])
    else:
        assert _same_verdict(guards, 3, "1/3", user=table[2])  # a second amount: own spends
        assert engine._materialized and not engine._stamped
        assert not _same_verdict(guards, 3, "0.6", user=table[0])  # 1/2 + 0.6 > 1 in [1, 3]
        assert _same_verdict(guards, 3, "1/2", user=table[0])
    for u in table:
        assert guards[0].headroom(3, user=u) == guards[1].headroom(3, user=u)
    assert _same_verdict(guards, 4, "1/2", user=table[0])  # slot 1 left [2, 4]


@pytest.mark.parametrize("windows", [(2, 2, 3, 3), (2, 3, 2, 3)])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_draws_from_every_class_agree_with_the_accounts_engine(
    windows: tuple[int, ...], data: st.DataObject
) -> None:
    # Groups drawn by ascending index from a part of every class (population division's draw):
    # their plans are cut by window length from one slice per length when each length's classes
    # are consecutive (2, 2, 3, 3), else by merging runs (2, 3, 2, 3). Members drawn again
    # within their window, nobody holding a charge, amounts above a bound: verdicts, refusals
    # and headrooms equal the accounts engine's.
    bounds = (Budget(1), Budget("3/2"), Budget("5/4"), Budget(2))
    pop = Population.from_classes({Fixed(w, b): 3 for w, b in zip(windows, bounds, strict=True)})
    table = pop.users
    guards = _both(pop)
    engine = _engine(guards[0])
    assert (engine._one_span is not None) == (windows == (2, 2, 3, 3))
    slot = 1
    for n in range(data.draw(st.integers(1, 12))):
        slot += data.draw(st.sampled_from([0, 1, 1, 2, 4]))
        idx: list[int] = []
        for c in range(len(windows)):  # a part of every class: one or two of its three users
            part = sorted(data.draw(st.sets(st.integers(0, 2), min_size=1, max_size=2)))
            idx += [3 * c + i for i in part]
        for g in guards:
            g.define_group_by_index(f"d{n}", table, np.array(idx, np.int64))
        plan = engine.plan_group(f"d{n}")
        assert plan.present == tuple(range(len(windows))) and plan.runs is not None
        amount = data.draw(st.sampled_from(["1/4", "1/2", "1", "5/4"]))
        _same_verdict(guards, slot, amount, group=f"d{n}")
        for u in table:
            assert guards[0].headroom(slot, user=u) == guards[1].headroom(slot, user=u)
    assert list(guards[0].ledger) == list(guards[1].ledger)


@pytest.mark.parametrize(
    ("size", "dtype"), [(1000, np.uint8), (2**19, np.uint8), (300_001, np.int32)]
)
def test_per_user_arrays_are_zeros_and_large_ones_start_on_a_huge_page(
    size: int, dtype: type[np.generic]
) -> None:
    # `_huge_zeros`: zeros of the size and type asked; from 512 KB on, starting on a 2 MB
    # boundary (so the kernel may back them with huge pages); two never share memory.
    first, second = _huge_zeros(size, dtype), _huge_zeros(size, dtype)
    for arr in (first, second):
        assert arr.shape == (size,) and arr.dtype == dtype and not arr.any()
        assert arr.flags.writeable and arr.flags.c_contiguous
    if size * np.dtype(dtype).itemsize >= 2**19:
        assert first.ctypes.data % (2 * 2**20) == 0 == second.ctypes.data % (2 * 2**20)
    first[:] = 7
    assert not second.any() and int(first[-1]) == 7
    assert not np.shares_memory(first, second)


def _two_classes() -> tuple[Population, list[int], list[int]]:
    """Classes A (w = 3, E = 1) and B (w = 3, E = 2) of four users each: their indices."""
    pop = Population.from_classes({Fixed(3, Budget(1)): 4, Fixed(3, Budget(2)): 4})
    start = 0
    runs = []
    for c in pop.classes:
        runs.append(list(range(start, start + c.count)))
        start += c.count
    a, b = runs if pop.classes[0].requirement == Fixed(3, Budget(1)) else runs[::-1]
    return pop, a, b


def _define(guards: tuple[Guard, ...], name: str, idx: list[int]) -> None:
    for g in guards:
        g.define_group_by_index(name, g.population.users, np.array(sorted(idx), np.int64))


@pytest.mark.parametrize("route", ["whole class", "whole class and a part of another"])
def test_a_class_wide_charge_forgets_the_rooms_kept_for_drawn_groups(route: str) -> None:
    # Drawn groups keep their per-class rooms (bound minus the amount) until the first
    # class-wide charge: after it, a member whose own spend fits the kept room but not the
    # room left by the class-wide charge is refused (a kept room would let them through).
    pop, a, b = _two_classes()
    guards = _both(pop)
    _define(guards, "d0", [a[1], b[1]])
    assert _same_verdict(guards, 1, "1/4", group="d0")  # keeps the rooms of 1/4 for (A, B)
    _define(guards, "d1", [a[0], b[0]])
    assert _same_verdict(guards, 1, "1/2", group="d1")  # a0 holds 1/2
    whole = a if route == "whole class" else [*a, b[3]]
    _define(guards, "c", whole)
    assert _same_verdict(guards, 1, "1/2", group="c")  # A's class-wide 1/2: a0 at 1
    _define(guards, "d2", [a[0], b[2]])
    assert not _same_verdict(guards, 2, "1/4", group="d2")  # a0 would reach 5/4 > 1


def test_a_singleton_class_charged_by_user_forgets_the_kept_rooms() -> None:
    # A refused check kept the rooms of a group with the one-member class C; C's member is then
    # charged alone (a class-wide charge of C): the same group's next check must see it.
    pop = Population.from_classes({Fixed(3, Budget(1)): 4, Fixed(3, Budget(2)): 1})
    a = [i for i, u in enumerate(pop.users) if pop.get(u) == Fixed(3, Budget(1))]
    c = next(i for i, u in enumerate(pop.users) if pop.get(u) == Fixed(3, Budget(2)))
    guards = _both(pop)
    _define(guards, "d0", [a[0], a[1]])
    assert _same_verdict(guards, 1, "1/2", group="d0")
    _define(guards, "d1", [a[0], c])
    assert not _same_verdict(guards, 1, "3/4", group="d1")  # a0 at 5/4: kept (3/4, (A, C))
    assert _same_verdict(guards, 2, "3/2", user=pop.users[c])  # C's class-wide 3/2
    _define(guards, "d2", [a[2], c])
    assert not _same_verdict(guards, 2, "3/4", group="d2")  # C would reach 9/4 > 2


def test_class_wide_charges_in_one_pass_forget_the_kept_rooms() -> None:
    pop, a, _ = _two_classes()
    guard = Guard(pop)
    engine = _engine(guard)
    _define((guard,), "A", a)
    engine._rooms(1, 1, engine._every_class)
    assert engine._room_cache  # kept
    code = guard.ledger.group_code("A")
    engine.plan_group("A")
    assert engine.charge_whole_classes(1, [(code, 1)]) == 1
    assert engine._room_cache is None


def test_a_rescale_forgets_the_kept_rooms() -> None:
    # A finer amount scales every bound and amount: a room kept for a numerator in the old
    # scale must not answer for the same numerator in the new one (here the room kept for
    # 1/2 in halves, one half, would refuse 1/6 in sixths to a member holding 1/3).
    pop, a, b = _two_classes()
    guards = _both(pop)
    assert guards[0]._scale == 1
    _define(guards, "d0", [a[1], b[1]])
    assert _same_verdict(guards, 1, "1/2", group="d0")  # kept: numerator 1 in halves
    _define(guards, "d1", [a[0], b[0]])
    assert _same_verdict(guards, 1, "1/3", group="d1")  # rescales to sixths; a0 holds 1/3
    assert guards[0]._scale == 6
    _define(guards, "d2", [a[0], b[2]])
    assert _same_verdict(guards, 2, "1/6", group="d2")  # numerator 1 in sixths: a0 at 1/2


@pytest.mark.parametrize("left_out", [0, 1, 2])
def test_a_draw_that_misses_a_class_is_planned_by_its_classes(left_out: int) -> None:
    # The plan of a draw from every class takes a shortcut; a draw with no member of the first,
    # a middle or the last class must not take it (each class's run would be misplaced).
    pop = Population.from_classes(
        {Fixed(3, Budget(1)): 4, Fixed(3, Budget(2)): 4, Fixed(3, Budget("1/2")): 4}
    )
    runs = []
    start = 0
    for c in pop.classes:
        runs.append(list(range(start, start + c.count)))
        start += c.count
    drawn = [i for k, run in enumerate(runs) if k != left_out for i in run[:2]]
    guards = _both(pop)
    _define(guards, "d", drawn)
    plan = _engine(guards[0]).plan_group("d")
    assert plan.present == tuple(k for k in range(3) if k != left_out)
    eps = [pop.classes[k].requirement for k in range(3) if k != left_out]
    smallest = min(r.eps for r in eps if isinstance(r, Fixed))
    assert _same_verdict(guards, 1, str(smallest), group="d")
    assert not _same_verdict(guards, 1, str(smallest), group="d")  # each drawn user at 2x
