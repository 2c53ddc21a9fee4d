"""The README's examples work as printed.

The server block (under "## A server") is saved as weather.py and the client block (under
"## A client") as client.py, side by side, exactly as the README tells a reader to; then
``python client.py`` runs for real: it spawns ``python weather.py`` on stdio, lists the
tools, calls one, and answers an elicitation.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

README = ROOT / "README.md"
DEADLINE = 60.0


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def block_after(heading: str) -> str:
    text = README.read_text("utf-8")
    at = text.index(f"\n{heading}\n")
    return python_blocks(text[at:])[0]


@pytest.fixture
def python_on_path(tmp_path: Path) -> dict[str, str]:
    """An environment where ``python`` is this interpreter, as in the reader's venv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    # A script, not a symlink: a symlinked venv interpreter would not find its venv.
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_the_client_example_runs_against_the_server_example(tmp_path, python_on_path):
    (tmp_path / "weather.py").write_text(block_after("## A server"))
    (tmp_path / "client.py").write_text(block_after("## A client"))
    run = subprocess.run(
        ["python", "client.py"],
        cwd=tmp_path,
        env=python_on_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "tools: ['forecast', 'subscribe']",
        "forecast: {'city': 'Oslo', 'temperature': -3.0}",
        "the server asks: Where should the Oslo forecast go?",
        "subscribe: ada@example.com gets the Oslo forecast every morning.",
    ], run.stderr


def test_every_python_block_of_the_readme_compiles():
    blocks = python_blocks(README.read_text("utf-8"))
    assert len(blocks) >= 3
    for number, block in enumerate(blocks, 1):
        compile(block, f"README.md python block {number}", "exec")


def test_the_testing_example_passes_under_pytest_with_the_installed_plugin(tmp_path, python_on_path):
    """The README's "Testing your server" block, saved beside weather.py and run by a
    plain ``pytest``: the fixtures come from the installed plugin (a pytest11 entry point)."""
    (tmp_path / "weather.py").write_text(block_after("## A server"))
    (tmp_path / "test_weather.py").write_text(block_after("## Testing your server"))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_weather.py"],
        cwd=tmp_path,
        env=python_on_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
