"""The click group every wevent command hangs from: one error format for every usage error
(click's own included), a did-you-mean for commands and renamed flags, and the safety nets that
keep a user's mistake from ever ending in a traceback."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import click

from wevent._extras import missing_extra
from wevent.accounting.inputs import check_limits
from wevent.cli._common import (
    EXIT_INPUT,
    EXIT_VERIFIER,
    did_you_mean,
    error_line,
    record_invocation,
)
from wevent.errors import InputError, LimitError

__all__ = ["RENAMED", "WeventGroup"]

# Flags whose names changed, and the options that replaced them (one meaning per flag across
# commands); a command is pointed at the replacement it has.
RENAMED = {
    "--horizon": ("--until", "--unroll"),
    "--d": ("--domain",),
    "--dprime": ("--domain",),
    "--s": ("--sparsity",),
    "--search-horizon": ("--search-unroll",),
}


def _replacement(command: click.Command | None, flag: str) -> str | None:
    if command is None:
        return None
    for param in command.params:
        for new in RENAMED.get(flag, ()):
            if new in getattr(param, "opts", ()):
                metavar = param.make_metavar(click.Context(command)) if param.metavar else ""
                return f"{new} {metavar}".strip()
    return None


def _usage_error(exc: click.UsageError) -> str:
    ctx = exc.ctx
    path = ctx.command_path if ctx is not None else "wevent"
    message = exc.format_message().strip().rstrip(".")
    if isinstance(exc, click.NoSuchOption):
        new = _replacement(ctx.command if ctx is not None else None, exc.option_name)
        if new is not None:
            message = f"no option {exc.option_name}: it is now {new}"
    help_path = path if ctx is not None and ctx.command is not None else "wevent"
    return error_line(f"{message} (see '{help_path} --help')", path)


class WeventGroup(click.Group):
    """A group whose unknown subcommand gets a suggestion (``unknown_hint(name)`` may give a
    better one) and whose standalone `main` prints every error as one line."""

    def __init__(
        self, *args: Any, unknown_hint: Callable[[str], str | None] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.unknown_hint = unknown_hint

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if (
            name
            and not ctx.resilient_parsing  # shell completion asks quietly
            and not name.startswith("-")
            and self.get_command(ctx, name) is None
        ):
            hint = self.unknown_hint(name) if self.unknown_hint is not None else None
            if hint is None:
                hint = f"no command {name!r}" + did_you_mean(name, self.list_commands(ctx))
            raise click.UsageError(hint, ctx)
        return super().resolve_command(ctx, args)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        # Exact sums can have many digits; printing them must not hit the int-to-str limit.
        sys.set_int_max_str_digits(0)
        argv = list(args) if args is not None else sys.argv[1:]
        record_invocation(argv)
        try:
            check_limits()  # an invalid WEVENT_MAX_* value: one line naming it, before anything
        except LimitError as exc:
            command = next((a for a in argv if not a.startswith("-")), "")
            click.echo(error_line(str(exc), f"wevent {command}".strip()), err=True)
            sys.exit(EXIT_INPUT)
        try:
            code = self._main(argv, prog_name, complete_var, **extra)
        except Exception:  # a bug in wevent: its traceback, and never a verdict's exit code
            traceback.print_exc()
            click.echo(
                error_line(
                    "internal error (a bug in wevent, never a verdict; the traceback above "
                    "shows where)",
                    "wevent",
                ),
                err=True,
            )
            sys.exit(EXIT_VERIFIER)
        sys.exit(code if isinstance(code, int) else 0)

    def _main(
        self, argv: list[str], prog_name: str | None, complete_var: str | None, **extra: Any
    ) -> Any:
        """Run the command; every expected error becomes its one line and exit code here."""
        try:
            return super().main(argv, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # a bare group: its help
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            click.echo(_usage_error(exc), err=True)
            sys.exit(EXIT_INPUT)
        except click.ClickException as exc:  # e.g. a FileError of click's own types
            click.echo(error_line(exc.format_message(), "wevent"), err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo(error_line("interrupted", "wevent"), err=True)
            sys.exit(130)
        except InputError as exc:  # a safety net: commands catch their own
            click.echo(error_line(str(exc), "wevent"), err=True)
            sys.exit(EXIT_INPUT)
        except ModuleNotFoundError as exc:  # an optional dependency: name the extra, one line
            command = next((a for a in argv if not a.startswith("-")), "")
            hint = missing_extra(exc, command)
            if hint is None:
                raise
            click.echo(error_line(hint, f"wevent {command}".strip()), err=True)
            sys.exit(EXIT_INPUT)
