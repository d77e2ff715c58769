"""004 Section VI-A's MAE in `wevent reproduce exsub`: ExSub's paired reductions against a baseline.

Claim examined. 004 reports TVE and MAE (the largest absolute error over slots and entries of
one run, averaged over its runs); the abstract's "reduces the error by 40%-60% compared with
existing online protocols" names no metric; 004 reports both, and its appendix says the gaps are
"largely consistent across various metrics (such as MAE/TVE ...)". `wevent reproduce exsub` writes every repeat's
``mean_mae`` and ``range_mae`` (`wevent.experiments.metrics.mae` of the mean answers and of all
range sums) to ``runs.csv``; this script reads that file and prints, per data set and budget,
the mean MAE of ExSub (uniform portions; for range queries also the calibrated portions of 004
Section VI-D) and of the baseline, and the mean over repeats of ``1 - ExSub / baseline`` on the
repeat's shared data set with its 95% interval (`wevent.experiments.stats.interval`, Student's
t), as `docs/results/exsub/table.md` computes its reductions. A reduction "holds" when its whole
interval is above zero, "does not hold" when below, and is "undecided" otherwise. It then prints
the smallest and largest reduction over every cell against each baseline.

It runs nothing and reads only ``runs.csv`` (default: the committed
``docs/results/exsub/runs.csv``); it takes well under a second.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from wevent.experiments.stats import Interval, interval

RUNS = Path(__file__).resolve().parent.parent / "docs" / "results" / "exsub" / "runs.csv"
BASELINES = ("sample-grr", "sample-oue", "split-rr")
KINDS = {"mean": ("exsub",), "range": ("exsub", "exsub-calibrated")}

Cells = dict[tuple[str, str, str], list[tuple[int, dict[str, float]]]]


class Refused(ValueError):
    """An input the script cannot use (one line on stderr, exit 2)."""


def load(path: Path) -> Cells:
    """(data set, eps, mechanism) -> [(repeat, metrics)] in file order."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = {"dataset", "epsilon", "mechanism", "repeat", "mean_mae", "range_mae"} - set(
                reader.fieldnames or ()
            )
            if missing:
                raise Refused(
                    f"{path} has no column {', '.join(sorted(missing))} (runs.csv of "
                    "`wevent reproduce exsub` with MAE is needed)"
                )
            cells: Cells = {}
            for line in reader:
                key = (line["dataset"], line["epsilon"], line["mechanism"])
                values = {m: float(line[m]) for m in ("mean_mae", "range_mae")}
                cells.setdefault(key, []).append((int(line["repeat"]), values))
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror}") from exc
    if not cells:
        raise Refused(f"{path} has no runs")
    return cells


def per_run(cells: Cells, ds: str, eps: str, mech: str, metric: str) -> dict[int, float]:
    if (ds, eps, mech) not in cells:
        raise Refused(f"runs.csv has no runs of {mech} on {ds} at eps = {eps}")
    return {rep: values[metric] for rep, values in cells[(ds, eps, mech)]}


def paired(cells: Cells, ds: str, eps: str, mine: str, base: str, metric: str) -> Interval:
    """The mean over repeats of ``1 - mine / base`` (same repeat, same data) and its interval."""
    a, b = per_run(cells, ds, eps, mine, metric), per_run(cells, ds, eps, base, metric)
    if a.keys() != b.keys():
        raise Refused(f"{mine} and {base} on {ds} at eps = {eps} have different repeats")
    return interval([1 - a[rep] / b[rep] for rep in sorted(a)])


def pct(iv: Interval) -> str:
    if math.isnan(iv.low):
        return f"{100 * iv.mean:.1f}%"
    return f"{100 * iv.mean:.1f}% [{100 * iv.low:.1f}, {100 * iv.high:.1f}]"


def decided(iv: Interval) -> str:
    if iv.low > 0:
        return "holds"
    if iv.high < 0:
        return "does not hold"
    return "undecided"  # also NaN bounds (one repeat)


def report(cells: Cells, baseline: str) -> str:
    datasets = list(dict.fromkeys(k[0] for k in cells))
    epsilons = list(dict.fromkeys(k[1] for k in cells))
    mean = interval  # the mean MAE of a mechanism over its repeats
    lines = []
    for kind, ours in KINDS.items():
        metric = f"{kind}_mae"
        lines += [
            f"{kind} queries, MAE (004 Section VI-A), against {baseline}; reduction = mean over "
            "repeats of 1 - ExSub / baseline [95% interval]:",
            "",
            "| data set | eps | "
            + " | ".join(f"MAE {m}" for m in ours)
            + f" | MAE {baseline} | "
            + " | ".join(f"reduction, {m}" for m in ours)
            + " |",
            "|---|---|" + "---|" * (2 * len(ours) + 1),
        ]
        for ds in datasets:
            for eps in epsilons:
                values = [
                    f"{mean(list(per_run(cells, ds, eps, m, metric).values())).mean:.4g}"
                    for m in [*ours, baseline]
                ]
                ivs = [paired(cells, ds, eps, m, baseline, metric) for m in ours]
                reds = [f"{pct(iv)} ({decided(iv)})" for iv in ivs]
                lines.append(f"| {ds} | {eps} | " + " | ".join(values + reds) + " |")
        lines.append("")
    lines += [
        "Smallest and largest mean reduction (and the lowest interval bound) over every data set "
        "and budget:",
        "",
        "| metric | ExSub | baseline | min | max | lowest bound | decided above zero |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, ours in KINDS.items():
        for mine in ours:
            for base in BASELINES:
                ivs = [
                    paired(cells, ds, eps, mine, base, f"{kind}_mae")
                    for ds in datasets
                    for eps in epsilons
                ]
                means = [iv.mean for iv in ivs]
                lows = [iv.low for iv in ivs]
                lowest = "none" if any(map(math.isnan, lows)) else f"{100 * min(lows):.1f}%"
                lines.append(
                    f"| {kind}_mae | {mine} | {base} | {100 * min(means):.1f}% | "
                    f"{100 * max(means):.1f}% | {lowest} | "
                    f"{sum(iv.low > 0 for iv in ivs)} of {len(ivs)} |"
                )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=RUNS, help="runs.csv of `reproduce exsub`")
    parser.add_argument("--baseline", default="sample-oue", choices=BASELINES)
    args = parser.parse_args(argv)
    try:
        print(report(load(args.runs), args.baseline))
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
