"""Commands load when named: `wevent --help` lists every command from the table in
`wevent.cli.COMMANDS` without importing one, and that table says what the commands themselves
say. What a fresh interpreter imports is checked in a subprocess (a structural check: no timing
here; the times are in docs/development.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from wevent.accounting import inputs
from wevent.accounting.budget import DIGITS_VARIABLE
from wevent.accounting.budget import MAX_SLOT as BUDGET_MAX_SLOT
from wevent.cli import COMMANDS, cli
from wevent.cli._common import EXIT_INPUT, EXIT_VERIFIER, MAX_SLOT
from wevent.cli._group import LIMIT_PREFIX, WeventGroup

REPO = Path(__file__).resolve().parents[1]

# Runs `wevent ARGS...` in this fresh interpreter, then prints its exit code and the modules it
# imported (not those the interpreter's start-up had) as JSON on the last line of stdout.
IMPORTS = textwrap.dedent(
    """\
    import json, sys
    before = set(sys.modules)
    from wevent.cli import main
    try:
        main(sys.argv[1:])
        code = 0
    except SystemExit as exc:
        code = exc.code
    print(json.dumps({"code": code, "modules": sorted(set(sys.modules) - before)}))
    """
)


def _fresh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(LIMIT_PREFIX)}
    return subprocess.run(
        [sys.executable, "-c", IMPORTS, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**base, **(env or {})},
        timeout=120,
    )


def _imports(*args: str) -> tuple[int, set[str]]:
    done = _fresh(*args)
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return last["code"], set(last["modules"])


def _command_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("wevent.cli.") and not m.startswith("wevent.cli._")}


def _copy(
    commands: list[click.Command] | None = None, lazy: dict[str, tuple[str, str]] = COMMANDS
) -> click.Group:
    """A group like `cli` (its options, help and settings): a `WeventGroup` lazy over ``lazy``,
    or with ``commands``, a plain click group holding them."""
    settings: dict[str, Any] = dict(
        name=cli.name,
        params=cli.params,
        help=cli.help,
        context_settings=cli.context_settings,
        callback=cli.callback,
    )
    if commands is None:
        return WeventGroup(**settings, lazy=lazy)
    return click.Group(**settings, commands=commands)


def _loaded() -> list[click.Command]:
    ctx = click.Context(cli)
    commands = [cli.get_command(ctx, name) for name in COMMANDS]
    assert all(c is not None for c in commands)
    return [c for c in commands if c is not None]


def test_every_command_resolves_under_its_name_with_the_tables_short_help() -> None:
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    for name, (_target, short_help) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command), name
        assert command.name == name
        assert command.get_short_help_str() == short_help, name


def test_every_command_module_is_in_the_table() -> None:
    modules = {p.stem for p in (REPO / "wevent" / "cli").glob("*.py") if not p.stem.startswith("_")}
    assert {target.partition(":")[0] for target, _ in COMMANDS.values()} == {
        f"wevent.cli.{m}" for m in modules
    }


def test_the_group_help_is_clicks_own_for_the_loaded_commands_and_loads_none() -> None:
    lazy = _copy()
    shown = CliRunner().invoke(lazy, ["--help"], prog_name="wevent")
    assert shown.exit_code == 0, shown.output
    assert isinstance(lazy, WeventGroup) and lazy.commands == {}  # nothing was imported
    eager = CliRunner().invoke(_copy(_loaded()), ["--help"], prog_name="wevent")
    assert eager.exit_code == 0
    assert shown.stdout == eager.stdout
    assert "Commands:" in shown.stdout
    for name, (_target, short_help) in COMMANDS.items():
        assert f"  {name}" in shown.stdout and short_help in shown.stdout


def test_a_wrong_short_help_in_the_table_is_seen() -> None:
    """Negative control of the test above: the group's help shows the table's text, so a stale
    entry differs from what click shows for the loaded command."""
    wrong = {**COMMANDS, "check": (COMMANDS["check"][0], "Check something else.")}
    shown = CliRunner().invoke(_copy(lazy=wrong), ["--help"], prog_name="wevent").stdout
    eager = CliRunner().invoke(_copy(_loaded()), ["--help"], prog_name="wevent").stdout
    assert shown != eager and "Check something else." in shown


def test_a_table_entry_naming_the_wrong_command_is_an_internal_error() -> None:
    broken = WeventGroup(
        name="wevent", lazy={"chek": ("wevent.cli.check:check_cmd", "A misspelt entry.")}
    )
    result = CliRunner().invoke(broken, ["chek", "--help"], prog_name="wevent")
    assert result.exit_code == EXIT_VERIFIER
    assert "is not the click command 'chek'" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("wevent: error: internal error")


def test_the_group_help_imports_no_command_and_not_numpy() -> None:
    code, modules = _imports("--help")
    assert code == 0
    assert _command_modules(modules) == set()
    assert "numpy" not in modules and "wevent.accounting" not in modules
    assert "importlib.metadata" not in modules  # the version is read when asked for


def test_the_version_is_still_read() -> None:
    done = _fresh("--version")
    assert done.stdout.startswith("wevent, version ") and done.returncode == 0


@pytest.mark.parametrize(
    ("command", "loaded"),
    [
        ("check", {"wevent.cli.check"}),
        ("audit", {"wevent.cli.audit", "wevent.cli.check"}),  # audit shares check's --until
        ("run", {"wevent.cli.run"}),
        ("trace", {"wevent.cli.trace"}),
        ("gate", {"wevent.cli.gate"}),
        ("ledger", {"wevent.cli.ledger"}),
    ],
)
def test_a_commands_help_imports_that_command_only_and_not_numpy(
    command: str, loaded: set[str]
) -> None:
    code, modules = _imports(command, "--help")
    assert code == 0
    assert _command_modules(modules) == loaded
    assert "numpy" not in modules


def test_a_mistyped_command_in_a_fresh_interpreter_is_one_line_with_a_suggestion() -> None:
    done = _fresh("chek", "x")
    assert done.stderr == (
        "wevent: error: no command 'chek' (did you mean 'check'?) (see 'wevent --help')\n"
    )
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["code"] == EXIT_INPUT
    assert _command_modules(set(last["modules"])) == set()


def test_every_limit_variable_is_named_with_the_prefix_the_start_up_looks_for() -> None:
    variables = [
        inputs.FIELD_VARIABLE,
        inputs.EVIDENCE_VARIABLE,
        inputs.DEPTH_VARIABLE,
        DIGITS_VARIABLE,
    ]
    assert all(v.startswith(LIMIT_PREFIX) for v in variables)


@pytest.mark.parametrize(
    ("variable", "unit"),
    [
        ("WEVENT_MAX_FIELD", "characters"),
        ("WEVENT_MAX_EVIDENCE", "characters"),
        ("WEVENT_MAX_DEPTH", "levels"),
        ("WEVENT_MAX_DIGITS", "digits"),
    ],
)
def test_an_invalid_limit_is_refused_first_in_a_fresh_interpreter(variable: str, unit: str) -> None:
    """A fresh interpreter has read no limit: the start-up's shortcut must still see the
    variable and refuse it, even for a help that reads no file."""
    done = _fresh("--help", env={variable: "1x"})
    assert json.loads(done.stdout.strip().splitlines()[-1])["code"] == EXIT_INPUT
    assert done.stderr == (
        f"wevent: error: {variable}='1x': give a whole number of {unit} from 1 to 999,999,999\n"
    )


def test_the_written_out_slot_limit_is_the_accounting_ones() -> None:
    assert MAX_SLOT == BUDGET_MAX_SLOT
