"""PeGaSus as streamdp-benchmark runs it (`wevent.mechanisms.streamdp.pegasus`): the budget
kernel's rule on hand-checked cases (Pegasus.java ``init``, lines 46-51 of the snapshot read in
docs/peers.md), every window within eps for random decisions, the data path (perturber, grouper,
smoother; the grouper's query within the dissimilarity contract), a `wevent run` smoke test, and
a negative control: an over-spending PeGaSus kernel is refuted by the prover and the gate."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.formats import read_ledger
from wevent.cli import cli
from wevent.gate import GateOptions, run_gate
from wevent.mechanisms.allocators import make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import Algebra, ExactAlgebra, FloatCountAlgebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.kernel import ClassReq, FixedClass, Kernel, Plan
from wevent.mechanisms.allocators.registry import BUILTIN, CENTRAL, data_path_for
from wevent.mechanisms.streamdp.pegasus import (
    SPECS,
    PegasusKernel,
    PegasusPath,
    PegasusState,
)
from wevent.proofs.central import Scope, prove_allocator

F = Fraction
ALG = ExactAlgebra()


def _spent(kernel: Kernel[Fraction, bool, Any], decisions: Sequence[bool]) -> list[list[F]]:
    """Per slot, per class: the dissimilarity plus the publication spent."""
    return [
        [d + p for d, p in zip(s.dissimilarity, s.publication, strict=True)]
        for s in run_trace(kernel, decisions)
    ]


# ---------------------------------------------------------------------------- the kernel


def test_registered_as_a_central_allocator_with_its_own_data_path() -> None:
    assert "pegasus" in CENTRAL and BUILTIN["pegasus"] is SPECS[0]
    spec = SPECS[0]
    assert (spec.requirement, spec.scaling, spec.variants) == ("fixed", "global", ("sound",))
    path = data_path_for("pegasus", 3)
    assert isinstance(path, PegasusPath) and path.regroup  # as the benchmark runs it


def test_every_slot_is_forced_with_a_fifth_and_four_fifths_of_eps_over_w() -> None:
    """Pegasus.java ``init`` (lines 46-49): eps_per_ts = eps / w, eps_p = 0.8 of it (perturber),
    eps_g = 0.2 (grouper); served with the largest window and the smallest budget."""
    classes: list[ClassReq[F]] = [FixedClass(4, F(1)), FixedClass(2, F(3, 5))]
    kernel = make_kernel("pegasus", ALG, classes)
    trace = run_trace(kernel, [False, True, False, False, True])
    for s in trace:  # served (4, 3/5): eps / w = 3/20
        assert s.status == "published"  # forced: the decision is ignored
        assert s.dissimilarity == (F(3, 100), F(3, 100))
        assert s.publication == (F(3, 25), F(3, 25))


def test_a_window_of_w_slots_spends_exactly_eps() -> None:
    kernel = make_kernel("pegasus", ALG, [FixedClass(3, F(7, 10))])
    spent = [row[0] for row in _spent(kernel, [True] * 7)]
    assert all(sum(spent[i : i + 3]) == F(7, 10) for i in range(5))


def test_in_doubles_the_shares_are_the_codes_products() -> None:
    """``--arithmetic float``: eps / w as a double, then ``* 0.8`` and ``* 0.2`` (literals)."""
    kernel = make_kernel("pegasus", FloatCountAlgebra(), [FixedClass(3, F(1))])
    plan = kernel.plan(kernel.start(), 1)
    per = 1.0 / 3
    assert plan.publication == (F(per * 0.8),) and plan.dissimilarity == (F(per * 0.2),)


def test_in_doubles_a_window_rounds_past_eps_as_uniforms_does() -> None:
    """The module docstring's example: w = 8, eps = 0.4, the eighth slot's spend in doubles."""
    kernel = make_kernel("pegasus", FloatCountAlgebra(), [FixedClass(8, F(2, 5))])
    window = sum(row[0] for row in _spent(kernel, [True] * 8))
    assert window - F(2, 5) == F(7, 90071992547409920)
    exact = make_kernel("pegasus", ALG, [FixedClass(8, F(2, 5))])
    assert sum(row[0] for row in _spent(exact, [True] * 8)) == F(2, 5)


def test_only_the_sound_variant() -> None:
    with pytest.raises(Exception, match="no variant 'published'"):
        make_kernel("pegasus", ALG, [FixedClass(2, F(1))], "published")


windows = st.lists(
    st.builds(
        FixedClass,
        st.integers(1, 8),
        st.fractions(min_value=F(1, 100), max_value=5, max_denominator=100),
    ),
    min_size=1,
    max_size=4,
)


def _windows_hold(classes: Sequence[FixedClass[F]], spent: list[list[F]]) -> bool:
    for i, c in enumerate(classes):
        series = [row[i] for row in spent]
        for end in range(1, len(series) + 1):
            if sum(series[max(0, end - c.w) : end]) > c.eps:
                return False
    return True


@settings(max_examples=80, deadline=None)
@given(classes=windows, decisions=st.lists(st.booleans(), min_size=1, max_size=30))
def test_every_window_stays_within_eps(classes: list[FixedClass[F]], decisions: list[bool]) -> None:
    kernel = make_kernel("pegasus", ALG, classes)
    assert _windows_hold(classes, _spent(kernel, decisions))


# ---------------------------------------------------------------------------- negative control


class _WholeSlotToPublication(PegasusKernel[Any, Any]):
    """PeGaSus that gives the perturber all of eps / w and the grouper its 0.2 on top (the
    split applied to the dissimilarity only): 1.2 eps per window."""

    def plan(self, state: PegasusState, t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        whole = self.alg.scale(self.served.eps, F(1, self.served.w))
        return dataclasses.replace(plan, publication=(whole,) * len(self.classes))


def _overspending(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    return _WholeSlotToPublication(alg, classes, variant)


OVERSPENDING = AllocatorSpec(
    "pegasus-overspending", "fixed", "global", "a broken PeGaSus (tests)", _overspending
)


@settings(max_examples=20, deadline=None)
@given(one=windows.map(lambda c: c[:1]), decisions=st.lists(st.booleans(), min_size=8, max_size=20))
def test_the_window_property_fails_for_the_overspending_kernel(
    one: list[FixedClass[F]], decisions: list[bool]
) -> None:
    """(One class: with several, the served one is the tightest and the others may have room.)"""
    kernel = OVERSPENDING.kernel(ALG, one)
    assert not _windows_hold(one, _spent(kernel, decisions))


def test_the_prover_proves_pegasus_and_refutes_the_overspending_kernel() -> None:
    scope = Scope(classes=1, w_max=3)
    assert prove_allocator("pegasus", scope=scope).status == "proved"
    broken = prove_allocator(
        "tests.test_streamdp_pegasus:OVERSPENDING", allocator=OVERSPENDING, scope=scope
    )
    assert broken.status == "counterexample" and broken.counterexample is not None


def test_the_gate_refutes_the_overspending_kernel() -> None:
    """(The gate's acceptance of ``pegasus`` itself: tests/test_gate_mutants.py, which gates every
    sound built-in.)"""
    options = GateOptions(w_max=2, classes=2, examples=20, e2e_runs=1, conformance_inputs=5)
    bad = run_gate("tests.test_streamdp_pegasus:OVERSPENDING", options)
    assert bad.verdict == "refuted" and bad.exit_code == 1
    assert bad.stage("proof").status == "failed"
    cex = bad.counterexample
    assert cex is not None and cex.replays()
    # budgets symbolic (a test module's kernel): the window spends 6/5 of its bound, whatever
    # budget the solver picked
    assert cex.failure.spent / cex.failure.bound == F(6, 5)


# ---------------------------------------------------------------------------- the data path


def _drive(
    path: PegasusPath,
    counts: Sequence[Sequence[int]],
    seed: int,
    pub_scale: float = 1.0,
    dis_scale: float = 1.0,
) -> list[np.ndarray[Any, Any]]:
    """Run the path as the runner does with a forced kernel: dissimilarity, then publish."""
    rng = np.random.default_rng(seed)
    last = np.zeros(path.domain)
    out = []
    for t, row in enumerate(counts, start=1):
        sampled = np.array(row, dtype=np.int64)
        path.dissimilarity(t, sampled, last, dis_scale, rng)
        last = path.publish(t, sampled, pub_scale, rng)
        out.append(last)
    return out


FLAT = [[50, 0, 20]] * 25


def test_the_path_is_deterministic_given_its_generator() -> None:
    a = _drive(PegasusPath(3), FLAT, seed=4)
    b = _drive(PegasusPath(3), FLAT, seed=4)
    c = _drive(PegasusPath(3), FLAT, seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_regroup_releases_the_perturbed_counts_as_the_code_runs() -> None:
    """DEBUG_FORCE_NEW_GROUP_EACH_TIMESTAMP = true: every release is the count plus Laplace
    noise (the median of one value), and the grouper draws nothing."""
    got = _drive(PegasusPath(3, regroup=True), FLAT, seed=2, pub_scale=2.0)
    rng = np.random.default_rng(2)
    for release in got:
        expected = np.array(FLAT[0]) + rng.laplace(0.0, 2.0, size=3)
        assert np.array_equal(release, expected)


def test_a_flat_stream_grows_groups_and_each_release_is_its_groups_median() -> None:
    path = PegasusPath(3)
    rng = np.random.default_rng(0)
    last = np.zeros(3)
    longest = 0
    for t, row in enumerate(FLAT, start=1):
        sampled = np.array(row, dtype=np.int64)
        path.dissimilarity(t, sampled, last, 1.0, rng)
        last = path.publish(t, sampled, 0.01, rng)
        for j in range(3):
            group = path.group(j)
            assert last[j] == np.median(group)
            assert abs(group[-1] - row[j]) < 1  # this slot's perturbed count (scale 0.01)
            longest = max(longest, len(group))
    assert longest >= 3


def test_a_jump_closes_every_group_and_the_next_slot_opens_new_ones() -> None:
    path = PegasusPath(2)
    _drive(path, [[10, 10]] * 6 + [[5000, 5000], [5000, 5000]], seed=1, pub_scale=0.01)
    # the jump slot was a group of its own (closed), so the slot after it opened a new one
    assert all(len(path.group(j)) == 1 for j in range(2))
    assert all(abs(path.group(j)[0] - 5000) < 1 for j in range(2))


def test_a_slot_that_opens_every_group_asks_nothing() -> None:
    path = PegasusPath(2)
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    assert path.dissimilarity(1, np.array([4, 5]), np.zeros(2), 1.0, rng) == 0.0
    assert rng.bit_generator.state == before  # no draw, no count read


def test_approximate_repeats_the_last_release_and_closes_the_groups() -> None:
    path = PegasusPath(2)
    _drive(path, [[3, 3]] * 3, seed=1)
    last = np.array([1.5, 2.5])
    assert path.approximate(4, last) is last
    rng = np.random.default_rng(0)
    assert path.dissimilarity(5, np.array([3, 3]), last, 1.0, rng) == 0.0
    assert path.decide(5, None, 1.0, 1.0) is True


@pytest.mark.parametrize(
    ("smoother", "expected"), [("median", 2.0), ("average", 3.0), ("js", (6 - 3) / 3 + 3)]
)
def test_smoothers(smoother: str, expected: float) -> None:
    """Pegasus.java's medianSmoother, averageSmoother, jsSmoother on the group (1, 2, 6)."""
    assert PegasusPath(1, smoother=smoother)._smooth([1.0, 2.0, 6.0]) == expected


@pytest.mark.parametrize(("args", "message"), [((0,), "at least one cell"), ((2,), "smoother")])
def test_bad_path_arguments(args: tuple[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PegasusPath(*args, smoother="median" if args[0] == 0 else "mode")


@settings(max_examples=200, deadline=None)
@given(
    group=st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=6),
    counts=st.lists(st.integers(0, 1000), min_size=1, max_size=5),
    cell=st.integers(0, 4),
    sign=st.sampled_from((-1, 1)),
)
def test_the_grouper_query_has_l1_sensitivity_at_most_one_over_d(
    group: list[float], counts: list[int], cell: int, sign: int
) -> None:
    """One user added or removed moves one count by 1; the query dev / (2 d) then moves by at
    most 1/d in L1 (the contract of `DataPath.dissimilarity`). The unscaled deviation can move
    by more (the negative control: the scaling is needed)."""
    d = len(counts)
    cell %= d
    path = PegasusPath(d)
    for j in range(d):
        path._groups[j] = list(group)
    path._closed[:] = False
    here = np.array(counts, dtype=np.int64)
    there = here.copy()
    there[cell] += sign if here[cell] > 0 else 1
    dev_here, dev_there = path.deviation(here), path.deviation(there)
    moved = float(np.abs(dev_here - dev_there).sum())
    assert moved / (2 * d) <= 1 / d + 1e-9
    assert moved < 2 + 1e-9


def test_the_unscaled_deviation_exceeds_the_contract() -> None:
    path = PegasusPath(4)
    for j in range(4):
        path._groups[j] = [0.0, 0.0, 0.0]
    path._closed[:] = False
    moved = np.abs(path.deviation(np.array([0, 0, 0, 0])) - path.deviation(np.array([1, 0, 0, 0])))
    assert moved.sum() == 1.5 > 1 / 4  # 2k/(k+1) for k = 3, over the 1/d allowed unscaled


# ---------------------------------------------------------------------------- the command line


def test_wevent_run_pegasus(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\n" + "".join(f"u{i},{4 + i % 2},1\n" for i in range(40)))
    ledger, releases = tmp_path / "run.jsonl", tmp_path / "rel.csv"
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "pegasus",
            "-r",
            str(req),
            "--stream",
            "lns",
            "--slots",
            "30",
            "--seed",
            "1",
            "--ledger",
            str(ledger),
            "--releases",
            str(releases),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "30 of 30 slots run" in result.output
    assert CliRunner().invoke(cli, ["check", str(ledger), "-r", str(req)]).exit_code == 0
    rows = releases.read_text().splitlines()[1:]
    assert rows and all(r.split(",")[1] == "published" for r in rows)
    amounts = {(ch.part, ch.amount) for ch in read_ledger(ledger)}
    assert amounts == {("dissimilarity", F(1, 25)), ("publication", F(4, 25))}  # eps/w = 1/5
