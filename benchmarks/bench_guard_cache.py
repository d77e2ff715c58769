"""How much of the guard's cost for a drawn group is the CPU cache (run on demand
from the repository's root: ``python -m benchmarks.bench_guard_cache [--users 1000000]
[--drawn 10000] [--slots 300]``).

Population division (LPA) defines one drawn group per slot by population index and charges it
once. `bench_scale.py` times that inside a real run, where the data path runs between two slots
and leaves the caches full of its own data. Here the same two guard calls run in a loop with
nothing between them ("warm"), then with a pass over ``--evict-mb`` MB of memory before each slot
("cold", as after a data path). The difference is what the guard pays for finding its own state
(the per-user arrays, the ledger's columns, the interpreter's objects) out of cache, not for the
work it does.

Users are drawn without replacement from one permutation, ``--drawn`` per slot, so no user is
drawn twice within 80 slots (the longest window of the 16 classes of `bench_scale.requirements`)
and every spend is accepted; each class-wide charge of a real run is left out.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time

import numpy as np

from benchmarks.bench_scale import requirements
from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.verifier.guard import Guard


def run(users: int, drawn: int, slots: int, evict_mb: int) -> tuple[float, float, int]:
    """Mean microseconds per slot in `define_group_by_index` and in `spend`, and the Python
    function calls the two made in the last slot (counted by `cProfile`, not timed)."""
    reqs = requirements(16, 80)
    pop = Population.from_classes({r: users // len(reqs) for r in reqs})
    guard = Guard(pop)
    table = pop.users
    start = 0
    for i, c in enumerate(pop.classes):  # the runner's class groups (set-up, not timed)
        guard.define_group_by_index(f"class-{i}", table, np.arange(start, start + c.count))
        start += c.count
    order = np.random.default_rng(1).permutation(len(table))
    per_cycle = len(table) // drawn
    if per_cycle <= 80:
        raise SystemExit(f"--drawn {drawn} of {len(table)} users repeats a user within 80 slots")
    junk = np.zeros(evict_mb * 2**20, np.uint8)
    amount = Budget("1/8")
    gc.collect()
    gc.freeze()
    defining = spending = 0.0
    calls = 0
    for t in range(1, slots + 2):
        k = (t - 1) % per_cycle
        idx = np.sort(order[k * drawn : (k + 1) * drawn]).astype(np.int64)
        if t > slots:  # one more slot, profiled: how much Python the two calls run
            profile = cProfile.Profile()
            profile.enable()
            guard.define_group_by_index(f"drawn-{t}", table, idx)
            guard.spend(t, amount, group=f"drawn-{t}", part="report", mechanism="bench")
            profile.disable()
            calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
            break
        if evict_mb:
            junk += 1  # reads and writes every byte: the caches hold junk afterwards
        t0 = time.perf_counter()
        guard.define_group_by_index(f"drawn-{t}", table, idx)
        t1 = time.perf_counter()
        guard.spend(t, amount, group=f"drawn-{t}", part="report", mechanism="bench")
        t2 = time.perf_counter()
        defining += t1 - t0
        spending += t2 - t1
    return defining / slots * 1e6, spending / slots * 1e6, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--drawn", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=300)
    parser.add_argument("--evict-mb", type=int, default=64, help="memory passed over (cold)")
    args = parser.parse_args()
    print(f"{args.users:,} users, {args.drawn:,} drawn per slot, {args.slots} slots")
    for label, evict in (("warm", 0), (f"cold ({args.evict_mb} MB between slots)", args.evict_mb)):
        define_us, spend_us, calls = run(args.users, args.drawn, args.slots, evict)
        print(
            f"{label}: define_group_by_index {define_us:.0f} us, spend {spend_us:.0f} us, "
            f"together {define_us + spend_us:.0f} us per slot ({calls} Python calls a slot)"
        )


if __name__ == "__main__":
    main()
