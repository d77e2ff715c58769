"""Where reproduced results come from, and a fingerprint that goes stale with the data path.

`wevent reproduce` writes two files beside an experiment's results:

* ``provenance.json`` (format below, `SCHEMA_VERSION`): the wevent version, the git commit of
  the sources that ran (and whether they had uncommitted changes), the command, the seeds, the
  sizes, the UTC time, and the SHA-256 of every file the run wrote;
* ``fingerprint.csv``: the ``results.csv`` of the same experiment at a tiny size
  (`TINY_USERS` users, `TINY_SLOTS` slots, one repeat, seed 0, the quick sweep points), which
  takes seconds and runs before the experiment (a failure there costs nothing). The test suite
  re-runs it (`tests/test_reproduction_provenance.py`) and compares it byte for byte with the
  committed one: a change to a stream, a mechanism or a metric moves the tiny results too, so
  the committed results fail the suite until they are regenerated, and the documentation cannot
  keep numbers the code no longer gives.

``provenance.json`` fields: ``schema_version`` (1), ``experiment``, ``command`` (the `wevent
reproduce` command that wrote the directory, one experiment per command), ``seeds`` (every
seed the runs used), ``repeats``, ``quick``, ``users`` and ``slots`` (null: the experiment's
own size), ``wevent_version``, ``commit`` (null outside a git checkout), ``sources_modified``
(uncommitted changes under ``wevent/`` when it ran; null outside a checkout), ``python``,
``numpy``, ``created_utc``, ``fingerprint`` (``users``, ``slots``, ``seed``) and ``files``
(name -> SHA-256 of every other file in the directory).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import platform
import shlex
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from wevent.accounting.budget import BudgetError
from wevent.accounting.durable import file_sha256
from wevent.errors import InputError
from wevent.experiments.timing import TIMED_EXPERIMENTS, WALL_CLOCK
from wevent.verifier.audit import tool_version

__all__ = [
    "FINGERPRINT",
    "PROVENANCE",
    "SCHEMA_VERSION",
    "TINY_SLOTS",
    "TINY_USERS",
    "check_directory",
    "command_line",
    "compare_fingerprints",
    "fingerprint",
    "read_provenance",
    "source_commit",
    "write_provenance",
]

SCHEMA_VERSION = 1
PROVENANCE = "provenance.json"
FINGERPRINT = "fingerprint.csv"
TINY_USERS = 500  # population division needs 2w users per window: w reaches 200
TINY_SLOTS = 30
_PACKAGE = Path(__file__).resolve().parent.parent  # the wevent package directory


def fingerprint(experiment: str) -> str:
    """The tiny-size ``results.csv`` of ``experiment`` (seed 0, one repeat, quick points; no
    plots drawn). An experiment that cannot run at that size is an `InputError` saying so."""
    from wevent.experiments.harness import without_plots
    from wevent.experiments.registry import EXPERIMENTS, run_experiment

    sized = EXPERIMENTS[experiment].sized is not None
    with tempfile.TemporaryDirectory(prefix="wevent-fingerprint-") as tmp, without_plots():
        out = Path(tmp)
        try:
            if sized:
                run_experiment(experiment, out, 1, True, 0, users=TINY_USERS, slots=TINY_SLOTS)
            else:  # sizes of its own: the quick size is its smallest
                run_experiment(experiment, out, 1, True, 0)
        except BudgetError as exc:
            raise InputError(
                f"{experiment} cannot run at the fingerprint's tiny size ({exc}); "
                "--no-fingerprint skips it"
            ) from None
        return (out / "results.csv").read_text(encoding="utf-8")


def source_commit() -> tuple[str | None, bool | None]:
    """The git commit the package's sources are checked out at, and whether ``wevent/`` has
    uncommitted changes; (None, None) without git, or when the package is not a tracked part of
    the checkout around it (an installed copy inside some other project's tree)."""
    root = _PACKAGE.parent
    try:
        subprocess.run(  # fails unless this very file is tracked by the repository around it
            ["git", "-C", str(_PACKAGE), "ls-files", "--error-unmatch", "__init__.py"],
            capture_output=True,
            timeout=30,
            check=True,
        )
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", str(_PACKAGE)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (head or None), bool(status.strip())


def command_line(
    experiment: str,
    out_dir: Path,
    repeats: int,
    quick: bool,
    seed: int,
    users: int | None,
    slots: int | None,
) -> str:
    """The `wevent reproduce` command that writes these results (options in a fixed order)."""
    argv = ["wevent", "reproduce", experiment]
    if quick:
        argv.append("--quick")
    if users is not None:
        argv += ["--users", str(users)]
    if slots is not None:
        argv += ["--slots", str(slots)]
    argv += ["--repeats", str(repeats), "--seed", str(seed), "--out", out_dir.as_posix()]
    return shlex.join(argv)


def write_provenance(
    out_dir: Path,
    *,
    experiment: str,
    command: str,
    repeats: int,
    quick: bool,
    seed: int,
    users: int | None,
    slots: int | None,
    tiny: str | None,
    written: Sequence[Path],
    sized: bool = True,
) -> Path:
    """Write ``fingerprint.csv`` (``tiny``, when given) and ``provenance.json`` into
    ``out_dir``, hashing the files the run ``written`` there (and the fingerprint): a file left
    from an earlier run is not recorded, so `check_directory` reports it. ``sized``: the
    fingerprint ran at `TINY_USERS` x `TINY_SLOTS` (else at the experiment's quick size).
    Returns the provenance file's path."""
    if tiny is not None:
        (out_dir / FINGERPRINT).write_text(tiny, encoding="utf-8")
    else:  # an earlier run's fingerprint would not describe these results
        (out_dir / FINGERPRINT).unlink(missing_ok=True)
    commit, modified = source_commit()

    names = {Path(p).name for p in written if Path(p).parent.resolve() == out_dir.resolve()}
    if tiny is not None:
        names.add(FINGERPRINT)
    names.discard(PROVENANCE)
    files = {name: file_sha256(out_dir / name) for name in sorted(names)}
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "experiment": experiment,
        "command": command,
        "seeds": list(range(seed, seed + repeats)),
        "repeats": repeats,
        "quick": quick,
        "users": users,
        "slots": slots,
        "wevent_version": tool_version(),
        "commit": commit,
        "sources_modified": modified,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fingerprint": None if tiny is None else _fingerprint_size(sized),
        "files": files,
    }
    path = out_dir / PROVENANCE
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def _fingerprint_size(sized: bool) -> dict[str, Any]:
    if sized:
        return {"users": TINY_USERS, "slots": TINY_SLOTS, "seed": 0, "repeats": 1}
    return {"size": "quick", "seed": 0, "repeats": 1}


# the measured columns: numbers to a tolerance
_MEASURED = frozenset({"value", "std", "ci_low", "ci_high"})


def _number(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return math.nan


def _wall_clock_cell(name: str, cell_a: str, cell_b: str) -> bool:
    """Whether two measured cells of a wall-clock row agree in what a fingerprint can hold: the
    ``value`` (a time) finite and positive in both, the others (spread and interval) both
    numbers or both NaN (one repeat)."""
    x, y = _number(cell_a), _number(cell_b)
    if name == "value":
        return all(math.isfinite(v) and v > 0 for v in (x, y))
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y) and cell_a == cell_b
    return math.isfinite(x) and math.isfinite(y)


def compare_fingerprints(want: str, got: str, *, rel: float = 1e-9) -> list[str]:
    """How two fingerprints differ, one line per cell: every column exactly but the measured
    ones (``value``, ``std``, ``ci_low``, ``ci_high``), which agree to a relative ``rel``
    (numpy's vectorized float kernels differ in the last digits between CPUs with and without
    AVX-512; a change to the data path moves results far more). Empty when they agree.

    A row of a timed experiment (`wevent.experiments.timing.TIMED_EXPERIMENTS`) whose ``metric``
    is a wall-clock measurement (`wevent.experiments.timing.WALL_CLOCK`: microseconds per slot,
    never the same twice) is compared in every other column exactly and
    in its measured ones only for presence: a positive finite ``value`` on both sides, and the
    other measured cells both numbers or both NaN. Its deterministic companions (the slot
    counts of the same runs) are ordinary metrics, compared to ``rel``."""
    a = list(csv.reader(io.StringIO(want)))
    b = list(csv.reader(io.StringIO(got)))
    if len(a) != len(b) or not a or a[0] != b[0]:
        return [f"{len(a) - 1} result rows committed, {len(b) - 1} now, or other columns"]
    measured = {i: name for i, name in enumerate(a[0]) if name in _MEASURED}
    metric = a[0].index("metric") if "metric" in a[0] else None
    experiment = a[0].index("experiment") if "experiment" in a[0] else None
    problems = []
    for line, (row_a, row_b) in enumerate(zip(a, b, strict=True), start=1):
        if len(row_a) != len(row_b):
            problems.append(f"line {line}: {row_a} became {row_b}")
            continue
        clocked = (
            metric is not None
            and experiment is not None
            and line > 1
            and row_a[metric] == row_b[metric]
            and row_a[metric] in WALL_CLOCK
            and row_a[experiment] == row_b[experiment]
            and row_a[experiment] in TIMED_EXPERIMENTS
        )
        for i, (cell_a, cell_b) in enumerate(zip(row_a, row_b, strict=True)):
            if clocked and i in measured:
                if not _wall_clock_cell(measured[i], cell_a, cell_b):
                    problems.append(
                        f"line {line}: wall time {cell_a} became {cell_b} ({','.join(row_a[:6])})"
                    )
                continue
            if cell_a == cell_b:
                continue
            x = y = math.nan
            if i in measured:
                with contextlib.suppress(ValueError):  # not numbers: they differ as text
                    x, y = float(cell_a), float(cell_b)
            if not (math.isfinite(x) and math.isclose(x, y, rel_tol=rel, abs_tol=1e-300)):
                problems.append(f"line {line}: {cell_a} became {cell_b} ({','.join(row_a[:5])})")
    return problems


def read_provenance(path: Path) -> Mapping[str, Any]:
    """A ``provenance.json`` (its schema version checked)."""
    record = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(record, dict) or record.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: not a provenance file of schema version {SCHEMA_VERSION}")
    return record


def check_directory(directory: Path) -> list[str]:
    """What is wrong with committed results in ``directory`` without running anything: a file
    changed, added or missing since its run, no fingerprint, or sources that were not a clean
    commit. Empty when the directory is exactly what its recorded command wrote."""
    try:
        record = read_provenance(directory / PROVENANCE)
    except (OSError, ValueError) as exc:
        return [f"{directory}: no readable {PROVENANCE} ({exc})"]
    problems = []
    files: Mapping[str, str] = record.get("files", {})
    present = {p.name for p in directory.iterdir() if p.is_file() and p.name != PROVENANCE}
    for name in sorted(present - set(files)):
        problems.append(f"{directory / name}: not written by the recorded run")
    for name, digest in sorted(files.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{path}: recorded but missing")
        elif file_sha256(path) != digest:
            problems.append(f"{path}: changed since the recorded run")
    if record.get("fingerprint") is None or FINGERPRINT not in files:
        problems.append(f"{directory}: written without a fingerprint (--no-fingerprint)")
    if record.get("commit") is None or record.get("sources_modified") is not False:
        problems.append(f"{directory}: not written from a clean git commit of the sources")
    return problems
