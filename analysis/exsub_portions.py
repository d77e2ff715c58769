"""004 Section VI-D: do the calibrated hierarchy portions cut range-query error?

004 Section VI-D gives each level h of the residue hierarchy a portion W_h of the users that is
proportional to a per-level variance factor, and reports that this lowers the error of prefix and
all-range queries by about 20% against uniform portions. This script checks the claim in two ways.

Analytic part (default, a few seconds). The level-h residue averages have variance
sigma_h^2 / (n W_h), where sigma_h^2 is 004 Lemma 1's ExSub value MSE at that level's
d'_h = d T_h + s divided by d'_h (m by 004 Theorem 2), and Algorithm 2 (004) gives every query
answer as a sum of residues with exact 0/1 coefficients. So each query q has variance
sum_h sigma_h^2 a_{h,q} / (n W_h), with a_{h,q} the sum of its squared coefficients at level h,
and the total is sum_h c_h / (n W_h) with c_h = sigma_h^2 A_h, A_h = sum_q a_{h,q}. The script
prints, per level, A_h for prefix queries and the portions, then the predicted ratios to uniform
portions of the MSE and of the expected TVE (sqrt(2/pi) times the sum of the per-query standard
deviations, the Gaussian approximation) for mean, prefix and all-range queries, for:

* ``VI-D``: 004 Section VI-D's calibrated portions as `wevent.mechanisms.residues.level_weights`
  implements them (``kind="calibrated"``);
* ``prop-c``: W_h proportional to the exact c_h of the task (what the rule "portion proportional
  to the variance factor" gives with the exact factors);
* ``sqrt-c``: W_h proportional to sqrt(c_h), the minimizer of sum_h c_h / W_h (Lagrange);
* ``best-TVE``: the portions minimizing the expected TVE over the whole simplex (the objective is
  convex in W, so exponentiated-gradient descent finds the global minimum).

It also checks, in exact rational arithmetic, that W_h proportional to c_h gives the error
H C (C = sum_h c_h, H levels), which is exactly the error of uniform portions: the rule cannot
gain anything in 004's own error model, whatever c is.

Simulation part (``--simulate``, by default T32 only). 004's protocol on 004 Section VI-A's
synthetic sparse streams (the data and the per-level ExSub code of ``wevent reproduce exsub``),
with uniform, VI-D and sqrt-c (prefix) portions on the same data per repeat; prints measured
ratios next to the predicted ones.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.experiments.exsub_experiment import padded_residues
from wevent.mechanisms.exsub import ExSubDesign
from wevent.mechanisms.exsub_baselines import exsub_estimates
from wevent.mechanisms.exsub_stream import sparse_streams
from wevent.mechanisms.residues import (
    level_count,
    level_weights,
    levels,
    reconstruct,
    reconstruction_terms,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FANOUT = 2  # r, 004 Section VI-B's default
TASKS = ("mean", "prefix", "all")
METRICS = ("mean_tve", "prefix_tve", "all_tve", "prefix_mse", "all_mse")


@dataclass(frozen=True)
class Setting:
    name: str
    n: int
    T: int
    d: int
    s: int
    sim_repeats: int  # default repeats of --simulate


SETTINGS = {
    # the shape of 004's TRAJECTORY runs (Section VI-C/D: 32 slots, 12 cells, s = 2 x 4)
    "T32": Setting("T32", 20000, 32, 12, 8, 40),
    # 004 Fig. 9's synthetic setting; its "m = 20" is the sparsity s (see the README)
    "T128": Setting("T128", 100000, 128, 8, 20, 12),
}


# --- analytic part --------------------------------------------------------------------------


def usage_matrices(T: int) -> list[FloatArray]:
    """Per level h, a (T, T_h) 0/1 matrix: entry (t-1, j) is 1 when Algorithm 2 adds residue j+1
    of level h to reconstruct x_t."""
    hs = levels(T, FANOUT)
    top = len(hs) - 1
    use = [np.zeros((T, level_count(T, FANOUT, h))) for h in hs]
    for t in range(1, T + 1):
        for h, lo, hi in reconstruction_terms(t, FANOUT, top):
            use[h][t - 1, lo - 1 : hi] = 1.0
    return use


def query_matrix(T: int, task: str) -> FloatArray:
    """Rows = the task's queries as 0/1 combinations of x_1..x_T."""
    if task == "mean":
        return np.eye(T)
    if task == "prefix":
        return np.tril(np.ones((T, T)))
    if task == "all":
        i, j = np.triu_indices(T)  # ranges [i+1, j+1]
        cols = np.arange(T)
        return ((cols[None, :] >= i[:, None]) & (cols[None, :] <= j[:, None])).astype(np.float64)
    raise ValueError(f"unknown task {task!r}")


def coefficient_sums(T: int, task: str) -> FloatArray:
    """(H, queries): a_{h,q}, the sum over level-h residues of query q's squared coefficient."""
    Q = query_matrix(T, task)
    return np.array([((Q @ u) ** 2).sum(axis=1) for u in usage_matrices(T)])


def level_sigma2(setting: Setting, eps: Fraction) -> list[Fraction]:
    """sigma_h^2: 004 Lemma 1's value MSE at d'_h = d T_h + s divided by d'_h (exact)."""
    out = []
    for h in levels(setting.T, FANOUT):
        d_prime = setting.d * level_count(setting.T, FANOUT, h) + setting.s
        design = ExSubDesign.for_budget(d_prime, setting.s, eps)
        out.append(design.value_mse() / d_prime)
    return out


def query_variances(sig: FloatArray, a: FloatArray, W: FloatArray, n: int) -> FloatArray:
    """Per-query variance of one dimension: sum_h sigma_h^2 a_{h,q} / (n W_h)."""
    with np.errstate(divide="ignore"):
        out: FloatArray = ((sig / W)[:, None] * a).sum(axis=0) / n
    return out


def predicted(
    sig: FloatArray, a: FloatArray, W: FloatArray, setting: Setting
) -> tuple[float, float]:
    """(MSE per query and dimension, expected TVE summed over queries and dimensions)."""
    var = query_variances(sig, a, W, setting.n)
    return float(var.mean()), math.sqrt(2 / math.pi) * setting.d * float(np.sqrt(var).sum())


def best_tve_portions(sig: FloatArray, a: FloatArray, iterations: int = 20000) -> FloatArray:
    """Minimize sum_q sqrt(sum_h sigma_h^2 a_{h,q} / W_h) over the simplex by exponentiated
    gradient (a step of 0.5 on the largest coordinate); convex, so the minimum is global."""
    A = sig[:, None] * a
    W = np.full(len(sig), 1.0 / len(sig))
    for _ in range(iterations):
        root = np.sqrt((A / W[:, None]).sum(axis=0))
        grad = -((A / W[:, None] ** 2) / (2 * root)).sum(axis=1)
        W = W * np.exp(-0.5 * grad / np.abs(grad).max())
        W /= W.sum()
    return W


def normalized(v: FloatArray) -> FloatArray:
    out: FloatArray = v / v.sum()
    return out


def vi_d_portions(T: int) -> FloatArray:
    return np.array([float(w) for w in level_weights(T, FANOUT, "calibrated")])


def portions_for(T: int, sig: FloatArray, a: FloatArray, best: bool) -> dict[str, FloatArray]:
    c = sig * a.sum(axis=1)
    out = {
        "uniform": np.full(len(sig), 1.0 / len(sig)),
        "VI-D": vi_d_portions(T),
        "prop-c": normalized(c),
        "sqrt-c": normalized(np.sqrt(c)),
    }
    if best:
        out["best-TVE"] = best_tve_portions(sig, a)
    return out


def identity_check(sig: list[Fraction], A: FloatArray) -> tuple[bool, float]:
    """Exact: with W_h = c_h / C, sum_h c_h / W_h equals H C, the uniform error. Returns whether
    the three agree, and (sum_h sqrt c_h)^2 / (H C), the sqrt minimizer's relative error."""
    c = [s * round(float(x)) for s, x in zip(sig, A, strict=True)]
    H, C = len(c), sum(c, Fraction(0))
    prop = sum((ch / (ch / C) for ch in c), Fraction(0))
    uniform = sum((ch / Fraction(1, H) for ch in c), Fraction(0))
    sqrt_err = sum(math.sqrt(ch) for ch in c) ** 2
    return prop == uniform == H * C, sqrt_err / float(H * C)


def analytic(settings: list[Setting], epsilons: list[Fraction], best: bool) -> None:
    for eps in epsilons:
        for st in settings:
            sig_exact = level_sigma2(st, eps)
            sig = np.array([float(v) for v in sig_exact])
            a_prefix = coefficient_sums(st.T, "prefix")
            A_prefix = a_prefix.sum(axis=1)
            W = portions_for(st.T, sig, a_prefix, best=False)
            print(f"\n## {st.name}: n={st.n} T={st.T} d={st.d} s={st.s} eps={eps} (r={FANOUT})")
            print("Per level (A_h and the c-based portions for prefix queries):")
            print("|  h | T_h | sigma_h^2 | A_h (prefix) | W VI-D | W prop-c | W sqrt-c |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            for i, h in enumerate(levels(st.T, FANOUT)):
                print(
                    f"| {h:2d} | {level_count(st.T, FANOUT, h):3d} | {sig[i]:9.2f} "
                    f"| {A_prefix[i]:12.0f} | {W['VI-D'][i]:.3f} | {W['prop-c'][i]:.3f} "
                    f"| {W['sqrt-c'][i]:.3f} |"
                )
            print("\nPredicted ratios to uniform portions, MSE / expected TVE:")
            kinds = ["VI-D", "prop-c", "sqrt-c"] + (["best-TVE"] if best else [])
            print("| task | uniform MSE | uniform TVE | " + " | ".join(kinds) + " |")
            print("|---|---:|---:|" + "---:|" * len(kinds))
            checks = []
            for task in TASKS:
                a = a_prefix if task == "prefix" else coefficient_sums(st.T, task)
                ws = portions_for(st.T, sig, a, best=best)
                u_mse, u_tve = predicted(sig, a, ws["uniform"], st)
                cells = []
                for k in kinds:
                    mse, tve = predicted(sig, a, ws[k], st)
                    cells.append(
                        f"TVE x{tve / u_tve:.3f}"
                        if k == "best-TVE"
                        else f"{mse / u_mse:.3f} / {tve / u_tve:.3f}"
                    )
                print(f"| {task} | {u_mse:.4g} | {u_tve:.4g} | " + " | ".join(cells) + " |")
                checks.append((task, *identity_check(sig_exact, a.sum(axis=1))))
            print("\nIdentity check (exact rationals): W_h = c_h / C gives sum_h c_h / W_h = H C,")
            print("the uniform error; (sum sqrt c_h)^2 / (H C) is the minimizer's error ratio.")
            for task, ok, ratio in checks:
                print(
                    f"  {task:6s}: prop-c == uniform == H C exactly: {ok}; MSE sqrt-c / uniform = {ratio:.3f}"
                )


# --- simulation part ------------------------------------------------------------------------


def run_protocol(
    x: IntArray, W: FloatArray, eps: Fraction, s: int, rng: np.random.Generator
) -> FloatArray:
    """004 Section IV with ExSub: each user reports one level drawn with portions W; the server
    averages per level and reconstructs with Algorithm 2. Returns (T, d) mean estimates."""
    n, T, d = x.shape
    hs = levels(T, FANOUT)
    level_of = rng.choice(len(hs), size=n, p=W)
    ests = []
    for i, h in enumerate(hs):
        users = np.flatnonzero(level_of == i)
        t_h = level_count(T, FANOUT, h)
        if len(users) == 0:
            ests.append(np.zeros((t_h, d)))
            continue
        R = padded_residues(x[users], FANOUT, h, s)
        ests.append(exsub_estimates(R, s, eps, rng)[:, : d * t_h].mean(axis=0).reshape(t_h, d))
    return reconstruct(ests, FANOUT, T)


def errors(est: FloatArray, truth: FloatArray) -> dict[str, float]:
    err = est - truth
    T = err.shape[0]
    prefix = np.vstack([np.zeros((1, err.shape[1])), np.cumsum(err, axis=0)])
    i, j = np.triu_indices(T + 1, k=1)
    ranges = prefix[j] - prefix[i]
    return {
        "mean_tve": float(np.abs(err).sum()),
        "prefix_tve": float(np.abs(prefix[1:]).sum()),
        "all_tve": float(np.abs(ranges).sum()),
        "prefix_mse": float((prefix[1:] ** 2).mean()),
        "all_mse": float((ranges**2).mean()),
    }


def predicted_metrics(st: Setting, eps: Fraction, W: FloatArray) -> dict[str, float]:
    sig = np.array([float(v) for v in level_sigma2(st, eps)])
    out = {}
    for task in TASKS:
        mse, tve = predicted(sig, coefficient_sums(st.T, task), W, st)
        out[f"{task}_tve"], out[f"{task}_mse"] = tve, mse
    return out


def simulate(
    settings: list[Setting], epsilons: list[Fraction], repeats: int | None, seed: int
) -> None:
    for eps in epsilons:
        for st in settings:
            reps = repeats if repeats is not None else st.sim_repeats
            sig = np.array([float(v) for v in level_sigma2(st, eps)])
            kinds = {
                "uniform": np.full(len(sig), 1.0 / len(sig)),
                "VI-D": vi_d_portions(st.T),
                "sqrt-c": normalized(np.sqrt(sig * coefficient_sums(st.T, "prefix").sum(axis=1))),
            }
            pred = {k: predicted_metrics(st, eps, W) for k, W in kinds.items()}
            res: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
            t0 = time.monotonic()
            for rep in range(reps):
                ss = np.random.SeedSequence([seed, rep, st.n, st.T, st.d, st.s])
                data_seed, *mech_seeds = ss.spawn(1 + len(kinds))
                x = sparse_streams(st.n, st.T, st.d, st.s, np.random.default_rng(data_seed))
                truth = x.mean(axis=0)
                for (k, W), ms in zip(kinds.items(), mech_seeds, strict=True):
                    est = run_protocol(x, W, eps, st.s, np.random.default_rng(ms))
                    res[k].append(errors(est, truth))
                del x
            secs = time.monotonic() - t0
            print(
                f"\n## simulated {st.name}: n={st.n} T={st.T} d={st.d} s={st.s} eps={eps}, "
                f"{reps} repeats, seed {seed} ({secs:.0f} s)"
            )
            print(
                "ratio = mean(kind) / mean(uniform) over repeats (same data per repeat); "
                "+- = standard error of the per-repeat ratio; pred = analytic prediction"
            )
            print(
                "| metric | uniform measured | uniform pred | VI-D ratio | VI-D pred | sqrt-c ratio | sqrt-c pred |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|")
            for m in METRICS:
                u = np.array([r[m] for r in res["uniform"]])
                cells = [
                    f"{u.mean():.4g} +- {u.std(ddof=1) if reps > 1 else 0:.2g}",
                    f"{pred['uniform'][m]:.4g}",
                ]
                for k in ("VI-D", "sqrt-c"):
                    v = np.array([r[m] for r in res[k]])
                    paired = v / u
                    se = paired.std(ddof=1) / math.sqrt(reps) if reps > 1 else float("nan")
                    cells.append(f"{v.mean() / u.mean():.3f} +- {se:.3f}")
                    cells.append(f"{pred[k][m] / pred['uniform'][m]:.3f}")
                print(f"| {m} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(
            "004 Section VI-D calibrated hierarchy portions against uniform ones: predicted error "
            "ratios from 004 Lemma 1 and Algorithm 2's exact coefficients (default), and "
            "optionally measured ones (--simulate). Settings: T32 = n 20000, T 32, d 12, s 8 "
            "(004's TRAJECTORY shape); T128 = n 100000, T 128, d 8, s 20 (004 Fig. 9)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--settings",
        nargs="+",
        choices=sorted(SETTINGS),
        default=["T32", "T128"],
        help="settings of the analytic part",
    )
    parser.add_argument(
        "--eps",
        nargs="+",
        type=Fraction,
        default=[Fraction(1)],
        help="privacy budgets (fractions such as 3/10 allowed)",
    )
    parser.add_argument(
        "--no-best",
        action="store_true",
        help="skip the best-possible-TVE search (a few seconds per setting)",
    )
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="also measure the ratios by simulating the protocol (slow)",
    )
    parser.add_argument(
        "--sim-settings",
        nargs="+",
        choices=sorted(SETTINGS),
        default=["T32"],
        help="settings to simulate (T128 is slow: ~36 s per repeat, 4 GB of memory)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="simulation repeats per setting; default: 40 for T32 (about 1.3 minutes on 2 "
        "cores) and 12 for T128 (about 7 minutes; its range errors vary by 30-40%% between "
        "repeats, so fewer than ~10 repeats say little)",
    )
    parser.add_argument("--seed", type=int, default=0, help="simulation seed")
    args = parser.parse_args()
    analytic([SETTINGS[name] for name in args.settings], args.eps, best=not args.no_best)
    if args.simulate:
        simulate([SETTINGS[name] for name in args.sim_settings], args.eps, args.repeats, args.seed)


if __name__ == "__main__":
    main()
