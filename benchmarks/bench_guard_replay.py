"""The guard's own cost in a family's real run, replayed without the run around it (run on
demand from the repository's root: ``python -m benchmarks.bench_guard_replay pba [--users
1000000] [--slots 300] [--repeats 7] [--evict-mb 0]``).

`bench_scale.py` times the guard inside a run, where the data path between two slots leaves
the caches full of its own data. Here the calls one run of ``bench_scale.one`` made to the guard
(every `spend`, `spend_many`, `define_group`, `define_group_by_index`, with their arguments) are
recorded, then made again, in order, on fresh guards over the same population, ``--repeats``
times; the thread CPU time of the calls after the first spend is divided by the slots. With
``--evict-mb`` a pass over that many MB of memory runs before each call (outside the timing),
as a data path would. Between the two figures lies what the guard pays for finding its state
out of cache rather than for its work.

The first replay also pays for what a guard learns once (its certifications, its kept class
charges): the minimum and the median are over the later ones. Set-up (a population's first
interning) is left out, as in `bench_scale`.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import bench_scale
from wevent.verifier.guard import Guard

_RECORDED = ("spend", "spend_many", "define_group", "define_group_by_index")

Call = tuple[str, tuple[Any, ...], dict[str, Any]]


def record(mechanism: str, users: int, slots: int) -> tuple[tuple[Any, ...], list[Call]]:
    """One `bench_scale` run of ``mechanism``: the guard's constructor arguments and its calls
    (from outside the guard: a `spend` inside `spend_many` is not recorded twice)."""
    calls: list[Call] = []
    made: list[tuple[Any, ...]] = []
    depth = [0]
    saved = {name: getattr(Guard, name) for name in (*_RECORDED, "__init__")}

    def init(self: Guard, *args: Any, **kwargs: Any) -> None:
        made.append((args, kwargs))
        saved["__init__"](self, *args, **kwargs)

    def wrap(name: str) -> Callable[..., Any]:
        method = saved[name]

        def recorded(self: Guard, *args: Any, **kwargs: Any) -> Any:
            if not depth[0]:
                if name == "spend_many" and not isinstance(args[0], list | tuple):
                    args = (list(args[0]), *args[1:])  # a generator is read once
                calls.append((name, args, kwargs))
            depth[0] += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        return recorded

    try:
        setattr(Guard, "__init__", init)  # noqa: B010 - restored below
        for name in _RECORDED:
            setattr(Guard, name, wrap(name))
        bench_scale.one(bench_scale.cfg(mechanism, users, slots=slots))
    finally:
        for name, method in saved.items():
            setattr(Guard, name, method)
    if len(made) != 1:
        raise SystemExit(f"expected one guard in the run, found {len(made)}")
    return made[0], calls


def replay(made: tuple[Any, ...], calls: list[Call], slots: int, evict_mb: int) -> dict[str, float]:
    """Microseconds of thread CPU time per slot in each kind of call, on a fresh guard."""
    args, kwargs = made
    evict = np.ones(evict_mb * 2**17)  # 8-byte floats: evict_mb MB
    guard = Guard(*args, **kwargs)
    gc.collect()
    gc.freeze()  # what set-up made is not traversed by a collection inside a timed call
    spent: dict[str, float] = {}
    started = False
    for name, call_args, call_kwargs in calls:
        if evict.size:
            evict += 1.0
        method = getattr(guard, name)
        begin = time.thread_time()
        method(*call_args, **call_kwargs)
        took = time.thread_time() - begin
        started = started or name.startswith("spend")
        if started:
            spent[name] = spent.get(name, 0.0) + took
        if name.startswith("define"):
            gc.collect()
            gc.freeze()
    return {name: seconds / slots * 1e6 for name, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mechanism", help="a family of bench_scale (pba, lba, lpa, plpa+, ...)")
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--slots", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--evict-mb", type=int, default=0)
    opts = parser.parse_args()
    made, calls = record(opts.mechanism, opts.users, opts.slots)
    totals = []
    for k in range(max(opts.repeats, 1)):
        per = replay(made, calls, opts.slots, opts.evict_mb)
        totals.append(sum(per.values()))
        shown = ", ".join(f"{name} {us:.1f}" for name, us in sorted(per.items()))
        print(f"replay {k + 1}: {totals[-1]:.1f} us a slot ({shown})")
    later = totals[1:] or totals
    print(
        f"{opts.mechanism} at {opts.users:,} users, {opts.slots} slots, evict {opts.evict_mb} MB: "
        f"guard {min(later):.1f} us a slot (min), {statistics.median(later):.1f} (median)"
    )


if __name__ == "__main__":
    main()
