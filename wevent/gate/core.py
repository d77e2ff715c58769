"""`run_gate`: every check of `wevent gate` on one target, in order.

1. conformance: protocol, determinism, the claimed scale invariance, Z3 terms = exact values;
2. proof: the window theorem by Z3 over the scope (`wevent.proofs.central`), when the kernel runs on Z3
   terms and its scaling claim held; with ``arithmetic="float"`` the exhaustive explicit-state
   search on `FloatCountAlgebra` instead (budgets from a grid, one class);
3. search: hypothesis over fixed (and, for dynamic allocators, dynamic) populations and decision
   sequences at the proof's scope, then the wide search far past it (`search.WideScope`: windows
   up to 64, 6 classes, 256+ slots, structured patterns; a count of runs), through the guard,
   shrunk to a minimal counterexample;
4. end to end: the central data path on synthetic streams with the guard in the loop.

Every stage runs (a CI report shows them all) unless the target is unusable: it does not load,
breaks the protocol, or its kernel raises.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from wevent.accounting.budget import BudgetError
from wevent.accounting.formats import write_requirements
from wevent.gate.conformance import (
    check_determinism,
    check_protocol,
    check_scaling,
    check_symbolic,
)
from wevent.gate.endtoend import run_end_to_end
from wevent.gate.report import (
    ERROR,
    FAILED,
    PROVED,
    SKIPPED,
    UNKNOWN,
    VERIFIER_ERROR,
    GateReport,
    StageResult,
    new_report,
)
from wevent.gate.search import WideScope, run_search
from wevent.mechanisms.allocators.api import Allocator
from wevent.mechanisms.allocators.registry import (
    BUILTIN,
    AllocatorError,
    PopulationAllocatorError,
    data_path_of,
    resolve,
    resolve_population,
)
from wevent.proofs.central import AllocatorProof, Scope, interchangeable, prove_allocator
from wevent.proofs.counterexamples import ProverError
from wevent.proofs.dynamic import INDUCTION_DEFAULT_W_MAX

__all__ = ["STAGES", "GateOptions", "run_gate"]

STAGES = ("conformance", "proof", "search", "end-to-end")

# Dynamic schedules have w^4 shapes per class with two declarations: the proof's scope for them
# is capped (the search and the end-to-end run still use the full --w-max and --classes).
DYNAMIC_PROOF_W_MAX = 2
# The built-in dynamic kernels (dpbd, dpba) are then proved for every horizon by induction
# (`wevent.proofs.dynamic`: one-class shapes, several classes by non-interference) up to this window:
# 256 shapes, dpbd 6 s, dpba 12 s on one core (w <= 5: 20 s and 33 s, which would take the dpba
# gate near its 60 s; w <= 6 is `wevent prove allocator dpba --w-max 6 --unbounded`, 41-44 s on two cores).
DYNAMIC_INDUCTION_W_MAX = INDUCTION_DEFAULT_W_MAX
# The float proof is an explicit-state search over every decision sequence for every grid
# budget of one class (`wevent.proofs.central._prove_explicit`): seconds at w <= 3, over 10 minutes for a
# sound kernel at w <= 6 (bd), so it is capped here; the search still runs at the full scope.
FLOAT_PROOF_W_MAX = 3
DYNAMIC_FLOAT_GRID = (Fraction(1, 2), Fraction(1))


# Default runs of the wide search per requirement kind, by the allocator's requirement: these keep
# the default gate of every built-in under 60 s on one core (benchmarks/bench_gate_search.py).
DEFAULT_SEARCH_RUNS = {"fixed": 600, "dynamic": 100, "population": 400}


@dataclass(frozen=True)
class GateOptions:
    """The scope of a gate run (`wevent gate --help` explains each)."""

    w_max: int = 6
    classes: int = 2
    horizon: int = 0  # 0: 3 * w_max
    examples: int = 200
    variant: str = "sound"
    arithmetic: str = "exact"
    seed: int = 0
    timeout: int = 60  # seconds Z3 may spend on one proof case
    e2e_runs: int = 2
    e2e_slots: int = 40
    conformance_inputs: int = 20
    require_proof: bool = False
    stages: tuple[str, ...] = STAGES
    # The adversarial search's own scope, far past the proof's (`search.WideScope`): runs per
    # requirement kind (a count, not a clock: the same seed gives the same verdict; -1: 600, or
    # 100 for a dynamic-requirement allocator, whose kernels cost ~8x per slot), the largest
    # window, the most classes, the longest run (0: max(256, 4 * search_w_max)).
    search_runs: int = -1
    search_w_max: int = 64
    search_classes: int = 6
    search_horizon: int = 0

    @property
    def slots(self) -> int:
        return self.horizon or 3 * self.w_max

    def wide(self, requirement: str = "fixed") -> WideScope:
        """The wide search's scope (`search.WideScope`) for an allocator serving
        ``requirement`` ("fixed", "dynamic" or "population")."""
        runs = self.search_runs
        if runs < 0:
            runs = DEFAULT_SEARCH_RUNS.get(requirement, DEFAULT_SEARCH_RUNS["fixed"])
        return WideScope(runs, self.search_w_max, self.search_classes, self.search_horizon)

    def check(self) -> None:
        if self.w_max < 1 or self.classes < 1 or self.horizon < 0 or self.examples < 1:
            raise BudgetError("--w-max, --classes and --examples must be at least 1")
        if self.search_runs < -1 or self.search_w_max < 1 or self.search_classes < 1:
            raise BudgetError(
                "--search-runs must be at least 0, --search-w-max and --search-classes at least 1"
            )
        if self.search_horizon < 0:
            raise BudgetError("--search-unroll must be at least 1")
        if self.arithmetic not in ("exact", "float"):
            raise BudgetError(f"unknown arithmetic {self.arithmetic!r} (exact or float)")
        unknown = set(self.stages) - set(STAGES)
        if unknown:
            raise BudgetError(
                f"unknown stage(s) {', '.join(sorted(unknown))} (expected {', '.join(STAGES)})"
            )


def _proof_scope(alloc: Allocator, opts: GateOptions) -> Scope:
    timeout_ms = opts.timeout * 1000
    if alloc.requirement == "dynamic":
        w = min(opts.w_max, DYNAMIC_PROOF_W_MAX)
        scope = Scope(classes=1, w_max=w, horizon=opts.horizon, timeout_ms=timeout_ms)
        return replace(scope, grid=DYNAMIC_FLOAT_GRID) if opts.arithmetic == "float" else scope
    if opts.arithmetic == "float":  # exhaustive over a grid: one class keeps it to seconds
        w = min(opts.w_max, FLOAT_PROOF_W_MAX)
        return Scope(classes=1, w_max=w, horizon=opts.horizon, timeout_ms=timeout_ms)
    return Scope(
        classes=opts.classes, w_max=opts.w_max, horizon=opts.horizon, timeout_ms=timeout_ms
    )


def _prove(
    target: str,
    alloc: Allocator,
    opts: GateOptions,
    runs_symbolically: bool,
    scaling_ok: bool,
    why_not: str = "the kernel does not run on Z3 terms",
) -> StageResult:
    start = time.perf_counter()
    if opts.arithmetic == "exact" and not runs_symbolically:
        return StageResult("proof", SKIPPED, 0.0, why_not)
    if not scaling_ok:
        return StageResult(
            "proof",
            SKIPPED,
            0.0,
            "the declared scale invariance is false (conformance/scaling): refuted on its claim",
        )
    scope = _proof_scope(alloc, opts)
    try:
        proof = prove_allocator(
            target,
            variant=opts.variant,
            arithmetic=opts.arithmetic,
            scope=scope,
            allocator=alloc,
        )
    except ProverError as exc:
        return StageResult("proof", VERIFIER_ERROR, time.perf_counter() - start, str(exc))
    except Exception as exc:
        first = str(exc).strip().splitlines()
        why = f"{type(exc).__name__}{': ' + first[0] if first else ''}"
        return StageResult(
            "proof",
            SKIPPED,
            time.perf_counter() - start,
            f"the kernel did not run on this proof's terms ({why[:160]})",
        )
    data: dict[str, Any] = {"proof": proof.to_json()}
    what = f"{proof.method}, {proof.cases} cases: {proof.statement}"
    if proof.status == "proved":
        seconds = proof.seconds
        unbounded = _every_horizon(target, alloc, opts, scope)
        if isinstance(unbounded, StageResult):
            return unbounded
        if unbounded is not None:  # k-induction: the same theorem for every horizon
            data = {"proof": unbounded.to_json(), "bounded": proof.to_json()}
            seconds += unbounded.seconds
            what = f"{what}; {unbounded.method}, {unbounded.cases} cases: {unbounded.statement}"
        return StageResult("proof", PROVED, seconds, what, data=data)
    if proof.status == "unknown":
        return StageResult("proof", UNKNOWN, proof.seconds, proof.reason or what, data=data)
    cex = proof.counterexample
    assert cex is not None  # replayed by prove_allocator (a ProverError otherwise)
    data["replays"] = True
    return StageResult(
        "proof", FAILED, proof.seconds, cex.failure.describe(), counterexample=cex, data=data
    )


def _every_horizon(
    target: str, alloc: Allocator, opts: GateOptions, scope: Scope
) -> AllocatorProof | StageResult | None:
    """The induction (every horizon) after a bounded proof that held: k-induction at the same
    scope for a fixed-requirement kernel whose classes are interchangeable, the one-class
    induction with non-interference (`wevent.proofs.dynamic`) at w <= `DYNAMIC_INDUCTION_W_MAX` for
    the built-in dynamic kernels (their step obligations build the built-ins' states): the
    proof, or a refutation when its longer base case finds a (replayed) counterexample, a
    verifier-error stage on a `ProverError`, None when it does not apply or is undecided."""
    if opts.arithmetic != "exact" or not interchangeable(alloc):  # (true of built-ins only)
        return None
    if alloc.requirement == "dynamic":
        w = min(opts.w_max, DYNAMIC_INDUCTION_W_MAX)
        scope = replace(scope, classes=opts.classes, w_max=w)
    elif alloc.requirement != "fixed":
        return None
    start = time.perf_counter()
    try:
        proof = prove_allocator(
            target, variant=opts.variant, scope=scope, unbounded=True, allocator=alloc
        )
    except ProverError as exc:
        return StageResult("proof", VERIFIER_ERROR, time.perf_counter() - start, str(exc))
    except BudgetError:
        return None
    if proof.status == "counterexample" and proof.counterexample is not None:
        # the induction's base case reaches further than the bounded proof (replayed)
        cex = proof.counterexample
        return StageResult(
            "proof",
            FAILED,
            time.perf_counter() - start,
            cex.failure.describe(),
            counterexample=cex,
            data={"proof": proof.to_json(), "replays": True},
        )
    return proof if proof.status == "proved" else None


def _allocator_json(alloc: Allocator) -> dict[str, Any]:
    return {
        "name": alloc.name,
        "requirement": alloc.requirement,
        "scaling": alloc.scaling,
        "symbolic": alloc.symbolic,
        "divides": alloc.divides,
        "variants": list(alloc.variants),
        "builtin": alloc is BUILTIN.get(alloc.name),
        # a data path of its own (`wevent.mechanisms.datapath`): its class name, else None
        "data_path": _data_path_name(alloc),
    }


def _data_path_name(alloc: Allocator) -> str | None:
    try:
        path = data_path_of(alloc, 2)
    except Exception as exc:  # a broken factory is named, not raised here
        return f"unusable ({type(exc).__name__}: {exc})"
    return None if path is None else type(path).__name__


def _names_population(target: str) -> bool:
    """``target`` is a population allocator, or one with a defect the population gate reports."""
    try:
        return resolve_population(target) is not None
    except PopulationAllocatorError:
        return True
    except AllocatorError:
        return False


def run_gate(
    target: str,
    options: GateOptions | None = None,
    *,
    allocator: Allocator | None = None,
    save_requirements: Path | None = None,
) -> GateReport:
    """Run the gate on ``target`` (a built-in name, an entry point of ``wevent.allocators`` or
    ``module:attribute``). ``allocator`` skips the lookup (the target string is then only the
    name counterexamples give `wevent trace`). ``save_requirements`` receives the
    counterexample's requirements CSV.

    Hypothesis keeps caches under ``./.hypothesis``; the gate routes them to a temporary
    directory it removes, so a gate run leaves nothing in the user's directory (unless
    ``HYPOTHESIS_STORAGE_DIRECTORY`` names a place)."""
    with _private_hypothesis_storage():
        return _run_gate(target, options, allocator, save_requirements)


@contextmanager
def _private_hypothesis_storage() -> Iterator[None]:
    if os.getenv("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    from hypothesis import configuration

    before = configuration.storage_directory("", intent_to_write=False).home_directory
    with tempfile.TemporaryDirectory(prefix="wevent-hypothesis-") as tmp:
        configuration.set_hypothesis_home_dir(tmp)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(before)


def _run_gate(
    target: str,
    options: GateOptions | None,
    allocator: Allocator | None,
    save_requirements: Path | None,
) -> GateReport:
    opts = options or GateOptions()
    opts.check()
    if allocator is None and _names_population(target):  # users, not budgets: own stages
        from wevent.gate.population import run_population_gate

        return run_population_gate(target, opts, save_requirements=save_requirements)
    start = time.perf_counter()
    report = new_report(target, opts)
    try:
        alloc = allocator if allocator is not None else resolve(target)
    except AllocatorError as exc:
        report.error = str(exc)
        report.seconds = time.perf_counter() - start
        return report
    report.allocator = _allocator_json(alloc)
    common = {
        "seed": opts.seed,
        "count": opts.conformance_inputs,
        "classes": opts.classes,
        "w_max": opts.w_max,
        "horizon": opts.slots,
    }
    protocol = check_protocol(target, alloc, opts.variant, opts.arithmetic, opts.slots)
    report.stages.append(protocol)
    if protocol.status == ERROR:
        report.seconds = time.perf_counter() - start
        return report

    def finish() -> GateReport:
        report.seconds = time.perf_counter() - start
        cex = report.counterexample
        if cex is not None and save_requirements is not None:
            write_requirements(cex.population, save_requirements)
            report.requirements_path = str(save_requirements)
        return report

    def add(stage: StageResult) -> bool:
        """Record a stage; False when the target turned out unusable."""
        report.stages.append(stage)
        return stage.status != ERROR

    symbolic, scaling_ok = alloc.symbolic, True
    why_not = "the kernel does not run on Z3 terms"
    if not alloc.symbolic:
        why_not += " (declared symbolic=False)"
    if "conformance" in opts.stages:
        det = check_determinism(target, alloc, opts.variant, opts.arithmetic, **common)
        if not add(det):
            return finish()
        scaling = check_scaling(target, alloc, opts.variant, **common)
        if not add(scaling):
            return finish()
        scaling_ok = scaling.status != FAILED
        if opts.arithmetic == "exact" and "proof" in opts.stages:
            sym = check_symbolic(target, alloc, opts.variant, **common)
            if not add(sym):
                return finish()
            symbolic = sym.status != SKIPPED and alloc.symbolic
            if sym.status == FAILED:
                symbolic = False
            if sym.data.get("where"):
                why_not = f"the kernel does not run on Z3 terms (at {sym.data['where']})"
            elif sym.status == FAILED:
                why_not = "on Z3 terms the kernel computes something else than on exact rationals"
    if "proof" in opts.stages:
        report.stages.append(_prove(target, alloc, opts, symbolic, scaling_ok, why_not))
    if "search" in opts.stages:
        for kind in ("fixed", "dynamic"):
            found = run_search(
                target,
                alloc,
                kind,
                variant=opts.variant,
                arithmetic=opts.arithmetic,
                examples=opts.examples,
                classes=opts.classes,
                w_max=opts.w_max,
                horizon=opts.slots,
                seed=opts.seed,
                wide=opts.wide(alloc.requirement),
            )
            if not add(found):
                return finish()
    if "end-to-end" in opts.stages:
        add(
            run_end_to_end(
                target,
                alloc,
                variant=opts.variant,
                arithmetic=opts.arithmetic,
                runs=opts.e2e_runs,
                slots=opts.e2e_slots,
                classes=opts.classes,
                w_max=opts.w_max,
                seed=opts.seed,
            )
        )
    return finish()
