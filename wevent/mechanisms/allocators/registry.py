"""Allocators by name: the built-in budget kernels, entry points and ``module:attribute`` targets.

`resolve(target)` accepts

* a built-in name (``uniform`` ... ``dpba`` and the local budget-division ``lbu`` ... ``plbu``);
* ``package.module:attribute`` (dotted attributes allowed): an `Allocator`, or a callable with
  no arguments returning one (a class or a factory function). The current directory is put on
  ``sys.path`` first, as ``python -m`` does, so a module next to the caller is found;
* the name of an entry point in the group ``wevent.allocators`` (`ALLOCATOR_GROUP`), loaded and
  treated like a ``module:attribute`` target.

Every failure is an `AllocatorError` (an `InputError`, so the command line reports it in one
line with exit 2). The population-division allocators have population kernels, not budget
kernels, and are refused here with a message saying so (`wevent.gate.population` gates them by
name).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from wevent.errors import AllocatorError, PopulationAllocatorError
from wevent.mechanisms.allocators import CENTRAL, LOCAL_BUDGET, POPULATION, make_kernel
from wevent.mechanisms.allocators.algebra import Algebra
from wevent.mechanisms.allocators.api import (
    ALLOCATOR_GROUP,
    REQUIREMENT_KINDS,
    SCALINGS,
    Allocator,
    AllocatorSpec,
    KernelFactory,
    PopulationAllocator,
    PopulationSpec,
)
from wevent.mechanisms.allocators.kernel import VARIANTS, ClassReq, DynamicClass, Kernel
from wevent.mechanisms.allocators.local import population_setup
from wevent.mechanisms.allocators.population import PopulationConfig, PopulationKernel

__all__ = [
    "BUILTIN",
    "POPULATION_BUILTIN",
    "AllocatorError",
    "PopulationAllocatorError",
    "available_entry_points",
    "is_population",
    "kernel_for",
    "resolve",
    "resolve_population",
]


def _builtin_factory(name: str) -> KernelFactory:
    def factory(alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str) -> Any:
        return make_kernel(name, alg, classes, variant)

    return factory


_BUILTIN_TABLE = (
    ("uniform", "fixed", "global", "eps/w at every slot (Kellaris et al.)"),
    ("sample", "fixed", "global", "all of eps every w slots (Kellaris et al.)"),
    ("bd", "fixed", "global", "budget distribution (002 Algorithm 1)"),
    ("ba", "fixed", "global", "budget absorption (002 Algorithm 2)"),
    ("pbd", "fixed", "per-class", "personalized distribution (001 Algorithm 4)"),
    ("pba", "fixed", "per-class", "personalized absorption (001 Algorithm 5)"),
    ("dpbd", "dynamic", "per-class", "dynamic distribution (001 Algorithm 6)"),
    ("dpba", "dynamic", "per-class", "dynamic absorption (001 Algorithm 7)"),
    # The local budget-division allocators spend through the same fixed kernels (002 Section 5,
    # 001 Section 6.2); only their data path differs, so the window theorem is the same.
    ("lbu", "fixed", "global", "LDP budget uniform: eps/w every slot (002 Section 5.2.1)"),
    ("lsp", "fixed", "global", "LDP sampling: all of eps every w slots (002 Section 5.2.2)"),
    ("lbd", "fixed", "global", "LDP budget distribution (002 Algorithm 1)"),
    ("lba", "fixed", "global", "LDP budget absorption (002 Algorithm 2)"),
    ("plbu", "fixed", "per-class", "personalized LDP uniform: eps_i/w_i (001 Section 6.2)"),
)

BUILTIN: dict[str, AllocatorSpec] = {
    name: AllocatorSpec(
        name,
        req,
        scaling,
        summary,
        _builtin_factory(name),
        divides=name == "dpba",
        variants=VARIANTS,
    )
    for name, req, scaling, summary in _BUILTIN_TABLE
}
assert set(BUILTIN) == set(CENTRAL) | set(LOCAL_BUDGET)


def _population_builtin(name: str) -> PopulationSpec:
    def setup(classes: Sequence[ClassReq[Any]], counts: Sequence[int], d: int, variant: str) -> Any:
        return population_setup(name, classes, counts, d, variant)

    def kernel(alg: Algebra[Any, Any], config: PopulationConfig, variant: str) -> Any:
        return PopulationKernel(name, alg, config, variant)

    return PopulationSpec(name, f"population division ({name})", setup, kernel, VARIANTS)


POPULATION_BUILTIN: dict[str, PopulationSpec] = {
    name: _population_builtin(name) for name in POPULATION
}


def available_entry_points() -> dict[str, EntryPoint]:
    """The installed entry points of the ``wevent.allocators`` group, by name."""
    return {ep.name: ep for ep in entry_points(group=ALLOCATOR_GROUP)}


def _describe_exc(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _load_attribute(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise AllocatorError(f"{target!r}: expected module:attribute, e.g. mypkg.alloc:allocator")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise AllocatorError(
            f"{target}: cannot import {module_name} ({_describe_exc(exc)})"
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AllocatorError(f"{target}: {module_name} has no attribute {attr!r}") from None
    return obj


def _validated(target: str, obj: Any) -> Allocator:
    """``obj`` as an `Allocator`: called first if it is a class or a factory function."""
    if isinstance(obj, type) or (not hasattr(obj, "kernel") and callable(obj)):
        try:
            obj = obj()
        except Exception as exc:
            raise AllocatorError(
                f"{target}: calling it to get the allocator failed ({_describe_exc(exc)})"
            ) from exc
    missing = [
        a
        for a in ("name", "requirement", "scaling", "symbolic", "divides", "variants", "kernel")
        if not hasattr(obj, a)
    ]
    if missing:
        raise AllocatorError(
            f"{target}: {type(obj).__name__} does not implement the Allocator protocol "
            f"(missing {', '.join(missing)}; see wevent.mechanisms.allocators.api)"
        )
    if not callable(obj.kernel):
        raise AllocatorError(f"{target}: its 'kernel' is not callable")
    if not isinstance(obj.name, str) or not obj.name:
        raise AllocatorError(f"{target}: 'name' must be a non-empty string, got {obj.name!r}")
    if obj.requirement not in REQUIREMENT_KINDS:
        raise AllocatorError(
            f"{target}: 'requirement' must be one of {', '.join(REQUIREMENT_KINDS)}, "
            f"got {obj.requirement!r}"
        )
    if obj.scaling not in SCALINGS:
        raise AllocatorError(
            f"{target}: 'scaling' must be one of {', '.join(SCALINGS)}, got {obj.scaling!r}"
        )
    for flag in ("symbolic", "divides"):
        if not isinstance(getattr(obj, flag), bool):
            raise AllocatorError(f"{target}: {flag!r} must be True or False")
    variants = obj.variants
    if (
        not isinstance(variants, tuple)
        or not variants
        or not all(isinstance(v, str) and v for v in variants)
    ):
        raise AllocatorError(f"{target}: 'variants' must be a non-empty tuple of names")
    if "sound" not in variants:
        raise AllocatorError(f"{target}: 'variants' must include 'sound' (the default)")
    out: Allocator = obj
    return out


@cache
def resolve(target: str) -> Allocator:
    """The allocator ``target`` names (module docstring); cached per target."""
    if target in BUILTIN:
        return BUILTIN[target]
    if target in POPULATION:
        raise AllocatorError(
            f"{target} allocates users, not budgets: it has a population kernel "
            "(`wevent gate`, `wevent prove` and `wevent trace` take it by name; the allocator "
            "API covers budget kernels)"
        )
    if ":" in target:
        return _validated(target, _load_attribute(target))
    eps = available_entry_points()
    if target in eps:
        try:
            obj = eps[target].load()
        except Exception as exc:
            raise AllocatorError(
                f"{target}: the entry point {eps[target].value} does not load "
                f"({_describe_exc(exc)})"
            ) from exc
        return _validated(target, obj)
    plugins = f"; installed entry points: {', '.join(sorted(eps))}" if eps else ""
    raise AllocatorError(
        f"unknown allocator {target!r} (built-in: {', '.join(BUILTIN)}; or module:attribute, "
        f"or an entry point of the {ALLOCATOR_GROUP} group{plugins})"
    )


def _population_object(target: str, obj: Any) -> PopulationAllocator | None:
    """``obj`` (called first if it is a class or a factory) as a `PopulationAllocator`, or None
    when it is not one (it may be a budget `Allocator`)."""
    if isinstance(obj, type) or (not hasattr(obj, "kernel") and callable(obj)):
        try:
            obj = obj()
        except Exception:
            return None
    if hasattr(obj, "requirement") or not all(
        callable(getattr(obj, a, None)) for a in ("setup", "kernel")
    ):
        return None
    if not isinstance(getattr(obj, "name", None), str) or "sound" not in getattr(
        obj, "variants", ()
    ):
        raise PopulationAllocatorError(
            f"{target}: a population allocator needs a 'name' and 'variants' including 'sound' "
            "(see wevent.mechanisms.allocators.api.PopulationAllocator)"
        )
    out: PopulationAllocator = obj
    return out


@cache
def resolve_population(target: str) -> PopulationAllocator | None:
    """The population allocator ``target`` names (a built-in, ``module:attribute`` or an entry
    point whose object has ``setup`` and ``kernel`` and no ``requirement``), or None when
    ``target`` names something else or nothing (`resolve` then says what is wrong)."""
    if target in POPULATION_BUILTIN:
        return POPULATION_BUILTIN[target]
    if target in BUILTIN:
        return None
    try:
        if ":" in target:
            return _population_object(target, _load_attribute(target))
        eps = available_entry_points()
        if target in eps:
            return _population_object(target, eps[target].load())
    except AllocatorError:
        raise
    except Exception:
        return None
    return None


def is_population(target: str) -> bool:
    """``target`` names a population allocator (built-in or third-party); False on errors."""
    try:
        return resolve_population(target) is not None
    except AllocatorError:
        return False


def kernel_for(
    target: str, alg: Algebra[Any, Any], classes: Sequence[ClassReq[Any]], variant: str = "sound"
) -> Kernel[Any, Any, Any]:
    """The kernel of ``target`` over ``classes``; a variant the allocator does not have and
    dynamic requirements for a fixed-requirement allocator are refused."""
    if target in BUILTIN:  # the built-ins give their own, more specific, messages
        return make_kernel(target, alg, classes, variant)
    alloc = resolve(target)
    if variant not in alloc.variants:
        raise AllocatorError(
            f"{target}: no variant {variant!r} (it has: {', '.join(alloc.variants)})"
        )
    if alloc.requirement == "fixed" and any(isinstance(c, DynamicClass) for c in classes):
        raise AllocatorError(
            f"{target} serves fixed (w, eps) requirements only; its requirement kind is 'fixed'"
        )
    return alloc.kernel(alg, classes, variant)
