"""The guard's account engine: window state by account, for any requirement (dynamic ones
included). Users who share a requirement and have received exactly the same charges share one
*account*, so class-level allocators cost O(classes) per slot; a charge to part of an account
splits it (partition refinement), copying the window state, so per-user charges cost O(1)
accounts each, in Python per member. One of the guard's engines
(`wevent.verifier.guard_engines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.verifier.state import AccountState, Window, make_state
from wevent.verifier.vector import Refusal

__all__ = ["AccountEngine"]


class _Account:
    __slots__ = ("members", "requirement", "state")

    def __init__(self, members: set[str], requirement: str, state: AccountState) -> None:
        self.members = members
        self.requirement = requirement
        self.state = state


class AccountEngine:
    """Window state by account: users with the same requirement and charge history share one."""

    def __init__(self, population: Population, ledger: Ledger, scale: int) -> None:
        self.ledger = ledger
        self._scale = scale
        self._account_of: dict[str, _Account] = {}
        self._accounts: list[_Account] = []
        for cls in population.classes:
            acc = _Account(
                set(cls.members), cls.requirement.describe(), make_state(cls.requirement, scale)
            )
            self._accounts.append(acc)
            for m in cls.members:
                self._account_of[m] = acc
        self._epoch = 0
        self._group_cache: dict[str, tuple[int, list[_Account]]] = {}

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

    def accounts_for(self, user: str | None, group: str | None) -> list[_Account]:
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

    def plan(self, user: str | None, group: str | None) -> tuple[list[_Account], str | None]:
        """The accounts a charge to ``user`` or ``group`` touches (split off first), and the
        group (None for a charge to a user)."""
        return self.accounts_for(user, group), group

    def check(
        self, slot: int, asked: int, plan: tuple[list[_Account], str | None]
    ) -> Refusal | None:
        """The refusal, or None: the worst window of the first breaking member in group order
        (as the vector engine), and how many members break a window (every breaking account)."""
        accounts, group = plan
        breaking: dict[int, tuple[_Account, Window]] = {}
        for acc in accounts:
            window = _worst(acc.state.windows(slot), asked)
            if window is not None:
                breaking[id(acc)] = (acc, window)
        if not breaking:
            return None
        affected = sum(len(acc.members) for acc, _ in breaking.values())
        if group is None:
            acc, window = next(iter(breaking.values()))
            return Refusal(window, None, affected, acc.requirement)
        for member in self.ledger.members(group):  # only when refusing: the first in order
            found = breaking.get(id(self._account_of.get(member) or self._account(member)))
            if found is not None:
                return Refusal(found[1], member, affected, found[0].requirement)
        raise AssertionError("a breaking account holds none of the group's members")

    def commit(self, slot: int, asked: int, plan: tuple[list[_Account], str | None]) -> None:
        for acc in plan[0]:
            acc.state.commit(slot, asked)

    def charge_whole_classes(self, slot: int, charges: Sequence[tuple[int, int]]) -> int:
        """No shortcut: every charge goes through `check` and `commit`."""
        return 0

    def group_defined(
        self, group_code: int, codes: Any, indices: Any, *, ascending: bool | None = None
    ) -> None:
        """Nothing to prepare: accounts are found (and split) when a group is charged."""

    def users_interned(self, codes: Any, indices: Any) -> None:
        """Nothing to note: accounts are by user id."""

    def rescale(self, factor: int) -> None:
        for acc in self._accounts:
            acc.state.rescale(factor)
        self._scale *= factor

    def headroom(self, slot: int, user: str | None, group: str | None) -> int:
        accounts = [self._account(user)] if user is not None else self.accounts_for(None, group)
        room: int | None = None
        for acc in accounts:
            for w in acc.state.windows(slot):
                r = w.bound - w.spent
                room = r if room is None else min(room, r)
        return room or 0

    def describe(self) -> str:
        return f"accounts={len({id(a) for a in self._account_of.values()})}"


def _worst(windows: list[Window], amount: int) -> Window | None:
    """The window the spend breaks by the most, if any."""
    worst: Window | None = None
    for w in windows:
        if w.spent + amount > w.bound and (
            worst is None or w.spent - w.bound > worst.spent - worst.bound
        ):
            worst = w
    return worst
