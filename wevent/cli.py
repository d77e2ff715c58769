"""The ``wevent`` command line.

Exit codes: 0 success / compliant, 1 a violation was found, 2 a usage or input error (always one
line on stderr, never a traceback).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import click

from accounting.budget import MAX_SLOT, BudgetError, approx, format_exact
from accounting.formats import read_ledger, read_requirements
from accounting.population import Population
from verifier.check import check
from verifier.verdict import Verdict

__all__ = ["main"]

EXIT_OK, EXIT_VIOLATION, EXIT_INPUT = 0, 1, 2


def _fail(message: str) -> None:
    click.echo(f"wevent: error: {message}", err=True)
    sys.exit(EXIT_INPUT)


def _stage_printer(enabled: bool) -> Callable[[str], None] | None:
    """A progress line for each stage of a long check (stderr, only when it is a terminal)."""
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bar = tqdm(total=5, desc="checking", unit="stage", leave=False, file=sys.stderr)

    def say(stage: str) -> None:
        bar.set_postfix_str(stage)
        bar.update(1)

    return say


def _reading_bar(path: Path) -> Callable[[int, int], None] | None:
    """A progress bar for reading a large text ledger (stderr, only when it is a terminal)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bar = tqdm(desc=f"reading {path.name}", unit="line", leave=False, file=sys.stderr)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    return update


def _percent(x: Fraction | None) -> str:
    """Utilization as a percentage: exact where it terminates, else to 0.1% (display only)."""
    if x is None:
        return "unbounded (positive spend against a zero bound)"
    text = format_exact(x * 100)
    shown = text if "/" not in text and len(text) <= 8 else f"~{approx(x * 100, 4)}"
    note = " (at the bound)" if x == 1 else " (over the bound)" if x > 1 else ""
    return f"{shown}%{note}"


def render_verdict(verdict: Verdict, population: Population, *, limit: int = 50) -> str:
    """Human-readable verdict: violations exactly, then utilization per class."""
    lines = []
    status = "COMPLIANT" if verdict.ok else "NOT COMPLIANT"
    lines.append(
        f"verdict: {status} ({len(verdict.violations)} window violation(s), "
        f"{len(verdict.evidence_failures)} evidence failure(s); "
        f"{verdict.per_user_charges} per-user charges, horizon {verdict.horizon} slots)"
    )
    for i, v in enumerate(verdict.violations[:limit], start=1):
        lines.append(f"  {i}. {v.describe()}")
    if len(verdict.violations) > limit:
        lines.append(f"  ... {len(verdict.violations) - limit} more (use --json for all)")
    for e in verdict.evidence_failures[:limit]:
        lines.append(f"  evidence: {e.describe()}")
    if verdict.class_utilization:
        lines.append("utilization (largest window sum / bound):")
        names = {c.name: c for c in population.classes}
        for name, util in sorted(verdict.class_utilization.items()):
            cls = names.get(name)
            label = f"{name} [{cls.requirement.describe()}, {cls.count} user(s)]" if cls else name
            lines.append(f"  {label}: {_percent(util)}")
    return "\n".join(lines)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="wevent", prog_name="wevent")
def cli() -> None:
    """wevent: exact privacy accounting for w-event differential privacy on infinite streams.

    Every spend of a stream mechanism is a charge in a ledger (slot, user or group, exact
    epsilon, evidence). wevent checks ledgers against each user's requirement: a fixed window
    (w, eps), dynamic backward/forward windows declared per slot, or a whole-stream budget.
    All arithmetic is exact: 0.1 + 0.1 + 0.1 == 0.3, and an excess of 1e-18 is an excess.

    \b
    Start with:  wevent demo
    Then:        wevent check LEDGER --requirements REQ.csv
    File formats are documented in the README.
    """


@cli.command("check")
@click.argument("ledger", type=click.Path(path_type=Path))
@click.option(
    "--requirements",
    "-r",
    "requirements",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Requirements CSV: 'user,w,epsilon' (w=inf for whole-stream) or "
    "'user,slot,w_back,eps_back,w_fwd,eps_fwd' (dynamic). Repeat to combine files.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON (exact 'a/b').")
@click.option(
    "--horizon",
    type=click.IntRange(min=1, max=MAX_SLOT),
    default=None,
    help="Check windows up to this slot (default: the ledger's last slot).",
)
def check_cmd(
    ledger: Path, requirements: Sequence[Path], as_json: bool, horizon: int | None
) -> None:
    """Check LEDGER (.jsonl, .csv or .parquet) against the requirements.

    Every evidence record must certify a cost no larger than its charge, and every window of
    every user must stay within its bound. Exit 0 when all hold, 1 on any violation, 2 on bad
    input. Violations are printed exactly: the user, the window, the per-slot spends, the sum,
    the bound and the excess.

    \b
    Example:
      wevent check ledger.jsonl -r requirements.csv
      wevent check ledger.parquet -r fixed.csv -r dynamic.csv --json
    """
    try:
        population = read_requirements(requirements)
        book = read_ledger(ledger, progress=_reading_bar(ledger))
    except BudgetError as exc:
        _fail(str(exc))
    verdict = check(book, population, horizon=horizon, progress=_stage_printer(not as_json))
    if as_json:
        click.echo(json.dumps(verdict.to_json(), indent=2))
    else:
        click.echo(f"{ledger}: {len(book)} charges, {len(population)} users with requirements")
        click.echo(render_verdict(verdict, population))
    sys.exit(EXIT_OK if verdict.ok else EXIT_VIOLATION)


EXIT_UNKNOWN = 3


@cli.command("prove")
@click.argument("target", type=click.Choice(["grr", "oue", "pue", "sm", "all"]))
@click.option(
    "--d",
    "d",
    type=click.IntRange(min=2, max=64),
    default=5,
    show_default=True,
    help="Domain size for the fixed-d and exhaustive checks (OUE enumerates 2^d "
    "outputs for d <= 8).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def prove_cmd(target: str, d: int, as_json: bool) -> None:
    """Prove a primitive's privacy theorem: Z3 over real parameters, plus exhaustive exact
    checks of the parameters the code actually uses.

    \b
    grr  likelihood ratios of generalized randomized response <= e^eps
    oue  likelihood ratios of optimized unary encoding <= e^eps
    pue  re-perturbation (000 Eq. 8) is valid iff eps_L <= eps_H and yields eps_L reports
    sm   the sampling mechanism's evidence certifies each class's budget
    all  every one of them

    Exit 0 when proved, 1 on a counterexample (printed), 3 when undecided (never reported as
    proved).
    """
    from proofs.primitives import PRIMITIVES, prove_primitive

    names = sorted(PRIMITIVES) if target == "all" else [target]
    results = [prove_primitive(name, d) for name in names]
    if as_json:
        click.echo(json.dumps([r.to_json() for r in results], indent=2))
    else:
        for r in results:
            click.echo(f"{r.name}: {r.status.upper()} ({r.seconds:.2f} s)")
            click.echo(f"  theorem: {r.statement}")
            for c in r.checks:
                click.echo(f"  - {c}")
            if r.counterexample:
                click.echo(f"  counterexample: {r.counterexample}")
    statuses = {r.status for r in results}
    if "counterexample" in statuses:
        sys.exit(EXIT_VIOLATION)
    sys.exit(EXIT_UNKNOWN if "unknown" in statuses else EXIT_OK)


@cli.command("demo")
def demo_cmd() -> None:
    """Run the main job on the bundled examples and print the verdicts.

    Two ledgers are checked against the same requirements (fixed, whole-stream and dynamic
    users from paper 001 Table 3): one compliant, including exact ties such as three spends of
    0.1 under a bound of 0.3, and one with fixed, dynamic backward, dynamic forward and
    whole-stream violations and a charge whose evidence does not cover it.
    """
    from wevent.demo import run_demo

    sys.exit(EXIT_OK if run_demo(click.echo) else EXIT_VIOLATION)


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point."""
    # Exact sums can have many digits; printing them must not hit Python's int-to-str limit.
    sys.set_int_max_str_digits(0)
    try:
        return cli.main(args=list(argv) if argv is not None else None, prog_name="wevent")
    except BudgetError as exc:  # a safety net: commands catch their own
        _fail(str(exc))
    return None
