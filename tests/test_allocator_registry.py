"""The one allocator registry: each family module declares its specs, the registry collects
them, and a name reaches its kernel through the registry (`wevent.mechanisms.allocators.registry`).

The digests pin every built-in's exact budgets on fixed inputs: they were computed with the
string dispatch the registry replaced (`make_kernel`'s chain of tests on names), so the same
digests show every allocator spends exactly as before.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from fractions import Fraction
from importlib.metadata import EntryPoint
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from wevent.errors import AllocatorError, InputError
from wevent.mechanisms.allocators import (
    CENTRAL,
    LOCAL,
    LOCAL_BUDGET,
    MECHANISMS,
    ORACLE_CHOICE,
    POPULATION,
    local,
    make_kernel,
    registry,
    run_trace,
)
from wevent.mechanisms.allocators.algebra import ExactAlgebra, FloatCountAlgebra
from wevent.mechanisms.allocators.api import AllocatorSpec, PopulationSpec
from wevent.mechanisms.allocators.dynamic import DynamicKernel
from wevent.mechanisms.allocators.fixed import FixedKernel
from wevent.mechanisms.allocators.kernel import ClassReq, Decl, DynamicClass, FixedClass
from wevent.mechanisms.allocators.population import PopulationKernel, population_setup

# The names and their order as the string dispatch listed them (the command line shows them so).
OLD_CENTRAL = ("uniform", "sample", "bd", "ba", "pbd", "pba", "dpbd", "dpba")
# streamdp-benchmark's mechanisms, listed after them (their families: wevent.mechanisms.streamdp,
# in the benchmark's order); each cites the benchmark and need not have a published variant.
STREAMDP = ("bd-shift", "ba-shift", "fast-w", "rescuedp", "pegasus", "dsat", "adapub")
OLD_LOCAL_BUDGET = ("lbu", "lsp", "lbd", "lba", "plbu")
OLD_POPULATION = (
    *("lpu", "lpd", "lpa", "plpd", "plpa", "plpd+", "plpa+"),
    *("plbd-rp", "plba-rp", "plbd-ops", "plba-ops"),
)
OLD_ORACLE_CHOICE = ("lbu", "lsp", "lbd", "lba", "lpu", "lpd", "lpa")
# The same names as the registry's families give them.
STREAMDP_CENTRAL = tuple(
    s.name
    for f in registry.FAMILIES
    if f.module.startswith("wevent.mechanisms.streamdp.")
    for s in f.specs
)

# sha256 of `_budget_traces(name)` / `_population_traces(name)`, computed at the commit before the
# registry (the string dispatch of `make_kernel` and `local.population_setup`).
BUDGET_DIGESTS = {
    "ba": "1830d4d963e6b8810d2a29c7c4d11471312b480692ed6928243298ffcc7fc9dd",
    "bd": "124e720f8051c6c5ea38b0a6eca3e8aa2b4c9e0e47a4d7ace9277348c5dee743",
    "dpba": "cc9ff165b332a36042e9792c4b93afe93e035ae50e73cc8d8db9df519f215829",
    "dpbd": "4f5dd968dc66ab2d6713b921b9429bef0533124ee7cd37c61d710e306e16dc83",
    "lba": "d9e743030c6f4453d395b330130a2e04d4912aa757529d16e12f833d93596042",
    "lbd": "124e720f8051c6c5ea38b0a6eca3e8aa2b4c9e0e47a4d7ace9277348c5dee743",
    "lbu": "9cf30e9283036cdb2669e72c7fbd7618a0685132386d39e0b63aef2aa3b586b5",
    "lsp": "5833ab4d2b197fc00651e6c665720f0116383f488a3d4e650f57695c479b32e4",
    "pba": "3d36a0fc721e59afa5d2d5ef92907017f7fa6c1b178d88d9766cca0ebc8ea7b7",
    "pbd": "29da7428a7a6aa447c5501905cca3503a25c0604c2ba8b96e72a55bc1e34f7c0",
    "plbu": "bb5a46127054f64bc07c0c12709c819fe4c2528fe2fe531911c01d77351d8c6f",
    "sample": "5833ab4d2b197fc00651e6c665720f0116383f488a3d4e650f57695c479b32e4",
    "uniform": "9cf30e9283036cdb2669e72c7fbd7618a0685132386d39e0b63aef2aa3b586b5",
}
POPULATION_DIGESTS = {
    "lpu": "474a07e68712d4f03ea99e1370dae69a7861d3bba69ebae158a1cb740b168f96",
    "lpd": "1cbfe00ab87f45a699be290fcaad2ad12816d48b1a80a4b5a8a0f510b5365b64",
    "lpa": "b3592c92bca9800dadfd88005c1148e2859f8ded7ec8a23b87ce28362277c2a4",
    "plpd": "17fd365b826926957dcfd1014f6360698d5b67c80440d1a6bec9f112f2130fc1",
    "plpa": "71f0818912810c8d24d79d26c2a4adf8271979dbdd352c04afbd495e8d0ab866",
    "plpd+": "08b5bb22b78ad10f46acb793cee2fb40f170a967588b74705bb865b0570e15e5",
    "plpa+": "4a12060a0c6cf6ecff31aeb7c5bab8a0d122cc7fe22addc0c0778b28ea472ee6",
    "plbd-rp": "b6ece787944aa86ef1e779936cf82feebc962460a8c2e7e28cc638e42b02b468",
    "plba-rp": "e7536010bd4e4f7138464b486d48b47e83eb2df0553658ae0ac99d9153675977",
    "plbd-ops": "41016afcbca970a147afdbf8a5875140900719a552889ea22e6571d265ca201f",
    "plba-ops": "f6d59f1ca9b6a039a6e91bf050091c8967d474bf44554cc6558b774c9a68e00a",
}


def _inputs() -> tuple[list[list[ClassReq[Fraction]]], list[list[bool]]]:
    rng = random.Random(20240611)
    classes: list[list[ClassReq[Fraction]]] = [
        [
            FixedClass(rng.randint(1, 6), Fraction(rng.randint(1, 9), rng.randint(1, 5)))
            for _ in range(rng.randint(1, 3))
        ]
        for _ in range(10)
    ]
    classes.append(
        [
            DynamicClass(
                (
                    Decl(1, 3, Fraction(1), 2, Fraction(1, 2)),
                    Decl(4, 2, Fraction(2), 3, Fraction(1)),
                )
            ),
            FixedClass(3, Fraction(3, 4)),
        ]
    )
    decisions = [[rng.random() < 0.5 for _ in range(24)] for _ in classes]
    return classes, decisions


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _budget_traces(name: str) -> list[Any]:
    out: list[Any] = []
    for classes, decisions in zip(*_inputs(), strict=True):
        if any(isinstance(c, DynamicClass) for c in classes) and not registry.takes_dynamic(name):
            continue
        for variant in ("sound", "published"):
            algebras: list[Any] = [ExactAlgebra()]
            if name in ("ba", "pba", "dpba"):
                algebras.append(FloatCountAlgebra())
            for alg in algebras:
                trace = run_trace(make_kernel(name, alg, classes, variant), decisions)
                out.append(
                    [
                        [
                            s.slot,
                            s.status,
                            [str(x) for x in s.dissimilarity],
                            [str(x) for x in s.publication],
                            [str(x) for x in s.candidate],
                        ]
                        for s in trace
                    ]
                )
    return out


def _population_traces(name: str) -> list[Any]:
    out: list[Any] = []
    all_classes, all_decisions = _inputs()
    for classes, decisions in list(zip(all_classes, all_decisions, strict=True))[:6]:
        counts = [40 + 7 * j for j in range(len(classes))]
        for variant in ("sound", "published"):
            try:
                setup = population_setup(name, classes, counts, 4, variant)
            except InputError as exc:
                out.append(f"{type(exc).__name__}: {exc}")
                continue
            kernel = PopulationKernel(name, ExactAlgebra(), setup.config, variant)
            state = kernel.start()
            plans = []
            for t in range(1, 20):
                draw = kernel.plan(state, t)
                plans.append(repr(draw))
                state = kernel.step(state, t, draw, decisions[t])
            out.append([repr(setup), plans])
    return out


# ---------------------------------------------------------------------------- the same budgets


@pytest.mark.parametrize("name", sorted(BUDGET_DIGESTS))
def test_every_budget_allocator_spends_exactly_as_before(name: str) -> None:
    assert _digest(_budget_traces(name)) == BUDGET_DIGESTS[name]


@pytest.mark.parametrize("name", OLD_POPULATION)
def test_every_population_allocator_draws_exactly_as_before(name: str) -> None:
    assert _digest(_population_traces(name)) == POPULATION_DIGESTS[name]


def test_the_digests_see_a_kernel_swapped_in_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: `make_kernel` reads the registry, and the digest tells BA from PBA."""
    monkeypatch.setitem(registry.BUILTIN, "pba", registry.BUILTIN["ba"])
    assert _digest(_budget_traces("pba")) != BUDGET_DIGESTS["pba"]


def test_the_name_lists_are_unchanged_and_come_from_the_registry() -> None:
    assert (CENTRAL, LOCAL_BUDGET, POPULATION) == (
        OLD_CENTRAL + STREAMDP_CENTRAL,
        OLD_LOCAL_BUDGET,
        OLD_POPULATION,
    )
    assert STREAMDP_CENTRAL == STREAMDP
    assert LOCAL == LOCAL_BUDGET + POPULATION and MECHANISMS == CENTRAL + LOCAL
    assert ORACLE_CHOICE == OLD_ORACLE_CHOICE
    assert tuple(registry.BUILTIN) == OLD_CENTRAL + STREAMDP_CENTRAL + OLD_LOCAL_BUDGET
    assert tuple(registry.POPULATION_BUILTIN) == OLD_POPULATION
    # the local module's names (an older import path) are the registry's
    assert (local.LOCAL_BUDGET, local.POPULATION, local.LOCAL, local.ORACLE_CHOICE) == (
        LOCAL_BUDGET,
        POPULATION,
        LOCAL,
        ORACLE_CHOICE,
    )
    collected = [s.name for f in registry.FAMILIES for s in f.specs]
    assert collected == list(MECHANISMS)  # every name from exactly one family


# ---------------------------------------------------------------------------- one registry


@pytest.mark.parametrize("name", MECHANISMS)
def test_every_builtin_name_resolves_to_its_family_spec(name: str) -> None:
    family = next(f for f in registry.FAMILIES if any(s.name == name for s in f.specs))
    spec = next(s for s in family.specs if s.name == name)
    assert registry.model_of(name) == family.model
    cites = ("streamdp-benchmark",) if name in STREAMDP else ("000 ", "001 ", "002 ")
    assert any(cite in spec.summary for cite in cites), spec.summary
    assert "sound" in spec.variants and ("published" in spec.variants or name in STREAMDP)
    if isinstance(spec, PopulationSpec):
        assert registry.POPULATION_BUILTIN[name] is spec
        assert registry.resolve_population(name) is spec and registry.is_population(name)
        with pytest.raises(AllocatorError, match="allocates users"):
            registry.resolve(name)
        with pytest.raises(AllocatorError, match="allocates users"):
            make_kernel(name, ExactAlgebra(), [FixedClass(2, Fraction(1))])
    else:
        assert isinstance(spec, AllocatorSpec)
        assert registry.BUILTIN[name] is spec is registry.resolve(name)
        assert registry.builtin_spec(name) is spec and not registry.is_population(name)
        assert spec.requirement in ("fixed", "dynamic")
        assert registry.takes_dynamic(name) == (spec.requirement == "dynamic")
        assert spec.divides == (name == "dpba")  # 001 Algorithm 7 divides by forward budgets


def test_the_proof_registry_is_the_registry() -> None:
    from wevent.proofs.central import ALLOCATORS

    assert ALLOCATORS is registry.BUILTIN


def test_a_name_declared_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    twice = registry.Family("twice", "central", (registry.BUILTIN["pba"],))
    monkeypatch.setattr(registry, "FAMILIES", (*registry.FAMILIES, twice))
    with pytest.raises(RuntimeError, match="'pba' is declared twice"):
        registry._collect()


def _classes() -> st.SearchStrategy[list[ClassReq[Fraction]]]:
    budget = st.fractions(min_value=Fraction(1, 10), max_value=3, max_denominator=10)
    return st.lists(st.builds(FixedClass, st.integers(1, 5), budget), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    # the kernels of FixedKernel and DynamicKernel (streamdp's have kernel classes of their own)
    name=st.sampled_from(tuple(n for n in CENTRAL + LOCAL_BUDGET if n not in STREAMDP)),
    variant=st.sampled_from(("sound", "published")),
    classes=_classes(),
    decisions=st.lists(st.booleans(), min_size=1, max_size=16),
)
def test_every_path_to_a_kernel_gives_the_same_budgets(
    name: str, variant: str, classes: list[ClassReq[Fraction]], decisions: list[bool]
) -> None:
    """`make_kernel`, the spec, `kernel_for` and the family's kernel class agree slot by slot."""
    assume(variant in registry.BUILTIN[name].variants)
    alg = ExactAlgebra()
    if name in STREAMDP_CENTRAL:  # a family module of its own: its spec's kernel factory
        direct: Any = registry.BUILTIN[name].factory(alg, classes, variant)
    else:
        direct = (DynamicKernel if registry.takes_dynamic(name) else FixedKernel)(
            name, alg, classes, variant
        )
    expected = run_trace(direct, decisions)
    assert run_trace(make_kernel(name, alg, classes, variant), decisions) == expected
    assert run_trace(registry.resolve(name).kernel(alg, classes, variant), decisions) == expected
    assert run_trace(registry.kernel_for(name, alg, classes, variant), decisions) == expected


# ---------------------------------------------------------------------------- unknown names


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("pbaa", "pba"), ("dbpa", "dpba"), ("unifrom", "uniform"), ("plpa++", "plpa+")],
)
def test_an_unknown_name_is_refused_with_a_did_you_mean(typo: str, meant: str) -> None:
    assert meant in registry.suggestions(typo)
    with pytest.raises(
        AllocatorError, match=f"unknown allocator '{re.escape(typo)}'.*did you mean"
    ) as got:
        make_kernel(typo, ExactAlgebra(), [FixedClass(2, Fraction(1))])
    assert meant in str(got.value).rsplit("did you mean", 1)[1]
    registry.resolve.cache_clear()
    with pytest.raises(AllocatorError, match="did you mean") as got:
        registry.resolve(typo)
    assert meant in str(got.value).rsplit("did you mean", 1)[1]
    assert isinstance(got.value, InputError) and isinstance(got.value, ValueError)


def test_a_name_close_to_nothing_gets_no_guess() -> None:
    assert registry.suggestions("zzzzzz") == []
    with pytest.raises(AllocatorError) as got:
        make_kernel("zzzzzz", ExactAlgebra(), [FixedClass(2, Fraction(1))])
    assert "did you mean" not in str(got.value)


def test_suggestions_include_installed_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [EntryPoint("fancy-absorb", "x:y", "wevent.allocators")]

    def fake(*, group: str) -> list[EntryPoint]:
        return [p for p in points if p.group == group]

    monkeypatch.setattr(registry, "entry_points", fake)
    registry.resolve.cache_clear()
    try:
        assert registry.suggestions("fancy-absorbb") == ["fancy-absorb"]
        with pytest.raises(AllocatorError, match="did you mean fancy-absorb"):
            registry.resolve("fancy-absorbb")
    finally:
        registry.resolve.cache_clear()


@pytest.mark.parametrize(
    "module",
    sorted(
        {f.module for f in registry.FAMILIES if f.module.startswith("wevent.mechanisms.streamdp.")}
    ),
)
def test_a_streamdp_module_imports_first_in_a_fresh_process(module: str) -> None:
    """The registry imports the streamdp modules, which import the allocators package: importing
    one of them first must not meet a half-loaded module (the package loads the allocators
    first)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", f"import {module} as m; print(len(m.SPECS))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
