"""Input streams for central w-event mechanisms: per-slot value histograms of each requirement class.

A runner asks a `Stream` at each slot t = 1, 2, ... for one histogram per requirement class (row c
counts how many users of class c hold each value 0..d-1). Two sources:

* `SyntheticStream`: the binary streams of 001 Section 6.1 (TLNS, Sin, Log), where each user's value
  at slot t is 1 with probability p_t. Counts are drawn in aggregate: the sum of n independent
  Bernoulli(p_t) values is Binomial(n, p_t), the same distribution as drawing every user's value;
  it is drawn once for all users and then split among the classes (a uniform assignment of the
  values to the users), so the stream does not depend on how the users are partitioned.
* `CsvStream`: recorded observations ``user,slot,value``, read once with pyarrow into a dense
  (slots, classes, d) count array.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import operator
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import MAX_SLOT, BudgetError
from wevent.accounting.formats import FormatError
from wevent.accounting.inputs import check_input_file

__all__ = [
    "SYNTHETIC_KINDS",
    "CsvStream",
    "IntArray",
    "PerUserStream",
    "Stream",
    "SyntheticStream",
    "probability_sequence",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

SYNTHETIC_KINDS: Final = ("lns", "sin", "log")

# 001 Section 6.1: the synthetic binary streams.
LNS_P0: Final = 0.05  # TLNS: p_0
LNS_SQRT_Q: Final = 0.0025  # TLNS: standard deviation sqrt(Q) of the process noise N(0, Q)
SIN_A: Final = 0.05  # Sin: p_t = A sin(omega t) + h
SIN_OMEGA: Final = 0.01
SIN_H: Final = 0.075
LOG_A: Final = 0.25  # Log: p_t = A / (1 + e^(-b t))
LOG_B: Final = 0.01

CSV_COLUMNS: Final = ("user", "slot", "value")
# A CSV stream is held densely; beyond this many (slot, class, value) cells (2 GiB of int64) the
# input is almost certainly a mistake (a stray huge slot number), so it is refused, not allocated.
MAX_DENSE_CELLS: Final = 2**28
MAX_DOMAIN = 1_000_000  # values d of a stream: every slot holds d counts per class (memory)


def _check_domain(d: int, where: str) -> None:
    if d > MAX_DOMAIN:
        raise BudgetError(
            f"{where}: a domain of {d:,} values is more than the limit of {MAX_DOMAIN:,} (each "
            "slot holds a count per value and class)"
        )


# A slot or value (int64 checked apart), padded with spaces or tabs only (docs/formats.md): the
# two engines' ``\s`` differ (Python's takes a vertical tab, RE2's does not), so neither is used.
_INT64: Final = re.compile(r"[ \t]*-?[0-9]+[ \t]*")
_INT64_RE2: Final = r"^[ \t]*-?[0-9]+[ \t]*$"  # the same for pyarrow's regular expressions (RE2)


@runtime_checkable
class Stream(Protocol):
    """Per-slot value histograms of each requirement class."""

    @property
    def domain(self) -> int:
        """d: values are 0..d-1."""
        ...

    @property
    def slots(self) -> int:
        """The stream has slots 1..slots."""
        ...

    def histograms(self, slot: int, rng: np.random.Generator) -> IntArray:
        """Shape (classes, d), int64: row c counts the users of class c holding each value."""
        ...


def _slot_index(slot: int, slots: int) -> int:
    """``slot`` checked against 1..slots (a Python or numpy integer, not a bool)."""
    if isinstance(slot, bool):
        raise BudgetError(f"slot: slots are whole numbers, got {slot!r}")
    try:
        s = operator.index(slot)
    except TypeError:
        raise BudgetError(f"slot: slots are whole numbers, got {slot!r}") from None
    if not 1 <= s <= slots:
        raise BudgetError(f"slot {s} is outside the stream's slots 1..{slots}")
    return s


def _check_kind(kind: str) -> None:
    if kind not in SYNTHETIC_KINDS:
        raise BudgetError(
            f"unknown synthetic stream {kind!r} (expected one of {', '.join(SYNTHETIC_KINDS)})"
        )


def _check_slots(slots: int) -> int:
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise BudgetError(f"a stream needs at least one slot, got {slots!r}")
    return slots


def probability_sequence(
    kind: str,
    slots: int,
    rng: np.random.Generator,
    *,
    sin_omega: float = SIN_OMEGA,
    lns_sqrt_q: float = LNS_SQRT_Q,
) -> FloatArray:
    """p_1..p_T of 001 Section 6.1: the probability that a user's binary value is 1 at slot t.

    ``lns`` (the paper's TLNS) is the random walk p_t = p_{t-1} + N(0, Q), sqrt(Q) = 0.0025
    (``lns_sqrt_q`` replaces it), p_0 = 0.05, clipped to [0, 1] (the clipped value is where the
    next step starts); its noise comes from ``rng`` (the paper used Java's Random(1), so its exact
    sequence is not reproduced). ``sin`` is 0.05 sin(0.01 t) + 0.075 (``sin_omega`` replaces the
    0.01) and ``log`` is 0.25 / (1 + e^(-0.01 t)); they ignore ``rng``.
    """
    _check_kind(kind)
    _check_slots(slots)
    t = np.arange(1, slots + 1, dtype=np.float64)
    if kind == "sin":
        return np.asarray(SIN_A * np.sin(sin_omega * t) + SIN_H, dtype=np.float64)
    if kind == "log":
        return np.asarray(LOG_A / (1.0 + np.exp(-LOG_B * t)), dtype=np.float64)
    steps = rng.normal(0.0, lns_sqrt_q, size=slots).tolist()
    walk = itertools.accumulate(steps, lambda p, step: min(1.0, max(0.0, p + step)), initial=LNS_P0)
    return np.fromiter(itertools.islice(walk, 1, None), dtype=np.float64, count=slots)


def _stream_option(kind: str, only: str, name: str, value: object, what: str) -> float:
    """A positive finite option of the ``only`` stream (an error for any other kind)."""
    if kind != only:
        raise BudgetError(f"{name} applies to the {only} stream only, not {kind!r}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BudgetError(f"{name} must be a positive {what}, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"{name} must be a positive {what}, got {value!r}")
    return float(value)


class SyntheticStream:
    """A binary (d = 2) stream of 001 Section 6.1: at slot t each user holds 1 with probability p_t.

    The p sequence is fixed at construction (for ``lns`` from ``np.random.default_rng(seed)``).
    `histograms` draws the values of all n users at once from the caller's ``rng`` (the count of
    ones is Binomial(n, p_t)), then splits them among the classes by sampling without
    replacement (multivariate hypergeometric, from a generator seeded by one draw of ``rng``).
    Each class's row then has the distribution of its users' independent values, and the total
    histogram, and the caller's generator afterwards, depend only on n and ``rng``: two
    partitions of the same users see the same stream.

    With ``d > 2`` values (a categorical stream for the frequency oracles) a user holds 0 with
    probability 1 - p_t and each of 1..d-1 with p_t / (d - 1); d = 2 is the binary stream.

    ``sin_period`` (``sin`` only) replaces the Sin stream's period of 2 pi / 0.01 = 628.3 slots,
    for streams that change faster or slower than 001's (002 Section 7.3 varies b = 2 pi /
    period); ``lns_sqrt_q`` (``lns`` only) replaces the TLNS walk's step deviation sqrt(Q) =
    0.0025 (002 Section 7.3 varies Q). The walk's steps are the same standard normal draws
    scaled by sqrt(Q), so one seed gives the same shape of walk at every sqrt(Q), up to the clip.
    """

    __slots__ = ("_d", "_kind", "_n", "_p", "_pvals", "_size_list", "_sizes")

    def __init__(
        self,
        kind: str,
        slots: int,
        class_sizes: Sequence[int],
        seed: int,
        d: int = 2,
        *,
        sin_period: float | None = None,
        lns_sqrt_q: float | None = None,
    ) -> None:
        _check_kind(kind)
        _check_slots(slots)
        omega = SIN_OMEGA
        sqrt_q = LNS_SQRT_Q
        if lns_sqrt_q is not None:
            sqrt_q = _stream_option(kind, "lns", "lns_sqrt_q", lns_sqrt_q, "standard deviation")
        if sin_period is not None:
            omega = (
                2
                * math.pi
                / _stream_option(kind, "sin", "sin_period", sin_period, "number of slots")
            )
        if isinstance(d, bool) or not isinstance(d, int) or d < 2:
            raise BudgetError(f"a synthetic stream needs d >= 2 values, got {d!r}")
        _check_domain(d, "--domain")
        self._d = d
        sizes: list[int] = []
        for n in class_sizes:
            if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
                raise BudgetError(f"class sizes are non-negative integers, got {n!r}")
            sizes.append(int(n))
        self._kind = kind
        self._sizes: IntArray = np.array(sizes, dtype=np.int64)
        self._size_list = tuple(sizes)
        self._n = sum(sizes)
        # the multinomial's probabilities over the values 1..d-1 (read-only, drawn from by
        # every slot)
        self._pvals = np.full(d - 1, 1.0 / (d - 1))
        self._pvals.setflags(write=False)
        self._p = probability_sequence(
            kind, slots, np.random.default_rng(seed), sin_omega=omega, lns_sqrt_q=sqrt_q
        )
        self._p.setflags(write=False)

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def domain(self) -> int:
        return self._d

    @property
    def slots(self) -> int:
        return len(self._p)

    @property
    def classes(self) -> int:
        return len(self._sizes)

    @property
    def probabilities(self) -> FloatArray:
        """p_1..p_T (read-only; index t - 1 holds p_t)."""
        return self._p

    def total(self, slot: int, rng: np.random.Generator) -> IntArray:
        """The value histogram of all n users at ``slot``: [n - k, ...] with k ~ Binomial(n,
        p_slot) ones (d = 2), or k spread uniformly over the values 1..d-1."""
        p = float(self._p[_slot_index(slot, self.slots) - 1])
        n = self._n
        ones = int(rng.binomial(n, p))
        if self._d == 2:
            return np.array([n - ones, ones], np.int64)
        out = np.empty(self._d, np.int64)
        out[0] = n - ones
        out[1:] = rng.multinomial(ones, self._pvals)
        return out

    def histograms(self, slot: int, rng: np.random.Generator) -> IntArray:
        """Row c: the value counts of class c's users (see the class docstring)."""
        total = self.total(slot, rng)
        # The split's seed is drawn at every slot, so the caller's generator advances the same
        # whatever the partition; the generator itself is built only when a class is drawn (a
        # single class, or one holding every user, takes the whole histogram).
        split_seed = int(rng.integers(2**63))
        split: np.random.Generator | None = None
        out = np.zeros((len(self._size_list), self._d), np.int64)
        remaining = total  # a fresh array of this call
        left = self._n
        for c, size in enumerate(self._size_list):
            if size == left:  # the last users hold whatever is left
                out[c] = remaining
                break
            if size:
                if split is None:
                    split = np.random.default_rng(split_seed)
                out[c] = split.multivariate_hypergeometric(remaining, size)
                remaining -= out[c]
                left -= size
        return out


@runtime_checkable
class PerUserStream(Protocol):
    """A stream that also knows each user's own value (recorded data, unlike the synthetic
    streams): population allocators then perturb exactly the drawn users' values."""

    def user_codes(self, users: Sequence[str]) -> IntArray:
        """The stream's code of each user (-1 for a user the stream never saw)."""
        ...

    def user_values(self, slot: int, codes: IntArray) -> IntArray:
        """The value of each coded user at ``slot`` (-1 where the user has no row there)."""
        ...


class CsvStream:
    """Recorded observations: a CSV ``user,slot,value`` (one row per user and slot), counted per
    requirement class into a dense (slots, classes, d) array. Deterministic: ``rng`` is unused.
    A user without a row at a slot contributes nothing there. When loaded from a file it also
    keeps every user's own values (sorted per slot: O(log rows) per lookup)."""

    __slots__ = ("_codes", "_counts", "_offsets", "_user_index", "_values")

    def __init__(self, counts: npt.ArrayLike) -> None:
        arr = np.array(counts, dtype=np.int64)  # a private copy
        if arr.ndim != 3 or arr.shape[0] < 1 or arr.shape[2] < 1 or (arr < 0).any():
            raise BudgetError(
                "a CSV stream holds non-negative counts of shape (slots >= 1, classes, d >= 1)"
            )
        arr.setflags(write=False)
        self._counts: IntArray = arr
        self._user_index: dict[str, int] = {}
        self._offsets: IntArray = np.zeros(arr.shape[0] + 1, np.int64)
        self._codes: IntArray = np.zeros(0, np.int64)
        self._values: IntArray = np.zeros(0, np.int64)

    def _keep_users(
        self, users: list[str], user_codes: IntArray, slot: IntArray, value: IntArray
    ) -> None:
        order = np.lexsort((user_codes, slot))
        self._user_index = {u: i for i, u in enumerate(users)}
        self._codes = user_codes[order].astype(np.int64)
        self._values = value[order].astype(np.int64)
        self._offsets = np.searchsorted(slot[order], np.arange(1, self.slots + 2)).astype(np.int64)

    def user_codes(self, users: Sequence[str]) -> IntArray:
        index = self._user_index
        return np.array([index.get(u, -1) for u in users], dtype=np.int64)

    def user_values(self, slot: int, codes: IntArray) -> IntArray:
        t = _slot_index(slot, self.slots)
        lo, hi = int(self._offsets[t - 1]), int(self._offsets[t])
        out: IntArray = np.full(len(codes), -1, dtype=np.int64)
        if hi > lo:
            present, values = self._codes[lo:hi], self._values[lo:hi]
            pos = np.minimum(np.searchsorted(present, codes), hi - lo - 1)
            hit = (codes >= 0) & (present[pos] == codes)
            out[hit] = values[pos[hit]]
        return out

    @property
    def domain(self) -> int:
        return int(self._counts.shape[2])

    @property
    def slots(self) -> int:
        return int(self._counts.shape[0])

    @property
    def classes(self) -> int:
        return int(self._counts.shape[1])

    @property
    def counts(self) -> IntArray:
        """The whole (slots, classes, d) array, read-only (index t - 1 holds slot t)."""
        return self._counts

    def histograms(self, slot: int, rng: np.random.Generator) -> IntArray:
        row: IntArray = self._counts[_slot_index(slot, self.slots) - 1].copy()
        return row

    @classmethod
    def load(
        cls,
        path: str | Path,
        class_of_user: Mapping[str, int],
        n_classes: int,
        *,
        domain: int | None = None,
    ) -> CsvStream:
        """Read ``path``; ``class_of_user`` gives each user's class index in 0..n_classes-1, and
        ``domain`` (default: the largest value + 1) the number of values d.

        Every problem raises `FormatError` (a `BudgetError`) with one line naming the file, and
        the line when known."""
        path = Path(path)
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 0:
            raise BudgetError(
                f"the number of classes must be a non-negative integer, got {n_classes!r}"
            )
        if domain is not None and (
            isinstance(domain, bool) or not isinstance(domain, int) or domain < 1
        ):
            raise BudgetError(f"the domain must be a positive integer, got {domain!r}")
        _check_header(path)
        user_codes, users, slot, value = _read_columns(path)
        n = len(slot)
        if n == 0:
            raise FormatError(f"{path}: empty file (no observations after the header)")
        row_class = _class_indices(users, class_of_user, n_classes)[user_codes]
        _check_rows(path, user_codes, users, row_class, slot, value, domain)
        d = int(value.max()) + 1 if domain is None else domain
        _check_domain(d, str(path) if domain is None else "--domain")
        slots = int(slot.max())
        cells = slots * n_classes * d
        if cells > MAX_DENSE_CELLS:
            raise FormatError(
                f"{path}: {slots} slots x {n_classes} classes x {d} values is too large to hold "
                f"densely ({cells} cells; limit {MAX_DENSE_CELLS})"
            )
        index = ((slot - 1) * n_classes + row_class) * d + value
        counts = np.bincount(index, minlength=cells).astype(np.int64, copy=False)
        stream = cls(counts.reshape(slots, n_classes, d))
        stream._keep_users(users, user_codes, slot, value)
        return stream


def _class_indices(users: list[str], class_of_user: Mapping[str, int], n_classes: int) -> IntArray:
    """The class of each distinct user, -1 for users without a requirement."""
    out = np.full(len(users), -1, dtype=np.int64)
    for i, user in enumerate(users):
        c = class_of_user.get(user)
        if c is None:
            continue
        if isinstance(c, bool) or not isinstance(c, int | np.integer) or not 0 <= c < n_classes:
            raise BudgetError(
                f"class_of_user maps user {user!r} to {c!r}, not a class index in "
                f"0..{n_classes - 1}"
            )
        out[i] = c
    return out


def _check_header(path: Path) -> None:
    check_input_file(path, FormatError)  # a FIFO or a device would block or never end
    try:
        with path.open("rb") as fh:
            first = fh.readline(1 << 16)
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({_one_line(exc)})") from None
    if not first:
        raise FormatError(f"{path}: empty file (expected the header user,slot,value)")
    try:
        text = first.decode("utf-8-sig").rstrip("\r\n")
        header = next(csv.reader([text]), [])
    except UnicodeDecodeError:
        raise FormatError(f"{path}:1: not UTF-8 text") from None
    except csv.Error as exc:
        raise FormatError(f"{path}:1: cannot parse the header ({_one_line(exc)})") from None
    if [h.strip() for h in header] != list(CSV_COLUMNS):
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise FormatError(f"{path}:1: expected the header user,slot,value, found {shown!r}")


def _read_columns(path: Path) -> tuple[IntArray, list[str], IntArray, IntArray]:
    """Per row: the user's index into the list of distinct users, that list, slot and value."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    try:
        table = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(skip_rows=1, column_names=list(CSV_COLUMNS)),
            convert_options=pcsv.ConvertOptions(
                # read as text: pyarrow's int64 conversion also takes hexadecimal ("0x10" as
                # 16), where a slot or value is written in decimal digits (docs/formats.md)
                column_types=dict.fromkeys(CSV_COLUMNS, pa.string()),
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        numbers = []
        for name in ("slot", "value"):
            column = table.column(name)
            if pc.all(pc.match_substring_regex(column, _INT64_RE2)).as_py() is False:
                raise FormatError(_parse_problem(path) or f"{path}: {name}: not an integer")
            numbers.append(pc.cast(pc.utf8_trim_whitespace(column), pa.int64()))
        users = pc.unique(table.column("user"))
        codes = pc.index_in(table.column("user"), value_set=users)
        return (
            np.asarray(codes.to_numpy(), dtype=np.int64),
            [str(u) for u in users.to_pylist()],
            np.asarray(numbers[0].to_numpy(), dtype=np.int64),
            np.asarray(numbers[1].to_numpy(), dtype=np.int64),
        )
    except (pa.ArrowException, OSError) as exc:
        raise FormatError(
            _parse_problem(path) or f"{path}: cannot read ({_one_line(exc)})"
        ) from None


def _check_rows(
    path: Path,
    user_codes: IntArray,
    users: list[str],
    row_class: IntArray,
    slot: IntArray,
    value: IntArray,
    domain: int | None,
) -> None:
    """Raise for the earliest row with a problem (rows are 0-based, after the header)."""
    found: list[tuple[int, str]] = []  # (row, message); the earliest row is reported

    def first(mask: npt.NDArray[np.bool_]) -> int | None:
        hits = np.flatnonzero(mask)
        return int(hits[0]) if len(hits) else None

    empty = [i for i, u in enumerate(users) if not u]
    if (r := first(np.isin(user_codes, empty))) is not None:
        found.append((r, "empty user id"))
    if (r := first((slot < 1) | (slot > MAX_SLOT))) is not None:
        found.append((r, f"slot: slots are numbered from 1 to 2^62 - 1, got {slot[r]}"))
    if (r := first(value < 0)) is not None:
        found.append((r, f"value: values are non-negative integers, got {value[r]}"))
    if domain is not None and (r := first(value >= domain)) is not None:
        found.append((r, f"value: {value[r]} is outside the domain 0..{domain - 1}"))
    if (r := first(row_class < 0)) is not None:
        found.append((r, f"user {users[user_codes[r]]!r} has no declared requirement"))
    order = np.lexsort((slot, user_codes))
    repeat = (user_codes[order[1:]] == user_codes[order[:-1]]) & (
        slot[order[1:]] == slot[order[:-1]]
    )
    duplicate: tuple[int, int] | None = None
    if repeat.any():
        r = int(order[1:][repeat].min())
        earlier = int(np.flatnonzero((user_codes == user_codes[r]) & (slot == slot[r]))[0])
        duplicate = (r, earlier)
        found.append((r, f"user {users[user_codes[r]]!r} has a second row for slot {slot[r]}"))
    if not found:
        return
    row, message = min(found, key=lambda f: f[0])
    lines = _lines_of_rows(path, {row, duplicate[1]} if duplicate else {row})
    if duplicate and duplicate[0] == row:
        first_line = lines[duplicate[1]]
        at = f"line {first_line}" if first_line else f"row {duplicate[1] + 1}"
        message += f" (the first is at {at})"
    where = f"{path}:{lines[row]}" if lines[row] else f"{path}: row {row + 1}"
    raise FormatError(f"{where}: {message}")


def _records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line, fields) of every non-blank record after the header, as pyarrow counts rows."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FormatError(f"{path}:{line}: not UTF-8 text") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        next(reader, None)
        for fields in reader:
            if fields:
                yield reader.line_num, fields
    except csv.Error as exc:
        raise FormatError(f"{path}:{reader.line_num}: {_one_line(exc)}") from None


def _lines_of_rows(path: Path, rows: set[int]) -> dict[int, int | None]:
    """The file line of each (0-based) data row (None should the scan disagree with pyarrow)."""
    wanted = max(rows)
    lines: dict[int, int | None] = dict.fromkeys(rows)
    for row, (line, _) in enumerate(_records(path)):
        if row in rows:
            lines[row] = line
        if row >= wanted:
            break
    return lines


def _parse_problem(path: Path) -> str | None:
    """After pyarrow refused the file: the first malformed line, found by a plain Python scan."""
    try:
        for line, fields in _records(path):
            where = f"{path}:{line}"
            if len(fields) != len(CSV_COLUMNS):
                return f"{where}: expected 3 fields (user,slot,value), found {len(fields)}"
            for name, text in zip(CSV_COLUMNS[1:], fields[1:], strict=True):
                if not _INT64.fullmatch(text) or not -(2**63) <= int(text) < 2**63:
                    return f"{where}: {name}: expected an integer, got {text!r}"
    except FormatError as exc:
        return str(exc)
    except (OSError, csv.Error):
        return None
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
