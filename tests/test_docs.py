"""The documentation runs: every code block of README.md and docs/*.md, its links, its tables.

* ``python`` blocks are executed, ``sh`` blocks run line by line: a line starting with
  ``wevent `` runs as ``python -m wevent ...``, one starting with ``python`` with this
  interpreter, ``cd DIR`` changes the directory for the rest of the block; other lines (``make``,
  ``pip``) are not run. A trailing ``# exit N`` is the expected exit code (0 otherwise).
* The blocks of one document run in order in one temporary directory that looks like the
  repository root (``wevent/`` and ``examples/``), so a later block may use a file an earlier one
  wrote. ``text`` (output) and data blocks (``csv``, ``json``, ``toml``) are not run.
* A block right after a line ``<!-- slow -->`` runs only under ``pytest -m slow``.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
LINKED = [
    *DOCS,
    REPO / "ARCHITECTURE.md",
    REPO / "wevent" / "proofs" / "README.md",
    REPO / "examples" / "third_party_allocator" / "README.md",
]
SLOW_MARK = "<!-- slow -->"
RUN_LANGUAGES = ("python", "sh")
EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
COMMAND_TIMEOUT = 1800


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    slow: bool


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    previous = ""
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if fence is None:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        found.append(
            Block(path, start + 1, fence.group(1), "\n".join(body) + "\n", previous == SLOW_MARK)
        )
        previous = ""
        i += 1
    return found


def commands(block: Block) -> list[tuple[int, str]]:
    """The logical lines of a sh block (continuations joined) with their line numbers."""
    out: list[tuple[int, str]] = []
    pending = ""
    first = 0
    for k, raw in enumerate(block.code.splitlines()):
        if not pending:
            first = block.line + 1 + k
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        out.append((first, (pending + raw).strip()))
        pending = ""
    return [(n, line) for n, line in out if line and not line.startswith("#")]


def sandbox(root: Path) -> Path:
    """A directory that looks like the repository root to the documented commands."""
    (root / "wevent").symlink_to(REPO / "wevent", target_is_directory=True)
    shutil.copytree(
        REPO / "examples", root / "examples", ignore=shutil.ignore_patterns("__pycache__")
    )
    return root


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _run_sh(block: Block, root: Path) -> None:
    cwd = root
    for number, line in commands(block):
        where = f"{block.path.relative_to(REPO)}:{number}: {line}"
        args = shlex.split(line, comments=True)
        if args[0] == "cd":
            cwd = (cwd / args[1]).resolve()
            assert cwd.is_dir(), where
            continue
        if args[0] == "wevent":
            argv = [sys.executable, "-m", "wevent", *args[1:]]
        elif args[0] in ("python", "python3"):
            argv = [sys.executable, *args[1:]]
        else:
            continue  # make, pip: set-up the tests do not repeat
        expected = EXIT.search(line)
        want = int(expected.group(1)) if expected else 0
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == want, (
            f"{where}\nexit {done.returncode}, expected {want}\n"
            f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
        )


def _run_python(block: Block, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    name = f"{block.path.relative_to(REPO)}:{block.line}"
    exec(compile(block.code, name, "exec"), {})


def run_document(
    path: Path, root: Path, monkeypatch: pytest.MonkeyPatch, *, include_slow: bool
) -> int:
    """Run the document's python and sh blocks in order; return how many ran."""
    sandbox(root)
    ran = 0
    for block in blocks(path):
        if block.language not in RUN_LANGUAGES or (block.slow and not include_slow):
            continue
        if block.language == "python":
            _run_python(block, root, monkeypatch)
        else:
            _run_sh(block, root)
        ran += 1
    return ran


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_code_blocks_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_document(path, tmp_path, monkeypatch, include_slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_code_blocks_run_including_slow_ones(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_document(path, tmp_path, monkeypatch, include_slow=True)


def test_the_runner_reads_fences_markers_continuations_and_exit_codes(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "text\n\n```sh\nmake demo\nwevent check a \\\n  -r b   # exit 1\n# a comment\n```\n\n"
        "<!-- slow -->\n```python\nx = 1\n```\n\n```text\nwevent not run\n```\n",
        encoding="utf-8",
    )
    sh, py, text = blocks(doc)
    assert (sh.language, sh.line, sh.slow) == ("sh", 3, False)
    assert commands(sh) == [(4, "make demo"), (5, "wevent check a    -r b   # exit 1")]
    assert EXIT.search(commands(sh)[1][1]) is not None
    assert (py.language, py.slow, py.code) == ("python", True, "x = 1\n")
    assert text.language == "text"


def test_every_document_has_something_to_run() -> None:
    for path in (README, REPO / "docs" / "audits.md", REPO / "docs" / "gate.md"):
        assert any(b.language in RUN_LANGUAGES and not b.slow for b in blocks(path)), path


def test_readme_is_at_most_250_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_the_docs_do_not_point_at_issues_or_later_work() -> None:
    pattern = re.compile(r"\b(issues?|later issue|today|for now|not yet)\b", re.I)
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "](" in line and "issues" in line.split("](", 1)[1]:
                continue  # a link's address
            assert not pattern.search(line), f"{path.relative_to(REPO)}:{number}: {line}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # no headings inside code
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_relative_links_resolve() -> None:
    for path in LINKED:
        text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            where = f"{path.relative_to(REPO)}: link {target}"
            assert resolved.exists(), where
            assert REPO in resolved.parents or resolved == REPO, where
            if anchor:
                assert resolved.suffix == ".md", where
                assert anchor in _anchors(resolved), f"{where}: no heading with that anchor"


def _papers_rows() -> list[list[str]]:
    text = (REPO / "docs" / "papers.md").read_text(encoding="utf-8")
    rows: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("| paper | item | code | proof | test |"):
            inside = True
            continue
        if inside and line.startswith("|---"):
            continue
        if inside and line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif inside:
            break
    return rows


def _resolve(name: str) -> object:
    module, _, attribute = name.partition(":")
    obj: object = importlib.import_module(module)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


def test_papers_table_points_at_code_proofs_and_tests_that_exist() -> None:
    rows = _papers_rows()
    assert len(rows) >= 30
    for row in rows:
        assert len(row) == 5, row
        _, item, code, proof, test = row
        objects = re.findall(r"`([\w.]+:[\w.]+)`", code)
        assert objects, f"{item}: no module:object in the code column"
        for name in [*objects, *re.findall(r"`([\w.]+:[\w.]+)`", proof)]:
            assert _resolve(name) is not None, name
        tests = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", test)
        assert tests, f"{item}: no test"
        for file, function in tests:
            source = (REPO / file).read_text(encoding="utf-8")
            assert re.search(rf"^def {function}\(", source, flags=re.M), f"{file}::{function}"
