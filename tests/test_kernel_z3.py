"""The kernels run unchanged on Z3 terms, and the terms agree with the exact runs.

Each kernel is run once over symbolic requirement budgets and symbolic publish/skip decisions;
then, for random concrete budgets and decisions, the substituted terms must equal the exact trace
(a conformance test of "one source of truth": a later proof reasons about these very terms).
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest
import z3

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.mechanisms.allocators import CENTRAL, make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import (
    STREAMDP_CODE,
    ClassReq,
    Decl,
    DynamicClass,
    FixedClass,
    classes_of,
    published_now,
)
from wevent.mechanisms.allocators.registry import BUILTIN
from wevent.proofs.algebra import Z3Algebra

HORIZON = 7


def _shapes(mechanism: str) -> list[Requirement]:
    """Window shapes (budgets are placeholders, replaced by symbols or random values)."""
    if mechanism in ("dpbd", "dpba"):
        one = Budget(1)
        return [
            Dynamic((Declaration(1, 2, one, 3, one), Declaration(3, 3, one, 2, one))),
            Dynamic((Declaration(2, 1, one, 2, one), Declaration(4, 2, one, 3, one))),
        ]
    return [Fixed(3, Budget(1)), Fixed(2, Budget(1))]


def _symbolic(classes: list[ClassReq[Fraction]]) -> tuple[list[ClassReq[Any]], list[Any]]:
    syms: list[Any] = []

    def sym() -> Any:
        v = z3.Real(f"e{len(syms)}")
        syms.append(v)
        return v

    out: list[ClassReq[Any]] = []
    for c in classes:
        if isinstance(c, FixedClass):
            out.append(FixedClass(c.w, sym()))
        else:
            out.append(
                DynamicClass(tuple(Decl(d.slot, d.w_back, sym(), d.w_fwd, sym()) for d in c.decls))
            )
    return out, syms


def _concrete(
    classes: list[ClassReq[Fraction]], values: list[Fraction]
) -> list[ClassReq[Fraction]]:
    it = iter(values)
    out: list[ClassReq[Fraction]] = []
    for c in classes:
        if isinstance(c, FixedClass):
            out.append(FixedClass(c.w, next(it)))
        else:
            out.append(
                DynamicClass(
                    tuple(Decl(d.slot, d.w_back, next(it), d.w_fwd, next(it)) for d in c.decls)
                )
            )
    return out


def _value(term: Any) -> Fraction:
    v = z3.simplify(term)
    assert z3.is_rational_value(v), v
    return Fraction(v.numerator_as_long(), v.denominator_as_long())


@pytest.mark.parametrize(
    ("mechanism", "variant"),
    [
        (m, v)
        for m in CENTRAL
        for v in ("sound", "published", STREAMDP_CODE)
        if v in BUILTIN[m].variants
    ],
)
def test_kernel_terms_match_exact_runs(mechanism: str, variant: str) -> None:
    pop = Population({f"u{i}": r for i, r in enumerate(_shapes(mechanism))})
    shapes = classes_of(pop, mechanism)
    alg = Z3Algebra()
    sym_classes, syms = _symbolic(shapes)
    decisions = [z3.Bool(f"d{t}") for t in range(1, HORIZON + 1)]
    kernel = make_kernel(mechanism, alg, sym_classes, variant)
    state = kernel.start()
    terms = []
    for t in range(1, HORIZON + 1):
        plan = kernel.plan(state, t)
        published = published_now(alg, plan, decisions[t - 1])
        terms.append((plan, published))
        state = kernel.step(state, t, plan, published)

    rng = random.Random(f"{mechanism}-{variant}")
    for _ in range(15):
        values = [Fraction(rng.randint(1, 12), rng.choice([1, 2, 5, 10])) for _ in syms]
        decided = [rng.random() < 0.6 for _ in decisions]
        subst = [
            (s, z3.RealVal(f"{v.numerator}/{v.denominator}"))
            for s, v in zip(syms, values, strict=True)
        ]
        subst += [(d, z3.BoolVal(b)) for d, b in zip(decisions, decided, strict=True)]
        exact = run_trace(
            make_kernel(mechanism, ExactAlgebra(), _concrete(shapes, values), variant), decided
        )
        for (plan, published), slot in zip(terms, exact, strict=True):
            status = z3.is_true(z3.simplify(z3.substitute(published, *subst)))
            assert status == (slot.status == "published")
            dis = tuple(_value(z3.substitute(x, *subst)) for x in plan.dissimilarity)
            assert dis == slot.dissimilarity
            pub = tuple(_value(z3.substitute(x, *subst)) for x in plan.publication)
            assert pub == slot.candidate
