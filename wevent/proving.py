"""`wevent prove` for allocators: run a proof and render its outcome (text or JSON)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from wevent.accounting.budget import BudgetError
from wevent.accounting.formats import write_requirements
from wevent.proofs.central import ALLOCATORS, AllocatorProof, Scope, prove_allocator
from wevent.proofs.dynamic import INDUCTION_DEFAULT_W_MAX

__all__ = [
    "default_scope",
    "parse_declaration_slots",
    "progress_printer",
    "render_population",
    "render_proof",
    "run_allocator_proof",
    "run_population_proof",
]


def default_scope(
    mechanism: str,
    *,
    w_max: int | None,
    classes: int | None,
    horizon: int | None,
    timeout: int,
    unbounded: bool = False,
    declarations: str | None = None,
) -> Scope:
    """The scope `wevent prove allocator` uses, the gate's proof scope: 2 classes; fixed kernels
    w <= 6, dynamic kernels (declarations at slots 1 and 2 unless ``declarations`` lists others,
    e.g. "1" or "1,3"; their shapes grow as w^(2 x declarations) per class) w <= 4, which is
    proved by induction for every horizon (the bounded scope is too large to enumerate);
    horizon 3 * w_max."""
    dynamic = ALLOCATORS[mechanism].requirement == "dynamic"
    w = w_max if w_max is not None else (INDUCTION_DEFAULT_W_MAX if dynamic else 6)
    k = classes if classes is not None else 2
    scope = Scope(classes=k, w_max=w, horizon=horizon or 0, timeout_ms=timeout * 1000)
    if declarations is None:
        return scope
    if not dynamic:
        raise BudgetError(f"{mechanism}: --declarations applies to the dynamic kernels only")
    return replace(scope, decl_slots=parse_declaration_slots(declarations))


def parse_declaration_slots(text: str) -> tuple[int, ...]:
    """``"1,3"`` -> (1, 3): increasing positive slots, the first at 1, at most 3 of them."""
    try:
        slots = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise BudgetError(
            f"--declarations {text!r}: expected slots separated by commas, e.g. 1,2"
        ) from None
    if not slots or slots[0] != 1 or any(b <= a for a, b in itertools.pairwise(slots)):
        raise BudgetError(
            f"--declarations {text!r}: slots must increase and start at 1 (a class declares "
            "its first requirement at slot 1)"
        )
    if len(slots) > 3:
        raise BudgetError(f"--declarations {text!r}: at most 3 declarations (shapes grow as w^6)")
    return slots


def progress_printer() -> Callable[[str], None] | None:
    """Progress on stderr when it is a terminal (a tqdm bar counting cases)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bar = tqdm(desc="proving", unit="case", leave=False, file=sys.stderr)

    def say(message: str) -> None:
        bar.set_postfix_str(message[:60])
        bar.update(1)

    return say


def run_allocator_proof(
    mechanism: str,
    *,
    variant: str,
    arithmetic: str,
    scope: Scope,
    unbounded: bool,
    save_requirements: Path | None = None,
    workers: int = 1,
) -> AllocatorProof:
    proof = prove_allocator(
        mechanism,
        variant=variant,
        arithmetic=arithmetic,
        scope=scope,
        unbounded=unbounded,
        progress=progress_printer(),
        workers=workers,
    )
    if proof.counterexample is not None and save_requirements is not None:
        write_requirements(proof.counterexample.population, save_requirements)
    return proof


def render_proof(proof: AllocatorProof, written: Path | None = None) -> list[str]:
    """Human-readable lines: status, theorem and scope, then the counterexample if any (its
    requirement files written at ``written``, or to be saved by the reader)."""
    label = {"proved": "PROVED", "counterexample": "REFUTED", "unknown": "UNKNOWN"}[proof.status]
    scope = f" for {allocator_scope_text(proof.scope)};" if proof.status == "proved" else ""
    lines = [
        f"{proof.mechanism} ({proof.variant}, {proof.arithmetic} arithmetic): {label}{scope} "
        f"by {proof.method} ({proof.cases} cases, {proof.seconds:.2f} s)",
        f"  theorem: {proof.statement}",
        "  scope: " + ", ".join(f"{k}={_show(v)}" for k, v in proof.scope.items()),
    ]
    lines += [f"  note: {n}" for n in proof.notes]
    if proof.reason:
        lines.append(f"  reason: {proof.reason}")
    if proof.counterexample is not None:
        where = None if written is None else str(written)
        lines += ["  " + line for line in proof.counterexample.describe(where)]
    return lines


def allocator_scope_text(scope: dict[str, Any]) -> str:
    """An allocator proof's scope in words for the first line: classes, windows, slots (or every
    horizon), declaration slots and budgets; keys it does not know are appended as "key=value"."""
    rest = dict(scope)
    words = []
    if "classes" in rest:
        words.append(f"{rest.pop('classes')} classes")
    if "w" in rest:
        words.append(f"windows {rest.pop('w')}")
    if "horizon" in rest:
        horizon = rest.pop("horizon")
        words.append("every horizon" if horizon == "unbounded" else f"{horizon} slots")
    if "declaration_slots" in rest:
        words.append(f"declarations at slots {_show(rest.pop('declaration_slots'))}")
    if "budgets" in rest:
        words.append(f"budgets {_show(rest.pop('budgets'))}")
    words += [f"{k}={_show(v)}" for k, v in rest.items()]
    return ", ".join(words)


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "{" + ", ".join(str(v) for v in value) + "}"
    return str(value)


def run_population_proof(
    target: str,
    *,
    variant: str,
    w_max: int,
    classes: int,
    horizon: int | None,
    timeout: int,
) -> dict[str, Any]:
    """`wevent.proofs.population.prove_population` with a progress bar on a terminal."""
    from wevent.proofs.population import prove_population

    return prove_population(
        target,
        variant=variant,
        w_max=w_max,
        classes=classes,
        horizon=horizon,
        timeout_ms=timeout * 1000,
        progress=progress_printer(),
    )


def population_scope_text(scope: dict[str, Any]) -> str:
    """A population proof's scope in words (not a dict repr): classes, windows, users, slots and
    budget assignments, in that order; keys it does not know are appended as "key value"."""
    words: list[str] = []
    rest = dict(scope)
    if "classes" in rest:
        low, high = rest.pop("classes")
        words.append(
            f"{low} class{'es' if high > 1 else ''}" if low == high else f"{low}..{high} classes"
        )
    if "w" in rest:
        low, high = rest.pop("w")
        words.append(f"windows {low}..{high}")
    if "windows" in rest:
        words.append("windows " + ", ".join(str(w) for w in rest.pop("windows")))
    if "n" in rest:
        low, high = rest.pop("n")
        words.append(f"n = {low}..{high} users")
    if "users" in rest:
        words.append(f"users {rest.pop('users')}")
    if "horizon" in rest:
        low, high = rest.pop("horizon"), rest.pop("horizon_max", None)
        rule = rest.pop("horizon_rule", None)
        words.append(f"{low} slots" if high is None else f"{low}..{high} slots ({rule})")
    if "budgets" in rest:
        grids = ["{" + ", ".join(str(b) for b in g) + "}" for g in rest.pop("budgets")]
        words.append("budgets " + " or ".join(grids))
    words += [f"{key} {value}" for key, value in rest.items()]
    return ", ".join(words)


def _population_headline_scope(result: dict[str, Any]) -> str:
    """The scope of the first line: the pool theorem's (classes, windows, users, slots), and the
    budgets the user-windows theorem was proved for (a finite set of assignments), so the line
    never reads wider than what was proved."""
    text = ""
    for th in result["theorems"]:
        if th.get("scope") and th["theorem"] == "pool-never-short":
            text = population_scope_text(th["scope"])
            break
    else:
        for th in result["theorems"]:
            if th.get("scope"):
                return population_scope_text(th["scope"])
    for th in result["theorems"]:
        budgets = th.get("scope", {}).get("budgets")
        if th["theorem"] == "user-windows" and budgets:
            grids = ["{" + ", ".join(str(b) for b in g) + "}" for g in budgets]
            text += f"; user windows at budgets {' or '.join(grids)}"
    return text


def render_population(result: dict[str, Any]) -> list[str]:
    label = {"proved": "PROVED", "counterexample": "REFUTED", "unknown": "UNKNOWN"}[
        result["result"]
    ]
    scope = _population_headline_scope(result)
    lines = [
        f"{result['mechanism']} ({result['variant']}): {label}"
        + (f" for {scope}" if scope and label == "PROVED" else "")
        + f" ({result['seconds']:.2f} s)"
    ]
    for th in result["theorems"]:
        name = th["theorem"]
        if name == "ops-split":
            lines.append(f"  ops-split: {th['result']} - {th['statement']}")
            if th.get("counterexample"):
                cex = th["counterexample"]
                lines.append(
                    f"    counterexample: n={cex['n']}, candidate window {cex['w_o']} "
                    f"(z={cex['z']}, R={cex['R']}), user window {cex['w']}: {cex['k']} reports "
                    f"fit but the split is {cex['split']}"
                )
        else:
            scope = th.get("scope", {})
            lines.append(f"  {name}: {th['result']} - scope: {population_scope_text(scope)}")
            if name == "user-windows" and th.get("counterexample"):
                bad = th["counterexample"]
                lines.append(
                    f"    class {bad['class'] + 1} (w={bad.get('w')}, eps={bad.get('epsilon')}) "
                    f"spends {bad.get('per_report')} per report, back after R="
                    f"{bad.get('recycle')} slots: {bad.get('reports')} reports in a window"
                )
            if th.get("decisions"):
                lines.append(
                    f"    decisions {','.join(str(d) for d in th['decisions'])} run the pool "
                    f"short at slot {th['slot']}"
                )
    replay = result.get("replay")
    if replay:
        v = replay["violation"]
        lines.append(
            f"  replays through the guard: {replay['mechanism']} ({result['variant']}), "
            f"{len(replay['requirements'])} users, every slot publishing: refused at slot "
            f"{v['slot']}, window [{v['window'][0]}, {v['window'][1]}] spent {v['spent']}, "
            f"asked {v['asked']}, bound {v['bound']}"
        )
        lines.append("  requirements (user,w,epsilon):")
        lines += [f"    {r['user']},{r['w']},{r['epsilon']}" for r in replay["requirements"]]
        decisions = ",".join(str(d) for d in replay["decisions"])
        lines.append(
            f"  replay: wevent trace {replay['mechanism']} -r REQ.csv --decisions {decisions} "
            f"--variant {result['variant']}"
        )
    return lines
