"""`wevent demo`: the main job on the bundled examples."""

from __future__ import annotations

import sys

import click

from wevent._extras import require
from wevent.cli._common import EXIT_OK, EXIT_VIOLATION, fail

__all__ = ["demo_cmd"]


@click.command("demo", short_help="Run the main job on the bundled examples.")
def demo_cmd() -> None:
    """Run the main job on the bundled examples and print the verdicts.

    Two ledgers are checked against the same requirements (fixed, whole-stream and dynamic
    users from paper 001 Table 3): one COMPLIANT, including exact ties such as three spends of
    0.1 under a bound of 0.3, and one NOT COMPLIANT, with fixed, dynamic backward, dynamic
    forward and whole-stream violations and a charge whose evidence does not cover it.
    """
    missing = require("demo", "audit", "prove", "report")  # it shows every part of wevent
    if missing is not None:
        fail(missing)
    from wevent.demo import run_demo

    sys.exit(EXIT_OK if run_demo(click.echo) else EXIT_VIOLATION)
