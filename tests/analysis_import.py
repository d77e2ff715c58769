"""Import a script of `analysis/` as a module, the way it runs from the command line (its
directory first on ``sys.path``, so it finds its sibling scripts), for as long as a test needs
it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

ANALYSIS = Path(__file__).resolve().parent.parent / "analysis"


@contextmanager
def analysis_module(name: str) -> Iterator[ModuleType]:
    """``analysis/<name>.py`` as a module; ``sys.path`` is restored when the block ends."""
    sys.path.insert(0, str(ANALYSIS))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(ANALYSIS))
