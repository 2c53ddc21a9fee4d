"""Anthropic's Messages API as a ``Model``, through the official ``anthropic`` SDK.

The conversation becomes Messages-API messages: the user's text, the assistant's text and
``tool_use`` blocks, and each tool's result as a ``tool_result`` block (text and base64
images; ``is_error: true`` for a failed call) in the next user message. Streaming reads
the raw events (``content_block_delta`` with ``text_delta`` or ``input_json_delta``) so
text surfaces as it comes and tool arguments are put together exactly as sent.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..protocol.types.v2026_07_28 import Tool
from ._model import (
    AssistantMessage,
    Conversation,
    ImagePart,
    ModelError,
    ModelSetupError,
    Sampling,
    TextDelta,
    ToolCall,
    ToolResult,
    ToolResults,
    UserMessage,
    parse_arguments,
    pick_model,
    result_parts,
)

try:
    import anthropic
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ModelSetupError(
        "AnthropicModel needs the anthropic package: pip install 'modelctx[host]' (or pip install anthropic)"
    ) from exc

__all__ = ["DEFAULT_ANTHROPIC_MODEL", "AnthropicModel"]

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"


def _client_from_env(timeout: float) -> anthropic.AsyncAnthropic:
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise ModelSetupError(
            "ANTHROPIC_API_KEY is not set: export ANTHROPIC_API_KEY=<your key> "
            "(and ANTHROPIC_BASE_URL for another endpoint), or pass client=anthropic.AsyncAnthropic(...)"
        )
    base_url = os.environ.get("ANTHROPIC_BASE_URL") or None
    return anthropic.AsyncAnthropic(api_key=key, base_url=base_url, timeout=timeout)


class AnthropicModel:
    """A ``Model`` over ``anthropic.AsyncAnthropic``.

    ``client``: a configured SDK client; without one, ``ANTHROPIC_API_KEY`` (required;
    ``ModelSetupError`` names it when missing) and ``ANTHROPIC_BASE_URL`` (optional) are
    read. ``model``: the argument, else ``MODELCTX_MODEL`` (only a ``claude...`` name:
    ``ModelSetupError`` for another provider's), else ``DEFAULT_ANTHROPIC_MODEL``.
    ``streaming``: read the answer as server-sent events (text deltas as they come) or in
    one response. ``timeout``: seconds the SDK waits on each connect and read."""

    provider = "anthropic"

    def __init__(
        self,
        client: anthropic.AsyncAnthropic | None = None,
        model: str | None = None,
        *,
        max_tokens: int = 4096,
        streaming: bool = True,
        timeout: float = 60.0,
    ) -> None:
        from ._providers import _env_model_for

        #: Why this provider was chosen, when the environment left a choice (``choose_model``).
        self.setup_note: str | None = None

        self.client = client if client is not None else _client_from_env(timeout)
        self.model = model or _env_model_for("anthropic", os.environ.get("MODELCTX_MODEL")) or DEFAULT_ANTHROPIC_MODEL
        self.max_tokens = max_tokens
        self.streaming = streaming
        self._known: list[str] | None = None

    async def stream(
        self, conversation: Conversation, tools: Sequence[Tool], sampling: Sampling | None = None
    ) -> AsyncIterator[TextDelta | AssistantMessage]:
        """Text deltas, then the assistant message; ``ModelError`` when the API fails.
        ``sampling``: a server's parameters for this one request."""
        request = self._request(conversation, tools, sampling)
        try:
            if self.streaming:
                async for item in self._streamed(request):
                    yield item
            else:
                message = await self.client.messages.create(**request)
                text, calls = _from_message(message)
                if text:
                    yield TextDelta(text)
                yield AssistantMessage(text, calls, _STOP_REASONS.get(message.stop_reason or ""))
        except anthropic.APIError as exc:
            model = request["model"]
            raise ModelError(f"the Anthropic Messages API failed for model {model!r}: {exc}") from exc

    async def model_for(self, hints: Sequence[str]) -> str | None:
        """The model of this API that a sampling request's hints name (the API's model
        list, read once), or None: none of them names one it has."""
        if self._known is None:
            try:
                self._known = [model.id async for model in self.client.models.list(limit=100)]
            except anthropic.APIError:
                self._known = []  # an endpoint without a model list: the chat's model
        return pick_model(hints, self._known)

    def _request(
        self, conversation: Conversation, tools: Sequence[Tool], sampling: Sampling | None = None
    ) -> dict[str, Any]:
        sampling = sampling or Sampling()
        request: dict[str, Any] = {
            "model": sampling.model or self.model,
            "max_tokens": sampling.max_tokens or self.max_tokens,
            "messages": to_messages(conversation),
        }
        if conversation.system:
            request["system"] = conversation.system
        if tools:
            request["tools"] = [to_tool(tool) for tool in tools]
        # A sampling request's temperature is not sent: the API version the SDK speaks
        # (2026-10-21, anthropic 2.x) removed temperature/top_p/top_k and answers 400 to
        # any of them, and MCP lets a client change what a server asked for.
        if sampling.stop_sequences:
            request["stop_sequences"] = list(sampling.stop_sequences)
        return request

    async def _streamed(self, request: dict[str, Any]) -> AsyncIterator[TextDelta | AssistantMessage]:
        texts: list[str] = []
        calls: dict[int, tuple[str, str, list[str]]] = {}  # block index -> id, name, JSON pieces
        stop: str | None = None
        events = await self.client.messages.create(**request, stream=True)
        async with events:
            async for event in events:
                if event.type == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        calls[event.index] = (block.id, block.name, [])
                    elif block.type == "text" and block.text:
                        texts.append(block.text)
                        yield TextDelta(block.text)
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        texts.append(delta.text)
                        yield TextDelta(delta.text)
                    elif delta.type == "input_json_delta" and event.index in calls:
                        calls[event.index][2].append(delta.partial_json)
                elif event.type == "message_delta":
                    stop = event.delta.stop_reason or stop
        called = tuple(_call(i, n, "".join(p)) for i, n, p in calls.values())
        yield AssistantMessage("".join(texts), called, _STOP_REASONS.get(stop or ""))


# The Messages API's stop reasons in MCP's words (client/sampling.mdx ``stopReason``).
_STOP_REASONS = {
    "end_turn": "endTurn",
    "max_tokens": "maxTokens",
    "stop_sequence": "stopSequence",
    "tool_use": "toolUse",
}


def _call(call_id: str, name: str, raw: str) -> ToolCall:
    arguments, error = parse_arguments(raw)
    return ToolCall(call_id, name, arguments, error)


def _from_message(message: Any) -> tuple[str, tuple[ToolCall, ...]]:
    texts = [block.text for block in message.content if block.type == "text"]
    calls = tuple(
        ToolCall(block.id, block.name, dict(block.input))
        if isinstance(block.input, dict)
        else ToolCall(block.id, block.name, {}, "its input is not a JSON object")
        for block in message.content
        if block.type == "tool_use"
    )
    return "".join(texts), calls


# -- the conversation in the Messages API's shape -------------------------------------------------


def to_tool(tool: Tool) -> dict[str, Any]:
    """A wire tool as a Messages-API tool definition."""
    definition: dict[str, Any] = {"name": tool.name, "input_schema": tool.input_schema}
    if isinstance(tool.description, str):
        definition["description"] = tool.description
    return definition


def to_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The messages, with consecutive messages of one role merged (tool results and the
    user's next text share a user message, as the API wants roles to alternate)."""
    messages: list[dict[str, Any]] = []
    for message in conversation.messages:
        role, content = _role_and_content(message)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(content)
        else:
            messages.append({"role": role, "content": content})
    return messages


def _role_and_content(message: UserMessage | AssistantMessage | ToolResults) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        return "user", [{"type": "text", "text": message.text}]
    if isinstance(message, AssistantMessage):
        content: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in message.tool_calls]
        return "assistant", content or [{"type": "text", "text": "(no answer)"}]
    return "user", [_tool_result(result) for result in message.results]


def _tool_result(result: ToolResult) -> dict[str, Any]:
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": part.media_type, "data": part.data}}
        if isinstance(part, ImagePart)
        else {"type": "text", "text": part.text or " "}
        for part in result_parts(result.result)
    ]
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call.id, "content": content}
    if result.is_error:
        block["is_error"] = True
    return block
