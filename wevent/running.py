"""`wevent run`: an allocator end to end on a stream, with the guard in the loop.

The run writes the ledger (the foundation's formats, by extension) and the releases
(CSV ``slot,status,cell,release,truth``), and summarizes publications, skips, nullified slots and
the error against the true statistics. A refused charge stops the run; everything up to it is
still written, so nothing is lost.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from accounting.budget import BudgetError
from accounting.formats import ledger_kind, write_ledger
from accounting.population import Population
from accounting.spending import BudgetExceeded, EvidenceRejected
from mechanisms.allocators import algebra_for, classes_of, make_kernel
from mechanisms.central import CentralRunner, InvalidAllocation, SlotRecord
from mechanisms.streams import SYNTHETIC_KINDS, CsvStream, Stream, SyntheticStream
from verifier.guard import Guard
from wevent.tracing import class_groups

__all__ = ["RunSummary", "open_stream", "run_mechanism"]

FloatArray = npt.NDArray[np.float64]


@dataclass
class RunSummary:
    mechanism: str
    variant: str
    arithmetic: str
    users: int
    classes: int
    slots_requested: int
    records: list[SlotRecord] = field(default_factory=list)
    refusal: BudgetExceeded | EvidenceRejected | InvalidAllocation | None = None
    charges: int = 0

    @property
    def ok(self) -> bool:
        return self.refusal is None

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r.status == status)

    def errors(self) -> dict[str, float]:
        """Mean absolute and mean squared error of the released histograms against the truth,
        on frequencies (counts / users), averaged over slots and cells; MSE is 001 Eq. 5's
        AMRE as the paper defines it (the mean of (1/d) ||r - c||^2)."""
        if not self.records or self.users == 0:
            return {}
        rel = np.stack([r.release for r in self.records]) / self.users
        tru = np.stack([r.truth for r in self.records]).astype(np.float64) / self.users
        diff = rel - tru
        return {"mae": float(np.mean(np.abs(diff))), "amre": float(np.mean(diff**2))}

    def describe(self) -> list[str]:
        lines = [
            f"{self.mechanism} ({self.variant}, {self.arithmetic} arithmetic): "
            f"{self.users} users in {self.classes} requirement class(es), "
            f"{len(self.records)} of {self.slots_requested} slots run",
            f"  published {self.count('published')}, skipped {self.count('skipped')}, "
            f"nullified {self.count('nullified')}",
        ]
        errs = self.errors()
        if errs:
            lines.append(
                f"  error vs truth (frequencies): mean absolute {errs['mae']:.6g}, "
                f"AMRE (001 Eq. 5) {errs['amre']:.6g}"
            )
        lines.append(f"  ledger: {self.charges} charges, every one accepted by the guard")
        if self.refusal is not None:
            lines.append(f"  STOPPED: {self.refusal}")
        return lines


def open_stream(
    spec: str, population: Population, slots: int | None, seed: int, domain: int | None
) -> Stream:
    """``lns``/``sin``/``log`` (001 Section 6.1) or the path of a ``user,slot,value`` CSV."""
    sizes = [c.count for c in population.classes]
    if spec in SYNTHETIC_KINDS:
        if slots is None:
            raise BudgetError(f"--slots is required with the synthetic stream {spec!r}")
        return SyntheticStream(spec, slots, sizes, seed)
    path = Path(spec)
    if not path.suffix.lower() == ".csv" and not path.exists():
        raise BudgetError(
            f"--stream: {spec!r} is neither a synthetic stream ({', '.join(SYNTHETIC_KINDS)}) "
            "nor an existing CSV file"
        )
    class_of = {u: c.index for c in population.classes for u in c.members}
    return CsvStream.load(path, class_of, len(sizes), domain=domain)


def write_releases(records: Sequence[SlotRecord], path: Path) -> None:
    """CSV ``slot,status,cell,release,truth``, one row per slot and histogram cell (written to a
    temporary name, then renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["slot", "status", "cell", "release", "truth"])
        for r in records:
            for cell, (value, true) in enumerate(zip(r.release, r.truth, strict=True)):
                out.writerow([r.slot, r.status, cell, repr(float(value)), int(true)])
    tmp.replace(path)


def check_output(path: Path, what: str) -> None:
    """Refuse an output path that cannot be written before any slot runs."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise BudgetError(f"{what}: directory {parent} does not exist")
    if path.is_dir():
        raise BudgetError(f"{what}: {path} is a directory")
    if what == "--ledger":
        ledger_kind(path)
    elif path.suffix.lower() != ".csv":
        raise BudgetError(f"{what}: {path}: releases are written as CSV (use a .csv name)")


def run_mechanism(
    mechanism: str,
    population: Population,
    stream: Stream,
    *,
    slots: int,
    seed: int,
    variant: str = "sound",
    arithmetic: str = "exact",
    ledger_path: Path | None = None,
    releases_path: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> RunSummary:
    """Run ``slots`` slots; write the ledger and releases (also after a refusal)."""
    for path, what in ((ledger_path, "--ledger"), (releases_path, "--releases")):
        if path is not None:
            check_output(path, what)
    if slots > stream.slots:
        raise BudgetError(f"--slots {slots} is more than the stream's {stream.slots} slots")
    kernel = make_kernel(
        mechanism, algebra_for(arithmetic), classes_of(population, mechanism), variant
    )
    guard = Guard(population)
    groups = class_groups(population, guard)
    data_seed, noise_seed = np.random.SeedSequence(seed).spawn(2)
    runner = CentralRunner(
        kernel=kernel,
        spender=guard,
        groups=groups,
        sizes=[c.count for c in population.classes],
        stream=stream,
        data_rng=np.random.default_rng(data_seed),
        noise_rng=np.random.default_rng(noise_seed),
        mechanism=mechanism,
    )
    summary = RunSummary(
        mechanism, variant, arithmetic, len(population), len(population.classes), slots
    )
    try:
        for _ in range(slots):
            summary.records.append(runner.step())
            if progress is not None:
                progress(1)
    except (BudgetExceeded, EvidenceRejected, InvalidAllocation) as exc:
        summary.refusal = exc
    finally:
        summary.charges = len(guard.ledger)
        try:
            if ledger_path is not None:
                write_ledger(guard.ledger, ledger_path)
            if releases_path is not None:
                write_releases(summary.records, releases_path)
        except OSError as exc:
            raise BudgetError(f"cannot write the run's output: {exc}") from exc
    return summary
