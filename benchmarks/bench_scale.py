"""Per-slot time and peak memory of each allocator family at scale, with and without the guard,
and how they grow with n, d, w and the number of classes (docs/performance.md has the figures).

Every configuration runs in a fresh process (so its peak resident memory is its own) through
`wevent.running.run_mechanism`, on a categorical Sin stream. Per-slot time is measured between
the first and the last slot's progress callbacks (set-up and the first slot excluded); set-up is
the population, the guard and the allocator's configuration.

"Without the guard" replaces, in that child process only, the guard `run_mechanism` builds by
`UncheckedSpender` below: it accepts every charge unchecked and keeps no ledger. It exists only
here, for measuring what the guard costs; the library has no way to run unguarded.

    python benchmarks/bench_scale.py                 # everything (10^5 and 10^6 users: long)
    python benchmarks/bench_scale.py --part families # or growth
    python benchmarks/bench_scale.py --quick         # a small smoke run of every part

Measurements, not tests.
"""

from __future__ import annotations

import argparse
import json
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

from accounting.budget import Budget
from accounting.population import Population
from accounting.requirements import Fixed, Requirement

FAMILIES = (
    ("central (PWSM)", "pba"),
    ("local budget division", "lba"),
    ("population division", "lpa"),
    ("personalized population (OPS + PUE)", "plpa+"),
)


class UncheckedSpender:
    """BENCHMARK ONLY: a spender that accepts every charge without checking or recording it.

    Stands in for `verifier.Guard` in a benchmark child process to measure the guard's cost.
    It counts charges (and the per-user reports they stand for) so the run's summary stays
    meaningful."""

    def __init__(self, population: Population) -> None:
        self._groups: dict[str, int] = {}  # group sizes: all a mechanism asks of a group
        self.ledger = _CountingLedger()

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
        raise NotImplementedError("the benchmark's unchecked spender keeps group sizes only")

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
    import wevent.running as running
    from mechanisms.streams import SyntheticStream

    if not cfg["guard"]:
        setattr(running, "Guard", UncheckedSpender)  # noqa: B010 - this child process only
    start = time.perf_counter()
    reqs = requirements(cfg["classes"], cfg["w"])
    pop = Population.from_classes({r: cfg["n"] // len(reqs) for r in reqs})
    stream = SyntheticStream("sin", cfg["slots"], [c.count for c in pop.classes], 1, cfg["d"])
    marks: list[float] = []

    def progress(_: int) -> None:
        marks.append(time.perf_counter())

    summary = running.run_mechanism(
        cfg["mechanism"], pop, stream, slots=cfg["slots"], seed=1, progress=progress
    )
    if not summary.ok:
        raise SystemExit(f"refused: {summary.refusal}")
    per_slot = (marks[-1] - marks[0]) / (len(marks) - 1)
    return {
        **cfg,
        "users": len(pop),
        "setup_s": marks[0] - start - per_slot,
        "per_slot_ms": per_slot * 1e3,
        "reports_per_slot": summary.reports / cfg["slots"],
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    """`one` in a fresh process."""
    out = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(cfg)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def cfg(
    mechanism: str,
    n: int,
    *,
    d: int = 100,
    classes: int = 16,
    w: int = 80,
    slots: int = 30,
    guard: bool = True,
) -> dict[str, Any]:
    return {
        "mechanism": mechanism,
        "n": n,
        "d": d,
        "classes": classes,
        "w": w,
        "slots": slots,
        "guard": guard,
    }


def families(sizes: Sequence[int], slots: int, repeat: int = 2) -> None:
    print(
        f"Per slot (fastest of {repeat} run(s) per setting) and peak memory: d = 100, 16 classes (windows 10-80, budgets 0.5-2), "
        f"{slots} slots, categorical Sin stream"
    )
    print(
        "| family | allocator | n | set-up | per slot, guard | per slot, no guard | "
        "guard overhead | reports per slot | peak memory, guard | peak memory, no guard |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        for family, mech in FAMILIES:
            # guard on and off alternated, `repeat` times each; the fastest kept (shared machine)
            runs = [measure(cfg(mech, n, slots=slots, guard=g)) for g in (True, False) * repeat]
            on = min(runs[0::2], key=lambda r: float(r["per_slot_ms"]))
            off = min(runs[1::2], key=lambda r: float(r["per_slot_ms"]))
            overhead = on["per_slot_ms"] / off["per_slot_ms"] - 1
            print(
                f"| {family} | {mech} | {n:,} | {on['setup_s']:.1f} s | "
                f"{on['per_slot_ms']:.1f} ms | {off['per_slot_ms']:.1f} ms | "
                f"{overhead * 100:+.0f}% | {on['reports_per_slot']:,.0f} | "
                f"{on['peak_mb']:,.0f} MB | {off['peak_mb']:,.0f} MB |",
                flush=True,
            )


def growth(n: int, slots: int) -> None:
    mechs = [m for _, m in FAMILIES]
    print(
        f"\nGrowth at n = {n:,}, {slots} slots, guard on (per slot; one parameter varied from "
        "d = 100, 16 classes, w_max = 80)"
    )
    print("| varied | value | " + " | ".join(mechs) + " |")
    print("|---|---:|" + "---:|" * len(mechs))
    for label, key, values in (
        ("n", "n", (n // 10,)),
        ("d", "d", (2, 10, 100, 1000)),
        ("w_max", "w", (20, 80, 320)),
        ("classes", "classes", (1, 4, 16, 64)),
    ):
        for v in values:
            cells = []
            for m in mechs:
                c = cfg(m, n, slots=slots)
                c[key] = v
                cells.append(f"{measure(c)['per_slot_ms']:.1f} ms")
            print(f"| {label} | {v:,} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=["families", "growth", "all"], default="all")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--sizes", default="100000,1000000", help="n for the families table")
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="runs per guard setting (fastest kept)")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return
    print(
        f"Machine: {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, {Path('/proc/cpuinfo').read_text().count('processor')} "
        "cores listed"
    )
    sizes = [2000] if args.quick else [int(s) for s in args.sizes.split(",")]
    slots = 5 if args.quick else args.slots
    if args.part in ("families", "all"):
        families(sizes, slots, args.runs)
    if args.part in ("growth", "all"):
        growth(2000 if args.quick else 100_000, slots)


if __name__ == "__main__":
    main()
