"""The runtime guard: every spend passes through it before any noise is drawn (fail closed).

Users who share a requirement and have received exactly the same charges share one *account*, so
class-level allocators cost O(classes) per slot. A charge to part of an account splits it (partition
refinement), copying the window state; per-user charges therefore cost O(1) accounts each.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

from accounting.budget import Budget, BudgetError, check_slot
from accounting.evidence import CostCheck, Evidence, certify_cost
from accounting.ledger import Charge, Ledger
from accounting.population import Population
from accounting.requirements import requirement_bounds
from accounting.spending import BudgetExceeded, EvidenceRejected, WindowState
from verifier.state import AccountState, Window, make_state

__all__ = ["Guard"]


class _Account:
    __slots__ = ("members", "requirement", "state")

    def __init__(self, members: set[str], requirement: str, state: AccountState) -> None:
        self.members = members
        self.requirement = requirement
        self.state = state


class Guard:
    """Checks every spend against every constraint it touches, then records it in the ledger.

    Spends must come in non-decreasing slot order (the stream's time). A refused spend raises
    `BudgetExceeded` (or `EvidenceRejected`) and records nothing. Constructing a guard over a ledger
    that already holds charges replays them, so a guard can resume a stored run.
    """

    def __init__(
        self, population: Population, ledger: Ledger | None = None, *, check_evidence: bool = True
    ) -> None:
        self.population = population
        self.check_evidence = check_evidence
        # Every value is kept as an integer numerator over the common denominator D.
        self._scale = 1
        for cls in population.classes:
            for bound in requirement_bounds(cls.requirement):
                self._scale = math.lcm(self._scale, bound.denominator)
        self._account_of: dict[str, _Account] = {}
        self._accounts: list[_Account] = []
        for cls in population.classes:
            acc = _Account(
                set(cls.members),
                cls.requirement.describe(),
                make_state(cls.requirement, self._scale),
            )
            self._accounts.append(acc)
            for m in cls.members:
                self._account_of[m] = acc
        self._epoch = 0
        self._group_cache: dict[str, tuple[int, list[_Account]]] = {}
        self._evidence_checks: dict[tuple[Evidence, Fraction], CostCheck] = {}
        self._slot = 0
        self.ledger = Ledger()
        if ledger is not None:
            for name, members in ledger.groups.items():
                self.define_group(name, members)
            for ch in ledger:
                self.spend_charge(ch)

    def spend_charge(self, charge: Charge) -> None:
        """`spend` with the fields of a ledger charge (replaying a stored ledger)."""
        self.spend(
            charge.slot,
            charge.amount,
            user=charge.user,
            group=charge.group,
            part=charge.part,
            mechanism=charge.mechanism,
            evidence=charge.evidence,
        )

    @property
    def slot(self) -> int:
        """The latest slot a spend was recorded at (0 before any)."""
        return self._slot

    def define_group(self, name: str, members: Iterable[str]) -> None:
        self.ledger.define_group(name, members)

    def members(self, group: str) -> tuple[str, ...]:
        return self.ledger.members(group)

    # ------------------------------------------------------------------ accounts

    def _account(self, user: str) -> _Account:
        acc = self._account_of.get(user)
        if acc is None:  # a user with no requirement: an account that only admits zero
            acc = _Account({user}, "no requirement", make_state(None, self._scale))
            self._account_of[user] = acc
            self._accounts.append(acc)
        return acc

    def _split(self, acc: _Account, inside: set[str]) -> _Account:
        """Make ``inside`` (a proper subset of ``acc``) its own account; return it."""
        self._epoch += 1
        outside_n = len(acc.members) - len(inside)
        if len(inside) <= outside_n:
            new = _Account(inside, acc.requirement, acc.state.clone())
            self._accounts.append(new)
            acc.members -= inside
            for m in inside:
                self._account_of[m] = new
            return new
        outside = acc.members - inside
        new = _Account(outside, acc.requirement, acc.state.clone())
        self._accounts.append(new)
        acc.members = inside
        for m in outside:
            self._account_of[m] = new
        return acc

    def _accounts_for(self, user: str | None, group: str | None) -> list[_Account]:
        if user is not None:
            acc = self._account(user)
            if len(acc.members) > 1:
                acc = self._split(acc, {user})
            return [acc]
        assert group is not None
        cached = self._group_cache.get(group)
        if cached is not None and cached[0] == self._epoch:
            return cached[1]
        touched: dict[int, tuple[_Account, set[str]]] = {}
        account_of = self._account_of
        for m in self.ledger.members(group):
            acc = account_of.get(m) or self._account(m)
            entry = touched.get(id(acc))
            if entry is None:
                entry = touched[id(acc)] = (acc, set())
            entry[1].add(m)
        accounts = []
        for acc, inside in touched.values():
            accounts.append(acc if len(inside) == len(acc.members) else self._split(acc, inside))
        self._group_cache[group] = (self._epoch, accounts)
        return accounts

    # ------------------------------------------------------------------ spending

    def spend(
        self,
        slot: int,
        amount: Budget | Fraction | int | str,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "",
        evidence: Evidence | None = None,
    ) -> None:
        """Check the spend against every constraint it touches; record it or raise and record
        nothing (`BudgetExceeded`, `EvidenceRejected`, or `BudgetError` for malformed input)."""
        check_slot(slot)
        if slot < self._slot:
            raise BudgetError(
                f"slot {slot} is before the guard's current slot {self._slot}: "
                "spends must arrive in slot order"
            )
        budget = amount if isinstance(amount, Budget) else Budget(amount)
        if (user is None) == (group is None):
            raise BudgetError("a charge names exactly one of user or group")
        subject = f"user {user!r}" if user is not None else f"group {group!r}"
        if group is not None:
            self.ledger.members(group)  # raises for an undefined group
        if evidence is not None and self.check_evidence:
            self._check_evidence(evidence, budget, subject, slot)
        asked = self._numerator(budget)
        accounts = self._accounts_for(user, group)
        for acc in accounts:
            window = self._refusal(acc.state.windows(slot), asked)
            if window is not None:
                who = subject
                if group is not None:
                    sample = min(acc.members)
                    who = f"{subject}, member {sample!r}"
                raise BudgetExceeded(
                    subject=who,
                    slot=slot,
                    asked=budget,
                    window=self._window_state(window),
                    requirement=acc.requirement,
                    affected_users=len(acc.members),
                )
        self.ledger.append(
            slot, budget, user=user, group=group, part=part, mechanism=mechanism, evidence=evidence
        )
        for acc in accounts:
            acc.state.commit(slot, asked)
        self._slot = slot

    def _numerator(self, amount: Fraction) -> int:
        """``amount * D`` as an integer, growing D (and rescaling every account) if needed."""
        den = amount.denominator
        if self._scale % den:
            factor = math.lcm(self._scale, den) // self._scale
            for acc in self._accounts:
                acc.state.rescale(factor)
            self._scale *= factor
        return amount.numerator * (self._scale // den)

    def _window_state(self, w: Window) -> WindowState:
        scale = self._scale
        return WindowState(
            w.kind, w.first, w.last, Fraction(w.spent, scale), Fraction(w.bound, scale)
        )

    @staticmethod
    def _refusal(windows: list[Window], amount: int) -> Window | None:
        """The window the spend breaks by the most, if any."""
        worst: Window | None = None
        for w in windows:
            if w.spent + amount > w.bound and (
                worst is None or w.spent - w.bound > worst.spent - worst.bound
            ):
                worst = w
        return worst

    def _check_evidence(self, evidence: Evidence, amount: Budget, subject: str, slot: int) -> None:
        key = (evidence, Fraction(amount))
        result = self._evidence_checks.get(key)
        if result is None:
            result = certify_cost(evidence, amount)
            self._evidence_checks[key] = result
        if not result.ok:
            raise EvidenceRejected(subject=subject, slot=slot, amount=amount, lower=result.lower)

    def headroom(self, slot: int, *, user: str | None = None, group: str | None = None) -> Fraction:
        """The largest amount a spend at ``slot`` could be charged now without refusal (for a
        group: the smallest headroom among its members)."""
        if slot < self._slot:
            raise BudgetError(f"slot {slot} is before the guard's current slot {self._slot}")
        if (user is None) == (group is None):
            raise BudgetError("name exactly one of user or group")
        if user is not None:
            accounts = [self._account(user)]
        else:
            assert group is not None
            accounts = self._accounts_for(None, group)
        room: int | None = None
        for acc in accounts:
            for w in acc.state.windows(slot):
                r = w.bound - w.spent
                room = r if room is None else min(room, r)
        return Fraction(max(room or 0, 0), self._scale)

    def __repr__(self) -> str:
        return (
            f"Guard(users={len(self.population)}, charges={len(self.ledger)}, "
            f"slot={self._slot}, accounts={len({id(a) for a in self._account_of.values()})})"
        )
