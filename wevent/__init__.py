"""wevent: exact privacy accounting for w-event differential privacy over infinite streams.

One import gives the task a user has: state each user's requirement, spend through the guard
(which refuses a spend before noise is drawn), keep the ledger (durably, hash-chained), check or
audit it, and bring an allocator of one's own::

    import wevent
    from fractions import Fraction

    pop = wevent.Population({"alice": wevent.Fixed(3, wevent.Budget("0.3"))})
    guard = wevent.Guard(pop)
    guard.spend(1, wevent.Budget("0.1"), user="alice",
                evidence=wevent.Laplace(Fraction(1), Fraction(10)))
    assert wevent.check(guard.ledger, pop).ok

The names below are the public surface (`tests/test_facade.py` pins it); the subpackages
(`wevent.accounting`, `wevent.mechanisms`, `wevent.verifier`, `wevent.proofs`,
`wevent.experiments`, `wevent.gate`) hold the implementation. Importing this module needs only
the core dependencies (numpy): the proofs (Z3), the SQL engines (DuckDB, pyarrow), Spark and the
plots load when used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from wevent.accounting import (
    GRR,
    OUE,
    Budget,
    BudgetError,
    BudgetExceeded,
    Charge,
    Declaration,
    DiscreteLaplace,
    Dynamic,
    Evidence,
    EvidenceRejected,
    ExSub,
    Fixed,
    Laplace,
    Ledger,
    Population,
    PostProcessing,
    Requirement,
    RequirementClass,
    Sampled,
    WholeStream,
)
from wevent.accounting.durable import ChainedJsonlWriter, Integrity, SegmentWriter
from wevent.accounting.formats import (
    FormatError,
    read_ledger,
    read_ledgers,
    read_requirements,
    write_ledger,
    write_requirements,
)
from wevent.api import (
    Allocator,
    AllocatorError,
    AllocatorSpec,
    PopulationAllocatorError,
    PopulationSpec,
    resolve,
    run_trace,
)
from wevent.errors import InputError, Refused, WeventError
from wevent.mechanisms.noise import DiscreteLaplaceMechanism, LaplaceMechanism
from wevent.proofs.counterexamples import ProverError
from wevent.verifier import Guard, Verdict, Violation, check
from wevent.verifier.audit import AuditResult
from wevent.verifier.audit import run_audit as audit

try:
    __version__ = _version("wevent")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "GRR",
    "OUE",
    "Allocator",
    "AllocatorError",
    "AllocatorSpec",
    "AuditResult",
    "Budget",
    "BudgetError",
    "BudgetExceeded",
    "ChainedJsonlWriter",
    "Charge",
    "Declaration",
    "DiscreteLaplace",
    "DiscreteLaplaceMechanism",
    "Dynamic",
    "Evidence",
    "EvidenceRejected",
    "ExSub",
    "Fixed",
    "FormatError",
    "Guard",
    "InputError",
    "Integrity",
    "Laplace",
    "LaplaceMechanism",
    "Ledger",
    "Population",
    "PopulationAllocatorError",
    "PopulationSpec",
    "PostProcessing",
    "ProverError",
    "Refused",
    "Requirement",
    "RequirementClass",
    "Sampled",
    "SegmentWriter",
    "Verdict",
    "Violation",
    "WeventError",
    "WholeStream",
    "__version__",
    "audit",
    "check",
    "read_ledger",
    "read_ledgers",
    "read_requirements",
    "resolve",
    "run_trace",
    "write_ledger",
    "write_requirements",
]
