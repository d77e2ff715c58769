"""The cost of writing ahead: a full run with the guard alone (ledger kept in memory) against the
same run whose guard commits every charge to a durable ledger before it returns (run on demand:
``python benchmarks/bench_write_ahead.py [--users N] [--slots T] [--repeats R] [NAME ...]``).

A population of N users in 16 requirement classes (windows 10-80, budgets 0.5-2), a Sin stream
(categorical, d = 10, for the local allocators), the same seed for every run. Prints one
Markdown row per allocator: the best of R wall times in memory, with a Parquet ledger written
at the end of the run, and written ahead to chained JSONL and to Parquet segments, each with its
overhead against the in-memory run. Measurements, not tests: fsync latency depends on the disk and its load.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, Requirement
from wevent.experiments.running import run_mechanism
from wevent.mechanisms.streams import SyntheticStream

DEFAULT = ("pba", "lba", "lpa", "plpa+")


def _population(n: int) -> Population:
    reqs: list[Requirement] = [
        Fixed(w, Budget(e)) for w in (10, 20, 40, 80) for e in ("0.5", "1", "1.5", "2")
    ]
    return Population.from_classes({r: n // len(reqs) for r in reqs})


def _once(name: str, population: Population, slots: int, ledger: Path | None) -> float:
    sizes = [c.count for c in population.classes]
    domain = 2 if name == "pba" else 10
    stream = SyntheticStream("sin", slots, sizes, 1, domain)
    start = time.perf_counter()
    summary = run_mechanism(name, population, stream, slots=slots, seed=1, ledger_path=ledger)
    seconds = time.perf_counter() - start
    assert summary.ok, summary.refusal
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=list(DEFAULT))
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    population = _population(args.users)
    print(f"{len(population):,} users, 16 classes, {args.slots} slots, best of {args.repeats}")
    print(
        "| allocator | in memory | Parquet written at the end | chained JSONL, written ahead "
        "| segments, written ahead |"
    )
    print("|---|---|---|---|---|")
    for name in args.names:
        cells = []
        base = min(_once(name, population, args.slots, None) for _ in range(args.repeats))
        cells.append(f"{base:.1f} s")
        for suffix in (".parquet", ".jsonl", ".wledger"):
            times = []
            for _ in range(args.repeats):
                tmp = Path(tempfile.mkdtemp(prefix="wa-bench-"))
                try:
                    times.append(_once(name, population, args.slots, tmp / f"run{suffix}"))
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
            best = min(times)
            cells.append(f"{best:.1f} s ({(best / base - 1) * 100:+.0f}%)")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
