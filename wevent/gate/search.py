"""Adversarial search: hypothesis draws requirement populations and publish/skip sequences, runs
the kernel through the runtime guard (`verifier.Guard`, fail closed) and shrinks the first
failure to a minimal counterexample.

A failure is what `wevent trace` reports: the guard refuses a charge (a window over its bound,
including a later declaration's backward window the guard already knows, 001 Section 5.1), or
the kernel allocates a negative budget. The search runs whether or not the kernel is symbolic,
so it is the whole evidence for a kernel Z3 cannot run, and an independent check of one it can.
The minimal counterexample has the fewest classes, then the shortest run (hypothesis shrinks
lists towards fewer elements, decisions towards skip, budgets towards the start of
`inputs.BUDGETS`); its decisions end at the failing slot and it is replayed before it is
reported.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from accounting.budget import Budget
from accounting.population import Population
from accounting.requirements import Fixed, Requirement
from mechanisms.allocators import algebra_for, classes_of
from mechanisms.allocators.api import Allocator
from mechanisms.allocators.kernel import first_negative
from proofs.counterexamples import Counterexample, Failure
from wevent.gate.conformance import TargetRaised, guarded
from wevent.gate.inputs import (
    SYSTEMATIC_BUDGETS,
    decision_lists,
    one_user_per_class,
    periodic_patterns,
    requirement_lists,
)
from wevent.gate.report import ERROR, FAILED, PASSED, SKIPPED, StageResult
from wevent.tracing import TraceResult, trace_kernel

__all__ = [
    "CaseProbe",
    "Probe",
    "counterexample_of",
    "drop_classes",
    "failure_of",
    "run_search",
    "shrink_case",
    "shrink_decisions",
    "trace_target",
]


def trace_target(
    target: str,
    alloc: Allocator,
    population: Population,
    decisions: Sequence[bool],
    variant: str,
    arithmetic: str,
) -> TraceResult:
    """`wevent trace`'s run (kernel + guard) on an already resolved allocator."""
    alg = algebra_for(arithmetic)
    kernel = guarded("kernel()", alloc.kernel, alg, classes_of(population, target), variant)
    return guarded(
        "the kernel",
        lambda: trace_kernel(
            kernel,
            population,
            decisions,
            mechanism=target,
            variant=variant,
            arithmetic=arithmetic,
        ),
    )


def failure_of(result: TraceResult) -> Failure:
    """The failure of a trace that did not pass, as a counterexample states it."""
    assert result.failed_slot is not None
    slot = result.failed_slot
    if result.refusal is not None:
        return Failure.refused(slot, result.refusal)
    last = result.slots[-1]
    bad = first_negative([("dissimilarity", last.dissimilarity), ("publication", last.publication)])
    assert bad is not None
    part, c, value = bad
    return Failure(
        slot, result.population.classes[c].members[0], "negative", spent=value, part=part
    )


def counterexample_of(
    target: str,
    variant: str,
    arithmetic: str,
    population: Population,
    decisions: Sequence[bool],
    result: TraceResult,
) -> Counterexample:
    """A failing trace as a `Counterexample` (one user per class, decisions up to the failure)."""
    assert result.failed_slot is not None
    reqs = tuple((c.members[0], c.requirement) for c in population.classes)
    return Counterexample(
        target,
        variant,
        arithmetic,
        reqs,
        tuple(decisions[: result.failed_slot]),
        failure_of(result),
    )


C = TypeVar("C")


class CaseProbe(Protocol[C]):
    """What the greedy shrinkers need: a failure test on (classes, decisions) that records the
    failing slot of its last failing run. ``C`` is whatever describes one class (a requirement;
    for population allocators a requirement and its user count, `wevent.gate.population`)."""

    failed_slot: int

    def __call__(self, case: tuple[list[C], list[bool]], /) -> bool: ...


@dataclass
class Probe:
    """The condition hypothesis minimizes: the trace fails, or the target raises."""

    target: str
    alloc: Allocator
    variant: str
    arithmetic: str
    runs: int = 0
    failed_slot: int = 0  # of the last failing run (0 when the target raised)

    def __call__(self, case: tuple[list[Requirement], list[bool]]) -> bool:
        reqs, decisions = case
        self.runs += 1
        self.failed_slot = 0
        try:
            result = trace_target(
                self.target,
                self.alloc,
                one_user_per_class(reqs),
                decisions,
                self.variant,
                self.arithmetic,
            )
        except TargetRaised:
            return True
        self.failed_slot = result.failed_slot or 0
        return not result.ok


def _systematic(
    probe: Probe, w_max: int, horizon: int
) -> tuple[list[Requirement], list[bool]] | None:
    """One class: every window up to ``w_max``, every budget of `inputs.SYSTEMATIC_BUDGETS` and
    every periodic decision sequence (period up to w + 1): the first failing input, or None. These
    are the classic hazards (a double share count needs a particular budget, window and
    publication rhythm: for BA, 0.3, 0.7, 0.6, ... with w = 3 and every other slot published),
    which random inputs hit too rarely to rely on."""
    for w in range(1, w_max + 1):
        patterns = periodic_patterns(w + 1, horizon)
        for eps in SYSTEMATIC_BUDGETS:
            reqs: list[Requirement] = [Fixed(w, Budget(eps))]
            for decisions in patterns:
                if probe((reqs, decisions)):
                    return reqs, decisions
    return None


def drop_classes(probe: CaseProbe[C], reqs: list[C], decisions: list[bool]) -> list[C]:
    """Greedy: leave out requirement classes while the input still fails."""
    out = list(reqs)
    i = 0
    while i < len(out) and len(out) > 1:
        trial = out[:i] + out[i + 1 :]
        if probe((trial, decisions)):
            out = trial
        else:
            i += 1
    return out


def shrink_decisions(probe: CaseProbe[C], reqs: list[C], decisions: list[bool]) -> list[bool]:
    """Greedy, to a fixed point: cut the run at its failing slot, drop single slots, turn
    publications into skips, while the input still fails (hypothesis' shrinker cannot always
    turn one publication of a periodic sequence into a skip)."""

    def fails(trial: list[bool]) -> bool:
        return bool(trial) and probe((reqs, trial))

    out = list(decisions)
    probe((reqs, out))
    changed = True
    while changed:
        changed = False
        if probe.failed_slot:
            out = out[: probe.failed_slot]
        for i in range(len(out)):
            for trial in ([*out[:i], *out[i + 1 :]], [*out[:i], False, *out[i + 1 :]]):
                if trial != out and fails(trial):
                    out, changed = trial[: probe.failed_slot or None], True
                    break
            if changed:
                break
    return out


def shrink_case(
    probe: Probe, reqs: list[Requirement], decisions: list[bool]
) -> tuple[list[Requirement], list[bool]]:
    """A failing input made smaller greedily: classes left out, then slots and publications."""
    reqs = drop_classes(probe, reqs, decisions)
    return reqs, shrink_decisions(probe, reqs, decisions)


def run_search(
    target: str,
    alloc: Allocator,
    kind: str,
    *,
    variant: str,
    arithmetic: str,
    examples: int,
    classes: int,
    w_max: int,
    horizon: int,
    seed: int,
) -> StageResult:
    """Search ``examples`` inputs of requirement ``kind`` ("fixed" or "dynamic")."""
    name = f"search/{kind}"
    start = time.perf_counter()
    if kind == "dynamic" and alloc.requirement != "dynamic":
        return StageResult(name, SKIPPED, 0.0, "the allocator serves fixed requirements only")
    probe = Probe(target, alloc, variant, arithmetic)
    strategy = st.tuples(requirement_lists(kind, classes, w_max, horizon), decision_lists(horizon))
    config = settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    scope: dict[str, Any] = {
        "examples": examples,
        "classes": f"1..{classes}",
        "w": f"1..{w_max}",
        "horizon": horizon,
    }
    found = _systematic(probe, w_max, horizon) if kind == "fixed" else None
    how = "the systematic pass"
    try:
        if found is None:
            how = "hypothesis, shrunk"
            found = find(strategy, probe, settings=config, random=random.Random(f"{seed}:{name}"))
    except NoSuchExample:
        return StageResult(
            name,
            PASSED,
            time.perf_counter() - start,
            f"{probe.runs} runs through the guard ({kind} populations of 1..{classes} classes, "
            f"w <= {w_max}, up to {horizon} slots"
            + (", one-class periodic runs first" if kind == "fixed" else "")
            + "): no refusal, no negative budget",
            data={"scope": scope, "runs": probe.runs},
        )
    reqs, decisions = shrink_case(probe, *found)
    population = one_user_per_class(reqs)
    try:
        result = trace_target(target, alloc, population, decisions, variant, arithmetic)
    except TargetRaised as exc:
        csv = ";".join(f"{u}:{r.describe()}" for u, r in population.items())
        dec = ",".join("1" if d else "0" for d in decisions)
        return StageResult(
            name,
            ERROR,
            time.perf_counter() - start,
            f"{exc} (requirements {csv}; decisions {dec})",
        )
    if result.ok:  # pragma: no cover - the probe said it fails: a non-deterministic kernel
        return StageResult(
            name,
            FAILED,
            time.perf_counter() - start,
            "a failing input passed when run again: the kernel is not deterministic",
        )
    cex = counterexample_of(target, variant, arithmetic, population, decisions, result)
    replays = cex.replays()
    detail = (
        f"{cex.failure.describe()} (found by {how}, {probe.runs} runs"
        + ("" if replays else "; WARNING: `wevent trace` does not replay it")
        + ")"
    )
    return StageResult(
        name,
        FAILED,
        time.perf_counter() - start,
        detail,
        counterexample=cex,
        data={"scope": scope, "runs": probe.runs, "replays": replays},
    )
