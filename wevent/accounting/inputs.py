"""The rules every reader of user input shares, below the format modules (so the durable ledger
reader, the stream readers and the format readers all apply them): regular files only, JSON
without duplicate keys or unbounded nesting. Violations are `BudgetError`s (input errors, exit
2) naming the file and, where there is one, the line.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from wevent.accounting.budget import BudgetError, shown

__all__ = ["MAX_EVIDENCE", "MAX_FIELD", "DuplicateKey", "check_input_file", "loads", "text_problem"]

MAX_FIELD = 4096  # characters of an id, group name, part or mechanism
MAX_EVIDENCE = 65536  # characters of one evidence value


def text_problem(value: str, limit: int = MAX_FIELD) -> str | None:
    """What is wrong with a text field as read (more than ``limit`` characters, or a NUL
    character), or None."""
    if len(value) > limit:
        return f"of {len(value):,} characters is longer than the limit of {limit:,}"
    if "\x00" in value:
        return f"{shown(value)} holds a NUL character"
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


def loads(text: str | bytes) -> Any:
    """`json.loads` that refuses a key twice in one object (at any depth) and turns nesting too
    deep for the parser, or a number too long to convert, into a `ValueError` like any other
    malformed JSON (callers report it with their file and line)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ValueError("nested too deeply") from None
