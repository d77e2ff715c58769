"""001 Section 8.1: which part of a budget-division step takes the time (the kernel's planning).

Claim examined. `wevent reproduce pwsm-time` finds DPBA about ten times slower per slot than BD
and about six times DPBD, while 001 (Figures 13-14) has DPBD the slowest. Our explanation in
`docs/reproduction.md` is DPBA's kernel: 001 Algorithm 7's absorption test runs at every slot
over every slot of each class's forward window, in exact rationals
(`wevent/mechanisms/allocators/dynamic.py`). This script measures that share directly.

What it does. For each mechanism and seed it runs `wevent.experiments.harness.execute` with
``timed=True`` (the code path of `wevent reproduce pwsm-time`: the populations of ``pwsm-w``
at one setting, the guard in the loop) and, inside the same runs, times every call of the
kernel's ``plan`` (`wevent.mechanisms.central.KernelRunner` calls it once per slot) in CPU
time of the running thread (`time.thread_time_ns`), which does not count waits for a core, so
the shares hold on a loaded machine. The wrapper adds two clock reads per slot.

What it prints: per mechanism, over the seeds, the mean (min-max) of the plan's share of the
step's CPU time without the stream's data generation (``cpu-us`` of ``pwsm-time``), and the
mean of ``cpu-us`` and of the plan's CPU microseconds per slot.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction
from typing import Any

from wevent.experiments.harness import Point, execute
from wevent.experiments.papers import _pwsm
from wevent.experiments.running_time import MECHANISMS
from wevent.mechanisms import central


class _TimedKernel:
    """A kernel whose ``plan`` calls add their thread CPU time to ``spent[0]``."""

    def __init__(self, inner: Any, spent: list[int]) -> None:
        self._inner = inner
        self._spent = spent

    def plan(self, *args: Any, **kwargs: Any) -> Any:
        start = time.thread_time_ns()
        try:
            return self._inner.plan(*args, **kwargs)
        finally:
            self._spent[0] += time.thread_time_ns() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def measure(
    mechanism: str, users: int, slots: int, seed: int, dataset: str, point: Point
) -> tuple[float, float]:
    """(cpu-us, the plan's CPU microseconds per slot) of one timed run."""
    spent = [0]
    original = central.KernelRunner.__post_init__

    def post_init(self: central.KernelRunner) -> None:
        self.kernel = _TimedKernel(self.kernel, spent)
        original(self)

    central.KernelRunner.__post_init__ = post_init  # type: ignore[method-assign]
    try:
        run = execute(
            mechanism, _pwsm(point, mechanism, users, seed), dataset, slots, seed, timed=True
        )
    finally:
        central.KernelRunner.__post_init__ = original  # type: ignore[method-assign]
    assert run.timing is not None and run.timing.slots == slots
    return run.timing.cpu_us, spent[0] / 1000 / slots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 (default 3)")
    parser.add_argument("--dataset", default="sin", choices=("lns", "sin", "log"))
    parser.add_argument("--w", type=int, default=120, help="the window (E = 0.6; default 120)")
    args = parser.parse_args()
    if args.users < 1 or args.slots < 1 or args.seeds < 1 or args.w < 1:
        parser.error("--users, --slots, --seeds and --w must be positive")
    point = Point(Fraction(3, 5), args.w, f"w={args.w}").at(args.users)
    print(
        f"{args.dataset}, E = 0.6, w = {args.w}, {args.users} users, {args.slots} slots, "
        f"seeds 0-{args.seeds - 1}; thread CPU time\n"
    )
    print("| mechanism | plan / cpu-us: mean (min-max) | cpu-us | plan us per slot |")
    print("|---|---:|---:|---:|")
    for mech in MECHANISMS:
        got = [
            measure(mech, args.users, args.slots, s, args.dataset, point) for s in range(args.seeds)
        ]
        shares = [plan / cpu for cpu, plan in got]
        cpu = sum(c for c, _ in got) / len(got)
        plan = sum(p for _, p in got) / len(got)
        print(
            f"| {mech} | {100 * sum(shares) / len(shares):.1f}% "
            f"({100 * min(shares):.1f}-{100 * max(shares):.1f}%) | {cpu:,.0f} | {plan:,.0f} |"
        )


if __name__ == "__main__":
    main()
