"""The runtime guard: every spend passes through it before any noise is drawn (fail closed).

The guard validates a spend, checks its evidence, asks its *engine* whether any window the spend
touches would break, appends the accepted charge to its ledger and commits it to the engine. The
engines hold the window state, in exact integers over a common denominator; they share one protocol
and are chosen by name from one registry (`wevent.verifier.guard_engines`):

* ``accounts`` (`wevent.verifier.accounts.AccountEngine`; any requirement, dynamic ones included):
  users who share a requirement and have received exactly the same charges share one *account*, so
  class-level allocators cost O(classes) per slot; a charge to part of an account splits it
  (partition refinement), copying the window state, so per-user charges cost O(1) accounts each,
  in Python per member.
* ``vector`` (`wevent.verifier.vector.VectorEngine`; populations of fixed-window and whole-stream
  requirements): a class-wide spend per class plus one integer per user for partial charges, so a
  charge to k drawn users is a few numpy operations over k integers. The default wherever it
  applies.

Both refuse exactly the same spends (tests/test_guard_engines.py holds them to each other and to a
brute-force model).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import (
    MAX_SLOT,
    Budget,
    BudgetError,
    check_common_denominator,
    check_slot,
)
from wevent.accounting.evidence import (
    CostCertifier,
    CostCheck,
    Evidence,
    is_evidence,
    kind_of,
)
from wevent.accounting.ledger import (
    Charge,
    Ledger,
    ValidatedRow,
    check_labels,
    distinct,
    every,
)
from wevent.accounting.population import Population
from wevent.accounting.recovery import Recovered, open_durable
from wevent.accounting.requirements import Dynamic, requirement_bounds
from wevent.accounting.sinks import LedgerSink
from wevent.accounting.spending import BudgetExceeded, EvidenceRejected, WindowState
from wevent.errors import WeventError
from wevent.verifier.accounts import AccountEngine
from wevent.verifier.guard_engines import AUTO, GuardEngine, choose_guard_engine
from wevent.verifier.state import Window

__all__ = ["AccountEngine", "Guard"]

Engine = str  # a guard engine's name: "auto" or one of `guard_engines.GUARD_ENGINES`
I64 = npt.NDArray[np.int64]


# How many charges `spend_many`'s shortcut looks at per call: a class-level slot's charges
# (one per requirement class) fit; a batch that alternates with other charges stays linear.
_LOOK_AHEAD = 64
_KNOWN_ROWS = 4096  # class charges `Guard._known_rows` keeps before it is emptied
_NO_COMMIT: AbstractContextManager[None] = nullcontext()  # `Guard.batch` with no sink (reentrant)


class SinkFailed(WeventError):
    """A spend refused because the guard's durable ledger failed to take or commit an earlier
    charge, or the guard failed to count a charge its ledger holds."""


def _subject(user: str | None, group: str | None) -> str:
    return f"user {user!r}" if user is not None else f"group {group!r}"


class Guard:
    """Checks every spend against every constraint it touches, then records it in the ledger.

    Spends must come in non-decreasing slot order (the stream's time). A refused spend raises
    `BudgetExceeded` (or `EvidenceRejected`) and records nothing. Constructing a guard over a ledger
    that already holds charges replays them, so a guard can resume a stored run.

    ``engine`` picks the window state by name (`wevent.verifier.guard_engines`): ``"vector"``
    (fixed-window and whole-stream populations only), ``"accounts"`` (any population), or
    ``"auto"`` (vector wherever it applies). An unknown name is an `InputError` (it names the
    close ones).
    """

    def __init__(
        self,
        population: Population,
        ledger: Ledger | None = None,
        *,
        check_evidence: bool = True,
        engine: str = AUTO,
        sink: LedgerSink | None = None,
    ) -> None:
        self.population = population
        self.check_evidence = check_evidence
        # Every value is kept as an integer numerator over the common denominator D.
        self._scale = 1
        for cls in population.classes:
            for bound in requirement_bounds(cls.requirement):
                self._scale = math.lcm(self._scale, bound.denominator)
        self.ledger = Ledger()
        spec = choose_guard_engine(engine, population)
        self._engine: GuardEngine = spec.factory(population, self.ledger, self._scale)
        self.engine = spec.name
        # Index-based groups: the ledger code of each population user in canonical order (-1:
        # not interned yet), and the tables already found equal to that order.
        self._code_of_index: npt.NDArray[np.int64] | None = None
        self._known_tables: dict[int, Sequence[str]] = {}
        self._users: tuple[str, ...] | None = None  # `Population.users`, once a group used it
        self._by_index = 0  # users interned through the canonical index path
        self._population_size = len(population)  # (a population never changes)
        self._identity = True  # so far, each of those got its canonical index as its code
        self._positions: npt.NDArray[np.int32] | None = None  # scratch of `_distinct_indices`
        self._certifier = CostCertifier()
        # (group, amount's numerator and denominator, id of the evidence) -> (the evidence,
        # the engine's item, group code, amount code, evidence code) of a class charge the
        # shortcut resolved with every code known: the same charge again (a class-level
        # allocator's next slots) skips the lookups. Emptied when the denominator grows.
        self._known_rows: dict[
            tuple[str, int, int, int], tuple[Evidence | None, tuple[int, int], int, int, int]
        ] = {}
        self._checks_by_code: dict[tuple[int, int, int], CostCheck] = {}
        # (id of the evidence, amount) -> (the evidence, its ledger code) for evidence the
        # ledger holds and certified for that amount: the ledger keeps it alive, so the id
        # stays its own (checked by identity anyway).
        self._certified: dict[tuple[int, int, int], tuple[Evidence, int]] = {}
        self._slot = 0
        self._sink: LedgerSink | None = None
        self._batch = 0  # open spend_many calls: their charges commit together at the end
        self._broken: BaseException | None = None  # set by `_fail`: refuse every spend
        self._broken_on = "charge"  # what failed: a charge or a group definition
        if ledger is not None:
            for name, members in ledger.groups.items():
                self.define_group(name, members)
            for ch in ledger:
                self.spend_charge(ch)
        self._sink = sink  # a replayed ledger is already where it came from

    @classmethod
    def recover(
        cls, path: Path | str, population: Population, **options: Any
    ) -> tuple[Guard, Recovered]:
        """A guard that continues the durable ledger at ``path`` after a crash: the ledger is
        verified (a tampered one is refused), a torn tail is cut off into a side file and
        reported, every committed charge is replayed into the guard's windows, and the guard
        then writes ahead to the same ledger. Nothing the recovered windows no longer allow can
        be spent again. ``options`` are the constructor's (``engine``, ``check_evidence``)."""
        sink, recovered = open_durable(path, resume=True)
        assert recovered is not None
        try:
            return cls(population, recovered.ledger, sink=sink, **options), recovered
        except BaseException:
            sink.abandon()
            raise

    @property
    def broken(self) -> BaseException | None:
        """The failure that stops every later spend (a sink that failed, or an exception that
        broke off a spend after the windows may have changed), if any."""
        return self._broken

    @property
    def sink(self) -> LedgerSink | None:
        """The durable ledger every accepted charge is committed to before `spend` returns."""
        return self._sink

    def spend_charge(self, charge: Charge) -> None:
        """`spend` with the fields of a ledger charge (replaying a stored ledger)."""
        self._spend(
            charge.slot,
            charge.amount,
            charge.user,
            charge.group,
            charge.part,
            charge.mechanism,
            charge.evidence,
        )

    @property
    def slot(self) -> int:
        """The latest slot a spend was recorded at (0 before any)."""
        return self._slot

    def define_group(self, name: str, members: Iterable[str]) -> None:
        known = self.ledger.has_group(name)
        self.ledger.define_group(name, members)  # a redefinition must match (checked there)
        if not known:
            self._defined(name)

    def define_group_by_index(
        self, name: str, table: Sequence[str], indices: npt.NDArray[np.int64]
    ) -> None:
        """`define_group` with the members ``table[i] for i in indices``. When ``table`` is the
        population's canonical order (`Population.users`; checked once per table) the members
        are interned in bulk and resolved by array lookups, with no per-member Python work."""
        idx = indices if type(indices) is np.ndarray else np.asarray(indices)
        if idx.ndim == 1 and not idx.size:
            idx = idx.astype(np.int64)  # np.array([]) is float: no member, whatever its type
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):  # (integer dtypes)
            raise BudgetError(f"group {name!r}: indices must be a 1-D integer array")
        # How the mechanisms draw members: ascending, so distinct, with the extremes at the ends
        # (one pass over the indices answers all three questions).
        ascending = len(idx) < 2 or every(idx[1:] > idx[:-1])
        if idx.size:
            lo, hi = (idx[0], idx[-1]) if ascending else (idx.min(), idx.max())
            if int(lo) < 0 or int(hi) >= len(table):
                raise BudgetError(f"group {name!r}: index out of range of the user table")
        if not ascending and not self._distinct_indices(idx, len(table)):
            raise BudgetError(f"group {name!r} lists a member twice")
        if not (table is self._users or self._is_canonical(table)) or self.ledger.has_group(name):
            # By id: validated before anything is interned (a redefinition must match).
            self.define_group(name, [table[i] for i in idx.tolist()])
            return
        if self._identity and self._by_index == self._population_size:
            codes = idx  # every population user's code is its index (see below)
        else:
            codes = self._intern_by_index(idx)
        # The engine keeps a read-only copy of the codes: ``codes`` may be the caller's own
        # array, which it is free to change afterwards (the ledger keeps a narrower copy).
        codes = codes.astype(np.int64)
        codes.flags.writeable = False
        # idx is in range and distinct, and index -> code is one-to-one: codes need no check
        group = self.ledger.define_new_group_codes(name, codes)
        self._defined(
            name, lambda: self._engine.group_defined(group, codes, idx, ascending=ascending)
        )

    def _defined(self, name: str, engine: Callable[[], None] | None = None) -> None:
        """Tell the engine (``engine``, if given) and the sink of a group the ledger has just
        taken. If either raises, the ledger holds a group the engine or the durable ledger may
        not (a charge to it could not be counted or written, and a retry would find it known
        and skip both): every later spend is refused."""
        try:
            if engine is not None:
                engine()
            if self._sink is not None:
                self._sink.define_group(name, self.ledger.members(name))
        except BaseException as exc:
            self._fail(exc, "group definition")
            raise

    def _distinct_indices(self, idx: npt.NDArray[np.int64], size: int) -> bool:
        """Whether ``idx`` (in range of a table of ``size``; not ascending, which would answer
        at once) lists no index twice, in linear time: each index writes its position into a
        scratch array, and reads it back; an index listed twice reads the position of its last
        listing at its first. (A sort, what `distinct` does for arbitrary values, took most of a
        10,000-member group's definition.)"""
        if len(idx) < 2:
            return True
        if len(idx) >= 2**31 - 1:
            return distinct(idx)
        if self._positions is None or len(self._positions) < size:
            self._positions = np.empty(size, np.int32)  # stale values are never read unwritten
        positions = np.arange(len(idx), dtype=np.int32)
        self._positions[idx] = positions
        return every(self._positions[idx] == positions)

    def _intern_by_index(self, idx: npt.NDArray[np.int64]) -> I64:
        """The ledger codes of the population users at ``idx``, interning new ones in bulk.
        The ids are read from the population's own table, never from the caller's: a table
        found equal to it by iteration is not trusted to index the same way (a sequence whose
        ``[]`` disagrees with its iteration would put a user under another class's bound)."""
        table = self.population.users
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
            self._engine.users_interned(fresh_codes, fresh)
        return codes

    def _is_canonical(self, table: Sequence[str]) -> bool:
        canonical = self.population.users
        if table is canonical:
            self._users = canonical  # (define_group_by_index tests this first: no call)
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
        self._spend(slot, amount, user, group, part, mechanism, evidence)

    def _spend(
        self,
        slot: int,
        amount: Budget | Fraction | int | str,
        user: str | None,
        group: str | None,
        part: str,
        mechanism: str,
        evidence: Evidence | None,
    ) -> None:
        """`spend` with positional arguments: the path every spend takes (`spend_many` calls it
        once per charge, without keyword passing)."""
        if self._broken is not None:
            self._refuse_broken()
        if type(slot) is not int or not 0 < slot <= MAX_SLOT:
            check_slot(slot)  # raises for anything but a valid slot (an int subclass may pass)
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
        if type(part) is not str or type(mechanism) is not str:
            check_labels(part, mechanism)
        evidence_code: int | None = None
        if evidence is not None:
            if not is_evidence(evidence):
                kind_of(evidence)  # its TypeError: not evidence of a registered kind
            if self.check_evidence:
                evidence_code = self._check_evidence(evidence, budget, user, group, slot)
        asked = self._numerator(budget)
        engine = self._engine
        plan = engine.plan(user, group)
        try:
            refusal = engine.check(slot, asked, plan)
        except BaseException as exc:  # its expiries may be half applied: fail closed
            self._fail(exc)
            raise
        if refusal is not None:
            who = _subject(user, group)
            if group is not None and refusal.member is not None:
                who = f"{who}, member {refusal.member!r}"
            window = self._window_state(refusal.window)
            breaker = user if group is None else refusal.member
            raise BudgetExceeded(
                subject=who,
                slot=slot,
                asked=budget,
                window=window,
                requirement=refusal.requirement,
                affected_users=refusal.affected,
                declaration=self._declaration(breaker, window),
            )
        try:
            # The passing check applied the windows' expiries up to ``slot`` (kept for the
            # commit): whatever raises from here on leaves the ledger and the windows possibly
            # apart, so every later spend is refused (`_fail`).
            if user is not None:
                subject_code = ledger.intern_user(user)
            ledger.append_validated(
                slot, budget, subject_code, part, mechanism, evidence, evidence_code=evidence_code
            )
            if evidence_code is None and evidence is not None and self.check_evidence:
                self._remember_certified(evidence, budget)  # certified above, held from now on
            engine.commit(slot, asked, plan)
            self._slot = slot
        except BaseException as exc:
            self._fail(exc)
            raise
        if self._sink is not None:
            # Write ahead: the charge is durable before the caller may draw its noise. A failed
            # commit raises, so no noise is drawn; the charge stays counted here (fail closed).
            self._append_to_sink(len(ledger) - 1)
            if not self._batch:
                self._commit()

    def spend_many(self, charges: Iterable[Charge]) -> None:
        """`spend` each of ``charges`` in order, with one durable commit for all of them (group
        commit) before returning. If one is refused, the ones before it stay charged and are
        committed (conservative: nothing is released for any of them), then the refusal is
        raised."""
        if self._sink is None:  # nothing to commit: no batch to open
            self._spend_each(charges)
        else:
            with self.batch():
                self._spend_each(charges)

    def _spend_each(self, charges: Iterable[Charge]) -> None:
        spend = self._spend
        if not isinstance(charges, list | tuple):
            for c in charges:
                spend(c.slot, c.amount, c.user, c.group, c.part, c.mechanism, c.evidence)
            return
        # The shortcut takes what it can; a charge it leaves goes through `_spend`, then the
        # shortcut tries the rest (until it has left two charges in a row).
        i, n, misses = 0, len(charges), 0
        while i < n:
            if misses < 2:
                # a bounded look ahead keeps a batch that alternates with other charges linear
                taken = self._charge_whole_classes(charges[i : i + _LOOK_AHEAD])
                misses = 0 if taken else misses + 1
                i += taken
                if i == n:
                    break
            c = charges[i]
            spend(c.slot, c.amount, c.user, c.group, c.part, c.mechanism, c.evidence)
            i += 1

    def _charge_whole_classes(self, charges: Sequence[Charge]) -> int:
        """`spend_many`'s shortcut for its leading charges that are to whole requirement
        classes at one slot with one part and mechanism (a class-level allocator's slot): what
        `_spend` would do for each, with the engine's checks and commits in one call
        (`charge_whole_classes`) and the ledger's rows in one append. It takes a charge only
        where that is certainly what `_spend` would accept and record: a valid slot, an exact
        `Budget` over the guard's denominator, a defined group, string labels, evidence this
        guard certifies for this amount (or, unchecked, evidence the ledger can hold). It stops
        at the first other charge, and at anything that raises (`_spend` raises it in its turn,
        after the charges before it), and returns how many it took; `_spend` handles the rest
        (and refuses there what must be refused). Every code a taken row needs is found before
        the engine commits it, so the ledger append cannot fail on it. Once every value of the
        rows has its code in the ledger (after its first charges), the rows go in as codes
        (`Ledger.append_coded_rows`)."""
        if self._broken is not None or not charges:
            return 0
        first = charges[0]
        slot, part, mechanism = first.slot, first.part, first.mechanism
        if type(slot) is not int or not self._slot <= slot <= MAX_SLOT or slot < 1:
            return 0
        if type(part) is not str or type(mechanism) is not str:
            return 0
        ledger, scale, certified = self.ledger, self._scale, self._certified
        check_evidence = self.check_evidence
        groups, amount_codes, known = ledger.group_index, ledger.amount_codes, self._known_rows
        labels = ledger.label_codes(part, mechanism)
        coded = labels is not None  # every value has its code: `append_coded_rows`
        items: list[tuple[int, int]] = []
        group_codes: list[int] = []
        amounts: list[int] = []
        evidences: list[int] = []  # -1: none, or not in the ledger yet (then not `coded`)
        fresh: list[tuple[Evidence, Budget]] = []  # certified, but not in the ledger yet
        for c in charges:
            s, p, m = c.slot, c.part, c.mechanism
            if s is not slot and (type(s) is not int or s != slot):
                break
            if p is not part and (type(p) is not str or p != part):
                break
            if m is not mechanism and (type(m) is not str or m != mechanism):
                break
            amount, group, evidence = c.amount, c.group, c.evidence
            if type(amount) is not Budget or type(group) is not str or c.user is not None:
                break
            num, den = pair = amount.as_integer_ratio()
            key = (group, num, den, id(evidence))
            row = known.get(key)
            if row is not None and row[0] is evidence:  # taken before, as it is now
                items.append(row[1])
                group_codes.append(row[2])
                amounts.append(row[3])
                evidences.append(row[4])
                continue
            code = groups.get(group)
            if code is None or scale % den:
                break
            if evidence is None:
                evidence_code = -1
            else:
                # A certified pair is found by the object's identity: the object passed
                # `is_evidence` before it was certified.
                hit = certified.get((id(evidence), num, den)) if check_evidence else None
                if hit is not None and hit[0] is evidence:
                    evidence_code = hit[1]
                else:
                    if not is_evidence(evidence):
                        break  # `_spend` refuses it
                    try:
                        if check_evidence:  # certified here
                            held, failed = self._evidence_check(evidence, amount)
                            if failed is not None:
                                break
                        else:  # what the append looks up (an unhashable record raises here)
                            held = ledger.evidence_code(evidence)
                    except Exception:  # `_spend` raises it, after the charges before it
                        break
                    if held is None:
                        evidence_code, coded = -1, False  # the append interns it
                        if check_evidence:
                            fresh.append((evidence, amount))
                    else:
                        evidence_code = held
            amount_code = amount_codes.get(pair)
            item = (code, num * (scale // den))
            if amount_code is None:
                amount_code, coded = -1, False  # the append interns it
            elif check_evidence and (evidence_code >= 0 or evidence is None):  # kept
                if len(known) >= _KNOWN_ROWS:
                    known.clear()
                known[key] = (evidence, item, code, amount_code, evidence_code)
            items.append(item)
            group_codes.append(code)
            amounts.append(amount_code)
            evidences.append(evidence_code)
        if not items:
            return 0
        # The engine commits before the ledger appends: whatever raises after the engine was
        # called leaves them possibly apart, so every later spend is refused (`_fail`).
        try:
            if self._sink is None:
                taken = self._engine.charge_whole_classes(slot, items)
                if taken:
                    if coded:
                        if taken < len(items):
                            del group_codes[taken:], amounts[taken:], evidences[taken:]
                        assert labels is not None
                        ledger.append_coded_rows(slot, group_codes, amounts, evidences, labels)
                    else:
                        ledger.append_validated_rows(
                            slot, self._rows(charges, group_codes, evidences, taken)
                        )
                    self._slot = slot
            else:  # write ahead charge by charge, in `_spend`'s order (a failed append stops it)
                taken = 0
                for item in items:
                    if not self._engine.charge_whole_classes(slot, (item,)):
                        break
                    one = slice(taken, taken + 1)
                    rows = self._rows(charges[one], group_codes[one], evidences[one], 1)
                    ledger.append_validated_rows(slot, rows)
                    taken += 1
                    self._slot = slot
                    self._append_to_sink(len(ledger) - 1)
            for evidence, amount in fresh:  # (one not taken is not in the ledger: skipped)
                self._remember_certified(evidence, amount)
        except BaseException as exc:
            self._fail(exc)
            raise
        return taken

    @staticmethod
    def _rows(
        charges: Sequence[Charge], group_codes: list[int], evidences: list[int], taken: int
    ) -> list[ValidatedRow]:
        """The first ``taken`` of the shortcut's charges as the ledger's validated rows (an
        evidence code of -1 there: none, or one the append interns)."""
        return [
            (c.amount, -code - 1, c.part, c.mechanism, c.evidence, None if ev < 0 else ev)
            for c, code, ev in zip(charges[:taken], group_codes, evidences, strict=False)
        ]

    def batch(self) -> AbstractContextManager[None]:
        """Group commit: the spends inside share one durable commit, made when the block ends
        (also when it raises). No noise may be drawn inside the block: a spend in it returns
        before its charge is on disk. `spend_many` is this around a list of charges. An
        in-memory guard (no sink, for its whole life) has nothing to commit: a no-op block."""
        return _NO_COMMIT if self._sink is None else self._durable_batch()

    @contextmanager
    def _durable_batch(self) -> Iterator[None]:
        self._batch += 1
        try:
            yield
        finally:
            self._batch -= 1
            if self._sink is not None and not self._batch and self._broken is None:
                self._commit()

    def _append_to_sink(self, row: int) -> None:
        """Hand the ledger's accepted charge ``row`` to the durable sink; if that fails, every
        later spend is refused (fail closed): the charge counts here but may never reach the
        disk, and a recovery from the disk would give its budget back."""
        assert self._sink is not None
        try:
            self._sink.append_charge(self.ledger.charge(row))
        except BaseException as exc:
            self._fail(exc)
            raise

    def _refuse_broken(self) -> None:
        """Raise `SinkFailed` for a guard an earlier failure broke (`_fail`)."""
        raise SinkFailed(
            f"{'the durable ledger' if self._sink is not None else 'the guard'} failed on "
            f"an earlier {self._broken_on} ({self._broken!r}); every spend is refused "
            + (
                "until it is recovered (wevent run --resume, Guard.recover)"
                if self._sink is not None
                else "(an in-memory guard: start a new one)"
            )
        )

    def _fail(self, exc: BaseException, on: str = "charge") -> None:
        """Refuse every later spend (fail closed): ``exc`` broke off a spend after the engine
        may have changed its windows, or the sink failed (on a ``charge`` or a ``group
        definition``), so the windows, the ledger and the disk may disagree. The first failure
        is the one kept."""
        if self._broken is None:
            self._broken, self._broken_on = exc, on

    def _commit(self) -> None:
        """Commit the sink; after a failed commit every later spend is refused (fail closed):
        the durable ledger's state is unknown until it is recovered."""
        assert self._sink is not None
        try:
            self._sink.commit()
        except BaseException as exc:
            self._fail(exc)
            raise

    def _numerator(self, amount: Fraction) -> int:
        """``amount * D`` as an integer, growing D (and rescaling the engine's state) if needed."""
        den = amount.denominator
        if self._scale % den:
            check_common_denominator(math.lcm(self._scale, den), "guard")
            factor = math.lcm(self._scale, den) // self._scale
            self._known_rows.clear()  # their amounts are over the old denominator
            try:
                self._engine.rescale(factor)
                self._scale *= factor
            except BaseException as exc:  # the engine and the scale may disagree: fail closed
                self._fail(exc)
                raise
        return amount.numerator * (self._scale // den)

    def _declaration(self, user: str | None, window: WindowState) -> str | None:
        """For a dynamic user's backward or forward window, the declaration it belongs to (in
        force at its anchor: the backward window's last slot, the forward window's first), as
        the batch checker's text names it; else None."""
        req = None if user is None else self.population.get(user)
        if not isinstance(req, Dynamic):
            return None
        anchor = window.last if window.kind == "backward" else window.first
        decl = req.governing(window.kind, anchor)
        return None if decl is None else decl.describe()

    def _window_state(self, w: Window) -> WindowState:
        scale = self._scale
        return WindowState(
            w.kind, w.first, w.last, Fraction(w.spent, scale), Fraction(w.bound, scale)
        )

    def _check_evidence(
        self, evidence: Evidence, amount: Budget, user: str | None, group: str | None, slot: int
    ) -> int | None:
        """Refuse evidence that certifies a cost above ``amount``; return the evidence's code in
        the ledger when it is already there (so the append skips hashing it again)."""
        code, failed = self._evidence_check(evidence, amount)
        if failed is not None:
            subject = _subject(user, group)
            raise EvidenceRejected(
                subject=subject,
                slot=slot,
                amount=amount,
                lower=failed.lower,
                upper=failed.upper,
            )
        return code

    def _evidence_check(
        self, evidence: Evidence, amount: Budget
    ) -> tuple[int | None, CostCheck | None]:
        """The evidence's code in the ledger (None if it is not there), and the failed
        certification if it does not certify a cost of at most ``amount`` (else None).

        Certification results are cached by (ledger code, amount) for evidence the ledger holds
        (one hash of the evidence, none for a reused object), else by the evidence itself; an
        accepted pair of a held evidence object and an amount is found by the object's identity
        (`_remember_certified` adds the pair once the ledger holds the evidence)."""
        hit = self._certified.get((id(evidence), amount.numerator, amount.denominator))
        if hit is not None and hit[0] is evidence:
            return hit[1], None
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
            return code, result
        if code is not None and self.ledger.holds_evidence_object(evidence):
            self._certified[id(evidence), amount.numerator, amount.denominator] = (evidence, code)
        return code, None

    def _remember_certified(self, evidence: Evidence, amount: Budget) -> None:
        """After the append of a charge whose evidence was certified before the ledger held it:
        the next charge with this evidence object and amount finds it by identity."""
        code = self.ledger.evidence_code(evidence)
        if code is not None and self.ledger.holds_evidence_object(evidence):
            self._certified[id(evidence), amount.numerator, amount.denominator] = (evidence, code)

    def _certify(self, evidence: Evidence, amount: Budget) -> CostCheck:
        return self._certifier(evidence, amount)

    def headroom(self, slot: int, *, user: str | None = None, group: str | None = None) -> Fraction:
        """The largest amount a spend at ``slot`` could be charged now without refusal (for a
        group: the smallest headroom among its members). A group without members has no
        largest amount (a charge of it charges nobody, whatever its size): `BudgetError`. A
        guard an earlier failure broke refuses every spend, so it has no headroom either:
        `SinkFailed`, as a spend would raise."""
        if self._broken is not None:
            self._refuse_broken()
        if slot < self._slot:
            raise BudgetError(f"slot {slot} is before the guard's current slot {self._slot}")
        if (user is None) == (group is None):
            raise BudgetError("name exactly one of user or group")
        if group is not None:
            self.ledger.group_code(group)  # raises for an undefined group
            if self.ledger.group_size(group) == 0:
                raise BudgetError(
                    f"group {group!r} has no members: no window bounds a charge of it (it "
                    "charges nobody), so it has no headroom"
                )
        room = self._engine.headroom(slot, user, group)
        return Fraction(max(room, 0), self._scale)

    def __repr__(self) -> str:
        engine = self._engine.describe()
        return (
            f"Guard(users={len(self.population)}, charges={len(self.ledger)}, "
            f"slot={self._slot}, {engine})"
        )
