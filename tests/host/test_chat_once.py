"""``modelctx chat -p`` (one question, no one asked), ``--json``, ``/save`` and ``--resume``.

Each test runs ``python -m modelctx chat`` as a subprocess against real MCP servers on stdio
and the scripted model API on 127.0.0.1 (through the real ``anthropic`` SDK); what the
model was sent is read from the API's record, what a script sees from stdout, stderr and
the exit status.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.model_server import ScriptedModelServer, Turn
from tests.support.paths import SERVERS, SRC

pytest.importorskip("rich")
pytest.importorskip("anthropic")

APPROVAL_SERVER = SERVERS / "approval_server.py"
CHAT_SERVER = SERVERS / "chat_server.py"


def served(server: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(server)], "trusted": True}


def run(
    tmp_path: Path, script: list[Turn], *args: str, stdin: str | None = None, servers: dict[str, Any] | None = None
) -> tuple[subprocess.CompletedProcess[str], ScriptedModelServer]:
    (tmp_path / "host.json").write_text(json.dumps({"mcpServers": servers or {"files": served(APPROVAL_SERVER)}}))
    with ScriptedModelServer(script) as api:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "PYTHONPATH": os.environ.get("PYTHONPATH", str(SRC)),
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": api.url,
        }
        done = subprocess.run(
            [sys.executable, "-m", "modelctx", "chat", "--config", "host.json", *args],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=90,
        )
    return done, api


def results_sent(body: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
        for part in block["content"]
    ]


def test_p_answers_one_question_on_stdout_and_exits_0(tmp_path: Path) -> None:
    done, api = run(tmp_path, [Turn(calls=[("files_weather", {"city": "Oslo"})]), Turn("Sunny in Oslo.")], "-p", "weather?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Sunny in Oslo.\n"  # the answer only: calls are narrated on stderr
    assert "files_weather" in done.stderr
    assert results_sent(api.requests[1].body) == ["sunny in Oslo"]


def test_p_denies_a_tool_that_asks_and_says_which_allow_would_run_it(tmp_path: Path) -> None:
    script = [Turn(calls=[("files_delete_file", {"path": "/tmp/x"})]), Turn(calls=[("files_calls", {"tool": "delete_file"})]), Turn("Not deleted.")]
    done, api = run(tmp_path, script, "-p", "delete /tmp/x")
    assert done.returncode == 0, done.stderr
    assert "denied files/delete_file" in done.stderr and "--allow 'files_delete_file'" in done.stderr
    denied, counted = results_sent(api.requests[2].body)
    assert "denied" in denied and json.loads(counted) == {"result": 0}  # it never reached the server


@pytest.mark.parametrize("glob", ["files_delete_*", "files/delete_file"])
def test_p_runs_a_tool_that_asks_when_an_allow_glob_matches(tmp_path: Path, glob: str) -> None:
    script = [Turn(calls=[("files_delete_file", {"path": "/tmp/x"})]), Turn("Deleted.")]
    done, api = run(tmp_path, script, "-p", "delete /tmp/x", "--allow", "files_weather", "--allow", glob)
    assert done.returncode == 0, done.stderr
    assert results_sent(api.requests[1].body) == ["deleted /tmp/x"]
    assert "allowed by --allow: files/delete_file" in done.stderr


def test_json_prints_the_answer_and_every_tool_call(tmp_path: Path) -> None:
    script = [
        Turn(calls=[("files_weather", {"city": "Oslo"}), ("files_delete_file", {"path": "a"})]),
        Turn("Done."),
    ]
    done, _ = run(tmp_path, script, "-p", "go", "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["answer"] == "Done." and printed["stopped"] == "answered"
    weather, delete = printed["tool_calls"]
    assert weather == {
        "name": "files_weather", "server": "files", "tool": "weather", "arguments": {"city": "Oslo"},
        "is_error": False, "result": "sunny in Oslo",
    }  # fmt: skip
    assert delete["tool"] == "delete_file" and delete["is_error"] is True and "denied" in delete["result"]


def test_p_gives_the_model_the_url_a_tool_needs_opened(tmp_path: Path) -> None:
    script = [Turn(calls=[("chat_connect_bank", {})]), Turn("Open the page first.")]
    done, api = run(tmp_path, script, "-p", "connect", "--json", servers={"chat": served(CHAT_SERVER)})
    assert done.returncode == 0, done.stderr
    (call,) = json.loads(done.stdout)["tool_calls"]
    assert call["is_error"] is True and "https://bank.example.com/authorize?state=xyz" in call["result"]
    assert "https://bank.example.com/authorize?state=xyz" in results_sent(api.requests[1].body)[0]


def test_exit_statuses_follow_the_cli_table(tmp_path: Path) -> None:
    no_answer = [Turn(calls=[("files_weather", {"city": "Oslo"})])] * 10
    done, _ = run(tmp_path, no_answer, "-p", "loop forever")
    assert done.returncode == 1 and "Stopped after 10 model turns" in done.stdout
    done, _ = run(tmp_path, [], "-p", "the script is empty")  # the API answers 400
    assert done.returncode == 4 and "model error" in done.stderr and "Traceback" not in done.stderr
    done, _ = run(tmp_path, [], "--json")
    assert done.returncode == 2 and "--allow and --json go with -p" in done.stderr


def test_save_then_resume_goes_on_with_messages_tool_calls_and_results(tmp_path: Path) -> None:
    script = [Turn(calls=[("files_weather", {"city": "Oslo"})]), Turn("Sunny in Oslo.")]
    done, _ = run(tmp_path, script, stdin="weather in Oslo?\n/save talk.json\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "saved 4 messages to talk.json" in done.stdout
    saved = tmp_path / "talk.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    kept = json.loads(saved.read_text("utf-8"))
    assert [m["role"] for m in kept["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert kept["messages"][2]["results"][0]["result"]["content"] == [{"type": "text", "text": "sunny in Oslo"}]

    done, api = run(tmp_path, [Turn("Yes, still sunny.")], "--resume", "talk.json", "-p", "and tomorrow?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Yes, still sunny.\n"
    sent = api.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[1]["content"][-1]["type"] == "tool_use" and sent[1]["content"][-1]["name"] == "files_weather"
    assert results_sent(api.requests[0].body) == ["sunny in Oslo"]
    assert sent[-1]["content"] == [{"type": "text", "text": "and tomorrow?"}]

    done, api = run(tmp_path, [Turn("Still sunny.")], "--resume", "talk.json", stdin="and the day after?\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "(going on with 4 earlier messages)" in done.stdout and "Still sunny." in done.stdout
    assert len(api.requests[0].body["messages"]) == 5


def test_resume_of_a_file_that_is_not_a_saved_chat_is_one_line_and_status_2(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text('{"messages": []}')
    done, _ = run(tmp_path, [], "--resume", "other.json")
    assert done.returncode == 2
    assert done.stderr.strip() == 'modelctx chat: other.json is not a saved chat (no "format": "modelctx-chat"); give a file /save wrote'
    broken = {"format": "modelctx-chat", "version": 1, "messages": [
        {"role": "assistant", "text": "", "tool_calls": [{"id": "t1", "name": "x", "arguments": {}}]},
    ]}  # fmt: skip
    (tmp_path / "cut.json").write_text(json.dumps(broken))
    done, _ = run(tmp_path, [], "--resume", "cut.json")
    assert done.returncode == 2 and "the last message's tool calls have no results" in done.stderr
    done, _ = run(tmp_path, [], "--resume", "missing.json")
    assert done.returncode == 2 and "cannot read missing.json" in done.stderr
