"""`wevent prove` of every built-in budget allocator at w <= 6, 2 classes, 18 slots (run on
demand: ``python benchmarks/bench_prove_scope.py [--timeout S] [--jobs N] [NAME ...]``).

Runs ``wevent prove allocator NAME --w-max 6 --classes 2 --unroll 18`` (bounded) and
``wevent prove allocator NAME --w-max 6 --classes 2 --unbounded`` (every horizon) in a fresh process per
allocator, with a wall-clock limit, and prints one row each: the method that answered, status,
cases, seconds (or "> limit"). For dpbd and dpba the bounded scope (841,752 and 7.6 M cases) is
answered by the induction (every horizon), which `wevent prove` runs instead and says so.
Population allocators are listed by `wevent prove` separately (their own theorems).
Measurements, not tests: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

NAMES = ("uniform", "sample", "bd", "ba", "pbd", "pba", "dpbd", "dpba")


def _run(args: list[str], timeout: float) -> tuple[str, str, str, float]:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "wevent", "prove", "allocator", *args, "--json"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return "timeout", "", "", time.perf_counter() - start
    seconds = time.perf_counter() - start
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        return f"exit {done.returncode}", "", "", seconds
    return str(data.get("result")), str(data.get("method")), str(data.get("cases", "")), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(NAMES))
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="--jobs for the dynamic induction (default 0: one per usable core, as `wevent prove`)",
    )
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} cores")
    print("| allocator | proof asked | method | status | cases | seconds |")
    print("|---|---|---|---|---|---|")
    for name in args.names:
        for label, extra in (
            ("bounded, w <= 6, 2 classes, 18 slots", ["--unroll", "18", "--jobs", str(args.jobs)]),
            ("every horizon, w <= 6, 2 classes", ["--unbounded", "--jobs", str(args.jobs)]),
        ):
            status, method, cases, seconds = _run(
                [name, "--w-max", "6", "--classes", "2", *extra], args.timeout
            )
            shown = f"> {args.timeout:.0f}" if status == "timeout" else f"{seconds:.1f}"
            print(f"| {name} | {label} | {method} | {status} | {cases} | {shown} |", flush=True)
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
