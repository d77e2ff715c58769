"""A deployment audit: chain integrity of every ledger file, then the verdict of one engine over
the verified content, with the data a report shows.

A durable ledger (`wevent.accounting.durable`) contributes only what its chain verifies: the records
before a torn tail or the first integrity problem, and the committed segments whose hashes match.
Anything else is reported, never audited silently and never dropped silently.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wevent.accounting.budget import BudgetError
from wevent.accounting.durable import Integrity, audit_integrity, records_table
from wevent.accounting.population import Population
from wevent.verifier.engines import make_engine
from wevent.verifier.sql import SqlDetails
from wevent.verifier.verdict import Verdict

__all__ = ["AuditResult", "run_audit"]


@dataclass(frozen=True)
class AuditResult:
    """Everything an audit found: per-file integrity, the verdict and report data."""

    engine: str
    inputs: tuple[str, ...]
    integrity: tuple[Integrity, ...]
    verdict: Verdict
    details: SqlDetails
    population: Population

    @property
    def integrity_ok(self) -> bool:
        return all(i.ok for i in self.integrity)

    @property
    def ok(self) -> bool:
        """Compliant: every window and evidence record holds and every chain is intact."""
        return self.verdict.ok and self.integrity_ok


def run_audit(
    paths: Sequence[Path],
    population: Population,
    *,
    engine: str = "numpy",
    horizon: int | None = None,
    expect_head: str | None = None,
    memory_limit: str = "4GB",
    progress: Callable[[str], None] | None = None,
) -> AuditResult:
    """Verify each ledger's chain, then audit the verified content of all of them, in order, as
    one ledger. ``expect_head`` (hex) anchors the chain of a single durable ledger."""
    say = progress or (lambda _s: None)
    say("integrity")
    if expect_head is not None and len(paths) != 1:
        raise BudgetError("--expect-head anchors one durable ledger; give exactly one")
    integrity = tuple(audit_integrity(p, expect_head=expect_head) for p in paths)
    with tempfile.TemporaryDirectory(prefix="wevent-verified-") as tmp:
        files: list[Path] = []
        for k, found in enumerate(integrity):
            if found.layout == "chained-jsonl" and not found.ok:
                # Audit exactly the verified prefix (a torn tail or a tampered line is excluded).
                from wevent.accounting.durable import verified_records

                try:
                    import pyarrow.parquet as pq
                except ModuleNotFoundError:  # the core install: the prefix as plain JSONL
                    prefix = Path(tmp) / f"verified-{k}.jsonl"
                    with prefix.open("w", encoding="utf-8") as out:
                        for rec in verified_records(found.path):
                            out.write(json.dumps(rec, ensure_ascii=True) + "\n")
                else:
                    prefix = Path(tmp) / f"verified-{k}.parquet"
                    pq.write_table(records_table(verified_records(found.path)), prefix)
                files.append(prefix)
            else:
                files.extend(Path(f) for f in found.files)
        if not files:
            raise BudgetError("no verified ledger content to audit")
        verdict, details = make_engine(engine, memory_limit=memory_limit).audit(
            files, population, horizon=horizon, progress=progress
        )
    return AuditResult(
        engine, tuple(str(p) for p in paths), integrity, verdict, details, population
    )
