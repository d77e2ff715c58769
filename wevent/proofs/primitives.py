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
with exact rationals on the parameters the code actually uses (the rounded floats of
`wevent.mechanisms.oracles` and `wevent.mechanisms.pue`) at one domain size and a finite set of
budgets (every output of that domain), certifying every likelihood ratio with rational bounds on
ln: the rounded parameters are checked there, not proved for every budget.

SM (001 Section 4.2): the certified cost of each class's `Sampled` evidence is never above the
class budget eps, and at most 1e-12 below min(eps, theta) (a class above the threshold pays theta).
This one is *checked*, not proved: exact rationals on a finite set of thresholds (both branches of
`SamplingMechanism.for_budgets`, up to theta = 1000) and budgets (a grid plus budgets just below,
at and above each threshold); no solver. The 1e-12 side is only claimed up to theta = 700: beyond
it a keep-probability e^(eps - theta) can fall below the smallest double and round to 0 (the
class is never sampled and pays 0, still never above its budget).

A result says what it covers: "proved" when Z3 proved the statement over real parameters (its
scope in ``proved_for``; the exact checks of the code's rounded parameters, a finite set, in
``checked_at``), "checked" when only a finite set of exact checks ran (never called a proof).
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

__all__ = ["PRIMITIVES", "Primitive", "ProofResult", "prove_primitive"]


@dataclass(frozen=True)
class ProofResult:
    """Outcome of one primitive: ``status`` is "proved" (Z3 proved the statement for
    ``proved_for``; the code's parameters also passed the exact checks of ``checked_at``),
    "checked" (only the finite exact checks of ``checked_at`` ran, and passed; no solver),
    "counterexample" or "unknown"."""

    name: str
    statement: str
    status: str
    checks: list[str] = field(default_factory=list)
    counterexample: str = ""
    seconds: float = 0.0
    proved_for: str = ""
    checked_at: str = ""

    @property
    def solver_used(self) -> bool:
        return bool(self.proved_for)

    def scope(self) -> str:
        """The scope in words, for the first line of `wevent prove primitive`."""
        parts = []
        if self.proved_for:
            parts.append(f"Z3: {self.proved_for}")
        if self.checked_at:
            parts.append(f"finite exact checks, no solver: {self.checked_at}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "statement": self.statement,
            "result": self.status,
            "proved_for": self.proved_for or None,
            "checked_at": self.checked_at,
            "checks": self.checks,
            "counterexample": self.counterexample,
            "seconds": round(self.seconds, 3),
            "method": (
                "z3 over real parameters, then exact rationals on the code's parameters"
                if self.solver_used
                else "exact rationals on a finite set of parameters (no solver)"
            ),
        }
        if self.solver_used:
            out["solver"] = f"z3 {z3.get_version_string()}"
        return out


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
        f"exact: the code's GRR parameters, d = {d}, eps in {_braces(budgets)}: "
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
        f"{_braces(budgets)}: every likelihood ratio certified <= e^eps"
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
        f"{_braces(budgets)}: the composed report certified eps_L-LDP"
    ]


# ---------------------------------------------------------------------------- SM


_SM_THRESHOLDS = ("0.05", "0.1", "0.5", "1", "2", "4", "60", "61", "100", "700", "1000")
_SM_TIGHT_UP_TO = 700  # above it a keep-probability may round to 0 (below the smallest double)


def _sm_budgets(theta: Budget, grid: list[Budget]) -> list[Budget]:
    """The grid, 59..61 (either side of the large-threshold branch), and budgets just below, at
    and above ``theta``."""
    near = [theta - Fraction(1, 10**6), theta, theta + Fraction(1, 10**6), theta + 1]
    extra = [Budget(x) for x in ("59", "60", "61")] + [Budget(x) for x in near if x > 0]
    return sorted(set(grid) | set(extra))


def _sm_exact(thresholds: list[Budget], grid: list[Budget]) -> list[str]:
    pairs = 0
    for theta in thresholds:
        budgets = _sm_budgets(theta, grid)
        sm = SamplingMechanism.for_budgets({e: 1 for e in budgets}, theta)
        for eps in budgets:
            lo, hi = cost_bounds(sm.evidence(eps))
            pairs += 1
            if hi > eps:
                raise _Refuted(f"SM theta={theta}: class eps={eps} certified up to {hi} > eps")
            tight = theta <= _SM_TIGHT_UP_TO
            if tight and lo < min(eps, theta) - Fraction(1, 10**12):
                raise _Refuted(
                    f"SM theta={theta}: class eps={eps} certified from {lo}, more than 1e-12 "
                    f"below min(eps, theta)"
                )
    return [
        f"exact: SM evidence at {pairs} (threshold, budget) pairs, thresholds "
        f"{_braces(thresholds)}, budgets {_braces(grid)}, 59, 60, 61, and theta - 10^-6, theta, "
        f"theta + 10^-6, theta + 1 for each threshold: certified cost <= eps, and >= "
        f"min(eps, theta) - 1e-12 for theta <= {_SM_TIGHT_UP_TO}"
    ]


def _braces(values: list[Budget]) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


# ---------------------------------------------------------------------------- registry

_BUDGETS = [Budget(x) for x in ("0.05", "0.1", "0.5", "1", "2", "4")]
_OUE_MAX_D = 8  # the exact OUE check enumerates 2^d outputs


@dataclass(frozen=True)
class Primitive:
    """One primitive's obligation: its statement, what Z3 proves (``proved_for``, "" when
    nothing is proved by a solver), the finite set of exact checks (``checked_at``), and the run
    returning the check lines. Each takes the domain size d of `wevent prove primitive`."""

    statement: str
    proved_for: Callable[[int], str]
    checked_at: Callable[[int], str]
    run: Callable[[int], list[str]]


PRIMITIVES: dict[str, Primitive] = {
    "grr": Primitive(
        "GRR: for all inputs x, x' and outputs y, P[y|x] <= e^eps P[y|x'] (000 PFO.P)",
        lambda d: f"the formulas p, q at every real d >= 2 and d = {d}, every eps >= 0",
        lambda d: f"the code's rounded p, q for d = {d}, eps in {_braces(_BUDGETS)}",
        lambda d: _grr_symbolic(None) + _grr_symbolic(d) + _grr_exact(d, _BUDGETS),
    ),
    "oue": Primitive(
        "OUE: for all inputs x, x' and output vectors y, P[y|x] <= e^eps P[y|x']",
        lambda d: "the formulas p = 1/2, q = 1/(e^eps + 1) at every d, every eps >= 0",
        lambda d: (
            f"the code's rounded q for d = {min(d, _OUE_MAX_D)} (all {2 ** min(d, _OUE_MAX_D)} "
            f"outputs), eps in {_braces(_BUDGETS)}"
        ),
        lambda d: _oue_symbolic() + _oue_exact(min(d, _OUE_MAX_D), _BUDGETS),
    ),
    "pue": Primitive(
        "PUE: for eps_L <= eps_H, beta and gamma (000 Eq. 8) form a distribution and re-perturbed "
        "eps_H reports are distributed as eps_L reports (000 Theorem V.1); invalid if eps_L > eps_H",
        lambda d: f"the formulas at every real d >= 2 and d = {d}, every eps_L >= 0 and eps_H > 0",
        lambda d: (
            f"the code's rounded beta for d = {d}, every pair eps_L < eps_H from "
            f"{_braces(_BUDGETS)}"
        ),
        lambda d: _pue_symbolic(None) + _pue_symbolic(d) + _pue_exact(d, _BUDGETS),
    ),
    "sm": Primitive(
        "SM (001 Section 4.2), checked at a finite set of thresholds and budgets, not proved: "
        "each class's Sampled(Laplace) evidence certifies a cost never above its budget eps, and "
        f"(thresholds <= {_SM_TIGHT_UP_TO}) at most 1e-12 below min(eps, theta)",
        lambda d: "",
        lambda d: (
            f"{len(_SM_THRESHOLDS)} thresholds theta in {{{', '.join(_SM_THRESHOLDS)}}}, each "
            "with the budgets of the grid and near theta"
        ),
        lambda d: _sm_exact([Budget(x) for x in _SM_THRESHOLDS], _BUDGETS),
    ),
}


def prove_primitive(name: str, d: int = 5) -> ProofResult:
    """Run every check for one primitive; never reports "proved" or "checked" unless all passed,
    and "proved" only when a solver proved the statement over real parameters."""
    primitive = PRIMITIVES[name]
    proved_for, checked_at = primitive.proved_for(d), primitive.checked_at(d)
    start = time.perf_counter()
    try:
        checks = primitive.run(d)
    except _Refuted as exc:
        return ProofResult(
            name,
            primitive.statement,
            "counterexample",
            counterexample=exc.what,
            seconds=time.perf_counter() - start,
            proved_for=proved_for,
            checked_at=checked_at,
        )
    except TimeoutError as exc:
        return ProofResult(
            name,
            primitive.statement,
            "unknown",
            counterexample=str(exc),
            seconds=time.perf_counter() - start,
            proved_for=proved_for,
            checked_at=checked_at,
        )
    status = "proved" if proved_for else "checked"
    return ProofResult(
        name,
        primitive.statement,
        status,
        checks,
        seconds=time.perf_counter() - start,
        proved_for=proved_for,
        checked_at=checked_at,
    )
