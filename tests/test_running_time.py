"""001 Section 8.1's running-time experiment (``pwsm-time``): what is timed, how the fingerprint
treats wall times, the experiment's outputs and the verdicts on 001's stated orderings."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.ledger import Charge
from wevent.experiments import claims, provenance, running_time, timing
from wevent.experiments.harness import METRICS, RunResult, Size, execute, without_plots
from wevent.experiments.papers import SWEEPS, _pwsm
from wevent.experiments.populations import uniform_population
from wevent.experiments.registry import EXPERIMENTS
from wevent.experiments.running import run_mechanism
from wevent.experiments.stats import FAILS, HOLDS, interval
from wevent.mechanisms.central import clear_sm_cache
from wevent.mechanisms.streams import SyntheticStream
from wevent.verifier.guard import Guard

# ---------------------------------------------------------------------------------------------
# what is timed


@given(
    slots=st.integers(1, 10_000),
    guard=st.integers(0, 10**9),
    stream=st.integers(0, 10**9),
    mechanism=st.integers(0, 10**9),
)
def test_the_parts_of_a_slot_add_up(slots: int, guard: int, stream: int, mechanism: int) -> None:
    t = timing.SlotTiming(slots, guard + stream + mechanism, guard, stream, 3 * slots, slots)
    assert t.mechanism_ns == mechanism
    assert t.cpu_us == pytest.approx(2 / 1000)
    assert math.isclose(t.with_guard_us, t.without_guard_us + t.guard_us, abs_tol=1e-9)
    assert t.with_guard_us == pytest.approx((guard + mechanism) / 1000 / slots)


def test_no_slots_is_nan() -> None:
    assert math.isnan(timing.SlotTiming(0, 0, 0, 0).with_guard_us)


class _FakeTime:
    """Stands for the `time` module inside `timing`: a wall clock and a thread CPU clock that
    each move 1 ns a reading; `sleep` moves the wall clock only (waiting), `work` both (running),
    so what a test times does not depend on the machine's load."""

    def __init__(self) -> None:
        self.wall = 0
        self.cpu = 0

    def perf_counter_ns(self) -> int:
        self.wall += 1
        return self.wall

    def thread_time_ns(self) -> int:
        self.cpu += 1
        return self.cpu

    def sleep(self, seconds: float) -> None:
        self.wall += round(seconds * 1e9)

    def work(self, seconds: float) -> None:
        self.sleep(seconds)
        self.cpu += round(seconds * 1e9)


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> _FakeTime:
    fake = _FakeTime()
    monkeypatch.setattr(timing, "time", fake)
    return fake


class _SlowSpender:
    """A spender whose spends take at least ``delay`` seconds (and are recorded)."""

    def __init__(self, delay: float, clock: _FakeTime) -> None:
        self.delay = delay
        self.clock = clock
        self.spent: list[tuple[int, Budget]] = []

    def spend(self, slot: int, amount: Budget, **kw: object) -> None:
        self.clock.sleep(self.delay)
        self.spent.append((slot, amount))

    def define_group(self, name: str, members: tuple[str, ...]) -> None:
        raise AssertionError("not called")

    def define_group_by_index(self, name: str, table: object, indices: object) -> None:
        raise AssertionError("not called")

    def members(self, group: str) -> tuple[str, ...]:
        return ("u",)

    def group_size(self, group: str) -> int:
        return 7


class _Busy:
    """A stream whose ``histograms`` waits 1 ms and works 2 ms (on the fake clock)."""

    domain = 2
    slots = 3

    def __init__(self, clock: _FakeTime) -> None:
        self.clock = clock

    def histograms(self, slot: int, rng: np.random.Generator) -> np.ndarray[Any, Any]:
        self.clock.sleep(0.001)
        self.clock.work(0.002)
        return np.zeros(2, dtype=np.int64)


def test_cpu_time_leaves_out_waiting_and_wall_time_keeps_it(fake_time: _FakeTime) -> None:
    # cpu-us (a claims metric) is the thread's CPU time: a wait shows in the wall readings only.
    clock = timing.SlotClock()
    stream = timing.TimedStream(_Busy(fake_time), clock)
    with clock.step():
        fake_time.work(0.005)
        fake_time.sleep(0.004)
        stream.histograms(1, np.random.default_rng(0))
    t = clock.result()
    assert 3_000_000 <= t.stream_ns < 3_000_100 and 2_000_000 <= t.stream_cpu_ns < 2_000_100
    assert 12_000_000 <= t.step_ns < 12_000_100 and 7_000_000 <= t.step_cpu_ns < 7_000_100
    assert round(t.cpu_us) == 5_000 and round(t.with_guard_us) == 9_000


def test_the_timed_spender_passes_every_call_and_adds_its_time(fake_time: _FakeTime) -> None:
    clock = timing.SlotClock()
    inner = _SlowSpender(0.002, fake_time)
    spender = timing.TimedSpender(inner, clock)
    spender.spend(1, Budget("0.1"), group="g")
    charges: Iterable[Charge] = [Charge(2, Budget("0.2"), group="g"), Charge(2, Budget("0.3"))]
    spender.spend_many(charges)  # the inner one has no spend_many: one spend each
    assert inner.spent == [(1, Budget("0.1")), (2, Budget("0.2")), (2, Budget("0.3"))]
    assert clock.guard_ns >= 3 * 2_000_000
    assert spender.group_size("g") == 7 and spender.members("g") == ("u",)
    before = clock.guard_ns
    with spender.batch():  # no batch of its own: the block's spends pass and are timed
        spender.spend(3, Budget("0.4"), group="g")
    assert inner.spent[-1] == (3, Budget("0.4")) and clock.guard_ns >= before + 2_000_000


class _Batching:
    """A spender whose batch takes ``delay`` seconds to enter and to exit (a commit), and
    records what it was told."""

    def __init__(self, delay: float, clock: _FakeTime) -> None:
        self.delay = delay
        self.clock = clock
        self.events: list[str] = []

    def spend(self, slot: int, amount: Budget, **kw: object) -> None:
        self.events.append("spend")

    def define_group(self, name: str, members: tuple[str, ...]) -> None:
        raise AssertionError("not called")

    def define_group_by_index(self, name: str, table: object, indices: object) -> None:
        raise AssertionError("not called")

    def members(self, group: str) -> tuple[str, ...]:
        return ()

    def group_size(self, group: str) -> int:
        return 0

    @contextmanager
    def batch(self) -> Iterator[None]:
        self.clock.sleep(self.delay)
        self.events.append("enter")
        try:
            yield
        finally:
            self.clock.sleep(self.delay)
            self.events.append("exit")


def test_a_batchs_entry_and_exit_are_the_guards_time_and_its_block_is_not(
    fake_time: _FakeTime,
) -> None:
    clock = timing.SlotClock()
    inner = _Batching(0.003, fake_time)
    spender = timing.TimedSpender(inner, clock)
    with spender.batch():
        spender.spend(1, Budget("0.1"))
        fake_time.sleep(0.02)  # the block's own work: not the guard's
    assert inner.events == ["enter", "spend", "exit"]
    assert 6_000_000 <= clock.guard_ns < 6_000_100
    # a block that raises: the exit is still timed, and the error passes
    with pytest.raises(ValueError, match="boom"), spender.batch():
        raise ValueError("boom")
    assert inner.events[-2:] == ["enter", "exit"] and clock.guard_ns >= 12_000_000


def test_the_guards_commit_at_a_batchs_end_is_the_guards_time(
    tmp_path: Path, fake_time: _FakeTime
) -> None:
    # A local-budget runner charges in `batched(spender)`: the guard commits its durable ledger
    # when the block ends. A commit made slow by 5 ms shows in guard-us, not in the mechanism's.
    pop = uniform_population(200, 10, Fraction(1))
    stream = SyntheticStream("sin", 10, [200], 1)
    clock = timing.SlotClock()
    slow = Guard._commit
    commits = [0]

    def commit(self: Guard) -> None:
        commits[0] += 1
        fake_time.sleep(0.005)
        slow(self)

    mp = pytest.MonkeyPatch()
    mp.setattr(Guard, "_commit", commit)
    try:
        run_mechanism(
            "lbd", pop, stream, slots=10, seed=1, clock=clock, ledger_path=tmp_path / "l.jsonl"
        )
    finally:
        mp.undo()
    t = clock.result()
    assert commits[0] >= 10
    assert commits[0] * 5_000_000 <= t.guard_ns < commits[0] * 5_000_000 + 100_000
    assert t.mechanism_ns < 100_000  # no commit's 5 ms in it


def test_a_refused_spend_is_still_timed_and_raised() -> None:
    clock = timing.SlotClock()
    guard = Guard(uniform_population(3, 2, Fraction(1)))
    spender = timing.TimedSpender(guard, clock)
    spender.spend(1, Budget(1), user="u0")
    with pytest.raises(Exception, match="refused"):
        spender.spend(1, Budget(1), user="u0")
    assert clock.guard_ns > 0 and len(guard.ledger) == 1


def test_the_timed_stream_gives_the_same_histograms() -> None:
    clock = timing.SlotClock()
    inner = SyntheticStream("sin", 5, [3, 4], 0)
    timed = timing.TimedStream(inner, clock)
    assert (timed.domain, timed.slots) == (inner.domain, inner.slots)
    a = timed.histograms(2, np.random.default_rng(1))
    b = inner.histograms(2, np.random.default_rng(1))
    assert np.array_equal(a, b) and clock.stream_ns > 0


def _same_run(a: RunResult, b: RunResult) -> bool:
    return (
        np.array_equal(a.release, b.release)
        and np.array_equal(a.truth, b.truth)
        and (a.statuses, a.charges, a.reports) == (b.statuses, b.charges, b.reports)
    )


@pytest.mark.parametrize("mechanism", running_time.MECHANISMS)
def test_timing_changes_no_release(mechanism: str) -> None:
    point = running_time.POINTS[0]
    pop = _pwsm(point, mechanism, 400, 3)
    plain = execute(mechanism, pop, "log", 25, 3)
    timed = execute(mechanism, pop, "log", 25, 3, timed=True)
    assert plain.timing is None and timed.timing is not None
    assert _same_run(plain, timed)
    t = timed.timing
    assert t.slots == 25 and t.guard_ns > 0 and t.stream_ns > 0 and t.mechanism_ns > 0
    assert t.step_ns > t.guard_ns + t.stream_ns
    assert 0 < t.stream_cpu_ns < t.step_cpu_ns


@pytest.mark.parametrize("mechanism", ["bd", "dpba", "lbd"])
def test_timing_changes_no_ledger_byte(mechanism: str, tmp_path: Path) -> None:
    if mechanism == "lbd":
        pop = uniform_population(300, 10, Fraction(1))
    else:
        pop = _pwsm(running_time.POINTS[0], mechanism, 300, 4)
    files = {}
    for name, clock in (("plain", None), ("timed", timing.SlotClock())):
        clear_sm_cache()
        stream = SyntheticStream("sin", 20, [c.count for c in pop.classes], 4)
        ledger, releases = tmp_path / f"{name}.csv", tmp_path / f"{name}-releases.csv"
        run_mechanism(
            mechanism,
            pop,
            stream,
            slots=20,
            seed=4,
            clock=clock,
            ledger_path=ledger,
            releases_path=releases,
        )
        files[name] = (ledger.read_bytes(), releases.read_bytes())
    assert files["plain"] == files["timed"]
    assert files["plain"][0].count(b"\n") > 2


def test_a_timed_run_is_timed_by_the_guards_calls(fake_time: _FakeTime) -> None:
    # The guard's share is the time of its calls: a guard made slow by 1 ms a call shows it
    # in guard-us, not in the mechanism's own time.
    pop = _pwsm(running_time.POINTS[0], "bd", 300, 0)
    stream = SyntheticStream("sin", 6, [c.count for c in pop.classes], 0)
    clock = timing.SlotClock()
    slow = Guard.spend_many

    def spend_many(self: Guard, charges: Iterable[Charge]) -> None:
        fake_time.sleep(0.001)
        slow(self, charges)

    mp = pytest.MonkeyPatch()
    mp.setattr(Guard, "spend_many", spend_many)
    try:
        summary = run_mechanism("bd", pop, stream, slots=6, seed=0, clock=clock)
    finally:
        mp.undo()
    t = clock.result()
    calls = 6 + summary.count("published")  # one spend_many per dissimilarity and publication
    assert calls * 1_000_000 <= t.guard_ns < calls * 1_000_000 + 10_000
    assert 0 <= t.step_ns - t.guard_ns < 10_000
    assert t.guard_us > t.without_guard_us


def test_population_runners_are_not_timed() -> None:
    pop = uniform_population(200, 5, Fraction(1))
    stream = SyntheticStream("sin", 5, [200], 0)
    with pytest.raises(BudgetError, match=r"budget-division runners.*user_values"):
        run_mechanism("lpd", pop, stream, slots=5, seed=0, clock=timing.SlotClock())


def test_a_time_metric_needs_a_timed_run() -> None:
    res = execute("bd", uniform_population(50, 5, Fraction(1)), "sin", 4, 0)
    with pytest.raises(BudgetError, match="timed run"):
        METRICS["time-us"](res)
    assert (
        METRICS["publications"](res) + METRICS["skips"](res) + METRICS["nullifications"](res) == 4
    )


# ---------------------------------------------------------------------------------------------
# fingerprints: wall times are left out, their deterministic companions are not

HEAD = "experiment,dataset,mechanism,epsilon,w,metric,value,std,setting,runs,ci_low,ci_high\n"
ROWS = (
    "pwsm-time,sin,bd,0.2,120,time-us,812.5,nan,eps=0.2,1,nan,nan\n"
    "pwsm-time,sin,bd,0.2,120,guard-us,100.25,nan,eps=0.2,1,nan,nan\n"
    "pwsm-time,sin,bd,0.2,120,publications,7.0,nan,eps=0.2,1,nan,nan\n"
)
WANT = HEAD + ROWS


def test_a_changed_wall_time_passes_the_fingerprint() -> None:
    got = WANT.replace("812.5", "1945.0625").replace("100.25", "3.5")
    assert provenance.compare_fingerprints(WANT, got) == []
    # with repeats, the spread and the interval may move too
    want = HEAD + "pwsm-time,sin,bd,0.2,120,time-us,812.5,10.0,eps=0.2,2,700.0,900.0\n"
    got = HEAD + "pwsm-time,sin,bd,0.2,120,time-us,640.0,99.0,eps=0.2,2,-50.0,1300.0\n"
    assert provenance.compare_fingerprints(want, got) == []


@given(
    a=st.floats(min_value=1e-6, max_value=1e9),
    b=st.floats(min_value=1e-6, max_value=1e9),
    count=st.integers(0, 10_000),
    other=st.integers(0, 10_000),
)
def test_any_positive_times_pass_and_any_changed_count_fails(
    a: float, b: float, count: int, other: int
) -> None:
    def fp(time_us: float, n: int) -> str:
        return (
            HEAD + f"pwsm-time,log,pba,0.6,40,time-us,{time_us!r},nan,w=40,1,nan,nan\n"
            f"pwsm-time,log,pba,0.6,40,publications,{float(n)!r},nan,w=40,1,nan,nan\n"
        )

    assert provenance.compare_fingerprints(fp(a, count), fp(b, count)) == []
    moved = provenance.compare_fingerprints(fp(a, count), fp(b, other))
    assert (moved == []) == (count == other)


def test_a_changed_count_fails_the_fingerprint() -> None:
    # negative control: the deterministic companion of the same runs is compared to 1e-9
    got = WANT.replace(",7.0,", ",8.0,")
    problems = provenance.compare_fingerprints(WANT, got)
    assert len(problems) == 1 and "7.0 became 8.0" in problems[0]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (",812.5,", ",0.0,"),  # a time must be positive
        (",812.5,", ",-3.0,"),
        (",812.5,", ",nan,"),
        (",812.5,", ",inf,"),
        (",812.5,", ",,"),
        ("time-us,812.5,nan", "time-us,812.5,1.0"),  # one repeat became several
        (
            "eps=0.2,1,nan,nan\npwsm-time,sin,bd,0.2,120,guard",
            "eps=0.4,1,nan,nan\npwsm-time,sin,bd,0.2,120,guard",
        ),  # the setting of a timed row
        ("bd,0.2,120,time-us", "ba,0.2,120,time-us"),  # its mechanism
        ("time-us,812.5", "amre,812.5"),  # a timed row became another metric
    ],
)
def test_a_wall_time_row_is_still_checked_for_what_is_deterministic(old: str, new: str) -> None:
    got = WANT.replace(old, new, 1)
    assert got != WANT
    assert provenance.compare_fingerprints(WANT, got) != []


def test_without_the_wall_clock_rule_a_changed_time_would_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # negative control of the rule itself
    got = WANT.replace("812.5", "1945.0625")
    monkeypatch.setattr(provenance, "WALL_CLOCK", frozenset())
    assert provenance.compare_fingerprints(WANT, got) != []


def test_another_experiments_row_of_a_clock_metric_is_compared_exactly() -> None:
    # the rule is keyed on the experiment too: a row named time-us of an untimed experiment
    # is an ordinary result
    other = WANT.replace("pwsm-time,", "pwsm-epsilon,")
    got = other.replace("812.5", "1945.0625")
    problems = provenance.compare_fingerprints(other, got)
    assert len(problems) == 1 and "812.5 became 1945.0625" in problems[0]
    # and one that moved from a timed experiment to another is caught
    moved = WANT.replace("pwsm-time,sin,bd,0.2,120,time-us", "pwsm-w,sin,bd,0.2,120,time-us")
    assert provenance.compare_fingerprints(WANT, moved) != []


def test_the_timed_experiments_are_the_timed_sweeps() -> None:
    sweeps = [*SWEEPS.values(), running_time.TIME_SWEEP]
    assert {s.experiment for s in sweeps if s.timed} == timing.TIMED_EXPERIMENTS


def test_the_wall_clock_metrics_are_the_times() -> None:
    assert {"time-us", "time-us-noguard", "guard-us", "cpu-us"} == timing.WALL_CLOCK
    assert set(METRICS) >= timing.WALL_CLOCK
    assert not timing.WALL_CLOCK & {"charges", "publications", "skips", "nullifications"}
    assert set(running_time.METRICS) >= timing.WALL_CLOCK


# ---------------------------------------------------------------------------------------------
# the experiment


def test_registered_and_sized() -> None:
    exp = EXPERIMENTS["pwsm-time"]
    assert exp.sized is not None and exp.full_users == 10_000 and exp.full_slots == 10_000
    assert running_time.TIME_SWEEP.timed
    assert running_time.TIME_SWEEP.mechanisms == ("bd", "ba", "pbd", "pba", "dpbd", "dpba")
    xs = [p.setting for p in running_time.POINTS]
    assert xs == [f"eps={e}" for e in ("0.2", "0.4", "0.6", "0.8", "1")] + [
        f"w={w}" for w in (40, 80, 120, 160, 200)
    ]
    assert all(p.w == 120 for p in running_time.POINTS[:5])
    assert all(p.epsilon == Fraction(3, 5) for p in running_time.POINTS[5:])


def test_a_quick_run_has_its_shape(tmp_path: Path) -> None:
    size = Size(300, 12, points=(0, 4, 5, 9), datasets=("sin",))
    files = running_time.running_time_experiment(tmp_path, 2, True, 5, size=size)
    names = {p.name for p in files}
    assert {"results.csv", "runs.csv", "table.md", "time-us.png", "publications.png"} <= names
    with (tmp_path / "results.csv").open(encoding="utf-8") as fh:
        results = list(csv.DictReader(fh))
    assert len(results) == len(running_time.METRICS) * 6 * 4
    assert {r["setting"] for r in results} == {"eps=0.2", "eps=1", "w=40", "w=200"}
    for r in results:
        assert r["runs"] == "2"
        if r["metric"] in timing.WALL_CLOCK:
            assert float(r["value"]) > 0
    with (tmp_path / "runs.csv").open(encoding="utf-8") as fh:
        runs = list(csv.DictReader(fh))
    assert len(runs) == 6 * 4 * 2 and {r["seed"] for r in runs} == {"5", "6"}
    for r in runs:
        counts = [float(r[k]) for k in ("publications", "skips", "nullifications")]
        assert sum(counts) == 12 == int(r["slots"])
        assert [int(c) for c in counts] == [
            int(r[k]) for k in ("published", "skipped", "nullified")
        ]
        assert float(r["charges"]) == float(r["ledger_rows"])
        total = float(r["time-us-noguard"]) + float(r["guard-us"])
        assert math.isclose(float(r["time-us"]), total, rel_tol=1e-9)
    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    for section in ("### TIME-US", "### CHARGES", "### ORDERINGS", "### RATIOS"):
        assert section in table
    assert "| 001 Fig. 13 | BD needs the least time | bd / dpbd (time-us) |" in table
    assert "| 001 Fig. 13 | BD needs the least time | bd / dpbd (cpu-us) |" in table
    assert "| dpba / bd (time-us) |" in table and "| dpba / bd (cpu-us) |" in table


def test_the_deterministic_outputs_repeat(tmp_path: Path) -> None:
    size = Size(300, 10, points=(0, 9), datasets=("lns",))

    def deterministic(out: Path) -> list[tuple[str, ...]]:
        with without_plots():  # (results.csv only)
            running_time.running_time_experiment(out, 1, True, 0, size=size)
        with (out / "results.csv").open(encoding="utf-8") as fh:
            return [
                tuple(r.values())
                for r in csv.DictReader(fh)
                if r["metric"] not in timing.WALL_CLOCK
            ]

    assert deterministic(tmp_path / "a") == deterministic(tmp_path / "b")


# ---------------------------------------------------------------------------------------------
# the verdicts on 001's statements


def _runs(
    times: dict[str, list[float]], settings: tuple[str, ...] = ("eps=0.2", "eps=1")
) -> claims.Runs:
    """Seed -> results with every mechanism's time (the same at every setting unless a list of
    per-setting values is given as 'mech@setting')."""
    out: claims.Runs = {}
    seeds = len(next(iter(times.values())))
    for s in range(seeds):
        res = out.setdefault(str(s), {})
        for key, values in times.items():
            mech, _, only = key.partition("@")
            for x in settings:
                if only and x != only:
                    continue
                res[("sin", mech, "time-us", x)] = values[s]
    return out


def test_ratio_of_is_the_geometric_paired_ratio() -> None:
    runs = _runs({"bd": [1.0, 2.0, 3.0], "dpbd": [2.0, 4.0, 6.5]})
    iv = running_time.ratio_of(runs, "sin", "eps", "bd", "dpbd")
    logs = interval([math.log(1 / 2), math.log(2 / 4), math.log(3 / 6.5)])
    assert iv.n == 3 and iv.mean == pytest.approx(math.exp(logs.mean))
    assert (iv.low, iv.high) == pytest.approx((math.exp(logs.low), math.exp(logs.high)))
    # per seed, the mean of the logs over the settings
    two = _runs({"bd@eps=0.2": [1.0, 1.0], "bd@eps=1": [1.0, 1.0], "ba": [4.0, 4.0]})
    two["0"][("sin", "ba", "time-us", "eps=1")] = 0.25
    two["1"][("sin", "ba", "time-us", "eps=1")] = 0.5
    iv = running_time.ratio_of(two, "sin", "eps", "ba", "bd")
    assert iv.mean == pytest.approx(math.exp((0.0 + math.log(2) / 2) / 2))  # seeds: 0, log 2 / 2


_TIMES = st.lists(st.floats(min_value=1e-3, max_value=1e6), min_size=2, max_size=2)


@given(a=st.lists(_TIMES, min_size=1, max_size=6), b=st.lists(_TIMES, min_size=1, max_size=6))
def test_swapping_the_mechanisms_inverts_the_ratio_and_mirrors_the_verdict(
    a: list[list[float]], b: list[list[float]]
) -> None:
    seeds = min(len(a), len(b))
    runs: claims.Runs = {
        str(s): {
            ("sin", m, "time-us", x): v[s][i]
            for m, v in (("bd", a), ("ba", b))
            for i, x in enumerate(("eps=0.2", "eps=1"))
        }
        for s in range(seeds)
    }
    ab = running_time.ratio_of(runs, "sin", "eps", "bd", "ba")
    ba = running_time.ratio_of(runs, "sin", "eps", "ba", "bd")
    assert ab.n == ba.n == seeds
    assert ab.mean * ba.mean == pytest.approx(1)
    mirror = {HOLDS: FAILS, FAILS: HOLDS, running_time.UNDECIDED: running_time.UNDECIDED}
    assert running_time.below_one(ba) == mirror[running_time.below_one(ab)]


def test_the_arithmetic_mean_of_ratios_contradicts_itself() -> None:
    # negative control of the property above: with A/B = 4 at one setting and 0.5 at the
    # other, the mean of A/B (2.25) and that of B/A (1.125) are both above 1, so the
    # arithmetic version says A is slower than B and B slower than A; the geometric one: A
    # slower (sqrt 2), B faster (1/sqrt 2)
    runs = _runs(
        {
            "bd@eps=0.2": [4.0, 4.1, 3.9, 4.0],
            "bd@eps=1": [0.5, 0.51, 0.49, 0.5],
            "ba": [1.0, 1.0, 1.0, 1.0],
        }
    )

    def arithmetic(a: str, b: str) -> str:
        iv = claims.paired_reduction(runs, "sin", a, b, "time-us")  # of 1 - a/b
        return running_time.below_one(type(iv)(1 - iv.mean, iv.std, 1 - iv.high, 1 - iv.low, iv.n))

    assert arithmetic("bd", "ba") == arithmetic("ba", "bd") == FAILS
    assert running_time.below_one(running_time.ratio_of(runs, "sin", "eps", "bd", "ba")) == FAILS
    assert running_time.below_one(running_time.ratio_of(runs, "sin", "eps", "ba", "bd")) == HOLDS


def test_orderings_hold_fail_or_stay_undecided() -> None:
    faster = _runs({"bd": [1.0, 1.1, 0.9, 1.0], "ba": [2.0, 2.1, 2.2, 1.9]})
    slower = _runs({"ba": [1.0, 1.1, 0.9, 1.0], "bd": [2.0, 2.1, 2.2, 1.9]})
    mixed = _runs({"bd": [1.0, 3.0, 1.0, 3.0], "ba": [2.0, 1.0, 2.0, 1.0]})
    verdict = {
        name: running_time.below_one(running_time.ratio_of(r, "sin", "eps", "bd", "ba"))
        for name, r in (("faster", faster), ("slower", slower), ("mixed", mixed))
    }
    assert verdict == {"faster": HOLDS, "slower": FAILS, "mixed": running_time.UNDECIDED}
    one_seed = _runs({"bd": [1.0], "ba": [2.0]})
    assert running_time.below_one(running_time.ratio_of(one_seed, "sin", "eps", "bd", "ba")) == (
        running_time.UNDECIDED
    )


def test_the_stable_verdict_reads_the_margin() -> None:
    def iv(values: list[float]) -> str:
        return running_time.stable_verdict(interval(values))

    assert iv([1.0, 1.01, 0.99, 1.02, 0.98]) == HOLDS
    assert iv([0.5, 0.52, 0.48, 0.5]) == FAILS
    assert iv([1.3, 1.32, 1.28]) == FAILS
    assert iv([1.0, 1.3, 0.8, 1.1]) == running_time.UNDECIDED  # straddles the margin
    assert iv([1.0]) == running_time.UNDECIDED
    assert (
        running_time.stable_verdict(interval([1.0, 1.01, 0.99]), Fraction(0))
        == running_time.UNDECIDED
    )


def test_trend_ratio_compares_the_largest_with_the_smallest_setting() -> None:
    xs = ("w=40", "w=120", "w=200")
    runs = _runs(
        {"bd@w=40": [4.0, 4.0, 4.0], "bd@w=120": [9.0] * 3, "bd@w=200": [1.0, 2.0, 1.0]}, xs
    )
    trend = running_time.Trend("t", "w", "bd", "decreases", "s", metric="time-us")
    iv = running_time.trend_ratio(runs, "sin", trend)
    assert iv.mean == pytest.approx(math.exp((math.log(0.25) + math.log(0.5) + math.log(0.25)) / 3))
    assert running_time.below_one(iv) == HOLDS
    # the settings are ordered by value, not as text ("w=200" < "w=40" as text)
    assert running_time._ends(runs, "w") == ("w=40", "w=200")


def test_a_trend_over_one_setting_is_not_decided() -> None:
    runs = _runs({"bd": [4.0, 4.5, 5.0]}, ("w=40",))
    trend = running_time.Trend("t", "w", "bd", "decreases", "s", metric="time-us")
    assert running_time._ends(runs, "w") is None
    iv = running_time.trend_ratio(runs, "sin", trend)
    assert iv.n == 0 and running_time.below_one(iv) == running_time.UNDECIDED
    lines = running_time.evaluate(runs, ("sin",))
    line = next(ln for ln in lines if "the time decreases as w grows | bd:" in ln)
    assert line.endswith("| n/a |") and "last / first w" in line


def test_evaluate_writes_one_line_per_statement() -> None:
    runs = _runs({m: [1.0 + i, 1.1 + i] for i, m in enumerate(running_time.MECHANISMS)})
    for r in runs.values():  # a CPU time beside every wall time
        r.update({(d, m, "cpu-us", x): v / 2 for (d, m, _, x), v in list(r.items())})
    lines = running_time.evaluate(runs, ("sin",))
    body = [ln for ln in lines if ln.startswith("| 001")]
    timed = [o for o in running_time.ORDERINGS if o.metric == "time-us"]
    cpu_trends = [t for t in running_time.TRENDS if t.metric == "cpu-us"]
    assert len(body) == len(running_time.ORDERINGS) + len(timed) + len(running_time.TRENDS) + len(
        cpu_trends
    )
    assert "| 001 Fig. 13 | BD needs the least time | bd / ba (time-us) |" in "\n".join(body)
    assert "| 001 Fig. 13 | BD needs the least time | bd / ba (cpu-us) |" in "\n".join(body)
    wall = next(ln for ln in body if "stable across E | bd: eps=1 / eps=0.2 (time-us)" in ln)
    assert "(wall, not decided)" in wall and "holds" not in wall
    cpu = next(ln for ln in body if "stable across E | bd: eps=1 / eps=0.2 (cpu-us)" in ln)
    assert cpu.endswith("1.000 [1.000, 1.000] holds |")  # the same time at both ends
    assert lines[0] == "### ORDERINGS" and "### RATIOS" in lines
    # no w settings in these runs: the w sweep's cells are n/a, not an error
    w_line = next(ln for ln in body if ln.startswith("| 001 Fig. 14 | PBD is slower than PBA"))
    assert w_line.endswith("| n/a |")
    e_line = next(ln for ln in body if ln.startswith("| 001 Fig. 13 | PBD is slower than PBA"))
    assert "n/a" not in e_line


def test_the_statements_are_001s() -> None:
    stated = {(o.statement, o.group) for o in running_time.ORDERINGS}
    for group in ("eps", "w"):
        for s in ("BD needs the least time", "PBD is slower than PBA", "DPBD is slower than DPBA"):
            assert (s, group) in stated
    least = [o for o in running_time.ORDERINGS if o.statement == "BD needs the least time"]
    assert {o.slower for o in least} == set(running_time.MECHANISMS) - {"bd"}
    most = [o for o in running_time.ORDERINGS if o.statement == "DPBD needs the most time"]
    assert {o.faster for o in most if o.group == "eps"} == {"ba", "pbd", "pba", "dpba"}
    kinds = {(t.group, t.kind, t.metric) for t in running_time.TRENDS}
    assert kinds == {
        ("eps", "stable", "cpu-us"),
        ("w", "decreases", "cpu-us"),
        ("w", "decreases", "publications"),
    }
