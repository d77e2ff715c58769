"""The central data path protocol (`wevent.mechanisms.datapath`): the runner calls a mechanism's
own path for the dissimilarity, the decision and the release, after charging; `PwsmPath` is
001's; a spec's ``data_path`` reaches `wevent run` and the gate's end-to-end runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from wevent.accounting.budget import Budget
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.mechanisms.allocators import algebra_for, classes_of
from wevent.mechanisms.allocators.registry import BUILTIN, data_path_for, data_path_of
from wevent.mechanisms.central import CentralRunner, SlotRecord
from wevent.mechanisms.datapath import DataPath, FloatArray, IntArray, KellarisPath, PwsmPath
from wevent.mechanisms.streams import SyntheticStream
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups

SLOTS = 30


class Recording(PwsmPath):
    """001's path that records what the runner gave it, and when."""

    def __init__(self, domain: int, guard: Guard | None = None) -> None:
        super().__init__(domain)
        self.guard = guard
        self.calls: list[tuple[str, int, int]] = []  # (call, slot, ledger rows at the call)

    def _rows(self) -> int:
        return 0 if self.guard is None else len(self.guard.ledger)

    def dissimilarity(
        self, t: int, sampled: IntArray, last: FloatArray, scale: float, rng: np.random.Generator
    ) -> float:
        self.calls.append(("dissimilarity", t, self._rows()))
        return super().dissimilarity(t, sampled, last, scale, rng)

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        self.calls.append(("decide", t, self._rows()))
        return super().decide(t, dis, err, scale)

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        self.calls.append(("publish", t, self._rows()))
        return super().publish(t, sampled, scale, rng)

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        self.calls.append(("approximate", t, self._rows()))
        return super().approximate(t, last)


class Always(PwsmPath):
    """Publishes whenever the kernel leaves it to the data; releases a constant."""

    def decide(self, t: int, dis: float | None, err: float, scale: float) -> bool:
        return True

    def publish(
        self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
    ) -> FloatArray:
        return np.full(sampled.shape, 7.0)

    def approximate(self, t: int, last: FloatArray) -> FloatArray:
        return np.full(last.shape, -1.0)


def _population() -> Population:
    return Population.from_classes({Fixed(4, Budget(1)): 30, Fixed(6, Budget(2)): 20})


def _run(
    mechanism: str, path: DataPath | None, guard: Guard | None = None, seed: int = 3
) -> tuple[list[SlotRecord], Guard]:
    pop = _population()
    guard = Guard(pop) if guard is None else guard
    sizes = [c.count for c in pop.classes]
    kernel = BUILTIN[mechanism].kernel(algebra_for("exact"), classes_of(pop, mechanism), "sound")
    data_seed, noise_seed = np.random.SeedSequence(seed).spawn(2)
    runner = CentralRunner(
        kernel=kernel,
        spender=guard,
        groups=class_groups(pop, guard),
        sizes=sizes,
        stream=SyntheticStream("sin", SLOTS, sizes, seed),
        data_rng=np.random.default_rng(data_seed),
        noise_rng=np.random.default_rng(noise_seed),
        mechanism=mechanism,
        data_path=path,
    )
    return [runner.step() for _ in range(SLOTS)], guard


def _same(a: Sequence[SlotRecord], b: Sequence[SlotRecord]) -> bool:
    return len(a) == len(b) and all(
        x.status == y.status and np.array_equal(x.release, y.release)
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("mechanism", ["bd", "ba", "pbd", "pba", "uniform", "sample"])
def test_the_default_path_is_001s(mechanism: str) -> None:
    """No path and an explicit `PwsmPath` give the same run, release for release."""
    default, _ = _run(mechanism, None)
    explicit, _ = _run(mechanism, PwsmPath(2))
    assert _same(default, explicit)


def test_every_call_comes_after_its_charge() -> None:
    """The path gets data bought with a budget only once the guard holds that budget's charge,
    and a skipped or nullified slot gets no raw count."""
    pop = _population()
    guard = Guard(pop)
    path = Recording(2, guard)
    records, _ = _run("pba", path, guard)
    rows_by_slot: dict[int, dict[str, int]] = {}
    for row in guard.ledger:
        parts = rows_by_slot.setdefault(row.slot, {})
        parts[row.part] = parts.get(row.part, 0) + 1
    seen = {"dissimilarity": 0, "publish": 0}
    for call, t, rows in path.calls:
        before = sum(
            n for s, parts in rows_by_slot.items() if s < t for n in parts.values()
        ) + rows_by_slot.get(t, {}).get("dissimilarity", 0)
        if call in seen:
            seen[call] += 1
            assert rows >= before, (call, t)  # this slot's dissimilarity charge is held
        if call == "publish":
            assert records[t - 1].status == "published"
            assert rows == before + rows_by_slot[t]["publication"]
        if call == "approximate":
            assert records[t - 1].status != "published"
    assert seen["dissimilarity"] > 0 and seen["publish"] > 0
    published = sum(r.status == "published" for r in records)
    assert seen["publish"] == published


def test_a_path_decides_and_releases() -> None:
    """A mechanism's own path replaces the decision and the release, never the charges: an
    always-publishing path publishes every slot the kernel does not nullify."""
    records, guard = _run("ba", Always(2))
    default, _ = _run("ba", None)
    for record in records:
        if record.status == "published":
            assert np.all(record.release == 7.0)
        else:
            assert record.status == "nullified"
            assert np.all(record.release == -1.0)
    assert sum(r.status == "published" for r in records) > sum(
        r.status == "published" for r in default
    )
    # every publication charged: as many publication rows per published slot as by default
    pub_rows = [row for row in guard.ledger if row.part == "publication"]
    assert {row.slot for row in pub_rows} == {r.slot for r in records if r.status == "published"}


def test_kellaris_rule() -> None:
    path = KellarisPath(4)
    assert path.decide(1, 2.5, err=100.0, scale=2.0)  # 2.5 > 1/eps = 2 (sqrt(err) would be 10)
    assert not path.decide(1, 1.5, err=0.01, scale=2.0)
    assert not path.decide(1, None, err=0.01, scale=2.0)
    assert PwsmPath(4).decide(1, 1.5, err=1.0, scale=2.0) is (math.sqrt(1.0) < 1.5)


def test_data_path_of() -> None:
    class Spec:
        name = "mine"
        data_path = staticmethod(lambda d: KellarisPath(d))

    path = data_path_of(Spec(), 5)
    assert isinstance(path, KellarisPath) and path.domain == 5
    assert data_path_of(object(), 5) is None

    class Broken:
        name = "broken"
        data_path = 3

    with pytest.raises(Exception, match="data_path is not a factory"):
        data_path_of(Broken(), 5)
    assert data_path_for("bd", 2) is None  # the built-ins of 001/002 run 001's path
    with_path = replace(BUILTIN["bd"], data_path=KellarisPath)
    assert isinstance(data_path_of(with_path, 3), KellarisPath)


def test_wevent_run_uses_the_specs_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`wevent run`'s runner (`experiments.running`) takes the spec's path: a spec whose path
    always publishes publishes more than the same kernel on 001's path."""
    from wevent.experiments import harness

    pop = _population()
    base = harness.execute("ba", pop, "sin", SLOTS, 1)
    monkeypatch.setitem(BUILTIN, "ba", replace(BUILTIN["ba"], data_path=Always))
    changed: Any = harness.execute("ba", pop, "sin", SLOTS, 1)
    assert changed.statuses.count("published") > base.statuses.count("published")
    assert np.all(changed.release[np.array(changed.statuses) == "published"] == 7.0)


class LeakyAllocator:
    """Uniform's kernel with a data path that releases the raw counts: the budgets are right,
    the noise is missing. The gate cannot see it and must say so."""

    name = "leaky"
    requirement = "fixed"
    scaling = "global"
    symbolic = True
    divides = False
    variants = ("sound",)

    def kernel(self, alg: Any, classes: Sequence[Any], variant: str) -> Any:
        return BUILTIN["uniform"].kernel(alg, classes, variant)

    @staticmethod
    def data_path(domain: int) -> DataPath:
        class Leaky(PwsmPath):
            def publish(
                self, t: int, sampled: IntArray, scale: float, rng: np.random.Generator
            ) -> FloatArray:
                return sampled.astype(np.float64)

        return Leaky(domain)


LEAKY = LeakyAllocator()


@pytest.mark.parametrize("target", ["pegasus", "tests.test_datapath:LEAKY"])
def test_the_gate_says_a_data_path_is_not_checked(target: str) -> None:
    from wevent.gate import GateOptions, run_gate

    quick = GateOptions(
        w_max=2, classes=2, examples=20, e2e_runs=1, conformance_inputs=4, search_runs=20
    )
    report = run_gate(target, quick)
    assert report.verdict in ("proved", "passed")  # the budgets are right
    assert "data path" in report.headline() and "is not checked by the gate" in report.headline()
    assert report.to_json()["allocator"]["data_path"] in ("PegasusPath", "Leaky")
    plain = run_gate("uniform", quick)
    assert "data path" not in plain.headline() and plain.allocator["data_path"] is None
