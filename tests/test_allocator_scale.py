"""Scale check (slow, `pytest -m slow`): every central allocator runs 10^5 users in 8 requirement
classes for 1,000 slots with the guard in the loop, and the batch checker accepts the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from wevent.cli import cli
from wevent.mechanisms.allocators import CENTRAL

USERS, SLOTS = 100_000, 1_000
WINDOWS, BUDGETS = (10, 20, 40, 80), ("0.5", "1")


def _requirements(path: Path, dynamic: bool) -> str:
    pairs = [(w, e) for w in WINDOWS for e in BUDGETS]
    with path.open("w") as fh:
        if dynamic:
            fh.write("user,slot,w_back,eps_back,w_fwd,eps_fwd\n")
            for i in range(USERS):
                w, e = pairs[i % 8]
                fh.write(f"u{i},1,{w},{e},{w},{e}\n")
                fh.write(f"u{i},300,{w // 2},{e},{w},{float(e) * 2}\n")
                fh.write(f"u{i},600,{w},{float(e) * 2},{w // 2},{e}\n")
        else:
            fh.write("user,w,epsilon\n")
            for i in range(USERS):
                w, e = pairs[i % 8]
                fh.write(f"u{i},{w},{e}\n")
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", CENTRAL)
def test_hundred_thousand_users_thousand_slots(mechanism: str, tmp_path: Path) -> None:
    req = _requirements(tmp_path / "req.csv", mechanism in ("dpbd", "dpba"))
    ledger = tmp_path / "run.jsonl"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "run",
            mechanism,
            "-r",
            req,
            "--stream",
            "sin",
            "--slots",
            str(SLOTS),
            "--ledger",
            str(ledger),
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"{SLOTS} of {SLOTS} slots run" in result.output
    checked = runner.invoke(cli, ["check", str(ledger), "-r", req])
    assert checked.exit_code == 0, checked.output
