"""``Server``: the one object a server author touches.

::

    from modelctx import Server

    server = Server("weather", version="1.0.0")

    @server.tool
    async def forecast(city: str, days: int = 3) -> str:
        \"\"\"Forecast for a city.\"\"\"
        ...

    server.run()            # stdio; server.run("http", port=8000) for Streamable HTTP

``Server(name, lifespan=fn)`` runs ``fn(server)`` (an async context manager) around
every way of serving it; what it yields is ``ctx.lifespan_context`` in handlers.

Registering, removing or changing tools, resources and prompts at run time notifies
subscribers (``list_changed``); ``server.resource_updated(uri)`` notifies the
subscribers of one resource.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import RegistrationError
from ..protocol import SERVED_VERSIONS, Notification, Request, StateSealer
from ..transports.server_seam import Peer, ResponseStream, Send
from ..transports.session import HandshakeSession
from ._apps import bind_tool_ui
from ._bus import Event, ListenSlots, LocalBus, SubscriptionBus
from ._compose import Mount
from ._context import Context
from ._dispatch import Dispatcher, Middleware
from ._lifespan import Lifespan, LifespanHolds, StartupError
from ._registry import (
    CacheHint,
    PromptDef,
    Registry,
    ResourceDef,
    TemplateDef,
    ToolDef,
    check_prompt_arguments,
    handler_name,
    prompt_definition,
    resource_definition,
)
from ._signature import Signature
from ._task_store import TaskStore
from ._tasks import EXTENSION as TASKS_EXTENSION
from ._tasks import TaskManager
from ._transform import ArgTransform, derive_tool
from ._uri_template import UriTemplate

if TYPE_CHECKING:
    from ._openapi._routes import RouteMap

__all__ = ["Server", "ServerConfig", "StartupError"]

log = logging.getLogger("modelctx.server")

# An extension identifier: a ``_meta`` key with a mandatory prefix (basic/index.mdx,
# ``_meta``; basic/versioning.mdx, Extension Negotiation), e.g. "io.modelcontextprotocol/tasks".
_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_EXTENSION_ID = re.compile(rf"{_LABEL}(?:\.{_LABEL})*/[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


# What ``@server.tool(...)`` and ``@server.prompt(...)`` accept; a misspelt option is
# named at the decorator rather than as a TypeError from deep inside.
_TOOL_OPTIONS = frozenset(
    {"name", "title", "description", "annotations", "icons", "meta", "structured_output",
     "input_schema", "output_schema", "cache", "inline", "replace", "task", "task_start",
     "ui", "ui_visibility"}
)
_PROMPT_OPTIONS = frozenset({"name", "title", "description", "icons", "meta", "replace"})


def _check_options(kind: str, options: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(set(options) - known)
    if unknown:
        raise RegistrationError(
            f"{kind} options {unknown} are not known; the options are {sorted(known)}"
        )


def _server_info(name: str, version: str, **optional: Any) -> dict[str, Any]:
    """The server's ``Implementation`` (``serverInfo``): name, version, and each optional field given."""
    return {"name": name, "version": version, **{key: value for key, value in optional.items() if value}}


def _checked_extensions(extensions: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """``extensions`` as the ``capabilities.extensions`` object; raises ``ValueError``
    naming an identifier the spec does not allow, ``TypeError`` for settings that are not
    an object."""
    checked: dict[str, dict[str, Any]] = {}
    for key, settings in (extensions or {}).items():
        if not isinstance(key, str) or not _EXTENSION_ID.fullmatch(key):
            raise ValueError(
                f"extension identifier {key!r} is not valid: it needs a vendor prefix and a name, "
                'as in "io.modelcontextprotocol/tasks" or "com.example/my-extension"'
            )
        if not isinstance(settings, Mapping):
            raise TypeError(
                f"extension {key!r}: its settings must be a dict ({{}} for none), "
                f"not {type(settings).__name__}"
            )
        checked[key] = dict(settings)
    return checked


#: The environment variable that names the Redis a server shares with its replicas
#: (``ServerConfig.redis_url``, ``modelctx serve --redis``).
REDIS_URL_ENV = "MODELCTX_REDIS_URL"
#: The environment variable holding the key that seals ``requestState``
#: (``ServerConfig.request_state_secret``).
REQUEST_STATE_SECRET_ENV = "MODELCTX_REQUEST_STATE_SECRET"


@dataclass
class ServerConfig:
    """Settings of a server; every field has a sensible default.

    ``ttl_ms``/``cache_scope``: the cache hints of discover and the list methods
    (items may shorten the TTL or make a list private). ``page_size``: items per
    ``*/list`` page (``None``: one page). ``request_state_secret``: the key that seals
    ``requestState`` (default: the ``MODELCTX_REQUEST_STATE_SECRET`` environment variable;
    else, with ``redis_url``, one key the replicas keep in Redis; else a random key per
    process); replicas serving the same clients must share it. ``versions``: the
    revisions the server speaks (every one by default); leave one out and it is refused:
    a stateless request naming it gets -32022 with the ones left, and ``initialize``
    negotiates among the handshake revisions left (-32602 when none is).
    ``client_request_timeout``: how long a handshake-era server-to-client request
    (elicitation, sampling, roots) may wait for its answer. ``max_listens_per_principal``
    and ``max_listens``: ``subscriptions/listen`` streams open at once for one
    authenticated principal and for the whole server (past either, the listen request
    is refused with a JSON-RPC error naming the limit). ``task_db``: the SQLite file
    that keeps tasks (io.modelcontextprotocol/tasks) when no ``task_store`` is given;
    None keeps them in memory, lost with the process. ``task_ttl_ms``: how long a
    task and its result are kept after creation (None: until deleted by hand);
    ``task_poll_interval_ms``: the polling interval suggested to clients.
    ``max_running_tasks``: tasks whose handlers run in this process at once (each holds
    its coroutine, about 6 KB); past it a ``task="optional"`` tool is answered in place,
    as a plain call, and a ``task="required"`` one is refused with ``RateLimited``
    (-31429), so a client cannot start handlers faster than they end without bound.
    ``max_running_tasks_per_principal``: unfinished tasks of one authenticated principal
    (100, as many handshake sessions as one principal may hold: one token cannot take
    the whole process's ``max_running_tasks``); past it the same answer, for that
    principal only. Counted across every process with a ``RedisTaskStore``, else per
    process; an unauthenticated caller has no principal and only the process cap holds.
    ``redis_url``: the Redis that the server's processes and replicas share (``redis://``
    or ``rediss://``; default: the ``MODELCTX_REDIS_URL`` environment variable, else
    none). With one, the subscription bus, handshake-era sessions, tasks and the
    ``requestState`` key live there; without, one process keeps them in memory.
    ``redis_prefix``: what every Redis key and channel of this server starts with
    (default ``modelctx:<server name>:``); servers of the same name sharing one Redis
    need different ones.
    """

    page_size: int | None = None
    ttl_ms: int = 0
    cache_scope: str = "public"
    versions: tuple[str, ...] = SERVED_VERSIONS
    request_state_secret: bytes | str | None = None
    request_state_ttl: float = 600.0
    client_request_timeout: float = 300.0
    max_listens_per_principal: int = 64
    max_listens: int = 10_000
    middleware: list[Any] = field(default_factory=list)
    task_db: str | None = None
    task_ttl_ms: int | None = 3_600_000
    task_poll_interval_ms: int = 500
    max_running_tasks: int = 10_000
    max_running_tasks_per_principal: int = 100
    redis_url: str | None = None
    redis_prefix: str | None = None

    def __post_init__(self) -> None:
        CacheHint(self.ttl_ms, self.cache_scope)  # validates both
        if self.page_size is not None and self.page_size < 1:
            raise ValueError("page_size must be at least 1 (or None for no pages)")
        if self.task_ttl_ms is not None and self.task_ttl_ms < 1:
            raise ValueError("task_ttl_ms must be at least 1 ms (or None for no expiry)")
        if self.task_poll_interval_ms < 1:
            raise ValueError("task_poll_interval_ms must be at least 1 ms")
        if self.max_running_tasks < 1:
            raise ValueError("max_running_tasks must be at least 1")
        if self.max_running_tasks_per_principal < 1:
            raise ValueError("max_running_tasks_per_principal must be at least 1")
        if self.redis_url is None:
            self.redis_url = os.environ.get(REDIS_URL_ENV) or None
        if self.request_state_secret is None:
            self.request_state_secret = os.environ.get(REQUEST_STATE_SECRET_ENV) or None
        if self.redis_url is not None and not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                f"redis_url {self.redis_url!r} is not a Redis URL; use redis://HOST:PORT/DB "
                "(rediss:// for TLS, unix:///path/to/redis.sock for a local socket)"
            )


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
        lifespan: Lifespan | None = None,
        extensions: Mapping[str, Mapping[str, Any]] | None = None,
        task_store: TaskStore | None = None,
    ) -> None:
        """``lifespan``: ``fn(server)`` returning an async context manager, run around
        serving (see ``running``). ``extensions``: the extensions this server supports,
        identifier to settings (``{}`` for none), declared in its capabilities.
        ``task_store``: where tasks live (default: a ``SqliteTaskStore`` on
        ``config.task_db``, made when the first tool that may run as a task is
        registered); with either, the server offers the tasks extension."""
        self.name = name
        self.version = version
        self.instructions = instructions
        self.config = config or ServerConfig()
        self.info = _server_info(name, version, title=title, description=description, websiteUrl=website_url, icons=icons)
        # Without a bus given, LocalBus; while serving with redis_url, a RedisBus over it.
        self._local_bus = LocalBus()
        self._bus_given = bus is not None
        self.bus: SubscriptionBus = bus if bus is not None else self._local_bus
        self.listens = ListenSlots(self.config.max_listens_per_principal, self.config.max_listens)
        self._registry = Registry()
        self._registry.on_change = self._on_change
        self._sealer = StateSealer(self.config.request_state_secret, self.config.request_state_ttl)
        self._middleware = list(self.config.middleware)
        self._completions = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._user_lifespan = lifespan
        self._lifespan = LifespanHolds(self, self._serving)
        self.extensions = _checked_extensions(extensions)
        if task_store is None and TASKS_EXTENSION in self.extensions:
            task_store = self._default_task_store()  # declared: served
        self._task_store = task_store
        self._tasks: TaskManager | None = None
        self._mounts: list[Mount] = []
        self.dispatcher = Dispatcher(self)

    # -- from what people already have ----------------------------------------------
    @classmethod
    def from_openapi(
        cls,
        spec: dict[str, Any] | str | os.PathLike[str],
        *,
        base_url: str | None = None,
        client: Any = None,
        route_maps: Sequence[RouteMap] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        uri_scheme: str = "api",
        **server_options: Any,
    ) -> Server:
        """A server with one tool per operation of an OpenAPI 3.x document, calling the API.

        ``spec``: the document as a dict, a JSON or YAML file, or an http(s) URL. Calls go to
        ``base_url`` (or ``client.base_url``) only, never to the spec's ``servers``; through
        ``client`` (an ``httpx.AsyncClient``, not closed here) or a client of this server's
        own; with ``headers`` (credentials: they win over header arguments) and ``timeout``
        seconds (default: a given client's own, else 30). ``route_maps``: ``RouteMap``s choosing tool, resource, template or exclude
        per operation (default: all tools; ``RouteMap.reads_as_resources()`` maps GETs to
        resources). ``server_options`` go to ``Server`` (``name`` defaults to the spec's
        title). Needs ``httpx`` (and ``pyyaml`` for YAML). Raises ``RegistrationError``."""
        from ._openapi._build import build

        return build(
            cls, spec, base_url=base_url, client=client, route_maps=route_maps, headers=headers,
            timeout=timeout, uri_scheme=uri_scheme, server_options=server_options,
        )

    @classmethod
    def from_asgi(
        cls,
        app: Any,
        *,
        spec: dict[str, Any] | None = None,
        base_url: str = "http://asgi-app",
        route_maps: Sequence[RouteMap] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        uri_scheme: str = "api",
        **server_options: Any,
    ) -> Server:
        """A server calling an ASGI app (FastAPI, Starlette) in this process, no socket.

        The operations come from ``spec``, else the app's ``openapi()`` (FastAPI); calls go
        through ``httpx.ASGITransport`` with ``base_url`` as the URL the app sees. The app's
        ASGI lifespan runs around the server's (its state reaches every request, as under
        an ASGI server). Otherwise as ``from_openapi``."""
        from ._openapi._build import InProcessApp, asgi_client_factory, asgi_spec, build

        called = InProcessApp(app)
        return build(
            cls, spec if spec is not None else asgi_spec(app), base_url=base_url, client=None,
            route_maps=route_maps, headers=headers, timeout=timeout, uri_scheme=uri_scheme,
            make_client=asgi_client_factory(called, base_url, timeout), app=called, server_options=server_options,
        )

    # -- registration --------------------------------------------------------------
    # Every problem with a handler is found here, at registration, as a RegistrationError
    # naming the tool, resource or prompt; a name or URI is registered once unless
    # replace=True says that replacing it is meant.
    def tool(self, fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        """Register a function as a tool. Use as ``@server.tool`` or ``@server.tool(...)``.

        Options: ``name``, ``title``, ``description``, ``annotations`` (ToolAnnotations
        as a dict), ``icons``, ``meta``, ``structured_output`` (force on or off),
        ``input_schema``/``output_schema`` (override the derived ones; an ``input_schema``
        is enforced on every call), ``cache``, ``replace`` (replace a tool of the same
        name instead of raising), ``inline``, ``ui`` (a ``UiResource`` or a ``ui://`` URI:
        its MCP Apps view) and ``ui_visibility`` (``["app"]``: only its view may call it).
        Raises ``RegistrationError``.

        A plain (sync) function runs on a worker thread, so it may block. ``inline=True``
        runs it on the event loop instead, saving the hop to the thread: only for a
        function that returns at once (no I/O, no sleep, no long computation), since
        while it runs no other request of this server makes progress.
        """
        if fn is None:
            _check_options("tool", options, _TOOL_OPTIONS)  # at once, not when applied
            return lambda f: self.tool(f, **options)
        self.add_tool(fn, **options)
        return fn

    def add_tool(self, fn: Callable[..., Any], *, replace: bool = False, **options: Any) -> None:
        """Register ``fn`` as a tool (the options of ``tool``). Raises ``RegistrationError``."""
        _check_options("tool", options, _TOOL_OPTIONS)
        definition = ToolDef.build(fn, Context, **bind_tool_ui(self, fn, options))
        self._registry.put("tools", definition.name, definition, replace=replace)
        if definition.task != "forbidden" and self._task_store is None:
            self._task_store = self._default_task_store()

    def _default_task_store(self) -> TaskStore:
        """SQLite on ``config.task_db`` (memory without one), or with ``config.redis_url``
        and no ``task_db`` a ``RedisTaskStore`` shared by every replica of this server
        (keys under ``<redis_prefix>tasks:``; it connects on first use, and the server
        gives its lease back when it stops: ``_join_replicas``)."""
        if self.config.redis_url and not self.config.task_db:
            from ._redis_tasks import RedisTaskStore

            return RedisTaskStore(self.config.redis_url, prefix=f"{self.redis_prefix}tasks:")
        from ._sqlite_tasks import SqliteTaskStore

        return SqliteTaskStore(self.config.task_db or ":memory:")

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
        replace: bool = False,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a resource (a fixed URI) or a resource template (an RFC 6570 URI
        template such as ``notes://{id}`` or ``search://{?q,limit}``).

        The function returns ``str`` (text), ``bytes`` (blob), ``EmbeddedResource`` or a
        list of them; a template's variables arrive as keyword arguments. Raises
        ``RegistrationError`` (a malformed template, a parameter that is not a
        variable, a URI already registered without ``replace=True``).
        """
        if not isinstance(uri, str):
            raise RegistrationError(
                f"@server.resource needs the resource's URI, e.g. "
                f'@server.resource("notes://{{id}}") above def {getattr(uri, "__name__", "...")}'
            )
        # Parse a template before the decorator runs: a malformed one fails at once.
        template = UriTemplate(uri) if "{" in uri or "}" in uri else None

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            kind = "resource template" if template is not None else "resource"
            # The URI identifies a resource, so a lambda is fine here: its URI names it.
            own = getattr(fn, "__name__", None)
            resource_name = handler_name(fn, name or (uri if own in (None, "<lambda>") else None), kind)
            signature = Signature(fn, resource_name, Context, kind)
            common: dict[str, Any] = {
                "name": resource_name,
                "title": title,
                "description": description or signature.description,
                "mime_type": mime_type,
                "annotations": annotations,
                "icons": icons,
                "meta": meta,
            }
            self._put_resource(uri, template, fn, signature, common, size, cache, replace)
            return fn

        return register

    def _put_resource(
        self,
        uri: str,
        template: UriTemplate | None,
        fn: Callable[..., Any],
        signature: Signature,
        common: dict[str, Any],
        size: int | None,
        cache: CacheHint | None,
        replace: bool,
    ) -> None:
        """Register ``fn`` under ``uri``: a template when ``template`` is given (each of
        its parameters a variable of it, or ``RegistrationError``), else a resource."""
        mime_type = common["mime_type"]
        is_async = asyncio.iscoroutinefunction(fn)
        if template is not None:
            missing = set(signature.param_names) - set(template.variables)
            if missing:
                raise RegistrationError(
                    f"resource template {uri!r}: parameters {sorted(missing)} of "
                    f"{common['name']!r} are not variables of the template "
                    f"(it has {template.variables})"
                )
            definition = resource_definition(uri_template=uri, **common)
            self._registry.put(
                "templates",
                uri,
                TemplateDef(template, fn, signature, definition, mime_type, is_async, cache=cache),
                replace=replace,
            )
        else:
            definition = resource_definition(uri=uri, size=size, **common)
            self._registry.put(
                "resources",
                uri,
                ResourceDef(uri, fn, signature, definition, mime_type, is_async, cache),
                replace=replace,
            )

    def remove_resource(self, uri: str) -> None:
        registry = self._registry
        if registry.resources.pop(uri, None) is None and registry.templates.pop(uri, None) is None:
            raise KeyError(f"no resource or template {uri!r}")
        registry.changed("resources")

    def prompt(self, fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        """Register a prompt. Arguments are strings; the function returns a str, a message
        dict ``{"role", "content"}``, ``(role, content)`` tuples or a list of those.

        Options: ``name``, ``title``, ``description``, ``icons``, ``meta``, ``replace``.
        Raises ``RegistrationError``.
        """
        _check_options("prompt", options, _PROMPT_OPTIONS)
        if fn is None:
            return lambda f: self.prompt(f, **options)
        name = handler_name(fn, options.get("name"), "prompt")
        signature = Signature(fn, name, Context, "prompt")
        check_prompt_arguments(name, signature)
        definition = prompt_definition(
            name,
            signature,
            title=options.get("title"),
            description=options.get("description"),
            icons=options.get("icons"),
            meta=options.get("meta"),
        )
        prompt = PromptDef(name, fn, signature, definition, asyncio.iscoroutinefunction(fn))
        self._registry.put("prompts", name, prompt, replace=bool(options.get("replace")))
        return fn

    def remove_prompt(self, name: str) -> None:
        if self._registry.prompts.pop(name, None) is None:
            raise KeyError(f"no prompt named {name!r}")
        self._registry.changed("prompts")

    def completion(self, ref: str, argument: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register completions for one argument of a prompt (by name) or a resource
        template (by its URI template). The function takes ``value`` and ``context``
        (the other arguments so far) and returns candidate strings.

        Raises ``KeyError`` for an unknown ``ref`` and ``RegistrationError`` for an
        argument that ``ref`` does not have.
        """

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            target: PromptDef | TemplateDef | None = self._registry.prompts.get(
                ref
            ) or self._registry.templates.get(ref)
            if target is None:
                raise KeyError(f"no prompt or resource template {ref!r}; register it first")
            known = (
                target.template.variables
                if isinstance(target, TemplateDef)
                else target.signature.param_names
            )
            if argument not in known:
                raise RegistrationError(
                    f"completion for {ref!r}: it has no argument {argument!r} (it has {known})"
                )
            target.complete[argument] = fn
            self._completions = True
            return fn

        return register

    def derive_tool(
        self,
        original: str | Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        arguments: Mapping[str, ArgTransform] | None = None,
        wrap: Callable[..., Awaitable[Any]] | None = None,
        replace: bool = False,
        **options: Any,
    ) -> None:
        """Register a tool derived from ``original`` (a registered tool's name, or a
        function): renamed, its arguments renamed, hidden with fixed values or described
        anew (``arguments``: original name to ``ArgTransform``), its call wrapped
        (``wrap``). The original stays as it is. Raises ``RegistrationError``, ``KeyError``
        for an unknown tool name. See ``_transform.py``."""
        _check_options("tool", options, _TOOL_OPTIONS)
        if isinstance(original, str):
            base = self._registry.tools.get(original)
            if base is None:
                raise KeyError(f"no tool named {original!r} to derive from; register it first")
        else:
            base = ToolDef.build(original, Context)
        tool = derive_tool(base, name=name, description=description, arguments=arguments, wrap=wrap, **options)
        self._registry.put("tools", tool.name, tool, replace=replace)

    def mount(self, other: Server, prefix: str | None = None) -> None:
        """Serve ``other``'s tools, resources, templates and prompts as this server's,
        under ``prefix`` (tools and prompts ``<prefix>_<name>``, URIs
        ``scheme://<prefix>/...``), in process: its handlers are called directly. Live:
        later changes to ``other`` show here. Its lifespan runs inside this one's; mount
        before serving. Raises ``RegistrationError`` (a clash, a bad prefix, a cycle).
        See ``_compose.py``."""
        if self._lifespan.running and other._user_lifespan is not None:
            raise RegistrationError(
                f"server {self.name!r} is already running, so {other.name!r}'s lifespan would never "
                "start; mount it before serving"
            )
        mount = Mount(self, other, prefix)
        mount.attach()
        self._mounts.append(mount)

    # -- change notification ---------------------------------------------------------
    def _on_change(self, kind: str) -> None:
        self._publish(Event(kind))

    @property
    def tasks(self) -> TaskManager | None:
        """The tasks of this server (None when it has no task store nor task tools)."""
        if self._tasks is None and self._task_store is not None:
            self._tasks = TaskManager(self, self._task_store)
        return self._tasks

    def publish_task(self, task_id: str, data: dict[str, Any]) -> None:
        """Tell listen streams that task ``task_id`` changed (``notifications/tasks``)."""
        self._publish(Event("task", task_id, data))

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
        extensions = {key: dict(settings) for key, settings in self.extensions.items()}
        if self._task_store is not None:
            extensions.setdefault(TASKS_EXTENSION, {})
        if extensions:
            # 2026-07-28 ServerCapabilities.extensions; older schemas leave capabilities open,
            # and extensions (MCP Apps, tasks) read it from initialize too.
            caps["extensions"] = extensions
        return caps

    def serves(self, method: str) -> bool:
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
        if method.startswith("tasks/"):
            return self._task_store is not None
        return True

    # -- handshake sessions --------------------------------------------------------------
    def start_session_listener(self, session: HandshakeSession) -> None:
        session.listener = asyncio.get_running_loop().create_task(self._session_events(session))

    async def _session_events(self, session: HandshakeSession) -> None:
        """Forward bus events to a handshake session as the notifications of its era."""
        subscription = self.bus.subscribe()
        try:
            async for event in subscription:
                if session.closed or event.kind == "closing":
                    return
                if event.kind == "task":
                    continue  # task changes reach listen streams only (2026-07-28)
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
                    except Exception:  # noqa: BLE001 - the stream went away; the session lives on
                        log.debug("dropped a notification for session %s", session.id)
        finally:
            subscription.close()

    # -- lifespan --------------------------------------------------------------------------
    @asynccontextmanager
    async def running(self) -> AsyncIterator[Any]:
        """Hold the server running; yields the lifespan context.

        The first holder runs the lifespan's startup, the last one its shutdown; holders in
        between share them (an in-process client inside an HTTP-served process does not run
        the lifespan twice). Every transport holds it while it serves; so must anything
        else that serves this server (a worker process, an ASGI app that mounts
        ``http_app()`` without forwarding the lifespan). Raises ``StartupError`` if the
        lifespan fails to start.
        """
        await self.start()
        try:
            yield self._lifespan.context
        finally:
            await self.stop()

    async def start(self) -> None:
        """``running()`` split in two, for transports whose start and stop come as separate
        events (ASGI lifespan messages, a client's connect and close). Every ``start`` that
        returns must be matched by one ``stop``."""
        self._attach_loop()
        await self._lifespan.acquire()

    async def stop(self) -> None:
        """Release one ``start``; the last one runs the lifespan's shutdown."""
        await self._lifespan.release()

    @asynccontextmanager
    async def _serving(self, _server: Any) -> AsyncIterator[Any]:
        """The lifespan ``LifespanHolds`` runs: what this server shares with its replicas
        (``_join_replicas``) first, the author's lifespan inside it."""
        async with AsyncExitStack() as stack:
            await self._join_replicas(stack)
            context = None
            if self._user_lifespan is not None:
                manager = self._user_lifespan(self)
                if not isinstance(manager, AbstractAsyncContextManager):
                    raise TypeError(
                        f"lifespan {self._user_lifespan!r} returned {type(manager).__name__}, not an "
                        "async context manager; decorate the async generator with "
                        "@contextlib.asynccontextmanager"
                    )
                context = await stack.enter_async_context(manager)
            for mount in self._mounts:  # mounted servers run inside this one's lifespan
                await stack.enter_async_context(mount.running())
            yield context

    async def _join_replicas(self, stack: AsyncExitStack) -> None:
        """Start what replicas share: a bus that connects (a given ``RedisBus``, or one
        made from ``config.redis_url``) and, with Redis and no secret configured, the
        ``requestState`` key kept there. Raises ``StartupError`` naming the URL."""
        url = self.config.redis_url
        prefix = self.redis_prefix
        from ._redis_tasks import RedisTaskStore

        if isinstance(self._task_store, RedisTaskStore):
            # Stopping gives the replica's lease back and fails its unfinished tasks at
            # once (their handlers stop with it), instead of when the lease runs out; the
            # store reconnects if the server runs again. Pushed first, so it runs last.
            stack.push_async_callback(self._task_store.close)
        if url is not None and not self._bus_given:
            from ._redis_bus import RedisBus

            self.bus = RedisBus(url, channel=f"{prefix}bus", local=self._local_bus)
            stack.callback(setattr, self, "bus", self._local_bus)
        start = getattr(self.bus, "start", None)
        stop = getattr(self.bus, "stop", None)
        if start is not None and stop is not None:  # a bus with connections (RedisBus)
            await start()
            stack.push_async_callback(stop)
        if url is not None and self.config.request_state_secret is None:
            from ._redis_bus import shared_request_state_key

            self._sealer.use_key(await shared_request_state_key(url, f"{prefix}request-state-key"))

    @property
    def redis_prefix(self) -> str:
        """What this server's Redis keys and channels start with (bus, sessions, tasks)."""
        return self.config.redis_prefix or f"modelctx:{self.name}:"

    @property
    def lifespan_context(self) -> Any:
        """What the lifespan yielded (``None`` for a server without a lifespan).

        Raises ``RuntimeError`` when the server has a lifespan that is not running.
        """
        if self._user_lifespan is not None and not self._lifespan.running:
            raise RuntimeError(
                f"server {self.name!r} has a lifespan but it is not running: serve it with "
                "server.run(), `modelctx serve` or Client(server), or hold "
                "`async with server.running():` around whatever serves it"
            )
        return self._lifespan.context

    # -- what transports call (transports/server_seam.py, ServerApp) ---------------------------
    def handle(
        self, request: Request, peer: Peer, send: Send, stream: ResponseStream | None = None
    ) -> Awaitable[dict[str, Any] | None]:
        return self.dispatcher.handle(request, peer, send, stream)

    def notify(self, notification: Notification, peer: Peer) -> None:
        self.dispatcher.notify(notification, peer)

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self._registry.tools.get(name)
        return None if tool is None else tool.definition["inputSchema"]

    @property
    def versions(self) -> tuple[str, ...]:
        return self.config.versions

    @property
    def middleware(self) -> list[Middleware]:
        return self._middleware

    # -- what the method implementations read (server/_methods.py) -----------------------
    @property
    def registry(self) -> Registry:
        """The registered tools, resources, templates and prompts (read-only use)."""
        return self._registry

    @property
    def sealer(self) -> StateSealer:
        """What seals and opens ``requestState`` for this server."""
        return self._sealer

    # -- running -------------------------------------------------------------------------
    def run(self, transport: str = "stdio", **options: Any) -> None:
        """Serve until stopped: ``"stdio"`` (default) or ``"http"`` (``host``, ``port``,
        ``workers``: forked processes serving the one port, each running the lifespan;
        and the options of ``http_app``).

        If the lifespan fails to start, its traceback is logged, one line saying so goes to
        stderr and the process exits with status 1 (``SystemExit``).
        """
        try:
            if transport == "stdio":
                from ..transports.stdio import serve_stdio

                serve_stdio(self)
            elif transport == "http":
                from ..transports.http import serve_http

                serve_http(self, **options)
            else:
                raise ValueError(f'unknown transport {transport!r}; use "stdio" or "http"')
        except StartupError as exc:  # its traceback is logged where it was raised
            raise SystemExit(f"modelctx: {exc}") from None

    def http_app(self, **options: Any) -> Any:
        """An ASGI application serving this server (mount it in Starlette or FastAPI).

        Its ASGI lifespan runs the server's lifespan. Mounted in an application that does
        not forward lifespan events to it, hold ``async with server.running():`` in that
        application's own lifespan instead.
        """
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

