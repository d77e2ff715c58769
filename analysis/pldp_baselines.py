"""000 Figures 2-3: how far PLPA is below LBA, and which LBA the paper means.

Claim. 000 Section VI-C: on the synthetic streams PLPA reduces "the average error by 47.27%
compared with LBA" as eps varies (Fig. 2, eps = 0.5..2.5 at w = 120) and by 36.5% as w varies
(Fig. 3, w = 40..200 at eps = 1.5). 000 Section VI-B names the baselines "LDP Budget Distribution
(LBD) and LDP Budget Absorption (LBA) [3]" (002's budget-division methods), run with the
smallest personalized budget and the largest window. Our LBA is 002 Algorithm 2 as stated and
PLPA is 99% below it, not 47%.

The authors' public code (https://github.com/dulei715/WEventPLDPCode) runs 002's
population-division LPD and LPA as these two baselines: the non-personalized schemes in that
repository are population-division classes (a sample of n/(2w) users per slot, each at the full
eps), registered under the names "LBD-Scheme" and "LBA-Scheme" next to the authors' own comments
that the names should be LPD/LPA, and there is no budget-division LBA in it. So 000's 47.27% and
36.5% are gains over LPA, and the text's "LBD"/"LBA" is a labelling error.

What it prints:

(a) Analytic (always; d = 2, GRR, Var[f_hat] = g(eps)/n with g(eps) = e^eps / (e^eps - 1)^2,
    evaluated with wevent's `GRR` and `PersonalizedFO`):
    * LBA/LPA variance ratio of the dissimilarity step: every one of the n users at eps/(2w)
      (budget division) against n/(2w) users at eps (population division),
      g(eps/(2w)) / (2w g(eps)): 96-481x over 000's settings;
    * LBA/LPA ratio of the best possible publication: n users at eps/2 (a whole window absorbed)
      against n/2 users at eps, g(eps/2) / (2 g(eps)): 2.0-2.9x;
    * PLPA/LPA ratio from the budget mix alone (PLPA samples the same n/(2 w_max) users, who hold
      budgets {eps, ..., 2.5} instead of all eps): the PFO variance over the mix divided by GRR's
      at eps, 0.44 at eps = 1.5. Hence PLPA is at least 1 - 0.44/2.29 = 81% below a
      budget-division LBA at eps = 1.5, and a 36.5-47% gap over it is impossible; against LPA the
      variance-only prediction is 51.5% (Fig. 2 mean) and 56% (Fig. 3).
(b) ``--simulate``: wevent's `lba`, `lpa` and `plpa` (`wevent.experiments.harness.execute` on
    000's populations, `wevent.experiments.populations.pldp_population`, AMSE on frequencies,
    `wevent.experiments.metrics.amse`) over the nine (eps, w) points of Figs. 2-3 on TLNS, Sin and
    Log, and the paper's way of reducing them to one number: the mean over the swept values of
    1 - AMSE(PLPA) / AMSE(baseline), then the mean over the three synthetic streams.

Sizes. 000 uses 10,000 users and 10,000 slots, seeds 0-9. The default ``--simulate`` keeps the
10,000 users but runs the first 1,000 slots of each stream with one seed (seed 0): about 3 minutes
on two cores (81 runs). Short streams weigh the start-up (the first w slots) more, and one seed
leaves a few points of noise in the "vs LPA" columns; the "vs LBA" columns do not move. Measured
(default run): 99.5% / 60.7% below LBA / LPA for Fig. 2 and 99.3% / 55.9% for Fig. 3; at 600
slots 99.5% / 59.0% and 99.4% / 50.9%; at 3,000 slots (TLNS) and 1,000 (Sin, Log) with seeds 0-2,
99.5% / 59.9% and 99.3% / 51.7%. Paper: 47.27% and 36.5%. Every size puts PLPA 99% below a
budget-division LBA and 12-20 points further below LPA than 000 reports.

Commands (from the repository root):

    .venv/bin/python analysis/pldp_baselines.py                     # (a) only, instant
    .venv/bin/python analysis/pldp_baselines.py --simulate          # (a) + (b), 10,000 users x 1,000 slots, seed 0
    .venv/bin/python analysis/pldp_baselines.py --simulate --slots 3000 --seeds 3
    .venv/bin/python analysis/pldp_baselines.py --simulate --paper-size   # 10,000 x 10,000, about an hour per seed
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Final

from wevent.accounting.budget import Budget
from wevent.experiments import metrics
from wevent.experiments.harness import execute
from wevent.experiments.populations import PLDP_STEP, PLDP_TOP, budget_grid, pldp_population
from wevent.mechanisms.oracles import GRR
from wevent.mechanisms.personalized import PersonalizedFO

D: Final = 2  # the synthetic streams are binary
USERS: Final = 10_000  # 000 Section VI-A
PAPER_SLOTS: Final = 10_000
DATASETS: Final = ("lns", "sin", "log")
NAMES: Final = {"lns": "TLNS", "sin": "Sin", "log": "Log"}
FIG2: Final = tuple((Fraction(k, 2), 120) for k in range(1, 6))  # eps = 0.5..2.5, w = 120
FIG3: Final = tuple((Fraction(3, 2), w) for w in (40, 80, 120, 160, 200))  # eps = 1.5
MECHANISMS: Final = ("lba", "lpa", "plpa")
# 000 Section VI-C, synthetic datasets: "reducing the average error by 47.27% compared with LBA"
# (Fig. 2) and "by 36.5% compared with LBA" (Fig. 3).
PAPER_FIG2: Final = 0.4727
PAPER_FIG3: Final = 0.365


def grr_variance(eps: Fraction, n: Fraction) -> float:
    """Var of one value's GRR frequency estimate from n reporters at eps (d = 2: g(eps)/n)."""
    per_user = GRR.for_budget(D, Budget(eps)).average_variance(1)
    return per_user / float(n)


def mix_ratio(eps: Fraction, reporters: int = 6000) -> float:
    """PFO variance over 000's budget mix {eps, ..., 2.5} (equal shares) / GRR's at eps."""
    grid = budget_grid(eps, PLDP_TOP, PLDP_STEP)
    mixed = PersonalizedFO.for_budgets(D, {Budget(b): reporters // len(grid) for b in grid})
    single = PersonalizedFO.for_budgets(D, {Budget(eps): reporters // len(grid) * len(grid)})
    return mixed.total_variance() / single.total_variance()


def analytic() -> None:
    n = Fraction(USERS)
    print("## (a) Variance ratios, d = 2 (GRR), n users; LBA = budget division, LPA = population")
    print(
        "| eps | w | dissimilarity LBA/LPA | best publication LBA/LPA | budget mix PLPA/LPA "
        "| bound 1 - PLPA/LBA | variance-only 1 - PLPA/LPA |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    fig2_only: list[float] = []
    fig3_only: list[float] = []
    bounds: dict[tuple[Fraction, int], float] = {}
    for eps, w in (*FIG2, *(p for p in FIG3 if p[1] != 120)):
        dis = grr_variance(eps / (2 * w), n) / grr_variance(eps, n / (2 * w))
        pub = grr_variance(eps / 2, n) / grr_variance(eps, n / 2)
        mix = mix_ratio(eps)
        bound = 1 - mix / pub
        bounds[(eps, w)] = bound
        if (eps, w) in FIG2:
            fig2_only.append(1 - mix)
        if (eps, w) in FIG3:
            fig3_only.append(1 - mix)
        print(
            f"| {float(eps):.1f} | {w} | {dis:.1f} | {pub:.2f} | {mix:.3f} | "
            f">= {bound:.1%} | {1 - mix:.1%} |"
        )
    print(
        f"\nVariance-only prediction of 1 - PLPA/LPA, mean over the swept values: Fig. 2 "
        f"{statistics.mean(fig2_only):.1%}, Fig. 3 {statistics.mean(fig3_only):.1%} "
        f"(paper, read as vs LPA: {PAPER_FIG2:.2%}, {PAPER_FIG3:.1%})."
    )
    print(
        f"Variance-only lower bound on 1 - PLPA/LBA (budget-division LBA), mean over the swept "
        f"values: Fig. 2 {statistics.mean(bounds[p] for p in FIG2):.1%}, Fig. 3 "
        f"{statistics.mean(bounds[p] for p in FIG3):.1%} (paper: {PAPER_FIG2:.2%}, {PAPER_FIG3:.1%})."
    )
    print(
        "A budget-division LBA is at least the 'best publication' factor above LPA and PLPA at most "
        "the 'budget mix' factor below it, so PLPA is at least 'bound' below such an LBA; the "
        "dissimilarity factor makes LBA's publish/skip decisions mostly noise, so in practice the "
        "gap is ~99%."
    )


def simulate(kinds: Sequence[str], users: int, slots: int, seeds: int) -> None:
    points = list(dict.fromkeys((*FIG2, *FIG3)))  # (1.5, 120) is in both figures
    print(
        f"\n## (b) wevent lba / lpa / plpa, {users:,} users, {slots:,} slots, "
        f"seeds 0-{seeds - 1}: AMSE (mean over seeds)"
    )
    start = time.time()
    amse: dict[tuple[str, Fraction, int, str], float] = {}
    for kind in kinds:
        for eps, w in points:
            runs: dict[str, list[float]] = {m: [] for m in MECHANISMS}
            for seed in range(seeds):
                pop = pldp_population(users, eps, w, seed)
                for mech in MECHANISMS:
                    result = execute(mech, pop, kind, slots, seed)
                    runs[mech].append(metrics.amse(*result.freq()))
            for mech in MECHANISMS:
                amse[(kind, eps, w, mech)] = statistics.mean(runs[mech])
            row = " ".join(f"{m} {amse[(kind, eps, w, m)]:.4g}" for m in MECHANISMS)
            print(
                f"{NAMES[kind]:4s} eps={float(eps):.1f} w={w:3d}: {row}  "
                f"[{time.time() - start:.0f} s]",
                flush=True,
            )

    def reduction(kind: str, sweep: Sequence[tuple[Fraction, int]], base: str) -> float:
        return statistics.mean(
            1 - amse[(kind, e, w, "plpa")] / amse[(kind, e, w, base)] for e, w in sweep
        )

    print("\nmean over the swept values of 1 - AMSE(PLPA) / AMSE(baseline)")
    print("| data | Fig. 2: vs LBA | Fig. 2: vs LPA | Fig. 3: vs LBA | Fig. 3: vs LPA |")
    print("|---|---:|---:|---:|---:|")
    cols: list[list[float]] = [[], [], [], []]
    for kind in kinds:
        vals = [
            reduction(kind, FIG2, "lba"),
            reduction(kind, FIG2, "lpa"),
            reduction(kind, FIG3, "lba"),
            reduction(kind, FIG3, "lpa"),
        ]
        for col, v in zip(cols, vals, strict=True):
            col.append(v)
        print(f"| {NAMES[kind]} | " + " | ".join(f"{v:.1%}" for v in vals) + " |")
    means = [statistics.mean(c) for c in cols]
    print(
        f"| mean | {means[0]:.1%} | {means[1]:.1%} | {means[2]:.1%} | {means[3]:.1%} |\n"
        f"| 000 (text says 'LBA') | {PAPER_FIG2:.2%} | {PAPER_FIG2:.2%} | {PAPER_FIG3:.1%} "
        f"| {PAPER_FIG3:.1%} |"
    )
    print(f"\n(b) took {time.time() - start:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--simulate", action="store_true", help="also run wevent's mechanisms")
    parser.add_argument("--users", type=int, default=USERS)
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..SEEDS-1")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument(
        "--paper-size", action="store_true", help=f"{USERS:,} users x {PAPER_SLOTS:,} slots"
    )
    args = parser.parse_args()
    if args.paper_size:
        args.users, args.slots = USERS, PAPER_SLOTS
    kinds = [k for k in args.datasets.split(",") if k]
    for k in kinds:
        if k not in DATASETS:
            parser.error(f"unknown dataset {k!r} (expected {', '.join(DATASETS)})")
    analytic()
    if args.simulate:
        simulate(kinds, args.users, args.slots, args.seeds)


if __name__ == "__main__":
    main()
