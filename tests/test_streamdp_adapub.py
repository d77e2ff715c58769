"""AdaPub (`wevent.mechanisms.streamdp.adapub`), streamdp-benchmark's ``AdaPub.java`` as a central
allocator: its budget rule on hand-checked cases, every window within eps for random publish/skip
sequences, its data path within the protocol, a `wevent run` through the command line, and a
negative control (a kernel that forgets the 0.8 share of the perturbation is refuted by the gate).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import populations, positive_budgets
from wevent.accounting.budget import Budget
from wevent.accounting.formats import read_ledger
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.cli import cli
from wevent.gate import GateOptions, run_gate
from wevent.mechanisms.allocators import TraceSlot, make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import Algebra, ExactAlgebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.kernel import VARIANTS, ClassReq, FixedClass, Plan, classes_of
from wevent.mechanisms.allocators.registry import BUILTIN, data_path_for, model_of
from wevent.mechanisms.central import CentralRunner
from wevent.mechanisms.streamdp import adapub
from wevent.mechanisms.streamdp.adapub import AdaPubKernel, AdaPubPath, measures_deviation
from wevent.mechanisms.streams import SyntheticStream
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups, trace_with_guard

F = Fraction
ALG = ExactAlgebra()


def path_rng() -> np.random.Generator:
    return np.random.default_rng(11)


def _trace(classes: list[ClassReq[Fraction]], decisions: list[bool], variant: str = "sound") -> Any:
    return run_trace(make_kernel("adapub", ALG, classes, variant), decisions)


def _spends(trace: list[TraceSlot], c: int = 0) -> list[Fraction]:
    return [s.dissimilarity[c] + s.publication[c] for s in trace]


def _worst_window(spends: list[Fraction], w: int) -> Fraction:
    return max(sum(spends[max(0, end - w) : end], F(0)) for end in range(1, len(spends) + 1))


# ---------------------------------------------------------------------------- registration


def test_adapub_is_a_registered_central_allocator_with_its_own_data_path() -> None:
    spec = BUILTIN["adapub"]
    assert spec is adapub.SPECS[0] and model_of("adapub") == "central"
    assert (spec.requirement, spec.scaling, spec.variants) == ("fixed", "global", VARIANTS)
    assert isinstance(data_path_for("adapub", 3), AdaPubPath)


# ---------------------------------------------------------------------------- budget rule


def test_one_class_spends_four_fifths_every_slot_and_a_fifth_at_even_slots() -> None:
    """AdaPub.run: lambda_perturb = sensitivity / (eps_p / w), eps_p = 0.8 eps, at every slot
    (the code's slot 0 too); Cluster.cluster: Laplace 2 w / eps_c, eps_c = 0.2 eps, at the
    slots its cluster is open, the code's 1, 3, 5, ... (2, 4, 6, ... from 1)."""
    trace = _trace([FixedClass(3, F(1))], [False] * 6)
    assert [s.status for s in trace] == ["published"] * 6  # forced: decisions are ignored
    assert [s.publication[0] for s in trace] == [F(4, 15)] * 6
    assert [s.dissimilarity[0] for s in trace] == [0, F(1, 15), 0, F(1, 15), 0, F(1, 15)]
    assert _worst_window(_spends(trace), 3) == F(14, 15)  # [2, 4]: 3 * 4/15 + 2 * 1/15


def test_a_window_of_one_slot_spends_exactly_eps_at_even_slots() -> None:
    spends = _spends(_trace([FixedClass(1, F(1))], [True] * 4))
    assert spends == [F(4, 5), F(1), F(4, 5), F(1)]


def test_every_class_is_served_with_the_largest_window_and_the_smallest_budget() -> None:
    trace = _trace([FixedClass(3, F(1)), FixedClass(5, F(1, 2))], [True] * 2)
    for c in (0, 1):
        assert [s.publication[c] for s in trace] == [F(2, 25), F(2, 25)]  # 4/5 * 1/2 / 5
        assert [s.dissimilarity[c] for s in trace] == [0, F(1, 50)]  # 1/5 * 1/2 / 5


def test_the_deviation_slots_alternate_from_slot_two() -> None:
    assert [t for t in range(1, 10) if measures_deviation(t)] == [2, 4, 6, 8]


def test_an_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="adapub: unknown variant 'x'"):
        AdaPubKernel(ALG, [FixedClass(2, F(1))], "x")


fixed_reqs = st.builds(Fixed, st.integers(1, 8), positive_budgets)


@settings(max_examples=80, deadline=None)
@given(pop=populations(max_users=4, reqs=fixed_reqs), dec=st.lists(st.booleans(), max_size=40))
def test_every_window_stays_within_eps_and_the_clip_never_binds(
    pop: Population, dec: list[bool]
) -> None:
    classes = classes_of(pop, "adapub")
    sound = _trace(classes, dec)
    published = _trace(classes, dec, "published")
    assert [(s.status, s.dissimilarity, s.publication) for s in sound] == [
        (s.status, s.dissimilarity, s.publication) for s in published
    ]
    for c, cls in enumerate(classes):
        assert isinstance(cls, FixedClass)
        spends = _spends(sound, c)
        assert all(x >= 0 for x in spends)
        if spends:
            assert _worst_window(spends, cls.w) <= cls.eps
    assert trace_with_guard("adapub", pop, dec).ok


# ---------------------------------------------------------------------------- data path


def test_the_default_release_is_laplace_noise_on_every_count() -> None:
    """get_dummy_partition (the code's default): one noisy count per cell, then a median over
    the fresh value alone; the same draws as Laplace noise added cell by cell."""
    sampled = np.array([5, 0, 12, 3], dtype=np.int64)
    path = AdaPubPath(4)
    got = [path.publish(t, sampled, 2.5, np.random.default_rng(7)) for t in (1, 2, 3)]
    expected = sampled + np.random.default_rng(7).laplace(0.0, 2.5, size=4)
    for release in got:
        assert np.array_equal(release, expected)


def test_the_deviation_is_the_halved_mean_distance_to_the_last_release() -> None:
    path = AdaPubPath(2)
    sampled = np.array([4, 1], dtype=np.int64)
    last = np.array([1.5, 2.0])
    assert path.dissimilarity(2, sampled, last, 0.0, np.random.default_rng(0)) == 3.5 / 4
    assert path.deviations == {2: 3.5 / 4}
    assert path.decide(3, None, 1.0, 1.0) is True


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 50), min_size=1, max_size=8),
    cell=st.integers(0, 7),
    delta=st.sampled_from((-1, 1)),
    last=st.lists(st.floats(-100, 100), min_size=8, max_size=8),
)
def test_the_deviation_has_sensitivity_at_most_one_over_d(
    counts: list[int], cell: int, delta: int, last: list[float]
) -> None:
    d = len(counts)
    a = np.array(counts, dtype=np.int64)
    b = a.copy()
    b[cell % d] += delta  # one user more or less in one cell: L1 distance 1
    ref = np.array(last[:d])
    rng = np.random.default_rng(0)
    path = AdaPubPath(d)
    gap = abs(path.dissimilarity(2, a, ref, 0.0, rng) - path.dissimilarity(2, b, ref, 0.0, rng))
    assert gap <= 1 / (2 * d) + 1e-12 <= 1 / d


def test_the_sensitivity_check_fails_for_an_unscaled_deviation() -> None:
    """Negative control: the summed deviation (not divided by 2d) moves by 1 > 1/d."""

    class _Unscaled(AdaPubPath):
        def dissimilarity(self, t: int, sampled: Any, last: Any, scale: float, rng: Any) -> float:
            return 2 * self.domain * super().dissimilarity(t, sampled, last, scale, rng)

    path, ref, rng = _Unscaled(2), np.zeros(2), np.random.default_rng(0)
    a, b = np.array([3, 1], dtype=np.int64), np.array([4, 1], dtype=np.int64)
    gap = abs(path.dissimilarity(2, a, ref, 0.0, rng) - path.dissimilarity(2, b, ref, 0.0, rng))
    assert gap == 1 > 1 / 2


def test_dimension_grouping_spreads_one_noisy_sum_per_group_of_similar_cells() -> None:
    """get_partition: pivots drawn from [min, max) of the last release; a cell joins the group
    of the largest pivot below its last release; each group's noisy sum spread evenly."""
    path = AdaPubPath(6, dimension_grouping=True)
    path.last = np.array([0.0, 100.0, -0.5, 99.0, 50.0, 100.0])
    labels = path.partition(2, np.random.default_rng(3))
    order = np.argsort(path.last, kind="stable")
    assert np.all(np.diff(labels[order]) >= 0)  # groups follow the last release's order
    assert labels[1] == labels[5]  # equal values: one group
    assert labels[0] == labels[2] == 0  # no pivot (an integer >= 0) below them: the lowest group
    assert len(set(labels.tolist())) > 1
    sampled = np.array([1, 2, 3, 4, 5, 6], dtype=np.int64)
    release = path.publish(2, sampled, 0.0, np.random.default_rng(3))
    for g in set(labels.tolist()):
        members = labels == g
        assert np.allclose(release[members], sampled[members].sum() / members.sum())
    # slot 1 has no release to group by: one cell per group, as the code's slot 0
    assert np.array_equal(
        AdaPubPath(6, dimension_grouping=True).partition(1, path_rng()), np.arange(6)
    )


def test_equal_last_releases_give_one_group_and_truncation_gives_counts() -> None:
    path = AdaPubPath(3, dimension_grouping=True, truncate=True)
    path.last = np.array([2.0, 2.0, 2.0])
    assert path.partition(5, path_rng()).tolist() == [0, 0, 0]
    release = path.publish(5, np.array([3, 0, 1], dtype=np.int64), 4.0, path_rng())
    assert np.all(release >= 0) and np.array_equal(release, np.round(release))


def test_approximate_repeats_the_last_release() -> None:
    last = np.array([1.0, -2.0])
    assert np.array_equal(AdaPubPath(2).approximate(4, last), last)


@pytest.mark.parametrize(("domain", "pivots", "message"), [(0, 20, "domain"), (2, 0, "pivot")])
def test_bad_path_arguments_are_refused(domain: int, pivots: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaPubPath(domain, pivots=pivots)


def _run(seed: int, slots: int = 12) -> tuple[AdaPubPath, list[Any], Guard]:
    population = Population.from_classes({Fixed(4, Budget("1")): 30, Fixed(2, Budget("0.5")): 20})
    sizes = [c.count for c in population.classes]
    stream = SyntheticStream("sin", slots, sizes, seed)
    guard = Guard(population)
    path = AdaPubPath(stream.domain)
    runner = CentralRunner(
        kernel=make_kernel("adapub", ALG, classes_of(population, "adapub")),
        spender=guard,
        groups=class_groups(population, guard),
        sizes=sizes,
        stream=stream,
        data_rng=np.random.default_rng(seed),
        noise_rng=np.random.default_rng(seed + 1),
        mechanism="adapub",
        data_path=path,
    )
    return path, [runner.step() for _ in range(slots)], guard


def test_a_run_measures_at_even_slots_publishes_every_slot_and_repeats_given_its_seed() -> None:
    path, records, _ = _run(5)
    assert sorted(path.deviations) == [2, 4, 6, 8, 10, 12]
    assert {r.status for r in records} == {"published"}
    assert path.closed  # the last slot (12) measured and closed its group
    again = _run(5)[1]
    assert all(np.array_equal(a.release, b.release) for a, b in zip(records, again, strict=True))
    other = _run(6)[1]
    assert not all(
        np.array_equal(a.release, b.release) for a, b in zip(records, other, strict=True)
    )


# ---------------------------------------------------------------------------- command line


def test_wevent_run_adapub_writes_a_ledger_the_checker_accepts(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text(
        "user,w,epsilon\n" + "".join(f"u{i},{3 + i % 3},0.{4 + i % 5}\n" for i in range(30))
    )
    ledger, releases = tmp_path / "run.jsonl", tmp_path / "rel.csv"
    args = ["run", "adapub", "-r", str(req), "--stream", "lns", "--slots", "20", "--seed", "2"]
    result = CliRunner().invoke(cli, [*args, "--ledger", str(ledger), "--releases", str(releases)])
    assert result.exit_code == 0, result.output
    assert "20 of 20 slots run" in result.output and "published 20" in result.output
    parts = {(ch.slot, ch.part) for ch in read_ledger(ledger)}
    assert {t for t, part in parts if part == "dissimilarity"} == set(range(2, 21, 2))
    assert {t for t, part in parts if part == "publication"} == set(range(1, 21))
    assert CliRunner().invoke(cli, ["check", str(ledger), "-r", str(req)]).exit_code == 0


# ---------------------------------------------------------------------------- negative control


class _Unsplit(AdaPubKernel[Any, Any]):
    """AdaPub that publishes with the whole eps / w (forgetting eps_p = 0.8 eps) and still
    measures the deviation with eps / (5 w): window [1, 2] of w = 2 spends 11 eps / 10."""

    def plan(self, state: Any, t: int) -> Plan[Any, Any]:
        plan = super().plan(state, t)
        whole = tuple(self.alg.scale(c.eps, F(1, c.w)) for c in self.served)
        return dataclasses.replace(plan, publication=whole)


def _unsplit(alg: Algebra[Any, Any], classes: Any, variant: str) -> Any:
    return _Unsplit(alg, classes, "published")  # the clip would hide the overspend


UNSPLIT = AllocatorSpec("adapub-unsplit", "fixed", "global", "a broken AdaPub", _unsplit)


def test_the_window_check_fails_for_the_overspending_kernel() -> None:
    spends = _spends(run_trace(_unsplit(ALG, [FixedClass(2, F(1))], "sound"), [True] * 2))
    assert _worst_window(spends, 2) == F(11, 10)


def test_the_gate_refutes_the_overspending_kernel_with_a_replayable_counterexample() -> None:
    options = GateOptions(w_max=2, classes=1, examples=20, e2e_runs=1, conformance_inputs=5)
    report = run_gate(f"{__name__}:UNSPLIT", options)
    assert report.verdict == "refuted", "\n".join(report.describe())
    assert report.stage("proof").status == "failed"
    cex = report.counterexample
    assert cex is not None and cex.replays()
