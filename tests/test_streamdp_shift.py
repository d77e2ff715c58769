"""bd-shift and ba-shift: Kellaris' BD and BA with budget shifting, as streamdp-benchmark's
BD.java and BA.java run them (`wevent.mechanisms.streamdp.shift`).

* the budget rule on hand-checked cases (exact fractions), restating BD.java's and BA.java's
  ``run`` (0-based slots there, 1-based here), the split's threshold ``2w <= d`` and its
  continuity there, and the half split's relation to wevent's ``bd`` and ``pba``;
* every window within eps for random publish/skip sequences, domains and requirements (a
  hypothesis property, with a negative control: the same check fails on an over-spending kernel);
* the prover and the gate: the allocators made for d = 5 are proved (shifted for w <= 2), an
  over-spending version is refuted with a counterexample `wevent trace` replays;
* the data path: Kellaris' rule, deterministic given a seed, the approximation from releases
  only, and the noise scales the runner gives it (1/eps for the shifted dissimilarity);
* `wevent run` through the command line, for the registered allocators and for d = 5 as
  ``module:attribute``; bad input refused in one line.
"""

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

from wevent.accounting.budget import Budget
from wevent.accounting.formats import read_ledger, write_requirements
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.cli import cli
from wevent.errors import AllocatorError, InputError
from wevent.gate import GateOptions, run_gate
from wevent.mechanisms.allocators import make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import Algebra, ExactAlgebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.kernel import ClassReq, FixedClass, classes_of
from wevent.mechanisms.allocators.registry import BUILTIN, CENTRAL, data_path_for, model_of
from wevent.mechanisms.central import CentralRunner
from wevent.mechanisms.datapath import FloatArray, IntArray, KellarisPath
from wevent.mechanisms.streamdp import shift
from wevent.mechanisms.streamdp.shift import (
    SPLIT_DOMAIN,
    ShiftKernel,
    ShiftPath,
    shift_factory,
    shift_spec,
)
from wevent.mechanisms.streams import SyntheticStream
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups, trace_with_guard

F = Fraction
ALG = ExactAlgebra()
NAMES = ("bd-shift", "ba-shift")

# The allocators made for d = 5 (the shift for w <= 2, the half split for w >= 3: both within
# the gate's w <= 3), named as module:attribute.
BD5 = shift_spec("bd-shift", 5)
BA5 = shift_spec("ba-shift", 5)


class _Overspending(ShiftKernel[Any, Any]):
    """A broken shift: the publications get the whole eps per window, the dissimilarity still
    eps / d per slot (a window can reach eps + w eps / d)."""

    def _pub_window(self, c: FixedClass[Any]) -> Any:
        return c.eps if self.shifted else super()._pub_window(c)


def _overspending(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
    return _Overspending("bd-shift", alg, classes, variant, 5)


OVERSPEND = dataclasses.replace(BD5, name="bd-shift-overspend", factory=_overspending)


def _kernel(name: str, w: int, eps: Fraction, d: int, variant: str = "sound") -> Any:
    return ShiftKernel(name, ALG, [FixedClass(w, eps)], variant, d)


def _spends(kernel: Any, decisions: list[bool]) -> list[tuple[str, Fraction, Fraction]]:
    """Per slot of a one-class kernel: status, dissimilarity and publication spent."""
    return [(s.status, s.dissimilarity[0], s.publication[0]) for s in run_trace(kernel, decisions)]


def _worst_window(
    kernel: Any, classes: Sequence[FixedClass[Fraction]], decisions: list[bool]
) -> Fraction:
    """The largest ``spent / eps_i`` over every class i and every window of w_i slots."""
    trace = run_trace(kernel, decisions)
    worst = F(0)
    for i, c in enumerate(classes):
        per_slot = [s.dissimilarity[i] + s.publication[i] for s in trace]
        for end in range(1, len(per_slot) + 1):
            worst = max(worst, sum(per_slot[max(0, end - c.w) : end], F(0)) / c.eps)
    return worst


# ---------------------------------------------------------------------------- registration


def test_registered_central_after_the_dynamic_family_with_kellaris_path() -> None:
    first = CENTRAL.index("dpba") + 1  # right after the dynamic family
    assert CENTRAL[first : first + 2] == NAMES
    assert [model_of(n) for n in NAMES] == ["central", "central"]
    for name, spec in zip(NAMES, shift.SPECS, strict=True):
        assert BUILTIN[name] is spec and spec.name == name
        assert (spec.requirement, spec.scaling, spec.variants) == (
            "fixed",
            "global",
            ("sound", "published"),
        )
        assert "streamdp-benchmark" in spec.summary and "Kellaris" in spec.summary
        path = data_path_for(name, SPLIT_DOMAIN)
        assert isinstance(path, ShiftPath) and isinstance(path, KellarisPath)
        assert path.split_domain == SPLIT_DOMAIN == 2 and path.matched
        assert isinstance(make_kernel(name, ALG, [FixedClass(3, F(1))]), ShiftKernel)


def test_bad_names_domains_and_variants_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(AllocatorError, match="unknown budget-shifting allocator 'bd'"):
        ShiftKernel("bd", ALG, [FixedClass(2, F(1))])
    with pytest.raises(AllocatorError, match="unknown budget-shifting allocator"):
        shift_spec("sample")
    for bad in (0, -3, True, 2.0):
        with pytest.raises(AllocatorError, match="positive integer"):
            shift_spec("ba-shift", bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"no variant 'du-code' \(it has: sound, published\)"):
        make_kernel("bd-shift", ALG, [FixedClass(2, F(1))], "du-code")
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\nu1,3,1\n")
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "ba-shift",
            "-r",
            str(req),
            "--stream",
            "lns",
            "--slots",
            "5",
            "--variant",
            "du-code",
        ],
    )
    assert result.exit_code == 2
    assert "no variant 'du-code'" in result.output and len(result.output.splitlines()) == 1


# ---------------------------------------------------------------------------- the budget rule


def test_bd_shift_restates_bd_java_on_a_shifted_case() -> None:
    """BD.java ``run``, d = 8, w = 3, eps = 1: 2w <= d, so ``lambda_1_per_timestamp = 1/eps``
    (budget eps/d = 1/8 at sensitivity 1/d) and ``epsilon_2_per_window = eps - w eps/d = 5/8``;
    the first slot (``t = 0``) publishes ``epsilon_2_per_window / 2`` with no dissimilarity;
    then ``eps_2_per_timestamp = (epsilon_2_per_window - used_budget_in_this_window) / 2``, the
    window's used budget dropping ``used_budget[t - w]`` from ``t >= w`` on."""
    kernel = _kernel("bd-shift", 3, F(1), 8)
    assert kernel.shifted
    decisions = [False, False, True, False, False, True, True, False]  # slot 1 is forced
    assert _spends(kernel, decisions) == [
        ("published", F(0), F(5, 16)),  # 5/8 / 2
        ("skipped", F(1, 8), F(0)),  # candidate (5/8 - 5/16) / 2 = 5/32
        ("published", F(1, 8), F(5, 32)),  # slot 1 still in the window
        ("skipped", F(1, 8), F(0)),  # used: 5/32 (slot 1 left), candidate 15/64
        ("skipped", F(1, 8), F(0)),
        ("published", F(1, 8), F(5, 16)),  # slot 3 left: nothing used
        ("published", F(1, 8), F(5, 32)),
        ("skipped", F(1, 8), F(0)),  # candidate (5/8 - 15/32) / 2 = 5/64
    ]
    assert [s.candidate[0] for s in run_trace(kernel, decisions)][3:5] == [F(15, 64)] * 2
    assert run_trace(kernel, decisions)[7].candidate == (F(5, 64),)


def test_ba_shift_restates_ba_java_on_a_shifted_case() -> None:
    """BA.java ``run``, d = 8, w = 3, eps = 1: shares ``epsilon_2_per_window / w = 5/24``; the
    first slot publishes one share; a publication spends ``(1 + timePointsSkipped)`` shares and
    the ``skip_until`` loop then copies the release for ``timePointsSkipped`` slots with no
    dissimilarity; ``timePointsSkipped`` stops at ``w - 1``."""
    kernel = _kernel("ba-shift", 3, F(1), 8)
    share = F(5, 24)
    decisions = [True, False, True, False, False, True, True, False, False, False, False, True]
    assert _spends(kernel, decisions) == [
        ("published", F(0), share),
        ("skipped", F(1, 8), F(0)),
        ("published", F(1, 8), 2 * share),  # one slot skipped
        ("nullified", F(0), F(0)),  # paid back, no dissimilarity
        ("skipped", F(1, 8), F(0)),
        ("published", F(1, 8), 2 * share),
        ("nullified", F(0), F(0)),
        ("skipped", F(1, 8), F(0)),
        ("skipped", F(1, 8), F(0)),
        ("skipped", F(1, 8), F(0)),
        ("skipped", F(1, 8), F(0)),  # timePointsSkipped stays at w - 1 = 2
        ("published", F(1, 8), 3 * share),  # w shares: the whole eps_2
    ]


@pytest.mark.parametrize("name", NAMES)
def test_the_split_shifts_iff_2w_le_d_and_is_continuous_there(name: str) -> None:
    """BD.java/BA.java keep the half split iff ``eps - w eps / d < eps / 2``, i.e. 2w > d; at
    2w = d the shifted split is the half split (eps/d = eps/(2w), eps - w eps/d = eps/2)."""
    decisions = [True, False, True, True, False, False, True, False, True, True]
    assert [_kernel(name, w, F(1), 8).shifted for w in (1, 4, 5, 8)] == [True, True, False, False]
    assert _spends(_kernel(name, 4, F(3, 2), 8), decisions) == _spends(
        _kernel(name, 4, F(3, 2), 7), decisions
    )
    shifted = _spends(_kernel(name, 2, F(1), 10), decisions)
    assert {dis for _, dis, _ in shifted[1:] if dis} == {F(1, 10)}
    halved = _spends(_kernel(name, 3, F(1), 5), decisions)
    assert {dis for _, dis, _ in halved[1:] if dis} == {F(1, 6)}


@settings(max_examples=60, deadline=None)
@given(
    w=st.integers(2, 6),
    eps=st.fractions(min_value=F(1, 10), max_value=3, max_denominator=10),
    decisions=st.lists(st.booleans(), min_size=1, max_size=20),
)
def test_without_the_shift_bd_shift_is_bd_after_slot_1(
    w: int, eps: Fraction, decisions: list[bool]
) -> None:
    """d = 2 < 2w: BD.java's half split is wevent's ``bd``; from slot 2 on they spend alike
    (slot 1: ``bd``'s publication budget, published, with no dissimilarity)."""
    decisions = [True, *decisions]
    ours = _spends(ShiftKernel("bd-shift", ALG, [FixedClass(w, eps)]), decisions)
    bd = _spends(make_kernel("bd", ALG, [FixedClass(w, eps)]), decisions)
    assert ours[0] == ("published", F(0), bd[0][2]) and ours[1:] == bd[1:]


@settings(max_examples=60, deadline=None)
@given(
    w=st.integers(2, 6),
    eps=st.fractions(min_value=F(1, 10), max_value=3, max_denominator=10),
    decisions=st.lists(st.booleans(), min_size=1, max_size=20),
)
def test_without_the_shift_ba_shift_publishes_as_pba_and_saves_dissimilarity(
    w: int, eps: Fraction, decisions: list[bool]
) -> None:
    """d = 2 < 2w, one class, slot 1 published: BA.java's absorption is 001 Algorithm 5's
    (``pba``) slot by slot; its dissimilarity is pba's except at slot 1 and at nullified slots,
    where the code computes none."""
    decisions = [True, *decisions]
    ours = _spends(ShiftKernel("ba-shift", ALG, [FixedClass(w, eps)]), decisions)
    pba = _spends(make_kernel("pba", ALG, [FixedClass(w, eps)]), decisions)
    assert [(s, p) for s, _, p in ours] == [(s, p) for s, _, p in pba]
    for t, ((status, dis, _), (_, pba_dis, _)) in enumerate(zip(ours, pba, strict=True), 1):
        assert dis == (0 if t == 1 or status == "nullified" else pba_dis)


# ---------------------------------------------------------------------------- soundness


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    variant=st.sampled_from(("sound", "published")),
    d=st.integers(1, 24),
    classes=st.lists(
        st.builds(
            FixedClass,
            st.integers(1, 8),
            st.fractions(min_value=F(1, 20), max_value=4, max_denominator=20),
        ),
        min_size=1,
        max_size=3,
    ),
    decisions=st.lists(st.booleans(), min_size=1, max_size=40),
)
def test_every_window_stays_within_eps(
    name: str, variant: str, d: int, classes: list[FixedClass[Fraction]], decisions: list[bool]
) -> None:
    kernel = ShiftKernel(name, ALG, classes, variant, d)
    assert _worst_window(kernel, classes, decisions) <= 1
    assert all(min(*s.dissimilarity, *s.publication) >= 0 for s in run_trace(kernel, decisions))


def test_the_window_check_fails_on_an_overspending_kernel() -> None:
    """Negative control of the property: the broken split breaks a window the check sees."""
    classes = [FixedClass(3, F(1))]
    assert _worst_window(_kernel("bd-shift", 3, F(1), 8), classes, [True] * 6) <= 1
    broken = _Overspending("bd-shift", ALG, classes, "sound", 8)
    broken_published = _Overspending("bd-shift", ALG, classes, "published", 8)
    assert _worst_window(broken_published, classes, [True] * 6) > 1
    # the sound variant's clip caps even the broken split at the window's bound
    assert _worst_window(broken, classes, [True] * 6) <= 1


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    reqs=st.lists(
        st.tuples(st.integers(1, 6), st.sampled_from(["0.5", "1", "1.5", "2"])),
        min_size=1,
        max_size=3,
    ),
    decisions=st.lists(st.booleans(), min_size=1, max_size=24),
)
def test_the_registered_allocators_pass_the_guard(
    name: str, reqs: list[tuple[int, str]], decisions: list[bool]
) -> None:
    pop = Population({f"u{i}": Fixed(w, Budget(e)) for i, (w, e) in enumerate(reqs)})
    result = trace_with_guard(name, pop, decisions)
    assert result.ok, result.refusal


GATE = GateOptions(
    w_max=3,
    classes=2,
    examples=40,
    e2e_runs=1,
    conformance_inputs=10,
    search_runs=40,
    search_w_max=12,
)


@pytest.mark.parametrize("variant", ["sound", "published"])
@pytest.mark.parametrize("target", ["BD5", "BA5"])
def test_the_gate_proves_the_shifted_allocators(target: str, variant: str) -> None:
    """Both variants: ``published`` is the code's rule, sound in exact arithmetic."""
    report = run_gate(
        f"tests.test_streamdp_shift:{target}", dataclasses.replace(GATE, variant=variant)
    )
    assert report.verdict == "proved", "\n".join(report.describe())
    assert report.stage("proof").status == "proved"
    assert report.stage("end-to-end").status == "passed"  # on two-valued streams: d != 5


def test_the_gate_refutes_an_overspending_shift_and_trace_replays_it(tmp_path: Path) -> None:
    report = run_gate(
        "tests.test_streamdp_shift:OVERSPEND", dataclasses.replace(GATE, variant="published")
    )
    assert report.verdict == "refuted" and report.exit_code == 1, "\n".join(report.describe())
    assert report.stage("proof").status == "failed"
    cex = report.counterexample
    assert cex is not None and cex.replays()
    assert cex.failure.spent > cex.failure.bound
    csv = tmp_path / "counterexample.csv"
    write_requirements(cex.population, csv)
    replay = CliRunner().invoke(cli, cex.command(str(csv)).split()[1:])
    assert replay.exit_code == 1 and "REFUSED by the guard" in replay.output, replay.output


# ---------------------------------------------------------------------------- the data path


def test_the_path_is_kellaris_rule_and_deterministic_given_a_seed() -> None:
    path = ShiftPath(4, 4)
    sampled: IntArray = np.array([3, 0, 5, 2], dtype=np.int64)
    last: FloatArray = np.array([1.0, 1.0, 1.0, 1.0])
    dis = path.dissimilarity(2, sampled, last, 0.5, np.random.default_rng(7))
    noise = float(np.random.default_rng(7).laplace(0.0, 0.5))
    assert dis == pytest.approx((2 + 1 + 4 + 1) / 4 + noise)
    assert dis == path.dissimilarity(2, sampled, last, 0.5, np.random.default_rng(7))
    # BD.java: publish iff the noisy dissimilarity exceeds sensitivity / eps_pub
    assert path.decide(2, 2.01, err=100.0, scale=2.0) and not path.decide(2, 2.0, 100.0, 2.0)
    assert not path.decide(2, None, 0.0, 2.0)
    release = path.publish(2, sampled, 0.25, np.random.default_rng(9))
    assert np.array_equal(release, path.publish(2, sampled, 0.25, np.random.default_rng(9)))
    expected = sampled + np.random.default_rng(9).laplace(0.0, 0.25, size=4)
    assert np.array_equal(release, expected)
    # the approximation is the last release: it gets no count to read
    assert np.array_equal(path.approximate(3, release), release)
    assert ShiftPath(4, 4).matched and not ShiftPath(2, 8).matched


class _Recording(ShiftPath):
    """ShiftPath recording the noise scales the runner gives it."""

    def __init__(self, domain: int, split_domain: int) -> None:
        super().__init__(domain, split_domain)
        self.dis_scales: list[float] = []
        self.pub_scales: list[float] = []

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        self.dis_scales.append(scale)
        return super().dissimilarity(t, sampled, last, scale, rng)

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        self.pub_scales.append(scale)
        return super().publish(t, sampled, scale, rng)


def _run(spec: AllocatorSpec, d: int, seed: int, slots: int = 30) -> tuple[_Recording, list[Any]]:
    pop = Population.from_classes({Fixed(2, Budget(2)): 25, Fixed(1, Budget(3)): 15})
    sizes = [c.count for c in pop.classes]
    stream = SyntheticStream("lns", slots, sizes, seed, d=d)
    guard = Guard(pop)
    kernel = spec.kernel(ALG, classes_of(pop, spec.name))
    assert isinstance(kernel, ShiftKernel)
    path = _Recording(d, kernel.domain)
    data_seed, noise_seed = np.random.SeedSequence(seed).spawn(2)
    runner = CentralRunner(
        kernel=kernel,
        spender=guard,
        groups=class_groups(pop, guard),
        sizes=sizes,
        stream=stream,
        data_rng=np.random.default_rng(data_seed),
        noise_rng=np.random.default_rng(noise_seed),
        mechanism=spec.name,
        data_path=path,
    )
    return path, [runner.step() for _ in range(slots)]


@pytest.mark.parametrize("spec", [BD5, BA5], ids=["bd5", "ba5"])
def test_the_runner_gives_the_shifted_dissimilarity_scale_1_over_eps(spec: AllocatorSpec) -> None:
    """Served with (w, eps) = (2, 2): 2w <= 5, so every dissimilarity is eps/d at sensitivity
    1/d, Laplace scale 1/eps = 0.5; a publication of budget b gets scale 1/b (slot 1: BD's
    eps_2 / 2 and BA's share eps_2 / w are both 2 (1 - 2/5) / 2 = 0.6)."""
    path, records = _run(spec, 5, seed=4)
    assert path.dis_scales and all(x == pytest.approx(0.5) for x in path.dis_scales)
    assert len(path.dis_scales) == sum(r.status != "nullified" for r in records) - 1  # slot 1
    assert records[0].status == "published" and path.pub_scales[0] == pytest.approx(1 / 0.6)
    again, repeat = _run(spec, 5, seed=4)
    assert again.dis_scales == path.dis_scales
    assert all(np.array_equal(a.release, b.release) for a, b in zip(records, repeat, strict=True))


def test_on_another_domain_the_split_is_the_allocators() -> None:
    """The registered bd-shift splits for d = 2 (no shift at w = 2) whatever the stream: on an
    8-valued stream the runner's dissimilarity scale is (2w) / (d eps) = 4/16, not 1/eps."""
    path, _ = _run(BUILTIN["bd-shift"], 8, seed=5)
    assert not path.matched and all(x == pytest.approx(4 / 16) for x in path.dis_scales)


# ---------------------------------------------------------------------------- command line


@pytest.mark.parametrize("name", NAMES)
def test_wevent_run_smoke(name: str, tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\n" + "".join(f"u{i},{2 + i % 3},1\n" for i in range(30)))
    ledger, releases = tmp_path / "run.csv", tmp_path / "rel.csv"
    args = ["run", name, "-r", str(req), "--stream", "lns", "--slots", "40", "--seed", "1"]
    result = CliRunner().invoke(cli, [*args, "--ledger", str(ledger), "--releases", str(releases)])
    assert result.exit_code == 0, result.output
    assert "40 of 40 slots run" in result.output
    assert CliRunner().invoke(cli, ["check", str(ledger), "-r", str(req)]).exit_code == 0
    charges = read_ledger(ledger)
    assert {c.mechanism for c in charges} == {name}
    first = [c for c in charges if c.slot == 1]
    assert first and {c.part for c in first} == {"publication"}  # no dissimilarity at slot 1
    assert releases.read_text().splitlines()[1].startswith("1,published,")


def test_wevent_run_module_attribute_for_another_domain(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\nu1,2,1\nu2,1,2\n")
    ledger = tmp_path / "run.csv"
    args = ["run", "tests.test_streamdp_shift:BA5", "-r", str(req), "--stream", "lns"]
    args += ["--domain", "5", "--slots", "30", "--ledger", str(ledger)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    dis = {c.amount for c in read_ledger(ledger) if c.part == "dissimilarity"}
    assert dis == {F(1, 5)}  # served (2, 1): eps / d


def test_shift_factory_is_the_specs_factory() -> None:
    classes: list[ClassReq[Fraction]] = [FixedClass(2, F(1)), FixedClass(4, F(1, 2))]
    decisions = [True, False, False, True, True, False, True]
    for d in (2, 9):
        ours = run_trace(shift_factory("ba-shift", d)(ALG, classes, "sound"), decisions)
        assert ours == run_trace(shift_spec("ba-shift", d).kernel(ALG, classes), decisions)
