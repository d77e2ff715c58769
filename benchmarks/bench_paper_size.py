"""How long the papers' sizes take here (run on demand; measurements, not tests).

Two parts:

* ``sweep NAME``: one repeat of one point of a registered sweep on one data set, every mechanism
  of the sweep, at the given size (default: 001's and 000's 10,000 users x 10,000 slots), timed
  end to end, and the time of the sweep's whole grid at 10 repeats extrapolated from it
  (``python benchmarks/bench_paper_size.py sweep pwsm-epsilon --point 2 --dataset sin``).
* ``csv``: ``wevent run ALLOCATOR --stream FILE`` on a generated CSV of T-Drive's shape (001
  Section 6.1: 10,357 taxis, a 10 x 10 grid, d = 100, one-minute slots; a week is 10,080 slots)
  with a chosen number of slots, timed in a child process with its peak memory
  (``python benchmarks/bench_paper_size.py csv --slots 1008``). The values are a random walk
  over the cells (5% of the taxis move per slot), not T-Drive's data: the time depends on the
  rows, not on the values.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from wevent.experiments.harness import Size, run_sweep
from wevent.experiments.papers import SWEEPS

TAXIS = 10_357  # 001 Section 6.1
CELLS = 100  # 10 x 10 grid
PAPER_REPEATS = 10  # 000 Section VI-B and 001: 10 repeats


def sweep_part(name: str, users: int, slots: int, point: int, dataset: str) -> None:
    sweep = SWEEPS[name]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wevent-paper-size-") as tmp:
        run_sweep(sweep, Path(tmp), 1, False, 0, size=Size(users, slots, (point,), (dataset,)))
    seconds = time.perf_counter() - start
    grid = len(sweep.points) * len(sweep.datasets) * PAPER_REPEATS
    print(
        f"{name}: {users:,} users x {slots:,} slots, point {point} on {dataset}, "
        f"{len(sweep.mechanisms)} mechanisms x 1 repeat: {seconds:.1f} s measured; "
        f"the whole grid ({len(sweep.points)} points x {len(sweep.datasets)} data sets x "
        f"{PAPER_REPEATS} repeats) extrapolated: {seconds * grid / 3600:.1f} h"
    )


def _write_stream(path: Path, slots: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, CELLS, size=TAXIS)
    with path.open("w", encoding="utf-8") as out:
        out.write("user,slot,value\n")
        for slot in range(1, slots + 1):
            move = rng.random(TAXIS) < 0.05
            values[move] = rng.integers(0, CELLS, size=int(move.sum()))
            out.write("".join(f"taxi{u},{slot},{v}\n" for u, v in enumerate(values.tolist())))
    return TAXIS * slots


def _write_requirements(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        out.write("user,w,epsilon\n")
        for u in range(TAXIS):
            out.write(f"taxi{u},{rng.choice((40, 80, 120))},{rng.choice(('0.6', '0.8', '1'))}\n")


def csv_part(allocator: str, slots: int, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="wevent-paper-size-") as tmp:
        stream, reqs = Path(tmp) / "stream.csv", Path(tmp) / "requirements.csv"
        rows = _write_stream(stream, slots, seed)
        _write_requirements(reqs, seed)
        command = [
            sys.executable,
            "-m",
            "wevent",
            "run",
            allocator,
            "-r",
            str(reqs),
            "--stream",
            str(stream),
            "--domain",
            str(CELLS),
            "--ledger",
            str(Path(tmp) / "ledger.parquet"),
        ]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
        size_mb = stream.stat().st_size / 1e6
    if done.returncode != 0:
        raise SystemExit(f"wevent run exited {done.returncode}: {done.stderr.strip()}")
    print(
        f"{allocator} on a T-Drive-shaped CSV: {TAXIS:,} users x {slots:,} slots "
        f"({rows:,} rows, {size_mb:.0f} MB): {seconds:.1f} s, peak memory {peak_mib:,.0f} MiB "
        f"({peak_mib * 2**20 / rows:.0f} bytes per row)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parts = parser.add_subparsers(dest="part", required=True)
    one = parts.add_parser("sweep", help="one cell of a sweep at a paper's size")
    one.add_argument("name", choices=sorted(SWEEPS))
    one.add_argument("--users", type=int, default=10_000)
    one.add_argument("--slots", type=int, default=10_000)
    one.add_argument("--point", type=int, default=0, help="index of the sweep point")
    one.add_argument("--dataset", default="sin")
    csv = parts.add_parser("csv", help="wevent run on a T-Drive-shaped CSV")
    csv.add_argument("--allocator", default="pba")
    csv.add_argument("--slots", type=int, default=1008)
    csv.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.part == "sweep":
        sweep_part(args.name, args.users, args.slots, args.point, args.dataset)
    else:
        csv_part(args.allocator, args.slots, args.seed)


if __name__ == "__main__":
    main()
