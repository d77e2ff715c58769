"""Names in wevent's registries (allocators, guard and audit engines, evidence kinds): the close
ones to an unknown name, for the "did you mean" of its error message."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

__all__ = ["close_names", "did_you_mean"]


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The names of ``known`` close to ``name``, best first (at most ``n``; none when nothing is
    close): `difflib.get_close_matches` at its default cutoff."""
    return difflib.get_close_matches(name, list(known), n=n)


def did_you_mean(close: Sequence[str]) -> str:
    """``"; did you mean a, b or c?"`` for the close names, or ``""`` when there is none."""
    if not close:
        return ""
    head = ", ".join(close[:-1])
    return f"; did you mean {head + ' or ' if head else ''}{close[-1]}?"
