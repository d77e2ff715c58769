"""Verdicts of the batch checker: violations, evidence failures and utilization, all exact.

How violations are reported (the same for the fast checker and the reference checker):

* ``fixed``: a set of consecutive spends of one user that lie within ``w`` slots and alone exceed
  ``eps``, minimal under inclusion (no smaller such set inside it also exceeds ``eps``). ``first`` and
  ``last`` are the slots of its first and last spend; ``anchor`` is ``last``.
* ``backward`` / ``forward``: one per violated declared window (001 Definition 10); ``anchor`` is
  the slot t whose window ``[t-w_B+1, t]`` / ``[t, t+w_F-1]`` is exceeded; ``first``/``last``
  trim it to the spends inside. Windows that trim to the same spends under the same bound are
  reported once, with the smallest anchor.
* ``whole-stream``: the user's total exceeds ``eps``; ``first``/``last`` span all spends.
* ``unregistered``: positive spends while no requirement was in force (a user absent from the
  requirements, or a dynamic user before their first declaration); the bound is 0.

Violations of users whose spends are identical (the same group charges, the same requirement) are
reported once, listing every such user.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from wevent.accounting.budget import cost_phrase, format_exact, ratio_text
from wevent.accounting.evidence import Evidence, evidence_to_json

if TYPE_CHECKING:
    from wevent.accounting.population import Population

__all__ = [
    "EvidenceFailure",
    "Verdict",
    "Violation",
    "breaks",
    "cost_text",
    "percent_text",
    "ratio",
    "render_verdict",
]


def ratio(total: Fraction, bound: Fraction) -> Fraction | None:
    """Utilization of one window: total / bound; None for a positive total against bound 0."""
    if bound == 0:
        return Fraction(0) if total == 0 else None
    return total / bound


@dataclass(frozen=True, slots=True)
class Violation:
    """One exceeded constraint, exact."""

    kind: str
    users: tuple[str, ...]
    first: int
    last: int
    anchor: int
    spends: tuple[tuple[int, Fraction], ...]
    total: Fraction
    bound: Fraction
    requirement: str

    @classmethod
    def from_spends(
        cls,
        kind: str,
        users: tuple[str, ...],
        spends: tuple[tuple[int, Fraction], ...],
        total: Fraction,
        bound: Fraction,
        requirement: str,
        *,
        anchor: int | None = None,
    ) -> Violation:
        """A violation whose window is trimmed to ``spends`` (anchor: the last spend slot)."""
        last = spends[-1][0]
        return cls(
            kind,
            users,
            spends[0][0],
            last,
            last if anchor is None else anchor,
            spends,
            total,
            bound,
            requirement,
        )

    @property
    def excess(self) -> Fraction:
        return self.total - self.bound

    @property
    def user(self) -> str:
        return self.users[0]

    def sort_key(self) -> tuple[str, str, int, int, int]:
        return (self.users[0], self.kind, self.first, self.last, self.anchor)

    def describe(self) -> str:
        who = f"user {self.users[0]!r}"
        if len(self.users) > 1:
            who += f" (and {len(self.users) - 1} more with identical spends)"
        span = f"spends in slots [{self.first}, {self.last}]"
        where = {
            "fixed": f"fixed window, {span}",
            "backward": f"backward window at slot {self.anchor}, {span}",
            "forward": f"forward window from slot {self.anchor}, {span}",
            "whole-stream": f"whole stream, {span}",
            "unregistered": f"no requirement in force, {span}",
        }.get(self.kind, self.kind)
        spends = ", ".join(f"{s}:{format_exact(a)}" for s, a in self.spends[:12])
        if len(self.spends) > 12:
            spends += f", ... ({len(self.spends)} slots)"
        return (
            f"{who} [{self.requirement}]: {where}: sum {format_exact(self.total)} > bound "
            f"{format_exact(self.bound)}, excess {format_exact(self.excess)} (spends {spends})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "users": list(self.users),
            "window": [self.first, self.last],
            "anchor": self.anchor,
            "spends": [[s, ratio_text(a)] for s, a in self.spends],
            "sum": ratio_text(self.total),
            "bound": ratio_text(self.bound),
            "excess": ratio_text(self.excess),
            "requirement": self.requirement,
        }


def cost_text(lower: Fraction, upper: Fraction, amount: Fraction) -> str:
    """What the certified bounds ``[lower, upper]`` of an evidence cost say against the amount
    charged, for the text verdict (`wevent.accounting.budget.cost_phrase`, the guard's refusal's
    wording too; display only: the JSON and the reports give the bounds exactly)."""
    return cost_phrase(lower, upper, amount)


@dataclass(frozen=True, slots=True)
class EvidenceFailure:
    """Charges whose evidence certifies a cost above the amount charged (or could not be
    certified below it)."""

    evidence: Evidence
    amount: Fraction
    cost_lower: Fraction
    cost_upper: Fraction
    rows: int
    first_row: int
    first_slot: int

    def describe(self) -> str:
        evidence = json.dumps(evidence_to_json(self.evidence), default=str)
        return (
            f"{self.rows} charge(s) of {format_exact(self.amount)} "
            f"(first: row {self.first_row + 1}, slot {self.first_slot}) carry evidence {evidence} "
            f"whose cost {cost_text(self.cost_lower, self.cost_upper, self.amount)}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "evidence": evidence_to_json(self.evidence),
            "amount": ratio_text(self.amount),
            "cost_lower": ratio_text(self.cost_lower),
            "cost_upper": ratio_text(self.cost_upper),
            "rows": self.rows,
            "first_row": self.first_row + 1,
            "first_slot": self.first_slot,
        }


@dataclass(frozen=True)
class Verdict:
    """The batch checker's answer for one ledger against one population.

    ``user_utilization`` maps each charged user to the largest window sum divided by its bound
    (None where a positive spend meets a zero bound); ``class_utilization`` maps each requirement
    class name to the largest utilization among its charged members. ``charges`` counts the
    ledger's charge records (a group charge once) and ``evidence_charges`` those that carry
    evidence: only their costs were certified (an evidence failure is one of them), the others'
    amounts are checked against the windows as charged, never against a mechanism.
    """

    violations: tuple[Violation, ...]
    evidence_failures: tuple[EvidenceFailure, ...]
    user_utilization: Mapping[str, Fraction | None] = field(repr=False)
    class_utilization: dict[str, Fraction | None]
    horizon: int
    per_user_charges: int
    charges: int
    evidence_charges: int

    @property
    def ok(self) -> bool:
        return not self.violations and not self.evidence_failures

    @property
    def uncertified_charges(self) -> int:
        """Charges without evidence: nothing certified their cost."""
        return self.charges - self.evidence_charges

    def to_json(self) -> dict[str, Any]:
        def u(x: Fraction | None) -> str:
            return "inf" if x is None else ratio_text(x)

        return {
            "ok": self.ok,
            "violations": [v.to_json() for v in self.violations],
            "evidence_failures": [e.to_json() for e in self.evidence_failures],
            "utilization": {
                "classes": {k: u(v) for k, v in self.class_utilization.items()},
                "users": {k: u(v) for k, v in self.user_utilization.items()},
            },
            "horizon": self.horizon,
            "per_user_charges": self.per_user_charges,
            **self.evidence_counts(),
        }

    def evidence_counts(self) -> dict[str, int]:
        """The JSON fields saying how many charges carry evidence (how much was certified)."""
        return {
            "charges": self.charges,
            "charges_with_evidence": self.evidence_charges,
            "charges_without_evidence": self.uncertified_charges,
        }

    def evidence_text(self) -> str:
        """The evidence failures counted against the charges that carry evidence, and the
        charges that carry none said to be uncertified: "0 evidence failures" never reads as
        "every cost certified" when no charge carried evidence."""
        text = (
            f"{len(self.evidence_failures)} evidence failure(s) in {self.evidence_charges} "
            "charge(s) with evidence"
        )
        if self.uncertified_charges:
            text += (
                f", {self.uncertified_charges} charge(s) carry none: their costs are not certified"
            )
        return text


# ---------------------------------------------------------------------------- text


def percent_text(x: Fraction | None, places: int = 2) -> str:
    """Utilization as a percentage, the one formatter of the command line and every report
    (display only, never a decision): exact when the percentage has at most ``places``
    decimals (``83.25%``, ``100%``); otherwise marked ``~`` and rounded to ``places`` decimals,
    half away from zero (133/160 = 83.125% reads ``~83.13%``), with more decimals where that
    rounding would land on 0% or 100% (a value just under the bound never reads as at it).
    Computed on the exact rational."""
    if x is None:
        return "unbounded (positive spend against a zero bound)"
    note = " (at the bound)" if x == 1 else " (over the bound)" if x > 1 else ""
    value = Fraction(x) * 100
    scale = 10**places
    if (value * scale).denominator == 1:
        return f"{format_exact(value)}%{note}"
    digits = places
    while True:
        scale = 10**digits
        rounded = Fraction(math.floor(abs(value) * scale + Fraction(1, 2)), scale)
        if value < 0:
            rounded = -rounded
        if rounded not in (0, 100):
            break
        digits += 1
    whole, frac = divmod(abs(rounded.numerator) * (scale // rounded.denominator), scale)
    sign = "-" if rounded < 0 else ""
    return f"~{sign}{whole}.{frac:0{digits}d}%{note}"


def breaks(violation: Violation, population: Population) -> str:
    """The requirement ``violation`` breaks: for a dynamic user's backward or forward window,
    the declaration in force at its anchor."""
    from wevent.accounting.requirements import Dynamic

    req = population.get(violation.users[0])
    decl = req.governing(violation.kind, violation.anchor) if isinstance(req, Dynamic) else None
    if decl is not None:
        return f"declaration {decl.describe()}"
    if violation.kind == "unregistered":
        return "no requirement in force"
    return violation.requirement


def render_verdict(verdict: Verdict, population: Population, *, limit: int = 50) -> str:
    """Human-readable verdict: violations exactly, then utilization per class."""
    lines = []
    status = "COMPLIANT" if verdict.ok else "NOT COMPLIANT"
    lines.append(
        f"verdict: {status} ({len(verdict.violations)} window violation(s), "
        f"{verdict.evidence_text()}; "
        f"{verdict.per_user_charges} per-user charges, horizon {verdict.horizon} slots)"
    )
    for i, v in enumerate(verdict.violations[:limit], start=1):
        broken = breaks(v, population)
        note = f"; breaks {broken}" if broken.startswith("declaration") else ""
        lines.append(f"  {i}. {v.describe()}{note}")
    if len(verdict.violations) > limit:
        lines.append(f"  ... {len(verdict.violations) - limit} more (use --json for all)")
    for e in verdict.evidence_failures[:limit]:
        lines.append(f"  evidence: {e.describe()}")
    if verdict.class_utilization:
        lines.append("utilization (largest window sum / bound):")
        names = {c.name: c for c in population.classes}
        for name, util in sorted(verdict.class_utilization.items()):
            cls = names.get(name)
            label = f"{name} [{cls.requirement.describe()}, {cls.count} user(s)]" if cls else name
            lines.append(f"  {label}: {percent_text(util)}")
    return "\n".join(lines)
