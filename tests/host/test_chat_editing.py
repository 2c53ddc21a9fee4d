"""``modelctx chat``'s line editor and displays, as a person types in a real terminal (tmux).

The same harness as tests/host/test_chat.py: the chat in a tmux server of its own, real
MCP servers on stdio, the model API scripted on 127.0.0.1 and reached through the real
``anthropic`` SDK (and one test through ``openai``). What the model was sent is read from
the scripted API's record: the proof that an edit, a recalled line or an interrupt did
what the screen suggests.
"""

from __future__ import annotations

import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.host.test_chat import APPROVAL_SERVER, CHAT, Terminal, base_env, tool_results, write_config
from tests.support.model_server import ScriptedModelServer, Turn
from tests.support.paths import SERVERS

pytest.importorskip("rich")
pytest.importorskip("anthropic")
pytest.importorskip("prompt_toolkit")

CHAT_SERVER = SERVERS / "chat_server.py"


def served(server: Path, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(server)], "trusted": True, **extra}


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text the person sent in each user message of a Messages API request."""
    return [
        block["text"]
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "text"
    ]


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Any]:
    """``session(script, servers=None, provider="anthropic")``: a scripted model API and a
    chat in a terminal, both closed after the test. Every chat of a test shares HOME."""
    opened: list[tuple[ScriptedModelServer, Terminal]] = []

    def start(
        script: list[Turn], servers: dict[str, Any] | None = None, provider: str = "anthropic", args: tuple[str, ...] = ()
    ) -> Any:
        write_config(tmp_path, servers if servers is not None else {"chat": served(CHAT_SERVER)})
        api = ScriptedModelServer(script).__enter__()
        env = base_env(tmp_path)
        command = [*CHAT, *args]
        if provider == "anthropic":
            env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=api.url)
        else:
            env.update(OPENAI_API_KEY="local", OPENAI_BASE_URL=api.url + "/v1")
            command += ["--model", "llama-local"]
        terminal = Terminal(command, env, tmp_path)
        opened.append((api, terminal))
        terminal.wait_for("you>")
        return api, terminal

    yield start
    for api, terminal in opened:
        terminal.close()
        api.__exit__(None, None, None)


def test_the_arrow_keys_edit_the_line_before_it_is_sent(session: Any) -> None:
    api, terminal = session([Turn("Hello, Ada.")])
    terminal.press_literal("helo Ad")
    terminal.press("Left", "Left", "Left", "Left")  # back to just after "hel"
    terminal.press_literal("l")
    terminal.press("End")
    terminal.press_literal("a")
    terminal.press("Enter")
    screen = terminal.wait_for("Hello, Ada.")
    assert user_texts(api.requests[0].body) == ["hello Ada"]
    assert "\x1b[D" not in repr(api.requests[0].body) and "^[[D" not in screen


def test_up_recalls_a_message_of_an_earlier_chat_from_a_private_history_file(session: Any, tmp_path: Path) -> None:
    _, first = session([Turn("First answer.")])
    first.type("what is the capital of Norway?")
    first.wait_for("First answer.")
    first.press("C-d")
    first.wait_for("[exited 0]")
    history = tmp_path / ".config" / "modelctx" / "chat_history"
    assert "what is the capital of Norway?" in history.read_text("utf-8")
    assert stat.S_IMODE(history.stat().st_mode) == 0o600  # what a person types may hold secrets
    assert stat.S_IMODE(history.parent.stat().st_mode) == 0o700

    api, second = session([Turn("Oslo, again.")])
    second.press("Up")
    second.wait_for("you> what is the capital of Norway?")
    second.press("Enter")
    second.wait_for("Oslo, again.")
    assert user_texts(api.requests[0].body) == ["what is the capital of Norway?"]


def test_answers_to_questions_are_not_written_to_the_history(session: Any, tmp_path: Path) -> None:
    _, terminal = session([Turn(calls=[("chat_pick_hero", {})]), Turn("Ada leads.")])
    terminal.type("who leads?")
    terminal.wait_for("answer? [y]es")
    terminal.type("y")
    screen = terminal.wait_for("hero (one of Ada Lovelace, Alan Turing)")
    assert "hero-1" not in screen.split("Who leads?")[-1]  # the titles are shown, not the ids
    terminal.type("alan turing")
    screen = terminal.wait_for("tags (comma-separated, from math, code, art; default math, code)")
    terminal.type("")
    screen = terminal.wait_for("Ada leads.")
    assert "accept {'hero': 'hero-2', 'tags': ['math', 'code']}" in screen
    terminal.press("C-d")
    terminal.wait_for("[exited 0]")
    kept = (tmp_path / ".config" / "modelctx" / "chat_history").read_text("utf-8")
    assert "who leads?" in kept and "alan turing" not in kept


def test_ctrl_c_at_the_idle_prompt_clears_the_line_and_the_prompt_comes_back(session: Any) -> None:
    api, terminal = session([Turn("Only the second.")])
    terminal.press_literal("a draft I regret")
    terminal.press("C-c")
    terminal.wait_for("you>", count=2)
    terminal.type("the real question")
    terminal.wait_for("Only the second.")
    assert user_texts(api.requests[0].body) == ["the real question"]


def test_ctrl_c_while_a_tool_runs_stops_the_turn_and_progress_was_shown_in_place(session: Any) -> None:
    api, terminal = session([Turn(calls=[("chat_slow", {"seconds": 60})]), Turn("Hello again.")])
    terminal.type("take your time")
    terminal.wait_for("chunk 5")
    screen = terminal.screen()
    assert screen.count("… chat_slow:") == 1  # one line, rewritten by each report
    assert "/300 (" in screen
    terminal.press("C-c")
    terminal.wait_for("interrupted")
    terminal.wait_for("you>", count=2)
    terminal.type("hello")
    terminal.wait_for("Hello again.")
    assert api.requests[1].body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    terminal.press("C-d")
    terminal.wait_for("[exited 0]")


def test_a_line_ending_in_a_backslash_or_esc_enter_goes_on_to_the_next(session: Any) -> None:
    api, terminal = session([Turn("Two lines read."), Turn("Again.")])
    terminal.type("first line\\")
    terminal.type("second line")
    terminal.wait_for("Two lines read.")
    assert user_texts(api.requests[0].body) == ["first line\nsecond line"]
    terminal.press_literal("one")
    terminal.press("Escape", "Enter")
    terminal.press_literal("two")
    terminal.press("Enter")
    terminal.wait_for("Again.")
    assert user_texts(api.requests[1].body)[-1] == "one\ntwo"
    terminal.type("/help")
    assert "end a line with \\" in terminal.wait_for("/save FILE")


def test_a_tool_that_needs_a_page_opened_shows_its_url_asks_and_is_sent_again(session: Any) -> None:
    api, terminal = session([Turn(calls=[("chat_connect_bank", {})]), Turn("Connected.")])
    terminal.type("connect my bank")
    screen = terminal.wait_for("[o]pened it / [d]ecline")
    assert "https://bank.example.com/authorize?state=xyz" in screen
    assert "Authorize read access to your bank account." in screen
    assert "modelctx does not open it" in screen
    terminal.type("o")
    screen = terminal.wait_for("Connected.")
    assert "✓ result chat_connect_bank: connected after 2 calls" in screen
    assert tool_results(api.requests[1].body) == ["connected after 2 calls"]


def test_attach_without_a_server_says_the_form_that_works(session: Any) -> None:
    api, terminal = session([Turn("Milk, then.")])
    terminal.type("/attach notes://nope")
    screen = " ".join(terminal.wait_for("no server lists notes://nope").split())  # rich wraps long lines
    assert "name the server: /attach notes://nope SERVER" in screen and "server=" not in screen
    terminal.type("/attach notes://today")
    terminal.wait_for("attached notes://today")
    terminal.type("what do I need?")
    terminal.wait_for("Milk, then.")
    assert user_texts(api.requests[0].body)[0].startswith("Attached resource notes://today:\nBuy milk.")


def test_through_openai_the_line_is_edited_recalled_and_cleared(session: Any) -> None:
    api, terminal = session([Turn("One."), Turn("Two.")], provider="openai")
    terminal.press_literal("never mind")
    terminal.press("C-c")
    terminal.wait_for("you>", count=2)
    terminal.press_literal("wether?")
    terminal.press("Home", "Right", "Right")
    terminal.press_literal("a")
    terminal.press("Enter")
    terminal.wait_for("One.")
    terminal.press("Up")
    terminal.wait_for("you> weather?", count=2)  # the sent line, and the recalled one
    terminal.press("Enter")
    terminal.wait_for("Two.")
    assert [r.path for r in api.requests] == ["/v1/chat/completions"] * 2
    sent = [m["content"] for m in api.requests[1].body["messages"] if m["role"] == "user"]
    assert sent == ["weather?", "weather?"]


def test_a_saved_chat_goes_on_in_a_new_terminal(session: Any, tmp_path: Path) -> None:
    _, first = session([Turn(calls=[("chat_connect_bank", {})]), Turn("Connected, after the page.")])
    first.type("connect my bank")
    first.wait_for("[o]pened it")
    first.type("o")
    first.wait_for("Connected, after the page.")
    first.type("/save talk.json")
    first.wait_for("saved 4 messages to talk.json")
    first.press("C-d")
    first.wait_for("[exited 0]")

    api, second = session([Turn("It is still connected.")], args=("--resume", "talk.json"))
    second.wait_for("(going on with 4 earlier messages)")
    second.type("is it still connected?")
    second.wait_for("It is still connected.")
    sent = api.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert tool_results(api.requests[0].body) == ["connected after 2 calls"]


def test_without_a_terminal_the_chat_reads_plain_lines(tmp_path: Path) -> None:
    """Piped input takes the plain reader: no line editor, no history file."""
    import subprocess

    write_config(tmp_path, {"files": served(APPROVAL_SERVER)})
    with ScriptedModelServer([Turn("Piped answer.")]) as api:
        env = {**base_env(tmp_path), "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": api.url}
        done = subprocess.run(
            CHAT, input="a piped question\n/quit\n", capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
        )
    assert done.returncode == 0, done.stderr
    assert "Piped answer." in done.stdout
    assert user_texts(api.requests[0].body) == ["a piped question"]
    assert not (tmp_path / ".config" / "modelctx" / "chat_history").exists()
