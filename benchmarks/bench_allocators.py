"""Per-slot cost of the central allocators (run on demand: `make bench`).

10^6 users in 8 requirement classes (windows 10-80, budgets 0.5 and 1; dynamic schedules for
dpbd/dpba), a Sin stream: the budget kernel alone (plan + step per slot) and a full slot (kernel,
guard, dissimilarity, publication). Set-up (population, guard with 10^6 accounts' members) is
timed separately. Measurements, not tests.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.mechanisms.allocators import CENTRAL, algebra_for, classes_of, make_kernel
from wevent.mechanisms.allocators.kernel import published_now
from wevent.mechanisms.allocators.registry import data_path_for, takes_dynamic
from wevent.mechanisms.central import CentralRunner
from wevent.mechanisms.streams import SyntheticStream
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups


def requirements(dynamic: bool) -> list[Requirement]:
    out: list[Requirement] = []
    for w in (10, 20, 40, 80):
        for eps in ("0.5", "1"):
            if dynamic:
                out.append(
                    Dynamic(
                        (
                            Declaration(1, w, Budget(eps), w, Budget(eps)),
                            Declaration(100, w // 2, Budget(eps), w, Budget(Budget(eps) * 2)),
                            Declaration(300, w, Budget(Budget(eps) * 2), w // 2, Budget(eps)),
                        )
                    )
                )
            else:
                out.append(Fixed(w, Budget(eps)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10^4 users and 100 slots")
    parser.add_argument("--slots", type=int, default=500)
    args = parser.parse_args()
    n = 10_000 if args.quick else 1_000_000
    slots = 100 if args.quick else args.slots
    print(f"{n:,} users, 8 classes, {slots} slots, Sin stream")
    print(
        "| allocator | set-up (population + guard) | kernel per slot | full slot (kernel + guard + data) |"
    )
    print("|---|---|---|---|")
    for name in CENTRAL:
        reqs = requirements(takes_dynamic(name))
        start = time.perf_counter()
        population = Population.from_classes({r: n // len(reqs) for r in reqs})
        guard = Guard(population)
        groups = class_groups(population, guard)
        setup = time.perf_counter() - start

        classes = classes_of(population, name)
        alg = algebra_for("exact")
        kernel = make_kernel(name, alg, classes)
        decisions = np.random.default_rng(1).random(slots) < 0.3
        state = kernel.start()
        start = time.perf_counter()
        for t in range(1, slots + 1):
            plan = kernel.plan(state, t)
            state = kernel.step(state, t, plan, published_now(alg, plan, bool(decisions[t - 1])))
        per_kernel = (time.perf_counter() - start) / slots

        sizes = [c.count for c in population.classes]
        runner = CentralRunner(
            kernel=make_kernel(name, alg, classes),
            spender=guard,
            groups=groups,
            sizes=sizes,
            stream=SyntheticStream("sin", slots, sizes, 0),
            data_rng=np.random.default_rng(2),
            noise_rng=np.random.default_rng(3),
            mechanism=name,
            data_path=data_path_for(name, 2),  # the mechanism's own, where it has one
        )
        start = time.perf_counter()
        for _ in range(slots):
            runner.step()
        per_slot = (time.perf_counter() - start) / slots
        print(f"| {name} | {setup:.2f} s | {per_kernel * 1e3:.2f} ms | {per_slot * 1e3:.2f} ms |")


if __name__ == "__main__":
    main()
