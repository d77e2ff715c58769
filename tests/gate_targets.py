"""Targets for the gate's unit tests (`tests/test_gate.py`), loaded as ``tests.gate_targets:NAME``:
the ways a target can be written (an instance, a class, a factory function), the ways it can be
unusable, a sound kernel that Z3 cannot run, one that computes differently on Z3 terms, and the
built-ins without a scaling claim (every budget symbolic in the proof)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from wevent.mechanisms.allocators import make_kernel
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.kernel import ClassReq, Plan, fixed_classes

F = Fraction


class _Plain:
    """Uniform (``eps / w`` at every slot, always published) in plain Python: sound, not
    symbolic (``if`` on a budget). ``mode`` breaks it in one way for the unusable targets."""

    name = "plain"
    variant = "sound"

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]], mode: str = "") -> None:
        self.alg = alg
        self.classes = tuple(classes)
        self.fixed = fixed_classes(classes, "plain")
        self.mode = mode

    def start(self) -> int:
        return 0

    def plan(self, state: int, t: int) -> Plan[Any, Any]:
        pubs = [c.eps / c.w if c.eps > 0 else F(0) for c in self.fixed]
        if self.mode == "float":
            return Plan(False, True, tuple(0.0 for _ in pubs), tuple(float(p) for p in pubs))
        if self.mode == "short":
            return Plan(False, True, (), tuple(pubs))
        if self.mode == "crash" and t == 2:
            raise ZeroDivisionError("division by zero")
        return Plan(False, True, tuple(F(0) for _ in pubs), tuple(pubs))

    def step(self, state: int, t: int, plan: Any, published: Any) -> int:
        return state + 1


def _plain(mode: str = "") -> Any:
    def factory(alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> _Plain:
        return _Plain(alg, classes, mode)

    return factory


plain_sound = AllocatorSpec(
    "plain", "fixed", "per-class", "uniform, plain", _plain(), symbolic=False
)
float_budgets = AllocatorSpec("floaty", "fixed", "per-class", "float budgets", _plain("float"))
short_plan = AllocatorSpec("short", "fixed", "per-class", "no dissimilarity tuple", _plain("short"))
crashes = AllocatorSpec("crashes", "fixed", "per-class", "raises at slot 2", _plain("crash"))


class _Cheater:
    """eps / w on exact rationals, eps / (2 w) on anything else: a proof would be about other
    code than the one that runs."""

    name = "cheater"
    variant = "sound"

    def __init__(self, alg: Any, classes: Sequence[ClassReq[Any]]) -> None:
        self.alg = alg
        self.classes = tuple(classes)
        self.fixed = fixed_classes(classes, "cheater")

    def start(self) -> int:
        return 0

    def plan(self, state: int, t: int) -> Plan[Any, Any]:
        k = 1 if isinstance(self.alg, ExactAlgebra) else 2
        pubs = tuple(self.alg.scale(c.eps, F(1, k * c.w)) for c in self.fixed)
        zero = self.alg.const(0)
        return Plan(self.alg.truth(False), self.alg.truth(True), (zero,) * len(pubs), pubs)

    def step(self, state: int, t: int, plan: Any, published: Any) -> int:
        return state + 1


cheater = AllocatorSpec(
    "cheater", "fixed", "per-class", "different on Z3", lambda alg, cs, _v: _Cheater(alg, cs)
)


def _builtin(name: str) -> Any:
    def factory(alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        return make_kernel(name, alg, classes, variant)

    return factory


# No scale invariance claimed: the proof keeps every budget symbolic.
pbd_unnormalized = AllocatorSpec("pbd-none", "fixed", "none", "pbd", _builtin("pbd"))
dpbd_unnormalized = AllocatorSpec("dpbd-none", "dynamic", "none", "dpbd", _builtin("dpbd"))


@dataclass(frozen=True)
class AsClass:
    """A target given as a class: the gate instantiates it without arguments."""

    name: str = "as-class"
    requirement: str = "fixed"
    scaling: str = "per-class"
    symbolic: bool = True
    divides: bool = False
    variants: tuple[str, ...] = ("sound",)

    def kernel(self, alg: Any, classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        return make_kernel("pbd", alg, classes, "sound")


def as_function() -> AllocatorSpec:
    """A target given as a factory function returning the allocator."""
    return AllocatorSpec("as-function", "fixed", "global", "bd", _builtin("bd"))


def raises_on_call() -> AllocatorSpec:
    raise RuntimeError("no configuration found")


not_an_allocator = 42
weird_requirement = AllocatorSpec("weird", "sometimes", "per-class", "", _builtin("pbd"))
weird_scaling = AllocatorSpec("weird", "fixed", "linear", "", _builtin("pbd"))
no_sound_variant = AllocatorSpec(
    "fast", "fixed", "per-class", "", _builtin("pbd"), variants=("fast",)
)
