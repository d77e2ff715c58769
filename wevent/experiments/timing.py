"""Per-slot wall time of a mechanism run, split into the mechanism's own work and the guard's.

001 Section 8.1 (Figures 13-14) reports the average running time per time slot of its
mechanisms. `SlotClock` measures ours with `time.perf_counter_ns`, around each
``runner.step()`` of `wevent.experiments.running.run_mechanism` (the loop over the slots), and
inside that step around two things it calls:

* every call of the guard (`TimedSpender`: ``spend`` and ``spend_many``, the check of each
  charge against every window it touches and its entry in the ledger, and the entry and exit
  of a ``batch``, where the guard commits the batch's charges);
* every call of the stream (`TimedStream`: ``histograms``, the synthetic data of the slot,
  which is not the mechanism's work and is the same for every mechanism on one seed).

The step and the stream's calls are also timed in CPU time of the running thread
(`time.thread_time_ns`), which does not count the time the thread waited for a core while
other processes ran: ``cpu-us`` is the step's CPU time without the stream's, guard included.

So per slot: ``step = stream + guard + mechanism``, where "mechanism" is the allocator's kernel
(planning the slot's budgets) and the data path (SM sampling, OBS, the dissimilarity, the
publication's noise). Start-up is not timed: the population, the stream's construction (its
probability sequence), the guard and its ledger groups, the kernel and the generators are built
before the first slot. Timing adds two clock reads per guard call and four per stream call
(wall and CPU time; tens of nanoseconds each), counted in the mechanism's share.

Wall times differ from run to run and machine to machine; `WALL_CLOCK` names the metrics that
carry them and `TIMED_EXPERIMENTS` the experiments whose rows of those metrics are clock
readings, so the reproduction's fingerprints leave those rows' values out
(`wevent.experiments.provenance.compare_fingerprints`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget
from wevent.accounting.evidence import Evidence
from wevent.accounting.ledger import Charge
from wevent.accounting.spending import ForwardingSpender, Spender, batched
from wevent.mechanisms.streams import Stream

__all__ = [
    "TIMED_EXPERIMENTS",
    "WALL_CLOCK",
    "SlotClock",
    "SlotTiming",
    "TimedSpender",
    "TimedStream",
]

IntArray = npt.NDArray[np.int64]

# The metrics read from a clock (microseconds per slot: wall time, and the thread's CPU time for
# ``cpu-us``). A fingerprint compares their rows for presence and sign only; every other metric
# to 1e-9 relative.
WALL_CLOCK = frozenset({"time-us", "time-us-noguard", "guard-us", "cpu-us"})
# The experiments whose rows of those metrics are clock readings (the registered sweeps with
# ``timed=True``; a test checks the two agree). Another experiment's row of a metric of the same
# name is compared exactly.
TIMED_EXPERIMENTS = frozenset({"pwsm-time"})


@dataclass(frozen=True)
class SlotTiming:
    """A run's timed totals in nanoseconds over ``slots`` slots."""

    slots: int
    step_ns: int
    guard_ns: int
    stream_ns: int
    step_cpu_ns: int = 0
    stream_cpu_ns: int = 0

    @property
    def mechanism_ns(self) -> int:
        """The step without the guard's and the stream's calls."""
        return self.step_ns - self.guard_ns - self.stream_ns

    def per_slot_us(self, ns: int) -> float:
        """``ns`` as microseconds per slot (NaN for a run of no slots)."""
        return ns / 1000 / self.slots if self.slots else float("nan")

    @property
    def with_guard_us(self) -> float:
        """Microseconds per slot of the mechanism with the guard's checks (``time-us``)."""
        return self.per_slot_us(self.step_ns - self.stream_ns)

    @property
    def without_guard_us(self) -> float:
        """Microseconds per slot of the mechanism alone (``time-us-noguard``)."""
        return self.per_slot_us(self.mechanism_ns)

    @property
    def guard_us(self) -> float:
        """Microseconds per slot in the guard (``guard-us``)."""
        return self.per_slot_us(self.guard_ns)

    @property
    def cpu_us(self) -> float:
        """The thread's CPU microseconds per slot of the mechanism with the guard's checks
        (``cpu-us``)."""
        return self.per_slot_us(self.step_cpu_ns - self.stream_cpu_ns)


class SlotClock:
    """Accumulates the timed parts of one run (see the module docstring)."""

    def __init__(self) -> None:
        self.slots = 0
        self.step_ns = 0
        self.guard_ns = 0
        self.stream_ns = 0
        self.step_cpu_ns = 0
        self.stream_cpu_ns = 0

    @contextmanager
    def step(self) -> Iterator[None]:
        """Time one slot's ``runner.step()``."""
        cpu = time.thread_time_ns()
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.step_ns += time.perf_counter_ns() - start
            self.step_cpu_ns += time.thread_time_ns() - cpu
            self.slots += 1

    def result(self) -> SlotTiming:
        return SlotTiming(
            self.slots,
            self.step_ns,
            self.guard_ns,
            self.stream_ns,
            self.step_cpu_ns,
            self.stream_cpu_ns,
        )


class TimedSpender(ForwardingSpender):
    """A `Spender` that passes every call to ``inner`` (the guard) and adds the time of its
    spends and of its batches' entry and exit to ``clock.guard_ns``."""

    def __init__(self, inner: Spender, clock: SlotClock) -> None:
        super().__init__(inner)
        self.clock = clock

    def spend(
        self,
        slot: int,
        amount: Budget,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "",
        evidence: Evidence | None = None,
    ) -> None:
        with self._timed():
            super().spend(
                slot,
                amount,
                user=user,
                group=group,
                part=part,
                mechanism=mechanism,
                evidence=evidence,
            )

    def spend_many(self, charges: Iterable[Charge]) -> None:
        with self._timed():
            super().spend_many(tuple(charges))

    @contextmanager
    def _timed(self) -> Iterator[None]:
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.clock.guard_ns += time.perf_counter_ns() - start

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The guard's batch (`wevent.accounting.spending.batched`), its entry and its exit
        (where `Guard.batch` commits) timed as the guard's; the block's own work is not, its
        spends are timed one by one."""
        inner = batched(self.inner)
        with self._timed():
            inner.__enter__()
        try:
            yield
        except BaseException as exc:
            with self._timed():
                suppressed = inner.__exit__(type(exc), exc, exc.__traceback__)
            if not suppressed:
                raise
        else:
            with self._timed():
                inner.__exit__(None, None, None)


class TimedStream:
    """A `Stream` that passes every call to ``inner`` and adds the time of ``histograms`` to
    ``clock.stream_ns`` (its CPU time to ``clock.stream_cpu_ns``)."""

    def __init__(self, inner: Stream, clock: SlotClock) -> None:
        self.inner = inner
        self.clock = clock

    @property
    def domain(self) -> int:
        return self.inner.domain

    @property
    def slots(self) -> int:
        return self.inner.slots

    def histograms(self, slot: int, rng: np.random.Generator) -> IntArray:
        cpu = time.thread_time_ns()
        start = time.perf_counter_ns()
        try:
            return self.inner.histograms(slot, rng)
        finally:
            self.clock.stream_ns += time.perf_counter_ns() - start
            self.clock.stream_cpu_ns += time.thread_time_ns() - cpu
