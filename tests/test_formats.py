from fractions import Fraction as F
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wevent.accounting import formats
from wevent.accounting.budget import Budget
from wevent.accounting.evidence import Laplace, Sampled
from wevent.accounting.formats import (
    FormatError,
    read_ledger,
    read_ledgers,
    read_requirements,
    write_ledger,
    write_requirements,
)
from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.requirements import Dynamic, Fixed, WholeStream

from .strategies import ledgers, populations


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_requirements_csv(tmp_path: Path) -> None:
    fixed = _write(tmp_path, "req.csv", "user,w,epsilon\na,3,0.3\nb,inf,1/2\n")
    dyn = _write(
        tmp_path,
        "dyn.csv",
        "user,slot,w_back,eps_back,w_fwd,eps_fwd\nc,3,2,2.4,4,3.2\nc,1,1,1.0,4,2.4\n",
    )
    pop = read_requirements([fixed, dyn])
    assert pop.requirement_of("a") == Fixed(3, Budget("0.3"))
    assert pop.requirement_of("b") == WholeStream(Budget("0.5"))
    c = pop.requirement_of("c")
    assert isinstance(c, Dynamic) and c.slots == (1, 3)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(populations())
def test_requirements_round_trip(tmp_path: Path, pop: Population) -> None:
    path = tmp_path / "req.csv"
    write_requirements(pop, path)
    files = [p for p in (path, path.with_name("req.dynamic.csv")) if p.exists()]
    back = read_requirements(files)
    assert dict(back.items()) == dict(pop.items())
    for p in files:
        p.unlink()


@pytest.mark.parametrize(
    "text, message",
    [
        ("user,w,epsilon\na,0,0.3\n", "at least 1 slot"),
        ("user,w,epsilon\na,3,-0.3\n", "negative"),
        ("user,w,epsilon\na,3,nan\n", "not a finite number"),
        ("user,w,epsilon\na,3,abc\n", "not an exact number"),
        ("user,w,epsilon\na,3\n", "expected 3 fields"),
        ("user,eps\na,3\n", "header"),
        ("user,w,epsilon\na,3,0.1\na,4,0.1\n", "already declared"),
        ("user,slot,w_back,eps_back,w_fwd,eps_fwd\nc,0,1,1,1,1\n", "numbered from 1"),
        ("", "empty file"),
    ],
)
def test_malformed_requirements(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, "bad.csv", text)
    with pytest.raises(FormatError) as info:
        read_requirements(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25)
@given(data=st.data())
def test_ledger_round_trips_exactly(tmp_path: Path, suffix: str, data: st.DataObject) -> None:
    pop = data.draw(populations())
    ledger = data.draw(ledgers(pop))
    if data.draw(st.booleans()) and len(ledger):
        ledger.append(99, "1/3", user="x", evidence=Sampled(Laplace(F(1), F("0.7")), F("1/9")))
    path = tmp_path / f"ledger{suffix}"
    write_ledger(ledger, path)
    back = read_ledger(path)
    assert list(back) == list(ledger)
    assert dict(back.groups) == dict(ledger.groups)


def test_jsonl_compact_groups(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "l.jsonl",
        '{"group": "class-0", "members": ["a", "b"]}\n'
        '{"slot": 1, "group": "class-0", "epsilon": "0.1", "part": "publication",'
        ' "evidence": {"kind": "laplace", "sensitivity": "1", "scale": "10"}}\n'
        '{"slot": 2, "user": "a", "epsilon": "1/3"}\n',
    )
    ledger = read_ledger(path)
    assert ledger.per_user_rows() == 3
    assert next(iter(ledger)).evidence == Laplace(F(1), F(10))


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("a.csv", "slot,user,epsilon\n0,a,0.1\n", "numbered from 1"),
        ("a.csv", "slot,user,epsilon\n1,a,NaN\n", "not a finite number"),
        ("a.csv", "slot,user,epsilon\n1,a,-1\n", "negative"),
        ("a.csv", "slot,user,epsilon\nx,a,0.1\n", "slot"),
        ("a.csv", "slot,user\n1,a\n", "missing column(s): epsilon"),
        ("a.csv", "user,epsilon\na,1\n", "missing column(s): slot"),
        ("a.jsonl", '{"slot": 1, "user": "a"}\n', "epsilon: missing"),
        ("a.jsonl", '{"slot": 1, "user": "a", "epsilon": 0.1}\n', "as strings"),
        ("a.jsonl", '{"slot": 1, "user": "a", "epsilon": "0.1"\n', "not valid JSON"),
        ("a.jsonl", '{"slot": 1, "group": "g", "epsilon": "0.1"}\n', "before its members"),
        (
            "a.jsonl",
            '{"slot": 1, "user": "a", "epsilon": "0.1", "evidence": {"kind": "x"}}\n',
            "unknown kind",
        ),
        ("a.txt", "", "unknown ledger format"),
    ],
)
def test_malformed_ledgers(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(FormatError) as info:
        read_ledger(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no such file"):
        read_ledger(tmp_path / "nope.jsonl")
    with pytest.raises(FormatError, match="no such file"):
        read_requirements(tmp_path / "nope.csv")


def test_parquet_bad_slot(tmp_path: Path) -> None:
    ledger = Ledger()
    ledger.append(1, "0.1", user="a")
    path = tmp_path / "l.parquet"
    write_ledger(ledger, path)
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    table = table.set_column(0, "slot", pa.array([0], pa.int64()))
    pq.write_table(table, path)
    with pytest.raises(FormatError, match="numbered from 1"):
        read_ledger(path)


def test_reading_reports_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every 50,000 lines in use (read_ledger's docstring); every 500 here, the same code
    assert formats._PROGRESS_EVERY == 50_000
    monkeypatch.setattr(formats, "_PROGRESS_EVERY", 500)
    ledger = Ledger()
    for t in range(1, 1_201):
        ledger.append(t, "0.001", user="a")
    seen: list[tuple[int, int]] = []
    for suffix in (".jsonl", ".csv"):
        path = tmp_path / f"big{suffix}"
        write_ledger(ledger, path)
        seen.clear()
        back = read_ledger(path, progress=lambda done, total: seen.append((done, total)))
        assert len(back) == len(ledger)
        if suffix == ".csv":  # lines
            assert [d for d, _ in seen] == [500, 1_000]
            assert all(total >= 1_200 for _, total in seen)
        else:  # bytes, at the ends of lines 500 and 1,000
            size = path.stat().st_size
            lines = path.read_bytes().split(b"\n")
            assert [d for d, _ in seen] == [
                sum(len(x) + 1 for x in lines[:k]) for k in (500, 1_000)
            ]
            assert all(total == size for _, total in seen)


# ------------------------------------------------------------------ regressions found in review


def test_parquet_with_only_the_required_columns(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "min.parquet"
    pq.write_table(
        pa.table(
            {"slot": pa.array([1, 2], pa.int64()), "user": ["a", "b"], "epsilon": ["0.1", "1/3"]}
        ),
        path,
    )
    ledger = read_ledger(path)
    assert [(c.slot, c.user, c.amount) for c in ledger] == [
        (1, "a", Budget("0.1")),
        (2, "b", Budget("1/3")),
    ]


@pytest.mark.parametrize(
    "columns, message",
    [
        ({"slot": [1], "user": ["a"], "epsilon": [0.1]}, "must hold strings"),
        ({"slot": [1.0], "user": ["a"], "epsilon": ["0.1"]}, "must hold integers"),
        (
            {"slot": [None, 1], "user": ["a", "a"], "group": ["g", ""], "epsilon": ["5", "1"]},
            "membership row",
        ),
        (
            {"slot": [1], "user": ["a"], "epsilon": ["0.1"], "evidence": ['{"kind": ["x"]}']},
            "unknown kind",
        ),
    ],
)
def test_parquet_type_errors_are_one_line(
    tmp_path: Path, columns: dict[str, list[object]], message: str
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(columns), path)
    with pytest.raises(FormatError) as info:
        read_ledger(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_csv_keeps_ids_exactly(tmp_path: Path) -> None:
    ledger = Ledger()
    ledger.append(1, "0.1", user=" a")
    ledger.append(1, "0.2", user="a")
    path = tmp_path / "ws.csv"
    write_ledger(ledger, path)
    assert [c.user for c in read_ledger(path)] == [" a", "a"]


def test_requirements_csv_with_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfuser,w,epsilon\na,2,1\n")
    assert read_requirements(path).requirement_of("a") == Fixed(2, Budget(1))


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"slot": 9223372036854775808, "user": "a", "epsilon": "1"}', "largest slot"),
        ('{"slot": 1, "group": ["a"], "epsilon": "1"}', "ids are strings"),
        ('{"slot": 1, "user": "a", "epsilon": "1", "evidence": {"kind": ["x"]}}', "unknown kind"),
        ('{"slot": 1, "user": "a", "epsilon": "1/' + "7" * 2000 + '"}', "too long"),
        ('{"group": "g", "members": ["a"]}\n{"group": "g", "members": ["b"]}', "defined twice"),
    ],
)
def test_jsonl_input_mistakes_are_one_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(FormatError) as info:
        read_ledger(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_jsonl_lines_end_at_newline_alone(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are characters inside a JSON string, not line breaks (JSON
    Lines separates records by \\n); CRLF line ends still read."""
    ids = ["a\u2028b", "c\u2029d", "e\x85f"]
    text = "".join(
        '{"slot": 1, "user": "' + u + '", "epsilon": "1/10"}' + end
        for u, end in zip(ids, ["\n", "\r\n", "\n"], strict=True)
    )
    assert len(text.splitlines()) > len(ids)  # the control: str.splitlines breaks these ids
    path = tmp_path / "l.jsonl"
    path.write_bytes(text.encode())
    assert [c.user for c in read_ledger(path)] == ids


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_write_ledger_syncs_the_file_then_renames_then_syncs_the_directory(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Durability: the content is on disk before the rename, and the rename before returning."""
    import os
    import stat

    events: list[tuple[str, int]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        events.append(("fsync-dir" if stat.S_ISDIR(info.st_mode) else "fsync", info.st_ino))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("rename", os.stat(src).st_ino))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    ledger = Ledger()
    ledger.define_group("g", ["a", "b"])
    ledger.append(1, "1/3", group="g")
    path = tmp_path / f"ledger{suffix}"
    write_ledger(ledger, path)
    file_ino, dir_ino = path.stat().st_ino, tmp_path.stat().st_ino
    assert events == [("fsync", file_ino), ("rename", file_ino), ("fsync-dir", dir_ino)]
    assert list(read_ledger(path)) == list(ledger)
    assert not list(tmp_path.glob("*.tmp"))


def test_parquet_dictionary_columns_are_read_as_their_values(tmp_path: Path) -> None:
    """Arrow reads a column back dictionary-encoded when the file stores that schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ledger = Ledger()
    ledger.define_group("g", ["a", "b"])
    ledger.append(1, "1/3", group="g", part="publication")
    ledger.append(2, "0.1", user="a", evidence=Sampled(Laplace(F(1), F("0.7")), F("1/9")))
    ledger.append(2, "1/3", user="c")
    plain = tmp_path / "plain.parquet"
    write_ledger(ledger, plain)
    table = pq.read_table(plain)
    encoded = pa.table(
        {
            name: (col if name == "slot" else col.cast(pa.string()).dictionary_encode())
            for name, col in zip(table.column_names, table.columns, strict=True)
        }
    )
    path = tmp_path / "dict.parquet"
    pq.write_table(encoded, path)
    schema = pq.read_table(path).schema
    assert all(pa.types.is_dictionary(schema.field(n).type) for n in ("user", "group", "epsilon"))
    back = read_ledger(path)
    assert list(back) == list(ledger)
    assert dict(back.groups) == dict(ledger.groups)
    both = read_ledgers([path, plain])
    assert list(both) == list(ledger) + list(ledger)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=30)
@given(data=st.data())
def test_parquet_read_column_by_column_matches_the_row_reader(
    tmp_path: Path, data: st.DataObject
) -> None:
    """The columnar reader (one column and one row group at a time, dictionary or plain
    encoding, values first seen in a later row group, null strings) reads the same charges,
    groups and user order as the JSONL row reader."""
    import pyarrow.parquet as pq

    pop = data.draw(populations())
    ledger = data.draw(ledgers(pop))
    ledger.append(7, "1/7", user="late-user", part="p", mechanism="m")
    rows = tmp_path / "rows.jsonl"
    write_ledger(ledger, rows)
    expected = read_ledger(rows)
    written = tmp_path / "ledger.parquet"
    write_ledger(ledger, written)
    table = pq.read_table(written)
    if data.draw(st.booleans()):  # nulls where the writer put empty strings
        import pyarrow as pa
        import pyarrow.compute as pc

        table = pa.table(
            {
                n: (c if n == "slot" else pc.if_else(pc.equal(c, ""), pa.scalar(None, c.type), c))
                for n, c in zip(table.column_names, table.columns, strict=True)
            }
        )
    path = tmp_path / "groups.parquet"
    pq.write_table(
        table,
        path,
        row_group_size=data.draw(st.integers(1, 5)),
        use_dictionary=data.draw(st.booleans()),
    )
    back = read_ledger(path)
    assert list(back) == list(expected)
    assert dict(back.groups) == dict(expected.groups)
    assert back.users == expected.users


def test_parquet_ledger_is_written_dictionary_encoded(tmp_path: Path) -> None:
    """String columns are written as dictionaries (a 10^8-row group column decoded first needed
    one 9.8 GB allocation); such a file still combines with a text file in one ledger."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ledger = Ledger()
    ledger.define_group("g", ["a", "b"])
    ledger.append(1, "1/3", group="g")
    ledger.append(2, "1/4", user="c", part="p")
    path = tmp_path / "l.parquet"
    write_ledger(ledger, path)
    schema = pq.read_schema(path)
    for name in ("user", "group", "epsilon", "part", "mechanism", "evidence"):
        assert pa.types.is_dictionary(schema.field(name).type), name
    text = tmp_path / "more.jsonl"
    later = Ledger()
    later.define_group("g", ["a", "b"])
    later.append(3, "1/5", group="g")
    write_ledger(later, text)
    for files in ([path, text], [text, path]):
        both = read_ledgers(files)
        assert sorted(c.slot for c in both) == [1, 2, 3]
        assert dict(both.groups) == dict(ledger.groups)


@pytest.mark.parametrize("error", [MemoryError("no room"), OSError(28, "No space left on device")])
def test_a_failed_ledger_write_leaves_no_file_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """A write that fails (out of memory, disk full) removes its temporary file, keeps the
    previous file under the final name untouched, and is an OSError naming the path."""
    import wevent.accounting.formats as formats

    path = tmp_path / "l.parquet"
    old = Ledger()
    old.append(1, "1/2", user="a")
    write_ledger(old, path)

    def fail(*_args: object) -> None:
        (tmp_path / "l.parquet.tmp").write_bytes(b"partial")
        raise error

    monkeypatch.setattr(formats, "_parquet_table", fail)
    new = Ledger()
    new.append(1, "1/3", user="b")
    with pytest.raises(OSError) as info:
        write_ledger(new, path)
    if isinstance(error, MemoryError):
        assert "not enough memory to write the ledger" in str(info.value)
        assert str(path) in str(info.value)
    assert not list(tmp_path.glob("*.tmp"))
    assert list(read_ledger(path)) == list(old)
