"""The outside project `examples/third_party_allocator` against the installed wevent.

Its own test suite runs through wevent's pytest plugin (the `wevent_gate` fixture), and the
command line finds its allocator by entry-point name, gates it (exit 0, JUnit report) and refutes
its broken variant with a counterexample that `wevent trace` replays.

No network install: the project's entry points (read from its pyproject.toml) are registered by
a ``*.dist-info`` directory on PYTHONPATH, which is how an installed distribution announces its
entry points to `importlib.metadata`; the source directory goes on PYTHONPATH too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "third_party_allocator"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PYTHONPATH with the example's sources and a dist-info announcing its entry points."""
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    site = tmp_path_factory.mktemp("site")
    dist = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n",
        encoding="utf-8",
    )
    lines = []
    for group, points in meta["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {value}" for name, value in points.items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(site), str(EXAMPLE / "src")])
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    out.pop("PYTEST_ADDOPTS", None)
    return out


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


# The plugin's command-line overrides, as a CI job on a small runner would pass them: the wide
# search at 50 runs per kind and windows <= 16 (its default, 1,460 populations up to w = 64,
# took most of this test's 55 s; the default scope runs under -m slow).
SMALL_SEARCH = ["--wevent-search-runs", "50", "--wevent-search-w-max", "16"]


def test_example_project_passes_its_own_tests_through_the_plugin(env: dict[str, str]) -> None:
    done = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", *SMALL_SEARCH], env, EXAMPLE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


@pytest.mark.slow
def test_example_project_passes_its_own_tests_at_the_default_scope(env: dict[str, str]) -> None:
    done = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider"], env, EXAMPLE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def test_example_allocator_gated_by_entry_point_name(env: dict[str, str], tmp_path: Path) -> None:
    junit, report = tmp_path / "gate.xml", tmp_path / "gate.json"
    done = _run(
        ["-m", "wevent", "gate", "thrifty", "--examples", "60", "--junit", str(junit),
         "--json", str(report), "--search-runs", "50", "--search-w-max", "16"],
        env,
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PROVED" in done.stdout
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["verdict"] == "proved" and data["allocator"]["name"] == "thrifty"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0" and suite.get("errors") == "0"


def test_broken_example_refuted_and_replayed_by_trace(env: dict[str, str], tmp_path: Path) -> None:
    csv = tmp_path / "cex.csv"
    done = _run(
        ["-m", "wevent", "gate", "thrifty:broken", "--examples", "60", "--save-requirements",
         str(csv)],
        env,
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    replay = next(line for line in done.stdout.splitlines() if line.startswith("replay: "))
    command = replay.removeprefix("replay: ").split()
    assert command[:3] == ["wevent", "trace", "thrifty:broken"] and str(csv) in command
    traced = _run(["-m", "wevent", *command[1:]], env, tmp_path)
    assert traced.returncode == 1 and "REFUSED by the guard" in traced.stdout, traced.stdout


def test_run_takes_the_example_allocator_by_name(env: dict[str, str], tmp_path: Path) -> None:
    """`wevent run` takes a third-party allocator as `trace` and `gate` do: by entry-point name
    (its ledger then checks compliant) and as module:attribute (the broken variant: the guard
    stops the run, exit 1, and the ledger written up to the refusal is compliant)."""
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\na,3,1\nb,3,1\nc,5,1/2\n", encoding="utf-8")
    ledger = tmp_path / "run.jsonl"
    args = ["-r", str(req), "--stream", "sin", "--slots", "40", "--ledger", str(ledger)]
    done = _run(["-m", "wevent", "run", "thrifty", *args], env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    checked = _run(["-m", "wevent", "check", str(ledger), "-r", str(req)], env, tmp_path)
    assert checked.returncode == 0 and "COMPLIANT" in checked.stdout, checked.stdout
    broken_ledger = tmp_path / "broken.jsonl"  # a ledger is never overwritten
    args[args.index(str(ledger))] = str(broken_ledger)
    ledger = broken_ledger
    broken = _run(["-m", "wevent", "run", "thrifty:broken", *args], env, tmp_path)
    assert broken.returncode == 1 and "refused" in broken.stdout.lower(), broken.stdout
    checked = _run(["-m", "wevent", "check", str(ledger), "-r", str(req)], env, tmp_path)
    assert checked.returncode == 0, checked.stdout
