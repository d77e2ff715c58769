"""The guard's engines: one protocol (`GuardEngine`) and one registry by name (`GUARD_ENGINES`).

A guard engine holds the window state of every user, in exact integers over the guard's common
denominator, and answers for the `wevent.verifier.guard.Guard`: which state a charge touches
(`plan`), whether it breaks a window (`check`, which changes nothing a later check sees when it
refuses), recording it once the ledger holds it (`commit`), the room left (`headroom`), a grown
denominator (`rescale`), and two hooks for groups defined by population index (`group_defined`,
`users_interned`). The built-ins:

* ``vector`` (`wevent.verifier.vector.VectorEngine`): fixed-window and whole-stream populations;
  a class-wide spend per class plus one integer per user for partial charges, so a charge to k
  drawn users is a few numpy operations over k integers;
* ``accounts`` (`wevent.verifier.accounts.AccountEngine`): any requirement, dynamic ones
  included; users with the same requirement and charge history share one account.

``auto`` (the guard's default) takes the first registered engine that applies to the population.
Every engine must refuse exactly the spends the others refuse (tests/test_guard_engines.py holds
the built-ins to each other and to a brute-force model). A new engine is one more
`GuardEngineSpec` passed to `register_guard_engine`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from wevent.accounting.budget import BudgetError
from wevent.accounting.ledger import Ledger
from wevent.accounting.names import close_names, did_you_mean
from wevent.accounting.population import Population
from wevent.errors import InputError
from wevent.verifier.accounts import AccountEngine
from wevent.verifier.vector import Refusal, VectorEngine, vectorizable

__all__ = [
    "AUTO",
    "GUARD_ENGINES",
    "GuardEngine",
    "GuardEngineSpec",
    "choose_guard_engine",
    "guard_engine_names",
    "register_guard_engine",
]

AUTO: Final = "auto"


class GuardEngine(Protocol):
    """The window state behind a guard (module docstring). Amounts are scaled integers."""

    def plan(self, user: str | None, group: str | None) -> Any:
        """What a charge to ``user`` or to ``group`` touches (the engine's own value, passed
        back to `check` and `commit`)."""
        ...

    def check(self, slot: int, asked: int, plan: Any) -> Refusal | None:
        """Why the charge of ``asked`` at ``slot`` breaks a window, or None."""
        ...

    def commit(self, slot: int, asked: int, plan: Any) -> None:
        """Record a charge `check` accepted (after the ledger appended it)."""
        ...

    def headroom(self, slot: int, user: str | None, group: str | None) -> int:
        """The largest amount a charge at ``slot`` could take now (changes nothing)."""
        ...

    def charge_whole_classes(self, slot: int, charges: Sequence[tuple[int, int]]) -> int:
        """Check and commit, in order, charges of ``(group code, asked)`` at ``slot`` while each
        is to a group the engine knows to be exactly one requirement class whose members hold
        no partial charge, and fits; return how many it took (0: none; an engine without this
        shortcut always returns 0). The guard sends the rest, from the first one not taken,
        through `check` and `commit`, which refuse or accept it exactly as they would have."""
        ...

    def rescale(self, factor: int) -> None:
        """Multiply every stored value by ``factor`` (the common denominator grew)."""
        ...

    def group_defined(
        self, group_code: int, codes: Any, indices: Any, *, ascending: bool | None = None
    ) -> None:
        """A group was defined by population index: its members' ledger ``codes`` are those
        of the population users at ``indices`` (``ascending``: whether the indices ascend,
        when the caller knows; None: unknown)."""
        ...

    def users_interned(self, codes: Any, indices: Any) -> None:
        """The population users at ``indices`` were interned with ledger ``codes``."""
        ...

    def describe(self) -> str:
        """One line for the guard's repr."""
        ...


@dataclass(frozen=True)
class GuardEngineSpec:
    """A guard engine by name: ``applies(population)`` says whether it can hold the
    population's windows (``needs`` says what it needs, for the refusal when it cannot), and
    ``factory(population, ledger, scale)`` builds it."""

    name: str
    summary: str
    applies: Callable[[Population], bool]
    needs: str
    factory: Callable[[Population, Ledger, int], GuardEngine]


GUARD_ENGINES: dict[str, GuardEngineSpec] = {}  # in the order `auto` tries them


def register_guard_engine(spec: GuardEngineSpec) -> GuardEngineSpec:
    """Add an engine (tried by ``auto`` after those registered before it); a name already
    registered, or ``auto``, is refused (an `InputError`)."""
    if spec.name == AUTO or spec.name in GUARD_ENGINES:
        raise InputError(f"guard engine {spec.name!r} is already registered")
    GUARD_ENGINES[spec.name] = spec
    return spec


def guard_engine_names() -> tuple[str, ...]:
    """What a guard's ``engine`` accepts: ``auto`` and every registered engine."""
    return (AUTO, *GUARD_ENGINES)


def choose_guard_engine(name: str, population: Population) -> GuardEngineSpec:
    """The engine ``name`` (``auto``: the first that applies to ``population``). An unknown
    name is an `InputError` naming the known ones and the close ones; an engine that cannot hold
    this population's windows a `BudgetError` saying what it needs."""
    if name == AUTO:
        found = next((s for s in GUARD_ENGINES.values() if s.applies(population)), None)
        if found is None:  # pragma: no cover - the accounts engine applies to every population
            raise BudgetError("no guard engine applies to this population")
        return found
    spec = GUARD_ENGINES.get(name)
    if spec is None:
        names = guard_engine_names()
        raise InputError(
            f"unknown guard engine {name!r} ({', '.join(names[:-1])} or {names[-1]})"
            + did_you_mean(close_names(name, names))
        )
    if not spec.applies(population):
        raise BudgetError(f"the {spec.name} engine needs {spec.needs} only")
    return spec


def _vector(population: Population, ledger: Ledger, scale: int) -> GuardEngine:
    return VectorEngine(population, ledger, scale)


def _accounts(population: Population, ledger: Ledger, scale: int) -> GuardEngine:
    return AccountEngine(population, ledger, scale)


register_guard_engine(
    GuardEngineSpec(
        "vector",
        "numpy arrays per class and per user (fixed-window and whole-stream requirements)",
        vectorizable,
        "fixed-window or whole-stream requirements",
        _vector,
    )
)
register_guard_engine(
    GuardEngineSpec(
        "accounts",
        "window state per account of users with the same history (any requirement)",
        lambda _population: True,
        "requirements",
        _accounts,
    )
)
