"""Optional dependencies by extra: what `pip install 'wevent[EXTRA]'` adds, and the one-line hint
a command prints when its extra is missing. The core, `pip install wevent`, is enough for the
guard, the ledgers in JSONL and CSV, the numpy checker and audit (`wevent check`, `wevent audit`
of JSONL/CSV ledgers), `wevent trace`, and `wevent run` on synthetic streams; `wevent demo` shows
every part and needs the audit, prove and report extras."""

from __future__ import annotations

__all__ = ["EXTRA_OF", "missing_extra", "require"]

# top-level module -> the extra that installs it (pyproject.toml [project.optional-dependencies])
EXTRA_OF = {
    "z3": "prove",
    "hypothesis": "prove",
    "duckdb": "audit",
    "pyarrow": "audit",
    "matplotlib": "report",
    "pyspark": "spark",
    "cryptography": "sign",
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


def require(command: str, *extras: str) -> str | None:
    """The hint naming every extra of ``extras`` that is not installed (None when all are), so a
    command that needs several says so once, before it starts."""
    from importlib.util import find_spec

    def absent(module: str) -> bool:
        try:
            return find_spec(module) is None
        except (ImportError, ValueError):
            return True

    missing = [e for e in extras if any(absent(m) for m, x in EXTRA_OF.items() if x == e)]
    if not missing:
        return None
    spec = ",".join(missing)
    return (
        f"`wevent {command}` needs the {', '.join(missing)} extra(s): pip install 'wevent[{spec}]'"
    )
