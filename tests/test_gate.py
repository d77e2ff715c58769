"""`wevent gate` piece by piece: target resolution (built-ins, module:attribute, entry points),
conformance (protocol, determinism, scaling claims, Z3 agreement), verdicts and exit codes,
the reports (JSON, JUnit XML), the command lines of `gate` and `trace` for third-party targets,
the inputs the search draws, the minimality of its counterexamples, and the pytest plugin.

The mutation suite (`tests/test_gate_mutants.py`) checks the gate's verdicts on broken and sound
allocators; this file checks how it gets there and what it prints.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from fractions import Fraction
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import gate_mutants
from wevent.accounting.requirements import Dynamic, Fixed
from wevent.cli import cli
from wevent.gate import GateOptions, run_gate
from wevent.gate.inputs import (
    SYSTEMATIC_BUDGETS,
    decision_lists,
    one_user_per_class,
    periodic_patterns,
    requirement_lists,
)
from wevent.gate.search import Probe, run_search, trace_target
from wevent.mechanisms.allocators import registry
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.api import Allocator, AllocatorSpec
from wevent.mechanisms.allocators.kernel import DynamicClass, FixedClass
from wevent.mechanisms.allocators.registry import AllocatorError, kernel_for, resolve
from wevent.proofs.central import prove_allocator

# A small wide search too (its default scope is for benchmarks/bench_gate.py and the `slow`
# tests of tests/test_gate_suite.py): these tests are about the stages and verdicts.
QUICK = GateOptions(
    w_max=2,
    classes=2,
    examples=40,
    e2e_runs=1,
    conformance_inputs=6,
    search_runs=20,
    search_w_max=8,
    search_horizon=32,
)
T = "tests.gate_targets"


def _quick(target: str, **changes: Any) -> Any:
    return run_gate(target, GateOptions(**{**QUICK.__dict__, **changes}))


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    resolve.cache_clear()
    yield
    resolve.cache_clear()


# ---------------------------------------------------------------------------- resolution


def test_builtins_resolve_to_their_specs() -> None:
    pba = resolve("pba")
    assert isinstance(pba, Allocator)
    assert (pba.name, pba.requirement, pba.scaling) == ("pba", "fixed", "per-class")
    assert resolve("dpba").divides and not resolve("dpbd").divides
    assert set(resolve("bd").variants) == {"sound", "published", "du-code"}
    assert set(resolve("uniform").variants) == {"sound", "published"}


@pytest.mark.parametrize(
    ("target", "name"),
    [
        (f"{T}:AsClass", "as-class"),
        (f"{T}:as_function", "as-function"),
        (f"{T}:plain_sound", "plain"),
    ],
)
def test_module_attribute_targets_instance_class_or_factory(target: str, name: str) -> None:
    alloc = resolve(target)
    assert alloc.name == name and not isinstance(alloc, type)
    report = _quick(target, stages=("conformance",))
    assert report.stage("conformance/protocol").status == "passed"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nope", "unknown allocator 'nope'"),
        ("plpd+", "population kernel"),
        ("no_such_module_xyz:thing", "cannot import no_such_module_xyz"),
        (f"{T}:missing", "has no attribute 'missing'"),
        (f"{T}:not_an_allocator", "does not implement the Allocator protocol"),
        (f"{T}:raises_on_call", "RuntimeError: no configuration found"),
        (f"{T}:weird_requirement", "'requirement' must be one of fixed, dynamic"),
        (f"{T}:weird_scaling", "'scaling' must be one of"),
        (f"{T}:no_sound_variant", "must include 'sound'"),
        (":x", "expected module:attribute"),
    ],
)
def test_unusable_targets_are_refused_with_a_message(target: str, message: str) -> None:
    with pytest.raises(AllocatorError, match=message.replace("(", r"\(").replace("+", r"\+")):
        resolve(target)


def _entry_points(points: list[EntryPoint]) -> Any:
    def fake(*, group: str) -> list[EntryPoint]:
        return [p for p in points if p.group == group]

    return fake


def test_entry_point_names_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [
        EntryPoint("mine", f"{T}:as_function", "wevent.allocators"),
        EntryPoint("gone", "no_such_module_xyz:x", "wevent.allocators"),
        EntryPoint("other", f"{T}:as_function", "some.other.group"),
    ]
    monkeypatch.setattr(registry, "entry_points", _entry_points(points))
    assert resolve("mine").name == "as-function"
    with pytest.raises(AllocatorError, match="entry point no_such_module_xyz:x does not load"):
        resolve("gone")
    with pytest.raises(AllocatorError, match="installed entry points: gone, mine"):
        resolve("other")


def test_kernel_for_refuses_unknown_variants_and_dynamic_classes_for_fixed_allocators() -> None:
    alg = ExactAlgebra()
    fixed = [FixedClass(2, ExactAlgebra().const(1))]
    assert kernel_for(f"{T}:plain_sound", alg, fixed).classes == tuple(fixed)
    with pytest.raises(AllocatorError, match="no variant 'published'"):
        kernel_for(f"{T}:plain_sound", alg, fixed, "published")
    dyn: list[DynamicClass[Any]] = [DynamicClass(())]
    with pytest.raises(AllocatorError, match="serves fixed"):
        kernel_for(f"{T}:plain_sound", alg, dyn)


def test_allocator_spec_is_the_proof_registrys_allocator() -> None:
    from wevent.proofs.central import ALLOCATORS
    from wevent.proofs.central import Allocator as ProofAllocator

    assert ProofAllocator is AllocatorSpec
    assert all(ALLOCATORS[name] is spec for name, spec in registry.BUILTIN.items())


# ---------------------------------------------------------------------------- conformance


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("float_budgets", "is a float"),
        ("short_plan", "one budget per class"),
        ("crashes", "plan() at slot 2 raised ZeroDivisionError"),
    ],
)
def test_protocol_breaches_make_the_target_unusable(target: str, message: str) -> None:
    report = _quick(f"{T}:{target}")
    assert report.verdict == "unusable" and report.exit_code == 2
    assert report.stage("conformance/protocol").status == "error"
    assert message in (report.unusable_reason or "")
    assert len(report.stages) == 1  # nothing else ran


def test_non_symbolic_sound_kernel_passes_without_a_proof() -> None:
    report = _quick(f"{T}:plain_sound")
    assert report.verdict == "passed" and report.exit_code == 0
    assert report.stage("proof").status == "skipped"
    strict = _quick(f"{T}:plain_sound", require_proof=True)
    assert strict.verdict == "unproved" and strict.exit_code == 3


def test_kernel_computing_differently_on_z3_terms_is_refuted() -> None:
    report = _quick(f"{T}:cheater", stages=("conformance", "proof"))
    symbolic = report.stage("conformance/symbolic")
    assert symbolic.status == "failed" and "something else" in symbolic.detail
    assert report.stage("proof").status == "skipped"
    assert report.verdict == "refuted"


def test_non_deterministic_kernel_is_refuted_with_its_input() -> None:
    report = _quick("tests.gate_mutants:forgetful_state", stages=("conformance",))
    det = report.stage("conformance/determinism")
    assert det.status == "failed" and "not deterministic" in det.detail
    assert "requirements_csv" in det.data["input"] and det.data["input"]["decisions"]


def test_symbolic_kernels_agree_and_the_claim_check_can_pass() -> None:
    report = _quick("pbd", stages=("conformance", "proof"))
    assert [s.status for s in report.stages] == ["passed"] * 4 + ["proved"]


# ---------------------------------------------------------------------------- proofs


def test_unnormalized_allocators_are_proved_with_every_budget_symbolic() -> None:
    """scaling = "none": no normalization, so the proof's budgets are all free variables."""
    for target, scope_w in ((f"{T}:pbd_unnormalized", 3), (f"{T}:dpbd_unnormalized", 1)):
        report = _quick(target, w_max=scope_w, stages=("conformance", "proof"))
        assert report.stage("conformance/scaling").status == "skipped"
        assert report.verdict == "proved", "\n".join(report.describe())


def test_proof_of_an_unregistered_allocator_names_its_target() -> None:
    off = AllocatorSpec("off", "fixed", "none", "", gate_mutants.off_by_one_window.factory)
    proof = prove_allocator("tests.gate_mutants:off_by_one_window", allocator=off)
    assert proof.status == "counterexample" and proof.counterexample is not None
    assert proof.counterexample.mechanism == "tests.gate_mutants:off_by_one_window"
    assert proof.counterexample.replays()


# ---------------------------------------------------------------------------- search


@settings(max_examples=60)
@given(st.data())
def test_drawn_inputs_stay_in_scope(data: st.DataObject) -> None:
    w_max, classes, horizon = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3)), 9
    for kind in ("fixed", "dynamic"):
        reqs = data.draw(requirement_lists(kind, classes, w_max, horizon))
        assert 1 <= len(reqs) <= classes
        for r in reqs:
            if kind == "fixed":
                assert isinstance(r, Fixed) and 1 <= r.w <= w_max and r.eps > 0
            else:
                assert isinstance(r, Dynamic) and 1 <= len(r.declarations) <= 3
                for d in r.declarations:
                    assert 1 <= d.slot <= horizon and max(d.w_back, d.w_fwd) <= w_max
                    assert d.eps_back > 0 and d.eps_fwd > 0
    decisions = data.draw(decision_lists(horizon))
    assert 1 <= len(decisions) <= horizon


@given(st.integers(1, 5), st.integers(1, 12))
def test_periodic_patterns_publish_every_period_from_their_first_slot(p: int, slots: int) -> None:
    patterns = periodic_patterns(p, slots)
    for period in range(1, p + 1):
        for first in range(1, min(period + 1, slots) + 1):
            want = [t >= first and (t - first) % period == 0 for t in range(1, slots + 1)]
            assert want in patterns
    for pattern in patterns:
        assert len(pattern) == slots
        on = [t for t, d in enumerate(pattern, start=1) if d]
        gaps = {b - a for a, b in itertools.pairwise(on)}
        assert len(gaps) <= 1 and (not gaps or max(gaps) <= p)


@settings(max_examples=40)
@given(
    requirement_lists("dynamic", 2, 3, 9) | requirement_lists("fixed", 2, 3, 9),
    decision_lists(9),
)
def test_sound_kernel_passes_every_input_the_search_can_draw(reqs: Any, decisions: Any) -> None:
    """The search's invariant on the code that runs: DPBD (sound) is never refused."""
    result = trace_target(
        "dpbd", resolve("dpbd"), one_user_per_class(reqs), decisions, "sound", "exact"
    )
    assert result.ok, result.refusal or result.negative


@pytest.mark.parametrize(
    "name", ["off_by_one_window", "smallest_window_for_all", "stale_declaration"]
)
def test_search_counterexamples_are_locally_minimal(name: str) -> None:
    """No single slot can be dropped and no publication turned into a skip (the greedy pass), or
    hypothesis' shrinker found nothing simpler; the run ends at its failing slot."""
    target = f"tests.gate_mutants:{name}"
    alloc = resolve(target)
    stage = run_search(
        target, alloc, alloc.requirement, variant="sound", arithmetic="exact",
        examples=100, classes=2, w_max=3, horizon=9, seed=0,
    )  # fmt: skip
    cex = stage.counterexample
    assert stage.status == "failed" and cex is not None
    reqs = [r for _, r in cex.requirements]
    probe = Probe(target, alloc, "sound", "exact")
    decisions = list(cex.decisions)
    for i in range(len(reqs) if len(reqs) > 1 else 0):
        assert not probe((reqs[:i] + reqs[i + 1 :], decisions))
    assert probe((reqs, decisions)) and probe.failed_slot == len(decisions)
    for i in range(len(decisions)):
        assert (
            not probe((reqs, decisions[:i] + decisions[i + 1 :]))
            or not decisions[:i] + decisions[i + 1 :]
        )
        if decisions[i]:
            assert not probe((reqs, [*decisions[:i], False, *decisions[i + 1 :]]))


def test_systematic_budgets_include_the_double_hazards() -> None:
    assert {str(x) for x in SYSTEMATIC_BUDGETS} >= {"3/10", "7/10", "3/5", "1/10"}


# ---------------------------------------------------------------------------- reports


def test_report_json_and_junit_of_a_refutation() -> None:
    report = _quick("tests.gate_mutants:absorb_uncapped")
    data = report.to_json()
    assert data["verdict"] == "refuted" and data["exit_code"] == 1
    assert [s["name"] for s in data["stages"]][:4] == [
        "conformance/protocol",
        "conformance/determinism",
        "conformance/scaling",
        "conformance/symbolic",
    ]
    cex = data["counterexample"]
    assert cex["replay"].startswith("wevent trace tests.gate_mutants:absorb_uncapped -r ")
    assert cex["decisions"] and cex["requirements_csv"].startswith("user,w,epsilon")
    root = ET.fromstring(report.junit_xml())
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == len(report.stages) == int(suite.get("tests", "0"))
    failures = {c.get("name"): c.find("failure") for c in cases}
    texts = {name: node.text or "" for name, node in failures.items() if node is not None}
    assert len(texts) == int(suite.get("failures", "0")) >= 2
    assert all("wevent trace" in text for text in texts.values())
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    assert skipped == ["search/dynamic"]


def test_report_of_an_unusable_target() -> None:
    report = run_gate("nope")
    assert report.verdict == "unusable" and report.stages == []
    root = ET.fromstring(report.junit_xml())
    suite = root.find("testsuite")
    assert suite is not None and suite.get("errors") == "1"
    assert "unknown allocator" in json.dumps(report.to_json())


def test_options_are_validated() -> None:
    with pytest.raises(Exception, match="unknown stage"):
        run_gate("pba", GateOptions(stages=("everything",)))
    with pytest.raises(Exception, match="arithmetic"):
        run_gate("pba", GateOptions(arithmetic="decimal"))


# ---------------------------------------------------------------------------- command line


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_cli_gate_pass_json_on_stdout() -> None:
    result = _invoke(
        "gate", "pbd", "--w-max", "2", "--examples", "30", "--search-runs", "20",
        "--search-w-max", "8", "--search-unroll", "32", "--json", "-",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["verdict"] == "proved" and data["options"]["w_max"] == 2


def test_cli_gate_refutation_writes_reports_and_trace_replays_it(tmp_path: Path) -> None:
    csv, junit, out = tmp_path / "cex.csv", tmp_path / "gate.xml", tmp_path / "gate.json"
    result = _invoke(
        "gate", "tests.gate_mutants:sample_recycled_early", "--w-max", "2", "--examples", "30",
        "--save-requirements", str(csv), "--junit", str(junit), "--json", str(out),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "REFUTED" in result.output and csv.exists() and junit.exists()
    data = json.loads(out.read_text())
    replay = data["counterexample"]["replay"]
    assert replay.split()[3:5] == ["-r", str(csv)]
    assert f"replay: {replay}" in result.output
    traced = _invoke(*replay.split()[1:])
    assert traced.exit_code == 1 and "REFUSED by the guard" in traced.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gate", "nope"], "unknown allocator 'nope'"),
        (["gate", f"{T}:crashes"], "raised ZeroDivisionError"),
        (["gate", f"{T}:float_budgets"], "is a float"),
        (["gate", "pba", "--junit", "/no/such/dir/g.xml"], "does not exist"),
        (["gate", "pba", "--classes", "9"], "Invalid value"),
    ],
)
def test_cli_gate_unusable_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = _invoke(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_cli_gate_require_proof_exit_3() -> None:
    result = _invoke(
        "gate", f"{T}:plain_sound", "--w-max", "2", "--examples", "20", "--require-proof",
        "--search-runs", "10", "--search-w-max", "8", "--search-unroll", "32",
    )  # fmt: skip
    assert result.exit_code == 3 and "UNPROVED" in result.output


@pytest.fixture
def fixed_csv(tmp_path: Path) -> Path:
    path = tmp_path / "req.csv"
    path.write_text("user,w,epsilon\nalice,2,1\n", encoding="utf-8")
    return path


def test_cli_trace_runs_a_third_party_target(fixed_csv: Path) -> None:
    result = _invoke("trace", f"{T}:plain_sound", "-r", str(fixed_csv), "--decisions", "1,0,1")
    assert result.exit_code == 0, result.output
    assert "guard: all 3 slots accepted" in result.output


@pytest.mark.parametrize(
    ("target", "extra", "message"),
    [
        ("nope", [], "unknown allocator 'nope'"),
        (f"{T}:crashes", [], "the kernel raised ZeroDivisionError"),
        (f"{T}:plain_sound", ["--variant", "published"], "no variant 'published'"),
    ],
)
def test_cli_trace_third_party_errors_are_one_line(
    target: str, extra: list[str], message: str, fixed_csv: Path
) -> None:
    result = _invoke("trace", target, "-r", str(fixed_csv), "--decisions", "1,1,1", *extra)
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------- pytest plugin


def test_plugin_fixture_passes_and_refutes(wevent_gate: Any) -> None:
    small = {"search_runs": 20, "search_w_max": 8, "search_horizon": 32}
    assert wevent_gate("pbd", w_max=2, examples=30, **small).verdict == "proved"
    report = wevent_gate(
        "tests.gate_mutants:absorb_uncapped", expect="refuted", w_max=2, examples=30, **small
    )
    assert report.counterexample is not None


def test_plugin_fixture_fails_the_test_with_the_counterexample(wevent_gate: Any) -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        wevent_gate("tests.gate_mutants:absorb_uncapped", w_max=2, examples=30)
    text = str(failed.value)
    assert "expected pass, got refuted" in text and "then run: wevent trace" in text
    with pytest.raises(ValueError, match="expect"):
        wevent_gate("pbd", expect="maybe")
    with pytest.raises(TypeError, match="GateOptions fields"):
        wevent_gate("pbd", colour="red")


def test_plugin_command_line_overrides(tmp_path: Path) -> None:
    test = tmp_path / "test_override.py"
    test.write_text(
        "def test_it(wevent_gate):\n"
        "    report = wevent_gate('uniform', examples=500, stages=('conformance', 'search'),\n"
        "                         search_runs=10, search_w_max=8,\n"
        "                         search_horizon=32)\n"
        "    assert report.options['examples'] == 7 and report.options['w_max'] == 1\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test),
         "--wevent-examples", "7", "--wevent-w-max", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------------------- end to end


def test_end_to_end_refusal_becomes_a_small_replayable_counterexample() -> None:
    report = _quick("tests.gate_mutants:absorb_uncapped", stages=("end-to-end",))
    stage = report.stage("end-to-end")
    cex = stage.counterexample
    assert stage.status == "failed" and cex is not None and cex.replays()
    assert "refused spend" in stage.detail
    probe = Probe(report.target, resolve(report.target), "sound", "exact")
    reqs = [r for _, r in cex.requirements]
    for i, d in enumerate(cex.decisions):
        if d:  # every publication left is needed
            assert not probe((reqs, [*cex.decisions[:i], False, *cex.decisions[i + 1 :]]))


def test_end_to_end_sound_run_is_accepted_and_checked() -> None:
    report = _quick("pba", stages=("end-to-end",), e2e_runs=2)
    stage = report.stage("end-to-end")
    assert stage.status == "passed" and stage.data["charges"] > 0
    assert report.verdict == "passed"
    assert report.headline().startswith("PASSED (end to end only: neither proved nor searched")


# ---------------------------------------------------------------------------- fixed defects


def test_a_mixed_counterexample_names_both_requirement_files_and_replays(tmp_path: Path) -> None:
    """A population of fixed and dynamic users is written to two CSVs; the printed command
    reads both, and running it refuses at the counterexample's slot."""
    from wevent.accounting.budget import Budget
    from wevent.accounting.formats import write_requirements
    from wevent.accounting.requirements import Declaration
    from wevent.proofs.counterexamples import Counterexample, Failure, requirements_files

    dynamic = Dynamic(
        (Declaration(1, 1, Budget(1), 1, Budget(1)), Declaration(2, 2, Budget("0.1"), 1, Budget(1)))
    )
    reqs = (("f1", Fixed(2, Budget(1))), ("u1", dynamic))
    failure = Failure(1, "u1", "backward", 1, 2, Fraction(1, 2), Fraction(1, 10))
    cex = Counterexample("dpba", "published", "exact", reqs, (False,), failure)
    assert cex.replays()
    path = tmp_path / "cex.csv"
    written = write_requirements(cex.population, path)
    assert written == [path, tmp_path / "cex.dynamic.csv"]
    command = cex.command(str(path))
    assert f"-r {path} -r {tmp_path / 'cex.dynamic.csv'}" in command
    files = requirements_files(cex.population, str(path))
    assert [name for name, _ in files] == [str(p) for p in written]
    assert [text for _, text in files] == [p.read_text() for p in written]
    assert sum(line.startswith("requirements (") for line in cex.describe()) == 2
    args = command.split()
    assert args[0] == "wevent"
    result = _invoke(*args[1:])
    assert result.exit_code == 1, result.output
    assert "REFUSED by the guard" in result.output and "slot 1" in result.output
    assert "f1" in result.output  # the fixed user was read too


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_drawn_requirement_classes_are_distinct_and_replay_as_drawn(data: st.DataObject) -> None:
    """Equal requirements would merge into one class when the counterexample is replayed: the
    search and the conformance inputs draw distinct ones, so the kernel the gate ran is the
    kernel `wevent trace` runs."""
    import random

    from wevent.gate.inputs import kernel_classes, random_requirements
    from wevent.mechanisms.allocators import classes_of

    kind = data.draw(st.sampled_from(["fixed", "dynamic"]))
    reqs = data.draw(requirement_lists(kind, 4, 2, 4))
    seed = data.draw(st.integers(0, 10**6))
    for drawn in (reqs, random_requirements(random.Random(seed), kind, 4, 2, 4)):
        assert len(set(drawn)) == len(drawn)
        population = one_user_per_class(drawn)
        assert len(population.classes) == len(drawn)
        assert classes_of(population, "x") == kernel_classes(drawn)


def test_scaled_classes_is_the_shared_helper() -> None:
    """The conformance check and the normalization tests scale classes with one helper."""
    from tests import test_allocator_proofs
    from wevent.gate import conformance
    from wevent.mechanisms.allocators.kernel import Decl, scaled_classes

    assert vars(conformance)["scaled_classes"] is scaled_classes
    assert vars(test_allocator_proofs)["scaled_classes"] is scaled_classes
    dyn = DynamicClass((Decl(1, 2, Fraction(1), 3, Fraction(2)),))
    got = scaled_classes([FixedClass(2, Fraction(1, 2)), dyn], [Fraction(3), Fraction(1, 2)])
    assert got == [
        FixedClass(2, Fraction(3, 2)),
        DynamicClass((Decl(1, 2, Fraction(1, 2), 3, Fraction(1)),)),
    ]
