"""`wevent trace`: an allocator's budget kernel against a publish/skip sequence, charged to the
guard."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from wevent.cli._common import (
    EXIT_OK,
    EXIT_VIOLATION,
    check_writable,
    emit_json,
    fail,
    json_option,
    known_allocator,
    requirements_option,
    variant_options,
)
from wevent.cli._help import ALLOCATOR_HELP, TARGET_HELP
from wevent.errors import InputError

__all__ = ["trace_cmd"]


@click.command(
    "trace",
    short_help="Trace a budget kernel on publish/skip decisions.",
    epilog=ALLOCATOR_HELP + TARGET_HELP,
)
@click.argument("allocator", metavar="ALLOCATOR")
@requirements_option
@click.option(
    "--decisions",
    required=True,
    help="Publish (1) / skip (0) per slot, e.g. 1,0,1,1. A decision on a nullified slot is "
    "ignored. The trace runs one slot per decision.",
)
@variant_options
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Population allocators: seed of the pool's draws (which users report when).",
)
@click.option(
    "--domain",
    type=click.IntRange(min=2),
    default=2,
    show_default=True,
    help="Population allocators with OPS: the domain size its error formula uses.",
)
@json_option("The trace")
def trace_cmd(
    allocator: str,
    requirements: Sequence[Path],
    decisions: str,
    variant: str,
    arithmetic: str,
    seed: int,
    domain: int,
    json_out: str | None,
) -> None:
    """Run only the budget kernel of ALLOCATOR against a publish/skip sequence.

    Prints, per slot, whether it was published, skipped or nullified and every user's
    dissimilarity and publication budget as exact rationals. Every trace is charged to the
    runtime guard: exit 0 when the guard accepted every charge; a trace that breaks a window
    ends with the guard's refusal, REFUSED (exit 1), and so does a negative budget; bad input
    exits 2.

    Population allocators (lpu ... plba-ops) draw their users from a pool seeded with --seed;
    the trace lists, per slot, how many users were drawn for each part and the budget each
    drawn user paid. A draw the pool cannot serve also ends the trace with exit 1.

    `wevent prove` and `wevent gate` print their counterexamples as this command.

    \b
    Example (001 Example 7):
      wevent trace dpba -r table3.csv --decisions 1,0,1,0,1 --variant published
    """
    from wevent.accounting.budget import format_exact
    from wevent.accounting.formats import read_requirements
    from wevent.mechanisms.allocators import MECHANISMS, POPULATION
    from wevent.mechanisms.allocators.registry import is_population, resolve
    from wevent.verifier.tracing import parse_decisions, trace_population, trace_with_guard

    check_writable(json_out)
    known_allocator(allocator, "trace")
    builtin = allocator in MECHANISMS
    try:
        population_target = allocator in POPULATION or is_population(allocator)
        if not population_target:
            resolve(allocator)
    except InputError as exc:
        fail(str(exc))
    if population_target:
        if arithmetic != "exact":
            fail("--arithmetic float only applies to the central absorption allocators")
        try:
            population = read_requirements(requirements)
            pop_result = trace_population(
                allocator,
                population,
                parse_decisions(decisions),
                variant=variant,
                seed=seed,
                d=domain,
            )
        except InputError as exc:
            fail(str(exc))
        except Exception as exc:  # a third-party allocator's own failure: one line
            if builtin:
                raise
            fail(f"{allocator}: the population allocator raised {type(exc).__name__}: {exc}")
        if emit_json(json_out, pop_result.to_json()):
            _print_population_trace(pop_result)
        sys.exit(EXIT_OK if pop_result.ok else EXIT_VIOLATION)
    try:
        population = read_requirements(requirements)
        result = trace_with_guard(
            allocator,
            population,
            parse_decisions(decisions),
            variant=variant,
            arithmetic=arithmetic,
        )
    except InputError as exc:
        fail(str(exc))
    except Exception as exc:  # a third-party kernel's own failure: one line, no traceback
        if builtin:
            raise
        fail(f"{allocator}: the kernel raised {type(exc).__name__}: {exc}")
    if emit_json(json_out, result.to_json()):
        click.echo(
            f"{allocator} ({variant}, {arithmetic} arithmetic): {len(population)} users in "
            f"{len(population.classes)} requirement class(es)"
        )
        for c in population.classes:
            users = ", ".join(c.members[:5]) + (" ..." if c.count > 5 else "")
            click.echo(f"  {c.name}: {c.requirement.describe()} ({users})")
        for s in result.slots:
            parts = [
                f"{c.members[0] if c.count == 1 else c.name} "
                f"dis={format_exact(s.dissimilarity[c.index])} "
                f"pub={format_exact(s.publication[c.index])}"
                for c in population.classes
            ]
            click.echo(f"slot {s.slot}: {s.status:9}  " + "; ".join(parts))
        if result.refusal is not None:
            click.echo(f"REFUSED by the guard: {result.refusal}")
        elif result.negative is not None:
            click.echo(f"INVALID: {result.negative}")
        else:
            click.echo(f"guard: all {len(result.slots)} slots accepted")
    sys.exit(EXIT_OK if result.ok else EXIT_VIOLATION)


def _print_population_trace(result: Any) -> None:
    from wevent.accounting.budget import format_exact

    setup, population = result.setup, result.population
    cfg = setup.config
    click.echo(
        f"{result.mechanism} ({result.variant}): {cfg.n} users in {len(population.classes)} "
        f"requirement class(es); {cfg.unit} users per slot, recycled after {cfg.recycle} slots"
    )
    for c in population.classes:
        k = setup.splits[c.index]
        click.echo(
            f"  {c.name}: {c.requirement.describe()}; each report spends "
            f"{format_exact(setup.budgets[c.index])}" + (f" (eps / {k})" if k > 1 else "")
        )
    for s in result.slots:
        drawn = ", ".join(f"{part} {len(users)}" for part, users in s.sampled.items()) or "none"
        click.echo(f"slot {s.slot}: {s.status:9}  pool {s.available:>6}  drawn: {drawn}")
    if result.refusal is not None:
        click.echo(f"REFUSED by the guard: {result.refusal}")
    elif result.shortage is not None:
        click.echo(f"POOL SHORT: {result.shortage}")
    else:
        click.echo(f"guard: all {len(result.slots)} slots accepted")
