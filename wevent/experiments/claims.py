"""The papers' stated comparisons, decided on our per-run values (``runs.csv``).

A claim "A's error is on average X% lower than B's" is read as the papers compute it: the mean
over the swept values of 1 - A/B (001 Table 5's TLNS PBA vs BA gives exactly the printed 30.2%
this way). We compute that reduction once per seed, on the runs of A and B that shared the seed's
stream, population and noise seeds (a paired comparison), and report the mean over seeds with its
95% interval; the verdict is "holds" when the whole interval is above zero, "does not hold" when
it is below, and "inconclusive" otherwise, or with one seed (`wevent.experiments.stats`).
``python -m wevent.experiments.claims DIR`` prints a Markdown table of every claim whose
experiment has ``DIR/EXPERIMENT/runs.csv``.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wevent.experiments.harness import RUN_COLUMNS
from wevent.experiments.stats import Interval, interval, verdict

__all__ = ["CLAIMS", "Claim", "evaluate", "load", "paired_reduction", "reduction"]

Results = dict[tuple[str, str, str, str], float]  # (dataset, mechanism, metric, x) -> value
# seed -> that seed's runs (dataset, mechanism, metric, x) -> value
Runs = dict[str, Results]
_RUN_KEYS = frozenset(RUN_COLUMNS)  # the columns before a run's metrics


@dataclass(frozen=True)
class Claim:
    """``better`` has a lower ``metric`` than ``baseline`` on ``dataset`` by ``paper`` (a
    percentage, or None where the paper only states the ordering)."""

    source: str
    experiment: str
    dataset: str
    better: str
    baseline: str
    metric: str
    paper: float | None


def load(path: Path) -> Runs:
    """Read a runs.csv into seed -> (dataset, mechanism, metric, x) -> that run's value, x being
    the swept value (setting, else epsilon and w); every column after the run's description is
    a metric."""
    out: Runs = {}
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        metric_names = [k for k in reader.fieldnames or () if k not in _RUN_KEYS]
        for row in reader:
            x = row.get("setting") or f"{row['epsilon']}/{row['w']}"
            seed = out.setdefault(row["seed"], {})
            for name in metric_names:
                seed[(row["dataset"], row["mechanism"], name, x)] = float(row[name])
    return out


def _usable(results: Results, dataset: str, better: str, baseline: str, metric: str) -> set[str]:
    """The swept values where both runs have a finite value and the baseline's is positive."""
    xs = set()
    for (d, m, k, x), base in results.items():
        if d == dataset and m == baseline and k == metric and math.isfinite(base) and base > 0:
            other = results.get((dataset, better, metric, x))
            if other is not None and math.isfinite(other):
                xs.add(x)
    return xs


def paired_reduction(runs: Runs, dataset: str, better: str, baseline: str, metric: str) -> Interval:
    """Per seed, the mean over the swept values of 1 - better/baseline; their mean over the seeds
    and its 95% interval. Every seed is averaged over the same swept values: those usable in
    every seed (a value missing or not finite in one seed leaves that swept value out for all)."""
    seeds = list(runs.values())
    if not seeds:
        return interval([])
    common = set.intersection(*(_usable(r, dataset, better, baseline, metric) for r in seeds))
    if not common:
        return interval([])
    return interval([reduction(r, dataset, better, baseline, metric, common) for r in seeds])


def reduction(
    results: Results,
    dataset: str,
    better: str,
    baseline: str,
    metric: str,
    xs: set[str] | None = None,
) -> float:
    """Mean of 1 - better/baseline over the swept values ``xs`` (default: every usable one;
    NaN if there is none), summed in sorted order: a set's order follows the hash seed, and a
    float sum its order."""
    chosen = sorted(_usable(results, dataset, better, baseline, metric) if xs is None else xs)
    if not chosen:
        return math.nan
    return sum(
        1 - results[(dataset, better, metric, x)] / results[(dataset, baseline, metric, x)]
        for x in chosen
    ) / len(chosen)


def _c(src: str, exp: str, ds: str, a: str, b: str, metric: str, pct: float | None) -> Claim:
    return Claim(src, exp, ds, a, b, metric, pct)


DS = {"lns": "TLNS", "sin": "Sin", "log": "Log"}
CLAIMS: tuple[Claim, ...] = (
    # 001 Section 6.4, after Table 5 and Table 6 (synthetic data sets)
    *(
        _c("001 Table 5", "pwsm-epsilon", d, "pba", "ba", "amre", p)
        for d, p in (("lns", 30.2), ("sin", 24.6), ("log", 21.1))
    ),
    *(
        _c("001 Table 5", "pwsm-epsilon", d, "dpba", "ba", "amre", p)
        for d, p in (("lns", 70.6), ("sin", 61.0), ("log", 63.6))
    ),
    *(_c("001 Table 5", "pwsm-epsilon", d, "pbd", "bd", "amre", None) for d in DS),
    *(
        _c("001 Table 6", "pwsm-w", d, "pba", "ba", "amre", p)
        for d, p in (("lns", 22.9), ("sin", 11.4), ("log", 11.7))
    ),
    *(
        _c("001 Table 6", "pwsm-w", d, "dpba", "ba", "amre", p)
        for d, p in (("lns", 66.6), ("sin", 54.6), ("log", 53.6))
    ),
    *(_c("001 Table 6", "pwsm-w", d, "pbd", "bd", "amre", None) for d in DS),
    # 000 Section VI-C: PLPA vs LBA on the synthetic data sets (averaged over the three)
    *(_c("000 Fig. 2", "pldp-epsilon", d, "plpa", "lba", "amse", 47.27) for d in DS),
    *(_c("000 Fig. 3", "pldp-w", d, "plpa", "lba", "amse", 36.5) for d in DS),
    *(_c("000 Fig. 2 (vs LPA)", "pldp-epsilon", d, "plpa", "lpa", "amse", 47.27) for d in DS),
    *(_c("000 Fig. 3 (vs LPA)", "pldp-w", d, "plpa", "lpa", "amse", 36.5) for d in DS),
    *(
        _c("000 Fig. 2", "pldp-epsilon", d, a, b, "amse", None)
        for d in DS
        for a, b in (("lba", "lbd"), ("plpa", "plpd"), ("plpa+", "plpd+"))
    ),
    *(
        _c("000 Fig. 3", "pldp-w", d, a, b, "amse", None)
        for d in DS
        for a, b in (("lba", "lbd"), ("plpa", "plpd"), ("plpa+", "plpd+"))
    ),
    # 002 Section 7.2: population division beats budget division; LBD/LBA beat LBU
    *(
        _c("002 Fig. 4", "ldp-ids-epsilon", d, a, b, "mre", None)
        for d in DS
        for a, b in (("lpa", "lba"), ("lpd", "lbd"), ("lba", "lbu"), ("lbd", "lbu"))
    ),
    *(
        _c("002 Fig. 5", "ldp-ids-w", d, a, b, "mre", None)
        for d in DS
        for a, b in (("lpd", "lpu"), ("lpa", "lpu"), ("lpa", "lba"))
    ),
)


def evaluate(root: Path, claims: Sequence[Claim] = CLAIMS) -> list[str]:
    """Markdown lines: one per claim whose experiment ran under ``root``."""
    lines = [
        "| source | data | claim | paper | ours: 1 - A/B, mean over seeds [95% interval] "
        "| seeds | verdict | paper's % in our interval |",
        "|---|---|---|---:|---:|---:|---|---|",
    ]
    cache: dict[str, Runs] = {}
    for c in claims:
        path = root / c.experiment / "runs.csv"
        if not path.exists():
            continue
        if c.experiment not in cache:
            cache[c.experiment] = load(path)
        runs = cache[c.experiment]
        iv = paired_reduction(runs, c.dataset, c.better, c.baseline, c.metric)
        paper = "lower" if c.paper is None else f"{c.paper:.1f}% lower"
        if iv.n == 0:
            ours, decided = "n/a", "n/a"
        else:
            ours = f"{iv.mean * 100:.1f}%"
            if iv.n > 1:
                ours += f" [{iv.low * 100:.1f}, {iv.high * 100:.1f}]"
            decided = verdict(iv)
        inside = "-"  # the paper states no percentage, or we have no interval
        if c.paper is not None and iv.n > 1:
            inside = "yes" if iv.contains(c.paper / 100) else "no"
        lines.append(
            f"| {c.source} | {DS.get(c.dataset, c.dataset)} | {c.better} < {c.baseline} "
            f"({c.metric.upper()}) | {paper} | {ours} | {iv.n} | {decided} | {inside} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0]) if args else Path("reproduction")
    print("\n".join(evaluate(root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
