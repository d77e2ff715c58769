"""002 Figure 7: LSP is the worst event detector only when the stream changes on the scale of w.

Claim. 002 Section 7.4 / Figure 7 (ROC curves for event monitoring, eps = 1, w = 50): "Although
LSP manages to have much smaller MRE in Figs. 4 and 5, it generally performs the worst on most
datasets", because its approximations miss real-time changes. On 002's three synthetic streams
at their stated parameters, `wevent reproduce roc` finds LSP among the best detectors and LBA
the worst. LSP (002 Sections 5.2.2 and 6.1) lets every user report with the whole eps at the
first slot of each window (slots 1, 51, 101, ...) and repeats that release for the other w - 1
slots; its release is exact up to GRR noise but stale. Staleness costs little when the stream
changes slowly against w. 002's Sin stream, 0.05 sin(0.01 t) + 0.075, has a period of 628 slots
(12.6 windows). 002's real data sets use 10-minute slots, so a daily cycle takes 144 slots,
under 3w. This script runs the ROC experiment on Sin with a shorter period and shows LSP
falling to LBA's level at period 144 and becoming the worst detector at period 63.

The stream. `wevent.mechanisms.streams.SyntheticStream("sin", ..., sin_period=P)`: p_t = 0.05
sin(2 pi t / P) + 0.075, counts drawn as for every synthetic stream; without ``sin_period`` it is
002's own Sin stream, and ``--simulate`` checks that the AUC of every mechanism at the default
period and seed 0 equals `wevent.experiments.harness.execute`'s. The runs use the code path of
`wevent reproduce roc`: `wevent.experiments.running.run_mechanism` (the guard in the loop) on
`wevent.experiments.populations.uniform_population(users, 50, 1)`, GRR, and the AUC of
`wevent.experiments.metrics.event_roc` on `event_statistic` of the released and true frequencies
(events: true value > 0.75 (max - min) + min; the detector "released > theta", theta swept).

What it prints:

(a) Analytic (always, instant): for each period, the noise-free stale detector, which repeats
    the exact p at slots 1, 51, 101, ... (LSP without sampling noise), against the exact p_t:
    its mean and largest lag |p_t - p_pub(t)| as a share of the range of p, and its AUC. This is
    the best LSP can do; GRR noise at 200,000 users (sd ~0.002 in frequency) hardly changes it.
(b) Simulation (default; ``--no-simulate`` skips it): AUC (mean and sd over seeds) of lba, lsp,
    lpu, lpd and lpa for each period, and in how many seeds LSP is the worst of the five.

Sizes. The default run is 002's own size, 200,000 users and 800 slots (002 Section 7.1.1), with
3 seeds (0-2) instead of the 5 of `wevent reproduce roc --repeats 5`. One run takes 0.1-1 s, so
the users and slots needed no reduction. ``--seeds 5`` gives the 5 repeats of the paper-size run
quoted in docs/reproduction.md. ``--users 20000`` is the size of docs/reproduction.md's roc table.

Expected outcome (default run, measured): the noise-free stale detector has AUC 0.979, 0.715 and
0.421 at periods 628, 144 and 63, and wevent's LSP follows it: 0.977, 0.731 and 0.419. LBA stays
at 0.71-0.73 and LPU / LPD / LPA at 0.95-0.97 throughout. So LSP is among the best detectors
at 002's period (worst in 0 of 3 seeds), at LBA's level at period 144 (worst in 1 of 3) and the
worst at period 63 (3 of 3). The runs at the default period are those of `wevent reproduce roc`
at 002's size with the same seeds (same code path, identical AUCs).

Commands (from the repository root; wall times measured under ``nice -n 10``):

    .venv/bin/python analysis/roc_staleness.py                 # (a) + (b), 200,000 x 800, seeds 0-2: 26 s
    .venv/bin/python analysis/roc_staleness.py --no-simulate   # (a) only: 0.4 s
    .venv/bin/python analysis/roc_staleness.py --seeds 5 --periods default,209,144,100,63
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from wevent.accounting.population import Population
from wevent.experiments import metrics
from wevent.experiments.harness import execute
from wevent.experiments.populations import uniform_population
from wevent.experiments.running import run_mechanism
from wevent.mechanisms.streams import SIN_OMEGA, SyntheticStream

FloatArray = npt.NDArray[np.float64]

USERS: Final = 200_000  # 002 Section 7.1.1
SLOTS: Final = 800
W: Final = 50  # Figure 7's caption: eps = 1, w = 50
EPS: Final = Fraction(1)
MECHANISMS: Final = ("lba", "lsp", "lpu", "lpd", "lpa")  # `wevent reproduce roc`
DEFAULT_PERIOD: Final = 2 * math.pi / SIN_OMEGA  # 628.3 slots
PERIODS: Final = "default,144,63"


def periodic_sin(period: float, slots: int, class_sizes: Sequence[int]) -> SyntheticStream:
    """002's Sin stream with a period of ``period`` slots (wevent's own at the default period)."""
    sin_period = None if period == DEFAULT_PERIOD else period
    return SyntheticStream("sin", slots, list(class_sizes), 0, sin_period=sin_period)


def parse_periods(text: str) -> list[float]:
    return [DEFAULT_PERIOD if p == "default" else float(p) for p in text.split(",") if p]


def label(period: float) -> str:
    return f"{period:.1f} (002)" if period == DEFAULT_PERIOD else f"{period:g}"


def stale_release(p: FloatArray, w: int) -> FloatArray:
    """What LSP would release without noise: p at slots 1, w + 1, 2w + 1, ... held for w slots."""
    idx = (np.arange(len(p)) // w) * w
    return np.asarray(p[idx], dtype=np.float64)


def analytic(periods: Sequence[float], slots: int, w: int) -> None:
    print(f"## (a) Noise-free stale detector (LSP's schedule, w = {w}, {slots} slots)")
    print("| period | period / w | mean lag / range | max lag / range | AUC |")
    print("|---:|---:|---:|---:|---:|")
    for period in periods:
        p = periodic_sin(period, slots, [1]).probabilities
        r = stale_release(p, w)
        span = float(p.max() - p.min())
        lag = np.abs(r - p) / span
        auc = metrics.event_roc(r, p).auc
        print(
            f"| {label(period)} | {period / w:.2f} | {lag.mean():.3f} | {lag.max():.3f} "
            f"| {auc:.3f} |"
        )


def auc_of(mech: str, pop: Population, period: float, slots: int, seed: int) -> float:
    """One run as `wevent.experiments.harness.execute` makes it, on `periodic_sin`."""
    stream = periodic_sin(period, slots, [c.count for c in pop.classes])
    summary = run_mechanism(mech, pop, stream, slots=slots, seed=seed, oracle="grr")
    if not summary.ok:
        raise SystemExit(f"{mech} (seed {seed}) stopped by the guard: {summary.refusal}")
    release = np.stack([r.release for r in summary.records]).astype(np.float64)
    truth = np.stack([r.truth for r in summary.records]).astype(np.float64)
    n = float(len(pop))
    rel = metrics.event_statistic(release / n)
    tru = metrics.event_statistic(truth / n)
    return metrics.event_roc(rel, tru).auc


def lowest(aucs: dict[str, list[float]], seed: int) -> str:
    """The mechanism with the smallest AUC in run ``seed``."""
    return min(MECHANISMS, key=lambda m: aucs[m][seed])


def wevent_auc(mech: str, pop: Population, slots: int) -> float:
    """The same run on wevent's own Sin stream (`harness.execute`, seed 0)."""
    rel, tru = execute(mech, pop, "sin", slots, 0, oracle="grr").freq()
    return metrics.event_roc(metrics.event_statistic(rel), metrics.event_statistic(tru)).auc


def simulate(periods: Sequence[float], users: int, slots: int, seeds: int, w: int) -> None:
    start = time.time()
    pop = uniform_population(users, w, EPS)
    print(
        f"\n## (b) wevent's ROC mechanisms on Sin: {users:,} users, {slots} slots, eps = 1, "
        f"w = {w}, GRR, seeds 0-{seeds - 1}: AUC mean (sd)"
    )
    print("| period | " + " | ".join(MECHANISMS) + " | LSP worst in |")
    print("|---:|" + "---:|" * len(MECHANISMS) + "---:|")
    for period in periods:
        aucs: dict[str, list[float]] = {m: [] for m in MECHANISMS}
        for seed in range(seeds):
            for mech in MECHANISMS:
                aucs[mech].append(auc_of(mech, pop, period, slots, seed))
        worst = sum(lowest(aucs, s) == "lsp" for s in range(seeds))
        cells = []
        for mech in MECHANISMS:
            sd = statistics.stdev(aucs[mech]) if seeds > 1 else 0.0
            cells.append(f"{statistics.mean(aucs[mech]):.3f} ({sd:.3f})")
        print(f"| {label(period)} | " + " | ".join(cells) + f" | {worst}/{seeds} |", flush=True)
        if period == DEFAULT_PERIOD:
            same = all(wevent_auc(m, pop, slots) == aucs[m][0] for m in MECHANISMS)
            print(f"(check: seed 0 equals `execute(..., 'sin')` for all five: {same})")
    print(f"\n(b) took {time.time() - start:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--periods",
        default=PERIODS,
        help=f"comma-separated periods in slots; 'default' is 002's 2 pi / 0.01 (default {PERIODS})",
    )
    parser.add_argument("--users", type=int, default=USERS)
    parser.add_argument("--slots", type=int, default=SLOTS)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..SEEDS-1")
    parser.add_argument("--w", type=int, default=W)
    parser.add_argument("--no-simulate", action="store_true", help="the analytic part only")
    args = parser.parse_args()
    periods = parse_periods(args.periods)
    if not periods or min(periods) <= 0:
        parser.error("--periods needs positive periods")
    start = time.time()
    print(f"# 002 Figure 7: event-monitoring AUC on Sin by the stream's period (w = {args.w})")
    analytic(periods, args.slots, args.w)
    if not args.no_simulate:
        simulate(periods, args.users, args.slots, args.seeds, args.w)
    print(f"\ntotal {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
