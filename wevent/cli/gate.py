"""`wevent gate`: prove an allocator or refute it with a minimal counterexample, for CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from wevent.cli._common import (
    DEFAULT_W_MAX,
    check_writable,
    emit_json,
    fail,
    json_option,
    known_allocator,
    scope_options,
    variant_options,
)
from wevent.cli._help import TARGET_HELP

__all__ = ["gate_cmd"]


@click.command("gate", short_help="Prove or refute an allocator, for CI.", epilog=TARGET_HELP)
@click.argument("allocator", metavar="ALLOCATOR")
@scope_options
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Inputs the adversarial search tries per requirement kind (fixed, dynamic) at the "
    "proof's scope, before the wide search.",
)
@click.option(
    "--search-runs",
    type=click.IntRange(min=0),
    default=None,
    help="Runs of the wide search per requirement kind, past the proof's scope (a count: the "
    "same seed, the same verdict) [default: 600; 100 for dynamic allocators, 400 population ones].",
)
@click.option(
    "--search-w-max",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Largest window the wide search draws.",
)
@click.option(
    "--search-classes",
    type=click.IntRange(min=1),
    default=6,
    show_default=True,
    help="Most requirement classes in a population the wide search draws.",
)
@click.option(
    "--search-unroll",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Longest run of the wide search, in slots [default: max(256, 4 * --search-w-max)].",
)
@variant_options
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the search, the conformance inputs and the synthetic streams (the same seed "
    "gives the same verdict).",
)
@click.option(
    "--require-proof",
    is_flag=True,
    help="Exit 3 unless the Z3 proof holds (by default a clean search PASSES without one).",
)
@click.option(
    "--junit",
    "junit_out",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Write a JUnit XML report (one test case per check).",
)
@json_option("The report")
@click.option(
    "--save-requirements",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write a counterexample's requirements CSV here (the replay command names it).",
)
def gate_cmd(
    allocator: str,
    w_max: int | None,
    classes: int,
    unroll: int | None,
    timeout: int,
    examples: int,
    search_runs: int | None,
    search_w_max: int,
    search_classes: int,
    search_unroll: int | None,
    variant: str,
    arithmetic: str,
    seed: int,
    require_proof: bool,
    junit_out: Path | None,
    json_out: str | None,
    save_requirements: Path | None,
) -> None:
    """Gate an allocator for CI: prove it, or refute it with a minimal counterexample.

    ALLOCATOR is a built-in budget allocator (uniform ... dpba, lbu ... plbu), a built-in
    population allocator (lpu ... plba-ops), or your own (below).

    \b
    Checks, in order (each is a test case of the JUnit report):
      conformance  the protocol; the kernel is deterministic; it scales as it claims
                   (per-class / global); on Z3 terms it computes what it computes exactly
      proof        Z3 window theorem over the scope (bounded) when the kernel runs on Z3
                   terms; --arithmetic float: exhaustive search on float counts instead
      search       hypothesis: fixed (and dynamic) populations and publish/skip sequences
                   through the runtime guard, then far wider (--search-*: w <= 64, 6
                   classes, 256 slots), shrunk to a minimal counterexample
      end-to-end   the central data path on synthetic streams, guard in the loop, ledger
                   batch-checked

    \b
    Population allocators (users drawn from a pool, recycled after R slots):
      conformance  determinism (same pool seed, same users; counts independent of who was
                   drawn); Z3 terms = exact values
      proof        the OPS split theorem (OPS allocators), that no draw exceeds the pool
                   and that every drawn user's windows hold
      search       populations with user counts and decisions through the pool and the guard
      end-to-end   wevent run's data path on synthetic streams, ledger batch-checked

    The verdict is PROVED (with its scope), PASSED (searched, not proved: a clean search is
    not a proof), UNCHECKED (neither proved nor searched: nothing decided) or REFUTED, printed
    with a requirements CSV and a decision string; the printed `wevent trace ALLOCATOR -r FILE
    --decisions ...` replays it through the guard (write FILE with --save-requirements). A
    third-party kernel is proved with every budget symbolic: the scaling it declares
    is sampled by the conformance stage, never taken as proved.

    \b
    Examples:
      wevent gate pba
      wevent gate ba --variant published --arithmetic float --save-requirements cex.csv
      wevent gate mypkg.alloc:allocator --junit gate.xml --json gate.json

    Exit 0 proved or passed, 1 refuted, 2 unusable target (it does not load, breaks the
    protocol, or its kernel raises; one line on stderr), 3 unchecked (nothing proved, searched
    or run end to end), and with --require-proof whenever no proof holds, 4 verifier error (a
    proof's counterexample that does not replay: a bug in wevent, not a verdict).
    """
    from wevent.gate import GateOptions, run_gate

    options = GateOptions(
        w_max=w_max or DEFAULT_W_MAX,
        classes=classes,
        horizon=unroll or 0,
        examples=examples,
        variant=variant,
        arithmetic=arithmetic,
        seed=seed,
        timeout=timeout,
        require_proof=require_proof,
        search_runs=-1 if search_runs is None else search_runs,
        search_w_max=search_w_max,
        search_classes=search_classes,
        search_horizon=search_unroll or 0,
    )
    check_writable(junit_out, json_out, save_requirements)
    known_allocator(allocator, "gate")
    try:
        report = run_gate(allocator, options, save_requirements=save_requirements)
    except OSError as exc:
        fail(f"{exc.filename or save_requirements}: cannot write ({exc.strerror or exc})")
    try:
        if junit_out is not None:
            junit_out.write_text(report.junit_xml(), encoding="utf-8")
    except OSError as exc:
        fail(f"{junit_out}: cannot write ({exc.strerror or exc})")
    text = emit_json(json_out, report.to_json())
    reason = report.unusable_reason
    if reason is not None:
        fail(
            "unusable target: "
            + (reason if reason.startswith(allocator) else f"{allocator}: {reason}")
        )
    if text:
        for line in report.describe():
            click.echo(line)
    sys.exit(report.exit_code)
