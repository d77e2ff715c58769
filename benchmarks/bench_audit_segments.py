"""Auditing a segment ledger of many commits (run on demand):

    python -m benchmarks.bench_audit_segments [--users 2000] [--slots 2000] [--engines duckdb,numpy]

Writes a pba run ahead to a ``.wledger`` (one segment per commit: about 1.15 per slot) with the
population of `bench_write_ahead`, its requirements file beside it, then audits it with each
engine through `bench_audit` (fresh process per engine, verdicts compared). Before DuckDB read
a ledger's segments in one scan, planning a UNION ALL of one scan per segment made this
superlinear: 2,293 segments took 287 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bench_write_ahead import _population
from wevent.accounting.formats import write_requirements
from wevent.experiments.running import run_mechanism
from wevent.mechanisms.streams import SyntheticStream


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--slots", type=int, default=2000)
    parser.add_argument("--engines", default="duckdb,numpy")
    args = parser.parse_args()
    population = _population(args.users)
    with tempfile.TemporaryDirectory(prefix="seg-bench-") as tmp:
        ledger = Path(tmp) / "run.wledger"
        requirements = Path(tmp) / "reqs.csv"
        sizes = [c.count for c in population.classes]
        stream = SyntheticStream("sin", args.slots, sizes, 1, 2)
        run_mechanism("pba", population, stream, slots=args.slots, seed=1, ledger_path=ledger)
        write_requirements(population, requirements)
        segments = len(list(ledger.glob("*.parquet")))
        print(f"{len(population):,} users, {args.slots} slots: {segments:,} segments", flush=True)
        subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("bench_audit.py")),
                "--ledger",
                str(ledger),
                "--requirements",
                str(requirements),
                "--engines",
                args.engines,
            ],
            check=True,
        )


if __name__ == "__main__":
    main()
