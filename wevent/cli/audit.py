"""`wevent audit`: deployed ledgers, integrity first, on the numpy, DuckDB or Spark engine."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from wevent._extras import missing_extra, require
from wevent.accounting.formats import read_requirements
from wevent.cli._common import (
    EXIT_OK,
    EXIT_VIOLATION,
    Choice,
    StageBar,
    check_writable,
    emit_json,
    fail,
    first_line,
    json_option,
    requirements_option,
)
from wevent.cli.check import until_option
from wevent.errors import InputError
from wevent.verifier.verdict import percent_text, render_verdict

__all__ = ["audit_cmd"]


@click.command("audit", short_help="Audit deployed ledgers: integrity, then every window; reports.")
@click.argument("ledgers", nargs=-1, required=True, type=click.Path(path_type=Path))
@requirements_option
@click.option(
    "--engine",
    type=Choice(["numpy", "duckdb", "spark"]),
    default="numpy",
    show_default=True,
    help="numpy: in memory; duckdb: SQL over Parquet, out of core; spark: the same SQL on Spark.",
)
@until_option
@click.option(
    "--expect-head",
    default=None,
    metavar="HEX",
    help="The chain head recorded elsewhere: anchors a single durable ledger.",
)
@click.option(
    "--memory-limit",
    default="4GB",
    show_default=True,
    help="DuckDB memory cap (it spills to a temporary directory beyond).",
)
@json_option("The report")
@click.option("--html", "html_out", type=click.Path(path_type=Path), help="Write an HTML report.")
@click.option(
    "--markdown", "md_out", type=click.Path(path_type=Path), help="Write a Markdown report."
)
def audit_cmd(
    ledgers: Sequence[Path],
    requirements: Sequence[Path],
    engine: str,
    until: int | None,
    expect_head: str | None,
    memory_limit: str,
    json_out: str | None,
    html_out: Path | None,
    md_out: Path | None,
) -> None:
    """Audit deployed LEDGERS (files read in order as one ledger) against the requirements.

    A durable ledger (chained .jsonl, or a .wledger segment directory) is first verified:
    edited, deleted or reordered committed records and torn tails are reported. Then the
    chosen engine checks every window and evidence record exactly. The verdict is COMPLIANT
    (exit 0: intact and within every bound) or NOT COMPLIANT (exit 1: a violation or an
    integrity failure); bad input exits 2.

    \b
    Examples:
      wevent audit run.jsonl -r requirements.csv --html report.html
      wevent audit big.parquet -r req.csv --engine duckdb --json audit.json
    """
    from wevent.verifier.audit import run_audit
    from wevent.verifier.report import closest_users, render_html, render_markdown, report_json
    from wevent.verifier.sql import EngineError

    check_writable(json_out, html_out, md_out)
    try:
        population = read_requirements(requirements)
        with StageBar(json_out != "-", 12, f"auditing ({engine})") as bar:
            result = run_audit(
                ledgers,
                population,
                engine=engine,
                horizon=until,
                expect_head=expect_head,
                memory_limit=memory_limit,
                progress=bar.say,
            )
    except (InputError, EngineError) as exc:
        fail(str(exc))
    except MemoryError as exc:  # the numpy engine holds the ledger in memory
        hint = " (--engine duckdb audits out of core)" if engine == "numpy" else ""
        fail(f"{engine} engine ran out of memory: {exc or 'MemoryError'}{hint}")
    except Exception as exc:  # engine failures (e.g. a Spark or DuckDB error): one line
        missing = missing_extra(exc, "audit")
        if missing is not None and engine == "spark":  # [spark] brings pyarrow too
            missing = require("audit --engine spark", "spark")
        if missing is not None:
            fail(missing)
        fail(f"{engine} engine failed: {first_line(exc)}")
    text = emit_json(json_out, report_json(result))
    renderers: list[tuple[Path | None, Callable[[], str]]] = [
        (md_out, lambda: render_markdown(result)),
        (html_out, lambda: render_html(result)),
    ]
    for out, render in renderers:
        if out is not None:
            try:
                out.write_text(render(), encoding="utf-8")
            except OSError as exc:
                fail(f"{out}: cannot write ({exc.strerror})")
    if text:
        for found in result.integrity:
            click.echo(f"integrity: {'ok' if found.ok else 'FAILED'}: {found.summary()}")
            for p in found.problems:
                click.echo(f"  {p.describe()}")
            for t in found.torn:
                click.echo(f"  {t.describe()}")
        click.echo(render_verdict(result.verdict, population))
        close = closest_users(result, 5)
        if close:
            click.echo(
                "closest to their bounds: "
                + ", ".join(f"{u} ({percent_text(x)})" for u, _, x in close)
            )
        for written in (json_out, md_out, html_out):
            if written is not None:
                click.echo(f"report written to {written}")
        click.echo(f"audit: {'COMPLIANT' if result.ok else 'NOT COMPLIANT'}")
    sys.exit(EXIT_OK if result.ok else EXIT_VIOLATION)
