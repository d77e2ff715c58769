"""`wevent check`: one ledger against the requirements, in memory."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from wevent.cli._common import (
    EXIT_OK,
    EXIT_VIOLATION,
    MAX_SLOT,
    StageBar,
    check_writable,
    emit_json,
    fail,
    json_option,
    reading_bar,
    requirements_option,
)
from wevent.errors import InputError

__all__ = ["INTEGRITY_TEXT", "check_cmd", "until_option"]

# What `wevent check` says of a ledger's integrity, which it never verifies: a durable ledger
# (`is_durable_ledger`: a chain, a checkpoint or a run header) is "not checked", a plain one
# has nothing to check.
INTEGRITY_TEXT = {
    "not checked": "not checked (wevent check reads the content only; run wevent audit to "
    "verify the chain)",
    "unprotected": "unprotected (a plain ledger: no chain, nothing can show that it was changed)",
}


def until_option(f: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--until",
        type=click.IntRange(min=1, max=MAX_SLOT),
        default=None,
        metavar="SLOT",
        help="Check every window up to this slot [default: the ledger's last slot]; it must "
        "not be before the ledger's last slot.",
    )(f)


@click.command("check", short_help="Check one ledger against the requirements.")
@click.argument("ledger", type=click.Path(path_type=Path))
@requirements_option
@until_option
@json_option("The verdict")
def check_cmd(
    ledger: Path, requirements: Sequence[Path], until: int | None, json_out: str | None
) -> None:
    """Check LEDGER (.jsonl, .csv or .parquet) against the requirements.

    Every evidence record must certify a cost no larger than its charge, and every window of
    every user must stay within its bound. The verdict is COMPLIANT (exit 0) or NOT COMPLIANT
    (exit 1); bad input exits 2. Violations are printed exactly: the user, the window, the
    per-slot spends, the sum, the bound and the excess.

    What it does not check: the ledger's integrity. It reads the content as it is now; a
    durable ledger's chain and checkpoint are not verified (wevent audit does), and a plain
    ledger has none. A charge without evidence is checked as charged: its cost is not certified.

    \b
    Examples:
      wevent check ledger.jsonl -r requirements.csv
      wevent check ledger.parquet -r fixed.csv -r dynamic.csv --json
    """
    from wevent.accounting.durable import is_durable_ledger
    from wevent.accounting.formats import read_ledger, read_requirements
    from wevent.verifier.check import check
    from wevent.verifier.verdict import render_verdict

    check_writable(json_out)
    try:
        population = read_requirements(requirements)
        book = read_ledger(ledger, progress=reading_bar(ledger))
        with StageBar(json_out != "-", 5, "checking") as bar:
            verdict = check(book, population, horizon=until, progress=bar.say)
    except InputError as exc:
        fail(str(exc))
    integrity = "not checked" if is_durable_ledger(ledger) else "unprotected"
    if emit_json(json_out, {**verdict.to_json(), "integrity": integrity}):
        click.echo(f"{ledger}: {len(book)} charges, {len(population)} users with requirements")
        click.echo(f"integrity: {INTEGRITY_TEXT[integrity]}")
        click.echo(render_verdict(verdict, population))
    sys.exit(EXIT_OK if verdict.ok else EXIT_VIOLATION)
