"""What every command shares: the exit-code table, the one-line error, the flags that mean the
same thing everywhere (``-r``, ``--json [FILE|-]``, ``--variant``, ``--arithmetic``, the proof
scope) and the name suggestions."""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

__all__ = [
    "AUDIT_EXIT",
    "DEFAULT_CLASSES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_W_MAX",
    "EXIT_INPUT",
    "EXIT_INTEGRITY",
    "EXIT_OK",
    "EXIT_TAIL",
    "EXIT_UNKNOWN",
    "EXIT_VERIFIER",
    "EXIT_VIOLATION",
    "MAX_SLOT",
    "STATUS_EXIT",
    "VARIANT_CHOICES",
    "Choice",
    "StageBar",
    "check_writable",
    "did_you_mean",
    "emit_json",
    "error_line",
    "fail",
    "invocation",
    "json_option",
    "known_allocator",
    "reading_bar",
    "record_invocation",
    "requirements_option",
    "scope_options",
    "variant_options",
]

# One exit-code table for every command (docs/cli.md).
EXIT_OK = 0  # compliant, proved, passed, every charge accepted
EXIT_VIOLATION = 1  # not compliant, refuted, refused by the guard
EXIT_INPUT = 2  # a usage or input error (one line on stderr, never a traceback)
EXIT_UNKNOWN = 3  # nothing decided: prove timed out; gate: nothing passed, or --require-proof unmet
EXIT_VERIFIER = 4  # a bug in wevent: the verifier contradicted itself, or crashed (never a verdict)
# A ledger's integrity failed: committed content changed, a durable ledger without its chain or
# checkpoint, a head or signature that does not match what the auditor holds.
EXIT_INTEGRITY = 5
# A crashed writer's uncommitted tail (a torn line, records past the last checkpoint, a segment
# without its manifest line), the committed content compliant: `wevent ledger repair` cuts it.
# Its own code because its remedy is mechanical, where an integrity failure needs an
# investigation and a violation is a privacy failure.
EXIT_TAIL = 6

# A proof outcome's status -> its exit code (prove and gate).
STATUS_EXIT = {
    "proved": EXIT_OK,
    "checked": EXIT_OK,  # a primitive checked at a finite set of exact cases (not a proof)
    "counterexample": EXIT_VIOLATION,
    "unknown": EXIT_UNKNOWN,
}
# An audit's status (`wevent.verifier.audit.STATUSES`) -> its exit code.
AUDIT_EXIT = {
    "compliant": EXIT_OK,
    "not-compliant": EXIT_VIOLATION,
    "integrity-failure": EXIT_INTEGRITY,
    "uncommitted-tail": EXIT_TAIL,
}

_INVOCATION: list[str] = []


def record_invocation(argv: Sequence[str]) -> None:
    """Remember the arguments the command line was started with (for reports)."""
    _INVOCATION[:] = list(argv)


def invocation() -> tuple[str, ...]:
    """The command line as started: ``("wevent", *arguments)``."""
    return ("wevent", *_INVOCATION)


# The proof scope's defaults, the same in `prove allocator`, `prove population` and `gate`.
DEFAULT_W_MAX = 6
INDUCTION_DEFAULT_W_MAX = 4  # wevent.proofs.dynamic.INDUCTION_DEFAULT_W_MAX (tested equal)
DEFAULT_CLASSES = 2
DEFAULT_TIMEOUT = 60


def _command_path() -> str:
    ctx = click.get_current_context(silent=True)
    return ctx.command_path if ctx is not None else "wevent"


def error_line(message: str, command: str | None = None) -> str:
    """The one error format: ``wevent CMD: error: MESSAGE`` on one line."""
    text = " ".join(str(message).split()) or "error"
    return f"{command or _command_path()}: error: {text}"


def fail(message: str) -> NoReturn:
    """Report a usage or input error of the running command in one line and exit 2."""
    click.echo(error_line(message), err=True)
    sys.exit(EXIT_INPUT)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or the empty string."""
    close = difflib.get_close_matches(name, list(choices), n=2, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


class Choice(click.Choice):  # type: ignore[type-arg]
    """`click.Choice` whose refusal also suggests the closest choice."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            hint = did_you_mean(str(value), [str(c) for c in self.choices])
            if not hint:
                raise
            raise click.BadParameter(exc.message.rstrip(".") + hint, ctx, param) from None


class JsonTarget(click.ParamType):  # type: ignore[type-arg]
    """``-`` (stdout) or a path ending in ``.json``. The suffix rule keeps ``--json`` from
    swallowing the positional argument that follows it (a ledger is never a .json file)."""

    name = "json"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value)
        if text == "-" or text.lower().endswith(".json"):
            return text
        self.fail(
            f"{text!r} does not end in .json; write --json FILE.json to save the report or "
            "--json alone (or --json -) to print it, after the command's other arguments",
            param,
            ctx,
        )


def json_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--json [FILE|-]``: alone or ``-``, print ``what`` as JSON on stdout instead of the
    text; with FILE.json, write it there and print the text as usual."""
    return click.option(
        "--json",
        "json_out",
        type=JsonTarget(),
        is_flag=False,
        flag_value="-",
        default=None,
        metavar="[FILE|-]",
        help=f"{what} as JSON: on stdout instead of the text (--json or --json -), or into "
        "FILE.json beside the text.",
    )


def check_writable(*paths: Path | str | None) -> None:
    """Refuse, before any long work, an output that cannot be written: its directory does not
    exist or may not be written to, or it is a directory or a file that may not be written."""
    for path in paths:
        if path is None or str(path) == "-":
            continue
        p = Path(path)
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.is_dir():
            fail(f"{p}: directory {parent} does not exist")
        if p.is_dir():
            fail(f"{p}: is a directory")
        # (os.access asks with the real ids, which are the effective ones for a command line;
        # a read-only file system refuses even root)
        if not os.access(parent, os.W_OK | os.X_OK):
            fail(f"{p}: cannot write in directory {parent} (permission denied or read-only)")
        if p.exists() and not os.access(p, os.W_OK):
            fail(f"{p}: cannot write (permission denied or read-only)")


def emit_json(target: str | None, data: Any) -> bool:
    """Write ``data`` where ``--json`` asked; True when the text should still be printed."""
    if target is None:
        return True
    text = json.dumps(data, indent=2) + "\n"
    if target == "-":
        click.echo(text, nl=False)
        return False
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"{target}: cannot write ({exc.strerror or exc})")
    return True


def requirements_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--requirements",
        "-r",
        "requirements",
        multiple=True,
        required=True,
        metavar="FILE",
        type=click.Path(path_type=Path),
        help="Requirements CSV: fixed 'user,w,epsilon' (w=inf for a whole-stream budget) or "
        "dynamic 'user,slot,w_back,eps_back,w_fwd,eps_fwd'. Repeat to combine files.",
    )(f)


# The budget kernels' variants (`wevent.mechanisms.allocators.kernel`: VARIANTS, then DU_CODE,
# which only bd, ba, pbd, pba, dpbd, dpba and the OPS population allocators (plpd+, plpa+,
# plbd-ops, plba-ops) accept, and STREAMDP_CODE, which dsat accepts);
# written out so the command line starts without importing the kernels (tests/test_peers.py
# holds the two equal).
VARIANT_CHOICES = ("sound", "published", "du-code", "streamdp-code")

# The largest slot number (`wevent.accounting.budget.MAX_SLOT`), written out so that a command's
# options are built without importing the accounting package (tests/test_cli_lazy.py holds the
# two equal).
MAX_SLOT = 2**62 - 1


def variant_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--arithmetic",
        type=Choice(["exact", "float"]),
        default="exact",
        show_default=True,
        help="How absorption counts (t_N = eps_l/share - 1) are computed: exactly, or in double "
        "precision as the published code does (budgets stay exact either way).",
    )(f)
    return click.option(
        "--variant",
        type=Choice(VARIANT_CHOICES),
        default="sound",
        show_default=True,
        help="'published' runs the papers' pseudo-code as printed (unsound for dpbd/dpba after "
        "a requirement change); see docs/deviations.md. 'du-code' (bd, ba, pbd, pba, dpbd, "
        "dpba, plpd+, plpa+, plbd-ops, plba-ops) runs the rules of Du et al.'s public code, "
        "'streamdp-code' (dsat) those of streamdp-benchmark; see docs/peers.md.",
    )(f)


def scope_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The proof scope, with the same defaults wherever a proof runs."""
    f = click.option(
        "--timeout",
        type=click.IntRange(min=1),
        default=DEFAULT_TIMEOUT,
        show_default=True,
        help="Seconds Z3 may spend on one case; a timeout leaves the proof UNKNOWN.",
    )(f)
    f = click.option(
        "--unroll",
        type=click.IntRange(min=1, max=60),
        default=None,
        metavar="N",
        help="Slots a bounded proof unrolls (and the gate's first search runs) "
        "[default: 3 x --w-max].",
    )(f)
    f = click.option(
        "--classes",
        type=click.IntRange(min=1, max=4),
        default=DEFAULT_CLASSES,
        show_default=True,
        help="Populations of 1..K requirement classes (a float proof uses one).",
    )(f)
    return click.option(
        "--w-max",
        type=click.IntRange(min=1, max=12),
        default=None,
        metavar="W",
        help=f"Every window size 1..W [default: {DEFAULT_W_MAX}; for the dynamic kernels "
        f"dpbd and dpba {INDUCTION_DEFAULT_W_MAX}, proved by induction for every horizon "
        "(their sound and published variants; du-code has bounded proofs only), as "
        "their shapes grow as W^4 per class: prove allocator takes a larger W, the gate's proof "
        "stays at that bound and its search goes on to W].",
    )(f)


class StageBar:
    """A progress bar over named stages on stderr (drawn only when stderr is a terminal); use it
    as a context manager so it is closed before the results are printed."""

    def __init__(self, enabled: bool, total: int, desc: str) -> None:
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="stage", leave=False, file=sys.stderr)

    @property
    def say(self) -> Callable[[str], None] | None:
        return None if self._bar is None else self._advance

    def _advance(self, stage: str) -> None:
        self._bar.set_postfix_str(stage)
        self._bar.update(1)

    def __enter__(self) -> StageBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()


def reading_bar(path: Path) -> Callable[[int, int], None] | None:
    """A progress bar for reading a large text ledger (stderr, only when it is a terminal)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    jsonl = path.suffix.lower() != ".csv"  # read_ledger's progress: bytes of JSONL, CSV lines
    bar = tqdm(
        desc=f"reading {path.name}",
        unit="B" if jsonl else "line",
        unit_scale=jsonl,
        leave=False,
        file=sys.stderr,
    )

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    return update


# What DuckDB takes: a number with a unit (K, KB, KiB, ... T, TB, TiB; bytes only from a
# megabyte on, so 1B is no cap) or a percentage of the machine's memory.
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)[ ]?((?:[KMGT](?:i?B)?)|%)", re.IGNORECASE)


def memory_limit_option(value: str) -> str:
    """``--memory-limit``: a positive size with its unit (``512MB``, ``4GB``, ``1.5GiB``),
    checked here rather than passed to DuckDB (``-1GB`` used to run with no limit)."""
    found = _SIZE.fullmatch(value.strip())
    if (
        found is None
        or float(found.group(1)) <= 0
        or (found.group(2) == "%" and float(found.group(1)) > 100)
    ):
        raise click.BadParameter(
            f"{value!r} is not a positive size; give a number and a unit, e.g. 512MB, 4GB or 80%",
            param_hint="'--memory-limit'",
        )
    return value.strip()


def first_line(exc: BaseException) -> str:
    """An exception's first message line, or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def known_allocator(name: str, command: str) -> None:
    """Refuse, with a did-you-mean over every name ``command`` takes, a plain name that is
    neither a built-in allocator nor an installed entry point (``module:attribute`` targets are
    loaded, and judged, by the registry)."""
    if ":" in name:
        return
    from wevent.mechanisms.allocators import MECHANISMS
    from wevent.mechanisms.allocators.registry import available_entry_points

    if name == "exsub" and command != "run":
        fail(
            f"exsub has no budget kernel to {command}: 'wevent run exsub' runs it, "
            "'wevent prove exsub' proves its samplers"
        )
    known = [*MECHANISMS, *(["exsub"] if command == "run" else [])]
    installed = sorted(available_entry_points())
    if name in known or name in installed:
        return
    fail(
        f"unknown allocator {name!r}{did_you_mean(name, [*known, *installed])}: a built-in "
        f"({', '.join(known)}), an installed entry point of the group wevent.allocators"
        + (f" ({', '.join(installed)})" if installed else " (none installed)")
        + ", or module:attribute"
    )
