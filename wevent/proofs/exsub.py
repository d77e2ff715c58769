"""Exact proofs for (d', s, eps, m)-ExSub at small sizes (004 Definition 2, Algorithms 3-4).

Theorems, for one (d', s, m) and every input R (an s-sparse ternary vector of length d'):

1. **Design.** The offline sampler (Algorithm 3: `choose_subgroup`, then `offline_sample`) outputs
   every exclusive m-set Z with probability exactly ``x^{[Z cap S_R = empty]} / Omega``, for every
   ``x = e^-eps`` in (0, 1] at once, and nothing else (the support is Z^{m+-}).
2. **Online = offline.** The online sampler (Algorithm 4: the same subgroup, then `OnlineSampler`
   over the entries in order) has exactly the same output distribution.
3. **Privacy.** For all inputs R, R' and outputs Z: ``P[Z | R] <= e^eps P[Z | R']``, for every
   eps > 0 (default), or, with ``eps`` given, for the exclusion weight the runtime actually uses
   (the float of e^-eps rounded up) together with a certified ``ln(1/x) <= eps``.

Method: the samplers draw all their randomness through a `Chooser`. An enumerating chooser re-runs
the *code that runs* along every branch of its uniform choices, each with exact probability 1/n, so
the data-dependent phase gives exact rational distributions per subgroup. The subgroup choice is
kept symbolic: an output's probability is ``(a + b x) / (A + B x)`` with rationals a, b (from the
subgroups with n_t > 0 and n_t = 0), and the likelihood-ratio claim
``(a1 + b1 x) <= (a2 + b2 x) / x`` is the quadratic ``a2 + (b2 - a1) x - b1 x^2 >= 0``, decided
exactly on (0, 1] (endpoints and vertex). The runtime's subgroup draw is checked separately: its
integer weights over their sum equal ``l x^{[n_t=0]} / Omega`` exactly.

Variants: ``printed-offline`` runs Algorithm 3 line 13 as printed (false symbols drawn from all
symbols of the zero entries) and ``printed-online`` runs Algorithm 4's counters as printed; both are
refuted at every size with a zero entry (see `wevent.mechanisms.exsub`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from math import comb
from typing import Any

from wevent.accounting.budget import BudgetError, format_exact
from wevent.accounting.evidence import ExSub as ExSubEvidence
from wevent.accounting.evidence import certify_cost
from wevent.mechanisms.exsub import (
    ExSubDesign,
    OnlineSampler,
    choose_subgroup,
    exclusion_weight,
    offline_sample,
)

__all__ = ["PROOF_VARIANTS", "ExSubProof", "enumerate_outputs", "prove_exsub"]

PROOF_VARIANTS = ("sound", "printed-offline", "printed-online")

Output = tuple[int, ...]
Lin = tuple[Fraction, Fraction]  # a + b x


class _Script:
    """A chooser that follows a prefix of choices, then takes 0, recording each call's range."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = prefix
        self.trail: list[tuple[int, int]] = []

    def below(self, n: int) -> int:
        if n < 1:
            raise BudgetError(f"chooser asked for a uniform integer below {n}")
        pos = len(self.trail)
        value = self.prefix[pos] if pos < len(self.prefix) else 0
        self.trail.append((value, n))
        return value


def enumerate_outputs(run: Callable[[Any], Output]) -> dict[Output, Fraction]:
    """The exact output distribution of ``run(chooser)`` over every branch of its choices."""
    out: dict[Output, Fraction] = {}
    prefix: list[int] = []
    while True:
        script = _Script(prefix)
        z = run(script)
        prob = Fraction(1)
        for _, n in script.trail:
            prob /= n
        out[z] = out.get(z, Fraction(0)) + prob
        trail = script.trail
        i = len(trail) - 1
        while i >= 0 and trail[i][0] + 1 >= trail[i][1]:
            i -= 1
        if i < 0:
            return out
        prefix = [v for v, _ in trail[:i]] + [trail[i][0] + 1]


@dataclass
class ExSubProof:
    """Outcome: ``status`` is "proved", "counterexample" or "unknown"."""

    d_prime: int
    s: int
    m: int
    eps: Fraction | None
    variant: str
    status: str = "unknown"
    checks: list[str] = field(default_factory=list)
    counterexample: str = ""
    inputs: int = 0
    outputs: int = 0
    seconds: float = 0.0

    @property
    def statement(self) -> str:
        scope = "every eps > 0" if self.eps is None else f"eps = {format_exact(self.eps)}"
        return (
            f"({self.d_prime}, {self.s}, eps, {self.m})-ExSub, {scope}: the offline sampler "
            "realizes Definition 2 exactly, the online sampler has the same output distribution, "
            "and P[Z|R] <= e^eps P[Z|R'] for all inputs R, R' and outputs Z"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "mechanism": "exsub",
            "d_prime": self.d_prime,
            "s": self.s,
            "m": self.m,
            "eps": None if self.eps is None else format_exact(self.eps),
            "variant": self.variant,
            "statement": self.statement,
            "result": self.status,
            "checks": self.checks,
            "counterexample": self.counterexample,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "seconds": round(self.seconds, 3),
            "method": "exact enumeration of the samplers' code (rationals, e^-eps symbolic)",
        }


class _Refuted(Exception):
    pass


def _inputs(d_prime: int, s: int) -> list[Output]:
    out = []
    for support in itertools.combinations(range(d_prime), s):
        for signs in itertools.product((1, -1), repeat=s):
            r = [0] * d_prime
            for i, b in zip(support, signs, strict=True):
                r[i] = b
            out.append(tuple(r))
    return out


def _show(v: Output) -> str:
    """A ternary vector as 004's symbol set, 1-based: {2_-, 3_+}."""
    return "{" + ", ".join(f"{i + 1}_{'+' if b > 0 else '-'}" for i, b in enumerate(v) if b) + "}"


def _lin_show(v: Lin, omega: Lin) -> str:
    a, b = v
    return f"({format_exact(a)} + {format_exact(b)} x) / ({format_exact(omega[0])} + {format_exact(omega[1])} x)"


def _distribution(design: ExSubDesign, r: Output, online: bool, variant: str) -> dict[Output, Lin]:
    """Output -> (a, b): P[Z | r] = (a + b x) / (A + B x), subgroup choice symbolic."""
    out: dict[Output, Lin] = {}
    for nt, nr, size in design.subgroups:
        if online:

            def run(ch: Any, nt: int = nt, nr: int = nr) -> Output:
                sampler = OnlineSampler(design, (nt, nr), ch, variant)
                return sampler.run(r)
        else:

            def run(ch: Any, nt: int = nt, nr: int = nr) -> Output:
                return offline_sample(design, r, (nt, nr), ch, variant)

        for z, p in enumerate_outputs(run).items():
            a, b = out.get(z, (Fraction(0), Fraction(0)))
            if nt == 0:
                b += size * p
            else:
                a += size * p
            out[z] = (a, b)
    return out


def _valid_output(z: Output, m: int) -> bool:
    return all(v in (-1, 0, 1) for v in z) and sum(1 for v in z if v) == m


def _quadratic_min(
    c0: Fraction, c1: Fraction, c2: Fraction, lo: Fraction, hi: Fraction
) -> Fraction:
    """The exact minimum of c0 + c1 x + c2 x^2 over [lo, hi], as the x attaining it."""
    cands = [lo, hi]
    if c2 > 0:
        v = -c1 / (2 * c2)
        if lo < v < hi:
            cands.append(v)
    return min(cands, key=lambda x: c0 + c1 * x + c2 * x * x)


def _ratio_ok(num: Lin, den: Lin, x: Fraction | None) -> Fraction | None:
    """Check (a1 + b1 x) <= (a2 + b2 x) / x; return a violating x (None when it holds)."""
    (a1, b1), (a2, b2) = num, den
    c0, c1, c2 = a2, b2 - a1, -b1

    def value(t: Fraction) -> Fraction:
        return c0 + c1 * t + c2 * t * t

    if x is not None:
        return None if value(x) >= 0 else x
    t = _quadratic_min(c0, c1, c2, Fraction(0), Fraction(1))
    if value(t) >= 0:
        return None
    if t == 0:  # negative at the open end: find a positive x where it is negative
        t = Fraction(1)
        while value(t) >= 0:
            t /= 2
    return t


def _check(design: ExSubDesign, variant: str, eps: Fraction | None, proof: ExSubProof) -> list[str]:
    d, s, m = design.d_prime, design.s, design.m
    omega: Lin = (
        Fraction(sum(size for nt, _, size in design.subgroups if nt > 0)),
        Fraction(sum(size for nt, _, size in design.subgroups if nt == 0)),
    )
    n_out = comb(d, m) * 2**m
    inputs = _inputs(d, s)
    proof.inputs, proof.outputs = len(inputs), n_out
    per_output: dict[Output, set[Lin]] = {}
    for r in inputs:
        offline = _distribution(
            design, r, False, "printed" if variant == "printed-offline" else "sound"
        )
        for z in offline:
            if not _valid_output(z, m):
                raise _Refuted(
                    f"offline sampler (Algorithm 3, {variant}) on R = {_show(r)} emits an output "
                    f"outside Z^(m+-): {z} (2 marks an index given both signs)"
                )
        if len(offline) != n_out:
            raise _Refuted(
                f"offline sampler on R = {_show(r)} reaches {len(offline)} of the {n_out} outputs"
            )
        for z, lin in offline.items():
            hit = any(a != 0 and a == b for a, b in zip(z, r, strict=True))
            want = (Fraction(1), Fraction(0)) if hit else (Fraction(0), Fraction(1))
            if lin != want:
                raise _Refuted(
                    f"offline sampler on R = {_show(r)}: P[{_show(z)}] = {_lin_show(lin, omega)}, "
                    f"Definition 2 gives {_lin_show(want, omega)}"
                )
        online = _distribution(
            design, r, True, "printed" if variant == "printed-online" else "sound"
        )
        if online != offline:
            z = next(
                z for z in sorted(set(online) | set(offline)) if online.get(z) != offline.get(z)
            )
            zero = (Fraction(0), Fraction(0))
            raise _Refuted(
                f"online sampler (Algorithm 4, {variant}) on R = {_show(r)}: P[{_show(z)}] = "
                f"{_lin_show(online.get(z, zero), omega)}, offline "
                f"{_lin_show(offline.get(z, zero), omega)}"
            )
        for z, lin in offline.items():
            per_output.setdefault(z, set()).add(lin)
    x_used = None if eps is None else exclusion_weight(eps)
    for z, values in per_output.items():
        for num, den in itertools.product(values, values):
            bad = _ratio_ok(num, den, x_used)
            if bad is not None:
                raise _Refuted(
                    f"output {_show(z)}: P = {_lin_show(num, omega)} vs {_lin_show(den, omega)} "
                    f"breaks the e^eps ratio at x = e^-eps = {format_exact(bad)}"
                )
    checks = [
        f"design: offline sampler on all {len(inputs)} inputs reaches all {n_out} outputs of "
        "Z^(m+-) with P = x^[Z misses S_R] / Omega exactly (x symbolic)",
        f"online = offline: identical exact distributions on all {len(inputs)} inputs",
    ]
    if x_used is None:
        checks.append(
            "privacy: P[Z|R] <= e^eps P[Z|R'] for every pair of inputs, every output, every "
            "x = e^-eps in (0, 1] (exact quadratic check)"
        )
    else:
        assert eps is not None
        check = certify_cost(ExSubEvidence(d, s, m, x_used), eps)
        if not check.decided:
            raise TimeoutError(f"ln(1/x) <= {format_exact(eps)} could not be certified")
        if not check.ok:
            raise _Refuted(f"the runtime's x = {format_exact(x_used)} costs more than eps")
        checks.append(
            f"privacy at eps = {format_exact(eps)}: with the runtime's x = {format_exact(x_used)} "
            "(float of e^-eps rounded up) every ratio is <= 1/x exactly, and ln(1/x) <= eps "
            "certified"
        )
        weights_ok = _subgroup_draw_exact(d, s, m, x_used)
        checks.append(weights_ok)
    return checks


def _subgroup_draw_exact(d: int, s: int, m: int, x: Fraction) -> str:
    """The runtime's subgroup draw (integer weights) has probabilities l x^[n_t=0] / Omega."""
    design = ExSubDesign(d, s, m, x)
    total: list[int] = []

    class _Total:
        def below(self, n: int) -> int:
            total.append(n)
            return 0

    choose_subgroup(design, _Total())
    num, den = x.numerator, x.denominator
    for nt, nr, size in design.subgroups:
        w = size * (num if nt == 0 else den)
        if Fraction(w, total[0]) != design.subgroup_probability(nt, nr):
            raise _Refuted(f"subgroup ({nt}, {nr}) is drawn with the wrong probability")
    return "runtime subgroup draw: integer weights / their sum = l x^[n_t=0] / Omega exactly"


def prove_exsub(
    d_prime: int, s: int, m: int, eps: Fraction | None = None, variant: str = "sound"
) -> ExSubProof:
    """Run every check at this size; "proved" only if all passed."""
    if variant not in PROOF_VARIANTS:
        raise BudgetError(f"unknown variant {variant!r} (known: {', '.join(PROOF_VARIANTS)})")
    proof = ExSubProof(d_prime, s, m, eps, variant)
    start = time.perf_counter()
    design = ExSubDesign(d_prime, s, m, Fraction(1, 2))  # x only labels; checks keep x symbolic
    try:
        proof.checks = _check(design, variant, eps, proof)
        proof.status = "proved"
    except _Refuted as exc:
        proof.status, proof.counterexample = "counterexample", str(exc)
    except TimeoutError as exc:
        proof.status, proof.counterexample = "unknown", str(exc)
    proof.seconds = time.perf_counter() - start
    return proof
