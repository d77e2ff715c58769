"""Audit engines with one semantics: numpy (in memory, `wevent.verifier.check`), DuckDB (embedded,
out of core) and Spark (local mode here, a cluster in production), the last two running the
shared SQL of `wevent.verifier.sql`.

Every engine takes the same input, an ordered list of Parquet/JSONL/CSV ledger files read as one
ledger, and returns the same `Verdict` plus the data a report plots (`SqlDetails`).
"""

from __future__ import annotations

import atexit
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from wevent.accounting.formats import read_ledgers
from wevent.accounting.ledger import Ledger
from wevent.accounting.names import close_names, did_you_mean
from wevent.accounting.population import Population
from wevent.errors import InputError
from wevent.verifier.check import check
from wevent.verifier.sql import SqlDetails, sql_audit, tightest_users
from wevent.verifier.verdict import Verdict

__all__ = [
    "AUDIT_ENGINES",
    "ENGINES",
    "DuckDBBackend",
    "Engine",
    "NumpyEngine",
    "SparkBackend",
    "SqlEngine",
    "make_engine",
    "spark_session",
]


class Engine(Protocol):
    """An audit engine: ledger files (read in order as one ledger) -> verdict and report data."""

    name: str

    def audit(
        self,
        files: Sequence[Path],
        population: Population,
        *,
        horizon: int | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> tuple[Verdict, SqlDetails]: ...


def _q(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


# ============================================================================ numpy


class NumpyEngine:
    """The in-memory reference: `wevent.accounting.formats.read_ledgers` and `wevent.verifier.check`."""

    name = "numpy"

    def audit(
        self,
        files: Sequence[Path],
        population: Population,
        *,
        horizon: int | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> tuple[Verdict, SqlDetails]:
        say = progress or (lambda _s: None)
        say("reading")
        file_charges: list[int] = []
        ledger = read_ledgers(files, file_charges=file_charges)
        verdict = check(ledger, population, horizon=horizon, progress=progress)
        say("report data")
        return verdict, numpy_details(ledger, population, verdict, tuple(file_charges))


_CHUNK = 1 << 23  # rows per step of the report-data pass


def numpy_details(
    ledger: Ledger, population: Population, verdict: Verdict, file_charges: tuple[int, ...]
) -> SqlDetails:
    """Per-class totals of per-user charges per slot, and the spends of the tightest users
    (vectorized; exact integer numerators over the amounts' common denominator)."""
    cols = ledger.columns()
    n_classes = len(population.classes)
    names = [c.name for c in population.classes] + ["unregistered"]
    user_class = np.array(population.class_indices(cols.users) or [0], np.int64)[: len(cols.users)]
    user_class[user_class < 0] = n_classes
    lcd = math.lcm(*[a.denominator for a in cols.amounts]) if cols.amounts else 1
    numerators = [int(a * lcd) for a in cols.amounts]
    sizes = [len(m) for m in cols.group_members]
    safe = max([*numerators, 1]) * max([*sizes, 1]) * (len(cols.slot) + 1) < 2**62
    table_num = np.array(numerators or [0], dtype=np.int64 if safe else object)
    n = len(cols.slot)
    lo = int(cols.slot.min()) if n else 1
    span = int(cols.slot.max()) - lo + 1 if n else 1
    if span <= 4 * n + 2**22:  # slot numbers are dense enough: a column per slot number
        slots: Any = np.arange(lo, lo + span, dtype=np.int64)

        def rank(chunk: Any) -> Any:
            return chunk - lo
    else:  # far-apart slot numbers: a column per distinct slot
        slots = np.unique(cols.slot)

        def rank(chunk: Any) -> Any:
            return np.searchsorted(slots, chunk)

    width = len(slots)
    totals = np.zeros((n_classes + 1) * width, dtype=table_num.dtype)
    per_group = (
        np.stack([np.bincount(user_class[m], minlength=n_classes + 1) for m in cols.group_members])
        if cols.group_members
        else np.zeros((0, n_classes + 1), np.int64)
    )
    for a in range(0, n, _CHUNK):  # bounded temporaries on large ledgers
        subject, slot = cols.subject[a : a + _CHUNK], cols.slot[a : a + _CHUNK]
        num = table_num[cols.amount[a : a + _CHUNK]]
        direct = subject >= 0
        if bool(direct.all()):
            np.add.at(totals, user_class[subject] * width + rank(slot), num)
            continue
        np.add.at(totals, user_class[subject[direct]] * width + rank(slot[direct]), num[direct])
        g = -subject[~direct] - 1
        g_rank, g_num = rank(slot[~direct]), num[~direct]
        for c in range(n_classes + 1):
            weight = per_group[g, c]
            if weight.any():
                np.add.at(totals, c * width + g_rank, g_num * weight)
    timeline: dict[str, tuple[tuple[int, Fraction], ...]] = {}
    table = totals.reshape(n_classes + 1, width)
    for c in range(n_classes + 1):
        nz = np.flatnonzero(table[c])
        if len(nz):
            timeline[names[c]] = tuple(
                (int(slots[k]), Fraction(int(table[c, k]), lcd)) for k in nz.tolist()
            )
    spends: dict[str, tuple[tuple[int, Fraction], ...]] = {}
    position = {u: i for i, u in enumerate(cols.users)}
    for u in tightest_users(verdict, 5, population):
        code = position[u]
        mine = [-k - 1 for k, m in enumerate(cols.group_members) if bool((m == code).any())]
        rows = np.flatnonzero((cols.subject == code) | np.isin(cols.subject, mine))
        per_slot = np.zeros(width, dtype=table_num.dtype)
        np.add.at(per_slot, rank(cols.slot[rows]), table_num[cols.amount[rows]])
        spends[u] = tuple(
            (int(slots[k]), Fraction(int(per_slot[k]), lcd))
            for k in np.flatnonzero(per_slot).tolist()
        )
    return SqlDetails(timeline, spends, file_charges)


# ============================================================================ SQL engines


class SqlEngine:
    """An engine that runs `wevent.verifier.sql` on a backend; text ledgers are converted to Parquet
    in a temporary directory first."""

    def __init__(self, name: str, backend_factory: Callable[[Path], Any]) -> None:
        self.name = name
        self._factory = backend_factory

    def audit(
        self,
        files: Sequence[Path],
        population: Population,
        *,
        horizon: int | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> tuple[Verdict, SqlDetails]:
        from wevent.accounting.formats import EarlierGroups, ledger_kind, read_ledger, write_ledger
        from wevent.accounting.parquet_rows import check_parquet_rows

        with tempfile.TemporaryDirectory(prefix="wevent-audit-") as tmp:
            parquet: list[Path] = []
            earlier = EarlierGroups()  # a text file may charge groups of the files before it
            defined: set[str] = set()  # ... and so may a Parquet file
            for i, f in enumerate(files):
                if ledger_kind(Path(f)) == "parquet":
                    # the schema and row rules every engine checks, with the same messages
                    defined |= check_parquet_rows(Path(f), defined)
                    parquet.append(Path(f))
                    earlier.add_parquet(Path(f))
                else:
                    converted = Path(tmp) / f"input-{i}.parquet"
                    ledger = read_ledger(f, groups=earlier)
                    write_ledger(ledger, converted)
                    earlier.add_groups(ledger.groups)
                    defined |= set(ledger.groups)
                    parquet.append(converted)
            backend = self._factory(Path(tmp))
            try:
                return sql_audit(
                    backend,
                    parquet,
                    population,
                    horizon=horizon,
                    progress=progress,
                    shown_as=[Path(f) for f in files],  # not the converted copies' names
                )
            finally:
                backend.close()


def _arrow_columns(columns: dict[str, list[Any]], exact: Sequence[str], text: Sequence[str]) -> Any:
    """An Arrow table of ``columns`` with declared types: strings for ``text`` and ``exact``
    columns (exact ones are cast to DECIMAL(38,0) in SQL), 64-bit integers for the others."""
    import pyarrow as pa

    return pa.table(
        {
            k: pa.array(v, type=pa.string() if k in text or k in exact else pa.int64())
            for k, v in columns.items()
        }
    )


_FILE_COLUMN = "wevent_source_file"  # the column read_parquet names each row's file in


_GLOB = re.compile(r"[*?\[\]{}]")  # characters DuckDB's read_parquet reads as a pattern


def _load_select(source: str, have: frozenset[str], src: str) -> str:
    """The ledger columns of ``source`` (its rows aliased ``r``), with ``src`` as the file's
    position; a column a file lacks is NULL."""

    def col(name: str) -> str:
        if name not in have:
            return "CAST(NULL AS VARCHAR)"
        return f"NULLIF(CAST(r.\"{name}\" AS VARCHAR), '')"

    return (
        f"SELECT {src} AS src, CAST(r.slot AS BIGINT) AS slot, {col('user')} AS usr, "
        f"{col('group')} AS grp, {col('epsilon')} AS eps FROM {source}"
    )


class DuckDBBackend:
    """DuckDB, embedded: memory capped by ``memory_limit``, spilling to ``temp_dir``."""

    name = "duckdb"
    sliding_frames = True

    def __init__(self, temp_dir: Path, memory_limit: str = "4GB", threads: int = 2) -> None:
        import duckdb

        self.con = duckdb.connect(
            config={
                "memory_limit": memory_limit,
                "temp_directory": str(temp_dir),
                "threads": threads,
                "preserve_insertion_order": False,
            }
        )

    def close(self) -> None:
        self.con.close()

    def load(self, view: str, files: Sequence[Path]) -> None:
        """One ``read_parquet`` over every file of the same columns and types (a segment ledger's
        files all share them), each row tagged with its file's position: a UNION ALL of one scan per
        file made planning superlinear (2,293 segments: 287 s, now 5 s). A file named twice is
        read twice, as the ledger readers do (one scan per occurrence). A path DuckDB would
        read as a glob pattern (``*``, ``?``, ``[``, ``{``) is read through Arrow instead, so
        it never matches another file or none."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        # Files share a scan when their columns have the same names and types: DuckDB reads a
        # list of files with the first one's types (an int32 slot beside an int64 one, or a
        # column of nulls beside strings, failed to cast).
        scans: dict[tuple[frozenset[tuple[str, str]], int], list[int]] = {}
        seen: dict[str, int] = {}
        parts = []
        for i, f in enumerate(files):
            schema = pq.read_schema(f)
            have = frozenset(schema.names)
            shape = frozenset((field.name, str(field.type)) for field in schema)
            if _GLOB.search(str(f)):
                self.con.register(f"{view}_arrow{i}", pq.read_table(f))
                parts.append(_load_select(f"{view}_arrow{i} r", have, str(i)))
                continue
            occurrence = seen[str(f)] = seen.get(str(f), -1) + 1
            scans.setdefault((shape, occurrence), []).append(i)
        for k, ((shape, _), members) in enumerate(scans.items()):
            have = frozenset(name for name, _ in shape)
            tag = _FILE_COLUMN
            while tag in have:  # a ledger column of that name: take another
                tag += "_"
            positions = pa.table(
                {
                    "fname": pa.array([str(files[i]) for i in members], pa.string()),
                    "src": pa.array(members, pa.int64()),
                }
            )
            self.con.register(f"{view}_src", positions)
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE {view}_files{k} AS SELECT * FROM {view}_src"
            )
            self.con.unregister(f"{view}_src")
            listed = ", ".join(_q(str(files[i])) for i in members)
            source = (
                f"read_parquet([{listed}], filename = '{tag}') r "
                f"JOIN {view}_files{k} m ON r.{tag} = m.fname"
            )
            parts.append(_load_select(source, have, "m.src"))
        self.con.execute(f"CREATE OR REPLACE VIEW {view} AS " + " UNION ALL ".join(parts))

    def table(
        self, name: str, columns: dict[str, list[Any]], exact: Sequence[str], text: Sequence[str]
    ) -> None:
        data = _arrow_columns(columns, exact, text)
        self.con.register(f"{name}_src", data)
        cast = ", ".join(f"CAST({k} AS DECIMAL(38,0)) AS {k}" if k in exact else k for k in columns)
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {cast} FROM {name}_src")
        self.con.unregister(f"{name}_src")

    def materialize(self, name: str, select: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {select}")

    def view(self, name: str, select: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {select}")

    def rows(self, select: str) -> list[tuple[Any, ...]]:
        return self.con.execute(select).fetchall()

    def hash64(self, expr: str) -> str:
        return f"hash({expr})"

    def sorted_concat(self, expr: str) -> str:
        return f"STRING_AGG({expr}, ',' ORDER BY {expr})"


_SPARK: Any = None


def spark_session() -> Any:
    """One local Spark session per process (2 cores, ANSI SQL: decimal overflow is an error,
    never a null).

    Memory plan: a 3 GB driver heap, and 2 MiB memory pages. Spark's default page is sized from
    the heap (execution memory / cores / 16, rounded up to a power of two: 64 MiB here), and the
    hash table of every broadcast join takes at least one page on the driver, where the built
    relation stays until a garbage collection lets the context cleaner drop the broadcast. An
    audit broadcasts a few dozen small tables, so a 9-row ledger held 1.0-1.7 GB of the heap
    after one audit and the next audit in the same process could run out of it (with 2 MiB
    pages: 130-160 MB). Larger records than a page still get a page of their own."""
    global _SPARK
    if _SPARK is None:
        from pyspark.sql import SparkSession

        scratch = Path(tempfile.gettempdir()) / f"wevent-spark-{os.getpid()}"
        scratch.mkdir(parents=True, exist_ok=True)
        builder = (
            SparkSession.builder.master("local[2]")
            .appName("wevent-audit")
            .config("spark.driver.memory", "3g")
            .config("spark.buffer.pageSize", "2m")
            .config("spark.sql.ui.retainedExecutions", "50")
            .config("spark.sql.ansi.enabled", "true")
            .config("spark.sql.shuffle.partitions", "16")
            .config("spark.default.parallelism", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.local.dir", str(scratch))
            .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
            .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + str(scratch))
        )
        # The JVM writes its start-up chatter (log4j profile, hostname, native-library and
        # incubator-module warnings: nine lines) to the standard error it inherits: it inherits
        # a log file in the scratch directory instead, so an audit's output is the audit's. A
        # failure still reaches Python as an exception.
        log = os.open(scratch / "jvm.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(log, 2)
        try:
            _SPARK = builder.getOrCreate()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(log)
        _SPARK.sparkContext.setLogLevel("ERROR")
        atexit.register(_stop_spark, scratch)
    return _SPARK


def _stop_spark(scratch: Path) -> None:
    """Stop the session and remove its scratch directory when the process exits."""
    if _SPARK is not None:
        _SPARK.stop()
    shutil.rmtree(scratch, ignore_errors=True)


class SparkBackend:
    """Spark SQL over the same Parquet files (local mode in tests and benchmarks).

    A materialized table is a local checkpoint, computed when it is created: its plan is cut
    there, so each later query plans and runs only its own step. Lazily cached tables (the
    former method) left every query holding the whole chain of earlier steps; the screen query
    alone then ran 48 jobs and 155 stages (1,202 tasks), 30-44 s for a 9-row ledger, and a
    whole audit of it took 60-90 s (about 10 s with checkpoints). `close` drops the
    checkpointed data and the views, so an audit leaves nothing behind in the session."""

    name = "spark"
    sliding_frames = False

    def __init__(self, _temp_dir: Path) -> None:
        self.spark = spark_session()
        self._stored: list[Any] = []  # the JVM RDDs holding materialized tables
        self._views: set[str] = set()

    def close(self) -> None:
        for name in self._views:
            self.spark.catalog.dropTempView(name)
        self._views.clear()
        for rdd in self._stored:
            rdd.unpersist(True)
        self._stored.clear()

    def load(self, view: str, files: Sequence[Path]) -> None:
        import pyarrow.parquet as pq

        frames = []
        for i, f in enumerate(files):
            have = set(pq.read_schema(f).names)

            def col(name: str, have: set[str] = have) -> str:
                if name not in have:
                    return "CAST(NULL AS STRING)"
                return f"NULLIF(CAST(`{name}` AS STRING), '')"

            frames.append(
                self.spark.read.parquet(str(f)).selectExpr(
                    f"{i} AS src",
                    "CAST(slot AS BIGINT) AS slot",
                    f"{col('user')} AS usr",
                    f"{col('group')} AS grp",
                    f"{col('epsilon')} AS eps",
                )
            )
        df = frames[0]
        for other in frames[1:]:
            df = df.unionAll(other)
        self._name(df, view)

    def table(
        self, name: str, columns: dict[str, list[Any]], exact: Sequence[str], text: Sequence[str]
    ) -> None:
        data = _arrow_columns(columns, exact, text)
        df = self.spark.createDataFrame(data)
        cast = [f"CAST({k} AS DECIMAL(38,0)) AS {k}" if k in exact else k for k in columns]
        self._keep(df.selectExpr(*cast), name)

    def _name(self, df: Any, name: str) -> None:
        df.createOrReplaceTempView(name)
        self._views.add(name)

    def _keep(self, df: Any, name: str) -> None:
        from pyspark import StorageLevel

        # Serialized in memory, spilling to disk (spark.local.dir) when memory is short.
        df = df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
        self._stored.append(df._jdf.queryExecution().logical().rdd())
        self._name(df, name)

    def materialize(self, name: str, select: str) -> None:
        self._keep(self.spark.sql(select), name)

    def view(self, name: str, select: str) -> None:
        self._name(self.spark.sql(select), name)

    def rows(self, select: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(select).collect()]

    def hash64(self, expr: str) -> str:
        return f"xxhash64({expr})"

    def sorted_concat(self, expr: str) -> str:
        return f"ARRAY_JOIN(ARRAY_SORT(COLLECT_LIST({expr})), ',')"


# The audit engines by name: ``factory(memory_limit)`` builds one (the limit is DuckDB's; the
# others ignore it). A new engine implements `Engine` and is one more entry here.
AUDIT_ENGINES: dict[str, Callable[[str], Engine]] = {
    "numpy": lambda _memory_limit: NumpyEngine(),
    "duckdb": lambda memory_limit: SqlEngine(
        "duckdb", lambda tmp: DuckDBBackend(tmp, memory_limit)
    ),
    "spark": lambda _memory_limit: SqlEngine("spark", SparkBackend),
}
ENGINES = tuple(AUDIT_ENGINES)


def make_engine(name: str, *, memory_limit: str = "4GB") -> Engine:
    """The engine called ``name`` (one of `ENGINES`); an unknown name is an `InputError` (a
    ValueError) naming the known ones and the close ones."""
    factory = AUDIT_ENGINES.get(name)
    if factory is None:
        raise InputError(
            f"unknown engine {name!r} (choose from {', '.join(AUDIT_ENGINES)})"
            + did_you_mean(close_names(name, AUDIT_ENGINES))
        )
    return factory(memory_limit)
