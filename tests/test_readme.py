"""The README starts with the two setup commands (its code blocks run in tests/test_docs.py)."""

from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_shows_the_two_setup_commands_first() -> None:
    text = README.read_text()
    first_block = text[text.index("```sh") : text.index("```", text.index("```sh") + 5)]
    assert "make demo" in first_block and "make test" in first_block
