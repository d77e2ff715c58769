"""The README's Python examples run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_shows_the_two_setup_commands_first() -> None:
    text = README.read_text()
    first_block = text[text.index("```sh") : text.index("```", text.index("```sh") + 5)]
    assert "make demo" in first_block and "make test" in first_block
