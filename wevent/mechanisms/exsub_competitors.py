"""004's offline competitors (Tables II and IV): Collision, SUCCINCT and FutureRand.

Each mechanism is a local randomizer over one user's padded s-sparse ternary vector R (d'
entries, exactly s of them +-1, as `wevent.mechanisms.exsub_baselines` takes them) together
with the server's per-entry value estimate; ``*_estimates`` returns one estimate row per user
(shape (n, d')), so the mean over users is the server's offline mean of 004 Section VI. No
post-processing: 004 Tables II and IV print "error results without post-processing".

The "public" randomness of Collision and SUCCINCT (a hash seeded per user and sent with the
report, as in the authors' code) is drawn here as fresh uniform values per user and entry,
the idealized hash those mechanisms are analysed with. Parameters are taken from the authors'
public code, github.com/wangsw/OnlineLDP (files named below; facts only, nothing copied).

* **Collision** [22] (004 Table II/IV row "Collision"; ``collision.py``): the 2 d' symbols
  (entry j at +1 is symbol j, at -1 symbol j + d') are hashed into t = floor(s e^eps + 2 s - 1)
  buckets (``bestOutputsize``). With C the set of buckets the user's s symbols hash to, the
  report z is a bucket in C with probability e^eps / N each, N = s e^eps + t - s, and a bucket
  outside C with probability (N - |C| e^eps) / ((t - |C|) N) each (``coreRandomizer``). The
  server counts a hit for every symbol hashing to z; a held symbol hits with probability
  e^eps / N, any other with 1 / t (its hash is independent of z), so
  ``(hit_j+ - hit_j-) / (e^eps / N - 1 / t)`` is unbiased for R_j.
  *eps-LDP:* given the hash (independent of the data), every bucket has probability in
  [1 / N, e^eps / N] (outside C: (N - c e^eps) / (t - c) >= 1 since (s - c)(e^eps - 1) >= 0,
  and <= e^eps since s <= t), so any two inputs' output probabilities differ by at most e^eps.
* **SUCCINCT** [23] (``succinct.py``): public uniform signs g_j in {-1, 1}; the user sends
  ``v = clip(sum_j R_j g_j, -D, D) + Laplace(2 D / eps)``, D = sqrt(s ln n) / 2.5 with n the
  number of users (``__setparams``, which credits github.com/DPSparseVector/dp-sparse); the
  estimate of R_j is ``g_j v``. *eps-LDP:* given g, two inputs' clipped sums differ by at most
  2 D, and the Laplace mechanism with scale 2 D / eps bounds the density ratio by e^eps.
  The clipping biases the estimate towards 0 when D < s: ``E[g_j v] = R_j gain(s, D)``
  (`succinct_gain`), as in [23] and the authors' code; the authors' code also stores
  ``g_j v`` in an integer array (truncating towards 0, ``succinct.py`` line 81), which we do
  not do (`analysis/exsub_succinct.py` gives its effect).
* **FutureRand** [29] (004 Section II: "randomizing every value with binary randomized
  response while truncating sensitive outputs to save budget to O(sqrt(s))";
  ``futurerand.py``): every zero entry reports a uniform +-1, every non-zero entry its sign,
  reversed with probability 1 / (e^eps' + 1), eps' = eps / (5 sqrt(s)) (``__setparams``,
  ``epnow``). The authors' code reports a non-zero entry as the bit pair (0, 0) or (1, 1),
  never its sign (``futurerand.py`` lines 57, 64-79), so every report reveals the support:
  not eps-LDP at any eps. Read as reporting signs, its truncation (outside a window on the
  number of reversals, re-draw the reversed entries uniformly) is still not eps-LDP
  (`authors_futurerand_ratio` computes its exact worst ratio), so we truncate the other way: the likelihood ratio of the s non-zero
  entries' report against the uniform one, ``w(h) = 2^s p^(s - h) (1 - p)^h`` for h
  reversals (p = e^eps' / (e^eps' + 1)), is clipped to [e^-eps/2, e^eps/2] and renormalized:
  ``P[report] = 2^-(d' - s) c(h) / Z``, c = the clipped w, ``Z = sum_h C(s, h) c(h)``.
  *eps-LDP:* every input has s non-zero entries, so any two inputs' probabilities of a report
  are 2^-(d' - s) c(h) / Z and 2^-(d' - s) c(h') / Z, whose ratio is at most
  e^(eps/2) / e^(-eps/2) = e^eps. The estimate ``y_j / (2 q - 1)``, q = P[a non-zero entry is
  reported with its sign] = ``sum_h P[h reversals] (1 - h / s)``, is unbiased. Where the
  clip binds: ``s ln(2 p)`` is at most s eps' / 2 = sqrt(s) eps / 10 and
  ``s ln(2 (1 - p))`` about -sqrt(s) eps / 10 - eps^2 / 200, inside +-eps/2 for s <= 24 at
  eps <= 2; the eps^2 term moves the first binding s to 24 at eps = 3, 23 at 5, 21 at 10
  (tested). So Table II's s = 8 runs plain per-entry response (spending sqrt(8) eps / 5) and
  at Table IV's s = 100 the clip moves the reversal count by a total variation of at most
  ~4.2e-8 (`analysis/exsub_futurerand.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError

__all__ = [
    "COMPETITORS",
    "Collision",
    "FutureRand",
    "Succinct",
    "authors_futurerand_ratio",
    "collision_estimates",
    "collision_hits",
    "futurerand_estimates",
    "futurerand_reports",
    "sample_futurerand",
    "succinct_estimates",
    "succinct_gain",
    "succinct_reports",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

COMPETITORS = ("collision", "succinct", "futurerand")


def _check(R: IntArray, s: int, eps: Fraction) -> tuple[IntArray, IntArray]:
    """The s non-zero positions of every row and their signs; refuses other shapes."""
    if not eps > 0:
        raise BudgetError(f"need eps > 0, got {eps}")
    if R.ndim != 2 or ((R != 0).sum(axis=1) != s).any() or (np.abs(R) > 1).any():
        raise BudgetError(f"every row needs exactly s = {s} entries in {{-1, 1}}, the rest 0")
    pos = np.argsort(R == 0, axis=1, kind="stable")[:, :s]
    return pos, np.take_along_axis(R, pos, axis=1)


@dataclass(frozen=True)
class Collision:
    """Collision's parameters at (s, eps) (module docstring; ``collision.py``)."""

    s: int
    eps: Fraction

    @property
    def weight(self) -> float:
        return math.exp(float(self.eps))

    @property
    def t(self) -> int:
        return int(self.s * self.weight + 2 * self.s - 1)

    @property
    def normalizer(self) -> float:
        return self.s * self.weight + self.t - self.s

    @property
    def true_rate(self) -> float:
        return self.weight / self.normalizer

    @property
    def false_rate(self) -> float:
        return 1 / self.t

    def bucket_probability(self, bucket: int, held: frozenset[int]) -> float:
        """P[z = bucket] when the user's symbols hash to the buckets ``held``."""
        if bucket in held:
            return self.true_rate
        return (self.normalizer - len(held) * self.weight) / (
            (self.t - len(held)) * self.normalizer
        )


def collision_hits(R: IntArray, s: int, eps: Fraction, rng: np.random.Generator) -> BoolArray:
    """Collision's reports as the server reads them: per user, which of the 2 d' symbols hash
    to the reported bucket (symbol j: entry j at +1; symbol j + d': entry j at -1)."""
    pos, sign = _check(R, s, eps)
    n, d_prime = R.shape
    mech = Collision(s, eps)
    t = mech.t
    hashes = rng.integers(0, t, size=(n, 2 * d_prime), dtype=np.int32)
    held = np.take_along_axis(hashes, pos + d_prime * (sign < 0), axis=1)
    srt = np.sort(held, axis=1)
    first = np.ones_like(srt, dtype=bool)
    first[:, 1:] = srt[:, 1:] != srt[:, :-1]
    c = first.sum(axis=1)
    in_c = rng.random(n) < c * mech.true_rate
    # a bucket of C uniformly: the k-th distinct held bucket
    k = np.minimum((rng.random(n) * c).astype(np.int64), c - 1)
    kth = np.argmax(np.cumsum(first, axis=1) > k[:, None], axis=1)
    z_in = srt[np.arange(n), kth]
    # a bucket outside C uniformly: the k-th of range(t) skipping the held buckets
    z_out = np.minimum((rng.random(n) * (t - c)).astype(np.int64), t - c - 1)
    for j in range(s):
        z_out += first[:, j] & (srt[:, j] <= z_out)
    z = np.where(in_c, z_in, z_out).astype(np.int32)
    hits: BoolArray = hashes == z[:, None]
    return hits


def collision_estimates(R: IntArray, s: int, eps: Fraction, rng: np.random.Generator) -> FloatArray:
    """Per-user unbiased value estimates ``(hit_j+ - hit_j-) / (e^eps / N - 1 / t)``."""
    d_prime = R.shape[1]
    hits = collision_hits(R, s, eps, rng).astype(np.float64)
    mech = Collision(s, eps)
    est: FloatArray = (hits[:, :d_prime] - hits[:, d_prime:]) / (mech.true_rate - mech.false_rate)
    return est


@dataclass(frozen=True)
class Succinct:
    """SUCCINCT's parameters at (s, eps, n users) (module docstring; ``succinct.py``)."""

    s: int
    eps: Fraction
    users: int

    @property
    def clip(self) -> float:
        return math.sqrt(self.s * math.log(self.users)) / 2.5

    @property
    def scale(self) -> float:
        return 2 * self.clip / float(self.eps)


def succinct_gain(s: int, clip: float) -> float:
    """``E[clip(1 + W, -clip, clip)]`` for W a sum of s - 1 uniform signs: the factor by which
    SUCCINCT's estimate of a non-zero entry shrinks (1 when clip >= s)."""
    total = 0.0
    for k in range(s):  # k of the s - 1 other signs are +1
        w = 1 + 2 * k - (s - 1)
        total += math.comb(s - 1, k) * max(-clip, min(clip, w))
    return total / 2.0 ** (s - 1)


def succinct_reports(
    R: IntArray, s: int, eps: Fraction, rng: np.random.Generator, users: int
) -> tuple[IntArray, FloatArray]:
    """Per user: the public signs g (n, d') and the noisy clipped sum v (n,)."""
    _check(R, s, eps)
    if users < 2:
        raise BudgetError(f"SUCCINCT's clip needs at least 2 users, got {users}")
    mech = Succinct(s, eps, users)
    n, d_prime = R.shape
    g = 2 * rng.integers(0, 2, size=(n, d_prime)) - 1
    total = (R * g).sum(axis=1).astype(np.float64)
    v: FloatArray = np.clip(total, -mech.clip, mech.clip) + rng.laplace(0.0, mech.scale, n)
    return g, v


def succinct_estimates(
    R: IntArray, s: int, eps: Fraction, rng: np.random.Generator, users: int
) -> FloatArray:
    """Per-user estimates ``g_j v`` (mean ``gain R_j``, `succinct_gain`)."""
    g, v = succinct_reports(R, s, eps, rng, users)
    est: FloatArray = g * v[:, None]
    return est


@dataclass(frozen=True)
class FutureRand:
    """Our eps-LDP FutureRand at (s, eps): the authors' eps' and per-entry response, the
    likelihood ratio clipped (module docstring)."""

    s: int
    eps: Fraction

    @property
    def eps_entry(self) -> float:
        return float(self.eps) / (5 * math.sqrt(self.s))

    @property
    def keep(self) -> float:
        e = math.exp(self.eps_entry)
        return e / (e + 1)

    def clipped_ratios(self) -> list[float]:
        """c(h), h = 0 .. s: the non-zero entries' report probability over the uniform one,
        clipped to [e^-eps/2, e^eps/2]."""
        p, half = self.keep, float(self.eps) / 2
        out = []
        for h in range(self.s + 1):
            log_w = self.s * math.log(2) + (self.s - h) * math.log(p) + h * math.log(1 - p)
            out.append(math.exp(min(half, max(-half, log_w))))
        return out

    def reversal_probabilities(self) -> list[float]:
        """P[h of the s non-zero entries are reported reversed], h = 0 .. s."""
        c = self.clipped_ratios()
        mass = [math.comb(self.s, h) * c[h] for h in range(self.s + 1)]
        z = sum(mass)
        return [m / z for m in mass]

    def report_probability(self, reversals: int, d_prime: int) -> float:
        """P[one given report] with ``reversals`` non-zero entries reported reversed."""
        c = self.clipped_ratios()
        z = sum(math.comb(self.s, h) * c[h] for h in range(self.s + 1))
        return c[reversals] / z / 2.0 ** (d_prime - self.s)

    @property
    def agreement(self) -> float:
        """q = P[a non-zero entry is reported with its own sign]."""
        return sum(p * (1 - h / self.s) for h, p in enumerate(self.reversal_probabilities()))


def futurerand_reports(R: IntArray, s: int, eps: Fraction, rng: np.random.Generator) -> IntArray:
    """Per user the reported vector y in {-1, 1}^d' (`sample_futurerand` at (s, eps))."""
    return sample_futurerand(R, FutureRand(s, eps), rng)


def sample_futurerand(R: IntArray, mech: FutureRand, rng: np.random.Generator) -> IntArray:
    """Per user the reported vector y in {-1, 1}^d' of ``mech``: every zero entry a uniform
    +-1; the number h of reversed non-zero entries drawn from ``mech.reversal_probabilities()``
    (the clipped distribution, module docstring) and a uniform h of the s signs reversed. Takes
    the mechanism so that tests can drive it with one whose clip binds hard."""
    s, eps = mech.s, mech.eps
    pos, sign = _check(R, s, eps)
    n, d_prime = R.shape
    y: IntArray = 2 * rng.integers(0, 2, size=(n, d_prime)) - 1
    h = np.asarray(rng.choice(s + 1, size=n, p=np.array(mech.reversal_probabilities())))
    rank = np.argsort(rng.random((n, s)), axis=1).argsort(axis=1)  # a uniform permutation
    reported = np.where(rank < h[:, None], -sign, sign)
    np.put_along_axis(y, pos, reported, axis=1)
    return y


def futurerand_estimates(
    R: IntArray, s: int, eps: Fraction, rng: np.random.Generator
) -> FloatArray:
    """Per-user unbiased estimates ``y_j / (2 q - 1)``."""
    y = futurerand_reports(R, s, eps, rng)
    est: FloatArray = y / (2 * FutureRand(s, eps).agreement - 1)
    return est


def authors_futurerand_ratio(s: int, eps: Fraction) -> float:
    """The largest ratio, over reports and pairs of s-sparse inputs, of the report's
    probabilities under the authors' truncation (``futurerand.py``: window
    [m p - 2 sqrt(m), (m / eps') ln(2 e^eps' / (e^eps' + 1))] on the number of reversals, p
    the reversal probability; outside it the reversed entries are re-drawn uniformly). A
    report reversing h of the s non-zero entries has probability, over the uniform one,
    ``2^s [h in W] p_k^(s-h) p^h + 2^s sum_(j not in W, j >= h) C(s - h, j - h) p_k^(s-j) p^j
    2^-j``; every h is reachable from some input, so the ratio is max over min."""
    e1 = float(eps) / (5 * math.sqrt(s))
    p = 1 / (math.exp(e1) + 1)
    pk = 1 - p
    lo = s * p - 2 * math.sqrt(s)
    hi = s / e1 * math.log(2 * math.exp(e1) / (math.exp(e1) + 1))

    def inside(j: int) -> bool:
        return lo <= j <= hi

    vals = []
    for h in range(s + 1):
        v = pk ** (s - h) * p**h if inside(h) else 0.0
        v += sum(
            math.comb(s - h, j - h) * pk ** (s - j) * p**j / 2.0**j
            for j in range(h, s + 1)
            if not inside(j)
        )
        vals.append(v)
    return float(max(vals) / min(vals))
