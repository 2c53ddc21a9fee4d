"""The client commands against the reference server of the MCP project,
``@modelcontextprotocol/server-everything`` (a handshake-era server, in Node), on stdio.

scripts/test.sh installs it and exports MODELCTX_EVERYTHING_BIN; without it these skip.
"""

from __future__ import annotations

import base64
import json
import os
import shlex

import pytest

from tests.support.cli_run import modelctx

EVERYTHING = os.environ.get("MODELCTX_EVERYTHING_BIN")
pytestmark = pytest.mark.skipif(
    not EVERYTHING, reason="@modelcontextprotocol/server-everything is not installed (MODELCTX_EVERYTHING_BIN)"
)


def everything(*args: str):
    assert EVERYTHING is not None
    return modelctx(*args, "--stdio", shlex.quote(EVERYTHING))


def as_json(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_discover_finds_a_handshake_era_server():
    found = as_json(everything("discover", "--json"))
    assert found["era"] == "handshake"
    assert found["serverInfo"]["name"] == "mcp-servers/everything"
    assert {"tools", "prompts", "resources", "completions"} <= set(found["capabilities"])


def test_tools_and_call():
    tools = {tool["name"] for tool in as_json(everything("tools", "--json"))["tools"]}
    echoed = everything("call", "echo", "message=hi there")
    summed = everything("call", "get-sum", "a=2", "b=3")

    assert {"echo", "get-sum", "get-tiny-image"} <= tools
    assert echoed.returncode == 0 and echoed.stdout == "Echo: hi there\n", echoed.stderr
    assert summed.stdout == "The sum of 2 and 3 is 5.\n"


def test_an_image_result_is_named_for_people_and_whole_in_json():
    human = everything("call", "get-tiny-image")
    machine = as_json(everything("call", "get-tiny-image", "--json"))

    assert "[image image/png, about" in human.stdout
    image = next(block for block in machine["content"] if block["type"] == "image")
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG")


def test_a_long_running_tool_with_progress_completes():
    result = everything("call", "trigger-long-running-operation", "duration=1", "steps=2")
    assert result.returncode == 0, result.stderr
    assert "Long running operation completed" in result.stdout
    assert result.stderr == ""  # piped: no spinner


def test_resources_read_prompts_prompt_and_complete():
    listed = as_json(everything("resources", "--json"))
    uri = listed["resources"][0]["uri"]
    read = as_json(everything("read", uri, "--json"))
    prompts = {p["name"] for p in as_json(everything("prompts", "--json"))["prompts"]}
    prompt = everything("prompt", "args-prompt", "city=Paris")
    departments = everything("complete", "--prompt", "completable-prompt", "department", "")

    assert listed["resourceTemplates"]
    assert read["contents"][0]["uri"] == uri
    assert {"simple-prompt", "args-prompt", "completable-prompt"} <= prompts
    assert prompt.stdout.startswith("user: ") and "Paris" in prompt.stdout
    assert "Engineering" in departments.stdout.splitlines()


def test_an_elicitation_is_declined_off_a_terminal():
    declined = everything("call", "trigger-elicitation-request")
    assert declined.returncode == 0, declined.stderr
    assert "declined" in declined.stderr and "decline" in declined.stdout


def test_an_unknown_tool_is_reported_as_the_server_reports_it():
    result = everything("call", "no-such-tool")
    # server-everything answers an unknown tool with an isError result, not a JSON-RPC error
    assert result.returncode == 1, result.stderr
    assert "Tool no-such-tool not found" in result.stdout
