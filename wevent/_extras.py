"""Optional dependencies by extra: what `pip install 'wevent[EXTRA]'` adds, and the one-line hint
a command prints when its extra is missing (the core, `pip install wevent`, is enough for the
guard, the ledgers in JSONL and CSV, and the numpy checker: `wevent check`, `run`, `demo`)."""

from __future__ import annotations

__all__ = ["EXTRA_OF", "missing_extra"]

# top-level module -> the extra that installs it (pyproject.toml [project.optional-dependencies])
EXTRA_OF = {
    "z3": "prove",
    "hypothesis": "prove",
    "duckdb": "audit",
    "pyarrow": "audit",
    "matplotlib": "report",
    "pyspark": "spark",
}


def missing_extra(exc: BaseException, command: str) -> str | None:
    """The hint for a missing optional dependency (None when ``exc`` is something else):
    "`wevent prove` needs the prove extra: pip install 'wevent[prove]'"."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return None
    extra = EXTRA_OF.get(exc.name.split(".")[0])
    if extra is None:
        return None
    what = f"`wevent {command}`" if command else "this command"
    return f"{what} needs the {extra} extra ({exc.name}): pip install 'wevent[{extra}]'"
