"""The row rules of a Parquet ledger, checked in one streaming pass that every audit engine runs
before it reads the file (docs/formats.md, "Ledgers"): so numpy, DuckDB and Spark refuse the
same files with the same message, naming the first offending row, in memory bounded by a batch
and the number of distinct groups, amounts and evidence values.

Per row: a membership row (null slot) names a group, a user unless the group has no members,
and no epsilon; a charge names exactly one of user or group, an exact epsilon and a slot from 1
to `MAX_SLOT`; text fields hold no NUL and keep the length limits of `inputs.text_problem`
(evidence is valid evidence JSON). Across rows: a group's membership rows precede its
first charge (a group is defined in the file before it is charged, or in an earlier file of the
ledger), and a group declared without members (a membership row without a user) has no other
membership row. Rules that need every membership pair at once (a member listed twice, a group
defined again with other members) stay with the engines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

import numpy as np

from wevent.accounting.budget import MAX_SLOT, Budget, BudgetError, shown
from wevent.accounting.evidence import evidence_from_json
from wevent.accounting.inputs import FormatError, check_input_file, text_problem, unknown_name

__all__ = [
    "LEDGER_COLUMNS",
    "MEMBERSHIP_ROW",
    "check_coded_rows",
    "check_ledger_columns",
    "check_parquet_columns",
    "check_parquet_rows",
]

LEDGER_COLUMNS = ("slot", "user", "group", "epsilon", "part", "mechanism", "evidence")
_PANDAS_INDEX = re.compile(r"__index_level_\d+__")
MEMBERSHIP_ROW = (
    "a membership row (empty slot) gives a group, a user unless the group has no members, "
    "and nothing else (no epsilon, part, mechanism or evidence)"
)


def _value_type(kind: Any) -> Any:
    """The type of a column's values (a dictionary column's value type)."""
    import pyarrow as pa

    return kind.value_type if pa.types.is_dictionary(kind) else kind


def check_ledger_columns(path: Path, names: set[str], type_of: Callable[[str], Any]) -> None:
    """Refuse a columnar ledger (Parquet) whose columns are not the documented ones: ``slot`` of
    an integer type, ``epsilon``, ``user``, ``group``, ``part``, ``mechanism`` and ``evidence``
    of a string type (exact amounts are strings), ``slot``, ``epsilon`` and one of ``user`` or
    ``group`` present. Every engine calls this before it reads a file, so a float amount or a
    fractional slot is refused alike, never rounded by one engine and truncated by another."""
    import pyarrow as pa

    missing = [c for c in ("slot", "epsilon") if c not in names]
    if missing or not ({"user", "group"} & names):
        raise FormatError(f"{path}: missing column(s): {', '.join(missing) or 'user'}")
    # A column no engine reads is refused, not dropped (a misspelt evidence column would leave
    # every charge unchecked); pandas' index columns, which to_parquet adds, hold no charge.
    unknown = unknown_name(
        sorted(n for n in names if not _PANDAS_INDEX.fullmatch(n)),
        LEDGER_COLUMNS,
        "a ledger's columns are",
    )
    if unknown is not None:
        raise FormatError(f"{path}: column {unknown}")
    for name in ("user", "group", "epsilon", "part", "mechanism", "evidence"):
        if name in names:
            kind = _value_type(type_of(name))
            if not (
                pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)
            ):
                hint = " (write exact numbers as strings)" if name == "epsilon" else ""
                raise FormatError(f"{path}: column {name!r} must hold strings, found {kind}{hint}")
    slot_type = _value_type(type_of("slot"))
    if (
        not (pa.types.is_integer(slot_type) or pa.types.is_null(slot_type))
        or slot_type == pa.uint64()
    ):
        raise FormatError(
            f"{path}: column 'slot' must hold integers of a signed type or up to 32 bits, found "
            f"{slot_type}"
        )


def check_parquet_columns(path: Path) -> None:
    """`check_ledger_columns` for a Parquet file, from its schema alone (FormatError for a
    file that is not readable Parquet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_input_file(path, FormatError)
    try:
        schema = pq.read_schema(path)
    except UnicodeDecodeError as exc:  # Parquet's strings are UTF-8 by definition
        raise FormatError(
            f"{path}: a text column holds bytes that are not UTF-8 text ({exc.reason} at byte "
            f"{exc.start} of a value)"
        ) from None
    except (OSError, pa.ArrowException) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FormatError(f"{path}: not a readable Parquet file ({first})") from None
    names = list(schema.names)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FormatError(
            f"{path}: column {shown(twice[0])} appears twice in the schema (which one holds the "
            "value?)"
        )
    check_ledger_columns(path, set(names), lambda name: schema.field(name).type)


_TEXT = ("user", "group", "part", "mechanism", "evidence", "epsilon")
_BATCH = 1 << 20


class Coded:
    """A string column (or a slice of one) as codes into its distinct values, with what each
    value is: blank (empty or null) and whether it breaks the text limits."""

    def __init__(
        self,
        codes: np.ndarray[Any, Any],
        values: list[str],
        evidence: bool,
        blank: np.ndarray[Any, Any] | None = None,
        bad: np.ndarray[Any, Any] | None = None,
    ) -> None:
        self.codes = codes
        self.values = values
        self.evidence = evidence
        self.blank = np.array([v == "" for v in values], bool) if blank is None else blank
        self.bad = (
            np.array(
                [bool(v) and text_problem(v, evidence=evidence) is not None for v in values], bool
            )
            if bad is None
            else bad
        )

    def slice(self, a: int, b: int) -> Coded:
        return Coded(self.codes[a:b], self.values, self.evidence, self.blank, self.bad)

    @classmethod
    def absent(cls, n: int) -> Coded:
        return cls(np.zeros(n, np.int64), [""], False)

    @classmethod
    def of_arrow(cls, column: Any, evidence: bool) -> Coded:
        """A batch's Arrow string column ("" for null)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if pa.types.is_null(column.type):
            return cls(np.zeros(len(column), np.int64), [""], evidence)
        if not pa.types.is_dictionary(column.type):
            column = pc.dictionary_encode(column)
        values = ["" if v is None else str(v) for v in column.dictionary.to_pylist()]
        codes = pc.fill_null(column.indices, len(values)).to_numpy(zero_copy_only=False)
        return cls(np.asarray(codes), [*values, ""], evidence)


class _Scan:
    """The state of one file's pass: what earlier batches established."""

    def __init__(self, path: Path, earlier: Container[str]) -> None:
        self.path = path
        self.earlier = earlier  # groups the ledger's earlier files define
        self.first_charge: dict[str, int] = {}  # group: its first charge row (0-based)
        self.first_member: dict[str, int] = {}  # group: its first membership row
        self.empty: dict[str, int] = {}  # group declared without members: that row
        self.defined_at: dict[str, int] = {}  # group: its first membership row of any kind
        self.amounts: set[str] = set()  # epsilon strings found exact
        self.evidence: set[str] = set()  # evidence strings found valid

    def batch(
        self,
        start: int,
        is_member: np.ndarray[Any, Any],
        slots: np.ndarray[Any, Any],
        cols: dict[str, Coded],
    ) -> None:
        """Rows ``start``.. (0-based): ``is_member`` (null slot), ``slots`` (any value on
        membership rows) and the text columns (`_TEXT`, absent ones blank)."""
        n = len(is_member)
        problems: list[tuple[int, str]] = []  # (row, message): the earliest row is raised

        def first(mask: np.ndarray[Any, Any], message: Any) -> None:
            if bool(mask.any()):
                k = int(np.argmax(mask))
                problems.append((start + k, message(k) if callable(message) else message))

        col = {name: cols.get(name) or Coded.absent(n) for name in _TEXT}
        blank = {name: c.blank[c.codes] for name, c in col.items()}
        for name in ("user", "group", "part", "mechanism", "evidence"):
            c = col[name]
            if bool(c.bad.any()):
                first(
                    c.bad[c.codes],
                    lambda k, c=c, name=name: (
                        f"{name} {text_problem(c.values[int(c.codes[k])], evidence=c.evidence)}"
                    ),
                )
        extra = ~blank["epsilon"] | ~blank["part"] | ~blank["mechanism"] | ~blank["evidence"]
        first(is_member & (blank["group"] | extra), MEMBERSHIP_ROW)
        charge = ~is_member
        first(
            charge & (blank["user"] == blank["group"]),
            "a charge names exactly one of user or group",
        )
        first(charge & blank["epsilon"], "epsilon: missing")
        out = charge & ((slots < 1) | (slots > MAX_SLOT))
        first(out, lambda k: f"slot: slots are numbered from 1 to 2^62 - 1, got {slots[k]}")
        self._values(start, charge, col["epsilon"], self.amounts, problems, self._amount)
        self._values(start, charge, col["evidence"], self.evidence, problems, self._evidence)
        self._groups(start, is_member, col["group"], blank["user"], problems)
        if problems:
            row, message = min(problems, key=lambda p: p[0])
            raise FormatError(f"{self.path}: row {row + 1}: {message}")

    @staticmethod
    def _amount(text: str) -> str | None:
        try:
            Budget(text, what="epsilon")
        except BudgetError as exc:
            return str(exc)
        return None

    @staticmethod
    def _evidence(text: str) -> str | None:
        try:
            evidence_from_json(text)
        except BudgetError as exc:
            return str(exc)
        return None

    @staticmethod
    def _values(
        start: int,
        rows: np.ndarray[Any, Any],
        column: Coded,
        known: set[str],
        problems: list[tuple[int, str]],
        problem_of: Any,
    ) -> None:
        """Each distinct non-empty value of ``column`` in ``rows`` checked once per file."""
        codes, values = column.codes, column.values
        used = np.unique(codes[rows]) if bool(rows.any()) else np.zeros(0, np.int64)
        for code in used.tolist():
            value = values[code]
            if not value or value in known:
                continue
            problem = problem_of(value)
            if problem is None:
                known.add(value)
                continue
            k = int(np.argmax(rows & (codes == code)))
            problems.append((start + k, problem))

    def _groups(
        self,
        start: int,
        is_member: np.ndarray[Any, Any],
        group: Coded,
        no_user: np.ndarray[Any, Any],
        problems: list[tuple[int, str]],
    ) -> None:
        """Membership order and empty declarations, carried across batches by group name."""
        codes, values = group.codes, group.values
        named = ~group.blank[codes]
        charged = ~is_member & named
        rows = np.arange(len(codes), dtype=np.int64)
        # This batch's first charge of each group, before any membership row is judged.
        batch_first: dict[str, int] = {}
        if bool(charged.any()):
            charge_rows = rows[charged]
            uniq, idx = np.unique(codes[charged], return_index=True)
            for code, row in zip(uniq.tolist(), charge_rows[idx].tolist(), strict=True):
                batch_first[values[code]] = start + int(row)
        members = is_member & named
        if bool(members.any()):
            m_rows = rows[members] + start
            m_codes = codes[members]
            m_empty = no_user[members]
            order = np.argsort(m_codes, kind="stable")  # by group, then row
            by_group = m_codes[order]
            starts = np.flatnonzero(np.r_[True, by_group[1:] != by_group[:-1]])
            ends = np.r_[starts[1:], len(order)]
            any_empty = np.logical_or.reduceat(m_empty[order], starts)
            for code, a, b, empty in zip(
                by_group[starts].tolist(),
                starts.tolist(),
                ends.tolist(),
                any_empty.tolist(),
                strict=True,
            ):
                name = values[code]
                self.defined_at.setdefault(name, int(m_rows[order[a]]))
                charge_at = self.first_charge.get(name, batch_first.get(name))
                if charge_at is not None and int(m_rows[order[b - 1]]) > charge_at:
                    mine = m_rows[order[a:b]]
                    late = int(mine[np.argmax(mine > charge_at)])
                    problems.append((late, f"members of group {name!r} must precede its charges"))
                if empty or name in self.empty:
                    mine = m_rows[order[a:b]]
                    self._empty(name, mine, mine[m_empty[order[a:b]]], problems)
                elif name not in self.first_member:
                    self.first_member[name] = int(m_rows[order[a]])
        for name, row in batch_first.items():
            if name in self.first_charge:
                continue
            self.first_charge[name] = row
            if self.defined_at.get(name, row) >= row and name not in self.earlier:
                problems.append((row, f"group {name!r} is used before its members are listed"))

    def defined(self) -> set[str]:
        return set(self.defined_at)

    def _empty(
        self,
        name: str,
        mine: np.ndarray[Any, Any],
        empty_here: np.ndarray[Any, Any],
        problems: list[tuple[int, str]],
    ) -> None:
        """The empty-declaration rule for group ``name``, given its rows ``mine`` of this batch
        (``empty_here``: those without a user); the messages of the text readers."""
        declared = self.empty.get(name)
        listed = self.first_member.get(name)
        rows = mine.tolist()
        empties = set(empty_here.tolist())
        for row in rows:
            if row in empties:
                earlier = listed if listed is not None else declared
                if earlier is not None:
                    problems.append(
                        (
                            row,
                            f"a membership row without a user declares group {name!r} without "
                            f"members, but the group is also listed at row {earlier + 1}",
                        )
                    )
                    return
                declared = row
            else:
                if declared is not None:
                    problems.append(
                        (
                            row,
                            f"group {name!r} is declared without members at row {declared + 1} "
                            "and lists a member here",
                        )
                    )
                    return
                if listed is None:
                    listed = row
                if not empties:
                    break  # no empty row in this batch and none before: nothing more to find
        if declared is not None:
            self.empty.setdefault(name, declared)
        if listed is not None:
            self.first_member.setdefault(name, listed)


def check_coded_rows(
    path: Path,
    is_member: np.ndarray[Any, Any],
    slots: np.ndarray[Any, Any],
    cols: dict[str, tuple[np.ndarray[Any, Any], list[str]]],
) -> None:
    """`check_parquet_rows` on a file's columns already in memory as codes into distinct
    values (the numpy reader's form), slice by slice: the same checks and messages, no second
    read of the file."""
    coded = {
        name: Coded(codes, values, name == "evidence") for name, (codes, values) in cols.items()
    }
    scan = _Scan(path, ())
    for start in range(0, len(is_member), _BATCH):
        end = start + _BATCH
        scan.batch(
            start,
            is_member[start:end],
            slots[start:end],
            {name: c.slice(start, end) for name, c in coded.items()},
        )


def check_parquet_rows(path: Path, earlier: Container[str] = ()) -> set[str]:
    """Refuse a Parquet ledger that breaks a row rule (see the module docstring) with a
    `FormatError` naming the file, the first offending row (1-based) and the field; the names
    of the groups the file defines. ``earlier``: the groups the ledger's earlier files define,
    which this file may charge without listing them. Checks the columns' types first
    (`check_parquet_columns`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_parquet_columns(path)
    try:
        schema = pq.read_schema(path)
        strings = [f.name for f in schema if f.name in _TEXT]
        reader = pq.ParquetFile(path, read_dictionary=strings)  # decoded once per dictionary
        names = set(schema.names)
        wanted = ["slot", *[c for c in _TEXT if c in names]]
        scan = _Scan(path, earlier)
        start = 0
        for batch in reader.iter_batches(batch_size=_BATCH, columns=wanted):
            slot = batch.column("slot").cast(pa.int64())  # a null-typed column: all null
            is_member = np.asarray(slot.is_null().to_numpy(zero_copy_only=False), bool)
            slots = np.asarray(slot.fill_null(1).to_numpy(zero_copy_only=False), np.int64)
            cols = {c: Coded.of_arrow(batch.column(c), c == "evidence") for c in wanted[1:]}
            scan.batch(start, is_member, slots, cols)
            start += batch.num_rows
        return scan.defined()
    except UnicodeDecodeError as exc:  # Parquet's strings are UTF-8 by definition
        raise FormatError(
            f"{path}: a text column holds bytes that are not UTF-8 text ({exc.reason} at byte "
            f"{exc.start} of a value)"
        ) from None
    except (OSError, pa.ArrowException) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FormatError(f"{path}: not a readable Parquet file ({first})") from None
