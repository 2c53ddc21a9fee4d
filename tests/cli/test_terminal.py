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

from tests.support.cli_run import SAMPLE_STDIO
from tests.support.paths import EXAMPLES
from tests.support.wire import DEADLINE

WEATHER = EXAMPLES / "weather_server.py"


def on_a_terminal(*args: str, typed: str = "", stdout_too: bool = False) -> tuple[int, str, str]:
    """Run ``modelctx ARGS`` with stdin and stderr (and stdout with ``stdout_too``) on a
    pseudo-terminal; ``typed`` is what the person types. Returns the status, stdout and
    what the terminal showed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    process = subprocess.Popen(
        [sys.executable, "-m", "modelctx", *args],
        stdin=follower,
        stdout=follower if stdout_too else subprocess.PIPE,
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
        out = process.communicate(timeout=DEADLINE * 2)[0] or b""
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


HOSTILE_SERVER = """
from modelctx import Context, Server

server = Server("hostile")
ESCAPES = "\\x1b]0;retitled\\x07\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\u202e"

@server.tool(description="lists " + ESCAPES)
def shout() -> str:
    return "said " + ESCAPES

@server.tool
def windows_lines() -> str:
    return "one\\r\\ntwo\\roverwritten"

@server.tool
async def ask(ctx: Context) -> str:
    field = {"type": "string", "title": "[red]name[/red] " + ESCAPES}
    answer = await ctx.elicit("who? " + ESCAPES, {"type": "object", "properties": {"name": field}})
    return "ok" if answer.accepted else "no"

if __name__ == "__main__":
    server.run()
"""


def _hostile(tmp_path: Path) -> str:
    server = tmp_path / "hostile.py"
    server.write_text(HOSTILE_SERVER)
    return f"{sys.executable} {server}"


def _no_control_sequences(shown: str) -> None:
    for raw in ("\x1b]", "\x07", "\x1b[2J", "\u202e"):
        assert raw not in shown, f"{raw!r} reached the terminal"


def test_a_tools_text_reaches_the_terminal_with_its_control_characters_escaped(tmp_path: Path) -> None:
    status, _, terminal = on_a_terminal("call", "shout", "--stdio", _hostile(tmp_path), stdout_too=True)

    assert status == 0, terminal
    _no_control_sequences(terminal)
    assert "said \\x1b]0;retitled\\x07" in terminal


def test_crlf_line_ends_stay_but_a_lone_cr_that_would_overwrite_a_line_is_escaped(tmp_path: Path) -> None:
    status, _, terminal = on_a_terminal("call", "windows_lines", "--stdio", _hostile(tmp_path), stdout_too=True)

    assert status == 0, terminal
    assert "one\r" in terminal and "one\\r" not in terminal  # the CRLF's CR reaches the terminal
    assert "two\\roverwritten" in terminal


def test_a_piped_tools_text_stays_as_the_server_sent_it(tmp_path: Path) -> None:
    status, out, terminal = on_a_terminal("call", "shout", "--stdio", _hostile(tmp_path))

    assert status == 0, terminal
    assert out.startswith("said \x1b]0;retitled\x07")


def test_a_tool_description_in_a_table_cannot_drive_the_terminal(tmp_path: Path) -> None:
    status, _, terminal = on_a_terminal("tools", "--stdio", _hostile(tmp_path), stdout_too=True)

    assert status == 0, terminal
    _no_control_sequences(terminal)
    assert "\\x1b" in terminal  # shown, escaped


def test_an_elicitation_question_cannot_drive_the_terminal_nor_use_rich_markup(tmp_path: Path) -> None:
    status, out, terminal = on_a_terminal("call", "ask", "--stdio", _hostile(tmp_path), typed="y\nAda\n")

    assert status == 0, terminal
    assert out == "ok\n"
    _no_control_sequences(terminal)
    assert "[red]name[/red]" in terminal  # shown as written, not read as markup


STRICT_FORM_SERVER = """
from modelctx import Context, Server

server = Server("strict")

@server.tool
async def join(ctx: Context) -> str:
    form = {"type": "object", "properties": {
        "age": {"type": "integer", "title": "Age", "minimum": 18},
        "email": {"type": "string", "title": "Email", "format": "email"},
    }, "required": ["age", "email"]}
    answer = await ctx.elicit("Join?", form)
    return f"joined: {answer.content['age']}, {answer.content['email']}"

if __name__ == "__main__":
    server.run()
"""


def test_an_answer_that_does_not_fit_the_fields_schema_is_asked_again(tmp_path: Path) -> None:
    server = tmp_path / "strict.py"
    server.write_text(STRICT_FORM_SERVER)
    typed = "y\n5\n20\nnot an address\nada@example.org\n"

    status, out, terminal = on_a_terminal("call", "join", "--stdio", f"{sys.executable} {server}", typed=typed)

    assert status == 0, terminal
    assert out == "joined: 20, ada@example.org\n"
    assert "5 is less than the minimum of 18; try again" in terminal
    assert "is not a 'email'; try again" in terminal
