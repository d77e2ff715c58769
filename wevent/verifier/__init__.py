"""Checking ledgers: the runtime guard, the vectorized batch checker and the reference checker."""

from wevent.verifier.check import check
from wevent.verifier.guard import Guard
from wevent.verifier.reference import reference_check
from wevent.verifier.verdict import EvidenceFailure, Verdict, Violation

__all__ = ["EvidenceFailure", "Guard", "Verdict", "Violation", "check", "reference_check"]
