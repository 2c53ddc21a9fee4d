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
- **What the remote asks** while a call runs (elicitation, form or URL; sampling; roots)
  is asked of the parent's caller through the call's ``Context`` (``ctx.elicit``,
  ``ctx.sample``, ``ctx.list_roots``), and the answer goes back to the remote; its **log
  messages** go to the caller at the caller's level. Each forwarded call brings handlers
  of its own (``_Asking``, ``Client.call_tool_raw(..., handlers=)``), so a question is
  the call's when the remote relates it to the call: a 2026-07-28 remote asks within the
  call's own rounds (``input_required``); a handshake-era remote asks on the call's reply
  stream (HTTP) or names the call in ``_meta`` (modelctx's servers, over stdio too).
  Nothing is guessed from the calls in flight: a question about no call is declined
  (roots: none) and such a log message dropped. A caller that cannot answer gets the
  remote's question declined (roots: none). A ``Client`` handed in with handlers of its
  own keeps them.
- **Errors**: what the remote answers with a JSON-RPC error reaches the caller as that
  error; a remote that cannot be reached is a tool error naming the error's class only
  (its text, which may quote the remote's stderr, goes to the log).
- **Not relayed**: completions, resource subscriptions; a question a handshake-era
  remote asks of a 2026-07-28 caller (it arrives outside the call's task, where
  ``input_required`` cannot be raised: declined). The gateway (``_gateway.py``) relays
  completions and subscriptions; this is the small static case.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import msgspec

from ..client import Client, ClientHandlers, ListChanged, Target
from ..errors import LocalError, MCPError, ProtocolError, RegistrationError, ToolError
from ..server import Context, Server, ToolResult
from ..server.definitions import (
    PromptDef,
    ResourceDef,
    TemplateDef,
    ToolDef,
    prompt_entry,
    resource_entry,
    template_entry,
    tool_entry,
)
from ..server.dispatch import InputRequired

if TYPE_CHECKING:
    from ..client import Elicitation
    from ..protocol import Notification

__all__ = ["RemoteServer"]

log = logging.getLogger("modelctx.host")

_SERVER_INFO = "io.modelcontextprotocol/serverInfo"


class _Asking:
    """One forwarded call in flight: the parent's context, asked what the remote asks
    about the call (``handlers``: the call's own, given to ``call_tool_raw``)."""

    __slots__ = ("ctx", "owner", "questions", "in_rounds")

    def __init__(self, ctx: Context, owner: RemoteServer, in_rounds: bool) -> None:
        self.ctx, self.owner, self.questions = ctx, owner, 0
        # A 2026-07-28 remote asks within the call's own rounds, where ``input_required``
        # may unwind the call to ask a 2026-07-28 caller; a handshake-era one cannot.
        self.in_rounds = in_rounds

    def handlers(self) -> ClientHandlers:
        return ClientHandlers(
            elicitation=self.elicitation, sampling=self.sampling, roots=self.roots, notification=self.note
        )

    def key(self) -> str:
        # The same question gets the same key when a 2026-07-28 caller's retry runs the
        # call again: its answer is found (Context.elicit's ``key``).
        self.questions += 1
        return f"remote-{self.questions}"

    async def _ask(self, what: str, ask: Callable[[Context, str], Any]) -> Any:
        """``ask(ctx, key)`` of the call's caller; raises ``LookupError`` when it cannot
        be asked (the log says why)."""
        name = self.owner.name
        try:
            return await ask(self.ctx, self.key())
        except ProtocolError as exc:  # the caller cannot elicit / sample / list roots
            log.warning("remote server %r asked for %s; the caller cannot answer: %s", name, what, exc.message)
            raise LookupError(what) from None
        except InputRequired:
            if self.in_rounds:
                raise  # the parent answers input_required; the retry runs the call again
            log.warning(
                "remote server %r asked for %s on its connection while the caller speaks 2026-07-28; declined",
                name, what,
            )
            raise LookupError(what) from None

    async def elicitation(self, asked: Elicitation) -> dict[str, Any]:
        def ask(ctx: Context, key: str) -> Any:
            if asked.mode == "url" and asked.url is not None:
                return ctx.elicit_url(asked.message, asked.url, key=key)
            return ctx.elicit(asked.message, asked.requested_schema or {"type": "object", "properties": {}}, key=key)

        try:
            answer = await self._ask("elicitation", ask)
        except LookupError:
            return {"action": "decline"}
        reply: dict[str, Any] = {"action": answer.action}
        if answer.action == "accept" and isinstance(answer.content, dict):
            reply["content"] = answer.content
        return reply

    async def sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        options = {k: v for k, v in params.items() if k not in ("messages", "maxTokens", "_meta")}
        messages, max_tokens = params.get("messages") or [], int(params.get("maxTokens") or 1000)
        try:
            answer: dict[str, Any] = await self._ask(
                "sampling", lambda ctx, key: ctx.sample(messages, max_tokens, key=key, **options)
            )
        except LookupError:
            raise LocalError(f"the caller of {self.owner.name!r} cannot sample for it") from None
        return answer

    async def roots(self) -> list[dict[str, Any]]:
        try:
            roots: list[dict[str, Any]] = await self._ask("roots", lambda ctx, key: ctx.list_roots(key=key))
        except LookupError:
            return []
        return roots

    def note(self, note: Notification) -> None:
        """A log message of the remote about this call, to its caller."""
        level, logger = note.params.get("level"), note.params.get("logger")
        if note.method != "notifications/message" or not isinstance(level, str):
            return
        relay = asyncio.ensure_future(
            self.ctx.log(level, note.params.get("data"), logger if isinstance(logger, str) else None)
        )
        logs = self.owner.log_relays
        logs.add(relay)
        relay.add_done_callback(logs.discard)


class RemoteServer(Server):
    """The tools, resources and prompts of the server ``target`` names (a URL, a
    command, a ``Client``), listed when it starts and again at each ``list_changed``."""

    def __init__(self, target: Client | Target, *, name: str | None = None, **options: Any) -> None:
        # What the remote asks about no call of ours (each call brings its own handlers).
        handlers = ClientHandlers(elicitation=self._elicit, sampling=self._sample, roots=self._roots)
        client = target if isinstance(target, Client) else Client(target)
        #: Whether what the remote asks and logs is relayed (not for a Client with handlers of its own).
        self.relays = client.handlers == ClientHandlers()
        if self.relays:
            client.handlers = handlers
            if client.session.log_level is None:
                client.session.log_level = "debug"  # every level; the caller's own is applied by ctx.log
        super().__init__(name or client.name, lifespan=_connected, **options)
        self.client = client
        self._follower: asyncio.Task[None] | None = None
        #: Log messages being relayed to callers (a reference each until sent).
        self.log_relays: set[asyncio.Task[None]] = set()

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

    # -- what the remote asks about no call (a call's own: ``_Asking``) ---------------------------
    async def _elicit(self, asked: Elicitation) -> dict[str, Any]:
        log.warning("remote server %r asked %r about no call to it; declined", self.name, asked.message)
        return {"action": "decline"}

    async def _sample(self, params: dict[str, Any]) -> dict[str, Any]:
        raise LocalError(f"remote server {self.name!r} asked for sampling about no call to it; no one to ask")

    async def _roots(self) -> list[dict[str, Any]]:
        return []  # no caller to ask: none

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

            handlers = _Asking(ctx, self, client.modern).handlers() if self.relays else None
            try:
                result = await client.call_tool_raw(name, arguments, progress=progress, handlers=handlers)
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
        return tool_entry(definition, forward)

    def _prompt(self, definition: dict[str, Any]) -> PromptDef:
        client, name = self.client, definition["name"]

        async def forward(**arguments: Any) -> Any:
            result = msgspec.to_builtins(await client.get_prompt(name, arguments or None))
            return {"messages": result.get("messages", [])}

        return prompt_entry(definition, forward)

    def _resource(self, definition: dict[str, Any]) -> ResourceDef:
        uri = definition["uri"]

        async def forward() -> Any:
            return await self._read(uri)

        return resource_entry(definition, forward)

    def _template(self, definition: dict[str, Any]) -> TemplateDef:
        return template_entry(definition, self._read)

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
        if server.relays and not client.modern and client.server_capabilities.logging:
            try:  # a handshake-era server logs nothing until asked
                await client.session.request("logging/setLevel", {"level": "debug"})
            except MCPError as exc:
                log.info("remote server %r refused logging/setLevel: %s", server.name, exc)
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
