"""The gate for the population-division allocators (002 Section 6; 000): ``lpu`` ... ``plba-ops``.

These allocators spend users, not budgets: per slot their population kernel
(`wevent.mechanisms.allocators.population`) says how many users report, a seeded pool draws them, and
every drawn user pays one share ``eps_i / k_i`` of their budget, then waits ``R`` slots before the
pool hands them out again. What can go wrong is a window with more reports than the split
allows (a user back too early, a split too coarse) or a draw the pool cannot serve. The stages
mirror the budget-kernel gate (`wevent.gate.core`):

1. conformance: the kernel is deterministic and its counts do not depend on which users the
   pool drew (a run on another pool seed has the same statuses and sample sizes; the same seed
   draws the same users); on Z3 terms it computes what it computes on exact rationals (the
   pool proof runs it on Z3 terms);
2. proof: `wevent.proofs.population.prove_population` - for the OPS allocators the split theorem
   (n <= 10^4, windows <= 200), then that no draw exceeds the pool and that every drawn user's
   windows hold (`wevent.proofs.population.check_user_windows`: ceil(w_i / R) reports per window, each
   spending the setup's per-report budget), for every tuple of 1..K distinct windows <= W,
   n = 2 max w .. 3 max w users and every decision sequence; a user-window violation is refuted
   only when a run through the pool and the guard replays it;
3. search: populations (1..K distinct classes with their user counts) and decision sequences
   through `wevent.verifier.tracing.trace_population` (pool + runtime guard): first every one-class
   periodic rhythm and every two-class split of n users publishing at every slot (the shape of
   the published OPS counterexample, `wevent.proofs.population.replay_split_counterexample`), then
   hypothesis, then the wide search (`wide_population_cases`: up to 6 classes, windows up to
   64, 2w .. 100w users); the first failure is shrunk (classes, windows, users, slots,
   publications);

Populations an allocator's setup refuses (BudgetError: it needs more users) are skipped and
counted in every stage, never an "unusable" verdict.
4. end to end: `wevent.experiments.running.run_mechanism` on synthetic streams with the guard in the loop,
   its ledger then batch-checked.

Every counterexample holds the whole population (its size sets the sample sizes) and the pool
seed, and is replayed with ``wevent trace TARGET -r FILE --decisions ... [--seed S]``.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import z3
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.formats import write_requirements
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, Requirement
from wevent.errors import AllocatorError, InputError
from wevent.experiments.running import run_mechanism
from wevent.gate.conformance import TargetRaised, guarded
from wevent.gate.endtoend import checker_disagreement, never_published
from wevent.gate.inputs import (
    PATTERNS,
    SYSTEMATIC_BUDGETS,
    WINDOW_LADDER,
    decision_lists,
    fixed_requirements,
    pattern,
    periodic_patterns,
    random_decisions,
    wide_fixed,
)
from wevent.gate.report import (
    ERROR,
    FAILED,
    PASSED,
    PROVED,
    SKIPPED,
    UNKNOWN,
    VERIFIER_ERROR,
    GateReport,
)
from wevent.gate.report import StageResult as Stage
from wevent.gate.search import (
    Seen,
    WideScope,
    drop_classes,
    largest_window,
    shrink_decisions,
    shrink_requirements,
    simpler_requirements,
)
from wevent.mechanisms.allocators import classes_of
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.api import PopulationAllocator
from wevent.mechanisms.allocators.population import Draw, PopulationKernel
from wevent.mechanisms.allocators.registry import POPULATION_BUILTIN, resolve_population
from wevent.mechanisms.streams import SYNTHETIC_KINDS, SyntheticStream
from wevent.proofs.algebra import Z3Algebra, strict_truth
from wevent.proofs.counterexamples import Counterexample, Failure, ProverError, replayed
from wevent.proofs.population import even_counts, prove_population
from wevent.proving import population_scope_text
from wevent.verifier.tracing import PopulationTrace, trace_population

__all__ = [
    "ClassCount",
    "PopulationProbe",
    "population_counterexample",
    "population_of",
    "run_population_gate",
    "shrink_population_case",
    "wide_population_cases",
]

F = Fraction
ClassCount = tuple[Requirement, int]  # one class of a searched population: requirement, users


def population_of(classes: Sequence[ClassCount]) -> Population:
    """Users ``u1 .. un`` holding the classes' requirements, class by class."""
    users: dict[str, Requirement] = {}
    for req, count in classes:
        for _ in range(count):
            users[f"u{len(users) + 1}"] = req
    return Population(users)


def _big_enough(classes: Sequence[ClassCount]) -> bool:
    """n >= 2 max w: every population allocator can serve the largest window (its sample
    floor(n / (2w)) is at least 1; `population_setup` refuses smaller populations)."""
    w_max = max(req.w for req, _ in classes if isinstance(req, Fixed))
    return sum(count for _, count in classes) >= 2 * w_max


def _enlarged(classes: list[ClassCount]) -> list[ClassCount]:
    """The first class made large enough for `_big_enough` (the strategy's inputs are valid)."""
    missing = 2 * max(req.w for req, _ in classes if isinstance(req, Fixed)) - sum(
        count for _, count in classes
    )
    if missing <= 0:
        return classes
    return [(classes[0][0], classes[0][1] + missing), *classes[1:]]


def population_failure(trace: PopulationTrace) -> Failure:
    """The failure of a population trace that did not pass: a guard refusal or a shortage."""
    assert trace.failed_slot is not None
    if trace.refusal is not None:
        return Failure.refused(trace.failed_slot, trace.refusal)
    short = trace.shortage
    assert short is not None
    return Failure(
        trace.failed_slot,
        "pool",
        "shortage",
        spent=F(short.asked),
        bound=F(short.available),
        part=short.what,
    )


def population_counterexample(
    target: str, variant: str, seed: int, population: Population, trace: PopulationTrace
) -> Counterexample:
    """A failing population trace as a `Counterexample` (every user, decisions to the failure)."""
    assert trace.failed_slot is not None
    # Each slot's status is fixed before its draws, so the failing slot's is known too; a
    # nullified or empty slot replays the same with a skip.
    decisions = tuple(s.status == "published" for s in trace.slots)
    return Counterexample(
        target,
        variant,
        "exact",
        tuple(population.items()),
        decisions,
        population_failure(trace),
        seed,
    )


@dataclass
class PopulationProbe:
    """The search's failure test: the population trace is refused or runs the pool short."""

    target: str
    variant: str
    seed: int
    runs: int = 0
    failed_slot: int = 0
    refused_inputs: int = 0  # populations the allocator's setup refused (not a failure)
    refused_last: bool = False  # the last call's population was refused
    seen: Seen = field(default_factory=Seen)
    pool: tuple[int, int] = (0, 0)  # the fewest and most users per largest window drawn

    def trace(self, classes: Sequence[ClassCount], decisions: Sequence[bool]) -> PopulationTrace:
        return guarded(
            "the population kernel",
            lambda: trace_population(
                self.target,
                population_of(classes),
                decisions,
                variant=self.variant,
                seed=self.seed,
            ),
        )

    def __call__(self, case: tuple[list[ClassCount], list[bool]], /) -> bool:
        classes, decisions = case
        self.runs += 1
        self.failed_slot = 0
        self.refused_last = False
        if not classes or not decisions or not _big_enough(classes):
            return False
        try:
            result = self.trace(classes, decisions)
        except TargetRaised as exc:
            if not isinstance(exc.__cause__, BudgetError):
                raise
            self.refused_inputs += 1  # e.g. a setup that cannot serve this population
            self.refused_last = True
            return False
        self.seen.add([req for req, _ in classes], len(decisions))
        ratio = sum(k for _, k in classes) // max(largest_window(req) for req, _ in classes)
        lo, hi = self.pool
        self.pool = (min(lo, ratio) if lo else ratio, max(hi, ratio))
        self.failed_slot = result.failed_slot or 0
        return not result.ok


def _shrink_counts(
    probe: PopulationProbe, classes: list[ClassCount], decisions: list[bool]
) -> list[ClassCount]:
    """Greedy: fewer users per class while the input still fails (removing half, a quarter,
    ... down to one user at a time: a wide search's pools hold up to 100 w users)."""
    out = list(classes)
    for i in range(len(out)):
        step = out[i][1] // 2
        while step >= 1:
            trial = [*out[:i], (out[i][0], out[i][1] - step), *out[i + 1 :]]
            if out[i][1] - step >= 1 and probe((trial, decisions)):
                out = trial
                step = min(step, out[i][1] // 2) or 1
                if out[i][1] == 1:
                    break
            else:
                step //= 2
    return out


def _simpler_classes(c: ClassCount) -> Iterator[ClassCount]:
    """A class with a smaller window (or budget 1), the same users (`search.simpler_requirements`)."""
    req, count = c
    for simpler in simpler_requirements(req):
        yield simpler, count


def shrink_population_case(
    probe: PopulationProbe, classes: list[ClassCount], decisions: list[bool]
) -> tuple[list[ClassCount], list[bool]]:
    """A failing input made smaller greedily: classes left out, windows made smaller, users
    removed, then slots cut and publications turned into skips (`wevent.gate.search`'s
    shrinkers). Users are removed against the whole run (fewer users draw otherwise and may
    fail later than the cut run's last slot; a failure on a prefix is a failure of the run)."""
    full = list(decisions)
    if probe((classes, decisions)) and probe.failed_slot:
        decisions = decisions[: probe.failed_slot]
    classes = drop_classes(probe, classes, decisions)
    classes, decisions = shrink_requirements(probe, classes, decisions, _simpler_classes)
    classes = _shrink_counts(probe, classes, full)
    return classes, shrink_decisions(probe, classes, full)


def _systematic(
    probe: PopulationProbe, w_max: int, classes: int, horizon: int
) -> tuple[list[ClassCount], list[bool]] | None:
    """One class: every window <= ``w_max``, n = 2w, 2w + 1, 3w users, two budgets and every
    periodic rhythm; then (with ``classes`` >= 2) every pair of windows with every split of
    n = 2 max w .. 3 max w users, publishing at every slot (the published OPS split's
    counterexample, 000 Algorithm 1 with ``ceil(z / z_w)``, has this shape)."""
    for w in range(1, w_max + 1):
        patterns = periodic_patterns(w + 1, horizon)
        for n in sorted({2 * w, 2 * w + 1, 3 * w}):
            for eps in SYSTEMATIC_BUDGETS[:2]:
                one: list[ClassCount] = [(Fixed(w, Budget(eps)), n)]
                for decisions in patterns:
                    if probe((one, decisions)):
                        return one, decisions
    if classes < 2:
        return None
    every = [True] * horizon
    for a, b in itertools.combinations(range(1, w_max + 1), 2):
        for n in range(2 * b, 3 * b + 1):
            for k in range(1, n):
                two: list[ClassCount] = [(Fixed(a, Budget(1)), k), (Fixed(b, Budget(1)), n - k)]
                if probe((two, every)):
                    return two, every
    return None


def _class_lists(classes: int, w_max: int) -> st.SearchStrategy[list[ClassCount]]:
    """1..classes distinct fixed requirements, each with 1..3 w_max users, enlarged to
    n >= 2 max w."""
    one = st.tuples(fixed_requirements(w_max), st.integers(1, 3 * w_max))
    lists = st.lists(one, min_size=1, max_size=classes, unique_by=lambda c: c[0])
    return lists.map(_enlarged)


def _pool_size(rng: random.Random, w: int) -> int:
    """Users per largest window: 2 (the fewest a population allocator serves) .. 100."""
    roll = rng.random()
    if roll < 0.2:
        return 2
    if roll < 0.3:
        return 100
    if roll < 0.7:
        return rng.randint(2, 10)
    return rng.randint(10, 100)


def _structured_population(w_max: int, horizon: int) -> list[tuple[list[ClassCount], list[bool]]]:
    """One class per window of `inputs.WINDOW_LADDER` up to ``w_max`` (and ``w_max``), with
    n = 2w, 3w and 10w users, every slot publishing or every slot skipping, over min(horizon,
    5w + 1) slots (at least 16): the smallest populations first, so a failure there shrinks
    little."""
    ladder = [w for w in WINDOW_LADDER if w <= w_max]
    if w_max not in ladder:
        ladder.append(w_max)
    out: list[tuple[list[ClassCount], list[bool]]] = []
    for w in ladder:
        slots = min(horizon, max(5 * w + 1, 16))
        for n in (2 * w, 3 * w, 10 * w):
            for publish in (True, False):
                out.append(([(Fixed(w, Budget(1)), n)], [publish] * slots))
    return out


def wide_population_cases(
    wide: WideScope, seed: str
) -> Iterator[tuple[list[ClassCount], list[bool]]]:
    """The wide search's population inputs, a fixed sequence for a seed: the structured
    one-class pass (`_structured_population`) interleaved with 1..``wide.classes``
    distinct fixed classes (windows up to ``wide.w_max``, awkward budgets: `inputs.wide_fixed`),
    n = 2 w .. 100 w users for the largest window w split between them, under the structured
    patterns of `inputs.PATTERNS` in turn."""
    rng = random.Random(seed)
    horizon = wide.slots
    structured = iter(_structured_population(wide.w_max, horizon))
    i = 0
    while True:
        i += 1
        if i % 2 == 0:
            item = next(structured, None)
            if item is not None:
                yield item
                continue
        reqs = wide_fixed(rng, wide.classes, wide.w_max)
        top = max(largest_window(r) for r in reqs)
        n = max(len(reqs), _pool_size(rng, top) * top)
        cuts = sorted(rng.sample(range(1, n), len(reqs) - 1)) if len(reqs) > 1 else []
        counts = [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
        slots = min(horizon, max(16, 4 * top + rng.randint(1, top + 1)))
        if rng.random() < 0.25:
            slots = horizon
        family = PATTERNS[i % len(PATTERNS)]
        decisions = pattern(family, rng, slots, largest_window(rng.choice(reqs)))
        yield list(zip(reqs, counts, strict=True)), decisions


def _search(
    target: str, opts: Any, probe: PopulationProbe
) -> tuple[tuple[list[ClassCount], list[bool]] | None, str]:
    found = _systematic(probe, opts.w_max, opts.classes, opts.slots)
    if found is not None:
        return found, "the systematic pass"
    config = settings(
        max_examples=opts.examples,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    strategy = st.tuples(_class_lists(opts.classes, opts.w_max), decision_lists(opts.slots))
    rng = random.Random(f"{opts.seed}:search/population")
    try:
        return find(strategy, probe, settings=config, random=rng), "hypothesis, shrunk"
    except NoSuchExample:
        pass
    wide: WideScope = opts.wide("population")
    cases = wide_population_cases(wide, f"{opts.seed}:search/population:wide")
    for classes, decisions in itertools.islice(cases, wide.runs):
        for factor in (1, 10, 100):  # an allocator needing more users: the same input, larger
            scaled = [(req, k * factor) for req, k in classes]
            if probe((scaled, decisions)):
                return (scaled, decisions), "the wide search"
            if not probe.refused_last:
                break
    return None, ""


def _found(
    name: str,
    target: str,
    opts: Any,
    probe: PopulationProbe,
    case: tuple[list[ClassCount], list[bool]],
    how: str,
    start: float,
) -> Stage:
    """A failing input, shrunk, replayed and reported as a counterexample."""
    classes, decisions = shrink_population_case(probe, *case)
    population = population_of(classes)
    trace = probe.trace(classes, decisions)
    if trace.ok:  # pragma: no cover - the kernel and the pool are deterministic (tested)
        return Stage(name, FAILED, time.perf_counter() - start, "a failing input passed again")
    cex = population_counterexample(target, opts.variant, opts.seed, population, trace)
    try:  # no refutation without a replay: the tools disagree, a wevent bug
        cex = replayed(cex, "the search")
    except ProverError as exc:
        data = {"runs": probe.runs, "replays": False}
        return Stage(name, VERIFIER_ERROR, time.perf_counter() - start, str(exc), data=data)
    detail = f"{cex.failure.describe()} (found by {how}, {probe.runs} runs)"
    data = {"runs": probe.runs, "replays": True}
    return Stage(name, FAILED, time.perf_counter() - start, detail, counterexample=cex, data=data)


def _run_search(target: str, opts: Any) -> Stage:
    name = "search/population"
    start = time.perf_counter()
    probe = PopulationProbe(target, opts.variant, opts.seed)

    def scope() -> dict[str, Any]:
        lo, hi = probe.pool
        return {
            "runs": probe.runs,
            "w_max": probe.seen.w_max,
            "classes": probe.seen.classes,
            "horizon": probe.seen.horizon,
            "kind": "population",
            "pool": f"{lo}w..{hi}w",
            "skipped": probe.refused_inputs,
        }

    try:
        found, how = _search(target, opts, probe)
        if found is None:
            searched = scope()
            skipped = probe.refused_inputs
            checked = probe.runs - skipped
            if checked == 0:
                return Stage(
                    name,
                    SKIPPED,
                    time.perf_counter() - start,
                    f"the allocator's setup refused all {skipped} populations drawn (it needs "
                    "more users): nothing was searched",
                    data={"scope": searched, "runs": probe.runs, "skipped": skipped},
                )
            return Stage(
                name,
                PASSED,
                time.perf_counter() - start,
                f"{probe.runs} runs through the pool and the guard (populations of up to "
                f"{searched['classes']} classes, w <= {searched['w_max']}, "
                f"{searched['pool']} users per largest window, up to {searched['horizon']} "
                "slots; one-class rhythms, two-class splits and structured patterns): every "
                "drawn user's windows hold, no shortage"
                + (
                    f"; {skipped} populations skipped: the allocator's setup refused them "
                    "(the wide search retries an input with 10 and 100 times the users)"
                    if skipped
                    else ""
                ),
                data={"scope": searched, "runs": probe.runs, "skipped": skipped},
            )
        searched = scope()
        stage = _found(name, target, opts, probe, found, how, start)
    except TargetRaised as exc:
        return Stage(name, ERROR, time.perf_counter() - start, str(exc))
    stage.data["scope"] = searched
    return stage


# ---------------------------------------------------------------------------- conformance


def _random_case(
    rng: random.Random, classes: int, w_max: int, slots: int
) -> tuple[list[ClassCount], list[bool]]:
    """Distinct fixed classes with 1..3 w_max users each (n >= 2 max w), random decisions."""
    out: list[ClassCount] = []
    for _ in range(rng.randint(1, classes)):
        req = Fixed(rng.randint(1, w_max), Budget(rng.choice(SYSTEMATIC_BUDGETS)))
        if all(req != r for r, _ in out):
            out.append((req, rng.randint(1, 3 * w_max)))
    return _enlarged(out), random_decisions(rng, slots)


def _usable(
    target: str, alloc: PopulationAllocator, classes: list[ClassCount], variant: str
) -> list[ClassCount] | None:
    """``classes``, or with 10 or 100 times the users when the allocator's setup refuses them
    (BudgetError: it needs more users than the input has); None when it refuses all three: the
    input is skipped (and counted), not a defect."""
    for factor in (1, 10, 100):
        scaled = [(req, k * factor) for req, k in classes]
        population = population_of(scaled)
        try:
            guarded(
                "setup()",
                alloc.setup,
                classes_of(population, target),
                [c.count for c in population.classes],
                2,
                variant,
            )
        except TargetRaised as exc:
            if isinstance(exc.__cause__, BudgetError):
                continue
            raise
        return scaled
    return None


def _kernel_run(kernel: PopulationKernel[Any, Any], decisions: Sequence[bool]) -> list[Any]:
    """The kernel's draws on ``decisions`` (a slot publishes when forced, or when it is not
    nullified and its decision says so), as exact values."""
    alg = kernel.alg
    out = []
    state = kernel.start()
    for t, d in enumerate(decisions, start=1):
        draw: Draw[Any, Any] = kernel.plan(state, t)
        published = alg.or_(draw.forced, alg.and_(alg.not_(draw.nullified), alg.truth(d)))
        out.append(
            tuple(
                _value(v)
                for v in (
                    draw.nullified,
                    draw.forced,
                    draw.dissimilarity,
                    draw.publication,
                    draw.available,
                )
            )
        )
        state = kernel.step(state, t, draw, published)
    return out


def _value(v: Any) -> Any:
    """A kernel value as a Python value (Z3 terms simplified to constants)."""
    if isinstance(v, z3.ExprRef):
        from wevent.proofs.symbolic import fraction_of

        s = z3.simplify(v)
        if z3.is_true(s) or z3.is_false(s):
            return z3.is_true(s)
        return fraction_of(s)
    return v if isinstance(v, bool) else F(v)


def _completed(trace: PopulationTrace) -> int:
    """Slots the trace ran to the end (all, or those before its failing slot)."""
    return len(trace.slots) if trace.failed_slot is None else trace.failed_slot - 1


def _sizes(trace: PopulationTrace) -> list[tuple[str, dict[str, int]]]:
    return [(s.status, {k: len(v) for k, v in s.sampled.items()}) for s in trace.slots]


def _conformance(target: str, alloc: PopulationAllocator, opts: Any) -> list[Stage]:
    """Determinism (same seed: same users; another seed: same statuses and sample sizes) and
    agreement of the kernel on Z3 terms with the exact kernel."""
    rng = random.Random(f"{opts.seed}:conformance/population")
    drawn = [
        _random_case(rng, opts.classes, opts.w_max, opts.slots)
        for _ in range(opts.conformance_inputs)
    ]
    try:
        usable = [(_usable(target, alloc, c, opts.variant), d) for c, d in drawn]
    except TargetRaised as exc:
        return [Stage("conformance/determinism", ERROR, 0.0, str(exc))]
    cases = [(c, d) for c, d in usable if c is not None]
    skipped = len(drawn) - len(cases)
    if not cases:
        why = (
            f"the allocator's setup refused all {skipped} random populations, even with 10 and "
            "100 times the users: nothing to check"
        )
        return [
            Stage(name, SKIPPED, 0.0, why, data={"skipped": skipped, "symbolic": False})
            for name in ("conformance/determinism", "conformance/symbolic")
        ]
    note = f" ({skipped} skipped: the setup refused them)" if skipped else ""
    probe = PopulationProbe(target, opts.variant, opts.seed)
    other = PopulationProbe(target, opts.variant, opts.seed + 1)
    stages = []
    start = time.perf_counter()
    name = "conformance/determinism"
    try:
        for classes, decisions in cases:
            first, again, moved = (p.trace(classes, decisions) for p in (probe, probe, other))
            same = [(s.status, s.sampled) for s in first.slots]
            # Another seed draws other users, so a window bug may stop its run at another
            # slot: compare the slots both runs completed.
            done = min(_completed(first), _completed(moved))
            if same != [(s.status, s.sampled) for s in again.slots]:
                detail = "the same pool seed drew different users or gave other statuses"
            elif _sizes(first)[:done] != _sizes(moved)[:done]:
                detail = "another pool seed changed the statuses or the sample sizes"
            else:
                continue
            return [
                Stage(
                    name,
                    FAILED,
                    time.perf_counter() - start,
                    detail,
                    data=_json(classes, decisions),
                )
            ]
    except TargetRaised as exc:
        return [Stage(name, ERROR, time.perf_counter() - start, str(exc))]
    stages.append(
        Stage(
            name,
            PASSED,
            time.perf_counter() - start,
            f"{len(cases)} random populations{note}, each traced three times (two pool "
            "seeds): the same seed draws the same users; the counts never depend on who was "
            "drawn",
            data={"skipped": skipped},
        )
    )
    start = time.perf_counter()
    name = "conformance/symbolic"
    for classes, decisions in cases:
        population = population_of(classes)
        try:
            setup = guarded(
                "setup()",
                alloc.setup,
                classes_of(population, target),
                [c.count for c in population.classes],
                2,
                opts.variant,
            )
            kernel = guarded("kernel()", alloc.kernel, ExactAlgebra(), setup.config, opts.variant)
            exact = guarded("the population kernel", _kernel_run, kernel, decisions)
        except TargetRaised as exc:
            return [*stages, Stage(name, ERROR, time.perf_counter() - start, str(exc))]
        try:
            with strict_truth():
                kernel = alloc.kernel(Z3Algebra(), setup.config, opts.variant)
                terms = _kernel_run(kernel, decisions)
        except Exception as exc:
            lines = str(exc).strip().splitlines()
            why = f"{type(exc).__name__}{': ' + lines[0] if lines else ''}"
            detail = (
                f"the kernel does not run on Z3 terms ({why[:160]}); the pool proof searches "
                "its exact runs instead"
            )
            return [
                *stages,
                Stage(name, SKIPPED, time.perf_counter() - start, detail, data={"symbolic": False}),
            ]
        if exact != terms:
            slot = next(t for t, (a, b) in enumerate(zip(exact, terms, strict=True), 1) if a != b)
            return [
                *stages,
                Stage(
                    name,
                    FAILED,
                    time.perf_counter() - start,
                    f"on Z3 terms the population kernel computes something else than on exact "
                    f"rationals at slot {slot}: the pool proof would not be about the code "
                    "that runs",
                    data={**_json(classes, decisions), "symbolic": False},
                ),
            ]
    stages.append(
        Stage(
            name,
            PASSED,
            time.perf_counter() - start,
            f"Z3 terms agree with exact runs on {len(cases)} random populations",
            data={"symbolic": True},
        )
    )
    return stages


def _json(classes: Sequence[ClassCount], decisions: Sequence[bool]) -> dict[str, Any]:
    return {
        "input": {
            "classes": [{"requirement": r.describe(), "users": k} for r, k in classes],
            "decisions": ",".join("1" if d else "0" for d in decisions),
        }
    }


# ---------------------------------------------------------------------------- proof


def _replayed(
    target: str, opts: Any, population: Population, decisions: Sequence[bool]
) -> Counterexample | None:
    trace = trace_population(target, population, decisions, variant=opts.variant, seed=opts.seed)
    if trace.ok:
        return None
    return population_counterexample(target, opts.variant, opts.seed, population, trace)


def _prove(
    target: str, alloc: PopulationAllocator, builtin: bool, symbolic: bool, opts: Any
) -> Stage:
    """`wevent.proofs.population.prove_population` over the gate's scope (a third-party allocator: the
    pool theorem on its own setup and kernel; a kernel that does not run on Z3 terms, or
    computes something else on them, by the exhaustive search over its exact runs)."""
    start = time.perf_counter()
    try:
        result = guarded(
            "the population kernel",
            partial(
                prove_population,
                target,
                variant=opts.variant,
                w_max=opts.w_max,
                classes=opts.classes,
                horizon=opts.horizon or None,
                timeout_ms=opts.timeout * 1000,
                allocator=None if builtin else alloc,
                method="auto" if symbolic else "explicit",
            ),
        )
    except TargetRaised as exc:
        return Stage("proof", ERROR, time.perf_counter() - start, str(exc))
    seconds = time.perf_counter() - start
    data: dict[str, Any] = {"proof": result}
    theorems = result["theorems"]
    what = "; ".join(
        f"{th['theorem']} {th['result']}"
        + (f" ({th['cases']} cases: {population_scope_text(th['scope'])})" if "cases" in th else "")
        + (
            f" (n <= {th['scope']['n'][1]}, w <= {th['scope']['w'][1]})"
            if th["theorem"] == "ops-split"
            else ""
        )
        for th in theorems
    )
    if result["result"] == "proved":
        return Stage("proof", PROVED, seconds, what, data=data)
    last_theorem = theorems[-1] if theorems else {}
    if last_theorem.get("theorem") == "user-windows" and last_theorem.get("counterexample"):
        # replayed on the gate's own pool seeds (the proof replays from seed 0)
        return _window_refutation(target, opts, last_theorem["counterexample"], seconds, data)
    if result["result"] != "counterexample":
        reasons = [th["reason"] for th in theorems if th.get("reason")]
        why = reasons[0] if reasons else f"Z3 undecided: {what}"
        return Stage("proof", UNKNOWN, seconds, why, data=data)
    cex: Counterexample | None = None
    last = theorems[-1]
    if last["theorem"] == "ops-split":
        detail = "the OPS split does not cover every report a window can hold: " + ", ".join(
            f"{k}={v}" for k, v in last["counterexample"].items()
        )
        replay = result.get("replay")
        if replay is not None:
            users = {
                r["user"]: Fixed(int(r["w"]), Budget(r["epsilon"])) for r in replay["requirements"]
            }
            cex = _replayed(target, opts, Population(users), [bool(d) for d in replay["decisions"]])
    else:
        windows = tuple(last["scope"]["windows"])
        counts = even_counts(windows, last["scope"]["users"])
        population = population_of([(Fixed(w, Budget(1)), counts[w]) for w in windows])
        detail = (
            f"windows {windows}, {last['scope']['users']} users: decisions "
            f"{','.join(str(d) for d in last['decisions'])} ask the pool for more users than it "
            f"holds at slot {last['slot']}"
        )
        cex = _replayed(target, opts, population, [bool(d) for d in last["decisions"]])
    if cex is None:  # no refutation without a replay
        return Stage(
            "proof",
            UNKNOWN,
            seconds,
            f"{detail}; not refuted: the runtime trace does not fail on it (the sound "
            "variant's cap binds)",
            data=data,
        )
    if not cex.replays():
        data["replays"] = False
        return Stage(
            "proof",
            VERIFIER_ERROR,
            seconds,
            f"{detail}; its counterexample ({cex.failure.describe()}) does not replay through "
            f"`wevent trace`: a bug in wevent, not a verdict; replay: {cex.command()}",
            data=data,
        )
    data["replays"] = True
    detail = f"{detail}; replayed: {cex.failure.describe()}"
    return Stage("proof", FAILED, seconds, detail, counterexample=cex, data=data)


def _window_refutation(
    target: str, opts: Any, bad: dict[str, Any], seconds: float, data: dict[str, Any]
) -> Stage:
    """The user-window theorem failed for one setup: a class's users may report more often in
    one window than their budget allows. Refuted only on a replay: every slot publishing, on
    the gate's pool seed and the next 31, until the guard refuses a drawn user; a setup the
    pool never actually exploits is left unknown."""
    windows = [int(w) for w in bad["windows"]]
    budgets = [F(b) for b in bad["budgets"]]
    classes = [
        (Fixed(w, Budget(e)), k) for w, e, k in zip(windows, budgets, bad["counts"], strict=True)
    ]
    population = population_of(classes)
    detail = (
        f"windows {tuple(windows)}, {sum(bad['counts'])} users: class {bad['class'] + 1} "
        f"(w={bad.get('w')}, eps={bad.get('epsilon')}) spends {bad.get('per_report')} per report "
        f"and its users come back after R={bad.get('recycle')} slots, so a window can hold "
        f"{bad.get('reports')} reports ({bad.get('spent')})"
    )
    decisions = [True] * (4 * max(windows) + 2)
    for seed in range(opts.seed, opts.seed + 32):
        trace = trace_population(target, population, decisions, variant=opts.variant, seed=seed)
        if trace.refusal is None:
            continue
        cex = population_counterexample(target, opts.variant, seed, population, trace)
        replays = cex.replays()
        data["replays"] = replays
        detail = f"{detail}; replayed (pool seed {seed}): {cex.failure.describe()}"
        if replays:
            return Stage("proof", FAILED, seconds, detail, counterexample=cex, data=data)
    return Stage(
        "proof",
        UNKNOWN,
        seconds,
        f"{detail}; no run with every slot publishing on 32 pool seeds overspends a drawn user, "
        "so it is not refuted",
        data=data,
    )


# ---------------------------------------------------------------------------- end to end


def _end_to_end(target: str, alloc: PopulationAllocator, builtin: bool, opts: Any) -> Stage:
    """``e2e_runs`` runs of `run_mechanism` on synthetic streams (binary, 001 Section 6.1)."""
    name = "end-to-end"
    start = time.perf_counter()
    rng = random.Random(f"{opts.seed}:{name}")
    published = charges = skipped = 0
    for run in range(opts.e2e_runs):
        classes, _ = _random_case(rng, opts.classes, opts.w_max, 1)
        classes = [(req, 4 * k) for req, k in classes]  # more users: the data path's histograms
        try:
            served = _usable(target, alloc, classes, opts.variant)
        except TargetRaised as exc:
            return Stage(name, ERROR, time.perf_counter() - start, str(exc))
        if served is None:
            skipped += 1
            continue
        classes = served
        population = population_of(classes)
        stream = SyntheticStream(
            SYNTHETIC_KINDS[run % len(SYNTHETIC_KINDS)],
            opts.e2e_slots,
            [c.count for c in population.classes],
            opts.seed + run,
        )
        try:
            summary = guarded(
                "the population allocator",
                partial(
                    run_mechanism,
                    target,
                    population,
                    stream,
                    slots=opts.e2e_slots,
                    seed=opts.seed + run,
                    variant=opts.variant,
                    population_allocator=None if builtin else alloc,
                ),
            )
        except TargetRaised as exc:
            return Stage(name, ERROR, time.perf_counter() - start, str(exc))
        if summary.refusal is not None:
            failed = len(summary.records) + 1
            message = str(summary.refusal)
            if not message.startswith("slot "):
                message = f"slot {failed}: {message}"
            detail = f"run {run + 1} ({len(population)} users): {message}"
            before = [r.status == "published" for r in summary.records]
            probe = PopulationProbe(target, opts.variant, opts.seed)
            for last in (False, True):
                if probe((classes, [*before, last])):
                    stage = _found(
                        name, target, opts, probe, (classes, [*before, last]), "the run", start
                    )
                    stage.detail = f"{detail}; as a trace: {stage.detail}"
                    return stage
            return Stage(
                name,
                FAILED,
                time.perf_counter() - start,
                detail + " (`wevent trace` with the pool seed does not replay it)",
            )
        assert summary.ledger is not None
        disagreement = checker_disagreement(name, summary.ledger, population, run, start)
        if disagreement is not None:  # pragma: no cover - they agree (tested)
            return disagreement
        published += summary.count("published")
        charges += summary.charges
    runs = opts.e2e_runs - skipped
    note = f" ({skipped} populations skipped: the setup refused them)" if skipped else ""
    if runs == 0:
        return Stage(
            name,
            SKIPPED,
            time.perf_counter() - start,
            f"the allocator's setup refused every population drawn{note}",
            data={"runs": 0, "skipped": skipped},
        )
    if published == 0:
        return never_published(name, start, runs, opts.e2e_slots, note, {"skipped": skipped})
    return Stage(
        name,
        PASSED,
        time.perf_counter() - start,
        f"{runs} runs x {opts.e2e_slots} slots on synthetic streams{note} ({published} "
        f"publications, {charges} charges): every drawn user accepted by the guard, ledgers "
        "compliant",
        data={
            "runs": runs,
            "slots": opts.e2e_slots,
            "publications": published,
            "skipped": skipped,
        },
    )


# ---------------------------------------------------------------------------- the gate


def _symbolic(report: GateReport) -> bool:
    """The conformance stage did not find the kernel failing on Z3 terms (or did not run)."""
    return all(
        s.data.get("symbolic", True) for s in report.stages if s.name == "conformance/symbolic"
    )


def run_population_gate(
    target: str, opts: Any, *, save_requirements: Path | None = None
) -> GateReport:
    """Every stage of the gate on the population allocator ``target`` (a built-in of
    `wevent.mechanisms.allocators.local.POPULATION` or a third-party `PopulationAllocator`); ``opts``
    is a `wevent.gate.GateOptions`."""
    from wevent.gate.report import new_report

    start = time.perf_counter()
    report = new_report(target, opts)
    try:
        alloc = resolve_population(target)
    except AllocatorError as exc:
        alloc, report.error = None, str(exc)
    builtin = alloc is not None and alloc is POPULATION_BUILTIN.get(target)
    if alloc is not None:
        report.allocator = {
            "name": alloc.name,
            "requirement": "fixed",
            "scaling": "none",
            "symbolic": True,
            "divides": False,
            "variants": list(alloc.variants),
            "builtin": builtin,
            "population": True,
        }
    if report.error is not None:
        pass
    elif alloc is None:
        report.error = f"{target} is not a population allocator"
    elif opts.arithmetic != "exact":
        report.error = (
            f"{target} counts users exactly: --arithmetic float applies to the central "
            "absorption allocators only"
        )
    elif opts.variant not in alloc.variants:
        report.error = f"{target} has no variant {opts.variant!r} ({', '.join(alloc.variants)})"
    if report.error is not None or alloc is None:
        report.seconds = time.perf_counter() - start
        return report
    found = alloc
    steps: list[tuple[str, Callable[[], list[Stage]]]] = [
        ("conformance", lambda: _conformance(target, found, opts)),
        ("proof", lambda: [_prove(target, found, builtin, _symbolic(report), opts)]),
        ("search", lambda: [_run_search(target, opts)]),
        ("end-to-end", lambda: [_end_to_end(target, found, builtin, opts)]),
    ]
    for stage_name, step in steps:
        if stage_name not in opts.stages:
            continue
        try:
            stages = step()
        except InputError as exc:  # pragma: no cover - the inputs are valid by construction
            stages = [Stage(stage_name, ERROR, 0.0, str(exc))]
        report.stages += stages
        if any(s.status == ERROR for s in stages):
            break
    report.seconds = time.perf_counter() - start
    cex = report.counterexample
    if cex is not None and save_requirements is not None:
        write_requirements(cex.population, save_requirements)
        report.requirements_path = str(save_requirements)
    return report
