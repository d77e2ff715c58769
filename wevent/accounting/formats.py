"""Reading and writing requirements and ledgers in the documented file formats (docs/formats.md).

Everything is exact: budgets and evidence numbers are decimal strings or ``a/b``. Every problem in
an input file raises `FormatError` with the file, the line and what is wrong, in one line.
"""

from __future__ import annotations

import csv
import errno
import io
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wevent.accounting.budget import (
    Budget,
    BudgetError,
    check_slot,
    format_exact,
    parse_slot,
    parse_window,
    shown,
)
from wevent.accounting.evidence import Evidence, evidence_from_json, evidence_to_json
from wevent.accounting.inputs import (
    EVIDENCE_VARIABLE,
    FIELD_VARIABLE,
    FormatError,
    check_input_file,
    loads,
    max_evidence,
    max_field,
    text_problem,
    unknown_name,
)
from wevent.accounting.ledger import Ledger, take_codes
from wevent.accounting.parquet_rows import (
    LEDGER_COLUMNS,
    MEMBERSHIP_ROW,
    check_coded_rows,
    check_ledger_columns,
    check_parquet_columns,
    check_parquet_rows,
)
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, Requirement, WholeStream

__all__ = [
    "EarlierGroups",
    "FormatError",
    "count_records",
    "ledger_kind",
    "read_ledger",
    "read_ledgers",
    "read_requirements",
    "write_ledger",
    "write_requirements",
]

FIXED_COLUMNS = ("user", "w", "epsilon")
DYNAMIC_COLUMNS = ("user", "slot", "w_back", "eps_back", "w_fwd", "eps_fwd")
# The keys of a JSONL line: a charge's (the columns) or a group line's; "chain" is a durable
# ledger's link (`wevent.accounting.durable`), which the reader does not check.
CHARGE_KEYS = (*LEDGER_COLUMNS, "chain")
GROUP_KEYS = ("group", "members", "chain")
_KEY_SETS = {keys: frozenset(keys) for keys in (CHARGE_KEYS, GROUP_KEYS)}
_NUMERIC = frozenset({"slot", "epsilon", "evidence"})


def _where(path: Path | str, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


# ============================================================================ requirements


_PAD = " \t"  # what a number may be padded with in a CSV field (not NBSP, vertical tab, ...)


def check_text(value: str, name: str, where: str, *, evidence: bool = False) -> str:
    """A text field as read: without NUL characters and within the length limit
    (`inputs.text_problem`)."""
    problem = text_problem(value, evidence=evidence)
    if problem is not None:
        raise FormatError(f"{where}: {name} {problem}")
    return value


def _json_object(text: str, where: str) -> Any:
    """One JSON value (`inputs.loads`: no key twice, bounded nesting), errors naming the line."""
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{where}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:
        raise FormatError(f"{where}: not usable JSON ({shown(str(exc), 80)})") from None


def _open_csv(path: Path) -> tuple[list[str], Iterator[tuple[int, list[str]]], int]:
    """Header, rows (with their line numbers) and the number of lines, of a CSV file: a
    regular file, without NUL characters, whose header names no column twice."""
    check_input_file(path, FormatError)
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a byte-order mark
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: cannot read ({exc})") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise FormatError(f"{path}:{line}: a NUL character (binary data, not CSV text)")
    # The csv module's own field limit (131,072 characters by default) stays above ours, so a
    # field within WEVENT_MAX_FIELD / WEVENT_MAX_EVIDENCE always parses.
    csv.field_size_limit(max(_CSV_FIELD_LIMIT, max_field() + 1, max_evidence() + 1))
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise FormatError(f"{path}: empty file (expected a header line)") from None
    except csv.Error as exc:
        raise _csv_error(path, reader.line_num, exc) from None
    header = [h.strip(_PAD) for h in header]
    twice = sorted({h for h in header if h and header.count(h) > 1})  # unnamed: unread
    if twice:
        raise FormatError(
            f"{path}:1: column {shown(twice[0])} appears twice in the header (which one holds "
            "the value?)"
        )

    def rows() -> Iterator[tuple[int, list[str]]]:
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise _csv_error(path, reader.line_num, exc) from None
            if not row or all(not c.strip() for c in row):
                continue
            yield reader.line_num, row

    return header, rows(), text.count("\n")


_CSV_FIELD_LIMIT = 131_072  # the csv module's default


def _csv_error(path: Path, line: int, exc: csv.Error) -> FormatError:
    """A CSV syntax error (a field past the reader's limit of `csv.field_size_limit`
    characters, a stray quote) as one line naming the file and line."""
    text = str(exc)
    if "field limit" in text:
        text = (
            f"a field is longer than the CSV reader's limit of {csv.field_size_limit():,} "
            f"characters (above {FIELD_VARIABLE} and {EVIDENCE_VARIABLE})"
        )
    return FormatError(f"{path}:{max(line, 1)}: {text}")


def read_requirements(paths: Path | str | Iterable[Path | str]) -> Population:
    """Read one or more requirement CSV files into a `Population`.

    Fixed and whole-stream files have columns ``user,w,epsilon`` (``w`` = ``inf`` for whole-stream);
    dynamic files have ``user,slot,w_back,eps_back,w_fwd,eps_fwd``, one row per declaration.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    reqs: dict[str, Requirement] = {}
    dynamic: dict[str, list[Declaration]] = {}
    origin: dict[str, str] = {}
    declared_first: dict[tuple[str, int], str] = {}  # (user, slot): where first declared
    declared: dict[tuple[str, int], str] = {}  # ... and where last
    for p in paths:
        path = Path(p)
        header, rows, _ = _open_csv(path)
        cols: tuple[str, ...]
        dynamic_only = set(DYNAMIC_COLUMNS) - set(FIXED_COLUMNS) - {"slot"}
        if dynamic_only & set(header) and {"w", "epsilon"} & set(header):
            raise FormatError(
                f"{path}:1: the header has both the fixed columns (w, epsilon) and dynamic ones "
                "(w_back, eps_back, w_fwd, eps_fwd): give each kind its own file"
            )
        if set(DYNAMIC_COLUMNS) <= set(header):
            kind = "dynamic"
            cols = DYNAMIC_COLUMNS
        elif set(FIXED_COLUMNS) <= set(header):
            kind = "fixed"
            cols = FIXED_COLUMNS
        else:
            raise FormatError(
                f"{path}:1: header {','.join(header)!r} is neither 'user,w,epsilon' nor "
                "'user,slot,w_back,eps_back,w_fwd,eps_fwd'"
            )
        pos = {c: header.index(c) for c in cols}
        for line, row in rows:
            where = _where(path, line)
            if len(row) != len(header):
                raise FormatError(f"{where}: expected {len(header)} fields, found {len(row)}")
            # Ids are kept exactly as written (round trips are exact); numbers may be padded.
            get = {c: (row[i] if c == "user" else row[i].strip(_PAD)) for c, i in pos.items()}
            user = get["user"]
            if not user:
                raise FormatError(f"{where}: empty user id")
            check_text(user, "user", where)
            try:
                if kind == "fixed":
                    if user in origin:
                        raise FormatError(
                            f"{where}: user {user!r} already declared at {origin[user]}"
                        )
                    w = parse_window(get["w"], allow_infinite=True)
                    eps = Budget(get["epsilon"], what="epsilon")
                    reqs[user] = WholeStream(eps) if w is None else Fixed(w, eps)
                else:
                    if user in reqs:
                        raise FormatError(
                            f"{where}: user {user!r} already has a fixed requirement at {origin[user]}"
                        )
                    slot = parse_slot(get["slot"])
                    decl = Declaration(
                        slot=slot,
                        w_back=_window(get["w_back"], "w_back"),
                        eps_back=Budget(get["eps_back"], what="eps_back"),
                        w_fwd=_window(get["w_fwd"], "w_fwd"),
                        eps_fwd=Budget(get["eps_fwd"], what="eps_fwd"),
                    )
                    dynamic.setdefault(user, []).append(decl)
                    declared_first.setdefault((user, slot), where)
                    declared[(user, slot)] = where
                origin.setdefault(user, where)
            except FormatError:
                raise
            except BudgetError as exc:
                raise FormatError(f"{where}: {exc}") from None
    for user, decls in dynamic.items():
        decls.sort(key=lambda d: d.slot)
        for a, b in itertools.pairwise(decls):
            if a.slot == b.slot:
                raise FormatError(
                    f"{declared[(user, a.slot)]}: user {user!r} declares a second requirement "
                    f"for slot {a.slot} (the first at {declared_first[(user, a.slot)]})"
                )
        reqs[user] = Dynamic(tuple(decls))
    return Population(reqs)


def _window(text: str, what: str) -> int:
    w = parse_window(text, what=what)
    assert w is not None
    return w


def requirement_paths(population: Population, path: Path | str) -> list[Path]:
    """The files `write_requirements` writes for ``population``: ``path`` alone, or, for a
    population with fixed (or whole-stream) and dynamic users, ``path`` and
    ``<stem>.dynamic.csv``. A command that reads them back needs one ``-r`` per file."""
    path = Path(path)
    kinds = {isinstance(req, Dynamic) for _, req in population.items()}
    if kinds == {True, False}:
        return [path, path.with_name(path.stem + ".dynamic.csv")]
    return [path]


def write_requirements(population: Population, path: Path | str) -> list[Path]:
    """Write a population back to CSV (fixed/whole-stream and dynamic users in separate files:
    ``path`` gets the fixed and whole-stream users, ``<stem>.dynamic.csv`` the dynamic ones;
    a population of one kind goes to ``path`` alone). Returns the files written
    (`requirement_paths`)."""
    path = Path(path)
    fixed_rows: list[list[str]] = []
    dyn_rows: list[list[str]] = []
    for user, req in population.items():
        if isinstance(req, Fixed):
            fixed_rows.append([user, str(req.w), format_exact(req.eps)])
        elif isinstance(req, WholeStream):
            fixed_rows.append([user, "inf", format_exact(req.eps)])
        else:
            for d in req.declarations:
                dyn_rows.append(
                    [
                        user,
                        str(d.slot),
                        str(d.w_back),
                        format_exact(d.eps_back),
                        str(d.w_fwd),
                        format_exact(d.eps_fwd),
                    ]
                )
    targets: list[tuple[Path, tuple[str, ...], list[list[str]]]] = [
        (path, FIXED_COLUMNS, fixed_rows)
    ]
    if dyn_rows:
        dyn_path = path if not fixed_rows else path.with_name(path.stem + ".dynamic.csv")
        targets = [(dyn_path, DYNAMIC_COLUMNS, dyn_rows)] + (
            [(path, FIXED_COLUMNS, fixed_rows)] if fixed_rows else []
        )
    for target, header, rows in targets:
        with target.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)
    return requirement_paths(population, path)


# ============================================================================ ledgers


def ledger_kind(path: Path) -> str:
    """``jsonl``, ``csv`` or ``parquet`` from a ledger file's extension (FormatError otherwise)."""
    suffix = path.suffix.lower()
    if suffix in {".jsonl", ".ndjson"}:
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    if suffix in {".parquet", ".pq"}:
        return "parquet"
    if suffix == ".wledger":
        raise FormatError(
            f"{path}: a segment ledger (.wledger) is read with its integrity: wevent audit "
            f"{path} -r REQUIREMENTS"
        )
    raise FormatError(f"{path}: unknown ledger format (use .jsonl, .csv or .parquet)")


def _label(value: object, name: str, where: str) -> str:
    """A part or mechanism field: text (absent or empty: "")."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise BudgetError(f"{name}: a string, got {shown(value)}")
    return check_text(value, name, where)


class _RowParser:
    """Parses ledger rows with caches for repeated amounts and evidence strings.

    ``inherited`` holds the groups defined in earlier files of the same ledger (`read_ledgers`):
    this file may charge them without listing their members again."""

    def __init__(self, path: Path, inherited: Mapping[str, Sequence[str]] | None = None) -> None:
        self.path = path
        self.inherited = {} if inherited is None else inherited
        self.amounts: dict[str, Budget] = {}
        self.evidence: dict[str, Evidence] = {}
        self.groups: dict[str, list[str]] = {}
        self.charges: list[
            tuple[int, Budget, str | None, str | None, str, str, Evidence | None]
        ] = []
        self.used_groups: set[str] = set()
        self.json_slots = False  # JSONL: a slot is a JSON integer (CSV: text, parsed)
        self.member_seen: dict[tuple[str, str], str] = {}  # (group, user): where listed
        self.first_member: dict[str, str] = {}  # group: where its first member is listed
        self.empty: dict[str, str] = {}  # group declared without members: where

    def declare(self, where: str, group: str) -> None:
        """A group is defined here (its members, if any, follow): a JSONL group line."""
        if group in self.used_groups:
            raise FormatError(f"{where}: members of group {group!r} must precede its charges")
        self.groups.setdefault(group, [])

    def member(self, where: str, group: str, user: str) -> None:
        """A membership row. Without a user it declares a group with no members (a charge of
        it charges nobody), which then lists no member anywhere in the file."""
        if group in self.used_groups:
            raise FormatError(f"{where}: members of group {group!r} must precede its charges")
        if not user:
            listed = self.first_member.get(group) or self.empty.get(group)
            if listed is not None:
                raise FormatError(
                    f"{where}: a membership row without a user declares group {group!r} "
                    f"without members, but the group is also listed at {listed}"
                )
            self.empty[group] = where
            self.groups[group] = []
            return
        check_text(user, "member", where)
        declared = self.empty.get(group)
        if declared is not None:
            raise FormatError(
                f"{where}: group {group!r} is declared without members at {declared} and lists "
                "a member here"
            )
        self.first_member.setdefault(group, where)
        first = self.member_seen.get((group, user))
        if first is None:
            self.member_seen[(group, user)] = where
        else:
            raise FormatError(
                f"{where}: group {group!r} lists member {shown(user)} twice (first at {first})"
            )
        self.groups.setdefault(group, []).append(user)

    def charge(self, where: str, fields: Mapping[str, Any]) -> None:
        try:
            slot_v = fields.get("slot")
            if isinstance(slot_v, str) and self.json_slots:
                raise BudgetError(f"slot: a JSON integer, got the string {shown(slot_v)}")
            # check_slot rejects booleans and non-integers; CSV text is parsed first.
            slot = parse_slot(slot_v) if isinstance(slot_v, str) else check_slot(slot_v)
            eps_v = fields.get("epsilon")
            if eps_v is None or eps_v == "":
                raise BudgetError("epsilon: missing")
            if not isinstance(eps_v, str):
                raise BudgetError(f"epsilon: write exact numbers as strings, got {eps_v!r}")
            amount = self.amounts.get(eps_v)
            if amount is None:
                amount = Budget(eps_v, what="epsilon")
                self.amounts[eps_v] = amount
            user = fields.get("user") or None
            group = fields.get("group") or None
            for name, value in (("user", user), ("group", group)):
                if value is not None and not isinstance(value, str):
                    raise BudgetError(f"{name}: ids are strings, got {shown(value)}")
                if value is not None:
                    check_text(value, name, where)
            if (user is None) == (group is None):
                raise BudgetError("a charge names exactly one of user or group")
            if group is not None:
                if group not in self.groups:
                    earlier = self.inherited.get(group)
                    if earlier is None:
                        raise BudgetError(f"group {group!r} is used before its members are listed")
                    self.groups[group] = list(earlier)  # defined in an earlier file
                self.used_groups.add(group)
            ev_v = fields.get("evidence")
            evidence: Evidence | None = None
            if ev_v not in (None, ""):
                key = ev_v if isinstance(ev_v, str) else json.dumps(ev_v, sort_keys=True)
                check_text(key, "evidence", where, evidence=True)
                evidence = self.evidence.get(key)
                if evidence is None:
                    evidence = evidence_from_json(ev_v)
                    self.evidence[key] = evidence
            part, mechanism = (_label(fields.get(k), k, where) for k in ("part", "mechanism"))
        except FormatError:
            raise  # already names the line
        except BudgetError as exc:
            raise FormatError(f"{where}: {exc}") from None
        self.charges.append((slot, amount, user, group, part, mechanism, evidence))

    def ledger(self) -> Ledger:
        ledger = Ledger()
        try:
            for name, members in self.groups.items():
                ledger.define_group(name, members)
            for slot, amount, user, group, part, mechanism, evidence in self.charges:
                ledger.append(
                    slot,
                    amount,
                    user=user,
                    group=group,
                    part=part,
                    mechanism=mechanism,
                    evidence=evidence,
                )
        except BudgetError as exc:
            raise FormatError(f"{self.path}: {exc}") from None
        return ledger


_PROGRESS_EVERY = 50_000


def _jsonl_lines(
    path: Path, progress: Callable[[int, int], None] | None
) -> Iterator[tuple[str, str]]:
    """The non-blank lines of a JSONL file, read as a stream (never the whole file at once):
    ``("file:line", text)``, split at ``\n`` alone. ``progress(bytes read, file
    size)`` every `_PROGRESS_EVERY` lines."""
    check_input_file(path, FormatError)
    try:
        total = path.stat().st_size
        with path.open("rb") as fh:
            done = 0
            for number, raw in enumerate(fh, start=1):
                done += len(raw)
                if progress is not None and number % _PROGRESS_EVERY == 0:
                    progress(done, total)
                if not raw.strip():
                    continue
                where = _where(path, number)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise FormatError(f"{where}: not valid UTF-8 ({exc.reason})") from None
                yield where, text
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc})") from None


def count_records(path: Path | str) -> int:
    """The records a ledger file holds, as its reader sees them: the non-blank lines of a JSONL
    file, the non-blank rows after a CSV file's header, the rows of a Parquet file (a group
    definition is one record in JSONL, one row per member in CSV and Parquet). For reports: an
    audit reads the content with `read_ledger` or an engine."""
    path = Path(path)
    kind = ledger_kind(path)
    if kind == "jsonl":
        return sum(1 for _ in _jsonl_lines(path, None))
    if kind == "csv":
        if path.stat().st_size == 0:
            return 0
        _, rows, _ = _open_csv(path)
        return sum(1 for _ in rows)
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def read_ledger(
    path: Path | str,
    *,
    progress: Callable[[int, int], None] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> Ledger:
    """Read a ledger file (JSONL, CSV or Parquet; docs/formats.md lists the columns).

    ``progress(done, total)`` is called every 50,000 lines of a text file (for a progress bar;
    bytes of a JSONL file, lines of a CSV file).
    ``groups``: groups defined in earlier files of the same ledger, which a text file may charge
    without listing their members (`read_ledgers`); the ledger returned defines those it charges.

    JSON Lines are separated by ``\n`` alone (a ``\r`` before it is JSON whitespace): U+2028,
    U+2029, U+0085 and the other characters `str.splitlines` also breaks on are ordinary
    characters inside a JSON string, so an id holding one reads back as written.
    """
    path = Path(path)
    kind = ledger_kind(path)
    check_input_file(path, FormatError)
    if kind == "parquet":
        return _read_parquet(path)
    parser = _RowParser(path, groups)
    if kind == "jsonl":
        parser.json_slots = True
        for where, text in _jsonl_lines(path, progress):
            obj = _json_object(text, where)
            if not isinstance(obj, dict):
                raise FormatError(f"{where}: each line must be a JSON object")
            keys, what = (
                (GROUP_KEYS, "a group line has")
                if "members" in obj
                else (CHARGE_KEYS, "a charge has")
            )
            if not _KEY_SETS[keys].issuperset(obj):  # a charge on a group line, a misspelt key
                raise FormatError(f"{where}: field {unknown_name(obj, keys, what)}")
            if "members" in obj:
                group = obj.get("group")
                members = obj["members"]
                if not isinstance(group, str) or not group or not isinstance(members, list):
                    raise FormatError(f"{where}: a group line needs 'group' and a 'members' list")
                if group in parser.groups:
                    raise FormatError(f"{where}: group {group!r} is defined twice")
                check_text(group, "group", where)
                parser.declare(where, group)
                for m in members:
                    if not isinstance(m, str) or not m:
                        raise FormatError(
                            f"{where}: group members must be non-empty user id strings"
                        )
                    parser.member(where, group, m)
                continue
            if "slot" not in obj:
                raise FormatError(f"{where}: missing 'slot'")
            parser.charge(where, obj)
        return parser.ledger()
    header, rows, total = _open_csv(path)
    missing = [c for c in ("slot", "epsilon") if c not in header]
    if missing or not ({"user", "group"} & set(header)):
        need = ", ".join(missing + ([] if {"user", "group"} & set(header) else ["user"]))
        raise FormatError(f"{path}:1: missing column(s): {need}")
    unknown = unknown_name((h for h in header if h), LEDGER_COLUMNS, "a ledger's columns are")
    if unknown is not None:
        raise FormatError(f"{path}:1: column {unknown}")
    # A column without a name (a spreadsheet's trailing comma) may only be empty: no engine
    # reads it, so a value there would be dropped unread, as an unknown column's would.
    unnamed = [i for i, h in enumerate(header) if not h]
    for line, row in rows:
        if progress is not None and line % _PROGRESS_EVERY == 0:
            progress(line, total)
        where = _where(path, line)
        if len(row) != len(header):
            raise FormatError(f"{where}: expected {len(header)} fields, found {len(row)}")
        for i in unnamed:
            if row[i].strip(_PAD):
                raise FormatError(
                    f"{where}: field {i + 1} holds {shown(row[i])} but its column has no name "
                    f"in the header (a ledger's columns are {', '.join(LEDGER_COLUMNS)})"
                )
        fields = {
            h: (v.strip(_PAD) if h in _NUMERIC else v) for h, v in zip(header, row, strict=True)
        }
        if not fields["slot"] and fields.get("group"):
            if any(fields.get(k) for k in ("epsilon", "part", "mechanism", "evidence")):
                raise FormatError(f"{where}: {MEMBERSHIP_ROW}")
            parser.member(where, fields["group"], fields.get("user", ""))
            continue
        parser.charge(where, fields)
    return parser.ledger()


def _ledger_records(ledger: Ledger) -> Iterator[dict[str, Any]]:
    for name, members in ledger.groups.items():
        yield {"group": name, "members": list(members)}
    for ch in ledger:
        rec: dict[str, Any] = {"slot": ch.slot}
        if ch.user is not None:
            rec["user"] = ch.user
        else:
            rec["group"] = ch.group
        rec["epsilon"] = format_exact(ch.amount)
        if ch.part:
            rec["part"] = ch.part
        if ch.mechanism:
            rec["mechanism"] = ch.mechanism
        if ch.evidence is not None:
            rec["evidence"] = evidence_to_json(ch.evidence)
        yield rec


def _table_rows(ledger: Ledger) -> Iterator[tuple[int | None, str, str, str, str, str, str]]:
    for name, members in ledger.groups.items():
        for m in members or ("",):  # a group without members: one row without a user
            yield (None, m, name, "", "", "", "")
    for ch in ledger:
        ev = "" if ch.evidence is None else json.dumps(evidence_to_json(ch.evidence))
        yield (
            ch.slot,
            ch.user or "",
            ch.group or "",
            format_exact(ch.amount),
            ch.part,
            ch.mechanism,
            ev,
        )


def write_ledger(ledger: Ledger, path: Path | str) -> None:
    """Write a ledger; the format follows the extension (.jsonl, .csv, .parquet).

    The file is written to a temporary name, fsynced, renamed into place and the directory
    fsynced (`wevent.accounting.durable.sync_rename`), so a crash never leaves a half-written ledger
    under the final name and a returned call survives one. A failed write removes its
    temporary file; running out of memory is an `OSError` (``errno.ENOMEM``) naming the path.
    """
    from wevent.accounting.durable import sync_rename

    path = Path(path)
    kind = ledger_kind(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        _write_to(ledger, tmp, kind)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, MemoryError):  # pyarrow's ArrowMemoryError included
            raise OSError(
                errno.ENOMEM, f"not enough memory to write the ledger ({exc})", str(path)
            ) from exc
        raise
    sync_rename(tmp, path)


def _write_to(ledger: Ledger, tmp: Path, kind: str) -> None:
    if kind == "jsonl":
        with tmp.open("w", encoding="utf-8") as fh:
            for rec in _ledger_records(ledger):
                fh.write(json.dumps(rec, separators=(",", ":")))
                fh.write("\n")
    elif kind == "csv":
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(LEDGER_COLUMNS)
            for row in _table_rows(ledger):
                writer.writerow(["" if v is None else v for v in row])
    else:
        import pyarrow.parquet as pq

        pq.write_table(_parquet_table(ledger), tmp)


def _parquet_table(ledger: Ledger) -> Any:
    """The ledger as an Arrow table, built from its integer columns (no Python row objects):
    membership rows (null slot) first, then the charges. Each string column is written
    dictionary-encoded (int32 codes into its distinct strings, the empty string for "none"): a
    ledger of 10^8 membership rows then costs 4 bytes per row and column, where decoding the
    group column first needed one 9.8 GB allocation (Parquet stores it dictionary-encoded either
    way; readers see plain strings, DuckDB and Spark included)."""
    import pyarrow as pa

    cols = ledger.columns()
    # One row per member; a group without members gets one row without a user.
    listed = [m if len(m) else np.full(1, -1, np.int32) for m in cols.group_members]
    sizes = np.array([len(m) for m in listed], np.int64)
    n_members, n_charges = int(sizes.sum()), len(cols.slot)
    is_user = cols.subject >= 0

    def column(values: list[str], charge_codes: Any, member_codes: Any = None) -> Any:
        """Strings ``values[code]``; code -1 is the empty string, as are membership rows
        without ``member_codes``."""
        # large_string: 64-bit offsets, for dictionaries whose strings pass 2 GiB
        dictionary = pa.array([*values, ""], type=pa.large_string())
        none = len(values)
        codes = np.full(n_members + n_charges, none, np.int32)
        if member_codes is not None:
            codes[:n_members] = np.where(member_codes < 0, none, member_codes)
        codes[n_members:] = np.where(charge_codes < 0, none, charge_codes)
        return pa.DictionaryArray.from_arrays(pa.array(codes), dictionary)

    member_users = (
        np.concatenate(listed).astype(np.int32, copy=False) if n_members else np.zeros(0, np.int32)
    )
    member_groups = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    evidence = [json.dumps(evidence_to_json(e)) for e in cols.evidences]
    slot = pa.array(
        np.concatenate([np.zeros(n_members, np.int64), cols.slot]),
        mask=np.concatenate([np.ones(n_members, bool), np.zeros(n_charges, bool)]),
        type=pa.int64(),
    )
    return pa.table(
        {
            "slot": slot,
            "user": column(cols.users, np.where(is_user, cols.subject, -1), member_users),
            "group": column(cols.groups, np.where(is_user, -1, -cols.subject - 1), member_groups),
            "epsilon": column([format_exact(a) for a in cols.amounts], cols.amount),
            "part": column(cols.parts, cols.part),
            "mechanism": column(cols.mechanisms, cols.mechanism),
            "evidence": column(evidence, cols.evidence),
        }
    )


def _plain(table: Any) -> Any:
    """``table`` with its dictionary-encoded columns decoded (to combine it with other files)."""
    import pyarrow as pa

    return pa.table(
        {
            name: col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col
            for name, col in zip(table.column_names, table.columns, strict=True)
        }
    )


def _read_parquet(path: Path) -> Ledger:
    """Vectorized Parquet reader: values are parsed once per distinct string."""
    import pyarrow as pa

    try:
        return _parquet_ledger(path)
    except pa.ArrowException as exc:  # malformed or mistyped content: a user mistake
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FormatError(f"{path}: cannot read the Parquet columns ({first})") from None


def _parquet_ledger(path: Path) -> Ledger:
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_parquet_columns(path)  # a regular file, readable, its columns named once and typed
    try:
        schema = pq.read_schema(path)
        strings = [
            f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        ]
        pf = pq.ParquetFile(path, read_dictionary=strings)
    except (OSError, pa.ArrowInvalid) as exc:
        raise FormatError(f"{path}: not a readable Parquet file ({exc})") from None
    return _columns_ledger(_FileColumns(pf), path, check_rows=True)


class _FileColumns:
    """A Parquet file's columns, read one column and one row group at a time (string columns as
    dictionaries), so a reader never holds the whole table."""

    def __init__(self, pf: Any) -> None:
        self.pf = pf
        self.schema = pf.schema_arrow
        self.names = set(self.schema.names)
        self.num_rows = int(pf.metadata.num_rows)

    def type(self, name: str) -> Any:
        return self.schema.field(name).type

    def chunks(self, name: str) -> Iterator[Any]:
        for i in range(self.pf.num_row_groups):
            yield from self.pf.read_row_group(i, columns=[name]).column(0).chunks


class _TableColumns:
    """An in-memory Arrow table's columns, chunk by chunk."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.names = set(table.column_names)
        self.num_rows = int(table.num_rows)

    def type(self, name: str) -> Any:
        return self.table.schema.field(name).type

    def chunks(self, name: str) -> Iterator[Any]:
        yield from self.table.column(name).chunks


def read_ledgers(paths: Iterable[Path | str], *, file_charges: list[int] | None = None) -> Ledger:
    """One ledger from several files read in order, as if concatenated (a group defined in one
    file may be charged in a later one, whatever the formats). One file is `read_ledger`; several
    are combined as Arrow tables in the Parquet columns (text files converted first, charging
    the groups of the files before them) and parsed once. ``file_charges``, when given, receives
    the number of charge records of each file, in order."""
    files = [Path(p) for p in paths]
    counts: list[int] = [] if file_charges is None else file_charges
    if not files:
        raise FormatError("no ledger files given")
    if len(files) == 1:  # no pyarrow needed for one JSONL or CSV file (the core install)
        ledger = read_ledger(files[0])
        counts.append(len(ledger))
        return ledger
    import pyarrow as pa

    tables = []
    seen: dict[str, tuple[str, ...]] = {}
    clashes: list[str] = []
    twice: list[str] = []
    for f in files:
        if ledger_kind(f) == "parquet":
            if not f.exists():
                raise FormatError(f"{f}: no such file")
            check_parquet_rows(f, seen)  # each file on its own, as a single file is read
            table = _parquet_columns(f)
        else:
            table = _plain(_parquet_table(read_ledger(f, groups=seen)))
        counts.append(table.num_rows - table.column("slot").null_count)  # group rows: no slot
        tables.append(_drop_repeated_groups(table, seen, clashes, twice))
    where = " + ".join(str(f) for f in files)
    if twice:  # in the SQL engines' order and words: a repeated member first, by group name
        raise FormatError(f"{where}: group {min(twice)!r} lists a member twice")
    if clashes:  # the SQL engines' message: they compare member sets across all files at once
        raise FormatError(
            f"{where}: group {min(clashes)!r} is defined in more than one file with other members"
        )
    try:
        table = pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as exc:
        raise FormatError(f"{files[0]}: cannot combine the ledger files ({exc})") from None
    return _columns_ledger(_TableColumns(table), Path(where))  # files checked above


def _drop_repeated_groups(
    table: Any, seen: dict[str, tuple[str, ...]], clashes: list[str], twice: list[str]
) -> Any:
    """``table`` without the definitions of groups that an earlier file (``seen``) already
    defined; a group defined with other members is added to ``clashes``, one listing a member
    twice in this file to ``twice`` (errors both). Adds the table's new groups to ``seen``."""
    import pyarrow.compute as pc

    is_member = pc.is_null(table.column("slot"))
    rows = table.filter(is_member)
    defined: dict[str, list[str]] = {}
    for g, u in zip(rows.column("group").to_pylist(), rows.column("user").to_pylist(), strict=True):
        listed = defined.setdefault(g, [])
        if u:  # a row without a user declares a group without members
            listed.append(u)
    repeated = []
    for g, members in defined.items():
        if len(set(members)) != len(members):
            twice.append(g)
        if g in seen:
            if sorted(seen[g]) != sorted(members):  # a group is a set of users
                clashes.append(g)
            repeated.append(g)
        else:
            seen[g] = tuple(members)
    if repeated:
        drop = pc.and_(is_member, pc.is_in(table.column("group"), value_set=_strings(repeated)))
        table = table.filter(pc.invert(drop))
    return table


class EarlierGroups(Mapping[str, tuple[str, ...]]):
    """The groups defined by the files of a ledger read so far, looked up by name on demand: a
    Parquet file's membership rows are read only for a name a later text file charges (an
    out-of-core audit never loads every membership). Iterating lists the groups found so far."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, ...]] = {}
        self._parquet: list[Path] = []

    def add_groups(self, groups: Mapping[str, Sequence[str]]) -> None:
        for name, members in groups.items():
            self._known.setdefault(name, tuple(members))

    def add_parquet(self, path: Path) -> None:
        self._parquet.append(path)

    def __getitem__(self, name: str) -> tuple[str, ...]:
        found = self._known.get(name)
        if found is not None:
            return found
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        for path in self._parquet:
            try:
                # no user column: every group the file defines has no members
                present = [c for c in ("slot", "group", "user") if c in pq.read_schema(path).names]
                rows = pq.read_table(
                    path,
                    columns=present,
                    filters=pc.field("slot").is_null() & (pc.field("group") == name),
                )
            except Exception:  # a column missing or mistyped: the engine reports the file itself
                continue
            if rows.num_rows:
                users = rows.column("user").to_pylist() if "user" in present else []
                members = tuple(str(u) for u in users if u)
                self._known[name] = members
                return members
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)


def _strings(values: list[str]) -> Any:
    import pyarrow as pa

    return pa.array(values, type=pa.large_string())


def _parquet_columns(path: Path) -> Any:
    """A Parquet ledger's table with every documented column (missing ones empty strings, string
    columns as large_string) so that tables of several files concatenate."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise FormatError(f"{path}: not a readable Parquet file ({exc})") from None
    cols = {}
    for name in LEDGER_COLUMNS:
        if name in table.column_names:
            col = table.column(name)
            try:
                col = col.cast(pa.int64() if name == "slot" else pa.large_string())
            except pa.ArrowException:
                raise FormatError(f"{path}: column {name!r} has type {col.type}") from None
            cols[name] = col
        else:
            cols[name] = pa.array([""] * table.num_rows, type=pa.large_string())
    return pa.table(cols)


def _string_codes(chunks: Iterable[Any], n: int) -> tuple[np.ndarray[Any, Any], list[str]]:
    """Dictionary codes (int32) of a string column given chunk by chunk, null read as "", codes
    numbered in order of first appearance. Python touches each chunk's distinct values only; a
    column with one value is a zero-stride view (no memory per row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    index: dict[str, int] = {}
    values: list[str] = []
    out: np.ndarray[Any, Any] | None = None
    pos = 0
    for chunk in chunks:
        m = len(chunk)
        if pa.types.is_null(chunk.type):
            local = np.zeros(m, np.int32)
            table: list[str] = [""]
        else:
            if not pa.types.is_dictionary(chunk.type):
                chunk = chunk.dictionary_encode()
            table = ["" if v is None else str(v) for v in chunk.dictionary.to_pylist()]
            table.append("")  # nulls
            indices = chunk.indices
            if indices.null_count:
                indices = pc.fill_null(indices, len(table) - 1)
            local = np.asarray(indices.to_numpy(zero_copy_only=False))
        mapping = np.array([index.get(v, -1) for v in table], np.int32)
        if m and bool((mapping < 0).any()):
            used = np.bincount(local, minlength=len(table)) > 0
            new = np.flatnonzero(used & (mapping < 0))
            if len(new):
                first = np.full(len(table), m, np.int64)
                np.minimum.at(first, local, np.arange(m, dtype=np.int64))
                for j in new[np.argsort(first[new], kind="stable")].tolist():
                    found = index.get(table[j])
                    if found is None:
                        found = index[table[j]] = len(values)
                        values.append(table[j])
                    mapping[j] = found
        if out is None and len(values) > 1:
            out = np.zeros(n, np.int32)  # rows before this chunk all hold code 0
        if out is not None and m:
            out[pos : pos + m] = mapping[local]
        pos += m
    if out is None:
        return np.broadcast_to(np.int32(0), (n,)), values or [""]
    return out, values


def _subset(codes: np.ndarray[Any, Any], rows: np.ndarray[Any, Any] | None) -> Any:
    """``codes[rows]`` (a boolean mask; None: every row), constant columns kept as views."""
    if rows is None:
        return codes
    if len(codes) > 1 and codes.strides[0] == 0:
        return np.broadcast_to(codes[:1], (int(np.count_nonzero(rows)),)).reshape(-1)
    return codes[rows]


def _columns_ledger(
    src: _FileColumns | _TableColumns, path: Path, *, check_rows: bool = False
) -> Ledger:
    """The ledger of a Parquet file's (or combined files') columns. ``check_rows``: apply the
    row rules every engine shares (`parquet_rows`) here, on the columns as read (a combination
    of files had each file checked before). Past that point the rows are known well formed:
    membership rows give a group, charges one subject, an exact amount and a slot in range."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = src.names
    check_ledger_columns(path, names, src.type)
    n = src.num_rows

    # The slot column, and which rows are membership rows (null slot).
    slot_all = np.zeros(n, np.int64)
    is_member_all: np.ndarray[Any, Any] | None = None
    pos = 0
    for chunk in src.chunks("slot"):
        m = len(chunk)
        if chunk.null_count:
            if is_member_all is None:
                is_member_all = np.zeros(n, bool)
            is_member_all[pos : pos + m] = np.asarray(
                pc.is_null(chunk).to_numpy(zero_copy_only=False), bool
            )
            chunk = pc.fill_null(chunk.cast(pa.int64()), 0) if m > chunk.null_count else None
        if chunk is not None and m:
            slot_all[pos : pos + m] = chunk.cast(pa.int64()).to_numpy(zero_copy_only=False)
        pos += m
    charges_mask = None if is_member_all is None else ~is_member_all
    n_charges = n if charges_mask is None else int(np.count_nonzero(charges_mask))

    def codes(name: str) -> tuple[np.ndarray[Any, Any], list[str]]:
        if name not in names:
            return np.broadcast_to(np.int32(0), (n,)), [""]
        try:
            return _string_codes(src.chunks(name), n)
        except UnicodeDecodeError as exc:  # Parquet's strings are UTF-8 by definition
            raise FormatError(
                f"{path}: column {name!r} holds bytes that are not UTF-8 text ({exc.reason} at "
                f"byte {exc.start} of a value)"
            ) from None

    groups: dict[str, tuple[str, ...]] = {}
    group_codes: list[np.ndarray[Any, Any]] = []
    group_users: list[str] = []
    user_all, user_values = codes("user")
    group_all, group_values = codes("group")
    eps_all, eps_values = codes("epsilon")
    labels = {name: codes(name) for name in ("part", "mechanism", "evidence")}
    if check_rows:
        check_coded_rows(
            path,
            np.zeros(n, bool) if is_member_all is None else is_member_all,
            slot_all,
            {
                "user": (user_all, user_values),
                "group": (group_all, group_values),
                "epsilon": (eps_all, eps_values),
                **{k: v for k, v in labels.items() if k in names},
            },
        )
    if is_member_all is not None:
        member_rows = np.flatnonzero(is_member_all)
        g_values = np.array(group_values, dtype=object)
        u_values = np.array(user_values, dtype=object)
        g_codes_m = np.asarray(group_all[member_rows], np.int64)
        u_codes_m = np.asarray(user_all[member_rows], np.int64)
        order = np.argsort(g_codes_m, kind="stable")
        firsts = np.unique(g_codes_m, return_index=True)
        bounds = np.searchsorted(g_codes_m[order], firsts[0])
        ends = [*bounds[1:].tolist(), len(order)]
        by_code = {
            int(code): u_codes_m[order[a:b]]
            for code, a, b in zip(firsts[0].tolist(), bounds.tolist(), ends, strict=True)
        }
        pairs = np.sort(g_codes_m * max(len(u_values), 1) + u_codes_m)
        twice = pairs[1:][pairs[1:] == pairs[:-1]] // max(len(u_values), 1)
        if len(twice):  # the first group by name, as the SQL engines report it
            name = min(str(g_values[c]) for c in np.unique(twice).tolist())
            raise FormatError(f"{path}: group {name!r} lists a member twice")
        for code in firsts[0][np.argsort(firsts[1])].tolist():  # first-appearance order
            listed = by_code[code]
            if len(listed) == 1 and u_values[listed[0]] == "":
                listed = listed[:0]  # declared without members
            groups[str(g_values[code])] = tuple(u_values[listed].tolist())
            group_codes.append(listed)
        group_users = [str(u) for u in user_values]
        del member_rows, g_codes_m, u_codes_m, order, by_code
    slot = slot_all if charges_mask is None else slot_all[charges_mask]
    del slot_all

    def used(
        all_codes: np.ndarray[Any, Any], values: list[str]
    ) -> tuple[np.ndarray[Any, Any], list[str]]:
        """The charge rows' codes, renumbered over the values the charges use (a value that
        only membership rows hold is not part of the charges' table)."""
        if not n_charges:
            return np.zeros(0, np.int32), []
        sub = _subset(all_codes, charges_mask)
        if charges_mask is None:
            return sub, values
        present = (
            np.bincount(sub, minlength=len(values)) > 0
            if n_charges
            else np.zeros(len(values), bool)
        )
        if bool(present.all()):
            return sub, values
        renumber = np.cumsum(present, dtype=np.int64).astype(np.int32) - 1
        kept = [v for v, p in zip(values, present.tolist(), strict=True) if p]
        return take_codes(renumber, sub), kept

    eps_codes, eps_strings = used(eps_all, eps_values)
    del eps_all
    try:
        amounts = [Budget(s, what="epsilon") for s in eps_strings]
    except BudgetError as exc:
        raise FormatError(f"{path}: {exc}") from None
    u_codes, u_strings = used(user_all, user_values)
    g_codes, g_strings = used(group_all, group_values)
    del user_all, group_all
    user_blank = np.array([s == "" for s in u_strings] or [True], bool)
    group_named = np.array([s != "" for s in g_strings] or [False], bool)
    has_group_any = bool(group_named.any())
    if n_charges:
        has_user = ~take_codes(user_blank, u_codes)  # else the charge names a group
    group_names = list(groups)
    position = {g: i for i, g in enumerate(group_names)}
    missing = sorted(g for g in g_strings if g and g not in position)
    if missing:  # (the row rules refuse it first; here it would map to another group's index)
        raise FormatError(f"{path}: group {missing[0]!r} is charged but its members are not listed")
    users = [s for s in u_strings if s]
    u_position = {s: i for i, s in enumerate(users)}
    if has_group_any and n_charges:
        g_index = np.array([position.get(g, 0) for g in g_strings] or [0], np.int64)
        u_map = np.array([u_position.get(s, 0) for s in u_strings] or [0], np.int64)
        subject = np.where(has_user, u_map[u_codes], -g_index[g_codes] - 1).astype(np.int64)
    else:
        # Direct charges only: every code names a user; renumber only if "" takes a code.
        u_map = np.array([u_position.get(s, -1) for s in u_strings] or [0], np.int64)
        subject = take_codes(u_map, u_codes).astype(np.int64, copy=False)
    del u_codes, g_codes
    ev_all, ev_values = labels.pop("evidence")
    ev_codes, ev_strings = used(ev_all, ev_values)
    evidences: list[Evidence] = []
    ev_map: list[int] = []
    for text in ev_strings:
        if text == "":
            ev_map.append(-1)
            continue
        try:
            evidences.append(evidence_from_json(text))
        except BudgetError as exc:
            raise FormatError(f"{path}: {exc}") from None
        ev_map.append(len(evidences) - 1)
    ev_arr = take_codes(np.array([*ev_map, -1], np.int32), ev_codes)
    p_all, p_values = labels.pop("part")
    p_codes, p_strings = used(p_all, p_values)
    m_all, m_values = labels.pop("mechanism")
    m_codes, m_strings = used(m_all, m_values)
    try:
        return Ledger.from_codes(
            slot=slot,
            user_codes=subject,
            users=users,
            amount_codes=eps_codes,
            amounts=amounts,
            part_codes=p_codes,
            parts=p_strings,
            mechanism_codes=m_codes,
            mechanisms=m_strings,
            evidence_codes=ev_arr,
            evidences=evidences,
            groups=groups,
            group_codes=group_codes,
            group_users=group_users,
            copy=False,
        )
    except BudgetError as exc:
        raise FormatError(f"{path}: {exc}") from None
