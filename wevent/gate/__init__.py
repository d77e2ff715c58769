"""`wevent gate`: a CI verdict on a budget allocator (built-in or third-party).

`run_gate(target, GateOptions(...))` checks conformance to the `Allocator` protocol, proves the
window theorem with Z3 when the kernel runs symbolically, searches adversarially with hypothesis
through the runtime guard, and runs the kernel end to end on synthetic streams; the
`GateReport` renders as text, JSON and JUnit XML. See `wevent.gate.core` for the stages,
`wevent.gate.population` for the population-division allocators (users drawn from a pool) and
`wevent.gate.report` for verdicts and exit codes.
"""

from wevent.gate.core import STAGES, GateOptions, run_gate
from wevent.gate.report import EXIT_CODES, GateReport, StageResult

__all__ = ["EXIT_CODES", "STAGES", "GateOptions", "GateReport", "StageResult", "run_gate"]
