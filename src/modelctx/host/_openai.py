"""OpenAI-compatible Chat Completions as a ``Model``, through the official ``openai`` SDK.

This covers OpenAI and the local servers that speak the same API (Ollama, llama.cpp,
vLLM: set ``OPENAI_BASE_URL``). Tool results go back as ``tool`` messages, which carry
text only: a failed call says so in its first line, and images follow, once every tool
message of the turn is in, as one user message of ``image_url`` parts (data URLs), the
usual way to show a model what a tool returned.
"""

from __future__ import annotations

import json
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
    TextPart,
    ToolCall,
    ToolResult,
    ToolResults,
    UserMessage,
    parse_arguments,
    pick_model,
    result_parts,
)

try:
    import openai
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ModelSetupError(
        "OpenAIModel needs the openai package: pip install 'modelctx[host]' (or pip install openai)"
    ) from exc

__all__ = ["ERROR_PREFIX", "OpenAIModel"]

# The first line of a failed call's tool message: Chat Completions has no is_error flag.
ERROR_PREFIX = "ERROR: the tool call failed."


def _client_from_env(timeout: float) -> openai.AsyncOpenAI:
    key = os.environ.get("OPENAI_API_KEY")
    if not key:
        raise ModelSetupError(
            "OPENAI_API_KEY is not set: export OPENAI_API_KEY=<your key> (any value for a local server "
            "that takes none) and OPENAI_BASE_URL for another endpoint, or pass client=openai.AsyncOpenAI(...)"
        )
    base_url = os.environ.get("OPENAI_BASE_URL") or None
    return openai.AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout)


def _model_name(model: str | None) -> str:
    from ._providers import _env_model_for

    name = model or _env_model_for("openai", os.environ.get("MODELCTX_MODEL"))
    if not name:
        raise ModelSetupError(
            "no model name: export MODELCTX_MODEL=<model> (the name your endpoint serves, "
            "e.g. an OpenAI model or a local Ollama model) or pass model=..."
        )
    return name


class OpenAIModel:
    """A ``Model`` over ``openai.AsyncOpenAI`` Chat Completions.

    ``client``: a configured SDK client; without one, ``OPENAI_API_KEY`` (required;
    ``ModelSetupError`` names it when missing) and ``OPENAI_BASE_URL`` (optional) are read.
    ``model``: the argument, else ``MODELCTX_MODEL`` (one of them is required: endpoints
    differ). ``streaming``: read chunks as they come or one response. ``timeout``: seconds
    the SDK waits on each connect and read."""

    provider = "openai"

    def __init__(
        self,
        client: openai.AsyncOpenAI | None = None,
        model: str | None = None,
        *,
        max_tokens: int | None = None,
        streaming: bool = True,
        timeout: float = 60.0,
    ) -> None:
        # The key first: "--provider openai" without one is told that before anything else.
        self.client = client if client is not None else _client_from_env(timeout)
        self.model = _model_name(model)
        #: Why this provider was chosen, when the environment left a choice (``choose_model``).
        self.setup_note: str | None = None
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
                completion = await self.client.chat.completions.create(**request)
                text, calls = _from_completion(completion)
                if text:
                    yield TextDelta(text)
                yield AssistantMessage(text, calls, _STOP_REASONS.get(completion.choices[0].finish_reason or ""))
        except openai.APIError as exc:
            model = request["model"]
            raise ModelError(f"the Chat Completions API failed for model {model!r}: {exc}") from exc

    async def model_for(self, hints: Sequence[str]) -> str | None:
        """The model of this endpoint that a sampling request's hints name (its model
        list, read once), or None: none of them names one it serves."""
        if self._known is None:
            try:
                self._known = [model.id async for model in self.client.models.list()]
            except openai.APIError:
                self._known = []  # an endpoint without a model list: the chat's model
        return pick_model(hints, self._known)

    def _request(
        self, conversation: Conversation, tools: Sequence[Tool], sampling: Sampling | None = None
    ) -> dict[str, Any]:
        sampling = sampling or Sampling()
        request: dict[str, Any] = {"model": sampling.model or self.model, "messages": to_messages(conversation)}
        if tools:
            request["tools"] = [to_tool(tool) for tool in tools]
        max_tokens = sampling.max_tokens or self.max_tokens
        if max_tokens is not None:
            request["max_completion_tokens"] = max_tokens
        if sampling.temperature is not None:
            request["temperature"] = sampling.temperature
        if sampling.stop_sequences:
            request["stop"] = list(sampling.stop_sequences[:4])  # the API takes up to 4
        return request

    async def _streamed(self, request: dict[str, Any]) -> AsyncIterator[TextDelta | AssistantMessage]:
        texts: list[str] = []
        calls: dict[int, list[str]] = {}  # tool call index -> [id, name, arguments so far]
        stop: str | None = None
        chunks = await self.client.chat.completions.create(**request, stream=True)
        async with chunks:
            async for chunk in chunks:
                for choice in chunk.choices[:1]:
                    stop = choice.finish_reason or stop
                    delta = choice.delta
                    if delta.content:
                        texts.append(delta.content)
                        yield TextDelta(delta.content)
                    for piece in delta.tool_calls or ():
                        slot = calls.setdefault(piece.index, ["", "", ""])
                        slot[0] = piece.id or slot[0]
                        if piece.function is not None:
                            slot[1] += piece.function.name or ""
                            slot[2] += piece.function.arguments or ""
        called = tuple(_call(*calls[i]) for i in sorted(calls))
        yield AssistantMessage("".join(texts), called, _STOP_REASONS.get(stop or ""))


# Chat Completions' finish reasons in MCP's words (client/sampling.mdx ``stopReason``):
# "stop" is the end of a turn or a stop sequence, which the API does not tell apart.
_STOP_REASONS = {"stop": "endTurn", "length": "maxTokens", "tool_calls": "toolUse"}


def _call(call_id: str, name: str, raw: str) -> ToolCall:
    arguments, error = parse_arguments(raw)
    return ToolCall(call_id, name, arguments, error)


def _from_completion(completion: Any) -> tuple[str, tuple[ToolCall, ...]]:
    if not completion.choices:
        raise ModelError("the Chat Completions API answered with no choices")
    message = completion.choices[0].message
    calls = tuple(
        _call(call.id, call.function.name, call.function.arguments)
        for call in message.tool_calls or ()
        if call.type == "function"
    )
    return message.content or "", calls


# -- the conversation in the Chat Completions shape ----------------------------------------------


def to_tool(tool: Tool) -> dict[str, Any]:
    """A wire tool as a Chat Completions function tool."""
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
    if isinstance(tool.description, str):
        function["description"] = tool.description
    return {"type": "function", "function": function}


def to_messages(conversation: Conversation) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if conversation.system:
        messages.append({"role": "system", "content": conversation.system})
    for message in conversation.messages:
        if isinstance(message, UserMessage):
            messages.append({"role": "user", "content": message.text})
        elif isinstance(message, AssistantMessage):
            messages.append(_assistant(message))
        else:
            messages.extend(_tool_messages(message))
    return messages


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in message.tool_calls
        ]
    return wire


def _tool_messages(message: ToolResults) -> list[dict[str, Any]]:
    """A ``tool`` message per call, then one user message with the images they returned."""
    messages: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for result in message.results:
        text, shown = _tool_text(result)
        messages.append({"role": "tool", "tool_call_id": result.call.id, "content": text})
        if shown:
            images.append({"type": "text", "text": f"Images returned by the call {result.call.id} ({result.call.name}):"})
            images += [{"type": "image_url", "image_url": {"url": f"data:{i.media_type};base64,{i.data}"}} for i in shown]
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def _tool_text(result: ToolResult) -> tuple[str, list[ImagePart]]:
    parts = result_parts(result.result)
    images = [part for part in parts if isinstance(part, ImagePart)]
    lines = [part.text for part in parts if isinstance(part, TextPart)]
    if images:
        lines.append(f"[{len(images)} image(s): shown in the next user message]")
    if result.is_error:
        lines.insert(0, ERROR_PREFIX)
    return "\n".join(lines), images
