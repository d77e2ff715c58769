"""Window theorems of the central allocators (`wevent.proofs.central`): proofs, refutations, replays.

* Every sound kernel is proved: fixed kernels for w <= 4 (w <= 5 and w <= 6 with `make slow`), 1..2 classes,
  horizon 3 w (bounded) and for every horizon by k-induction; dynamic kernels bounded for w <= 2 with declarations at
  slots 1 and 2 (for every horizon: tests/test_dynamic_proofs.py).
* Every known-unsound combination is refuted, and the counterexample replays through the kernel
  and the runtime guard to the same failure at the same slot.
* The engine can fail: mutated kernels (an off-by-one window, an overspend) are refuted.
* The normalizations the proofs rely on hold: scale invariance on random traces.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.mechanisms.allocators import make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import (
    ClassReq,
    Decl,
    DynamicClass,
    FixedClass,
    scaled_classes,
)
from wevent.proofs.central import ALLOCATORS, Allocator, Scope, prove_allocator
from wevent.proofs.explicit import explore
from wevent.proofs.symbolic import fixed_windows

FIXED = ("uniform", "sample", "bd", "ba", "pbd", "pba")
F = Fraction


# Windows <= 4 in the default suite (beside the every-horizon proof at w <= 4 below); w <= 5
# (ba 45 s on 2026-11-27's loaded run) and w <= 6 (horizon 18) are `make slow`, so that
# `make test` stays near 10 minutes on 2 cores.
@pytest.mark.heavy
@pytest.mark.parametrize(
    "w_max", [4, pytest.param(5, marks=pytest.mark.slow), pytest.param(6, marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("mechanism", FIXED)
def test_sound_fixed_kernels_proved_bounded(mechanism: str, w_max: int) -> None:
    proof = prove_allocator(mechanism, scope=Scope(classes=2, w_max=w_max))
    assert proof.status == "proved", proof.reason
    assert proof.scope["horizon"] == 3 * w_max and proof.scope["w"] == f"1..{w_max}"
    # 1 + 2 classes: w_max + C(w_max + 1, 2) window shapes (global scaling: one case per
    # smallest class)
    pairs = w_max * (w_max + 1) // 2
    scaling = 2 if ALLOCATORS[mechanism].scaling == "global" else 1
    assert proof.cases == w_max + pairs * scaling


@pytest.mark.parametrize("mechanism", FIXED)
def test_sound_fixed_kernels_proved_for_every_horizon(mechanism: str) -> None:
    proof = prove_allocator(mechanism, scope=Scope(classes=2, w_max=4), unbounded=True)
    assert proof.status == "proved", proof.reason
    assert proof.method == "k-induction" and proof.scope["horizon"] == "unbounded"


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", FIXED)
def test_sound_fixed_kernels_proved_for_every_horizon_w6(mechanism: str) -> None:
    proof = prove_allocator(mechanism, scope=Scope(classes=2, w_max=6), unbounded=True)
    assert proof.status == "proved", proof.reason


@pytest.mark.parametrize("mechanism", ["bd", "ba", "pba"])
def test_published_fixed_kernels_bounded_but_not_inductive(mechanism: str) -> None:
    """In exact arithmetic the pseudo-code keeps the windows (bounded proof), but the invariant
    is not inductive for it: k-induction must say unknown, never proved."""
    assert prove_allocator(mechanism, variant="published", scope=Scope(2, 3)).status == "proved"
    step = prove_allocator(mechanism, variant="published", scope=Scope(2, 3), unbounded=True)
    assert step.status == "unknown" and "not inductive" in step.reason


@pytest.mark.parametrize(
    "mechanism", ["dpbd", pytest.param("dpba", marks=pytest.mark.slow)]
)  # the induction of tests/test_dynamic_proofs.py covers both for every horizon, w <= 4
def test_sound_dynamic_kernels_proved(mechanism: str) -> None:
    proof = prove_allocator(mechanism, scope=Scope(classes=1, w_max=2, decl_slots=(1, 2)))
    assert proof.status == "proved", proof.reason


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["dpbd", "dpba"])
def test_sound_dynamic_kernels_proved_two_classes(mechanism: str) -> None:
    scope = Scope(classes=2, w_max=2, decl_slots=(1, 3))
    assert prove_allocator(mechanism, scope=scope).status == "proved"


@pytest.mark.parametrize("mechanism", ["bd", "pbd"])
def test_full_doubles_proved_on_grid_where_no_window_spends_all(mechanism: str) -> None:
    """In doubles end to end, budget distribution never spends a whole eps in one window (half
    goes to dissimilarity, split w ways; publications take half of what is left): every
    population of the decimal grid holds, checked exactly on every double spent."""
    proof = prove_allocator(mechanism, arithmetic="float", scope=Scope(classes=1, w_max=3))
    assert proof.status == "proved" and proof.method == "exhaustive"


@pytest.mark.parametrize("mechanism", ["ba", "pba", "uniform"])
def test_full_doubles_refuted_where_a_window_spends_all(mechanism: str) -> None:
    """Where a window can spend its whole eps, the double nearest a decimal eps (0.1 parses to
    0.1000000000000000055...) is spent: over the exact requirement, and replayed."""
    proof = prove_allocator(mechanism, arithmetic="float", scope=Scope(classes=1, w_max=3))
    cex = proof.counterexample
    assert proof.status == "counterexample" and cex is not None and cex.replays()
    assert 0 < cex.failure.spent - cex.failure.bound < F(1, 10**15)


UNSOUND = [
    ("dpbd", "published", "exact", Scope(classes=1, w_max=2)),
    ("dpba", "published", "exact", Scope(classes=1, w_max=2)),
    ("ba", "published", "float", Scope(classes=1, w_max=3)),
    ("pba", "published", "float", Scope(classes=1, w_max=3)),
]


@pytest.mark.parametrize(("mechanism", "variant", "arithmetic", "scope"), UNSOUND)
def test_unsound_combinations_refuted_and_replayed(
    mechanism: str, variant: str, arithmetic: str, scope: Scope
) -> None:
    proof = prove_allocator(mechanism, variant=variant, arithmetic=arithmetic, scope=scope)
    assert proof.status == "counterexample"
    cex = proof.counterexample
    assert cex is not None
    assert len(cex.decisions) == cex.failure.slot  # decisions up to the failing slot
    result = cex.replay()
    assert result.failed_slot == cex.failure.slot
    if cex.failure.kind == "negative":
        assert result.negative is not None
    else:
        assert result.refusal is not None
        assert cex.failure.spent > cex.failure.bound
    # The same population and decisions pass the sound kernel in exact arithmetic.
    from wevent.verifier.tracing import trace_with_guard

    assert trace_with_guard(mechanism, cex.population, list(cex.decisions)).ok
    data = proof.to_json()
    assert data["result"] == "counterexample"
    assert {"requirements", "decisions", "violation"} <= set(data)


def test_float_counterexample_is_the_known_one() -> None:
    """BA in doubles: eps = 0.1 and w = 1, one publication spends the double nearest 0.1."""
    proof = prove_allocator("ba", variant="published", arithmetic="float", scope=Scope(1, 3))
    cex = proof.counterexample
    assert cex is not None
    assert cex.requirements == (("u1", Fixed(1, Budget("0.1"))),)
    assert cex.decision_text == "1"
    assert cex.failure.kind == "fixed" and (cex.failure.first, cex.failure.last) == (1, 1)
    assert cex.failure.spent == F(0.1) and cex.failure.bound == F(1, 10)


def test_dynamic_counterexample_feasible_when_declared_is_a_window_violation() -> None:
    proof = prove_allocator("dpbd", variant="published", scope=Scope(1, 2))
    cex = proof.counterexample
    assert cex is not None and cex.failure.kind == "backward"
    assert cex.replays()


# ---------------------------------------------------------------------------- mutations


def _mutant(name: str, factory: Any) -> Allocator:
    base = ALLOCATORS["pbd"]
    return Allocator(name, "fixed", base.scaling, "mutant", factory)


def _off_by_one(alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    """PBD computing its windows one slot too short (w - 1)."""
    short = [FixedClass(max(c.w - 1, 1), c.eps) for c in classes if isinstance(c, FixedClass)]
    return make_kernel("pbd", alg, short, variant)


def _overspend(alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    """Uniform with budgets 1% above the requirement (its windows sit exactly at the bound)."""
    more = [
        FixedClass(c.w, alg.scale(c.eps, F(101, 100))) for c in classes if isinstance(c, FixedClass)
    ]
    return make_kernel("uniform", alg, more, variant)


@pytest.mark.parametrize("factory", [_off_by_one, _overspend])
def test_engine_refutes_mutated_kernels(factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ALLOCATORS, "mutant", _mutant("mutant", factory))
    proof = prove_allocator("mutant", scope=Scope(classes=1, w_max=3))
    assert proof.status == "counterexample"
    cex = proof.counterexample
    assert cex is not None
    # The mutant really fails there: rerun it exactly and sum the window.
    ((_user, req),) = cex.requirements
    assert isinstance(req, Fixed)
    kernel = factory(ExactAlgebra(), [FixedClass(req.w, Fraction(req.eps))], "sound")
    trace = run_trace(kernel, list(cex.decisions))
    spends = [s.dissimilarity[0] + s.publication[0] for s in trace]
    f = cex.failure
    assert sum(spends[f.first - 1 : f.slot]) == f.spent > req.eps
    # The explicit search finds a failure at the same first slot.
    out = explore(kernel, fixed_windows(0, req.w, req.eps, 9), 9, req.w)
    assert out.status == "counterexample" and out.slot == f.slot


# ---------------------------------------------------------------------------- normalization


def _random_fixed(rng: random.Random, k: int) -> list[ClassReq[Fraction]]:
    return [
        FixedClass(rng.randint(1, 5), F(rng.randint(1, 20), rng.choice([1, 4, 10])))
        for _ in range(k)
    ]


def _random_dynamic(rng: random.Random, k: int) -> list[ClassReq[Fraction]]:
    out: list[ClassReq[Fraction]] = []
    for _ in range(k):
        slots = sorted(rng.sample(range(1, 8), rng.randint(1, 3)))
        out.append(
            DynamicClass(
                tuple(
                    Decl(
                        s,
                        rng.randint(1, 4),
                        F(rng.randint(1, 9), 4),
                        rng.randint(1, 4),
                        F(rng.randint(1, 9), 4),
                    )
                    for s in slots
                )
            )
        )
    return out


@pytest.mark.parametrize("mechanism", list(ALLOCATORS))
def test_scale_invariance(mechanism: str) -> None:
    """Multiplying every budget by k multiplies every allocation by k with the same statuses;
    for per-class kernels, scaling one class scales only that class's allocations."""
    alloc = ALLOCATORS[mechanism]
    rng = random.Random(mechanism)
    for _ in range(40):
        k = rng.randint(1, 3)
        classes = (_random_dynamic if alloc.requirement == "dynamic" else _random_fixed)(rng, k)
        decisions = [rng.random() < 0.6 for _ in range(14)]
        base = run_trace(make_kernel(mechanism, ExactAlgebra(), classes), decisions)
        if alloc.scaling == "per-class":
            factors = [F(rng.randint(1, 9), rng.randint(1, 9)) for _ in classes]
        else:
            factors = [F(rng.randint(1, 9), rng.randint(1, 9))] * k
        scaled = run_trace(
            make_kernel(mechanism, ExactAlgebra(), scaled_classes(classes, factors)), decisions
        )
        for a, b in zip(base, scaled, strict=True):
            assert a.status == b.status
            for i, f in enumerate(factors):
                assert b.dissimilarity[i] == a.dissimilarity[i] * f
                assert b.candidate[i] == a.candidate[i] * f


def test_population_of_counterexample_uses_one_user_per_class() -> None:
    proof = prove_allocator("pba", variant="published", arithmetic="float", scope=Scope(2, 3))
    cex = proof.counterexample
    assert cex is not None
    pop = cex.population
    assert isinstance(pop, Population) and len(pop.classes) == len(cex.requirements)


def test_certificates_are_well_formed(tmp_path: Path) -> None:
    """Every recorded certificate names its allocator, scope, solver, time and result; a
    refutation carries its counterexample, which still replays."""
    import json

    from wevent.accounting.formats import read_requirements
    from wevent.proofs.certify import recorded
    from wevent.verifier.tracing import parse_decisions, trace_with_guard

    paths = sorted(
        p
        for p in Path("wevent/proofs/certificates").glob("*.json")
        if not p.name.startswith("population-")
    )  # population certificates: tests/test_population_proofs.py
    assert paths
    assert sorted(recorded()) == sorted(p.resolve() for p in paths)  # the README table's rows
    for path in paths:
        data = json.loads(path.read_text())
        assert data["allocator"] in ALLOCATORS
        if data["variant"] == "sound" and data["arithmetic"] == "exact":
            assert data["result"] == "proved", path.name
        assert data["result"] in ("proved", "counterexample", "unknown")
        assert data["solver"].startswith("z3 ") and data["seconds"] >= 0
        assert {"classes", "w", "horizon", "budgets"} <= set(data["scope"])
        if data["result"] == "counterexample":
            csv = tmp_path / "requirements.csv"
            csv.write_text(data["requirements_csv"])
            pop = read_requirements(csv)
            decisions = parse_decisions(",".join(str(d) for d in data["decisions"]))
            result = trace_with_guard(
                data["allocator"],
                pop,
                decisions,
                variant=data["variant"],
                arithmetic=data["arithmetic"],
            )
            assert result.failed_slot == data["violation"]["slot"]


LOCAL_BUDGET = {"lbu": "uniform", "lsp": "sample", "lbd": "bd", "lba": "ba", "plbu": "plbu"}


@pytest.mark.parametrize("mechanism", list(LOCAL_BUDGET))
def test_local_budget_division_proved_for_every_horizon(mechanism: str) -> None:
    """The local budget-division allocators spend through the fixed kernels: the window theorem
    holds for every horizon (k-induction) on the kernel they run."""
    proof = prove_allocator(mechanism, scope=Scope(classes=2, w_max=4), unbounded=True)
    assert proof.status == "proved", proof.reason


def test_personalized_local_uniform_proved_bounded_to_six() -> None:
    """plbu has its own kernel (the others are their central namesakes', test below): the
    deeper scope, w <= 6, 2 classes, horizon 18."""
    proof = prove_allocator("plbu", scope=Scope(classes=2, w_max=6))
    assert proof.status == "proved", proof.reason
    assert proof.scope["horizon"] == 18 and proof.scope["w"] == "1..6"


@pytest.mark.parametrize(("local", "central"), [(k, v) for k, v in LOCAL_BUDGET.items() if k != v])
def test_local_budget_kernels_spend_like_their_central_namesakes(local: str, central: str) -> None:
    rng = random.Random(5)
    alg = ExactAlgebra()
    for _ in range(50):
        classes: list[ClassReq[Fraction]] = [
            FixedClass(rng.randint(1, 6), F(rng.randint(1, 9), rng.randint(1, 9)))
            for _ in range(rng.randint(1, 3))
        ]
        decisions = [rng.random() < 0.5 for _ in range(20)]
        a = run_trace(make_kernel(local, alg, classes), decisions)
        b = run_trace(make_kernel(central, alg, classes), decisions)
        assert a == b
