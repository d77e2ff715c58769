"""The wide search's cost per target: `wevent gate TARGET` with the default
options (the proof's scope and the wide search: windows up to 64, 6 classes, 256 slots,
`core.DEFAULT_SEARCH_RUNS` runs per requirement kind), on one core. Per target the verdict,
the seconds of each stage, the total and what each search stage ran (runs, largest window,
most classes, longest run, pool sizes). Measurements, not tests; run from the repository root:

    python benchmarks/bench_gate_search.py                 # ba pba dpba lpa + scope-only kernels
    python benchmarks/bench_gate_search.py pbd tests.gate_mutants:off_by_one_window

Print the machine's load next to the figures: on a shared machine they are upper bounds.
"""

from __future__ import annotations

import os
import sys
import time

from wevent.gate import GateOptions, run_gate

DEFAULT_TARGETS = (
    "ba",
    "pba",
    "dpba",
    "lpa",
    "tests.gate_mutants:off_by_one_window",
    "tests.gate_mutants:recycled_user_reused_early",
    "tests.gate_scope_kernels:share_short_at_five",
    "tests.gate_scope_kernels:third_class_doubled",
    "tests.gate_scope_kernels:late_double_share",
    "tests.gate_scope_kernels:late_change_ignored",
    "tests.gate_scope_kernels:recycle_short_from_five",
)


def main(targets: list[str]) -> None:
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} cores")
    print("| target | verdict | conformance | proof | search | end-to-end | total | searched |")
    print("|---|---|---|---|---|---|---|---|")
    for target in targets:
        start = time.perf_counter()
        report = run_gate(target, GateOptions())
        total = time.perf_counter() - start
        per: dict[str, float] = {}
        searched = []
        for s in report.stages:
            key = s.name.split("/")[0]
            per[key] = per.get(key, 0.0) + s.seconds
            scope = s.data.get("scope")
            if key == "search" and scope:
                searched.append(
                    f"{scope['kind']}: {scope['runs']} runs, w<={scope['w_max']}, "
                    f"{scope['classes']} classes, {scope['horizon']} slots"
                    + (f", {scope['pool']}" if "pool" in scope else "")
                )
        cells = " | ".join(
            f"{per.get(c, 0.0):.1f}" for c in ("conformance", "proof", "search", "end-to-end")
        )
        label = target.split(":")[-1]
        print(f"| {label} | {report.verdict} | {cells} | {total:.1f} | {'; '.join(searched)} |")
        sys.stdout.flush()
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(DEFAULT_TARGETS))
