"""A deployment audit: the integrity of every ledger, then the verdict of one engine over the
verified content, with what a report needs to stand as evidence (the inputs and their SHA-256,
the tool's version, the time and the command).

A durable ledger (`wevent.accounting.durable`) contributes only what its anchors vouch for: the
records before a torn or unanchored tail or the first integrity problem, and the committed
segments whose hashes match. Anything else is reported, never audited silently and never dropped
silently.

The audit's status, in order of precedence: ``integrity-failure`` (a ledger is broken: tampered,
a head or signature that does not match, a durable ledger without its chain or checkpoint),
``not-compliant`` (a window or evidence violation in the audited content), ``uncommitted-tail``
(a crashed writer's tail, the audited content compliant; `wevent ledger repair` cuts it), and
``compliant``. An unprotected (plain) ledger is a warning, not a status of its own.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wevent.accounting.budget import BudgetError
from wevent.accounting.durable import (
    Integrity,
    audit_integrity,
    check_expected_head,
    file_sha256,
    verified_records,
)
from wevent.accounting.formats import count_records
from wevent.accounting.population import Population
from wevent.verifier.engines import make_engine
from wevent.verifier.sql import SqlDetails
from wevent.verifier.verdict import Verdict

if TYPE_CHECKING:
    from wevent.accounting.signing import PublicKeySource

__all__ = ["STATUSES", "AuditResult", "InputFile", "run_audit", "tool_version"]

# The statuses of an audit, most severe first.
STATUSES = ("integrity-failure", "not-compliant", "uncommitted-tail", "compliant")


def tool_version() -> str:
    """The installed wevent's version (``0+unknown`` in a source tree never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wevent")
    except PackageNotFoundError:
        return "0+unknown"


@dataclass(frozen=True, slots=True)
class InputFile:
    """One file an audit read: its role (``ledger`` or ``requirements``), the input it belongs
    to (a ledger's directory or file as given), its path, size and SHA-256 (hashed before any
    check ran)."""

    role: str
    input: str
    path: str
    bytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "input": self.input,
            "path": self.path,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }


def _hash(role: str, given: Path, path: Path) -> InputFile:
    return InputFile(role, str(given), str(path), path.stat().st_size, file_sha256(path))


def hash_inputs(role: str, paths: Sequence[Path]) -> tuple[InputFile, ...]:
    """Every file of the inputs: a file with its checkpoint sidecar (``FILE.head``) when there is
    one, a directory's files in sorted order. Missing inputs are skipped (the audit reports
    them)."""
    out: list[InputFile] = []
    for given in paths:
        if given.is_dir():
            out += [_hash(role, given, f) for f in sorted(given.rglob("*")) if f.is_file()]
            continue
        for f in (given, given.with_name(given.name + ".head")):
            if f.is_file():
                out.append(_hash(role, given, f))
    return tuple(out)


@dataclass(frozen=True)
class AuditResult:
    """Everything an audit found: per-file integrity, the verdict and report data, and what it
    was run on (``files``: every input file with its SHA-256; ``command``, ``created`` (UTC),
    ``version``)."""

    engine: str
    inputs: tuple[str, ...]
    integrity: tuple[Integrity, ...]
    verdict: Verdict
    details: SqlDetails
    population: Population
    files: tuple[InputFile, ...] = ()
    requirements: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    created: str = ""
    version: str = ""
    expected_heads: tuple[str, ...] = ()
    public_key: str = ""  # the hex digits of the key the checkpoints were verified under

    @property
    def integrity_ok(self) -> bool:
        """No ledger is broken and none has an uncommitted tail (unprotected ones pass)."""
        return all(i.state != "broken" and not i.torn for i in self.integrity)

    @property
    def unprotected(self) -> tuple[str, ...]:
        """The plain ledgers: nothing could show that they were changed."""
        return tuple(i.path for i in self.integrity if i.state == "unprotected")

    @property
    def status(self) -> str:
        """One of `STATUSES` (the most severe that applies)."""
        if any(i.state == "broken" for i in self.integrity):
            return "integrity-failure"
        if not self.verdict.ok:
            return "not-compliant"
        if any(i.torn for i in self.integrity):
            return "uncommitted-tail"
        return "compliant"

    @property
    def ok(self) -> bool:
        """Compliant and every ledger intact: every window and evidence record holds, and every
        ledger is durable, its chain verified, without an uncommitted tail. An unprotected
        (plain) ledger is never ok (its status is still ``compliant``, a warning, exit 0)."""
        return self.status == "compliant" and all(i.ok for i in self.integrity)


def _expected(expect_head: str | Sequence[str] | None, paths: Sequence[Path]) -> list[str | None]:
    if expect_head is None:
        return [None] * len(paths)
    values = [expect_head] if isinstance(expect_head, str) else list(expect_head)
    if len(values) != len(paths):
        raise BudgetError(
            f"{len(values)} expected head(s) for {len(paths)} ledger(s): give one --expect-head "
            "per ledger, in the order of the ledgers"
        )
    return [check_expected_head(v) for v in values]


def run_audit(
    paths: Sequence[Path | str],
    population: Population,
    *,
    engine: str = "numpy",
    horizon: int | None = None,
    expect_head: str | Sequence[str] | None = None,
    public_key: PublicKeySource | None = None,
    requirements: Sequence[Path | str] = (),
    command: Sequence[str] = (),
    memory_limit: str = "4GB",
    progress: Callable[[str], None] | None = None,
) -> AuditResult:
    """Hash every input, verify each ledger's integrity, then audit the verified content of all
    of them, in order, as one ledger. ``expect_head``: one head (or prefix of at least 16 hex
    digits) per ledger, recorded where the writer cannot change it; ``public_key``: the key every
    durable ledger's checkpoint must be signed with. ``requirements`` and ``command`` are recorded
    for the report (the population is what is checked)."""
    say = progress or (lambda _s: None)
    ledgers = [Path(p) for p in paths]
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    say("hashing inputs")
    req_paths = [Path(p) for p in requirements]
    files = hash_inputs("ledger", ledgers) + hash_inputs("requirements", req_paths)
    say("integrity")
    expected = _expected(expect_head, ledgers)
    key = None
    key_hex = ""
    if public_key is not None:
        from wevent.accounting.signing import key_id, load_public_key

        key = load_public_key(public_key)
        key_hex = key_id(key)
    integrity = tuple(
        audit_integrity(p, expect_head=e, public_key=key)
        for p, e in zip(ledgers, expected, strict=True)
    )
    with tempfile.TemporaryDirectory(prefix="wevent-verified-") as tmp:
        audited: list[Path] = []
        owner: list[int] = []  # the ledger each audited file belongs to
        for k, found in enumerate(integrity):
            if found.layout == "chained-jsonl" and not found.complete:
                # Audit exactly the verified, anchored prefix (a tail or a tampered line is not).
                audited.append(_prefix(found, Path(tmp) / f"verified-{k}"))
                owner.append(k)
            else:
                audited.extend(Path(f) for f in found.files)
                owner += [k] * len(found.files)
        if not audited:  # nothing committed (an empty segment directory): the empty ledger
            empty = Path(tmp) / "empty.jsonl"
            empty.write_bytes(b"")
            audited.append(empty)
        try:
            verdict, details = make_engine(engine, memory_limit=memory_limit).audit(
                audited, population, horizon=horizon, progress=progress
            )
        except BudgetError as exc:  # name the user's ledger, not the verified prefix's copy
            text = str(exc)
            for k, found in enumerate(integrity):
                text = text.replace(str(Path(tmp) / f"verified-{k}.jsonl"), found.path)
            if text == str(exc):
                raise
            raise BudgetError(text) from None
    return AuditResult(
        engine,
        tuple(str(p) for p in ledgers),
        _counted(integrity, owner, details.file_charges),
        verdict,
        details,
        population,
        files,
        tuple(str(p) for p in req_paths),
        tuple(command),
        created,
        tool_version(),
        tuple(e for e in expected if e is not None),
        key_hex,
    )


def _counted(
    integrity: tuple[Integrity, ...], owner: Sequence[int], file_charges: Sequence[int]
) -> tuple[Integrity, ...]:
    """Each ledger's integrity with what the audit read in it: a plain file's records (as its
    reader counts them) and charge rows (as the engine counted them), and a note on a ledger
    whose audited content holds no charge."""
    out = []
    for k, found in enumerate(integrity):
        if not found.counted:
            rows = sum(n for j, n in zip(owner, file_charges, strict=True) if j == k)
            found = replace(found, records=count_records(found.path), rows=rows, counted=True)
        if found.rows == 0 and found.state != "broken":
            note = (
                "empty: no charge"
                if found.records == 0
                else f"no charge: its {found.records} record(s) only define groups"
            )
            found = replace(found, notes=(*found.notes, note))
        out.append(found)
    return tuple(out)


def _prefix(found: Integrity, stem: Path) -> Path:
    """The first ``found.records`` records of a chained JSONL ledger in a file of their own, as
    JSONL, so that the engines read it under every rule a ledger file is read under (a record
    is one line, so its line number is the original's)."""
    out = stem.with_suffix(".jsonl")
    with out.open("w", encoding="utf-8") as fh:
        for rec in verified_records(found.path, limit=found.records):
            fh.write(json.dumps(rec, ensure_ascii=True) + "\n")
    return out
