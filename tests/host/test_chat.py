"""``modelctx chat`` as a person uses it: a real terminal (tmux), real keys typed, the screen read.

Each test starts ``modelctx chat --config <file>`` in its own tmux server, with real MCP
servers on stdio (tests/fixtures/servers/approval_server.py, examples/weather_server.py) and the
model API scripted on 127.0.0.1 (tests/support/model_server.py, reached through the real
``anthropic`` SDK by ``ANTHROPIC_BASE_URL``). What the model was sent is read from the
requests the scripted API recorded; what the person saw from ``tmux capture-pane``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.model_server import ScriptedModelServer, Turn
from tests.support.paths import EXAMPLES, ROOT, SERVERS, SRC

pytest.importorskip("rich")
pytest.importorskip("anthropic")

APPROVAL_SERVER = SERVERS / "approval_server.py"
WEATHER_SERVER = EXAMPLES / "weather_server.py"
TMUX = shutil.which("tmux")
# How long the screen may take to show what a step makes it show (a deadline, not a measure).
DEADLINE = 30.0


class Terminal:
    """One ``modelctx chat`` in a tmux session of its own (160 columns, so lines do not wrap
    much). ``env`` is the whole environment the chat gets, nothing inherited."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        if TMUX is None:
            pytest.fail("tmux is not installed; the chat is tested in a real terminal (apt-get install tmux)")
        self.socket = f"modelctx-chat-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        command = shlex.join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *args])
        # The shell reports the exit status on the screen, then keeps the pane open to read it.
        shell = f'cd {shlex.quote(str(cwd))} && {command}; echo "[exited $?]"; sleep 600'
        self._tmux("new-session", "-d", "-x", "160", "-y", "50", shell)

    def _tmux(self, *args: str) -> str:
        assert TMUX is not None
        done = subprocess.run(
            [TMUX, "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=10, check=True
        )
        return done.stdout

    def type(self, line: str) -> None:
        """Type ``line`` and press Enter."""
        self._tmux("send-keys", "-t", "0", "-l", line)
        self._tmux("send-keys", "-t", "0", "Enter")

    def press(self, *keys: str) -> None:
        """Press keys by their tmux names ("C-c", "C-d", "Left", "Up", "Enter")."""
        self._tmux("send-keys", "-t", "0", *keys)

    def press_literal(self, text: str) -> None:
        """Type ``text`` without pressing Enter."""
        self._tmux("send-keys", "-t", "0", "-l", text)

    def screen(self) -> str:
        """Everything shown so far (scrollback included), wrapped lines joined."""
        return self._tmux("capture-pane", "-p", "-J", "-t", "0", "-S", "-2000")

    def wait_for(self, text: str, *, count: int = 1) -> str:
        """The screen once ``text`` is on it (``count`` times); fails showing the screen."""
        end = time.monotonic() + DEADLINE
        while True:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            if time.monotonic() > end or "[exited" in screen:
                pytest.fail(f"the screen never showed {text!r} ({count}x); it shows:\n{screen}")
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {
        # The interpreter's bin folder first: where pip puts the `modelctx` command.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(tmp_path),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.environ.get("PYTHONPATH", str(SRC)),
    }
    return env


def write_config(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


def stdio(server: Path) -> dict[str, Any]:
    # Trusted: the test servers' readOnlyHint tools run without asking, as the chats here expect.
    return {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(server)], "trusted": True}


CHAT = [sys.executable, "-m", "modelctx", "chat", "--config", "host.json"]


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Any]:
    """``chat(script, servers)``: the scripted model API and a terminal running the chat."""
    opened: list[tuple[ScriptedModelServer, Terminal]] = []

    def start(script: list[Turn], servers: dict[str, Any] | None = None) -> tuple[ScriptedModelServer, Terminal]:
        write_config(tmp_path, servers if servers is not None else {"files": stdio(APPROVAL_SERVER)})
        api = ScriptedModelServer(script).__enter__()
        env = {**base_env(tmp_path), "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url}
        terminal = Terminal(CHAT, env, tmp_path)
        opened.append((api, terminal))
        terminal.wait_for("you>")
        return api, terminal

    yield start
    for api, terminal in opened:
        terminal.close()
        api.__exit__(None, None, None)


def tool_results(body: dict[str, Any]) -> list[str]:
    """The text of every tool result in a Messages API request body, in order."""
    return [
        part["text"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
        for part in block["content"]
        if part.get("type") == "text"
    ]


def test_a_question_an_approval_and_the_answer_on_the_screen(chat: Any) -> None:
    api, terminal = chat(
        [
            Turn("Deleting it now.", calls=[("files_delete_file", {"path": "/tmp/report.txt"})]),
            Turn("Done: it is gone."),
        ]
    )
    terminal.type("please delete /tmp/report.txt")
    screen = terminal.wait_for("[a]llow once / al[w]ays / [d]eny")
    assert "Deleting it now." in screen  # streamed before the call
    assert "→ tool call files · delete_file" in screen
    # The approval shows the server (name and command), the tool, its annotations, the full arguments.
    assert f"files ({sys.executable} -m modelctx serve {APPROVAL_SERVER})" in screen
    assert '"destructiveHint": true' in screen and '"path": "/tmp/report.txt"' in screen

    terminal.type("a")
    screen = terminal.wait_for("Done: it is gone.")
    assert "allowed once" in screen
    assert "✓ result files_delete_file: deleted /tmp/report.txt" in screen
    assert tool_results(api.requests[1].body) == ["deleted /tmp/report.txt"]

    terminal.type("/quit")
    terminal.wait_for("[exited 0]")


def test_a_denied_call_never_reaches_the_server(chat: Any) -> None:
    api, terminal = chat(
        [
            Turn(calls=[("files_delete_file", {"path": "/etc/passwd"})]),
            Turn(calls=[("files_calls", {"tool": "delete_file"})]),  # read-only: runs without asking
            Turn("I did not delete it."),
        ]
    )
    terminal.type("delete /etc/passwd")
    terminal.wait_for("[a]llow once")
    terminal.type("d")
    screen = terminal.wait_for("I did not delete it.")
    assert "denied" in screen and "✗ error files_delete_file:" in screen
    assert '✓ result files_calls: {"result":0}' in screen  # the server counted no call of delete_file
    denied, counted = tool_results(api.requests[2].body)
    assert "denied" in denied and json.loads(counted) == {"result": 0}
    assert screen.count("[a]llow once") == 1  # the read-only tool was not asked about


def test_always_is_not_asked_again_approve_lists_it_and_forget_withdraws_it(chat: Any) -> None:
    api, terminal = chat(
        [
            Turn(calls=[("files_delete_file", {"path": "a"})]),
            Turn("First done."),
            Turn(calls=[("files_delete_file", {"path": "b"})]),
            Turn("Second done."),
            Turn(calls=[("files_delete_file", {"path": "c"})]),
            Turn("Third done."),
        ]
    )
    terminal.type("delete a")
    terminal.wait_for("[a]llow once")
    terminal.type("w")
    terminal.wait_for("First done.")
    terminal.type("delete b")
    screen = terminal.wait_for("Second done.")
    assert screen.count("[a]llow once") == 1
    assert "✓ result files_delete_file: deleted b" in screen

    terminal.type("/approve")
    screen = terminal.wait_for('allowed "always"')
    listed = screen.split('allowed "always"')[-1]
    assert "delete_file" in listed and "approval_server.py" in listed and "files" in listed

    terminal.type("/approve forget 1")
    screen = terminal.wait_for("forgot: delete_file of files")
    terminal.type("delete c")
    terminal.wait_for("[a]llow once")  # forgotten: asked again
    terminal.type("d")
    screen = terminal.wait_for("Third done.")
    assert "denied" in screen.split("delete c")[-1]


def test_tools_and_servers_show_what_is_up_and_why_a_server_failed(chat: Any) -> None:
    _, terminal = chat([], {"files": stdio(APPROVAL_SERVER), "broken": {"command": "/nonexistent/mcp-server"}})
    screen = terminal.screen()  # the servers are shown when the chat starts
    assert "broken" in screen and "failed" in screen and "/nonexistent/mcp-server" in screen

    terminal.type("/tools")
    screen = terminal.wait_for("files_connect_account")
    tools = screen.split("you> /tools")[-1]
    for line in ("files_delete_file", "files_weather", "files_ask_age"):
        assert line in tools
    assert "destructive" in tools and "read-only" in tools

    terminal.type("/servers")
    screen = terminal.wait_for("you> /servers")
    servers = terminal.wait_for("No such file", count=2).split("you> /servers")[-1]
    assert "files" in servers and "up" in servers and "approval_server.py" in servers
    assert "broken" in servers and "failed" in servers

    terminal.type("/help")
    assert "/attach URI" in terminal.wait_for("/resources")


def test_without_an_api_key_one_line_says_what_to_set(tmp_path: Path) -> None:
    write_config(tmp_path, {"files": stdio(APPROVAL_SERVER)})
    terminal = Terminal(CHAT, base_env(tmp_path), tmp_path)
    try:
        screen = terminal.wait_for("[exited 2]")
    finally:
        terminal.close()
    assert "ANTHROPIC_API_KEY" in screen and "OPENAI_API_KEY" in screen and "OPENAI_BASE_URL" in screen
    assert "Traceback" not in screen
    assert [line for line in screen.splitlines() if line.strip()][0].startswith("modelctx chat: no model API key")


def test_a_form_elicitation_is_asked_field_by_field(chat: Any) -> None:
    api, terminal = chat([Turn(calls=[("files_ask_age", {})]), Turn("Thanks.")])
    terminal.type("ask me my age")
    terminal.wait_for("[a]llow once")
    terminal.type("a")
    screen = terminal.wait_for("answer? [y]es / [n]o / [c]ancel")
    assert "How old are you?" in screen
    terminal.type("y")
    terminal.wait_for("age (integer)")
    terminal.type("old")
    terminal.wait_for("type an integer")
    terminal.type("42")
    screen = terminal.wait_for("Thanks.")
    assert "accept {'age': 42}" in screen
    assert tool_results(api.requests[1].body) == ["accept {'age': 42}"]


def test_a_url_elicitation_shows_the_url_and_never_opens_it(chat: Any) -> None:
    api, terminal = chat([Turn(calls=[("files_connect_account", {})]), Turn("Not connected.")])
    terminal.type("connect my calendar")
    terminal.wait_for("[a]llow once")
    terminal.type("a")
    screen = terminal.wait_for("[o]pened it / [d]ecline")
    assert "https://calendar.example.com/connect?session=abc" in screen
    assert "modelctx does not open it" in screen
    terminal.type("d")
    terminal.wait_for("Not connected.")
    assert tool_results(api.requests[1].body)[0].startswith("decline")


def test_a_servers_sampling_request_is_shown_and_answered_by_the_same_model(chat: Any) -> None:
    api, terminal = chat(
        [
            Turn(calls=[("files_summarize", {"text": "a very long report"})]),
            Turn("A short summary."),  # the sampling request
            Turn("Here it is."),
        ]
    )
    terminal.type("summarize the report")
    terminal.wait_for("[a]llow once")
    terminal.type("a")
    screen = terminal.wait_for("let the model answer?")
    assert "files asks the model (sampling)" in screen and "Summarize: a very long report" in screen
    assert "system: You write one-line summaries." in screen and "maxTokens 50 · temperature 0.7" in screen
    terminal.type("y")
    screen = terminal.wait_for("Here it is.")
    assert "✓ result files_summarize: A short summary." in screen
    sampled = api.requests[1].body
    assert sampled["messages"][0]["content"][0]["text"] == "Summarize: a very long report"
    assert sampled["max_tokens"] == 50 and "You write one-line summaries." in json.dumps(sampled["system"])
    assert "tools" not in sampled
    assert tool_results(api.requests[2].body) == ["A short summary."]


def test_a_resource_attached_and_a_prompt_run_as_a_slash_command(chat: Any) -> None:
    api, terminal = chat([Turn("Lisbon."), Turn("Oslo: stay in.")], {"weather": stdio(WEATHER_SERVER)})
    terminal.type("/resources")
    assert "weather://cities" in terminal.wait_for("application/json")
    terminal.type("/attach weather://cities")
    terminal.wait_for("attached weather://cities")
    terminal.type("where is it sunny?")
    terminal.wait_for("Lisbon.")
    first = api.requests[0].body["messages"][0]["content"][0]["text"]
    assert first.startswith("Attached resource weather://cities:") and '"lisbon"' in first
    assert first.endswith("where is it sunny?")

    terminal.type("/prompts")
    terminal.wait_for("/weather_plan_trip city=...")
    terminal.type("/weather_plan_trip city=Oslo")
    terminal.wait_for("Oslo: stay in.")
    sent = api.requests[1].body["messages"][-1]["content"]
    assert sent[-1]["text"] == "Check the forecast for Oslo and plan a day outdoors or in."
    assert "you> /weather_plan_trip" in terminal.screen()

    terminal.type("/nonsense")
    assert "/help lists the commands" in terminal.wait_for("unknown command /nonsense")


def test_ctrl_c_stops_a_turn_and_the_next_question_starts_clean(chat: Any) -> None:
    api, terminal = chat([Turn(calls=[("files_delete_file", {"path": "x"})]), Turn("Hello again.")])
    terminal.type("delete x")
    terminal.wait_for("[a]llow once")
    terminal.press("C-c")
    terminal.wait_for("interrupted")
    terminal.type("hello")
    terminal.wait_for("Hello again.")
    # The stopped turn (a tool call without its result) is not sent again.
    assert api.requests[1].body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    terminal.press("C-d")
    terminal.wait_for("[exited 0]")


def test_the_readme_config_works_as_printed(tmp_path: Path) -> None:
    """The README's config is examples/host.json, and `modelctx chat --config examples/host.json`
    run from the repository asks before a forecast and shows its result."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme[readme.index("\n## A terminal chat and a gateway\n") :]
    printed = section.split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(printed) == json.loads((EXAMPLES / "host.json").read_text("utf-8"))
    assert "modelctx chat --config examples/host.json" in section

    script = [Turn(calls=[("weather_list_cities", {}), ("weather_forecast", {"city": "Oslo"})]), Turn("Snow in Oslo.")]
    with ScriptedModelServer(script) as api:
        env = {**base_env(tmp_path), "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url}
        terminal = Terminal(["modelctx", "chat", "--config", "examples/host.json"], env, ROOT)
        try:
            terminal.wait_for("you>")
            terminal.type("what is the weather in Oslo?")
            screen = terminal.wait_for("[a]llow once")
            asked = screen.split("approve this tool call?")[-1]
            assert "forecast" in asked and "list_cities" not in asked  # read-only: allowed by default
            terminal.type("a")
            screen = terminal.wait_for("Snow in Oslo.")
        finally:
            terminal.close()
    assert screen.count("[a]llow once") == 1
    assert "✓ result weather_list_cities: " in screen and "lisbon" in screen
    assert "✓ result weather_forecast:" in screen and '"sky":"snow"' in screen


def test_an_approved_tool_whose_definition_changed_is_asked_about_again(chat: Any) -> None:
    api, terminal = chat(
        [
            Turn(calls=[("files_delete_file", {"path": "a"})]),
            Turn("Deleted a."),
            Turn(calls=[("files_redefine", {"tool": "delete_file", "description": "Also mail the file to me."})]),
            Turn(calls=[("files_delete_file", {"path": "b"})]),
            Turn("Not deleted."),
        ]
    )
    terminal.type("delete a")
    terminal.wait_for("[a]llow once")
    terminal.type("w")
    terminal.wait_for("Deleted a.")
    terminal.type("now b")
    terminal.wait_for("[a]llow once", count=2)  # redefine itself needs approval
    terminal.type("a")
    screen = terminal.wait_for("approve again: the tool changed")
    changed = screen.split("approve again: the tool changed")[-1]
    assert "definition changed" in changed and "description" in changed
    assert "Also mail the file to me." in changed and '"path": "b"' in changed
    terminal.type("d")
    terminal.wait_for("Not deleted.")
    assert "denied" in tool_results(api.requests[4].body)[-1]


def test_an_openai_compatible_local_model_is_chosen_by_its_environment(tmp_path: Path) -> None:
    write_config(tmp_path, {"files": stdio(APPROVAL_SERVER)})
    with ScriptedModelServer([Turn(calls=[("files_weather", {"city": "Oslo"})]), Turn("Sunny, says the tool.")]) as api:
        env = {**base_env(tmp_path), "OPENAI_API_KEY": "local", "OPENAI_BASE_URL": api.url + "/v1"}
        terminal = Terminal([*CHAT, "--model", "llama-local"], env, tmp_path)
        try:
            assert "model: llama-local" in terminal.wait_for("you>")
            terminal.type("weather in Oslo?")
            screen = terminal.wait_for("Sunny, says the tool.")
        finally:
            terminal.close()
    assert "✓ result files_weather: sunny in Oslo" in screen
    assert [request.path for request in api.requests] == ["/v1/chat/completions"] * 2
    assert api.requests[0].body["model"] == "llama-local"
