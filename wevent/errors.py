"""wevent's exceptions, under one root.

    WeventError
    ├── InputError (also a ValueError): a value, file or option wevent cannot use; the CLI
    │   │   prints it in one line and exits 2 (`wevent.cli.main` catches every InputError)
    │   ├── BudgetError (wevent.accounting.budget): budgets, windows, evidence parameters,
    │   │   │   requirements, ledgers
    │   │   ├── FormatError: a malformed file, with its file and line
    │   │   ├── RecordError: a record a durable writer refuses; nothing of it was written
    │   │   └── LedgerIntegrityError: a durable ledger a writer or `wevent ledger repair` will
    │   │       not touch (tampered, or with an uncommitted tail); `wevent ledger repair` exits 5
    │   │       on a tampered one
    │   ├── AllocatorError: a name or target that names no usable allocator (an unknown name
    │   │   │   says which known ones are close)
    │   │   └── PopulationAllocatorError: a malformed population allocator
    │   └── SparsityExceeded: an ExSub input with more changes than the mechanism's sparsity s
    ├── Refused: the guard refused a spend; nothing was recorded
    │   ├── BudgetExceeded: it would break a window (the message names window, spent, bound)
    │   └── EvidenceRejected: its evidence certifies a cost above the amount charged
    ├── EngineError: an audit engine cannot check a valid ledger exactly (the message names the
    │   engine that can); neither bad input nor a refusal
    ├── LimitError: a WEVENT_MAX_* environment variable is not a valid limit (not a
    │   ValueError: a reader that takes a ValueError for a malformed file never blames its file
    │   for it); the CLI refuses it before any command, exit 2
    ├── InvalidAllocation: a kernel allocated a negative budget (the published dynamic rules can)
    ├── PoolExhausted: a draw asked for more users than the pool holds
    └── ProverError: the verifier contradicted itself (a counterexample that does not replay):
        a bug in wevent, exit 4, never a verdict

An unknown name (an allocator, a guard or audit engine, an evidence kind) is an `InputError` whose
message lists the known names and, when one is close, asks "did you mean ...?".

This module imports nothing, so every layer can raise these.
"""

from __future__ import annotations

__all__ = [
    "AllocatorError",
    "EngineError",
    "InputError",
    "LimitError",
    "PopulationAllocatorError",
    "Refused",
    "SparsityExceeded",
    "WeventError",
]


class WeventError(Exception):
    """The root of wevent's error types (the tree above). Not under it: a few internal signals
    (`GuardRefused` in the experiments, `TargetRaised` in the gate) and Python's own TypeError
    for some API misuse (evidence of a wrong type)."""


class InputError(WeventError, ValueError):
    """A value, file or option wevent cannot use (one line for the user, exit 2)."""


class Refused(WeventError):
    """The guard refused a spend before anything was recorded or any noise drawn."""


class AllocatorError(InputError):
    """A name or target that does not name a usable allocator: an unknown name, a module or
    entry point that does not load, an object that breaks the allocator protocol, a variant or
    requirement kind the allocator does not have. Raised by the allocator registry
    (`wevent.mechanisms.allocators.registry`) and the allocator families."""


class PopulationAllocatorError(AllocatorError):
    """A target that is meant as a population allocator but is malformed (the population gate
    reports it)."""


class SparsityExceeded(InputError):
    """An ExSub input with more non-zero entries than the sparsity s the mechanism was built
    for (`wevent.mechanisms.exsub`)."""


class LimitError(WeventError):
    """An environment variable that sets an input limit holds no valid limit (named in the
    message). Deliberately not a ValueError (see the tree above)."""


class EngineError(WeventError):
    """An audit engine cannot check a valid ledger exactly (the DuckDB and Spark engines sum in
    DECIMAL(38,0)); the message names the engine that can (`wevent.verifier.sql`)."""
