"""RescueDP (`wevent.mechanisms.streamdp.rescuedp`): the budget rule on hand-checked cases (the
rule of streamdp-benchmark's ``RescueDP_MD.adaptive_budget_allocation`` and ``publish``), the
window bound on random publish/skip sequences, the data path (deterministic given its seed, its
approximation from releases only, its grouping a partition), `wevent run` end to end, a fresh
interpreter importing the module first, and a negative control: an over-spending version of the
kernel is refuted by the gate with a counterexample that replays."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from decimal import Decimal, localcontext
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.cli import cli
from wevent.gate import GateOptions, run_gate
from wevent.mechanisms.allocators import make_kernel, run_trace
from wevent.mechanisms.allocators.algebra import Algebra, ExactAlgebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.fixed import FixedState
from wevent.mechanisms.allocators.kernel import ClassReq, FixedClass, Plan
from wevent.mechanisms.allocators.registry import BUILTIN, data_path_for
from wevent.mechanisms.streamdp import rescuedp
from wevent.mechanisms.streamdp.rescuedp import (
    BITS,
    LOG_SHARES,
    P_MAX,
    RescueKernel,
    RescuePath,
    groups_of,
    log_share,
)

REPO = Path(__file__).resolve().parents[1]


def _trace(w: int, eps: F, decisions: list[bool], variant: str = "sound") -> list[F]:
    kernel = make_kernel("rescuedp", ExactAlgebra(), [FixedClass(w, eps)], variant)
    return [s.candidate[0] for s in run_trace(kernel, decisions)]


# ---------------------------------------------------------------------------- the ln table


def test_the_table_is_ln_over_five_rounded_down() -> None:
    with localcontext() as ctx:
        ctx.prec = 60
        for i in range(1, 20):
            exact = Decimal(i + 1).ln() / 5
            p = LOG_SHARES[i]
            low = Decimal(p.numerator) / Decimal(p.denominator)
            assert low <= exact < low + Decimal(10) ** -6, i
            assert p.denominator <= 10**6 and p < P_MAX
        # from I = 20 on the code's cap p_max = 0.6 binds: ln(21) / 5 > 0.6 >= ln(20) / 5
        assert Decimal(21).ln() / 5 > Decimal("0.6") >= Decimal(20).ln() / 5
    assert log_share(20) == log_share(1000) == P_MAX
    assert LOG_SHARES[1] == F(138629, 10**6)  # ln 2 / 5 = 0.1386294...
    with pytest.raises(ValueError, match="at least one slot"):
        log_share(0)


# ---------------------------------------------------------------------------- the budget rule


def test_first_slot_spends_p1_of_eps() -> None:
    """The code's first release: ``adaptive_budget_allocation(epsilon)`` with the initial interval
    1, ``min(0.2 ln 2 * eps, eps / 5)``; the room is eps exactly (not rounded)."""
    for variant in ("sound", "published"):
        assert _trace(4, F(1), [True], variant) == [F(138629, 10**6)]
        assert _trace(4, F(3, 2), [True], variant) == [F(3, 2) * F(138629, 10**6)]


def test_second_slot_spends_p1_of_the_rounded_room() -> None:
    """``publish``: eps_rm = epsilon - used_budget_in_this_window; the window [t-w+1, t-1]."""
    p1 = F(138629, 10**6)
    room = 1 - p1  # 0.861371: in [1/2, 1), 2 * room = 1.722742 -> 441/256 at 8 bits
    assert _trace(3, F(1), [True, True], "published")[1] == p1 * room
    assert _trace(3, F(1), [True, True])[1] == p1 * F(441, 512)
    assert F(441, 512) <= room < F(441, 512) + F(1, 2**9)


def test_a_long_gap_is_capped_at_eps_over_five() -> None:
    """``e_i = min(p * eps_remaining, e_max)`` with ``e_max = epsilon / 5``: four skipped slots
    give p(5) = 0.358 of an empty window's room, above the cap."""
    spent = _trace(3, F(1), [False, False, False, False, True])
    assert spent[-1] == F(1, 5)
    assert LOG_SHARES[5] > F(1, 5)


def test_the_window_slides() -> None:
    """``run`` drops ``used_budget[t-w]`` at slot t: with w = 1 the room is eps at every slot, so
    consecutive publications each spend p(1) eps."""
    assert _trace(1, F(1), [True] * 4) == [F(138629, 10**6)] * 4


def test_slots_that_skip_spend_nothing_and_nothing_is_forced() -> None:
    kernel = make_kernel("rescuedp", ExactAlgebra(), [FixedClass(3, F(1))])
    trace = run_trace(kernel, [False, True, False])
    assert [s.status for s in trace] == ["skipped", "published", "skipped"]
    assert all(s.dissimilarity == (F(0),) for s in trace)
    # slot 2: I = 2 over an empty window, min(p(2) eps, eps / 5) = eps / 5 (p(2) = 0.2197)
    assert trace[0].publication == (F(0),) and trace[1].publication == (F(1, 5),)


def test_every_class_gets_the_uniform_class_budget() -> None:
    """Not personalized: every class spends as (largest w, smallest eps) alone would."""
    classes: list[ClassReq[F]] = [FixedClass(2, F(1)), FixedClass(5, F(1, 2))]
    decisions = [True, True, False, True, True]
    both = run_trace(make_kernel("rescuedp", ExactAlgebra(), classes), decisions)
    alone = _trace(5, F(1, 2), decisions)
    assert [s.candidate for s in both] == [(x, x) for x in alone]


@settings(max_examples=150, deadline=None)
@given(
    w=st.integers(1, 12),
    eps=st.fractions(min_value=F(1, 10), max_value=5, max_denominator=20),
    decisions=st.lists(st.booleans(), min_size=1, max_size=60),
    variant=st.sampled_from(("sound", "published")),
)
def test_every_window_stays_within_eps(w: int, eps: F, decisions: list[bool], variant: str) -> None:
    kernel = make_kernel("rescuedp", ExactAlgebra(), [FixedClass(w, eps)], variant)
    spent = [s.publication[0] + s.dissimilarity[0] for s in run_trace(kernel, decisions)]
    assert all(0 <= x <= eps / 5 for x in spent)
    for end in range(1, len(spent) + 1):
        assert sum(spent[max(0, end - w) : end]) <= eps
    # the rounded room spends no more than the exact one at the same slot and state
    sound = make_kernel("rescuedp", ExactAlgebra(), [FixedClass(w, eps)], "sound")
    published = make_kernel("rescuedp", ExactAlgebra(), [FixedClass(w, eps)], "published")
    state = sound.start()
    for t, d in enumerate(decisions, start=1):
        plan = sound.plan(state, t)
        assert plan.publication[0] <= published.plan(state, t).publication[0]
        state = sound.step(state, t, plan, d)


@settings(max_examples=200, deadline=None)
@given(x=st.fractions(min_value=0, max_value=1))
def test_the_room_is_rounded_down_by_less_than_one_part_in_256(x: F) -> None:
    kernel: RescueKernel[F, bool] = RescueKernel(ExactAlgebra(), [FixedClass(1, F(1))])
    r = kernel._round_down(x)
    assert r <= x
    if x >= F(1, 2**64):
        assert x - r < x / 2**BITS
    else:
        assert r == 0


def _unitless_round_down(x: F) -> F:
    """The kernel's rounding as it was made before it compared budgets with budgets: on the
    share ``x = room / eps``, every comparison with a constant (exact arithmetic, the same
    steps). The reference the budget-unit rounding must equal."""
    y, shifted = x, []
    for s in (32, 16, 8, 4, 2, 1):
        small = not F(1, 2**s) <= y
        y = y * 2**s if small else y
        shifted.append((s, small))
    normal = 2 * y
    mantissa = F(1)
    for bit in range(1, BITS + 1):
        longer = mantissa + F(1, 2**bit)
        mantissa = longer if longer <= normal else mantissa
    out = mantissa / 2
    for s, small in reversed(shifted):
        out = out / 2**s if small else out
    out = out if F(1, 2) <= y else F(0)
    return F(1) if x >= 1 else out


# a share of eps: anywhere in [0, 1], tiny (down to 2^-70), or on (or next to) a rounding
# point 2^-k (1 + m / 2^BITS), where the comparisons meet with equality
_SHARES = st.one_of(
    st.fractions(min_value=0, max_value=1),
    st.builds(
        lambda m, k, nudge: min(F(1), max(F(0), F(2**BITS + m, 2 ** (BITS + k)) + nudge)),
        st.integers(0, 2**BITS - 1),
        st.integers(1, 70),
        st.sampled_from([F(0), F(1, 2**80), -F(1, 2**80), F(1, 3 * 2**72)]),
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    share=_SHARES,
    eps=st.one_of(
        st.fractions(min_value=F(1, 10**6), max_value=10**6, max_denominator=10**6),
        st.sampled_from([F(1), F(7, 10), F(1, 1000), F(10**9), F(1, 3 * 2**40)]),
    ),
)
def test_the_budget_unit_rounding_is_the_unitless_one_times_eps(share: F, eps: F) -> None:
    """The kernel rounds the room by comparing budgets with budgets (no ratio: a floating
    batch compares like with like); in exact arithmetic that is eps times the rounding of the
    share room / eps, for every room in [0, eps] and eps > 0, so exact runs are unchanged."""
    kernel: RescueKernel[F, bool] = RescueKernel(ExactAlgebra(), [FixedClass(1, eps)])
    room = share * eps
    assert kernel._round_room(room, eps) == _unitless_round_down(share) * eps
    assert kernel._round_down(share) == _unitless_round_down(share)


def test_long_runs_keep_short_denominators() -> None:
    """The sound variant's budgets are eps 2^-a 5^-6 times an integer: 1,000 publications do
    not grow them (the published variant's exact room would gain digits at every one)."""
    spent = _trace(10, F(7, 10), [True] * 1000)
    assert max(x.denominator for x in spent) <= 10 * 2**80 * 5**6


# ---------------------------------------------------------------------------- the data path


def _run_path(seed: int, slots: int = 60, d: int = 6) -> tuple[list[bool], list[Any]]:
    path = RescuePath(d)
    rng = np.random.default_rng(seed)
    data = np.random.default_rng(99)
    last = np.zeros(d)
    decisions, releases = [], []
    for t in range(1, slots + 1):
        counts = 30 + data.integers(0, 2, size=d).astype(np.int64)  # an almost still stream
        publish = path.decide(t, None, 1.0, 2.0)
        decisions.append(publish)
        last = path.publish(t, counts, 2.0, rng) if publish else path.approximate(t, last)
        releases.append(last.copy())
    return decisions, releases


def test_the_path_is_deterministic_given_its_seed() -> None:
    a, b, c = _run_path(1), _run_path(1), _run_path(2)
    assert a[0] == b[0] and all(np.array_equal(x, y) for x, y in zip(a[1], b[1], strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a[1], c[1], strict=True))


def test_the_path_publishes_slots_1_and_2_then_follows_its_pid_schedule() -> None:
    decisions, releases = _run_path(3, slots=200)
    assert decisions[:2] == [True, True]
    assert not all(decisions)  # the filtered releases change little: longer intervals
    for t in range(1, len(decisions)):
        if not decisions[t]:  # a skipped slot repeats the last release
            assert np.array_equal(releases[t], releases[t - 1])


def test_approximate_reads_the_last_release_only() -> None:
    path = RescuePath(3)
    last = np.array([1.5, 2.5, 3.5])
    assert path.approximate(5, last) is last


def test_the_interval_follows_the_pid_rule() -> None:
    """``next_sampling_interval``: ``max(1, I + theta (1 - (delta / lambda_r)^2))`` with
    ``lambda_r = 1 / eps_remaining`` (here ``p(1) * scale``, the scale of the slot after a
    publication); a still stream lengthens the interval by theta = 10."""
    path = RescuePath(2)
    rng = np.random.default_rng(0)
    for t in (1, 2):
        assert path.decide(t, None, 1.0, 100.0)
        path.publish(t, np.array([5, 5], dtype=np.int64), 1e-9, rng)
    # the releases are 5 up to 1e-8: (delta / lambda_r)^2 ~ 1e-20, so I = 1 + 10 (1 - 0) = 11
    assert not path.decide(3, None, 1.0, 100.0)
    assert path.next_slot == 2 + 11 and path.interval == 11.0
    assert not path.decide(12, None, 1.0, 100.0) and path.decide(13, None, 1.0, 100.0)
    # a release that moved by much more than lambda_r brings the interval back to 1
    path.publish(13, np.array([500, 500], dtype=np.int64), 1e-9, rng)
    assert path.decide(14, None, 1.0, 100.0) and path.interval == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-50, 80), min_size=5, max_size=5), min_size=3, max_size=3))
def test_grouping_is_a_partition_of_the_cells(history: list[list[float]]) -> None:
    groups = groups_of([np.array(row) for row in history])
    cells = sorted(c for g in groups for c in g)
    assert cells == list(range(5))
    pred = np.mean(np.array(history), axis=0)
    for g in groups:
        if len(g) > 1:
            assert all(pred[c] <= rescuedp.TAU_1 for c in g)


def test_correlated_small_cells_are_grouped_and_answered_once() -> None:
    history = [np.array([1.0, 2.0, 50.0]), np.array([2.0, 3.0, 60.0]), np.array([3.0, 4.0, 55.0])]
    assert groups_of(history) == [[2], [0, 1]]
    path = RescuePath(3)
    rng = np.random.default_rng(0)
    for t in range(1, 5):
        path.decide(t, None, 1.0, 1e-9)
        counts = np.array([t, t + 1, 50], dtype=np.int64)
        release = path.publish(t, counts, 1e-9, rng)
    # slot 4: cells 0 and 1 share one noisy sum (4 + 5, spread evenly), fed to their filters
    assert path.published == 4
    assert release[0] == pytest.approx(release[1], abs=2.0)


def test_the_spec_carries_the_path() -> None:
    spec = BUILTIN["rescuedp"]
    assert spec.data_path is RescuePath and spec.scaling == "global"
    assert isinstance(data_path_for("rescuedp", 4), RescuePath)


def test_a_fresh_interpreter_imports_the_module_first() -> None:
    """The registry imports this module; importing it first must not meet a half-built one."""
    code = "import wevent.mechanisms.streamdp.rescuedp as m; print(m.SPECS[0].name)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "rescuedp"


# ---------------------------------------------------------------------------- end to end


def test_wevent_run_rescuedp(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\n" + "".join(f"u{i},5,1\n" for i in range(40)))
    ledger = tmp_path / "run.jsonl"
    args = ["run", "rescuedp", "-r", str(req), "--stream", "sin", "--slots", "40"]
    result = CliRunner().invoke(cli, [*args, "--ledger", str(ledger)])
    assert result.exit_code == 0, result.output
    assert "40 of 40 slots run" in result.output and "every one accepted" in result.output
    checked = CliRunner().invoke(cli, ["check", str(ledger), "-r", str(req)])
    assert checked.exit_code == 0, checked.output


# ---------------------------------------------------------------------------- negative control


class _Overspending(RescueKernel[Any, Any]):
    """A broken RescueDP: phi forgotten (ln(I + 1) of the room, not a fifth of it) and the
    eps / 5 cap dropped; two slots after an empty window spend ln 3 > 1 times eps."""

    def plan(self, state: FixedState[Any], t: int) -> Plan[Any, Any]:
        alg = self.alg
        gap = alg.count_sub(alg.const(t), state.last)
        pubs = []
        for i, c in enumerate(self.served):
            spent = alg.add(
                state.dis[i].total(t - c.w + 1, t - 1), state.pub[i].total(t - c.w + 1, t - 1)
            )
            pubs.append(alg.scale(self._share(alg.sub(c.eps, spent), gap, t), 5))
        no, zero = alg.truth(False), alg.const(0)
        return Plan(no, no, tuple(zero for _ in self.served), tuple(pubs))


def _overspending(alg: Algebra[Any, Any], classes: Any, variant: str) -> Any:
    return _Overspending(alg, classes, variant)


OVERSPEND = dataclasses.replace(
    BUILTIN["rescuedp"], name="rescuedp-overspend", factory=_overspending
)


def test_an_overspending_rescuedp_is_refuted_by_the_gate() -> None:
    """The real kernel passes the same gate (tests/test_gate_mutants.py, every built-in)."""
    assert isinstance(OVERSPEND, AllocatorSpec)
    options = GateOptions(
        w_max=2, classes=1, examples=50, e2e_runs=1, conformance_inputs=5, search_runs=20
    )
    report = run_gate("tests.test_streamdp_rescuedp:OVERSPEND", options)
    assert report.verdict == "refuted", "\n".join(report.describe())
    cex = report.counterexample
    assert cex is not None and cex.replays()
    assert report.stage("proof").status == "failed"


def test_the_induction_covers_gaps_past_its_first_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel reads the slot number until slot 20 (the table's chain), so `--unbounded`
    starts its steps there (`induction_schedule`): the sound kernel is proved for every horizon,
    and a table that overspends from a gap of 7 on is refuted, though no step before slot 8 and
    no bounded search of 6 slots can see it."""
    from wevent.proofs.central import Scope, prove_allocator

    proof = prove_allocator("rescuedp", scope=Scope(classes=1, w_max=2), unbounded=True)
    assert proof.status == "proved" and "every horizon" in proof.statement
    bad = tuple(rescuedp.LOG_SHARES[i] if i < 7 else F(2) for i in range(20))
    monkeypatch.setattr(rescuedp, "LOG_SHARES", bad)
    monkeypatch.setattr(rescuedp, "P_MAX", F(2))
    monkeypatch.setattr(rescuedp, "E_MAX", F(100))
    refuted = prove_allocator("rescuedp", scope=Scope(classes=1, w_max=2), unbounded=True)
    assert refuted.status == "counterexample", refuted.reason
