"""`wevent audit`: deployed ledgers, integrity first, on the numpy, DuckDB or Spark engine."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from wevent._extras import missing_extra, require
from wevent.cli._common import (
    AUDIT_EXIT,
    Choice,
    StageBar,
    check_writable,
    emit_json,
    fail,
    first_line,
    invocation,
    json_option,
    memory_limit_option,
    requirements_option,
)
from wevent.cli.check import until_option
from wevent.errors import InputError

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
    "expect_head",
    multiple=True,
    metavar="HEX",
    help="The chain head recorded where the ledger's writer cannot change it: the full 64 hex "
    "digits or a prefix of at least 16. One per ledger, in order. A mismatch, or a ledger "
    "without a chain, is an integrity failure.",
)
@click.option(
    "--public-key",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="The Ed25519 public key (PEM, or 64 hex digits) whose signature every durable "
    "ledger's checkpoint must carry (the sign extra).",
)
@click.option(
    "--memory-limit",
    default="4GB",
    show_default=True,
    callback=lambda ctx, param, value: memory_limit_option(value),
    help="DuckDB memory cap, a positive size such as 512MB or 4GB (it spills to a temporary "
    "directory beyond).",
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
    expect_head: Sequence[str],
    public_key: Path | None,
    memory_limit: str,
    json_out: str | None,
    html_out: Path | None,
    md_out: Path | None,
) -> None:
    """Audit deployed LEDGERS (files read in order as one ledger) against the requirements.

    Each ledger's integrity first: a durable ledger (chained .jsonl with its .head checkpoint,
    or a .wledger segment directory) must verify against its checkpoint and against every
    anchor given (--expect-head, --public-key); a plain ledger is UNPROTECTED (a warning).
    Then the chosen engine checks every window and evidence record of the verified content
    exactly. Exit 0 COMPLIANT; 1 NOT COMPLIANT (a violation); 5 INTEGRITY FAILURE (tampered,
    a head or signature that does not match, a durable ledger without its chain or
    checkpoint); 6 UNCOMMITTED TAIL (a crashed writer's tail, not audited: 'wevent ledger
    repair' cuts it); 2 bad input.

    \b
    Examples:
      wevent audit run.jsonl -r requirements.csv --html report.html
      wevent audit run.wledger -r req.csv --expect-head 3f2a9c41d07e5b68 --public-key key.pub
      wevent audit big.parquet -r req.csv --engine duckdb --json audit.json
    """
    from wevent.accounting.formats import read_requirements
    from wevent.verifier.audit import run_audit
    from wevent.verifier.report import (
        render_html,
        render_markdown,
        render_text,
        report_json,
        status_line,
    )
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
                expect_head=list(expect_head) if expect_head else None,
                public_key=public_key,
                requirements=requirements,
                command=invocation(),
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
        arrow = isinstance(exc, ModuleNotFoundError) and (exc.name or "").startswith("pyarrow")
        if missing is not None and engine == "spark" and arrow:  # [spark] brings pyarrow too
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
        click.echo(render_text(result, closest=5))
        for written in (json_out, md_out, html_out):
            if written is not None:
                click.echo(f"report written to {written}")
        click.echo(f"audit: {status_line(result)}")
    sys.exit(AUDIT_EXIT[result.status])
