"""What a gate run found, and how it is rendered: text lines, JSON and JUnit XML.

Verdicts and exit codes (`wevent gate`):

* ``proved`` (0): every check passed and the Z3 proof holds over its scope;
* ``passed`` (0): every check passed; no proof (the kernel is not symbolic, or Z3 was undecided);
  with ``--require-proof`` this is ``unproved`` (3), never a pass;
* ``refuted`` (1): some check failed; the smallest counterexample is reported, as the requirements
  CSV and ``--decisions`` string that `wevent trace` replays;
* ``unusable`` (2): the target does not load, does not implement the protocol, or its kernel
  raises on a valid input.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from accounting.requirements import Dynamic, Fixed
from proofs.counterexamples import Counterexample, requirements_files

__all__ = ["EXIT_CODES", "GateReport", "StageResult", "cex_size"]

EXIT_CODES = {"proved": 0, "passed": 0, "refuted": 1, "unusable": 2, "unproved": 3}

# Stage statuses: "passed", "proved", "failed" (a refutation), "unknown" (Z3 undecided),
# "skipped" (not applicable, with the reason), "error" (the target's code raised).
FAILED, PASSED, PROVED, SKIPPED, UNKNOWN, ERROR = (
    "failed",
    "passed",
    "proved",
    "skipped",
    "unknown",
    "error",
)


@dataclass
class StageResult:
    """One check of the gate: its status, a one-line detail and what it found."""

    name: str
    status: str
    seconds: float
    detail: str
    counterexample: Counterexample | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "detail": self.detail,
        }
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample.to_json()
        out.update(self.data)
        return out


def cex_size(cex: Counterexample) -> tuple[int, int, int, int]:
    """How big a counterexample is: classes, slots, declarations, the sum of its windows."""
    windows = 0
    decls = 0
    for _, req in cex.requirements:
        if isinstance(req, Fixed):
            windows += req.w
            decls += 1
        elif isinstance(req, Dynamic):
            decls += len(req.declarations)
            windows += sum(d.w_back + d.w_fwd for d in req.declarations)
    return (len(cex.requirements), len(cex.decisions), decls, windows)


@dataclass
class GateReport:
    """The outcome of `wevent.gate.run_gate` for one target."""

    target: str
    variant: str
    arithmetic: str
    options: dict[str, Any]
    allocator: dict[str, Any] = field(default_factory=dict)
    stages: list[StageResult] = field(default_factory=list)
    error: str | None = None  # the target is unusable
    seconds: float = 0.0
    require_proof: bool = False
    requirements_path: str | None = None  # where the counterexample's CSV was written

    @property
    def verdict(self) -> str:
        if self.error is not None or any(s.status == ERROR for s in self.stages):
            return "unusable"
        if any(s.status == FAILED for s in self.stages):
            return "refuted"
        if any(s.status == PROVED for s in self.stages):
            return "proved"
        return "unproved" if self.require_proof else "passed"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def unusable_reason(self) -> str | None:
        if self.error is not None:
            return self.error
        for s in self.stages:
            if s.status == ERROR:
                return s.detail
        return None

    @property
    def counterexample(self) -> Counterexample | None:
        """The smallest counterexample any stage found (fewest classes, then slots, ...)."""
        found = [s.counterexample for s in self.stages if s.counterexample is not None]
        return min(found, key=cex_size) if found else None

    def stage(self, name: str) -> StageResult:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def replay_command(self) -> str | None:
        cex = self.counterexample
        if cex is None:
            return None
        return cex.command(self.requirements_path or "counterexample.csv")

    # ---------------------------------------------------------------- renderings

    def describe(self) -> list[str]:
        label = self.verdict.upper()
        lines = [
            f"wevent gate {self.target} ({self.variant}, {self.arithmetic} arithmetic): "
            f"{label} ({self.seconds:.2f} s)"
        ]
        if self.allocator:
            a = self.allocator
            lines.append(
                f"  allocator {a['name']}: {a['requirement']} requirements, scaling "
                f"{a['scaling']}, {'symbolic' if a['symbolic'] else 'not symbolic'}"
            )
        if self.error is not None:
            lines.append(f"  unusable: {self.error}")
        for s in self.stages:
            lines.append(f"  {s.name:<24} {s.status:<8} {s.seconds:7.2f} s  {s.detail}")
        cex = self.counterexample
        if cex is not None:
            lines.append(f"counterexample: {cex.failure.describe()}")
            where = self.requirements_path or "counterexample.csv"
            for name, text in requirements_files(cex.population, where):
                lines.append(f"requirements ({name}):")
                lines += [f"  {row}" for row in text.splitlines()]
            lines.append(f"decisions: {cex.decision_text}")
            lines.append(f"replay: {self.replay_command()}")
        return lines

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target": self.target,
            "variant": self.variant,
            "arithmetic": self.arithmetic,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "options": self.options,
            "allocator": self.allocator,
            "stages": [s.to_json() for s in self.stages],
        }
        if self.unusable_reason is not None:
            out["error"] = self.unusable_reason
        cex = self.counterexample
        if cex is not None:
            data = cex.to_json()
            data["replay"] = self.replay_command()
            out["counterexample"] = data
        return out

    def junit_xml(self) -> str:
        """JUnit XML: one test suite for the target, one test case per check."""
        suite = ET.Element(
            "testsuite",
            {
                "name": f"wevent gate {self.target}",
                "tests": str(max(len(self.stages), 1)),
                "failures": str(sum(s.status == FAILED for s in self.stages)),
                "errors": str(
                    sum(s.status == ERROR for s in self.stages) + (self.error is not None)
                ),
                "skipped": str(sum(s.status in (SKIPPED, UNKNOWN) for s in self.stages)),
                "time": f"{self.seconds:.3f}",
            },
        )
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("verdict", self.verdict),
            ("variant", self.variant),
            ("arithmetic", self.arithmetic),
            *((k, str(v)) for k, v in self.options.items()),
        ):
            ET.SubElement(props, "property", {"name": key, "value": str(value)})
        classname = f"wevent.gate.{self.target}"
        if self.error is not None:
            case = ET.SubElement(suite, "testcase", {"classname": classname, "name": "load"})
            err = ET.SubElement(case, "error", {"message": self.error})
            err.text = self.error
        for s in self.stages:
            case = ET.SubElement(
                suite,
                "testcase",
                {"classname": classname, "name": s.name, "time": f"{s.seconds:.3f}"},
            )
            if s.status == FAILED:
                node = ET.SubElement(case, "failure", {"message": s.detail})
                body = [s.detail]
                if s.counterexample is not None:
                    body += s.counterexample.describe()
                node.text = "\n".join(body)
            elif s.status == ERROR:
                node = ET.SubElement(case, "error", {"message": s.detail})
                node.text = s.detail
            elif s.status in (SKIPPED, UNKNOWN):
                ET.SubElement(case, "skipped", {"message": f"{s.status}: {s.detail}"})
            else:
                out = ET.SubElement(case, "system-out")
                out.text = f"{s.status}: {s.detail}"
        root = ET.Element("testsuites")
        root.append(suite)
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
