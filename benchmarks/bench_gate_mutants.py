"""The mutation suite under the default gate (run on demand:
``python benchmarks/bench_gate_mutants.py`` from the repository root).

Every broken allocator of `tests/gate_suite.py` must be refuted with a counterexample that
`wevent trace` replays, every sound one accepted (exit 0), each within 60 s on one
core. Prints one row per target (expected, verdict, the stage that decided, the scope that shows
the bug, seconds) and a summary; exits 1 when a broken allocator survives, a sound one is
rejected, or a counterexample does not replay. Measurements, not tests: on a shared machine the
seconds are upper bounds (the load average is printed with them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="targets containing this text only")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.getcwd())
    from tests.gate_suite import BROKEN, SOUND_TARGETS
    from wevent.gate import GateOptions, run_gate

    rows = [(t, "refuted", scope) for t, scope in BROKEN.items()]
    rows += [(t, "accepted", "") for t in SOUND_TARGETS]
    rows = [r for r in rows if args.only in r[0]]
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} cores (one used)")
    print("| target | expected | verdict | decided by | bug shows at | s |")
    print("|---|---|---|---|---|---|")
    bad: list[str] = []
    longest = 0.0
    start = time.perf_counter()
    for target, expected, scope in rows:
        t0 = time.perf_counter()
        report = run_gate(target, GateOptions())
        seconds = time.perf_counter() - t0
        longest = max(longest, seconds)
        decided = next(
            (s.name for s in report.stages if s.status in ("failed", "error", "verifier-error")),
            "proof" if report.verdict == "proved" else "search",
        )
        ok = report.verdict == "refuted" if expected == "refuted" else report.exit_code == 0
        cex = report.counterexample
        if ok and expected == "refuted" and cex is not None and not cex.replays():
            ok = False
        if not ok:
            bad.append(target)
        label = target.split(":")[-1]
        mark = "" if ok else " **MISS**"
        print(
            f"| {label} | {expected} | {report.verdict}{mark} | {decided} | {scope} | "
            f"{seconds:.1f} |",
            flush=True,
        )
    broken = sum(1 for r in rows if r[1] == "refuted")
    sound = len(rows) - broken
    killed = broken - sum(1 for t in bad if t in BROKEN)
    accepted = sound - sum(1 for t in bad if t not in BROKEN)
    print(
        f"\nkilled {killed}/{broken} broken, accepted {accepted}/{sound} sound; longest target "
        f"{longest:.1f} s; {time.perf_counter() - start:.0f} s in all; load average after: "
        f"{os.getloadavg()}"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
