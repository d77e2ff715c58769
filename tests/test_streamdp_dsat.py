"""DSAT (`wevent.mechanisms.streamdp.dsat`): the kernel's budget rule on hand-checked cases (the
lines of streamdp-benchmark's ``DSAT.java`` it restates), every window within eps for random
publish/skip sequences, the sound variant's clip never binding, the code's rule (``streamdp-code``)
and an over-spending mutant refuted with replayable counterexamples, the data path, and
``wevent run dsat`` end to end."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import populations, positive_budgets
from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.cli import cli
from wevent.gate import GateOptions, run_gate
from wevent.mechanisms.allocators import run_trace
from wevent.mechanisms.allocators.algebra import Algebra, ExactAlgebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.kernel import (
    STREAMDP_CODE,
    ClassReq,
    FixedClass,
    Plan,
    classes_of,
)
from wevent.mechanisms.allocators.registry import BUILTIN, data_path_for
from wevent.mechanisms.central import CentralRunner
from wevent.mechanisms.datapath import DataPath
from wevent.mechanisms.streamdp.dsat import (
    SPECS,
    DsatKernel,
    DsatPath,
    cutoff,
    window_from_scales,
)
from wevent.mechanisms.streams import SyntheticStream
from wevent.proofs.central import Scope, prove_allocator
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups, trace_with_guard

ALG = ExactAlgebra()


def _trace(w: int, eps: F, decisions: Sequence[bool], variant: str = "sound") -> list[Any]:
    return run_trace(DsatKernel(ALG, [FixedClass(w, eps)], variant), decisions)


def _spends(trace: list[Any]) -> list[F]:
    return [s.dissimilarity[0] + s.publication[0] for s in trace]


# ---------------------------------------------------------------------------- the budget rule


def test_registered_as_a_central_fixed_global_allocator_with_its_own_path() -> None:
    assert BUILTIN["dsat"] is SPECS[0]
    spec = SPECS[0]
    assert (spec.requirement, spec.scaling, spec.variants) == (
        "fixed",
        "global",
        ("sound", STREAMDP_CODE),
    )
    assert isinstance(data_path_for("dsat", 4), DsatPath)


def test_cutoff_is_the_codes_ceiling() -> None:
    """``Math.ceil(w * CUTOFFPOINT_RATION)`` (run, first lines): the double product has the
    exact ceiling for every w <= 2000."""
    assert [cutoff(w) for w in (1, 6, 7, 40, 100, 200)] == [1, 1, 2, 6, 15, 30]
    assert all(cutoff(w) == math.ceil(F(15, 100) * w) for w in range(1, 2001))


def test_sound_w2_by_hand() -> None:
    """w = 2, eps = 1: c = 1, k = 1 - c/w = 1/2 (computeK's cap), eps_n = 1/10 (SHARE_EPS_NO_TUPLES).
    Slot 1 (the code's t == 0): n's estimate 1/10 and a forced publication eps_2f / c =
    (9/10)(1/2) = 9/20. Slots 2-3 (t <= skipping_points_M): repeated, nothing spent. From slot 4
    (t > w): a test eps_1 / w = 1/4 and a publication eps_2 / c = 1/2 when it fits in the window;
    slot 5 then has no room and is nullified (the code would test and publish again)."""
    trace = _trace(2, F(1), [True] * 7)
    assert [s.status for s in trace] == [
        "published",
        "nullified",
        "nullified",
        "published",
        "nullified",
        "published",
        "nullified",
    ]
    assert [s.dissimilarity[0] for s in trace] == [F(1, 10), 0, 0, F(1, 4), 0, F(1, 4), 0]
    assert [s.publication[0] for s in trace] == [F(9, 20), 0, 0, F(1, 2), 0, F(1, 2), 0]


def test_sound_w10_by_hand() -> None:
    """w = 10, eps = 1: c = 2, k = 4/5. First window (slots 1..11, the code's t <= w): tests of
    eps_1f / w = (9/10)(4/5)/10 = 9/125 and publications of eps_2f / c = (9/10)(1/5)/2 = 9/100;
    no test once c slots have published (Line 4). Then tests of eps_1 / w = 2/25 and
    publications of eps_2 / c = 1/10."""
    decisions = [False] * 4 + [True] + [False] * 7 + [True, True, False, True]
    trace = _trace(10, F(1), decisions)
    status = [s.status for s in trace]
    assert status[:5] == ["published", "nullified", "nullified", "skipped", "published"]
    assert status[5:11] == ["nullified"] * 6  # two publications in the first window: c = 2
    # slot 14: window [5, 14] holds slot 5's 9/100 and slot 13's 1/10, leaving 1/100 of
    # eps_2 = 1/5: nullified; slot 16's window [7, 16] has room again
    assert status[11:] == ["skipped", "published", "nullified", "skipped", "published"]
    assert trace[0].dissimilarity[0] == F(1, 10) and trace[0].publication[0] == F(9, 100)
    assert trace[3].dissimilarity[0] == F(9, 125) and trace[4].publication[0] == F(9, 100)
    assert trace[11].dissimilarity[0] == F(2, 25) and trace[12].publication[0] == F(1, 10)
    # window [1, 10]: 1/10 + two tests + two publications, well within 1
    assert sum(_spends(trace)[:10]) == F(1, 10) + 2 * F(9, 125) + 2 * F(9, 100)


def test_streamdp_code_w2_breaks_window_4_5() -> None:
    """The code's rule (second-window branch): eps_rm = eps_2 minus the publications of the code's
    slots [t-w, t-2] (``copyOfRange`` excludes its end), so slot 5 does not see slot 4's
    publication; each test costs what its noise ``2 c delta / eps_1`` certifies at sensitivity
    1/d, eps_1 / (4c) = 1/8, and slot 1 publishes eps - eps_1f = 11/20."""
    trace = _trace(2, F(1), [True] * 6, STREAMDP_CODE)
    assert [s.status for s in trace][:5] == ["published"] + ["nullified"] * 2 + ["published"] * 2
    assert trace[0].publication[0] == F(11, 20)
    assert _spends(trace)[3] == _spends(trace)[4] == F(1, 8) + F(1, 2)
    assert _spends(trace)[3] + _spends(trace)[4] == F(5, 4)


def test_streamdp_code_first_window_spends_eps_n_on_top() -> None:
    """w = 1: c = 1 and k = 0, so eps_2f = eps - eps_1f = eps: slot 1 spends eps_n + eps."""
    trace = _trace(1, F(1), [True], STREAMDP_CODE)
    assert _spends(trace) == [F(11, 10)]
    assert _spends(_trace(1, F(1), [True])) == [F(1)]


def test_nonpersonalized_serves_the_largest_window_and_smallest_budget() -> None:
    classes: list[ClassReq[F]] = [FixedClass(2, F(1)), FixedClass(10, F(3))]
    trace = run_trace(DsatKernel(ALG, classes), [True] * 3)
    served = _trace(10, F(1), [True] * 3)
    for a, b in zip(trace, served, strict=True):
        assert a.dissimilarity == (b.dissimilarity[0],) * 2
        assert a.publication == (b.publication[0],) * 2


def _windows_within(trace: list[Any], w: int, eps: F) -> bool:
    spends = _spends(trace)
    return all(sum(spends[max(0, end - w) : end]) <= eps for end in range(1, len(spends) + 1))


@settings(max_examples=200, deadline=None)
@given(
    w=st.integers(1, 30),
    eps=positive_budgets,
    decisions=st.lists(st.booleans(), min_size=1, max_size=90),
)
def test_every_window_within_eps(w: int, eps: Any, decisions: list[bool]) -> None:
    trace = _trace(w, F(eps), decisions)
    assert _windows_within(trace, w, F(eps))
    assert min(min(s.dissimilarity + s.publication) for s in trace) >= 0


@settings(max_examples=60, deadline=None)
@given(
    pop=populations(max_users=4, reqs=st.builds(Fixed, st.integers(1, 12), positive_budgets)),
    decisions=st.lists(st.booleans(), min_size=1, max_size=50),
)
def test_every_users_windows_pass_the_guard(pop: Population, decisions: list[bool]) -> None:
    result = trace_with_guard("dsat", pop, decisions)
    assert result.ok, result.refusal or result.negative


@settings(max_examples=150, deadline=None)
@given(
    w=st.integers(1, 30),
    eps=positive_budgets,
    decisions=st.lists(st.booleans(), min_size=1, max_size=90),
)
def test_the_sound_clip_never_binds_in_exact_arithmetic(
    w: int, eps: Any, decisions: list[bool]
) -> None:
    classes = [FixedClass(w, F(eps))]
    clipped = run_trace(DsatKernel(ALG, classes), decisions)
    plain = run_trace(DsatKernel(ALG, classes, clip=False), decisions)

    # what a slot spends, and what it would publish unless nullified (a nullified slot's
    # candidate is never spent: the clip may lower it)
    def spent(trace: list[Any]) -> list[tuple[object, ...]]:
        return [
            (s.status, s.dissimilarity, s.publication, s.status == "nullified" or s.candidate)
            for s in trace
        ]

    assert spent(clipped) == spent(plain)


def test_the_window_check_fails_on_the_codes_rule() -> None:
    """Negative control for the property above: the same check refutes streamdp-code."""
    assert not _windows_within(_trace(2, F(1), [True] * 6, STREAMDP_CODE), 2, F(1))


# ---------------------------------------------------------------------------- refutations


def _inflated(kernel: DsatKernel[Any, Any]) -> DsatKernel[Any, Any]:
    """Each test charged eps_1 / c (the code's own bookkeeping, ``used_budgets_eps_1[t]``)
    instead of eps_1 / w: w tests then spend w/c times eps_1."""
    factor = F(kernel.window, kernel.points)
    kernel.test = kernel.alg.scale(kernel.test, factor)
    kernel.test_first = kernel.alg.scale(kernel.test_first, factor)
    return kernel


def _overspending(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    """The sound kernel with inflated tests and no clip."""
    return _inflated(DsatKernel(alg, classes, variant, clip=False))


def test_the_clip_binds_on_an_overspending_kernel() -> None:
    """Negative control for the clip property: with inflated tests the clip changes the spends
    (and keeps the windows within eps), without it a window breaks."""
    classes = [FixedClass(2, F(1))]
    decisions = [True, False, False, False, True, True]  # slot 4 tests, slot 5 tests and publishes
    clipped = run_trace(_inflated(DsatKernel(ALG, classes)), decisions)
    plain = run_trace(_inflated(DsatKernel(ALG, classes, clip=False)), decisions)
    assert _spends(clipped) != _spends(plain)
    assert _windows_within(clipped, 2, F(1)) and not _windows_within(plain, 2, F(1))


OVERSPENDING = AllocatorSpec("dsat-overspending", "fixed", "global", "mutant", _overspending)


def test_prover_refutes_the_overspending_mutant() -> None:
    proof = prove_allocator(
        "tests.test_streamdp_dsat:OVERSPENDING",
        allocator=OVERSPENDING,
        scope=Scope(classes=1, w_max=3),
    )
    assert proof.status == "counterexample"
    cex = proof.counterexample
    assert cex is not None and cex.replays()
    assert cex.failure.spent > cex.failure.bound


def test_prover_proves_the_sound_kernel_at_the_same_scope() -> None:
    proof = prove_allocator("dsat", scope=Scope(classes=1, w_max=3))
    assert proof.status == "proved"


def test_gate_refutes_streamdp_code_and_trace_replays_it(tmp_path: Path) -> None:
    opts = GateOptions(
        w_max=2,
        classes=1,
        examples=20,
        e2e_runs=1,
        conformance_inputs=5,
        search_runs=20,
        variant=STREAMDP_CODE,
    )
    report = run_gate("dsat", opts)
    assert report.verdict == "refuted", "\n".join(report.describe())
    cex = report.counterexample
    assert cex is not None and cex.replays()
    from wevent.accounting.formats import write_requirements

    csv = tmp_path / "cex.csv"
    write_requirements(cex.population, csv)
    args = cex.command(str(csv)).split()
    assert args[:3] == ["wevent", "trace", "dsat"] and STREAMDP_CODE in args
    result = CliRunner().invoke(cli, args[1:])
    assert result.exit_code == 1 and "REFUSED by the guard" in result.output


# ---------------------------------------------------------------------------- the data path


def _run(
    w: int, eps: str, slots: int, seed: int, variant: str = "sound", domain: int = 4
) -> tuple[list[Any], DataPath]:
    pop = Population({f"u{i}": Fixed(w, Budget(eps)) for i in range(40)})
    guard = Guard(pop)
    stream = SyntheticStream("sin", slots, [40], seed, domain)
    path = data_path_for("dsat", domain)
    assert path is not None
    runner = CentralRunner(
        kernel=DsatKernel(ALG, classes_of(pop, "dsat"), variant),
        spender=guard,
        groups=class_groups(pop, guard),
        sizes=[40],
        stream=stream,
        data_rng=np.random.default_rng(seed),
        noise_rng=np.random.default_rng(seed + 1),
        mechanism="dsat",
        data_path=path,
    )
    return [runner.step() for _ in range(slots)], path


def test_the_path_is_deterministic_given_its_seed() -> None:
    a, _ = _run(6, "1", 30, 5)
    b, _ = _run(6, "1", 30, 5)
    c, _ = _run(6, "1", 30, 6)
    assert [(r.status, r.release.tolist()) for r in a] == [
        (r.status, r.release.tolist()) for r in b
    ]
    assert [r.release.tolist() for r in a] != [r.release.tolist() for r in c]


def test_unpublished_slots_repeat_the_last_release() -> None:
    records, _ = _run(6, "1", 40, 2)
    assert records[0].status == "published"
    for before, now in itertools.pairwise(records):
        if now.status != "published":
            assert now.release.tolist() == before.release.tolist()
    assert any(r.status == "published" for r in records[4:])


@pytest.mark.parametrize(
    ("variant", "w", "eps", "domain"),
    [
        ("sound", 1, "1", 2),  # (streamdp-code overspends slot 1 at w = 1: refused)
        ("sound", 6, "0.3", 4),
        ("sound", 40, "2", 3),
        (STREAMDP_CODE, 2, "1", 2),
        (STREAMDP_CODE, 6, "0.3", 4),
        (STREAMDP_CODE, 40, "2", 3),
    ],
)
def test_the_path_recovers_the_window_from_slot_1s_scales(
    variant: str, w: int, eps: str, domain: int
) -> None:
    _, path = _run(w, eps, 2, 1, variant, domain)
    assert isinstance(path, DsatPath)
    assert path.window == w
    assert path.tuples is not None and path.code_k is not None
    assert path.code_k in (0.0, 1 - cutoff(w) / w)


def test_window_from_scales_refuses_scales_of_no_dsat_run() -> None:
    assert window_from_scales(4, 0.0, 1.0) is None
    assert window_from_scales(4, 1.0, 1e-9) is None  # w would be below 1


def test_the_threshold_falls_by_the_codes_gain_and_decides_at_or_above() -> None:
    """Lines 6-9 with the code's integer quotient (0): w = 40, c = 6, the error is c/w = 0.15,
    u = |0.15 - 0.05| / 0.05 * 0.5 = 1, the threshold falls by 1 per test down to 0, and the slot
    publishes iff the noisy dissimilarity is at least the threshold."""
    path = DsatPath(4, window=40)
    path.threshold = 2.5
    assert path.decide(5, 1.0, 0.0, 1.0) is False and path.threshold == pytest.approx(1.5)
    assert path.decide(6, 1.0, 0.0, 1.0) is True and path.threshold == pytest.approx(0.5)
    assert path.decide(7, -0.1, 0.0, 1.0) is False and path.threshold == 0.0
    assert path.decide(8, 0.0, 0.0, 1.0) is True


def test_slot_1_measures_the_number_of_tuples_at_sensitivity_1_over_d() -> None:
    """The count's sensitivity is 1; the query is sum / d (1/d) and n = d x."""
    path = DsatPath(4)
    sampled = np.array([10, 20, 30, 40], dtype=np.int64)
    x = path.dissimilarity(1, sampled, np.zeros(4), 1e-12, np.random.default_rng(0))
    assert x == pytest.approx(25.0) and path.tuples == pytest.approx(100.0)
    assert path.threshold is None  # drawn at the first test


# ---------------------------------------------------------------------------- command line


def test_wevent_run_dsat_writes_a_ledger_the_checker_accepts(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text(
        "user,w,epsilon\n" + "".join(f"u{i},{4 + i % 3},0.{5 + i % 4}\n" for i in range(30))
    )
    ledger, releases = tmp_path / "run.jsonl", tmp_path / "rel.csv"
    runner = CliRunner()
    args = ["run", "dsat", "-r", str(req), "--stream", "lns", "--slots", "50", "--seed", "1"]
    result = runner.invoke(cli, [*args, "--ledger", str(ledger), "--releases", str(releases)])
    assert result.exit_code == 0, result.output
    assert "50 of 50 slots run" in result.output
    assert runner.invoke(cli, ["check", str(ledger), "-r", str(req)]).exit_code == 0
    rows = releases.read_text().splitlines()
    assert rows[0] == "slot,status,cell,release,truth" and len(rows) == 1 + 50 * 2
    bad = runner.invoke(cli, [*args, "--variant", "published"])
    assert bad.exit_code == 2 and "dsat: no variant 'published'" in bad.output


def test_the_induction_steps_past_the_first_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first window (slots up to w + 1) has rules of its own, so `--unbounded` starts its
    steps at w + 2 (`induction_schedule`): a kernel that overspends only in the steady rule at
    w = 1 is refuted, where steps at slot 2 alone would have proved it."""
    from wevent.mechanisms.streamdp import dsat as module
    from wevent.proofs.central import Scope, prove_allocator

    original = module.DsatKernel.plan

    def doubled(self: Any, state: Any, t: int) -> Any:
        plan = original(self, state, t)
        if self.window == 1 and t >= 3:
            doubled_pub = tuple(self.alg.scale(x, 2) for x in plan.publication)
            plan = Plan(plan.nullified, plan.forced, plan.dissimilarity, doubled_pub)
        return plan

    proof = prove_allocator("dsat", scope=Scope(classes=1, w_max=1), unbounded=True)
    assert proof.status == "proved"
    monkeypatch.setattr(module.DsatKernel, "plan", doubled)
    refuted = prove_allocator("dsat", scope=Scope(classes=1, w_max=1), unbounded=True)
    assert refuted.status == "counterexample", refuted.reason
