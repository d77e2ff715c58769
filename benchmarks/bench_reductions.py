"""numpy's whole-array reductions against an arg-reduction and one lookup (run on demand from
the repository's root: ``python -m benchmarks.bench_reductions [--size 10000] [--number
3000]``).

The guard asks a few yes/no questions of every drawn group (do the indices ascend? does any
drawn user hold a charge?), each over about 10^4 entries. `wevent.accounting.ledger`'s `every`,
`some` and `largest` answer them with ``argmin`` / ``argmax`` and one lookup instead of
``all()``, ``any()`` and ``max()``, which gave the same answers in less time on this machine.
This prints both, per call (the best of seven repeats of ``--number`` calls), for the arrays
the guard meets: a bool array (ascending indices' comparison, a liveness mask) and a uint8
array (stamps), with answers true and false.
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from wevent.accounting.ledger import every, largest, some


def per_call_us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--number", type=int, default=3_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.size
    true_mask: npt.NDArray[np.bool_] = np.ones(n, bool)
    late_false = true_mask.copy()
    late_false[-1] = False
    stamps = rng.integers(0, 200, n).astype(np.uint8)
    zeros = np.zeros(n, np.uint8)
    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("all, every entry true", lambda: bool(true_mask.all()), lambda: every(true_mask)),
        ("all, the last entry false", lambda: bool(late_false.all()), lambda: every(late_false)),
        ("any, uint8 all 0", lambda: bool(zeros.any()), lambda: some(zeros)),
        ("any, uint8 stamps", lambda: bool(stamps.any()), lambda: some(stamps)),
        ("max, uint8 stamps", lambda: int(stamps.max()), lambda: largest(stamps)),
    ]
    print(f"{n:,} entries, best of 7 x {args.number} calls, microseconds per call")
    print("| question | numpy's reduction | arg-reduction + lookup |")
    print("|---|---:|---:|")
    for label, plain, arg in cases:
        if plain() != arg():
            raise SystemExit(f"{label}: the two disagree")
        print(
            f"| {label} | {per_call_us(plain, args.number):.2f} | {per_call_us(arg, args.number):.2f} |"
        )


if __name__ == "__main__":
    main()
