"""The README's host example works as printed: ``mcp.json`` and ``host.py`` beside the
README's ``weather.py``, run with ``python host.py``."""

from __future__ import annotations

import re
import subprocess

from tests.docs.test_readme import README, block_after, python_on_path  # noqa: F401 - python_on_path is a fixture

DEADLINE = 60.0


def json_block_after(heading: str) -> str:
    text = README.read_text("utf-8")
    at = text.index(f"\n{heading}\n")
    return re.findall(r"^```json\n(.*?)^```", text[at:], re.MULTILINE | re.DOTALL)[0]


def test_the_host_example_runs_against_the_server_example(tmp_path, python_on_path):  # noqa: F811
    (tmp_path / "weather.py").write_text(block_after("## A server"))
    (tmp_path / "mcp.json").write_text(json_block_after("## A host"))
    host_py = block_after("## A host")
    (tmp_path / "host.py").write_text(host_py)
    run = subprocess.run(
        ["python", "host.py"],
        cwd=tmp_path,
        env=python_on_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )

    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "['weather_forecast', 'weather_subscribe']",
        "{'city': 'Oslo', 'temperature': -3.0}",
    ], run.stderr
    lines = [line for line in host_py.splitlines() if line.strip() and not line.startswith(("import", "from"))]
    assert len(lines) == 5  # "the host in five lines": async def, with, two prints, asyncio.run
