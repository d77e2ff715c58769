"""Symbolic checking of spend traces with Z3: bounded proofs, first failures, induction steps.

The engine knows nothing about allocators. A caller runs a budget kernel on Z3 terms (with one
of the algebras below) and hands over an `Unrolling`: per slot and per subject (requirement
class) the term spent, the condition "a negative budget was allocated", and the windows the
requirement states (fixed, or dynamic backward / forward, 001 Definition 10), each with its bound.

* `prove_bounded` asserts the negation of "every window sum <= its bound and no budget is
  negative" over the horizon: unsat is a proof for every decision sequence and every parameter
  allowed by the assumptions; a timeout is "unknown", never a proof.
* `first_failure` finds the earliest slot at which some model fails (incrementally, slot by slot
  with push/pop): every earlier slot is then unsat for every model, so the failure it returns is
  the first one a replay of that model meets, which is also where the runtime guard refuses
  (it refuses a spend as soon as some window holding it is over its bound).

The algebra (same protocol as `wevent.mechanisms.allocators.algebra`, structurally):

* `Z3ScopeAlgebra`: Z3 reals and Booleans. Terms built only from parameters (requirement budgets)
  are *folded* when the scope's assumptions decide them: ``If(c, a, b)`` becomes ``b`` when the
  assumptions imply ``c -> a == b`` (and symmetrically), each fold justified by an unsat Z3 query.
  This keeps e.g. ``min(eps_0, eps_1)`` under the case "class 0 has the smallest budget" a single
  parameter, so the kernel's budgets stay linear in it (budget absorption divides by it).
  ``fold=False`` leaves every select to the solver: cheaper when the queries are many and small
  (the dynamic induction steps of `wevent.proofs.dynamic`: 8.0 s of CPU instead of 13.0 s for the
  614 steps of dpbd with windows <= 3, measured once on a loaded machine).

Floating-point counts (`FloatCountAlgebra`) are checked by explicit search instead
(`wevent.proofs.explicit`): Z3's floating-point theory would need ``fpRealToFP`` of non-constant terms,
which it did not decide within minutes even for two slots.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import z3

from wevent.proofs.algebra import Z3Algebra, real

__all__ = [
    "Outcome",
    "SlotTerms",
    "Unrolling",
    "WindowSpec",
    "Z3ScopeAlgebra",
    "dynamic_windows",
    "first_failure",
    "fixed_windows",
    "fraction_of",
    "prove_bounded",
    "real",
]


def fraction_of(value: Any) -> Fraction:
    """A Z3 rational value (from a model or a simplified term) as a `Fraction`."""
    v = z3.simplify(value)
    if not z3.is_rational_value(v):
        raise ValueError(f"not a rational value: {v}")
    return Fraction(v.numerator_as_long(), v.denominator_as_long())


# ---------------------------------------------------------------------------- algebras


class Z3ScopeAlgebra(Z3Algebra):
    """Z3 terms; parameter-only selects are folded when the scope's assumptions decide them
    (the Boolean operations and ``floor`` are `Z3Algebra`'s)."""

    name = "z3"

    def __init__(
        self, params: Sequence[Any] = (), assumptions: Sequence[Any] = (), *, fold: bool = True
    ) -> None:
        # Both caches are keyed by Z3 AST ids and HOLD the terms they key: Z3 gives the id of a
        # freed term to the next new one, so an id alone could name a different term later
        # (a fold of one select returned for another: the proof would reason about values the
        # kernel never computes). A held term keeps its id; structurally equal terms share it.
        self._params: dict[int, Any] = {p.get_id(): p for p in params}
        self._assumptions = list(assumptions)
        self._fold = fold
        self._folds: dict[tuple[int, int, int], tuple[tuple[Any, Any, Any], Any]] = {}
        self.fold_queries = 0

    # parameter tracking: constants and terms built only from parameters and constants
    def _is_param(self, term: Any) -> bool:
        return term.get_id() in self._params

    def _add_param(self, term: Any) -> None:
        self._params[term.get_id()] = term

    def _mark(self, term: Any, *args: Any) -> Any:
        # Parameter tracking only serves folding; without it, it would only cost time.
        if self._fold and all(self._is_param(a) for a in args):
            self._add_param(term)
        return term

    def _valid(self, claim: Any) -> bool:
        self.fold_queries += 1
        s = z3.Solver()
        s.set("timeout", 10_000)
        s.add(*self._assumptions)
        s.add(z3.Not(claim))
        return bool(s.check() == z3.unsat)

    def const(self, q: Fraction | int) -> Any:
        term = real(q)
        if self._fold:
            self._add_param(term)
        return term

    def add(self, a: Any, b: Any) -> Any:
        return self._mark(a + b, a, b)

    def sub(self, a: Any, b: Any) -> Any:
        return self._mark(a - b, a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return self._mark(a * b, a, b)

    def scale(self, a: Any, k: Fraction | int) -> Any:
        return self._mark(a * real(k), a)

    def le(self, a: Any, b: Any) -> Any:
        return self._mark(a <= b, a, b)

    def select(self, cond: Any, then: Any, other: Any) -> Any:
        if self._fold and all(self._is_param(x) for x in (cond, then, other)):
            ids = (cond.get_id(), then.get_id(), other.get_id())
            if ids not in self._folds:
                if self._valid(z3.Implies(cond, then == other)) or self._valid(z3.Not(cond)):
                    out = other
                elif self._valid(z3.Implies(z3.Not(cond), then == other)) or self._valid(cond):
                    out = then
                else:
                    out = self._mark(z3.If(cond, then, other), cond, then, other)
                self._folds[ids] = ((cond, then, other), out)
            return self._folds[ids][1]
        return z3.If(cond, then, other)

    def ratio(self, a: Any, b: Any) -> Any:
        return self._mark(z3.If(b == 0, real(0), a / b), a, b)

    def count_add(self, a: Any, b: Any) -> Any:
        return self.add(a, b)

    def count_sub(self, a: Any, b: Any) -> Any:
        return self.sub(a, b)


# ---------------------------------------------------------------------------- unrollings


@dataclass(frozen=True)
class WindowSpec:
    """A requirement window of one subject: slots ``[first, last]`` (clipped to the horizon when
    checked) must sum to at most ``bound``. ``anchor`` is the slot whose requirement states it."""

    subject: int
    kind: str  # "fixed", "backward" or "forward"
    first: int
    last: int
    bound: Any
    anchor: int


@dataclass(frozen=True)
class SlotTerms:
    """One slot of a symbolic run: per subject the dissimilarity budget (always spent) and the
    publication budget (spent when ``published``), as a kernel's plan gives them."""

    dissimilarity: tuple[Any, ...]
    publication: tuple[Any, ...]
    published: Any

    @property
    def spends(self) -> tuple[Any, ...]:
        return tuple(
            d + z3.If(self.published, p, real(0))
            for d, p in zip(self.dissimilarity, self.publication, strict=True)
        )

    @property
    def negative(self) -> tuple[Any, ...]:
        """Per subject: a negative budget is spent (no mechanism can spend one)."""
        return tuple(
            z3.Or(d < 0, z3.And(self.published, p < 0))
            for d, p in zip(self.dissimilarity, self.publication, strict=True)
        )


@dataclass
class Unrolling:
    """A symbolic run of ``len(slots)`` slots with its windows and parameter assumptions."""

    slots: list[SlotTerms]
    windows: list[WindowSpec]
    assumptions: list[Any]
    decisions: list[Any]

    @property
    def horizon(self) -> int:
        return len(self.slots)

    def __post_init__(self) -> None:
        self._spends = [s.spends for s in self.slots]

    def window_sum(self, w: WindowSpec, through: int | None = None) -> Any:
        last = min(w.last, self.horizon if through is None else through)
        terms = [self._spends[t - 1][w.subject] for t in range(max(w.first, 1), last + 1)]
        return z3.Sum(terms) if terms else real(0)

    def violation(self, through: int | None = None) -> Any:
        """Some window over its bound (counting slots up to ``through``) or a negative budget."""
        end = self.horizon if through is None else through
        bad = [n for s in self.slots[:end] for n in s.negative]
        bad += [self.window_sum(w, end) > w.bound for w in self.windows if w.first <= end]
        return z3.Or(*bad) if bad else z3.BoolVal(False)


def fixed_windows(subject: int, w: int, bound: Any, horizon: int) -> list[WindowSpec]:
    """Every window of ``w`` consecutive slots ending at 1..horizon (001 Definition 8)."""
    return [WindowSpec(subject, "fixed", t - w + 1, t, bound, t) for t in range(1, horizon + 1)]


def dynamic_windows(
    subject: int,
    decls: Sequence[tuple[int, int, Any, int, Any]],
    horizon: int,
) -> list[WindowSpec]:
    """001 Definition 10: at each slot t with a declaration ``(slot, w_B, E_B, w_F, E_F)`` in
    force, the backward window ``[t - w_B + 1, t]`` and the forward window ``[t, t + w_F - 1]``
    (clipped to the horizon when summed: spends are never negative, so a clipped window over its
    bound is a violation of the whole one)."""
    out = []
    for t in range(1, horizon + 1):
        current = [d for d in decls if d[0] <= t]
        if not current:
            continue
        _, w_b, e_b, w_f, e_f = current[-1]
        out.append(WindowSpec(subject, "backward", t - w_b + 1, t, e_b, t))
        out.append(WindowSpec(subject, "forward", t, t + w_f - 1, e_f, t))
    return out


# ---------------------------------------------------------------------------- checking


@dataclass
class Outcome:
    """``status`` is "proved", "counterexample" or "unknown"; ``model`` for a counterexample."""

    status: str
    seconds: float
    model: Any = None
    reason: str = ""
    slot: int | None = None  # first failing slot (counterexamples from `first_failure`)
    stats: dict[str, Any] = field(default_factory=dict)


# Z3's older arithmetic solver (``arith.solver=2``) decides the bounded window proofs 2-2.5x
# faster than the default on this machine (measured 2026-11-26, `prove_allocator` at w <= 6,
# 2 classes, 18 slots: pba 14.6 s -> 6.6 s; the third-party PBA variant with 1/3 shares of
# tests/gate_sound.py 67 s -> 27 s). The induction's solvers keep the default: no gain there.
ARITH_SOLVER = 2


def _solver(timeout_ms: int) -> Any:
    s = z3.Solver()
    s.set("arith.solver", ARITH_SOLVER)
    if timeout_ms > 0:
        s.set("timeout", timeout_ms)
    return s


def prove_bounded(u: Unrolling, *, timeout_ms: int = 0, extra: Sequence[Any] = ()) -> Outcome:
    """One check of the negated invariant over the whole horizon (faster than slot by slot when
    the answer is unsat, which is the common case for a sound kernel)."""
    start = time.perf_counter()
    s = _solver(timeout_ms)
    s.add(*u.assumptions, *extra)
    s.add(u.violation())
    r = s.check()
    took = time.perf_counter() - start
    if r == z3.unsat:
        return Outcome("proved", took)
    if r == z3.sat:
        return Outcome("counterexample", took, model=s.model())
    return Outcome("unknown", took, reason=str(s.reason_unknown()))


def first_failure(
    u: Unrolling,
    *,
    timeout_ms: int = 0,
    extra: Sequence[Any] = (),
    progress: Callable[[int], None] | None = None,
) -> Outcome:
    """The earliest slot t at which some model breaks a window (counting spends through t) or
    allocates a negative budget, checked incrementally; "proved" when no slot fails."""
    start = time.perf_counter()
    s = _solver(timeout_ms)
    s.add(*u.assumptions, *extra)
    for t in range(1, u.horizon + 1):
        s.push()
        s.add(u.violation(t))
        r = s.check()
        if progress is not None:
            progress(t)
        if r == z3.sat:
            model = s.model()
            return Outcome("counterexample", time.perf_counter() - start, model=model, slot=t)
        if r != z3.unsat:
            return Outcome(
                "unknown", time.perf_counter() - start, reason=str(s.reason_unknown()), slot=t
            )
        s.pop()
    return Outcome("proved", time.perf_counter() - start)
