"""dpba and dpbd ``--variant du-code`` (`wevent.mechanisms.allocators.dynamic_du_code`) against the
independent restatement of the same Java step, `analysis/du_code_dynamic.CodeRun` (exact
arithmetic, the largest nullification bound over users, the one the runners construct).

* The cross-check: on random small populations (1-3 classes, fixed or dynamic with one or two
  declarations) and random decisions, the kernel's per-slot, per-class dissimilarity budget,
  candidate, spend and nullification equal CodeRun's, up to a published slot with a negative
  candidate, which both report at the same slot.
* Pinned: 001 Table 3 slot 1 plans 0.5, 0.3, 0.4; the peers.md counterexample spends 1.5 in
  the backward window [2, 3] (`wevent trace dpba --variant du-code`).
* Negative controls: a kernel with one rule mutated (no ceil on the border, the element's clock
  as the paper's, a skipped candidate recorded as 0, a nullified slot recorded, a candidate
  clipped at 0) fails the cross-check: hypothesis finds a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

import wevent
from tests.analysis_import import analysis_module
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.cli import cli
from wevent.mechanisms.allocators import dynamic_du_code, make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import Algebra, ExactAlgebra, vmax
from wevent.mechanisms.allocators.dynamic_du_code import DuCodeDynamicKernel, DuCodeDynamicState
from wevent.mechanisms.allocators.kernel import Kernel, Plan, classes_of
from wevent.verifier.tracing import trace_with_guard

ROOT = Path(__file__).resolve().parent.parent
ANALYSIS = ROOT / "analysis"
TABLE3 = ROOT / "wevent" / "examples" / "001-table3.csv"
F = Fraction

CEX = "user,slot,w_back,eps_back,w_fwd,eps_fwd\nu1,1,1,2,2,2\nu1,2,2,1,1,2\n"


@pytest.fixture(scope="module")
def code() -> Iterator[ModuleType]:
    with analysis_module("du_code_dynamic") as module:
        yield module


# ---------------------------------------------------------------------- inputs

BUDGETS = tuple(wevent.Budget(x) for x in ("1", "2", "0.5", "0.3"))
_window = st.integers(1, 3)
# Forward windows up to 6 with backward ones up to 3: the kept record history must cover the
# longer direction (the runners pair w_B = 1 with w_F of 40 to 200).
_forward = st.integers(1, 6)
_budget = st.sampled_from(BUDGETS)


def _requirement(draw: st.DrawFn) -> Requirement:
    if draw(st.booleans()):
        return Fixed(draw(_window), draw(_budget))
    decls = [Declaration(1, draw(_window), draw(_budget), draw(_forward), draw(_budget))]
    if draw(st.booleans()):
        slot = draw(st.integers(2, 6))
        decls.append(Declaration(slot, draw(_window), draw(_budget), draw(_forward), draw(_budget)))
    return Dynamic(tuple(decls))


@dataclass(frozen=True)
class Case:
    mechanism: str
    requirements: tuple[Requirement, ...]
    decisions: tuple[bool, ...]

    @property
    def population(self) -> wevent.Population:
        return wevent.Population({f"u{i + 1}": r for i, r in enumerate(self.requirements)})


@st.composite
def cases(draw: st.DrawFn) -> Case:
    mechanism = draw(st.sampled_from(("dpba", "dpbd")))
    n = draw(st.integers(1, 3))
    reqs: list[Requirement] = []
    for _ in range(n):
        req = _requirement(draw)
        if req not in reqs:  # equal requirements are one class
            reqs.append(req)
    decisions = draw(st.lists(st.booleans(), min_size=1, max_size=12))
    return Case(mechanism, tuple(reqs), tuple(decisions))


# ---------------------------------------------------------------------- the comparison

KernelMaker = Callable[[str, Algebra[Any, Any], list[Any]], Kernel[Fraction, bool, Any]]


def _builtin(name: str, alg: Algebra[Any, Any], classes: list[Any]) -> Kernel[Fraction, bool, Any]:
    return make_kernel(name, alg, classes, "du-code")


def mismatch(code: ModuleType, case: Case, maker: KernelMaker = _builtin) -> str | None:
    """Where the kernel and CodeRun part on ``case`` (None if nowhere)."""
    pop = case.population
    kernel = maker(case.mechanism, ExactAlgebra(), classes_of(pop, case.mechanism))
    # one user per class (the requirements are distinct): class index of each user
    index = {u: c.index for c in pop.classes for u in c.members}
    run = code.CodeRun(pop, case.mechanism, Fraction, "max")
    trace = run_trace(kernel, case.decisions)
    for k_slot, decision in zip(trace, case.decisions, strict=True):
        c_slot = run.step(decision)
        t = c_slot.slot
        per_class = [index[u] for u in pop.users]
        dis = tuple(k_slot.dissimilarity[i] for i in per_class)
        if dis != c_slot.dissimilarity:
            return f"slot {t}: dissimilarity {dis} != code {c_slot.dissimilarity}"
        k_negative = k_slot.status == "published" and min(k_slot.publication) < 0
        if (c_slot.status == "negative") != k_negative:
            return f"slot {t}: negative published budget: kernel {k_negative}, code {c_slot.status}"
        if k_negative:
            return None  # both stop here
        if k_slot.status != c_slot.status:
            return f"slot {t}: status {k_slot.status} != code {c_slot.status}"
        if c_slot.status != "nullified":
            cand = tuple(k_slot.candidate[i] for i in per_class)
            if cand != c_slot.candidate:
                return f"slot {t}: candidate {cand} != code {c_slot.candidate}"
        spent = tuple(k_slot.publication[i] for i in per_class)
        if spent != c_slot.publication:
            return f"slot {t}: publication {spent} != code {c_slot.publication}"
    return None


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_kernel_spends_what_the_code_spends(code: ModuleType, case: Case) -> None:
    assert mismatch(code, case) is None


def test_both_report_a_negative_published_budget_at_the_same_slot(code: ModuleType) -> None:
    """The search's negative slot (docs/peers.md): B:(1, 2) F:(1, 2), then B:(2, 1) F:(1, 1);
    skip, publish: slot 1's skipped candidate 1 is recorded, slot 2's cap is 1/2 - 1."""
    req = _dyn((1, 1, "2", 1, "2"), (2, 2, "1", 1, "1"))
    case = Case("dpba", (req,), (False, True))
    assert mismatch(code, case) is None
    result = trace_with_guard("dpba", case.population, case.decisions, variant="du-code")
    assert result.failed_slot == 2 and result.negative is not None
    assert "negative publication budget -0.5" in result.negative
    assert code.run(case.population, case.decisions)[-1].status == "negative"


# ---------------------------------------------------------------------- pinned examples


def test_table3_slot1_plans_the_codes_budgets() -> None:
    pop = wevent.read_requirements(TABLE3)
    trace = trace_with_guard("dpba", pop, [True], variant="du-code")
    assert trace.ok
    assert trace.slots[0].publication == (F(1, 2), F(3, 10), F(2, 5))
    assert trace.slots[0].dissimilarity == (F(3, 10), F(3, 10), F(1, 5))


def test_peers_counterexample_spends_one_and_a_half_in_the_backward_window(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cex.csv"
    path.write_text(CEX, encoding="utf-8")
    args = ["trace", "dpba", "-r", str(path), "--decisions", "0,0,1", "--variant", "du-code"]
    result = CliRunner().invoke(cli, args)
    out = result.output
    assert result.exit_code == 1, out
    assert "slot 3: published  u1 dis=0.5 pub=1" in out
    assert "backward window [2, 3] already spent 0.5, asked 1, bound 1, excess 0.5" in out
    # the printed rules and the sound kernel stay within it on the same input (the control)
    pop = wevent.read_requirements(path)
    for variant in ("published", "sound"):
        assert trace_with_guard("dpba", pop, [False, False, True], variant=variant).ok


def test_dpbd_code_breaks_a_window_the_printed_rules_keep(code: ModuleType) -> None:
    """docs/peers.md: a declaration made at slot 3, empty before it, whose backward window the
    code's recorded candidates (skipped ones, a negative one) overfill; the printed rules and the
    sound kernel keep it. CodeRun spends the same."""
    req = _dyn((1, 2, "1", 4, "1"), (3, 3, "0.5", 4, "1.5"))
    case = Case("dpbd", (req,), (False, False, False, True, True))
    assert mismatch(code, case) is None
    result = trace_with_guard("dpbd", case.population, case.decisions, variant="du-code")
    assert result.failed_slot == 5 and result.refusal is not None
    assert "backward window [3, 5] already spent 0.375, asked 0.1875, bound 0.5" in str(
        result.refusal
    )
    for variant in ("published", "sound"):
        assert trace_with_guard("dpbd", case.population, case.decisions, variant=variant).ok


def test_variant_is_listed_and_refused_elsewhere() -> None:
    from wevent.mechanisms.allocators.registry import BUILTIN

    assert "du-code" in BUILTIN["dpba"].variants and "du-code" in BUILTIN["dpbd"].variants
    with pytest.raises(wevent.BudgetError, match="no variant 'du-code'"):
        make_kernel("uniform", ExactAlgebra(), classes_of(_one_fixed(), "uniform"), "du-code")


def _one_fixed() -> wevent.Population:
    return wevent.Population({"u1": Fixed(2, wevent.Budget(1))})


# ---------------------------------------------------------------------- negative controls


class _SkipRecordsZero(DuCodeDynamicKernel[Any, Any]):
    """Records a skipped slot's publication as 0 (001 Algorithm 5's rule, not the code's)."""

    def step(
        self, state: DuCodeDynamicState[Any], t: int, plan: Plan[Any, Any], published: Any
    ) -> Any:
        zero = self.alg.const(0)
        spent = tuple(self.alg.select(published, p, zero) for p in plan.publication)
        return super().step(state, t, replace(plan, publication=spent), published)


class _NullifiedRecords(DuCodeDynamicKernel[Any, Any]):
    """Records a nullified slot as if it were not."""

    def step(
        self, state: DuCodeDynamicState[Any], t: int, plan: Plan[Any, Any], published: Any
    ) -> Any:
        return super().step(state, t, replace(plan, nullified=self.alg.truth(False)), published)


class _ShortHistory(DuCodeDynamicKernel[Any, Any]):
    """Keeps records for the longest backward window only (the forward sums then stop short)."""

    def __init__(self, name: str, alg: Algebra[Any, Any], classes: Any) -> None:
        super().__init__(name, alg, classes)
        self._length = max(d.w_back for s in self._sched for d in s.decls)


class _ClipsAtZero(DuCodeDynamicKernel[Any, Any]):
    """Clips the candidate at zero (the code does not)."""

    def plan(self, state: DuCodeDynamicState[Any], t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        zero = self.alg.const(0)
        return replace(plan, publication=tuple(vmax(self.alg, p, zero) for p in plan.publication))


def _subclass(cls: type[DuCodeDynamicKernel[Any, Any]]) -> KernelMaker:
    def make(name: str, alg: Algebra[Any, Any], classes: list[Any]) -> Any:
        return cls(name, alg, classes)

    return make


_CEIL = dynamic_du_code._ceil
_LAST = dynamic_du_code._last
MUTANTS = (
    "no ceil",
    "paper's clock",
    "skipped recorded as 0",
    "nullified recorded",
    "clip at zero",
    "history of w_B only",
)


def _dyn(*rows: tuple[int, int, str, int, str]) -> Dynamic:
    return Dynamic(
        tuple(
            Declaration(s, wb, wevent.Budget(eb), wf, wevent.Budget(ef))
            for s, wb, eb, wf, ef in rows
        )
    )


# Per mutant, an input on which it parts from CodeRun (what `find` below meets first, shrunk).
WITNESSES: dict[str, Case] = {
    "no ceil": Case(
        "dpba",
        (_dyn((1, 1, "1", 2, "0.3"), (2, 3, "1", 3, "1")), _dyn((1, 1, "1", 1, "1"))),
        (False, False, False, False),
    ),
    "paper's clock": Case("dpba", (Fixed(2, wevent.Budget(1)),), (False,)),
    "skipped recorded as 0": Case("dpbd", (Fixed(2, wevent.Budget(1)),), (False, False)),
    "nullified recorded": Case(
        "dpba",
        (
            Fixed(1, wevent.Budget(1)),
            _dyn((1, 1, "1", 2, "2"), (2, 1, "1", 3, "1")),
            _dyn((1, 1, "1", 2, "1")),
        ),
        (False, False, False, False),
    ),
    "clip at zero": Case(
        "dpba",
        (Fixed(1, wevent.Budget(1)), _dyn((1, 1, "1", 1, "1"), (2, 2, "0.5", 1, "1"))),
        (False, False),
    ),
    # the runners' shape: B:(1, 1) F:(4, 1); slot 4's forward sum reaches three records back
    "history of w_B only": Case("dpbd", (_dyn((1, 1, "1", 4, "1")),), (True, True, True, True)),
}


def _mutated(mutant: str, monkeypatch: pytest.MonkeyPatch) -> KernelMaker:
    if mutant == "no ceil":
        monkeypatch.setattr(dynamic_du_code, "_ceil", lambda alg, x: x)
    elif mutant == "paper's clock":  # a fresh border at s - 1 (001 Algorithm 7 line 7)
        monkeypatch.setattr(
            dynamic_du_code, "_ceil", lambda alg, x: alg.add(_CEIL(alg, x), alg.const(1))
        )
    elif mutant == "skipped recorded as 0":
        return _subclass(_SkipRecordsZero)
    elif mutant == "nullified recorded":
        return _subclass(_NullifiedRecords)
    elif mutant == "clip at zero":
        return _subclass(_ClipsAtZero)
    elif mutant == "history of w_B only":  # sums what it kept, as a capped history does
        monkeypatch.setattr(
            dynamic_du_code, "_last", lambda alg, sums, n: _LAST(alg, sums, min(n, len(sums)))
        )
        return _subclass(_ShortHistory)
    return _builtin


@pytest.mark.parametrize("mutant", MUTANTS)
def test_cross_check_catches_a_mutated_rule(
    code: ModuleType, mutant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The witness agrees with the code on the kernel and parts from it on the mutant."""
    case = WITNESSES[mutant]
    assert mismatch(code, case) is None
    maker = _mutated(mutant, monkeypatch)
    assert mismatch(code, case, maker) is not None


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS)
def test_random_cross_check_finds_each_mutant(
    code: ModuleType, mutant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The property's own inputs find each mutant (no ceil: about 2,500 inputs, 25 s)."""
    maker = _mutated(mutant, monkeypatch)
    found = find(
        cases(),
        lambda case: mismatch(code, case, maker) is not None,
        settings=settings(
            max_examples=5000, database=None, derandomize=True, phases=[Phase.generate]
        ),
    )
    assert mismatch(code, found, maker) is not None
