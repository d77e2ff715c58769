"""Per-slot cost of the local frequency oracles (run on demand: `make bench`).

GRR and OUE for 10^6 users and d = 100: the aggregate path (histogram drawn from binomials and
multinomials) beside the per-user path (every report drawn). Measurements, not tests.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from wevent.accounting.budget import Budget
from wevent.mechanisms.oracles import GRR, OUE, FrequencyOracle


def timed(fn: object, repeats: int = 3) -> float:
    assert callable(fn)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10^4 users instead of 10^6")
    args = parser.parse_args()
    n = 10_000 if args.quick else 1_000_000
    d = 100
    rng = np.random.default_rng(0)
    values = rng.integers(0, d, size=n)
    counts = np.bincount(values, minlength=d)
    oracles: list[tuple[str, FrequencyOracle]] = [
        ("GRR", GRR.for_budget(d, Budget(1))),
        ("OUE", OUE.for_budget(d, Budget(1))),
    ]
    print("| oracle, n users, d | aggregate path (per slot) | per-user path (per slot) |")
    print("|---|---|---|")
    for name, oracle in oracles:
        agg = timed(lambda o=oracle: o.perturb_counts(counts, rng))
        # OUE's per-user path materializes n x d bits; measure it on a tenth and scale.
        users = n if name == "GRR" else n // 10
        per = timed(lambda o=oracle, v=values[:users]: o.histogram(o.perturb(v, rng)), repeats=1)
        per *= n / users
        scaled = "" if users == n else " (measured on n/10, scaled)"
        print(f"| {name}, {n:,}, {d} | {agg * 1e3:.2f} ms | {per * 1e3:.0f} ms{scaled} |")


if __name__ == "__main__":
    main()
