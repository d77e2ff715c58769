"""The one allocator registry: every allocator by name, and the lookups the rest of wevent uses.

The built-ins come from their family modules, each of which declares its own specs (name,
requirement kind, scaling, a one-line summary citing the paper, the kernel factory):

* `wevent.mechanisms.allocators.fixed.SPECS`: central, fixed windows (uniform ... pba);
* `wevent.mechanisms.allocators.dynamic.SPECS`: central, dynamic requirements (dpbd, dpba);
* `wevent.mechanisms.streamdp.*.SPECS`: central, streamdp-benchmark's further mechanisms (fast-w ...);
* `wevent.mechanisms.allocators.local.SPECS`: local budget division (lbu ... plbu);
* `wevent.mechanisms.allocators.population.SPECS`: local population division (lpu ... plba-ops).

This module collects them (`FAMILIES`) into `BUILTIN` (budget kernels) and `POPULATION_BUILTIN`
(population kernels), derives the name tuples (`CENTRAL`, `LOCAL_BUDGET`, `POPULATION`, `LOCAL`,
`MECHANISMS`, `ORACLE_CHOICE`) and the model of each name (`model_of`), and turns a name into a
kernel (`make_kernel`, `builtin_spec`): a dictionary lookup, never a chain of tests on names. A new
built-in allocator is one more spec in its family's ``SPECS`` (or a new family module listed in
`FAMILIES`).

`resolve(target)` accepts

* a built-in name (``uniform`` ... ``dpba`` and the local budget-division ``lbu`` ... ``plbu``);
* ``package.module:attribute`` (dotted attributes allowed): an `Allocator`, or a callable with
  no arguments returning one (a class or a factory function). The current directory is put on
  ``sys.path`` first, as ``python -m`` does, so a module next to the caller is found;
* the name of an entry point in the group ``wevent.allocators`` (`ALLOCATOR_GROUP`), loaded and
  treated like a ``module:attribute`` target.

Every failure is an `AllocatorError` (an `InputError`, so the command line reports it in one line
with exit 2); an unknown name names the closest known ones (`suggestions`). The population-division
allocators have population kernels, not budget kernels, and are refused here with a message saying
so (`resolve_population` finds them; `wevent.gate.population` gates them by name).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Final, TypeVar

from wevent.accounting.names import close_names, did_you_mean
from wevent.mechanisms.allocators import dynamic, fixed, local, population
from wevent.mechanisms.allocators.algebra import Algebra
from wevent.mechanisms.allocators.api import (
    ALLOCATOR_GROUP,
    REQUIREMENT_KINDS,
    SCALINGS,
    Allocator,
    AllocatorError,
    AllocatorSpec,
    PopulationAllocator,
    PopulationAllocatorError,
    PopulationSpec,
)
from wevent.mechanisms.allocators.kernel import ClassReq, DynamicClass, Kernel
from wevent.mechanisms.datapath import DataPath
from wevent.mechanisms.streamdp import adapub, dsat, fast, pegasus, rescuedp, shift

__all__ = [
    "BUILTIN",
    "CENTRAL",
    "FAMILIES",
    "LOCAL",
    "LOCAL_BUDGET",
    "MECHANISMS",
    "MODELS",
    "ORACLE_CHOICE",
    "POPULATION",
    "POPULATION_BUILTIN",
    "AllocatorError",
    "Family",
    "PopulationAllocatorError",
    "available_entry_points",
    "builtin_spec",
    "data_path_for",
    "data_path_of",
    "is_population",
    "kernel_for",
    "make_kernel",
    "model_of",
    "resolve",
    "resolve_population",
    "suggestions",
    "takes_dynamic",
]

V = TypeVar("V")
B = TypeVar("B")

MODELS: Final = ("central", "local-budget", "population")


@dataclass(frozen=True)
class Family:
    """One family module's contribution: its specs, the model they run in (``central``: noise on
    the aggregate; ``local-budget``: every user reports every slot; ``population``: sampled users
    report), and which of its members take the one-oracle choice (``--oracle grr|oue``)."""

    module: str
    model: str
    specs: tuple[AllocatorSpec, ...] | tuple[PopulationSpec, ...]
    one_oracle: tuple[str, ...] = ()


# The families, in the order the command line lists their members.
FAMILIES: Final = (
    Family(fixed.__name__, "central", fixed.SPECS),
    Family(dynamic.__name__, "central", dynamic.SPECS),
    Family(shift.__name__, "central", shift.SPECS),
    Family(fast.__name__, "central", fast.SPECS),
    Family(rescuedp.__name__, "central", rescuedp.SPECS),
    Family(pegasus.__name__, "central", pegasus.SPECS),
    Family(dsat.__name__, "central", dsat.SPECS),
    Family(adapub.__name__, "central", adapub.SPECS),
    Family(local.__name__, "local-budget", local.SPECS, local.ONE_ORACLE),
    Family(population.__name__, "population", population.SPECS, population.ONE_ORACLE),
)


def _collect() -> tuple[dict[str, AllocatorSpec], dict[str, PopulationSpec], dict[str, str]]:
    budget: dict[str, AllocatorSpec] = {}
    pop: dict[str, PopulationSpec] = {}
    models: dict[str, str] = {}
    for family in FAMILIES:
        for spec in family.specs:
            if spec.name in models:
                raise RuntimeError(f"{family.module}: allocator {spec.name!r} is declared twice")
            models[spec.name] = family.model
            if isinstance(spec, PopulationSpec):
                pop[spec.name] = spec
            else:
                budget[spec.name] = spec
    return budget, pop, models


_BUDGET, _POPULATION, _MODEL = _collect()
BUILTIN: dict[str, AllocatorSpec] = _BUDGET  # the budget kernels by name
POPULATION_BUILTIN: dict[str, PopulationSpec] = _POPULATION  # the population kernels by name

CENTRAL: Final = tuple(n for n, m in _MODEL.items() if m == "central")
LOCAL_BUDGET: Final = tuple(n for n, m in _MODEL.items() if m == "local-budget")
POPULATION: Final = tuple(n for n, m in _MODEL.items() if m == "population")
LOCAL: Final = LOCAL_BUDGET + POPULATION
MECHANISMS: Final = CENTRAL + LOCAL
ORACLE_CHOICE: Final = tuple(n for f in FAMILIES for n in f.one_oracle)


def model_of(name: str) -> str | None:
    """The model the built-in ``name`` runs in (one of `MODELS`), or None for any other name."""
    return _MODEL.get(name)


def takes_dynamic(name: str) -> bool:
    """Whether the built-in ``name`` serves dynamic requirements (its requirement kind is
    ``"dynamic"``: 001 Definition 10)."""
    spec = BUILTIN.get(name)
    return spec is not None and spec.requirement == "dynamic"


def suggestions(name: str) -> list[str]:
    """Built-in and installed entry-point allocator names close to ``name`` (best first), for a
    "did you mean" hint; empty when nothing is close."""
    return close_names(name, [*_MODEL, *sorted(available_entry_points())])


def _did_you_mean(name: str) -> str:
    return did_you_mean(suggestions(name))


def builtin_spec(name: str) -> AllocatorSpec:
    """The spec of the built-in budget allocator ``name``; an `AllocatorError` for a population
    allocator (it has a population kernel) or an unknown name (naming the closest ones)."""
    spec = BUILTIN.get(name)
    if spec is not None:
        return spec
    if name in POPULATION_BUILTIN:
        raise AllocatorError(f"{name} allocates users, not budgets: it has a population kernel")
    raise AllocatorError(
        f"unknown allocator {name!r} (expected one of {', '.join(MECHANISMS)}){_did_you_mean(name)}"
    )


def make_kernel(
    name: str, alg: Algebra[V, B], classes: Sequence[ClassReq[V]], variant: str = "sound"
) -> Kernel[V, B, Any]:
    """The budget kernel of the built-in allocator ``name`` over ``classes`` (in population class
    order): a central allocator or a local budget-division one (population-division allocators
    have population kernels: `POPULATION_BUILTIN`)."""
    return builtin_spec(name).kernel(alg, classes, variant)


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
        f"or an entry point of the {ALLOCATOR_GROUP} group{plugins}){_did_you_mean(target)}"
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
        return BUILTIN[target].kernel(alg, classes, variant)
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


def data_path_of(alloc: object, domain: int) -> DataPath | None:
    """The data path the allocator object ``alloc`` brings for a domain of ``domain`` cells
    (its ``data_path`` factory, `wevent.mechanisms.datapath`), or None for 001's PWSM path
    (every built-in but the benchmark mechanisms, and any allocator without the attribute)."""
    factory = getattr(alloc, "data_path", None)
    if factory is None:
        return None
    if not callable(factory):
        raise AllocatorError(
            f"{getattr(alloc, 'name', alloc)!r}: its data_path is not a factory of the domain size"
        )
    path: DataPath = factory(domain)
    return path


def data_path_for(target: str, domain: int) -> DataPath | None:
    """`data_path_of` the built-in or third-party allocator ``target``."""
    spec = BUILTIN.get(target)
    return data_path_of(spec if spec is not None else resolve(target), domain)
