"""Replay a gate's counterexample the way its report tells a user to: write its requirements,
run the printed ``wevent trace`` command through the command line."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from wevent.accounting.formats import write_requirements
from wevent.cli import cli
from wevent.gate import GateReport


def replay_on_the_command_line(report: GateReport, csv: Path, variant: str) -> Result:
    """The counterexample of a refuted ``report`` (of ``variant``, replaying in-process), its
    printed command run on the command line with its requirements written to ``csv``; the
    command must name the variant and the run must be refused by the guard (exit 1)."""
    cex = report.counterexample
    assert cex is not None and cex.variant == variant and cex.replays()
    write_requirements(cex.population, csv)
    command = cex.command(str(csv))
    assert command.endswith(f"--decisions {cex.decision_text} --variant {variant}"), command
    result = CliRunner().invoke(cli, command.split()[1:])
    assert result.exit_code == 1, result.output
    assert "REFUSED by the guard" in result.output
    return result
