"""What a person at a terminal sees: a spinner with the server's progress messages on
stderr, and the questions of an elicitation form. Stdin and stderr are a real
pseudo-terminal; stdout stays a pipe, so it holds the result and nothing else.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

from cli_run import SAMPLE_STDIO
from conftest import DEADLINE

WEATHER = Path(__file__).parent.parent / "examples" / "weather_server.py"


def on_a_terminal(*args: str, typed: str = "") -> tuple[int, str, str]:
    """Run ``modelctx ARGS`` with stdin and stderr on a pseudo-terminal; ``typed`` is what
    the person types. Returns the status, stdout and what the terminal showed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    process = subprocess.Popen(
        [sys.executable, "-m", "modelctx", *args],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    shown: list[bytes] = []

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the last writer closed the terminal
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    if typed:
        os.write(leader, typed.encode())
    try:
        out, _ = process.communicate(timeout=DEADLINE * 2)
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=DEADLINE)
    os.close(leader)
    return process.returncode, out.decode(), b"".join(shown).decode(errors="replace")


def test_the_spinner_shows_the_tools_progress_messages_on_the_terminal_only():
    weather = f"{sys.executable} -m modelctx serve {WEATHER}"
    status, out, terminal = on_a_terminal("call", "forecast", "city=Oslo", "--json", "--stdio", weather)

    assert status == 0, terminal
    assert json.loads(out)["structuredContent"]["city"] == "Oslo"  # stdout: the JSON alone
    assert "looking at the sky" in terminal


def test_a_form_is_asked_field_by_field_on_a_terminal():
    typed = "y\nAda\ny\n36\n"
    status, out, terminal = on_a_terminal("call", "register", "--stdio", SAMPLE_STDIO, typed=typed)

    assert status == 0, terminal
    assert out == "registered Ada, aged 36\n"
    assert "The server asks: What is your name?" in terminal
    assert "The server asks: How old are you, Ada?" in terminal
