"""The guard's two engines (vector and accounts) refuse exactly the same spends, with the same
window, spent, bound and excess; index-defined groups charge the users they name."""

from collections import defaultdict
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import budgets, populations, windows
from tests.test_properties import admissible
from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.ledger import distinct
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement, WholeStream
from wevent.accounting.spending import BudgetExceeded
from wevent.errors import InputError
from wevent.verifier import guard_engines
from wevent.verifier.accounts import AccountEngine
from wevent.verifier.check import check
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups
from wevent.verifier.vector import VectorEngine, _Plan

flat_requirements: st.SearchStrategy[Requirement] = st.one_of(
    st.builds(Fixed, windows, budgets),
    st.builds(WholeStream, budgets),
    # int64-hostile bounds: the vector engine must switch to Python integers, exactly
    st.builds(Fixed, windows, st.just(Budget(Fraction(2**64 + 1, 2**70 + 3)))),
)
amounts = st.one_of(budgets, st.sampled_from([Budget("0.1"), Budget("1e-18"), Budget("1/7")]))


def refusal(
    guard: Guard, slot: int, amount: Budget, user: str | None, group: str | None
) -> tuple[object, ...] | None:
    """None if the spend is accepted, else the refusal's comparable fields."""
    try:
        guard.spend(slot, amount, user=user, group=group)
    except BudgetExceeded as exc:
        w = exc.window
        return (
            exc.subject,  # the first breaking member in group order
            exc.affected_users,  # every member the spend would push over a bound
            exc.slot,
            exc.asked,
            w.kind,
            w.first,
            w.last,
            w.spent,
            w.bound,
            exc.excess,
        )
    return None


@pytest.mark.heavy
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_vector_and_account_engines_agree(data: st.DataObject) -> None:
    pop = data.draw(populations(max_users=7, reqs=flat_requirements))
    table = pop.users
    users = [*table, "stranger"]
    fast, ref = Guard(pop), Guard(pop, engine="accounts")
    assert fast.engine == "vector" and ref.engine == "accounts"
    if data.draw(st.booleans()):  # as runs do: every class by index first (codes = indices)
        for g in (fast, ref):
            class_groups(pop, g)
    slot = 1
    accepted: dict[str, dict[int, Fraction]] = defaultdict(dict)
    for n in range(data.draw(st.integers(1, 30))):
        slot += data.draw(st.integers(0, 2))
        amount = data.draw(amounts)
        how = data.draw(st.sampled_from(["user", "ids", "index", "class"]))
        if how == "user":
            members = [data.draw(st.sampled_from(users))]
        elif how == "class":
            members = list(data.draw(st.sampled_from(pop.classes)).members)
            if data.draw(st.booleans()):
                how = "index"  # a whole class, by index
        else:
            members = data.draw(st.lists(st.sampled_from(table), min_size=1, unique=True))
        name = f"g{n}"
        if how == "index":
            if data.draw(st.booleans()):  # ascending, as mechanisms draw: planned by class runs
                members.sort(key=table.index)
            idx = np.array([table.index(m) for m in members], np.int64)
            for g in (fast, ref):
                g.define_group_by_index(name, table, idx)
        elif how != "user":
            for g in (fast, ref):
                g.define_group(name, members)
        user, group = (members[0], None) if how == "user" else (None, name)
        got = refusal(fast, slot, amount, user, group)
        assert got == refusal(ref, slot, amount, user, group), (slot, members, amount)
        expect = all(admissible(accepted[u], pop.get(u), slot, amount) for u in members)
        assert (got is None) == expect
        if got is None:
            for u in members:
                accepted[u][slot] = accepted[u].get(slot, Fraction(0)) + amount
        if data.draw(st.booleans()):  # probes change nothing either engine checks next
            probe = slot + data.draw(st.integers(0, 6))
            who = data.draw(st.sampled_from(users))
            assert fast.headroom(probe, user=who) == ref.headroom(probe, user=who)
            if how != "user":
                assert fast.headroom(probe, group=name) == ref.headroom(probe, group=name)
    assert list(fast.ledger) == list(ref.ledger)
    assert fast.ledger.groups == ref.ledger.groups
    assert check(fast.ledger, pop).ok
    resumed = Guard(pop, fast.ledger)  # replaying the ledger rebuilds the same state
    for u in users:
        assert resumed.headroom(slot, user=u) == fast.headroom(slot, user=u)


def big_population(n: int = 1000, w: int = 4) -> Population:
    return Population.from_classes({Fixed(w, Budget("0.3")): n, WholeStream(Budget(1)): n})


def test_a_drawn_member_over_budget_is_refused_and_named() -> None:
    # Negative control for the fast path: one of 1,000 members of a group holds an extra charge.
    pop = big_population()
    guard = Guard(pop)
    table = pop.users
    drawn = np.arange(0, 1000, 3, dtype=np.int64)
    guard.define_group_by_index("a", table, drawn)
    guard.spend(1, "0.1", group="a")
    guard.spend(1, "0.1", user=table[600])  # 600 is drawn (600 = 3 * 200)
    guard.define_group_by_index("b", table, drawn)  # same members: same group
    guard.spend(2, "0.1", group="b")
    rows = len(guard.ledger)
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(3, "0.1", group="b")
    err = info.value
    assert f"member {table[600]!r}" in str(err) and err.affected_users == 1
    assert (err.window.first, err.window.last) == (1, 3)
    assert err.window.spent == Fraction(3, 10) and err.excess == Fraction(1, 10)
    assert len(guard.ledger) == rows  # nothing recorded
    guard.spend(5, "0.2", group="b")  # slot 1 left the window [2, 5]: 0.1 + 0.2 fits everyone
    with pytest.raises(BudgetExceeded):
        guard.spend(5, "1e-18", user=table[600])
    guard.spend(5, "0.1", user=table[1])  # never drawn: 0.1 of 0.3 in [2, 5]
    assert check(guard.ledger, pop).ok


def test_a_whole_class_charge_sees_every_member_partial_charge() -> None:
    pop = big_population()
    guard = Guard(pop)
    table = pop.users
    whole = np.arange(1000, 2000, dtype=np.int64)  # the whole-stream class
    guard.define_group_by_index("all", table, whole)
    guard.define_group_by_index("one", table, np.array([1999], np.int64))
    guard.spend(1, "0.5", group="all")
    guard.spend(7, "0.5", group="one")
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(9, "1/1000", group="all")
    assert info.value.window.kind == "whole-stream"
    assert f"member {table[1999]!r}" in str(info.value)
    assert guard.headroom(9, group="all") == 0
    assert guard.headroom(9, user=table[1000]) == Fraction(1, 2)


def test_a_broken_fast_path_is_caught_by_the_batch_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # Mutation: ignore members' partial charges. The over-budget spend then slips through, and
    # the batch checker flags the ledger: the property tests above would fail on this engine.
    pop = big_population()
    table = pop.users
    for broken in (False, True):
        if broken:
            monkeypatch.setattr(VectorEngine, "_has_partial", lambda self, c: False)
        guard = Guard(pop)
        guard.define_group_by_index("a", table, np.arange(10, dtype=np.int64))
        guard.spend(1, "0.2", group="a")
        guard.define_group_by_index("b", table, np.arange(5, 15, dtype=np.int64))
        if broken:
            guard.spend(2, "0.2", group="b")
            assert not check(guard.ledger, pop).ok
        else:
            with pytest.raises(BudgetExceeded):
                guard.spend(2, "0.2", group="b")


def test_index_groups_follow_their_table() -> None:
    pop = big_population(n=3)
    canonical = pop.users
    other = tuple(reversed(canonical))  # not the canonical order: resolved by id
    guard = Guard(pop)
    guard.define_group_by_index("x", other, np.array([0, 1], np.int64))
    assert guard.members("x") == (canonical[-1], canonical[-2])
    guard.define_group_by_index("y", list(canonical), np.array([0, 4], np.int64))
    assert guard.members("y") == (canonical[0], canonical[4]) and guard.group_size("y") == 2
    for bad, match in (
        (np.array([0, 0], np.int64), "twice"),
        (np.array([6], np.int64), "out of range"),
        (np.array([0.5]), "integer"),
    ):
        with pytest.raises(BudgetError, match=match):
            guard.define_group_by_index("z", canonical, bad)
    with pytest.raises(BudgetError, match="other members"):
        guard.define_group_by_index("y", canonical, np.array([1], np.int64))
    guard.define_group_by_index("none", canonical, np.array([], np.int64))  # valid, charges nobody
    assert guard.group_size("none") == 0
    # interned in order of first mention; the refused definitions interned nobody
    assert guard.ledger.users == (canonical[-1], canonical[-2], canonical[0])


def test_engine_choice() -> None:
    dyn = Population({"d": Dynamic((Declaration(1, 2, Budget(1), 2, Budget(1)),))})
    assert Guard(dyn).engine == "accounts"
    assert Guard(big_population(n=1)).engine == "vector"
    assert Guard(big_population(n=1), engine="accounts").engine == "accounts"
    with pytest.raises(BudgetError, match="fixed-window or whole-stream"):
        Guard(dyn, engine="vector")
    with pytest.raises(InputError, match="unknown guard engine 'fast'") as got:
        Guard(dyn, engine="fast")
    assert not isinstance(got.value, BudgetError) and "did you mean" not in str(got.value)
    with pytest.raises(InputError, match=r"unknown guard engine 'vectro'.*did you mean vector"):
        Guard(dyn, engine="vectro")


def test_int64_hostile_bounds_stay_exact() -> None:
    tiny = Budget(Fraction(1, 2**70 + 3))
    pop = Population.from_classes({Fixed(2, tiny): 3})
    guard = Guard(pop)
    table = pop.users
    guard.define_group_by_index("g", table, np.array([0, 1], np.int64))
    guard.spend(1, tiny, group="g")
    guard.spend(2, Fraction(1, 3) * tiny / 2**40, user=table[2])  # grows the denominator
    with pytest.raises(BudgetExceeded) as info:
        guard.spend(2, Fraction(1, 2**80), group="g")
    assert info.value.excess == Fraction(1, 2**80)
    guard.spend(3, tiny, group="g")  # slot 1 left the window
    assert guard.headroom(3, user=table[0]) == 0
    assert isinstance(guard._engine, VectorEngine)
    assert check(guard.ledger, pop).ok


def test_guard_engines_come_from_one_registry() -> None:
    assert guard_engines.guard_engine_names() == ("auto", "vector", "accounts")
    dyn = Population({"d": Dynamic((Declaration(1, 2, Budget(1), 2, Budget(1)),))})
    assert guard_engines.choose_guard_engine("auto", dyn).name == "accounts"
    assert guard_engines.choose_guard_engine("auto", big_population(n=1)).name == "vector"
    with pytest.raises(InputError, match="already registered"):
        guard_engines.register_guard_engine(guard_engines.GUARD_ENGINES["vector"])


def test_a_registered_engine_is_chosen_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A third engine (the accounts engine, counting its checks) serves a guard by its name,
    and `auto` still prefers the engines registered before it."""
    monkeypatch.setattr(guard_engines, "GUARD_ENGINES", dict(guard_engines.GUARD_ENGINES))
    checks: list[int] = []

    class Counting(AccountEngine):
        def check(self, slot: int, asked: int, plan: Any) -> Any:
            checks.append(slot)
            return super().check(slot, asked, plan)

    guard_engines.register_guard_engine(
        guard_engines.GuardEngineSpec(
            "counting", "counts its checks", lambda _p: True, "requirements", Counting
        )
    )
    pop = big_population(n=1)
    assert Guard(pop).engine == "vector"
    guard = Guard(pop, engine="counting")
    assert guard.engine == "counting" and isinstance(guard._engine, Counting)
    user = pop.users[0]
    guard.spend(1, Budget("0.1"), user=user)
    assert checks == [1] and check(guard.ledger, pop).ok


@given(
    idx=st.lists(st.integers(0, 40), max_size=30),
    table=st.integers(41, 60),
    before=st.lists(st.lists(st.integers(0, 40), max_size=10), max_size=3),
)
def test_the_linear_distinct_check_agrees_with_the_sort(
    idx: list[int], table: int, before: list[list[int]]
) -> None:
    """`Guard._distinct_indices` (positions written to a scratch array and read back, whatever
    earlier calls left there) says what a sort says."""
    guard = Guard(big_population(n=3))
    for earlier in before:  # leave stale positions in the scratch array
        guard._distinct_indices(np.array(earlier, np.int64), table)
    arr = np.array(idx, np.int64)
    assert guard._distinct_indices(arr, table) == distinct(arr) == (len(set(idx)) == len(idx))


def test_groups_in_ascending_order_are_planned_by_class_runs() -> None:
    # Mechanisms draw reporting users in ascending population order: the vector engine plans
    # such a group by one run per class. A whole class, parts of two others, a member holding
    # an extra charge in the last run: the refusal names it, counts every breaking member, and
    # agrees with the accounts engine and the batch checker.
    pop = Population.from_classes(
        {Fixed(2, Budget("0.5")): 4, Fixed(3, Budget("0.5")): 6, Fixed(2, Budget("0.4")): 5}
    )
    table = pop.users
    drawn = np.array([0, 1, 2, 3, 5, 7, 8, 10, 12, 13, 14], np.int64)
    fast, ref = Guard(pop), Guard(pop, engine="accounts")
    for g in (fast, ref):
        g.define_group_by_index("d", table, drawn)
        g.spend(1, "0.2", group="d")
        g.spend(1, "0.1", user=table[12])
        g.spend(2, "0.1", group="d")  # table[12] now holds 0.4 of 0.4 in [1, 2]
    plan = fast._engine.plan(None, "d")
    assert isinstance(plan, _Plan) and plan.runs is not None and list(plan.runs) == [0, 4, 7]
    assert plan.full == (True, False, False)
    for g in (fast, ref):
        with pytest.raises(BudgetExceeded) as info:
            g.spend(2, "0.1", group="d")
        err = info.value
        assert f"member {table[12]!r}" in str(err) and err.affected_users == 1
        assert err.window.spent == Fraction(4, 10) and err.window.bound == Fraction(4, 10)
        with pytest.raises(BudgetExceeded) as info:
            g.spend(2, "0.3", group="d")  # now every member breaks
        assert f"member {table[0]!r}" in str(info.value) and info.value.affected_users == 11
        g.spend(3, "0.2", group="d")  # slot 1 left the 2-slot windows; [1, 3] holds 0.5
        with pytest.raises(BudgetExceeded) as info:
            g.spend(3, "1e-18", group="d")
        assert f"member {table[5]!r}" in str(info.value) and info.value.affected_users == 3
    assert fast.headroom(3, group="d") == ref.headroom(3, group="d") == 0
    for g in (fast, ref):  # every member partial: the commit writes what the check gathered
        g.define_group_by_index("p", table, np.array([5, 7, 12, 13], np.int64))
        g.spend(4, "0.1", group="p")  # [2, 4] of table[5]: 0.4 of 0.5; [3, 4] of table[12]: 0.3
        g.spend(4, "0.1", group="p")
        with pytest.raises(BudgetExceeded) as info:
            g.spend(4, "1e-18", group="p")
        assert f"member {table[5]!r}" in str(info.value) and info.value.affected_users == 4
    assert list(fast.ledger) == list(ref.ledger) and check(fast.ledger, pop).ok


@pytest.mark.parametrize("engine", ["vector", "accounts"])
def test_a_caller_reusing_its_index_array_changes_no_group(engine: str) -> None:
    # A reviewer's reproducer: with codes equal to indices (class groups first), the vector engine
    # planned the group on the caller's own array, so refilling it moved the group's charges to
    # other users and an over-budget spend was accepted.
    pop = Population.from_classes({Fixed(3, Budget("1")): 6})
    guard = Guard(pop, engine=engine)
    class_groups(pop, guard)
    idx = np.array([0, 1, 2], np.int64)
    guard.define_group_by_index("a", pop.users, idx)
    idx[:] = [3, 4, 5]  # the caller's buffer, reused
    guard.spend(1, "1", group="a")
    assert guard.members("a") == pop.users[:3]
    with pytest.raises(BudgetExceeded):
        guard.spend(1, "1", user=pop.users[0])
    guard.spend(1, "1", user=pop.users[3])
    assert check(guard.ledger, pop).ok


def _plan_fields(engine: VectorEngine, plan: _Plan) -> tuple[object, ...]:
    """What a plan decides, however it is laid out: each member's class, which classes it
    covers whole, and the partial members (all, by window length, whole-stream classes)."""
    if plan.runs is not None:
        lengths = np.diff(plan.runs, append=len(plan.codes))
        classes = np.repeat(np.array(plan.present, np.int64), lengths)
    elif plan.member_shifted is not None:
        classes = plan.member_shifted - 1
    else:
        classes = np.full(len(plan.codes), plan.present[0], np.int64)
    return (
        plan.codes.tolist(),
        classes.tolist(),
        plan.present,
        plan.full,
        plan.windows,
        plan.partial_codes.tolist(),
        [(w, codes.tolist()) for w, codes in plan.partial_by_w],
        plan.partial_whole,
    )


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=6),
    lengths=st.lists(st.sampled_from([None, 2, 3]), min_size=6, max_size=6),
    data=st.data(),
)
def test_planning_by_class_runs_matches_planning_by_member(
    sizes: list[int], lengths: list[int | None], data: st.DataObject
) -> None:
    # The class-run plan (its shortcut for a part of every class included, with classes of
    # one window length apart from each other) decides what the per-member plan decides.
    reqs = [
        WholeStream(Budget(Fraction(i + 1, 7)))
        if w is None
        else Fixed(w, Budget(Fraction(i + 1, 7)))
        for i, w in enumerate(lengths[: len(sizes)])
    ]
    pop = Population.from_classes(dict(zip(reqs, sizes, strict=True)))
    n = len(pop)
    drawn = sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True)))
    engine = VectorEngine(pop, Guard(pop).ledger, 7)
    idx = np.array(drawn, np.int64)
    runs = engine._plan_runs(idx, idx)
    by_member = engine._plan_codes(idx, pop.classes_at(idx))
    assert _plan_fields(engine, runs) == _plan_fields(engine, by_member)
    assert runs.runs is not None or len(runs.present) == 1


def _engine_state(guard: Guard) -> tuple[object, ...]:
    """The vector engine's partial-charge state (``own`` only where it is read)."""
    engine = guard._engine
    assert isinstance(engine, VectorEngine)
    kept = engine._own if engine._materialized else engine._held  # (the other is not read)
    events = {w: [(s, c.tolist(), a, q) for s, c, a, q in e] for w, e in engine._events.items()}
    stamps = (engine._stamped, engine._base)
    return kept.tolist(), kept.dtype, events, engine._materialized, engine._amount, stamps


def _both(pop: Population) -> tuple[Guard, Guard]:
    fast, ref = Guard(pop), Guard(pop, engine="accounts")
    assert fast.engine == "vector"
    return fast, ref


def _same_verdict(guards: tuple[Guard, Guard], slot: int, amount: str, **who: Any) -> bool:
    """Spend on both engines; they must agree (refusal fields included). True if accepted."""
    fast, ref = guards
    before, scale = _engine_state(fast), fast._scale
    got = refusal(fast, slot, Budget(amount), who.get("user"), who.get("group"))
    assert got == refusal(ref, slot, Budget(amount), who.get("user"), who.get("group"))
    if got is not None and fast._scale == scale:  # (a finer amount rescales: not undone)
        assert _engine_state(fast) == before  # a refused check leaves the state as it was
    return got is None


def test_counts_widen_past_a_byte_and_stay_exact() -> None:
    # A whole-stream member and a member with a 300-slot window each hold 300 partial charges
    # (past a byte's 255): the counts widen, nothing wraps, and the bounds still bind exactly.
    pop = Population.from_classes({WholeStream(Budget(3)): 2, Fixed(300, Budget(3)): 2})
    guards = _both(pop)
    table = pop.users
    for g in guards:
        g.define_group_by_index("one", table, np.array([0], np.int64))
    for slot in range(1, 301):
        assert _same_verdict(guards, slot, "1/100", group="one")
        assert _same_verdict(guards, slot, "1/100", user=table[2])
    engine = guards[0]._engine
    assert isinstance(engine, VectorEngine) and engine._held.dtype == np.uint16
    code = guards[0].ledger.user_code(table[2])
    assert code is not None and int(engine._held[0]) == int(engine._held[code]) == 300
    assert not _same_verdict(guards, 300, "1/100", group="one")  # 3 of 3 spent
    assert not _same_verdict(guards, 300, "1/100", user=table[2])
    assert _same_verdict(guards, 301, "1/100", user=table[2])  # slot 1 left the window
    for g in guards[1:]:
        assert g.headroom(301, user=table[2]) == guards[0].headroom(301, user=table[2]) == 0


def test_own_spends_are_kept_only_while_charges_held_differ() -> None:
    # One amount held: own spends are counts times it. A second amount while the first is held
    # starts keeping ``own``; once nothing is held, one amount again. Every verdict and headroom
    # agrees with the accounts engine, through expiries and refusals that must undo them.
    pop = Population.from_classes({Fixed(3, Budget(1)): 6, Fixed(2, Budget("0.5")): 4})
    guards = _both(pop)
    fast = guards[0]
    engine = fast._engine
    assert isinstance(engine, VectorEngine)
    table = pop.users
    drawn = {"a": [0, 2, 6], "b": [2, 3, 7], "c": [0, 1, 2, 6, 7, 8]}
    for g in guards:
        for name, idx in drawn.items():
            g.define_group_by_index(name, table, np.array(idx, np.int64))
    assert _same_verdict(guards, 1, "0.25", group="a")
    assert _same_verdict(guards, 1, "0.25", group="b")  # table[2] twice: counts 2, one amount
    assert not engine._materialized and engine._amount == fast._numerator(Budget("0.25"))
    assert not _same_verdict(guards, 2, "0.5", group="b")  # table[7]: 0.25 + 0.5 > 0.5
    assert _same_verdict(guards, 2, "0.1", group="c")  # another amount: ``own`` is kept
    assert engine._materialized
    assert not _same_verdict(guards, 3, "0.5", group="c")  # table[2]: 0.6 + 0.5 > 1
    assert _same_verdict(guards, 3, "0.4", group="c")  # table[2] holds exactly 1 in [1, 3]
    assert not _same_verdict(guards, 4, "0.5", group="c")  # [2, 4]: 0.5 + 0.5 > 1 for table[2]
    for who in ("a", "b", "c"):
        assert fast.headroom(4, group=who) == guards[1].headroom(4, group=who)
    assert _same_verdict(guards, 7, "0.3", group="b")  # everything left: one amount again
    assert not engine._materialized
    assert _same_verdict(guards, 7, "0.2", user=table[2])  # a user charge: counts 2
    assert not _same_verdict(guards, 8, "0.6", group="c")
    for who in ("a", "b", "c"):
        assert fast.headroom(8, group=who) == guards[1].headroom(8, group=who)
        for u in table:
            assert fast.headroom(9, user=u) == guards[1].headroom(9, user=u)
