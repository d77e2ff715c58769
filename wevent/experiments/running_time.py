"""001 Section 8.1 (Appendix, Figures 13-14): the running time per slot of BD, BA, PBD, PBA,
DPBD and DPBA as the budget E varies (0.2 .. 1, w = 120) and as the window w varies (40 .. 200,
E = 0.6), on the populations and streams of the ``pwsm-epsilon`` and ``pwsm-w`` sweeps.

Every run is timed (`wevent.experiments.timing`): ``time-us`` is the mean wall time per slot of
the mechanism's step with the guard's checks, ``time-us-noguard`` without them, ``guard-us``
the guard's share, ``cpu-us`` the thread's CPU time of ``time-us``, all in microseconds and
without the stream's data generation and the run's
start-up. Beside them, deterministic counts explain the times: the ledger rows of the run
(``charges``: one per requirement class charged, so the number of classes weighs in) and the
slots of each status (``publications``, ``skips``, ``nullifications``; 001 attributes the times
to how often a mechanism skips).

001 prints its times in figures only, so what we compare is its stated orderings, each decided
on our runs by a paired 95% interval over the seeds (`ORDERINGS`, `TRENDS`): per seed the mean
over one sweep's settings of log(A/B), the log ratio of two mechanisms' times on the same data;
the mean of those over the seeds and its 95% interval, shown as exp of each (a geometric-mean
ratio: B/A gives exactly the inverse ratio and the mirrored verdict). "Holds" when the whole
interval is below 1, "does not hold" when it is above, "undecided" otherwise. Every time
ordering is decided twice, on the wall time (``time-us``) and on the thread's CPU time
(``cpu-us``). A trend compares one mechanism's time at the sweep's two ends, runs made minutes
apart under a load that changes in between, so the trends are decided on ``cpu-us`` (which does
not count waits for a core) and the wall-time ratio is shown beside, undecided. "Stable across
E" is decided against a margin: the ratio of the time at E = 1 to that at E = 0.2 holds as
stable when its whole interval lies within 1 +- `STABLE_MARGIN`, does not hold when it lies
outside, and is undecided otherwise. The verdicts and the ratios to BD are two more sections of
``table.md`` (``### ORDERINGS``, ``### RATIOS``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from wevent.accounting.budget import format_exact
from wevent.experiments import claims
from wevent.experiments.harness import Point, Size, Sweep, execute, run_sweep
from wevent.experiments.papers import PWSM_EPS, PWSM_FULL, PWSM_W, SYNTHETIC, _pwsm
from wevent.experiments.stats import FAILS, HOLDS, Interval, interval

__all__ = [
    "MECHANISMS",
    "ORDERINGS",
    "STABLE_MARGIN",
    "TIME_SWEEP",
    "TRENDS",
    "UNDECIDED",
    "Ordering",
    "Trend",
    "evaluate",
    "judged",
    "ratio_of",
    "running_time_experiment",
    "stable_verdict",
]

MECHANISMS = ("bd", "ba", "pbd", "pba", "dpbd", "dpba")
POINTS = tuple(Point(p.epsilon, p.w, f"eps={format_exact(p.epsilon)}") for p in PWSM_EPS) + tuple(
    Point(p.epsilon, p.w, f"w={p.w}") for p in PWSM_W
)
TIME = "time-us"
CPU = "cpu-us"
UNDECIDED = "undecided"
METRICS = (
    TIME,
    "time-us-noguard",
    "guard-us",
    "cpu-us",
    "charges",
    "publications",
    "skips",
    "nullifications",
)
TIME_SWEEP = Sweep(
    "pwsm-time",
    "001 Section 8.1, Figures 13-14: running time per slot (microseconds) as the budget E "
    "varies (eps=, w = 120) and as the window w varies (w=, E = 0.6)",
    MECHANISMS,
    SYNTHETIC,
    "setting",
    POINTS,
    _pwsm,
    METRICS,
    PWSM_FULL,
    Size(5_000, 200, points=(0, 2, 4, 5, 7, 9)),
    timed=True,
    note="TIME-US: mean wall time per slot of the mechanism's step with the guard's checks; "
    "TIME-US-NOGUARD: without the guard's calls; GUARD-US: the guard's calls; CPU-US: the "
    "thread's CPU time of TIME-US (not counting waits for a core); all without the "
    "stream's data generation and the run's start-up (population, stream, guard, kernel). "
    "Each run starts with an empty SM cache; wall times depend on the machine and its load, "
    "so compare ratios. CHARGES: ledger rows per run (one per requirement class with a "
    "positive budget per dissimilarity and per publication; each one a check by the guard). "
    "PUBLICATIONS, SKIPS, NULLIFICATIONS: slots of each status per run. The counts are "
    "deterministic. ORDERINGS and RATIOS: per seed, the mean over one sweep's settings of "
    "the log of the ratio of two mechanisms' TIME-US, CPU-US or PUBLICATIONS on the same "
    "data; exp of its mean over the seeds [and of its 95% interval's ends] (a geometric-mean "
    "ratio).",
)
RATIO_METRICS = (TIME, CPU)
CLOCKS = (TIME, CPU)  # every time ordering is decided on both
STABLE_MARGIN = Fraction(1, 10)  # "stable": the E = 1 time within 10% of the E = 0.2 time
GROUPS = {"eps": "E sweep (Figure 13)", "w": "w sweep (Figure 14)"}


@dataclass(frozen=True)
class Ordering:
    """001 states that ``faster`` has a lower ``metric`` than ``slower`` in the ``group`` sweep
    (``eps`` or ``w``); a ``metric`` of `TIME` is decided on every one of `CLOCKS`."""

    source: str
    group: str
    faster: str
    slower: str
    statement: str
    metric: str = TIME


@dataclass(frozen=True)
class Trend:
    """001 states how ``mechanism``'s ``metric`` moves from the first to the last setting of
    the ``group`` sweep: ``"stable"`` (within `STABLE_MARGIN`) or ``"decreases"``. A time
    trend is decided on `CPU` (the wall time of the same runs is shown beside it)."""

    source: str
    group: str
    mechanism: str
    kind: str
    statement: str
    metric: str = CPU


def _orderings() -> tuple[Ordering, ...]:
    out: list[Ordering] = []
    for group, fig in (("eps", "001 Fig. 13"), ("w", "001 Fig. 14")):
        out += [Ordering(fig, group, "bd", m, "BD needs the least time") for m in MECHANISMS[1:]]
        # DPBD the most: stated for Figure 13; Figure 14's sentence names the distribution
        # methods "(PBA and DPBA)", garbled, so the w sweep tests Figure 13's statement too
        out += [
            Ordering(
                fig if group == "eps" else "001 Fig. 13 (on the w sweep)",
                group,
                m,
                "dpbd",
                "DPBD needs the most time",
            )
            for m in MECHANISMS
            if m not in ("dpbd", "bd")
        ]
        out += [
            Ordering(fig, group, "pba", "pbd", "PBD is slower than PBA"),
            Ordering(fig, group, "dpba", "dpbd", "DPBD is slower than DPBA"),
            Ordering(
                fig, group, "pba", "pbd", "PBA publishes less than PBD", metric="publications"
            ),
            Ordering(
                fig, group, "dpba", "dpbd", "DPBA publishes less than DPBD", metric="publications"
            ),
        ]
    return tuple(out)


ORDERINGS = _orderings()
TRENDS = (
    tuple(
        Trend("001 Fig. 13", "eps", m, "stable", "the time is stable across E") for m in MECHANISMS
    )
    + tuple(
        Trend("001 Fig. 14", "w", m, "decreases", "the time decreases as w grows")
        for m in MECHANISMS
    )
    + tuple(
        Trend(
            "001 Fig. 14",
            "w",
            m,
            "decreases",
            "larger w: more skipped or nullified slots",
            metric="publications",
        )
        for m in MECHANISMS
    )
)


def _group(runs: claims.Runs, group: str) -> claims.Runs:
    """The runs of one sweep (settings ``group=...``)."""
    return {
        seed: {k: v for k, v in results.items() if k[3].split("=", 1)[0] == group}
        for seed, results in runs.items()
    }


def _log(x: float) -> float:
    """log(x) for a finite positive x, else NaN."""
    return math.log(x) if math.isfinite(x) and x > 0 else math.nan


def _geometric(logs: Sequence[float]) -> Interval:
    """The mean of ``logs`` over the seeds and its 95% interval, as exp of each (the spread
    stays in logs); NaN without values."""
    iv = interval(logs)
    if iv.n == 0:
        return iv
    return Interval(math.exp(iv.mean), iv.std, math.exp(iv.low), math.exp(iv.high), iv.n)


def ratio_of(
    runs: claims.Runs, dataset: str, group: str, a: str, b: str, metric: str = TIME
) -> Interval:
    """Per seed, the mean over the ``group`` sweep's settings of log(``a``'s ``metric`` /
    ``b``'s); exp of those means' mean over the seeds and of its 95% interval's ends (NaN
    without runs). Every seed is averaged over the same settings: those where both values are
    finite and positive in every seed. Swapping ``a`` and ``b`` gives exactly the inverse."""
    seeds = list(_group(runs, group).values())
    usable: set[str] | None = None
    for results in seeds:
        here = {
            x
            for (d, m, k, x), v in results.items()
            if d == dataset
            and m == a
            and k == metric
            and not math.isnan(_log(v))
            and not math.isnan(_log(results.get((dataset, b, metric, x), math.nan)))
        }
        usable = here if usable is None else usable & here
    if not usable:
        return interval([])
    xs = sorted(usable)  # a float sum follows its order; a set's order follows the hash seed
    return _geometric(
        [
            sum(
                math.log(r[(dataset, a, metric, x)]) - math.log(r[(dataset, b, metric, x)])
                for x in xs
            )
            / len(xs)
            for r in seeds
        ]
    )


def _ends(runs: claims.Runs, group: str) -> tuple[str, str] | None:
    """The ``group`` sweep's smallest and largest settings; None with fewer than two."""
    xs = {k[3] for r in runs.values() for k in r if k[3].split("=", 1)[0] == group}
    if len(xs) < 2:
        return None
    ordered = sorted(xs, key=lambda x: Fraction(x.split("=", 1)[1]))
    return ordered[0], ordered[-1]


def trend_ratio(
    runs: claims.Runs, dataset: str, trend: Trend, metric: str | None = None
) -> Interval:
    """Per seed, log of ``metric`` (default the trend's) at the sweep's last setting over its
    value at the first (largest over smallest E or w); exp of their mean over the seeds and of
    its 95% interval's ends. n/a (no values) with fewer than two settings."""
    ends = _ends(runs, trend.group)
    if ends is None:
        return interval([])
    first, last = ends
    key = metric or trend.metric
    return _geometric(
        [
            _log(results.get((dataset, trend.mechanism, key, last), math.nan))
            - _log(results.get((dataset, trend.mechanism, key, first), math.nan))
            for results in runs.values()
        ]
    )


def stable_verdict(iv: Interval, margin: Fraction = STABLE_MARGIN) -> str:
    """A ratio is stable (`HOLDS`) when its whole interval lies within 1 +- ``margin``, not
    (`FAILS`) when it lies wholly outside, else `UNDECIDED` (also with one seed)."""
    if iv.n < 2 or math.isnan(iv.low):
        return UNDECIDED
    lo, hi = 1 - float(margin), 1 + float(margin)
    if lo <= iv.low and iv.high <= hi:
        return HOLDS
    if iv.high < lo or iv.low > hi:
        return FAILS
    return UNDECIDED


def below_one(iv: Interval) -> str:
    """The verdict on "the ratio is below 1": `HOLDS` when the whole interval is, `FAILS` when
    it is wholly above, else `UNDECIDED` (also with one seed)."""
    if iv.n < 2 or math.isnan(iv.low):
        return UNDECIDED
    if iv.high < 1:
        return HOLDS
    if iv.low > 1:
        return FAILS
    return UNDECIDED


def _cell(iv: Interval, decided: str = "") -> str:
    if iv.n == 0:
        return "n/a"
    text = f"{iv.mean:.3f}"
    if iv.n > 1:
        text += f" [{iv.low:.3f}, {iv.high:.3f}]"
    return f"{text} {decided}".rstrip()


def evaluate(runs: claims.Runs, datasets: Sequence[str] = SYNTHETIC) -> list[str]:
    """The ``### ORDERINGS`` and ``### RATIOS`` sections: every stated ordering and trend with
    its ratio [95% interval] and verdict per dataset, and each mechanism's time over BD's."""
    names = [claims.DS.get(d, d) for d in datasets]
    head = "| source | statement | ratio | " + " | ".join(names) + " |"
    rule = "|---|---|---|" + "---|" * len(datasets)
    lines = [
        "### ORDERINGS",
        "",
        "Ratio: geometric mean over settings and seeds [95% interval] and verdict (the ratio "
        "below 1: holds; above: does not hold; stable: within 1 +- "
        f"{float(STABLE_MARGIN):g}; otherwise undecided). Every time ordering is decided on "
        "the wall time (time-us) and on the thread's CPU time (cpu-us); the trends on cpu-us "
        "(the two ends of a sweep ran minutes apart under a changing load), their wall-time "
        "ratio beside, not decided.",
        "",
        head,
        rule,
    ]
    for o in ORDERINGS:
        for metric in CLOCKS if o.metric == TIME else (o.metric,):
            ivs = [ratio_of(runs, d, o.group, o.faster, o.slower, metric) for d in datasets]
            cells = " | ".join(_cell(iv, below_one(iv)) for iv in ivs)
            lines.append(
                f"| {o.source} | {o.statement} | {o.faster} / {o.slower} ({metric}) | {cells} |"
            )
    for t in TRENDS:
        ends = _ends(runs, t.group)
        span = f"{ends[1]} / {ends[0]}" if ends else f"last / first {t.group}"
        judge = stable_verdict if t.kind == "stable" else below_one
        ivs = [trend_ratio(runs, d, t) for d in datasets]
        cells = " | ".join(_cell(iv, judge(iv)) for iv in ivs)
        lines.append(
            f"| {t.source} | {t.statement} | {t.mechanism}: {span} ({t.metric}) | {cells} |"
        )
        if t.metric == CPU:
            walls = [trend_ratio(runs, d, t, TIME) for d in datasets]
            cells = " | ".join(_cell(iv, "(wall, not decided)") for iv in walls)
            lines.append(
                f"| {t.source} | {t.statement} | {t.mechanism}: {span} ({TIME}) | {cells} |"
            )
    lines += [
        "",
        "### RATIOS",
        "",
        "Each mechanism's time per slot over BD's on the same data: wall time (TIME-US), then "
        "the thread's CPU time (CPU-US); geometric mean over settings and seeds [95% interval].",
        "",
    ]
    lines.append(
        "| ratio | " + " | ".join(f"{n}, {GROUPS[g]}" for g in GROUPS for n in names) + " |"
    )
    lines.append("|---|" + "---:|" * (len(datasets) * len(GROUPS)))
    for metric in RATIO_METRICS:
        for m in MECHANISMS[1:]:
            shown = [_cell(ratio_of(runs, d, g, m, "bd", metric)) for g in GROUPS for d in datasets]
            lines.append(f"| {m} / bd ({metric}) | " + " | ".join(shown) + " |")
    lines.append("")
    return lines


def _warm_up(seed: int) -> None:
    """One short untimed run of every mechanism (imports, first calls), before any timing."""
    point = POINTS[0]
    for mech in MECHANISMS:
        execute(mech, _pwsm(point, mech, 500, seed), SYNTHETIC[0], 10, seed)


def running_time_experiment(
    out_dir: Path, repeats: int, quick: bool, seed: int, *, size: Size | None = None
) -> list[Path]:
    """Run the timed sweep, then add the orderings and ratios to ``table.md``."""
    _warm_up(seed)
    _, files = run_sweep(TIME_SWEEP, out_dir, repeats, quick, seed, size=size)
    table = out_dir / "table.md"
    text = table.read_text(encoding="utf-8").rstrip("\n")
    table.write_text(text + "\n\n" + judged(out_dir / "runs.csv", quick), encoding="utf-8")
    return files


def judged(runs_csv: Path, quick: bool) -> str:
    """The ``### ORDERINGS`` and ``### RATIOS`` text `running_time_experiment` appends to
    ``table.md``, from a ``runs.csv`` (`wevent.experiments.recheck` rebuilds it from the
    committed one). The datasets are the sweep's (a size override keeps them)."""
    datasets = (TIME_SWEEP.quick if quick else TIME_SWEEP.full).datasets or SYNTHETIC
    return "\n".join(evaluate(claims.load(runs_csv), datasets))
