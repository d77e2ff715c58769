"""The durable writers take typed records and refuse a bad one, in one `InputError`-family error,
before anything of it is written; every line separator a reader may split on is escaped."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from wevent.accounting.budget import Budget
from wevent.accounting.durable import (
    LINE_BREAKS_UNESCAPED,
    ChainedJsonlWriter,
    LedgerIntegrityError,
    RecordError,
    SegmentWriter,
    _line,
    audit_integrity,
    verified_records,
)
from wevent.accounting.evidence import Laplace
from wevent.accounting.formats import read_ledger, read_ledgers
from wevent.accounting.ledger import Charge
from wevent.errors import InputError

Writer = ChainedJsonlWriter | SegmentWriter
WRITERS = ["jsonl", "segments"]


def _open(kind: str, root: Path) -> Writer:
    if kind == "jsonl":
        return ChainedJsonlWriter(root / "l.jsonl")
    return SegmentWriter(root / "l.wledger")


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _ledger(kind: str, root: Path) -> Any:
    found = audit_integrity(root / ("l.jsonl" if kind == "jsonl" else "l.wledger"))
    assert found.ok, found.summary()
    return read_ledgers([Path(f) for f in found.files])


def _started(kind: str, root: Path) -> Writer:
    w = _open(kind, root)
    w.define_group("g", ["a", "b"])
    w.append_charge(Charge(2, Budget("1/10"), group="g"))
    w.commit()
    return w


BAD: list[tuple[str, Callable[[Writer], None], str]] = [
    ("junk", lambda w: w.append({"foo": "bar"}), "unknown field(s) 'foo'"),
    ("float epsilon", lambda w: w.append({"slot": 2, "user": "a", "epsilon": 0.1}), "float"),
    (
        "float amount",
        lambda w: w.append_charge(Charge(2, 0.1, user="a")),  # type: ignore[arg-type]
        "float",
    ),
    ("extra field", lambda w: w.append({"slot": 2, "user": "a", "epsilon": "1", "x": 1}), "'x'"),
    ("no epsilon", lambda w: w.append({"slot": 2, "user": "a"}), "epsilon: missing"),
    ("inexact text", lambda w: w.append({"slot": 2, "user": "a", "epsilon": "abc"}), "exact"),
    ("negative", lambda w: w.append({"slot": 2, "user": "a", "epsilon": "-1"}), "negative"),
    ("slot 0", lambda w: w.append({"slot": 0, "user": "a", "epsilon": "1"}), "from 1"),
    ("slot text", lambda w: w.append({"slot": "3", "user": "a", "epsilon": "1"}), "whole"),
    ("slot bool", lambda w: w.append({"slot": True, "user": "a", "epsilon": "1"}), "whole"),
    ("slot before", lambda w: w.append({"slot": 1, "user": "a", "epsilon": "1"}), "slot order"),
    ("both", lambda w: w.append({"slot": 2, "user": "a", "group": "g", "epsilon": "1"}), "exactly"),
    ("neither", lambda w: w.append({"slot": 2, "epsilon": "1"}), "exactly one"),
    ("undefined group", lambda w: w.append_charge(Charge(2, Budget(1), group="h")), "before"),
    ("member twice", lambda w: w.define_group("h", ["a", "b", "a"]), "'a' twice"),
    ("other members", lambda w: w.define_group("g", ["a"]), "other members"),
    ("members text", lambda w: w.append({"group": "h", "members": "ab"}), "list"),
    ("member id", lambda w: w.define_group("h", ["a", 3]), "string"),  # type: ignore[list-item]
    ("group field", lambda w: w.append({"group": "h", "members": ["a"], "x": 1}), "'x'"),
    ("surrogate", lambda w: w.append({"slot": 2, "user": "\ud800", "epsilon": "1"}), "Unicode"),
    ("member surrogate", lambda w: w.define_group("h", ["a", "b\udc00"]), "Unicode"),
    ("member empty", lambda w: w.define_group("h", ["a", ""]), "empty"),
    (
        "chain key",
        lambda w: w.append({"slot": 2, "user": "a", "epsilon": "1", "chain": "0"}),
        "chain",
    ),
    (
        "evidence field",
        lambda w: w.append(
            {
                "slot": 2,
                "user": "a",
                "epsilon": "1",
                "evidence": {"kind": "laplace", "sensitivity": "1", "scale": "2", "seed": 7},
            }
        ),
        "'seed'",
    ),
    (
        "evidence float",
        lambda w: w.append(
            {
                "slot": 2,
                "user": "a",
                "epsilon": "1",
                "evidence": {"kind": "laplace", "sensitivity": 1.0, "scale": "2"},
            }
        ),
        "exact",
    ),
    (
        "evidence type",
        lambda w: w.append_charge(Charge(2, Budget(1), user="a", evidence="x")),  # type: ignore[arg-type]
        "evidence",
    ),
    ("part type", lambda w: w.append_charge(Charge(2, Budget(1), user="a", part=3)), "part"),  # type: ignore[arg-type]
    ("not a mapping", lambda w: w.append([("slot", 1)]), "mapping"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("kind", WRITERS)
@pytest.mark.parametrize(("case", "bad", "message"), BAD, ids=[c for c, _, _ in BAD])
def test_a_bad_record_is_refused_before_anything_is_written(
    tmp_path: Path, kind: str, case: str, bad: Callable[[Writer], None], message: str
) -> None:
    w = _started(kind, tmp_path)
    w.append({"slot": 2, "user": "a", "epsilon": "1/10"})  # a pending good record stays
    before = _snapshot(tmp_path)
    with pytest.raises(RecordError) as refused:
        bad(w)
    assert isinstance(refused.value, InputError)  # the CLI's one-line family, exit 2
    text = str(refused.value)
    assert message in text and "nothing written" in text and "\n" not in text, text
    assert _snapshot(tmp_path) == before  # nothing reached the disk
    w.close()
    ledger = _ledger(kind, tmp_path)
    assert [(c.slot, c.user or c.group, c.amount) for c in ledger] == [
        (2, "g", Fraction(1, 10)),
        (2, "a", Fraction(1, 10)),
    ]


@pytest.mark.parametrize("kind", WRITERS)
def test_good_records_of_every_form_are_written_canonically(tmp_path: Path, kind: str) -> None:
    """The negative control of the refusals: typed records, and mappings that parse to them
    (amounts as exact text, Fraction or int; evidence as a mapping or an object), are written;
    the same slot twice is in order, and a group defined again with its members adds nothing."""
    w = _open(kind, tmp_path)
    w.define_group("g", ["a", "b"])
    w.define_group("g", ["a", "b"])
    w.append({"slot": 1, "group": "g", "epsilon": "0.10", "part": "publication"})
    w.append({"slot": 1, "user": "a", "epsilon": Fraction(1, 3), "mechanism": "m"})
    w.append(
        {
            "slot": 2,
            "user": "b",
            "epsilon": 1,
            "evidence": {"kind": "laplace", "sensitivity": "1", "scale": "1"},
        }
    )
    w.append_charge(Charge(2, Budget("1/2"), user="c", evidence=Laplace(Fraction(1), Fraction(2))))
    w.close()
    ledger = _ledger(kind, tmp_path)
    assert ledger.members("g") == ("a", "b")
    assert [(c.slot, c.user or c.group, c.amount) for c in ledger] == [
        (1, "g", Fraction(1, 10)),
        (1, "a", Fraction(1, 3)),
        (2, "b", Fraction(1)),
        (2, "c", Fraction(1, 2)),
    ]
    if kind == "jsonl":
        recs = list(verified_records(tmp_path / "l.jsonl"))
        assert len(recs) == 5  # one group definition, four charges
        assert recs[1]["epsilon"] == "0.1"  # written canonically


@pytest.mark.parametrize("kind", WRITERS)
def test_a_reopened_writer_knows_the_groups_and_the_last_slot(tmp_path: Path, kind: str) -> None:
    _started(kind, tmp_path).close()
    w = _open(kind, tmp_path)
    w.append_charge(Charge(3, Budget(1), group="g"))  # defined in the earlier session
    w.define_group("g", ["a", "b"])  # the same members: nothing
    with pytest.raises(RecordError, match="other members"):
        w.define_group("g", ["b", "a"])
    with pytest.raises(RecordError, match="slot order"):
        w.append_charge(Charge(1, Budget(1), user="a"))
    w.close()
    assert [c.slot for c in _ledger(kind, tmp_path)] == [2, 3]


def test_a_writer_refuses_a_plain_file_and_starts_in_an_empty_one(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"slot": 1, "user": "a", "epsilon": "1"}\n')
    with pytest.raises(LedgerIntegrityError, match="plain ledger"):
        ChainedJsonlWriter(plain)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with ChainedJsonlWriter(empty) as w:
        w.append({"slot": 1, "user": "a", "epsilon": "1"})
    assert audit_integrity(empty).ok


def test_every_line_break_a_reader_may_split_on_is_escaped() -> None:
    """`_line` leaves no character that `str.splitlines` breaks on (the set the JSONL readers of
    many tools use); json.dumps alone would leave three of them raw (the control)."""
    breaks = [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if not 0xD800 <= c <= 0xDFFF and len(f"a{chr(c)}b".splitlines()) > 1
    ]
    assert set(LINE_BREAKS_UNESCAPED) < set(breaks)
    for ch in breaks:
        text = _line({"user": f"a{ch}b"}).decode()
        assert len(text.splitlines()) == 1 and json.loads(text) == {"user": f"a{ch}b"}, repr(ch)
    raw = [ch for ch in breaks if ch in json.dumps({"u": ch}, ensure_ascii=False)]
    assert sorted(raw) == sorted(LINE_BREAKS_UNESCAPED)


@pytest.mark.parametrize("kind", WRITERS)
def test_ids_holding_line_separators_round_trip(tmp_path: Path, kind: str) -> None:
    ids = ["a\u2028b", "c\u2029d", "e\x85f", "g\nh", "i\rj", "k\x1cl"]
    with _open(kind, tmp_path) as w:
        w.define_group("line\u2028group", ids[:2])
        w.append_charge(Charge(1, Budget("1/10"), group="line\u2028group"))
        for k, user in enumerate(ids):
            w.append_charge(Charge(2, Budget(k + 1), user=user, part="p\u2029"))
    if kind == "jsonl":
        raw = (tmp_path / "l.jsonl").read_bytes().decode()
        assert not any(ch in raw for ch in LINE_BREAKS_UNESCAPED)
        assert len(raw.splitlines()) == 1 + 1 + len(ids)
        ledger = read_ledger(tmp_path / "l.jsonl")  # the ordinary reader, as written
    else:
        ledger = _ledger(kind, tmp_path)
    assert ledger.members("line\u2028group") == tuple(ids[:2])
    assert [c.user for c in ledger if c.user is not None] == ids
    assert {c.part for c in ledger if c.user is not None} == {"p\u2029"}
