"""benchmarks/bench_cli_startup.py runs (a smoke test; its figures are docs/development.md's,
measured, never asserted here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.bench_cli_startup import CASES, environment, run_once

REPO = Path(__file__).resolve().parents[1]


def test_every_case_is_a_command_that_exits_0_from_the_repository() -> None:
    env = environment(REPO, None)
    for _label, argv in CASES:
        wall, cpu = run_once(argv, REPO, env)
        assert wall > 0 and cpu >= 0


def test_bytecode_caching_sets_its_own_prefix_and_lifts_the_no_bytecode_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = environment(REPO, tmp_path)
    assert env["PYTHONPATH"] == str(REPO) and env["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert environment(REPO, None)["PYTHONDONTWRITEBYTECODE"] == "1"


def test_a_failing_command_stops_the_benchmark() -> None:
    with pytest.raises(SystemExit, match="exit 3"):
        run_once([sys.executable, "-c", "raise SystemExit(3)"], REPO, environment(REPO, None))
