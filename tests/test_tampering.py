"""Tampering with durable ledgers, as someone with write access to the files but without the
signing key would: every edit, deletion, reorder, duplication, truncation, forged append,
stripped chain, deleted checkpoint and altered head is detected when the auditor holds the head
recorded at write time (``--expect-head``) or the public key of the signed checkpoints, for
chained JSONL and Parquet segment ledgers. What the chain and its checkpoint catch alone, and
the one thing a signature alone cannot catch (a rollback to an earlier signed checkpoint), are
pinned too: docs/audits.md states the same."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from wevent.accounting.budget import Budget
from wevent.accounting.durable import (
    GENESIS_HEAD,
    ChainedJsonlWriter,
    SegmentWriter,
    chain_step,
    read_checkpoint,
    records_table,
)
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.accounting.signing import generate_key_pair
from wevent.cli import cli
from wevent.cli._common import EXIT_INTEGRITY, EXIT_OK, EXIT_TAIL
from wevent.verifier.audit import AuditResult, run_audit

POPULATION = Population({u: Fixed(3, Budget("1")) for u in ("a", "b", "c")})
SLOTS = 6


@dataclass(frozen=True)
class Built:
    """A signed durable ledger as written, the head recorded at write time, the signed
    checkpoint of an earlier commit, and the keys."""

    path: Path
    head: str
    earlier_checkpoint: bytes
    public_key: Path
    charges: int


def _charges(slot: int) -> list[dict[str, Any]]:
    return [
        {"slot": slot, "group": "g", "epsilon": "0.1"},
        {"slot": slot, "user": "c", "epsilon": "0.2"},
    ]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("keys")
    generate_key_pair(root / "k", root / "k.pub")
    return root / "k", root / "k.pub"


def _build(kind: str, root: Path, keys: tuple[Path, Path]) -> Built:
    key, pub = keys
    path = root / ("run.jsonl" if kind == "jsonl" else "run.wledger")
    mark = (root / "run.jsonl.head") if kind == "jsonl" else path / "manifest.jsonl.head"
    writer = ChainedJsonlWriter(path, signing_key=key) if kind == "jsonl" else None
    segments = SegmentWriter(path, signing_key=key) if kind == "segments" else None
    log: Any = writer if writer is not None else segments
    log.define_group("g", ["a", "b"])
    earlier = b""
    for slot in range(1, SLOTS + 1):
        for rec in _charges(slot):
            log.append(rec)
        log.commit()  # one durable commit per slot
        if slot == SLOTS - 2:
            earlier = mark.read_bytes()
    head = log.committed_head
    log.close()
    return Built(path, head, earlier, pub, 3 * SLOTS)


# ---------------------------------------------------------------------------- forger's tools


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))


def _rechain(path: Path, records: list[dict[str, Any]]) -> str:
    """Write ``records`` with a recomputed chain (what anyone can do); the new head."""
    head = GENESIS_HEAD
    out = []
    for rec in records:
        body = {k: v for k, v in rec.items() if k != "chain"}
        head = chain_step(head, body)
        out.append({**body, "chain": head})
    _write_lines(path, out)
    return head


def _checkpoint(path: Path, records: int, head: str, *, keep_signature: bool = False) -> None:
    """Rewrite the checkpoint (a forger cannot sign: no signature, or the old one copied)."""
    mark_path = path.with_name(path.name + ".head")
    mark = {"records": records, "head": head}
    if keep_signature:
        old = read_checkpoint(path)
        mark.update({k: old[k] for k in ("signature", "key")})
    mark_path.write_text(json.dumps(mark) + "\n")


def _chain_file(b: Built) -> Path:
    return b.path if b.path.suffix == ".jsonl" else b.path / "manifest.jsonl"


def _edit_records(
    change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    *,
    rechain: bool = False,
    checkpoint: str = "keep",
) -> Callable[[Built], None]:
    """A tampering of the chained file's records (the ledger's, or the manifest's):
    ``checkpoint`` keep, update (unsigned), update-signed (the old signature copied) or delete."""

    def tamper(b: Built) -> None:
        path = _chain_file(b)
        records = change(_lines(path))
        if rechain:
            head = _rechain(path, records)
        else:
            _write_lines(path, records)
            head = records[-1].get("chain", GENESIS_HEAD) if records else GENESIS_HEAD
        if b.path.is_dir() and checkpoint != "keep":  # a careful forger removes what the
            named = {r.get("segment") for r in records}  # manifest no longer names
            for seg in b.path.glob("*.parquet"):
                if seg.name not in named:
                    seg.unlink()
        if checkpoint == "update":
            _checkpoint(path, len(records), head)
        elif checkpoint == "update-signed":
            _checkpoint(path, len(records), head, keep_signature=True)
        elif checkpoint == "delete":
            path.with_name(path.name + ".head").unlink()

    return tamper


def _lower(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [dict(r) for r in records]
    if "segment" in out[0]:  # a manifest line: claim fewer rows for a segment
        out[3]["rows"] -= 1
        return out
    target = next(r for r in out[3:] if r.get("user") == "c")
    target["epsilon"] = "0.01"  # hides a spend
    return out


def _delete(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return records[:3] + records[4:]


def _swap(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = list(records)
    out[2], out[5] = out[5], out[2]
    return out


def _duplicate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*records[:4], records[2], *records[4:]]


def _insert(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    forged = {"slot": 2, "user": "a", "epsilon": "0.01"}
    return [*records[:4], forged, *records[4:]]


def _members(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [dict(r) for r in records]
    out[0]["members"] = ["a"]  # b's group charges vanish
    return out


def _truncate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return records[:-2]


def _strip(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "chain"} for r in records]


def _append(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*records, {"slot": SLOTS, "user": "a", "epsilon": "0.01"}]


def _rollback(b: Built) -> None:
    """Cut the last commits and restore the signed checkpoint of that earlier state."""
    path = _chain_file(b)
    slots = [json.loads(x) for x in b.earlier_checkpoint.splitlines() if x.strip()]
    records = _lines(path)[: max(m["records"] for m in slots)]
    _write_lines(path, records)
    path.with_name(path.name + ".head").write_bytes(b.earlier_checkpoint)
    if b.path.is_dir():
        kept = {r["segment"] for r in records}
        for seg in b.path.glob("*.parquet"):
            if seg.name not in kept:
                seg.unlink()


def _alter_head(b: Built) -> None:
    path = _chain_file(b)
    mark_path = path.with_name(path.name + ".head")
    mark = read_checkpoint(path)
    mark["head"] = "f" * 64
    mark_path.write_text(json.dumps(mark) + "\n")


def _alter_count(b: Built) -> None:
    path = _chain_file(b)
    mark_path = path.with_name(path.name + ".head")
    mark = read_checkpoint(path)
    mark["records"] -= 1
    mark_path.write_text(json.dumps(mark) + "\n")


def _delete_checkpoint(b: Built) -> None:
    path = _chain_file(b)
    path.with_name(path.name + ".head").unlink()


def _empty(b: Built) -> None:
    _chain_file(b).write_bytes(b"")


def _remove_file(b: Built) -> None:
    _chain_file(b).unlink()


# Segment-only tamperings: the Parquet files themselves.


def _segment(b: Built, k: int) -> Path:
    return sorted(b.path.glob("*.parquet"))[k]


def _edit_segment(b: Built) -> None:
    seg = _segment(b, 2)
    table = pq.read_table(seg)
    eps = ["0.01" if e else e for e in table.column("epsilon").to_pylist()]
    pq.write_table(table.set_column(3, "epsilon", pa.array(eps, pa.large_string())), seg)


def _edit_segment_and_manifest(b: Built) -> None:
    """Edit a segment, then write its new hash into the manifest, rechained, with a new
    checkpoint: a consistent forgery without the key."""
    import hashlib

    _edit_segment(b)
    seg = _segment(b, 2)
    manifest = b.path / "manifest.jsonl"
    records = _lines(manifest)
    for r in records:
        if r["segment"] == seg.name:
            r["sha256"] = hashlib.sha256(seg.read_bytes()).hexdigest()
    _checkpoint(manifest, len(records), _rechain(manifest, records))


def _delete_segment(b: Built) -> None:
    _segment(b, 2).unlink()


def _swap_segments(b: Built) -> None:
    one, two = _segment(b, 1), _segment(b, 2)
    tmp = one.with_name("swap")
    one.rename(tmp)
    two.rename(one)
    tmp.rename(two)


def _forge_segment(b: Built, *, checkpoint: str) -> None:
    import hashlib

    name = f"{SLOTS + 1:06d}.parquet"
    pq.write_table(records_table([{"slot": SLOTS, "user": "a", "epsilon": "0.01"}]), b.path / name)
    manifest = b.path / "manifest.jsonl"
    records = _lines(manifest)
    digest = hashlib.sha256((b.path / name).read_bytes()).hexdigest()
    records.append({"segment": name, "rows": 1, "sha256": digest})
    head = _rechain(manifest, records)
    if checkpoint != "keep":
        _checkpoint(manifest, len(records), head, keep_signature=checkpoint == "update-signed")


def _stray_segment(b: Built) -> None:
    pq.write_table(
        records_table([{"slot": SLOTS, "user": "a", "epsilon": "0.01"}]),
        b.path / "000999.parquet",
    )


def _remove_all(b: Built) -> None:
    shutil.rmtree(b.path)
    b.path.mkdir()


def _replace_by_empty(b: Built) -> None:
    """Remove everything and create a new, empty segment ledger in its place."""
    shutil.rmtree(b.path)
    SegmentWriter(b.path).close()


COMMON: dict[str, Callable[[Built], None]] = {
    "edit": _edit_records(_lower),
    "edit, rechained, new checkpoint": _edit_records(_lower, rechain=True, checkpoint="update"),
    "edit, rechained, signature copied": _edit_records(
        _lower, rechain=True, checkpoint="update-signed"
    ),
    "delete": _edit_records(_delete),
    "delete, rechained, new checkpoint": _edit_records(_delete, rechain=True, checkpoint="update"),
    "reorder": _edit_records(_swap),
    "reorder, rechained, new checkpoint": _edit_records(_swap, rechain=True, checkpoint="update"),
    "duplicate": _edit_records(_duplicate),
    "duplicate, rechained, new checkpoint": _edit_records(
        _duplicate, rechain=True, checkpoint="update"
    ),
    "truncate": _edit_records(_truncate),
    "truncate, new checkpoint": _edit_records(_truncate, checkpoint="update"),
    "truncate, checkpoint deleted": _edit_records(_truncate, checkpoint="delete"),
    "truncate, earlier signed checkpoint restored": _rollback,
    "strip chain keys": _edit_records(_strip),
    "strip chain keys, checkpoint deleted": _edit_records(_strip, checkpoint="delete"),
    "checkpoint deleted": _delete_checkpoint,
    "checkpoint head altered": _alter_head,
    "checkpoint count altered": _alter_count,
    "emptied": _empty,
    "chain file removed": _remove_file,
}
JSONL_ONLY: dict[str, Callable[[Built], None]] = {
    "forged append": _edit_records(_append, rechain=True),
    "forged append, new checkpoint": _edit_records(_append, rechain=True, checkpoint="update"),
    "forged append, signature copied": _edit_records(
        _append, rechain=True, checkpoint="update-signed"
    ),
    "insert, rechained, new checkpoint": _edit_records(_insert, rechain=True, checkpoint="update"),
    "group members edited": _edit_records(_members),
    "group members edited, rechained, new checkpoint": _edit_records(
        _members, rechain=True, checkpoint="update"
    ),
}
SEGMENTS_ONLY: dict[str, Callable[[Built], None]] = {
    "segment edited": _edit_segment,
    "segment edited, manifest rechained": _edit_segment_and_manifest,
    "segment deleted": _delete_segment,
    "segments swapped": _swap_segments,
    "segment forged": lambda b: _forge_segment(b, checkpoint="keep"),
    "segment forged, new checkpoint": lambda b: _forge_segment(b, checkpoint="update"),
    "segment forged, signature copied": lambda b: _forge_segment(b, checkpoint="update-signed"),
    "stray segment": _stray_segment,
    "everything removed": _remove_all,
    "everything removed, new empty ledger": _replace_by_empty,
}
CASES = [("jsonl", name) for name in {**COMMON, **JSONL_ONLY}] + [
    ("segments", name) for name in {**COMMON, **SEGMENTS_ONLY}
]

# What the chain and its checkpoint alone cannot show (the rest they catch): a consistent
# rewrite (rechained, with a new checkpoint), a rollback to an earlier checkpoint, and a JSONL
# ledger with every trace of its chain removed (then shown as unprotected, a warning).
UNSEEN_WITHOUT_ANCHOR = {
    "edit, rechained, new checkpoint",
    "edit, rechained, signature copied",
    "delete, rechained, new checkpoint",
    "reorder, rechained, new checkpoint",
    "duplicate, rechained, new checkpoint",
    "truncate, new checkpoint",
    "truncate, earlier signed checkpoint restored",
    "strip chain keys, checkpoint deleted",
    "forged append, new checkpoint",
    "forged append, signature copied",
    "insert, rechained, new checkpoint",
    "group members edited, rechained, new checkpoint",
    "segment edited, manifest rechained",
    "segment forged, new checkpoint",
    "segment forged, signature copied",
    "everything removed, new empty ledger",
}
# What a signature alone cannot show: a rollback to a state it did sign (the recorded head does).
UNSEEN_WITH_SIGNATURE_ONLY = {"truncate, earlier signed checkpoint restored"}


def _audits(b: Built) -> dict[str, AuditResult]:
    return {
        "none": run_audit([b.path], POPULATION),
        "expected head": run_audit([b.path], POPULATION, expect_head=b.head),
        "signature": run_audit([b.path], POPULATION, public_key=b.public_key),
    }


@pytest.mark.parametrize("kind", ["jsonl", "segments"])
def test_the_untouched_ledger_passes_every_audit(
    tmp_path: Path, kind: str, keys: tuple[Path, Path]
) -> None:
    """The negative control: nothing changed, nothing reported, under every anchor."""
    b = _build(kind, tmp_path, keys)
    for anchor, result in _audits(b).items():
        assert result.status == "compliant", (anchor, result.integrity[0].summary())
        assert result.verdict.per_user_charges == b.charges


@pytest.mark.parametrize(("kind", "name"), CASES, ids=[f"{k}: {n}" for k, n in CASES])
def test_each_tampering_is_detected_with_the_head_or_the_key(
    tmp_path: Path, kind: str, name: str, keys: tuple[Path, Path]
) -> None:
    b = _build(kind, tmp_path, keys)
    {**COMMON, **JSONL_ONLY, **SEGMENTS_ONLY}[name](b)
    found = _audits(b)
    seen = {anchor: r.status != "compliant" for anchor, r in found.items()}
    assert seen["expected head"], found["expected head"].integrity[0].summary()
    assert seen["signature"] == (name not in UNSEEN_WITH_SIGNATURE_ONLY), (
        found["signature"].integrity[0].summary()
    )
    # A segment ledger is durable by its layout: even with every trace of its chain removed.
    unseen = UNSEEN_WITHOUT_ANCHOR - (
        {"strip chain keys, checkpoint deleted"} if kind == "segments" else set()
    )
    assert seen["none"] == (name not in unseen), found["none"].integrity[0].summary()
    for anchor, result in found.items():
        if result.status == "uncommitted-tail":  # reported, and the forged part not audited
            assert result.verdict.per_user_charges == b.charges, anchor
        if result.status != "compliant":
            assert result.status in ("integrity-failure", "uncommitted-tail"), anchor
    if name == "strip chain keys, checkpoint deleted" and kind == "jsonl":
        assert found["none"].integrity[0].state == "unprotected"  # a warning, never "ok"


def test_the_command_line_exit_codes_for_tampering(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """Through `wevent audit`: an integrity failure exits 5, a forged append left past the
    checkpoint 6 (never audited), and the rollback a signature cannot see exits 0 with the key
    alone but 5 with the recorded head."""
    reqs = tmp_path / "req.csv"
    reqs.write_text("user,w,epsilon\na,3,1\nb,3,1\nc,3,1\n")

    def audit(b: Built, *anchor: str) -> int:
        return CliRunner().invoke(cli, ["audit", str(b.path), "-r", str(reqs), *anchor]).exit_code

    for kind in ("jsonl", "segments"):
        built = {}
        for case in ("edit", "append", "rollback"):
            (tmp_path / kind / case).mkdir(parents=True)
            built[case] = _build(kind, tmp_path / kind / case, keys)
        b = built["edit"]
        assert audit(b, "--expect-head", b.head) == EXIT_OK
        COMMON["edit, rechained, new checkpoint"](b)
        assert audit(b) == EXIT_OK  # the chain alone: unseen
        assert audit(b, "--expect-head", b.head) == EXIT_INTEGRITY
        assert audit(b, "--public-key", str(b.public_key)) == EXIT_INTEGRITY
        b = built["append"]
        (JSONL_ONLY["forged append"] if kind == "jsonl" else SEGMENTS_ONLY["segment forged"])(b)
        assert audit(b) == EXIT_TAIL
        assert audit(b, "--expect-head", b.head[:16]) == EXIT_TAIL
        b = built["rollback"]
        _rollback(b)
        assert audit(b, "--public-key", str(b.public_key)) == EXIT_OK
        assert audit(b, "--expect-head", b.head) == EXIT_INTEGRITY
