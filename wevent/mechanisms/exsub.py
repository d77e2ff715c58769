"""The (d', s, eps, m)-ExSub mechanism for s-sparse ternary vectors (004 Section V).

Input: a ternary vector ``R`` in {-1,0,1}^{d'} with exactly s non-zero entries (stubs pad it to s,
004 Section V "Data Preparation"), seen as the symbol set ``S_R = {i_b : R_i = b}``. Output: an
*exclusive* set ``Z`` of m symbols, never both ``i_+`` and ``i_-`` (004's ``Z^{m+-}``), with

    P[Z | R] = x^{[Z cap S_R = empty]} / Omega,     x = e^-eps        (004 Definition 2)

Omega = 2^m C(d', m) - (1 - x) * #{Z : Z cap S_R = empty}, and the count of exclusive m-sets
missing S_R is ``sum_{m'} C(s, m') C(d'-s, m-m') 2^{m-m'}`` (m' indices of S_R's support taken
with the reversed sign, the rest from the d'-s zero indices with either sign): 004 Definition 2's
Omega. Omega depends only on (d', s, m, x), so every likelihood ratio is 1, x or 1/x: eps-LDP.

Worked example (004 Section V-A, checked in the tests): d'=3, s=1, eps=ln 2, m=2, S_R={2_-}:
the 4 outputs holding 2_- have probability 1/8, the other 8 have 1/16 (004's list prints
{3_+,1_+} twice; the eighth output is {3_+,1_-}).

Subgroups (004 Section V-B): an output is in subgroup (n_t, n_r) when it holds n_t symbols of S_R
and n_r reversed ones; the subgroup has ``l = C(s,n_t) C(s-n_t,n_r) C(d'-s, n_f) 2^{n_f}``
members, n_f = m - n_t - n_r, each of probability ``x^{[n_t = 0]} / Omega``.

What the code does and where it departs from the printed pseudo-code (both printed variants are
kept as ``variant="printed"`` so that the proofs can refute them):

* `choose_subgroup` (004 Algorithm 3, lines 1-8) draws the subgroup with integer weights
  ``l * den(x)`` or ``l * num(x)`` and an exact uniform integer, where ``x`` is the exact rational
  the ledger's evidence records (no float CDF).
* `offline_sample` (Algorithm 3, lines 9-14). Line 13 as printed samples ``n_f`` *symbols* from
  the 2(d'-s) symbols of the zero entries, which can return both i_+ and i_- (not in Z^{m+-}) and
  does not match the subgroup size l. We sample n_f zero *indices*, then a uniform sign for each
  (what l counts, and what Algorithm 4 lines 12-14 do).
* `OnlineSampler` (Algorithm 4): selection sampling (Algorithm S) selects the current element with
  probability (still to select) / (still to see, *including* the current one). Algorithm 4 as
  printed starts the zero-entry counter at d' (not d' - s) and decrements both counters *before*
  the comparison (lines 11-12, 17-18). Read literally (a ratio >= 1, or k/0 with k > 0, selects
  surely), the zero counter then runs exactly as Algorithm S over d' - 1 zeros and the non-zero
  one over s - 1: both coincide with the sound counts when s = 1 and are wrong for s >= 2 (the
  first non-zero entry is selected with probability (n_t+n_r)/(s-1)); `wevent.proofs.exsub` finds the
  counterexample at (d', s, m) = (4, 2, 2). Line 19's ratio is garbled ("nv / num_t"); we use
  n_t / (n_t + n_r) (a true symbol among those still to place). The sound version counts d' - s
  zeros and s non-zeros and compares before decrementing.

Estimators (004 Section V-D, Proposition 1): with the true/reverse/false positive rates
p_t, p_r, p_f, ``([i_+ in Z] - [i_- in Z]) / (p_t - p_r)`` is unbiased for ``R_i`` and
``([i_+ in Z] + [i_- in Z] - 2 p_f) / (p_t + p_r - 2 p_f)`` for ``|R_i|``. We compute the rates
from the subgroups (``p_t = E[n_t]/s``, ``p_r = E[n_r]/s``, ``p_f = E[n_f]/(2(d'-s))``) and test
that they equal 004's closed forms.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from math import ceil, comb
from typing import Protocol

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError
from wevent.accounting.evidence import ExSub as ExSubEvidence
from wevent.errors import SparsityExceeded
from wevent.mechanisms.rounding import exp_upper, float_up

__all__ = [
    "VARIANTS",
    "Chooser",
    "ExSubDesign",
    "OnlineSampler",
    "RandomChooser",
    "SparsityExceeded",
    "choose_m",
    "choose_subgroup",
    "exclusion_weight",
    "offline_sample",
    "output_vector",
]

VARIANTS = ("sound", "printed")


FloatArray = npt.NDArray[np.float64]


class Chooser(Protocol):
    """The mechanism's only source of randomness: a uniform integer in ``[0, n)``.

    The runtime uses `RandomChooser`; the proofs use an enumerating chooser that explores every
    branch with its exact probability 1/n, so a proof is about this code."""

    def below(self, n: int) -> int: ...


class RandomChooser:
    """`Chooser` backed by `random.Random` (exact uniform integers of any size)."""

    def __init__(self, seed: int | random.Random) -> None:
        self.rng = seed if isinstance(seed, random.Random) else random.Random(seed)

    def below(self, n: int) -> int:
        return self.rng.randrange(n)


def exclusion_weight(eps: Fraction) -> Fraction:
    """``x``: the float the sampler uses for e^-eps, rounded up (so ln(1/x) <= eps), as an exact
    rational, and at most 1. The ledger's `wevent.accounting.ExSub` evidence records it.

    e^-eps < 1 for every eps > 0, but the certified upper bound of it (40 digits) can pass 1
    when eps is smaller than that precision, and its float rounded up is then 1 + 2^-52: an
    exclusion weight above 1 favours the outputs that miss the input, a ratio of x > e^eps
    (eps = 10^-400). x = 1 is at least e^-eps and costs ln(1/1) = 0: the uniform output."""
    if eps <= 0:
        raise BudgetError(f"ExSub needs a positive epsilon, got {eps}")
    return min(Fraction(1), Fraction(float_up(exp_upper(-Fraction(eps)))))


def choose_m(d_prime: int, s: int, x: Fraction, task: str = "value") -> int:
    """004 Section V-D / Theorem 2: ``m = ceil(d' / (e^eps s + s + 2))`` for values (mean queries)
    and ``ceil(d' / (e^eps s + 2 s + 1))`` for frequencies, with ``e^eps = 1/x`` exactly."""
    if task == "value":
        m = ceil(Fraction(d_prime) / (s / x + s + 2))
    elif task == "frequency":
        m = ceil(Fraction(d_prime) / (s / x + 2 * s + 1))
    else:
        raise BudgetError(f"unknown task {task!r} (value or frequency)")
    return max(1, min(m, d_prime))


@dataclass(frozen=True)
class ExSubDesign:
    """The probability design of (d', s, eps, m)-ExSub with ``x = e^-eps`` exact (Definition 2)."""

    d_prime: int
    s: int
    m: int
    x: Fraction
    subgroups: tuple[tuple[int, int, int], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("d_prime", "s", "m"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise BudgetError(f"exsub: {name} must be a positive integer, got {v!r}")
        if self.s >= self.d_prime:
            raise BudgetError(f"exsub: need s < d' (got s={self.s}, d'={self.d_prime})")
        if self.m > self.d_prime:
            raise BudgetError(f"exsub: need m <= d' (got m={self.m}, d'={self.d_prime})")
        x = Fraction(self.x)
        if not 0 < x <= 1:
            raise BudgetError(f"exsub: x = e^-eps must be in (0, 1], got {x}")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "subgroups", tuple(subgroup_sizes(self.d_prime, self.s, self.m)))

    @classmethod
    def for_budget(cls, d_prime: int, s: int, eps: Fraction, m: int | None = None) -> ExSubDesign:
        """The design the runtime uses for budget eps: x rounded up, m by 004 Section V-D."""
        x = exclusion_weight(eps)
        return cls(d_prime, s, choose_m(d_prime, s, x) if m is None else m, x)

    @property
    def evidence(self) -> ExSubEvidence:
        return ExSubEvidence(self.d_prime, self.s, self.m, self.x)

    def weight(self, n_t: int) -> Fraction:
        """Unnormalized probability of one output of a subgroup: 1, or x when n_t = 0."""
        return self.x if n_t == 0 else Fraction(1)

    @cached_property
    def omega(self) -> Fraction:
        """The normalization factor (Algorithm 3 line 1; Definition 2)."""
        return sum((size * self.weight(nt) for nt, _, size in self.subgroups), Fraction(0))

    def subgroup_probability(self, n_t: int, n_r: int) -> Fraction:
        for nt, nr, size in self.subgroups:
            if (nt, nr) == (n_t, n_r):
                return size * self.weight(nt) / self.omega
        return Fraction(0)

    def probability(self, z: Sequence[int], r: Sequence[int]) -> Fraction:
        """P[Z | R] of Definition 2, for ternary vectors z (the output) and r (the input)."""
        if len(z) != self.d_prime or len(r) != self.d_prime:
            raise BudgetError("exsub: vectors must have d' entries")
        if sum(1 for v in z if v) != self.m:
            return Fraction(0)
        hit = any(a != 0 and a == b for a, b in zip(z, r, strict=True))
        return (Fraction(1) if hit else self.x) / self.omega

    def rates(self) -> tuple[Fraction, Fraction, Fraction]:
        """``(p_t, p_r, p_f)`` from the subgroup distribution (004 Section V-D)."""
        return self._rates

    @cached_property
    def _rates(self) -> tuple[Fraction, Fraction, Fraction]:
        om = self.omega
        et = er = ef = Fraction(0)
        for nt, nr, size in self.subgroups:
            w = size * self.weight(nt) / om
            et += w * nt
            er += w * nr
            ef += w * (self.m - nt - nr)
        return et / self.s, er / self.s, ef / (2 * (self.d_prime - self.s))

    def rates_closed_form(self) -> tuple[Fraction, Fraction, Fraction]:
        """004 Section V-D's printed formulas for p_t, p_f, p_r (same order as `rates`)."""
        d, s, m, x = self.d_prime, self.s, self.m, self.x
        om = self.omega
        base = Fraction(2 ** (m - 1) * comb(d - 1, m - 1))
        c_r = sum(2**k * comb(s - 1, m - 1 - k) * comb(d - s, k) for k in range(m))
        c_f = sum(2**k * comb(s, m - 1 - k) * comb(d - s - 1, k) for k in range(m))
        return base / om, (base - (1 - x) * c_r) / om, (base - (1 - x) * c_f) / om

    def value_mse(self) -> Fraction:
        """004 Lemma 1: E[sum_i (value estimate_i - R_i)^2] over all d' entries."""
        pt, pr, pf = self.rates()
        s, d = self.s, self.d_prime
        return (s * ((pt + pr) - (pt - pr) ** 2) + (d - s) * 2 * pf) / (pt - pr) ** 2

    def frequency_mse(self) -> Fraction:
        """004 Lemma 1: E[sum_i (frequency estimate_i - |R_i|)^2] over all d' entries."""
        pt, pr, pf = self.rates()
        s, d = self.s, self.d_prime
        return (s * (pt + pr) * (1 - pt - pr) + (d - s) * 2 * pf * (1 - 2 * pf)) / (
            pt + pr - 2 * pf
        ) ** 2

    def estimate_values(self, z: npt.ArrayLike) -> FloatArray:
        """Proposition 1: ``([i_+ in Z] - [i_- in Z]) / (p_t - p_r)`` per entry, unbiased for R_i
        (z: output vectors, one per row or a single one)."""
        return np.asarray(z, dtype=np.float64) * float(self.value_scale())

    def estimate_frequencies(self, z: npt.ArrayLike) -> FloatArray:
        """Proposition 1: ``([i_+ in Z] + [i_- in Z] - 2 p_f) / (p_t + p_r - 2 p_f)`` per entry,
        unbiased for |R_i|."""
        pt, pr, pf = self.rates()
        if pt + pr == 2 * pf:
            raise BudgetError("exsub: with x = 1 (eps = 0) the output carries no information")
        hits = np.abs(np.asarray(z, dtype=np.float64))
        out: FloatArray = (hits - float(2 * pf)) / float(pt + pr - 2 * pf)
        return out

    def value_scale(self) -> Fraction:
        """``1 / (p_t - p_r)``: the value estimator multiplies the output vector by this."""
        pt, pr, _ = self.rates()
        if pt == pr:
            raise BudgetError("exsub: with x = 1 (eps = 0) the output carries no information")
        return 1 / (pt - pr)


def subgroup_sizes(d_prime: int, s: int, m: int) -> list[tuple[int, int, int]]:
    """``(n_t, n_r, l)`` for every non-empty subgroup (004 Algorithm 3, lines 3-5)."""
    out = []
    for nt in range(min(m, s) + 1):
        for nr in range(min(m - nt, s - nt) + 1):
            nf = m - nt - nr
            size = comb(s, nt) * comb(s - nt, nr) * comb(d_prime - s, nf) * 2**nf
            if size:
                out.append((nt, nr, size))
    return out


def choose_subgroup(design: ExSubDesign, chooser: Chooser) -> tuple[int, int]:
    """004 Algorithm 3, lines 1-8, exactly: subgroup (n_t, n_r) with probability l x^[n_t=0] / Omega.

    The weights are the integers ``l * den(x)`` (n_t > 0) and ``l * num(x)`` (n_t = 0); one exact
    uniform integer below their sum picks the subgroup."""
    num, den = design.x.numerator, design.x.denominator
    weights = [size * (num if nt == 0 else den) for nt, _, size in design.subgroups]
    u = chooser.below(sum(weights))
    for (nt, nr, _), w in zip(design.subgroups, weights, strict=True):
        if u < w:
            return nt, nr
        u -= w
    raise AssertionError("unreachable: u is below the total weight")  # pragma: no cover


def _uniform_subset(items: Sequence[int], k: int, chooser: Chooser) -> list[int]:
    """k distinct items, uniformly (a partial Fisher-Yates shuffle driven by the chooser)."""
    pool = list(items)
    for i in range(k):
        j = i + chooser.below(len(pool) - i)
        pool[i], pool[j] = pool[j], pool[i]
    return pool[:k]


def _support(r: Sequence[int], s: int) -> list[int]:
    nonzero = [i for i, v in enumerate(r) if v != 0]
    if any(v not in (-1, 0, 1) for v in r):
        raise BudgetError("exsub: the input must be a ternary vector (-1, 0, 1)")
    if len(nonzero) != s:
        raise SparsityExceeded(
            f"exsub: the input has {len(nonzero)} non-zero entries, the mechanism needs exactly "
            f"s = {s} (pad with stubs)"
        )
    return nonzero


def offline_sample(
    design: ExSubDesign,
    r: Sequence[int],
    subgroup: tuple[int, int],
    chooser: Chooser,
    variant: str = "sound",
) -> tuple[int, ...]:
    """004 Algorithm 3, lines 9-14: a uniform output of the given subgroup, as a ternary vector.

    ``variant="printed"`` samples the false symbols from all 2(d'-s) symbols of the zero entries,
    as line 13 prints (the proofs refute it: it can emit i_+ and i_- together)."""
    if len(r) != design.d_prime:
        raise BudgetError(f"exsub: the input has {len(r)} entries, expected d' = {design.d_prime}")
    nt, nr = subgroup
    nf = design.m - nt - nr
    support = _support(r, design.s)
    out = [0] * design.d_prime
    nonzeros = _uniform_subset(support, nt + nr, chooser)  # line 9
    trues = set(_uniform_subset(nonzeros, nt, chooser))  # line 10
    for i in nonzeros:
        out[i] = r[i] if i in trues else -r[i]  # lines 10-11
    zeros = [i for i, v in enumerate(r) if v == 0]
    if variant == "printed":
        symbols = [2 * i + b for i in zeros for b in (0, 1)]  # i_+ as 2i, i_- as 2i + 1
        for sym in _uniform_subset(symbols, nf, chooser):
            i, sign = divmod(sym, 2)
            out[i] = 2 if out[i] != 0 else (1 if sign == 0 else -1)  # 2 marks a clash
        return tuple(out)
    if variant != "sound":
        raise BudgetError(f"unknown ExSub variant {variant!r} (known: {', '.join(VARIANTS)})")
    for i in _uniform_subset(zeros, nf, chooser):  # lines 12-13, by index then sign
        out[i] = 1 if chooser.below(2) == 0 else -1
    return tuple(out)


class OnlineSampler:
    """004 Algorithm 4: given the subgroup chosen before the stream, output each entry's symbol as
    the entry arrives (sequential random sampling, Algorithm S). `step` takes one entry of R in
    order and returns the output entry (+1 for i_+, -1 for i_-, 0 for none)."""

    def __init__(
        self,
        design: ExSubDesign,
        subgroup: tuple[int, int],
        chooser: Chooser,
        variant: str = "sound",
    ) -> None:
        if variant not in VARIANTS:
            raise BudgetError(f"unknown ExSub variant {variant!r} (known: {', '.join(VARIANTS)})")
        self.design, self.chooser, self.variant = design, chooser, variant
        self.n_t, self.n_r = subgroup
        self.n_f = design.m - self.n_t - self.n_r  # line 3
        self.seen = 0
        if variant == "sound":
            self.rest_nonzero, self.rest_zero = design.s, design.d_prime - design.s
        else:  # line 2 as printed
            self.rest_nonzero, self.rest_zero = design.s, design.d_prime

    def _select(self, want: int, rest: int) -> bool:
        """Algorithm S: select with probability want / rest (rest counts the current element)."""
        if self.variant == "printed":  # ratios >= 1 (and k/0) select surely: u < k/n
            if want <= 0:
                return False
            return rest <= want or self.chooser.below(rest) < want
        return want > 0 and self.chooser.below(rest) < want

    def step(self, value: int) -> int:
        if value not in (-1, 0, 1):
            raise BudgetError(f"exsub: entry {value!r} is not ternary")
        if self.seen >= self.design.d_prime:
            raise BudgetError(f"exsub: more than d' = {self.design.d_prime} entries")
        self.seen += 1
        if value == 0:
            if self.variant == "printed":
                self.rest_zero -= 1  # line 11, before line 12's comparison
                chosen = self._select(self.n_f, self.rest_zero)
            else:
                if self.rest_zero <= 0:
                    raise SparsityExceeded(
                        f"exsub: more than d' - s = {self.design.d_prime - self.design.s} zero "
                        "entries (fewer non-zero entries than s: pad with stubs)"
                    )
                chosen = self._select(self.n_f, self.rest_zero)
                self.rest_zero -= 1
            if not chosen:
                return 0
            self.n_f -= 1  # line 15
            return 1 if self.chooser.below(2) == 0 else -1  # lines 13-14
        if self.variant == "printed":
            self.rest_nonzero -= 1  # line 17, before line 18's comparison
            chosen = self._select(self.n_t + self.n_r, self.rest_nonzero)
        else:
            if self.rest_nonzero <= 0:
                raise SparsityExceeded(
                    f"exsub: more than s = {self.design.s} non-zero entries in the input"
                )
            chosen = self._select(self.n_t + self.n_r, self.rest_nonzero)
            self.rest_nonzero -= 1
        if not chosen:
            return 0
        if self.chooser.below(self.n_t + self.n_r) < self.n_t:  # line 19 (n_t / (n_t + n_r))
            self.n_t -= 1
            return value
        self.n_r -= 1
        return -value

    def run(self, entries: Iterable[int]) -> tuple[int, ...]:
        return tuple(self.step(v) for v in entries)

    @property
    def complete(self) -> bool:
        """Every symbol placed (true after all d' entries of a valid input, sound variant)."""
        return self.n_t == self.n_r == self.n_f == 0


def output_vector(symbols: Iterable[tuple[int, int]], d_prime: int) -> tuple[int, ...]:
    """The ternary vector of a symbol set ``{(i, b)}`` (0-based index i, sign b)."""
    out = [0] * d_prime
    for i, b in symbols:
        out[i] = b
    return tuple(out)
