"""Adversarial search: hypothesis draws requirement populations and publish/skip sequences, runs
the kernel through the runtime guard (`wevent.verifier.Guard`, fail closed) and shrinks the first
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

import itertools
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol, TypeVar

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.gate.conformance import TargetRaised, guarded
from wevent.gate.inputs import (
    AWKWARD_BUDGETS,
    PATTERNS,
    SYSTEMATIC_BUDGETS,
    decision_lists,
    one_user_per_class,
    pattern,
    periodic_patterns,
    requirement_lists,
    structured_changes,
    structured_one_class,
    wide_dynamic,
    wide_fixed,
    wide_horizon,
    wide_window,
)
from wevent.gate.report import ERROR, FAILED, PASSED, SKIPPED, VERIFIER_ERROR, StageResult
from wevent.mechanisms.allocators import algebra_for, classes_of
from wevent.mechanisms.allocators.api import Allocator
from wevent.mechanisms.allocators.kernel import first_negative
from wevent.proofs.counterexamples import Counterexample, Failure, ProverError, replayed
from wevent.verifier.tracing import TraceResult, trace_kernel

__all__ = [
    "CaseProbe",
    "Probe",
    "Seen",
    "WideScope",
    "counterexample_of",
    "drop_classes",
    "failure_of",
    "largest_window",
    "run_search",
    "shrink_case",
    "shrink_decisions",
    "shrink_requirements",
    "simpler_requirements",
    "trace_target",
    "wide_cases",
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


def largest_window(req: Requirement) -> int:
    """A requirement's largest window (a dynamic one's over every declaration, both ways)."""
    if isinstance(req, Fixed):
        return req.w
    if isinstance(req, Dynamic):
        return max(max(d.w_back, d.w_fwd) for d in req.declarations)
    return 1


@dataclass
class Seen:
    """What a search ran: the largest window, the most classes and the longest run drawn (the
    scope a pass reports, `StageResult.data["scope"]`)."""

    w_max: int = 0
    classes: int = 0
    horizon: int = 0

    def add(self, reqs: Sequence[Requirement], slots: int) -> None:
        if reqs:
            self.w_max = max(self.w_max, max(largest_window(r) for r in reqs))
        self.classes = max(self.classes, len(reqs))
        self.horizon = max(self.horizon, slots)


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
    seen: Seen = field(default_factory=Seen)
    refused_inputs: int = 0  # populations the kernel factory refused (BudgetError): skipped

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
        except TargetRaised as exc:
            if str(exc).startswith("kernel() raised") and isinstance(exc.__cause__, BudgetError):
                self.refused_inputs += 1  # e.g. "serves at most 4 classes": not a defect
                return False
            self.seen.add(reqs, len(decisions))
            return True
        self.seen.add(reqs, len(decisions))
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
    """Greedy, to a fixed point: cut the run at its failing slot, drop runs of slots, turn runs
    of publications into skips (halving the run length down to single slots), while the input
    still fails (hypothesis' shrinker cannot always turn one publication of a periodic sequence
    into a skip; a wide search's runs are hundreds of slots long)."""

    def fails(trial: list[bool]) -> bool:
        return bool(trial) and probe((reqs, trial))

    out = list(decisions)
    if probe((reqs, out)) and probe.failed_slot:
        out = out[: probe.failed_slot]
    changed = True
    while changed:
        changed = False
        size = max(1, len(out) // 2)
        while True:
            i = 0
            while i < len(out):
                for trial in (
                    [*out[:i], *out[i + size :]],
                    [*out[:i], *([False] * len(out[i : i + size])), *out[i + size :]],
                ):
                    if trial != out and fails(trial):
                        out, changed = trial[: probe.failed_slot or None], True
                        break
                else:
                    i += size
            if size == 1:
                break
            size //= 2
    return out


# Budgets a shrunk counterexample prefers, simplest first (distinct classes cannot all have 1).
SIMPLE_BUDGETS: tuple[Fraction, ...] = (
    Fraction(1),
    Fraction(2),
    Fraction(1, 2),
    Fraction(3),
    Fraction(1, 3),
)


def simpler_requirements(req: Requirement) -> Iterator[Requirement]:
    """Simpler requirements than ``req``, simplest first: a fixed one's smaller windows (all,
    ascending), then a simpler budget (`SIMPLE_BUDGETS`); a dynamic one without one of its
    declarations, then with smaller windows (ascending ladder), then with budgets 1."""
    if isinstance(req, Fixed):
        for w in range(1, req.w):
            yield Fixed(w, req.eps)
        eps = Fraction(req.eps)
        rank = SIMPLE_BUDGETS.index(eps) if eps in SIMPLE_BUDGETS else len(SIMPLE_BUDGETS)
        for simple in SIMPLE_BUDGETS[:rank]:  # simpler budgets only: the shrinking terminates
            yield Fixed(req.w, Budget(simple))
        return
    if not isinstance(req, Dynamic):
        return
    decls = req.declarations
    if len(decls) > 1:
        for i in range(len(decls)):
            yield Dynamic(decls[:i] + decls[i + 1 :])
    for i, d in enumerate(decls):
        for attr in ("w_back", "w_fwd"):
            current = getattr(d, attr)
            for w in sorted({1, 2, 3, 4, 5, 6, 8, current // 2, current - 1}):
                if 1 <= w < current:
                    changed = Declaration(
                        d.slot,
                        w if attr == "w_back" else d.w_back,
                        d.eps_back,
                        w if attr == "w_fwd" else d.w_fwd,
                        d.eps_fwd,
                    )
                    yield Dynamic((*decls[:i], changed, *decls[i + 1 :]))
    one = Budget(1)
    for i, d in enumerate(decls):  # budgets 1 (terminal: the shrinking ends)
        for back, fwd in ((one, d.eps_fwd), (d.eps_back, one)):
            if (back, fwd) != (d.eps_back, d.eps_fwd):
                changed = Declaration(d.slot, d.w_back, back, d.w_fwd, fwd)
                yield Dynamic((*decls[:i], changed, *decls[i + 1 :]))


def shrink_requirements(
    probe: CaseProbe[C],
    reqs: list[C],
    decisions: list[bool],
    simpler: Callable[[C], Iterator[C]],
    *,
    limit: int = 400,
) -> tuple[list[C], list[bool]]:
    """Greedy: replace each class by the first of its ``simpler`` forms (smaller windows first)
    with which the input still fails, until none does; the run is cut at each new failing
    slot. At most ``limit`` probes (a wide search's windows go up to 64)."""
    out, dec = list(reqs), list(decisions)
    tried = 0
    i = 0
    while i < len(out):
        for cand in simpler(out[i]):
            if cand in out:
                continue
            trial = [*out[:i], cand, *out[i + 1 :]]
            tried += 1
            if probe((trial, dec)):
                out = trial
                dec = dec[: probe.failed_slot or None]
                break
            if tried >= limit:
                return out, dec
        else:
            i += 1
    return out, dec


def shrink_case(
    probe: Probe, reqs: list[Requirement], decisions: list[bool]
) -> tuple[list[Requirement], list[bool]]:
    """A failing input made smaller greedily: the run cut at its failing slot, classes left
    out, windows made smaller (then budgets simpler), then slots and publications."""
    if probe((reqs, decisions)) and probe.failed_slot:
        decisions = decisions[: probe.failed_slot]
    reqs = drop_classes(probe, reqs, decisions)
    reqs, decisions = shrink_requirements(probe, reqs, decisions, simpler_requirements)
    return reqs, shrink_decisions(probe, reqs, decisions)


@dataclass(frozen=True)
class WideScope:
    """The wide search's scope, far past the proof's: ``runs`` runs through the guard (the
    budget: a count, so the verdict does not depend on the machine), windows up to ``w_max``,
    populations of up to ``classes`` classes, runs of up to ``horizon`` slots (0: max(256,
    4 w_max))."""

    runs: int = 600
    w_max: int = 64
    classes: int = 6
    horizon: int = 0

    @property
    def slots(self) -> int:
        return wide_horizon(self.horizon, self.w_max)


def _run_length(rng: random.Random, horizon: int, w: int) -> int:
    """A run's length: the whole horizon one time in four, else about 4w to 5w slots."""
    if rng.random() < 0.25:
        return horizon
    return min(horizon, max(16, 4 * w + rng.randint(1, w + 1)))


Case = tuple[list[Requirement], list[bool]]


def wide_cases(kind: str, wide: WideScope, seed: str) -> Iterator[Case]:
    """The wide search's inputs, a fixed sequence for a seed: a structured pass (fixed: every
    period of every ladder window, `inputs.structured_one_class`; dynamic: a requirement change
    with a publication at every offset around it, `inputs.structured_changes`) interleaved with
    random populations (`inputs.wide_fixed`, `inputs.wide_dynamic`) under the structured
    patterns of `inputs.PATTERNS` in turn (for dynamic ones aligned with a change slot)."""
    rng = random.Random(seed)
    horizon = wide.slots
    structured: Iterator[Case] = iter(
        structured_one_class(wide.w_max, horizon, AWKWARD_BUDGETS)
        if kind == "fixed"
        else structured_changes(wide.w_max, horizon)
    )
    i = 0
    while True:
        i += 1
        if i % 2 == 0:
            item = next(structured, None)
            if item is not None:
                yield item
                continue
        family = PATTERNS[i % len(PATTERNS)]
        if kind == "fixed":
            reqs = wide_fixed(rng, wide.classes, wide.w_max)
            slots = _run_length(rng, horizon, max(largest_window(r) for r in reqs))
            w = largest_window(rng.choice(reqs))
            yield reqs, pattern(family, rng, slots, w)
        else:
            slots = _run_length(rng, horizon, wide_window(rng, wide.w_max))
            reqs, change = wide_dynamic(rng, wide.classes, wide.w_max, slots)
            w = largest_window(rng.choice(reqs))
            yield reqs, pattern(family, rng, slots, w, anchor=change)


def _scope(kind: str, probe: Probe) -> dict[str, Any]:
    out: dict[str, Any] = {
        "runs": probe.runs,
        "w_max": probe.seen.w_max,
        "classes": probe.seen.classes,
        "horizon": probe.seen.horizon,
        "kind": kind,
    }
    if probe.refused_inputs:
        out["skipped"] = probe.refused_inputs
    return out


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
    wide: WideScope | None = None,
) -> StageResult:
    """Search inputs of requirement ``kind`` ("fixed" or "dynamic"): at the proof's scope (a
    systematic one-class pass, then ``examples`` hypothesis inputs), then ``wide.runs`` inputs
    of the wide scope (`wide_cases`). The first failure is shrunk and replayed."""
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
    found = _systematic(probe, w_max, horizon) if kind == "fixed" else None
    how = "the systematic pass"
    try:
        if found is None:
            how = "hypothesis, shrunk"
            found = find(strategy, probe, settings=config, random=random.Random(f"{seed}:{name}"))
    except NoSuchExample:
        found = None
    if found is None and wide is not None and wide.runs > 0:
        how = "the wide search"
        for case in itertools.islice(wide_cases(kind, wide, f"{seed}:{name}:wide"), wide.runs):
            if probe(case):
                found = case
                break
    if found is None:
        scope = _scope(kind, probe)
        return StageResult(
            name,
            PASSED,
            time.perf_counter() - start,
            f"{probe.runs} runs through the guard ({kind} populations of up to "
            f"{scope['classes']} classes, w <= {scope['w_max']}, up to {scope['horizon']} slots"
            + (
                "; structured patterns: all publish/skip, every period, k skips, bursts, "
                "late starts"
                + ("; requirement changes, a publication at every offset" * (kind == "dynamic"))
                if wide is not None and wide.runs > 0
                else ""
            )
            + "): no refusal, no negative budget"
            + (
                f"; {probe.refused_inputs} populations skipped (the kernel refused them)"
                if probe.refused_inputs
                else ""
            ),
            data={"scope": scope, "runs": probe.runs},
        )
    scope = _scope(kind, probe)
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
    try:  # no refutation without a replay: the tools disagree, a wevent bug
        cex = replayed(cex, "the search")
    except ProverError as exc:
        data = {"scope": scope, "runs": probe.runs, "replays": False}
        return StageResult(name, VERIFIER_ERROR, time.perf_counter() - start, str(exc), data=data)
    return StageResult(
        name,
        FAILED,
        time.perf_counter() - start,
        f"{cex.failure.describe()} (found by {how}, {probe.runs} runs)",
        counterexample=cex,
        data={"scope": scope, "runs": probe.runs, "replays": True},
    )
