"""Proofs that the local primitives keep their promise.

Theorems (E stands for e^eps, so E >= 1):

* GRR (000 PFO.P): with p = E / (E + d - 1) and q = 1 / (E + d - 1), the output distribution is
  valid and P[y | x] <= E * P[y | x'] for all inputs x, x' and outputs y; for every real d >= 2.
* OUE: with p = 1/2 and q = 1 / (E + 1), for every pair of inputs and every output bit vector,
  P[y | x] <= E * P[y | x'] (the ratio only involves the two bits x and x'); for every d.
* PUE (000 Theorem V.1, Eq. 8): for 1 <= E_L <= E_H with E_H > 1, beta and gamma are
  probabilities with beta + (d - 1) gamma = 1, and a report of the E_H oracle re-perturbed with
  them is distributed exactly as a report of the E_L oracle; if E_L > E_H, gamma < 0 (no valid
  re-perturbation exists with these formulas). The sampler uses beta rounded down to its float
  grid: the composed report is then slightly *more* private than an E_L report (keep-probability
  at most p_L), which the exact check certifies as eps_L-LDP.

Each is checked two ways: symbolically with Z3 over real parameters (the negation is unsat), and
exhaustively, with exact rationals, on the parameters the code actually uses (the rounded floats
of `wevent.mechanisms.oracles` and `wevent.mechanisms.pue`) for small domains, certifying every likelihood ratio
with rational bounds on ln.

SM (001 Section 4.2): the certified cost of each class's `Sampled` evidence equals the class budget
up to the directed rounding (within 1e-12, never above), checked on a grid of budgets and thresholds.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import z3

from wevent.accounting.budget import Budget
from wevent.accounting.certified import ln_bounds
from wevent.accounting.evidence import cost_bounds
from wevent.mechanisms.oracles import GRR, OUE
from wevent.mechanisms.pue import Reperturbation
from wevent.mechanisms.sampling import SamplingMechanism

__all__ = ["PRIMITIVES", "ProofResult", "prove_primitive"]


@dataclass(frozen=True)
class ProofResult:
    """Outcome of one proof: ``status`` is "proved", "counterexample" or "unknown"."""

    name: str
    statement: str
    status: str
    checks: list[str] = field(default_factory=list)
    counterexample: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "statement": self.statement,
            "result": self.status,
            "checks": self.checks,
            "counterexample": self.counterexample,
            "seconds": round(self.seconds, 3),
            "solver": f"z3 {z3.get_version_string()}",
        }


class _Refuted(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _z3_valid(claim: Any, assumptions: list[Any], what: str, timeout_ms: int = 20_000) -> str:
    """Prove ``assumptions -> claim`` by showing its negation unsat (and the assumptions sat, so
    the proof is not vacuous)."""
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*assumptions)
    if solver.check() != z3.sat:
        raise TimeoutError(f"z3: the assumptions of '{what}' are not satisfiable (vacuous)")
    solver.add(z3.Not(claim))
    result = solver.check()
    if result == z3.unsat:
        return f"z3: {what}: proved"
    if result == z3.sat:
        raise _Refuted(f"{what}: {solver.model()}")
    raise TimeoutError(f"z3 gave up on: {what}")


def _ratio_within(num: Fraction, den: Fraction, eps: Fraction) -> bool:
    """Certify num / den <= e^eps (num, den > 0) with rational bounds on ln."""
    if num <= den:
        return True
    _, hi = ln_bounds(num / den, num / den, 60)
    return hi <= eps


# ---------------------------------------------------------------------------- GRR


def _grr_symbolic(d: int | None) -> list[str]:
    e, dd, p, q = z3.Reals("E d p q")
    assume = [e >= 1, p * (e + dd - 1) == e, q * (e + dd - 1) == 1]
    assume.append(dd == d if d is not None else dd >= 2)
    claim = z3.And(p >= 0, q >= 0, p + (dd - 1) * q == 1, p <= e * q, q <= e * p)
    scope = f"d = {d}" if d is not None else "every real d >= 2"
    return [
        _z3_valid(claim, assume, f"GRR likelihood ratios <= E and a valid distribution, {scope}")
    ]


def _grr_exact(d: int, budgets: list[Budget]) -> list[str]:
    for eps in budgets:
        grr = GRR.for_budget(d, eps)
        if Fraction(grr.p_float) != grr.p:
            raise _Refuted(
                f"GRR d={d} eps={eps}: the sampler's p {grr.p_float!r} is not the "
                f"evidence's p {grr.p}"
            )
        if grr.p + (d - 1) * grr.q != 1:
            raise _Refuted(f"GRR d={d} eps={eps}: probabilities do not sum to 1")
        out = [grr.p, grr.q]  # P[y | x] is p when y == x, q otherwise
        for a, b in itertools.product(out, out):
            if not _ratio_within(a, b, eps):
                raise _Refuted(f"GRR d={d} eps={eps}: ratio {a}/{b} exceeds e^eps")
    return [
        f"exact: the code's GRR parameters, d = {d}, eps in {[str(e) for e in budgets]}: "
        "every likelihood ratio certified <= e^eps"
    ]


# ---------------------------------------------------------------------------- OUE


def _oue_symbolic() -> list[str]:
    e, q = z3.Reals("E q")
    p = z3.RealVal("1/2")
    assume = [e >= 1, q * (e + 1) == 1]

    def bit(one: bool, is_own: bool) -> Any:
        prob = p if is_own else q
        return prob if one else 1 - prob

    claims = []
    for a, b in itertools.product([True, False], repeat=2):
        # Output bits a at position x, b at position x'; all other bits cancel in the ratio.
        num = bit(a, True) * bit(b, False)
        den = bit(a, False) * bit(b, True)
        claims.append(num <= e * den)
    claim = z3.And(*claims, q > 0, q < 1)
    return [_z3_valid(claim, assume, "OUE likelihood ratio <= E for every output, every d")]


def _oue_exact(d: int, budgets: list[Budget]) -> list[str]:
    for eps in budgets:
        oue = OUE.for_budget(d, eps)
        p, q = oue.p, oue.q
        if Fraction(oue.q_float) != q:
            raise _Refuted(
                f"OUE d={d} eps={eps}: the sampler's q {oue.q_float!r} is not the evidence's q {q}"
            )

        def prob(y: tuple[int, ...], x: int, p: Fraction = p, q: Fraction = q) -> Fraction:
            out = Fraction(1)
            for j, bit in enumerate(y):
                one = p if j == x else q
                out *= one if bit else 1 - one
            return out

        for y in itertools.product((0, 1), repeat=d):
            probs = [prob(y, x) for x in range(d)]
            if not _ratio_within(max(probs), min(probs), eps):
                raise _Refuted(f"OUE d={d} eps={eps}: output {y} breaks the ratio")
    return [
        f"exact: the code's OUE parameters, d = {d}, all {2**d} outputs, eps in "
        f"{[str(e) for e in budgets]}: every likelihood ratio certified <= e^eps"
    ]


# ---------------------------------------------------------------------------- PUE


def _pue_symbolic(d: int | None) -> list[str]:
    el, eh, dd, pl, ph, ql, qh = z3.Reals("E_L E_H d p_L p_H q_L q_H")
    base = [
        dd == d if d is not None else dd >= 2,
        el >= 1,
        eh >= 1,
        pl * (el + dd - 1) == el,
        ql * (el + dd - 1) == 1,
        ph * (eh + dd - 1) == eh,
        qh * (eh + dd - 1) == 1,
    ]
    den = dd * ph - 1
    beta_num = dd * pl - pl + ph - 1
    gamma_num = ph - pl
    beta, gamma = z3.Reals("beta gamma")
    defs = [beta * den == beta_num, gamma * den == gamma_num]
    scope = f"d = {d}" if d is not None else "every real d >= 2"
    checks = [
        _z3_valid(den > 0, [*base, eh > 1], f"d p_H - 1 > 0 when E_H > 1, {scope}"),
        _z3_valid(
            z3.And(beta >= 0, gamma >= 0, beta + (dd - 1) * gamma == 1),
            [*base, *defs, eh > 1, el <= eh],
            f"beta, gamma form a distribution when E_L <= E_H, {scope}",
        ),
        _z3_valid(gamma < 0, [*base, *defs, eh > 1, el > eh], f"gamma < 0 when E_L > E_H, {scope}"),
        _z3_valid(
            z3.And(
                ph * beta + (1 - ph) * gamma == pl, qh * beta + (ph + (dd - 2) * qh) * gamma == ql
            ),
            [*base, *defs, eh > 1, el <= eh],
            f"re-perturbed E_H reports have the E_L output distribution, {scope}",
        ),
    ]
    return checks


def _pue_exact(d: int, budgets: list[Budget]) -> list[str]:
    for low_eps, high_eps in itertools.combinations(sorted(budgets), 2):
        low, high = GRR.for_budget(d, low_eps), GRR.for_budget(d, high_eps)
        rp = Reperturbation.between(high, low)
        beta = Fraction(rp.beta_float)  # what the sampler uses
        gamma = (1 - beta) / (d - 1)
        keep = high.p * beta + (1 - high.p) * gamma  # P[y' = x | x] after both steps
        other = (1 - keep) / (d - 1)
        if not (_ratio_within(keep, other, low_eps) and _ratio_within(other, keep, low_eps)):
            raise _Refuted(f"PUE d={d}: {high_eps} -> {low_eps} breaks e^eps_L")
        if rp.beta + (d - 1) * rp.gamma != 1 or rp.beta < 0 or rp.gamma < 0:
            raise _Refuted(f"PUE d={d}: {high_eps} -> {low_eps}: invalid beta/gamma")
    return [
        f"exact: the code's re-perturbation (rounded beta), d = {d}, every pair from "
        f"{[str(e) for e in budgets]}: the composed report certified eps_L-LDP"
    ]


# ---------------------------------------------------------------------------- SM


def _sm_exact(budgets: list[Budget]) -> list[str]:
    for theta in budgets:
        sm = SamplingMechanism.for_budgets({e: 1 for e in budgets}, theta)
        for eps in budgets:
            lo, hi = cost_bounds(sm.evidence(eps))
            target = min(eps, theta)
            if hi > eps or lo < target - Fraction(1, 10**12):
                raise _Refuted(f"SM theta={theta}: class eps={eps} certified in [{lo}, {hi}]")
    return [
        f"exact: SM evidence for every budget and threshold in {[str(e) for e in budgets]}: "
        "certified cost in [min(eps, theta) - 1e-12, eps]"
    ]


# ---------------------------------------------------------------------------- registry

_BUDGETS = [Budget(x) for x in ("0.05", "0.1", "0.5", "1", "2", "4")]

PRIMITIVES: dict[str, tuple[str, Callable[[int], list[str]]]] = {
    "grr": (
        "GRR: for all inputs x, x' and outputs y, P[y|x] <= e^eps P[y|x'] (000 PFO.P)",
        lambda d: _grr_symbolic(None) + _grr_symbolic(d) + _grr_exact(d, _BUDGETS),
    ),
    "oue": (
        "OUE: for all inputs x, x' and output vectors y, P[y|x] <= e^eps P[y|x']",
        lambda d: _oue_symbolic() + _oue_exact(min(d, 8), _BUDGETS),
    ),
    "pue": (
        "PUE: for eps_L <= eps_H, beta and gamma (000 Eq. 8) form a distribution and re-perturbed "
        "eps_H reports are distributed as eps_L reports (000 Theorem V.1); invalid if eps_L > eps_H",
        lambda d: _pue_symbolic(None) + _pue_symbolic(d) + _pue_exact(d, _BUDGETS),
    ),
    "sm": (
        "SM: each class's Sampled(Laplace) evidence certifies a cost within 1e-12 below its "
        "budget, never above (001 Section 4.2)",
        lambda d: _sm_exact(_BUDGETS),
    ),
}


def prove_primitive(name: str, d: int = 5) -> ProofResult:
    """Run every check for one primitive; never reports "proved" unless all passed."""
    statement, run = PRIMITIVES[name]
    start = time.perf_counter()
    try:
        checks = run(d)
    except _Refuted as exc:
        return ProofResult(
            name,
            statement,
            "counterexample",
            counterexample=exc.what,
            seconds=time.perf_counter() - start,
        )
    except TimeoutError as exc:
        return ProofResult(
            name, statement, "unknown", counterexample=str(exc), seconds=time.perf_counter() - start
        )
    return ProofResult(name, statement, "proved", checks, seconds=time.perf_counter() - start)
