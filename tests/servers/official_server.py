"""A server written with the official MCP Python SDK (mcp==2.3.0), for our client's interop tests.

    python tests/servers/official_server.py                 # stdio
    python tests/servers/official_server.py http PORT       # Streamable HTTP on 127.0.0.1:PORT/mcp

It serves both eras, as the SDK does: 2026-07-28 (server/discover, input_required
results, subscriptions/listen) and the initialize handshake (2025-11-25, real
server-to-client requests). Every tool, resource and prompt here exists for a test in
tests/test_client_interop.py; see docs/development/official-sdk.md for how the SDK behaves.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import anyio
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from pydantic import BaseModel

MODERN = "2026-07-28"

mcp = MCPServer(
    "official-server",
    version="2.3.0",
    instructions="An official-SDK server for modelctx's client tests.",
    log_level="WARNING",
    # Lists stay fresh for a minute, so our client's cache has something to keep.
    cache_hints={"tools/list": CacheHint(ttl_ms=60_000, scope="public")},
)


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Weather(BaseModel):
    city: str
    celsius: float


@mcp.tool()
def weather(city: str) -> Weather:
    """Structured output: the SDK declares an outputSchema for it."""
    return Weather(city=city, celsius=21.5)


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@mcp.tool()
def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Form elicitation: input_required on 2026-07-28, elicitation/create in the handshake era."""
    return f"Hello, {who.name}!"


def ask_llm() -> Sample:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Say hi"))
    return Sample([message], max_tokens=20)


@mcp.tool()
def sample_it(res: Annotated[types.CreateMessageResult, Resolve(ask_llm)]) -> str:
    """Sampling through the client's handler."""
    return f"LLM said: {res.content.text} (model={res.model})"


def get_roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
def roots_it(roots: Annotated[types.ListRootsResult, Resolve(get_roots)]) -> str:
    """The client's roots, through its handler."""
    return "roots: " + ",".join(str(r.uri) for r in roots.roots)


@mcp.tool()
async def url_login(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """URL-mode elicitation, written by hand (the SDK has no resolver for it)."""
    if ctx.protocol_version != MODERN:
        answer = await ctx.elicit_url("Please log in", "https://example.com/login", elicitation_id="e1")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"url action={answer.action}")])
    if ctx.input_responses and "login" in ctx.input_responses:
        answer = ctx.input_responses["login"]
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"url action={answer.action}")])
    return types.InputRequiredResult(
        input_requests={
            "login": types.ElicitRequest(
                params=types.ElicitRequestURLParams(
                    mode="url", message="Please log in", url="https://example.com/login"
                )
            )
        },
        request_state="login-pending",
    )


@mcp.tool()
async def progress_tool(steps: int, ctx: Context) -> str:
    """Report ``steps`` progress notifications, then finish."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return "done"


@mcp.tool()
async def slow(seconds: float, marker: str = "") -> str:
    """Sleep; if cancelled first, write 'cancelled' to the file ``marker``."""
    if marker:
        Path(marker + ".started").write_text("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if marker:
            Path(marker).write_text("cancelled")
        raise
    return f"slept {seconds}"


def _added() -> str:
    """A tool added at run time by ``bump``."""
    return "added"


@mcp.tool()
async def bump(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and tell clients the tool list changed, in either era."""
    mcp.add_tool(_added, name=name)
    if ctx.protocol_version == MODERN:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


@mcp.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Tell ``subscriptions/listen`` streams that ``uri`` changed (2026-07-28 only)."""
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


@mcp.resource("probe://hello", mime_type="text/plain")
def hello() -> str:
    return "hello resource"


@mcp.resource("probe://item/{id}", mime_type="text/plain")
def item(id: str) -> str:
    return f"item {id}"


@mcp.prompt()
def review(code: str) -> str:
    """Review code."""
    return f"Please review:\n{code}"


@mcp.completion()
async def complete(ref, argument, context):
    if argument.name == "id":
        return types.Completion(values=[v for v in ("apple", "apricot", "banana") if v.startswith(argument.value)])
    return None


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
