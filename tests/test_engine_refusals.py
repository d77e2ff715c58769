"""The numpy and DuckDB engines refuse (or accept) the same malformed Parquet ledgers alike.

A small valid ledger is built as a table of rows (membership rows with a null slot first, then
the charges in slot order), one malformation from `MUTATIONS` is applied to it, the table is
written with pyarrow, and both engines audit the file. Their outcomes must be identical: the
same verdict, or the same refusal (exception class and one-line message), never another
exception. The same table written as CSV must be read by the numpy engine without a crash,
and refused or accepted as the Parquet file is where CSV can express the malformation
(`Mutation.csv`; the messages differ there, naming lines rather than rows).

`test_engine_refusals_on_generated_ledgers` draws ledgers and mutations with hypothesis;
`test_engine_refusals_on_a_fixed_ledger` applies every mutation of the catalogue to one fixed
ledger, so each entry is exercised on every run.
"""

from __future__ import annotations

import copy
import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.formats import FormatError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed, WholeStream
from wevent.verifier.engines import make_engine
from wevent.verifier.sql import EngineError

pa: Any = pytest.importorskip("pyarrow")
pq: Any = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

Row = dict[str, Any]
Outcome = tuple[str, Any]

COLUMNS = ("slot", "user", "group", "epsilon", "part", "mechanism", "evidence")
REFUSALS = (FormatError, BudgetError, EngineError)
USERS = ("a", "b", "c")
POPULATION = Population(
    {"a": Fixed(3, Budget(1)), "b": Fixed(2, Budget("1/2")), "c": WholeStream(Budget(2))}
)
LAPLACE_QUARTER = json.dumps({"kind": "laplace", "sensitivity": "1", "scale": "4"})
LAPLACE_HALF = json.dumps({"kind": "laplace", "sensitivity": "1", "scale": "2"})
POSTPROCESSING = json.dumps({"kind": "postprocessing"})
LONG = "x" * 4097  # one character past the default field limit (inputs.MAX_FIELD)
NUL = "a\x00b"
HUGE = "x" * 140_000  # past the csv module's field limit (131,072)


# ============================================================================ tables


def membership(group: str, user: str, empty: str | None = None) -> Row:
    """A membership row: null slot, the group and the user, no epsilon (``empty``)."""
    return {"slot": None, "user": user, "group": group, "epsilon": empty}


def charge(slot: int, epsilon: str, *, user: str | None = None, group: str | None = None) -> Row:
    return {"slot": slot, "user": user, "group": group, "epsilon": epsilon}


def is_member(row: Row) -> bool:
    return row.get("slot") is None


def blank(value: Any) -> bool:
    return value is None or value == ""


def user_charges(rows: Sequence[Row]) -> list[int]:
    return [i for i, r in enumerate(rows) if not is_member(r) and not blank(r.get("user"))]


def group_charges(rows: Sequence[Row]) -> list[int]:
    return [i for i, r in enumerate(rows) if not is_member(r) and not blank(r.get("group"))]


def members(rows: Sequence[Row]) -> list[int]:
    return [i for i, r in enumerate(rows) if is_member(r)]


def charges(rows: Sequence[Row]) -> list[int]:
    return [i for i, r in enumerate(rows) if not is_member(r)]


def write_parquet(rows: Sequence[Row], path: Path, columns: Sequence[str]) -> Path:
    """The rows as Parquet: ``slot`` int64 (null on membership rows), every other column a
    string column (null where a row has None or lacks the key)."""
    data = {
        name: pa.array([r.get(name) for r in rows], pa.int64() if name == "slot" else pa.string())
        for name in columns
    }
    pq.write_table(pa.table(data), path)
    return path


def write_csv(rows: Sequence[Row], path: Path, columns: Sequence[str]) -> Path:
    """The same table as CSV, row for row (None and "" both an empty field)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(columns)
        for r in rows:
            out.writerow(["" if r.get(c) is None else r[c] for c in columns])
    return path


def outcome(engine: str, files: Sequence[Path], population: Population) -> Outcome:
    """``("ok", verdict JSON)`` or ``(exception class, message)`` for the refusals an audit may
    raise; any other exception propagates (a crash is a failure of its own)."""
    try:
        verdict, _ = make_engine(engine).audit(files, population)
    except REFUSALS as exc:
        return type(exc).__name__, str(exc)
    return "ok", verdict.to_json()


# ============================================================================ mutations

# A mutation takes the valid rows and a number choosing its target row (taken modulo the
# number of candidates) and returns the malformed rows, or None when the table has no target.
Apply = Callable[[list[Row], int], list[Row] | None]


@dataclass(frozen=True)
class Mutation:
    name: str
    apply: Apply
    #: CSV can write the same malformation (False where CSV reads the table differently by
    #: design: padding around numbers is stripped, an empty line is skipped; docs/formats.md).
    #: The CSV form is read either way, and must never crash.
    csv: bool = True
    #: the mutation drops columns: the names kept (None: the table's own columns)
    columns: Callable[[Sequence[str]], Sequence[str]] | None = None


def _pick(candidates: list[int], k: int) -> int | None:
    return candidates[k % len(candidates)] if candidates else None


def set_field(targets: Callable[[Sequence[Row]], list[int]], field: str, value: Any) -> Apply:
    """Set ``field`` of one target row to ``value``."""

    def apply(rows: list[Row], k: int) -> list[Row] | None:
        i = _pick(targets(rows), k)
        if i is None:
            return None
        rows[i][field] = value
        return rows

    return apply


def rename_group(value: str) -> Apply:
    """Rename one charged group everywhere (its membership rows and its charges)."""

    def apply(rows: list[Row], k: int) -> list[Row] | None:
        i = _pick(group_charges(rows), k)
        if i is None:
            return None
        old = rows[i]["group"]
        for r in rows:
            if r.get("group") == old:
                r["group"] = value
        return rows

    return apply


def rename_user(value: str) -> Apply:
    """Rename user ``a`` everywhere (membership rows and direct charges)."""

    def apply(rows: list[Row], _k: int) -> list[Row] | None:
        if not any(r.get("user") == "a" for r in rows):
            return None
        for r in rows:
            if r.get("user") == "a":
                r["user"] = value
        return rows

    return apply


def member_after_charge(rows: list[Row], k: int) -> list[Row] | None:
    """Move one membership row of a charged group to just after that group's first charge."""
    charged = {rows[i]["group"] for i in group_charges(rows)}
    i = _pick([j for j in members(rows) if rows[j]["group"] in charged], k)
    if i is None:
        return None
    row = rows.pop(i)
    first = next(j for j in group_charges(rows) if rows[j]["group"] == row["group"])
    rows.insert(first + 1, row)
    return rows


def duplicate_member(rows: list[Row], k: int) -> list[Row] | None:
    """List one membership row twice (adjacent)."""
    i = _pick(members(rows), k)
    if i is None:
        return None
    rows.insert(i + 1, dict(rows[i]))
    return rows


def duplicate_member_later(rows: list[Row], k: int) -> list[Row] | None:
    """List one membership row again at the end of the table (after the group's charges)."""
    i = _pick(members(rows), k)
    if i is None:
        return None
    rows.append(dict(rows[i]))
    return rows


def unlisted_group(rows: list[Row], k: int) -> list[Row] | None:
    """Drop every membership row of one charged group."""
    i = _pick(group_charges(rows), k)
    if i is None:
        return None
    name = rows[i]["group"]
    return [r for r in rows if not (is_member(r) and r.get("group") == name)]


def duplicate_charge(rows: list[Row], k: int) -> list[Row] | None:
    """Write one charge twice (the same subject, slot and part)."""
    i = _pick(charges(rows), k)
    if i is None:
        return None
    rows.insert(i + 1, dict(rows[i]))
    return rows


def reversed_charges(rows: list[Row], _k: int) -> list[Row] | None:
    """The charges in reverse slot order (a plain ledger need not be sorted)."""
    return [r for r in rows if is_member(r)] + [r for r in rows if not is_member(r)][::-1]


def all_null(rows: list[Row], k: int) -> list[Row] | None:
    """Insert a row with every column null (CSV: an empty line, which its reader skips)."""
    rows.insert(k % (len(rows) + 1), dict.fromkeys(COLUMNS))
    return rows


def members_only(rows: list[Row], _k: int) -> list[Row] | None:
    return [r for r in rows if is_member(r)]


def no_rows(_rows: list[Row], _k: int) -> list[Row] | None:
    return []


def keep(rows: list[Row], _k: int) -> list[Row] | None:
    return rows


def without(*names: str) -> Callable[[Sequence[str]], Sequence[str]]:
    return lambda columns: [c for c in columns if c not in names]


_SLOTS = {"0": 0, "-1": -1, "2^62": 2**62, "2^63-1": 2**63 - 1, "-2^63": -(2**63)}
_EPSILONS = {
    "leading space": (" 1/2", False),
    "trailing space": ("1/2 ", False),
    "leading tab": ("\t1/2", False),
    "trailing newline": ("1/2\n", True),
    "no-break space": ("\u00a01/2", True),
    "zero denominator": ("1/0", True),
    "zero over zero": ("0/0", True),
    "hexadecimal": ("0x1", True),
    "arabic-indic digit": ("\u0661", True),
    "fullwidth digit": ("\uff11", True),
    "exponent": ("1e3", True),
    "huge exponent": ("1e1000000000", True),
    "tiny exponent": ("1e-1000000000", True),
    "negative": ("-1/2", True),
    "negative zero": ("-0", True),
    "plus sign": ("+1/2", True),
    "negative denominator": ("1/-2", True),
    "blank": (" ", False),
    "NaN": ("NaN", True),
    "inf": ("inf", True),
    "two slashes": ("1/3/4", True),
    "two points": ("0.1.2", True),
    "underscore": ("1_000", True),
    "leading point": (".5", True),
    "trailing point": ("5.", True),
    "decimal ratio": ("1/2.5", True),
    "NUL": ("1/2\x00", False),
    "1,001 digits": ("1" * 1001, True),
    "20,000 digits": ("1" * 20000, True),
    "20,000-digit denominator": ("1/" + "7" * 20000, True),
}
_EVIDENCE = {
    "not JSON": ("{", True),
    "a JSON list": ("[]", True),
    "JSON null": ("null", True),
    "a JSON string": ('"laplace"', True),
    "a JSON number": ("1", True),
    "unknown kind": ('{"kind": "gaussian"}', True),
    "no kind": ('{"sensitivity": "1"}', True),
    "missing field": ('{"kind": "laplace", "sensitivity": "1"}', True),
    "a key twice": ('{"kind": "postprocessing", "kind": "postprocessing"}', True),
    "nested too deeply": (
        '{"kind": "postprocessing", "note": ' + "[" * 100_000 + "]" * 100_000 + "}",
        True,
    ),
    "too long": (POSTPROCESSING[:-1] + " " * 65_536 + "}", False),
    "float scale": ('{"kind": "laplace", "sensitivity": "1", "scale": 4.0}', True),
    "NUL": (POSTPROCESSING[:-1] + ', "note": "a\\u0000b"}', True),
}


def _catalogue() -> list[Mutation]:
    out = [
        Mutation("no mutation (valid control)", keep),
        Mutation("charges in reverse slot order (valid)", reversed_charges),
        Mutation("a charge written twice", duplicate_charge),
        Mutation("membership rows only, no charge", members_only),
        Mutation("no rows at all", no_rows),
        Mutation("user charge with null user", set_field(user_charges, "user", None)),
        Mutation("user charge with empty user", set_field(user_charges, "user", "")),
        Mutation("group charge with null group", set_field(group_charges, "group", None)),
        Mutation("group charge with empty group", set_field(group_charges, "group", "")),
        Mutation("charge with null epsilon", set_field(charges, "epsilon", None)),
        Mutation("charge with empty epsilon", set_field(charges, "epsilon", "")),
        Mutation("user charge also naming a group", set_field(user_charges, "group", "g0")),
        Mutation("group charge also naming a user", set_field(group_charges, "user", "a")),
        Mutation("group charge of an unknown group", set_field(group_charges, "group", "zz")),
        Mutation("membership row with an epsilon", set_field(members, "epsilon", "1/4")),
        Mutation("membership row with epsilon 0", set_field(members, "epsilon", "0")),
        Mutation("membership row with a bad epsilon", set_field(members, "epsilon", "1/0")),
        Mutation("membership row with a blank epsilon", set_field(members, "epsilon", " "), False),
        Mutation("membership row with null user", set_field(members, "user", None)),
        Mutation("membership row with empty user", set_field(members, "user", "")),
        Mutation("membership row with null group", set_field(members, "group", None)),
        Mutation("membership row with empty group", set_field(members, "group", "")),
        Mutation("membership row after its group's charge", member_after_charge),
        Mutation("membership row listed twice", duplicate_member),
        Mutation("membership row listed again after the charges", duplicate_member_later),
        Mutation("charged group without membership rows", unlisted_group),
        Mutation("a row of nulls", all_null, False),
        Mutation("membership row with a part", set_field(members, "part", "p")),
        Mutation("membership row with a mechanism", set_field(members, "mechanism", "m")),
        Mutation(
            "membership row with evidence that is not JSON",
            set_field(members, "evidence", "{"),
        ),
        Mutation("no group column", keep, columns=without("group")),
        Mutation("no user column", keep, columns=without("user")),
        Mutation("no epsilon column", keep, columns=without("epsilon")),
        Mutation("no slot column", keep, columns=without("slot")),
    ]
    out += [
        Mutation(f"charge at slot {name}", set_field(charges, "slot", value))
        for name, value in _SLOTS.items()
    ]
    out += [
        Mutation(f"epsilon {name} ({value[:12]!r})", set_field(charges, "epsilon", value), ok)
        for name, (value, ok) in _EPSILONS.items()
    ]
    out += [
        Mutation(f"evidence {name}", set_field(charges, "evidence", value), ok)
        for name, (value, ok) in _EVIDENCE.items()
    ]
    for what, value in (("NUL", NUL), ("4,097 characters", LONG), ("140,000 characters", HUGE)):
        out += [
            Mutation(f"user id (everywhere) with {what}", rename_user(value)),
            Mutation(f"user charge's user with {what}", set_field(user_charges, "user", value)),
            Mutation(f"member user with {what}", set_field(members, "user", value)),
            Mutation(f"group name (everywhere) with {what}", rename_group(value)),
            Mutation(f"part with {what}", set_field(charges, "part", value)),
            Mutation(f"mechanism with {what}", set_field(charges, "mechanism", value)),
        ]
    return out


#: Malformations every engine refuses (docs/formats.md), beyond agreeing with each other: the
#: ones the engines once accepted alike.
MUST_REFUSE = {
    "membership row after its group's charge",
    "membership row listed again after the charges",
    "membership row with a part",
    "membership row with a mechanism",
    "membership row with evidence that is not JSON",
    *(
        f"{where} with {what}"
        for what in ("NUL", "4,097 characters", "140,000 characters")
        for where in (
            "user id (everywhere)",
            "user charge's user",
            "member user",
            "group name (everywhere)",
            "part",
            "mechanism",
        )
    ),
}


MUTATIONS = _catalogue()
BY_NAME = {m.name: m for m in MUTATIONS}
assert len(BY_NAME) == len(MUTATIONS) and set(BY_NAME) >= MUST_REFUSE


def mutated(rows: Sequence[Row], mutation: Mutation, k: int) -> list[Row] | None:
    return mutation.apply(copy.deepcopy(list(rows)), k)


def table_columns(rows: Sequence[Row], columns: Sequence[str], mutation: Mutation) -> list[str]:
    """The columns written: the table's, plus any the mutation gave a value, minus any it
    drops."""
    out = list(columns)
    out += [c for c in COLUMNS if c not in out and any(not blank(r.get(c)) for r in rows)]
    return list(mutation.columns(out) if mutation.columns else out)


# ============================================================================ ledgers


@st.composite
def valid_tables(draw: st.DrawFn) -> tuple[list[Row], list[str]]:
    """A valid ledger table and its columns: one or two groups of users a, b, c (listed first,
    blank epsilon as null or ""), a charge of group g0 and a direct charge among up to eight
    charges in slot order (one per subject, slot and part), some with part, mechanism and
    evidence (which may or may not cover the charge)."""
    empty = draw(st.sampled_from([None, ""]))
    groups = {"g0": draw(st.lists(st.sampled_from(USERS), min_size=2, max_size=3, unique=True))}
    if draw(st.booleans()):
        groups["g1"] = draw(st.lists(st.sampled_from(USERS), min_size=1, max_size=3, unique=True))
    rows = [membership(g, u, empty) for g, us in groups.items() for u in us]
    subjects = [("user", u) for u in (*USERS, "stranger")] + [("group", g) for g in groups]
    drawn = draw(
        st.lists(
            st.tuples(
                st.integers(1, 6),
                st.sampled_from(subjects),
                st.sampled_from(["1/4", "1/2", "0.1", "1", "0"]),
                st.sampled_from(["", "publication", "report"]),
                st.sampled_from(["", "laplace"]),
                st.sampled_from(["", LAPLACE_QUARTER, LAPLACE_HALF, POSTPROCESSING]),
            ),
            max_size=6,
            unique_by=lambda t: (t[0], t[1], t[3]),
        )
    )
    forced = [
        (draw(st.integers(1, 6)), ("group", "g0"), "1/4", "forced", "", ""),
        (draw(st.integers(1, 6)), ("user", draw(st.sampled_from(USERS))), "1/4", "forced", "", ""),
    ]
    for slot, (kind, who), eps, part, mechanism, evidence in sorted(
        [*drawn, *forced], key=lambda t: t[0]
    ):
        row = charge(slot, eps, **{kind: who})
        other = "group" if kind == "user" else "user"
        row[other] = empty
        row.update(part=part or empty, mechanism=mechanism or empty, evidence=evidence or empty)
        rows.append(row)
    columns = ["slot", "user", "group", "epsilon"]
    columns += [c for c in ("part", "mechanism", "evidence") if draw(st.booleans())]
    return rows, columns


def fixed_table() -> tuple[list[Row], list[str]]:
    """One valid ledger with every column: groups g0 = {a, b} and g1 = {c}, direct charges of a
    and c, evidence that covers its charge."""
    rows = [membership("g0", "a"), membership("g0", "b"), membership("g1", "c")]
    rows += [
        {**charge(1, "1/4", group="g0"), "part": "publication", "evidence": LAPLACE_QUARTER},
        {**charge(2, "1/4", user="a"), "mechanism": "laplace"},
        charge(2, "1/2", group="g1"),
        {**charge(3, "0.1", user="c"), "evidence": POSTPROCESSING},
    ]
    return rows, list(COLUMNS)


# ============================================================================ the property


def _shown(rows: Sequence[Row]) -> str:
    """The rows for a failure message, long strings cut short."""

    def cut(value: Any) -> Any:
        return (
            f"<{len(value):,} chars {value[:12]!r}...>"
            if isinstance(value, str) and len(value) > 60
            else value
        )

    return repr([{k: cut(v) for k, v in r.items() if v is not None} for r in rows])


def check_agreement(
    tmp: Path, rows: Sequence[Row], columns: Sequence[str], mutation: Mutation
) -> None:
    """numpy and DuckDB give the same outcome on the Parquet file; the unmutated ledger is
    accepted; the CSV form of the same table is read without a crash, and accepted exactly
    when the Parquet file is (where CSV can express the malformation)."""
    parquet = write_parquet(rows, tmp / "ledger.parquet", columns)
    numpy_outcome = outcome("numpy", [parquet], POPULATION)
    duckdb_outcome = outcome("duckdb", [parquet], POPULATION)
    assert numpy_outcome == duckdb_outcome, (
        f"{mutation.name}: numpy {numpy_outcome!r} != duckdb {duckdb_outcome!r} on {_shown(rows)}"
    )
    if mutation.name == "no mutation (valid control)":
        assert numpy_outcome[0] == "ok", numpy_outcome
    if mutation.name in MUST_REFUSE:
        assert numpy_outcome[0] == "FormatError", (mutation.name, numpy_outcome)
    text = outcome("numpy", [write_csv(rows, tmp / "ledger.csv", columns)], POPULATION)
    if mutation.csv:
        assert (text[0] == "ok") == (numpy_outcome[0] == "ok"), (mutation.name, text, numpy_outcome)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    table=valid_tables(),
    mutation=st.sampled_from(MUTATIONS),
    k=st.integers(0, 20),
)
def test_engine_refusals_on_generated_ledgers(
    tmp_path_factory: pytest.TempPathFactory,
    table: tuple[list[Row], list[str]],
    mutation: Mutation,
    k: int,
) -> None:
    """One malformation a careless or hostile writer could produce, applied to a generated
    valid ledger: the engines must not differ on whether it is a ledger, nor on what is wrong
    with it (DuckDB validated rows with its own SQL checks and messages, numpy with its
    reader's, so the same file could be refused differently, or refused by one and audited by
    the other)."""
    rows, columns = table
    bad = mutated(rows, mutation, k)
    assume(bad is not None)
    assert bad is not None
    check_agreement(
        tmp_path_factory.mktemp("refusal"), bad, table_columns(bad, columns, mutation), mutation
    )


@pytest.mark.parametrize("name", [m.name for m in MUTATIONS])
def test_engine_refusals_on_a_fixed_ledger(tmp_path: Path, name: str) -> None:
    """Every malformation of the catalogue, on one fixed ledger with every column, so that
    each is checked on every run whatever hypothesis draws."""
    mutation = BY_NAME[name]
    rows, columns = fixed_table()
    bad = mutated(rows, mutation, 0)
    assert bad is not None, name
    check_agreement(tmp_path, bad, table_columns(bad, columns, mutation), mutation)
