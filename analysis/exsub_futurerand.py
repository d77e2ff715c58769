"""004's FutureRand row: how the authors' ``futurerand.py`` differs from our eps-LDP variant.

`wevent reproduce exsub-tables` runs ``futurerand`` (`wevent.mechanisms.exsub_competitors`):
per-entry response at eps' = eps / (5 sqrt(s)) with the likelihood ratio against the uniform
report clipped to [e^-eps/2, e^eps/2]. The authors' code (github.com/wangsw/OnlineLDP,
``futurerand.py``, as read) uses the same eps' but (a) truncates by re-drawing the reversed
entries when the number of reversals leaves the window [s p - 2 sqrt(s), (s / eps')
ln(2 e^eps' / (e^eps' + 1))] (p = 1 / (e^eps' + 1)), which is not eps-LDP
(`authors_futurerand_ratio`: the exact worst ratio), and (b) debiases with the rates mixed by
the probability E of leaving that window, ``(1 - E)(1 - 2p)`` in place of our ``2 q - 1``.
For a zero entry (all but s of the entries) the estimate is a uniform +-1 over that
denominator, so its standard deviation grows by ``(2 q - 1) / ((1 - E)(1 - 2p))``; this script
prints that factor beside the worst log-ratio, for Tables II (s = 8) and IV (s = 100). It is a
model of the zero entries only; a candidate cause for the printed row, not a simulation.

The worst log-ratio is that of a sign-reporting reading of the authors' code. As written, it
reports a non-zero entry as the bit pair (0, 0) or (1, 1) and a zero entry as (1, 0) or (0, 1)
(``futurerand.py`` at ea6fb02, lines 57, 64-79): the sign is never sent, every report reveals
the support, so it is not eps-LDP at any eps, and its decoder (line 102) reads the non-zero
entries as 0. A second table gives, per eps, the first s at which our clip binds and how far
(total variation) it moves our reversal count from plain per-entry response at s = 8 and 100.
"""

from __future__ import annotations

import argparse
import math
from fractions import Fraction

from wevent.experiments.exsub_tables import OFFLINE_EPSILONS
from wevent.mechanisms.exsub_competitors import FutureRand, authors_futurerand_ratio


def authors_exit_probability(s: int, eps: Fraction) -> float:
    """E = P[Binomial(s, p) outside the window] (``exceedprob`` in futurerand.py)."""
    e1 = float(eps) / (5 * math.sqrt(s))
    keep = math.exp(e1) / (math.exp(e1) + 1)
    p = 1 - keep
    lo = s * p - 2 * math.sqrt(s)
    hi = s / e1 * math.log(2 * math.exp(e1) / (math.exp(e1) + 1))
    inside = sum(
        math.comb(s, r) * keep ** (s - r) * p**r
        for r in range(max(math.ceil(lo), 0), min(math.floor(hi), s) + 1)
    )
    return 1 - inside


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    print("| s | eps | worst ln ratio, authors' truncation | E | sd factor, authors / ours |")
    print("|---|---|---|---|---|")
    for s in (8, 100):
        for eps in OFFLINE_EPSILONS:
            e1 = float(eps) / (5 * math.sqrt(s))
            keep = math.exp(e1) / (math.exp(e1) + 1)
            exit_p = authors_exit_probability(s, eps)
            ours = 2 * FutureRand(s, eps).agreement - 1
            authors = (1 - exit_p) * (2 * keep - 1)
            ln_ratio = math.log(authors_futurerand_ratio(s, eps))
            print(f"| {s} | {eps} | {ln_ratio:.1f} | {exit_p:.3f} | {ours / authors:.2f} |")
    print()
    print("Our clip: the first s at which it binds, and the total variation distance between")
    print("our reversal count and plain per-entry response at eps' (no clip) at s = 8 and 100.")
    print()
    print("| eps | clip binds from s | TV at s = 8 | TV at s = 100 |")
    print("|---|---|---|---|")
    for eps in sorted({*OFFLINE_EPSILONS, Fraction(2), Fraction(10)}):
        first = next(s for s in range(1, 1000) if clip_binds(s, eps))
        tv8, tv100 = clip_distance(8, eps), clip_distance(100, eps)
        print(f"| {eps} | {first} | {tv8:.1e} | {tv100:.1e} |")


def clip_binds(s: int, eps: Fraction) -> bool:
    """Whether some clipped ratio c(h) differs from the unclipped w(h)."""
    mech = FutureRand(s, eps)
    p = mech.keep
    plain = [2**s * p ** (s - h) * (1 - p) ** h for h in range(s + 1)]
    return not all(math.isclose(a, b) for a, b in zip(plain, mech.clipped_ratios(), strict=True))


def clip_distance(s: int, eps: Fraction) -> float:
    """TV between our reversal-count distribution and Binomial(s, 1 - keep)."""
    mech = FutureRand(s, eps)
    p = mech.keep
    plain = [math.comb(s, h) * p ** (s - h) * (1 - p) ** h for h in range(s + 1)]
    return 0.5 * sum(abs(a - b) for a, b in zip(plain, mech.reversal_probabilities(), strict=True))


if __name__ == "__main__":
    main()
