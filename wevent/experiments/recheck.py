"""Re-run the command a results directory records and compare what it gives with what is there.

`wevent reproduce --check DIR` answers a reviewer's question, "does the documented command still
give the committed numbers?", without trusting the fingerprint alone: the fingerprint
(`wevent.experiments.provenance`) runs at a tiny size, so a change that moves only large runs
would pass it. `recheck` reads ``DIR/provenance.json`` (every field checked: the command must be
the one its settings give, the seeds those of its ``--seed`` and ``--repeats``), runs the same
experiment with the same repeats, seeds and sizes into a temporary directory, and compares every
file the run writes with the committed one:

* CSV files cell by cell, as `provenance.compare_fingerprints` does: text columns and the
  columns that describe a run (`harness.RUN_COLUMNS`, its counts included) exactly, measured
  numbers to a relative 1e-9 (the last digits numpy's float kernels may move between CPUs); the
  clock readings of a timed experiment (`wevent.experiments.timing`) only for presence, since
  no two runs measure the same time;
* ``table.md`` line for line. A timed experiment's table is compared section by section: its
  clock sections with every number masked, its count sections exactly, and its orderings and
  ratios (`running_time.judged`) rebuilt by the current code from the committed ``runs.csv`` and
  compared exactly (the re-run's clock readings would give other ratios);
* the fingerprint, re-run and compared as the test suite does;
* the directory itself with `provenance.check_directory` (files unchanged since the run, a
  clean commit, nothing added).

The plots are not compared: they are not drawn in the re-run (a PNG's bytes depend on the
matplotlib version; every number a plot draws is in the CSV files), and each committed PNG is
listed as "not compared". A file the re-run writes that the directory lacks, or the reverse, is a
difference. "byte-identical" compares bytes; "equal to a relative 1e-9" says some numbers differ
in their last digits (or in how they are written) within that tolerance.
"""

from __future__ import annotations

import csv
import io
import math
import re
import shlex
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wevent.errors import InputError
from wevent.experiments import provenance
from wevent.experiments.harness import RUN_COLUMNS, without_plots
from wevent.experiments.timing import TIMED_EXPERIMENTS, WALL_CLOCK

__all__ = [
    "FileVerdict",
    "Recheck",
    "compare_wide",
    "prepare",
    "recheck",
    "summary",
]

REL = 1e-9  # as the fingerprint check: the last digits a CPU's float kernels may move

# runs.csv's columns that describe a run (its counts too): compared exactly, as text
_RUN_KEYS = frozenset(RUN_COLUMNS)
# the bounds `wevent reproduce` puts on its options (wevent/cli/reproduce.py)
_RANGES = {"repeats": (1, 1000), "seed": (0, None), "users": (1, 10**8), "slots": (1, 10**7)}
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf")


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
    problems: list[str] = field(default_factory=list)  # of the directory's provenance
    notes: list[str] = field(default_factory=list)  # said, not counted as differences

    @property
    def numbers_same(self) -> bool:
        return not any(f.problems for f in self.files)

    @property
    def ok(self) -> bool:
        return not self.problems and self.numbers_same


@dataclass(frozen=True)
class Recorded:
    """A results directory's recorded run, checked (`prepare`)."""

    directory: Path
    experiment: str
    command: str
    out: str
    repeats: int
    quick: bool
    seed: int
    users: int | None
    slots: int | None
    committed: Mapping[str, bytes]  # every file but the provenance, read up front


def _whole(where: Path, key: str, value: object, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "a whole number or null" if optional else "a whole number"
        raise InputError(f"{where}: field {key!r} is not {kind}")
    low, high = _RANGES[key]
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise InputError(f"{where}: field {key!r} is {value}, outside {bound}")
    return value


def prepare(directory: Path) -> Recorded:
    """Read and check ``directory``'s ``provenance.json`` and files before anything runs: a
    malformed or inconsistent record, or an unreadable file, is an `InputError` naming it."""
    from wevent.experiments.registry import EXPERIMENTS

    if not directory.is_dir():
        raise InputError(f"--check: {directory} is not a directory")
    where = directory / provenance.PROVENANCE
    try:
        record = provenance.read_provenance(where)
    except OSError as exc:
        hint = ""
        if any((child / provenance.PROVENANCE).is_file() for child in directory.iterdir()):
            hint = " (it holds one directory per experiment, as `reproduce all` writes: give each)"
        raise InputError(f"{where}: cannot read it ({exc.strerror or exc}){hint}") from None
    except ValueError as exc:  # a JSON error, or not of the schema (the message names the file)
        text = str(exc)
        raise InputError(text if text.startswith(str(where)) else f"{where}: {text}") from None
    experiment = record.get("experiment")
    if not isinstance(experiment, str) or experiment not in EXPERIMENTS:
        raise InputError(f"{where}: field 'experiment' ({experiment!r}) is not one wevent knows")
    repeats = _whole(where, "repeats", record.get("repeats"))
    seeds = record.get("seeds")
    if not isinstance(seeds, list) or not seeds:
        raise InputError(f"{where}: field 'seeds' is not a non-empty list")
    seed = _whole(where, "seed", seeds[0])
    assert repeats is not None and seed is not None
    if seeds != list(range(seed, seed + repeats)):
        raise InputError(
            f"{where}: field 'seeds' is not {seed}..{seed + repeats - 1}, the seeds of "
            f"--seed {seed} with {repeats} repeats"
        )
    users = _whole(where, "users", record.get("users"), optional=True)
    slots = _whole(where, "slots", record.get("slots"), optional=True)
    quick = record.get("quick")
    if not isinstance(quick, bool):
        raise InputError(f"{where}: field 'quick' is not true or false")
    files = record.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        raise InputError(f"{where}: field 'files' is not a map of file names to hashes")
    command = record.get("command")
    if not isinstance(command, str):
        raise InputError(f"{where}: field 'command' is not a string")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InputError(f"{where}: field 'command' cannot be read ({exc})") from None
    out = argv[argv.index("--out") + 1] if "--out" in argv[:-1] else None
    expected = provenance.command_line(
        experiment, Path(out or "."), repeats, quick, seed, users, slots
    )
    if out is None or shlex.split(expected) != argv:
        raise InputError(
            f"{where}: field 'command' ({command}) does not match the recorded settings "
            f"(expected {expected})"
        )
    committed: dict[str, bytes] = {}
    for path in sorted(directory.iterdir()):
        if not path.is_file() or path.name == provenance.PROVENANCE:
            continue
        try:
            data = path.read_bytes()
            if path.suffix != ".png":
                data.decode("utf-8")
        except OSError as exc:
            raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        committed[path.name] = data
    return Recorded(
        directory, experiment, command, out, repeats, quick, seed, users, slots, committed
    )


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
    ``clocked`` (clock readings) only for a positive time on both sides. The columns that
    describe a run (`_RUN_KEYS`) are compared as text only. Empty when they agree."""
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


def _text_lines(want: str, got: str) -> list[str]:
    a, b = want.splitlines(), got.splitlines()
    for line, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return [f"line {line}: {x!r} became {y!r}"]
    return [f"{len(a)} lines committed, {len(b)} now"] if len(a) != len(b) else []


def _sections(text: str) -> list[tuple[str, str]]:
    """``table.md`` cut at its ``### NAME`` headings: (name, text), the header first as ""."""
    out: list[tuple[str, str]] = []
    name, lines = "", list[str]()
    for line in text.splitlines():
        if line.startswith("### "):
            out.append((name, "\n".join(lines)))
            name, lines = line[4:].strip(), []
        lines.append(line)
    out.append((name, "\n".join(lines)))
    return out


def _timed_table(want: str, got: str, judged: str) -> list[str]:
    """A timed experiment's ``table.md`` (module docstring); ``judged``: the orderings and
    ratios the current code gives from the committed ``runs.csv``."""
    clocks = {m.upper() for m in WALL_CLOCK}
    a, b = _sections(want), _sections(got)
    if [n for n, _ in a] != [n for n, _ in b]:
        return [f"sections {[n for n, _ in a]} became {[n for n, _ in b]}"]
    problems = []
    for (name, x), (_, y) in zip(a, b, strict=True):
        if name in ("ORDERINGS", "RATIOS"):
            continue
        if name in clocks:
            x, y = _NUMBER.sub("#", x), _NUMBER.sub("#", y)
        problems += [f"### {name or '(header)'}, {p}" for p in _text_lines(x, y)]
    start = want.find("### ORDERINGS")
    tail = want[start:].rstrip("\n") if start >= 0 else ""
    problems += [
        f"orderings and ratios rebuilt from the committed runs.csv: {p}"
        for p in _text_lines(tail, judged.rstrip("\n"))
    ]
    return problems


def _verdict(
    name: str, want: bytes, got: bytes, compare: Callable[[str, str], list[str]]
) -> FileVerdict:
    if want == got:
        return FileVerdict(name, "byte-identical")
    problems = compare(want.decode("utf-8"), got.decode("utf-8"))
    if problems:
        return FileVerdict(name, "", tuple(problems))
    return FileVerdict(name, f"equal to a relative {REL:g}")


def recheck(directory: Path | Recorded) -> Recheck:
    """Re-run what ``directory`` records and compare (module docstring). An unreadable or
    inconsistent ``provenance.json`` is an `InputError`; differences are in the result."""
    from wevent.experiments.registry import run_experiment

    run = directory if isinstance(directory, Recorded) else prepare(directory)
    result = Recheck(run.directory, run.command)
    result.problems.extend(provenance.check_directory(run.directory))
    if Path(run.out).name != run.directory.name:
        result.notes.append(f"the recorded --out ({run.out}) names another directory")
    timed = run.experiment in TIMED_EXPERIMENTS
    clocked = frozenset(WALL_CLOCK) if timed else frozenset()
    skip = {provenance.FINGERPRINT}
    committed = {n: d for n, d in run.committed.items() if n not in skip}

    with tempfile.TemporaryDirectory(prefix="wevent-recheck-") as tmp, without_plots():
        fresh = Path(tmp)
        run_experiment(
            run.experiment,
            fresh,
            run.repeats,
            run.quick,
            run.seed,
            users=run.users,
            slots=run.slots,
        )
        rerun = {p.name: p.read_bytes() for p in sorted(fresh.iterdir()) if p.is_file()}
    for name in sorted(set(committed) | set(rerun)):
        if name.endswith(".png") and name not in rerun:
            result.files.append(
                FileVerdict(
                    name, "not compared: a plot, not drawn by the re-run (its hash is checked)"
                )
            )
        elif name not in rerun:
            result.files.append(FileVerdict(name, "", ("committed, not written by the re-run",)))
        elif name not in committed:
            result.files.append(FileVerdict(name, "", ("written by the re-run, not committed",)))
        elif name == "results.csv":
            result.files.append(
                _verdict(name, committed[name], rerun[name], provenance.compare_fingerprints)
            )
        elif name.endswith(".csv"):
            result.files.append(
                _verdict(
                    name,
                    committed[name],
                    rerun[name],
                    lambda a, b: compare_wide(a, b, clocked=clocked),
                )
            )
        elif timed and name == "table.md":
            result.files.append(_timed_table_verdict(run, committed[name], rerun[name]))
        else:
            result.files.append(_verdict(name, committed[name], rerun[name], _text_lines))
    if provenance.FINGERPRINT in run.committed:
        got = provenance.fingerprint(run.experiment).encode("utf-8")
        result.files.append(
            _verdict(
                provenance.FINGERPRINT,
                run.committed[provenance.FINGERPRINT],
                got,
                provenance.compare_fingerprints,
            )
        )
    return result


def _timed_table_verdict(run: Recorded, want: bytes, got: bytes) -> FileVerdict:
    from wevent.experiments.running_time import judged

    with tempfile.TemporaryDirectory(prefix="wevent-recheck-") as tmp:
        runs = Path(tmp) / "runs.csv"
        runs.write_bytes(run.committed.get("runs.csv", b""))
        rebuilt = judged(runs, run.quick)
    problems = _timed_table(want.decode("utf-8"), got.decode("utf-8"), rebuilt)
    if problems:
        return FileVerdict("table.md", "", tuple(problems))
    return FileVerdict(
        "table.md",
        "equal but for clock readings (their sections compared with the numbers masked; the "
        "orderings and ratios rebuilt from the committed runs.csv, equal)",
    )


def summary(result: Recheck) -> list[str]:
    """The lines `wevent reproduce --check` prints for one directory."""
    if result.ok:
        status = "SAME"
    elif result.numbers_same:
        status = "SAME NUMBERS, PROVENANCE NOT CLEAN"
    else:
        status = "DIFFERENT"
    lines = [f"{result.directory}: {status} ({result.command})"]
    lines.extend(f"  {problem}" for problem in result.problems)
    lines.extend(f"  note: {note}" for note in result.notes)
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
