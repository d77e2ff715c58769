"""The public extension API: an `Allocator` names a budget kernel and states what it serves.

A budget kernel (`wevent.mechanisms.allocators.kernel.Kernel`) is the deterministic budget logic of a
w-event allocator: ``start()`` gives the initial state, ``plan(state, t)`` the slot's budgets per
requirement class (a `Plan`: nullified / forced flags, the dissimilarity budget spent now and the
publication budget spent if the slot publishes), ``step(state, t, plan, published)`` the next
state. It computes only through its `Algebra` (``add``, ``sub``, ``scale``, ``le``, ``select``,
``ratio``, ...) and never branches in Python on a budget or a decision, so the same code runs on
exact rationals (`ExactAlgebra`), with IEEE-double absorption counts (`FloatCountAlgebra`) and on
Z3 terms (proofs).

An `Allocator` is what a third party publishes: a ``kernel(alg, classes, variant)`` factory plus
the claims the checks rely on:

* ``requirement``: ``"fixed"`` (the kernel takes `FixedClass` requirements ``(w, eps)`` only) or
  ``"dynamic"`` (also `DynamicClass` schedules of backward/forward declarations, 001 Definition
  10);
* ``scaling``: ``"per-class"`` (multiplying one class's budgets by k multiplies that class's
  allocations by k and changes no decision), ``"global"`` (the same under one common factor), or
  ``"none"`` (no claim). `wevent gate` checks the claim on random traces (a sample); the proofs
  of wevent's own kernels (built-ins and their parametrized families) normalize budgets by it
  (each has a written argument for it), a proof of any other kernel keeps every budget symbolic
  whatever it declares;
* ``symbolic``: the kernel runs on Z3 terms (False skips the Z3 proof: only the adversarial
  search and the end-to-end run check it);
* ``divides``: a dynamic kernel whose absorption counts divide by its forward budgets (DPBA):
  for a built-in the proof then fixes forward budgets to ratios of the first to stay linear
  (a normalization by its per-class scaling); another kernel's forward budgets stay symbolic, a
  nonlinear problem Z3 takes far longer on (a copy of dpba's kernel: 522 s against 9 s
  normalized, w <= 2, one class, beside other jobs) or leaves undecided;
* ``variants``: the variant names ``kernel`` accepts (``"sound"`` at least).

`AllocatorSpec` is a ready-made frozen dataclass implementing the protocol. A third-party package
registers one under the entry-point group ``wevent.allocators`` (`ALLOCATOR_GROUP`), or names it
as ``module:attribute``; `resolve` turns either (or a built-in name) into an `Allocator`.

Population-division allocators (002 Section 6; 000) spend users instead of budgets. A
`PopulationAllocator` has a ``setup(classes, counts, d, variant)`` fixing the integers of the run
(`PopulationSetup`: users, sample size, recycle period R, per-report budgets ``eps_i / k_i``) and a
``kernel(alg, config, variant)`` giving the population kernel (`PopulationKernel`'s interface:
``start``, ``plan`` returning a `Draw` of user counts, ``step``). `PopulationSpec` wraps two such
functions; the built-ins (``lpu`` ... ``plba-ops``) are `PopulationSpec` values
(`registry.POPULATION_BUILTIN`), and `registry.resolve_population` resolves third-party ones
(``module:attribute`` or an entry point) for `wevent gate` and `wevent trace`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, runtime_checkable

from wevent.errors import AllocatorError, PopulationAllocatorError
from wevent.mechanisms.allocators.algebra import Algebra
from wevent.mechanisms.allocators.kernel import ClassReq, Kernel
from wevent.mechanisms.datapath import DataPathFactory

if TYPE_CHECKING:  # the population family declares its specs with this module's classes
    from wevent.mechanisms.allocators.population import (
        PopulationConfig,
        PopulationKernel,
        PopulationSetup,
    )

__all__ = [
    "ALLOCATOR_GROUP",
    "REQUIREMENT_KINDS",
    "SCALINGS",
    "Allocator",
    "AllocatorError",
    "AllocatorSpec",
    "KernelFactory",
    "PopulationAllocator",
    "PopulationAllocatorError",
    "PopulationSpec",
]

V = TypeVar("V")
B = TypeVar("B")

ALLOCATOR_GROUP: Final = "wevent.allocators"
REQUIREMENT_KINDS: Final = ("fixed", "dynamic")
SCALINGS: Final = ("per-class", "global", "none")

KernelFactory = Callable[[Algebra[Any, Any], Sequence[ClassReq[Any]], str], Kernel[Any, Any, Any]]


@runtime_checkable
class Allocator(Protocol):
    """A budget kernel factory and the claims checked about it (module docstring)."""

    @property
    def name(self) -> str: ...
    @property
    def requirement(self) -> str: ...
    @property
    def scaling(self) -> str: ...
    @property
    def symbolic(self) -> bool: ...
    @property
    def divides(self) -> bool: ...
    @property
    def variants(self) -> tuple[str, ...]: ...

    def kernel(
        self, alg: Algebra[V, B], classes: Sequence[ClassReq[V]], variant: str
    ) -> Kernel[V, B, Any]:
        """The kernel over ``classes`` (in population class order), computing with ``alg``."""
        ...


@dataclass(frozen=True)
class AllocatorSpec:
    """An `Allocator` from a kernel factory ``factory(alg, classes, variant)``.

    The field order (name, requirement, scaling, summary, factory, divides) is the one the proof
    registry has always used (`wevent.proofs.central.Allocator` is this class)."""

    name: str
    requirement: str  # "fixed" or "dynamic"
    scaling: str  # "per-class", "global" or "none"
    summary: str
    factory: KernelFactory
    divides: bool = False
    symbolic: bool = True
    variants: tuple[str, ...] = ("sound",)
    # The data path of a central allocator, a factory of the domain size
    # (`wevent.mechanisms.datapath`); None: 001's PWSM path. Not part of the `Allocator`
    # protocol: a third-party allocator may carry one as an attribute of the same name.
    data_path: DataPathFactory | None = None

    def kernel(
        self, alg: Algebra[V, B], classes: Sequence[ClassReq[V]], variant: str = "sound"
    ) -> Kernel[V, B, Any]:
        out: Kernel[V, B, Any] = self.factory(alg, classes, variant)
        return out


SetupFactory = Callable[[Sequence[ClassReq[Any]], Sequence[int], int, str], "PopulationSetup"]
PopulationKernelFactory = Callable[
    [Algebra[Any, Any], "PopulationConfig", str], "PopulationKernel[Any, Any]"
]


@runtime_checkable
class PopulationAllocator(Protocol):
    """A population-division allocator: its setup and its population kernel (module docstring)."""

    @property
    def name(self) -> str: ...
    @property
    def variants(self) -> tuple[str, ...]: ...

    def setup(
        self, classes: Sequence[ClassReq[Any]], counts: Sequence[int], d: int, variant: str
    ) -> PopulationSetup:
        """The run's integers for ``classes`` of ``counts`` users (domain size ``d``)."""
        ...

    def kernel(
        self, alg: Algebra[Any, Any], config: PopulationConfig, variant: str
    ) -> PopulationKernel[Any, Any]:
        """The population kernel for ``config``, computing with ``alg``."""
        ...


@dataclass(frozen=True)
class PopulationSpec:
    """A `PopulationAllocator` from ``setup_factory(classes, counts, d, variant)`` and
    ``kernel_factory(alg, config, variant)``."""

    name: str
    summary: str
    setup_factory: SetupFactory
    kernel_factory: PopulationKernelFactory
    variants: tuple[str, ...] = ("sound",)

    def setup(
        self, classes: Sequence[ClassReq[Any]], counts: Sequence[int], d: int, variant: str
    ) -> PopulationSetup:
        return self.setup_factory(classes, counts, d, variant)

    def kernel(
        self, alg: Algebra[Any, Any], config: PopulationConfig, variant: str
    ) -> PopulationKernel[Any, Any]:
        return self.kernel_factory(alg, config, variant)
