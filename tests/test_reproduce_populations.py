"""Requirement populations of the papers' experiments (wevent.experiments.populations)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wevent.accounting.budget import Budget
from wevent.accounting.requirements import Dynamic, Fixed
from wevent.experiments.populations import (
    budget_grid,
    budget_ratio_population,
    pldp_population,
    pwsm_dynamic_population,
    pwsm_population,
    uniform_population,
    window_grid,
    window_ratio_population,
)

F = Fraction


def test_grids_are_exact_and_inclusive() -> None:
    assert budget_grid(F(1, 5), F(1), F(1, 5)) == [F(1, 5), F(2, 5), F(3, 5), F(4, 5), F(1)]
    assert budget_grid(F(3, 2), F(5, 2), F(1, 2)) == [F(3, 2), F(2), F(5, 2)]
    assert budget_grid(F(1), F(1), F(1, 5)) == [F(1)]
    assert window_grid(120) == [40, 80, 120]
    assert window_grid(40) == [40]
    assert window_grid(50) == [40, 50]
    assert window_grid(20) == [20]


def test_pwsm_population_spans_e_to_1_and_40_to_w() -> None:
    pop = pwsm_population(3000, F(2, 5), 120, seed=3)
    reqs = [c.requirement for c in pop.classes]
    assert all(isinstance(r, Fixed) for r in reqs)
    budgets = {Fraction(r.eps) for r in reqs if isinstance(r, Fixed)}
    windows = {r.w for r in reqs if isinstance(r, Fixed)}
    assert budgets == {F(2, 5), F(3, 5), F(4, 5), F(1)}
    assert windows == {40, 80, 120}
    assert len(pop) == 3000
    # seeded: the same seed draws the same users
    again = pwsm_population(3000, F(2, 5), 120, seed=3)
    assert [(c.requirement, c.members) for c in pop.classes] == [
        (c.requirement, c.members) for c in again.classes
    ]


def test_pldp_population_uses_000s_budget_range() -> None:
    pop = pldp_population(2000, F(3, 2), 80, seed=0)
    budgets = {Fraction(c.requirement.eps) for c in pop.classes if isinstance(c.requirement, Fixed)}
    assert budgets == {F(3, 2), F(2), F(5, 2)}


def test_dynamic_population_is_at_least_as_loose_as_the_static_one() -> None:
    static = pwsm_population(1000, F(3, 5), 120, seed=5)
    dynamic = pwsm_dynamic_population(1000, F(3, 5), 120, seed=5)
    of = {u: c.requirement for c in static.classes for u in c.members}
    for cls in dynamic.classes:
        req = cls.requirement
        assert isinstance(req, Dynamic) and len(req.declarations) == 1
        decl = req.declarations[0]
        assert (decl.slot, decl.w_back, decl.eps_back) == (1, 1, Budget(10))
        for user in cls.members:
            base = of[user]
            assert isinstance(base, Fixed)
            assert decl.eps_fwd >= base.eps and decl.w_fwd <= base.w


@given(st.sampled_from([F(k, 10) for k in range(11)]), st.integers(10, 300), st.integers(0, 5))
def test_ratio_populations_have_exactly_round_o_n_users_of_the_first_type(
    ratio: Fraction, n: int, seed: int
) -> None:
    pop = budget_ratio_population(n, ratio, seed)
    counts = Counter({c.requirement: c.count for c in pop.classes})
    assert counts[Fixed(120, Budget("1.0"))] == round(ratio * n)
    assert sum(counts.values()) == n
    pop = window_ratio_population(n, ratio, seed)
    counts = Counter({c.requirement: c.count for c in pop.classes})
    assert counts[Fixed(40, Budget("0.6"))] == round(ratio * n)


def test_ratio_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="ratio"):
        budget_ratio_population(10, F(3, 2), 0)


def test_uniform_population_is_one_class() -> None:
    pop = uniform_population(50, 20, F(1))
    assert len(pop.classes) == 1 and pop.classes[0].requirement == Fixed(20, Budget(1))
