"""streamdp-benchmark's headline, "baseline supremacy", decided on our runs (``runs.csv``).

Schäler et al. (VLDB 2023) find that one of the two baselines, Uniform or Sample, is expected to
give good or even the best utility among the central w-event mechanisms. We test the strong form
per cell (dataset and swept value): **the better baseline has a lower error than every other
mechanism of the run**. The better baseline is chosen by its mean over the seeds (so one
mechanism serves every seed and the comparisons stay paired); against each other mechanism we
take 1 - baseline / other per seed and the verdict of its mean's 95% interval
(`wevent.experiments.stats`). The cell's verdict: "holds" when the baseline is decidedly lower
than every other mechanism, "does not hold" when some other mechanism is decidedly lower than
it, "inconclusive" otherwise. A mechanism without a finite value in every seed makes the cell
inconclusive and is named (it is never dropped silently). The table shows the comparison with
the best other mechanism by mean, and how many of the others are decided below the baseline.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wevent.experiments.claims import DS, Runs, load
from wevent.experiments.stats import FAILS, HOLDS, INCONCLUSIVE, interval, verdict

__all__ = ["BASELINES", "EXPERIMENT", "METRIC", "Cell", "cells", "evaluate"]

EXPERIMENT = "streamdp-baselines"
METRIC = "mean-ae"
BASELINES = ("uniform", "sample")


def _complete(runs: Runs, key: tuple[str, str, str, str]) -> bool:
    return all(key in r and math.isfinite(r[key]) for r in runs.values())


@dataclass(frozen=True)
class Cell:
    """One (dataset, x) cell: the better baseline, the best other mechanism by mean and the
    per-seed reductions against it, the baseline's rank by mean among all (1 = lowest) and
    their number, the verdict against each other mechanism, and the mechanisms without a finite
    value in every seed."""

    dataset: str
    x: str
    baseline: str
    best_other: str
    reductions: list[float]
    rank: int
    mechanisms: int
    against: dict[str, str]
    incomplete: tuple[str, ...]

    @property
    def verdict(self) -> str:
        if self.incomplete:
            return INCONCLUSIVE
        if any(v == FAILS for v in self.against.values()):
            return FAILS
        if all(v == HOLDS for v in self.against.values()):
            return HOLDS
        return INCONCLUSIVE


def cells(runs: Runs, metric: str = METRIC, baselines: Sequence[str] = BASELINES) -> list[Cell]:
    """Every (dataset, x) cell with a baseline and another mechanism, datasets and values in
    first-seen order."""
    keys: dict[tuple[str, str], set[str]] = {}
    for results in runs.values():
        for dataset, mechanism, name, x in results:
            if name == metric:
                keys.setdefault((dataset, x), set()).add(mechanism)
    datasets = list(dict.fromkeys(d for d, _ in keys))
    out = []
    for (dataset, x), mechanisms in sorted(
        keys.items(), key=lambda kv: datasets.index(kv[0][0])
    ):  # dataset by dataset, each in the swept order (a stable sort)
        complete = {m for m in mechanisms if _complete(runs, (dataset, m, metric, x))}
        incomplete = tuple(sorted(mechanisms - complete))
        means = {
            m: sum(r[(dataset, m, metric, x)] for r in runs.values()) / len(runs) for m in complete
        }
        base = sorted((v, m) for m, v in means.items() if m in baselines)
        other = sorted((v, m) for m, v in means.items() if m not in baselines)
        if not base or not other:
            continue
        b = base[0][1]

        def paired(o: str, b: str = b, dataset: str = dataset, x: str = x) -> list[float]:
            return [
                1 - r[(dataset, b, metric, x)] / r[(dataset, o, metric, x)]
                for r in runs.values()
                if r[(dataset, o, metric, x)] > 0
            ]

        against = {o: verdict(interval(paired(o))) for _, o in other}
        rank = 1 + sum(v < means[b] for v in means.values())
        o = other[0][1]
        out.append(Cell(dataset, x, b, o, paired(o), rank, len(means), against, incomplete))
    return out


def evaluate(root: Path, metric: str = METRIC) -> list[str]:
    """Markdown lines: one row per cell of ``root/streamdp-baselines/runs.csv`` and a count of
    the verdicts; nothing when the experiment has not run under ``root``."""
    path = root / EXPERIMENT / "runs.csv"
    if not path.exists():
        return []
    lines = [
        "| data | setting | better baseline | best other (by mean) | baseline's rank (of) "
        "| 1 - baseline / best other, mean [95% interval] | others decided above the baseline "
        "| seeds | verdict |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    counts = {HOLDS: 0, FAILS: 0, INCONCLUSIVE: 0}
    for cell in cells(load(path), metric):
        iv = interval(cell.reductions)
        decided = cell.verdict
        counts[decided] += 1
        ours = f"{iv.mean * 100:.1f}%"
        if iv.n > 1:
            ours += f" [{iv.low * 100:.1f}, {iv.high * 100:.1f}]"
        above = sum(v == HOLDS for v in cell.against.values())
        if cell.incomplete:
            decided += f" ({', '.join(cell.incomplete)}: not every seed)"
        lines.append(
            f"| {DS.get(cell.dataset, cell.dataset)} | {cell.x} | {cell.baseline} "
            f"| {cell.best_other} | {cell.rank} ({cell.mechanisms}) | {ours} "
            f"| {above} of {len(cell.against)} | {iv.n} | {decided} |"
        )
    lines.append("")
    lines.append(
        f"The better baseline has a lower {metric.upper()} than every other mechanism "
        f"(percentages rounded to 1 decimal): holds in {counts[HOLDS]}, does not hold in "
        f"{counts[FAILS]}, inconclusive in {counts[INCONCLUSIVE]} of {sum(counts.values())} cells."
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0]) if args else Path("docs/reproduction")
    print("\n".join(evaluate(root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
