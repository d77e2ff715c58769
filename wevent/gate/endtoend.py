"""End to end: the kernel drives the central data path (001 Algorithms 2-5: SM/OBS dissimilarity,
the publish test, Laplace publication) on synthetic streams (001 Section 6.1: lns, sin, log)
with the runtime guard in the loop, and the guard's ledger is then batch-checked.

Here the publish/skip decisions come from data, not from an adversary, and every charge carries
evidence the guard certifies. A refusal (or a negative budget, `InvalidAllocation`) is turned
into a `wevent trace` counterexample: one user per class and the run's decisions up to the
failing slot, whose own decision is the one that replays the failure, then made smaller greedily
(classes left out, slots dropped, publications turned into skips) while it still fails.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.requirements import Requirement
from wevent.accounting.spending import BudgetExceeded, EvidenceRejected
from wevent.gate.conformance import TargetRaised, guarded
from wevent.gate.inputs import one_user_per_class, random_requirements
from wevent.gate.report import ERROR, FAILED, PASSED, UNKNOWN, StageResult
from wevent.gate.search import Probe, counterexample_of, shrink_case, trace_target
from wevent.mechanisms.allocators import algebra_for, classes_of
from wevent.mechanisms.allocators.api import Allocator
from wevent.mechanisms.allocators.registry import data_path_of
from wevent.mechanisms.central import CentralRunner, InvalidAllocation, SlotRecord
from wevent.mechanisms.streams import SYNTHETIC_KINDS, SyntheticStream
from wevent.proofs.counterexamples import Counterexample
from wevent.verifier.check import check
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups

__all__ = ["run_end_to_end"]


def never_published(
    name: str, start: float, runs: int, slots: int, note: str, data: dict[str, Any]
) -> StageResult:
    """UNKNOWN, not passed: nothing was released, so the data path was not exercised (budget
    and population allocators alike). ``note`` follows "synthetic streams" in the detail."""
    return StageResult(
        name,
        UNKNOWN,
        time.perf_counter() - start,
        f"the kernel never published in {runs} runs x {slots} slots on synthetic streams{note}: "
        "the release path was not exercised",
        data={"runs": runs, "slots": slots, "publications": 0, **data},
    )


def checker_disagreement(
    name: str, ledger: Ledger, population: Population, run: int, start: float
) -> StageResult | None:
    """The stage's failure if the batch checker finds violations in a ledger the guard
    accepted during run ``run`` (0-based), else None."""
    verdict = check(ledger, population)
    if verdict.ok:
        return None
    return StageResult(
        name,
        FAILED,
        time.perf_counter() - start,
        f"run {run + 1}: the batch checker finds {len(verdict.violations)} violation(s) in a "
        "ledger the guard accepted",
    )


def _replay(
    target: str,
    alloc: Allocator,
    population: Population,
    records: list[SlotRecord],
    slot: int,
    variant: str,
    arithmetic: str,
) -> Counterexample | None:
    """The trace counterexample of a run refused at ``slot``: one user per class, the run's
    decisions before it, and whichever decision at ``slot`` fails there."""
    users = Population({c.members[0]: c.requirement for c in population.classes})
    before = [r.status == "published" for r in records]
    for last in (False, True):
        decisions = [*before, last]
        result = trace_target(target, alloc, users, decisions, variant, arithmetic)
        if result.failed_slot == slot:
            # The data path's run is long; hand `wevent trace` the smallest failing part of it.
            probe = Probe(target, alloc, variant, arithmetic)
            reqs, decisions = shrink_case(probe, [c.requirement for c in users.classes], decisions)
            small = one_user_per_class(reqs)
            result = trace_target(target, alloc, small, decisions, variant, arithmetic)
            return counterexample_of(target, variant, arithmetic, small, decisions, result)
    return None


def run_end_to_end(
    target: str,
    alloc: Allocator,
    *,
    variant: str,
    arithmetic: str,
    runs: int,
    slots: int,
    classes: int,
    w_max: int,
    seed: int,
) -> StageResult:
    """``runs`` runs of ``slots`` slots, populations of 1..``classes`` classes (20-80 users
    each; all fixed, or for dynamic allocators every other run all dynamic)."""
    name = "end-to-end"
    start = time.perf_counter()
    rng = random.Random(f"{seed}:{name}")
    kinds = ["fixed", "dynamic"] if alloc.requirement == "dynamic" else ["fixed"]
    published = charges = 0
    try:
        for run in range(runs):
            kind = kinds[run % len(kinds)]
            reqs: list[Requirement] = random_requirements(rng, kind, classes, w_max, slots)
            population = Population.from_classes({r: rng.randint(20, 80) for r in reqs})
            sizes = [c.count for c in population.classes]
            stream = SyntheticStream(
                SYNTHETIC_KINDS[run % len(SYNTHETIC_KINDS)], slots, sizes, seed + run
            )
            kernel = guarded(
                "kernel()",
                alloc.kernel,
                algebra_for(arithmetic),
                classes_of(population, target),
                variant,
            )
            guard = Guard(population)
            data_seed, noise_seed = np.random.SeedSequence([seed, run]).spawn(2)
            runner = CentralRunner(
                kernel=kernel,
                spender=guard,
                groups=class_groups(population, guard),
                sizes=sizes,
                stream=stream,
                data_rng=np.random.default_rng(data_seed),
                noise_rng=np.random.default_rng(noise_seed),
                mechanism=target,
                data_path=data_path_of(alloc, stream.domain),
            )
            records: list[SlotRecord] = []
            try:
                for _ in range(slots):
                    records.append(guarded("the kernel", runner.step))
            except TargetRaised as exc:
                cause: Any = exc.__cause__
                if not isinstance(cause, BudgetExceeded | EvidenceRejected | InvalidAllocation):
                    raise
                failed = len(records) + 1
                cex = _replay(target, alloc, population, records, failed, variant, arithmetic)
                detail = f"run {run + 1} ({kind}, {len(population)} users): slot {failed}: {cause}"
                if cex is None:
                    detail += " (`wevent trace` does not replay it)"
                return StageResult(
                    name,
                    FAILED,
                    time.perf_counter() - start,
                    detail,
                    counterexample=cex,
                    data={"runs": run + 1},
                )
            disagreement = checker_disagreement(name, guard.ledger, population, run, start)
            if disagreement is not None:  # pragma: no cover - they agree (tested)
                return disagreement
            published += sum(r.status == "published" for r in records)
            charges += len(guard.ledger)
    except TargetRaised as exc:
        return StageResult(name, ERROR, time.perf_counter() - start, str(exc))
    if published == 0:
        note = f" ({charges} charges, all accepted)"
        return never_published(name, start, runs, slots, note, {"charges": charges})
    return StageResult(
        name,
        PASSED,
        time.perf_counter() - start,
        f"{runs} runs x {slots} slots on synthetic streams ({published} publications, "
        f"{charges} charges): every charge accepted by the guard, ledgers compliant",
        data={"runs": runs, "slots": slots, "publications": published, "charges": charges},
    )
