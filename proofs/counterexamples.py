"""Counterexamples to an allocator's window theorem: a requirement population, a decision
sequence and the failure, which replays through the kernel and the runtime guard.

A counterexample comes from a Z3 model of the negated theorem at its first failing slot (see
`verifier.symbolic.first_failure`), so the replay meets the same failure at the same slot: the
guard refuses a spend there, or the kernel allocates a negative budget there.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accounting.budget import format_exact, ratio_text
from accounting.formats import write_requirements
from accounting.population import Population
from accounting.requirements import Dynamic, Fixed, Requirement

if TYPE_CHECKING:
    from wevent.tracing import TraceResult

__all__ = ["Counterexample", "Failure", "requirements_csv"]


@dataclass(frozen=True)
class Failure:
    """What went wrong at ``slot``: a window over its bound or a negative budget."""

    slot: int
    user: str
    kind: str  # "fixed", "backward", "forward" (a window) or "negative"
    first: int = 0  # window slots (windows only)
    last: int = 0
    spent: Fraction = Fraction(0)  # window sum through ``slot``, or the negative budget
    bound: Fraction = Fraction(0)
    part: str = ""  # "dissimilarity" or "publication" (negative budgets only)

    def describe(self) -> str:
        if self.kind == "negative":
            return (
                f"slot {self.slot}: {self.user} is allocated a negative {self.part} budget "
                f"{format_exact(self.spent)}"
            )
        return (
            f"slot {self.slot}: {self.user}'s {self.kind} window [{self.first}, {self.last}] "
            f"holds {format_exact(self.spent)} > bound {format_exact(self.bound)} "
            f"(excess {format_exact(self.spent - self.bound)})"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"slot": self.slot, "user": self.user, "kind": self.kind}
        if self.kind == "negative":
            out.update(part=self.part, budget=ratio_text(self.spent))
        else:
            out.update(
                window=[self.first, self.last],
                spent=ratio_text(self.spent),
                bound=ratio_text(self.bound),
                excess=ratio_text(self.spent - self.bound),
            )
        out["message"] = self.describe()
        return out


def requirements_csv(population: Population) -> str:
    """The population as the requirements CSV `wevent trace -r` reads."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "requirements.csv"
        write_requirements(population, path)
        return path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Counterexample:
    """A concrete population (one user per class), decisions (one per slot, up to the failing
    slot) and the failure they lead to."""

    mechanism: str
    variant: str
    arithmetic: str
    requirements: tuple[tuple[str, Requirement], ...]
    decisions: tuple[bool, ...]
    failure: Failure

    @property
    def population(self) -> Population:
        return Population(dict(self.requirements))

    @property
    def decision_text(self) -> str:
        return ",".join("1" if d else "0" for d in self.decisions)

    def command(self, path: str = "counterexample.csv") -> str:
        flags = ""
        if self.variant != "sound":
            flags += f" --variant {self.variant}"
        if self.arithmetic != "exact":
            flags += f" --arithmetic {self.arithmetic}"
        return f"wevent trace {self.mechanism} -r {path} --decisions {self.decision_text}{flags}"

    def replay(self) -> TraceResult:
        """Run the kernel on the decisions through the runtime guard."""
        from wevent.tracing import trace_with_guard

        return trace_with_guard(
            self.mechanism,
            self.population,
            list(self.decisions),
            variant=self.variant,
            arithmetic=self.arithmetic,
        )

    def replays(self) -> bool:
        """The replay fails at the same slot, the same way (guard refusal or negative budget)."""
        result = self.replay()
        if result.failed_slot != self.failure.slot:
            return False
        if self.failure.kind == "negative":
            return result.negative is not None
        return result.refusal is not None

    def to_json(self) -> dict[str, Any]:
        reqs: list[dict[str, Any]] = []
        for user, req in self.requirements:
            if isinstance(req, Fixed):
                reqs.append({"user": user, "w": req.w, "epsilon": format_exact(req.eps)})
            else:
                assert isinstance(req, Dynamic)
                for d in req.declarations:
                    reqs.append(
                        {
                            "user": user,
                            "slot": d.slot,
                            "w_back": d.w_back,
                            "eps_back": format_exact(d.eps_back),
                            "w_fwd": d.w_fwd,
                            "eps_fwd": format_exact(d.eps_fwd),
                        }
                    )
        return {
            "result": "counterexample",
            "mechanism": self.mechanism,
            "variant": self.variant,
            "arithmetic": self.arithmetic,
            "requirements": reqs,
            "requirements_csv": requirements_csv(self.population),
            "decisions": [1 if d else 0 for d in self.decisions],
            "violation": self.failure.to_json(),
            "replay": self.command(),
        }

    def describe(self) -> list[str]:
        buf = io.StringIO()
        buf.write(requirements_csv(self.population))
        lines = [f"counterexample: {self.failure.describe()}", "requirements (CSV):"]
        lines += [f"  {row}" for row in buf.getvalue().splitlines()]
        lines.append(f"decisions: {self.decision_text}")
        lines.append(f"replay: {self.command()}")
        return lines
