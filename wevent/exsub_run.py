"""`wevent run exsub`: 004's online protocol end to end, every user charged once through the guard.

Each user with a whole-stream requirement ``(w = inf, eps)`` draws its hierarchy level (public,
data-independent), is charged ``eps`` at slot 1 with `wevent.accounting.ExSub` evidence (the exact
exclusion weight its sampler uses), and only then draws the subgroup and runs the online sampler
over its stream (`wevent.mechanisms.exsub_stream`). The server's estimate of ``x_t`` uses only residues
reported by slot t (004 Algorithm 2 reads levels h at slots ``t'' r^h <= t``), so releasing all
slots after the last one gives the same numbers as releasing each at its slot.

Streams: ``sparse`` (004 Section VI-A's synthetic data: exactly s changes per user, ``--d``
dimensions) or a CSV ``user,slot,value`` of categorical values 0..d-1, read as one-hot 0/1
vectors; a user keeps its last value at slots without a row and holds no value before its first
row (a change of value is two changes of the vector, the first value one).
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError, float_display
from wevent.accounting.formats import write_ledger
from wevent.accounting.population import Population
from wevent.accounting.recovery import is_durable_path, open_durable
from wevent.accounting.requirements import WholeStream
from wevent.accounting.spending import BudgetExceeded, EvidenceRejected
from wevent.experiments.running import check_output, write_outputs
from wevent.mechanisms.exsub import RandomChooser
from wevent.mechanisms.exsub_stream import (
    ExSubClient,
    ExSubProtocol,
    ExSubServer,
    change_count,
    sparse_streams,
)
from wevent.mechanisms.streams import CsvStream
from wevent.verifier.guard import Guard

__all__ = ["ExSubRunSummary", "load_streams", "run_exsub"]

IntArray = npt.NDArray[np.int64]


@dataclass
class ExSubRunSummary:
    users: int
    reporting: int
    slots: int
    protocol: ExSubProtocol
    level_users: dict[int, int] = field(default_factory=dict)
    charges: int = 0
    reports: int = 0
    mse: float = float("nan")
    mae: float = float("nan")
    refusal: BudgetExceeded | EvidenceRejected | None = None
    durable: str = ""  # the write-ahead ledger's layout ("" when written at the end or none)
    head: str = ""
    committed: int = 0

    @property
    def ok(self) -> bool:
        return self.refusal is None

    def describe(self) -> list[str]:
        p = self.protocol
        lines = [
            f"exsub (004): {self.reporting} of {self.users} users report, {self.slots} slots, "
            f"d = {p.d}, s = {p.s}, r = {p.r}, level portions {p.weights}",
            "  users per level: "
            + ", ".join(f"h={h}: {n}" for h, n in sorted(self.level_users.items())),
            f"  error vs truth (mean of x_t per dimension): MSE {float_display(self.mse)}, "
            f"mean absolute {float_display(self.mae)}",
            f"  communication: {self.reports} symbols sent in total",
            f"  ledger: {self.charges} charges (one per reporting user, whole stream)"
            + (", every one accepted by the guard" if self.ok else ""),
        ]
        if self.refusal is not None:
            lines.append(f"  REFUSED, the run stopped: {self.refusal}")
        return lines


def _one_hot_streams(stream: CsvStream, users: list[str], slots: int, d: int) -> IntArray:
    codes = stream.user_codes(users)
    x = np.zeros((len(users), slots, d), np.int64)
    current = np.full(len(users), -1, np.int64)
    for t in range(1, slots + 1):
        values = stream.user_values(t, codes)
        current = np.where(values >= 0, values, current)
        held = current >= 0
        x[np.flatnonzero(held), t - 1, current[held]] = 1
    return x


def load_streams(
    spec: str,
    population: Population,
    users: list[str],
    slots: int | None,
    d: int | None,
    s: int,
    seed: int,
) -> IntArray:
    """The (users, T, d) 0/1 streams of ``users`` (see the module docstring)."""
    if spec == "sparse":
        if slots is None:
            raise BudgetError("--slots is required with the synthetic stream 'sparse'")
        rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
        return sparse_streams(len(users), slots, d or 2, s, rng)
    path = Path(spec)
    if path.suffix.lower() != ".csv" and not path.exists():
        raise BudgetError(
            f"--stream: {spec!r} is neither the synthetic stream 'sparse' nor an existing CSV file"
        )
    class_of = {u: c.index for c in population.classes for u in c.members}
    stream = CsvStream.load(path, class_of, len(population.classes), domain=d)
    total = stream.slots if slots is None else slots
    if total > stream.slots:
        raise BudgetError(f"--slots {total} is more than the stream's {stream.slots} slots")
    return _one_hot_streams(stream, users, total, stream.domain)


def run_exsub(
    population: Population,
    stream_spec: str,
    *,
    slots: int | None,
    seed: int,
    d: int | None,
    sparsity: int,
    fanout: int = 2,
    weights: str = "uniform",
    ledger_path: Path | None = None,
    releases_path: Path | None = None,
) -> ExSubRunSummary:
    """Run the protocol; write the ledger and releases (CSV slot,status,cell,release,truth with
    estimated and true counts of users holding each dimension)."""
    for path, what in ((ledger_path, "--ledger"), (releases_path, "--releases")):
        if path is not None:
            check_output(path, what)
    for user, req in population.items():
        if not isinstance(req, WholeStream):
            raise BudgetError(
                f"exsub spends each user's budget once over the whole stream: user {user!r} has "
                f"{req.describe()}; give whole-stream requirements (w = inf)"
            )
    users = [u for u, req in population.items() if isinstance(req, WholeStream) and req.eps > 0]
    x = load_streams(stream_spec, population, users, slots, d, sparsity, seed)
    n, T, dim = x.shape
    protocol = ExSubProtocol(T=T, d=dim, s=sparsity, r=fanout, weights=weights)
    changes = change_count(x)
    if n and int(changes.max()) > sparsity:
        worst = int(np.argmax(changes))
        raise BudgetError(
            f"user {users[worst]!r} has {int(changes[worst])} changes, more than --sparsity "
            f"{sparsity} (s is a public bound on every user's changes; raise it)"
        )
    server = ExSubServer(protocol)
    summary = ExSubRunSummary(len(population), len(users), T, protocol)
    master = random.Random(seed)
    clients: list[ExSubClient] = []
    designed = []
    for user in users:
        eps = Fraction(population.requirement_of(user).eps)  # type: ignore[union-attr]
        client = ExSubClient(protocol, eps, RandomChooser(master.getrandbits(64)))
        designed.append((user, eps, client))
    writer = None  # opened last: nothing before the run can fail with the ledger held
    if ledger_path is not None and is_durable_path(ledger_path):
        writer, _ = open_durable(ledger_path, resume=False)
    try:
        guard = Guard(population, sink=writer)
        with guard.batch():  # every user's charge in one durable commit, before any draw
            for user, eps, client in designed:
                try:
                    guard.spend(
                        1,
                        eps,
                        user=user,
                        part="report",
                        mechanism="exsub",
                        evidence=client.design.evidence,
                    )
                except (BudgetExceeded, EvidenceRejected) as exc:
                    summary.refusal = exc  # the run stops; those charged before still enroll
                    break
                clients.append(client)
        # The batch has committed (a failed commit raises above: nothing is drawn).
        for client in clients:
            client.start()  # the subgroup is drawn only after the charge is committed
            server.enroll(client)
        if summary.refusal is None:
            for t in range(T):
                for i, client in enumerate(clients):
                    report = client.observe(x[i, t])
                    summary.reports += len(report)
                    server.receive(client, report)
            for client in clients:
                client.finish()
    except BaseException:
        if writer is not None:
            writer.abandon()
        raise
    summary.level_users = dict(server.users)
    summary.charges = len(guard.ledger)
    estimate = server.estimates()
    truth = x[: len(clients)].mean(axis=0) if clients else np.zeros((T, dim))
    if clients:
        err = estimate - truth
        summary.mse, summary.mae = float(np.mean(err**2)), float(np.mean(np.abs(err)))
    if writer is not None:
        if guard.broken is None:
            writer.close()
        else:
            writer.abandon()
        summary.durable, summary.head, summary.committed = (
            writer.layout,
            writer.head,
            writer.committed,
        )
    write_outputs(
        (None if writer is not None else ledger_path, lambda p: write_ledger(guard.ledger, p)),
        (
            releases_path,
            lambda p: _write_releases(estimate * len(clients), x[: len(clients)].sum(axis=0), p),
        ),
    )
    return summary


def _write_releases(estimate: npt.NDArray[np.float64], truth: IntArray, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["slot", "status", "cell", "release", "truth"])
        for t in range(estimate.shape[0]):
            for j in range(estimate.shape[1]):
                out.writerow([t + 1, "published", j, repr(float(estimate[t, j])), int(truth[t, j])])
    tmp.replace(path)
