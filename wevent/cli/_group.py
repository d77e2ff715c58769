"""The click group every wevent command hangs from: one error format for every usage error
(click's own included), a did-you-mean for commands and renamed flags, the safety nets that
keep a user's mistake from ever ending in a traceback, and commands loaded when named (a
command's module, and what it imports, loads only when that command runs or shows its help)."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from gettext import gettext
from importlib import import_module
from typing import Any

import click

from wevent._extras import missing_extra
from wevent.cli._common import (
    EXIT_INPUT,
    EXIT_VERIFIER,
    did_you_mean,
    error_line,
    record_invocation,
)
from wevent.errors import InputError, LimitError

__all__ = ["LIMIT_PREFIX", "RENAMED", "WeventGroup", "check_limits_at_start"]

# Every limit `wevent.accounting.inputs.check_limits` reads is an environment variable named so
# (tests/test_cli_lazy.py holds each of them to it).
LIMIT_PREFIX = "WEVENT_MAX_"

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


def check_limits_at_start() -> None:
    """`wevent.accounting.inputs.check_limits`, as every command runs it first, without loading
    the accounting package (and numpy) when it has nothing to check: no ``WEVENT_MAX_*``
    variable is set and no limit has been read yet in this process (the package is not
    loaded), so every limit is its default and is read, as it would be here, on first use."""
    if "wevent.accounting.budget" not in sys.modules and not any(
        name.startswith(LIMIT_PREFIX) for name in os.environ
    ):
        return
    from wevent.accounting.inputs import check_limits

    check_limits()


def _load(name: str, target: str) -> click.Command:
    """The command ``target`` ("module:attribute") names; it must be called ``name``."""
    module, _, attribute = target.partition(":")
    command = getattr(import_module(module), attribute)
    if not isinstance(command, click.Command) or command.name != name:
        raise TypeError(f"{target} is not the click command {name!r}")  # a bug in wevent
    return command


class WeventGroup(click.Group):
    """A group whose unknown subcommand gets a suggestion (``unknown_hint(name)`` may give a
    better one) and whose standalone `main` prints every error as one line.

    ``lazy`` maps a command's name to ``("module:attribute", short help)``: the module is
    imported when the command is first asked for (run, its help, a completion), and the group's
    own help lists it with that short help, importing nothing."""

    def __init__(
        self,
        *args: Any,
        unknown_hint: Callable[[str], str | None] | None = None,
        lazy: Mapping[str, tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.unknown_hint = unknown_hint
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(_load(cmd_name, self.lazy[cmd_name][0]))
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's list of commands, where a command not loaded yet shows its short help from
        ``lazy`` (tests/test_cli_lazy.py holds the list equal to the loaded commands')."""
        shown = [
            (name, self.commands.get(name))
            for name in self.list_commands(ctx)
            if name not in self.commands or not self.commands[name].hidden
        ]
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        rows = [
            (name, self.lazy[name][1] if command is None else command.get_short_help_str(limit))
            for name, command in shown
        ]
        with formatter.section(gettext("Commands")):
            formatter.write_dl(rows)

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
            check_limits_at_start()  # an invalid WEVENT_MAX_* value: one line, before anything
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
