"""The fast checker, the reference checker and the runtime guard agree on random inputs."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import Budget
from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.requirements import Dynamic, Fixed, WholeStream
from wevent.accounting.spending import BudgetExceeded
from wevent.verifier.check import check
from wevent.verifier.guard import Engine, Guard
from wevent.verifier.reference import reference_check
from wevent.verifier.verdict import Verdict, Violation

from .strategies import budgets, ledgers, populations


def per_user(verdict: Verdict) -> list[Violation]:
    out = []
    for v in verdict.violations:
        for u in v.users:
            out.append(
                Violation(
                    v.kind,
                    (u,),
                    v.first,
                    v.last,
                    v.anchor,
                    v.spends,
                    v.total,
                    v.bound,
                    v.requirement,
                )
            )
    return sorted(out, key=Violation.sort_key)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fast_checker_agrees_with_reference(data: st.DataObject) -> None:
    pop = data.draw(populations())
    ledger = data.draw(ledgers(pop))
    if data.draw(st.booleans()):  # a class nobody in the ledger has, with an int64-hostile bound
        pop = Population({**dict(pop.items()), "absent": Fixed(2, Budget(Fraction(1, 2**70 + 3)))})
    ref = reference_check(ledger, pop)
    # dense_limit=0: sparse pass only; a huge limit: dense screening first, then detail.
    for limit in (0, 10**9):
        fast = check(ledger, pop, dense_limit=limit)
        assert per_user(fast) == list(ref.violations)
        assert fast.user_utilization == ref.user_utilization
        assert fast.class_utilization == ref.class_utilization
        assert fast.ok == ref.ok
        assert fast.per_user_charges == ref.per_user_charges == ledger.per_user_rows()


def admissible(spends: dict[int, Fraction], req: object, slot: int, amount: Fraction) -> bool:
    """Brute force: would every window containing ``slot`` hold after adding ``amount`` there?
    Only spends up to ``slot`` exist yet, so later windows hold partial sums."""
    s = dict(spends)
    s[slot] = s.get(slot, Fraction(0)) + amount

    def total(a: int, b: int) -> Fraction:
        return sum((x for t, x in s.items() if a <= t <= b), Fraction(0))

    if req is None:
        return amount == 0
    if isinstance(req, Fixed):
        return all(total(a, a + req.w - 1) <= req.eps for a in range(slot - req.w + 1, slot + 1))
    if isinstance(req, WholeStream):
        return total(1, slot) <= req.eps
    assert isinstance(req, Dynamic)
    if req.in_force(slot) is None:
        return amount == 0
    # Every declared window containing the slot, backward ones anchored at later slots included
    # (requirements are known in advance), holds the partial sum of spends so far.
    horizon = slot + max(req.max_w_back, req.max_w_fwd) + max(req.slots)
    for t in range(1, horizon + 1):
        dt = req.in_force(t)
        if dt is None:
            continue
        if t >= slot and t - dt.w_back + 1 <= slot and total(t - dt.w_back + 1, t) > dt.eps_back:
            return False
        if t <= slot <= t + dt.w_fwd - 1 and total(t, slot) > dt.eps_fwd:
            return False
    return True


@pytest.mark.parametrize("engine", ["auto", "accounts"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_guard_refuses_exactly_the_inadmissible_spends(engine: Engine, data: st.DataObject) -> None:
    pop = data.draw(populations())
    users = [*pop, "stranger"]
    attempts = data.draw(
        st.lists(
            st.tuples(
                st.integers(1, 12),
                st.lists(st.sampled_from(users), min_size=1, max_size=3, unique=True),
                st.one_of(
                    budgets, st.sampled_from([Budget("0.1"), Budget("1e-18"), Budget("1/7")])
                ),
            ),
            max_size=30,
        )
    )
    attempts.sort(key=lambda a: a[0])
    guard = Guard(pop, engine=engine)
    accepted: dict[str, dict[int, Fraction]] = defaultdict(dict)
    for n, (slot, members, amount) in enumerate(attempts):
        expect = all(admissible(accepted[u], pop.get(u), slot, amount) for u in members)
        try:
            if len(members) == 1:
                guard.spend(slot, amount, user=members[0])
            else:
                guard.define_group(f"g{n}", members)
                guard.spend(slot, amount, group=f"g{n}")
            got = True
        except BudgetExceeded:
            got = False
        assert got == expect, (slot, members, amount)
        if got:
            for u in members:
                accepted[u][slot] = accepted[u].get(slot, Fraction(0)) + amount
        # Probing later slots (headroom) changes nothing the next spend is checked against.
        if data.draw(st.booleans()):
            probe = slot + data.draw(st.integers(0, 6))
            for u in members:
                guard.headroom(probe, user=u)
    # Whatever the guard let through passes the batch check, at every horizon.
    assert check(guard.ledger, pop).ok
    assert check(guard.ledger, pop, horizon=20).ok


@settings(max_examples=100, deadline=None)
@given(populations(), st.data())
def test_int64_and_python_int_paths_agree(pop: Population, data: st.DataObject) -> None:
    ledger = data.draw(ledgers(pop))
    # A huge-denominator charge forces the exact Python-integer path for the whole ledger.
    forced = Ledger()
    for name, members in ledger.groups.items():
        forced.define_group(name, members)
    for ch in ledger:
        forced.append(ch.slot, ch.amount, user=ch.user, group=ch.group)
    forced.append(1, Fraction(1, 2**70 + 1), user="zz-huge")
    # A class nobody in the ledger belongs to, with a bound no int64 could hold over the lcd.
    pop = Population({**dict(pop.items()), "absent": Fixed(2, Budget(Fraction(1, 2**70 + 3)))})
    a = check(forced, pop)
    b = reference_check(forced, pop)
    assert per_user(a) == list(b.violations)
    assert a.user_utilization == b.user_utilization


def test_huge_slots_and_windows_stay_exact() -> None:
    # Found in review: the sort key rep * (horizon + 2) + slot overflowed int64 for slot 10^18,
    # reporting the wrong user; windows of 2^63 slots overflowed numpy arrays.
    ledger = Ledger()
    for i in range(20):
        ledger.append(10**18, Budget(1), user=f"u{i}")
    ledger.append(10**18, Budget(1), user="u15")
    pop = Population({f"u{i}": Fixed(1, Budget(1)) for i in range(20)})
    for limit in (0, 10**9):
        verdict = check(ledger, pop, dense_limit=limit)
        assert [(v.users, v.first) for v in verdict.violations] == [(("u15",), 10**18)]
    huge = Population({"a": Fixed(2**63, Budget(1)), "b": WholeStream(Budget(5))})
    small = Ledger()
    small.append(1, "0.6", user="a")
    small.append(7, "0.6", user="a")
    assert per_user(check(small, huge)) == list(reference_check(small, huge).violations)


def test_dynamic_check_needs_no_per_slot_arrays() -> None:
    # Found in review: the dynamic pass allocated arrays of the horizon's length per user.
    from wevent.accounting.requirements import Declaration

    dyn = Dynamic(
        (
            Declaration(1, 3, Budget(1), 2, Budget("1.5")),
            Declaration(10**12, 2, Budget("0.5"), 2, Budget(1)),
        )
    )
    pop = Population({"d": dyn})
    ledger = Ledger()
    ledger.append(10**12 - 1, "0.4", user="d")
    ledger.append(10**12, "0.3", user="d")
    verdict = check(ledger, pop, dense_limit=0)
    kinds = sorted((v.kind, v.anchor) for v in verdict.violations)
    assert kinds == [("backward", 10**12)]  # 0.7 > 0.5 over [10^12 - 1, 10^12]
