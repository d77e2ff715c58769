"""`--variant du-code` of the OPS population allocators (plpd+, plpa+, plbd-ops, plba-ops): the
recycle period and the absorption start of Du et al.'s public code (WEventPLDPCode,
docs/peers.md), on top of the published split.

The code recycles after the window of the first listed user whose sample size is z_opt. On
docs/peers.md's population (ten users, the first with w = 3, nine with w = 4, eps 1; z = 1 for
both) that is 3 slots where the paper's floor(n / (2 z_opt)) is 5, and 4 slots when the users are
listed the other way round. `wevent gate` refutes the variant (its proof and its search, each on
its own), the counterexample replays with `wevent trace`, and the `published` variant accepts
the populations du-code breaks.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.replay import replay_on_the_command_line
from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.formats import write_requirements
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.cli import cli
from wevent.gate import GateOptions, GateReport, run_gate
from wevent.mechanisms.allocators import classes_of
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.population import (
    OPS_SPLIT,
    PopulationKernel,
    population_setup,
    variants_of,
)
from wevent.mechanisms.allocators.registry import POPULATION
from wevent.mechanisms.ops import OPSClass, ops, sample_size
from wevent.proofs.population import prove_ops_split, prove_population
from wevent.verifier.tracing import trace_population

DU = "du-code"
PEERS_MD = [3] + [4] * 9  # docs/peers.md: the first user with w = 3, nine with w = 4
REVERSED = [4] * 9 + [3]
# The gate's scope here: windows <= 3 reach the smallest counterexample (n = 6, windows 2 and 3).
OPTIONS = GateOptions(
    w_max=3, classes=2, examples=5, e2e_runs=1, conformance_inputs=4, search_runs=0
)


def _population(windows: list[int]) -> Population:
    return Population({f"u{i}": Fixed(w, Budget(1)) for i, w in enumerate(windows, 1)})


def _recycle(name: str, windows: list[int], variant: str) -> int:
    population = _population(windows)
    counts = [c.count for c in population.classes]
    setup = population_setup(name, classes_of(population, name), counts, 2, variant)
    return setup.config.recycle


def _units(name: str, windows: list[int], decisions: list[bool], variant: str) -> list[int]:
    """Publication users per slot (z = 1 on these populations, so units)."""
    trace = trace_population(name, _population(windows), decisions, variant=variant, seed=0)
    return [len(s.sampled.get("publication", ())) for s in trace.slots]


# ---------------------------------------------------------------------------- the rule


def test_du_code_is_a_variant_of_the_ops_members_only() -> None:
    assert set(OPS_SPLIT) == {"plpd+", "plpa+", "plbd-ops", "plba-ops"}
    for name in POPULATION:
        expected = ("sound", "published", DU) if name in OPS_SPLIT else ("sound", "published")
        assert variants_of(name) == expected, name
    with pytest.raises(BudgetError, match=r"plpa: no variant 'du-code'"):
        population_setup("plpa", classes_of(_population(PEERS_MD), "plpa"), [1, 9], 2, DU)


@pytest.mark.parametrize("name", OPS_SPLIT)
def test_recycle_period_on_the_peers_md_population(name: str) -> None:
    """The code's period is the first listed user's window: 3, where the paper's is 5."""
    assert _recycle(name, PEERS_MD, DU) == 3
    assert _recycle(name, PEERS_MD, "published") == 5
    assert _recycle(name, PEERS_MD, "sound") == 5


@pytest.mark.parametrize("name", OPS_SPLIT)
def test_recycle_period_depends_on_the_order(name: str) -> None:
    """Listed the other way round, the same users are recycled after 4 slots; the published
    and sound periods do not depend on the order."""
    assert _recycle(name, REVERSED, DU) == 4
    assert _recycle(name, REVERSED, "published") == 5
    assert _recycle(name, REVERSED, "sound") == 5


def test_ops_takes_the_first_class_with_the_chosen_sample_size() -> None:
    first = [OPSClass(3, Fraction(1), 1), OPSClass(4, Fraction(1), 9)]
    choice = ops(first, 2, variant=DU)
    assert (choice.z_opt, choice.recycle, choice.splits) == (1, 3, (1, 1))
    assert choice.w_opt == Fraction(3)
    assert ops(first[::-1], 2, variant=DU).recycle == 4
    published = ops(first, 2, variant="published")
    assert published.recycle == 5 and published.w_opt == Fraction(5)
    # a class with no users is not listed, even with the chosen sample size (w = 4 gives 1
    # here): the next class with it is
    empty_first = [OPSClass(4, Fraction(1), 0), *first]
    assert ops(empty_first, 2, variant=DU).recycle == 3
    with pytest.raises(BudgetError, match="only apply to the published"):
        ops(first, 2, variant=DU, sizes=[1, 1])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 12), st.sampled_from(["1", "0.5", "0.3"]), st.integers(1, 20)),
        min_size=1,
        max_size=4,
        unique_by=lambda c: c[0],
    )
)
def test_du_code_differs_from_published_in_its_period_only(
    raw: list[tuple[int, str, int]],
) -> None:
    """On any classes: the same z_opt and splits as the published OPS, and a period that is the
    window of the first class with users whose sample size is z_opt, at most the paper's."""
    classes = [OPSClass(w, Fraction(e), k) for w, e, k in raw]
    n = sum(c.count for c in classes)
    try:
        published = ops(classes, 2, variant="published")
    except BudgetError:
        with pytest.raises(BudgetError):
            ops(classes, 2, variant=DU)
        return
    du = ops(classes, 2, variant=DU)
    assert (du.z_opt, du.splits) == (published.z_opt, published.splits)
    first = next(c for c in classes if c.count and sample_size(n, c.w) == du.z_opt)
    assert du.recycle == first.w == du.w_opt
    assert du.recycle <= published.recycle == n // (2 * du.z_opt)


def test_absorption_starts_at_slot_minus_one() -> None:
    """The code's last publication is at slot -1 with no users: slot 1 absorbs three units and
    nullifies slots 2 and 3 (docs/peers.md's ledger: units 3, 0, 0, 1); the listings' start
    absorbs two units and nullifies slot 2 only."""
    decisions = [True, False, False, True]
    assert _units("plpa+", PEERS_MD, decisions, DU) == [3, 0, 0, 1]
    assert _units("plpa+", PEERS_MD, decisions, "published") == [2, 0, 0, 2]
    population = _population(PEERS_MD)
    setup = population_setup("plpa+", classes_of(population, "plpa+"), [1, 9], 2, DU)
    kernel = PopulationKernel("plpa+", ExactAlgebra(), setup.config, DU)
    assert kernel.start().last == -1
    # the distribution rule has no absorption: du-code draws what published draws at slot 1
    assert _units("plpd+", PEERS_MD, [True], DU) == _units("plpd+", PEERS_MD, [True], "published")


# ---------------------------------------------------------------------------- the ledger


@pytest.mark.parametrize("name", ["plpa+", "plpd+"])
def test_peers_md_population_breaks_a_window_and_published_keeps_it(name: str) -> None:
    """docs/peers.md's decisions 1,0,0,1: a w = 4 user drawn at slot 1 is back at slot 4 under
    du-code (pool seed 0); published recycles after 5 slots and the guard accepts every charge
    on every seed, as du-code does with the users listed the other way round."""
    decisions = [True, False, False, True]
    trace = trace_population(name, _population(PEERS_MD), decisions, variant=DU, seed=0)
    assert trace.refusal is not None and trace.failed_slot == 4
    assert (trace.refusal.window.first, trace.refusal.window.last) == (1, 4)
    every = [True] * 12
    for seed in range(8):
        for windows, variant in ((PEERS_MD, "published"), (REVERSED, DU)):
            ok = trace_population(name, _population(windows), every, variant=variant, seed=seed)
            assert ok.ok, (windows, variant, seed)


# ---------------------------------------------------------------------------- the gate


def _gate(name: str, variant: str, stages: tuple[str, ...]) -> GateReport:
    return run_gate(name, dataclasses.replace(OPTIONS, variant=variant, stages=stages))


def _replays_on_the_command_line(report: GateReport, tmp_path: Path) -> str:
    return replay_on_the_command_line(report, tmp_path / "cex.csv", DU).output


def _order_dependent(report: GateReport) -> None:
    """The counterexample lists a shorter window first, with the same sample size as a longer
    one; the same users listed the other way round pass under du-code."""
    cex = report.counterexample
    assert cex is not None
    windows = [r.w for _, r in cex.requirements if isinstance(r, Fixed)]
    n = len(windows)
    assert windows[0] < max(windows)
    assert sample_size(n, windows[0]) == sample_size(n, max(windows))
    flipped = sorted(windows, reverse=True)
    for seed in range(8):
        trace = trace_population(
            cex.mechanism, _population(flipped), [True] * 4 * max(windows), variant=DU, seed=seed
        )
        assert trace.ok, seed


@pytest.mark.parametrize("name", ["plpa+", "plpd+"])
def test_gate_proof_refutes_du_code_and_the_trace_replays(name: str, tmp_path: Path) -> None:
    report = _gate(name, DU, ("proof",))
    assert report.verdict == "refuted", "\n".join(report.describe())
    proof = report.stage("proof")
    assert proof.status == "failed" and proof.data["replays"] is True
    split = proof.data["proof"]["theorems"][0]
    assert split["theorem"] == "ops-split" and split["counterexample"]["R"] == 2
    assert "n=6, w_o=2, w=3" in proof.detail
    output = _replays_on_the_command_line(report, tmp_path)
    assert f"{name} (du-code): 6 users" in output and "recycled after 2 slots" in output
    _order_dependent(report)


@pytest.mark.parametrize("name", ["plpa+", "plpd+"])
def test_gate_search_alone_finds_the_order_dependent_population(name: str, tmp_path: Path) -> None:
    report = _gate(name, DU, ("search",))
    stage = report.stage("search/population")
    assert stage.status == "failed" and stage.data["replays"] is True
    assert "systematic pass" in stage.detail
    _replays_on_the_command_line(report, tmp_path)
    _order_dependent(report)


def test_gate_search_accepts_published_where_it_refutes_du_code() -> None:
    """Negative control: the same search (windows <= 3) passes the published variant, whose
    split first breaks at windows 2 and 5."""
    report = _gate("plpa+", "published", ("search",))
    assert report.verdict == "passed", "\n".join(report.describe())


def test_split_theorem_du_code_against_published() -> None:
    """The du-code split theorem's smallest counterexample (n = 6) is below the published
    split's (n = 10): up to n = 9 the published split holds, so it is the period that breaks."""
    du = prove_ops_split(DU, n_max=100, w_max=20)
    assert du.status == "counterexample"
    assert {k: du.counterexample[k] for k in ("n", "w_o", "w", "R", "split")} == {
        "n": 6,
        "w_o": 2,
        "w": 3,
        "R": 2,
        "split": 1,
    }
    assert prove_ops_split("published", n_max=9, w_max=20).status == "proved"
    assert prove_ops_split("published", n_max=100, w_max=20).counterexample["n"] == 10


def test_prove_population_refuses_du_code_where_there_is_none() -> None:
    with pytest.raises(BudgetError, match="lpa: no variant 'du-code'"):
        prove_population("lpa", variant=DU, w_max=1)
    result = CliRunner().invoke(cli, ["prove", "population", "plbd-ops", "--variant", DU])
    assert result.exit_code == 1, result.output
    assert "plbd-ops (du-code): REFUTED" in result.output
    assert "--variant du-code" in result.output
    bad = CliRunner().invoke(cli, ["prove", "population", "lpa", "--variant", DU])
    assert bad.exit_code == 2 and "no variant 'du-code'" in bad.output
    assert "Traceback" not in bad.output


def test_du_code_refuses_users_with_no_budget(tmp_path: Path) -> None:
    """The code counts eps = 0 users in n and may take its period from one listed first; the
    variant leaves them out, so it refuses such a population instead of running another one."""
    users = {"u1": Fixed(4, Budget(0)), "u2": Fixed(3, Budget(1))}
    users |= {f"u{i}": Fixed(4, Budget(1)) for i in range(3, 11)}
    population = Population(users)
    classes, counts = classes_of(population, "plpa+"), [c.count for c in population.classes]
    with pytest.raises(BudgetError, match="does not model users with eps = 0"):
        population_setup("plpa+", classes, counts, 2, DU)
    # the control: published leaves them out of n, as the paper does
    assert population_setup("plpa+", classes, counts, 2, "published").config.n == 9
    path = tmp_path / "eps0.csv"
    write_requirements(population, path)
    done = CliRunner().invoke(
        cli, ["trace", "plpa+", "-r", str(path), "--decisions", "1,0,0,1", "--variant", DU]
    )
    assert done.exit_code == 2 and "does not model users with eps = 0" in done.output
    assert "Traceback" not in done.output


def test_du_code_names_itself_when_a_window_has_no_sample() -> None:
    wide = [OPSClass(2, Fraction(1), 4), OPSClass(3, Fraction(1), 1)]  # n = 5: w = 3 gives 0
    with pytest.raises(BudgetError, match=r"^du-code OPS: a window of 3 slots"):
        ops(wide, 2, variant=DU)
