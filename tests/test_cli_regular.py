"""The command line is regular: one error format for every usage error (click's own included),
one meaning per flag across commands, `--json [FILE|-]` everywhere it appears, the same proof
scope defaults in `prove` and `gate`, did-you-mean for names, and one exit-code table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from wevent.cli import cli
from wevent.cli._common import (
    DEFAULT_CLASSES,
    DEFAULT_TIMEOUT,
    DEFAULT_W_MAX,
    EXIT_INPUT,
    EXIT_INTEGRITY,
    EXIT_OK,
    EXIT_TAIL,
    EXIT_UNKNOWN,
    EXIT_VERIFIER,
    EXIT_VIOLATION,
    JsonTarget,
)
from wevent.cli._common import INDUCTION_DEFAULT_W_MAX as CLI_INDUCTION_W_MAX
from wevent.cli._group import RENAMED

EXAMPLES = Path(__file__).resolve().parent.parent / "wevent" / "examples"
LEDGER = str(EXAMPLES / "compliant.jsonl")
REQ = str(EXAMPLES / "requirements.csv")
ALL_REQ = [f"-r{EXAMPLES / f'requirements{k}.csv'}" for k in ("", ".dynamic", ".wholestream")]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _commands(group: click.Group, path: str = "wevent") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} {name}")
        else:
            yield f"{path} {name}", command


COMMANDS = dict(_commands(cli))


def test_every_command_is_reached() -> None:
    assert set(COMMANDS) == {
        "wevent check",
        "wevent audit",
        "wevent run",
        "wevent trace",
        "wevent prove primitive",
        "wevent prove allocator",
        "wevent prove population",
        "wevent prove exsub",
        "wevent gate",
        "wevent reproduce",
        "wevent prepare tdrive",
        "wevent prepare foursquare",
        "wevent demo",
        "wevent ledger repair",
        "wevent ledger keygen",
    }


@pytest.mark.parametrize(
    ("args", "command", "needle"),
    [
        (["chek"], "wevent", "did you mean 'check'"),
        (["run", "lpdd", "-r", REQ, "--stream", "sin"], "wevent run", "did you mean 'lpd'"),
        (["trace", "pbaa", "-r", REQ, "--decisions", "1"], "wevent trace", "did you mean 'pba'"),
        (["gate", "dpbx"], "wevent gate", "did you mean 'dpbd'"),
        (["trace", "exsub", "-r", REQ, "--decisions", "1"], "wevent trace", "'wevent run exsub'"),
        (["gate", "nope"], "wevent gate", "plba-ops"),
        (["prove", "all"], "wevent prove", "'all' (every primitive): use 'wevent prove primitive all'"),
        (["prove", "population", "pba"], "wevent prove population", "prove allocator pba"),
        (["prove", "primitive", "lpd"], "wevent prove primitive", "prove population lpd"),
        (["prove", "allocator", "exsub"], "wevent prove allocator", "use 'wevent prove exsub'"),
        (["prove", "exsub", "--variant", "published"], "wevent prove exsub", "printed-offline"),
        (["check", LEDGER, "-r", REQ, "--s", "2"], "wevent check", "No such option '--s'"),
        (["run", "pba", "-r", REQ, "--horizon", "9"], "wevent run", "No such option '--horizon'"),
        (["prove", "primitve", "grr"], "wevent prove", "did you mean 'primitive'"),
        (["prove", "pba"], "wevent prove", "use 'wevent prove allocator pba'"),
        (["prove", "plpa+"], "wevent prove", "use 'wevent prove population plpa+'"),
        (["prove", "grr"], "wevent prove", "use 'wevent prove primitive grr'"),
        (["prove", "allocator", "pbaa"], "wevent prove allocator", "did you mean 'pba'"),
        (["prove", "allocator", "lpd"], "wevent prove allocator", "prove population lpd"),
        (["prove", "primitive", "gr"], "wevent prove primitive", "did you mean 'grr'"),
        (["check", LEDGER], "wevent check", "Missing option '--requirements'"),
        (["check"], "wevent check", "Missing argument 'LEDGER'"),
        (["check", LEDGER, "-r", REQ, "--jsn"], "wevent check", "Did you mean '--json'"),
        (["check", LEDGER, "-r", REQ, "--horizon", "9"], "wevent check", "it is now --until SLOT ("),
        (["check", LEDGER, "-r", REQ, "--until", "0"], "wevent check", "--until"),
        (["check", LEDGER, "-r", REQ, "--until", "2"], "wevent check", "before the ledger's last"),
        (["audit", LEDGER, "-r", REQ, "--engine", "duckd"], "wevent audit", "did you mean 'duckdb'"),
        (["gate", "pba", "--horizon", "9"], "wevent gate", "it is now --unroll N"),
        (["gate", "pba", "--search-horizon", "9"], "wevent gate", "now --search-unroll"),
        (["prove", "exsub", "--dprime", "4"], "wevent prove exsub", "now --domain"),
        (["prove", "exsub", "--s", "2"], "wevent prove exsub", "now --sparsity"),
        (["trace", "pba", "-r", REQ, "--d", "3", "--decisions", "1"], "wevent trace", "--domain"),
        (["run", "pba", "-r", REQ, "--stream", "sin", "--variant", "publishd"], "wevent run",
         "did you mean 'published'"),
        (["reproduce", "pwsm-epsilo"], "wevent reproduce", "did you mean 'pwsm-epsilon'"),
        (["prepare", "tdrve"], "wevent prepare", "did you mean 'tdrive'"),
        (["check", LEDGER, "-r", str(EXAMPLES / "nope.csv")], "wevent check", "nope.csv"),
    ],
)  # fmt: skip
def test_every_usage_error_is_one_line_in_one_format(
    args: list[str], command: str, needle: str
) -> None:
    code, out, err = run(*args)
    assert code == EXIT_INPUT, (out, err)
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"{command}: error: "), err
    assert needle in err, err
    assert "Usage:" not in err and "Traceback" not in err


def test_one_meaning_per_flag() -> None:
    """A flag name has one help meaning (up to its subject) and the retired names are gone."""
    seen: dict[str, set[str]] = {}
    for command in COMMANDS.values():
        for param in command.params:
            if isinstance(param, click.Option):
                for opt in param.opts:
                    seen.setdefault(opt, set()).add(type(param.type).__name__)
    for retired in RENAMED:
        assert retired not in seen, retired
    assert "--horizon" not in seen
    # --json is the same [FILE|-] option wherever it appears; so is each shared flag's type.
    assert seen["--json"] == {JsonTarget.__name__}
    for flag in ("--until", "--unroll", "--domain", "--sparsity", "--w-max", "--classes"):
        assert len(seen[flag]) == 1, (flag, seen[flag])
    with_json = [
        p for p, c in COMMANDS.items() if any("--json" in getattr(x, "opts", ()) for x in c.params)
    ]
    assert set(with_json) >= {
        "wevent check",
        "wevent audit",
        "wevent trace",
        "wevent prove primitive",
        "wevent prove allocator",
        "wevent prove population",
        "wevent prove exsub",
        "wevent gate",
    }


def test_prove_and_gate_share_the_scope_defaults() -> None:
    from wevent.gate.core import DYNAMIC_INDUCTION_W_MAX, GateOptions
    from wevent.proofs.dynamic import INDUCTION_DEFAULT_W_MAX
    from wevent.proving import default_scope

    for path in ("wevent prove allocator", "wevent prove population", "wevent gate"):
        defaults = {p.name: p.default for p in COMMANDS[path].params}
        assert defaults["w_max"] is None  # DEFAULT_W_MAX; the dynamic kernels' proof: 4
        assert defaults["classes"] == DEFAULT_CLASSES
        assert defaults["timeout"] == DEFAULT_TIMEOUT
        assert defaults["unroll"] is None  # 3 * w_max
    assert GateOptions().w_max == DEFAULT_W_MAX and GateOptions().timeout == DEFAULT_TIMEOUT
    assert INDUCTION_DEFAULT_W_MAX == DYNAMIC_INDUCTION_W_MAX == CLI_INDUCTION_W_MAX
    for name, w in (("pba", DEFAULT_W_MAX), ("dpba", INDUCTION_DEFAULT_W_MAX)):
        scope = default_scope(name, w_max=None, classes=None, horizon=None, timeout=60)
        assert (scope.w_max, scope.classes) == (w, DEFAULT_CLASSES)


def test_allocator_arguments_use_a_metavar_not_a_choice_list() -> None:
    for path in ("wevent run", "wevent trace", "wevent gate", "wevent prove allocator"):
        code, out, _ = run(*path.split()[1:], "--help")
        assert code == 0
        usage = out.splitlines()[0]
        assert "ALLOCATOR" in usage and "uniform" not in usage, usage


def test_json_alone_or_dash_prints_json_instead_of_the_text(tmp_path: Path) -> None:
    for flag in (["--json"], ["--json", "-"]):
        code, out, _ = run("check", LEDGER, *ALL_REQ, *flag)
        assert code == EXIT_OK and json.loads(out)["ok"] is True
        code, out, _ = run("audit", LEDGER, *ALL_REQ, *flag)  # plain: compliant, never ok
        assert code == EXIT_OK and json.loads(out)["compliant"] is True
        assert json.loads(out)["ok"] is False
        code, out, _ = run("check", LEDGER, "-r", REQ, *flag)  # dave has no requirement
        assert code == EXIT_VIOLATION and json.loads(out)["ok"] is False
    report = tmp_path / "verdict.json"
    code, out, _ = run("check", LEDGER, *ALL_REQ, "--json", str(report))
    assert code == EXIT_OK and "COMPLIANT" in out
    assert json.loads(report.read_text(encoding="utf-8"))["ok"] is True


def test_json_never_swallows_an_input(tmp_path: Path) -> None:
    """`--json LEDGER ...` is refused: it would otherwise overwrite the ledger with a report."""
    ledger = tmp_path / "run.jsonl"
    ledger.write_bytes(Path(LEDGER).read_bytes())
    before = ledger.read_bytes()
    code, _, err = run("audit", "--json", str(ledger), "-r", REQ)
    assert code == EXIT_INPUT and "does not end in .json" in err
    assert ledger.read_bytes() == before
    code, _, err = run("check", LEDGER, "-r", REQ, "--json", str(tmp_path / "no" / "x.json"))
    assert code == EXIT_INPUT and "does not exist" in err


def test_help_states_one_exit_code_table() -> None:
    code, out, _ = run("--help")
    assert code == 0
    for number, word in (
        (EXIT_OK, "COMPLIANT"),
        (EXIT_VIOLATION, "REFUTED"),
        (EXIT_INPUT, "usage or input error"),
        (EXIT_UNKNOWN, "UNKNOWN"),
        (EXIT_VERIFIER, "verifier error"),
        (EXIT_INTEGRITY, "INTEGRITY FAILURE"),
        (EXIT_TAIL, "UNCOMMITTED TAIL"),
    ):
        line = next(x for x in out.splitlines() if x.strip().startswith(f"{number} "))
        assert word in line, line


def test_help_exit_3_covers_gate_as_well_as_prove() -> None:
    # Found in review: "3 UNKNOWN (a proof timed out)", though gate exits 0 (PASSED) on a timed
    # out proof unless --require-proof, and exits 3 when nothing at all passed.
    code, out, _ = run("--help")
    text = " ".join(out.split())
    assert code == 0
    exit_3 = (
        "3 UNKNOWN: nothing decided (prove: a proof timed out; gate: nothing proved, searched "
        "or run end to end, or no proof with --require-proof)"
    )
    assert exit_3 in text
    assert "CHECKED (prove primitive: a finite set of exact checks, not a proof)" in text


@pytest.mark.parametrize("group", [[], ["prove"], ["prepare"]])
def test_a_bare_group_prints_its_help(group: list[str]) -> None:
    code, out, err = run(*group)
    text = out + err
    assert code == EXIT_INPUT and "Usage:" in text and "Commands:" in text
    assert "error:" not in text


def test_shell_completion_stays_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_WEVENT_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", "wevent chek x")
    monkeypatch.setenv("COMP_CWORD", "2")
    result = CliRunner().invoke(cli, [], prog_name="wevent")
    assert result.exit_code == 0 and result.stderr == ""
