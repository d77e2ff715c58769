"""Throughput of the runtime guard and the batch checker (run on demand: `make bench`).

Prints a Markdown table; docs/performance.md records the figures with the machine they came from.
Nothing here is asserted: these are measurements, not tests.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from wevent.accounting.budget import Budget
from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement
from wevent.verifier.check import check
from wevent.verifier.guard import Engine, Guard

CLASSES: list[Requirement] = [
    Fixed(w, Budget(eps))
    for w, eps in [
        (10, "1"),
        (20, "1"),
        (40, "2"),
        (80, "2"),
        (10, "0.5"),
        (30, "1.5"),
        (50, "2.5"),
        (100, "3"),
    ]
]


def machine() -> str:
    model = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}, {model}"


def timed(fn: Callable[[], object], repeats: int = 1) -> tuple[float, object]:
    best = float("inf")
    result: object = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def per_user_ledger(n_users: int, n_slots: int, seed: int = 0) -> tuple[Ledger, Population]:
    """n_users x n_slots per-user charges in slot order (a stream's natural order)."""
    rng = np.random.default_rng(seed)
    users = [f"u{i}" for i in range(n_users)]
    pop = Population({u: CLASSES[i % len(CLASSES)] for i, u in enumerate(users)})
    slot = np.repeat(np.arange(1, n_slots + 1, dtype=np.int64), n_users)
    user = np.tile(np.arange(n_users, dtype=np.int64), n_slots)
    amounts = [
        Budget(Fraction(1, 200)),
        Budget(Fraction(1, 400)),
        Budget(Fraction(1, 100)),
        Budget(Fraction(3, 400)),
    ]
    codes = rng.integers(0, len(amounts), size=len(slot)).astype(np.int32)
    ledger = Ledger.from_codes(
        slot=slot, user_codes=user, users=users, amount_codes=codes, amounts=amounts
    )
    return ledger, pop


def bench_check(n_users: int, n_slots: int) -> list[tuple[str, str]]:
    ledger, pop = per_user_ledger(n_users, n_slots)
    rows = len(ledger)
    seconds, verdict = timed(lambda: check(ledger, pop), repeats=2)
    assert getattr(verdict, "ok", False)
    out = [
        (
            f"batch check, fixed, compliant, {rows:,} per-user charges "
            f"({n_users:,} users x {n_slots} slots)",
            f"{seconds:.2f} s = {rows / seconds / 1e6:.2f} M charges/s",
        )
    ]
    # The same charges with 0.1% of the users on a requirement they break in most windows.
    tight = Fixed(10, Budget("0.04"))
    reqs = {u: (tight if i % 1000 == 0 else r) for i, (u, r) in enumerate(pop.items())}
    bad_pop = Population(reqs)
    seconds, verdict = timed(lambda: check(ledger, bad_pop), repeats=2)
    found = len(getattr(verdict, "violations", ()))
    out.append(
        (
            f"batch check, fixed, 0.1% of users violating ({found:,} minimal violations reported)",
            f"{seconds:.2f} s = {rows / seconds / 1e6:.2f} M charges/s",
        )
    )
    return out


def bench_check_dynamic(n_users: int, n_slots: int) -> list[tuple[str, str]]:
    dyn = Dynamic(
        tuple(
            Declaration(s, 5 + s % 7, Budget(2), 4 + s % 5, Budget(2))
            for s in range(1, n_slots + 1, 25)
        )
    )
    ledger, _ = per_user_ledger(n_users, n_slots)
    pop = Population({f"u{i}": dyn for i in range(n_users)})
    seconds, _ = timed(lambda: check(ledger, pop), repeats=2)
    rows = len(ledger)
    return [
        (
            f"batch check, dynamic, {rows:,} per-user charges ({n_users:,} users x {n_slots} slots)",
            f"{seconds:.2f} s = {rows / seconds / 1e6:.2f} M charges/s",
        )
    ]


def bench_check_classes(n_users: int, n_slots: int) -> list[tuple[str, str]]:
    """Class-level ledger: one group charge per class per slot (compact form)."""
    pop = Population.from_classes({c: n_users // len(CLASSES) for c in CLASSES})
    ledger = Ledger()
    for cls in pop.classes:
        ledger.define_group(cls.name, cls.members)
    for t in range(1, n_slots + 1):
        for cls in pop.classes:
            ledger.append(t, Fraction(1, 200), group=cls.name)
    seconds, _ = timed(lambda: check(ledger, pop))
    meaning = ledger.per_user_rows()
    return [
        (
            f"batch check, class-level, {len(ledger):,} group charges = {meaning:,} per-user",
            f"{seconds:.2f} s = {meaning / seconds / 1e6:.1f} M per-user charges/s",
        )
    ]


def bench_guard_per_user(n_users: int, n_slots: int, engine: Engine) -> list[tuple[str, str]]:
    pop = Population({f"u{i}": CLASSES[i % len(CLASSES)] for i in range(n_users)})
    amount = Budget(Fraction(1, 200))
    guard = Guard(pop, engine=engine)

    def run() -> None:
        for t in range(1, n_slots + 1):
            for i in range(n_users):
                guard.spend(t, amount, user=f"u{i}")

    seconds, _ = timed(run)
    n = n_users * n_slots
    return [
        (
            f"guard ({engine}), per-user spends ({n_users:,} users x {n_slots} slots)",
            f"{seconds:.2f} s = {n / seconds:,.0f} spends/s",
        )
    ]


def bench_guard_per_class(n_users: int, n_slots: int, engine: Engine) -> list[tuple[str, str]]:
    pop = Population.from_classes({c: n_users // len(CLASSES) for c in CLASSES})
    guard = Guard(pop, engine=engine)
    for cls in pop.classes:
        guard.define_group(cls.name, cls.members)
    amount = Budget(Fraction(1, 200))

    def first_slot() -> None:  # resolves each group's members once: O(members)
        for cls in pop.classes:
            guard.spend(1, amount, group=cls.name)

    def run() -> None:
        for t in range(2, n_slots + 1):
            for cls in pop.classes:
                guard.spend(t, amount, group=cls.name)

    setup, _ = timed(first_slot)
    seconds, _ = timed(run)
    spends = (n_slots - 1) * len(pop.classes)
    per_user = spends * (len(pop) // len(pop.classes))
    return [
        (
            f"guard ({engine}), first class-level spend of {len(pop.classes)} groups "
            f"({len(pop):,} users)",
            f"{setup:.2f} s (one-time: members resolved)",
        ),
        (
            f"guard ({engine}), class-level spends after that ({len(pop.classes)} classes x "
            f"{n_slots - 1} slots)",
            f"{seconds:.2f} s = {spends / seconds:,.0f} spends/s "
            f"({per_user / seconds / 1e6:,.0f} M per-user charges/s)",
        ),
    ]


def bench_guard_drawn(
    n_users: int, n_slots: int, drawn: int, engine: Engine
) -> list[tuple[str, str]]:
    """Population sampling: each slot, ``drawn`` users defined by index and charged as a group."""
    pop = Population.from_classes({c: n_users // len(CLASSES) for c in CLASSES})
    guard = Guard(pop, engine=engine)
    rng = np.random.default_rng(0)
    draws = [np.sort(rng.choice(len(pop), drawn, replace=False)) for _ in range(n_slots)]
    amount = Budget(Fraction(1, 200))

    def run() -> None:
        for t, idx in enumerate(draws, start=1):
            guard.define_group_by_index(f"drawn-{t}", pop.users, idx)
            guard.spend(t, amount, group=f"drawn-{t}")

    seconds, _ = timed(run)
    return [
        (
            f"guard ({engine}), {drawn:,} drawn users charged per slot ({len(pop):,} users, "
            f"{n_slots} slots)",
            f"{seconds:.2f} s = {seconds / n_slots * 1e3:.2f} ms per slot = "
            f"{seconds / (n_slots * drawn) * 1e9:,.0f} ns per drawn user",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes (seconds, for a smoke run)"
    )
    parser.add_argument("--guard-only", action="store_true", help="only the guard's rows")
    args = parser.parse_args()
    scale = 100 if args.quick else 1
    results: list[tuple[str, str]] = []
    if not args.guard_only:
        results += bench_check(100_000 // scale, 100)
        results += bench_check_dynamic(100_000 // scale, 100)
        results += bench_check_classes(1_000_000 // scale, 1_000)
    for engine in ("vector", "accounts"):
        results += bench_guard_per_user(1_000 // scale, 100, engine)
        results += bench_guard_per_class(1_000_000 // scale, 1_000, engine)
        results += bench_guard_drawn(1_000_000 // scale, 200, 10_000 // scale, engine)
    print(f"machine: {machine()}")
    print()
    print("| measurement | result |")
    print("|---|---|")
    for name, value in results:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
