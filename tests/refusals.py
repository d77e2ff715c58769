"""What every audit engine says about the same malformed ledger (shared by the engine tests)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from wevent.accounting.formats import FormatError
from wevent.accounting.population import Population
from wevent.verifier.engines import make_engine


def refusals(engines: Iterable[str], files: Sequence[Path], population: Population) -> set[str]:
    """The messages of the `FormatError` each engine raises on ``files`` (one message when the
    engines agree); an engine that accepts the ledger fails the test."""
    messages = set()
    for engine in engines:
        with pytest.raises(FormatError) as caught:
            make_engine(engine).audit(files, population)
        messages.add(str(caught.value))
    return messages
