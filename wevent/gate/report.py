"""What a gate run found, and how it is rendered: text lines, JSON and JUnit XML.

Verdicts and exit codes (`wevent gate`):

* ``proved`` (0): every check passed and the Z3 proof holds over its scope;
* ``passed`` (0): every check passed and a search passed; no proof (the kernel is not symbolic,
  or Z3 was undecided); with ``--require-proof`` this is ``unproved`` (3), never a pass;
* ``unchecked`` (3): nothing was proved, and no search and no end-to-end run passed (every stage
  skipped or undecided, say a setup that refused every population): nothing decided, never a
  pass;
* ``refuted`` (1): some check failed; the smallest counterexample is reported, as the requirements
  CSV and ``--decisions`` string that `wevent trace` replays;
* ``unusable`` (2): the target does not load, does not implement the protocol, or its kernel
  raises on a valid input;
* ``verifier-error`` (4): the verifier contradicted itself (a proof's counterexample that does
  not replay through the kernel and the guard): a bug in wevent, never a verdict on the target.
  A refutation some other stage replayed still stands (``refuted``).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from wevent.accounting.requirements import Dynamic, Fixed
from wevent.proofs.counterexamples import Counterexample

if TYPE_CHECKING:  # the options are the caller's (gate.core imports this module)
    from wevent.gate.core import GateOptions

__all__ = ["EXIT_CODES", "GateReport", "StageResult", "cex_size", "new_report"]

EXIT_CODES = {
    "proved": 0,
    "passed": 0,
    "refuted": 1,
    "unusable": 2,
    "unproved": 3,
    "unchecked": 3,
    "verifier-error": 4,
}

# Stage statuses: "passed", "proved", "failed" (a refutation), "unknown" (Z3 undecided),
# "skipped" (not applicable, with the reason), "error" (the target's code raised),
# "verifier-error" (the verifier contradicted itself: `wevent.proofs.counterexamples.ProverError`).
FAILED, PASSED, PROVED, SKIPPED, UNKNOWN, ERROR, VERIFIER_ERROR = (
    "failed",
    "passed",
    "proved",
    "skipped",
    "unknown",
    "error",
    "verifier-error",
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
        if any(s.status == VERIFIER_ERROR for s in self.stages):
            return "verifier-error"
        if any(s.status == PROVED for s in self.stages):
            return "proved"
        if self.search_scope() is None and not self._ran_end_to_end():
            return "unchecked"  # no proof, no search, no run: nothing was decided
        return "unproved" if self.require_proof else "passed"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    # ---------------------------------------------------------------- what was checked

    def proof_scope(self) -> dict[str, Any] | None:
        """What the proof stage proved (None when nothing was proved): for a budget kernel its
        theorem's scope (classes, w, horizon or "unbounded", budgets); for a population
        allocator the theorems proved, each with its scope."""
        for s in self.stages:
            if s.name != "proof" or s.status != PROVED:
                continue
            proof = s.data.get("proof", {})
            if "theorems" in proof:
                return {
                    "theorems": [
                        {"theorem": th["theorem"], "scope": th.get("scope", {})}
                        for th in proof["theorems"]
                    ]
                }
            return dict(proof.get("scope", {}))
        return None

    def search_scope(self) -> dict[str, Any] | None:
        """What the search stages ran and passed (None when no search passed): the runs summed,
        the largest window, class count and run length actually reached, the kinds."""
        passed = [s for s in self.stages if s.name.startswith("search/") and s.status == PASSED]
        scopes = [s.data["scope"] for s in passed if "scope" in s.data]
        if not scopes:
            return None
        out: dict[str, Any] = {
            "runs": sum(int(x.get("runs", 0)) - int(x.get("skipped", 0)) for x in scopes),
            "w_max": max(int(x.get("w_max", 0)) for x in scopes),
            "classes": max(int(x.get("classes", 0)) for x in scopes),
            "horizon": max(int(x.get("horizon", 0)) for x in scopes),
            "kinds": [str(x.get("kind", "")) for x in scopes],
            # each kind's own reach: the maxima above may come from different kinds
            "by_kind": [
                {
                    "kind": str(x.get("kind", "")),
                    "runs": int(x.get("runs", 0)) - int(x.get("skipped", 0)),
                    "w_max": int(x.get("w_max", 0)),
                    "classes": int(x.get("classes", 0)),
                    "horizon": int(x.get("horizon", 0)),
                }
                for x in scopes
            ],
        }
        pools = [x["pool"] for x in scopes if "pool" in x]
        if pools:
            out["pool"] = pools[0]
        return out

    def _ran_end_to_end(self) -> bool:
        return any(s.name == "end-to-end" and s.status == PASSED for s in self.stages)

    def _unexercised(self) -> str:
        """A note when the end-to-end run never published (nothing released was checked)."""
        for s in self.stages:
            if s.name == "end-to-end" and s.data.get("publications") == 0 and s.status == UNKNOWN:
                return "; end to end: never published (the release path was not exercised)"
        return ""

    def _path_unchecked(self) -> str:
        """An allocator with a data path of its own: the gate checks the budgets its kernel
        charges, never what the path does with them (whether it adds the noise it is given)."""
        path = self.allocator.get("data_path") if self.allocator else None
        if not path:
            return ""
        return (
            f"; its data path {path} is not checked by the gate (the verdict covers the budgets "
            "charged, not the noise the path adds)"
        )

    def _not_proved_because(self) -> str:
        for s in self.stages:
            if s.name == "proof":
                return f"{s.status}: {s.detail}" if s.detail else s.status
        return "no proof stage ran"

    def headline(self) -> str:
        """The verdict and exactly what it rests on: the proof's scope, the search's reach."""
        verdict = self.verdict
        if verdict == "unusable":
            return f"UNUSABLE: {self.unusable_reason}"
        if verdict == "verifier-error":
            bad = next(s for s in self.stages if s.status == VERIFIER_ERROR)
            return f"VERIFIER ERROR in {bad.name} (a bug in wevent, not a verdict): {bad.detail}"
        if verdict == "refuted":
            cex = self.counterexample
            # The stage that found the counterexample shown (the smallest of every stage's), not
            # merely the first that failed: a proof's replay can fail at a later slot than the
            # search's counterexample, which the headline then shows.
            bad = next(
                (s for s in self.stages if cex is not None and s.counterexample is cex),
                None,
            ) or next(s for s in self.stages if s.status == FAILED)
            why = cex.failure.describe() if cex is not None else bad.detail
            return f"REFUTED by {bad.name}: {why}"
        searched = (
            _searched_text(self.search_scope()) + self._unexercised() + self._path_unchecked()
        )
        if verdict == "proved":
            return f"PROVED {_proved_text(self.proof_scope() or {})}; {searched}"
        reason = _short(self._not_proved_because())
        if verdict == "unproved":
            return f"UNPROVED (--require-proof; not proved: {reason}); {searched}"
        if verdict == "unchecked":
            return (
                f"UNCHECKED: neither proved nor searched, nothing was decided (not proved: "
                f"{reason}; {searched})"
            )
        if self.search_scope() is None:  # the end-to-end runs alone passed
            return f"PASSED (end to end only: neither proved nor searched; not proved: {reason})"
        return f"PASSED (searched, not proved: {reason}); {searched}"

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
        lines = [
            f"wevent gate {self.target} ({self.variant}, {self.arithmetic} arithmetic, "
            f"{self.seconds:.2f} s): {self.headline()}"
        ]
        if self.allocator:
            a = self.allocator
            symbolic = "declares symbolic" if a["symbolic"] else "declares not symbolic"
            ran = next((st for st in self.stages if st.name == "conformance/symbolic"), None)
            if ran is not None and a["symbolic"] and ran.status != PASSED:
                symbolic += f" (conformance/symbolic {ran.status}: see below)"
            lines.append(
                f"  allocator {a['name']}: {a['requirement']} requirements, scaling "
                f"{a['scaling']} (declared), {symbolic}"
            )
        if self.error is not None:
            lines.append(f"  unusable: {self.error}")
        for s in self.stages:
            lines.append(f"  {s.name:<24} {s.status:<8} {s.seconds:7.2f} s  {s.detail}")
        cex = self.counterexample
        if cex is not None:
            lines += cex.describe(self.requirements_path)
        return lines

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target": self.target,
            "variant": self.variant,
            "arithmetic": self.arithmetic,
            "verdict": self.verdict,
            "headline": self.headline(),
            "proved": self.proof_scope(),
            "searched": self.search_scope(),
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
        options = {"variant": self.variant, "arithmetic": self.arithmetic}
        for k, v in self.options.items():  # as given (variant and arithmetic once)
            options.setdefault(k, str(v))
        # the options' sentinels for "the default", said so (the reach is in "searched")
        if options.get("search_horizon") == "0":
            options["search_horizon"] = "0 (default: max(256, 4 search_w_max) slots)"
        if options.get("search_runs") == "-1":
            options["search_runs"] = "-1 (default: 600 a kind; 100 dynamic, 400 population)"
        for key, value in (
            ("verdict", self.verdict),
            ("exit_code", str(self.exit_code)),
            ("headline", self.headline()),
            ("proved", json.dumps(self.proof_scope(), sort_keys=True)),
            ("searched", json.dumps(self.search_scope(), sort_keys=True)),
            *options.items(),
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
                    body += s.counterexample.describe(self.requirements_path)
                node.text = "\n".join(body)
            elif s.status in (ERROR, VERIFIER_ERROR):
                node = ET.SubElement(case, "error", {"message": s.detail})
                node.text = s.detail
            elif s.status in (SKIPPED, UNKNOWN):
                ET.SubElement(case, "skipped", {"message": f"{s.status}: {s.detail}"})
            else:
                out = ET.SubElement(case, "system-out")
                out.text = f"{s.status}: {s.detail}"
        if (
            self.exit_code != 0
            and not any(s.status in (FAILED, ERROR, VERIFIER_ERROR) for s in self.stages)
            and self.error is None
        ):
            # a verdict that is not a pass (unproved, unchecked) although no stage failed: one
            # failing case, so a dashboard does not show it green
            case = ET.SubElement(suite, "testcase", {"classname": classname, "name": "verdict"})
            node = ET.SubElement(case, "failure", {"message": self.headline()})
            node.text = self.headline()
            suite.set("tests", str(int(suite.get("tests", "0")) + 1))
            suite.set("failures", str(int(suite.get("failures", "0")) + 1))
        root = ET.Element("testsuites")
        root.append(suite)
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _range_max(value: Any) -> str:
    """The upper end of a scope range: "1..3", [1, 3] or 3 -> "3"."""
    if isinstance(value, list | tuple):
        return str(value[-1])
    return str(value).split("..")[-1]


def _proved_text(scope: dict[str, Any]) -> str:
    if "theorems" in scope:  # a population allocator
        parts = []
        for th in scope["theorems"]:
            sc = th["scope"]
            what = {
                "pool-never-short": "no draw exceeds the pool",
                "user-windows": "every drawn user's windows hold",
                "ops-split": "the OPS split covers every report",
            }.get(th["theorem"], th["theorem"])
            bits = []
            if "classes" in sc:
                bits.append(f"<= {_range_max(sc['classes'])} classes")
            if "w" in sc:
                bits.append(f"w <= {_range_max(sc['w'])}")
            if "n" in sc:
                bits.append(f"n <= {_range_max(sc['n'])}")
            if "users" in sc:
                bits.append(f"users {sc['users']}")
            if "horizon" in sc:  # the slots the bounded proof unrolled (each case's own)
                high = sc.get("horizon_max")
                bits.append(
                    f"{sc['horizon']} slots"
                    if high is None
                    else f"{sc['horizon']}..{high} slots ({sc.get('horizon_rule', '')})"
                )
            if "budgets" in sc:
                budgets = sorted({b for row in sc["budgets"] for b in row}, key=Fraction)
                bits.append(f"budgets in {{{', '.join(budgets)}}}")
            parts.append(f"{what} ({', '.join(bits)})" if bits else what)
        return "that " + "; ".join(parts)
    horizon = scope.get("horizon")
    method = "k-induction"
    if "declaration_slots" in scope:  # the dynamic induction: one class, the rest by argument
        several = _range_max(scope.get("classes", "1")) != "1"
        method = "induction; classes by non-interference" if several else "induction"
    slots = f"every horizon ({method})" if horizon == "unbounded" else f"{horizon} slots"
    budgets = scope.get("budgets", "positive reals")
    if budgets == "positive reals":
        budget_text = "every positive budget"
    elif isinstance(budgets, str):  # a restriction stated in words (DPBA's forward ratios)
        budget_text = f"budgets: {budgets}"
    else:
        budget_text = f"budgets in {{{', '.join(str(b) for b in budgets)}}}"
    out = (
        f"for <= {_range_max(scope.get('classes', '?'))} classes, "
        f"w <= {_range_max(scope.get('w', '?'))}, {slots}, {budget_text}"
    )
    if "declaration_slots" in scope:
        out += f", declarations at slots {scope['declaration_slots']}"
    return out


def _searched_text(scope: dict[str, Any] | None) -> str:
    if scope is None:
        return "not searched"
    pool = f", pools of {scope['pool']} users" if "pool" in scope else ""
    kinds = scope.get("by_kind") or [scope]
    if len(kinds) == 1:
        k = kinds[0]
        return (
            f"searched {scope['runs']:,} populations up to w = {k['w_max']}, "
            f"{k['classes']} classes, {k['horizon']} slots{pool}: no violation"
        )
    # several kinds (fixed and dynamic requirements): each with its own reach
    reach = "; ".join(
        f"{k['kind']}: {k['runs']:,} up to w = {k['w_max']}, {k['classes']} classes, "
        f"{k['horizon']} slots"
        for k in kinds
    )
    return f"searched {scope['runs']:,} populations ({reach}){pool}: no violation"


def new_report(target: str, opts: GateOptions) -> GateReport:
    """An empty report for ``target`` that records the options it runs with."""
    optjson = asdict(opts)
    optjson["stages"] = list(opts.stages)
    optjson["horizon"] = opts.slots
    return GateReport(
        target, opts.variant, opts.arithmetic, optjson, require_proof=opts.require_proof
    )
