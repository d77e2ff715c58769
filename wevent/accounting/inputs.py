"""The rules every reader of user input shares, below the format modules (so the durable ledger
reader, the stream readers and the format readers all apply them): regular files only, text
fields of bounded length without NUL, JSON without duplicate keys or deep nesting, no field or
column a format does not define (`unknown_name`: its content would be dropped unread). Violations
are `BudgetError`s (input errors, exit 2) naming the file and, where there is one, the line.

The limits are configurable through environment variables (`check_limits`): each command reads
them when it starts, and an invalid value is a `LimitError` naming its variable (never a
ValueError, which readers take for a malformed file). A library caller's first use reads them
and they are kept; `reset_limits` forgets them, so the next use reads the environment again.
Every error a limit causes names its variable.
"""

from __future__ import annotations

import functools
import json
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from wevent.accounting.budget import BudgetError, env_limit, max_digits, shown
from wevent.accounting.names import close_names, did_you_mean

__all__ = [
    "DEPTH_VARIABLE",
    "EVIDENCE_VARIABLE",
    "FIELD_VARIABLE",
    "MAX_DEPTH",
    "MAX_EVIDENCE",
    "MAX_FIELD",
    "DuplicateKey",
    "FormatError",
    "check_input_file",
    "check_limits",
    "loads",
    "max_depth",
    "max_evidence",
    "max_field",
    "reset_limits",
    "text_problem",
    "unknown_name",
]

MAX_FIELD: Final = 4096  # default: characters of an id, group name, part or mechanism
MAX_EVIDENCE: Final = 65536  # default: characters of one evidence value
MAX_DEPTH: Final = 64  # default: nesting of JSON arrays and objects in one value
FIELD_VARIABLE: Final = "WEVENT_MAX_FIELD"
EVIDENCE_VARIABLE: Final = "WEVENT_MAX_EVIDENCE"
DEPTH_VARIABLE: Final = "WEVENT_MAX_DEPTH"


@functools.cache
def max_field() -> int:
    """The most characters of an id, group name, part or mechanism (`MAX_FIELD`, or
    ``WEVENT_MAX_FIELD``)."""
    return env_limit(FIELD_VARIABLE, MAX_FIELD, "characters")


@functools.cache
def max_evidence() -> int:
    """The most characters of one evidence value (`MAX_EVIDENCE`, or ``WEVENT_MAX_EVIDENCE``)."""
    return env_limit(EVIDENCE_VARIABLE, MAX_EVIDENCE, "characters")


@functools.cache
def max_depth() -> int:
    """The deepest nesting of arrays and objects in one JSON value (`MAX_DEPTH`, or
    ``WEVENT_MAX_DEPTH``; values nested deeper than Python's parser can follow are refused
    whatever the limit)."""
    return env_limit(DEPTH_VARIABLE, MAX_DEPTH, "levels")


def reset_limits() -> None:
    """Forget the limits read so far: the next use reads the environment again."""
    for cached in (max_field, max_evidence, max_depth, max_digits):
        cached.cache_clear()


def check_limits() -> None:
    """Read every limit from the environment now (a command calls this first), so that an
    invalid ``WEVENT_MAX_*`` value is one `LimitError` naming its variable before any file is
    read, never a reader's complaint about a file."""
    reset_limits()
    for limit in (max_field, max_evidence, max_depth, max_digits):
        limit()


def text_problem(value: str, *, evidence: bool = False) -> str | None:
    """What is wrong with a text field as read (longer than `max_field`, or `max_evidence` for
    an evidence value; a NUL character; or a lone surrogate, which JSON's ``\\ud800`` escape
    can write but no UTF-8 file, report or terminal can hold), or None."""
    limit = max_evidence() if evidence else max_field()
    if len(value) > limit:
        variable = EVIDENCE_VARIABLE if evidence else FIELD_VARIABLE
        return (
            f"of {len(value):,} characters is longer than the limit of {limit:,} "
            f"(set {variable} to change it)"
        )
    if "\x00" in value:
        return f"{shown(value)} holds a NUL character"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{shown(value)} is not valid Unicode text (a lone surrogate)"
    return None


def unknown_name(names: Iterable[str], known: Sequence[str], what: str) -> str | None:
    """The first of ``names`` that is not in ``known``, as a message naming it (``'x' is
    unknown (a charge has slot, ...); did you mean ...?``, ``what`` being "a charge has"); or
    None. A reader refuses such a field or column, never drops it: a misspelt ``epsilon`` or
    ``evidence``, or a charge written on a group line, would otherwise vanish unread."""
    for name in names:
        if name not in known:
            return (
                f"{shown(name)} is unknown ({what} {', '.join(known)})"
                f"{did_you_mean(close_names(name, known))}"
            )
    return None


def check_input_file(path: Path, error: type[BudgetError] = BudgetError) -> None:
    """Refuse what is not a regular file (after symbolic links) before it is opened: a FIFO or
    a device (``/dev/zero``) would block or never end, a directory is not a file. ``error``:
    the caller's kind of input error (a reader's `FormatError`)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device or socket"
        )
        raise error(f"{path}: {kind}, not a regular file (inputs are read from files)")


class FormatError(BudgetError):
    """A malformed input file; the message names the file and line."""


class DuplicateKey(ValueError):
    """A JSON object names one key twice (which value would count?)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(f"key {shown(key)} appears twice in one object")
            seen.add(key)
    return out


def _too_deep() -> ValueError:
    limit = max_depth()
    return ValueError(
        f"nested deeper than the limit of {limit:,} level{'' if limit == 1 else 's'} (set "
        f"{DEPTH_VARIABLE} to change it)"
    )


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels in ``value`` (iterative)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


_MAX_INTEGER = 1000  # digits of a JSON integer, as of any exact number (budget.parse_budget)


def _integer(literal: str) -> int:
    """A JSON integer literal; a longer one than any exact number may be is refused before it
    is converted (converting takes time quadratic in its length, with Python's digit limit
    lifted for exact sums)."""
    if len(literal.lstrip("-")) > _MAX_INTEGER:
        raise ValueError(
            f"an integer of {len(literal):,} digits is longer than the limit of {_MAX_INTEGER:,}"
        )
    return int(literal)


def loads(text: str | bytes) -> Any:
    """`json.loads` that refuses a key twice in one object (at any depth) and nesting deeper
    than `max_depth`, and turns a number too long to convert into a `ValueError` like any other
    malformed JSON (callers report it with their file and line)."""
    limit = max_depth()  # an invalid WEVENT_MAX_DEPTH is its own error, not a malformed file's
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_integer)
    except RecursionError:
        raise ValueError("nested deeper than the JSON parser can follow") from None
    opened = (
        text.count("{") + text.count("[")
        if isinstance(text, str)
        else (text.count(b"{") + text.count(b"["))
    )
    if opened > limit and _depth_exceeds(value, limit):  # fewer brackets cannot nest deeper
        raise _too_deep()
    return value
