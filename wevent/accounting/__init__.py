"""wevent's accounting vocabulary: exact budgets, requirements, populations, evidence, ledgers.

Imports nothing else of the project; mechanisms spend through `wevent.accounting.spending.Spender`.
"""

from wevent.accounting.budget import Budget, BudgetError, Rounding, format_exact
from wevent.accounting.evidence import (
    GRR,
    OUE,
    DiscreteLaplace,
    Evidence,
    ExSub,
    Laplace,
    PostProcessing,
    Sampled,
)
from wevent.accounting.ledger import Charge, Ledger
from wevent.accounting.population import Population, RequirementClass
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement, WholeStream
from wevent.accounting.spending import BudgetExceeded, EvidenceRejected, Spender

__all__ = [
    "GRR",
    "OUE",
    "Budget",
    "BudgetError",
    "BudgetExceeded",
    "Charge",
    "Declaration",
    "DiscreteLaplace",
    "Dynamic",
    "Evidence",
    "EvidenceRejected",
    "ExSub",
    "Fixed",
    "Laplace",
    "Ledger",
    "Population",
    "PostProcessing",
    "Requirement",
    "RequirementClass",
    "Rounding",
    "Sampled",
    "Spender",
    "WholeStream",
    "format_exact",
]
