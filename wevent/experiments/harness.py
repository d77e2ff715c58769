"""Running the papers' sweeps: every run through `wevent.experiments.running.run_mechanism` (the guard in the
loop), metrics per run, mean and standard deviation over repeats, and the outputs: ``results.csv``
(long form), ``runs.csv`` (one line per run: its seed, statuses and ledger size), a Markdown table
per metric in the papers' layout (datasets x mechanisms by the swept parameter) and PNG plots.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError, format_exact
from wevent.accounting.population import Population
from wevent.experiments import metrics
from wevent.mechanisms.allocators import ORACLE_CHOICE
from wevent.mechanisms.allocators.registry import takes_dynamic
from wevent.mechanisms.streams import Stream, SyntheticStream

__all__ = [
    "RESULT_COLUMNS",
    "GuardRefused",
    "Point",
    "Row",
    "RunResult",
    "Size",
    "Sweep",
    "execute",
    "run_sweep",
    "write_markdown",
    "write_plots",
    "write_results",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

RESULT_COLUMNS = ("experiment", "dataset", "mechanism", "epsilon", "w", "metric", "value", "std")
# One more column after the eight of the long form: the swept parameter that has no column of its own
# (001 Section 6.5's user ratio), empty otherwise.
EXTRA_COLUMNS = ("setting",)


class GuardRefused(Exception):
    """A run of the reproduction was stopped by the guard (a bug: the allocators are sound)."""


@dataclass(frozen=True)
class Size:
    """How big each run is: users, slots, which sweep points (indices; None = all) and which
    datasets (None = all of the sweep's)."""

    users: int
    slots: int
    points: tuple[int, ...] | None = None
    datasets: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Point:
    """One setting of a sweep: the non-personalized (epsilon, w) and an optional extra setting
    (e.g. 'o=0.3'); ``x`` is what the tables and plots put on their axis."""

    epsilon: Fraction
    w: int
    setting: str = ""
    ratio: Fraction | None = None


@dataclass(frozen=True)
class RunResult:
    """One run: released and true counts per slot (T, d), the number of users, per-user reports
    (the ledger's charges expanded to users), ledger rows and slot statuses."""

    release: FloatArray
    truth: IntArray
    users: int
    reports: int
    charges: int
    statuses: tuple[str, ...]

    @property
    def slots(self) -> int:
        return int(self.truth.shape[0])

    def freq(self) -> tuple[FloatArray, FloatArray]:
        n = float(self.users)
        return self.release / n, self.truth.astype(np.float64) / n


def _m_amse(r: RunResult) -> float:
    return metrics.amse(*r.freq())


def _m_amre(r: RunResult) -> float:
    return metrics.amre(r.release, r.truth)


def _m_mre(r: RunResult) -> float:
    return metrics.mre(*r.freq())


def _m_ajsd(r: RunResult) -> float:
    return metrics.ajsd(*r.freq())


def _m_cfpu(r: RunResult) -> float:
    return metrics.cfpu(r.reports, r.users, r.slots)


def _m_auc(r: RunResult) -> float:
    rel, tru = r.freq()
    return metrics.event_roc(metrics.event_statistic(rel), metrics.event_statistic(tru)).auc


METRICS: dict[str, Callable[[RunResult], float]] = {
    "mre": _m_mre,
    "amse": _m_amse,
    "amre": _m_amre,
    "ajsd": _m_ajsd,
    "cfpu": _m_cfpu,
    "auc": _m_auc,
}

PopulationFactory = Callable[[Point, str, int, int], Population]


@dataclass(frozen=True)
class Sweep:
    """A paper's experiment: mechanisms x datasets x points, ``repeats`` times each.

    ``population(point, mechanism, users, seed)`` builds the requirements a run serves;
    ``axis`` is 'epsilon', 'w' or 'setting' (what varies)."""

    experiment: str
    title: str
    mechanisms: tuple[str, ...]
    datasets: tuple[str, ...]
    axis: str
    points: tuple[Point, ...]
    population: PopulationFactory
    metrics: tuple[str, ...]
    full: Size
    quick: Size
    domain: int = 2
    oracle: str | None = None
    log_plot: bool = True
    note: str = ""

    def x(self, p: Point) -> str:
        if self.axis == "epsilon":
            return format_exact(p.epsilon)
        if self.axis == "w":
            return str(p.w)
        return p.setting


@dataclass(frozen=True)
class Row:
    experiment: str
    dataset: str
    mechanism: str
    epsilon: Fraction
    w: int
    metric: str
    value: float
    std: float
    setting: str = ""

    def cells(self) -> list[str]:
        return [
            self.experiment,
            self.dataset,
            self.mechanism,
            format_exact(self.epsilon),
            str(self.w),
            self.metric,
            repr(self.value),
            repr(self.std),
            self.setting,
        ]


def execute(
    mechanism: str,
    population: Population,
    dataset: str,
    slots: int,
    seed: int,
    *,
    domain: int = 2,
    oracle: str | None = None,
) -> RunResult:
    """One run of ``mechanism`` on the synthetic ``dataset`` (001 Section 6.1 / 002 Section
    7.1.1 / 000 Section VI-A) with the guard in the loop; a refusal raises `GuardRefused`."""
    from wevent.experiments.running import run_mechanism

    sizes = [c.count for c in population.classes]
    stream: Stream = SyntheticStream(dataset, slots, sizes, seed, domain)
    summary = run_mechanism(mechanism, population, stream, slots=slots, seed=seed, oracle=oracle)
    if not summary.ok:
        raise GuardRefused(f"{mechanism} on {dataset} (seed {seed}) stopped: {summary.refusal}")
    release = np.stack([r.release for r in summary.records]).astype(np.float64)
    truth = np.stack([r.truth for r in summary.records]).astype(np.int64)
    return RunResult(
        release,
        truth,
        len(population),
        summary.reports,
        summary.charges,
        tuple(r.status for r in summary.records),
    )


@dataclass
class _Acc:
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) == 0 or np.isnan(arr).all():
        return math.nan, math.nan
    mean = float(np.nanmean(arr))
    std = float(np.nanstd(arr, ddof=1)) if np.count_nonzero(~np.isnan(arr)) > 1 else 0.0
    return mean, std


def _progress(total: int, desc: str) -> tuple[Callable[[], None], Callable[[], None]]:
    import sys

    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="run", leave=False, file=sys.stderr, disable=None)

    def tick() -> None:
        bar.update(1)

    return tick, bar.close


def run_sweep(
    sweep: Sweep,
    out_dir: Path,
    repeats: int,
    quick: bool,
    seed: int,
    *,
    size: Size | None = None,
    keep: Callable[[str, str, Point, int, RunResult], None] | None = None,
) -> tuple[list[Row], list[Path]]:
    """Run the sweep and write its outputs into ``out_dir``; returns the rows and the files.

    Run r (0-based) of every setting uses seed ``seed + r`` for the population, the stream and
    the noise, so all mechanisms of a setting see the same data (000 Section VI-B: seeds 0..9).
    ``keep`` is called with every run's result (for experiment-specific outputs)."""
    if repeats < 1:
        raise BudgetError(f"--repeats must be at least 1, got {repeats}")
    chosen = size or (sweep.quick if quick else sweep.full)
    points = (
        sweep.points
        if chosen.points is None
        else tuple(sweep.points[i] for i in chosen.points if i < len(sweep.points))
    )
    datasets = sweep.datasets if chosen.datasets is None else chosen.datasets
    out_dir.mkdir(parents=True, exist_ok=True)
    total = len(points) * len(datasets) * len(sweep.mechanisms) * repeats
    tick, close = _progress(total, sweep.experiment)
    acc: dict[tuple[str, str, int], _Acc] = {}
    runs: list[list[str]] = []
    try:
        for pi, point in enumerate(points):
            for r in range(repeats):
                run_seed = seed + r
                pops: dict[str, Population] = {}
                for dataset in datasets:
                    for mech in sweep.mechanisms:
                        kind = "dynamic" if takes_dynamic(mech) else "static"
                        if kind not in pops:
                            pops[kind] = sweep.population(point, mech, chosen.users, run_seed)
                        res = execute(
                            mech,
                            pops[kind],
                            dataset,
                            chosen.slots,
                            run_seed,
                            domain=sweep.domain,
                            oracle=sweep.oracle if mech in ORACLE_CHOICE else None,
                        )
                        cell = acc.setdefault((dataset, mech, pi), _Acc())
                        for name in sweep.metrics:
                            cell.add(name, METRICS[name](res))
                        if keep is not None:
                            keep(dataset, mech, point, r, res)
                        runs.append(
                            [
                                sweep.experiment,
                                dataset,
                                mech,
                                format_exact(point.epsilon),
                                str(point.w),
                                point.setting,
                                str(r),
                                str(run_seed),
                                str(chosen.users),
                                str(res.slots),
                                str(res.statuses.count("published")),
                                str(res.statuses.count("skipped")),
                                str(res.statuses.count("nullified")),
                                str(res.charges),
                                str(res.reports),
                                "accepted",
                            ]
                        )
                        tick()
    finally:
        close()
    rows: list[Row] = []
    for name in sweep.metrics:
        for dataset in datasets:
            for mech in sweep.mechanisms:
                for pi, point in enumerate(points):
                    mean, std = _mean_std(acc[(dataset, mech, pi)].values[name])
                    rows.append(
                        Row(
                            sweep.experiment,
                            dataset,
                            mech,
                            point.epsilon,
                            point.w,
                            name,
                            mean,
                            std,
                            point.setting,
                        )
                    )
    files = [write_results(rows, out_dir / "results.csv")]
    files.append(_write_runs(runs, out_dir / "runs.csv"))
    header = (
        f"{sweep.title}\n\n{chosen.users} users, {chosen.slots} slots, {repeats} repeat(s), "
        f"seeds {seed}..{seed + repeats - 1}, d = {sweep.domain}; every run's ledger was "
        "accepted charge by charge by the guard."
    )
    if sweep.note:
        header += f"\n\n{sweep.note}"
    xs = [sweep.x(p) for p in points]
    files.append(write_markdown(rows, out_dir / "table.md", sweep.axis, xs, header))
    files.extend(write_plots(rows, out_dir, sweep.axis, xs, log=sweep.log_plot))
    return rows, files


def write_results(rows: Iterable[Row], path: Path) -> Path:
    """``results.csv``: the long form (eight columns) plus the ``setting`` column."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow([*RESULT_COLUMNS, *EXTRA_COLUMNS])
        for row in rows:
            out.writerow(row.cells())
    return path


def _write_runs(runs: Sequence[Sequence[str]], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(
            [
                "experiment",
                "dataset",
                "mechanism",
                "epsilon",
                "w",
                "setting",
                "repeat",
                "seed",
                "users",
                "slots",
                "published",
                "skipped",
                "nullified",
                "ledger_rows",
                "per_user_reports",
                "guard",
            ]
        )
        out.writerows(runs)
    return path


def fmt(value: float) -> str:
    """A table cell: 4 significant digits, thousands separated (as the papers print them)."""
    if math.isnan(value):
        return "n/a"
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        return f"{value:.3e}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _x_of(row: Row, axis: str) -> str:
    if axis == "epsilon":
        return format_exact(row.epsilon)
    if axis == "w":
        return str(row.w)
    return row.setting


def write_markdown(
    rows: Sequence[Row], path: Path, axis: str, xs: Sequence[str], header: str
) -> Path:
    """One table per metric: a line per dataset and mechanism, a column per swept value (the
    layout of 001 Tables 5-6)."""
    label = {"epsilon": "ε", "w": "w", "setting": ""}[axis]
    lines = [header, ""]
    for name in dict.fromkeys(r.metric for r in rows):
        lines.append(f"### {name.upper()}")
        lines.append("")
        lines.append(
            "| dataset | mechanism | "
            + " | ".join(f"{label}={x}" if label else x for x in xs)
            + " |"
        )
        lines.append("|---|---|" + "---:|" * len(xs))
        table: dict[tuple[str, str], dict[str, float]] = {}
        for r in rows:
            if r.metric == name:
                table.setdefault((r.dataset, r.mechanism), {})[_x_of(r, axis)] = r.value
        last = ""
        for (dataset, mech), vals in table.items():
            shown = dataset if dataset != last else ""
            last = dataset
            cells = " | ".join(fmt(vals[x]) if x in vals else "" for x in xs)
            lines.append(f"| {shown} | {mech} | {cells} |")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_plots(
    rows: Sequence[Row], out_dir: Path, axis: str, xs: Sequence[str], *, log: bool = True
) -> list[Path]:
    """One PNG per metric: a panel per dataset, a line per mechanism over the swept values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for name in dict.fromkeys(r.metric for r in rows):
        sel = [r for r in rows if r.metric == name]
        datasets = list(dict.fromkeys(r.dataset for r in sel))
        fig, axes = plt.subplots(
            1, len(datasets), figsize=(4.2 * len(datasets), 3.6), squeeze=False
        )
        for ax, dataset in zip(axes[0], datasets, strict=True):
            for mech in dict.fromkeys(r.mechanism for r in sel if r.dataset == dataset):
                vals = {
                    _x_of(r, axis): r.value
                    for r in sel
                    if r.dataset == dataset and r.mechanism == mech
                }
                ys = [vals.get(x, math.nan) for x in xs]
                ax.plot(range(len(xs)), ys, marker="o", label=mech)
            ax.set_xticks(range(len(xs)), list(xs), rotation=30 if axis == "setting" else 0)
            ax.set_xlabel({"epsilon": "ε", "w": "w", "setting": "setting"}[axis])
            ax.set_title(dataset)
            if log and all(r.value > 0 for r in sel if not math.isnan(r.value)):
                ax.set_yscale("log")
        axes[0][0].set_ylabel(name.upper())
        axes[0][-1].legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    return files
