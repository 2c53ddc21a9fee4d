"""Pieces of ``modelctx chat`` that need no terminal: reading typed form fields and prompt
arguments, and a server's sampling request as a conversation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("rich")

from modelctx.host._chat import (  # noqa: E402
    NO_KEY_MESSAGE,
    field_hint,
    make_model,
    parse_field,
    parse_prompt_arguments,
    sampling_conversation,
)
from modelctx.host._model import AssistantMessage, ModelSetupError, UserMessage  # noqa: E402


@pytest.mark.parametrize(
    ("prop", "typed", "value"),
    [
        ({"type": "integer"}, "42", 42),
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "boolean"}, "y", True),
        ({"type": "boolean"}, "no", False),
        ({"type": "string"}, "Ada", "Ada"),
        ({"type": "string", "enum": ["red", "blue"]}, "blue", "blue"),
        ({"type": "string", "oneOf": [{"const": "s", "title": "Small"}]}, "s", "s"),
        ({"type": "array", "items": {"enum": ["a", "b", "c"]}}, "a, c", ["a", "c"]),
        ({"type": "integer", "default": 7}, "", 7),
    ],
)
def test_a_typed_answer_becomes_the_fields_value(prop: dict[str, object], typed: str, value: object) -> None:
    assert parse_field(typed, prop, required=True) == value


@pytest.mark.parametrize(
    ("prop", "typed", "says"),
    [
        ({"type": "integer"}, "old", "type an integer"),
        ({"type": "number", "minimum": 0}, "-1", "the least is 0"),
        ({"type": "integer", "maximum": 10}, "11", "the most is 10"),
        ({"type": "boolean"}, "maybe", "answer y or n"),
        ({"type": "string", "enum": ["red", "blue"]}, "green", "choose one of red, blue"),
        ({"type": "array", "items": {"enum": ["a", "b"]}}, "a, z", "z: choose from a, b"),
        ({"type": "string"}, "", "this field is required"),
    ],
)
def test_a_wrong_answer_says_what_to_type(prop: dict[str, object], typed: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_field(typed, prop, required=True)


def test_an_optional_field_left_empty_is_left_out() -> None:
    from modelctx.host._chat_forms import SKIPPED

    assert parse_field("", {"type": "string"}, required=False) is SKIPPED


def test_the_hint_names_the_type_choices_and_default() -> None:
    assert field_hint({"type": "integer"}, True) == "(integer)"
    assert field_hint({"type": "boolean", "default": False}, False) == "(y/n; default n)"  # what one would type
    assert field_hint({"type": "string", "enum": ["a", "b"]}, False) == "(one of a, b; optional)"


def test_a_default_is_shown_as_json_not_as_python() -> None:
    assert field_hint({"type": "array", "items": {"type": "string"}, "default": ["x", "y"]}, False) == (
        '(comma-separated; default ["x", "y"])'
    )
    assert field_hint({"type": "number", "default": 1.5}, False) == "(number; default 1.5)"
    assert field_hint({"type": "string", "default": "Ada"}, False) == "(string; default Ada)"


HEROES = {"type": "string", "oneOf": [{"const": "hero-1", "title": "Ada Lovelace"}, {"const": "hero-2", "title": "Alan Turing"}]}
TEAM = {"type": "array", "items": {"anyOf": [{"const": "r", "title": "Red"}, {"const": "b", "title": "Blue"}]}}


def test_a_titled_enum_is_offered_by_its_titles_and_answered_with_its_values() -> None:
    assert field_hint({**HEROES, "default": "hero-2"}, True) == "(one of Ada Lovelace, Alan Turing; default Alan Turing)"
    assert field_hint({**TEAM, "default": ["b"]}, False) == "(comma-separated, from Red, Blue; default Blue)"
    assert parse_field("ada lovelace", HEROES, required=True) == "hero-1"  # a title, in any case
    assert parse_field("hero-2", HEROES, required=True) == "hero-2"  # or the value itself
    assert parse_field("Blue, red", TEAM, required=True) == ["b", "r"]
    with pytest.raises(ValueError, match="choose one of Ada Lovelace, Alan Turing"):
        parse_field("Grace Hopper", HEROES, required=True)


def test_prompt_arguments_are_name_value_words_with_shell_quoting() -> None:
    assert parse_prompt_arguments("city=Oslo note='two words'") == {"city": "Oslo", "note": "two words"}
    with pytest.raises(ValueError, match="name=value"):
        parse_prompt_arguments("Oslo")


def test_a_sampling_request_becomes_a_conversation() -> None:
    conversation = sampling_conversation(
        {
            "systemPrompt": "Be brief.",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Summarize: x"}},
                {"role": "assistant", "content": [{"type": "text", "text": "x."}]},
            ],
            "maxTokens": 50,
        }
    )
    assert conversation.system == "Be brief."
    assert conversation.messages == [UserMessage("Summarize: x"), AssistantMessage("x.")]


def test_the_provider_is_the_one_whose_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelSetupError) as raised:
        make_model(None, None, {})
    assert str(raised.value) == NO_KEY_MESSAGE
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    chosen = make_model(None, "local-model", os.environ)
    assert type(chosen).__name__ == "OpenAIModel" and chosen.model == "local-model"  # type: ignore[attr-defined]


def test_a_question_withdrawn_says_so_and_the_next_line_goes_to_the_next_question() -> None:
    """An approval that times out (Approvals' deadline) is denied on the screen, and the
    line typed afterwards is the answer to whatever is asked next, not to the old question."""
    import asyncio
    import io

    from rich.console import Console

    from modelctx.host._approval import ApprovalRequest
    from modelctx.host._chat import LineReader, TerminalUI
    from modelctx.protocol.types.v2026_07_28 import Tool

    read_end, write_end = os.pipe()
    screen = io.StringIO()
    console = Console(file=screen, width=120)
    tool = Tool(name="delete_file", input_schema={"type": "object"})
    request = ApprovalRequest("files", "python files.py", tool, {"path": "x"})

    async def scenario() -> str | None:
        ui = TerminalUI(console, LineReader(console, os.fdopen(read_end)))
        try:
            await asyncio.wait_for(ui.approve(request), 0.2)
        except TimeoutError:
            pass
        os.write(write_end, b"hello\n")
        return await asyncio.wait_for(ui.reader.read("you> "), 10)

    try:
        assert asyncio.run(scenario()) == "hello"
    finally:
        os.close(write_end)
    shown = screen.getvalue()
    assert "delete_file" in shown and '"path": "x"' in shown
    assert "(no answer in time: denied)" in shown


def test_a_configuration_that_cannot_be_read_is_one_line_and_status_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "bad.json").write_text('{"mcpServers": {"x": {"command": "a", "url": "http://127.0.0.1:1/mcp"}}}')
    env = {**os.environ, "ANTHROPIC_API_KEY": "k"}
    for config, says in (("missing.json", "cannot read the configuration"), ("bad.json", "give either 'command'")):
        run = subprocess.run(
            [sys.executable, "-m", "modelctx", "chat", "--config", config],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 2, run.stderr
        assert run.stderr.startswith("modelctx chat: ") and says in run.stderr and "Traceback" not in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
