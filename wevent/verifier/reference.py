"""A slow, obviously-correct checker: enumerate every window of every user and add it up.

It exists to be trusted, not to be fast: property tests hold the vectorized checker (`wevent.verifier.check`)
and the runtime guard to its answers. Semantics are documented in `wevent.verifier.verdict`.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

from wevent.accounting.evidence import Evidence, certify_cost
from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.requirements import Dynamic, Fixed, WholeStream
from wevent.verifier.check import checked_horizon
from wevent.verifier.verdict import EvidenceFailure, Verdict, Violation, ratio

__all__ = ["reference_check"]


def _max_util(a: Fraction | None, b: Fraction | None) -> Fraction | None:
    if a is None or b is None:
        return None
    return max(a, b)


def reference_check(
    ledger: Ledger, population: Population, *, horizon: int | None = None
) -> Verdict:
    spends: dict[str, dict[int, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    last_slot = 0
    per_user = 0
    failures: dict[tuple[Evidence, Fraction], list[tuple[int, int]]] = defaultdict(list)
    charges = with_evidence = 0
    for row, charge in enumerate(ledger):
        charges += 1
        last_slot = max(last_slot, charge.slot)
        if charge.evidence is not None:
            with_evidence += 1
            failures[(charge.evidence, Fraction(charge.amount))].append((row, charge.slot))
    for user in ledger.users:  # every user the ledger mentions gets a utilization, even if 0
        spends[user]
    for user, charge in ledger.expanded():
        per_user += 1
        spends[user][charge.slot] += charge.amount
    horizon_t = checked_horizon(last_slot, horizon)  # the same refusal as every engine

    violations: list[Violation] = []
    utilization: dict[str, Fraction | None] = {}
    for user, by_slot in spends.items():
        positive = sorted((s, a) for s, a in by_slot.items() if a > 0)
        req = population.get(user)

        def window(
            a: int, b: int, positive: list[tuple[int, Fraction]] = positive
        ) -> list[tuple[int, Fraction]]:
            return [(s, x) for s, x in positive if a <= s <= b]

        util: Fraction | None = Fraction(0)
        if req is None:
            if positive:
                total = sum((x for _, x in positive), Fraction(0))
                violations.append(
                    Violation.from_spends(
                        "unregistered",
                        (user,),
                        tuple(positive),
                        total,
                        Fraction(0),
                        "no requirement",
                    )
                )
                util = None
        elif isinstance(req, Fixed):
            cands: list[tuple[int, int]] = []
            for i in range(len(positive)):
                for j in range(i, len(positive)):
                    if positive[j][0] - positive[i][0] > req.w - 1:
                        break
                    if sum((x for _, x in positive[i : j + 1]), Fraction(0)) > req.eps:
                        cands.append((i, j))
            for i, j in cands:
                if any((i2, j2) != (i, j) and i <= i2 and j2 <= j for i2, j2 in cands):
                    continue
                chunk = tuple(positive[i : j + 1])
                violations.append(
                    Violation.from_spends(
                        "fixed",
                        (user,),
                        chunk,
                        sum((x for _, x in chunk), Fraction(0)),
                        req.eps,
                        req.describe(),
                    )
                )
            for t in range(1, horizon_t + 1):
                total = sum((x for _, x in window(t - req.w + 1, t)), Fraction(0))
                util = _max_util(util, ratio(total, req.eps))
        elif isinstance(req, WholeStream):
            total = sum((x for _, x in positive), Fraction(0))
            if total > req.eps:
                violations.append(
                    Violation.from_spends(
                        "whole-stream",
                        (user,),
                        tuple(positive),
                        total,
                        req.eps,
                        req.describe(),
                        anchor=0,
                    )
                )
            util = ratio(total, req.eps)
        else:
            assert isinstance(req, Dynamic)
            early = [(s, x) for s, x in positive if req.in_force(s) is None]
            if early:
                total = sum((x for _, x in early), Fraction(0))
                violations.append(
                    Violation.from_spends(
                        "unregistered", (user,), tuple(early), total, Fraction(0), req.describe()
                    )
                )
                util = None
            seen: set[tuple[str, int, int, Fraction]] = set()
            for t in range(1, horizon_t + 1):
                d = req.in_force(t)
                if d is None:
                    continue
                for kind, a, b, bound in (
                    ("backward", t - d.w_back + 1, t, d.eps_back),
                    ("forward", t, t + d.w_fwd - 1, d.eps_fwd),
                ):
                    inside = window(a, b)
                    total = sum((x for _, x in inside), Fraction(0))
                    util = _max_util(util, ratio(total, bound))
                    if total > bound:
                        key = (kind, inside[0][0], inside[-1][0], bound)
                        if key in seen:
                            continue
                        seen.add(key)
                        violations.append(
                            Violation.from_spends(
                                kind, (user,), tuple(inside), total, bound, req.describe(), anchor=t
                            )
                        )
        utilization[user] = util

    evidence_failures = []
    for (evidence, amount), rows in failures.items():
        result = certify_cost(evidence, amount)
        if not result.ok:
            evidence_failures.append(
                EvidenceFailure(
                    evidence, amount, result.lower, result.upper, len(rows), rows[0][0], rows[0][1]
                )
            )
    class_util: dict[str, Fraction | None] = {}
    for user, u in utilization.items():
        name = population.class_of(user).name if user in population else "unregistered"
        class_util[name] = _max_util(class_util.get(name, Fraction(0)), u)
    return Verdict(
        violations=tuple(sorted(violations, key=Violation.sort_key)),
        evidence_failures=tuple(sorted(evidence_failures, key=lambda e: e.first_row)),
        user_utilization=utilization,
        class_utilization=class_util,
        horizon=horizon_t,
        per_user_charges=per_user,
        charges=charges,
        evidence_charges=with_evidence,
    )
