"""The papers' experiments as sweeps: what each varies, which mechanisms it compares, on which
streams, and how big a full (the paper's size) and a quick run are.

* 002 Section 7 (LDP-IDS): ``ldp-ids-epsilon``, ``ldp-ids-w`` (Figures 4-5, MRE), ``cfpu``
  (Table 2), ``roc`` (Figure 7), and Section 7.3's data sweeps (Figure 6, eps = 1, w = 30):
  ``ldp-ids-users`` (the population N, the probability sequence fixed) and
  ``ldp-ids-volatility`` (sqrt(Q) of LNS, b of Sin). Synthetic streams of 800 slots and
  200,000 users (7.1.1).
* 001 Section 6 (PWSM): ``pwsm-epsilon``, ``pwsm-w`` (Tables 5-6, AMRE; AJSD of its Appendix
  8.2), ``pwsm-ratio`` (Section 6.5, Figures 11-12). T = 10,000 slots (6.1); 001 does not state
  its synthetic N, we use 10,000 as 000 does.
* 000 Section VI (PLDP-IDS): ``pldp-epsilon``, ``pldp-w`` (Figures 2-3, AMSE and AJSD),
  ``pldp-ablation`` (Figures 4-5). n = 10,000 users, T = 10,000 slots (VI-A).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

from wevent.accounting.budget import format_exact
from wevent.accounting.population import Population
from wevent.experiments import metrics
from wevent.experiments.harness import Point, RunResult, Size, Sweep, plots_wanted, run_sweep
from wevent.experiments.populations import (
    budget_ratio_population,
    pldp_population,
    pwsm_dynamic_population,
    pwsm_population,
    uniform_population,
    window_ratio_population,
)
from wevent.mechanisms.allocators.registry import takes_dynamic

__all__ = ["SWEEPS", "cfpu_experiment", "roc_experiment", "sweep_experiment"]

SYNTHETIC = ("lns", "sin", "log")
F = Fraction

# -- 002 (LDP-IDS) -----------------------------------------------------------------------------
LDP_IDS = ("lbu", "lsp", "lbd", "lba", "lpu", "lpd", "lpa")
# 002 does not print the axes of Figures 4-5; Table 2 and Figures 6-8 use eps in {1, 2} and
# w in {20, 30, 40, 50}. We sweep eps over 0.5..2.5 at w = 20 and w over 10..50 at eps = 1.
LDP_EPS = tuple(Point(F(k, 2), 20) for k in range(1, 6))
LDP_W = tuple(Point(F(1), w) for w in (10, 20, 30, 40, 50))
LDP_FULL = Size(200_000, 800)
LDP_QUICK = Size(5_000, 200, points=(0, 2, 4))


def _uniform(point: Point, mechanism: str, users: int, seed: int) -> Population:
    return uniform_population(users, point.w, point.epsilon)


# 002 Section 7.3, Figure 6 (eps = 1, w = 30): the paper prints no axis values.
# (a)(b) N: the shares 1/8, 1/4, 1/2, 3/4 and 1 of the size's users (at the paper's 200,000
# users: 25,000 .. 200,000). The probability sequence depends on the seed only, not on N ("we
# kept the frequency fixed"); 1/8 is the smallest share whose N at the fingerprint's 500 users
# (62) still gives LPD/LPA their 2w = 60 users per window.
USERS_SHARES = (F(1, 8), F(1, 4), F(1, 2), F(3, 4), F(1))
LDP_USERS = tuple(Point(F(1), 30, users_share=share) for share in USERS_SHARES)
# (c) sqrt(Q) of LNS: 002 names 0.001 and 0.002 (where LSP is best) and the default 0.0025; two
# larger values show where LSP is said to grow past LPD/LPA. (d) b of Sin: the default 0.01
# (a period of 628 slots), halved once and doubled three times (periods 1257 .. 79 slots: larger
# b is a faster stream). Each runs on its own stream only.
SQRT_QS = (0.001, 0.002, 0.0025, 0.004, 0.006)
SIN_BS = (0.005, 0.01, 0.02, 0.04, 0.08)
LDP_VOLATILITY = tuple(
    Point(F(1), 30, f"sqrtQ={q}", stream=(("lns_sqrt_q", q),), datasets=("lns",)) for q in SQRT_QS
) + tuple(
    Point(F(1), 30, f"b={b}", stream=(("sin_period", 2 * math.pi / b),), datasets=("sin",))
    for b in SIN_BS
)


# -- 001 (PWSM) --------------------------------------------------------------------------------
PWSM = ("bd", "ba", "plbu", "pbd", "pba", "dpbd", "dpba")
PWSM_EPS = tuple(Point(F(k, 5), 120) for k in range(1, 6))  # Table 4: 0.2..1.0, w = 120
PWSM_W = tuple(Point(F(3, 5), w) for w in (40, 80, 120, 160, 200))  # E = 0.6
PWSM_FULL = Size(10_000, 10_000)
PWSM_QUICK = Size(5_000, 200, points=(0, 2, 4))
RATIOS = tuple(F(k, 10) for k in (1, 3, 5, 7, 9))  # 001 Section 6.5: o = 0.1..0.9
PWSM_RATIO_POINTS = tuple(
    Point(F(3, 5), 120, f"eps:o={format(float(o), 'g')}", o) for o in RATIOS
) + tuple(Point(F(3, 5), 120, f"w:o={format(float(o), 'g')}", o) for o in RATIOS)


def _pwsm(point: Point, mechanism: str, users: int, seed: int) -> Population:
    if takes_dynamic(mechanism):
        return pwsm_dynamic_population(users, point.epsilon, point.w, seed)
    return pwsm_population(users, point.epsilon, point.w, seed)


def _ratio(point: Point, mechanism: str, users: int, seed: int) -> Population:
    assert point.ratio is not None
    if point.setting.startswith("eps:"):
        return budget_ratio_population(users, point.ratio, seed)
    return window_ratio_population(users, point.ratio, seed)


# -- 000 (PLDP-IDS) ----------------------------------------------------------------------------
# 000 Section VI-B compares with 002's LBD and LBA; we add 002's population-division LPD and LPA,
# the closer non-personalized counterparts (000's stated gains over "LBA" fit LPA far better).
PLDP = ("lbd", "lba", "lpd", "lpa", "plpd", "plpa", "plpd+", "plpa+")
ABLATION = ("plpd", "plpa", "plbd-rp", "plba-rp", "plbd-ops", "plba-ops", "plpd+", "plpa+")
PLDP_EPS = tuple(Point(F(k, 2), 120) for k in range(1, 6))  # Table IV: 0.5..2.5, w = 120
PLDP_W = tuple(Point(F(3, 2), w) for w in (40, 80, 120, 160, 200))  # eps = 1.5
PLDP_FULL = Size(10_000, 10_000)
ABLATION_POINTS = tuple(
    Point(p.epsilon, p.w, f"eps={format_exact(p.epsilon)}") for p in PLDP_EPS
) + tuple(Point(p.epsilon, p.w, f"w={p.w}") for p in PLDP_W)
PLDP_QUICK = Size(5_000, 200, points=(0, 2, 4))


def _pldp(point: Point, mechanism: str, users: int, seed: int) -> Population:
    return pldp_population(users, point.epsilon, point.w, seed)


# -- streamdp-benchmark (Schäler et al., VLDB 2023) ---------------------------------------------
# Its artificial experiments (`Experiment.runArtificalExperiments`): streams of 1,000 slots, eps
# in {0.1, 0.3, 0.5, 0.7, 0.9, 1.0} at w = 120 and w in {40, 80, 120, 160, 200} at eps = 1, the
# mean absolute error of counts; its headline: one of the two baselines (Uniform, Sample) is
# expected to give good or the best utility ("baseline supremacy"). Ours: the same grid on our
# synthetic streams (one requirement for every user; the benchmark's streams are its own).
BASELINES = ("uniform", "sample")
# The benchmark's artificial runs compare FAST_w, Uniform, Sample, BD, BA, RescueDP (MD), PeGaSus,
# DSAT and AdaPub; its BD and BA are Kellaris' with budget shifting (`bd-shift`, `ba-shift`: at
# d = 2 the shift applies at w = 1 only, so they are the half split with the 1/eps threshold).
# wevent's own `bd`, `ba` (001's sqrt(err) threshold) run beside them.
STREAMDP = (
    *BASELINES,
    "bd",
    "ba",
    "bd-shift",
    "ba-shift",
    "fast-w",
    "rescuedp",
    "pegasus",
    "dsat",
    "adapub",
)
STREAMDP_POINTS = tuple(
    Point(F(e, 10), 120, f"eps={format(e / 10, 'g')}") for e in (1, 3, 5, 7, 9, 10)
) + tuple(Point(F(1), w, f"w={w}") for w in (40, 80, 120, 160, 200))
STREAMDP_FULL = Size(10_000, 1_000)


SWEEPS: dict[str, Sweep] = {
    s.experiment: s
    for s in (
        Sweep(
            "ldp-ids-epsilon",
            "002 Figure 4: MRE of the w-event LDP methods as eps varies (w = 20)",
            LDP_IDS,
            SYNTHETIC,
            "epsilon",
            LDP_EPS,
            _uniform,
            ("mre", "amse", "cfpu"),
            LDP_FULL,
            LDP_QUICK,
            oracle="grr",
        ),
        Sweep(
            "ldp-ids-w",
            "002 Figure 5: MRE of the w-event LDP methods as w varies (eps = 1)",
            LDP_IDS,
            SYNTHETIC,
            "w",
            LDP_W,
            _uniform,
            ("mre", "amse", "cfpu"),
            LDP_FULL,
            LDP_QUICK,
            oracle="grr",
        ),
        Sweep(
            "ldp-ids-users",
            "002 Figure 6(a)(b): MRE of the w-event LDP methods as the population N varies "
            "(eps = 1, w = 30)",
            LDP_IDS,
            ("lns", "sin"),
            "setting",
            LDP_USERS,
            _uniform,
            ("mre",),
            LDP_FULL,
            LDP_QUICK,
            oracle="grr",
            note="N is a share (1/8, 1/4, 1/2, 3/4, 1) of the size's users. A seed fixes the "
            "probability sequence p_1..p_T at every N (002 Section 7.3: the frequency kept "
            "fixed); only the number of users drawn from it changes.",
        ),
        Sweep(
            "ldp-ids-volatility",
            "002 Figure 6(c)(d): MRE of the w-event LDP methods as the LNS step deviation "
            "sqrt(Q) and the Sin frequency b vary (eps = 1, w = 30)",
            LDP_IDS,
            ("lns", "sin"),
            "setting",
            LDP_VOLATILITY,
            _uniform,
            ("mre",),
            LDP_FULL,
            Size(5_000, 200, points=(0, 2, 4, 5, 7, 9)),
            oracle="grr",
            note="sqrtQ runs on LNS only and b on Sin only (the other stream's cells are "
            "empty). 002 prints no axis values: sqrt(Q) takes the values 002 names (0.001, "
            "0.002), its default 0.0025 and two larger ones; b its default 0.01, halved and "
            "doubled up to 0.08 (periods 1257 to 79 slots). A seed gives the same standard "
            "normal steps at every sqrt(Q), so the LNS walks differ by their scale only "
            "(and the clip at 0).",
        ),
        Sweep(
            "pwsm-epsilon",
            "001 Table 5: AMRE (Eq. 5, counts) as the budget E varies (w = 120)",
            PWSM,
            SYNTHETIC,
            "epsilon",
            PWSM_EPS,
            _pwsm,
            ("amre", "ajsd"),
            PWSM_FULL,
            PWSM_QUICK,
        ),
        Sweep(
            "pwsm-w",
            "001 Table 6: AMRE (Eq. 5, counts) as the window w varies (E = 0.6)",
            PWSM,
            SYNTHETIC,
            "w",
            PWSM_W,
            _pwsm,
            ("amre", "ajsd"),
            PWSM_FULL,
            PWSM_QUICK,
        ),
        Sweep(
            "pwsm-ratio",
            "001 Section 6.5, Figures 11-12: AMRE as the ratio o of users with E = 1.0 "
            "(eps:o, all w = 120) or with w = 40 (w:o, all E = 0.6) varies",
            ("bd", "ba", "pbd", "pba"),
            SYNTHETIC,
            "setting",
            PWSM_RATIO_POINTS,
            _ratio,
            ("amre",),
            PWSM_FULL,
            Size(5_000, 200, points=(0, 2, 4, 5, 7, 9)),
            note="BD and BA serve every user with the smallest budget and largest window "
            "(0.6, 120): o changes only the class sizes, and the stream does not depend on "
            "them (same seed, same data), so their numbers are the same at every o.",
        ),
        Sweep(
            "streamdp-baselines",
            "streamdp-benchmark (Schäler et al., VLDB 2023): mean absolute error of the central "
            "w-event mechanisms as eps varies (w = 120) and as w varies (eps = 1)",
            STREAMDP,
            SYNTHETIC,
            "setting",
            STREAMDP_POINTS,
            _uniform,
            ("mean-ae", "amre"),
            STREAMDP_FULL,
            Size(5_000, 200, points=(0, 2, 5, 6, 8, 10)),
            note="mean-ae is the benchmark's MAE (mean over slots and cells of the absolute "
            "error of the counts); every user holds the same (w, eps). bd-shift and ba-shift are "
            "the benchmark's BD and BA (Kellaris' 1/eps publication threshold; their budget "
            "shifting applies at 2w <= d only, never here at d = 2); bd and ba are 001's rules "
            "(the sqrt(err) threshold).",
        ),
        Sweep(
            "pldp-epsilon",
            "000 Figure 2: AMSE of the personalized LDP methods as eps varies (w = 120)",
            PLDP,
            SYNTHETIC,
            "epsilon",
            PLDP_EPS,
            _pldp,
            ("amse", "ajsd"),
            PLDP_FULL,
            PLDP_QUICK,
        ),
        Sweep(
            "pldp-w",
            "000 Figure 3: AMSE of the personalized LDP methods as w varies (eps = 1.5)",
            PLDP,
            SYNTHETIC,
            "w",
            PLDP_W,
            _pldp,
            ("amse", "ajsd"),
            PLDP_FULL,
            PLDP_QUICK,
        ),
        Sweep(
            "pldp-ablation",
            "000 Figures 4-5: ablation of OPS and PUE (AMSE) as eps varies (w = 120) and as w "
            "varies (eps = 1.5)",
            ABLATION,
            SYNTHETIC,
            "setting",
            ABLATION_POINTS,
            _pldp,
            ("amse", "ajsd"),
            PLDP_FULL,
            Size(5_000, 200, points=(0, 2, 4, 5, 7, 9)),
        ),
    )
}


def sweep_experiment(
    name: str, out_dir: Path, repeats: int, quick: bool, seed: int, *, size: Size | None = None
) -> list[Path]:
    """Run the registered sweep ``name``; returns the files written."""
    _, files = run_sweep(SWEEPS[name], out_dir, repeats, quick, seed, size=size)
    return files


# -- 002 Table 2 (CFPU) ------------------------------------------------------------------------
CFPU_POINTS = (
    Point(F(1), 20, "eps=1,w=20"),
    Point(F(2), 20, "eps=2,w=20"),
    Point(F(2), 40, "eps=2,w=40"),
)
CFPU_SWEEP = Sweep(
    "cfpu",
    "002 Table 2: communication frequency per user (CFPU)",
    LDP_IDS,
    ("lns", "sin", "log"),
    "setting",
    CFPU_POINTS,
    _uniform,
    ("cfpu",),
    LDP_FULL,
    Size(5_000, 200),
    oracle="grr",
    log_plot=False,
)


def cfpu_experiment(
    out_dir: Path, repeats: int, quick: bool, seed: int, *, size: Size | None = None
) -> list[Path]:
    """002 Table 2: CFPU of every LDP-IDS method at (eps, w) = (1, 20), (2, 20), (2, 40)."""
    _, files = run_sweep(CFPU_SWEEP, out_dir, repeats, quick, seed, size=size)
    return files


# -- 002 Figure 7 (ROC) ------------------------------------------------------------------------
ROC_MECHANISMS = ("lba", "lsp", "lpu", "lpd", "lpa")
ROC_SWEEP = Sweep(
    "roc",
    "002 Figure 7: event monitoring (eps = 1, w = 50): area under the ROC curve",
    ROC_MECHANISMS,
    SYNTHETIC,
    "epsilon",
    (Point(F(1), 50),),
    _uniform,
    ("auc",),
    LDP_FULL,
    Size(5_000, 300),
    oracle="grr",
    log_plot=False,
)


def roc_experiment(
    out_dir: Path, repeats: int, quick: bool, seed: int, *, size: Size | None = None
) -> list[Path]:
    """002 Section 7.4: AUC per mechanism and dataset, and ROC curves (``roc.png``,
    ``roc_points.csv``) of the first repeat."""
    curves: dict[tuple[str, str], metrics.Roc] = {}

    def keep(dataset: str, mech: str, point: Point, r: int, res: RunResult) -> None:
        if r == 0:
            rel, tru = res.freq()
            curves[(dataset, mech)] = metrics.event_roc(
                metrics.event_statistic(rel), metrics.event_statistic(tru)
            )

    _, files = run_sweep(ROC_SWEEP, out_dir, repeats, quick, seed, size=size, keep=keep)
    points = out_dir / "roc_points.csv"
    with points.open("w", encoding="utf-8") as fh:
        fh.write("dataset,mechanism,fpr,tpr\n")
        for (dataset, mech), roc in curves.items():
            for f, t in zip(roc.fpr.tolist(), roc.tpr.tolist(), strict=True):
                fh.write(f"{dataset},{mech},{f!r},{t!r}\n")
    files.append(points)
    if plots_wanted():
        files.append(_roc_plot(curves, out_dir / "roc.png"))
    return files


def _roc_plot(curves: dict[tuple[str, str], metrics.Roc], path: Path) -> Path:
    """A panel per dataset with each mechanism's ROC curve (the first repeat) and, below the
    panel and off the curves, a legend with that curve's AUC."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(d for d, _ in curves))
    mechs = len({m for _, m in curves})
    rows = math.ceil(mechs / 2)
    legend_height = 0.45 + 0.2 * rows  # the x label, then two legend entries per line
    height = 3.6 + legend_height
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), height), squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        for (d, mech), roc in curves.items():
            if d == dataset:
                ax.plot(roc.fpr, roc.tpr, label=f"{mech} (AUC {roc.auc:.3f})")
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.5, linestyle="--")
        ax.set_xlabel("false positive rate")
        ax.set_title(dataset)
        ax.legend(
            fontsize=7, ncol=2, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.16)
        )
    axes[0][0].set_ylabel("true positive rate")
    fig.tight_layout(rect=(0, 0, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
