"""What `pip install .` gives a user: one import name, `wevent`, with its package data; and a
user project whose own packages are named like our layers (``proofs``, ``experiments``) still
gates its allocator."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from the project's own files (a copy, so no build/ is left here)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "wevent", src / "wevent", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return next(out.glob("wevent-*.whl"))


def test_the_wheel_installs_one_import_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"wevent"}
    top_level = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    if top_level:  # setuptools writes it; it must name wevent alone
        assert zipfile.ZipFile(wheel).read(top_level[0]).decode().split() == ["wevent"]


def test_the_wheel_ships_the_certificates_and_examples(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    certificates = sorted((REPO / "wevent" / "proofs" / "certificates").glob("*.json"))
    assert certificates
    for path in certificates:
        assert f"wevent/proofs/certificates/{path.name}" in names
    for path in (REPO / "wevent" / "examples").iterdir():
        if path.is_file():
            assert f"wevent/examples/{path.name}" in names
    assert "wevent/py.typed" in names


def test_a_user_project_with_its_own_proofs_package_gates_its_allocator(tmp_path: Path) -> None:
    """A research repository often has ``proofs/`` and ``experiments/`` packages of its own;
    they come first on the path when it runs from its root, and must not shadow wevent's."""
    for package in ("proofs", "experiments", "accounting", "verifier", "mechanisms"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(f'"""The user\'s own {package}."""\n')
    (tmp_path / "mine.py").write_text(
        textwrap.dedent(
            """\
            from wevent.api import resolve

            uniform_copy = resolve("uniform")
            """
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "wevent",
            "gate",
            "mine:uniform_copy",
            "--w-max",
            "2",
            "--classes",
            "1",
            "--examples",
            "10",
            "--search-runs",
            "10",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "PROVED" in done.stdout
