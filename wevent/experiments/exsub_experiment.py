"""`wevent reproduce exsub`: 004's online mean and range queries on synthetic sparse streams.

Setting (004 Section VI): n users, each with a 0/1 stream of d dimensions over T slots and exactly
s changes at uniformly drawn (slot, dimension) cells (004 Section VI-A's synthetic data). Every
mechanism runs inside the same hierarchical protocol (fan-out r = 2, 004 Section VI-B's default):
each user picks one level with the portions W, privatizes its padded level-h residue vector with
the ternary mechanism under its whole budget eps, and the server averages per level and
reconstructs with Algorithm 2. Mechanisms: ``exsub`` (uniform W, 004 Section IV (4) b),
``exsub-calibrated`` (004 Section VI-D's range weights), ``exsub-range`` (W proportional to r^h,
004 Section IV (4) c), ``exsub-sqrt`` (square roots of the calibrated factors, our Lagrange
minimizer, see `wevent.mechanisms.residues`), ``exsub-opt-mean`` / ``exsub-opt-range`` (portions
minimizing the exact variance of the mean / range answers,
`wevent.mechanisms.exsub_stream.variance_optimal_weights`; our derivation) and the baselines of
`wevent.mechanisms.exsub_baselines` (uniform W).

Metrics, per dimension: ``mean_mse`` = mean over (t, j) of (x_hat_t - x_bar_t)^2; ``range_mse`` =
mean over every range [t1, t2] and j of the squared error of the range sum; ``mean_tve`` = 004's
TVE, sum over t of the L1 error; ``range_tve`` = the same summed over every range query;
``mean_mae`` / ``range_mae`` = 004's MAE (004 Section VI-A), the largest absolute error over the
slots (ranges) and dimensions of one run, averaged over the repeats like every metric. Every
repeat draws one data set that all mechanisms share (paired comparison): a reduction of ExSub
against a baseline is the mean over repeats of ``1 - exsub / baseline`` with its 95% interval
(`wevent.experiments.stats`).
"""

from __future__ import annotations

import csv
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from wevent.experiments import metrics
from wevent.experiments.harness import plots_wanted
from wevent.experiments.stats import Interval, interval
from wevent.mechanisms.exsub_baselines import TERNARY
from wevent.mechanisms.exsub_stream import sparse_streams, variance_optimal_weights
from wevent.mechanisms.residues import level_count, level_weights, levels, reconstruct

__all__ = ["COLUMNS", "Row", "run_exsub_experiment", "simulate_protocol"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# the long form, then the number of repeats and the 95% interval of the mean (NaN with one repeat)
COLUMNS = (
    "experiment",
    "dataset",
    "mechanism",
    "epsilon",
    "w",
    "metric",
    "value",
    "std",
    "runs",
    "ci_low",
    "ci_high",
)
# appended after the first four: in results.csv each cell's MAE rows follow its range_tve row
# (earlier rows keep their order), and in runs.csv the earlier columns keep their places
METRICS = ("mean_mse", "range_mse", "mean_tve", "range_tve", "mean_mae", "range_mae")
MECHANISMS = {  # name -> (ternary mechanism, level weights)
    "exsub": ("exsub", "uniform"),
    "exsub-calibrated": ("exsub", "calibrated"),
    "exsub-range": ("exsub", "range"),
    "exsub-sqrt": ("exsub", "sqrt-calibrated"),
    "exsub-opt-mean": ("exsub", "optimal-mean"),
    "exsub-opt-range": ("exsub", "optimal-range"),
    "sample-grr": ("sample-grr", "uniform"),
    "sample-oue": ("sample-oue", "uniform"),
    "split-rr": ("split-rr", "uniform"),
}
BASELINES = ("sample-grr", "sample-oue", "split-rr")


@dataclass(frozen=True)
class Row:
    experiment: str
    dataset: str
    mechanism: str
    epsilon: str
    w: str
    metric: str
    value: float
    std: float
    runs: int = 1
    ci_low: float = math.nan
    ci_high: float = math.nan
    per_run: tuple[float, ...] = ()  # every repeat's value, in repeat order (not written)

    def as_list(self) -> list[str]:
        return [
            self.experiment,
            self.dataset,
            self.mechanism,
            self.epsilon,
            self.w,
            self.metric,
            repr(self.value),
            repr(self.std),
            str(self.runs),
            repr(self.ci_low),
            repr(self.ci_high),
        ]


@dataclass(frozen=True)
class Dataset:
    name: str
    n: int
    T: int
    d: int
    s: int


def padded_residues(x: IntArray, r: int, h: int, s: int) -> IntArray:
    """Level-h residues (004 Algorithm 1) of (n, T, d) streams, flattened slot-major to
    (n, d T_h), followed by s stub entries of which the first s - k are +1 (004 Section V)."""
    n, T, d = x.shape
    step = r**h
    picked = x[:, step - 1 :: step][:, : level_count(T, r, h)]
    previous = np.concatenate([np.zeros((n, 1, d), np.int64), picked[:, :-1]], axis=1)
    res = (picked - previous).reshape(n, -1)
    k = (res != 0).sum(axis=1)
    if (k > s).any():
        raise ValueError(f"a stream has more than s = {s} changes at level {h}")
    stubs = (np.arange(s)[None, :] < (s - k)[:, None]).astype(np.int64)
    out: IntArray = np.concatenate([res, stubs], axis=1)
    return out


def simulate_protocol(
    x: IntArray,
    mechanism: str,
    eps: Fraction,
    s: int,
    rng: np.random.Generator,
    *,
    r: int = 2,
    weights: str = "uniform",
) -> FloatArray:
    """004 Section IV with a ternary mechanism from `TERNARY`: estimates of the population mean
    ``x_bar_t`` for t = 1..T, shape (T, d)."""
    n, T, d = x.shape
    hs = levels(T, r)
    if weights.startswith("optimal-"):
        exact = variance_optimal_weights(T, r, d, s, eps, weights.removeprefix("optimal-"))
    else:
        exact = level_weights(T, r, weights)
    portions = np.array([float(w) for w in exact])
    level_of = rng.choice(len(hs), size=n, p=portions / portions.sum())
    ternary = TERNARY[mechanism]
    ests = []
    for i, h in enumerate(hs):
        users = np.flatnonzero(level_of == i)
        t_h = level_count(T, r, h)
        if len(users) == 0:
            ests.append(np.zeros((t_h, d)))
            continue
        R = padded_residues(x[users], r, h, s)
        est = ternary(R, s, eps, rng)[:, : d * t_h]
        ests.append(est.mean(axis=0).reshape(t_h, d))
    return reconstruct(ests, r, T)


def range_sums(x: FloatArray) -> FloatArray:
    """Every range sum ``sum_{t=i+1..j} x_t`` of (T, d) answers, one row per range [i+1, j] in
    `np.triu_indices` order: shape (T (T + 1) / 2, d)."""
    T = x.shape[0]
    prefix = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    i, j = np.triu_indices(T + 1, k=1)
    out: FloatArray = prefix[j] - prefix[i]
    return out


def errors(estimate: FloatArray, truth: FloatArray) -> dict[str, float]:
    """The six metrics of the module docstring (computing them draws no randomness)."""
    err = estimate - truth
    T = err.shape[0]
    prefix = np.vstack([np.zeros((1, err.shape[1])), np.cumsum(err, axis=0)])
    i, j = np.triu_indices(T + 1, k=1)  # ranges [i+1, j]
    ranges = prefix[j] - prefix[i]
    return {
        "mean_mse": float(np.mean(err**2)),
        "range_mse": float(np.mean(ranges**2)),
        "mean_tve": float(np.abs(err).sum()),
        "range_tve": float(np.abs(ranges).sum()),
        "mean_mae": metrics.mae(estimate, truth),
        "range_mae": metrics.mae(range_sums(estimate), range_sums(truth)),
    }


def _datasets(quick: bool) -> list[Dataset]:
    if quick:
        return [Dataset("synthetic-n4000-T16-d2-s4", 4000, 16, 2, 4)]
    return [
        # 004 Section VI-C/D's TRAJECTORY shape (32 slots, 12 cells, s = 2 * 4) on synthetic data
        Dataset("synthetic-n20000-T32-d12-s8", 20000, 32, 12, 8),
        # 004 Fig. 9's synthetic setting (n = 100000, d = 8, T = 128); s = 8 (not stated there)
        Dataset("synthetic-n100000-T128-d8-s8", 100000, 128, 8, 8),
    ]


def _epsilons(quick: bool) -> list[Fraction]:
    return [Fraction(1), Fraction(2)] if quick else [Fraction(1, 2), Fraction(1), Fraction(2)]


def run_exsub_experiment(out_dir: Path, repeats: int, quick: bool, seed: int) -> list[Row]:
    """Run every (dataset, eps, mechanism) ``repeats`` times; write results.csv (long form,
    columns `COLUMNS`), runs.csv (every repeat's metrics), table.md and exsub.png into
    ``out_dir``; return the rows."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    for ds in _datasets(quick):
        for eps in _epsilons(quick):
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in MECHANISMS}
            for rep in range(repeats):
                seeds = np.random.SeedSequence([seed, rep, ds.T, ds.d, ds.s, ds.n])
                data_seed, *mech_seeds = seeds.spawn(1 + len(MECHANISMS))
                x = sparse_streams(ds.n, ds.T, ds.d, ds.s, np.random.default_rng(data_seed))
                truth = x.mean(axis=0)
                for (name, (ternary, weights)), ms in zip(
                    MECHANISMS.items(), mech_seeds, strict=True
                ):
                    est = simulate_protocol(
                        x, ternary, eps, ds.s, np.random.default_rng(ms), weights=weights
                    )
                    runs[name].append(errors(est, truth))
            for name, results in runs.items():
                for metric in METRICS:
                    vals = tuple(r[metric] for r in results)
                    iv = interval(vals)
                    rows.append(
                        Row(
                            "exsub",
                            ds.name,
                            name,
                            str(eps),
                            "inf",
                            metric,
                            iv.mean,
                            iv.std,
                            iv.n,
                            iv.low,
                            iv.high,
                            vals,
                        )
                    )
    _write_csv(rows, out_dir / "results.csv")
    _write_runs(rows, out_dir / "runs.csv")
    (out_dir / "table.md").write_text(markdown_table(rows, repeats), encoding="utf-8")
    if plots_wanted():
        _plot(rows, out_dir / "exsub.png")
    return rows


def _write_runs(rows: list[Row], path: Path) -> None:
    """``runs.csv``: one line per (data set, eps, mechanism, repeat) with every metric of that
    run; the repeats of one data set and eps share their data (the paired evidence)."""
    cells: dict[tuple[str, str, str], dict[str, tuple[float, ...]]] = {}
    for r in rows:
        cells.setdefault((r.dataset, r.epsilon, r.mechanism), {})[r.metric] = r.per_run
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["experiment", "dataset", "epsilon", "mechanism", "repeat", *METRICS])
        for (ds, eps, mech), values in cells.items():
            for rep in range(len(values[METRICS[0]])):
                out.writerow(
                    ["exsub", ds, eps, mech, rep, *(repr(values[m][rep]) for m in METRICS)]
                )


def _write_csv(rows: list[Row], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(COLUMNS)
        for row in rows:
            out.writerow(row.as_list())


def _row(rows: list[Row], ds: str, mech: str, eps: str, metric: str) -> Row:
    return next(
        r for r in rows if (r.dataset, r.mechanism, r.epsilon, r.metric) == (ds, mech, eps, metric)
    )


def reduction(exsub: float, baseline: float) -> float:
    """Relative error reduction of ExSub against a baseline: ``1 - exsub / baseline``."""
    return 1 - exsub / baseline


def paired_reduction(mine: Row, base: Row) -> Interval:
    """The mean over repeats of ``1 - mine / base`` (both of one repeat's data set) and its 95%
    interval."""
    return interval([reduction(a, b) for a, b in zip(mine.per_run, base.per_run, strict=True)])


def _pct(iv: Interval) -> str:
    if iv.n < 2:
        return f"{100 * iv.mean:.1f}%"
    return f"{100 * iv.mean:.1f}% [{100 * iv.low:.1f}, {100 * iv.high:.1f}]"


def markdown_table(rows: list[Row], repeats: int) -> str:
    """Per dataset and metric: each mechanism's mean error (+- half its 95% interval), then
    ExSub's paired reduction against each baseline (mean over repeats, [95% interval])."""
    lines = [
        f"# ExSub (004): online mean and range queries ({repeats} repeat(s) per cell)",
        "",
        "Errors: mean +- half the 95% interval over the repeats (Student's t). Reductions: the "
        "mean over repeats of 1 - ExSub / baseline on the repeat's shared data set, [95% interval].",
        "",
    ]
    datasets = list(dict.fromkeys(r.dataset for r in rows))
    epsilons = list(dict.fromkeys(r.epsilon for r in rows))
    for ds in datasets:
        for metric in METRICS:
            lines += [f"## {ds}: {metric}", ""]
            lines.append("| mechanism | " + " | ".join(f"eps = {e}" for e in epsilons) + " |")
            lines.append("|---|" + "---|" * len(epsilons))
            for mech in MECHANISMS:
                cells = []
                for e in epsilons:
                    row = _row(rows, ds, mech, e, metric)
                    half = (row.ci_high - row.ci_low) / 2
                    cells.append(
                        f"{row.value:.4g}" if math.isnan(half) else f"{row.value:.4g} ± {half:.2g}"
                    )
                lines.append(f"| {mech} | " + " | ".join(cells) + " |")
            ours = ["exsub", "exsub-calibrated"] if metric.startswith("range") else ["exsub"]
            for mine, base in itertools.product(ours, BASELINES):
                cells = [
                    _pct(
                        paired_reduction(
                            _row(rows, ds, mine, e, metric), _row(rows, ds, base, e, metric)
                        )
                    )
                    for e in epsilons
                ]
                lines.append(f"| reduction of {mine} vs {base} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def _plot(rows: list[Row], path: Path) -> None:
    """004's metric, TVE, of the mean and range answers: a panel per data set and query kind, a
    line per mechanism over eps with the 95% intervals as error bars, the legend below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r.dataset for r in rows))
    metrics = ("mean_tve", "range_tve")
    fig, axes = plt.subplots(
        len(datasets), len(metrics), figsize=(10, 3.8 * len(datasets) + 0.6), squeeze=False
    )
    for i, ds in enumerate(datasets):
        for k, metric in enumerate(metrics):
            ax = axes[i][k]
            for mi, mech in enumerate(MECHANISMS):
                pts = [r for r in rows if (r.dataset, r.mechanism, r.metric) == (ds, mech, metric)]
                half = [0.0 if math.isnan(r.ci_high) else (r.ci_high - r.ci_low) / 2 for r in pts]
                ax.errorbar(
                    [float(Fraction(r.epsilon)) for r in pts],
                    [r.value for r in pts],
                    yerr=half,
                    marker="o",
                    markersize=3.5,
                    capsize=2.5,
                    color=f"C{mi % 10}",
                    label=mech,
                )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("epsilon (whole stream)")
            ax.set_ylabel(f"TVE of {metric.split('_')[0]} answers")
            ax.set_title(ds, fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.6 / (3.8 * len(datasets) + 0.6), 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
