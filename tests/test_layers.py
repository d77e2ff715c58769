"""The import graph keeps the layers ARCHITECTURE.md states: every import of a wevent module
points to its own layer or one listed before it, and no two modules import each other, directly
or through others (imports under ``if TYPE_CHECKING:`` are not run and do not count)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "wevent"
APP = "application"  # wevent's own modules outside the layer subpackages (cli, gate, ...)


def _layer_order() -> list[str]:
    """The layer packages in the order ARCHITECTURE.md's package block lists them."""
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("## Packages and the direction of their imports", 1)[1]
    block = block.split("```", 2)[1]
    names = re.findall(r"^(wevent\.\w+)\s", block, flags=re.M)
    assert names, "ARCHITECTURE.md lists no layer"
    return [n.split(".")[1] for n in names] + [APP]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement except those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            yield from (n for s in node.orelse for n in _runtime_imports(ast.Module([s], [])))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _runtime_imports(node)


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level or not node.module or not node.module.startswith("wevent"):
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges[name].add(sub if sub in modules else node.module)
            else:
                edges[name].update(a.name for a in node.names if a.name.startswith("wevent"))
    return edges


def _layer(module: str, layers: list[str]) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in layers else APP


def test_imports_point_down_the_layers() -> None:
    layers = _layer_order()
    assert layers[:2] == ["errors", "accounting"] and layers[-1] == APP
    modules = _modules()
    upward = [
        f"{m} ({_layer(m, layers)}) imports {t} ({_layer(t, layers)})"
        for m, targets in _edges(modules).items()
        for t in targets
        if layers.index(_layer(t, layers)) > layers.index(_layer(m, layers))
    ]
    assert upward == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in edges or w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_modules() -> None:
    edges = _edges(_modules())
    edges.pop("wevent", None)  # the facade re-exports; nothing below imports it
    assert _cycles(edges) == []


def test_the_checks_can_fail() -> None:
    """Negative controls: the graph holds the real imports, an upward import and a cycle are
    found."""
    edges = _edges(_modules())
    assert "wevent.verifier.verdict" in edges["wevent.cli.check"]
    assert "wevent.gate.report" in edges["wevent.gate.population"]  # a function-level import
    assert "wevent.gate.core" not in edges["wevent.gate.report"]  # under TYPE_CHECKING only
    layers = _layer_order()
    assert layers.index(_layer("wevent.proofs.central", layers)) > layers.index(
        _layer("wevent.verifier.check", layers)
    )
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\nimport y\n"
    )
    assert [
        a.name for n in _runtime_imports(tree) if isinstance(n, ast.Import) for a in n.names
    ] == ["y"]
