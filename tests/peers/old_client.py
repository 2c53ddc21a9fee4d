"""An old official MCP client (mcp 1.2.0 or 1.9.4) against a server; prints what it saw as JSON.

Run by tests/test_interop_old_clients.py with the old SDK's own interpreter (a venv under
.tools/, made by scripts/test.sh), never with ours:

    .tools/mcp-1.2.0/bin/python tests/peers/old_client.py stdio MARKER -- CMD ARG...
    .tools/mcp-1.9.4/bin/python tests/peers/old_client.py http MARKER URL
    .tools/mcp-1.2.0/bin/python tests/peers/old_client.py sse MARKER http://HOST:PORT/sse

It lists and calls tools (with progress), reads a resource, gets a prompt, asks for a
completion, calls a tool that elicits, and cancels a running call (the tool writes MARKER
when cancelled). Every pydantic model the old SDK parsed is checked for fields its schema
does not know (``model_extra``): their paths are reported under ``unknown``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from pydantic import BaseModel

DEADLINE = 20.0


def unknown_fields(value: Any, path: str, found: list[str]) -> None:
    """Paths of fields the old schema lacks, in ``value`` and everything inside it."""
    if isinstance(value, BaseModel):
        for key in value.model_extra or {}:
            found.append(f"{path}.{key}")
        for name in type(value).model_fields:
            unknown_fields(getattr(value, name), f"{path}.{name}", found)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            unknown_fields(item, f"{path}[{index}]", found)


class Recording(ClientSession):
    """A ClientSession that keeps the progress notifications it receives."""

    progress: list[dict[str, Any]]

    async def _received_notification(self, notification: Any) -> None:
        root = notification.root
        if isinstance(root, types.ProgressNotification):
            self.progress.append(root.params.model_dump(exclude_none=True))
        await super()._received_notification(notification)


def step(what: str) -> None:
    """Say on stderr what comes next: a test that fails shows where the client stopped."""
    print(f"old client: {what}", file=sys.stderr, flush=True)


def dump(model: BaseModel) -> Any:
    return json.loads(model.model_dump_json(exclude_none=True, by_alias=True))


async def exercise(session: Recording, marker: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    found: list[str] = []
    init = await session.initialize()
    unknown_fields(init, "initialize", found)
    seen["protocolVersion"] = init.protocolVersion
    seen["serverInfo"] = dump(init.serverInfo)
    seen["capabilities"] = dump(init.capabilities)

    step("tools/list")
    tools = await session.list_tools()
    unknown_fields(tools, "tools/list", found)
    seen["tools"] = {tool.name: dump(tool) for tool in tools.tools}
    for name, arguments in (("add", {"a": 2, "b": 3}), ("link", {}), ("sound", {})):
        step(f"tools/call {name}")
        result = await session.call_tool(name, arguments)
        unknown_fields(result, f"tools/call {name}", found)
        seen[f"call {name}"] = dump(result)

    # Progress, the 2024-11-05 way (every SDK version): a progressToken in _meta.
    request = types.CallToolRequest(
        method="tools/call",
        params=types.CallToolRequestParams(
            name="progress", arguments={"steps": 2}, _meta=types.RequestParams.Meta(progressToken="p1")
        ),
    )
    step("tools/call progress")
    result = await session.send_request(types.ClientRequest(request), types.CallToolResult)
    seen["call progress"] = dump(result)
    seen["progress"] = session.progress

    step("resources")
    resources = await session.list_resources()
    unknown_fields(resources, "resources/list", found)
    seen["resources"] = {r.name: dump(r) for r in resources.resources}
    if hasattr(session, "list_resource_templates"):
        templates = await session.list_resource_templates()
    else:  # mcp 1.2.0 has the method (2024-11-05) but no helper for it
        request = types.ListResourceTemplatesRequest(method="resources/templates/list")
        templates = await session.send_request(
            types.ClientRequest(request), types.ListResourceTemplatesResult
        )
    unknown_fields(templates, "resources/templates/list", found)
    seen["templates"] = {t.name: dump(t) for t in templates.resourceTemplates}
    read = await session.read_resource("legacy://greeting")  # type: ignore[arg-type]
    unknown_fields(read, "resources/read", found)
    seen["read"] = dump(read)

    step("prompts")
    prompts = await session.list_prompts()
    unknown_fields(prompts, "prompts/list", found)
    seen["prompts"] = {p.name: dump(p) for p in prompts.prompts}
    prompt = await session.get_prompt("review", {"code": "x = 1"})
    unknown_fields(prompt, "prompts/get", found)
    seen["prompt"] = dump(prompt)

    step("completion/complete")
    completion = await session.complete(types.PromptReference(type="ref/prompt", name="review"), {"name": "code", "value": "pr"})
    seen["completion"] = completion.completion.values

    step("tools/call ask (elicits)")
    try:
        result = await session.call_tool("ask", {})
        seen["elicit"] = {"result": dump(result)}
    except McpError as exc:
        seen["elicit"] = {"error": exc.error.message, "code": exc.error.code}

    step("cancel")
    seen["cancelled"] = await cancel(session, marker)
    seen["unknown"] = found
    return seen


async def cancel(session: Recording, marker: str) -> bool:
    """Start ``sleepy``, cancel it by notifications/cancelled, and see its handler stop."""
    request_id = session._request_id  # the id the next request gets (both SDK versions)
    started = Path(marker + ".started")
    async with anyio.create_task_group() as group:
        group.start_soon(session.call_tool, "sleepy", {"marker": marker})
        with anyio.fail_after(DEADLINE):
            while not started.exists():
                await anyio.sleep(0.02)
        params = {"requestId": request_id, "reason": "the test cancels"}
        if hasattr(types, "CancelledNotification"):
            notification = types.CancelledNotification(
                method="notifications/cancelled", params=types.CancelledNotificationParams(**params)
            )
            await session.send_notification(types.ClientNotification(notification))
        else:  # mcp 1.2.0 has no type for it (2024-11-05 has the notification): send it raw
            raw = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=params)
            await session._write_stream.send(types.JSONRPCMessage(raw))
        with anyio.move_on_after(DEADLINE):
            while not Path(marker).exists():
                await anyio.sleep(0.02)
        group.cancel_scope.cancel()
    return Path(marker).exists() and Path(marker).read_text() == "cancelled"


async def drain(messages: Any) -> None:
    async for _ in messages:
        pass


async def main() -> None:
    transport, marker, *target = sys.argv[1:]
    if transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        command, *args = target[1:] if target[0] == "--" else target
        env = dict(os.environ)
        if "MODELCTX_SERVER_PYTHONPATH" in env:  # the server's imports, not this client's
            env["PYTHONPATH"] = env.pop("MODELCTX_SERVER_PYTHONPATH")
        params = StdioServerParameters(command=command, args=args, env=env)
        opened: Any = stdio_client(params)
    elif transport == "sse":  # the deprecated HTTP+SSE transport (every SDK version)
        from mcp.client.sse import sse_client

        opened = sse_client(target[0])
    else:
        from mcp.client.streamable_http import streamablehttp_client

        opened = streamablehttp_client(target[0])
    with anyio.fail_after(4 * DEADLINE):
        async with opened as streams:
            async with Recording(streams[0], streams[1]) as session, anyio.create_task_group() as group:
                session.progress = []
                if hasattr(session, "incoming_messages"):
                    # mcp 1.2.0 hands every notification to this unbuffered stream as
                    # well, and its receive loop waits until someone reads it.
                    group.start_soon(drain, session.incoming_messages)
                seen = await exercise(session, marker)
                group.cancel_scope.cancel()
    print(json.dumps(seen))


if __name__ == "__main__":
    anyio.run(main)
