"""A server run as several replicas sharing one Redis, for ``tests/test_scale_bus.py``.

Served by ``modelctx serve tests/servers/replica_server.py --http --port P --redis URL``,
twice. Its tools change what the server offers (so every kind of change event can be
raised on one replica and heard on the other) and mint a ``requestState``.
"""

from __future__ import annotations

import itertools

from modelctx import Context, Server

server = Server("replica")
_numbers = itertools.count(1)


@server.resource("notes://a")
def note_a() -> str:
    return "a note"


@server.prompt
def hello() -> str:
    """A prompt, so that prompts are served (and their list can change)."""
    return "hello"


@server.tool
async def change_tools() -> str:
    """Register one more tool: tools/list_changed."""
    name = f"extra_tool_{next(_numbers)}"
    server.add_tool(lambda: "extra", name=name)
    return name


@server.tool
async def change_prompts() -> str:
    """Register one more prompt: prompts/list_changed."""
    name = f"extra_prompt_{next(_numbers)}"
    server.prompt(lambda: "extra", name=name)
    return name


@server.tool
async def change_resources() -> str:
    """Register one more resource: resources/list_changed."""
    uri = f"notes://extra-{next(_numbers)}"
    server.resource(uri, name=uri)(lambda: "extra")
    return uri


@server.tool
async def touch(uri: str) -> str:
    """Say that ``uri`` changed: notifications/resources/updated to its subscribers."""
    server.resource_updated(uri)
    return uri


@server.tool
async def slow_job(steps: int, ctx: Context) -> str:
    """One step per attempt, asking to be retried (a requestState alone) until done."""
    done = (ctx.retry_state or {}).get("done", 0)
    if done < steps:
        ctx.retry_later({"done": done + 1})
    return f"finished {done} steps"
