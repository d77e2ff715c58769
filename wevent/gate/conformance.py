"""Conformance: the target implements the protocol, its kernel is deterministic, it scales as it
claims, and (when symbolic) it computes on Z3 terms what it computes on exact rationals.

The later checks rely on these: the Z3 proof normalizes budgets by the claimed scale invariance
(`wevent.proofs.central`, "Scope and normalization") and reasons about the kernel's terms, and a
counterexample is only worth printing if running it again gives the same trace.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import z3

from wevent.accounting.budget import format_exact
from wevent.accounting.requirements import Requirement
from wevent.gate.inputs import (
    kernel_classes,
    one_user_per_class,
    random_decisions,
    random_requirements,
)
from wevent.gate.report import ERROR, FAILED, PASSED, SKIPPED, StageResult
from wevent.mechanisms.allocators import TraceSlot, algebra_for, run_trace
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.api import Allocator
from wevent.mechanisms.allocators.kernel import (
    ClassReq,
    Decl,
    DynamicClass,
    FixedClass,
    published_now,
    scaled_classes,
)
from wevent.proofs.algebra import real, strict_truth, where_it_left_the_algebra
from wevent.proofs.counterexamples import requirements_csv
from wevent.proofs.symbolic import Z3ScopeAlgebra, fraction_of

__all__ = [
    "TargetRaised",
    "check_determinism",
    "check_protocol",
    "check_scaling",
    "check_symbolic",
    "guarded",
]

T = TypeVar("T")
F = Fraction


class TargetRaised(Exception):
    """The target's own code raised: the gate cannot judge it (verdict "unusable")."""


def guarded(where: str, fn: Callable[..., T], *args: Any) -> T:
    """Call the target's code; any exception becomes one `TargetRaised` line."""
    try:
        return fn(*args)
    except TargetRaised:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()
        text = f": {first[0]}" if first else ""
        raise TargetRaised(f"{where} raised {type(exc).__name__}{text}") from exc


def _input_json(reqs: Sequence[Requirement], decisions: Sequence[bool]) -> dict[str, Any]:
    return {
        "input": {
            "requirements_csv": requirements_csv(one_user_per_class(reqs)),
            "decisions": ",".join("1" if d else "0" for d in decisions),
        }
    }


def _cases(
    alloc: Allocator, seed: int, stage: str, count: int, classes: int, w_max: int, horizon: int
) -> list[tuple[list[Requirement], list[bool]]]:
    """Random populations (fixed, and dynamic for dynamic allocators) and decision sequences."""
    rng = random.Random(f"{seed}:{stage}")
    kinds = ["fixed", "dynamic"] if alloc.requirement == "dynamic" else ["fixed"]
    return [
        (
            random_requirements(rng, kinds[i % len(kinds)], classes, w_max, horizon),
            random_decisions(rng, horizon),
        )
        for i in range(count)
    ]


# ---------------------------------------------------------------------------- protocol


def _sample_classes(alloc: Allocator) -> list[ClassReq[Fraction]]:
    out: list[ClassReq[Fraction]] = [FixedClass(2, F(1)), FixedClass(3, F(1, 2))]
    if alloc.requirement == "dynamic":
        out.append(DynamicClass((Decl(1, 2, F(1), 2, F(1)), Decl(3, 1, F(1, 2), 3, F(1)))))
    return out


def _budget_problem(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, Fraction | int):
        kind = "a float" if isinstance(value, float) else f"a {type(value).__name__}"
        return (
            f"is {kind} ({value!r}); budgets must be exact Fractions (compute through the "
            "algebra: alg.const, alg.scale, ...)"
        )
    return None


def check_protocol(
    target: str, alloc: Allocator, variant: str, arithmetic: str, slots: int
) -> StageResult:
    """Build a kernel over sample classes and run it: the attributes the runners read exist,
    and every plan has boolean flags and one exact budget per class and part."""
    start = time.perf_counter()

    def result(status: str, detail: str) -> StageResult:
        return StageResult("conformance/protocol", status, time.perf_counter() - start, detail)

    if variant not in alloc.variants:
        return result(ERROR, f"{target} has no variant {variant!r} ({', '.join(alloc.variants)})")
    alg = algebra_for(arithmetic)
    classes = _sample_classes(alloc)
    try:
        kernel = guarded("kernel()", alloc.kernel, alg, classes, variant)
        for attr in ("start", "plan", "step"):
            if not callable(getattr(kernel, attr, None)):
                return result(ERROR, f"the kernel has no method {attr}() (Kernel protocol)")
        if getattr(kernel, "alg", None) is not alg:
            return result(ERROR, "the kernel's 'alg' is not the algebra it was built with")
        if len(tuple(getattr(kernel, "classes", ()))) != len(classes):
            return result(ERROR, "the kernel's 'classes' are not the classes it was built with")
        state = guarded("start()", kernel.start)
        for t in range(1, slots + 1):
            plan = guarded(f"plan() at slot {t}", kernel.plan, state, t)
            for flag in ("nullified", "forced"):
                if not isinstance(getattr(plan, flag, None), bool):
                    return result(
                        ERROR,
                        f"slot {t}: plan.{flag} is not a bool ({getattr(plan, flag, None)!r})",
                    )
            for part in ("dissimilarity", "publication"):
                values = getattr(plan, part, None)
                if not isinstance(values, tuple) or len(values) != len(classes):
                    return result(
                        ERROR,
                        f"slot {t}: plan.{part} must be a tuple with one budget per class "
                        f"({len(classes)}), got {values!r}",
                    )
                for c, v in enumerate(values):
                    problem = _budget_problem(v)
                    if problem is not None:
                        return result(ERROR, f"slot {t}: plan.{part}[{c}] {problem}")
            published = published_now(alg, plan, t % 2 == 1)
            state = guarded(f"step() at slot {t}", kernel.step, state, t, plan, published)
    except TargetRaised as exc:
        return result(ERROR, str(exc))
    return result(
        PASSED, f"start/plan/step on {len(classes)} sample classes for {slots} slots: exact budgets"
    )


# ---------------------------------------------------------------------------- determinism


def _trace(
    alloc: Allocator, alg: Any, classes: Any, variant: str, decisions: Sequence[bool]
) -> Any:
    kernel = guarded("kernel()", alloc.kernel, alg, classes, variant)
    return guarded("the kernel", run_trace, kernel, decisions), kernel


def _first_difference(a: list[TraceSlot], b: list[TraceSlot]) -> TraceSlot | None:
    for x, y in zip(a, b, strict=True):
        if x != y:
            return x
    return None


def _show(s: TraceSlot) -> str:
    dis = "/".join(format_exact(v) for v in s.dissimilarity)
    pub = "/".join(format_exact(v) for v in s.candidate)
    return f"{s.status} dis={dis} pub={pub}"


def check_determinism(
    target: str,
    alloc: Allocator,
    variant: str,
    arithmetic: str,
    *,
    seed: int,
    count: int,
    classes: int,
    w_max: int,
    horizon: int,
) -> StageResult:
    """The same input gives the same trace: twice on one kernel (``start()`` is fresh) and on a
    second kernel from the factory."""
    start = time.perf_counter()
    alg = algebra_for(arithmetic)
    name = "conformance/determinism"
    try:
        for reqs, decisions in _cases(alloc, seed, name, count, classes, w_max, horizon):
            ks = kernel_classes(reqs)
            first, kernel = _trace(alloc, alg, ks, variant, decisions)
            again = guarded("the kernel", run_trace, kernel, decisions)
            other, _ = _trace(alloc, alg, ks, variant, decisions)
            for label, run in (("a second run of the same kernel", again), ("a new kernel", other)):
                diff = _first_difference(first, run)
                if diff is not None:
                    rerun = run[diff.slot - 1]
                    return StageResult(
                        name,
                        FAILED,
                        time.perf_counter() - start,
                        f"not deterministic: {label} differs at slot {diff.slot} "
                        f"({_show(diff)} vs {_show(rerun)})",
                        data=_input_json(reqs, decisions),
                    )
    except TargetRaised as exc:
        return StageResult(name, ERROR, time.perf_counter() - start, str(exc))
    return StageResult(
        name,
        PASSED,
        time.perf_counter() - start,
        f"{count} random inputs, each run three times: identical traces",
    )


# ---------------------------------------------------------------------------- scaling


def check_scaling(
    target: str,
    alloc: Allocator,
    variant: str,
    *,
    seed: int,
    count: int,
    classes: int,
    w_max: int,
    horizon: int,
) -> StageResult:
    """The claimed scale invariance on random traces (exact arithmetic, where it is claimed):
    per-class, scaling one class's budgets by f scales that class's budgets by f; global, one
    common factor; statuses never change."""
    start = time.perf_counter()
    name = "conformance/scaling"
    if alloc.scaling == "none":
        return StageResult(
            name, SKIPPED, 0.0, "no scale invariance claimed: the proof keeps every budget symbolic"
        )
    rng = random.Random(f"{seed}:{name}:factors")
    alg = ExactAlgebra()
    try:
        for reqs, decisions in _cases(alloc, seed, name, count, classes, w_max, horizon):
            ks = kernel_classes(reqs)
            if alloc.scaling == "per-class":
                factors = [F(rng.randint(1, 9), rng.randint(1, 9)) for _ in ks]
            else:
                factors = [F(rng.randint(1, 9), rng.randint(1, 9))] * len(ks)
            base, _ = _trace(alloc, alg, ks, variant, decisions)
            scaled, _ = _trace(alloc, alg, scaled_classes(ks, factors), variant, decisions)
            for a, b in zip(base, scaled, strict=True):
                wrong = a.status != b.status or any(
                    b.dissimilarity[i] != a.dissimilarity[i] * f
                    or b.candidate[i] != a.candidate[i] * f
                    for i, f in enumerate(factors)
                )
                if wrong:
                    shown = ", ".join(format_exact(f) for f in factors)
                    return StageResult(
                        name,
                        FAILED,
                        time.perf_counter() - start,
                        f"claims {alloc.scaling} scale invariance, but budgets scaled by "
                        f"({shown}) change slot {a.slot} from {_show(a)} to {_show(b)}",
                        data=_input_json(reqs, decisions),
                    )
    except TargetRaised as exc:
        return StageResult(name, ERROR, time.perf_counter() - start, str(exc))
    return StageResult(
        name,
        PASSED,
        time.perf_counter() - start,
        f"{alloc.scaling} scale invariance held on {count} random inputs",
    )


# ---------------------------------------------------------------------------- symbolic


class _ProofTerms:
    """A kernel's classes as the proof sees them: every budget a Z3 parameter, pinned to the
    input's value by an assumption, on the proof's own algebra (`Z3ScopeAlgebra`, whose folds
    decide selects under the assumptions, as in a proof). ``value`` substitutes the pins back
    and simplifies, so a term is compared with the exact run's number."""

    def __init__(self, classes: Sequence[ClassReq[Fraction]]) -> None:
        self.pins: list[tuple[Any, Any]] = []
        self.classes: list[ClassReq[Any]] = []
        for c in classes:
            if isinstance(c, FixedClass):
                self.classes.append(FixedClass(c.w, self._param(c.eps)))
            else:
                self.classes.append(
                    DynamicClass(
                        tuple(
                            Decl(
                                d.slot,
                                d.w_back,
                                self._param(d.eps_back),
                                d.w_fwd,
                                self._param(d.eps_fwd),
                            )
                            for d in c.decls
                        )
                    )
                )
        self.alg = Z3ScopeAlgebra([p for p, _ in self.pins], [p == v for p, v in self.pins])

    def _param(self, value: Fraction) -> Any:
        p = z3.Real(f"conformance_b{len(self.pins)}")
        self.pins.append((p, real(value)))
        return p

    def value(self, term: Any) -> Fraction | bool:
        v = z3.simplify(z3.substitute(term, *self.pins) if self.pins else term)
        if z3.is_true(v):
            return True
        if z3.is_false(v):
            return False
        return fraction_of(v)


@strict_truth()
def check_symbolic(
    target: str,
    alloc: Allocator,
    variant: str,
    *,
    seed: int,
    count: int,
    classes: int,
    w_max: int,
    horizon: int,
) -> StageResult:
    """The kernel runs on Z3 terms, and with constant budgets and decisions its terms simplify
    to the exact run's values: the proof is then about the code that runs. A kernel that cannot
    run on Z3 terms (it branches in Python on a budget, converts to float, ...) is skipped."""
    start = time.perf_counter()
    name = "conformance/symbolic"
    if not alloc.symbolic:
        return StageResult(name, SKIPPED, 0.0, "declared not symbolic (symbolic=False)")
    exact = ExactAlgebra()
    for reqs, decisions in _cases(alloc, seed, name, count, classes, w_max, horizon):
        ks = kernel_classes(reqs)
        try:
            trace, _ = _trace(alloc, exact, ks, variant, decisions)
        except TargetRaised as exc:
            return StageResult(name, ERROR, time.perf_counter() - start, str(exc))
        try:
            terms = _ProofTerms(ks)
            zalg = terms.alg
            kernel = alloc.kernel(zalg, terms.classes, variant)
            state = kernel.start()
            for t, d in enumerate(decisions, start=1):
                plan = kernel.plan(state, t)
                published = published_now(zalg, plan, z3.BoolVal(d))
                want = trace[t - 1]
                got = (
                    [terms.value(plan.nullified), terms.value(plan.forced)],
                    [terms.value(x) for x in plan.dissimilarity],
                    [terms.value(x) for x in plan.publication],
                )
                status = (
                    "published"
                    if got[0][1]
                    else ("nullified" if got[0][0] else ("published" if d else "skipped"))
                )
                if (
                    status != want.status
                    or got[1] != list(want.dissimilarity)
                    or got[2] != list(want.candidate)
                ):
                    return StageResult(
                        name,
                        FAILED,
                        time.perf_counter() - start,
                        f"on Z3 terms the kernel computes something else than on exact "
                        f"rationals at slot {t} (exact: {_show(want)}): a proof would not be "
                        "about the code that runs",
                        data=_input_json(reqs, decisions),
                    )
                state = kernel.step(state, t, plan, published)
        except Exception as exc:
            first = str(exc).strip().splitlines()
            why = f"{type(exc).__name__}{': ' + first[0] if first else ''}"
            where = where_it_left_the_algebra(exc, str(Path(__file__)))
            return StageResult(
                name,
                SKIPPED,
                time.perf_counter() - start,
                f"the kernel does not run on Z3 terms ({why[:160]}"
                + (f"; at {where}" if where else "")
                + "); no proof, the search decides",
                data={"symbolic": False, "where": where},
            )
    return StageResult(
        name,
        PASSED,
        time.perf_counter() - start,
        f"Z3 terms agree with exact runs on {count} random inputs",
        data={"symbolic": True},
    )
