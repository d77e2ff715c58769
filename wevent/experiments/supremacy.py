"""streamdp-benchmark's headline, "baseline supremacy", decided on our runs (``runs.csv``).

Schäler et al. (VLDB 2023) find that one of the two baselines, Uniform or Sample, is expected to
give good or even the best utility among the central w-event mechanisms. We test the strong form
per cell (dataset and swept value): **the better baseline has a lower error than the best other
mechanism**. "Better" and "best" are chosen by the mean over the seeds (one mechanism per group
for every seed, so the comparison stays paired); per seed we take 1 - baseline / other, and the
verdict is that of its mean's 95% interval (`wevent.experiments.stats`): "holds" (the baseline
lower), "does not hold" (the other lower) or "inconclusive". The table also ranks the better
baseline among all mechanisms by mean (1 = lowest error).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

from wevent.experiments.claims import DS, Runs, load
from wevent.experiments.stats import FAILS, HOLDS, INCONCLUSIVE, interval, verdict

__all__ = ["BASELINES", "EXPERIMENT", "METRIC", "cells", "evaluate"]

EXPERIMENT = "streamdp-baselines"
METRIC = "mean-ae"
BASELINES = ("uniform", "sample")


def _mean(runs: Runs, key: tuple[str, str, str, str]) -> float:
    values = [r[key] for r in runs.values() if key in r and math.isfinite(r[key])]
    return sum(values) / len(values) if len(values) == len(runs) and values else math.nan


def cells(
    runs: Runs, metric: str = METRIC, baselines: Sequence[str] = BASELINES
) -> list[tuple[str, str, str, str, int, int, list[float]]]:
    """Per (dataset, x), datasets and values in first-seen order: the better baseline, the best other mechanism,
    the baseline's rank among all mechanisms by mean (1 = lowest) and their number, and the per-seed
    reductions 1 - baseline / other."""
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
        means = {m: _mean(runs, (dataset, m, metric, x)) for m in mechanisms}
        means = {m: v for m, v in means.items() if not math.isnan(v)}
        base = sorted((v, m) for m, v in means.items() if m in baselines)
        other = sorted((v, m) for m, v in means.items() if m not in baselines)
        if not base or not other:
            continue
        b, o = base[0][1], other[0][1]
        rank = 1 + sum(v < means[b] for v in means.values())
        reductions = [
            1 - r[(dataset, b, metric, x)] / r[(dataset, o, metric, x)]
            for r in runs.values()
            if r[(dataset, o, metric, x)] > 0
        ]
        out.append((dataset, x, b, o, rank, len(means), reductions))
    return out


def evaluate(root: Path, metric: str = METRIC) -> list[str]:
    """Markdown lines: one row per cell of ``root/streamdp-baselines/runs.csv`` and a count of
    the verdicts; nothing when the experiment has not run under ``root``."""
    path = root / EXPERIMENT / "runs.csv"
    if not path.exists():
        return []
    lines = [
        "| data | setting | better baseline | best other | baseline's rank (of) "
        "| 1 - baseline / other, mean [95% interval] | seeds | verdict |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    counts = {HOLDS: 0, FAILS: 0, INCONCLUSIVE: 0}
    for dataset, x, b, o, rank, of, reductions in cells(load(path), metric):
        iv = interval(reductions)
        decided = verdict(iv)
        counts[decided] += 1
        ours = f"{iv.mean * 100:.1f}%"
        if iv.n > 1:
            ours += f" [{iv.low * 100:.1f}, {iv.high * 100:.1f}]"
        lines.append(
            f"| {DS.get(dataset, dataset)} | {x} | {b} | {o} | {rank} ({of}) | {ours} "
            f"| {iv.n} | {decided} |"
        )
    lines.append("")
    lines.append(
        f"The better baseline has the lower {metric.upper()} (percentages rounded to 1 decimal): "
        f"holds in {counts[HOLDS]}, does not hold in {counts[FAILS]}, inconclusive in "
        f"{counts[INCONCLUSIVE]} of {sum(counts.values())} cells."
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0]) if args else Path("docs/reproduction")
    print("\n".join(evaluate(root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
