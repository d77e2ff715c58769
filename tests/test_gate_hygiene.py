"""What `wevent gate` and `wevent prove` leave behind and tell the user to run:
no `.hypothesis/` folder in the user's directory, and a replay line that names only files that
exist (or says which to save first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# A refuting gate at a small scope (windows <= 2): every stage runs, the proof and the search
# fail; what these tests check (the files left behind, the replay line) does not depend on w.
SMALL = ("tests.gate_mutants:absorb_uncapped", "--w-max", "2", "--search-runs", "30")


def _wevent(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
    return subprocess.run(
        [sys.executable, "-m", "wevent", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.heavy
def test_the_gate_leaves_nothing_in_the_working_directory(tmp_path: Path) -> None:
    """Hypothesis caches source constants under ./.hypothesis; the gate routes them elsewhere.
    A sound target, so that the hypothesis search runs (a refuting one, as absorb_uncapped, is
    refuted by the systematic pass before hypothesis draws anything, and would leave nothing
    even without the routing); then a refuting one."""
    done = _wevent(
        tmp_path, "gate", "uniform", "--w-max", "1", "--examples", "10", "--search-runs", "5"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []
    done = _wevent(tmp_path, "gate", *SMALL)
    assert done.returncode == 1, done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []


def _replay(output: str) -> str:
    return next(line for line in output.splitlines() if line.strip().startswith("replay:"))


@pytest.mark.heavy
def test_a_gate_replay_line_names_no_missing_file(tmp_path: Path) -> None:
    done = _wevent(tmp_path, "gate", *SMALL)
    line = _replay(done.stdout)
    assert "save the requirements above as counterexample.csv" in line
    assert not (tmp_path / "counterexample.csv").exists()
    # saving as told, then running the command it gives, replays the refusal
    saved = _wevent(tmp_path, "gate", *SMALL, "--save-requirements", "cex.csv")
    command = _replay(saved.stdout).split("replay: ", 1)[1]
    assert " -r cex.csv " in command and (tmp_path / "cex.csv").exists()
    traced = _wevent(tmp_path, *command.split()[1:])
    assert traced.returncode == 1 and "refused" in traced.stdout, traced.stdout


def test_a_prove_replay_line_names_the_saved_file(tmp_path: Path) -> None:
    args = [
        "prove",
        "allocator",
        "dpba",
        "--variant",
        "published",
        "--w-max",
        "2",
        "--classes",
        "1",
    ]
    done = _wevent(tmp_path, *args)
    assert done.returncode == 1
    assert "save the requirements above as" in _replay(done.stdout)
    saved = _wevent(tmp_path, *args, "--save-requirements", "p.csv")
    command = _replay(saved.stdout).split("replay: ", 1)[1]
    traced = _wevent(tmp_path, *command.split()[1:])
    assert traced.returncode == 1, traced.stdout + traced.stderr


def test_the_plugin_overrides_name_real_gate_options() -> None:
    """`--wevent-unroll` and the wide search's flags reach `GateOptions` (a misspelled field
    would be a TypeError at the first gate call)."""
    from dataclasses import fields

    from wevent.gate import GateOptions
    from wevent.pytest_plugin import _OVERRIDES

    names = {f.name for f in fields(GateOptions)}
    overridden = {field for _, field, _ in _OVERRIDES}
    assert {"horizon", "search_runs", "search_w_max"} <= overridden <= names


def test_the_api_exports_what_population_and_dynamic_authors_need() -> None:
    import wevent.api as api

    for name in api.__all__:
        assert getattr(api, name) is not None
    for name in ("DynamicKernel", "PopulationSpec", "PopulationAllocator", "population_setup"):
        assert name in api.__all__
