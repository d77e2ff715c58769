"""fast-w (`wevent.mechanisms.streamdp.fast`): streamdp-benchmark's FAST_w as a budget kernel and
a data path. The kernel's rule on hand-checked cases, every window within eps for random
publish/skip sequences, the data path against a restatement of the code's one-dimensional
``publish()``, a `wevent run` smoke test, and negative controls (an over-spending kernel is
refuted by the gate; the window check flags it)."""

from __future__ import annotations

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

from wevent.accounting.budget import BudgetError
from wevent.cli import cli
from wevent.gate import GateOptions, run_gate
from wevent.mechanisms.allocators import algebra_for, make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import Algebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.kernel import ClassReq, FixedClass, Kernel, published_now
from wevent.mechanisms.allocators.registry import BUILTIN, CENTRAL, data_path_for
from wevent.mechanisms.streamdp import fast as fast_module
from wevent.mechanisms.streamdp.fast import (
    NAME,
    FastKernel,
    FastPath,
    samples_per_chunk,
)

EXACT = algebra_for("exact")


def _kernel(w: int, eps: F = F(1), **kw: Any) -> FastKernel[F, bool]:
    return FastKernel(EXACT, [FixedClass(w, eps)], **kw)


def _spent(trace: Sequence[Any], c: int = 0) -> list[F]:
    return [s.dissimilarity[c] + s.publication[c] for s in trace]


def _worst_window(spent: Sequence[F], w: int) -> F:
    return max(sum(spent[max(0, e - w + 1) : e + 1], F(0)) for e in range(len(spent)))


# ---------------------------------------------------------------------------- the budget rule


@pytest.mark.parametrize(
    ("w", "m"), [(1, 1), (13, 1), (14, 1), (26, 1), (27, 2), (40, 3), (66, 4), (67, 5), (120, 9)]
)
def test_samples_per_chunk_is_the_codes_floor(w: int, m: int) -> None:
    """FAST_w.publish(): ``M = (int) (ratioM * orig.length)``, at least 1, ratioM = 0.075."""
    assert samples_per_chunk(w) == m == max(1, int(0.075 * w))


def test_registered_as_a_central_fixed_global_allocator_with_its_data_path() -> None:
    spec = BUILTIN[NAME]
    assert NAME in CENTRAL
    assert (spec.requirement, spec.scaling, spec.variants) == ("fixed", "global", ("sound",))
    assert isinstance(data_path_for(NAME, 3), FastPath)


def test_a_chunk_publishes_at_most_m_times_at_eps_over_2m() -> None:
    """w = 40, eps = 1: M = 3 and eps_per_sample = (eps / 2) / 3 = 1/6 (FAST_w.run sets
    total_budget = epsilon / 2; publish() divides it by M). Slot 1 is forced (publish(): i == 0
    is always sampled); once three slots published, the rest of the chunk is nullified; slot 41
    starts the next chunk."""
    trace = run_trace(_kernel(40), [False, False, True, False, True] + [True] * 80)
    status = [s.status for s in trace]
    assert status[:6] == ["published", "skipped", "published", "skipped", "published", "nullified"]
    assert set(status[5:40]) == {"nullified"}
    assert status[40:44] == ["published", "published", "published", "nullified"]
    assert [s.candidate[0] for s in trace[:5]] == [F(1, 6)] * 5
    assert trace[5].candidate[0] == 0 and trace[40].candidate[0] == F(1, 6)
    assert all(s.dissimilarity == (F(0),) for s in trace)
    spent = _spent(trace)
    assert sum(spent[:40]) == F(1, 2) and sum(spent[40:80]) == F(1, 2)


def test_small_windows_have_one_sample_per_chunk() -> None:
    """w < 27: M = 1, the whole eps / 2 at each chunk's first slot, every other slot nullified."""
    trace = run_trace(_kernel(3, F(2)), [True] * 7)
    assert [s.status[0] for s in trace] == list("pnnpnnp")
    assert _spent(trace) == [F(1), 0, 0, F(1), 0, 0, F(1)]


def test_classes_are_served_with_the_largest_window_and_the_smallest_budget() -> None:
    kernel = FastKernel(EXACT, [FixedClass(27, F(2)), FixedClass(40, F(3, 2)), FixedClass(5, F(1))])
    assert (kernel.w, kernel.samples) == (40, 3)
    plan = kernel.plan(kernel.start(), 1)
    assert plan.publication == (F(1, 6),) * 3 and plan.forced and not plan.nullified


def test_other_variants_are_refused() -> None:
    with pytest.raises(BudgetError, match="no variant 'published'"):
        make_kernel(NAME, EXACT, [FixedClass(4, F(1))], "published")


@settings(max_examples=200)
@given(
    w=st.integers(1, 130),
    eps=st.fractions(F(1, 100), F(10)),
    data=st.data(),
)
def test_every_window_stays_within_eps(w: int, eps: F, data: st.DataObject) -> None:
    decisions = data.draw(st.lists(st.booleans(), min_size=1, max_size=3 * w + 5))
    trace = run_trace(_kernel(w, eps), decisions)
    assert _worst_window(_spent(trace), w) <= eps
    m = samples_per_chunk(w)
    for start in range(0, len(trace), w):
        assert sum(s.status == "published" for s in trace[start : start + w]) <= m


@given(
    w=st.integers(1, 40),
    ratio=st.fractions(F(1, 50), F(1)),
    decisions=st.lists(st.booleans(), min_size=1, max_size=120),
)
def test_any_sample_ratio_keeps_the_bound(w: int, ratio: F, decisions: list[bool]) -> None:
    """The half per chunk makes the rule sound whatever M is (the code's 0.075, or the paper's
    0.15 its comment mentions, or any other)."""
    trace = run_trace(_kernel(w, ratio=ratio), decisions)
    assert _worst_window(_spent(trace), w) <= 1


def test_the_half_is_needed() -> None:
    """Negative control for the window check: a chunk share of eps (not eps / 2) with M = 2 at
    w = 3 puts three samples of eps / 2 in window [3, 5]: the last sample of chunk [1, 3] and
    the first two of chunk [4, 6]."""
    trace = run_trace(_kernel(3, ratio=F(2, 3), share=F(1)), [False, False, True, True, True])
    assert _worst_window(_spent(trace), 3) == F(3, 2)
    sound = run_trace(_kernel(3, ratio=F(2, 3)), [False, False, True, True, True])
    assert _worst_window(_spent(sound), 3) == F(3, 4)


# ---------------------------------------------------------------------------- gate and proof


def _spec_factory(**kw: Any) -> Any:
    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        kernel: Kernel[Any, Any, Any] = FastKernel(alg, classes, variant, **kw)
        return kernel

    return factory


# M = 2 already at w = 3 (the code's ratio needs w >= 27, past what a proof reaches): the same
# kernel code with samples to count, sound, and with the whole eps per chunk, not.
DENSE = AllocatorSpec("fast-dense", "fixed", "global", "test", _spec_factory(ratio=F(2, 3)))
OVERSPENDING = AllocatorSpec(
    "fast-overspending", "fixed", "global", "test", _spec_factory(ratio=F(2, 3), share=F(1))
)

GATE = GateOptions(
    w_max=3, classes=2, examples=50, e2e_runs=1, conformance_inputs=10, search_runs=100
)


def test_gate_proves_the_rule_with_several_samples_per_chunk() -> None:
    report = run_gate("tests.test_streamdp_fast:DENSE", GATE)
    assert report.verdict == "proved", "\n".join(report.describe())


def test_gate_refutes_the_overspending_kernel(tmp_path: Path) -> None:
    report = run_gate("tests.test_streamdp_fast:OVERSPENDING", GATE)
    assert report.verdict == "refuted" and report.exit_code == 1
    assert report.stage("proof").status == "failed"
    cex = report.counterexample
    assert cex is not None and cex.replays()
    assert cex.failure.spent > cex.failure.bound


# ---------------------------------------------------------------------------- the data path


def _drive(kernel: FastKernel[F, bool], path: FastPath, counts: np.ndarray, seed: int) -> Any:
    """The runner's calls in its order (`CentralRunner._step`): plan; decide unless forced or
    nullified; publish or approximate; step. Returns releases and the published slots."""
    rng = np.random.default_rng(seed)
    state = kernel.start()
    last = np.zeros(counts.shape[1])
    releases, published = [], []
    for t in range(1, counts.shape[0] + 1):
        plan = kernel.plan(state, t)
        decision = False
        if not plan.forced and not plan.nullified:
            decision = path.decide(t, None, 0.0, 0.0)
        publish = published_now(EXACT, plan, decision)
        if publish:
            last = path.publish(t, counts[t - 1], 1 / float(plan.publication[0]), rng)
            published.append(t)
        else:
            last = path.approximate(t, last)
        releases.append(last.copy())
        state = kernel.step(state, t, plan, publish)
    return np.array(releases), published


def _java_int(x: float) -> int:
    """Java's ``(int)`` of a double: toward zero, saturating at the int range."""
    return -(2**31) if x == -math.inf else max(-(2**31), min(2**31 - 1, int(x)))


def _java_exp(x: float) -> float:
    """Java's ``Math.exp``: infinity past a double's range."""
    return math.exp(x) if x < 709.78 else math.inf


def _reference_chunk(
    orig: Sequence[float], eps: float, noise: Any, m: int
) -> tuple[list[float], set[int]]:
    """FAST_w.publish() for one dimension and one chunk, restated with its fields' values
    (``total_budget = eps / 2``; TRUNCATE off); ``noise(scale)`` draws one Laplace value. ``m``
    is M (the code computes it from the chunk's length, ``max(1, (int) (0.075 * length))``)."""
    n = len(orig)
    scale = 1.0 / ((eps / 2) / m)
    p, big_q, big_r = 100.0, 100000.0, 1000000.0
    pub, pred = [0.0] * n, [0.0] * n
    query: set[int] = set()
    interval, next_query = 1, 5
    for i in range(n):
        if i == 0:
            pub[0] = orig[0] + noise(scale)
            query.add(0)
            continue
        prior = pub[max(query)]  # predictKF: the last queried slot's release
        p += big_q
        pred[i] = float(int(prior))
        if (len(query) < 5 and len(query) < m) or (i == next_query and len(query) < m):
            pid = len(query) >= 5
            noisy = orig[i] + noise(scale)
            k = p / (p + big_r)  # correctKF
            pub[i] = prior + k * (noisy - prior)
            p *= 1.0 - k
            query.add(i)
            if pid:
                idx = sorted(query)[-5:]
                err = [abs(pub[j] - pred[j]) / max(pub[j], 1.0) for j in idx]
                ratio = (
                    0.9 * err[-1] + 0.1 * sum(err) + 0.0 * (err[-1] - err[-2]) / (idx[-1] - idx[-2])
                )
                step = _java_int(5.0 * (1.0 - _java_exp((ratio - 0.1) / 0.1)))
                interval = max(1, interval + step)
                next_query += interval
        else:
            pub[i] = float(int(prior))
    return pub, query


@pytest.mark.parametrize(("w", "level"), [(120, 50), (200, 400), (400, 10000), (80, 5), (30, 2000)])
def test_one_cell_follows_the_codes_publish(w: int, level: int) -> None:
    """With one cell the path samples the slots the code samples and releases what it releases,
    chunk by chunk, given the same noise draws (the code's chunks are w slots each)."""
    data_rng = np.random.default_rng(w)
    counts = (level + data_rng.integers(-level // 2, level // 2 + 1, size=(2 * w + 7, 1))).astype(
        np.int64
    )
    releases, published = _drive(_kernel(w), FastPath(1), counts, seed=5)
    rng = np.random.default_rng(5)
    expected, sampled = [], []
    for start in range(0, len(counts), w):
        chunk = [float(c) for c in counts[start : start + w, 0]]
        # the last, shorter chunk takes M from w here (from its length in the code)
        pub, query = _reference_chunk(
            chunk, 1.0, lambda s: float(rng.laplace(0.0, s, size=1)[0]), samples_per_chunk(w)
        )
        expected += pub
        sampled += [start + i + 1 for i in sorted(query)]
    assert published == sampled
    assert len(published) > 2 * samples_per_chunk(w) - 1  # the schedule reached its M samples
    np.testing.assert_allclose(releases[:, 0], expected, rtol=0, atol=1e-9)


def test_the_pid_schedule_spaces_samples_when_the_filter_predicts_well() -> None:
    """A constant stream with little noise: the feedback errors are small, the interval grows
    (by up to 4 a sample), so the chunk's samples after the sixth are spread out."""
    w = 400  # M = 30
    counts = np.full((w, 1), 10_000, dtype=np.int64)
    kernel = _kernel(w, F(1000))
    _, published = _drive(kernel, FastPath(1), counts, seed=1)
    gaps = np.diff(published)
    assert published[:6] == [1, 2, 3, 4, 5, 6]
    assert gaps[5:].max() > 1
    assert len(published) < kernel.samples  # the schedule ran past the chunk's end


def test_large_errors_sample_every_slot_without_overflow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Releases far below 1 (the error's divisor is max(release, 1)) and noise of scale 1000
    give feedback errors in the hundreds: exp((ratio - xi) / xi) is past a double's range, and
    the interval stays minIntvl, every slot sampled until M (the code's Java overflows to
    infinity and gets the same interval). The counts are negative to make the errors large on
    every draw; the path assumes nothing about their sign."""
    w = 200  # M = 15, scale 2M / eps = 1000
    counts = np.full((w, 1), -1_000_000, dtype=np.int64)
    _, published = _drive(_kernel(w, F(3, 100)), FastPath(1), counts, seed=2)
    assert published == list(range(1, 16))
    # negative control: without the cap math.exp overflows on this input
    monkeypatch.setattr(fast_module, "_EXP_MAX", math.inf)
    with pytest.raises(OverflowError):
        _drive(_kernel(w, F(3, 100)), FastPath(1), counts, seed=2)


def test_releases_between_samples_come_from_earlier_releases_only() -> None:
    """Changing the counts of slots that do not publish changes no release; a slot that does
    not publish releases the last sample's release cut toward zero."""
    w, d = 80, 3
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 100, size=(2 * w, d)).astype(np.int64)
    releases, published = _drive(_kernel(w), FastPath(d), counts, seed=9)
    other = counts.copy()
    quiet = [t for t in range(1, 2 * w + 1) if t not in published]
    other[[t - 1 for t in quiet]] += 1000
    again, published_again = _drive(_kernel(w), FastPath(d), other, seed=9)
    assert published_again == published
    np.testing.assert_array_equal(again, releases)
    for t in quiet:
        before = max(p for p in published if p < t)
        np.testing.assert_array_equal(releases[t - 1], np.trunc(releases[before - 1]))


def test_the_path_is_deterministic_given_its_generator() -> None:
    counts = np.random.default_rng(1).integers(0, 50, size=(100, 4)).astype(np.int64)
    a = _drive(_kernel(30), FastPath(4), counts, seed=3)
    b = _drive(_kernel(30), FastPath(4), counts, seed=3)
    c = _drive(_kernel(30), FastPath(4), counts, seed=4)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])


def test_dissimilarity_reads_no_count() -> None:
    path = FastPath(2)
    draws = [
        path.dissimilarity(1, np.array(s), np.zeros(2), 2.0, np.random.default_rng(0))
        for s in ([0, 0], [500, 9])
    ]
    assert draws[0] == draws[1]


# ---------------------------------------------------------------------------- command line


def test_wevent_run_smoke(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\n" + "".join(f"u{i},{40 - i % 3},1\n" for i in range(30)))
    releases = tmp_path / "rel.csv"
    args = ["run", NAME, "-r", str(req), "--stream", "lns", "--slots", "90", "--seed", "3"]
    result = CliRunner().invoke(cli, [*args, "--releases", str(releases)])
    assert result.exit_code == 0, result.output
    assert "90 of 90 slots run" in result.stdout
    # w = 40, M = 3: three publications in each of the chunks [1, 40], [41, 80], [81, 90]
    assert "published 9, skipped 0, nullified 81" in result.stdout
    rows = [line.split(",") for line in releases.read_text().splitlines()[1:]]
    assert {int(r[0]) for r in rows if r[1] == "published"} == {1, 2, 3, 41, 42, 43, 81, 82, 83}
