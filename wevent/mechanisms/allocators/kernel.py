"""The budget-kernel interface and the requirement classes a kernel allocates for.

A kernel is the deterministic budget logic of an allocator: given the requirement classes and the
publish/skip history, ``plan`` says for slot t whether the slot is nullified (or forced), the
dissimilarity budget each class spends now, and the publication budget each class would spend if
the slot publishes; ``step`` records what happened. The data path (dissimilarity estimate, error,
noise) only decides publish or skip; the kernel never sees data. Every user of a class gets the
class's budget, so a slot costs O(classes) (001 Section 4.6: the budget logic depends only on the
distinct requirements).

Kernels compute through an `Algebra` and never branch in Python on a budget or a decision, so the
same code runs on exact rationals and on Z3 terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Generic, Protocol, TypeVar

from wevent.accounting.budget import BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Dynamic, Fixed, WholeStream
from wevent.mechanisms.allocators.algebra import Algebra, vmin

__all__ = [
    "DU_CODE",
    "STREAMDP_CODE",
    "VARIANTS",
    "ClassReq",
    "Decl",
    "DynamicClass",
    "FixedClass",
    "Kernel",
    "Plan",
    "Prefix",
    "classes_of",
    "pushed_histories",
    "scaled_classes",
    "uniform_class",
]

V = TypeVar("V")
B = TypeVar("B")
S = TypeVar("S")

VARIANTS: Final = ("sound", "published")

# A peer implementation's rules, kept as an audited fixture: Du et al.'s public Java code
# (DynamicWEventCode) for BD, BA, PBD and PBA (`wevent.mechanisms.allocators.fixed`, docs/peers.md),
# DPBD and DPBA (`dynamic_du_code`), and WEventPLDPCode for the OPS population allocators
# (`wevent.mechanisms.ops`, `wevent.mechanisms.allocators.population`).
# Only the allocators that have such a rule accept it; `sound` stays every allocator's default.
DU_CODE: Final = "du-code"

# Another peer's rules: Schäler et al.'s streamdp-benchmark (its mechanisms in
# `wevent.mechanisms.streamdp`), kept as a fixture where its rule breaks a window (docs/peers.md).
STREAMDP_CODE: Final = "streamdp-code"


@dataclass(frozen=True, slots=True)
class FixedClass(Generic[V]):
    """A fixed requirement ``(w, eps)`` with ``eps`` in the kernel's algebra."""

    w: int
    eps: V


@dataclass(frozen=True, slots=True)
class Decl(Generic[V]):
    """One dynamic declaration (001 Definition 10) with budgets in the kernel's algebra."""

    slot: int
    w_back: int
    eps_back: V
    w_fwd: int
    eps_fwd: V


@dataclass(frozen=True, slots=True)
class DynamicClass(Generic[V]):
    """A dynamic schedule: each declaration holds from its slot until the next one."""

    decls: tuple[Decl[V], ...]


ClassReq = FixedClass[V] | DynamicClass[V]


@dataclass(frozen=True, slots=True)
class Plan(Generic[V, B]):
    """A kernel's budgets for one slot, per class (in the kernel's class order)."""

    nullified: B  # the slot is approximated whatever the data says
    forced: B  # the slot publishes whatever the data says (data-independent schedules)
    dissimilarity: tuple[V, ...]  # spent now, published or not
    publication: tuple[V, ...]  # spent only if the slot publishes


class Kernel(Protocol[V, B, S]):
    """The budget logic of an allocator (see the module docstring)."""

    name: str
    variant: str
    alg: Algebra[V, B]
    classes: tuple[ClassReq[V], ...]

    def start(self) -> S: ...
    def plan(self, state: S, t: int) -> Plan[V, B]: ...
    def step(self, state: S, t: int, plan: Plan[V, B], published: B) -> S: ...


def published_now(alg: Algebra[V, B], plan: Plan[V, B], decision: B) -> B:
    """A slot publishes when forced, or when not nullified and the data path chose to publish."""
    return alg.or_(plan.forced, alg.and_(alg.not_(plan.nullified), decision))


class Prefix(Generic[V]):
    """Cumulative sums of a per-slot series over its last ``keep`` slots (immutable).

    ``total(a, b)`` is the sum over slots ``[a, b]`` (slots before 1 count as 0); ``a`` must not
    be older than the kept history. The sums are built with the kernel's algebra, so they are
    exact rationals at runtime and linear terms in a proof.
    """

    __slots__ = ("_alg", "_first", "_keep", "_sums")

    def __init__(self, alg: Algebra[V, B], keep: int) -> None:
        self._alg = alg
        self._keep = max(keep, 1)
        self._first = 0  # slot of _sums[0]: the cumulative sum up to and including that slot
        self._sums: tuple[V, ...] = (alg.const(0),)

    def _copy(self, first: int, sums: tuple[V, ...]) -> Prefix[V]:
        out: Prefix[V] = Prefix.__new__(Prefix)
        out._alg, out._keep, out._first, out._sums = self._alg, self._keep, first, sums
        return out

    @property
    def last(self) -> int:
        """The last slot recorded (0 before any)."""
        return self._first + len(self._sums) - 1

    def push(self, value: V) -> Prefix[V]:
        sums = (*self._sums, self._alg.add(self._sums[-1], value))
        first = self._first
        if len(sums) > self._keep + 1:
            drop = len(sums) - self._keep - 1
            sums, first = sums[drop:], first + drop
        return self._copy(first, sums)

    def _upto(self, slot: int) -> V:
        slot = min(slot, self.last)
        if slot < self._first:
            if slot <= 0:
                return self._alg.const(0)
            raise BudgetError(f"window reaches slot {slot}, older than the kept history")
        return self._sums[slot - self._first]

    def total(self, a: int, b: int) -> V:
        """Sum over slots ``[a, b]``; empty (0) when ``b < a`` or ``b < 1``."""
        if b < max(a, 1):
            return self._alg.const(0)
        return self._alg.sub(self._upto(b), self._upto(max(a, 1) - 1))


def pushed_histories(
    alg: Algebra[V, B],
    dis: tuple[Prefix[V], ...],
    pub: tuple[Prefix[V], ...],
    plan: Plan[V, B],
    published: B,
) -> tuple[tuple[Prefix[V], ...], tuple[Prefix[V], ...]]:
    """Per class, the dissimilarity history with the slot's dissimilarity budget pushed, and the
    publication history with its publication budget if the slot published (0 if not)."""
    zero = alg.const(0)
    return (
        tuple(h.push(d) for h, d in zip(dis, plan.dissimilarity, strict=True)),
        tuple(
            h.push(alg.select(published, p, zero))
            for h, p in zip(pub, plan.publication, strict=True)
        ),
    )


def classes_of(population: Population, mechanism: str) -> list[ClassReq[Fraction]]:
    """The population's requirement classes as kernel classes (exact budgets), in class order.

    Whole-stream requirements have no window to allocate over; they are refused here with a
    message pointing at the whole-stream mechanism.
    """
    out: list[ClassReq[Fraction]] = []
    for cls in population.classes:
        req = cls.requirement
        if isinstance(req, Fixed):
            out.append(FixedClass(req.w, Fraction(req.eps)))
        elif isinstance(req, Dynamic):
            out.append(
                DynamicClass(
                    tuple(
                        Decl(d.slot, d.w_back, Fraction(d.eps_back), d.w_fwd, Fraction(d.eps_fwd))
                        for d in req.declarations
                    )
                )
            )
        elif isinstance(req, WholeStream):
            raise BudgetError(
                f"{mechanism}: {cls.name} has a whole-stream requirement (w=inf); w-event "
                "allocators need a window (use ExSub for whole-stream budgets)"
            )
    if not out:
        raise BudgetError(f"{mechanism}: the population has no users")
    return out


def scaled_classes(
    classes: Sequence[ClassReq[Fraction]], factors: Sequence[Fraction]
) -> list[ClassReq[Fraction]]:
    """``classes`` with every budget of class i multiplied by ``factors[i]`` (windows and
    declaration slots unchanged): the inputs of a scale-invariance check (`wevent.proofs.central`,
    "Scope and normalization"; the gate's conformance stage)."""
    out: list[ClassReq[Fraction]] = []
    for c, f in zip(classes, factors, strict=True):
        if isinstance(c, FixedClass):
            out.append(FixedClass(c.w, c.eps * f))
        else:
            out.append(
                DynamicClass(
                    tuple(
                        Decl(d.slot, d.w_back, d.eps_back * f, d.w_fwd, d.eps_fwd * f)
                        for d in c.decls
                    )
                )
            )
    return out


def uniform_class(
    classes: Sequence[ClassReq[V]], alg: Algebra[V, B], mechanism: str
) -> FixedClass[V]:
    """The one requirement a non-personalized allocator serves every class with: the largest
    window and the smallest budget (001 Section 6.2), which meets each class's own requirement
    because a window of ``w_i <= w`` slots lies inside a window of ``w`` slots."""
    fixed = fixed_classes(classes, mechanism)
    return FixedClass(max(c.w for c in fixed), vmin(alg, *(c.eps for c in fixed)))


def check_variant(name: str, variant: str, variants: Sequence[str] = VARIANTS) -> None:
    """Refuse a variant ``name`` does not have: one another allocator has ("no variant"), or one
    no allocator has ("unknown variant", listing the ones ``name`` has)."""
    if variant in variants:
        return
    if variant in (*VARIANTS, DU_CODE, STREAMDP_CODE):
        raise BudgetError(f"{name}: no variant {variant!r} (it has: {', '.join(variants)})")
    expected = f"{', '.join(variants[:-1])} or {variants[-1]}" if len(variants) > 1 else variants[0]
    raise BudgetError(f"{name}: unknown variant {variant!r} (expected {expected})")


def first_negative(
    parts: Sequence[tuple[str, Sequence[Fraction]]],
) -> tuple[str, int, Fraction] | None:
    """The first ``(part, class index, value)`` with a negative budget among the parts a slot
    spends; no mechanism can spend one (the published dynamic rules can allocate it)."""
    for part, values in parts:
        for c, value in enumerate(values):
            if value < 0:
                return part, c, value
    return None


def fixed_classes(classes: Sequence[ClassReq[V]], mechanism: str) -> list[FixedClass[V]]:
    """The classes, all of which must be fixed requirements."""
    out = []
    for c in classes:
        if not isinstance(c, FixedClass):
            raise BudgetError(
                f"{mechanism} needs fixed (w, eps) requirements; use dpbd or dpba (central "
                "model) for dynamic ones: no local allocator supports dynamic requirements"
            )
        out.append(c)
    return out
