"""004's SUCCINCT row: what the authors' integer storage and the un-debiased clip change.

`wevent reproduce exsub-tables` runs ``succinct`` (`wevent.mechanisms.exsub_competitors`): a
user sends ``v = clip(S, -D, D) + Laplace(2 D / eps)``, S = sum_j R_j g_j over its s non-zero
entries (a sum of s uniform signs), D = sqrt(s ln n) / 2.5, and the estimate of entry j is the
real ``g_j v``. The authors' ``succinct.py`` (github.com/wangsw/OnlineLDP at ea6fb02, line 81)
stores ``g_j v`` in an integer array, i.e. truncates it towards 0. This script computes, exactly
from the Laplace distribution function (no sampling), per setting (s, n) of Tables II and IV
and eps:

* ``gain``: E[estimate of a +1 entry] with the real estimate (`succinct_gain`; not debiased,
  as in the authors' code) and ``gain, int``: the same with the truncation;
* ``sd ratio, zero entry``: sd of trunc(g_j v) over sd of g_j v for a zero entry (g_j is then
  independent of v, so the ratio is sqrt(E[trunc(v)^2] / E[v^2]));
* ``bias^2 / var``: the squared bias the un-debiased gain adds to one entry's mean estimate,
  (1 - gain)^2 E[m_j^2], over that estimate's variance E[v^2] / n, where m_j is the entry's
  true mean over the n users (E[m_j^2] = (s / dT) / n: each user's entry is +-1 with
  probability s / dT, dT = d' - s data entries); n cancels. ``rms true mean`` is
  sqrt((s / dT) / n).
"""

from __future__ import annotations

import argparse
import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.experiments.exsub_tables import OFFLINE_EPSILONS
from wevent.mechanisms.exsub_competitors import Succinct, succinct_gain

FloatArray = npt.NDArray[np.float64]
SETTINGS = ((8, 128, 10_000), (8, 128, 50_000), (100, 1024, 50_000), (100, 512, 50_000))


def _laplace_cdf(x: FloatArray, scale: float) -> FloatArray:
    out: FloatArray = np.where(
        x < 0, 0.5 * np.exp(np.minimum(x, 0) / scale), 1 - 0.5 * np.exp(-np.maximum(x, 0) / scale)
    )
    return out


def _trunc_moments(centre: float, scale: float) -> tuple[float, float]:
    """(E[trunc(c + L)], E[trunc(c + L)^2]) for L ~ Laplace(scale), trunc towards 0."""
    k = np.arange(1, int(abs(centre) + 60 * scale) + 2, dtype=np.float64)
    # trunc = k: k <= v < k + 1; trunc = -k: -k - 1 < v <= -k
    up = _laplace_cdf(k + 1 - centre, scale) - _laplace_cdf(k - centre, scale)
    down = _laplace_cdf(-k - centre, scale) - _laplace_cdf(-k - 1 - centre, scale)
    return float((k * (up - down)).sum()), float((k * k * (up + down)).sum())


def _clipped_sums(s: int, clip: float, offset: int = 0) -> list[tuple[float, float]]:
    """(c, P[clip(offset + S) = c]) for S a sum of s uniform signs."""
    out: dict[float, float] = {}
    for k in range(s + 1):
        c = max(-clip, min(clip, offset + 2 * k - s))
        out[c] = out.get(c, 0.0) + math.comb(s, k) / 2.0**s
    return sorted(out.items())


def figures(s: int, d_prime: int, users: int, eps: Fraction) -> dict[str, float]:
    mech = Succinct(s, eps, users)
    clip, scale = mech.clip, mech.scale
    ev2 = sum(p * c * c for c, p in _clipped_sums(s, clip)) + 2 * scale**2
    et2 = sum(p * _trunc_moments(c, scale)[1] for c, p in _clipped_sums(s, clip))
    # a +1 entry with g_j = +1 (by symmetry the estimate's mean is the same for g_j = -1):
    # v = clip(1 + W) + L, W a sum of s - 1 uniform signs
    gain_int = sum(p * _trunc_moments(c, scale)[0] for c, p in _clipped_sums(s - 1, clip, 1))
    gain = succinct_gain(s, clip)
    share = s / (d_prime - s)
    return {
        "gain": gain,
        "gain_int": gain_int,
        "sd_ratio": math.sqrt(et2 / ev2),
        "bias_var": (1 - gain) ** 2 * share / ev2,
        "rms_mean": math.sqrt(share / users),
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    print(
        "| s | d' | n | eps | gain | gain, int | sd ratio, zero entry | bias^2 / var "
        "| rms true mean |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s, d_prime, users in SETTINGS:
        for eps in OFFLINE_EPSILONS:
            f = figures(s, d_prime, users, eps)
            print(
                f"| {s} | {d_prime} | {users} | {eps} | {f['gain']:.3f} | {f['gain_int']:.3f} "
                f"| {f['sd_ratio']:.3f} | {f['bias_var']:.1e} | {f['rms_mean']:.4f} |"
            )


if __name__ == "__main__":
    main()
