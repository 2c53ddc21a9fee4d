"""``Server``: the one object a server author touches.

::

    from modelctx import Server

    server = Server("weather", version="1.0.0")

    @server.tool
    async def forecast(city: str, days: int = 3) -> str:
        \"\"\"Forecast for a city.\"\"\"
        ...

    server.run()            # stdio; server.run("http", port=8000) for Streamable HTTP

Registering, removing or changing tools, resources and prompts at run time notifies
subscribers (``list_changed``); ``server.resource_updated(uri)`` notifies the
subscribers of one resource.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..protocol._request_state import StateSealer
from ..protocol._versions import SUPPORTED_VERSIONS
from ._bus import Event, LocalBus, SubscriptionBus
from ._context import Context
from ._dispatch import Dispatcher
from ._registry import (
    CacheHint,
    PromptDef,
    Registry,
    ResourceDef,
    TemplateDef,
    ToolDef,
    prompt_definition,
    resource_definition,
)
from ._session import HandshakeSession
from ._signature import Signature
from ._uri_template import UriTemplate

__all__ = ["Server", "ServerConfig"]

log = logging.getLogger("modelctx.server")


@dataclass
class ServerConfig:
    """Settings of a server; every field has a sensible default.

    ``ttl_ms``/``cache_scope``: the cache hints of discover and the list methods
    (items may shorten the TTL or make a list private). ``page_size``: items per
    ``*/list`` page (``None``: one page). ``request_state_secret``: the key that seals
    ``requestState``; replicas serving the same clients must share it.
    ``client_request_timeout``: how long a handshake-era server-to-client request
    (elicitation, sampling, roots) may wait for its answer.
    """

    page_size: int | None = None
    ttl_ms: int = 0
    cache_scope: str = "public"
    versions: tuple[str, ...] = SUPPORTED_VERSIONS
    request_state_secret: bytes | str | None = None
    request_state_ttl: float = 600.0
    client_request_timeout: float = 300.0
    middleware: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        CacheHint(self.ttl_ms, self.cache_scope)  # validates both
        if self.page_size is not None and self.page_size < 1:
            raise ValueError("page_size must be at least 1 (or None for no pages)")


class Server:
    """An MCP server: a registry of tools, resources and prompts, served on any transport."""

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        config: ServerConfig | None = None,
        bus: SubscriptionBus | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.config = config or ServerConfig()
        info: dict[str, Any] = {"name": name, "version": version}
        for key, value in (
            ("title", title),
            ("description", description),
            ("websiteUrl", website_url),
            ("icons", icons),
        ):
            if value:
                info[key] = value
        self.info = info
        self.bus: SubscriptionBus = bus or LocalBus()
        self._registry = Registry()
        self._registry.on_change = self._on_change
        self._sealer = StateSealer(self.config.request_state_secret, self.config.request_state_ttl)
        self._middleware = list(self.config.middleware)
        self._completions = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.dispatcher = Dispatcher(self)

    # -- registration --------------------------------------------------------------
    def tool(self, fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        """Register a function as a tool. Use as ``@server.tool`` or ``@server.tool(...)``.

        Options: ``name``, ``title``, ``description``, ``annotations`` (ToolAnnotations
        as a dict), ``icons``, ``meta``, ``structured_output`` (force on or off),
        ``input_schema``/``output_schema`` (override the derived ones), ``cache``,
        ``inline``.

        A plain (sync) function runs on a worker thread, so it may block. ``inline=True``
        runs it on the event loop instead, saving the hop to the thread: only for a
        function that returns at once (no I/O, no sleep, no long computation), since
        while it runs no other request of this server makes progress.
        """
        if fn is None:
            return lambda f: self.tool(f, **options)
        self.add_tool(fn, **options)
        return fn

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> None:
        definition = ToolDef.build(fn, Context, **options)
        self._registry.tools[definition.name] = definition
        self._registry.changed("tools")

    def remove_tool(self, name: str) -> None:
        if self._registry.tools.pop(name, None) is None:
            raise KeyError(f"no tool named {name!r}")
        self._registry.changed("tools")

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        cache: CacheHint | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a resource (a fixed URI) or a resource template (a URI with ``{var}``).

        The function returns ``str`` (text), ``bytes`` (blob), ``EmbeddedResource`` or a
        list of them; a template's variables arrive as keyword arguments.
        """

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            signature = Signature(fn, name or fn.__name__, Context)
            common = dict(
                name=name or fn.__name__,
                title=title,
                description=description or signature.description,
                mime_type=mime_type,
                annotations=annotations,
                icons=icons,
                meta=meta,
            )
            is_async = asyncio.iscoroutinefunction(fn)
            if "{" in uri:
                template = UriTemplate(uri)
                missing = set(signature.param_names) - set(template.variables)
                if missing:
                    raise TypeError(
                        f"resource template {uri!r}: parameters {sorted(missing)} are not "
                        "variables of the template"
                    )
                definition = resource_definition(uri_template=uri, **common)
                self._registry.templates[uri] = TemplateDef(
                    template, fn, signature, definition, mime_type, is_async, cache=cache
                )
            else:
                definition = resource_definition(uri=uri, size=size, **common)
                self._registry.resources[uri] = ResourceDef(
                    uri, fn, signature, definition, mime_type, is_async, cache
                )
            self._registry.changed("resources")
            return fn

        return register

    def remove_resource(self, uri: str) -> None:
        registry = self._registry
        if registry.resources.pop(uri, None) is None and registry.templates.pop(uri, None) is None:
            raise KeyError(f"no resource or template {uri!r}")
        registry.changed("resources")

    def prompt(self, fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        """Register a prompt. Arguments are strings; the function returns a str, a message
        dict ``{"role", "content"}``, ``(role, content)`` tuples or a list of those."""
        if fn is None:
            return lambda f: self.prompt(f, **options)
        name = options.get("name") or fn.__name__
        signature = Signature(fn, name, Context)
        definition = prompt_definition(
            name,
            signature,
            title=options.get("title"),
            description=options.get("description"),
            icons=options.get("icons"),
            meta=options.get("meta"),
        )
        self._registry.prompts[name] = PromptDef(
            name, fn, signature, definition, asyncio.iscoroutinefunction(fn)
        )
        self._registry.changed("prompts")
        return fn

    def remove_prompt(self, name: str) -> None:
        if self._registry.prompts.pop(name, None) is None:
            raise KeyError(f"no prompt named {name!r}")
        self._registry.changed("prompts")

    def completion(self, ref: str, argument: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register completions for one argument of a prompt (by name) or a resource
        template (by its URI template). The function takes ``value`` and ``context``
        (the other arguments so far) and returns candidate strings."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            target = self._registry.prompts.get(ref) or self._registry.templates.get(ref)
            if target is None:
                raise KeyError(f"no prompt or resource template {ref!r}; register it first")
            target.complete[argument] = fn
            self._completions = True
            return fn

        return register

    # -- change notification ---------------------------------------------------------
    def _on_change(self, kind: str) -> None:
        self._publish(Event(kind))

    def resource_updated(self, uri: str) -> None:
        """Tell subscribers of ``uri`` that it changed (``notifications/resources/updated``)."""
        self._publish(Event("resource", uri))

    def _publish(self, event: Event) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # Called from a worker thread (a sync handler) or before serving.
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self.bus.publish, event)
            return
        self.bus.publish(event)

    def _attach_loop(self) -> None:
        self._loop = asyncio.get_running_loop()

    def close_subscriptions(self) -> None:
        """End every listen stream gracefully (server shutdown)."""
        self._publish(Event("closing"))

    # -- capabilities ------------------------------------------------------------------
    def capabilities(self) -> dict[str, Any]:
        """Only what is really served (server/discover.mdx)."""
        registry = self._registry
        caps: dict[str, Any] = {"logging": {}}
        if self._completions:
            caps["completions"] = {}
        if registry.prompts:
            caps["prompts"] = {"listChanged": True}
        if registry.resources or registry.templates:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if registry.tools:
            caps["tools"] = {"listChanged": True}
        return caps

    def _serves(self, method: str) -> bool:
        """Is the capability behind ``method`` served? (Checked on every request.)"""
        registry = self._registry
        if method.startswith("tools/"):
            return bool(registry.tools)
        if method.startswith("resources/"):
            return bool(registry.resources or registry.templates)
        if method.startswith("prompts/"):
            return bool(registry.prompts)
        if method.startswith("completion/"):
            return self._completions
        return True

    # -- handshake sessions --------------------------------------------------------------
    def _start_session_listener(self, session: HandshakeSession) -> None:
        session.listener = asyncio.get_running_loop().create_task(self._session_events(session))

    async def _session_events(self, session: HandshakeSession) -> None:
        """Forward bus events to a handshake session as the notifications of its era."""
        subscription = self.bus.subscribe()
        try:
            async for event in subscription:
                if session.closed or event.kind == "closing":
                    return
                if event.kind == "resource":
                    if event.uri not in session.subscriptions:
                        continue
                    message = {
                        "jsonrpc": "2.0",
                        "method": "notifications/resources/updated",
                        "params": {"uri": event.uri},
                    }
                else:
                    message = {
                        "jsonrpc": "2.0",
                        "method": f"notifications/{event.kind}/list_changed",
                    }
                if session.outbound is not None:
                    try:
                        await session.outbound(message)
                    except Exception:  # the stream went away; the session lives on
                        log.debug("dropped a notification for session %s", session.id)
        finally:
            subscription.close()

    # -- running -------------------------------------------------------------------------
    def run(self, transport: str = "stdio", **options: Any) -> None:
        """Serve until stopped: ``"stdio"`` (default) or ``"http"`` (``host``, ``port``,
        and the options of ``http_app``)."""
        if transport == "stdio":
            from ..transports.stdio import serve_stdio

            serve_stdio(self)
        elif transport == "http":
            from ..transports.http import serve_http

            serve_http(self, **options)
        else:
            raise ValueError(f'unknown transport {transport!r}; use "stdio" or "http"')

    def http_app(self, **options: Any) -> Any:
        """An ASGI application serving this server (mount it in Starlette or FastAPI)."""
        from ..transports.http import HttpApp

        return HttpApp(self, **options)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The wire definitions of the registered tools, in order."""
        return list(self._registry.wire_list("tools"))

    def __repr__(self) -> str:
        registry = self._registry
        return (
            f"<Server {self.name!r} tools={len(registry.tools)} resources="
            f"{len(registry.resources) + len(registry.templates)} prompts={len(registry.prompts)}>"
        )

