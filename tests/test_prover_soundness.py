"""The prover's own soundness (issue 20, part 0): what a proof reasons about is what the kernel
computes.

Negative controls: `test_the_ten_lines` and `test_symbolic_algebra_agrees_with_exact` fail on the
id-keyed fold cache this file was written against (verified by reverting the fix)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms.allocators.algebra import ExactAlgebra, vmax, vmin
from verifier.symbolic import Z3ScopeAlgebra, fraction_of


def test_the_ten_lines() -> None:
    """Issue 20's reproduction: a fold cached for a freed select was returned for a new one."""
    alg = Z3ScopeAlgebra([], [])
    one = alg.const(1)
    absorbed = alg.sub(alg.const(1), alg.add(alg.const(0), alg.sub(alg.const(0), one)))
    at_least_one = vmax(alg, absorbed, one)
    capped = vmin(alg, at_least_one, alg.const(1))
    assert fraction_of(capped) == 1


_VALUE = st.fractions(min_value=-3, max_value=3, max_denominator=4)


@settings(max_examples=150, deadline=None)
@given(_VALUE, _VALUE, _VALUE, st.lists(_VALUE, min_size=2, max_size=6))
def test_symbolic_algebra_agrees_with_exact(
    a: Fraction, x: Fraction, y: Fraction, bounds: list[Fraction]
) -> None:
    """Selects on the same branches under a fresh condition each time (the condition term is
    freed after each select, so Z3 gives its id to the next one): every result is the exact one.
    """
    exact = ExactAlgebra()
    alg = Z3ScopeAlgebra([], [])
    ta, tx, ty = alg.const(a), alg.const(x), alg.const(y)
    for b in bounds:
        got = alg.select(alg.le(ta, alg.const(b)), tx, ty)
        assert fraction_of(got) == exact.select(exact.le(a, b), x, y)
        got = vmin(alg, vmax(alg, ta, alg.const(b)), ty)
        assert fraction_of(got) == min(max(a, b), y)
