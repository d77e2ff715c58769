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

Kinds. Each kind of evidence is registered once (`EvidenceKind`: its JSON name, its Python type,
the JSON fields it needs, its certified cost and its JSON form); `cost_bounds`, `certify_cost`,
`evidence_to_json` and `evidence_from_json` look the kind up instead of testing types one by one.
`supports(kind)` says whether a JSON kind name is known and `evidence_kinds()` lists them. A kind
no registry entry understands is never counted as covering a charge: a ledger naming one is
refused when it is read (a `BudgetError`, so a `FormatError` with its file and line, listing the
supported kinds and the close ones), and an object of an unregistered type is refused by
`cost_bounds` (a `TypeError`), so the guard records nothing and a check stops instead of passing.

A third party adds a kind with `register_evidence_kind(EvidenceKind(...))` before it reads or
checks a ledger that uses it (see that function); its records may subclass `ExtraEvidence` so that
type checkers accept them wherever `Evidence` is expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from wevent.accounting.budget import BudgetError, format_exact, parse_exact, shown
from wevent.accounting.certified import exp_bounds, ln_bounds
from wevent.accounting.names import close_names, did_you_mean
from wevent.errors import InputError

__all__ = [
    "GRR",
    "OUE",
    "CostCertifier",
    "CostCheck",
    "DiscreteLaplace",
    "Evidence",
    "EvidenceKind",
    "ExSub",
    "ExtraEvidence",
    "Laplace",
    "PostProcessing",
    "Sampled",
    "certify_cost",
    "cost_bounds",
    "evidence_from_json",
    "evidence_kind",
    "evidence_kinds",
    "evidence_to_json",
    "is_evidence",
    "kind_of",
    "register_evidence_kind",
    "supports",
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

    def __hash__(self) -> int:
        # Equal fractions have equal lowest terms: hashing the integers is exact and cheaper than
        # hashing the fractions (the guard looks every spend's evidence up by value).
        s, c = self.sensitivity, self.scale
        return hash((s.numerator, s.denominator, c.numerator, c.denominator))


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

    def __hash__(self) -> int:
        # Equal fractions have equal lowest terms: hashing the integers is exact and cheaper than
        # hashing the fractions (the guard looks every spend's evidence up by value).
        s, c = self.sensitivity, self.scale
        return hash((s.numerator, s.denominator, c.numerator, c.denominator))


_WHOLE = re.compile(r"[0-9]{1,1000}")
_TOO_LONG = 10**1000  # the least integer of 1,001 digits


def _whole(value: object, name: str) -> int:
    """A whole-number evidence field: an int, or a string of ASCII digits (padded with spaces or
    tabs), at most 1,000 digits as every number the readers take (a larger one is no domain
    size or count, and every reader refuses to convert it)."""
    if isinstance(value, str):
        text = value.strip(" \t")
        if not _WHOLE.fullmatch(text):
            raise BudgetError(f"{name} must be a whole number in ASCII digits, got {shown(value)}")
        return int(text)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(f"{name} must be a whole number, got {shown(value)}")
    if abs(value) >= _TOO_LONG:
        raise BudgetError(f"{name}: {shown(value)} is longer than 1,000 digits")
    return value


@dataclass(frozen=True, slots=True)
class GRR:
    """Generalized randomized response over ``d`` values: keep with p, each other value with q."""

    d: int
    p: Fraction
    q: Fraction

    def __post_init__(self) -> None:
        _set(self, "d", _whole(self.d, "grr.d"))
        if self.d < 2:
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
        if not is_evidence(self.inner):
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
            v = _whole(getattr(self, name), f"exsub.{name}")
            _set(self, name, v)
            if v < 1:
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


class ExtraEvidence:
    """A base class for the records of a third-party evidence kind (`register_evidence_kind`):
    subclassing it lets type checkers accept them wherever `Evidence` is expected. A record must
    be immutable and hashable (a frozen dataclass), as the ledger interns evidence."""

    __slots__ = ()


Evidence = Laplace | DiscreteLaplace | GRR | OUE | Sampled | ExSub | PostProcessing | ExtraEvidence


@dataclass(frozen=True)
class EvidenceKind:
    """One kind of evidence.

    ``name``: the ``"kind"`` of its JSON form; ``type``: the class of its records (one kind per
    class); ``fields``: the JSON fields it needs besides ``kind``; ``cost(evidence, digits)``: a
    certified rational interval ``(lo, hi)`` containing the privacy cost, ``0 <= lo <= hi``,
    tighter as ``digits`` grows (`certify_cost` asks for 30 up to 480 digits before it gives up,
    and fails closed); ``from_json(obj)``: the record of a JSON object holding ``fields`` (raise
    `BudgetError` for bad values); ``to_json(evidence)``: its JSON fields (exact numbers as
    strings, without ``kind``); ``summary``: one line, citing the paper when there is one."""

    name: str
    type: type[Any]
    fields: tuple[str, ...]
    cost: Callable[[Any, int], tuple[Fraction, Fraction]]
    from_json: Callable[[Mapping[str, Any]], Any]
    to_json: Callable[[Any], dict[str, Any]]
    summary: str = ""


_KINDS: dict[str, EvidenceKind] = {}  # by JSON name
_BY_TYPE: dict[type[Any], EvidenceKind] = {}  # by record class


def register_evidence_kind(kind: EvidenceKind) -> EvidenceKind:
    """Make ``kind`` known to every reader, writer and checker of evidence; returns it.

    For a third party whose primitive spends with evidence wevent does not know: call it once
    (at import of the module defining the kind) before reading, writing or checking a ledger that
    holds such evidence. The cost function is what the guard and every check trust, so it must
    return a certified interval containing the true cost (see `EvidenceKind`). A name or a record
    class already registered (a built-in one included) is refused: an `InputError`."""
    if not isinstance(kind.name, str) or not kind.name:
        raise InputError(f"an evidence kind needs a non-empty name, got {kind.name!r}")
    if kind.name in _KINDS:
        raise InputError(f"evidence kind {kind.name!r} is already registered")
    if not isinstance(kind.type, type):
        raise InputError(f"evidence kind {kind.name!r}: 'type' must be a class")
    if kind.type in _BY_TYPE:
        raise InputError(
            f"evidence kind {kind.name!r}: {kind.type.__name__} is already the record class "
            f"of kind {_BY_TYPE[kind.type].name!r}"
        )
    _KINDS[kind.name] = kind
    _BY_TYPE[kind.type] = kind
    return kind


def supports(kind: str) -> bool:
    """Whether ``kind`` names a registered evidence kind (the ``"kind"`` of its JSON form)."""
    return kind in _KINDS


def evidence_kinds() -> tuple[str, ...]:
    """The registered evidence kinds' names, in registration order (the built-ins first)."""
    return tuple(_KINDS)


def evidence_kind(name: object) -> EvidenceKind:
    """The kind called ``name``; a `BudgetError` naming the supported kinds (and the close ones)
    for any other value."""
    kind = _KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        close = did_you_mean(close_names(name, _KINDS)) if isinstance(name, str) else ""
        raise BudgetError(
            f"evidence: unknown kind {name!r} (supported: {', '.join(_KINDS)}){close}"
        )
    return kind


def _registered(cls: type[Any]) -> EvidenceKind | None:
    kind = _BY_TYPE.get(cls)
    if kind is None:  # a subclass of a record class is of that kind
        kind = next((_BY_TYPE[c] for c in cls.__mro__[1:] if c in _BY_TYPE), None)
    return kind


def is_evidence(obj: object) -> bool:
    """Whether ``obj`` is a record of a registered kind (an instance of its class)."""
    return type(obj) in _BY_TYPE or _registered(type(obj)) is not None


def kind_of(evidence: object) -> EvidenceKind:
    """The kind of a record; a `TypeError` for an object of no registered kind (never counted
    as covering a charge)."""
    kind = _registered(type(evidence))
    if kind is None:
        raise TypeError(
            f"not evidence of a registered kind: {evidence!r} (supported: "
            f"{', '.join(_KINDS)}; a third-party kind is added with "
            "wevent.accounting.evidence.register_evidence_kind)"
        )
    return kind


# ----------------------------------------------------------------------------- costs


def cost_bounds(evidence: Evidence, digits: int = 40) -> tuple[Fraction, Fraction]:
    """A certified rational interval ``[lo, hi]`` containing the privacy cost of the evidence
    (its kind's ``cost``; an interval that is not ``0 <= lo <= hi`` in Fractions is an error,
    never a pass)."""
    kind = kind_of(evidence)
    lo, hi = kind.cost(evidence, digits)
    if not (isinstance(lo, Fraction) and isinstance(hi, Fraction) and 0 <= lo <= hi):
        raise TypeError(
            f"evidence kind {kind.name!r}: its cost must be Fractions 0 <= lo <= hi, "
            f"got ({lo!r}, {hi!r})"
        )
    return lo, hi


def _noise_cost(evidence: Laplace | DiscreteLaplace, _digits: int) -> tuple[Fraction, Fraction]:
    c = evidence.sensitivity / evidence.scale
    return (c, c)


def _grr_cost(evidence: GRR, digits: int) -> tuple[Fraction, Fraction]:
    ratio = evidence.p / evidence.q
    ratio = max(ratio, 1 / ratio)
    return ln_bounds(ratio, ratio, digits)


def _oue_cost(evidence: OUE, digits: int) -> tuple[Fraction, Fraction]:
    p, q = evidence.p, evidence.q
    ratio = (p * (1 - q)) / ((1 - p) * q)
    ratio = max(ratio, 1 / ratio)
    return ln_bounds(ratio, ratio, digits)


def _exsub_cost(evidence: ExSub, digits: int) -> tuple[Fraction, Fraction]:
    if evidence.x == 1:
        return (Fraction(0), Fraction(0))
    return ln_bounds(1 / evidence.x, 1 / evidence.x, digits)


def _sampled_cost(evidence: Sampled, digits: int) -> tuple[Fraction, Fraction]:
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


def _free(_evidence: PostProcessing, _digits: int) -> tuple[Fraction, Fraction]:
    return (Fraction(0), Fraction(0))


@dataclass(frozen=True, slots=True)
class CostCheck:
    """Outcome of certifying ``cost(evidence) <= amount``; ``decided`` is False only if even the
    finest precision could not separate the two (treated as a failure: fail closed)."""

    ok: bool
    decided: bool
    lower: Fraction
    upper: Fraction


_DIGITS = (30, 60, 120, 240, 480)  # the precisions `certify_cost` tries, in order


def certify_cost(evidence: Evidence, amount: Fraction) -> CostCheck:
    """Decide whether the evidence's cost is at most ``amount``, refining precision as needed."""
    lo = hi = Fraction(0)
    for digits in _DIGITS:
        lo, hi = cost_bounds(evidence, digits)
        if hi <= amount:
            return CostCheck(True, True, lo, hi)
        if lo > amount:
            return CostCheck(False, True, lo, hi)
    return CostCheck(False, False, lo, hi)


class CostCertifier:
    """`certify_cost` for a stream of (evidence, amount) pairs, with what it computes kept: each
    record's bounds at the first precision (a record charged at many amounts, as a class-level
    allocator's noise is, is bounded once) and each result the first bounds do not decide. It
    returns exactly what `certify_cost` returns: that function's first step is the same bounds
    and the same two comparisons. Records are found by identity first (the object is kept, so
    its ``id`` is not reused), then by value; ``limit`` entries are kept per table before it
    is emptied (memory stays bounded on a stream of distinct records). Like the ledger that
    holds them, it takes records as immutable (`ExtraEvidence`): one changed in place after
    it was bounded (through ``object.__setattr__`` on a frozen record) keeps its old bounds."""

    __slots__ = ("_by_id", "_by_value", "_limit", "_refined")

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._by_id: dict[int, tuple[Evidence, Fraction, Fraction]] = {}
        self._by_value: dict[Evidence, tuple[Fraction, Fraction]] = {}
        self._refined: dict[tuple[Evidence, Fraction], CostCheck] = {}

    def __call__(self, evidence: Evidence, amount: Fraction) -> CostCheck:
        hit = self._by_id.get(id(evidence))
        if hit is not None and hit[0] is evidence:
            lo, hi = hit[1], hit[2]
        else:
            bounds = self._by_value.get(evidence)
            if bounds is None:
                bounds = cost_bounds(evidence, _DIGITS[0])
                self._keep(self._by_value, evidence, bounds)
            lo, hi = bounds
            self._keep(self._by_id, id(evidence), (evidence, lo, hi))
        if hi <= amount:
            return CostCheck(True, True, lo, hi)
        if lo > amount:
            return CostCheck(False, True, lo, hi)
        key = (evidence, Fraction(amount))
        result = self._refined.get(key)
        if result is None:
            result = certify_cost(evidence, amount)
            self._keep(self._refined, key, result)
        return result

    def _keep(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        if len(table) >= self._limit:
            table.clear()
        table[key] = value


# ----------------------------------------------------------------------------- JSON form


def evidence_to_json(evidence: Evidence) -> dict[str, Any]:
    """The documented JSON object for evidence (``kind`` first); numbers are exact strings."""
    kind = kind_of(evidence)
    return {"kind": kind.name, **kind.to_json(evidence)}


def evidence_from_json(obj: object) -> Evidence:
    """Parse the JSON form (a dict, or a JSON string of one); raises `BudgetError` when malformed
    or of an unknown kind (the message lists the supported kinds)."""
    if isinstance(obj, str):
        from wevent.accounting.inputs import loads

        try:
            obj = loads(obj)
        except json.JSONDecodeError as exc:
            raise BudgetError(f"evidence: not valid JSON ({exc.msg})") from None
        except ValueError as exc:  # a key twice, nesting too deep
            raise BudgetError(f"evidence: not usable JSON ({exc})") from None
    if not isinstance(obj, Mapping):
        raise BudgetError("evidence: expected a JSON object with a 'kind'")
    kind = evidence_kind(obj.get("kind"))
    missing = [f for f in kind.fields if f not in obj]
    if missing:
        raise BudgetError(f"evidence {kind.name}: missing {', '.join(missing)}")
    out: Evidence = kind.from_json(obj)
    # Nothing dropped unread: a field the kind does not have (a misspelt one) is refused, not
    # ignored (an ignored "sensitivty" would leave the certified cost another one's).
    known = set(evidence_to_json(out)) | set(kind.fields) | {"kind", "note"}
    unknown = sorted(str(k) for k in obj if k not in known)
    if unknown:
        raise BudgetError(
            f"evidence {kind.name}: unknown field(s) {', '.join(map(repr, unknown))} (it has: "
            f"{', '.join(sorted(known - {'kind'}))})"
        )
    return out


def _noise_json(evidence: Laplace | DiscreteLaplace) -> dict[str, Any]:
    return {
        "sensitivity": format_exact(evidence.sensitivity),
        "scale": format_exact(evidence.scale),
    }


def _grr_from_json(obj: Mapping[str, Any]) -> GRR:
    return GRR(obj["d"], obj["p"], obj["q"])


def _postprocessing_from_json(obj: Mapping[str, Any]) -> PostProcessing:
    note = obj.get("note", "")
    return PostProcessing(note if isinstance(note, str) else str(note))


for _kind in (
    EvidenceKind(
        "laplace",
        Laplace,
        ("sensitivity", "scale"),
        _noise_cost,
        lambda o: Laplace(o["sensitivity"], o["scale"]),
        _noise_json,
        "Laplace noise: sensitivity / scale",
    ),
    EvidenceKind(
        "discrete_laplace",
        DiscreteLaplace,
        ("sensitivity", "scale"),
        _noise_cost,
        lambda o: DiscreteLaplace(o["sensitivity"], o["scale"]),
        _noise_json,
        "two-sided geometric noise: sensitivity / scale",
    ),
    EvidenceKind(
        "grr",
        GRR,
        ("d", "p", "q"),
        _grr_cost,
        _grr_from_json,
        lambda e: {"d": e.d, "p": format_exact(e.p), "q": format_exact(e.q)},
        "generalized randomized response: ln(p / q) (002 Section 3.4; 000 PFO.P)",
    ),
    EvidenceKind(
        "oue",
        OUE,
        ("p", "q"),
        _oue_cost,
        lambda o: OUE(o["p"], o["q"]),
        lambda e: {"p": format_exact(e.p), "q": format_exact(e.q)},
        "unary encoding: ln(p (1 - q) / ((1 - p) q))",
    ),
    EvidenceKind(
        "sampled",
        Sampled,
        ("probability", "inner"),
        _sampled_cost,
        lambda o: Sampled(evidence_from_json(o["inner"]), o["probability"]),
        lambda e: {
            "probability": format_exact(e.probability),
            "inner": evidence_to_json(e.inner),
        },
        "amplification by sampling: ln(1 + prob (e^inner - 1)) (001 Section 4.2, SM)",
    ),
    EvidenceKind(
        "exsub",
        ExSub,
        ("d_prime", "s", "m", "x"),
        _exsub_cost,
        lambda o: ExSub(o["d_prime"], o["s"], o["m"], o["x"]),
        lambda e: {"d_prime": e.d_prime, "s": e.s, "m": e.m, "x": format_exact(e.x)},
        "one ExSub report of a whole stream: ln(1 / x) (004 Definition 2)",
    ),
    EvidenceKind(
        "postprocessing",
        PostProcessing,
        (),
        _free,
        _postprocessing_from_json,
        lambda e: {"note": e.note} if e.note else {},
        "post-processing of private output: 0",
    ),
):
    register_evidence_kind(_kind)
