"""The ``wevent`` command line: one module per command, one group that holds them.

Every command shares one exit-code table (`wevent.cli._common`): 0 success (COMPLIANT, PROVED,
CHECKED, PASSED, every charge accepted), 1 a violation (NOT COMPLIANT, REFUTED, REFUSED), 2 a
usage or input error (one line on stderr, ``wevent CMD: error: ...``, never a traceback), 3
nothing decided (UNKNOWN: a proof timed out in prove; in gate, nothing proved, searched or run end to end,
or no proof with ``--require-proof``), 4 verifier error (the
verifier contradicted itself: a counterexample that does not replay; a bug in wevent, never a
verdict), 5 an integrity failure (a ledger's committed content, chain, checkpoint, head or
signature does not verify), 6 an uncommitted tail (a crashed writer's; ``wevent ledger repair``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from wevent.cli._group import WeventGroup

__all__ = ["COMMANDS", "cli", "main"]

# Every command: its name -> (where it is, its short help). `wevent --help` lists them from here,
# so it imports no command (each command's module, and what it imports, loads only when that
# command is named); tests/test_cli_lazy.py holds each short help equal to its command's own.
COMMANDS: dict[str, tuple[str, str]] = {
    "audit": (
        "wevent.cli.audit:audit_cmd",
        "Audit deployed ledgers: integrity, then every window; reports.",
    ),
    "check": ("wevent.cli.check:check_cmd", "Check one ledger against the requirements."),
    "demo": ("wevent.cli.demo:demo_cmd", "Run the main job on the bundled examples."),
    "gate": ("wevent.cli.gate:gate_cmd", "Prove or refute an allocator, for CI."),
    "ledger": (
        "wevent.cli.ledger:ledger_group",
        "Durable ledgers: repair a crashed writer's tail; signing keys.",
    ),
    "prepare": (
        "wevent.cli.prepare:prepare_group",
        "Turn a real data set into a user,slot,value stream.",
    ),
    "prove": (
        "wevent.cli.prove:prove_group",
        "Prove a primitive, allocator, population allocator or ExSub.",
    ),
    "reproduce": ("wevent.cli.reproduce:reproduce_cmd", "Re-run one of the papers' experiments."),
    "run": ("wevent.cli.run:run_cmd", "Run an allocator on a stream, the guard in the loop."),
    "trace": ("wevent.cli.trace:trace_cmd", "Trace a budget kernel on publish/skip decisions."),
}


@click.group(
    "wevent",
    cls=WeventGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="wevent", prog_name="wevent")
def cli() -> None:
    """wevent: exact privacy accounting for w-event differential privacy on infinite streams.

    Every spend of a stream mechanism is a charge in a ledger (slot, user or group, exact
    epsilon, evidence). wevent checks ledgers against each user's requirement: a fixed window
    (w, eps), dynamic backward/forward windows declared per slot, or a whole-stream budget.
    All arithmetic is exact: 0.1 + 0.1 + 0.1 == 0.3, and an excess of 1e-18 is an excess.

    \b
    Start with:  wevent demo
    Then:        wevent check LEDGER -r REQUIREMENTS.csv
    File formats: docs/formats.md.

    \b
    Verdicts and exit codes (every command):
      0  COMPLIANT, PROVED, CHECKED (prove primitive: a finite set of exact checks, not a
         proof), PASSED (gate: searched, not proved), every charge accepted
      1  NOT COMPLIANT, REFUTED, REFUSED by the guard
      2  a usage or input error (one line on stderr)
      3  UNKNOWN: nothing decided (prove: a proof timed out; gate: nothing proved, searched
         or run end to end, or no proof with --require-proof)
      4  verifier error (a bug in wevent, never a verdict)
      5  INTEGRITY FAILURE: a ledger was changed or cannot be vouched for (audit, ledger)
      6  UNCOMMITTED TAIL: a crashed writer's tail, not audited (wevent ledger repair)
    """


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point."""
    return cli.main(args=argv, prog_name="wevent")
