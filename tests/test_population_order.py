"""The canonical user order and charging drawn users by index into it."""

from fractions import Fraction

import numpy as np
import pytest

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.accounting.spending import BudgetExceeded
from wevent.mechanisms.local import Reporters, population_arrays
from wevent.mechanisms.oracles import GRR, charge_reporters
from wevent.verifier.check import check
from wevent.verifier.guard import Guard


def population() -> Population:
    # classes in order of first appearance: (3, 0.5) holds a, c; (2, 1) holds b; (4, 0.5) holds d
    return Population(
        {
            "a": Fixed(3, Budget("0.5")),
            "b": Fixed(2, Budget(1)),
            "c": Fixed(3, Budget("0.5")),
            "d": Fixed(4, Budget("0.5")),
        }
    )


def test_canonical_order_is_class_by_class() -> None:
    pop = population()
    assert pop.users == ("a", "c", "b", "d")
    classes = pop.class_index_array()
    assert classes.tolist() == [0, 0, 1, 2] and not classes.flags.writeable
    users, class_of = population_arrays(pop)
    assert users is pop.users and class_of.tolist() == [0, 0, 1, 2]


def test_drawn_users_are_charged_one_group_per_budget() -> None:
    pop = population()
    guard = Guard(pop)
    users, class_of = population_arrays(pop)
    budgets = [Fraction(1, 4), Fraction(1, 2), Fraction(1, 4)]  # classes 0 and 2 share 1/4
    reporters = Reporters(users, class_of, budgets, recycle=2, rng=np.random.default_rng(0))
    reporters.charge(guard, 1, np.array([0, 2, 3], np.int64), "report", "lpa")
    charges = list(guard.ledger)
    assert [(c.amount, guard.members(c.group or "")) for c in charges] == [
        (Fraction(1, 4), ("a", "d")),
        (Fraction(1, 2), ("b",)),
    ]
    assert check(guard.ledger, pop).ok


def test_charge_reporters_by_index() -> None:
    pop = population()
    guard = Guard(pop)
    grr = GRR.for_budget(4, Budget("0.5"))
    idx = np.array([0, 1], np.int64)
    charge_reporters(guard, 1, grr.eps, grr.evidence, reports=2, table=pop.users, indices=idx)
    (charge,) = list(guard.ledger)
    assert guard.members(charge.group or "") == ("a", "c")
    for kwargs, match in (
        ({"indices": idx}, "exactly one"),  # a table is needed with indices
        ({"table": pop.users, "indices": idx, "users": ["a", "c"]}, "exactly one"),
        ({"table": pop.users, "indices": idx[:1]}, "2 reports but 1"),
    ):
        with pytest.raises(BudgetError, match=match):
            charge_reporters(guard, 2, grr.eps, grr.evidence, reports=2, **kwargs)
    with pytest.raises(BudgetExceeded, match="refused"):  # 0.5 + 0.5 in a window of 3
        charge_reporters(guard, 2, grr.eps, grr.evidence, reports=2, table=pop.users, indices=idx)
    assert len(guard.ledger) == 1
