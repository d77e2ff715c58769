"""001 Section 6.5: PBA's drop at a high share of E = 1.0 users depends on the number of users N.

Claim. 001 Section 6.5 / Figure 11 (budgets {0.6, 1.0}, all w = 120, the share o of E = 1.0 users
varied 0.1..0.9): "the AMRE remains relatively stable. However, when the users' quantity ratio of
E_k = 1.0 [...] exceeds 0.8, we can see a significant decrease in AMRE for PBD and PBA", because
"the optimal budget from OBS in Algorithm 1 becomes dominated by a higher E". 001 does not state
the number of users N of its synthetic streams. At our N = 10,000 (`wevent reproduce pwsm-ratio`)
PBA rises at o = 0.9 instead of dropping.

Why N matters. OBS (001 Alg. 1, `wevent.mechanisms.sampling.obs`) compares an N-free noise term
2/theta^2 with the sampling error of Def. 12, whose squared bias (n_lo (1 - p))^2 grows with the
absolute number n_lo = (1 - o) N of E = 0.6 users; p = (e^(0.6 s) - 1) / (e^s - 1) is their keep
probability at a step spending s = k / 240 (k shares of E / (2w), w = 120). So a step switches to
E = 1.0 only below a fixed n_lo (about 1,130 / k), i.e. at o > 1 - 1130 / (k N). The
dissimilarity step (001 Alg. 3, DC) spends one share; once it switches, its SM sample is not
rescaled (Def. 12), so the dissimilarity is biased upwards by about (1 - p) n_lo / d. PBA
(Alg. 5) publishes iff dis > sqrt(err_pub), sqrt(err_pub) = sqrt(2) / (0.6 k / 240) ~ 566 / k at
the 0.6 threshold. At N = 10,000 and o = 0.9 the bias (~200 counts) forces publications after
3 absorbed shares, most of them still at 0.6, and AMRE rises; at N = 5,000 the bias is half
that, more publications run at E = 1.0, and AMRE drops as 001 reports.

What it prints:

(a) Analytic (always, instant; wevent's own `obs`): p; the largest n_lo for which OBS picks
    E = 1.0 at a step of k shares (k = 1 is the dissimilarity step); for N in {3000, 5000,
    10000, 30000} the o beyond which the dissimilarity step switches, OBS's choice at each
    swept o (n_hi = round(o N) as in `budget_ratio_population`), and at o = 0.9 the bias of
    DC's unscaled sample against sqrt(err_pub) and the smallest k at which it exceeds it.
(b) Simulation (default; ``--no-simulate`` skips it): wevent's pba and pbd
    (`wevent.experiments.harness.execute` on `budget_ratio_population(N, o, seed)`, AMRE of
    `wevent.experiments.metrics.amre`, the code path of `wevent reproduce pwsm-ratio`) at
    o in {0.1, 0.5, 0.7, 0.9} for N = 5,000 and 10,000: AMRE mean (sd) and publications.
(c) Counterfactual (with (b); ``--no-ht`` skips it): the same runs at o = 0.9 with a
    Horvitz-Thompson SM that divides each kept count by its keep probability. This is a what-if
    variant built inside this script's process (`SamplingMechanism.sample_counts` replaced
    for the duration of those runs and restored); wevent itself follows 001 and does not
    rescale. Runs at o <= 0.7 need no counterfactual for PBA: at N >= 5,000 OBS picks 0.6 at
    every PBA step there, so every user is kept and rescaling changes nothing.

Sizes. The investigation behind this script ran T = 10,000 slots (001's T), seeds 0-2, on TLNS, Sin
and Log. The default runs Sin and Log with T = 2,000 slots and seeds 0-1 (56 runs; measured
112 s). ``--slots 10000 --seeds 3 --datasets lns,sin,log`` is that size (180 runs, about
20 minutes estimated from the default's cost per slot; not timed here).

Expected outcome (default run, measured): the dissimilarity step switches to E = 1.0 from
o = 0.774 (N = 5,000) and o = 0.887 (N = 10,000); at N = 30,000 not below o = 0.962. PBA is
identical at o = 0.1, 0.5 and 0.7 (OBS never picks 1.0 there). At o = 0.9 it drops at N = 5,000
(Sin 31,138 -> 20,790, -33%; Log -30%) and rises at N = 10,000 (Sin 32,145 -> 43,316, +35%;
Log +20%), with 29% more publications (328 -> 423). PBD drops at o = 0.9 for both N (-32% to
-59%). With Horvitz-Thompson rescaling, PBA at N = 10,000 drops as well (Sin 32,145 -> 21,560,
-33%; Log -38%).

Commands (from the repository root; wall times measured under ``nice -n 10``):

    .venv/bin/python analysis/pwsm_ratio_users.py                  # (a) + (b) + (c): 113 s
    .venv/bin/python analysis/pwsm_ratio_users.py --no-simulate    # (a) only: 0.5 s
    .venv/bin/python analysis/pwsm_ratio_users.py --slots 10000 --seeds 3 --datasets lns,sin,log
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget
from wevent.experiments import metrics
from wevent.experiments.harness import execute
from wevent.experiments.populations import budget_ratio_population
from wevent.mechanisms.sampling import SamplingMechanism, obs

FloatArray = npt.NDArray[np.float64]

D: Final = 2  # binary synthetic streams
W: Final = 120  # 001 Section 6.5: every user has w = 120
LOW: Final = Fraction(3, 5)  # E = 0.6, the default type
HIGH: Final = Fraction(1)  # E = 1.0, the share o of users
SHARE: Final = 1 / Fraction(2 * W)  # one share of E: E / (2w)
ANALYTIC_N: Final = (3_000, 5_000, 10_000, 30_000)
SIM_N: Final = (5_000, 10_000)
RATIOS: Final = (Fraction(1, 10), Fraction(1, 2), Fraction(7, 10), Fraction(9, 10))
MECHANISMS: Final = ("pba", "pbd")
DATASETS: Final = ("lns", "sin", "log")
NAMES: Final = {"lns": "TLNS", "sin": "Sin", "log": "Log"}
SHARES: Final = (1, 2, 3, 5, 10)


def budgets(k: Fraction, n_lo: int, n_hi: int) -> dict[Budget, int]:
    """The classes a step spending k shares sees: E = 0.6 users and E = 1.0 users."""
    return {Budget(LOW * SHARE * k): n_lo, Budget(HIGH * SHARE * k): n_hi}


def picks_high(k: Fraction, n_lo: int, n_hi: int) -> bool:
    theta, _ = obs(budgets(k, n_lo, n_hi))
    return theta == Budget(HIGH * SHARE * k)


def largest_switching_n_lo(k: Fraction) -> int:
    """The largest n_lo for which OBS picks E = 1.0 at a step of k shares (n_hi plays no part:
    the E = 1.0 users are kept whole at either threshold)."""
    n = 0
    while picks_high(k, n + 1, 1):
        n += 1
    return n


def keep_probability(k: Fraction) -> float:
    s = float(SHARE * k)
    return math.expm1(float(LOW) * s) / math.expm1(float(HIGH) * s)


def analytic() -> None:
    p = keep_probability(Fraction(1))
    print("## (a) OBS (001 Alg. 1) on budgets {0.6, 1.0} x k / 240, wevent's `obs`")
    print(f"keep probability of an E = 0.6 user at the E = 1.0 threshold: p = {p:.4f}")
    print("| k shares | OBS picks 1.0 iff n_lo <= | sqrt(err_pub) at the 0.6 threshold |")
    print("|---:|---:|---:|")
    limit: dict[int, int] = {}
    for k in SHARES:
        limit[k] = largest_switching_n_lo(Fraction(k))
        root = math.sqrt(2) / float(LOW * SHARE * k)
        print(f"| {k} | {limit[k]:,} | {root:.0f} |")
    head = " | ".join(f"o={float(o):g}" for o in (Fraction(k, 10) for k in range(1, 10)))
    print(
        "\nDissimilarity step (k = 1): the o from which it switches to E = 1.0 (1 - max n_lo / N), "
        "OBS's choice at each o, and at o = 0.9 the bias (1 - p) n_lo / d of DC's unscaled sample"
    )
    print(f"| N | switches from o = | {head} | bias at 0.9 | > sqrt(err_pub) at 0.6 from k = |")
    print("|---:|---:|" + "---|" * 9 + "---:|---:|")
    for n in ANALYTIC_N:
        chosen = []
        for i in range(1, 10):
            n_hi = round(Fraction(i, 10) * n)
            chosen.append("1.0" if picks_high(Fraction(1), n - n_hi, n_hi) else "0.6")
        n_lo = n - round(Fraction(9, 10) * n)
        bias = (1 - p) * n_lo / D
        k_min = math.ceil(math.sqrt(2) / float(LOW * SHARE) / bias)
        tail = f"{bias:.0f} | {k_min}" if chosen[-1] == "1.0" else "- (no switch) | -"
        print(f"| {n:,} | {1 - limit[1] / n:.3f} | " + " | ".join(chosen) + f" | {tail} |")


def ht_sample_counts(
    self: SamplingMechanism, counts: Mapping[Budget, npt.ArrayLike], rng: np.random.Generator
) -> FloatArray:
    """SM_s with Horvitz-Thompson rescaling: the same Binomial draws, each divided by p."""
    self.check_counts(counts)
    total: FloatArray | None = None
    for eps, hist in counts.items():
        arr = np.asarray(hist, dtype=np.int64)
        p = self.keep[Budget(eps)]
        kept = arr.astype(np.float64) if p == 1.0 else rng.binomial(arr, p) / p
        total = kept if total is None else total + kept
    if total is None:
        raise ValueError("no classes to sample")
    return total


@contextmanager
def horvitz_thompson() -> Iterator[None]:
    """Within the block, SM rescales its sample (this process only)."""
    original = SamplingMechanism.sample_counts
    setattr(SamplingMechanism, "sample_counts", ht_sample_counts)  # noqa: B010
    try:
        yield
    finally:
        setattr(SamplingMechanism, "sample_counts", original)  # noqa: B010


def runs(
    mech: str, kind: str, n: int, ratio: Fraction, slots: int, seeds: int
) -> tuple[float, float, float]:
    """AMRE mean, sd and mean publications over seeds 0..seeds-1."""
    errors: list[float] = []
    pubs: list[int] = []
    for seed in range(seeds):
        result = execute(mech, budget_ratio_population(n, ratio, seed), kind, slots, seed)
        errors.append(metrics.amre(result.release, result.truth))
        pubs.append(result.statuses.count("published"))
    sd = statistics.stdev(errors) if seeds > 1 else 0.0
    return statistics.mean(errors), sd, statistics.mean(pubs)


def simulate(kinds: Sequence[str], slots: int, seeds: int, ht: bool) -> None:
    start = time.time()
    print(
        f"\n## (b) wevent pba / pbd, eps:o sweep (w = 120), {slots:,} slots, seeds 0-{seeds - 1}: "
        "AMRE mean (sd) [publications]"
    )
    head = " | ".join(f"o = {float(o):g}" for o in RATIOS)
    print(f"| N | data | mech | {head} | 0.7 -> 0.9 |")
    print("|---:|---|---|" + "---:|" * (len(RATIOS) + 1))
    unscaled: dict[tuple[int, str, str], tuple[float, float]] = {}
    for n in SIM_N:
        for kind in kinds:
            for mech in MECHANISMS:
                cells = []
                means: dict[Fraction, float] = {}
                for o in RATIOS:
                    mean, sd, pubs = runs(mech, kind, n, o, slots, seeds)
                    means[o] = mean
                    cells.append(f"{mean:,.0f} ({sd:,.0f}) [{pubs:.0f}]")
                hi, mid = means[RATIOS[-1]], means[Fraction(7, 10)]
                unscaled[(n, kind, mech)] = (mid, hi)
                print(
                    f"| {n:,} | {NAMES[kind]} | {mech} | " + " | ".join(cells) + f" | "
                    f"{hi / mid - 1:+.0%} |",
                    flush=True,
                )
    print(f"\n(b) took {time.time() - start:.0f} s")
    if not ht:
        return
    start = time.time()
    print(
        "\n## (c) What if SM rescaled its sample (Horvitz-Thompson)? o = 0.9, same seeds; "
        "o = 0.7 and 'o = 0.9 unscaled' are (b)'s"
    )
    print(
        "| N | data | mech | o = 0.7 | o = 0.9 unscaled | o = 0.9 rescaled [publications] "
        "| 0.7 -> 0.9 rescaled |"
    )
    print("|---:|---|---|---:|---:|---:|---:|")
    for n in SIM_N:
        for kind in kinds:
            for mech in MECHANISMS:
                with horvitz_thompson():
                    mean, sd, pubs = runs(mech, kind, n, RATIOS[-1], slots, seeds)
                mid, hi = unscaled[(n, kind, mech)]
                print(
                    f"| {n:,} | {NAMES[kind]} | {mech} | {mid:,.0f} | {hi:,.0f} | "
                    f"{mean:,.0f} ({sd:,.0f}) [{pubs:.0f}] | {mean / mid - 1:+.0%} |",
                    flush=True,
                )
    print(f"\n(c) took {time.time() - start:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--slots", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0..SEEDS-1")
    parser.add_argument("--datasets", default="sin,log")
    parser.add_argument("--no-simulate", action="store_true", help="the analytic part only")
    parser.add_argument("--no-ht", action="store_true", help="skip the rescaling what-if (c)")
    args = parser.parse_args()
    kinds = [k for k in args.datasets.split(",") if k]
    for k in kinds:
        if k not in DATASETS:
            parser.error(f"unknown dataset {k!r} (expected {', '.join(DATASETS)})")
    start = time.time()
    print("# 001 Section 6.5 (Figure 11): PBA / PBD over the share o of E = 1.0 users, by N")
    analytic()
    if not args.no_simulate:
        simulate(kinds, args.slots, args.seeds, not args.no_ht)
    print(f"\ntotal {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
