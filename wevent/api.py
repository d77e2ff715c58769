"""The public API for writing an allocator that `wevent gate` checks (one import for a third party).

A budget kernel computes per requirement class, slot after slot, through an `Algebra` (exact
rationals at runtime, Z3 terms in proofs) and never branches in Python on a budget or a
decision; an `Allocator` (or the ready-made `AllocatorSpec`) wraps its factory with the claims
the gate checks. Dynamic-requirement kernels start from `DynamicKernel` (001 Algorithms 6-7),
fixed ones may start from `FixedKernel`; a population-division allocator is a
`PopulationAllocator` (`PopulationSpec`: a ``setup`` giving a `PopulationSetup`, e.g. from
`population_setup`, and a ``kernel`` giving a `PopulationKernel`). `docs/gate.md` ("Gate
your allocator in CI") has a worked example, and `wevent.mechanisms.allocators.api` the protocol's fine
print.
"""

from wevent.mechanisms.allocators import TraceSlot, run_trace
from wevent.mechanisms.allocators.algebra import (
    Algebra,
    ExactAlgebra,
    FloatCountAlgebra,
    vmax,
    vmin,
)
from wevent.mechanisms.allocators.api import (
    ALLOCATOR_GROUP,
    Allocator,
    AllocatorSpec,
    KernelFactory,
    PopulationAllocator,
    PopulationSpec,
)
from wevent.mechanisms.allocators.dynamic import DynamicKernel, DynamicState
from wevent.mechanisms.allocators.fixed import FixedKernel, FixedState
from wevent.mechanisms.allocators.kernel import (
    ClassReq,
    Decl,
    DynamicClass,
    FixedClass,
    Kernel,
    Plan,
    Prefix,
    fixed_classes,
    published_now,
)
from wevent.mechanisms.allocators.population import (
    Draw,
    PopulationConfig,
    PopulationKernel,
    PopulationSetup,
    population_setup,
)
from wevent.mechanisms.allocators.registry import (
    AllocatorError,
    PopulationAllocatorError,
    resolve,
    resolve_population,
)

__all__ = [
    "ALLOCATOR_GROUP",
    "Algebra",
    "Allocator",
    "AllocatorError",
    "AllocatorSpec",
    "ClassReq",
    "Decl",
    "Draw",
    "DynamicClass",
    "DynamicKernel",
    "DynamicState",
    "ExactAlgebra",
    "FixedClass",
    "FixedKernel",
    "FixedState",
    "FloatCountAlgebra",
    "Kernel",
    "KernelFactory",
    "Plan",
    "PopulationAllocator",
    "PopulationAllocatorError",
    "PopulationConfig",
    "PopulationKernel",
    "PopulationSetup",
    "PopulationSpec",
    "Prefix",
    "TraceSlot",
    "fixed_classes",
    "population_setup",
    "published_now",
    "resolve",
    "resolve_population",
    "run_trace",
    "vmax",
    "vmin",
]
