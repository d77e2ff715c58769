"""wevent: exact privacy accounting for w-event differential privacy over infinite streams.

One import gives the task a user has: state each user's requirement, spend through the guard
(which refuses a spend before noise is drawn), keep the ledger (durably, hash-chained), check or
audit it, and bring an allocator (or a kind of evidence) of one's own::

    import wevent
    from fractions import Fraction

    pop = wevent.Population({"alice": wevent.Fixed(3, wevent.Budget("0.3"))})
    guard = wevent.Guard(pop)
    guard.spend(1, wevent.Budget("0.1"), user="alice",
                evidence=wevent.Laplace(Fraction(1), Fraction(10)))
    assert wevent.check(guard.ledger, pop).ok

The names below are the public surface (`tests/test_facade.py` pins it); the subpackages
(`wevent.accounting`, `wevent.mechanisms`, `wevent.verifier`, `wevent.proofs`,
`wevent.experiments`, `wevent.gate`) hold the implementation. Importing this module loads
nothing else: each name loads its module on first use, and none needs an optional dependency
(the proofs (Z3), the SQL engines (DuckDB, pyarrow), Spark and the plots load when used).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers; at runtime they load on first use
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
    from wevent.accounting.evidence import EvidenceKind, register_evidence_kind
    from wevent.accounting.formats import (
        FormatError,
        read_ledger,
        read_ledgers,
        read_requirements,
        write_ledger,
        write_requirements,
    )
    from wevent.api import Allocator, AllocatorSpec, PopulationSpec, resolve, run_trace
    from wevent.errors import (
        AllocatorError,
        EngineError,
        InputError,
        PopulationAllocatorError,
        Refused,
        SparsityExceeded,
        WeventError,
    )
    from wevent.mechanisms.noise import DiscreteLaplaceMechanism, LaplaceMechanism
    from wevent.proofs.counterexamples import ProverError
    from wevent.verifier import Guard, Verdict, Violation, check
    from wevent.verifier.audit import AuditResult
    from wevent.verifier.audit import run_audit as audit

    __version__: str

# name -> (module, attribute): loaded on first access, so `import wevent.errors` (or the pytest
# plugin entry point, which imports this package in every pytest session of a project that has
# wevent installed) does not load numpy and the checker.
_LAZY: dict[str, tuple[str, str]] = {
    "Allocator": ("wevent.api", "Allocator"),
    "AllocatorError": ("wevent.errors", "AllocatorError"),
    "AllocatorSpec": ("wevent.api", "AllocatorSpec"),
    "AuditResult": ("wevent.verifier.audit", "AuditResult"),
    "Budget": ("wevent.accounting", "Budget"),
    "BudgetError": ("wevent.accounting", "BudgetError"),
    "BudgetExceeded": ("wevent.accounting", "BudgetExceeded"),
    "ChainedJsonlWriter": ("wevent.accounting.durable", "ChainedJsonlWriter"),
    "Charge": ("wevent.accounting", "Charge"),
    "Declaration": ("wevent.accounting", "Declaration"),
    "DiscreteLaplace": ("wevent.accounting", "DiscreteLaplace"),
    "DiscreteLaplaceMechanism": ("wevent.mechanisms.noise", "DiscreteLaplaceMechanism"),
    "Dynamic": ("wevent.accounting", "Dynamic"),
    "Evidence": ("wevent.accounting", "Evidence"),
    "EvidenceKind": ("wevent.accounting.evidence", "EvidenceKind"),
    "EngineError": ("wevent.errors", "EngineError"),
    "EvidenceRejected": ("wevent.accounting", "EvidenceRejected"),
    "ExSub": ("wevent.accounting", "ExSub"),
    "Fixed": ("wevent.accounting", "Fixed"),
    "FormatError": ("wevent.accounting.formats", "FormatError"),
    "GRR": ("wevent.accounting", "GRR"),
    "Guard": ("wevent.verifier", "Guard"),
    "InputError": ("wevent.errors", "InputError"),
    "Integrity": ("wevent.accounting.durable", "Integrity"),
    "Laplace": ("wevent.accounting", "Laplace"),
    "LaplaceMechanism": ("wevent.mechanisms.noise", "LaplaceMechanism"),
    "Ledger": ("wevent.accounting", "Ledger"),
    "OUE": ("wevent.accounting", "OUE"),
    "Population": ("wevent.accounting", "Population"),
    "PopulationAllocatorError": ("wevent.errors", "PopulationAllocatorError"),
    "PopulationSpec": ("wevent.api", "PopulationSpec"),
    "PostProcessing": ("wevent.accounting", "PostProcessing"),
    "ProverError": ("wevent.proofs.counterexamples", "ProverError"),
    "Refused": ("wevent.errors", "Refused"),
    "Requirement": ("wevent.accounting", "Requirement"),
    "RequirementClass": ("wevent.accounting", "RequirementClass"),
    "Sampled": ("wevent.accounting", "Sampled"),
    "SegmentWriter": ("wevent.accounting.durable", "SegmentWriter"),
    "SparsityExceeded": ("wevent.errors", "SparsityExceeded"),
    "Verdict": ("wevent.verifier", "Verdict"),
    "Violation": ("wevent.verifier", "Violation"),
    "WeventError": ("wevent.errors", "WeventError"),
    "WholeStream": ("wevent.accounting", "WholeStream"),
    "audit": ("wevent.verifier.audit", "run_audit"),
    "check": ("wevent.verifier", "check"),
    "read_ledger": ("wevent.accounting.formats", "read_ledger"),
    "read_ledgers": ("wevent.accounting.formats", "read_ledgers"),
    "read_requirements": ("wevent.accounting.formats", "read_requirements"),
    "register_evidence_kind": ("wevent.accounting.evidence", "register_evidence_kind"),
    "resolve": ("wevent.api", "resolve"),
    "run_trace": ("wevent.api", "run_trace"),
    "write_ledger": ("wevent.accounting.formats", "write_ledger"),
    "write_requirements": ("wevent.accounting.formats", "write_requirements"),
}


if not TYPE_CHECKING:  # type checkers see the imports above, and flag unknown names

    def __getattr__(name: str) -> Any:
        if name == "__version__":
            # importlib.metadata here, not above: it costs the command line's start-up tens of
            # milliseconds (`wevent --help` never asks for the version)
            from importlib.metadata import PackageNotFoundError
            from importlib.metadata import version as _version

            try:
                value: Any = _version("wevent")
            except PackageNotFoundError:  # a source tree that was never installed
                value = "0+unknown"
        elif name in _LAZY:
            module, attribute = _LAZY[name]
            value = getattr(import_module(module), attribute)
        else:
            raise AttributeError(f"module 'wevent' has no attribute {name!r}")
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    "EngineError",
    "Evidence",
    "EvidenceKind",
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
    "SparsityExceeded",
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
    "register_evidence_kind",
    "resolve",
    "run_trace",
    "write_ledger",
    "write_requirements",
]
