"""`wevent run`: a mechanism end to end on a stream, the guard in the loop."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from wevent.cli._common import (
    EXIT_OK,
    EXIT_VIOLATION,
    Choice,
    check_writable,
    fail,
    known_allocator,
    requirements_option,
    variant_options,
)
from wevent.cli._help import ALLOCATOR_HELP, EXSUB_RUN_HELP, TARGET_HELP
from wevent.errors import InputError

__all__ = ["run_cmd"]


def _exsub_options(f: Any) -> Any:
    f = click.option(
        "--weights",
        type=Choice(["uniform", "range", "calibrated", "sqrt-calibrated"]),
        default="uniform",
        show_default=True,
        help="exsub: hierarchy level portions (004 Section IV: uniform for mean queries, range or "
        "calibrated (Section VI-D) for range queries).",
    )(f)
    f = click.option(
        "--fanout",
        type=click.IntRange(min=2, max=64),
        default=2,
        show_default=True,
        help="exsub: fan-out r of the residue hierarchy.",
    )(f)
    return click.option(
        "--sparsity",
        type=click.IntRange(min=1, max=10**6),
        default=4,
        show_default=True,
        help="exsub: s, the public bound on every user's number of changes (a user with more is "
        "refused before the run).",
    )(f)


@click.command(
    "run",
    short_help="Run an allocator on a stream, the guard in the loop.",
    epilog=ALLOCATOR_HELP + TARGET_HELP + EXSUB_RUN_HELP,
)
@click.argument("allocator", metavar="ALLOCATOR")
@requirements_option
@click.option(
    "--stream",
    "stream_spec",
    required=True,
    help="lns, sin or log (the synthetic binary streams of 001 Section 6.1) or a CSV file "
    "'user,slot,value' with integer values 0..d-1. exsub: 'sparse' (s changes per user) or a CSV.",
)
@click.option(
    "--slots",
    type=click.IntRange(min=1, max=10**7),
    default=None,
    help="Number of slots to run (required for synthetic streams; default for a CSV: all).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of data and noise (a non-negative integer).",
)
@click.option(
    "--domain",
    type=click.IntRange(min=1),
    default=None,
    help="Number of values d: of a CSV stream (default: largest value + 1), or of a "
    "synthetic stream, which is categorical when d > 2 (default 2, binary).",
)
@click.option(
    "--oracle",
    type=Choice(["grr", "oue"]),
    default=None,
    help="Frequency oracle of lbu, lsp, lbd, lba, lpu, lpd, lpa (default grr); the "
    "personalized local allocators always use the personalized oracle (GRR per budget).",
)
@click.option(
    "--post",
    type=Choice(["none", "clip", "simplex"]),
    default="none",
    show_default=True,
    help="Local allocators: post-process each release: 'clip' sets negative frequencies to 0, "
    "'simplex' projects onto the probability simplex (the closest frequency vector). Costs no "
    "privacy: it only transforms reports already charged.",
)
@click.option(
    "--project-test",
    is_flag=True,
    help="Local allocators, with --post: post-process the publication test's estimate too "
    "(WEventPLDPCode's rule). The test never publishes once the dissimilarity round's "
    "variance reaches 2/d per value (a projected estimate is that close to any frequency "
    "vector): check the summary's publication count.",
)
@click.option(
    "--pool",
    is_flag=True,
    help="Local allocators: at a publishing slot, pool the slot's dissimilarity reports into the "
    "release (inverse-variance weights). Costs no privacy: those reports are already charged. "
    "No effect on lbu, lsp, lpu, plbu (no dissimilarity round).",
)
@click.option(
    "--first-publication",
    "first",
    is_flag=True,
    help="Local allocators: slot 1 publishes whenever its budget allows, whatever the "
    "dissimilarity test says. Costs no privacy: a sound kernel's proof covers every publish/skip "
    "sequence. No effect on lbu, lsp, lpu, plbu (they publish on a schedule).",
)
@click.option(
    "--threshold",
    type=Choice(["sqrt", "kellaris"]),
    default=None,
    help="Central allocators on 001's data path: publish iff the dissimilarity exceeds "
    "sqrt(error) (001, the default) or 1/eps (Kellaris et al.). Decides publish or skip only.",
)
@click.option(
    "--ledger",
    "ledger_out",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="The ledger: FILE.jsonl (chained JSONL) or DIR.wledger (Parquet segments) are written "
    "ahead, every charge committed before its noise is drawn; .csv or .parquet are written at "
    "the end. An existing ledger is never overwritten (see --resume).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the write-ahead --ledger of a run that crashed: its torn tail is cut off "
    "(kept in a side file), the run replays from slot 1 with the same flags and seed, checked "
    "against the committed charges, and goes on from where the ledger ends.",
)
@click.option(
    "--releases",
    "releases_out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write the releases here (CSV slot,status,cell,release,truth).",
)
@variant_options
@_exsub_options
def run_cmd(
    allocator: str,
    requirements: Sequence[Path],
    stream_spec: str,
    slots: int | None,
    seed: int,
    domain: int | None,
    oracle: str | None,
    post: str,
    project_test: bool,
    pool: bool,
    first: bool,
    threshold: str | None,
    ledger_out: Path | None,
    releases_out: Path | None,
    resume: bool,
    variant: str,
    arithmetic: str,
    sparsity: int,
    fanout: int,
    weights: str,
) -> None:
    """Run ALLOCATOR end to end on a stream with the runtime guard in the loop.

    Every charge passes the guard before noise is drawn. The ledger and releases are written
    even when the guard stops the run: exit 0 means every slot ran and every charge was
    accepted, 1 that the guard REFUSED a charge (the run stops there), 2 bad input. The same
    seed gives the same releases and ledger.

    \b
    Examples:
      wevent run pba -r requirements.csv --stream sin --slots 1000 --ledger run.jsonl
      wevent audit run.jsonl -r requirements.csv --expect-head HEAD   (HEAD: printed by run)
      wevent run pba -r requirements.csv --stream sin --slots 1000 --ledger run.jsonl --resume
      wevent run mypkg.alloc:allocator -r requirements.csv --stream lns --slots 200
    """
    check_writable(releases_out)  # the ledger (a file, or a .wledger directory): checked by run
    known_allocator(allocator, "run")
    if allocator == "exsub":
        local_options = post != "none" or project_test or pool or first or threshold is not None
        if oracle is not None or variant != "sound" or arithmetic != "exact" or resume:
            fail("exsub takes no --oracle, --variant, --arithmetic or --resume")
        if local_options:
            fail(
                "exsub takes no --post, --project-test, --pool, --first-publication or --threshold"
            )
        if ledger_out is not None and ledger_out.exists():
            fail(f"{ledger_out} exists: a ledger is never overwritten (choose another name)")
        _run_exsub(
            requirements,
            stream_spec,
            slots,
            seed,
            domain,
            sparsity,
            fanout,
            weights,
            ledger_out,
            releases_out,
        )
    from wevent.accounting.formats import read_requirements
    from wevent.experiments.running import open_stream, run_mechanism
    from wevent.mechanisms.allocators import MECHANISMS

    chosen: dict[str, Any] = {}
    builtin = allocator in MECHANISMS
    if not builtin:
        from wevent.mechanisms.allocators.registry import is_population, resolve, resolve_population

        try:
            if is_population(allocator):
                chosen["population_allocator"] = resolve_population(allocator)
            else:
                resolve(allocator)  # loads it: a bad target is one line before the stream opens
        except InputError as exc:
            fail(str(exc))
    bar: Any = None
    try:
        population = read_requirements(requirements)
        stream = open_stream(stream_spec, population, slots, seed, domain)
        total = slots if slots is not None else stream.slots
        if sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=total, desc=allocator, unit="slot", leave=False, file=sys.stderr)
        summary = run_mechanism(
            allocator,
            population,
            stream,
            slots=total,
            seed=seed,
            variant=variant,
            arithmetic=arithmetic,
            ledger_path=ledger_out,
            releases_path=releases_out,
            progress=None if bar is None else bar.update,
            oracle=oracle,
            release=_release_options(post, project_test, pool, first),
            threshold=threshold,
            resume=resume,
            identity={"stream": _stream_identity(stream_spec)},
            **chosen,
        )
    except InputError as exc:
        fail(str(exc))
    except OSError as exc:  # the ledger or releases could not be written: the run stopped
        _output_failed(
            exc, "; the guard refused every later spend, --resume continues a write-ahead ledger"
        )
    except Exception as exc:  # a third-party kernel's own failure: one line, no traceback
        if builtin:
            raise
        fail(f"{allocator}: the allocator raised {type(exc).__name__}: {exc}")
    finally:
        if bar is not None:
            bar.close()
    if summary.recovered is not None:
        for line in summary.recovered.describe():
            click.echo(line)
    for line in summary.describe():
        click.echo(line)
    _report_outputs(ledger_out, releases_out, summary.durable, summary.committed, summary.head)
    sys.exit(EXIT_OK if summary.ok else EXIT_VIOLATION)


def _release_options(post: str, project_test: bool, pool: bool, first: bool) -> Any:
    from wevent.mechanisms.local import ReleaseOptions

    if project_test and post == "none":
        fail("--project-test post-processes the test's estimate: give --post clip or simplex")
    return ReleaseOptions(post=post, pool=pool, first=first, project_test=project_test)


def _output_failed(exc: OSError, then: str) -> NoReturn:
    """One line for an output the run could not write (the disk, not the user's input)."""
    where = f": {exc.filename}" if exc.filename else ""
    fail(f"cannot write the run's output ({exc.strerror or exc}{where}){then}")


def _report_outputs(
    ledger_out: Path | None, releases_out: Path | None, durable: str, committed: int, head: str
) -> None:
    """Where the ledger and releases went; for a write-ahead ledger its head, to keep."""
    if durable:
        click.echo(
            f"  ledger {ledger_out}: {durable}, written ahead, {committed} "
            f"committed {'segment(s)' if durable == 'segments' else 'record(s)'}"
        )
        click.echo(f"  head {head}")
        click.echo(
            "  (keep the head where the ledger's writer cannot change it; "
            f"wevent audit {ledger_out} -r ... --expect-head HEAD checks the ledger against it)"
        )
    elif ledger_out is not None:
        click.echo(f"  ledger written to {ledger_out} (at the end of the run; not write-ahead)")
    if releases_out is not None:
        click.echo(f"  releases written to {releases_out}")


def _stream_identity(spec: str) -> str:
    """What a resumed run must match of ``--stream``: a synthetic kind by name, a CSV file by
    the SHA-256 of its bytes (a changed value is another stream)."""
    from wevent.accounting.durable import file_sha256

    path = Path(spec)
    return f"csv sha256:{file_sha256(path)}" if path.is_file() else spec


def _run_exsub(
    requirements: Sequence[Path],
    stream_spec: str,
    slots: int | None,
    seed: int,
    domain: int | None,
    sparsity: int,
    fanout: int,
    weights: str,
    ledger_out: Path | None,
    releases_out: Path | None,
) -> None:
    """`wevent run exsub`: exits 0 when every charge was accepted, 1 when the guard refused one."""
    from wevent.accounting.formats import read_requirements
    from wevent.exsub_run import run_exsub

    try:
        population = read_requirements(requirements)
        summary = run_exsub(
            population,
            stream_spec,
            slots=slots,
            seed=seed,
            d=domain,
            sparsity=sparsity,
            fanout=fanout,
            weights=weights,
            ledger_path=ledger_out,
            releases_path=releases_out,
        )
    except InputError as exc:
        fail(str(exc))
    except OSError as exc:
        _output_failed(exc, "")
    for line in summary.describe():
        click.echo(line)
    _report_outputs(ledger_out, releases_out, summary.durable, summary.committed, summary.head)
    sys.exit(EXIT_OK if summary.ok else EXIT_VIOLATION)
