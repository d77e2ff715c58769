"""Checking ledgers: the runtime guard, the vectorized batch checker and the reference checker."""

from verifier.check import check
from verifier.guard import Guard
from verifier.reference import reference_check
from verifier.verdict import EvidenceFailure, Verdict, Violation

__all__ = ["EvidenceFailure", "Guard", "Verdict", "Violation", "check", "reference_check"]
