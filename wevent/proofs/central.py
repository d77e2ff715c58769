"""Window theorems of the central allocator kernels, proved with Z3 on the kernels' own code.

The kernels of `wevent.mechanisms.allocators` run unchanged on Z3 terms (`wevent.proofs.symbolic`): budgets
are symbolic, the publish/skip decision of every slot is a free Boolean (the data-dependent
``dis > err`` outcome is adversarial), and the engine asserts the negation of the theorem.

Theorem F (fixed requirements; uniform, sample, bd, ba, pbd, pba). For every population of
requirement classes ``(w_i, eps_i)`` with ``1 <= w_i <= W``, ``eps_i > 0`` and every decision
sequence, the kernel never allocates a negative budget and for every class i every ``w_i``
consecutive slots spend at most ``eps_i`` (001 Definition 8; the spend of a slot is its
dissimilarity budget plus, when it publishes, its publication budget).

Theorem D (dynamic requirements; dpbd, dpba). For every class schedule of declarations
``(slot, w_B, E_B, w_F, E_F)`` of the stated shape and every decision sequence, no budget is
negative and at every slot t the backward window ``[t - w_B + 1, t]`` sums to at most ``E_B`` and
the forward window ``[t, t + w_F - 1]`` to at most ``E_F``, with the declaration in force at t
(001 Definition 10).

Scope and normalization (exact arithmetic):

* Window sizes are enumerated: every class count ``k <= K`` and every non-increasing tuple of
  windows in ``[1, W]`` (classes are interchangeable: the kernels treat them alike).
* Budgets are normalized where the kernel is scale-invariant (`tests/test_allocator_proofs.py`
  checks both properties on random traces). Personalized kernels (pbd, pba, dpbd, dpba) are
  invariant per class: multiplying one class's budgets by k multiplies that class's allocations
  by k and leaves every decision alone (absorption counts are ratios of a class's budgets), so
  ``eps_i = 1`` for pbd/pba and the first ``E_B`` of each class is 1 for dpbd/dpba (the others
  symbolic). Non-personalized kernels serve every class with ``(max w_i, min eps_i)``
  (001 Section 6.2) and are invariant under a common scale: one case per class j having the
  smallest budget, ``eps_j = 1`` and ``eps_i = 1 + x_i`` with symbolic ``x_i >= 0``.
* ``--arithmetic float``: the absorption counts are IEEE doubles; rounding is not
  scale-invariant, so budgets range over a stated grid of decimals, and every decision sequence
  is explored on `FloatCountAlgebra` itself (`wevent.proofs.explicit`: exhaustive, not Z3).

Unbounded proof (k-induction, fixed kernels). Invariant I(T) per class i: every budget spent
before slot T is >= 0 and every window of ``w_i`` slots ending before T sums to at most ``eps_i``.
Base: the bounded proof up to the last step slot (``2 * max w``). Step: from a *symbolic* kernel state at slot T
(the kept history of dissimilarity and publication spends as fresh variables satisfying I, the
last publication slot and budgets unconstrained reals), one plan/step keeps I(T + 1). The kernels
use the slot number only relative to the kept history, to the (free) last publication slot and,
for sample, modulo the window, so steps at ``T = max w + 1 .. 2 max w`` cover every later slot.
A kernel that reads the slot number itself (a first window with rules of its own, a table read
up to a slot, a parity) declares ``induction_schedule() -> (steady, period)``; its steps start at
``max(max w + 1, steady)`` and run over ``lcm(max w, period)`` slots (`_induction_steps`), the
base case reaching the last of them. A base case that fails is never reported as a proof.
The sound variants' clip makes I 1-inductive; the published pseudo-code is not inductive for I
(a state satisfying I can have a half over its share), so those stay bounded proofs.

Unbounded proof (dynamic kernels): `wevent.proofs.dynamic`, one-slot steps from a symbolic state for
every schedule shape up to a stationary slot, several classes by non-interference. When a step
fails, the bounded search of the same scope looks for a real run that breaks a window (the
published rules have one) and reports it; otherwise the result is unknown.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import partial
from typing import Any

import z3

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.mechanisms.allocators.algebra import ExactAlgebra, FloatCountAlgebra
from wevent.mechanisms.allocators.api import Allocator as AllocatorLike
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.fixed import FixedState
from wevent.mechanisms.allocators.kernel import (
    VARIANTS,
    ClassReq,
    Decl,
    DynamicClass,
    FixedClass,
    Prefix,
    published_now,
)
from wevent.mechanisms.allocators.registry import BUILTIN, builtin_spec
from wevent.proofs.algebra import BRANCHED, strict_truth, where_it_left_the_algebra
from wevent.proofs.counterexamples import Counterexample, Failure, ProverError, replayed
from wevent.proofs.dynamic import all_shapes, noninterference, prove_shapes, sample_pairs
from wevent.proofs.explicit import explore
from wevent.proofs.symbolic import (
    Outcome,
    SlotTerms,
    Unrolling,
    WindowSpec,
    Z3ScopeAlgebra,
    dynamic_windows,
    first_failure,
    fixed_windows,
    fraction_of,
    prove_bounded,
    real,
)

__all__ = [
    "ALLOCATORS",
    "DEFAULT_FLOAT_GRID",
    "Allocator",
    "AllocatorProof",
    "Scope",
    "prove_allocator",
]

# The allocators `wevent prove` knows by name: the one registry's built-in budget kernels
# (`wevent.mechanisms.allocators.registry.BUILTIN`, the same dictionary). Any other allocator (the
# public protocol of `wevent.mechanisms.allocators.api`) is proved by passing it to
# `prove_allocator(..., allocator=...)`, as `wevent gate` does.
Allocator = AllocatorSpec
ALLOCATORS: dict[str, AllocatorSpec] = BUILTIN

DEFAULT_FLOAT_GRID: tuple[Fraction, ...] = tuple(Fraction(k, 10) for k in range(1, 11))


@dataclass(frozen=True)
class Scope:
    """What a proof ranges over.

    Fixed: ``1..classes`` classes with windows in ``[1, w_max]``. Dynamic: ``1..classes``
    classes, each with declarations at slots ``decl_slots`` (one schedule per class: the first at
    slot 1), every ``w_B, w_F`` in ``[1, w_max]``. Float arithmetic: budgets from ``grid``.
    """

    classes: int = 2
    w_max: int = 6
    horizon: int = 0  # 0: 3 * w_max
    grid: tuple[Fraction, ...] = DEFAULT_FLOAT_GRID
    decl_slots: tuple[int, ...] = (1, 2)
    ratios: tuple[Fraction, ...] = (Fraction(1, 2), Fraction(1), Fraction(2))
    timeout_ms: int = 60_000

    @property
    def slots(self) -> int:
        return self.horizon or 3 * self.w_max


@dataclass
class AllocatorProof:
    """The outcome of one proof: ``status`` is "proved", "counterexample" or "unknown"."""

    mechanism: str
    variant: str
    arithmetic: str
    method: str  # "bounded" or "k-induction"
    statement: str
    scope: dict[str, Any]
    status: str
    seconds: float
    cases: int = 0
    counterexample: Counterexample | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "result": self.status,
            "mechanism": self.mechanism,
            "variant": self.variant,
            "arithmetic": self.arithmetic,
            "method": self.method,
            "statement": self.statement,
            "scope": self.scope,
            "cases": self.cases,
            "seconds": round(self.seconds, 3),
            "solver": f"z3 {z3.get_version_string()}",
        }
        if self.reason:
            out["reason"] = self.reason
        if self.notes:
            out["notes"] = self.notes
        if self.counterexample is not None:
            cex = self.counterexample.to_json()
            for key in ("requirements", "requirements_csv", "decisions", "violation", "replay"):
                out[key] = cex[key]
        return out


# ---------------------------------------------------------------------------- parameters


@dataclass
class _Case:
    """One parameter case: the budget terms the kernel receives, their assumptions, and the
    free variables a counterexample's budgets are read from."""

    label: str
    budgets: list[Any]  # per class (fixed: eps) or per class per declaration (E_B, E_F)
    assumptions: list[Any]
    free: list[Any]


def interchangeable(alloc: AllocatorLike) -> bool:
    """Whether a proof may take the requirement classes as interchangeable (check one window
    tuple per multiset, sorted largest first): only for the built-in kernels, each of which
    treats its classes alike (tests/test_prover_soundness.py runs every one on permuted classes
    against the unpermuted run). Any other kernel is proved for every ordered tuple: one that
    reads, say, class 0's count only can fail for windows (1, 3) and hold for (3, 1)."""
    return any(alloc is spec for spec in BUILTIN.values())


def _own_kernel(alloc: AllocatorLike) -> bool:
    """A built-in, or a kernel wevent itself builds (a built-in family with a parameter, such as
    `wevent.mechanisms.streamdp.shift.shift_spec(name, d)`): its scaling claim has a written
    argument beside its code. Any other kernel's claim is only sampled by the gate."""
    if interchangeable(alloc):
        return True
    factory = getattr(alloc, "factory", None)
    return str(getattr(factory, "__module__", "") or "").startswith("wevent.")


class _Unnormalized:
    """A kernel wevent does not define, proved with every budget symbolic whatever scaling it
    declares: a declared scale invariance is only sampled (the gate's conformance stage tries
    it on random inputs), never proved, so a proof that normalized budgets by it would claim
    "every positive budget" from budgets of 1 (a kernel that changes its rule at eps >= 10^6
    and declares per-class scaling passed that way). The built-in kernels' invariance has an
    argument (module docstring) and tests/test_allocator_proofs.py."""

    scaling = "none"

    def __init__(self, inner: AllocatorLike) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def requirement(self) -> str:
        return self._inner.requirement

    @property
    def symbolic(self) -> bool:
        return self._inner.symbolic

    @property
    def divides(self) -> bool:
        return self._inner.divides

    @property
    def variants(self) -> tuple[str, ...]:
        return self._inner.variants

    def kernel(self, alg: Any, classes: Sequence[Any], variant: str) -> Any:
        return self._inner.kernel(alg, classes, variant)


def _window_shapes(k: int, w_max: int, ordered: bool = False) -> Iterator[tuple[int, ...]]:
    """Window tuples, smallest windows first: non-increasing ones when the classes are
    interchangeable, else every ordered tuple."""
    for combo in itertools.combinations_with_replacement(range(1, w_max + 1), k):
        shape = tuple(sorted(combo, reverse=True))
        if not ordered:
            yield shape
            continue
        yield from sorted(set(itertools.permutations(shape)), reverse=True)


def _fixed_cases(
    alloc: AllocatorLike, arithmetic: str, k: int, grid: Sequence[Fraction]
) -> list[_Case]:
    if arithmetic == "float":
        return [
            _Case(f"eps={'/'.join(str(x) for x in combo)}", [real(x) for x in combo], [], [])
            for combo in itertools.product(grid, repeat=k)
        ]
    if alloc.scaling == "none":  # no scale invariance claimed: every budget symbolic
        es = [z3.Real(f"e{i}") for i in range(k)]
        return [_Case("every eps symbolic", list(es), [e > 0 for e in es], es)]
    if alloc.scaling == "per-class" or k == 1:
        return [_Case("eps=1 per class", [real(1)] * k, [], [])]
    out = []
    for j in range(k):
        xs = [z3.Real(f"x{i}") for i in range(k) if i != j]
        it = iter(xs)
        budgets = [real(1) if i == j else 1 + next(it) for i in range(k)]
        out.append(_Case(f"class {j} smallest", budgets, [x >= 0 for x in xs], xs))
    return out


def _flat(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out += _flat(v) if isinstance(v, list | tuple) else [v]
    return out


def _algebra(case: _Case) -> Z3ScopeAlgebra:
    return Z3ScopeAlgebra([*_flat(case.budgets), *case.free], case.assumptions)


# ---------------------------------------------------------------------------- unrolling


def _unroll(
    kernel: Any, alg: Any, horizon: int, windows: list[WindowSpec], assumptions: list[Any]
) -> Unrolling:
    """Run ``kernel`` for ``horizon`` slots on free decisions ``d1, d2, ...``."""
    decisions = [z3.Bool(f"d{t}") for t in range(1, horizon + 1)]
    state = kernel.start()
    slots = []
    for t in range(1, horizon + 1):
        plan = kernel.plan(state, t)
        published = published_now(alg, plan, decisions[t - 1])
        slots.append(SlotTerms(plan.dissimilarity, plan.publication, published))
        state = kernel.step(state, t, plan, published)
    return Unrolling(slots, windows, assumptions, decisions)


def _fixed_unrolling(
    alloc: AllocatorLike,
    variant: str,
    arithmetic: str,
    ws: tuple[int, ...],
    case: _Case,
    horizon: int,
) -> Unrolling:
    alg = _algebra(case)
    classes = [FixedClass(w, e) for w, e in zip(ws, case.budgets, strict=True)]
    kernel = alloc.kernel(alg, classes, variant)
    windows = [
        win
        for i, (w, e) in enumerate(zip(ws, case.budgets, strict=True))
        for win in fixed_windows(i, w, e, horizon)
    ]
    return _unroll(kernel, alg, horizon, windows, case.assumptions)


# ---------------------------------------------------------------------------- counterexamples


def _simpler(
    u: Unrolling, slot: int, case: _Case, timeout_ms: int, apart: Sequence[Any] = ()
) -> Any:
    """A model failing at ``slot`` with the simplest budgets found: all free budget offsets 0,
    else multiples of 1/10 up to 10, else of 1/100, else any."""
    tries: list[list[Any]] = []
    if case.free:
        tries.append([x == 0 for x in case.free])
        for den in (10, 100):
            cons = []
            for i, x in enumerate(case.free):
                n = z3.Int(f"n{i}_{den}")
                cons += [x * den == z3.ToReal(n), n >= 0, n <= 10 * den]
            tries.append(cons)
    tries.append([])
    for extra in tries:
        s = z3.Solver()
        s.set("timeout", timeout_ms)
        s.add(*u.assumptions, *apart, *extra, u.violation(slot))
        if s.check() == z3.sat:
            return s.model()
    raise RuntimeError("the failing slot has no model any more")  # pragma: no cover


def _value(model: Any, term: Any) -> Fraction:
    return fraction_of(model.eval(term, model_completion=True))


def _failure(u: Unrolling, model: Any, slot: int, users: Sequence[str]) -> Failure:
    """Read the failure at ``slot`` off the model: a negative budget first (the trace checks
    them before charging), else a window over its bound."""
    s = u.slots[slot - 1]
    for i, user in enumerate(users):
        dis = _value(model, s.dissimilarity[i])
        if dis < 0:
            return Failure(slot, user, "negative", spent=dis, part="dissimilarity")
        pub = _value(model, s.publication[i])
        if z3.is_true(model.eval(s.published, model_completion=True)) and pub < 0:
            return Failure(slot, user, "negative", spent=pub, part="publication")
    for w in u.windows:
        if w.first <= slot <= w.last:
            spent = _value(model, u.window_sum(w, slot))
            bound = _value(model, w.bound)
            if spent > bound:
                return Failure(
                    slot, users[w.subject], w.kind, max(w.first, 1), w.last, spent, bound
                )
    raise RuntimeError(f"model does not fail at slot {slot}")  # pragma: no cover


def _counterexample(
    alloc: AllocatorLike,
    mechanism: str,
    variant: str,
    arithmetic: str,
    u: Unrolling,
    outcome: Outcome,
    case: _Case,
    requirements: Callable[[Any], list[Requirement]],
    apart: Sequence[Any],
    timeout_ms: int,
) -> Counterexample:
    assert outcome.slot is not None
    model = _simpler(u, outcome.slot, case, timeout_ms, apart)
    reqs = requirements(model)
    users = [f"u{i + 1}" for i in range(len(reqs))]
    decisions = tuple(
        z3.is_true(model.eval(d, model_completion=True)) for d in u.decisions[: outcome.slot]
    )
    failure = _failure(u, model, outcome.slot, users)
    reqs, failure = _apart(alloc, reqs, failure, users)
    return Counterexample(
        mechanism,
        variant,
        arithmetic,
        tuple(zip(users, reqs, strict=True)),
        decisions,
        failure,
    )


# ---------------------------------------------------------------------------- bounded proofs


def _statement(alloc: AllocatorLike, scope: Scope, arithmetic: str, unbounded: bool) -> str:
    horizon = "every horizon" if unbounded else f"horizon {scope.slots}"
    budgets = (
        f"budgets in {{{', '.join(str(x) for x in scope.grid)}}}"
        if arithmetic == "float"
        else "every positive real budget"
    )
    if alloc.requirement == "fixed":
        return (
            f"for 1..{scope.classes} requirement classes (w_i, eps_i) with w_i <= {scope.w_max}, "
            f"{budgets}, and every publish/skip decision sequence, {horizon}: no budget is "
            "negative and every w_i consecutive slots of class i spend <= eps_i"
        )
    if arithmetic != "float" and _forward_ratios(alloc):
        budgets = (
            "every positive real E_B, and E_F of each later declaration in "
            f"{{{', '.join(str(r) for r in scope.ratios)}}} times the class's first "
            "(its division by E_F is nonlinear otherwise)"
        )
    return (
        f"for 1..{scope.classes} classes, each with declarations at slots "
        f"{list(scope.decl_slots)} and every w_B, w_F <= {scope.w_max}, {budgets}, and every "
        f"publish/skip decision sequence, {horizon}: no budget is negative, every backward "
        "window [t-w_B+1, t] spends <= E_B and every forward window [t, t+w_F-1] <= E_F "
        "(001 Definition 10)"
    )


def _scope_json(
    alloc: AllocatorLike, scope: Scope, arithmetic: str, unbounded: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "classes": f"1..{scope.classes}",
        "w": f"1..{scope.w_max}",
        "horizon": "unbounded" if unbounded else scope.slots,
        "budgets": [str(x) for x in scope.grid] if arithmetic == "float" else "positive reals",
    }
    if alloc.requirement == "dynamic":
        out["declaration_slots"] = list(scope.decl_slots)
        if arithmetic != "float" and _forward_ratios(alloc):
            ratios = ", ".join(str(r) for r in scope.ratios)
            out["budgets"] = f"positive reals E_B; each later E_F in {{{ratios}}} x the first"
    return out


def _forward_ratios(alloc: AllocatorLike) -> bool:
    """The dynamic proof fixes each later E_F to `Scope.ratios` times the first (a kernel that
    divides by E_F, with per-class scale invariance: `_dynamic_budget_cases`)."""
    return alloc.requirement == "dynamic" and alloc.divides and alloc.scaling == "per-class"


Progress = Callable[[str], None]


Cases = Iterator[
    tuple[Callable[[], Unrolling], _Case, Callable[[Any], list[Requirement]], list[Any]]
]


def _distinct(alloc: AllocatorLike, shapes: Sequence[Any], budgets: Sequence[Any]) -> list[Any]:
    """Assumptions keeping classes of equal windows apart by their budgets: the runtime merges
    users of equal requirements into one class, so a population of two equal classes never
    reaches a kernel. Under a per-class scaling claim the budgets are normalized to constants
    instead, and a counterexample's equal classes are told apart by scaling (`_apart`)."""
    if alloc.scaling == "per-class":
        return []
    out = []
    for i, j in itertools.combinations(range(len(shapes)), 2):
        if shapes[i] == shapes[j]:
            a, b = _flat([budgets[i]]), _flat([budgets[j]])
            out.append(z3.Or(*[x != y for x, y in zip(a, b, strict=True)]))
    return out


def _apart(
    alloc: AllocatorLike, reqs: list[Requirement], failure: Failure, users: Sequence[str]
) -> tuple[list[Requirement], Failure]:
    """Equal requirements of a per-class-normalized counterexample told apart: the later of two
    equal classes gets its budgets multiplied by 2, 3, ... (the per-class scaling claim, checked
    by the gate's conformance stage, says that multiplies its allocations alike and changes no
    decision), and a failure of that class scales with it. The replay then checks the claim."""
    if alloc.scaling != "per-class":
        return reqs, failure
    out: list[Requirement] = []
    for i, req in enumerate(reqs):
        factor = 1
        while _scaled(req, factor) in out:
            factor += 1
        out.append(_scaled(req, factor))
        if factor > 1 and failure.user == users[i]:
            failure = replace(failure, spent=failure.spent * factor, bound=failure.bound * factor)
    return out, failure


def _scaled(req: Requirement, factor: int) -> Requirement:
    if factor == 1:
        return req
    if isinstance(req, Fixed):
        return Fixed(req.w, Budget(req.eps * factor))
    assert isinstance(req, Dynamic)
    return Dynamic(
        tuple(
            Declaration(
                d.slot, d.w_back, Budget(d.eps_back * factor), d.w_fwd, Budget(d.eps_fwd * factor)
            )
            for d in req.declarations
        )
    )


def _bounded_cases(alloc: AllocatorLike, variant: str, arithmetic: str, scope: Scope) -> Cases:
    """Every (unrolling builder, parameter case, requirements-from-model, assumptions keeping
    equal classes apart) of the scope, in the order a counterexample search wants them: fewer
    classes, smaller windows, simpler budgets."""
    if alloc.requirement == "fixed":
        for k in range(1, scope.classes + 1):
            cases = _fixed_cases(alloc, arithmetic, k, scope.grid)
            for ws in _window_shapes(k, scope.w_max, not interchangeable(alloc)):
                for case in cases:

                    def build(ws: tuple[int, ...] = ws, case: _Case = case) -> Unrolling:
                        return _fixed_unrolling(alloc, variant, arithmetic, ws, case, scope.slots)

                    def reqs(
                        model: Any, ws: tuple[int, ...] = ws, case: _Case = case
                    ) -> list[Requirement]:
                        return [
                            Fixed(w, Budget(_value(model, e)))
                            for w, e in zip(ws, case.budgets, strict=True)
                        ]

                    yield build, case, reqs, _distinct(alloc, ws, case.budgets)
    else:
        yield from _dynamic_cases(alloc, variant, arithmetic, scope)


def prove_allocator(
    mechanism: str,
    *,
    variant: str = "sound",
    arithmetic: str = "exact",
    scope: Scope | None = None,
    unbounded: bool = False,
    progress: Progress | None = None,
    workers: int = 1,
    allocator: AllocatorLike | None = None,
) -> AllocatorProof:
    """Prove the allocator's window theorem over ``scope`` (bounded, or for every horizon with
    ``unbounded``), or find the first counterexample of the scope. ``workers`` processes share
    the dynamic induction's shapes.

    ``allocator`` proves any `Allocator` (the public protocol) instead of a registered one;
    ``mechanism`` is then the target its counterexamples name for `wevent trace` (a built-in
    name, an entry point or ``module:attribute``). The induction is for the built-in kernels
    (its step obligations build their states)."""
    alloc = allocator if allocator is not None else builtin_spec(mechanism)
    if not _own_kernel(alloc) and alloc.scaling != "none":
        alloc = allocator = _Unnormalized(alloc)  # (not wevent's: its scaling claim unproved)
    try:
        with strict_truth():
            return _prove_checked(
                alloc,
                allocator,
                mechanism,
                variant,
                arithmetic,
                scope,
                unbounded,
                progress,
                workers,
            )
    except z3.Z3Exception as exc:
        if BRANCHED not in str(exc) or not interchangeable(alloc):
            raise  # a third-party kernel: the gate reports it as not provable
        where = where_it_left_the_algebra(exc) or "unknown place"
        raise ProverError(f"{mechanism}: {BRANCHED} (at {where}): a bug in wevent") from exc


def _prove_checked(
    alloc: AllocatorLike,
    allocator: AllocatorLike | None,
    mechanism: str,
    variant: str,
    arithmetic: str,
    scope: Scope | None,
    unbounded: bool,
    progress: Progress | None,
    workers: int,
) -> AllocatorProof:
    scope = scope or Scope()
    if unbounded:
        if arithmetic != "exact":
            raise BudgetError("--unbounded (induction) is for exact arithmetic")
        if allocator is not None and allocator is not ALLOCATORS.get(mechanism):
            raise BudgetError("--unbounded (induction) is for the built-in kernels")
        if alloc.requirement == "dynamic" and not _dynamic_induction_serves(variant):
            raise BudgetError(_NO_DYNAMIC_INDUCTION.format(name=alloc.name, variant=variant))
        if alloc.requirement == "dynamic":
            return _prove_dynamic_inductive(alloc, variant, scope, progress, workers)
        return _prove_inductive(alloc, variant, scope, progress)
    if arithmetic == "float":
        return _prove_explicit(alloc, variant, scope, progress, mechanism)
    if _induction_covers(alloc, allocator, mechanism, scope, variant):
        # The bounded scope has too many cases to enumerate; the induction proves the same
        # theorem for every horizon (so for this one) at a fraction of the cost.
        proof = _prove_dynamic_inductive(alloc, variant, scope, progress, workers)
        if proof.status == "proved":
            proof.notes.insert(
                0,
                f"the bounded scope asked for (horizon {scope.slots}) has "
                f"{bounded_case_count(alloc, scope):,} cases; the induction proves the theorem "
                "for every horizon, which covers it",
            )
        return proof
    return _prove_bounded(alloc, mechanism, variant, arithmetic, scope, progress)


def _prove_bounded(
    alloc: AllocatorLike,
    mechanism: str,
    variant: str,
    arithmetic: str,
    scope: Scope,
    progress: Progress | None,
) -> AllocatorProof:
    """Every case of the bounded scope in turn: the first replayed counterexample, or proved."""
    start = time.perf_counter()
    statement = _statement(alloc, scope, arithmetic, False)
    scope_json = _scope_json(alloc, scope, arithmetic, False)
    result = partial(
        AllocatorProof, mechanism, variant, arithmetic, "bounded", statement, scope_json
    )
    cases = 0
    unknown = ""
    for build, case, reqs, apart in _bounded_cases(alloc, variant, arithmetic, scope):
        cases += 1
        u = build()
        outcome = prove_bounded(u, timeout_ms=scope.timeout_ms, extra=apart)
        if outcome.status == "counterexample":
            outcome = first_failure(u, timeout_ms=scope.timeout_ms, extra=apart)
        if progress is not None:
            progress(f"case {cases}: {outcome.status} ({outcome.seconds:.2f} s)")
        if outcome.status == "unknown":
            unknown = unknown or f"z3 gave up on a case ({case.label}): {outcome.reason}"
            continue
        if outcome.status == "counterexample":
            cex = _counterexample(
                alloc,
                mechanism,
                variant,
                arithmetic,
                u,
                outcome,
                case,
                reqs,
                apart,
                scope.timeout_ms,
            )
            cex = replayed(cex, f"the bounded proof of {mechanism} ({case.label})", alloc)
            return result("counterexample", time.perf_counter() - start, cases, cex)
    return result(
        "unknown" if unknown else "proved",
        time.perf_counter() - start,
        cases,
        reason=unknown,
    )


# ---------------------------------------------------------------------------- dynamic


def _dynamic_cases(alloc: AllocatorLike, variant: str, arithmetic: str, scope: Scope) -> Cases:
    """Schedules with declarations at ``scope.decl_slots``, every window pair per declaration;
    for k classes, unordered tuples of schedules (classes are interchangeable)."""
    n = len(scope.decl_slots)
    per_decl: list[tuple[int, int]] = [
        (a, b) for a in range(1, scope.w_max + 1) for b in range(1, scope.w_max + 1)
    ]
    schedules = list(itertools.product(per_decl, repeat=n))
    for k in range(1, scope.classes + 1):
        for combo in _class_tuples(len(schedules), k, not interchangeable(alloc)):
            shapes = [schedules[i] for i in combo]
            for case in _dynamic_budget_cases(alloc, k, n, scope.ratios):

                def build(
                    shapes: list[tuple[tuple[int, int], ...]] = shapes, case: _Case = case
                ) -> Unrolling:
                    return _dynamic_unrolling(alloc, variant, arithmetic, scope, shapes, case)

                def reqs(
                    model: Any,
                    shapes: list[tuple[tuple[int, int], ...]] = shapes,
                    case: _Case = case,
                ) -> list[Requirement]:
                    out: list[Requirement] = []
                    for c, shape in enumerate(shapes):
                        decls = []
                        for j, (slot, (wb, wf)) in enumerate(
                            zip(scope.decl_slots, shape, strict=True)
                        ):
                            eb, ef = case.budgets[c][j]
                            decls.append(
                                Declaration(
                                    slot,
                                    wb,
                                    Budget(_value(model, eb)),
                                    wf,
                                    Budget(_value(model, ef)),
                                )
                            )
                        out.append(Dynamic(tuple(decls)))
                    return out

                yield build, case, reqs, _distinct(alloc, shapes, case.budgets)


# Above this many bounded cases, a built-in dynamic kernel is proved by the induction instead
# (every horizon, so the asked horizon too): at w <= 6 with 2 classes the bounded scope has
# 841,752 cases (dpbd), the induction 1,296 one-class shapes.
BOUNDED_DYNAMIC_CASES_MAX = 5_000


def bounded_case_count(alloc: AllocatorLike, scope: Scope) -> int:
    """How many (window tuple, budget case) pairs a bounded proof of ``scope`` enumerates for a
    dynamic-requirement kernel."""
    n = len(scope.decl_slots)
    schedules = (scope.w_max * scope.w_max) ** n
    total = 0
    for k in range(1, scope.classes + 1):
        tuples = schedules**k if not interchangeable(alloc) else math.comb(schedules + k - 1, k)
        total += tuples * len(_dynamic_budget_cases(alloc, k, n, scope.ratios))
    return total


# The dynamic induction builds `DynamicKernel` states (`wevent.proofs.dynamic`): the sound and
# published variants. du-code's kernel keeps another state (records, not slots:
# `wevent.mechanisms.allocators.dynamic_du_code`) and is proved or refuted bounded only.
_NO_DYNAMIC_INDUCTION = (
    "{name} --variant {variant}: the dynamic induction (--unbounded) builds the states of the "
    "sound and published kernels; this variant keeps another state and has bounded proofs only "
    "(drop --unbounded)"
)


def _dynamic_induction_serves(variant: str) -> bool:
    return variant in VARIANTS


def _induction_covers(
    alloc: AllocatorLike,
    allocator: AllocatorLike | None,
    mechanism: str,
    scope: Scope,
    variant: str = "sound",
) -> bool:
    """A bounded request the induction answers instead: a built-in dynamic kernel whose bounded
    scope is larger than `BOUNDED_DYNAMIC_CASES_MAX`."""
    builtin = allocator is None or allocator is ALLOCATORS.get(mechanism)
    return (
        builtin
        and _dynamic_induction_serves(variant)
        and alloc.requirement == "dynamic"
        and bounded_case_count(alloc, scope) > BOUNDED_DYNAMIC_CASES_MAX
    )


def _class_tuples(n: int, k: int, ordered: bool) -> Iterator[tuple[int, ...]]:
    """k-tuples of indices below ``n``: multisets when the classes are interchangeable, else
    every ordered tuple (each multiset followed by its other orders)."""
    for combo in itertools.combinations_with_replacement(range(n), k):
        yield combo
        if ordered:
            yield from sorted(set(itertools.permutations(combo)) - {combo})


def _dynamic_budget_cases(
    alloc: AllocatorLike, k: int, n: int, ratios: Sequence[Fraction]
) -> list[_Case]:
    """Symbolic budgets, normalized per class. DPBA divides by its forward shares
    ``E_F / (2 w_F)`` (001 Algorithm 7 line 7), which would make the terms nonlinear: there the
    first ``E_F`` of each class is 1 and the later ones range over ``ratios`` times it (every
    ``E_B`` stays symbolic); elsewhere the first ``E_B`` is 1 and the rest symbolic. Both
    normalizations need per-class scale invariance: without that claim every budget is
    symbolic (and a dividing kernel's terms nonlinear, which Z3 may not decide)."""
    per_class = alloc.scaling == "per-class"
    ratio_cases = _forward_ratios(alloc)
    cases: list[list[list[Any]]] = [[]]
    if ratio_cases:
        options = [[real(1)]] + [[real(r) for r in ratios] for _ in range(n - 1)]
        combos = list(itertools.product(*options))
        cases = [
            [list(combo) for combo in chosen] for chosen in itertools.product(combos, repeat=k)
        ]
    out = []
    for chosen in cases:
        free: list[Any] = []
        rows: list[list[tuple[Any, Any]]] = []
        for c in range(k):
            row = []
            for j in range(n):
                if ratio_cases:
                    eb: Any = z3.Real(f"eb{c}_{j}")
                    free.append(eb)
                    ef: Any = chosen[c][j]
                else:
                    if j == 0 and per_class:
                        eb = real(1)  # per-class scale invariance
                    else:
                        eb = z3.Real(f"eb{c}_{j}")
                        free.append(eb)
                    ef = z3.Real(f"ef{c}_{j}")
                    free.append(ef)
                row.append((eb, ef))
            rows.append(row)
        label = (
            "first E_F = 1 per class, later E_F from the ratios"
            if ratio_cases
            else ("first E_B = 1 per class" if per_class else "every budget symbolic")
        )
        out.append(_Case(label, rows, [x > 0 for x in free], free))
    return out


def _dynamic_unrolling(
    alloc: AllocatorLike,
    variant: str,
    arithmetic: str,
    scope: Scope,
    shapes: list[tuple[tuple[int, int], ...]],
    case: _Case,
) -> Unrolling:
    alg = _algebra(case)
    classes: list[ClassReq[Any]] = []
    windows: list[WindowSpec] = []
    for c, shape in enumerate(shapes):
        decls = [
            Decl(slot, wb, case.budgets[c][j][0], wf, case.budgets[c][j][1])
            for j, (slot, (wb, wf)) in enumerate(zip(scope.decl_slots, shape, strict=True))
        ]
        classes.append(DynamicClass(tuple(decls)))
        windows += dynamic_windows(
            c, [(d.slot, d.w_back, d.eps_back, d.w_fwd, d.eps_fwd) for d in decls], scope.slots
        )
    kernel = alloc.kernel(alg, classes, variant)
    return _unroll(kernel, alg, scope.slots, windows, case.assumptions)


# ---------------------------------------------------------------------------- k-induction


def _symbolic_history(alg: Any, keep: int, slots: int, tag: str) -> tuple[Prefix[Any], list[Any]]:
    """A `Prefix` holding fresh variables for slots ``1..slots`` (older sums drop off as usual)."""
    values = [z3.Real(f"{tag}_{s}") for s in range(1, slots + 1)]
    hist: Prefix[Any] = Prefix(alg, keep)
    for v in values:
        hist = hist.push(v)
    return hist, values


def _step_obligation(
    alloc: AllocatorLike, variant: str, ws: tuple[int, ...], case: _Case, t: int
) -> tuple[list[Any], Any]:
    """Assumptions (I at slot t) and the violation after one kernel step at slot t."""
    alg = _algebra(case)
    classes = [FixedClass(w, e) for w, e in zip(ws, case.budgets, strict=True)]
    kernel = alloc.kernel(alg, classes, variant)
    keep = max(ws)
    assume = list(case.assumptions)
    dis, pub, dis_vals, pub_vals = [], [], [], []
    for i in range(len(ws)):
        hd, vd = _symbolic_history(alg, keep, t - 1, f"dis{i}")
        hp, vp = _symbolic_history(alg, keep, t - 1, f"pub{i}")
        dis.append(hd)
        pub.append(hp)
        dis_vals.append(vd)
        pub_vals.append(vp)
    for i, (w, e) in enumerate(zip(ws, case.budgets, strict=True)):
        spend = [a + b for a, b in zip(dis_vals[i], pub_vals[i], strict=True)]
        assume += [v >= 0 for v in dis_vals[i] + pub_vals[i]]
        for end in range(1, t):
            assume.append(z3.Sum(spend[max(end - w, 0) : end]) <= e)
    state = FixedState(
        dis=tuple(dis),
        pub=tuple(pub),
        last=z3.Real("last"),
        last_pub=tuple(z3.Real(f"last_pub{i}") for i in range(len(ws))),
    )
    plan = kernel.plan(state, t)
    published = published_now(alg, plan, z3.Bool("d"))
    bad = []
    for i, (w, e) in enumerate(zip(ws, case.budgets, strict=True)):
        d, p = plan.dissimilarity[i], plan.publication[i]
        bad.append(d < 0)
        bad.append(z3.And(published, p < 0))
        now = d + z3.If(published, p, real(0))
        before = [a + b for a, b in zip(dis_vals[i], pub_vals[i], strict=True)][max(t - w, 0) :]
        bad.append(z3.Sum([*before, now]) > e)
    return assume, z3.Or(*bad)


def _induction_steps(alloc: AllocatorLike, variant: str, ws: tuple[int, ...]) -> tuple[int, int]:
    """The first step slot and the number of step slots for windows ``ws``.

    The step proves one slot from any state satisfying I; it covers every later slot only if
    the kernel's plan at slot T depends on T through its kept history alone (or through T
    modulo the window, Sample's), which 001's and 002's kernels do from T = max w + 1 on. A
    kernel whose plan reads the slot number itself declares ``induction_schedule(): (steady,
    period)``: from slot ``steady`` on its plan depends on T only modulo ``period`` (besides the
    history). The steps then start at ``max(keep + 1, steady)`` and run over ``lcm(keep,
    period)`` slots, and the base case covers every slot up to the last step."""
    keep = max(ws)
    kernel = alloc.kernel(ExactAlgebra(), [FixedClass(w, Fraction(1)) for w in ws], variant)
    schedule = getattr(kernel, "induction_schedule", None)
    steady, period = schedule() if callable(schedule) else (1, 1)
    return max(keep + 1, steady), math.lcm(keep, period)


def _prove_inductive(
    alloc: AllocatorLike, variant: str, scope: Scope, progress: Progress | None
) -> AllocatorProof:
    start = time.perf_counter()
    statement = _statement(alloc, scope, "exact", True)
    scope_json = _scope_json(alloc, scope, "exact", True)
    cases = 0
    notes: list[str] = []
    status, reason = "proved", ""
    for k in range(1, scope.classes + 1):
        budget_cases = _fixed_cases(alloc, "exact", k, ())
        for ws in _window_shapes(k, scope.w_max):
            first, span = _induction_steps(alloc, variant, ws)
            for case in budget_cases:
                # Base: no failure within the slots before the steps and the steps' span
                # (2 * keep for a kernel that uses the slot only relative to its history).
                cases += 1
                base = prove_bounded(
                    _fixed_unrolling(alloc, variant, "exact", ws, case, first + span - 1),
                    timeout_ms=scope.timeout_ms,
                )
                if base.status != "proved":
                    return _inductive_failure(
                        alloc,
                        variant,
                        scope,
                        statement,
                        scope_json,
                        start,
                        cases,
                        base,
                        ws,
                        first + span - 1,
                    )
                # Step at T = first .. first + span - 1 from any state satisfying I.
                for t in range(first, first + span):
                    cases += 1
                    assume, bad = _step_obligation(alloc, variant, ws, case, t)
                    s = z3.Solver()
                    s.set("timeout", scope.timeout_ms)
                    s.add(*assume, bad)
                    r = s.check()
                    if r == z3.sat:
                        status = "unknown"
                        reason = (
                            f"the invariant is not inductive for windows {ws} at slot {t} "
                            "(a symbolic state satisfying it steps out of it; the theorem may "
                            "still hold: see the bounded proof)"
                        )
                        break
                    if r != z3.unsat:
                        status, reason = "unknown", f"z3 gave up on a step: {s.reason_unknown()}"
                        break
                if status != "proved":
                    break
                if progress is not None:
                    progress(f"windows {ws}: base and step proved")
            if status != "proved":
                break
        if status != "proved":
            break
    if status == "proved":
        notes.append(
            "k-induction with k = 1: base = bounded proof up to the last step slot; steps at "
            "T = max w + 1 .. 2 max w from a symbolic state (histories, last publication free), "
            "later and longer for a kernel whose plan depends on the slot number itself until a "
            "steady slot or through a period (its induction_schedule)"
        )
    return AllocatorProof(
        alloc.name,
        variant,
        "exact",
        "k-induction",
        statement,
        scope_json,
        status,
        time.perf_counter() - start,
        cases,
        reason=reason,
        notes=notes,
    )


def _inductive_failure(
    alloc: AllocatorLike,
    variant: str,
    scope: Scope,
    statement: str,
    scope_json: dict[str, Any],
    start: float,
    cases: int,
    base: Outcome,
    ws: tuple[int, ...],
    base_horizon: int,
) -> AllocatorProof:
    """The base case failed or was undecided: report it as the bounded search does."""
    if base.status == "unknown":
        return AllocatorProof(
            alloc.name,
            variant,
            "exact",
            "k-induction",
            statement,
            scope_json,
            "unknown",
            time.perf_counter() - start,
            cases,
            reason=f"z3 gave up on the base case for windows {ws}: {base.reason}",
        )
    # The bounded search over at least the base case's horizon: the base can be longer than
    # the scope's own (a kernel with a late steady slot), and a shorter search could miss the
    # failure the base found.
    horizon = max(scope.slots, base_horizon)
    bounded = prove_allocator(alloc.name, variant=variant, scope=replace(scope, horizon=horizon))
    if bounded.status == "proved":  # the two searches disagree: never a proof
        bounded.status = "unknown"
        bounded.reason = (
            f"the base case for windows {ws} failed but the bounded search of horizon "
            f"{horizon} found nothing"
        )
    bounded.method = "k-induction (base case)"
    bounded.statement = statement
    bounded.scope = scope_json
    return bounded


# ---------------------------------------------------------------------------- dynamic induction

# Random shape pairs the non-interference premise is checked on (beside the extreme shapes).
NONINTERFERENCE_PAIRS = 40


def _prove_dynamic_inductive(
    alloc: AllocatorLike, variant: str, scope: Scope, progress: Progress | None, workers: int
) -> AllocatorProof:
    """Theorem D for every horizon (`wevent.proofs.dynamic`): one class, every shape of the scope,
    every step obligation up to the stationary slot; several classes by non-interference."""
    start = time.perf_counter()
    statement = _statement(alloc, scope, "exact", True)
    scope_json = _scope_json(alloc, scope, "exact", True)
    slots = scope.decl_slots
    shapes = all_shapes(scope.w_max, len(slots))
    result = partial(
        AllocatorProof, alloc.name, variant, "exact", "induction", statement, scope_json
    )
    obligations = solved = 0
    for r in prove_shapes(
        alloc.name,
        variant,
        shapes,
        slots,
        timeout_ms=scope.timeout_ms,
        workers=workers,
        ratios=scope.ratios,
    ):
        obligations += r.obligations
        solved += r.solved
        if progress is not None:
            progress(f"shape {r.shape}: {r.status} ({r.seconds:.2f} s)")
        if r.status == "unknown":
            reason = f"z3 gave up on shape {r.shape} at slot {r.slot}: {r.reason}"
            return result("unknown", time.perf_counter() - start, obligations, reason=reason)
        if r.status == "not inductive":
            # A state satisfying I steps out of it; look for a real run that does (bounded,
            # one class, the scope's smallest windows first).
            bounded = _prove_bounded(
                alloc, alloc.name, variant, "exact", replace(scope, classes=1), None
            )
            if bounded.status == "counterexample":
                bounded.method = "induction (refuted by the bounded search)"
                bounded.statement = statement
                bounded.scope = scope_json
                return bounded
            reason = (
                f"the invariant is not inductive for shape {r.shape} at slot {r.slot} and the "
                f"bounded search ({bounded.status}) found no run that breaks a window"
            )
            return result("unknown", time.perf_counter() - start, obligations, reason=reason)
    notes = [
        f"induction: {len(shapes)} one-class shapes, {obligations} step obligations "
        "(slots 1 .. T* = last declaration + 2 max w; later slots repeat T*); "
        f"Z3 solved {solved} of them in this run; each other one was a claim already "
        "proved in the same process"
    ]
    if scope.classes >= 2:
        pairs = sample_pairs(shapes, NONINTERFERENCE_PAIRS)
        clash = noninterference(alloc.name, variant, pairs, slots, scope.ratios)
        if clash is not None:
            reason = (
                f"classes interfere: with shapes {clash[0]} and {clash[1]} a class's budget at "
                f"slot {clash[2]} differs from its one-class budget"
            )
            return result("unknown", time.perf_counter() - start, obligations, reason=reason)
        notes.append(
            f"2..{scope.classes} classes: each class's budgets are its one-class budgets under "
            f"the shared publication bit, which the step leaves free (non-interference: each "
            f"class's budgets are a function of its own schedule and histories only, "
            f"`_class_plan`; that structure re-checked term for term on {len(pairs)} shape "
            f"pairs: the smallest and largest shapes and {NONINTERFERENCE_PAIRS} random pairs)"
        )
    return result("proved", time.perf_counter() - start, obligations, notes=notes)


# ---------------------------------------------------------------------------- float (explicit)


def _concrete_cases(
    alloc: AllocatorLike, scope: Scope
) -> Iterator[tuple[list[ClassReq[Fraction]], list[Requirement], list[WindowSpec]]]:
    """Concrete populations of the scope with budgets from the grid, simplest first."""
    grid = scope.grid
    if alloc.requirement == "fixed":
        for k in range(1, scope.classes + 1):
            for ws in _window_shapes(k, scope.w_max, not interchangeable(alloc)):
                for eps in itertools.product(grid, repeat=k):
                    if len(set(zip(ws, eps, strict=True))) < k:
                        continue  # equal requirements are one class at runtime
                    classes: list[ClassReq[Fraction]] = [
                        FixedClass(w, e) for w, e in zip(ws, eps, strict=True)
                    ]
                    reqs: list[Requirement] = [
                        Fixed(w, Budget(e)) for w, e in zip(ws, eps, strict=True)
                    ]
                    windows = [
                        win
                        for i, (w, e) in enumerate(zip(ws, eps, strict=True))
                        for win in fixed_windows(i, w, e, scope.slots)
                    ]
                    yield classes, reqs, windows
        return
    n = len(scope.decl_slots)
    per_decl = list(itertools.product(range(1, scope.w_max + 1), repeat=2))
    schedules = list(itertools.product(per_decl, repeat=n))
    for k in range(1, scope.classes + 1):
        for combo in _class_tuples(len(schedules), k, not interchangeable(alloc)):
            for values in itertools.product(grid, repeat=2 * n * k):
                it = iter(values)
                dyn: list[Dynamic] = []
                for i in combo:
                    dyn.append(
                        Dynamic(
                            tuple(
                                Declaration(slot, wb, Budget(next(it)), wf, Budget(next(it)))
                                for slot, (wb, wf) in zip(
                                    scope.decl_slots, schedules[i], strict=True
                                )
                            )
                        )
                    )
                if len(set(dyn)) < k:
                    continue  # equal requirements are one class at runtime
                kclasses: list[ClassReq[Fraction]] = [
                    DynamicClass(
                        tuple(
                            Decl(
                                d.slot, d.w_back, Fraction(d.eps_back), d.w_fwd, Fraction(d.eps_fwd)
                            )
                            for d in r.declarations
                        )
                    )
                    for r in dyn
                ]
                windows = [
                    win
                    for c, r in enumerate(dyn)
                    for win in dynamic_windows(
                        c,
                        [
                            (d.slot, d.w_back, d.eps_back, d.w_fwd, d.eps_fwd)
                            for d in r.declarations
                        ],
                        scope.slots,
                    )
                ]
                yield kclasses, list(dyn), windows


def _prove_explicit(
    alloc: AllocatorLike,
    variant: str,
    scope: Scope,
    progress: Progress | None,
    mechanism: str | None = None,
) -> AllocatorProof:
    """``--arithmetic float``: every decision sequence, every population of the scope with
    budgets from the grid, on `FloatCountAlgebra` itself (`wevent.proofs.explicit`)."""
    start = time.perf_counter()
    statement = _statement(alloc, scope, "float", False)
    scope_json = _scope_json(alloc, scope, "float", False)
    mechanism = mechanism or alloc.name
    result = partial(
        AllocatorProof, mechanism, variant, "float", "exhaustive", statement, scope_json
    )
    cases = 0
    alg = FloatCountAlgebra()
    for classes, reqs, windows in _concrete_cases(alloc, scope):
        cases += 1
        kernel = alloc.kernel(alg, classes, variant)
        depth = max((w.last - w.first + 1 for w in windows), default=1)
        out = explore(kernel, windows, scope.slots, depth)
        if progress is not None and cases % 50 == 0:
            progress(f"{cases} populations explored")
        if out.status == "counterexample":
            assert out.slot is not None
            users = [f"u{i + 1}" for i in range(len(reqs))]
            if out.failure[0] == "negative":
                _, c, part, value = out.failure
                failure = Failure(out.slot, users[c], "negative", spent=value, part=part)
            else:
                _, w, spent = out.failure
                failure = Failure(
                    out.slot, users[w.subject], w.kind, max(w.first, 1), w.last, spent, w.bound
                )
            cex = Counterexample(
                mechanism,
                variant,
                "float",
                tuple(zip(users, reqs, strict=True)),
                out.decisions,
                failure,
            )
            cex = replayed(cex, f"the exhaustive float proof of {mechanism}", alloc)
            return result("counterexample", time.perf_counter() - start, cases, cex)
    return result(
        "proved",
        time.perf_counter() - start,
        cases,
        notes=["every decision sequence explored (explicit states) for every population"],
    )
