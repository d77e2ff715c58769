from __future__ import annotations

import inspect
import sys
from array import array
from fractions import Fraction
from fractions import Fraction as F
from types import FrameType
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.evidence import Laplace
from wevent.accounting.ledger import Ledger


def test_append_and_read_back() -> None:
    ledger = Ledger()
    ledger.define_group("class-0", ["a", "b", "c"])
    ledger.append(1, "0.1", user="a", part="dissimilarity", evidence=Laplace(F(1), F(10)))
    ledger.append(1, Budget("0.2"), group="class-0", part="publication", mechanism="pbd")
    assert len(ledger) == 2
    first, second = list(ledger)
    assert (
        first.user == "a"
        and first.amount == Fraction(1, 10)
        and first.evidence == Laplace(F(1), F(10))
    )
    assert second.group == "class-0" and second.mechanism == "pbd"
    assert ledger.per_user_rows() == 4
    assert [u for u, _ in ledger.expanded()] == ["a", "a", "b", "c"]
    assert set(ledger.users) == {"a", "b", "c"}


def test_columns_are_dictionary_encoded() -> None:
    ledger = Ledger()
    for t in range(1, 6):
        ledger.append(t, "0.1", user=f"u{t % 2}")
    cols = ledger.columns()
    assert cols.slot.tolist() == [1, 2, 3, 4, 5]
    assert cols.amounts == [Budget("0.1")]
    assert set(cols.amount.tolist()) == {0}
    assert cols.evidence.tolist() == [-1] * 5


def test_bad_appends_are_refused() -> None:
    ledger = Ledger()
    with pytest.raises(BudgetError, match="slot"):
        ledger.append(0, "0.1", user="a")
    with pytest.raises(BudgetError, match="exactly one"):
        ledger.append(1, "0.1")
    with pytest.raises(BudgetError, match="not defined"):
        ledger.append(1, "0.1", group="nope")
    with pytest.raises(BudgetError, match="negative"):
        ledger.append(1, "-0.1", user="a")
    ledger.define_group("g", ["a"])
    with pytest.raises(BudgetError, match="other members"):
        ledger.define_group("g", ["b"])
    with pytest.raises(BudgetError, match="twice"):
        ledger.define_group("h", ["a", "a"])
    assert len(ledger) == 0


def test_from_codes_matches_row_appends() -> None:
    bulk = Ledger.from_codes(
        slot=np.array([1, 2, 2], np.int64),
        user_codes=np.array([0, 1, -1], np.int64),
        users=["a", "b"],
        amount_codes=np.array([0, 1, 0], np.int32),
        amounts=[Budget("0.1"), Budget("1/3")],
        groups={"g": ("a", "c")},
    )
    rows = Ledger()
    rows.define_group("g", ["a", "c"])
    rows.append(1, "0.1", user="a")
    rows.append(2, "1/3", user="b")
    rows.append(2, "0.1", group="g")
    assert list(bulk) == list(rows)


_member_tables = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "d", "", "e"]), min_size=0, max_size=4),
    min_size=1,
    max_size=4,
)


@given(tables=_member_tables, direct=st.lists(st.sampled_from(["a", "e", "z"]), max_size=3))
def test_coded_groups_build_the_same_ledger_as_define_group(
    tables: list[list[str]], direct: list[str]
) -> None:
    """The vectorized group path of `Ledger.from_codes` (members as codes into a table) gives
    the same ledger, user numbering and errors as `define_group` member by member."""
    groups = {f"g{k}": tuple(m) for k, m in enumerate(tables)}
    table = sorted({u for m in tables for u in m}, reverse=True)
    codes = [np.array([table.index(u) for u in m], np.int64) for m in tables]
    n = len(direct) + len(groups)
    common: dict[str, Any] = {
        "slot": np.arange(1, n + 1, dtype=np.int64),
        "user_codes": np.array(
            list(range(len(direct))) + [-k - 1 for k in range(len(groups))], np.int64
        ),
        "users": direct,
        "amount_codes": np.zeros(n, np.int32),
        "amounts": [Budget("1/3")],
        "groups": groups,
    }
    outcomes: list[Any] = []
    extras: list[dict[str, Any]] = [{}, {"group_codes": codes, "group_users": table}]
    for extra in extras:
        try:
            ledger = Ledger.from_codes(**common, **extra)
        except BudgetError as exc:
            outcomes.append(str(exc))
            continue
        cols = ledger.columns()
        outcomes.append(
            (
                list(ledger),
                ledger.users,
                dict(ledger.groups),
                [m.tolist() for m in cols.group_members],
            )
        )
    assert outcomes[0] == outcomes[1]


def test_users_interned_in_bulk_keep_first_mention_order() -> None:
    ledger = Ledger()
    ledger.define_group("g", ["b"])
    assert ledger.intern_users(["a", "b", "c", "a"]).tolist() == [1, 0, 2, 1]
    assert ledger.users == ("b", "a", "c")
    with pytest.raises(BudgetError, match="non-empty strings"):
        ledger.intern_users(["d", ""])
    assert ledger.users == ("b", "a", "c")  # nothing interned by a refused call
    codes = ledger.intern_new_users(["x", "y"])  # the guard's unchecked bulk path
    assert codes.tolist() == [3, 4] and ledger.user_count == 5
    assert ledger.user_code("y") == 4 and ledger.user_id(4) == "y"  # indexed on first lookup
    assert ledger.intern_users(["y", "z"]).tolist() == [4, 5]


def test_groups_defined_by_code_materialize_their_members() -> None:
    ledger = Ledger()
    ledger.intern_users(["a", "b", "c"])
    ledger.define_group_codes("g", np.array([2, 0], np.int64))
    assert ledger.group_size("g") == 2 and ledger.has_group("g") and not ledger.has_group("h")
    codes = ledger.member_codes("g")
    assert codes.tolist() == [2, 0] and not codes.flags.writeable
    assert codes.dtype == np.int64  # (kept as int32: every code fits; handed out as int64)
    assert [m.dtype for m in ledger.columns().group_members] == [np.int64]
    assert ledger.columns().group_members[0].tolist() == [2, 0]
    assert ledger.members("g") == ("c", "a") and ledger.groups == {"g": ("c", "a")}
    ledger.define_group_codes("g", [2, 0])  # the same members again: fine
    ledger.define_group("g", ["c", "a"])
    for bad, match in (
        ([0, 0], "twice"),
        ([3], "out of range"),
        ([[0]], "1-D integer"),
    ):
        with pytest.raises(BudgetError, match=match):
            ledger.define_group_codes("h", bad)
    with pytest.raises(BudgetError, match="other members"):
        ledger.define_group_codes("g", [1])
    ledger.define_group_codes("none", np.zeros(0, np.int64))  # no members: valid
    assert ledger.group_size("none") == 0 and ledger.members("none") == ()
    ledger.append(1, "0.1", group="g")
    assert ledger.per_user_rows() == 2
    assert [u for u, _ in ledger.expanded()] == ["c", "a"]


def test_evidence_codes_find_equal_evidence_without_interning() -> None:
    ledger = Ledger()
    ev = Laplace(Fraction(1), Fraction(10))
    assert ledger.evidence_code(ev) is None and ledger.columns().evidences == []
    ledger.append(1, "0.1", user="a", evidence=ev)
    assert ledger.evidence_code(ev) == 0
    assert ledger.evidence_code(Laplace(Fraction(1), Fraction(10))) == 0  # equal, not identical
    ledger.append_validated(2, Budget("0.1"), 0, "", "", ev, evidence_code=0)
    with pytest.raises(BudgetError, match="out of range"):
        ledger.append_validated(3, Budget("0.1"), 0, "", "", ev, evidence_code=1)
    assert len(ledger) == 2
    assert [c.evidence for c in ledger] == [ev, ev]


def test_bulk_ledger_shares_its_columns_read_only_then_thaws_on_append() -> None:
    """``copy=False`` keeps the given arrays (read-only views, constant columns as zero-stride
    views); the first append copies them, and the rows read back are the same either way."""
    slot = np.array([1, 2, 3], np.int64)
    codes = np.array([0, 1, 0], np.int64)
    kept = Ledger.from_codes(
        slot=slot,
        user_codes=codes,
        users=["a", "b"],
        amount_codes=np.zeros(3, np.int32),
        amounts=[Budget("1/3")],
        copy=False,
    )
    copied = Ledger.from_codes(
        slot=slot.copy(),
        user_codes=codes.copy(),
        users=["a", "b"],
        amount_codes=np.zeros(3, np.int32),
        amounts=[Budget("1/3")],
    )
    cols = kept.columns()
    assert np.shares_memory(cols.slot, slot)
    assert not np.shares_memory(copied.columns().slot, slot)
    assert not cols.slot.flags.writeable and not cols.subject.flags.writeable
    assert cols.part.strides == (0,) and cols.evidence.tolist() == [-1, -1, -1]
    assert list(kept) == list(copied) and kept.per_user_rows() == 3
    with pytest.raises(IndexError):
        kept.charge(3)
    kept.append(4, "1/2", user="c")
    assert len(kept) == 4
    assert [c.slot for c in kept] == [1, 2, 3, 4]
    assert [c.user for c in kept] == ["a", "b", "a", "c"]
    assert kept.columns().slot.flags.writeable  # a snapshot copy again
    assert slot.tolist() == [1, 2, 3]  # the caller's array is untouched


class _FailingColumn(array):  # type: ignore[type-arg]
    """An array whose ``append`` (or ``frombytes``) raises ``KeyboardInterrupt`` on its
    ``fail_at``-th call: an interrupt arriving between two of a row's six column appends."""

    fail_at = 1
    calls = 0

    def _tick(self) -> None:
        type(self).calls += 1
        if type(self).calls == self.fail_at:
            raise KeyboardInterrupt

    def append(self, value: int) -> None:
        self._tick()
        super().append(value)

    def frombytes(self, data: Any) -> None:
        self._tick()
        super().frombytes(data)


def _interrupting(column: array[int], fail_at: int) -> _FailingColumn:
    failing = _FailingColumn(column.typecode, column)
    _FailingColumn.fail_at, _FailingColumn.calls = fail_at, 0
    return failing


def _lengths(ledger: Ledger) -> list[int]:
    cols = ledger.columns()
    return [len(c) for c in (cols.slot, cols.subject, cols.amount, cols.part, cols.mechanism)] + [
        len(cols.evidence)
    ]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"part": []}, BudgetError),
        ({"mechanism": 3}, BudgetError),
        ({"evidence": []}, TypeError),  # unhashable: interning it fails
    ],
)
def test_a_refused_append_leaves_no_part_of_its_row(bad: dict[str, Any], error: type) -> None:
    """A label of the wrong type, or evidence that cannot be interned, is refused before any
    column takes the row (a list as ``part`` used to leave slot, subject and amount appended
    and the part column one row short: every later row read back misaligned)."""
    ledger = Ledger()
    ledger.append(1, "1/4", user="a", part="p", mechanism="m")
    with pytest.raises(error):
        ledger.append(2, "1/2", user="b", **bad)
    assert len(ledger) == 1 and _lengths(ledger) == [1] * 6
    ledger.append(3, "1/3", user="c", part="q", mechanism="n")
    assert [(c.slot, c.user, c.amount, c.part, c.mechanism) for c in ledger] == [
        (1, "a", Fraction(1, 4), "p", "m"),
        (3, "c", Fraction(1, 3), "q", "n"),
    ]


@pytest.mark.parametrize("column", ["_slot", "_amount", "_part", "_evidence"])
def test_an_interrupt_between_columns_leaves_the_ledger_as_it_was(column: str) -> None:
    """All or nothing: a ``KeyboardInterrupt`` in the middle of a call's rows (here in one
    column's append of the second row) cuts every column back to where the call began."""
    ledger = Ledger()
    ledger.append(1, "1/4", user="a", part="p")
    before = list(ledger)
    setattr(ledger, column, _interrupting(getattr(ledger, column), fail_at=2))
    rows = [(Budget("1/2"), ledger.intern_user(u), "p", "m", None, None) for u in ("b", "c")]
    with pytest.raises(KeyboardInterrupt):
        ledger.append_validated_rows(2, rows)
    assert _lengths(ledger) == [1] * 6 and list(ledger) == before
    ledger.append_validated_rows(2, rows)  # the column appends again from here
    assert [(c.slot, c.user) for c in ledger] == [(1, "a"), (2, "b"), (2, "c")]


def test_a_bad_evidence_code_in_a_later_row_takes_none_of_the_rows() -> None:
    ledger = Ledger()
    code = ledger.intern_user("a")
    rows = [
        (Budget("1/2"), code, "", "", None, None),
        (Budget("1/2"), code, "", "", Laplace(F(1), F(2)), 7),  # no evidence has code 7
    ]
    with pytest.raises(BudgetError, match="evidence code out of range"):
        ledger.append_validated_rows(1, rows)
    assert len(ledger) == 0 and _lengths(ledger) == [0] * 6


def _bulk_ab() -> Ledger:
    """A bulk ledger (`from_codes`) of two rows: user a at slot 1, b at slot 2."""
    return Ledger.from_codes(
        slot=np.array([1, 2], np.int64),
        user_codes=np.array([0, 1], np.int64),
        users=["a", "b"],
        amount_codes=np.zeros(2, np.int32),
        amounts=[Budget("1/3")],
    )


def test_an_interrupted_thaw_keeps_the_bulk_columns() -> None:
    """A bulk ledger's first append copies its columns into the appendable arrays; an
    interrupt in that copy leaves the bulk columns in charge and the arrays empty."""
    ledger = _bulk_ab()
    before = list(ledger)
    ledger._part = _interrupting(ledger._part, fail_at=1)
    with pytest.raises(KeyboardInterrupt):
        ledger.append(3, "1/2", user="c")
    assert list(ledger) == before and _lengths(ledger) == [2] * 6
    ledger.append(3, "1/2", user="c")
    assert [(c.slot, c.user) for c in ledger] == [(1, "a"), (2, "b"), (3, "c")]


def _interrupt_at(path: str, lineno: int, hit: int) -> None:
    """Raise KeyboardInterrupt when ``path``'s line ``lineno`` is about to run for the
    ``hit``-th time (as a signal arriving there would), once."""
    seen = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal seen
        if event == "line" and frame.f_lineno == lineno:
            seen += 1
            if seen == hit:
                sys.settrace(None)
                frame.f_trace = None
                raise KeyboardInterrupt
        return local

    def outer(frame: FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code.co_filename == path else None

    sys.settrace(outer)


def _lines_of(*functions: Any) -> list[int]:
    lines: list[int] = []
    for function in functions:
        source, first = inspect.getsourcelines(function)
        lines += [first + k for k, text in enumerate(source) if text.strip()[:1] not in ("", "#")]
    return lines


_APPEND_PATH = (Ledger._thaw, Ledger.append_validated_rows, Ledger._append_rows, Ledger._cut)
_CODED_PATH = (Ledger._thaw, Ledger.append_coded_rows, Ledger._cut)


@pytest.mark.parametrize("coded", [False, True])
@pytest.mark.parametrize("bulk", [False, True])
def test_an_interrupt_at_any_line_of_an_append_leaves_whole_rows(bulk: bool, coded: bool) -> None:
    """A KeyboardInterrupt arriving at any line of the append path (the thaw of bulk columns,
    the rows, the cut back; by rows or by codes), at its first, second or third run: the
    ledger then holds the rows it held before the call, or those and the call's, never part
    of a row or of the call; and the next append reads back in order."""
    path = inspect.getsourcefile(Ledger)
    assert path is not None
    hits = 0
    for lineno in _lines_of(*(_CODED_PATH if coded else _APPEND_PATH)):
        for hit in (1, 2, 3):
            if bulk:
                ledger = _bulk_ab()
            else:
                ledger = Ledger()
                ledger.append(1, "1/3", user="a")
                ledger.append(2, "1/3", user="b")
            for u in "cde":
                ledger.define_group(u, [u])
            ledger.append(2, "1/2", group="c", part="p", mechanism="m")  # codes for both paths
            before = [(c.slot, c.user, c.group) for c in ledger]
            groups = [ledger.group_index[u] for u in "cde"]
            labels = ledger.label_codes("p", "m")
            assert labels is not None
            amount = ledger.amount_codes[1, 2]
            rows = [(Budget("1/2"), -g - 1, "p", "m", None, None) for g in groups]
            _interrupt_at(path, lineno, hit)
            try:
                if coded:
                    ledger.append_coded_rows(3, groups, [amount] * 3, [-1] * 3, labels)
                else:
                    ledger.append_validated_rows(3, rows)
            except KeyboardInterrupt:
                hits += 1
            finally:
                sys.settrace(None)
            assert len(set(_lengths(ledger))) == 1, (lineno, hit, _lengths(ledger))
            got = [(c.slot, c.user, c.group) for c in ledger]
            assert got in (before, before + [(3, None, u) for u in "cde"]), (lineno, hit, got)
            ledger.append(4, "1/4", user="f")
            assert [(c.slot, c.user, c.group) for c in ledger] == [*got, (4, "f", None)]
    assert hits > 20  # the interrupts did land


@pytest.mark.parametrize("bulk", [False, True])
def test_coded_rows_read_back_as_the_rows_they_code(bulk: bool) -> None:
    """`append_coded_rows` writes what `append_validated_rows` writes for the same charges."""
    ev = Laplace(F(1), F(4))
    by_rows, by_codes = (_bulk_ab() if bulk else Ledger() for _ in range(2))
    for ledger in (by_rows, by_codes):
        for g in ("g0", "g1", "g2"):
            ledger.define_group(g, ["a"] if g == "g0" else ["b", g])
        ledger.append(3, "1/5", group="g0", part="pub", mechanism="pba", evidence=ev)
        ledger.append(3, "2/5", group="g1", part="pub", mechanism="pba")
    charges = [("g2", Budget("2/5"), ev), ("g0", Budget("1/5"), None), ("g1", Budget("1/5"), ev)]
    by_rows.append_validated_rows(
        4, [(a, -by_rows.group_index[g] - 1, "pub", "pba", e, None) for g, a, e in charges]
    )
    labels = by_codes.label_codes("pub", "pba")
    assert labels is not None and by_codes.label_codes("pub", "ba") is None
    ev_code = by_codes.evidence_code(ev)
    assert ev_code is not None
    by_codes.append_coded_rows(
        4,
        [by_codes.group_index[g] for g, _, _ in charges],
        [by_codes.amount_codes[a.as_integer_ratio()] for _, a, _ in charges],
        [-1 if e is None else ev_code for _, _, e in charges],
        labels,
    )
    assert list(by_codes) == list(by_rows)
    assert [c.group for c in list(by_codes)[-3:]] == ["g2", "g0", "g1"]
    by_codes.append_coded_rows(5, [], [], [], labels)  # nothing to append
    assert len(by_codes) == len(by_rows)


@pytest.mark.parametrize(
    "column, value",
    [
        ("groups", -1),
        ("groups", 3),
        ("amounts", -1),
        ("amounts", 2),
        ("evidences", -2),
        ("evidences", 1),
        ("part", -1),
        ("part", 1),
        ("mechanism", 1),
        ("length", 0),
    ],
)
def test_a_coded_row_out_of_range_appends_nothing(column: str, value: int) -> None:
    ledger = Ledger()
    for g in ("g0", "g1", "g2"):
        ledger.define_group(g, [g])
    ledger.append(1, "1/5", group="g0", part="p", mechanism="m", evidence=Laplace(F(1), F(5)))
    ledger.append(1, "2/5", group="g1", part="p", mechanism="m")
    before = list(ledger)
    cols: dict[str, Any] = {"groups": [0, 1], "amounts": [0, 1], "evidences": [0, -1]}
    labels = [0, 0]
    if column in cols:
        cols[column][1] = value
    elif column == "length":
        cols["amounts"] = [0]
    else:
        labels[column == "mechanism"] = value
    with pytest.raises(BudgetError):
        ledger.append_coded_rows(2, cols["groups"], cols["amounts"], cols["evidences"], (labels[0], labels[1]))  # fmt: skip
    assert list(ledger) == before and len(set(_lengths(ledger))) == 1


def test_an_interrupt_while_a_refused_call_is_cut_back_still_cuts_every_column() -> None:
    """A refused row (an evidence code out of range) cuts the call back; a second interrupt
    at any line of that cut's deletes still leaves every column at the length the call began
    with. (One arriving before the first delete, a few bytecodes, is not covered: no Python
    handler can be.)"""
    path = inspect.getsourcefile(Ledger)
    assert path is not None
    source, first = inspect.getsourcelines(Ledger._cut)
    deletes = [
        first + k
        for k, text in enumerate(source)
        if text.strip() in ("for column in self._columns():", "del column[rows:]", "break")
    ]
    assert len(deletes) == 3
    for lineno in deletes:
        for hit in (1, 2, 3, 4):
            ledger = Ledger()
            ledger.append(1, "1/3", user="a")
            code = ledger.intern_user("b")
            rows = [
                (Budget("1/2"), code, "", "", None, None),
                (Budget("1/2"), code, "", "", None, None),
                (Budget("1/2"), code, "", "", Laplace(F(1), F(2)), 7),
            ]
            _interrupt_at(path, lineno, hit)
            try:
                ledger.append_validated_rows(2, rows)
            except (KeyboardInterrupt, BudgetError):
                pass
            finally:
                sys.settrace(None)
            assert _lengths(ledger) == [1] * 6, (lineno, hit, _lengths(ledger))


@given(
    st.lists(st.integers(-3, 3), max_size=40),
    st.sampled_from([np.bool_, np.uint8, np.int64]),
    st.integers(1, 3),
)
def test_every_some_largest_answer_as_all_any_max(values: list[int], dtype: Any, step: int) -> None:
    """The guard's reductions (argmin / argmax and one lookup) give numpy's answers, on empty
    arrays, strided views and signed entries (numpy's own reduction) too."""
    from wevent.accounting.ledger import every, largest, some

    arr = np.array(values, np.int64).astype(dtype)[::step]
    assert every(arr) is bool(arr.all())
    assert some(arr) is bool(arr.any())
    if len(arr):
        assert largest(arr) == int(arr.max())


def test_every_is_false_wherever_the_one_false_entry_is() -> None:
    """A false entry first, in the middle or last makes `every` false (an argmin that looked
    at the first entry only would pass the first case and fail the others)."""
    from wevent.accounting.ledger import every, some

    for where in (0, 5, 9):
        flags = np.ones(10, bool)
        flags[where] = False
        assert not every(flags)
        assert some(~flags)


def test_a_new_group_by_codes_keeps_a_narrow_read_only_copy() -> None:
    ledger = Ledger()
    ledger.intern_users(["a", "b", "c"])
    codes = np.array([0, 2], np.int64)
    g = ledger.define_new_group_codes("g", codes)
    codes[0] = 1  # the caller's array is its own
    assert ledger.group_code("g") == g and ledger.members("g") == ("a", "c")
    with pytest.raises(BudgetError, match="non-empty strings"):
        ledger.define_new_group_codes("", np.array([1], np.int64))
    # a name taken is refused, and the table stays whole (a later group keeps its members)
    with pytest.raises(BudgetError, match="already defined"):
        ledger.define_new_group_codes("g", np.array([1], np.int64))
    ledger.define_new_group_codes("h", np.array([0, 1], np.int64))
    assert ledger.members("h") == ("a", "b") and ledger.members("g") == ("a", "c")
