"""Per-slot cost of the local allocators (run on demand: `make bench`, or with `--scale`).

A population of n users in 16 requirement classes (windows 10-80, budgets 0.5-2), a categorical
Sin stream with d = 100, the guard in the loop. Prints one Markdown row per allocator: set-up
(population, guard, OPS), mean time per slot, per-user reports per slot and the run's peak
resident memory so far. ``--scale`` runs the scale target instead: PLPA+ on 10^6 users, d = 100,
1,000 slots, then writes the ledger (Parquet) and checks it with the batch checker, each timed on
its own (`--keep DIR` keeps the ledger for `bench_audit.py --ledger`).
Measurements, not tests.
"""

from __future__ import annotations

import argparse
import gc
import resource
import tempfile
import time
from pathlib import Path

from wevent.accounting.budget import Budget
from wevent.accounting.formats import read_ledger, write_ledger, write_requirements
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, Requirement
from wevent.experiments.running import run_mechanism
from wevent.mechanisms.allocators import LOCAL
from wevent.mechanisms.streams import SyntheticStream
from wevent.verifier.check import check


def population(n: int) -> Population:
    reqs: list[Requirement] = [
        Fixed(w, Budget(e)) for w in (10, 20, 40, 80) for e in ("0.5", "1", "1.5", "2")
    ]
    return Population.from_classes({r: n // len(reqs) for r in reqs})


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def table(n: int, slots: int, d: int) -> None:
    print(f"{n:,} users, 16 classes, d = {d}, {slots} slots, categorical Sin stream, guard on")
    print("| allocator | set-up | per slot | reports per slot | peak memory |")
    print("|---|---|---|---|---|")
    for name in LOCAL:
        start = time.perf_counter()
        pop = population(n)
        sizes = [c.count for c in pop.classes]
        stream = SyntheticStream("sin", slots, sizes, 1, d)
        setup = time.perf_counter() - start
        start = time.perf_counter()
        summary = run_mechanism(name, pop, stream, slots=slots, seed=1)
        per_slot = (time.perf_counter() - start) / slots
        assert summary.ok, summary.refusal
        print(
            f"| {name} | {setup:.2f} s | {per_slot * 1e3:.1f} ms | "
            f"{summary.reports / slots:,.0f} | {peak_mb():,.0f} MB |"
        )


def scale(n: int, slots: int, d: int, keep: Path | None = None) -> None:
    """The run, then the ledger's write and its batch check, each timed on its own; ``keep``
    saves the ledger and requirements there (for `bench_audit.py --ledger`)."""
    pop = population(n)
    stream = SyntheticStream("sin", slots, [c.count for c in pop.classes], 1, d)
    with tempfile.TemporaryDirectory() as tmp:
        out = keep if keep is not None else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "plpa+.parquet"
        start = time.perf_counter()
        done = [0]

        def progress(k: int) -> None:
            done[0] += k
            if done[0] % 100 == 0:
                elapsed = time.perf_counter() - start
                print(f"  slot {done[0]}: {elapsed:.0f} s, peak {peak_mb():,.0f} MB", flush=True)

        summary = run_mechanism("plpa+", pop, stream, slots=slots, seed=1, progress=progress)
        run_s = time.perf_counter() - start
        for line in summary.describe():
            print(line)
        print(f"run: {run_s:.1f} s ({run_s / slots * 1e3:.0f} ms per slot)", flush=True)
        ledger = summary.ledger
        assert ledger is not None  # run_mechanism always keeps the guard's ledger
        start = time.perf_counter()
        write_ledger(ledger, path)
        print(
            f"ledger written in {time.perf_counter() - start:.1f} s: "
            f"{len(ledger):,} charges, {ledger.per_user_rows():,} per-user rows, "
            f"{path.stat().st_size / 2**20:,.0f} MiB Parquet; peak memory {peak_mb():,.0f} MB",
            flush=True,
        )
        if keep is not None:
            write_requirements(pop, keep / "requirements.csv")
            print(
                f"kept in {keep}: audit with `python benchmarks/bench_audit.py --ledger {path} "
                f"--requirements {keep / 'requirements.csv'} --engines numpy,duckdb`"
            )
        del summary, ledger
        gc.collect()
        start = time.perf_counter()
        try:
            verdict = check(read_ledger(path), pop)
        except MemoryError as exc:
            print(
                f"batch check of the written ledger: out of memory after "
                f"{time.perf_counter() - start:.1f} s ({exc})"
            )
            return
        print(
            f"batch check of the written ledger: {'COMPLIANT' if verdict.ok else 'VIOLATIONS'} "
            f"in {time.perf_counter() - start:.1f} s; peak memory {peak_mb():,.0f} MB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--slots", type=int, default=100)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--scale", action="store_true", help="PLPA+, 10^6 users, 1,000 slots")
    parser.add_argument("--keep", type=Path, help="with --scale: keep the ledger in this directory")
    args = parser.parse_args()
    if args.scale:
        scale(1_000_000, 1000, args.d, args.keep)
    else:
        table(args.users, args.slots, args.d)


if __name__ == "__main__":
    main()
