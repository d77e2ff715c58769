"""The runtime guard: every spend passes through it before any noise is drawn (fail closed).

The guard validates a spend, checks its evidence, asks its *engine* whether any window the spend
touches would break, appends the accepted charge to its ledger and commits it to the engine. Two
engines hold the window state, in exact integers over a common denominator:

* `AccountEngine` (any requirement, dynamic ones included): users who share a requirement and
  have received exactly the same charges share one *account*, so class-level allocators cost
  O(classes) per slot; a charge to part of an account splits it (partition refinement), copying
  the window state, so per-user charges cost O(1) accounts each, in Python per member.
* `wevent.verifier.vector.VectorEngine` (populations of fixed-window and whole-stream requirements): a
  class-wide spend per class plus one integer per user for partial charges, so a charge to k drawn
  users is a few numpy operations over k integers. The default wherever it applies.

Both refuse exactly the same spends (tests/test_guard_engines.py holds them to each other and to a
brute-force model).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget, BudgetError, check_slot
from wevent.accounting.evidence import CostCheck, Evidence, certify_cost
from wevent.accounting.ledger import Charge, Ledger, distinct
from wevent.accounting.population import Population
from wevent.accounting.requirements import requirement_bounds
from wevent.accounting.spending import BudgetExceeded, EvidenceRejected, WindowState
from wevent.verifier.state import AccountState, Window, make_state
from wevent.verifier.vector import Refusal, VectorEngine, vectorizable

__all__ = ["AccountEngine", "Guard"]

Engine = Literal["auto", "vector", "accounts"]
I64 = npt.NDArray[np.int64]


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

    def check(
        self, slot: int, asked: int, user: str | None, group: str | None
    ) -> tuple[Refusal | None, list[_Account]]:
        """The refusal (the first breaking account, its worst window), or None and the accounts
        to commit to."""
        accounts = self.accounts_for(user, group)
        for acc in accounts:
            window = _worst(acc.state.windows(slot), asked)
            if window is not None:
                member = min(acc.members) if group is not None else None
                return Refusal(window, member, len(acc.members), acc.requirement), accounts
        return None, accounts

    @staticmethod
    def commit(slot: int, asked: int, accounts: list[_Account]) -> None:
        for acc in accounts:
            acc.state.commit(slot, asked)

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


def _subject(user: str | None, group: str | None) -> str:
    return f"user {user!r}" if user is not None else f"group {group!r}"


def _worst(windows: list[Window], amount: int) -> Window | None:
    """The window the spend breaks by the most, if any."""
    worst: Window | None = None
    for w in windows:
        if w.spent + amount > w.bound and (
            worst is None or w.spent - w.bound > worst.spent - worst.bound
        ):
            worst = w
    return worst


class Guard:
    """Checks every spend against every constraint it touches, then records it in the ledger.

    Spends must come in non-decreasing slot order (the stream's time). A refused spend raises
    `BudgetExceeded` (or `EvidenceRejected`) and records nothing. Constructing a guard over a ledger
    that already holds charges replays them, so a guard can resume a stored run.

    ``engine`` picks the window state: ``"vector"`` (fixed-window and whole-stream populations
    only), ``"accounts"`` (any population), or ``"auto"`` (vector wherever it applies).
    """

    def __init__(
        self,
        population: Population,
        ledger: Ledger | None = None,
        *,
        check_evidence: bool = True,
        engine: Engine = "auto",
    ) -> None:
        self.population = population
        self.check_evidence = check_evidence
        # Every value is kept as an integer numerator over the common denominator D.
        self._scale = 1
        for cls in population.classes:
            for bound in requirement_bounds(cls.requirement):
                self._scale = math.lcm(self._scale, bound.denominator)
        self.ledger = Ledger()
        if engine not in ("auto", "vector", "accounts"):
            raise BudgetError(f"unknown guard engine {engine!r} (auto, vector or accounts)")
        if engine == "vector" and not vectorizable(population):
            raise BudgetError(
                "the vector engine needs fixed-window or whole-stream requirements only"
            )
        self._vector: VectorEngine | None = None
        self._accounts: AccountEngine | None = None
        if engine != "accounts" and vectorizable(population):
            self._vector = VectorEngine(population, self.ledger, self._scale)
        else:
            self._accounts = AccountEngine(population, self.ledger, self._scale)
        self.engine = "vector" if self._vector is not None else "accounts"
        # Index-based groups: the ledger code of each population user in canonical order (-1:
        # not interned yet), and the tables already found equal to that order.
        self._code_of_index: npt.NDArray[np.int64] | None = None
        self._known_tables: dict[int, Sequence[str]] = {}
        self._by_index = 0  # users interned through the canonical index path
        self._identity = True  # so far, each of those got its canonical index as its code
        self._evidence_checks: dict[tuple[Evidence, Fraction], CostCheck] = {}
        self._checks_by_code: dict[tuple[int, int, int], CostCheck] = {}
        self._slot = 0
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

    def define_group_by_index(
        self, name: str, table: Sequence[str], indices: npt.NDArray[np.int64]
    ) -> None:
        """`define_group` with the members ``table[i] for i in indices``. When ``table`` is the
        population's canonical order (`Population.users`; checked once per table) the members
        are interned in bulk and resolved by array lookups, with no per-member Python work."""
        idx = np.asarray(indices)
        if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
            raise BudgetError(f"group {name!r}: indices must be a 1-D integer array")
        if not idx.size:
            raise BudgetError(f"group {name!r} has no members")
        if int(idx.min()) < 0 or int(idx.max()) >= len(table):
            raise BudgetError(f"group {name!r}: index out of range of the user table")
        if not distinct(idx):
            raise BudgetError(f"group {name!r} lists a member twice")
        if not self._is_canonical(table) or self.ledger.has_group(name):
            # By id: validated before anything is interned (a redefinition must match).
            self.ledger.define_group(name, [table[i] for i in idx.tolist()])
            return
        if self._identity and self._by_index == len(self.population):
            codes = idx  # every population user's code is its index (see below)
        else:
            codes = self._intern_by_index(table, idx)
        # idx is in range and distinct, and index -> code is one-to-one: codes need no check
        self.ledger.define_group_codes(name, codes, validated=True)
        if self._vector is not None:  # its classes are known: plan the group's charges now
            classes = self.population.classes_at(idx)
            self._vector.prepare(self.ledger.group_code(name), codes, classes)

    def _intern_by_index(self, table: Sequence[str], idx: npt.NDArray[np.int64]) -> I64:
        """The ledger codes of the population users at ``idx``, interning new ones in bulk."""
        if self._code_of_index is None:
            self._code_of_index = np.full(len(self.population), -1, np.int64)
        codes = self._code_of_index[idx]
        new = np.flatnonzero(codes < 0)
        if len(new):
            fresh = idx[new]
            lo, hi = int(fresh[0]), int(fresh[-1])
            if hi - lo + 1 == len(fresh) and bool((np.diff(fresh) == 1).all()):
                ids = list(table[lo : hi + 1])  # a run of the table (a whole class)
            else:
                ids = [table[i] for i in fresh.tolist()]
            if self.ledger.user_count == self._by_index:
                # Every user the ledger holds came through here, so these are new; population
                # ids are distinct, valid strings: no lookup by id is needed to intern them.
                fresh_codes = self.ledger.intern_new_users(ids)
            else:
                fresh_codes = self.ledger.intern_users(ids)
            # While every user was interned here with code == index (class groups defined in
            # order, as `class_groups` does), later groups skip the code lookup altogether.
            self._identity = self._identity and bool(np.array_equal(fresh_codes, fresh))
            self._by_index += len(fresh)
            self._code_of_index[fresh] = fresh_codes
            codes[new] = fresh_codes
            if self._vector is not None:
                self._vector.note_classes(fresh_codes, self.population.classes_at(fresh))
        return codes

    def _is_canonical(self, table: Sequence[str]) -> bool:
        canonical = self.population.users
        if table is canonical:
            return True
        known = self._known_tables.get(id(table))
        if known is table:
            return True
        if len(table) != len(canonical) or tuple(table) != canonical:
            return False
        if isinstance(table, tuple):  # immutable: remember it (holding it keeps its id unique)
            self._known_tables[id(table)] = table
        return True

    def members(self, group: str) -> tuple[str, ...]:
        return self.ledger.members(group)

    def group_size(self, group: str) -> int:
        return self.ledger.group_size(group)

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
        ledger = self.ledger
        if group is not None:
            if user is not None:
                raise BudgetError("a charge names exactly one of user or group")
            subject_code = -ledger.group_code(group) - 1  # raises for an undefined group
        elif not isinstance(user, str) or not user:
            if user is None:
                raise BudgetError("a charge names exactly one of user or group")
            raise BudgetError("user ids must be non-empty strings")
        else:
            subject_code = 0  # the user's code: known once the charge is accepted
        evidence_code: int | None = None
        if evidence is not None and self.check_evidence:
            evidence_code = self._check_evidence(evidence, budget, user, group, slot)
        asked = self._numerator(budget)
        vec = self._vector
        if vec is not None:
            plan = vec.plan_group(group) if group is not None else vec.plan_user(user or "")
            refusal, _ = vec.check(slot, asked, plan)
        else:
            assert self._accounts is not None
            refusal, accounts = self._accounts.check(slot, asked, user, group)
        if refusal is not None:
            who = _subject(user, group)
            if group is not None and refusal.member is not None:
                who = f"{who}, member {refusal.member!r}"
            raise BudgetExceeded(
                subject=who,
                slot=slot,
                asked=budget,
                window=self._window_state(refusal.window),
                requirement=refusal.requirement,
                affected_users=refusal.affected,
            )
        if user is not None:
            subject_code = ledger.intern_user(user)
        ledger.append_validated(
            slot, budget, subject_code, part, mechanism, evidence, evidence_code=evidence_code
        )
        if vec is not None:
            vec.commit(slot, asked, plan)
        else:
            assert self._accounts is not None
            self._accounts.commit(slot, asked, accounts)
        self._slot = slot

    def _numerator(self, amount: Fraction) -> int:
        """``amount * D`` as an integer, growing D (and rescaling the engine's state) if needed."""
        den = amount.denominator
        if self._scale % den:
            factor = math.lcm(self._scale, den) // self._scale
            if self._vector is not None:
                self._vector.rescale(factor)
            else:
                assert self._accounts is not None
                self._accounts.rescale(factor)
            self._scale *= factor
        return amount.numerator * (self._scale // den)

    def _window_state(self, w: Window) -> WindowState:
        scale = self._scale
        return WindowState(
            w.kind, w.first, w.last, Fraction(w.spent, scale), Fraction(w.bound, scale)
        )

    def _check_evidence(
        self, evidence: Evidence, amount: Budget, user: str | None, group: str | None, slot: int
    ) -> int | None:
        """Refuse evidence that certifies a cost above ``amount``; return the evidence's code in
        the ledger when it is already there (so the append skips hashing it again).

        Certification results are cached by (ledger code, amount) for evidence the ledger holds
        (one hash of the evidence, none for a reused object), else by the evidence itself."""
        code = self.ledger.evidence_code(evidence)
        if code is not None:
            by_code = (code, amount.numerator, amount.denominator)
            result = self._checks_by_code.get(by_code)
            if result is None:
                result = self._certify(evidence, amount)
                self._checks_by_code[by_code] = result
        else:
            result = self._certify(evidence, amount)
        if not result.ok:
            subject = _subject(user, group)
            raise EvidenceRejected(subject=subject, slot=slot, amount=amount, lower=result.lower)
        return code

    def _certify(self, evidence: Evidence, amount: Budget) -> CostCheck:
        key = (evidence, Fraction(amount))
        result = self._evidence_checks.get(key)
        if result is None:
            result = certify_cost(evidence, amount)
            self._evidence_checks[key] = result
        return result

    def headroom(self, slot: int, *, user: str | None = None, group: str | None = None) -> Fraction:
        """The largest amount a spend at ``slot`` could be charged now without refusal (for a
        group: the smallest headroom among its members)."""
        if slot < self._slot:
            raise BudgetError(f"slot {slot} is before the guard's current slot {self._slot}")
        if (user is None) == (group is None):
            raise BudgetError("name exactly one of user or group")
        if group is not None:
            self.ledger.group_code(group)  # raises for an undefined group
        if self._vector is not None:
            vec = self._vector
            plan = vec.plan_group(group) if group is not None else vec.plan_user(user or "")
            room = vec.headroom(slot, plan)
        else:
            assert self._accounts is not None
            room = self._accounts.headroom(slot, user, group)
        return Fraction(max(room, 0), self._scale)

    def __repr__(self) -> str:
        engine = self._vector.describe() if self._vector is not None else ""
        if self._accounts is not None:
            engine = self._accounts.describe()
        return (
            f"Guard(users={len(self.population)}, charges={len(self.ledger)}, "
            f"slot={self._slot}, {engine})"
        )
