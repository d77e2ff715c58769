"""Counterexamples to an allocator's window theorem: a requirement population, a decision
sequence and the failure, which replays through the kernel and the runtime guard.

A counterexample comes from a Z3 model of the negated theorem at its first failing slot (see
`wevent.proofs.symbolic.first_failure`), so the replay meets the same failure at the same slot: the
guard refuses a spend there, or the kernel allocates a negative budget there.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wevent.accounting.budget import format_exact, ratio_text
from wevent.accounting.formats import requirement_paths, write_requirements
from wevent.accounting.population import Population
from wevent.accounting.requirements import Dynamic, Fixed, Requirement
from wevent.errors import WeventError

if TYPE_CHECKING:
    from wevent.accounting.spending import BudgetExceeded
    from wevent.mechanisms.allocators.api import Allocator
    from wevent.verifier.tracing import PopulationTrace, TraceResult

__all__ = [
    "Counterexample",
    "Failure",
    "ProverError",
    "replay_line",
    "replayed",
    "requirements_csv",
    "requirements_files",
]


class ProverError(WeventError):
    """The verifier contradicted itself: a counterexample its proof found does not replay
    through the kernel and the runtime guard (or the proof's algebra disagrees with an exact
    run). A bug in wevent, never a verdict on the allocator: `wevent prove` and `wevent gate`
    report it as "verifier-error" with exit code 4."""


@dataclass(frozen=True)
class Failure:
    """What went wrong at ``slot``: a window over its bound or a negative budget."""

    slot: int
    user: str
    kind: str  # "fixed", "backward", "forward" (a window), "negative" or "shortage"
    first: int = 0  # window slots (windows only)
    last: int = 0
    spent: Fraction = Fraction(0)  # window sum through ``slot``, or the negative budget
    bound: Fraction = Fraction(0)
    part: str = ""  # "dissimilarity" or "publication" (negative budgets, pool shortages)

    @classmethod
    def refused(cls, slot: int, refusal: BudgetExceeded) -> Failure:
        """The window a guard refusal at ``slot`` names (a group charge names its member)."""
        import re

        member = re.search(r"member '([^']*)'", refusal.subject)
        window = refusal.window
        return cls(
            slot,
            member.group(1) if member else refusal.subject,
            window.kind,
            window.first,
            slot if window.last is None else window.last,
            window.spent + refusal.asked,
            window.bound,
        )

    def describe(self) -> str:
        if self.kind == "shortage":  # spent: users asked for; bound: users in the pool
            users = "user" if self.spent == 1 else "users"
            return (
                f"slot {self.slot}: the {self.part} draw asks for {self.spent} {users} but the "
                f"pool holds {self.bound} (the others are inside their recycle period)"
            )
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
        if self.kind == "shortage":
            out.update(part=self.part, asked=int(self.spent), available=int(self.bound))
        elif self.kind == "negative":
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


def requirements_files(
    population: Population, path: str = "counterexample.csv"
) -> list[tuple[str, str]]:
    """The requirement files `write_requirements` would write for ``population`` at ``path``,
    as (file name, CSV text): one file, or two for a population mixing fixed and dynamic users
    (``<stem>.dynamic.csv`` holds the dynamic ones)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        written = write_requirements(population, Path(tmp) / Path(path).name)
        names = requirement_paths(population, path)
        return [
            (str(name), file.read_text(encoding="utf-8"))
            for name, file in zip(names, written, strict=True)
        ]


def requirements_csv(population: Population) -> str:
    """The population as the requirements CSV `wevent trace -r` reads (of one kind of
    requirement; a mixed population has two files, see `requirements_files`)."""
    files = requirements_files(population)
    if len(files) != 1:
        raise ValueError("a population of fixed and dynamic users needs two requirement files")
    return files[0][1]


@dataclass(frozen=True)
class Counterexample:
    """A concrete population, decisions (one per slot, up to the failing slot) and the failure
    they lead to. Budget kernels' counterexamples hold one user per class; a population
    allocator's (`wevent.mechanisms.allocators.local.POPULATION`) holds every user, since the user count
    sets its sample sizes, and ``seed`` is the seed of its pool's draws (`wevent trace --seed`)."""

    mechanism: str
    variant: str
    arithmetic: str
    requirements: tuple[tuple[str, Requirement], ...]
    decisions: tuple[bool, ...]
    failure: Failure
    seed: int = 0

    @property
    def draws_users(self) -> bool:
        """A population allocator's counterexample (replayed with `trace_population`)."""
        from wevent.mechanisms.allocators.registry import is_population

        return is_population(self.mechanism)

    @property
    def population(self) -> Population:
        return Population(dict(self.requirements))

    @property
    def decision_text(self) -> str:
        return ",".join("1" if d else "0" for d in self.decisions)

    def command(self, path: str = "counterexample.csv") -> str:
        """The `wevent trace` command that replays this counterexample from the requirement
        files `write_requirements` writes at ``path`` (one ``-r`` per file)."""
        files = " ".join(f"-r {p}" for p in requirement_paths(self.population, path))
        flags = ""
        if self.variant != "sound":
            flags += f" --variant {self.variant}"
        if self.arithmetic != "exact":
            flags += f" --arithmetic {self.arithmetic}"
        if self.seed:
            flags += f" --seed {self.seed}"
        return f"wevent trace {self.mechanism} {files} --decisions {self.decision_text}{flags}"

    def replay(self, allocator: Allocator | None = None) -> TraceResult:
        """Run the budget kernel on the decisions through the runtime guard: ``allocator``'s
        kernel when given (an allocator the mechanism name does not resolve to, e.g. one under
        test), else the kernel ``mechanism`` names, as `wevent trace` does."""
        from wevent.mechanisms.allocators.algebra import algebra_for
        from wevent.mechanisms.allocators.kernel import classes_of
        from wevent.verifier.tracing import trace_kernel, trace_with_guard

        if self.draws_users:
            raise ValueError(f"{self.mechanism} draws users: use replay_population()")
        if allocator is not None:
            classes = classes_of(self.population, self.mechanism)
            kernel = allocator.kernel(algebra_for(self.arithmetic), classes, self.variant)
            return trace_kernel(
                kernel,
                self.population,
                list(self.decisions),
                mechanism=self.mechanism,
                variant=self.variant,
                arithmetic=self.arithmetic,
            )
        return trace_with_guard(
            self.mechanism,
            self.population,
            list(self.decisions),
            variant=self.variant,
            arithmetic=self.arithmetic,
        )

    def replay_population(self) -> PopulationTrace:
        """Run a population allocator on the decisions, its users drawn from the pool seeded
        with ``seed`` and charged to the runtime guard, as `wevent trace` does."""
        from wevent.verifier.tracing import trace_population

        return trace_population(
            self.mechanism,
            self.population,
            list(self.decisions),
            variant=self.variant,
            seed=self.seed,
        )

    def replays(self, allocator: Allocator | None = None) -> bool:
        """The replay fails at the same slot, the same way (guard refusal, negative budget or,
        for a population allocator, a draw the pool cannot serve); ``allocator`` as in
        `replay`."""
        if self.draws_users:
            trace = self.replay_population()
            if trace.failed_slot != self.failure.slot:
                return False
            if self.failure.kind == "shortage":
                return trace.shortage is not None
            return trace.refusal is not None
        result = self.replay(allocator)
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
        files = requirements_files(self.population)
        return {
            "result": "counterexample",
            "mechanism": self.mechanism,
            "variant": self.variant,
            "arithmetic": self.arithmetic,
            "seed": self.seed,
            "requirements": reqs,
            "requirements_csv": files[0][1],
            "requirements_files": dict(files),
            "decisions": [1 if d else 0 for d in self.decisions],
            "violation": self.failure.to_json(),
            "replay": self.command(),
        }

    def describe(self, written: str | None = None) -> list[str]:
        """The failure, the requirement files, the decisions and the replay command. The command
        names the files at ``written`` (where they were written, e.g. ``--save-requirements``);
        with None it says to save the printed files first, under the names it uses."""
        lines = [f"counterexample: {self.failure.describe()}"]
        for name, text in requirements_files(self.population, written or "counterexample.csv"):
            lines.append(f"requirements ({name}):")
            lines += [f"  {row}" for row in text.splitlines()]
        lines.append(f"decisions: {self.decision_text}")
        lines.append(replay_line(self, written))
        return lines


def replay_line(cex: Counterexample, written: str | None) -> str:
    """The replay instruction: the command alone when the requirement files were written at
    ``written``, else the files to save first (nothing names a file that does not exist)."""
    if written is not None:
        return f"replay: {cex.command(written)}"
    names = ", ".join(str(p) for p in requirement_paths(cex.population, "counterexample.csv"))
    return (
        f"replay: save the requirements above as {names} (or rerun with --save-requirements "
        f"FILE), then run: {cex.command()}"
    )


def replayed(
    cex: Counterexample, source: str, allocator: Allocator | None = None
) -> Counterexample:
    """``cex`` if it replays (`Counterexample.replays`, on ``allocator``'s kernel when given); a
    `ProverError` naming ``source`` and the counterexample otherwise. No refutation is reported
    without a replay."""
    try:
        ok = cex.replays(allocator)
    except Exception as exc:  # the replay itself failed: still the verifier's contradiction
        raise ProverError(
            f"{source}: its counterexample ({cex.failure.describe()}) could not be replayed "
            f"({type(exc).__name__}: {exc}); this is a bug in wevent, not a verdict; replay: "
            f"{cex.command()}"
        ) from exc
    if not ok:
        raise ProverError(
            f"{source}: its counterexample ({cex.failure.describe()}) does not replay through "
            f"the kernel and the guard; this is a bug in wevent, not a verdict; replay: "
            f"{cex.command()}"
        )
    return cex
