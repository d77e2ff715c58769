"""The public API for writing an allocator that `wevent gate` checks (one import for a third party).

A budget kernel computes per requirement class, slot after slot, through an `Algebra` (exact
rationals at runtime, Z3 terms in proofs) and never branches in Python on a budget or a
decision; an `Allocator` (or the ready-made `AllocatorSpec`) wraps its factory with the claims
the gate checks. The README section "Gate your allocator in CI" has a worked example, and
`mechanisms.allocators.api` the protocol's fine print.
"""

from mechanisms.allocators import TraceSlot, run_trace
from mechanisms.allocators.algebra import Algebra, ExactAlgebra, FloatCountAlgebra, vmax, vmin
from mechanisms.allocators.api import (
    ALLOCATOR_GROUP,
    Allocator,
    AllocatorSpec,
    KernelFactory,
)
from mechanisms.allocators.kernel import (
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
from mechanisms.allocators.registry import AllocatorError, resolve

__all__ = [
    "ALLOCATOR_GROUP",
    "Algebra",
    "Allocator",
    "AllocatorError",
    "AllocatorSpec",
    "ClassReq",
    "Decl",
    "DynamicClass",
    "ExactAlgebra",
    "FixedClass",
    "FloatCountAlgebra",
    "Kernel",
    "KernelFactory",
    "Plan",
    "Prefix",
    "TraceSlot",
    "fixed_classes",
    "published_now",
    "resolve",
    "run_trace",
    "vmax",
    "vmin",
]
