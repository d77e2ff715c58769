"""Proofs about population division: the OPS budget split (000 Algorithm 1) in integer arithmetic.

Theorem (sound split). For all integers ``n >= 2``, a candidate window ``w_o >= 1`` with sample
size ``z = floor(n / (2 w_o)) >= 1``, recycle period ``R = floor(n / (2 z))`` and any user window
``w >= 1``: if a user reports at ``k`` slots of one ``w``-slot window, consecutive reports at least
``R`` apart, then ``k <= ceil(w / R)``, the sound split. So ``k`` shares of ``eps / ceil(w / R)``
never exceed ``eps``. Also ``R z <= n / 2``: the dissimilarity draws of any ``R`` consecutive slots
leave half the users for publications.

The published split ``ceil(z / z_w)`` with ``z_w = floor(n / (2 w))`` is checked against the
same reports; Z3 returns the smallest counterexample it finds (n, w_o, w, the report count and the
split).

The report slots are encoded as ``s_1 = a``, ``s_{j+1} >= s_j + R`` and ``s_k <= a + w - 1``, which
is the same as ``(k - 1) R <= w - 1``; ``k`` ranges over ``1 .. w`` (at most one report per slot).
Integers are bounded by the stated ranges, so every check is a finite, decidable question.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import z3

__all__ = ["SplitResult", "prove_ops_split"]


@dataclass(frozen=True)
class SplitResult:
    variant: str
    n_max: int
    w_max: int
    status: str  # "proved", "counterexample" or "unknown"
    statement: str
    counterexample: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "theorem": "ops-split",
            "variant": self.variant,
            "scope": {"n": [2, self.n_max], "w": [1, self.w_max]},
            "result": self.status,
            "statement": self.statement,
            "counterexample": self.counterexample or None,
            "solver": z3.get_version_string(),
            "seconds": round(self.seconds, 3),
        }


def _ceil_div(solver: z3.Solver, name: str, a: Any, b: Any) -> Any:
    """A fresh integer q with q = ceil(a / b) for positive b: b (q - 1) < a <= b q."""
    q = z3.Int(name)
    solver.add(b * q >= a, b * (q - 1) < a)
    return q


def _floor_div(solver: z3.Solver, name: str, a: Any, b: Any) -> Any:
    """A fresh integer q with q = floor(a / b) for positive b: b q <= a < b (q + 1)."""
    q = z3.Int(name)
    solver.add(b * q <= a, a < b * (q + 1))
    return q


def prove_ops_split(
    variant: str = "sound", *, n_max: int = 400, w_max: int = 40, timeout_ms: int = 60_000
) -> SplitResult:
    """Check that the split covers every report a window can hold, for n <= n_max and windows
    <= w_max (``variant`` "sound" or "published")."""
    if variant not in ("sound", "published"):
        raise ValueError(f"unknown variant {variant!r}")
    start = time.perf_counter()
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    n, w_o, w, k = z3.Ints("n w_o w k")
    s.add(n >= 2, n <= n_max, w_o >= 1, w_o <= w_max, w >= 1, w <= w_max)
    z = _floor_div(s, "z", n, 2 * w_o)
    s.add(z >= 1)
    recycle = _floor_div(s, "R", n, 2 * z)
    s.add(k >= 1, k <= w, (k - 1) * recycle <= w - 1)  # k reports fit in w slots, R apart
    if variant == "sound":
        split = _ceil_div(s, "split", w, recycle)
        goal = "k <= ceil(w / R) and R z <= n / 2"
        s.add(z3.Or(k > split, 2 * recycle * z > n))
    else:
        z_w = _floor_div(s, "z_w", n, 2 * w)
        s.add(z_w >= 1)  # the published split is undefined for z_w = 0 (and refused)
        split = z3.If(z_w < z, _ceil_div(s, "ratio", z, z_w), 1)
        goal = "k <= (ceil(z / z_w) if z_w < z else 1)"
        s.add(k > split)
    statement = (
        f"for n in [2, {n_max}], w_o, w in [1, {w_max}], z = floor(n/(2 w_o)) >= 1, "
        f"R = floor(n/(2z)): any k reports R apart inside w slots satisfy {goal}"
    )
    result = s.check()
    seconds = time.perf_counter() - start
    if result == z3.unsat:
        return SplitResult(variant, n_max, w_max, "proved", statement, seconds=seconds)
    if result == z3.sat:
        m = s.model()
        cex = {
            str(v): m.eval(v, model_completion=True).as_long() for v in (n, w_o, w, k, z, recycle)
        }
        cex["split"] = m.eval(split, model_completion=True).as_long()
        return SplitResult(variant, n_max, w_max, "counterexample", statement, cex, seconds)
    return SplitResult(variant, n_max, w_max, "unknown", statement, seconds=seconds)
