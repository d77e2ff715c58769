"""A small research run against the Java peer's loop (run on demand).

The workload: 2,000 users in one class (w = 3, eps = 1), a categorical Sin stream with d = 4
values, 400 slots, seed 1; every central allocator through
`wevent.experiments.running.run_mechanism`, the guard in the loop. In one process, after the
imports and one warm-up run per allocator, each allocator runs ``--runs`` times (seeds 1, 2, ...);
the table gives the median wall time of a run beside the peer's loop on the same histograms,
read from ``benchmarks/peer/peer_loop.json`` (written by ``benchmarks/peer/PeerLoopTiming.java``,
which drives streamdp-benchmark's own classes; see ``benchmarks/peer/README.md``). The peer has
no personalized or dynamic allocators: pbd and dpbd are set beside its BD, pba and dpba beside its
BA (with one class they allocate as BD and BA do).

``--breakdown`` splits a run: set-up (a run of 0 slots), then per slot the stream's data, the
budget kernel (plan and step), the guard's calls, the data path (the rest of the step: SM
sampling, OBS, noise, records) and what the loop does around the step. ``--sweep N`` times
`wevent.experiments.harness.execute_many` over N seeds of every allocator in this process.
``--cli K`` times K processes of ``python -m wevent run bd`` on the same workload and K of the
bare imports, the start-up a sweep of separate commands pays per run.

``--batch R`` times `wevent.mechanisms.batch.run_batch`: per allocator (the eight above and
bd-shift, ba-shift, the peer's own BD and BA rules), one batch of R runs on the workload's stream
(seed 1; the median of ``--batch-repeats`` batches), the time per run and its ratio to the peer's
median, with the budget kernel's share (plan and step) apart, and the runs where a budget came
within the batch's tolerance of 0 (`BatchResult.near_zero`); then a settings
sweep (eps in {1/2, 1, 2} x w in {3, 10}, R runs each) as six batches, and as two (one per w,
the three eps as budget factors over 3R runs), and the start-up of one batch (a batch of one
slot). Batch runs compute budgets in double precision with no guard and no ledger (their
module docstring): utility sweeps, not audited runs.

``--more`` times the seven central mechanisms of the peer that wevent also implements with their
own data paths or rules (fast-w, pegasus, dsat, adapub, rescuedp, bd-shift, ba-shift) the same
way (one exact run each through `run_mechanism`, ``--runs`` times after a warm-up) beside the
peer's classes (FAST_w, Pegasus, DSAT, AdaPub, RescueDP_MD, and BD and BA, which are the peer's
budget-shifting rules) read from ``benchmarks/peer/peer_loop_more.json``; with ``--batch R`` the
table adds the time per run of a batch of R runs of each (`MORE_BATCH`: `run_batch` runs all
seven, the five with data paths of their own over the lane paths of
`wevent.mechanisms.batch_streamdp`), and the first run beside the peer's first runs in a JVM of their own
(``fresh/`` beside that file). ``--more-only`` prints that table alone.

Wall times on a shared machine: the load averages are printed with every section, and the thread
CPU time of each run beside its wall time. Measurements, not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any
from unittest import mock

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.experiments import running
from wevent.experiments.timing import SlotClock
from wevent.mechanisms.central import clear_sm_cache
from wevent.mechanisms.streams import SyntheticStream

ALLOCATORS = ("uniform", "sample", "bd", "ba", "pbd", "pba", "dpbd", "dpba")
PEER_OF = {
    "uniform": "Uniform",
    "sample": "Sample",
    "bd": "BD",
    "ba": "BA",
    "pbd": "BD",
    "pba": "BA",
    "dpbd": "BD",
    "dpba": "BA",
    "bd-shift": "BD",  # the peer's BD and BA themselves (Kellaris's split; here d = 4, w = 3:
    "ba-shift": "BA",  # 2w > d, so no shift: the halves of bd and ba)
}
# ``--batch`` measures these too: bd-shift and ba-shift are what the peer's BD and BA compute.
BATCH_ALLOCATORS = (*ALLOCATORS, "bd-shift", "ba-shift")
# ``--more``: wevent's versions of the peer's other central mechanisms, and the peer's class of
# each (docs/peers.md, "streamdp-benchmark"); the peer's BD and BA shift budgets themselves.
MORE_PEER_OF = {
    "fast-w": "FAST_w",
    "pegasus": "Pegasus",
    "dsat": "DSAT",
    "adapub": "AdaPub",
    "rescuedp": "RescueDP_MD",
    "bd-shift": "BD",
    "ba-shift": "BA",
}
MORE = tuple(MORE_PEER_OF)
# run_batch runs all seven (the five with data paths of their own over lanes: batch_streamdp)
MORE_BATCH = ("fast-w", "pegasus", "dsat", "adapub", "rescuedp", "bd-shift", "ba-shift")
WITHIN = 10.0  # the aim: at most this many times the peer's median
USERS, DOMAIN, SLOTS, W, EPS, DATASET = 2000, 4, 400, 3, 1, "sin"
PEER_FILE = Path(__file__).resolve().parent / "peer" / "peer_loop.json"
PEER_MORE_FILE = Path(__file__).resolve().parent / "peer" / "peer_loop_more.json"
# One driver run per mechanism (its sixth argument), so each first run is in a fresh JVM; in
# peer_loop.json only the first mechanism's is (the others follow its warm-up).
PEER_FRESH = Path(__file__).resolve().parent / "peer" / "fresh"


def fresh_first_runs(folder: Path) -> dict[str, dict[str, Any]]:
    """Each mechanism's run from its own driver process (empty if none is recorded)."""
    runs: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for r in record["runs"]:
            if r.get("first_in_fresh_jvm"):
                runs[r["mechanism"]] = {**r, "loadavg_before": record["loadavg_before"]}
    return runs


def population() -> Population:
    return Population.from_classes({Fixed(W, Budget(EPS)): USERS})


def stream(seed: int) -> SyntheticStream:
    return SyntheticStream(DATASET, SLOTS, [USERS], seed, DOMAIN)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load averages {one:.2f} {five:.2f} {fifteen:.2f}"


def timed_run(
    mechanism: str, pop: Population, seed: int, slots: int = SLOTS
) -> tuple[float, float]:
    """Wall and thread CPU seconds of one run (the stream built outside the timing)."""
    s = stream(seed)
    wall, cpu = time.perf_counter(), time.thread_time()
    summary = running.run_mechanism(mechanism, pop, s, slots=slots, seed=seed)
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    assert summary.ok, summary.refusal
    return wall, cpu


def per_allocator(
    pop: Population, runs: int, mechanisms: tuple[str, ...] = ALLOCATORS
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for mech in mechanisms:
        clear_sm_cache()
        first_wall, _ = timed_run(mech, pop, 1)  # warm-up: its OBS results are cached
        walls, cpus = [], []
        for k in range(runs):
            wall, cpu = timed_run(mech, pop, 1 + k)
            walls.append(wall)
            cpus.append(cpu)
        out[mech] = {
            "first_ms": first_wall * 1e3,
            "median_ms": statistics.median(walls) * 1e3,
            "cpu_ms": statistics.median(cpus) * 1e3,
            "min_ms": min(walls) * 1e3,
        }
    return out


class _TimedKernel:
    """A kernel whose plan and step (and start) are timed into ``ns[0]``."""

    def __init__(self, inner: Any, ns: list[int]) -> None:
        self._inner, self._ns = inner, ns

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _timed(self, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return fn(*args)
        finally:
            self._ns[0] += time.perf_counter_ns() - t0

    def start(self) -> Any:
        return self._timed(self._inner.start)

    def plan(self, state: Any, t: int) -> Any:
        return self._timed(self._inner.plan, state, t)

    def step(self, state: Any, t: int, plan: Any, published: Any) -> Any:
        return self._timed(self._inner.step, state, t, plan, published)


def _kernel_timer(ns: list[int]) -> Any:
    """Every kernel `run_mechanism` builds while this is entered is a `_TimedKernel`."""
    original = running.kernel_for  # type: ignore[attr-defined]

    def timed_kernel_for(*args: Any, **kwargs: Any) -> Any:
        return _TimedKernel(original(*args, **kwargs), ns)

    return mock.patch.object(running, "kernel_for", timed_kernel_for)


def breakdown(pop: Population, runs: int) -> dict[str, dict[str, float]]:
    """Median over ``runs`` instrumented runs of each part (set-up in ms, the rest in us per
    slot)."""
    out: dict[str, dict[str, float]] = {}
    for mech in ALLOCATORS:
        timed_run(mech, pop, 1)  # warm
        setup = statistics.median(timed_run(mech, pop, 1 + k, slots=0)[0] for k in range(runs))
        parts: dict[str, list[float]] = {}
        for k in range(runs):
            ns = [0]
            clock = SlotClock()
            s = stream(1 + k)
            with _kernel_timer(ns):
                wall = time.perf_counter_ns()
                running.run_mechanism(mech, pop, s, slots=SLOTS, seed=1 + k, clock=clock)
                wall = time.perf_counter_ns() - wall
            t = clock.result()
            kernel = ns[0]
            values = {
                "total_ms": wall / 1e6,
                "stream": t.stream_ns,
                "kernel": kernel,
                "guard": t.guard_ns,
                "data": t.step_ns - t.stream_ns - t.guard_ns - kernel,
                "loop": wall - setup * 1e9 - t.step_ns,
            }
            for name, value in values.items():
                parts.setdefault(name, []).append(value)
        row = {"setup_ms": setup * 1e3}
        for name, values_ in parts.items():
            med = statistics.median(values_)
            row[name] = med if name == "total_ms" else med / SLOTS / 1e3  # us per slot
        out[mech] = row
    return out


def sweep(pop: Population, seeds: int) -> tuple[int, float]:
    # imported here: the per-allocator part also runs on commits without the sweep API
    from wevent.experiments.harness import execute_many

    wall = time.perf_counter()
    count = sum(
        1 for _ in execute_many(ALLOCATORS, pop, DATASET, SLOTS, range(seeds), domain=DOMAIN)
    )
    return count, time.perf_counter() - wall


def cli(repeats: int) -> tuple[list[float], list[float]]:
    """Wall seconds of ``python -m wevent run bd`` on the workload, and of the imports alone."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.csv"
        req.write_text(
            "user,w,epsilon\n" + "".join(f"u{i},{W},{EPS}\n" for i in range(USERS)),
            encoding="utf-8",
        )
        run = [sys.executable, "-m", "wevent", "run", "bd", "-r", str(req), "--stream", DATASET]
        run += ["--slots", str(SLOTS), "--domain", str(DOMAIN), "--seed", "1"]
        imports = [sys.executable, "-c", "import wevent.cli"]
        out: tuple[list[float], list[float]] = ([], [])
        for argv, into in ((run, out[0]), (imports, out[1])):
            for _ in range(repeats):
                t0 = time.perf_counter()
                subprocess.run(argv, env=env, check=True, capture_output=True, cwd=tmp)
                into.append(time.perf_counter() - t0)
    return out


def _timed_kernels(ns: list[int]) -> Any:
    """Every kernel `run_batch` builds while this is entered is a `_TimedKernel` (wall time of
    plan and step into ``ns[0]``)."""
    from wevent.mechanisms import batch
    from wevent.mechanisms.allocators.registry import kernel_for as original

    def timed(*args: Any, **kwargs: Any) -> Any:
        return _TimedKernel(original(*args, **kwargs), ns)

    return mock.patch.object(batch, "kernel_for", timed)


def batch_runs(
    pop: Population, runs: int, repeats: int, mechanisms: tuple[str, ...] = BATCH_ALLOCATORS
) -> dict[str, dict[str, Any]]:
    """Per allocator: the median wall and CPU time of one batch of ``runs`` runs (after a warm-up
    batch), and the kernel's CPU time in it."""
    from wevent.mechanisms.batch import batch_histograms, run_batch

    hists = batch_histograms(stream(1), SLOTS, 1)
    out: dict[str, dict[str, Any]] = {}
    for mech in mechanisms:
        run_batch(mech, pop, hists, slots=SLOTS, runs=runs)  # warm-up
        walls, cpus, kernels, pubs, amres, near = [], [], [], [], [], []
        for k in range(repeats):
            ns = [0]
            with _timed_kernels(ns):
                wall, cpu = time.perf_counter(), time.thread_time()
                res = run_batch(mech, pop, hists, slots=SLOTS, runs=runs, seed=1 + k)
                cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            walls.append(wall)
            cpus.append(cpu)
            kernels.append(ns[0] / 1e9)
            pubs.append(float(res.published.mean()))
            amres.append(float(res.amre.mean()))
            near.append(int((res.near_zero > 0).sum()))
        out[mech] = {
            "wall_ms": statistics.median(walls) * 1e3,
            "cpu_ms": statistics.median(cpus) * 1e3,
            "kernel_ms": statistics.median(kernels) * 1e3,
            "published": statistics.mean(pubs),
            "amre": statistics.mean(amres),
            "near_zero_runs": max(near),
            "stream": res.stream_origin,
        }
    return out


@dataclass(frozen=True)
class MoreRow:
    """One of ``--more``'s rows: wevent's exact run (and batch, if any) beside the peer's class."""

    mechanism: str
    peer: str
    peer_run: dict[str, Any] | None  # the peer's recorded figures; None if not recorded
    first_ms: float
    median_ms: float
    cpu_ms: float
    batch_us: float | None  # time per run of a batch (wall); None where run_batch refuses it
    peer_first: dict[str, Any] | None = None  # its first run in a JVM of its own, if recorded
    batch_cpu_us: float | None = None  # the batch's CPU time (this thread) per run, if measured

    def _over(self, ms: float | None) -> float | None:
        if ms is None or self.peer_run is None:
            return None
        return ms / float(self.peer_run["median_ms"])

    @property
    def first_ratio(self) -> float | None:
        """The exact first run over the peer's first run in a fresh JVM."""
        if self.peer_first is None:
            return None
        return self.first_ms / float(self.peer_first["first_ms"])

    @property
    def ratio(self) -> float | None:
        """The exact run's median over the peer's median."""
        return self._over(self.median_ms)

    @property
    def batch_ratio(self) -> float | None:
        """A batch's time per run over the peer's median."""
        return self._over(None if self.batch_us is None else self.batch_us / 1e3)


def within(ratio: float | None) -> str:
    """``yes`` or ``no`` against the aim, ``-`` where there is nothing to compare."""
    if ratio is None:
        return "-"
    return "yes" if ratio <= WITHIN else "no"


def more_rows(
    exact: dict[str, dict[str, float]],
    batch_us: dict[str, float],
    peer_runs: dict[str, dict[str, Any]],
    peer_first: dict[str, dict[str, Any]] | None = None,
    batch_cpu_us: dict[str, float] | None = None,
) -> list[MoreRow]:
    """The rows of ``--more``, in the order of ``exact``: each mechanism beside its peer class
    (`MORE_PEER_OF`), with a batch's time per run where ``batch_us`` has one (and its CPU time
    per run where ``batch_cpu_us`` has one) and the peer's first run in a fresh JVM where
    ``peer_first`` has one (`fresh_first_runs`)."""
    firsts = peer_first or {}
    cpus = batch_cpu_us or {}
    return [
        MoreRow(
            mechanism=mech,
            peer=MORE_PEER_OF[mech],
            peer_run=peer_runs.get(MORE_PEER_OF[mech]),
            first_ms=r["first_ms"],
            median_ms=r["median_ms"],
            cpu_ms=r["cpu_ms"],
            batch_us=batch_us.get(mech),
            peer_first=firsts.get(MORE_PEER_OF[mech]),
            batch_cpu_us=cpus.get(mech),
        )
        for mech, r in exact.items()
    ]


def more_table(rows: list[MoreRow], batch: int) -> str:
    """``--more``'s markdown table (``batch``: the runs per batch, 0 for no batch columns)."""
    head = (
        "| mechanism | first run ms | median ms | cpu ms | peer class | peer median ms (p10 - p90) "
        "| median / peer median | within 10x | peer first ms (fresh JVM) | first / peer first |"
    )
    rule = "|---|---|---|---|---|---|---|---|---|---|"
    if batch:
        head += (
            f" batch of {batch}: per run us (wall) | per run us (CPU) | per run / peer median "
            "| within 10x |"
        )
        rule += "---|---|---|---|"
    lines = [head, rule]
    for r in rows:
        p = r.peer_run
        peer = (
            "not recorded"
            if p is None
            else f"{p['median_ms']:.4f} ({p['p10_ms']:.4f} - {p['p90_ms']:.4f})"
        )
        ratio = "-" if r.ratio is None else f"{r.ratio:,.0f}x"
        first = "not recorded" if r.peer_first is None else f"{r.peer_first['first_ms']:.3f}"
        first_ratio = "-" if r.first_ratio is None else f"{r.first_ratio:,.1f}x"
        line = (
            f"| {r.mechanism} | {r.first_ms:.1f} | {r.median_ms:.1f} | {r.cpu_ms:.1f} | {r.peer} "
            f"| {peer} | {ratio} | {within(r.ratio)} | {first} | {first_ratio} |"
        )
        if batch:
            if r.batch_us is None:
                line += " no batch | - | - | - |"
            else:
                b = "-" if r.batch_ratio is None else f"{r.batch_ratio:.1f}x"
                cpu = "-" if r.batch_cpu_us is None else f"{r.batch_cpu_us:.0f}"
                line += f" {r.batch_us:.0f} | {cpu} | {b} | {within(r.batch_ratio)} |"
        lines.append(line)
    return "\n".join(lines)


SWEEP_EPS = (Fraction(1, 2), Fraction(1), Fraction(2))
SWEEP_W = (3, 10)


def batch_sweep(runs: int, mech: str) -> dict[str, float]:
    """The settings sweep of ``--batch``: seconds for six batches (one per setting), for two
    (one per w, eps as budget factors), and for a batch of one slot (the start-up)."""
    from wevent.mechanisms.batch import batch_histograms, run_batch

    hists = batch_histograms(stream(1), SLOTS, 1)
    t0 = time.perf_counter()
    means: dict[tuple[int, Fraction], float] = {}
    for w in SWEEP_W:
        for eps in SWEEP_EPS:
            pop = Population.from_classes({Fixed(w, Budget(eps)): USERS})
            means[w, eps] = float(run_batch(mech, pop, hists, slots=SLOTS, runs=runs).amre.mean())
    six = time.perf_counter() - t0
    t0 = time.perf_counter()
    for w in SWEEP_W:
        pop = Population.from_classes({Fixed(w, Budget(1)): USERS})
        factors = [eps for eps in SWEEP_EPS for _ in range(runs)]
        res = run_batch(mech, pop, hists, slots=SLOTS, runs=len(factors), factors=factors)
        for i, eps in enumerate(SWEEP_EPS):
            # the same settings: the mean AMRE of each eps agrees with its own batch's
            part = float(res.amre[i * runs : (i + 1) * runs].mean())
            assert abs(part - means[w, eps]) <= 0.2 * means[w, eps], (w, eps, part)
    two = time.perf_counter() - t0
    pop = population()
    starts = []
    for _ in range(5):
        t0 = time.perf_counter()
        run_batch(mech, pop, hists, slots=1, runs=runs)
        starts.append(time.perf_counter() - t0)
    return {"six_s": six, "two_s": two, "startup_ms": statistics.median(starts) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per allocator")
    parser.add_argument("--breakdown", action="store_true", help="where a run's time goes")
    parser.add_argument("--sweep", type=int, default=0, metavar="N", help="execute_many, N seeds")
    parser.add_argument("--cli", type=int, default=0, metavar="K", help="K `wevent run` processes")
    parser.add_argument("--peer", type=Path, default=PEER_FILE, help="the peer's recorded figures")
    parser.add_argument(
        "--batch", type=int, default=0, metavar="R", help="run_batch: R runs per batch (1000)"
    )
    parser.add_argument("--batch-repeats", type=int, default=3, help="timed batches per allocator")
    parser.add_argument(
        "--batch-only", action="store_true", help="with --batch: skip the exact runs' table"
    )
    parser.add_argument(
        "--more", action="store_true", help="the seven mechanisms of the peer's other classes"
    )
    parser.add_argument(
        "--more-only", action="store_true", help="--more's table alone (with --batch: its batches)"
    )
    parser.add_argument(
        "--more-peer", type=Path, default=PEER_MORE_FILE, help="the peer's figures for --more"
    )
    args = parser.parse_args()

    peer = json.loads(args.peer.read_text(encoding="utf-8"))
    peer_runs = {r["mechanism"]: r for r in peer["runs"]}
    fresh = fresh_first_runs(PEER_FRESH)
    print(
        f"{datetime.now(UTC).isoformat(timespec='seconds')}, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} cores; {USERS} users, d = {DOMAIN}, "
        f"{SLOTS} slots, w = {W}, eps = {EPS}, {DATASET} stream"
    )
    print(
        f"peer: {peer['peer']}, {peer['java']}, measured {peer['measured_at']} "
        f"(load {peer['loadavg_before']}); its Laplace table (start-up) "
        f"{peer['laplace_table_ms']:.0f} ms"
    )
    pop = population()
    if args.more or args.more_only:
        more_section(pop, args.runs, args.batch, args.batch_repeats, args.more_peer)
        if args.more_only:
            return
    if args.batch:
        batch_section(pop, args.batch, args.batch_repeats, peer_runs)
        if args.batch_only:
            return
    print(f"\n## One run per allocator ({args.runs} runs after a warm-up; {load()})\n")
    rows = per_allocator(pop, args.runs)
    print(
        "| allocator | first run ms | median ms | cpu ms | peer | peer median ms "
        "| peer first ms (fresh JVM) | median / peer median | first / peer first | within 10x |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mech, r in rows.items():
        p = peer_runs[PEER_OF[mech]]
        ratio = r["median_ms"] / p["median_ms"]
        first = fresh.get(PEER_OF[mech])  # a first run after another mechanism's is not one
        if first is None and p.get("first_in_fresh_jvm", PEER_OF[mech] == "Uniform"):
            first = p
        peer_first = f"{first['first_ms']:.3f}" if first else "not recorded"
        ratio_first = f"{r['first_ms'] / first['first_ms']:,.0f}x" if first else "-"
        print(
            f"| {mech} | {r['first_ms']:.1f} | {r['median_ms']:.1f} | {r['cpu_ms']:.1f} "
            f"| {p['mechanism']} | {p['median_ms']:.4f} | {peer_first} | {ratio:,.0f}x "
            f"| {ratio_first} | {'yes' if ratio <= 10 else 'no'} |"
        )
    used = [f for name, f in fresh.items() if name in PEER_OF.values()]
    if used:
        loads = sorted({f["loadavg_before"] for f in used})
        print(f"\n(the peer's first runs, one driver process each: load {'; '.join(loads)})")
    print(f"\n({load()})")
    if args.breakdown:
        print(f"\n## Where a run's time goes (median of {args.runs} instrumented runs; {load()})\n")
        print(
            "| allocator | set-up ms | instrumented run ms | stream us/slot | kernel us/slot "
            "| guard us/slot | data path us/slot | loop us/slot |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for mech, b in breakdown(pop, args.runs).items():
            print(
                f"| {mech} | {b['setup_ms']:.2f} | {b['total_ms']:.1f} | {b['stream']:.1f} "
                f"| {b['kernel']:.1f} | {b['guard']:.1f} | {b['data']:.1f} | {b['loop']:.1f} |"
            )
        print(f"\n({load()})")
    if args.sweep:
        count, seconds = sweep(pop, args.sweep)
        print(
            f"\n## execute_many: {len(ALLOCATORS)} allocators x {args.sweep} seeds in one process\n"
        )
        print(
            f"{count} runs in {seconds:.2f} s = {seconds / count * 1e3:.1f} ms per run ({load()})"
        )
    if args.cli:
        runs_, imports = cli(args.cli)
        print(f"\n## The command line: {args.cli} processes each ({load()})\n")
        print(
            f"`python -m wevent run bd` on the workload: median {statistics.median(runs_):.2f} s; "
            f"`python -c 'import wevent.cli'`: median {statistics.median(imports):.2f} s"
        )


def more_section(pop: Population, runs: int, batch: int, repeats: int, peer_file: Path) -> None:
    """The seven mechanisms of ``--more`` beside the peer's classes (and, with ``batch``, the
    batches of those `run_batch` accepts)."""
    peer = json.loads(peer_file.read_text(encoding="utf-8"))
    print(
        f"\n## The peer's other mechanisms ({runs} runs after a warm-up; {load()})\n\n"
        f"(peer: {peer_file.name}, {peer['java']}, measured {peer['measured_at']}, load "
        f"{peer['loadavg_before']} before and {peer['loadavg_after']} after)\n"
    )
    exact = per_allocator(pop, runs, MORE)
    batch_us: dict[str, float] = {}
    batch_cpu_us: dict[str, float] = {}
    if batch:
        print(f"(exact runs done; {load()}; batches of {batch}, median of {repeats})\n")
        for mech, r in batch_runs(pop, batch, repeats, MORE_BATCH).items():
            batch_us[mech] = r["wall_ms"] * 1e3 / batch
            batch_cpu_us[mech] = r["cpu_ms"] * 1e3 / batch
    fresh = fresh_first_runs(peer_file.parent / "fresh")
    peer_runs = {r["mechanism"]: r for r in peer["runs"]}
    rows = more_rows(exact, batch_us, peer_runs, fresh, batch_cpu_us)
    print(more_table(rows, batch))
    used = [r.peer_first for r in rows if r.peer_first is not None]
    if used:
        loads = sorted({f["loadavg_before"] for f in used})
        print(f"\n(the peer's first runs, one driver process each: load {'; '.join(loads)})")
    print(f"\n({load()})")


def batch_section(
    pop: Population, runs: int, repeats: int, peer_runs: dict[str, dict[str, Any]]
) -> None:
    from wevent.mechanisms.batch import BATCH_LABEL

    print(
        f"\n## Batch runs: {runs} runs per batch, median of {repeats} batches ({load()})\n\n"
        f"({BATCH_LABEL})\n"
    )
    print(
        "| allocator | batch ms (wall) | batch ms (CPU) | kernel ms (wall) | per run us "
        "| peer | peer median us | per run / peer median | within 10x | mean published "
        "| mean AMRE | runs with a near-zero budget |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = batch_runs(pop, runs, repeats)
    for mech, r in results.items():
        p = peer_runs[PEER_OF[mech]]
        per_run_us = r["wall_ms"] * 1e3 / runs
        ratio = per_run_us / (p["median_ms"] * 1e3)
        print(
            f"| {mech} | {r['wall_ms']:.0f} | {r['cpu_ms']:.0f} | {r['kernel_ms']:.0f} "
            f"| {per_run_us:.0f} | {p['mechanism']} | {p['median_ms'] * 1e3:.1f} | {ratio:.1f}x "
            f"| {'yes' if ratio <= 10 else 'no'} | {r['published']:.1f} | {r['amre']:.1f} "
            f"| {r['near_zero_runs']} |"
        )
    origins = sorted({str(r["stream"]) for r in results.values()})
    print(
        f"\n(stream: {', '.join(origins)}, the workload's stream drawn at seed 1 by "
        "batch_histograms; near-zero: the most runs of one batch with a budget within the "
        f"tolerance of 0, BatchResult.near_zero; {load()})"
    )
    for mech in ("bd", "ba"):
        sw = batch_sweep(runs, mech)
        settings = len(SWEEP_EPS) * len(SWEEP_W)
        print(
            f"\n{mech}: settings sweep eps in {{1/2, 1, 2}} x w in {{3, 10}}, {runs} runs each: "
            f"{settings} batches {sw['six_s']:.2f} s ({sw['six_s'] / settings / runs * 1e6:.0f} us "
            f"per run); {len(SWEEP_W)} batches of {len(SWEEP_EPS) * runs} runs (eps as budget "
            f"factors) {sw['two_s']:.2f} s ({sw['two_s'] / settings / runs * 1e6:.0f} us per run); "
            f"start-up (a batch of 1 slot, {runs} runs) {sw['startup_ms']:.1f} ms ({load()})"
        )


if __name__ == "__main__":
    main()
