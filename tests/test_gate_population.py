"""`wevent gate` on the population-division allocators (lpu ... plba-ops): every sound built-in
is proved (pool proof, OPS split) and passes the search and the end-to-end run; the published OPS
split (000 Algorithm 1, ``ceil(z_opt / z_i)``; docs/deviations.md) is refuted by the proof and by
the search, and the counterexample replays with the printed `wevent trace` command.

Scope in `make test`: windows <= 2, 1..2 classes, 30 search inputs (the population proofs are
checked for windows <= 6 in `tests/test_population_proofs.py`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from wevent.accounting.budget import Budget
from wevent.accounting.requirements import Fixed
from wevent.cli import cli
from wevent.gate import GateOptions, GateReport, run_gate
from wevent.gate.population import (
    ClassCount,
    PopulationProbe,
    population_counterexample,
    population_of,
    shrink_population_case,
)
from wevent.mechanisms.allocators.local import POPULATION

OPTIONS = GateOptions(
    w_max=2, classes=2, examples=30, e2e_runs=1, conformance_inputs=4, search_runs=20
)
OPS_FAMILY = ["plpd+", "plpa+", "plbd-ops", "plba-ops"]


def _gate(target: str, **changes: Any) -> GateReport:
    return run_gate(target, dataclasses.replace(OPTIONS, **changes))


def _replay(command: str, tmp_path: Path) -> str:
    """Run a printed `wevent trace` command in-process; it must refuse (exit 1)."""
    args = command.split()
    assert args[:2] == ["wevent", "trace"]
    result = CliRunner().invoke(cli, args[1:])
    assert result.exit_code == 1, result.output
    assert "REFUSED by the guard" in result.output or "POOL SHORT" in result.output
    return result.output


@pytest.mark.parametrize("name", POPULATION)
def test_gate_accepts_every_sound_population_builtin(name: str) -> None:
    report = _gate(name)
    assert report.verdict == "proved", "\n".join(report.describe())
    names = [s.name for s in report.stages]
    assert names == [
        "conformance/determinism",
        "conformance/symbolic",
        "proof",
        "search/population",
        "end-to-end",
    ]
    assert all(s.status in ("passed", "proved") for s in report.stages)
    proof = report.stage("proof").data["proof"]
    theorems = [th["theorem"] for th in proof["theorems"]]
    ops = name in OPS_FAMILY
    assert theorems == (["ops-split"] if ops else []) + ["pool-never-short", "user-windows"]
    assert report.stage("search/population").data["runs"] > 30


@pytest.mark.parametrize("name", OPS_FAMILY)
def test_published_ops_split_is_refuted_by_the_proof_and_replays(name: str, tmp_path: Path) -> None:
    csv = tmp_path / "cex.csv"
    report = run_gate(
        name,
        dataclasses.replace(OPTIONS, variant="published", stages=("proof",)),
        save_requirements=csv,
    )
    assert report.verdict == "refuted", "\n".join(report.describe())
    proof = report.stage("proof")
    assert proof.status == "failed" and proof.data["replays"] is True
    cex = report.counterexample
    assert cex is not None and cex.replays()
    assert cex.variant == "published" and cex.failure.kind == "fixed"
    assert len(cex.decisions) == cex.failure.slot
    assert {r.w for _, r in cex.requirements if isinstance(r, Fixed)} == {2, 5}
    command = report.replay_command()
    assert command is not None and f"-r {csv}" in command and "--variant published" in command
    output = _replay(command, tmp_path)
    assert f"slot {cex.failure.slot}:" in output


def test_published_ops_split_found_by_the_search_alone(tmp_path: Path) -> None:
    """With windows up to 5 the search's two-class pass finds the published split's bug too,
    and shrinks it (fewer publications than every slot)."""
    report = _gate("plpd+", variant="published", w_max=5, stages=("search",))
    stage = report.stage("search/population")
    assert stage.status == "failed" and stage.data["replays"] is True
    cex = report.counterexample
    assert cex is not None and cex.replays()
    assert sum(cex.decisions) < len(cex.decisions)
    csv = tmp_path / "counterexample.csv"
    from wevent.accounting.formats import write_requirements

    write_requirements(cex.population, csv)
    _replay(cex.command(str(csv)), tmp_path)


@pytest.mark.parametrize("name", ["lpd", "plpa"])
def test_published_variants_that_are_sound_are_accepted(name: str) -> None:
    report = _gate(name, variant="published", stages=("proof", "search"))
    assert report.verdict == "proved", "\n".join(report.describe())


def test_population_probe_shrinks_to_a_smaller_failing_input() -> None:
    """The greedy shrinker drops classes and publications while the input still fails: an
    extra class and eight publishing slots around the published OPS counterexample shrink to
    its two classes and one publication."""
    probe = PopulationProbe("plpd+", "published", 0)
    classes: list[ClassCount] = [
        (Fixed(2, Budget(1)), 2),
        (Fixed(5, Budget(1)), 8),
        (Fixed(1, Budget("0.5")), 1),
    ]
    decisions = [True] * 8
    assert probe((classes, decisions))
    small, fewer = shrink_population_case(probe, classes, decisions)
    assert probe((small, fewer))
    assert [(r.describe(), k) for r, k in small] == [("fixed w=2 eps=1", 2), ("fixed w=5 eps=1", 8)]
    assert len(fewer) == probe.failed_slot and sum(fewer) == 1
    trace = probe.trace(small, fewer)
    cex = population_counterexample("plpd+", "published", 0, population_of(small), trace)
    assert cex.replays() and len(cex.decisions) == cex.failure.slot


def test_shortage_counterexamples_replay_as_shortages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool that runs dry (publications may take all n users: capacity n, a mutant of the
    distribution rule) is a counterexample of kind "shortage" that replays as one."""
    from wevent.mechanisms.allocators import local
    from wevent.mechanisms.allocators.population import PopulationConfig

    real = local.population_setup

    def greedy(*args: Any, **kwargs: Any) -> Any:
        setup = real(*args, **kwargs)
        c = setup.config
        cfg = PopulationConfig(c.n, c.rule, c.unit, c.recycle, c.n, c.absorb_cap)
        return dataclasses.replace(setup, config=cfg)

    monkeypatch.setattr("wevent.verifier.tracing.population_setup", greedy)
    probe = PopulationProbe("lpd", "published", 0)
    classes: list[ClassCount] = [(Fixed(3, Budget(1)), 12)]
    assert probe((classes, [True] * 9))
    trace = probe.trace(classes, [True] * 9)
    cex = population_counterexample("lpd", "published", 0, population_of(classes), trace)
    assert cex.failure.kind == "shortage" and cex.replays()
    assert "pool holds" in cex.failure.describe()
    assert cex.to_json()["violation"]["available"] < cex.to_json()["violation"]["asked"]


def test_cli_gate_population_json_and_float_refused(tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    result = CliRunner().invoke(
        cli,
        [
            "gate",
            "lpu",
            "--w-max",
            "2",
            "--examples",
            "20",
            "--search-runs",
            "20",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "PROVED" in result.output
    data = json.loads(out.read_text())
    assert data["verdict"] == "proved" and data["allocator"]["population"] is True
    bad = CliRunner().invoke(cli, ["gate", "lpa", "--arithmetic", "float"])
    assert bad.exit_code == 2
    assert "counts users exactly" in bad.output and "Traceback" not in bad.output


def test_cli_gate_population_refutation_prints_a_replay(tmp_path: Path) -> None:
    csv = tmp_path / "cex.csv"
    result = CliRunner().invoke(
        cli,
        ["gate", "plpa+", "--variant", "published", "--w-max", "2", "--examples", "20",
         "--search-runs", "20", "--seed", "3", "--save-requirements", str(csv)],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    replay = next(line for line in result.output.splitlines() if line.startswith("replay: "))
    command = replay.removeprefix("replay: ")
    assert "--seed 3" in command and csv.exists()
    _replay(command, tmp_path)


def test_population_targets_resolve() -> None:
    """Built-in names and third-party `PopulationAllocator`s resolve as population allocators;
    budget allocators and unknown names do not (`resolve` keeps refusing population names
    as budget allocators, naming the commands that take them)."""
    from wevent.mechanisms.allocators.registry import (
        POPULATION_BUILTIN,
        AllocatorError,
        is_population,
        resolve,
        resolve_population,
    )

    assert set(POPULATION_BUILTIN) == set(POPULATION)
    assert resolve_population("lpa") is POPULATION_BUILTIN["lpa"]
    assert resolve_population("pba") is None
    assert resolve_population("tests.gate_targets:plain_sound") is None
    mutant = resolve_population("tests.gate_mutants:draw_not_capped_by_pool")
    assert mutant is not None and mutant.name == "draw_not_capped_by_pool"
    assert is_population("plpd+") and not is_population("no.such.module:x")
    with pytest.raises(AllocatorError, match="wevent gate"):
        resolve("lpa")


def test_population_allocator_without_a_sound_variant_is_unusable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dataclasses as dc

    from tests import gate_mutants
    from wevent.mechanisms.allocators import registry

    broken = dc.replace(gate_mutants.recycled_user_reused_early, variants=("fast",))
    monkeypatch.setattr(gate_mutants, "no_sound_variant", broken, raising=False)
    registry.resolve_population.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["gate", "tests.gate_mutants:no_sound_variant"])
    finally:
        registry.resolve_population.cache_clear()
    assert result.exit_code == 2
    assert "variants" in result.output and "Traceback" not in result.output
