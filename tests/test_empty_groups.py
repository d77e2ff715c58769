"""A group without members is valid data: defined, charged (charging nobody), written, read and
audited alike in every format and engine, at runtime and in durable ledgers. How each table
format writes it (one membership row without a user) is checked for the ways it can clash."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.refusals import refusals
from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.formats import FormatError, read_ledger, write_ledger
from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.recovery import DurableSink, open_durable
from wevent.accounting.requirements import Fixed
from wevent.verifier.audit import run_audit
from wevent.verifier.check import check
from wevent.verifier.engines import make_engine
from wevent.verifier.guard import Guard
from wevent.verifier.guard_engines import GUARD_ENGINES

SPARK = pytest.param("spark", marks=pytest.mark.spark)
POPULATION = Population({"a": Fixed(2, Budget(1)), "b": Fixed(2, Budget(1))})


def _ledger() -> Ledger:
    ledger = Ledger()
    ledger.define_group("g", ["a", "b"])
    ledger.define_group("nobody", [])
    ledger.append(1, Budget("1/2"), group="g")
    ledger.append(1, Budget(50), group="nobody")  # far over any bound: it charges no one
    ledger.append(2, Budget("1/2"), user="b")
    return ledger


def test_a_charge_of_an_empty_group_charges_nobody() -> None:
    verdict = check(_ledger(), POPULATION)
    assert verdict.ok
    assert verdict.user_utilization == {"a": Fraction(1, 2), "b": Fraction(1)}


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
@pytest.mark.parametrize("engine", ["numpy", "duckdb", SPARK])
def test_every_format_and_engine_keeps_an_empty_group(
    suffix: str, engine: str, tmp_path: Path
) -> None:
    path = tmp_path / f"l{suffix}"
    write_ledger(_ledger(), path)
    back = read_ledger(path)
    assert back.groups == {"g": ("a", "b"), "nobody": ()}
    assert [(c.slot, c.group, c.user) for c in back] == [
        (1, "g", None),
        (1, "nobody", None),
        (2, None, "b"),
    ]
    verdict, _ = make_engine(engine).audit([path], POPULATION)
    assert verdict.to_json() == check(_ledger(), POPULATION).to_json()


def test_a_later_file_charges_an_empty_group_of_an_earlier_one(tmp_path: Path) -> None:
    first, second = tmp_path / "a.parquet", tmp_path / "b.jsonl"
    ledger = Ledger()
    ledger.define_group("nobody", [])
    ledger.append(1, Budget(1), group="nobody")
    write_ledger(ledger, first)
    second.write_text('{"slot": 2, "group": "nobody", "epsilon": "7"}\n')
    for engine in ("numpy", "duckdb"):
        verdict, _ = make_engine(engine).audit([first, second], POPULATION)
        assert verdict.ok and not verdict.violations


@pytest.mark.parametrize("suffix", [".jsonl", ".wledger"])
def test_the_guard_spends_on_an_empty_group_durably(suffix: str, tmp_path: Path) -> None:
    path = tmp_path / f"run{suffix}"
    sink, _ = open_durable(path, resume=False)
    guard = Guard(POPULATION, sink=sink)
    guard.define_group("nobody", [])
    guard.spend(1, Budget(9), group="nobody")  # nobody's window fills
    guard.spend(1, Budget(1), user="a")  # a's own bound still allows a full spend
    sink.close()
    result = run_audit([path], POPULATION)
    assert result.verdict.ok and [i.state for i in result.integrity] == ["intact"]
    resumed, recovered = Guard.recover(path, POPULATION)
    assert recovered.ledger.groups == {"nobody": ()}
    resumed.spend(2, Budget(3), group="nobody")
    assert isinstance(resumed.sink, DurableSink)
    resumed.sink.close()
    assert run_audit([path], POPULATION).verdict.ok


# ---------------------------------------------------------------- how the table formats clash


def _parquet(path: Path, rows: list[tuple[Any, ...]], row_group_size: int | None = None) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    slot, user, group, eps = zip(*rows, strict=True)
    pq.write_table(
        pa.table(
            {
                "slot": pa.array(slot, pa.int64()),
                "user": list(user),
                "group": list(group),
                "epsilon": list(eps),
            }
        ),
        path,
        row_group_size=row_group_size,
    )
    return path


def _csv(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    lines = ["slot,user,group,epsilon"]
    lines += [",".join("" if v is None else str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


CLASHES: dict[str, tuple[list[tuple[Any, ...]], str, str]] = {
    "member after the empty row": (
        [(None, "", "g", ""), (None, "a", "g", ""), (1, "", "g", "1")],
        "row 2: group 'g' is declared without members at row 1 and lists a member here",
        ":3: group 'g' is declared without members at ",
    ),
    "empty row after a member": (
        [(None, "a", "g", ""), (None, "b", "g", ""), (None, "", "g", ""), (1, "", "g", "1")],
        "row 3: a membership row without a user declares group 'g' without members, but the "
        "group is also listed at row 1",
        ":4: a membership row without a user declares group 'g' without members, but the "
        "group is also listed at ",
    ),
    "two empty rows": (
        [(None, "", "g", ""), (None, "", "g", "")],
        "row 2: a membership row without a user declares group 'g' without members, but the "
        "group is also listed at row 1",
        ":3: a membership row without a user declares group 'g' without members",
    ),
    "members after a charge": (
        [(None, "a", "g", ""), (1, "", "g", "1"), (None, "b", "g", "")],
        "row 3: members of group 'g' must precede its charges",
        ":4: members of group 'g' must precede its charges",
    ),
    "charged before it is defined": (
        [(1, "", "g", "1"), (None, "a", "g", "")],
        "row 1: group 'g' is used before its members are listed",
        ":2: group 'g' is used before its members are listed",
    ),
}


@pytest.mark.parametrize("case", sorted(CLASHES))
def test_a_clashing_definition_is_refused_alike_by_every_reader(case: str, tmp_path: Path) -> None:
    """The same rule in CSV (line numbers) and Parquet (row numbers), and one message from every
    engine for the Parquet file (the shared row check runs before any engine reads it)."""
    rows, parquet_message, csv_message = CLASHES[case]
    parquet = _parquet(tmp_path / "l.parquet", rows)
    assert refusals(("numpy", "duckdb"), [parquet], POPULATION) == {f"{parquet}: {parquet_message}"}
    with pytest.raises(FormatError, match=csv_message):
        read_ledger(_csv(tmp_path / "l.csv", rows))


def test_a_jsonl_group_line_lists_no_empty_member(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text('{"group": "g", "members": ["a", ""]}\n')
    with pytest.raises(FormatError, match=r":1: group members must be non-empty user id strings"):
        read_ledger(path)
    path.write_text('{"group": "g", "members": []}\n{"slot": 1, "group": "g", "epsilon": "1"}\n')
    assert read_ledger(path).groups == {"g": ()}


def test_a_group_is_the_same_set_in_every_file_whatever_the_order(tmp_path: Path) -> None:
    """Defined again in a later file with its members in another order: the same group for
    every engine; with other members (or none): one message from every engine."""
    first = _parquet(tmp_path / "a.parquet", [(None, "a", "g", ""), (None, "b", "g", "")])
    same = _parquet(
        tmp_path / "b.parquet", [(None, "b", "g", ""), (None, "a", "g", ""), (1, "", "g", "1")]
    )
    empty = _parquet(tmp_path / "c.parquet", [(None, "", "g", ""), (1, "", "g", "1")])
    for engine in ("numpy", "duckdb"):
        assert make_engine(engine).audit([first, same], POPULATION)[0].ok
    assert refusals(("numpy", "duckdb"), [first, empty], POPULATION) == {
        f"{first} + {empty}: group 'g' is defined in more than one file with other members"
    }


@pytest.mark.parametrize("engine", sorted(GUARD_ENGINES))
def test_every_guard_engine_spends_on_an_empty_group_and_gives_it_no_headroom(
    engine: str,
) -> None:
    import numpy as np

    guard = Guard(POPULATION, engine=engine)
    guard.define_group("nobody", [])
    guard.define_group_by_index("drawn", POPULATION.users, np.array([]))  # float, and empty
    guard.spend(1, Budget(9), group="nobody")
    guard.spend(1, Budget(9), group="drawn")
    guard.spend(1, Budget(1), user="a")
    assert guard.ledger.groups == {"nobody": (), "drawn": ()}
    assert guard.headroom(1, user="a") == 0
    with pytest.raises(BudgetError, match="no members: no window bounds a charge"):
        guard.headroom(1, group="nobody")


@pytest.mark.parametrize("row_group_size", [None, 1, 2])
@pytest.mark.parametrize("batch", [None, 1, 2, 3])
def test_the_row_rules_hold_across_batches_and_row_groups(
    row_group_size: int | None, batch: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared row check carries what it learned from one batch to the next (numpy checks
    its columns slice by slice, the SQL engines' pass reads row group by row group): the same
    first offending row whatever the cut. Review found an empty declaration forgotten at a
    clash in the same batch, which named a charge before it instead."""
    from wevent.accounting import parquet_rows

    if batch is not None:
        monkeypatch.setattr(parquet_rows, "_BATCH", batch)
    for name, (rows, message, _) in CLASHES.items():
        path = _parquet(tmp_path / f"{name}.parquet", rows, row_group_size)
        assert refusals(("numpy", "duckdb"), [path], POPULATION) == {f"{path}: {message}"}, name
    declared_then_charged = [(None, "", "g", ""), (1, "", "g", "1"), (None, "a", "g", "")]
    path = _parquet(tmp_path / "late.parquet", declared_then_charged, row_group_size)
    assert refusals(("numpy", "duckdb"), [path], POPULATION) == {
        f"{path}: row 3: members of group 'g' must precede its charges"
    }


def test_a_parquet_file_without_a_user_column_defines_empty_groups_for_later_files(
    tmp_path: Path,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = tmp_path / "a.parquet"
    pq.write_table(
        pa.table(
            {"slot": pa.array([None, 1], pa.int64()), "group": ["e", "e"], "epsilon": ["", "1"]}
        ),
        first,
    )
    second = tmp_path / "b.jsonl"
    second.write_text('{"slot": 2, "group": "e", "epsilon": "5"}\n')
    for engine in ("numpy", "duckdb"):
        assert make_engine(engine).audit([first, second], POPULATION)[0].ok


def test_a_huge_charge_of_an_empty_group_needs_no_wide_sums(tmp_path: Path) -> None:
    """It charges nobody, so its amount enters no sum: the SQL engines used to refuse the
    ledger (sums past 38 digits) where numpy found it compliant."""
    ledger = Ledger()
    ledger.define_group("nobody", [])
    ledger.append(1, Budget(10**40), group="nobody")
    ledger.append(1, Budget("1/2"), user="a")
    path = tmp_path / "l.parquet"
    write_ledger(ledger, path)
    for engine in ("numpy", "duckdb"):
        verdict, _ = make_engine(engine).audit([path], POPULATION)
        assert verdict.to_json() == check(ledger, POPULATION).to_json(), engine
