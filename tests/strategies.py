"""Hypothesis strategies shared by the tests: budgets, requirements, populations, ledgers."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from wevent.accounting.budget import Budget
from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement, WholeStream

# Small denominators make exact ties (three spends of 1/10 against 3/10) common.
budgets = st.builds(
    lambda n, d: Budget(Fraction(n, d)),
    st.integers(0, 12),
    st.sampled_from([1, 2, 3, 5, 10]),
)
positive_budgets = budgets.filter(lambda b: b > 0)
windows = st.integers(1, 5)


@st.composite
def dynamics(draw: st.DrawFn, max_slot: int = 10) -> Dynamic:
    slots = sorted(draw(st.sets(st.integers(1, max_slot), min_size=1, max_size=3)))
    return Dynamic(
        tuple(
            Declaration(s, draw(windows), draw(budgets), draw(windows), draw(budgets))
            for s in slots
        )
    )


requirements: st.SearchStrategy[Requirement] = st.one_of(
    st.builds(Fixed, windows, budgets),
    st.builds(WholeStream, budgets),
    dynamics(),
)


@st.composite
def populations(
    draw: st.DrawFn,
    min_users: int = 1,
    max_users: int = 5,
    reqs: st.SearchStrategy[Requirement] = requirements,
) -> Population:
    n = draw(st.integers(min_users, max_users))
    # Reuse a few requirements so classes have several members.
    pool = draw(st.lists(reqs, min_size=1, max_size=3))
    return Population({f"u{i}": draw(st.sampled_from(pool)) for i in range(n)})


@st.composite
def ledgers(
    draw: st.DrawFn, population: Population, max_slot: int = 12, max_rows: int = 25
) -> Ledger:
    """Random charges to users of the population (and one stranger) and to random groups."""
    users = [*population, "stranger"] if draw(st.booleans()) else list(population)
    ledger = Ledger()
    group_names: list[str] = []
    for g in range(draw(st.integers(0, 2))):
        # min_size 0: a group without members is valid (a charge of it charges nobody)
        members = draw(st.lists(st.sampled_from(users), min_size=0, max_size=4, unique=True))
        ledger.define_group(f"g{g}", members)
        group_names.append(f"g{g}")
    amount = st.one_of(budgets, st.sampled_from([Budget("0.1"), Budget("1e-18")]))
    rows = draw(
        st.lists(
            st.tuples(
                st.integers(1, max_slot),
                st.sampled_from(users + group_names),
                amount,
            ),
            max_size=max_rows,
        )
    )
    for slot, subject, amt in rows:
        if subject in group_names:
            ledger.append(slot, amt, group=subject, part="publication")
        else:
            ledger.append(slot, amt, user=subject, part="dissimilarity")
    return ledger
