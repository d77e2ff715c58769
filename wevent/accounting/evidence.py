"""Evidence: typed records of what a primitive actually did, and the privacy cost they certify.

A ledger charge carries evidence; the verifier recomputes the cost from the evidence (exactly, or as
a certified rational interval where exp/ln are involved) and checks it against the amount charged.

Costs:
* `Laplace` / `DiscreteLaplace`: ``sensitivity / scale`` (exact).
* `GRR`: ``ln(p / q)`` (002 Section 3.4; 000 PFO.P).
* `OUE` (unary encoding with keep-probability p and flip-on probability q):
  ``ln(p (1 - q) / ((1 - p) q))``.
* `Sampled`: amplification by sampling, ``ln(1 + prob * (e^inner - 1))`` (001 Section 4.2, SM).
* `ExSub` (004 Definition 2, one report covering a user's whole stream): every output has
  probability ``1/Omega`` or ``x/Omega`` with Omega the same for all inputs, so the cost is
  ``ln(1 / x)``; ``x`` is the float the sampler used for e^-eps, as an exact rational.
* `PostProcessing`: 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from wevent.accounting.budget import BudgetError, format_exact, parse_exact
from wevent.accounting.certified import exp_bounds, ln_bounds

__all__ = [
    "GRR",
    "OUE",
    "CostCheck",
    "DiscreteLaplace",
    "Evidence",
    "ExSub",
    "Laplace",
    "PostProcessing",
    "Sampled",
    "certify_cost",
    "cost_bounds",
    "evidence_from_json",
    "evidence_to_json",
]


def _exact(value: object, what: str) -> Fraction:
    if isinstance(value, bool):
        raise BudgetError(f"{what}: a boolean is not a number")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, str):
        return parse_exact(value, what=what)
    raise BudgetError(f"{what}: expected an exact number (string, int or Fraction), got {value!r}")


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True, slots=True)
class Laplace:
    """Continuous Laplace noise of the given scale on a query of the given L1 sensitivity."""

    sensitivity: Fraction
    scale: Fraction

    def __post_init__(self) -> None:
        _set(self, "sensitivity", _exact(self.sensitivity, "laplace.sensitivity"))
        _set(self, "scale", _exact(self.scale, "laplace.scale"))
        if self.sensitivity < 0:
            raise BudgetError("laplace.sensitivity must be >= 0")
        if self.scale <= 0:
            raise BudgetError("laplace.scale must be > 0")


@dataclass(frozen=True, slots=True)
class DiscreteLaplace:
    """Two-sided geometric noise, P(k) proportional to exp(-|k| / scale), on integer counts."""

    sensitivity: Fraction
    scale: Fraction

    def __post_init__(self) -> None:
        _set(self, "sensitivity", _exact(self.sensitivity, "discrete_laplace.sensitivity"))
        _set(self, "scale", _exact(self.scale, "discrete_laplace.scale"))
        if self.sensitivity < 0 or self.sensitivity.denominator != 1:
            raise BudgetError("discrete_laplace.sensitivity must be a non-negative integer")
        if self.scale <= 0:
            raise BudgetError("discrete_laplace.scale must be > 0")


@dataclass(frozen=True, slots=True)
class GRR:
    """Generalized randomized response over ``d`` values: keep with p, each other value with q."""

    d: int
    p: Fraction
    q: Fraction

    def __post_init__(self) -> None:
        if isinstance(self.d, bool) or not isinstance(self.d, int) or self.d < 2:
            raise BudgetError(f"grr.d must be an integer >= 2, got {self.d!r}")
        _set(self, "p", _exact(self.p, "grr.p"))
        _set(self, "q", _exact(self.q, "grr.q"))
        if not (self.q > 0 and 0 < self.p <= 1):
            raise BudgetError("grr: need 0 < p <= 1 and q > 0")
        if self.p + (self.d - 1) * self.q != 1:
            raise BudgetError(
                f"grr: p + (d-1) q must equal 1 exactly, got {format_exact(self.p + (self.d - 1) * self.q)}"
            )


@dataclass(frozen=True, slots=True)
class OUE:
    """Unary encoding: a 1-bit stays 1 with probability p, a 0-bit becomes 1 with probability q."""

    p: Fraction
    q: Fraction

    def __post_init__(self) -> None:
        _set(self, "p", _exact(self.p, "oue.p"))
        _set(self, "q", _exact(self.q, "oue.q"))
        if not (0 < self.p < 1 and 0 < self.q < 1):
            raise BudgetError("oue: need 0 < p < 1 and 0 < q < 1")


@dataclass(frozen=True, slots=True)
class Sampled:
    """The inner mechanism applied only with the given probability (amplification by sampling)."""

    inner: Evidence
    probability: Fraction

    def __post_init__(self) -> None:
        _set(self, "probability", _exact(self.probability, "sampled.probability"))
        if not 0 <= self.probability <= 1:
            raise BudgetError("sampled.probability must be in [0, 1]")
        if not isinstance(self.inner, _EVIDENCE_TYPES):
            raise BudgetError(f"sampled.inner must be evidence, got {self.inner!r}")


@dataclass(frozen=True, slots=True)
class ExSub:
    """(d', s, eps, m)-ExSub (004 Definition 2) with exclusion weight ``x`` standing for e^-eps:
    outputs meeting the input have weight 1, the others weight x."""

    d_prime: int
    s: int
    m: int
    x: Fraction

    def __post_init__(self) -> None:
        for name in ("d_prime", "s", "m"):
            v = getattr(self, name)
            if isinstance(v, str) and v.strip().isdigit():
                v = int(v)
                _set(self, name, v)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise BudgetError(f"exsub.{name} must be a positive integer, got {v!r}")
        if not (self.s < self.d_prime and self.m <= self.d_prime):
            raise BudgetError("exsub: need s < d_prime and m <= d_prime")
        _set(self, "x", _exact(self.x, "exsub.x"))
        if not 0 < self.x <= 1:
            raise BudgetError("exsub.x must be in (0, 1]")


@dataclass(frozen=True, slots=True)
class PostProcessing:
    """A transformation of already-private output: costs nothing (e.g. PUE re-perturbation)."""

    note: str = ""


Evidence = Laplace | DiscreteLaplace | GRR | OUE | Sampled | ExSub | PostProcessing
_EVIDENCE_TYPES = (Laplace, DiscreteLaplace, GRR, OUE, Sampled, ExSub, PostProcessing)


def cost_bounds(evidence: Evidence, digits: int = 40) -> tuple[Fraction, Fraction]:
    """A certified rational interval ``[lo, hi]`` containing the privacy cost of the evidence."""
    if isinstance(evidence, Laplace | DiscreteLaplace):
        c = evidence.sensitivity / evidence.scale
        return (c, c)
    if isinstance(evidence, PostProcessing):
        return (Fraction(0), Fraction(0))
    if isinstance(evidence, GRR):
        ratio = evidence.p / evidence.q
        ratio = max(ratio, 1 / ratio)
        return ln_bounds(ratio, ratio, digits)
    if isinstance(evidence, OUE):
        p, q = evidence.p, evidence.q
        ratio = (p * (1 - q)) / ((1 - p) * q)
        ratio = max(ratio, 1 / ratio)
        return ln_bounds(ratio, ratio, digits)
    if isinstance(evidence, ExSub):
        if evidence.x == 1:
            return (Fraction(0), Fraction(0))
        return ln_bounds(1 / evidence.x, 1 / evidence.x, digits)
    if isinstance(evidence, Sampled):
        ilo, ihi = cost_bounds(evidence.inner, digits)
        prob = evidence.probability
        if prob == 0 or ihi == 0:
            return (Fraction(0), Fraction(0))
        if prob == 1:  # ln(1 + (e^c - 1)) = c exactly: no interval to narrow
            return (ilo, ihi)
        if ilo >= 60:
            # ln(1 + p (e^c - 1)) = c + ln(p + (1 - p) e^-c), increasing in c: bound it at both
            # ends with e^-c (tiny) instead of e^c (a number with millions of digits).
            if ihi <= 10_000:
                small_lo = exp_bounds(-ilo, -ilo, digits)[0]
                small_hi = exp_bounds(-ihi, -ihi, digits)[1]
            else:  # e^-c < 10^-4342 for c > 10^4: bound it without computing it
                small_lo, small_hi = Fraction(0), Fraction(1, 10**4000)
            lo = ln_bounds(prob + (1 - prob) * small_lo, prob + (1 - prob) * small_lo, digits)[0]
            hi = ln_bounds(prob + (1 - prob) * small_hi, prob + (1 - prob) * small_hi, digits)[1]
            return (max(ilo + lo, Fraction(0)), ihi + hi)
        elo, ehi = exp_bounds(ilo, ihi, digits)
        ylo = 1 + prob * (max(elo, Fraction(1)) - 1)
        yhi = 1 + prob * (ehi - 1)
        lo, hi = ln_bounds(ylo, yhi, digits)
        return (max(lo, Fraction(0)), hi)
    raise TypeError(f"not evidence: {evidence!r}")


@dataclass(frozen=True, slots=True)
class CostCheck:
    """Outcome of certifying ``cost(evidence) <= amount``; ``decided`` is False only if even the
    finest precision could not separate the two (treated as a failure: fail closed)."""

    ok: bool
    decided: bool
    lower: Fraction
    upper: Fraction


def certify_cost(evidence: Evidence, amount: Fraction) -> CostCheck:
    """Decide whether the evidence's cost is at most ``amount``, refining precision as needed."""
    lo = hi = Fraction(0)
    for digits in (30, 60, 120, 240, 480):
        lo, hi = cost_bounds(evidence, digits)
        if hi <= amount:
            return CostCheck(True, True, lo, hi)
        if lo > amount:
            return CostCheck(False, True, lo, hi)
    return CostCheck(False, False, lo, hi)


# ----------------------------------------------------------------------------- JSON form


def evidence_to_json(evidence: Evidence) -> dict[str, Any]:
    """The documented JSON object for evidence; numbers are exact strings."""
    if isinstance(evidence, Laplace):
        return {
            "kind": "laplace",
            "sensitivity": format_exact(evidence.sensitivity),
            "scale": format_exact(evidence.scale),
        }
    if isinstance(evidence, DiscreteLaplace):
        return {
            "kind": "discrete_laplace",
            "sensitivity": format_exact(evidence.sensitivity),
            "scale": format_exact(evidence.scale),
        }
    if isinstance(evidence, GRR):
        return {
            "kind": "grr",
            "d": evidence.d,
            "p": format_exact(evidence.p),
            "q": format_exact(evidence.q),
        }
    if isinstance(evidence, OUE):
        return {"kind": "oue", "p": format_exact(evidence.p), "q": format_exact(evidence.q)}
    if isinstance(evidence, Sampled):
        return {
            "kind": "sampled",
            "probability": format_exact(evidence.probability),
            "inner": evidence_to_json(evidence.inner),
        }
    if isinstance(evidence, ExSub):
        return {
            "kind": "exsub",
            "d_prime": evidence.d_prime,
            "s": evidence.s,
            "m": evidence.m,
            "x": format_exact(evidence.x),
        }
    out: dict[str, Any] = {"kind": "postprocessing"}
    if evidence.note:
        out["note"] = evidence.note
    return out


_FIELDS: dict[str, tuple[str, ...]] = {
    "laplace": ("sensitivity", "scale"),
    "discrete_laplace": ("sensitivity", "scale"),
    "grr": ("d", "p", "q"),
    "oue": ("p", "q"),
    "sampled": ("probability", "inner"),
    "exsub": ("d_prime", "s", "m", "x"),
    "postprocessing": (),
}


def evidence_from_json(obj: object) -> Evidence:
    """Parse the JSON form (a dict, or a JSON string of one); raises `BudgetError` when malformed."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as exc:
            raise BudgetError(f"evidence: not valid JSON ({exc.msg})") from None
    if not isinstance(obj, Mapping):
        raise BudgetError("evidence: expected a JSON object with a 'kind'")
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in _FIELDS:
        known = ", ".join(sorted(_FIELDS))
        raise BudgetError(f"evidence: unknown kind {kind!r} (known: {known})")
    missing = [f for f in _FIELDS[kind] if f not in obj]
    if missing:
        raise BudgetError(f"evidence {kind}: missing {', '.join(missing)}")
    if kind == "laplace":
        return Laplace(obj["sensitivity"], obj["scale"])
    if kind == "discrete_laplace":
        return DiscreteLaplace(obj["sensitivity"], obj["scale"])
    if kind == "grr":
        d = obj["d"]
        if isinstance(d, str) and d.strip().isdigit():
            d = int(d)
        return GRR(d, obj["p"], obj["q"])
    if kind == "oue":
        return OUE(obj["p"], obj["q"])
    if kind == "sampled":
        return Sampled(evidence_from_json(obj["inner"]), obj["probability"])
    if kind == "exsub":
        return ExSub(obj["d_prime"], obj["s"], obj["m"], obj["x"])
    note = obj.get("note", "")
    return PostProcessing(note if isinstance(note, str) else str(note))
