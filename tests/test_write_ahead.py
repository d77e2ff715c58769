"""Write-ahead spending: the guard commits every accepted charge to its durable sink before
`spend` returns (one commit per `spend_many`), and `Guard.recover` continues a crashed ledger
with every committed charge back in its windows."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import Budget
from wevent.accounting.durable import CUT_SUFFIX, ChainedJsonlWriter, audit_integrity
from wevent.accounting.formats import read_ledger
from wevent.accounting.ledger import Charge, Ledger
from wevent.accounting.population import Population
from wevent.accounting.recovery import open_durable
from wevent.accounting.requirements import Fixed
from wevent.accounting.sinks import LedgerSink, ReplayMismatch, ReplaySink
from wevent.accounting.spending import BudgetExceeded
from wevent.errors import InputError
from wevent.verifier.guard import Guard, SinkFailed

POP = Population({"a": Fixed(3, Budget("0.3")), "b": Fixed(2, Budget("1/2"))})


class Recorder:
    """A sink that records what it is asked to do, in order."""

    def __init__(self, fail_commit: bool = False) -> None:
        self.events: list[str] = []
        self.fail_commit = fail_commit

    def define_group(self, name: str, members: Iterable[str]) -> None:
        self.events.append(f"group {name}")

    def append_charge(self, charge: Charge) -> None:
        self.events.append(f"charge {charge.slot} {charge.subject}")

    def commit(self) -> int:
        if self.fail_commit:
            raise OSError(28, "No space left on device")
        self.events.append("commit")
        return 0


def test_every_spend_is_committed_before_it_returns() -> None:
    sink = Recorder()
    assert isinstance(sink, LedgerSink)
    guard = Guard(POP, sink=sink)
    guard.spend(1, "0.1", user="a")
    assert sink.events == ["charge 1 user 'a'", "commit"]
    guard.define_group("both", ["a", "b"])
    guard.spend_many([Charge(2, Budget("0.1"), group="both"), Charge(2, Budget("0.1"), user="b")])
    assert sink.events[2:] == ["group both", "charge 2 group 'both'", "charge 2 user 'b'", "commit"]


def test_a_refusal_inside_spend_many_commits_the_ones_before_it() -> None:
    sink = Recorder()
    guard = Guard(POP, sink=sink)
    with pytest.raises(BudgetExceeded):
        guard.spend_many([Charge(1, Budget("0.3"), user="a"), Charge(1, Budget("0.1"), user="a")])
    assert sink.events == ["charge 1 user 'a'", "commit"]
    assert len(guard.ledger) == 1


def test_a_failed_commit_fails_closed() -> None:
    """The spend raises (so its noise is never drawn) and stays counted in the windows, and
    every later spend is refused: the durable ledger's state is unknown until it is recovered
    (a writer retrying its pending lines could corrupt it)."""
    guard = Guard(POP, sink=Recorder(fail_commit=True))
    with pytest.raises(OSError):
        guard.spend(1, "0.3", user="a")
    with pytest.raises(SinkFailed):  # a broken guard refuses every spend: it has no room
        guard.headroom(1, user="a")
    assert guard._engine.headroom(1, "a", None) == 0  # the uncommitted 0.3 still counts
    assert isinstance(guard.broken, OSError)
    with pytest.raises(SinkFailed, match="until it is recovered"):
        guard.spend(1, "0.1", user="b")
    with pytest.raises(SinkFailed):
        guard.spend_many([Charge(2, Budget("0.1"), user="b")])
    assert len(guard.ledger) == 1


class RefusingSink(Recorder):
    """A sink that refuses the charges handed to it (a replayed ledger that disagrees, a
    writer's validation)."""

    def append_charge(self, charge: Charge) -> None:
        raise ReplayMismatch(f"slot {charge.slot}: not the recorded charge")


@pytest.mark.parametrize("through", ["spend", "spend_many"])
def test_a_refused_append_fails_closed(through: str) -> None:
    """A charge counted in memory but never handed to the disk would be given back by a
    recovery: after a refused append every later spend is refused, as after a failed commit."""
    guard = Guard(POP, sink=RefusingSink())
    guard.define_group("both", ["a", "b"])
    with pytest.raises(ReplayMismatch):
        if through == "spend":
            guard.spend(1, "0.1", group="both")
        else:
            guard.spend_many([Charge(1, Budget("0.1"), group="both")])
    assert isinstance(guard.broken, ReplayMismatch)
    with pytest.raises(SinkFailed):  # a broken guard refuses every spend: it has no room
        guard.headroom(1, user="a")
    assert Fraction(guard._engine.headroom(1, "a", None), guard._scale) == Budget("0.2")
    with pytest.raises(SinkFailed, match="until it is recovered"):
        guard.spend(2, "0.1", user="b")
    assert len(guard.ledger) == 1


def test_without_a_sink_nothing_changes() -> None:
    guard = Guard(POP)
    guard.spend_many([Charge(1, Budget("0.1"), user="a")])
    assert guard.sink is None and len(guard.ledger) == 1


spends = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from(["a", "b"]), st.sampled_from(["0.1", "1/4"])),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(steps=spends)
def test_the_file_is_the_guard_ledger_and_recovery_restores_its_windows(
    steps: list[tuple[int, str, str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("wa") / "run.jsonl"
    writer, _ = open_durable(path, resume=False)
    guard = Guard(POP, sink=writer)
    slot = 1
    for gap, user, amount in steps:
        slot += gap - 1
        with contextlib.suppress(BudgetExceeded):
            guard.spend(slot, amount, user=user)
    writer.close()
    assert list(read_ledger(path)) == list(guard.ledger)
    recovered, found = Guard.recover(path, POP)
    assert found.records == len(guard.ledger) and found.cut == []
    for user in ("a", "b"):
        for t in (slot, slot + 1):
            assert recovered.headroom(t, user=user) == guard.headroom(t, user=user)


def test_recover_cuts_a_torn_tail_and_refuses_what_the_windows_no_longer_allow(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    with ChainedJsonlWriter(path) as writer:
        guard = Guard(POP, sink=writer)
        guard.spend(1, "0.2", user="a")
        guard.spend(2, "0.1", user="a")
    with path.open("ab") as fh:
        fh.write(b'{"slot":3,"user":"a","epsilon":"0.1","cha')  # a crash mid-append
    assert audit_integrity(path).torn
    recovered, found = Guard.recover(path, POP)
    assert found.records == 2 and len(found.cut) == 1 and "torn" in found.cut[0]
    assert (tmp_path / f"run.jsonl{CUT_SUFFIX}").read_bytes().startswith(b'{"slot":3')
    assert audit_integrity(path).ok
    with pytest.raises(BudgetExceeded):  # a's window [1, 3] already holds 0.3
        recovered.spend(3, "0.1", user="a")
    recovered.spend(3, "0.1", user="b")  # and the guard writes on to the same ledger
    writer_ledger = read_ledger(path)
    assert len(writer_ledger) == 3 and audit_integrity(path).ok


def test_recover_refuses_a_tampered_ledger_and_open_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with ChainedJsonlWriter(path) as writer:
        Guard(POP, sink=writer).spend(1, "0.2", user="a")
    with pytest.raises(InputError, match="exists: a ledger is never overwritten"):
        open_durable(path, resume=False)
    path.write_text(path.read_text().replace('"0.2"', '"0.1"'))
    with pytest.raises(InputError, match="fails its integrity check"):
        Guard.recover(path, POP)
    with pytest.raises(InputError, match="does not exist"):
        open_durable(tmp_path / "none.jsonl", resume=True)
    with pytest.raises(InputError, match="chained JSONL"):
        open_durable(tmp_path / "x.parquet", resume=False)


def test_a_crash_before_the_first_commit_resumes_empty(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    ChainedJsonlWriter(path)  # opened (its empty checkpoint written), then killed mid-append
    with path.open("ab") as fh:
        fh.write(b'{"group":"class-0","mem')
    writer, found = open_durable(path, resume=True)
    assert found is not None and found.records == 0 and len(found.cut) == 1
    writer.close()
    assert path.read_bytes() == b"" and audit_integrity(path).ok


def test_the_replay_sink_checks_every_recovered_charge(tmp_path: Path) -> None:
    recovered = Ledger()
    recovered.append(1, "0.1", user="a")
    below = Recorder()
    guard = Guard(POP, sink=ReplaySink(recovered, below))
    guard.spend(1, "0.1", user="a")  # the recovered charge: checked, not written again
    assert below.events == ["commit"]
    guard.spend(2, "0.1", user="b")  # past the ledger's end: written
    assert below.events[1:] == ["charge 2 user 'b'", "commit"]
    other = Guard(POP, sink=ReplaySink(recovered, Recorder()))
    with pytest.raises(ReplayMismatch, match="resume with the allocator"):
        other.spend(1, "0.2", user="a")


def test_a_resumed_run_must_be_the_same_run(tmp_path: Path) -> None:
    """The run header (allocator, flags, stream, requirements) and the releases already on disk
    hold a resumed run to the run that wrote the ledger: another seed would publish the same
    slots again with fresh noise and no charge, so it is refused, and nothing is touched."""
    from wevent.experiments.running import run_mechanism
    from wevent.mechanisms.streams import SyntheticStream

    sizes = [c.count for c in POP.classes]
    ledger, releases = tmp_path / "run.jsonl", tmp_path / "rel.csv"

    def run(seed: int, resume: bool, **kw: object) -> object:
        return run_mechanism(
            "uniform", POP, SyntheticStream("sin", 30, sizes, seed), slots=30, seed=seed,
            ledger_path=ledger, releases_path=releases, resume=resume, **kw,  # type: ignore[arg-type]
        )  # fmt: skip

    run(1, False)
    before = (ledger.read_bytes(), releases.read_bytes())
    with pytest.raises(ReplayMismatch, match="releases of slot 1 would differ"):
        run(2, True)  # uniform's charges do not depend on the data: only the releases tell
    with pytest.raises(InputError, match=r"differs from the one that wrote .* in stream"):
        run(1, True, identity={"stream": "another"})
    assert (ledger.read_bytes(), releases.read_bytes()) == before
    assert not (tmp_path / "rel.csv.resume").exists()
    run(1, True)  # the same run resumes (here: nothing left to do) and changes nothing
    assert (ledger.read_bytes(), releases.read_bytes()) == before


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    sink, _ = open_durable(path, resume=False)
    with pytest.raises(InputError, match="being written by another process"):
        open_durable(path, resume=True)
    sink.close()
    again, found = open_durable(path, resume=True)
    assert found is not None
    again.close()


@pytest.mark.parametrize("commits", [1, 2, 5])
def test_resume_refuses_a_signed_ledger_before_cutting_anything(
    tmp_path: Path, commits: int
) -> None:
    """However many checkpoints the ledger has had (one slot of its checkpoint file used, or
    both), a signed ledger is refused by --resume untouched: its uncommitted tail stays."""
    from wevent.accounting.signing import generate_key_pair

    generate_key_pair(tmp_path / "k", tmp_path / "k.pub")
    path = tmp_path / "run.jsonl"
    w = ChainedJsonlWriter(path, signing_key=tmp_path / "k")
    for slot in range(1, commits + 1):
        w.append_charge(Charge(slot, Budget("1/10"), user="u"))
        w.commit()
    with path.open("ab") as fh:  # a crash mid-append leaves a torn last line
        fh.write(b'{"slot":9,"user":"u","epsil')
    before = path.read_bytes()
    with pytest.raises(InputError, match="signed checkpoints"):
        open_durable(path, resume=True)
    assert path.read_bytes() == before and not list(tmp_path.glob("*" + CUT_SUFFIX))
