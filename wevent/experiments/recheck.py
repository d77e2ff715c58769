"""Re-run the command a results directory records and compare what it gives with what is there.

`wevent reproduce --check DIR` answers a reviewer's question, "does the documented command still
give the committed numbers?", without trusting the fingerprint alone: the fingerprint
(`wevent.experiments.provenance`) runs at a tiny size, so a change that moves only large runs
would pass it. `recheck` reads ``DIR/provenance.json``, runs the same experiment with the same
repeats, seeds and sizes into a temporary directory (plots not drawn: a PNG's bytes depend on
the matplotlib version, and every number a plot shows is in ``results.csv``), and compares every
other file the run writes with the committed one:

* CSV files cell by cell, as `provenance.compare_fingerprints` does: text columns exactly,
  measured numbers to a relative 1e-9 (the last digits numpy's float kernels may move between
  CPUs); the clock readings of a timed experiment (`wevent.experiments.timing`) only for
  presence, since no two runs measure the same time;
* ``table.md`` byte for byte, except for a timed experiment, whose table prints clock readings
  (its numbers are those of ``results.csv``, compared above);
* the fingerprint, re-run and compared as the test suite does;
* the directory itself with `provenance.check_directory` (files unchanged since the run, a
  clean commit, nothing added).

A file the re-run writes that the directory lacks, or the reverse, is a difference too.
"""

from __future__ import annotations

import csv
import io
import math
import shlex
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wevent.errors import InputError
from wevent.experiments import provenance
from wevent.experiments.harness import RUN_COLUMNS, without_plots
from wevent.experiments.timing import TIMED_EXPERIMENTS, WALL_CLOCK

__all__ = ["FileVerdict", "Recheck", "compare_wide", "recheck", "summary"]

REL = 1e-9  # as the fingerprint check: the last digits a CPU's float kernels may move

# runs.csv's columns that describe a run (its counts too): compared exactly, as text
_RUN_KEYS = frozenset(RUN_COLUMNS)


@dataclass(frozen=True)
class FileVerdict:
    """One committed file against its re-run: ``same`` is "byte-identical", "equal to a
    relative 1e-9", "not compared: ..." or empty when ``problems`` says how they differ."""

    name: str
    same: str
    problems: tuple[str, ...] = ()


@dataclass
class Recheck:
    """What `recheck` found in one directory."""

    directory: Path
    command: str
    files: list[FileVerdict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # of the directory as a whole

    @property
    def ok(self) -> bool:
        return not self.problems and not any(f.problems for f in self.files)


def _cells_close(a: str, b: str) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) and math.isnan(y):
        return True
    return math.isfinite(x) and math.isclose(x, y, rel_tol=REL, abs_tol=1e-300)


def _clock_present(a: str, b: str) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return all(math.isfinite(v) and v > 0 for v in (x, y))


def compare_wide(want: str, got: str, *, clocked: frozenset[str] = frozenset()) -> list[str]:
    """How two CSV texts differ, one line per cell: the first row (the columns) exactly, every
    other cell as text or, when both are numbers, to a relative `REL`; a column named in
    ``clocked`` (clock readings) only for a positive time on both sides. The key columns of
    ``runs.csv`` (`_RUN_KEYS`) are compared as text only. Empty when they agree."""
    a = list(csv.reader(io.StringIO(want)))
    b = list(csv.reader(io.StringIO(got)))
    if not a or not b or a[0] != b[0]:
        return ["the columns differ" if a and b else "one of the two is empty"]
    if len(a) != len(b):
        return [f"{len(a) - 1} rows committed, {len(b) - 1} now"]
    header = a[0]
    problems = []
    for line, (row_a, row_b) in enumerate(zip(a[1:], b[1:], strict=True), start=2):
        if len(row_a) != len(row_b):
            problems.append(f"line {line}: {len(row_a)} cells became {len(row_b)}")
            continue
        for name, cell_a, cell_b in zip(header, row_a, row_b, strict=True):
            if name in clocked:
                if not _clock_present(cell_a, cell_b):
                    problems.append(f"line {line}, {name}: time {cell_a!r} became {cell_b!r}")
            elif cell_a != cell_b and (name in _RUN_KEYS or not _cells_close(cell_a, cell_b)):
                problems.append(f"line {line}, {name}: {cell_a!r} became {cell_b!r}")
    return problems


def _verdict(
    name: str, want: str, got: str, compare: Callable[[str, str], list[str]]
) -> FileVerdict:
    if want == got:
        return FileVerdict(name, "byte-identical")
    problems = compare(want, got)
    if problems:
        return FileVerdict(name, "", tuple(problems))
    return FileVerdict(name, f"equal to a relative {REL:g}")


def _recorded_run(record: Mapping[str, Any], directory: Path) -> dict[str, Any]:
    """The run's settings from ``provenance.json``, checked against its recorded command."""
    from wevent.experiments.registry import EXPERIMENTS

    where = directory / provenance.PROVENANCE
    experiment = record.get("experiment")
    if experiment not in EXPERIMENTS:
        raise InputError(f"{where}: experiment {experiment!r} is not one wevent knows")
    settings: dict[str, Any] = {
        "experiment": experiment,
        "repeats": record.get("repeats"),
        "quick": record.get("quick"),
        "seed": (record.get("seeds") or [None])[0],
        "users": record.get("users"),
        "slots": record.get("slots"),
    }
    for key in ("repeats", "seed"):
        if isinstance(settings[key], bool) or not isinstance(settings[key], int):
            raise InputError(f"{where}: field {key!r} is not a whole number")
    for key in ("users", "slots"):
        value = settings[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(f"{where}: field {key!r} is not a whole number or null")
    if not isinstance(settings["quick"], bool):
        raise InputError(f"{where}: field 'quick' is not true or false")
    command = record.get("command")
    if not isinstance(command, str):
        raise InputError(f"{where}: field 'command' is missing")
    argv = shlex.split(command)
    out = argv[argv.index("--out") + 1] if "--out" in argv[:-1] else None
    expected = provenance.command_line(
        experiment,
        Path(out or "."),
        settings["repeats"],
        settings["quick"],
        settings["seed"],
        settings["users"],
        settings["slots"],
    )
    if out is None or shlex.split(expected) != argv:
        raise InputError(
            f"{where}: field 'command' ({command}) does not match the recorded settings "
            f"(expected {expected})"
        )
    settings["command"] = command
    return settings


def recheck(directory: Path) -> Recheck:
    """Re-run what ``directory`` records and compare (module docstring). An unreadable or
    inconsistent ``provenance.json`` is an `InputError`; differences are in the result."""
    from wevent.experiments.registry import run_experiment

    if not directory.is_dir():
        raise InputError(f"--check: {directory} is not a directory")
    try:
        record = provenance.read_provenance(directory / provenance.PROVENANCE)
    except (OSError, ValueError) as exc:
        raise InputError(f"{directory / provenance.PROVENANCE}: {exc}") from None
    run = _recorded_run(record, directory)
    experiment: str = run["experiment"]
    result = Recheck(directory, run["command"])
    result.problems.extend(provenance.check_directory(directory))
    timed = experiment in TIMED_EXPERIMENTS
    clocked = frozenset(WALL_CLOCK) if timed else frozenset()

    with tempfile.TemporaryDirectory(prefix="wevent-recheck-") as tmp, without_plots():
        fresh = Path(tmp)
        run_experiment(
            experiment,
            fresh,
            run["repeats"],
            run["quick"],
            run["seed"],
            users=run["users"],
            slots=run["slots"],
        )
        committed = _files(directory)
        rerun = _files(fresh)
        for name in sorted(set(committed) | set(rerun)):
            if name not in rerun:
                result.files.append(
                    FileVerdict(name, "", ("committed, not written by the re-run",))
                )
            elif name not in committed:
                result.files.append(
                    FileVerdict(name, "", ("written by the re-run, not committed",))
                )
            else:
                result.files.append(
                    _compare_file(name, committed[name], rerun[name], timed, clocked)
                )
    if provenance.FINGERPRINT in _files_all(directory):
        want = (directory / provenance.FINGERPRINT).read_text(encoding="utf-8")
        got = provenance.fingerprint(experiment)
        result.files.append(
            _verdict(provenance.FINGERPRINT, want, got, provenance.compare_fingerprints)
        )
    return result


def _files_all(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.is_file()}


def _files(directory: Path) -> dict[str, Path]:
    """The files a run writes that `recheck` compares: not the plots, the provenance and the
    fingerprint (compared on its own)."""
    skip = {provenance.PROVENANCE, provenance.FINGERPRINT}
    return {
        p.name: p
        for p in sorted(directory.iterdir())
        if p.is_file() and p.suffix != ".png" and p.name not in skip
    }


def _compare_file(
    name: str, committed: Path, rerun: Path, timed: bool, clocked: frozenset[str]
) -> FileVerdict:
    want = committed.read_text(encoding="utf-8")
    got = rerun.read_text(encoding="utf-8")
    if name == "results.csv":
        return _verdict(name, want, got, provenance.compare_fingerprints)
    if name.endswith(".csv"):
        return _verdict(name, want, got, lambda a, b: compare_wide(a, b, clocked=clocked))
    if timed and name == "table.md":
        return FileVerdict(name, "not compared: it prints clock readings (results.csv holds them)")
    return _verdict(name, want, got, _text_lines)


def _text_lines(want: str, got: str) -> list[str]:
    a, b = want.splitlines(), got.splitlines()
    for line, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return [f"line {line}: {x!r} became {y!r}"]
    return [f"{len(a)} lines committed, {len(b)} now"]


def summary(results: Sequence[Recheck]) -> list[str]:
    """The lines `wevent reproduce --check` prints."""
    lines = []
    for result in results:
        lines.append(
            f"{result.directory}: {'SAME' if result.ok else 'DIFFERENT'} ({result.command})"
        )
        lines.extend(f"  {problem}" for problem in result.problems)
        for verdict in result.files:
            if verdict.problems:
                shown = verdict.problems[:10]
                more = len(verdict.problems) - len(shown)
                lines.append(f"  {verdict.name}: differs")
                lines.extend(f"    {p}" for p in shown)
                if more:
                    lines.append(f"    ... and {more} more")
            else:
                lines.append(f"  {verdict.name}: {verdict.same}")
    return lines
