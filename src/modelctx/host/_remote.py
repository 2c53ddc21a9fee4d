"""``RemoteServer``: another MCP server, reached through a ``Client``, as a ``Server``.

::

    shop = Server("shop")
    shop.mount(RemoteServer("python billing.py"), prefix="billing")   # or a URL, or a Client
    shop.run()

Theory of operation. A static proxy: while it runs (its lifespan, which a parent's
mount holds inside its own), it keeps one client connection open, lists the remote's
tools, resources, templates and prompts and registers a forwarder for each in its own
registry; a ``list_changed`` from the remote lists that kind again. So a mount of it is
an ordinary mount (``server/_compose.py``): the parent's dispatcher calls the forwarder
directly, and the forwarder makes the one request to the remote. Served on its own
(``RemoteServer(url).run()``) it is a one-upstream proxy.

- **Calls** forward the arguments as they came (the remote checks them against its own
  schema) and relay the result as the remote sent it (content blocks, structured
  content, ``isError``), and the remote's progress to the caller.
- **Errors**: what the remote answers with a JSON-RPC error reaches the caller as that
  error; a remote that cannot be reached is a tool error naming the error's class only
  (its text, which may quote the remote's stderr, goes to the log).
- **Not relayed**: what the remote asks while a call runs (elicitation, sampling, roots:
  the client declares no such capability, so a well-behaved remote does not ask), its
  log messages, completions, resource subscriptions. The gateway (``_gateway.py``) relays
  those; this is the small static case.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec

from ..client import Client, ListChanged, Target
from ..errors import LocalError, RegistrationError, ToolError
from ..server import Context, Server, ToolResult
from ..server._registry import PromptDef, ResourceDef, TemplateDef, ToolDef
from ..server._signature import Signature
from ..server._uri_template import UriTemplate

__all__ = ["RemoteServer"]

log = logging.getLogger("modelctx.host")

_SERVER_INFO = "io.modelcontextprotocol/serverInfo"


class RemoteServer(Server):
    """The tools, resources and prompts of the server ``target`` names (a URL, a
    command, a ``Client``), listed when it starts and again at each ``list_changed``."""

    def __init__(self, target: Client | Target, *, name: str | None = None, **options: Any) -> None:
        client = target if isinstance(target, Client) else Client(target)
        super().__init__(name or client.name, lifespan=_connected, **options)
        self.client = client
        self._follower: asyncio.Task[None] | None = None

    async def refresh(self, kind: str) -> None:
        """List ``kind`` ("tools", "resources" with templates, "prompts") of the remote
        again and register a forwarder for each item; announces the change once."""
        registry = self.registry
        if kind == "tools":
            tools = await self.client.tools() if self.client.server_capabilities.tools else []
            registry.tools.clear()
            for tool in tools:
                self._add(registry.tools, tool.name, self._tool, tool)
        elif kind == "prompts":
            prompts = await self.client.prompts() if self.client.server_capabilities.prompts else []
            registry.prompts.clear()
            for prompt in prompts:
                self._add(registry.prompts, prompt.name, self._prompt, prompt)
        elif kind == "resources":
            offered = self.client.server_capabilities.resources
            resources = await self.client.resources() if offered else []
            templates = await self.client.resource_templates() if offered else []
            registry.resources.clear()
            registry.templates.clear()
            for resource in resources:
                self._add(registry.resources, resource.uri, self._resource, resource)
            for template in templates:
                self._add(registry.templates, template.uri_template, self._template, template)
        registry.changed(kind)

    def _add(self, items: dict[str, Any], key: str, build: Callable[[dict[str, Any]], Any], item: Any) -> None:
        """``build(definition)`` registered under ``key``, or a warning saying why not."""
        try:
            items[key] = build(msgspec.to_builtins(item))
        except RegistrationError as exc:  # a name or schema this side cannot serve
            log.warning("remote server %r: %s; left out", self.name, exc)

    def _tool(self, definition: dict[str, Any]) -> ToolDef:
        client, name = self.client, definition["name"]

        async def forward(ctx: Context, **arguments: Any) -> ToolResult:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                await ctx.report_progress(done, total, message)

            try:
                result = await client.call_tool_raw(name, arguments, progress=progress)
            except LocalError as exc:
                # Its text may quote the remote's stderr: the log has it, the caller does not.
                log.warning("remote server %r: calling %r failed: %s", self.name, name, exc)
                raise ToolError(
                    f"the server behind {self.name!r} could not be reached ({type(exc).__name__}); "
                    "the server log says why"
                ) from None
            meta = {k: v for k, v in (result.get("_meta") or {}).items() if k != _SERVER_INFO}
            return ToolResult(
                content=result.get("content") or [],
                structured=result.get("structuredContent", msgspec.UNSET),
                is_error=bool(result.get("isError")),
                meta=meta or None,
            )

        # Arguments are not checked here: the remote checks them against its own schema.
        tool = ToolDef.build(forward, Context, name=name, structured_output=False)
        tool.definition = definition
        return tool

    def _prompt(self, definition: dict[str, Any]) -> PromptDef:
        client, name = self.client, definition["name"]

        async def forward(**arguments: Any) -> Any:
            result = msgspec.to_builtins(await client.get_prompt(name, arguments or None))
            return {"messages": result.get("messages", [])}

        return PromptDef(name, forward, Signature(forward, name, Context, "prompt"), definition, True)

    def _resource(self, definition: dict[str, Any]) -> ResourceDef:
        uri = definition["uri"]

        async def forward() -> Any:
            return await self._read(uri)

        signature = Signature(forward, uri, Context, "resource")
        return ResourceDef(uri, forward, signature, definition, definition.get("mimeType"), True)

    def _template(self, definition: dict[str, Any]) -> TemplateDef:
        template = UriTemplate(definition["uriTemplate"])

        async def forward(**variables: Any) -> Any:
            return await self._read(template.expand(variables))

        signature = Signature(forward, template.template, Context, "resource template")
        return TemplateDef(template, forward, signature, definition, definition.get("mimeType"), True)

    async def _read(self, uri: str) -> list[dict[str, Any]]:
        result = msgspec.to_builtins(await self.client.read_resource(uri))
        # The URI is the one asked for (prefixed, when mounted): _resource_contents adds it.
        return [{k: v for k, v in item.items() if k != "uri"} for item in result.get("contents", [])]

    async def _follow(self) -> None:
        """List a kind again at each of the remote's ``list_changed``."""
        caps = self.client.server_capabilities
        try:
            async for event in self.client.listen(
                tools=bool(caps.tools), prompts=bool(caps.prompts), resources=bool(caps.resources)
            ):
                if isinstance(event, ListChanged):
                    try:
                        await self.refresh(event.kind)
                    except LocalError as exc:
                        log.warning("remote server %r: listing %s again failed: %s", self.name, event.kind, exc)
        except LocalError as exc:  # the connection ended: what was listed stays, calls will say so
            log.warning("remote server %r: stopped following its changes: %s", self.name, exc)


@asynccontextmanager
async def _connected(server: RemoteServer) -> AsyncIterator[Client]:
    async with server.client as client:
        for kind in ("tools", "resources", "prompts"):
            await server.refresh(kind)
        follower = asyncio.get_running_loop().create_task(server._follow(), name=f"changes of {server.name!r}")
        try:
            yield client
        finally:
            follower.cancel()
            try:
                await follower
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - ending; it logged what it had to
                pass
