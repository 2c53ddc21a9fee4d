"""A chat's conversation as a JSON file: ``/save FILE`` writes it, ``--resume FILE`` reads it.

The file holds what the model is shown, in order: the user's messages, the assistant's
text and tool calls, and each call's MCP result as the server sent it::

    {"format": "modelctx-chat", "version": 1, "system": null, "messages": [
      {"role": "user", "text": "..."},
      {"role": "assistant", "text": "...", "tool_calls": [{"id": "...", "name": "...", "arguments": {...}}]},
      {"role": "tool", "results": [{"call_id": "...", "name": "...", "result": {CallToolResult}}]}]}

A file is written with mode 0600 (a conversation may hold what tools returned), replacing
a file of that name at once (a temporary file renamed). ``load`` checks the shape and
raises ``ConversationFileError`` naming the first thing wrong, so a resumed chat never
starts with messages the model API would refuse.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec

from ..errors import LocalError
from ..protocol.types.v2026_07_28 import CallToolResult
from ._model import AssistantMessage, Conversation, Message, ToolCall, ToolResult, ToolResults, UserMessage

__all__ = ["FORMAT", "ConversationFileError", "dump", "load", "save"]

FORMAT = "modelctx-chat"
VERSION = 1


class ConversationFileError(LocalError, ValueError):
    """A conversation file that cannot be read back; the message names the file and why."""


def dump(conversation: Conversation) -> dict[str, Any]:
    """The conversation as the JSON value of a file."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "system": conversation.system,
        "messages": [_message(message) for message in conversation.messages],
    }


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "text": message.text}
    if isinstance(message, AssistantMessage):
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
        return {"role": "assistant", "text": message.text, "tool_calls": calls}
    return {
        "role": "tool",
        "results": [
            {"call_id": r.call.id, "name": r.call.name, "result": msgspec.to_builtins(r.result)}
            for r in message.results
        ],
    }


def save(conversation: Conversation, path: str | os.PathLike[str]) -> Path:
    """Write the conversation to ``path`` (mode 0600); returns the path written."""
    target = Path(path).expanduser()
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(dump(conversation), file, ensure_ascii=False, indent=1, default=str)
            file.write("\n")
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target


def load(path: str | os.PathLike[str]) -> Conversation:
    """The conversation saved in ``path``; raises ``ConversationFileError`` (a file that
    is not one, or not in order) or ``OSError`` (it cannot be read)."""
    text = Path(path).expanduser().read_text("utf-8")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConversationFileError(f"{path} is not JSON ({exc}); give a file that /save wrote") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConversationFileError(f'{path} is not a saved chat (no "format": "{FORMAT}"); give a file /save wrote')
    if data.get("version") != VERSION:
        raise ConversationFileError(f"{path} is a saved chat of version {data.get('version')!r}; this modelctx reads {VERSION}")
    system = data.get("system")
    conversation = Conversation(system=system if isinstance(system, str) else None)
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise ConversationFileError(f'{path}: "messages" must be a list')
    for number, raw in enumerate(messages, 1):
        try:
            conversation.messages.append(_read(raw))
        except (KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
            raise ConversationFileError(f"{path}: message {number} cannot be read ({exc})") from None
    _check_order(conversation, path)
    return conversation


def _read(raw: Any) -> Message:
    role = raw["role"]
    if role == "user":
        return UserMessage(_text(raw["text"]))
    if role == "assistant":
        calls = tuple(ToolCall(_text(c["id"]), _text(c["name"]), dict(c["arguments"])) for c in raw["tool_calls"])
        return AssistantMessage(_text(raw["text"]), calls)
    if role == "tool":
        results = []
        for item in raw["results"]:
            call = ToolCall(_text(item["call_id"]), _text(item["name"]), {})
            results.append(ToolResult(call, msgspec.convert(item["result"], CallToolResult)))
        return ToolResults(tuple(results))
    raise ValueError(f"role {role!r} is not user, assistant or tool")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _check_order(conversation: Conversation, path: object) -> None:
    """Each assistant message with tool calls is followed by their results, and only then."""
    expected: list[str] | None = None
    for number, message in enumerate(conversation.messages, 1):
        if expected is not None:
            got = [r.call.id for r in message.results] if isinstance(message, ToolResults) else None
            if got != expected:
                raise ConversationFileError(f"{path}: message {number} should hold the results of calls {expected}")
            expected = None
        elif isinstance(message, ToolResults):
            raise ConversationFileError(f"{path}: message {number} holds tool results no call asked for")
        elif isinstance(message, AssistantMessage) and message.tool_calls:
            expected = [call.id for call in message.tool_calls]
    if expected is not None:
        raise ConversationFileError(f"{path}: the last message's tool calls have no results")
