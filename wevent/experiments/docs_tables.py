"""The result tables of docs/reproduction.md, kept equal to the committed ``table.md`` files.

A block of the page between ``<!-- results: EXPERIMENT METRIC -->`` and ``<!-- /results -->``
is the experiment's ``table.md`` (docs/reproduction/EXPERIMENT/table.md) rendered for the page:
its title as a level-3 heading naming the experiment, its header (sizes, seeds, notes), and the
table of one metric. The claims table between ``<!-- claims -->`` and ``<!-- /claims -->`` is
`wevent.experiments.claims.evaluate` over the committed results, and the one between
``<!-- supremacy -->`` and ``<!-- /supremacy -->`` `wevent.experiments.supremacy.evaluate`. ``python -m
wevent.experiments.docs_tables`` rewrites every block from the files (``--check``: only report
the blocks that differ, exit 1); the test suite runs the check, so the page cannot quote numbers
the committed results do not hold.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from wevent.experiments import claims, supremacy

__all__ = ["render", "sync"]

_BLOCK = re.compile(
    r"(<!-- results: (?P<name>[a-z0-9-]+) (?P<metric>[a-z0-9-]+) -->\n)(?P<body>.*?)"
    r"(<!-- /results -->)",
    re.DOTALL,
)
_CLAIMS = re.compile(r"(<!-- claims -->\n)(?P<body>.*?)(<!-- /claims -->)", re.DOTALL)
_SUPREMACY = re.compile(r"(<!-- supremacy -->\n)(?P<body>.*?)(<!-- /supremacy -->)", re.DOTALL)


def render(table_md: str, name: str, metric: str) -> str:
    """The page's block for ``metric`` of the experiment ``name`` whose table.md is given."""
    title, _, rest = table_md.partition("\n")
    header, _, sections = rest.partition("\n### ")
    sections = "### " + sections
    wanted = f"### {metric.upper()}\n"
    found = [s for s in re.split(r"(?m)^(?=### )", sections) if s.startswith(wanted)]
    if len(found) != 1:
        raise ValueError(f"{name}/table.md has no single section {wanted.strip()!r}")
    table = found[0][len(wanted) :].strip("\n")
    return (
        f"### `{name}`: {title.strip()}\n\n{header.strip()}\n\n#### {metric.upper()}\n\n{table}\n\n"
    )


def sync(page: Path, results: Path, *, write: bool) -> list[str]:
    """The blocks of ``page`` that differ from the files under ``results`` (one line each),
    rewriting them when ``write``."""
    text = page.read_text(encoding="utf-8")
    stale: list[str] = []

    def block(match: re.Match[str]) -> str:
        name, metric = match["name"], match["metric"]
        source = results / name / "table.md"
        want = render(source.read_text(encoding="utf-8"), name, metric)
        if match["body"] != want:
            stale.append(f"{page}: the {name} {metric} table differs from {source}")
        return match.group(1) + want + match.group(5)

    def claims_block(match: re.Match[str]) -> str:
        want = "\n".join(claims.evaluate(results)) + "\n"
        if match["body"] != want:
            stale.append(f"{page}: the claims table differs from the results under {results}")
        return match.group(1) + want + match.group(3)

    def supremacy_block(match: re.Match[str]) -> str:
        want = "\n".join(supremacy.evaluate(results)) + "\n"
        if match["body"] != want:
            stale.append(f"{page}: the baseline table differs from the results under {results}")
        return match.group(1) + want + match.group(3)

    new = _SUPREMACY.sub(supremacy_block, _CLAIMS.sub(claims_block, _BLOCK.sub(block, text)))
    # A marker the patterns do not take (misspelt, capitalised, unclosed) would leave its
    # numbers unchecked: count anything that looks like one, loosely.
    opened = len(re.findall(r"<!--\s*results?\b", text, re.IGNORECASE))
    closed = len(re.findall(r"<!--\s*/\s*results?\b", text, re.IGNORECASE))
    blocks = list(_BLOCK.finditer(text))
    loose = re.compile(r"<!--\s*/?\s*results?\b", re.IGNORECASE)
    if (
        opened != len(blocks)
        or closed != len(blocks)
        or any(loose.search(m["body"]) for m in blocks)
    ):
        stale.append(
            f"{page}: {opened} result markers opened, {closed} closed, {len(blocks)} well formed "
            "(<!-- results: EXPERIMENT METRIC --> ... <!-- /results -->, lower case)"
        )
    claims_markers = re.findall(r"<!--\s*/?\s*claims?\b", text, re.IGNORECASE)
    if len(claims_markers) != 2 * len(list(_CLAIMS.finditer(text))):
        stale.append(f"{page}: a claims marker is not well formed")
    supremacy_markers = re.findall(r"<!--\s*/?\s*supremacy\b", text, re.IGNORECASE)
    if len(supremacy_markers) != 2 * len(list(_SUPREMACY.finditer(text))):
        stale.append(f"{page}: a supremacy marker is not well formed")
    if write and new != text:
        page.write_text(new, encoding="utf-8")
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    root = Path(__file__).resolve().parents[2]
    stale = sync(root / "docs" / "reproduction.md", root / "docs" / "reproduction", write=not check)
    for line in stale:
        print(line)
    return 1 if (check and stale) else 0


if __name__ == "__main__":
    raise SystemExit(main())
