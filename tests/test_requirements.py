import pytest

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, WholeStream


def test_zero_windows_are_rejected() -> None:
    with pytest.raises(BudgetError, match="at least 1"):
        Fixed(0, Budget(1))
    with pytest.raises(BudgetError, match="w_fwd"):
        Declaration(1, 2, Budget(1), 0, Budget(1))
    with pytest.raises(BudgetError, match="slot"):
        Declaration(0, 2, Budget(1), 2, Budget(1))


def test_requirements_coerce_exact_budgets() -> None:
    assert Fixed(3, "0.3").eps == Budget("0.3")  # type: ignore[arg-type]
    with pytest.raises(BudgetError):
        WholeStream("-1")  # type: ignore[arg-type]


def test_dynamic_declaration_in_force_until_next() -> None:
    d1 = Declaration(2, 1, Budget(1), 4, Budget("2.4"))
    d2 = Declaration(5, 2, Budget(2), 3, Budget(1))
    dyn = Dynamic((d1, d2))
    assert dyn.in_force(1) is None
    assert dyn.in_force(2) == d1 and dyn.in_force(4) == d1
    assert dyn.in_force(5) == d2 and dyn.in_force(99) == d2
    assert dyn.max_w_back == 2 and dyn.max_w_fwd == 4
    with pytest.raises(BudgetError, match="increasing"):
        Dynamic((d2, d1))
    # a backward or forward window belongs to the declaration in force at its anchor
    assert dyn.governing("backward", 4) == d1 and dyn.governing("forward", 5) == d2
    assert dyn.governing("backward", 1) is None and dyn.governing("forward", None) is None
    assert dyn.governing("fixed", 4) is None and dyn.governing("whole-stream", 9) is None


def test_population_groups_users_into_classes() -> None:
    a = Fixed(3, Budget("0.5"))
    b = WholeStream(Budget(2))
    pop = Population({"x": a, "y": b, "z": Fixed(3, Budget("1/2"))})
    assert len(pop.classes) == 2
    assert pop.class_of("z").members == ("x", "z")
    assert pop.class_of("y").count == 1
    with pytest.raises(BudgetError, match="no declared requirement"):
        pop.requirement_of("nobody")
    synthetic = Population.from_classes({a: 3, b: 2})
    assert len(synthetic) == 5 and [c.count for c in synthetic.classes] == [3, 2]
