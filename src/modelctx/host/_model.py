"""The model loop: a conversation, a model and a set of tools, run to a final answer.

Theory of operation. ``ModelLoop.run(conversation, text)`` adds the user's text, then
repeats: list the tools afresh (a server's list may have changed since the last turn),
ask the model (``Model.stream``: text deltas, then the whole assistant message; past a
budget of tool definitions it is shown a search tool in their place, ``_tool_search``), and if
the model asked for tools, run them and add their results; until the model answers
without a tool call, or it has taken ``max_steps`` turns. Each step surfaces as events
(``TextDelta``, ``ToolCallRequested``, ``ToolResultEvent``, ``Final``) for a UI.

Calls of one turn run in the model's order, except that consecutive calls to tools
annotated ``readOnlyHint`` run together (reading cannot disturb reading; a write between
two reads keeps them apart). Whatever goes wrong with a call (an unknown tool, arguments
that are not an object, a denied call, a server error) reaches the model as an error
result it can read, never as an exception that ends the conversation.

The messages here are neutral: the providers (``_anthropic``, ``_openai``) turn them into
their own wire formats, and a tool result's MCP content into ``result_parts``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import msgspec

from ..errors import LocalError, MCPError
from ..protocol.types.v2026_07_28 import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    Tool,
)
from ._tool_search import SEARCH_OWNER, ToolSearch

__all__ = [
    "AssistantMessage",
    "Conversation",
    "Final",
    "ImagePart",
    "Model",
    "ModelError",
    "ModelEvent",
    "ModelLoop",
    "ModelSetupError",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolCallRequested",
    "ToolResult",
    "ToolResultEvent",
    "ToolResults",
    "ToolSet",
    "UserMessage",
    "error_result",
    "parse_arguments",
    "Sampling",
    "result_parts",
    "sample",
    "sampling_request",
    "server_instructions",
]


class ModelSetupError(LocalError, RuntimeError):
    """A model cannot be used as configured: a key, a base URL or a model name is missing."""


class ModelError(LocalError):
    """The model's API failed or answered something the loop cannot use."""


# -- the conversation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for. ``error`` says why ``arguments`` could not be
    read (the model wrote something that is not a JSON object); such a call is not run."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None


@dataclass(frozen=True)
class UserMessage:
    text: str


@dataclass(frozen=True)
class AssistantMessage:
    """One model turn. ``stop_reason``: why the model stopped, in MCP's words
    ("endTurn", "maxTokens", "stopSequence", "toolUse"), when the API said."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """The MCP result of one call, as it goes back to the model."""

    call: ToolCall
    result: CallToolResult

    @property
    def is_error(self) -> bool:
        return self.result.is_error is True


@dataclass(frozen=True)
class ToolResults:
    """The results of every call of one assistant message, in the model's order."""

    results: tuple[ToolResult, ...]


Message = UserMessage | AssistantMessage | ToolResults


@dataclass
class Conversation:
    """What the model is shown: an optional system prompt and the messages so far."""

    system: str | None = None
    messages: list[Message] = field(default_factory=list)

    def add_user(self, text: str) -> None:
        self.messages.append(UserMessage(text))

    def add_assistant(self, message: AssistantMessage) -> None:
        self.messages.append(message)

    def add_tool_results(self, results: Sequence[ToolResult]) -> None:
        self.messages.append(ToolResults(tuple(results)))


# -- events -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    """A piece of the model's text, as it streams."""

    text: str


@dataclass(frozen=True)
class ToolCallRequested:
    """The model asked for ``name`` (the namespaced name it was shown); ``server`` and
    ``original`` say where it goes (None when no server offers that name; ``"(host)"``
    for the host's own tool search)."""

    id: str
    name: str
    server: str | None
    original: str | None
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolResultEvent:
    id: str
    name: str
    result: CallToolResult

    @property
    def is_error(self) -> bool:
        return self.result.is_error is True


@dataclass(frozen=True)
class Final:
    """The end of a run: the model's answer (``reason="answered"``), or a notice that
    the loop stopped after ``max_steps`` model turns (``reason="max_steps"``)."""

    text: str
    reason: Literal["answered", "max_steps"]
    steps: int


ModelEvent = TextDelta | ToolCallRequested | ToolResultEvent | Final


# -- what the loop needs from others ------------------------------------------------------------


@dataclass(frozen=True)
class Sampling:
    """What a server's ``sampling/createMessage`` asks of the model beyond its messages
    (client/sampling.mdx): ``max_tokens``, ``temperature``, ``stop_sequences``, and
    ``model``: the model to use instead of the chat's (a provider's ``model_for(hints)``
    picks it; None: the chat's)."""

    max_tokens: int | None = None
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    model: str | None = None


class Model(Protocol):
    """A model API. ``stream`` yields ``TextDelta``s as the text arrives, then exactly one
    ``AssistantMessage`` (the whole turn: text and tool calls); it raises ``ModelError``
    when the API fails. ``sampling``: a server's sampling parameters, for that request."""

    def stream(
        self, conversation: Conversation, tools: Sequence[Tool], sampling: Sampling | None = None
    ) -> AsyncIterator[TextDelta | AssistantMessage]: ...


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class ToolSet(Protocol):
    """The tools a model may call (``Host`` is one). ``tools()``: wire tools, names already
    namespaced, annotations as the server gave them. ``call_tool``: approval applied; a
    denied or unknown call comes back as an ``isError`` result; server and connection
    errors raise ``MCPError``, with a deadline. ``find_client_for(name)``: a handle whose
    ``name`` is the server's (``Host`` gives a ``GuardedClient``: its calls are approved
    too) and the server's own tool name; raises ``LookupError`` or ``MCPError`` when it
    cannot say. ``instructions()`` (optional): each server's instructions, by name, for
    the system prompt."""

    async def tools(self) -> list[Tool]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult: ...

    def find_client_for(self, name: str) -> tuple[_Named, str]: ...


# Bounds on what servers' instructions add to the system prompt: a server cannot crowd
# out the person's own prompt, nor make every request of the conversation expensive.
INSTRUCTIONS_PER_SERVER = 2048
INSTRUCTIONS_IN_ALL = 8192
TRUNCATED = "[... truncated]"


def server_instructions(instructions: dict[str, str]) -> str:
    """Servers' ``instructions`` as one block of a system prompt, each labelled by its
    server's name, in name order; each is cut to ``INSTRUCTIONS_PER_SERVER`` characters
    and the whole to ``INSTRUCTIONS_IN_ALL``, marked ``TRUNCATED`` where cut. "" for none."""
    if not instructions:
        return ""
    parts = ["The connected MCP servers gave these instructions for using their tools:"]
    for server in sorted(instructions):
        text = _clip(instructions[server].strip(), INSTRUCTIONS_PER_SERVER)
        parts.append(f'<server-instructions server="{server}">\n{text}\n</server-instructions>')
    return _clip("\n\n".join(parts), INSTRUCTIONS_IN_ALL)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED) - 1].rstrip() + " " + TRUNCATED


def system_prompt(conversation: Conversation, toolset: object) -> Conversation:
    """``conversation`` as the model sees it: its system prompt, then the instructions of
    the toolset's servers (``toolset.instructions()`` when it has one: ``Host`` does).
    The same messages, so nothing the model answers is lost; ``conversation`` itself is
    unchanged, so a server's instructions are never saved as the person's prompt."""
    source = getattr(toolset, "instructions", None)
    block = server_instructions(source()) if callable(source) else ""
    if not block:
        return conversation
    system = f"{conversation.system}\n\n{block}" if conversation.system else block
    return Conversation(system=system, messages=conversation.messages)


# -- the loop -----------------------------------------------------------------------------------


class ModelLoop:
    """Run user turns of ``conversation`` against ``model`` with the tools of ``toolset``.

    ``max_steps``: the most model turns one ``run`` takes; past it the run ends with a
    ``Final(reason="max_steps")`` notice (the tool results of the last turn are kept in
    the conversation, so a later run goes on from there)."""

    def __init__(
        self, toolset: ToolSet, model: Model, *, max_steps: int = 10, tool_search: ToolSearch | None = None
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, not {max_steps}")
        self.toolset = toolset
        self.model = model
        self.max_steps = max_steps
        #: Chooses the tools each request shows: all, or past a budget a search tool (``_tool_search``).
        self.tool_search = tool_search or ToolSearch.for_toolset(toolset)

    async def run(self, conversation: Conversation, text: str) -> AsyncIterator[ModelEvent]:
        """Add ``text`` as the user's message and run to a ``Final`` event (the last one)."""
        conversation.add_user(text)
        for step in range(1, self.max_steps + 1):
            tools = {tool.name: tool for tool in await self.toolset.tools()}
            reply: AssistantMessage | None = None
            shown = system_prompt(conversation, self.toolset)
            async for item in self.model.stream(shown, self.tool_search.offer(conversation, tools)):
                if isinstance(item, TextDelta):
                    yield item
                else:
                    reply = item
            if reply is None:
                raise ModelError("the model's stream ended without an assistant message")
            conversation.add_assistant(reply)
            if not reply.tool_calls:
                yield Final(reply.text, "answered", step)
                return
            results: list[ToolResult] = []
            for batch in _batches(reply.tool_calls, tools):
                for call in batch:
                    yield self._requested(call, tools)
                for call, result in zip(batch, await self._run_batch(batch, tools), strict=True):
                    results.append(ToolResult(call, result))
                    yield ToolResultEvent(call.id, call.name, result)
            conversation.add_tool_results(results)
        notice = (
            f"Stopped after {self.max_steps} model turns (max_steps={self.max_steps}) without a final "
            "answer; the last tool results are in the conversation but the model has not seen them. "
            "Send another message to go on, or allow more steps."
        )
        yield Final(notice, "max_steps", self.max_steps)

    def _requested(self, call: ToolCall, tools: dict[str, Tool]) -> ToolCallRequested:
        server: str | None = None
        original: str | None = None
        if self.tool_search.answers(call.name):
            server, original = SEARCH_OWNER, call.name
        elif call.name in tools:
            try:
                client, original = self.toolset.find_client_for(call.name)
                server = client.name
            except (LookupError, MCPError):
                pass  # the call itself will say what is wrong
        return ToolCallRequested(call.id, call.name, server, original, call.arguments)

    async def _run_batch(self, batch: list[ToolCall], tools: dict[str, Tool]) -> list[CallToolResult]:
        if len(batch) == 1:
            return [await self._call(batch[0], tools)]
        # A task group, so that a bug in one call (an exception that is not an MCPError)
        # cancels its siblings instead of leaving them running unseen.
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self._call(call, tools)) for call in batch]
        return [task.result() for task in tasks]

    async def _call(self, call: ToolCall, tools: dict[str, Tool]) -> CallToolResult:
        if call.error is not None:
            return error_result(f"the call to {call.name} was not run: {call.error}")
        if (searched := self.tool_search.answer(call)) is not None:
            return searched
        if call.name not in tools:
            known = ", ".join(sorted(tools)) or "none"
            return error_result(f"there is no tool named {call.name!r}; the tools are: {known}")
        try:
            return await self.toolset.call_tool(call.name, call.arguments)
        except MCPError as exc:
            return error_result(f"the call to {call.name} failed: {exc}")


def _read_only(tool: Tool | None) -> bool:
    annotations = tool.annotations if tool is not None else None
    return annotations is not None and getattr(annotations, "read_only_hint", None) is True


def _batches(calls: Sequence[ToolCall], tools: dict[str, Tool]) -> list[list[ToolCall]]:
    """Consecutive calls to read-only tools share a batch; every other call is one alone."""
    batches: list[list[ToolCall]] = []
    last_parallel = False
    for call in calls:
        parallel = call.error is None and _read_only(tools.get(call.name))
        if parallel and last_parallel:
            batches[-1].append(call)
        else:
            batches.append([call])
        last_parallel = parallel
    return batches


def error_result(text: str) -> CallToolResult:
    """An ``isError`` result carrying ``text``: how the loop tells the model a call failed."""
    return CallToolResult(content=[TextContent(text=text)], is_error=True, result_type="complete")


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The arguments a model wrote as JSON text: (the object, None), or ({}, why not)."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {}, f"its arguments are not valid JSON ({exc}); send a JSON object"
    if not isinstance(value, dict):
        return {}, f"its arguments must be a JSON object, not {type(value).__name__}"
    return value, None


# -- servers' sampling requests ----------------------------------------------------------------


def sampling_conversation(params: dict[str, Any]) -> Conversation:
    """A ``sampling/createMessage``'s messages (text only) as a conversation, its
    ``systemPrompt`` as the system prompt; what is not a message object is passed over."""
    system = params.get("systemPrompt")
    conversation = Conversation(system=system if isinstance(system, str) and system else None)
    for message in params.get("messages") or ():
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        text = "\n".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
        if message.get("role") == "assistant":
            conversation.add_assistant(AssistantMessage(text))
        else:
            conversation.add_user(text)
    return conversation


def sampling_request(params: dict[str, Any]) -> tuple[Conversation, Sampling, tuple[str, ...]]:
    """A ``sampling/createMessage``'s params as a conversation (text only, its
    ``systemPrompt`` as the system prompt), its ``Sampling`` parameters (``model`` left
    None) and the names its ``modelPreferences.hints`` give, in order."""
    conversation = sampling_conversation(params)
    max_tokens = params.get("maxTokens")
    temperature = params.get("temperature")
    stops = params.get("stopSequences")
    preferences = params.get("modelPreferences")
    hints = preferences.get("hints") if isinstance(preferences, dict) else None
    sampling = Sampling(
        max_tokens=max_tokens if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0 else None,
        temperature=float(temperature) if isinstance(temperature, int | float) and not isinstance(temperature, bool) else None,
        stop_sequences=tuple(s for s in stops if isinstance(s, str) and s) if isinstance(stops, list) else (),
    )
    names = tuple(
        hint["name"] for hint in hints or () if isinstance(hint, dict) and isinstance(hint.get("name"), str) and hint["name"]
    ) if isinstance(hints, list) else ()
    return conversation, sampling, names


async def sample(model: Model, params: dict[str, Any]) -> dict[str, Any]:
    """Answer a server's ``sampling/createMessage`` with ``model`` (no tools): the request's
    parameters applied, a model its hints name when the provider has one (the provider's
    ``model_for(hints)``), else ``model``'s own. Returns the ``CreateMessageResult``."""
    conversation, sampling, hints = sampling_request(params)
    chooser = getattr(model, "model_for", None)
    chosen = await chooser(hints) if callable(chooser) and hints else None
    sampling = Sampling(sampling.max_tokens, sampling.temperature, sampling.stop_sequences, chosen)
    reply: AssistantMessage | None = None
    async for item in model.stream(conversation, [], sampling):
        if isinstance(item, AssistantMessage):
            reply = item
    if reply is None:
        raise ModelError("the model's stream ended without an assistant message")
    return {
        "role": "assistant",
        "content": {"type": "text", "text": reply.text},
        "model": chosen or str(getattr(model, "model", "unknown")),
        "stopReason": reply.stop_reason or "endTurn",
    }


def pick_model(hints: Sequence[str], known: Sequence[str]) -> str | None:
    """The first of ``known`` that the first hint matching any names (a hint is a
    substring of a model name, client/sampling.mdx "Model hints"; case is ignored)."""
    for hint in hints:
        wanted = hint.lower()
        exact = [name for name in known if name.lower() == wanted]
        for name in exact or known:
            if wanted in name.lower():
                return name
    return None


# -- tool results as parts a provider can send ---------------------------------------------------

# What both providers accept as images (Anthropic's list; OpenAI's is the same four).
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    media_type: str
    data: str  # base64


def result_parts(result: CallToolResult) -> list[TextPart | ImagePart]:
    """The content of an MCP tool result as text and images a model API takes.

    Images of the types models read stay images; embedded text resources become text with
    their URI; structured content is added as JSON text unless a text block already
    carries the same JSON (servers SHOULD send both, server/tools.mdx)."""
    parts: list[TextPart | ImagePart] = [_part(block) for block in result.content]
    structured = result.structured_content
    if structured is not msgspec.UNSET:
        if not any(isinstance(p, TextPart) and _same_json(p.text, structured) for p in parts):
            parts.append(TextPart("structured content: " + json.dumps(structured, ensure_ascii=False)))
    return parts or [TextPart("(the tool returned no content)")]


def _part(block: Any) -> TextPart | ImagePart:
    if isinstance(block, TextContent):
        return TextPart(block.text)
    if isinstance(block, ImageContent):
        if block.mime_type in IMAGE_TYPES:
            return ImagePart(block.mime_type, block.data)
        return TextPart(f"[an image of type {block.mime_type} that this model cannot be shown]")
    if isinstance(block, AudioContent):
        return TextPart(f"[audio of type {block.mime_type} that this model cannot be given]")
    if isinstance(block, ResourceLink):
        about = f": {block.description}" if isinstance(block.description, str) else ""
        return TextPart(f"[resource link {block.name} <{block.uri}>{about}]")
    if isinstance(block, EmbeddedResource):
        return _resource_part(block.resource)
    return TextPart(f"[content of type {getattr(block, 'type', '?')} not shown]")


def _resource_part(resource: dict[str, Any]) -> TextPart | ImagePart:
    uri = resource.get("uri", "?")
    mime = resource.get("mimeType")
    if isinstance(resource.get("text"), str):
        return TextPart(f"resource {uri}:\n{resource['text']}")
    blob = resource.get("blob")
    if isinstance(blob, str) and mime in IMAGE_TYPES:
        return ImagePart(mime, blob)
    size = len(blob) * 3 // 4 if isinstance(blob, str) else 0
    return TextPart(f"[binary resource {uri} ({mime or 'unknown type'}, about {size} bytes) not shown]")


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False
