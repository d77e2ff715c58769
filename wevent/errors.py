"""wevent's exceptions, under one root.

    WeventError
    ├── InputError (also a ValueError): a value, file or option wevent cannot use; the CLI
    │   │   prints it in one line and exits 2 (`wevent.cli.main` catches every InputError)
    │   └── BudgetError (wevent.accounting.budget): budgets, windows, evidence parameters,
    │       │   requirements, ledgers
    │       ├── FormatError: a malformed file, with its file and line
    │       ├── AllocatorError, PopulationAllocatorError: a target that names no usable allocator
    │       ├── EngineError: a ledger an audit engine cannot check exactly (it names the one that can)
    │       ├── RecordError: a record a durable writer refuses; nothing of it was written
    │       ├── LedgerIntegrityError: a durable ledger a writer or `wevent ledger repair` will
    │       │   not touch (tampered, or with an uncommitted tail); `wevent ledger repair` exits 5
    │       │   on a tampered one
    │       └── SparsityExceeded: an input with more changes than the mechanism's sparsity s
    ├── Refused: the guard refused a spend; nothing was recorded
    │   ├── BudgetExceeded: it would break a window (the message names window, spent, bound)
    │   └── EvidenceRejected: its evidence certifies a cost above the amount charged
    ├── InvalidAllocation: a kernel allocated a negative budget (the published dynamic rules can)
    ├── PoolExhausted: a draw asked for more users than the pool holds
    └── ProverError: the verifier contradicted itself (a counterexample that does not replay):
        a bug in wevent, exit 4, never a verdict

This module imports nothing, so every layer can raise these.
"""

from __future__ import annotations

__all__ = ["InputError", "Refused", "WeventError"]


class WeventError(Exception):
    """The root of wevent's error types (the tree above). Not yet under it: a few internal
    signals (`GuardRefused` in the experiments, `TargetRaised` in the gate) and Python's own
    TypeError/ValueError for some API misuse (an unknown engine name, evidence of a wrong
    type)."""


class InputError(WeventError, ValueError):
    """A value, file or option wevent cannot use (one line for the user, exit 2)."""


class Refused(WeventError):
    """The guard refused a spend before anything was recorded or any noise drawn."""
