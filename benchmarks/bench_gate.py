"""Gate time per target (run on demand: `make bench`, or `python benchmarks/bench_gate.py`).

`wevent gate` with its default scope (proof: windows <= 6, 1..2 classes, 18 slots, then
k-induction for the built-in fixed kernels; dynamic kernels: bounded w <= 2 with one class, then
induction at w <= 3 with 1..2 classes for dpbd/dpba; search: 200 inputs per requirement kind there, then the wide search of `wevent.gate.search.WideScope`; 2
end-to-end runs of 40 slots) on every sound built-in (budget and population
allocators), the unsound published variants and the mutants of `tests/gate_mutants.py`; per
target the verdict, the seconds of each stage and the total (``--population``: the population
allocators and their mutants only). Measurements, not tests: the table goes to docs/performance.md ("The CI
gate: time per target"). Run from the repository root (the mutants are ``tests.gate_mutants:NAME``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from wevent.gate import GateOptions, run_gate
from wevent.mechanisms.allocators.local import POPULATION
from wevent.mechanisms.allocators.registry import BUILTIN

COLUMNS = ("conformance", "proof", "search", "end-to-end")


def _row(target: str, variant: str, arithmetic: str, options: GateOptions) -> str:
    start = time.perf_counter()
    report = run_gate(target, GateOptions(**{**options.__dict__, "variant": variant,
                                             "arithmetic": arithmetic}))  # fmt: skip
    total = time.perf_counter() - start
    per = dict.fromkeys(COLUMNS, 0.0)
    for s in report.stages:
        per[s.name.split("/")[0]] += s.seconds
    label = target.removeprefix("tests.gate_mutants:")
    if variant != "sound" or arithmetic != "exact":
        label += f" ({variant}, {arithmetic})"
    cells = " | ".join(f"{per[c]:.2f}" for c in COLUMNS)
    return f"| {label} | {report.verdict} | {cells} | {total:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few targets only")
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument(
        "--population", action="store_true", help="population allocators and mutants only"
    )
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())
    from tests.gate_mutants import MUTANTS, POPULATION_MUTANTS

    options = GateOptions(examples=args.examples)
    targets: list[tuple[str, str, str]] = []
    if not args.population:
        targets += [(n, "sound", "exact") for n in BUILTIN]
        targets += [("dpbd", "published", "exact"), ("dpba", "published", "exact")]
        targets += [(n, "published", "float") for n in ("ba", "pba", "lba")]
        targets += [(f"tests.gate_mutants:{n}", "sound", "exact") for n in MUTANTS]
    targets += [(n, "sound", "exact") for n in POPULATION]
    targets += [(n, "published", "exact") for n in ("plpd+", "plpa+", "plbd-ops", "plba-ops")]
    targets += [(f"tests.gate_mutants:{n}", "sound", "exact") for n in POPULATION_MUTANTS]
    if args.quick:
        targets = targets[:2] + targets[-2:]
    print(
        f"Measured {time.strftime('%Y-%m-%d')} on CPython {platform.python_version()}, "
        f"{os.cpu_count()} cores (one used), default scope (proof: w <= 6, 1..2 classes, 18 "
        f"slots, then every horizon by induction where it applies; search: {args.examples} inputs per kind there, then the wide search, "
        "windows <= 64, 6 classes, 256 slots, 600 runs per kind, 100 for dynamic allocators, "
        "400 for population ones):\n"
    )
    print("| target | verdict | conformance s | proof s | search s | end-to-end s | total s |")
    print("|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    for target, variant, arithmetic in targets:
        print(_row(target, variant, arithmetic, options), flush=True)
    print(f"\n{len(targets)} targets in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
