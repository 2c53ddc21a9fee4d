"""The README's "A protected server" works as printed: its three commands, run from the
repository root, each in its own process; the client prints what the README says.

Two changes from a person's machine, both outside the commands: the ports 9000 and 8000
are replaced by free ones (other tests may hold those), and ``BROWSER`` names a small
program that opens the authorization URL the way a browser would (following the
redirects back to the client's loopback port); Python's ``webbrowser`` runs it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_readme import README
from tests.support.auth_processes import running
from tests.support.wire import free_port

ROOT = README.parent
DEADLINE = 60.0
HEADING = "## A protected server"

BROWSER_PROGRAM = """\
import sys, httpx
response = httpx.get(sys.argv[1], follow_redirects=True, timeout=30)
sys.exit(0 if response.status_code == 200 else 1)
"""


def section() -> str:
    text = README.read_text("utf-8")
    start = text.index(f"\n{HEADING}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


@pytest.fixture
def shell_env(tmp_path: Path) -> dict[str, str]:
    """``modelctx`` and ``python`` on PATH as in the reader's venv; ``BROWSER`` the test's browser."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, command in (("python", f'"{sys.executable}"'), ("modelctx", f'"{sys.executable}" -m modelctx')):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        (bin_dir / name).chmod(0o755)
    browser = tmp_path / "browser.py"
    browser.write_text(BROWSER_PROGRAM)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "BROWSER": f"{shlex.quote(sys.executable)} {shlex.quote(str(browser))} %s",
    }


def test_the_protected_server_commands_run_as_printed(shell_env: dict[str, str]) -> None:
    text = section()
    commands = re.findall(r"^```bash\n(.*?)\n```", text, re.MULTILINE | re.DOTALL)
    assert len(commands) == 3, commands
    printed = re.search(r"It prints `(.*?)`", text)
    assert printed is not None
    ports = {"9000": str(free_port()), "8000": str(free_port())}

    def local(command: str) -> list[str]:
        for printed_port, port in ports.items():
            command = command.replace(printed_port, port)
        return ["/bin/sh", "-c", f"cd {shlex.quote(str(ROOT))} && exec {command}"]

    auth_server, protected, client = commands
    with running(local(auth_server), "authorization server ready at", env=shell_env), running(
        local(protected), "on Streamable HTTP at", env=shell_env
    ):
        result = subprocess.run(
            local(client), env=shell_env, capture_output=True, text=True, timeout=DEADLINE, check=False
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [printed.group(1)], result.stderr
