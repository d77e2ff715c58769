"""Per-slot time and peak memory of each allocator family at scale, with and without the guard,
and how they grow with n, d, w and the number of classes (docs/performance.md has the figures).

Every configuration runs in a fresh process (so its peak resident memory is its own) through
`wevent.experiments.running.run_mechanism`, on a categorical Sin stream. Per-slot time is measured between
the first and the last slot's progress callbacks (set-up and the first slot excluded); set-up is
the guard, the class groups and the allocator's configuration, plus one full garbage collection
after the first slot (the one-time traversal of what set-up built: at 10^7 users the guard's
ledger holds 10^7 ids, and the collection that first meets them would otherwise land in one of
the measured slots). The population is built and frozen out of the collector before the run.

"Without the guard" replaces, in that child process only, the guard `run_mechanism` builds by
`UncheckedSpender` below: it accepts every charge unchecked and keeps no ledger. It exists only
here, for measuring what the guard costs; the library has no way to run unguarded.

    python benchmarks/bench_scale.py                 # everything (10^5 and 10^6 users: long)
    python benchmarks/bench_scale.py --part families # or growth
    python benchmarks/bench_scale.py --quick         # a small smoke run of every part
    python benchmarks/bench_scale.py --sizes 10000000 --mechs pba --json m.json --plot m.png

Each child process is capped at WEVENT_BENCH_MEM_GB (default 16) GiB of address space.

Measurements, not tests.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, Requirement

FAMILIES = (
    ("central (PWSM)", "pba"),
    ("local budget division", "lba"),
    ("population division", "lpa"),
    ("personalized population (OPS + PUE)", "plpa+"),
)


class UncheckedSpender:
    """BENCHMARK ONLY: a spender that accepts every charge without checking or recording it.

    Stands in for `wevent.verifier.Guard` in a benchmark child process to measure the guard's cost.
    It counts charges (and the per-user reports they stand for) so the run's summary stays
    meaningful."""

    def __init__(self, population: Population, sink: object = None) -> None:
        if sink is not None:  # a durable run measures the write-ahead cost: not comparable
            raise SystemExit("the unguarded stand-in keeps no ledger: run without --ledger")
        self._groups: dict[str, int] = {}  # group sizes: all a mechanism asks of a group
        self.ledger = _CountingLedger()

    broken = None  # never fails to commit: it commits nothing

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # no commits to group

    def spend(self, slot: int, amount: Budget, **kwargs: Any) -> None:
        group = kwargs.get("group")
        self.ledger.rows += 1
        self.ledger.per_user += self._groups[group] if group is not None else 1

    def define_group(self, name: str, members: tuple[str, ...]) -> None:
        self._groups[name] = len(members)

    def define_group_by_index(
        self, name: str, table: Sequence[str], indices: npt.NDArray[np.int64]
    ) -> None:
        self._groups[name] = len(indices)

    def members(self, group: str) -> tuple[str, ...]:
        return ("",) * self._groups[group]  # placeholders: callers only count them

    def group_size(self, group: str) -> int:
        return self._groups[group]


class _CountingLedger:
    def __init__(self) -> None:
        self.rows = 0
        self.per_user = 0

    def __len__(self) -> int:
        return self.rows

    def per_user_rows(self) -> int:
        return self.per_user


def requirements(classes: int, w_max: int) -> list[Requirement]:
    """``classes`` (1, 4, 16 or 64) requirement classes: windows from w_max/8 to w_max and
    budgets from 0.25 to 2 (16 classes: windows w_max/8 .. w_max, budgets 0.5 .. 2)."""
    grids = {1: 1, 4: 2, 16: 4, 64: 8}
    if classes not in grids:
        raise SystemExit(f"classes must be one of {sorted(grids)}")
    k = grids[classes]
    windows = [max(1, w_max * (i + 1) // k) for i in range(k)] if k > 1 else [w_max]
    if k == 4:
        windows = [max(1, w_max // 8), max(1, w_max // 4), max(1, w_max // 2), w_max]
    budgets = [Fraction(2 * (i + 1), k) for i in range(k)] if k > 1 else [Fraction(1, 2)]
    return [Fixed(w, Budget(e)) for w in windows for e in budgets]


def one(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration in this process and return its measurements."""
    import wevent.experiments.running as running
    from wevent.mechanisms.streams import SyntheticStream

    inside = [0.0, 0.0]  # wall and thread CPU seconds inside the guard's methods (guard on)
    if not cfg["guard"]:
        setattr(running, "Guard", UncheckedSpender)  # noqa: B010 - this child process only
    else:
        _time_guard(inside)
    start = time.perf_counter()
    reqs = requirements(cfg["classes"], cfg["w"])
    pop = Population.from_classes({r: cfg["n"] // len(reqs) for r in reqs})
    stream = SyntheticStream("sin", cfg["slots"], [c.count for c in pop.classes], 1, cfg["d"])
    if hasattr(pop, "users"):  # the canonical order, built before the freeze (an older
        assert len(pop.users) == len(pop)  # Population, measured for comparison, has none)
    # The population's millions of Python objects would otherwise be re-traversed by every
    # full garbage collection, a pause charged to whichever code (guard or data path) happens to
    # allocate then; freezing them (what a long-running server would do) removes that noise.
    gc.collect()
    gc.freeze()
    marks: list[float] = []
    cpu_marks: list[float] = []
    guard_marks: list[tuple[float, float]] = []

    def progress(_: int) -> None:
        if not marks:  # the objects set-up made (the guard's 10^7 user ids) are traversed by
            gc.collect()  # the next full collection once: a set-up cost, not one slot's
        marks.append(time.perf_counter())
        cpu_marks.append(time.thread_time())
        guard_marks.append((inside[0], inside[1]))

    begin = time.perf_counter()
    summary = running.run_mechanism(
        cfg["mechanism"], pop, stream, slots=cfg["slots"], seed=1, progress=progress
    )
    end = time.perf_counter()
    if not summary.ok:
        raise SystemExit(f"refused: {summary.refusal}")
    per_slot = (marks[-1] - marks[0]) / (len(marks) - 1)
    guard_per_slot = (guard_marks[-1][0] - guard_marks[0][0]) / (len(marks) - 1)
    # Thread CPU time: what this process computed, without the time other processes of the
    # shared machine took the core from it (wall time counts that wherever it lands).
    cpu_per_slot = (cpu_marks[-1] - cpu_marks[0]) / (len(marks) - 1)
    guard_cpu_per_slot = (guard_marks[-1][1] - guard_marks[0][1]) / (len(marks) - 1)
    return {
        **cfg,
        "users": len(pop),
        "population_s": begin - start,  # population and stream objects (not the run)
        "setup_s": marks[0] - begin - per_slot,  # guard, class groups, allocator set-up
        "run_s": end - begin,  # the whole run: set-up and every slot
        "per_slot_ms": per_slot * 1e3,
        "guard_per_slot_ms": guard_per_slot * 1e3,  # inside the guard (0 with guard off)
        "cpu_per_slot_ms": cpu_per_slot * 1e3,
        "guard_cpu_per_slot_ms": guard_cpu_per_slot * 1e3,
        "guard_run_s": inside[0],  # inside the guard over the whole run, set-up included
        "reports_per_slot": summary.reports / cfg["slots"],
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _time_guard(inside: list[float]) -> None:
    """Accumulate, in ``inside`` (wall, thread CPU), the time spent in the guard methods mechanisms call (this
    child process only): a direct measure of the guard's cost, beside the on/off difference.
    A call made from inside another timed call (a spend inside `spend_many`) is not counted
    twice; `batch` is timed on entry and exit (its exit is where a durable guard commits)."""
    from wevent.verifier.guard import Guard

    depth = [0]

    def timed(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1
            t, c = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                inside[0] += time.perf_counter() - t
                inside[1] += time.thread_time() - c
                depth[0] -= 1

        return wrapper

    def timed_batch(fn: Any) -> Any:
        @contextlib.contextmanager
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:  # inside a timed call (spend_many's own batch): counted there
                with fn(*args, **kwargs):
                    yield
                return
            t, c = time.perf_counter(), time.thread_time()
            manager = fn(*args, **kwargs)
            manager.__enter__()
            inside[0] += time.perf_counter() - t
            inside[1] += time.thread_time() - c
            try:
                yield
            except BaseException as exc:
                t, c = time.perf_counter(), time.thread_time()
                try:
                    if not manager.__exit__(type(exc), exc, exc.__traceback__):
                        raise
                finally:
                    inside[0] += time.perf_counter() - t
                    inside[1] += time.thread_time() - c
            else:
                t, c = time.perf_counter(), time.thread_time()
                manager.__exit__(None, None, None)
                inside[0] += time.perf_counter() - t
                inside[1] += time.thread_time() - c

        return wrapper

    for name in (
        "spend",
        "spend_many",
        "define_group",
        "define_group_by_index",
        "members",
        "group_size",
    ):
        if hasattr(Guard, name):  # (an older Guard, measured for comparison, has fewer)
            setattr(Guard, name, timed(getattr(Guard, name)))
    if hasattr(Guard, "batch"):
        setattr(Guard, "batch", timed_batch(Guard.batch))  # noqa: B010 - this child only


def _limit_memory() -> None:
    """Cap the child's address space (``WEVENT_BENCH_MEM_GB``, default 16): a configuration
    that does not fit fails with MemoryError instead of pushing the shared machine into swap."""
    gb = float(os.environ.get("WEVENT_BENCH_MEM_GB", "16"))
    limit = int(gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    """`one` in a fresh, memory-capped process; ``{"error": ...}`` if it fails."""
    out = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(cfg)],
        check=False,
        capture_output=True,
        text=True,
        preexec_fn=_limit_memory,
    )
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {**cfg, "error": f"exit {out.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    RECORDS.append(result)
    return result


RECORDS: list[dict[str, Any]] = []  # every successful measurement (written by --json)


def cfg(
    mechanism: str,
    n: int,
    *,
    d: int = 100,
    classes: int = 16,
    w: int = 80,
    slots: int = 30,
    guard: bool = True,
    part: str = "families",
) -> dict[str, Any]:
    return {
        "part": part,
        "mechanism": mechanism,
        "n": n,
        "d": d,
        "classes": classes,
        "w": w,
        "slots": slots,
        "guard": guard,
    }


def families(sizes: Sequence[int], slots: int, repeat: int, mechs: Sequence[str]) -> None:
    print(
        f"Per slot (fastest of {repeat} run(s) per setting) and peak memory: d = 100, 16 "
        f"classes (windows 10-80, budgets 0.5-2), {slots} slots, categorical Sin stream"
    )
    print(
        "| family | allocator | n | set-up | per slot, guard | per slot, no guard | "
        "overhead per slot (on/off) | in the guard per slot | overhead per slot (in guard) | "
        "overhead per slot (in guard, CPU) | whole run, guard | whole run, no guard | "
        "overhead, whole run (on/off) | overhead, whole run (in guard) | reports per slot | "
        "peak memory, guard | peak memory, no guard |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        for family, mech in FAMILIES:
            if mech not in mechs:
                continue
            # guard on and off alternated, `repeat` times each; the fastest kept (shared machine)
            runs = [measure(cfg(mech, n, slots=slots, guard=g)) for g in (True, False) * repeat]
            failed = [r for r in runs if "error" in r]
            if failed:
                print(f"| {family} | {mech} | {n:,} | failed: {failed[0]['error']} |", flush=True)
                continue
            on = min(runs[0::2], key=lambda r: float(r["per_slot_ms"]))
            off = min(runs[1::2], key=lambda r: float(r["per_slot_ms"]))
            fast_run = min(runs[0::2], key=lambda r: float(r["run_s"]))
            run_on, run_off = fast_run["run_s"], min(float(r["run_s"]) for r in runs[1::2])
            overhead = on["per_slot_ms"] / off["per_slot_ms"] - 1
            inside = on["guard_per_slot_ms"]
            direct = inside / (on["per_slot_ms"] - inside)
            cpu_inside = on.get("guard_cpu_per_slot_ms", float("nan"))
            cpu_direct = cpu_inside / (on.get("cpu_per_slot_ms", float("nan")) - cpu_inside)
            direct_run = fast_run["guard_run_s"] / (run_on - fast_run["guard_run_s"])
            print(
                f"| {family} | {mech} | {n:,} | {on['setup_s']:.2f} s | "
                f"{on['per_slot_ms']:.1f} ms | {off['per_slot_ms']:.1f} ms | "
                f"{overhead * 100:+.1f}% | {inside:.2f} ms | {direct * 100:.1f}% | "
                f"{cpu_direct * 100:.1f}% | {run_on:.2f} s | {run_off:.2f} s | {(run_on / run_off - 1) * 100:+.1f}% | "
                f"{direct_run * 100:.1f}% | {on['reports_per_slot']:,.0f} | "
                f"{on['peak_mb']:,.0f} MB | {off['peak_mb']:,.0f} MB |",
                flush=True,
            )


def growth(n: int, slots: int, mechs: Sequence[str]) -> None:
    print(
        f"\nGrowth at n = {n:,}, {slots} slots (per slot, guard on / off; one parameter varied "
        "from d = 100, 16 classes, w_max = 80)"
    )
    print("| varied | value | " + " | ".join(mechs) + " |")
    print("|---|---:|" + "---:|" * len(mechs))
    for label, key, values in (
        ("n", "n", (n // 100, n // 10, n)),
        ("d", "d", (2, 10, 1000)),
        ("w_max", "w", (20, 320)),
        ("classes", "classes", (1, 4, 64)),
    ):
        for v in values:
            cells = []
            for m in mechs:
                times = []
                for guard in (True, False):
                    c = cfg(m, n, slots=slots, guard=guard, part="growth")
                    c[key] = v
                    r = measure(c)
                    times.append("failed" if "error" in r else f"{r['per_slot_ms']:.1f}")
                cells.append(" / ".join(times) + " ms")
            print(f"| {label} | {v:,} | " + " | ".join(cells) + " |", flush=True)


def plot(records: Sequence[dict[str, Any]], path: Path, growth_n: int) -> None:
    """Scaling curves from measurements: per-slot time, peak memory and set-up against n (guard
    on and off, at the base point d = 100, 16 classes, w_max = 80), and per-slot time against d,
    w_max and classes at ``n = growth_n``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = {"d": 100, "classes": 16, "w": 80}
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    mechs = [m for _, m in FAMILIES]
    colours = dict(zip(mechs, ["C0", "C1", "C2", "C3"], strict=True))

    def series(key: str, guard: bool, mech: str, metric: str) -> tuple[list[float], list[float]]:
        fixed = {k: v for k, v in base.items() if k != key}
        # curves against n from the families runs, the others from the growth runs (each a run
        # of its own, possibly at another time: never mix them in one curve)
        part = "families" if key == "n" else "growth"
        best: dict[float, float] = {}
        for r in records:
            if r["mechanism"] != mech or r["guard"] != guard or r.get("part", part) != part:
                continue
            if metric == "setup_s" and not guard:
                continue  # without the guard, set-up is below the timer's noise (can be < 0)
            if any(r[k] != v for k, v in fixed.items()):
                continue
            if key != "n" and r["n"] != growth_n:
                continue
            x, y = float(r[key]), float(r[metric])
            best[x] = min(best.get(x, y), y)
        xs = sorted(best)
        return xs, [best[x] for x in xs]

    panels = [
        (axes[0][0], "n", "per_slot_ms", "per-slot time (ms) vs users n"),
        (axes[0][1], "n", "peak_mb", "peak memory (MB) vs users n"),
        (axes[0][2], "n", "setup_s", "run set-up with the guard (s) vs users n"),
        (axes[1][0], "d", "per_slot_ms", "per-slot time (ms) vs domain d"),
        (axes[1][1], "w", "per_slot_ms", "per-slot time (ms) vs largest window w_max"),
        (axes[1][2], "classes", "per_slot_ms", "per-slot time (ms) vs classes"),
    ]
    for ax, key, metric, title in panels:
        for mech in mechs:
            for guard, style in ((True, "-o"), (False, "--x")):
                xs, ys = series(key, guard, mech, metric)
                if xs:
                    label = f"{mech}, {'guard' if guard else 'no guard'}"
                    ax.plot(xs, ys, style, color=colours[mech], label=label, markersize=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("wevent: cost per slot and memory by allocator family (bench_scale.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=["families", "growth", "all", "none"], default="all")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--sizes", default="100000,1000000", help="n for the families table")
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="runs per guard setting (fastest kept)")
    parser.add_argument("--growth-n", type=int, default=100_000, help="base n of the growth part")
    parser.add_argument("--mechs", default=",".join(m for _, m in FAMILIES))
    parser.add_argument("--json", type=Path, help="append every measurement to this JSON file")
    parser.add_argument("--plot", type=Path, help="draw the scaling curves (from --json) here")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return
    print(
        f"Machine: {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, {Path('/proc/cpuinfo').read_text().count('processor')} "
        "cores listed"
    )
    mechs = args.mechs.split(",")
    sizes = [2000] if args.quick else [int(s) for s in args.sizes.split(",")]
    slots = 5 if args.quick else args.slots
    try:
        if args.part in ("families", "all"):
            families(sizes, slots, args.runs, mechs)
        if args.part in ("growth", "all"):
            growth(2000 if args.quick else args.growth_n, slots, mechs)
    finally:
        if args.json is not None:
            old = json.loads(args.json.read_text()) if args.json.exists() else []
            args.json.write_text(json.dumps(old + RECORDS, indent=1) + "\n")
    if args.plot is not None:
        if args.json is None or not args.json.exists():
            raise SystemExit("--plot draws from the measurements in --json")
        plot(json.loads(args.json.read_text()), args.plot, args.growth_n)


if __name__ == "__main__":
    main()
