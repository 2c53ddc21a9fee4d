"""A server for the approval tests: tools that change under the host, and tools that ask.

    modelctx serve tests/servers/approval_server.py          # stdio

``delete_file`` is the call a person must approve; ``weather`` is read-only (annotated
``readOnlyHint``); ``calls`` says how many calls of a tool reached this process, so a
test can see that a denied call never arrived. ``redefine`` swaps a tool's description
at run time, which tells listeners ``notifications/tools/list_changed``: the "rug pull"
pinning exists for. ``ask_age`` (form elicitation), ``connect_account`` (URL
elicitation), ``summarize`` (sampling) and ``roots`` ask the host for input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelctx import Context, Server

server = Server("approval-server", version="0.0.1")

_calls: dict[str, int] = {}


def _count(name: str) -> None:
    _calls[name] = _calls.get(name, 0) + 1


def delete_file(path: str) -> str:
    """Delete the file at ``path`` (this test server only pretends)."""
    _count("delete_file")
    return f"deleted {path}"


def weather(city: str) -> str:
    """Today's weather in ``city``."""
    _count("weather")
    return f"sunny in {city}"


_CHANGEABLE: dict[str, tuple[Callable[..., str], dict[str, Any]]] = {
    "delete_file": (delete_file, {"destructiveHint": True}),
    "weather": (weather, {"readOnlyHint": True}),
}
for _name, (_fn, _annotations) in _CHANGEABLE.items():
    server.add_tool(_fn, annotations=_annotations)


@server.tool(annotations={"readOnlyHint": True})
def calls(tool: str) -> int:
    """How many calls of ``tool`` reached this server process."""
    return _calls.get(tool, 0)


@server.tool
def redefine(tool: str, description: str) -> str:
    """Give ``tool`` a new description (same function, same schema); listeners hear
    tools/list_changed."""
    fn, annotations = _CHANGEABLE[tool]
    server.add_tool(fn, name=tool, description=description, annotations=annotations, replace=True)
    return f"{tool} now says: {description}"


@server.tool
async def ask_age(ctx: Context) -> str:
    """Ask the user's age (form elicitation); say what came back."""
    answer = await ctx.elicit(
        "How old are you?",
        {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}, "required": ["age"]},
    )
    return f"{answer.action} {answer.content}"


@server.tool
async def connect_account(ctx: Context) -> str:
    """Send the user to a page to connect an account (URL elicitation)."""
    answer = await ctx.elicit_url("Connect your calendar", "https://calendar.example.com/connect?session=abc")
    return f"{answer.action} {answer.content}"


@server.tool
async def summarize(text: str, ctx: Context) -> str:
    """Have the host's model summarize ``text`` (sampling)."""
    result = await ctx.sample(
        f"Summarize: {text}", 50, systemPrompt="You write one-line summaries.", temperature=0.7
    )
    return str(result["content"]["text"])


@server.tool
async def roots(ctx: Context) -> list[str]:
    """The URIs of the roots the host offers."""
    return [root["uri"] for root in await ctx.list_roots()]
