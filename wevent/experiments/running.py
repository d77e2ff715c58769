"""`wevent run`: an allocator end to end on a stream, with the guard in the loop.

The run writes the ledger (the foundation's formats, by extension) and the releases
(CSV ``slot,status,cell,release,truth``), and summarizes publications, skips, nullified slots and
the error against the true statistics. A refused charge stops the run; everything up to it is
still written, so nothing is lost.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError, float_display
from wevent.accounting.durable import sync_rename
from wevent.accounting.formats import ledger_kind, write_ledger
from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.recovery import DurableSink, Recovered, is_durable_path, open_durable
from wevent.accounting.sinks import LedgerSink, ReplayMismatch, ReplaySink
from wevent.accounting.spending import BudgetExceeded, EvidenceRejected
from wevent.errors import AllocatorError
from wevent.experiments import metrics
from wevent.experiments.timing import SlotClock, TimedSpender, TimedStream
from wevent.mechanisms.allocators import ORACLE_CHOICE, algebra_for, classes_of
from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.registry import (
    POPULATION_BUILTIN,
    data_path_for,
    kernel_for,
    model_of,
)
from wevent.mechanisms.central import CentralRunner, InvalidAllocation, SlotRecord
from wevent.mechanisms.datapath import DataPath, central_path
from wevent.mechanisms.local import (
    LocalBudgetRunner,
    PopulationRunner,
    ReleaseOptions,
    population_arrays,
)
from wevent.mechanisms.pool import PoolExhausted
from wevent.mechanisms.streams import (
    SYNTHETIC_KINDS,
    CsvStream,
    PerUserStream,
    Stream,
    SyntheticStream,
)
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups

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
    refusal: BudgetExceeded | EvidenceRejected | InvalidAllocation | PoolExhausted | None = None
    charges: int = 0
    reports: int = 0  # per-user reports (charges expanded to their users)
    setup_note: str = ""
    ledger: Ledger | None = None  # the guard's ledger (what it accepted), for a batch check
    durable: str = ""  # the write-ahead ledger's layout ("chained-jsonl", "segments") if any
    head: str = ""  # its chain head after the run (anchor it elsewhere)
    committed: int = 0  # its committed records (or segments)
    recovered: Recovered | None = None  # what --resume found
    options: str = ""  # the data path's options, when not the papers' defaults

    @property
    def ok(self) -> bool:
        return self.refusal is None

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r.status == status)

    def errors(self) -> dict[str, float]:
        """The error of the released histograms against the truth, averaged over slots and
        cells, under the papers' names (`wevent.experiments.metrics`): ``mae``, the mean absolute
        frequency error; ``amse``, 000 Section VI-B's mean squared error on frequencies
        (counts / users); ``amre``, 001 Eq. 5's (1/T) sum_t (1/d) ||r_t - c_t||^2 on counts
        (despite its name a squared error: ``amre = users^2 * amse``)."""
        if not self.records or self.users == 0:
            return {}
        rel = np.stack([r.release for r in self.records]).astype(np.float64)
        tru = np.stack([r.truth for r in self.records]).astype(np.float64)
        return {
            "mae": float(np.mean(np.abs(rel - tru))) / self.users,
            "amse": metrics.amse(rel / self.users, tru / self.users),
            "amre": metrics.amre(rel, tru),
        }

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
                f"  error vs truth: mean absolute (frequencies) {float_display(errs['mae'])}, "
                f"AMSE (000, frequencies) {float_display(errs['amse'])}, "
                f"AMRE (001 Eq. 5, counts) {float_display(errs['amre'])}"
            )
        if self.setup_note:
            lines.insert(1, f"  {self.setup_note}")
        if self.options:
            lines.insert(1, f"  {self.options}")
        if self.records and self.users:
            cfpu = self.reports / (len(self.records) * self.users)
            lines.append(
                f"  communication: {float_display(cfpu, 4)} reports per user per slot (CFPU)"
            )
        if self.refusal is None:
            lines.append(f"  ledger: {self.charges} charges, every one accepted by the guard")
        else:
            lines.append(f"  ledger: {self.charges} charges accepted before the refusal")
            lines.append(f"  REFUSED, the run stopped: {self.refusal}")
        return lines


def open_stream(
    spec: str, population: Population, slots: int | None, seed: int, domain: int | None
) -> Stream:
    """``lns``/``sin``/``log`` (001 Section 6.1; ``domain`` > 2 makes them categorical) or the
    path of a ``user,slot,value`` CSV."""
    sizes = [c.count for c in population.classes]
    if spec in SYNTHETIC_KINDS:
        if slots is None:
            raise BudgetError(f"--slots is required with the synthetic stream {spec!r}")
        return SyntheticStream(spec, slots, sizes, seed, 2 if domain is None else domain)
    path = Path(spec)
    if not path.suffix.lower() == ".csv" and not path.exists():
        raise BudgetError(
            f"--stream: {spec!r} is neither a synthetic stream ({', '.join(SYNTHETIC_KINDS)}) "
            "nor an existing CSV file"
        )
    class_of = {u: c.index for c in population.classes for u in c.members}
    return CsvStream.load(path, class_of, len(sizes), domain=domain)


def _release_rows(r: SlotRecord) -> list[list[str]]:
    return [
        [str(r.slot), r.status, str(cell), repr(float(value)), str(int(true))]
        for cell, (value, true) in enumerate(zip(r.release, r.truth, strict=True))
    ]


class ReleaseStream:
    """Releases written slot by slot (CSV ``slot,status,cell,release,truth``), each slot's rows
    flushed when its step returns. With a write-ahead ledger every charge of a slot is committed
    before its noise is drawn, so every release on disk has its charges on disk.

    A fresh run streams to ``PATH.partial``, renamed to ``PATH`` when the run ends (or the guard
    stops it); after a crash ``PATH.partial`` holds the releases so far. A resumed run streams
    to ``PATH.resume`` and checks every replayed slot against the releases already on disk
    (``PATH.partial``, else ``PATH``): the same seed and data give the same releases, and a run
    that would publish a slot again with other values is refused (`ReplayMismatch`). Only when
    it ends is ``PATH`` replaced; a run that fails leaves the earlier files as they were."""

    def __init__(self, path: Path, *, resume: bool) -> None:
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self._earlier: dict[str, list[list[str]]] = {}
        self._last = ""  # the earlier file's last slot: a crash may have cut its rows short
        if resume:
            source = self.partial if self.partial.exists() else path
            if source.exists():
                text = source.read_text(encoding="utf-8")
                if not text.endswith("\n"):  # a row torn by the crash
                    text = text[: text.rfind("\n") + 1]
                for row in list(csv.reader(text.splitlines()))[1:]:
                    self._earlier.setdefault(row[0], []).append(row)
                    self._last = row[0]
            self.target = path.with_name(path.name + ".resume")
        else:
            self.target = self.partial
        self._fh = self.target.open("w", newline="", encoding="utf-8")
        self._out = csv.writer(self._fh)
        self._out.writerow(["slot", "status", "cell", "release", "truth"])
        self._fh.flush()

    def write(self, r: SlotRecord) -> None:
        rows = _release_rows(r)
        earlier = self._earlier.get(str(r.slot))
        if str(r.slot) == self._last and earlier is not None:
            rows_known = rows[: len(earlier)]  # the rows of it the crash let reach the disk
        else:
            rows_known = rows
        if earlier is not None and earlier != rows_known:
            raise ReplayMismatch(
                f"--resume: the releases of slot {r.slot} would differ from the ones already "
                f"in {self.path} (another seed, stream or flags): nothing is published again"
            )
        self._out.writerows(rows)
        self._fh.flush()

    def finish(self) -> None:
        """The run ended (or the guard stopped it): publish the file under its name."""
        self._fh.close()
        sync_rename(self.target, self.path)
        if self.target != self.partial:
            self.partial.unlink(missing_ok=True)

    def abandon(self) -> None:
        """The run failed: keep what is on disk (a fresh run's PATH.partial holds its releases;
        a resumed run's own file goes, the earlier ones stay)."""
        self._fh.close()
        if self.target != self.partial:
            self.target.unlink(missing_ok=True)


def write_releases(records: Sequence[SlotRecord], path: Path) -> None:
    """CSV ``slot,status,cell,release,truth``, one row per slot and histogram cell (written to a
    temporary name, then renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["slot", "status", "cell", "release", "truth"])
        for r in records:
            out.writerows(_release_rows(r))
    tmp.replace(path)


def check_output(path: Path, what: str) -> None:
    """Refuse an output path that cannot be written before any slot runs."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise BudgetError(f"{what}: directory {parent} does not exist")
    if path.is_dir() and not (what == "--ledger" and is_durable_path(path)):
        raise BudgetError(f"{what}: {path} is a directory")
    if what == "--ledger":
        if not is_durable_path(path):
            ledger_kind(path)
        return
    elif path.suffix.lower() != ".csv":
        raise BudgetError(f"{what}: {path}: releases are written as CSV (use a .csv name)")


def write_outputs(*writes: tuple[Path | None, Callable[[Path], None]]) -> None:
    """Write every output whose path is given, each even if an earlier one failed (a ledger
    too large for memory must not cost the releases too); failures are one `BudgetError`."""
    failures = []
    for path, write in writes:
        if path is None:
            continue
        try:
            write(path)
        except OSError as exc:
            failures.append(str(exc))
    if failures:
        raise BudgetError("cannot write the run's output: " + "; ".join(failures))


def _check_complete(
    stream: Stream, population: Population, slots: int, budgets: Sequence[Fraction]
) -> None:
    """Population allocators perturb the drawn users' own values: with recorded data every
    reporting user needs a value at every slot of the run."""
    if not isinstance(stream, PerUserStream):
        return
    for t in range(1, slots + 1):
        seen = stream.histograms(t, np.random.default_rng(0)).sum(axis=1)
        for c in population.classes:
            if budgets[c.index] > 0 and int(seen[c.index]) != c.count:
                raise BudgetError(
                    f"--stream: slot {t} has values for {int(seen[c.index])} of the {c.count} "
                    f"users of {c.name}; population allocators draw users and need each drawn "
                    "user's value, so every user needs a row at every slot (fill the gaps, "
                    "e.g. with the last known value, or use a budget-division allocator)"
                )


def _population_digest(population: Population) -> str:
    """SHA-256 over every user's requirement, in user order (the run header's ``population``)."""
    digest = hashlib.sha256()
    for cls in population.classes:  # the canonical order is class by class
        text = f"\x00{cls.requirement!r}\x01"
        digest.update("".join(user + text for user in cls.members).encode())
    return digest.hexdigest()


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
    oracle: str | None = None,
    population_allocator: Any = None,
    resume: bool = False,
    identity: Mapping[str, object] | None = None,
    clock: SlotClock | None = None,
    release: ReleaseOptions | None = None,
    threshold: str | None = None,
) -> RunSummary:
    """Run ``slots`` slots; write the ledger and releases (also after a refusal).

    ``release`` (`ReleaseOptions`: post-processing, pooling, a forced first publication) applies
    to the local allocators; ``threshold`` (``sqrt``, 001's rule and the default, or
    ``kellaris``, 1/eps) to the central allocators on 001's data path. Neither changes what a
    decision spends.

    ``oracle`` (grr or oue, default grr) is the frequency oracle of the non-personalized local
    allocators; the personalized ones report through GRR (the personalized frequency oracle).
    ``population_allocator`` (a `PopulationAllocator`, e.g. a third-party one the gate checks)
    supplies the setup and kernel of a population-division run named ``mechanism``; any other
    name is a budget allocator (`registry.kernel_for`: a built-in, an entry point or
    ``module:attribute``, whose variant and requirement kind are checked as `trace` checks them).

    A ``ledger_path`` ending in ``.jsonl`` (chained JSONL) or ``.wledger`` (Parquet segments)
    is written ahead: the guard commits every charge to it before the charge's noise is drawn,
    and the releases are streamed slot by slot behind it. ``resume`` continues such a ledger
    after a crash: its torn tail is cut off, and the run starts again from slot 1 with the same
    seed, checking that it asks for exactly the committed charges (`ReplaySink`) and writing
    on from where the ledger ends. The run's header (allocator, flags, domain, a digest of the
    population's requirements, the releases file's name, and ``identity``: what the caller
    knows of the stream, e.g. a CSV's SHA-256) is kept beside the ledger and a resumed run must
    match it; the seed is never stored (a digest of a small seed would give it away), so a
    replay is held to the releases already on disk instead (`ReleaseStream`). A ``.csv`` or
    ``.parquet`` ledger is written at the end.

    ``clock`` (a `SlotClock`) times every slot's step, the guard's calls and the stream's
    (`wevent.experiments.timing`); only the budget-division runners (central and local budget)
    take it."""
    for path, what in ((ledger_path, "--ledger"), (releases_path, "--releases")):
        if path is not None:
            check_output(path, what)
    if slots > stream.slots:
        raise BudgetError(f"--slots {slots} is more than the stream's {stream.slots} slots")
    model = model_of(mechanism)  # None: a third-party allocator's name
    if model is None:
        model = "population" if population_allocator is not None else "central"
    if oracle is not None and mechanism not in ORACLE_CHOICE:
        raise BudgetError(
            f"--oracle applies to {', '.join(ORACLE_CHOICE)}; {mechanism} reports through "
            "the personalized frequency oracle (GRR)"
            if model in ("local-budget", "population")
            else f"--oracle applies to the local allocators, not to the central {mechanism}"
        )
    if clock is not None and model == "population":
        raise BudgetError(
            f"timing covers the budget-division runners, not {mechanism}: a population runner "
            "reads each user's values from the stream (user_values), which the timed stream "
            "(histograms only) does not pass on"
        )
    if release is not None and not release.default and model not in ("local-budget", "population"):
        raise BudgetError(
            f"--post, --project-test, --pool and --first-publication apply to the local "
            f"allocators, not to the central {mechanism}"
        )
    data_path: DataPath | None = None
    if model == "central":
        data_path = data_path_for(mechanism, stream.domain)
        if threshold is not None:
            if data_path is not None:
                raise BudgetError(
                    f"--threshold applies to allocators on 001's data path; {mechanism} has a "
                    "data path of its own, with its own publication rule"
                )
            data_path = central_path(threshold, stream.domain)
    elif threshold is not None:
        raise BudgetError(
            f"--threshold applies to the central allocators; the local {mechanism} publishes iff "
            "its dissimilarity exceeds the publication's variance (002 Eq. 6)"
        )
    if model in ("local-budget", "population") and arithmetic != "exact":
        raise BudgetError("--arithmetic float only applies to the central absorption allocators")
    classes = classes_of(population, mechanism)
    durable = ledger_path is not None and is_durable_path(ledger_path)
    if resume and not durable:
        raise BudgetError(
            "--resume continues a write-ahead ledger: --ledger FILE.jsonl or DIR.wledger"
        )
    writer: DurableSink | None = None
    recovered: Recovered | None = None
    sink: LedgerSink | None = None
    if durable:
        assert ledger_path is not None
        header = {
            "format": "wevent-run/1",
            "allocator": mechanism,
            "variant": variant,
            "arithmetic": arithmetic,
            "oracle": oracle or "",
            "domain": stream.domain,
            "releases": "" if releases_path is None else releases_path.name,
            "population": _population_digest(population),
            **dict(identity or {}),
        }
        if release is not None and not release.default:
            header["release"] = release.describe()
        if threshold is not None and threshold != "sqrt":  # sqrt is the default rule
            header["threshold"] = threshold
        writer, recovered = open_durable(ledger_path, resume=resume, header=header)
        sink = writer if recovered is None else ReplaySink(recovered.ledger, writer)
    guard = Guard(population, sink=sink)
    groups = class_groups(population, guard)
    # The first three children are those of earlier versions (spawn is by index): the fourth
    # draws a population allocator's reporter values apart from the stream.
    data_seed, noise_seed, pool_seed, value_seed = np.random.SeedSequence(seed).spawn(4)
    sizes = [c.count for c in population.classes]
    runner: CentralRunner | LocalBudgetRunner | PopulationRunner
    note = ""
    if model == "population":
        alloc = population_allocator or POPULATION_BUILTIN[mechanism]
        if variant not in alloc.variants:
            raise AllocatorError(
                f"{mechanism}: no variant {variant!r} (it has: {', '.join(alloc.variants)})"
            )
        setup = alloc.setup(classes, sizes, stream.domain, variant)
        pop_kernel = alloc.kernel(ExactAlgebra(), setup.config, variant)
        _check_complete(stream, population, slots, setup.budgets)
        cfg = setup.config
        note = (
            f"population: {cfg.unit} users per slot, recycled after {cfg.recycle} slots; "
            "per-report budgets " + ", ".join(str(b) for b in setup.budgets)
        )
        users, class_of = population_arrays(population)
        runner = PopulationRunner(
            setup=setup,
            kernel=pop_kernel,
            spender=guard,
            users=users,
            class_of=class_of,
            stream=stream,
            data_rng=np.random.default_rng(data_seed),
            noise_rng=np.random.default_rng(noise_seed),
            pool_rng=np.random.default_rng(pool_seed),
            value_rng=np.random.default_rng(value_seed),
            mechanism=mechanism,
            oracle=oracle or "grr",
            options=release or ReleaseOptions(),
        )
    else:
        kernel = kernel_for(mechanism, algebra_for(arithmetic), classes, variant)
        common: dict[str, Any] = {
            "kernel": kernel,
            "spender": guard if clock is None else TimedSpender(guard, clock),
            "groups": groups,
            "sizes": sizes,
            "stream": stream if clock is None else TimedStream(stream, clock),
            "data_rng": np.random.default_rng(data_seed),
            "noise_rng": np.random.default_rng(noise_seed),
            "mechanism": mechanism,
        }
        if model == "local-budget":
            runner = LocalBudgetRunner(
                **common, oracle=oracle or "grr", options=release or ReleaseOptions()
            )
        else:
            runner = CentralRunner(**common, data_path=data_path)
    summary = RunSummary(
        mechanism, variant, arithmetic, len(population), len(population.classes), slots
    )
    summary.setup_note = note
    if release is not None and not release.default:
        summary.options = f"release options: {release.describe()}"
    elif threshold is not None:
        summary.options = f"publication rule: {threshold}"
    summary.recovered = recovered
    releases = None
    if durable and releases_path is not None:
        releases = ReleaseStream(releases_path, resume=resume)
    finished = False
    try:
        for _ in range(slots):
            if clock is None:
                record = runner.step()
            else:
                with clock.step():
                    record = runner.step()
            summary.records.append(record)
            if releases is not None:
                releases.write(record)
            if progress is not None:
                progress(1)
        if isinstance(sink, ReplaySink) and sink.replaying:
            raise ReplayMismatch(
                f"--resume: the ledger holds {len(recovered.ledger) if recovered else 0} "
                f"charges but the resumed run of {slots} slots asked for only "
                f"{sink.replayed}: resume with the run's own --slots"
            )
        finished = True
    except (BudgetExceeded, EvidenceRejected, InvalidAllocation, PoolExhausted) as exc:
        summary.refusal = exc
        finished = True
    finally:
        summary.ledger = guard.ledger
        summary.charges = len(guard.ledger)
        summary.reports = guard.ledger.per_user_rows()
        if releases is not None:
            if finished:
                releases.finish()
            else:
                releases.abandon()
        if writer is not None:
            if guard.broken is None:
                writer.close()
            else:
                writer.abandon()
            summary.durable = writer.layout
            summary.head = writer.head
            summary.committed = writer.committed
        else:
            write_outputs(
                (ledger_path, lambda p: write_ledger(guard.ledger, p)),
                (releases_path, lambda p: write_releases(summary.records, p)),
            )
    return summary
