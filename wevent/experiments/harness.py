"""Running the papers' sweeps: every run through `wevent.experiments.running.run_mechanism` (the guard in the
loop), metrics per run, mean, standard deviation and 95% interval over repeats
(`wevent.experiments.stats`), and the outputs: ``results.csv`` (long form), ``runs.csv`` (one line
per run: its seed, statuses, ledger size and every metric of the run), a Markdown table per metric
in the papers' layout (datasets x mechanisms by the swept parameter, mean +- half the interval) and
PNG plots with the intervals as error bars.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError, format_exact
from wevent.accounting.population import Population
from wevent.experiments import metrics
from wevent.experiments.stats import Interval, interval
from wevent.experiments.timing import SlotClock, SlotTiming
from wevent.mechanisms.allocators import ORACLE_CHOICE
from wevent.mechanisms.allocators.registry import takes_dynamic
from wevent.mechanisms.streams import Stream, SyntheticStream

__all__ = [
    "RESULT_COLUMNS",
    "RUN_COLUMNS",
    "GuardRefused",
    "Point",
    "Row",
    "RunResult",
    "Size",
    "Sweep",
    "SweepRun",
    "execute",
    "execute_many",
    "plots_wanted",
    "run_sweep",
    "without_plots",
    "write_markdown",
    "write_plots",
    "write_results",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

RESULT_COLUMNS = ("experiment", "dataset", "mechanism", "epsilon", "w", "metric", "value", "std")
# After the eight of the long form: the swept parameter that has no column of its own (001 Section
# 6.5's user ratio; empty otherwise), the number of runs behind the mean, and the 95% interval of
# the mean (NaN with one run; ``std`` too).
EXTRA_COLUMNS = ("setting", "runs", "ci_low", "ci_high")
# ``runs.csv``: what describes a run, then one column per metric of the sweep (its value in the run)
RUN_COLUMNS = (
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
)


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
    (e.g. 'o=0.3'); ``x`` is what the tables and plots put on their axis.

    Optional, for sweeps of the data itself (002 Section 7.3): ``users_share`` runs the point
    with that share of the size's users (rounded down; its setting then reads ``N=<users>``),
    ``stream`` holds keyword options of `SyntheticStream` (e.g. ``(("lns_sqrt_q", 0.001),)``)
    and ``datasets`` names the only datasets the point runs on (the others get no cell)."""

    epsilon: Fraction
    w: int
    setting: str = ""
    ratio: Fraction | None = None
    users_share: Fraction | None = None
    stream: tuple[tuple[str, float], ...] = ()
    datasets: tuple[str, ...] | None = None

    def users(self, size_users: int) -> int:
        """The number of users of this point's runs in a sweep of ``size_users`` users."""
        if self.users_share is None:
            return size_users
        return math.floor(self.users_share * size_users)

    def at(self, size_users: int) -> Point:
        """This point with its setting naming its number of users (unchanged without a share)."""
        if self.users_share is None:
            return self
        return replace(self, setting=f"N={self.users(size_users)}")

    def runs_on(self, dataset: str) -> bool:
        return self.datasets is None or dataset in self.datasets


@dataclass(frozen=True)
class RunResult:
    """One run: released and true counts per slot (T, d), the number of users, per-user reports
    (the ledger's charges expanded to users), ledger rows and slot statuses; ``timing`` for a
    timed run (`wevent.experiments.timing`)."""

    release: FloatArray
    truth: IntArray
    users: int
    reports: int
    charges: int
    statuses: tuple[str, ...]
    timing: SlotTiming | None = None

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


def _m_mean_ae(r: RunResult) -> float:
    return metrics.mean_abs_error(r.release, r.truth)


def _m_ajsd(r: RunResult) -> float:
    return metrics.ajsd(*r.freq())


def _m_cfpu(r: RunResult) -> float:
    return metrics.cfpu(r.reports, r.users, r.slots)


def _m_auc(r: RunResult) -> float:
    rel, tru = r.freq()
    return metrics.event_roc(metrics.event_statistic(rel), metrics.event_statistic(tru)).auc


def _timing(r: RunResult) -> SlotTiming:
    if r.timing is None:
        raise BudgetError("a running-time metric needs a timed run (a Sweep with timed=True)")
    return r.timing


def _m_time(r: RunResult) -> float:
    return _timing(r).with_guard_us


def _m_time_noguard(r: RunResult) -> float:
    return _timing(r).without_guard_us


def _m_guard(r: RunResult) -> float:
    return _timing(r).guard_us


def _m_cpu(r: RunResult) -> float:
    return _timing(r).cpu_us


def _count(status: str) -> Callable[[RunResult], float]:
    def count(r: RunResult) -> float:
        return float(r.statuses.count(status))

    return count


# The names are also the page's table markers (lower case, digits and hyphens). The four
# times are `wevent.experiments.timing.WALL_CLOCK`; ``charges`` counts the run's ledger rows (every
# one a call into the guard's check), the other counts the slots of each status.
METRICS: dict[str, Callable[[RunResult], float]] = {
    "mre": _m_mre,
    "amse": _m_amse,
    "amre": _m_amre,
    "ajsd": _m_ajsd,
    "mean-ae": _m_mean_ae,
    "cfpu": _m_cfpu,
    "auc": _m_auc,
    "time-us": _m_time,
    "time-us-noguard": _m_time_noguard,
    "guard-us": _m_guard,
    "cpu-us": _m_cpu,
    "charges": lambda r: float(r.charges),
    "publications": _count("published"),
    "skips": _count("skipped"),
    "nullifications": _count("nullified"),
}

PopulationFactory = Callable[[Point, str, int, int], Population]


@dataclass(frozen=True)
class Sweep:
    """A paper's experiment: mechanisms x datasets x points, ``repeats`` times each.

    ``population(point, mechanism, users, seed)`` builds the requirements a run serves;
    ``axis`` is 'epsilon', 'w' or 'setting' (what varies). ``timed``: every run is timed
    (`execute`'s ``timed``), for the running-time metrics."""

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
    timed: bool = False

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
    runs: int = 1
    ci_low: float = math.nan
    ci_high: float = math.nan

    @property
    def half_width(self) -> float:
        """Half the 95% interval (NaN with one run)."""
        return (self.ci_high - self.ci_low) / 2

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
            str(self.runs),
            repr(self.ci_low),
            repr(self.ci_high),
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
    stream_options: Mapping[str, float] | None = None,
    timed: bool = False,
) -> RunResult:
    """One run of ``mechanism`` on the synthetic ``dataset`` (001 Section 6.1 / 002 Section
    7.1.1 / 000 Section VI-A) with the guard in the loop; a refusal raises `GuardRefused`.
    ``stream_options``: keyword options of `SyntheticStream` (``sin_period``, ``lns_sqrt_q``).

    ``timed``: the slots are timed (`wevent.experiments.timing`; the result's ``timing``). The
    run then starts with an empty SM cache (`wevent.mechanisms.central.clear_sm_cache`) and a
    collected heap, so it pays its own OBS computations and no garbage of earlier runs; neither
    changes a release."""
    stream = _stream(population, dataset, slots, seed, domain, stream_options)
    return _execute_on(mechanism, population, stream, dataset, slots, seed, oracle, timed)


def _stream(
    population: Population,
    dataset: str,
    slots: int,
    seed: int,
    domain: int,
    stream_options: Mapping[str, float] | None,
) -> SyntheticStream:
    sizes = [c.count for c in population.classes]
    return SyntheticStream(dataset, slots, sizes, seed, domain, **dict(stream_options or {}))


def _execute_on(
    mechanism: str,
    population: Population,
    stream: Stream,
    dataset: str,
    slots: int,
    seed: int,
    oracle: str | None,
    timed: bool,
) -> RunResult:
    """`execute` on a stream already built (a synthetic stream draws its data from the run's
    generator, so one stream object serves any number of runs)."""
    import gc

    from wevent.experiments.running import run_mechanism
    from wevent.mechanisms.central import clear_sm_cache

    clock = None
    if timed:
        clock = SlotClock()
        clear_sm_cache()
        gc.collect()
    summary = run_mechanism(
        mechanism, population, stream, slots=slots, seed=seed, oracle=oracle, clock=clock
    )
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
        None if clock is None else clock.result(),
    )


@dataclass(frozen=True)
class SweepRun:
    """One run of `execute_many`: the setting (the key of its population), the mechanism, the
    seed and the run's result."""

    setting: str
    mechanism: str
    seed: int
    result: RunResult


def execute_many(
    mechanisms: Sequence[str],
    populations: Population | Mapping[str, Population],
    dataset: str,
    slots: int,
    seeds: Iterable[int],
    *,
    domain: int = 2,
    oracle: str | None = None,
    stream_options: Mapping[str, float] | None = None,
    timed: bool = False,
) -> Iterator[SweepRun]:
    """Many runs in this process: every mechanism on every seed of every setting, each run
    exactly `execute`'s with the same arguments (same releases, ledger and statuses).

    ``populations`` is one population (its setting is ``""``) or settings by name. Nothing that
    does not depend on the seed is built again: the interpreter and its imports, each setting's
    population, and the OBS computations the SM cache keeps across runs (cleared before each
    run when ``timed``, as `execute` does); each (setting, seed) builds its synthetic stream
    once for all mechanisms. ``oracle`` goes to the mechanisms that take one (the local
    non-personalized allocators) and is left out for the others. Runs come out setting by
    setting, seed by seed, mechanism by mechanism, as they finish; a refusal raises
    `GuardRefused`."""
    settings = {"": populations} if isinstance(populations, Population) else dict(populations)
    seed_list = list(seeds)
    for setting, population in settings.items():
        for seed in seed_list:
            stream = _stream(population, dataset, slots, seed, domain, stream_options)
            for mech in mechanisms:
                chosen = oracle if mech in ORACLE_CHOICE else None
                result = _execute_on(mech, population, stream, dataset, slots, seed, chosen, timed)
                yield SweepRun(setting, mech, seed, result)


@dataclass
class _Acc:
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)


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
    points = tuple(
        p.at(chosen.users)
        for p in (
            sweep.points
            if chosen.points is None
            else tuple(sweep.points[i] for i in chosen.points if i < len(sweep.points))
        )
    )
    datasets = sweep.datasets if chosen.datasets is None else chosen.datasets
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = sum(1 for p in points for d in datasets if p.runs_on(d))
    total = cells * len(sweep.mechanisms) * repeats
    tick, close = _progress(total, sweep.experiment)
    acc: dict[tuple[str, str, int], _Acc] = {}
    runs: list[list[str]] = []
    try:
        for pi, point in enumerate(points):
            users = point.users(chosen.users)
            for r in range(repeats):
                run_seed = seed + r
                pops: dict[str, Population] = {}
                for dataset in datasets:
                    if not point.runs_on(dataset):
                        continue
                    for mech in sweep.mechanisms:
                        kind = "dynamic" if takes_dynamic(mech) else "static"
                        if kind not in pops:
                            pops[kind] = sweep.population(point, mech, users, run_seed)
                        res = execute(
                            mech,
                            pops[kind],
                            dataset,
                            chosen.slots,
                            run_seed,
                            domain=sweep.domain,
                            oracle=sweep.oracle if mech in ORACLE_CHOICE else None,
                            stream_options=dict(point.stream),
                            timed=sweep.timed,
                        )
                        cell = acc.setdefault((dataset, mech, pi), _Acc())
                        measured = [METRICS[name](res) for name in sweep.metrics]
                        for name, value in zip(sweep.metrics, measured, strict=True):
                            cell.add(name, value)
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
                                str(users),
                                str(res.slots),
                                str(res.statuses.count("published")),
                                str(res.statuses.count("skipped")),
                                str(res.statuses.count("nullified")),
                                str(res.charges),
                                str(res.reports),
                                "accepted",
                                *(repr(v) for v in measured),
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
                    if (dataset, mech, pi) not in acc:  # the point does not run on the dataset
                        continue
                    iv: Interval = interval(acc[(dataset, mech, pi)].values[name])
                    rows.append(
                        Row(
                            sweep.experiment,
                            dataset,
                            mech,
                            point.epsilon,
                            point.w,
                            name,
                            iv.mean,
                            iv.std,
                            point.setting,
                            iv.n,
                            iv.low,
                            iv.high,
                        )
                    )
    files = [write_results(rows, out_dir / "results.csv")]
    files.append(_write_runs(runs, out_dir / "runs.csv", sweep.metrics))
    shared = any(p.users_share is not None for p in points)
    header = (
        f"{sweep.title}\n\n"
        + (f"N users per column (up to {chosen.users})" if shared else f"{chosen.users} users")
        + f", {chosen.slots} slots, {repeats} repeat(s), "
        f"seeds {seed}..{seed + repeats - 1}, d = {sweep.domain}; every run's ledger was "
        "accepted charge by charge by the guard. "
        + (
            "Cells: mean +- half the 95% interval over the repeats (Student's t)."
            if repeats > 1
            else "Cells: one run each (no interval)."
        )
    )
    if sweep.note:
        header += f"\n\n{sweep.note}"
    xs = [sweep.x(p) for p in points]
    files.append(write_markdown(rows, out_dir / "table.md", sweep.axis, xs, header))
    files.extend(write_plots(rows, out_dir, sweep.axis, xs, log=sweep.log_plot))
    return rows, files


def write_results(rows: Iterable[Row], path: Path) -> Path:
    """``results.csv``: the long form (`RESULT_COLUMNS`) plus `EXTRA_COLUMNS`."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow([*RESULT_COLUMNS, *EXTRA_COLUMNS])
        for row in rows:
            out.writerow(row.cells())
    return path


def _write_runs(runs: Sequence[Sequence[str]], path: Path, metric_names: Sequence[str]) -> Path:
    """``runs.csv``: one line per run, its statuses and ledger size, then the run's value of
    every metric of the sweep (the paired per-seed evidence the claims are decided on)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow([*RUN_COLUMNS, *metric_names])
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


def _cell(row: Row, repeats: int) -> str:
    """Mean +- half the interval; a cell made of fewer runs than the table's repeats (a metric
    undefined in some runs) says how many."""
    text = (
        fmt(row.value)
        if math.isnan(row.half_width)
        else f"{fmt(row.value)} ± {fmt(row.half_width)}"
    )
    if row.runs < repeats:
        text += f" ({row.runs} of {repeats} runs)"
    return text


def write_markdown(
    rows: Sequence[Row], path: Path, axis: str, xs: Sequence[str], header: str
) -> Path:
    """One table per metric: a line per dataset and mechanism, a column per swept value (the
    layout of 001 Tables 5-6); a cell is the mean, +- half its 95% interval when there is one."""
    label = {"epsilon": "ε", "w": "w", "setting": ""}[axis]
    repeats = max((r.runs for r in rows), default=1)
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
        table: dict[tuple[str, str], dict[str, Row]] = {}
        for r in rows:
            if r.metric == name:
                table.setdefault((r.dataset, r.mechanism), {})[_x_of(r, axis)] = r
        last = ""
        for (dataset, mech), vals in table.items():
            shown = dataset if dataset != last else ""
            last = dataset
            cells = " | ".join(_cell(vals[x], repeats) if x in vals else "" for x in xs)
            lines.append(f"| {shown} | {mech} | {cells} |")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def sweep_groups(axis: str, xs: Sequence[str]) -> list[tuple[str, list[tuple[int, str]]]]:
    """The separate sweeps of one axis, each with its (index into ``xs``, tick label) points.

    An ``epsilon`` or ``w`` axis is one sweep. A ``setting`` axis whose values name their sweep
    before the first ``=`` ("eps:o=0.1" and "w:o=0.1" of 001 Section 6.5, "eps=0.5" and "w=40" of
    000's ablation) holds one sweep per name, each plotted on its own (a line never joins two);
    settings that all share one name stay one sweep with their full labels, unless each is a
    single ``name=value`` ("N=25000" of 002 Figure 6): then the name labels the axis."""
    if axis != "setting":
        return [(axis, list(enumerate(xs)))]
    groups: dict[str, list[tuple[int, str]]] = {}
    for i, x in enumerate(xs):
        name, sep, rest = x.partition("=")
        groups.setdefault(name if sep else "", []).append((i, rest if sep else x))
    if len(groups) == 1:
        ((name, points),) = groups.items()
        if name and not any("=" in label or "," in label for _, label in points):
            return [(name, points)]
        return [("setting", list(enumerate(xs)))]
    return list(groups.items())


_AXIS_LABEL = {"epsilon": "ε", "w": "w", "setting": "setting", "eps": "ε"}


_PLOTS: ContextVar[bool] = ContextVar("wevent_experiment_plots", default=True)


@contextmanager
def without_plots() -> Iterator[None]:
    """Experiments run inside the block draw no plots (`provenance.fingerprint` reads only their
    ``results.csv``; drawing was half of a tiny-size run's time)."""
    token = _PLOTS.set(False)
    try:
        yield
    finally:
        _PLOTS.reset(token)


def plots_wanted() -> bool:
    """False inside `without_plots`."""
    return _PLOTS.get()


def write_plots(
    rows: Sequence[Row], out_dir: Path, axis: str, xs: Sequence[str], *, log: bool = True
) -> list[Path]:
    """One PNG per metric: a panel per dataset (and per sweep of a ``setting`` axis, one row
    each), a line per mechanism over the swept values with the 95% intervals as error bars, and
    the legend below the panels, off the data. A panel whose sweep did not run on its dataset
    (a `Point` with ``datasets``) is left blank. None inside `without_plots`."""
    if not plots_wanted():
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sweep_groups(axis, xs)
    files = []
    for name in dict.fromkeys(r.metric for r in rows):
        sel = [r for r in rows if r.metric == name]
        datasets = list(dict.fromkeys(r.dataset for r in sel))
        mechs = list(dict.fromkeys(r.mechanism for r in sel))
        width = 4.2 * len(datasets)
        ncol = max(1, min(len(mechs), int(width / 1.3)))  # about 1.3 inches per legend entry
        legend_height = 0.28 + 0.22 * math.ceil(len(mechs) / ncol)
        height = 3.2 * len(groups) + legend_height
        fig, axes = plt.subplots(len(groups), len(datasets), figsize=(width, height), squeeze=False)
        # a log axis clips an error bar that reaches zero or below at the bottom of the panel
        positive = all(r.value > 0 for r in sel if not math.isnan(r.value))
        legend_ax = None
        for gi, (group, points) in enumerate(groups):
            labelled = False
            for di, dataset in enumerate(datasets):
                ax = axes[gi][di]
                shown = {xs[i] for i, _ in points}
                if not any(r.dataset == dataset and _x_of(r, axis) in shown for r in sel):
                    ax.set_axis_off()
                    continue
                legend_ax = legend_ax or ax
                if not labelled:  # the row's first panel drawn
                    ax.set_ylabel(name.upper())
                    labelled = True
                for mi, mech in enumerate(mechs):
                    got = {
                        _x_of(r, axis): r
                        for r in sel
                        if r.dataset == dataset and r.mechanism == mech
                    }
                    picked = [got.get(xs[i]) for i, _ in points]
                    ys = [math.nan if r is None else r.value for r in picked]
                    err = [
                        0.0 if r is None or math.isnan(r.half_width) else r.half_width
                        for r in picked
                    ]
                    dodge = (mi - (len(mechs) - 1) / 2) * 0.025  # bars side by side, not on top
                    ax.errorbar(
                        [i + dodge for i in range(len(points))],
                        ys,
                        yerr=err,
                        marker="osD^v"[mi // 10 % 5],  # past ten lines the colours repeat
                        markersize=3.5,
                        capsize=2.5,
                        linewidth=1.2,
                        linestyle="-" if mi < 10 else "--",
                        color=f"C{mi % 10}",
                        label=mech,
                    )
                ax.set_xticks(range(len(points)), [label for _, label in points])
                ax.set_xlabel(_AXIS_LABEL.get(group, group))
                ax.set_title(dataset if len(groups) == 1 else f"{dataset}, {group}")
                if log and positive:
                    ax.set_yscale("log")
        handles, labels = (legend_ax or axes[0][0]).get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, legend_height / height, 1, 1))
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    return files
