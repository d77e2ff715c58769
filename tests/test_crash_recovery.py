"""A real `wevent run` killed with SIGKILL at random points of its run, then resumed.

The run writes ahead to a durable ledger (chained JSONL, Parquet segments): every charge is
committed before its noise is drawn, and releases are streamed behind the charges. After each
kill: the ledger's integrity holds (a torn tail at most), every slot whose release reached the
disk has all its charges committed, and ``--resume`` cuts any torn tail, replays the committed
charges and finishes with exactly the ledger of an uninterrupted run, which audits intact and
compliant. A few kills run in the default suite; the slow suite kills each format 20 times.
"""

from __future__ import annotations

import csv
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from wevent.accounting.durable import audit_integrity
from wevent.accounting.formats import read_ledger, read_ledgers
from wevent.accounting.ledger import Charge, Ledger

SLOTS = "600"
REQUIREMENTS = "user,w,epsilon\na,3,1\nb,5,1/2\nc,4,1\nd,8,2\n"


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wevent", *args], cwd=cwd, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def _args(ledger: str, releases: str) -> list[str]:
    return ["run", "pba", "-r", "req.csv", "--stream", "sin", "--slots", SLOTS, "--seed", "5",
            "--ledger", ledger, "--releases", releases]  # fmt: skip


def _read(path: Path) -> Ledger:
    if path.is_dir():
        found = audit_integrity(path)
        return read_ledgers(found.files) if found.files else Ledger()
    return read_ledger(path)


def _by_slot(ledger: Ledger) -> dict[int, Counter[Charge]]:
    out: dict[int, Counter[Charge]] = {}
    for charge in ledger:
        out.setdefault(charge.slot, Counter())[charge] += 1
    return out


_FULL: dict[str, int] = {}  # the uninterrupted run's ledger size (see _progress)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Ledger, float]]:
    """The uninterrupted run's ledger and wall time, per durable format (the same seed: the
    same charges). Kills are drawn across that time, so they land inside the run."""
    out = {}
    for suffix in (".jsonl", ".wledger"):
        work = tmp_path_factory.mktemp("reference")
        (work / "req.csv").write_text(REQUIREMENTS, encoding="utf-8")
        start = time.perf_counter()
        done = _run(_args(f"ref{suffix}", "rel.csv"), work)
        assert done.returncode == 0, done.stdout + done.stderr
        out[suffix] = (_read(work / f"ref{suffix}"), time.perf_counter() - start)
        _FULL[suffix] = _progress(work / f"ref{suffix}")
    assert list(out[".jsonl"][0]) == list(out[".wledger"][0])
    return out


def _progress(ledger: Path) -> int:
    """How far a run has written its ledger: bytes of a JSONL file, segments of a directory."""
    try:
        if ledger.is_dir():
            return sum(1 for _ in ledger.glob("*.parquet"))
        return ledger.stat().st_size
    except OSError:
        return 0


def _kill_and_resume(work: Path, suffix: str, point: float, reference: Ledger) -> str:
    """Kill the run once its ledger holds ``point`` (a fraction) of the uninterrupted run's
    (0: as soon as it starts), resume it, and check everything; returns what happened."""
    (work / "req.csv").write_text(REQUIREMENTS, encoding="utf-8")
    ledger = work / f"run{suffix}"
    full = _FULL[suffix]
    proc = subprocess.Popen(
        [sys.executable, "-m", "wevent", *_args(ledger.name, "rel.csv")],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while proc.poll() is None and _progress(ledger) < point * full:
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = proc.returncode == -signal.SIGKILL
    if not ledger.exists():  # killed before the ledger was opened: nothing to resume
        assert killed
        return "before the ledger existed"

    # Integrity after the crash: no tampering, at most a torn tail.
    found = audit_integrity(ledger)
    assert not found.problems, found.summary()
    # Every release on disk has every charge of its slot committed (before its noise).
    partial = work / "rel.csv.partial"
    released = set()
    if partial.exists():
        with partial.open(encoding="utf-8") as fh:
            released = {int(row["slot"]) for row in csv.DictReader(fh) if row["slot"].isdigit()}
    if released:
        committed = _by_slot(_read_committed(ledger, found))
        expected = _by_slot(reference)
        for slot in released:
            assert committed.get(slot) == expected.get(slot), f"slot {slot} released early"

    resumed = _run([*_args(ledger.name, "rel.csv"), "--resume"], work)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    if found.torn:
        assert "cut an uncommitted tail" in resumed.stdout
    assert list(_read(ledger)) == list(reference)  # nothing lost, nothing doubled
    audited = _run(["audit", ledger.name, "-r", "req.csv"], work)
    assert audited.returncode == 0 and "audit: COMPLIANT" in audited.stdout, audited.stdout
    assert (work / "rel.csv").exists() and not partial.exists()
    return f"killed={killed} torn={len(found.torn)} released={len(released)}"


def _read_committed(ledger: Path, found: object) -> Ledger:
    """The committed records of a crashed ledger (its torn tail left out)."""
    if ledger.is_dir():
        return _read(ledger)
    data = ledger.read_bytes()
    cut = data.rfind(b"\n") + 1
    copy = ledger.with_name("committed.jsonl")
    copy.write_bytes(data[:cut])
    return read_ledger(copy)


@pytest.mark.parametrize(("suffix", "kills"), [(".jsonl", 2), (".wledger", 1)])
def test_a_killed_run_resumes_with_nothing_lost(
    suffix: str, kills: int, reference: dict[str, tuple[Ledger, float]], tmp_path: Path
) -> None:
    rng = random.Random(f"crash{suffix}")
    ledger, _ = reference[suffix]
    for k in range(kills):
        work = tmp_path / f"kill{k}"
        work.mkdir()
        _kill_and_resume(work, suffix, rng.uniform(0.2, 0.9), ledger)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".jsonl", ".wledger"])
def test_twenty_kills_per_format(
    suffix: str, reference: dict[str, tuple[Ledger, float]], tmp_path: Path
) -> None:
    rng = random.Random(f"crash-many{suffix}{os.getpid()}")
    ledger, seconds = reference[suffix]
    outcomes = []
    for k in range(20):
        work = tmp_path / f"kill{k}"
        work.mkdir()
        point = 0.0 if k < 2 else rng.uniform(0.02, 0.98)  # two at start-up, the rest mid-run
        outcomes.append(_kill_and_resume(work, suffix, point, ledger))
    print(f"{suffix} (uninterrupted run {seconds:.1f} s): " + "; ".join(outcomes))
    assert sum(o.startswith("killed=True") for o in outcomes) >= 17  # the mid-run kills landed
