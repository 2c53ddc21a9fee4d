"""``Client``: one connection to one MCP server, in either era, over any transport.

::

    async with Client(["python", "weather.py"]) as client:      # stdio subprocess
        tools = await client.tools()                             # list[Tool]
        result = await client.call_tool("forecast", {"city": "Oslo"})  # CallToolResult

    async with Client("http://127.0.0.1:8000/mcp") as client: ...  # Streamable HTTP
    async with Client(server) as client: ...                       # in-process Server
    async with Client(url, handlers=ClientHandlers(elicitation=ask_user)) as client: ...

Every method returns the typed result of the 2026-07-28 schema
(``modelctx.protocol.types.v2026_07_28``), whichever era the server speaks.

Era negotiation (basic/versioning.mdx, stdio.mdx and streamable-http.mdx, Backward
Compatibility): in ``"auto"`` mode the client sends ``server/discover`` at the latest
version. A ``DiscoverResult`` or a recognized modern error (-32022 names the versions
to retry with; -32020/-32021) means the server is modern. Any other error, an HTTP
status without a modern error body, or silence until ``probe_timeout`` means a
handshake-era server: the client sends ``initialize``, offering 2025-11-25, and speaks
whichever handshake revision the server answers with (2025-11-25 down to 2024-11-05),
sending an old one only what its schema has (``_era.py``). A stdio server that ends on
the probe (mcp 1.2.0 does) is started again once and initialized at once, and its
configuration is remembered as handshake-era, never probed again (``_era.py`` says why).
``mode="handshake"`` skips the probe; ``mode="2026-07-28"`` pins the version and sends no
probe at all.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import msgspec

from ..errors import (
    AuthorizationError,
    ConnectionClosed,
    HeaderMismatch,
    InputRoundsExceeded,
    LocalError,
    MalformedResponse,
    MCPError,
    MethodNotFound,
    MissingRequiredClientCapability,
    OutputSchemaViolation,
    ProtocolError,
    RequestLost,
    RequestTimeout,
    SessionExpired,
    UnsupportedProtocolVersion,
)
from ..protocol import meta as _meta
from ..protocol.headers import header_paths
from ..protocol.jsonrpc import Notification, Request
from ..protocol.versions import (
    HANDSHAKE_VERSIONS,
    LATEST,
    MODERN_VERSIONS,
    SERVED_HANDSHAKE_VERSIONS,
    accepts_handshake_version,
    features,
)
from ..transports.auth_seam import HttpAuth
from ..transports.client_seam import ClientTransport
from ..transports.server_seam import ServerApp
from ._cache import ResultCache
from ._convert import convert
from ._era import (
    KNOWN_ERAS,
    Era,
    HandshakeEra,
    ListChanged,
    ModernEra,
    ResourceUpdated,
    SubscriptionEvent,
    Wanted,
    capabilities_for,
)
from ._input import answer_all, answer_input, for_call
from ._options import ClientHandlers, ClientOptions
from ._session import ClientSession, EventQueue, ProgressCallback
from ._tasks import EXTENSION as TASKS_EXTENSION
from ._tasks import TaskHandle

if TYPE_CHECKING:
    from ..protocol.types import v2026_07_28 as wire
    from ..protocol.types.v2026_07_28 import (
        CallToolResult,
        CompleteResult,
        DiscoverResult,
        GetPromptResult,
        ListPromptsResult,
        ListResourcesResult,
        ListResourceTemplatesResult,
        ListToolsResult,
        Prompt,
        ReadResourceResult,
        Resource,
        ResourceTemplate,
        Tool,
    )
else:

    class _Wire:
        """The 2026-07-28 wire types, imported on first use (building them takes ~10 ms)."""

        def __getattr__(self, name: str) -> Any:
            from ..protocol.types import v2026_07_28

            value = getattr(v2026_07_28, name)
            setattr(self, name, value)
            return value

    wire = _Wire()

__all__ = [
    "Client",
    "ListChanged",
    "ResourceUpdated",
    "SubscriptionEvent",
    "Target",
]

log = logging.getLogger("modelctx.client")




#: A ``modelctx.Server`` object, seen from the client (which never imports server/): what
#: the in-process transport serves.
_InProcessServer = ServerApp


#: What ``Client`` connects to: an ``http(s)://`` URL, a command (a string split like a
#: shell would, or an argv list), a ``Server`` object, or a ``ClientTransport``.
Target = str | Sequence[str] | ClientTransport | _InProcessServer


def _make_transport(target: Target, auth: HttpAuth | None = None) -> ClientTransport:
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        from ..transports.http_client import HttpClientTransport

        return HttpClientTransport(target, auth=auth)
    if auth is not None:
        raise TypeError(
            "auth= is for an http(s):// URL; for another target, give the auth object to its "
            "transport (HttpClientTransport(url, auth=...))"
        )
    if isinstance(target, ClientTransport):
        return target
    if isinstance(target, (str, list, tuple)):
        from ..transports.stdio_client import StdioClientTransport

        argv = shlex.split(target) if isinstance(target, str) else [str(part) for part in target]
        return StdioClientTransport(argv[0], argv[1:])
    if isinstance(target, ServerApp):
        from ..transports.memory import MemoryTransport

        return MemoryTransport(target)
    raise TypeError(
        "Client target must be a URL, a command (string or argv list), a Server object or a "
        f"ClientTransport, not {type(target).__name__}; for environment variables, a working "
        "directory, HTTP headers or auth, pass a StdioClientTransport or HttpClientTransport"
    )


def _with_handler_hint(exc: MissingRequiredClientCapability) -> MissingRequiredClientCapability:
    """``exc`` with the way this client declares what the server needs: a capability is
    declared by giving the ``Client`` a handler for it, never by writing JSON."""
    required = exc.data.get("requiredCapabilities") if isinstance(exc.data, dict) else None
    handlers = [name for name in ("elicitation", "sampling", "roots") if isinstance(required, dict) and name in required]
    if not handlers:
        return exc
    example = ", ".join(f"{name}=..." for name in handlers)
    hinted = MissingRequiredClientCapability(
        f"{exc.message} (with modelctx's Client: Client(..., handlers=ClientHandlers({example})))",
        required if isinstance(required, dict) else {},
    )
    hinted.remote = exc.remote
    hinted.request_id = exc.request_id
    return hinted


class Client:
    """An MCP client; use it as ``async with Client(target) as client``.

    ``target``: an ``http(s)://`` URL, a command (``"python server.py"`` or an argv
    list, run as a subprocess on stdio), a ``Server`` object (in-process), or a
    ``ClientTransport`` for anything more: ``StdioClientTransport(cmd, env=..., cwd=...)``
    from ``modelctx.transports.stdio_client``, ``HttpClientTransport(url, headers=...,
    auth=...)`` from ``modelctx.transports.http_client``.

    ``auth``: for a URL, what authorizes its HTTP requests, e.g.
    ``modelctx.auth.OAuthClientProvider`` (OAuth 2.1: a 401 starts the flow).

    ``mode``: ``"auto"`` (probe, then the best era both sides speak), ``"handshake"``
    (the initialize handshake) or a modern version to pin. ``timeout``: the default
    deadline of every request, in seconds. Every request carries a progress token, so
    each progress report the server sends restarts that deadline, callback or not, up
    to ``ClientOptions.max_timeout`` in all. ``handlers``
    answer what the server asks (``ClientHandlers``); ``options`` hold the rest
    (``ClientOptions``).
    """

    def __init__(
        self,
        target: Target,
        *,
        mode: str = "auto",
        timeout: float = 60.0,
        handlers: ClientHandlers | None = None,
        options: ClientOptions | None = None,
        name: str | None = None,
        auth: HttpAuth | None = None,
    ) -> None:
        if mode not in ("auto", "handshake", *MODERN_VERSIONS):
            raise ValueError(
                f"mode must be 'auto', 'handshake' or one of {list(MODERN_VERSIONS)}, not {mode!r}"
                + ("; handshake versions are spoken with mode='handshake'" if mode in HANDSHAKE_VERSIONS else "")
            )
        self.mode = mode
        self.handlers = handlers or ClientHandlers()
        self.options = options or ClientOptions()
        self.transport = _make_transport(target, auth)
        #: What this client calls its server: a host's configured name, else the transport's.
        self.name = name if name is not None else self.transport.name
        self.session = self._session_on(self.transport, timeout)
        #: The operating phase's rules (``_era.py``): modern until ``initialize`` says otherwise.
        self.era: Era = ModernEra(self.session)
        self.cache = ResultCache()
        self.server_info: dict[str, Any] | None = None
        self._server_capabilities: dict[str, Any] = {}
        self._typed_capabilities: wire.ServerCapabilities | None = None
        self.instructions: str | None = None
        self.supported_versions: list[str] = []
        self._tools: dict[str, dict[str, Any]] = {}
        self._param_paths: dict[str, dict[str, tuple[str, ...]]] = {}
        self._tools_listed = False  # tools/list fetched since the last tools list_changed
        self._listeners: set[EventQueue] = set()
        self._connected = False

    def _session_on(self, transport: ClientTransport, timeout: float) -> ClientSession:
        session = ClientSession(transport, timeout=timeout, max_timeout=self.options.max_timeout)
        session.client_info = dict(self.options.client_info)
        session.log_level = self.options.log_level
        session.trace_context = self.options.trace_context
        session.on_notification = self._on_notification
        session.on_server_request = self._on_server_request
        return session

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the transport and agree on an era; raises ``ConnectionClosed``,
        ``RequestTimeout`` or the server's error, after closing what was opened."""
        self.session.capabilities = self._capabilities(modern=True)
        await asyncio.wait_for(self.transport.connect(self.session), self.options.probe_timeout + 30)
        try:
            await self._negotiate()
        except BaseException:
            await self.close()
            raise
        self._connected = True

    async def close(self) -> None:
        """End the connection: a subprocess gets stdin closed, then SIGTERM, then SIGKILL."""
        for queue in list(self._listeners):
            queue.offer(ConnectionClosed(f"{self.transport.name}: the client was closed"))
        await self.session.aclose()
        await self.transport.close()

    @property
    def protocol_version(self) -> str | None:
        return self.session.version

    @property
    def modern(self) -> bool:
        """Is the connection in the 2026-07-28 era?"""
        return self.era.modern

    @property
    def server_capabilities(self) -> wire.ServerCapabilities:
        """What the server declared it offers, typed: ``client.server_capabilities.tools``
        is a ``ServerCapabilitiesTools`` (truthy) when it serves tools, ``UNSET`` (falsy)
        when not. Known after ``connect`` (after ``discover()`` with a pinned version).
        A member that breaks the schema is left out (it is in ``raw_server_capabilities``)."""
        if self._typed_capabilities is None:
            self._typed_capabilities = _typed_capabilities(self._server_capabilities)
        return self._typed_capabilities

    @property
    def raw_server_capabilities(self) -> dict[str, Any]:
        """The server's capabilities object exactly as it was received."""
        return self._server_capabilities

    def _set_server_capabilities(self, capabilities: object) -> None:
        self._server_capabilities = capabilities if isinstance(capabilities, dict) else {}
        self._typed_capabilities = None

    @property
    def server_extensions(self) -> dict[str, dict[str, Any]]:
        """The extensions the server declared (``capabilities.extensions``): identifier to
        settings. Known after ``connect`` in ``auto`` and ``handshake`` mode, and after
        ``discover()`` when the version is pinned (basic/versioning.mdx)."""
        declared = self._server_capabilities.get("extensions")
        if not isinstance(declared, dict):
            return {}
        return {key: value for key, value in declared.items() if isinstance(value, dict)}

    # -- era negotiation ------------------------------------------------------------------
    def _capabilities(self, modern: bool) -> dict[str, Any]:
        caps = self.handlers.capabilities(modern=modern)
        if self.options.extensions:
            # The same object in both eras: _meta clientCapabilities (2026-07-28) and the
            # initialize capabilities (an open set in 2025-11-25, so older servers ignore it).
            caps["extensions"] = {key: dict(value) for key, value in self.options.extensions.items()}
        if self.options.tasks:
            caps.setdefault("extensions", {}).setdefault(TASKS_EXTENSION, {})
        return caps

    @property
    def takes_tasks(self) -> bool:
        """Does this client declare the tasks extension (``ClientOptions(tasks=True)``)?"""
        return self.options.tasks or TASKS_EXTENSION in self.options.extensions

    async def _negotiate(self) -> None:
        mode = self.mode
        session = self.session
        if mode == "handshake" or (mode == "auto" and self.transport.handshake_only):
            await self._initialize()
            return
        if mode == "auto" and await self._initialize_known():
            return
        session.modern = True
        self.era = ModernEra(session)
        session.version = LATEST if mode == "auto" else mode
        if mode != "auto":
            return
        for _ in range(3):
            try:
                result = await session.request("server/discover", {}, timeout=self.options.probe_timeout)
            except UnsupportedProtocolVersion as exc:
                if self._adopt_supported(exc):
                    continue
                if any(accepts_handshake_version(v) for v in _supported(exc)):
                    await self._initialize()
                    return
                raise
            except (HeaderMismatch, MissingRequiredClientCapability):
                return  # a modern server that did not like this probe; it is modern
            except (ProtocolError, RequestTimeout) as exc:
                log.debug("%s: discover failed (%s); trying initialize", self.transport.name, exc)
                await self._fall_back()
                return
            except ConnectionClosed:
                if not await self._relaunch_after_probe():
                    raise
                return
            except AuthorizationError:
                raise  # authorization failed whatever the era: initialize would fail the same way
            except MCPError as exc:  # an HTTP status without a modern error body
                if self.transport.kind == "http":
                    log.debug("%s: discover got %s; trying initialize", self.transport.name, exc)
                    await self._initialize()
                    return
                raise
            await self._discovered(result)
            return
        raise LocalError(f"{self.transport.name}: could not agree on a protocol version")

    async def _discovered(self, result: dict[str, Any]) -> None:
        """Settle the era on the server's ``server/discover`` answer: a modern version it
        offers (ours if it is among them), else the handshake era by ``initialize``."""
        offered = result.get("supportedVersions")
        versions = [v for v in offered if v in MODERN_VERSIONS] if isinstance(offered, list) else []
        if not versions:
            await self._initialize()
            return
        if self.session.version not in versions:
            self.session.version = versions[0]
        self._remember_discover(result)
        if self.options.cache:
            self.cache.put("server/discover", {}, self.transport.credential_key, result)

    def _adopt_supported(self, exc: UnsupportedProtocolVersion) -> bool:
        """Switch to a modern version the server says it supports; False if none."""
        supported = _supported(exc)
        mutual = [v for v in MODERN_VERSIONS if v in supported]  # our preference order
        if not mutual:
            return False
        self.session.version = mutual[0]
        return True

    def _remember_discover(self, result: dict[str, Any]) -> None:
        meta = result.get("_meta") or {}
        self.server_info = meta.get(_meta.SERVER_INFO) or self.server_info
        self._set_server_capabilities(result.get("capabilities"))
        self.instructions = result.get("instructions")
        self.supported_versions = list(result.get("supportedVersions") or [])

    async def _fall_back(self) -> None:
        """``initialize`` after a probe that got no modern answer; a stdio server that
        ended meanwhile (on the probe) is started again once (``_relaunch_after_probe``)."""
        try:
            await self._initialize()
        except ConnectionClosed:
            if not await self._relaunch_after_probe():
                raise

    async def _relaunch_after_probe(self) -> bool:
        """Start the server again and initialize it, remembering its configuration as
        handshake-era; False when the transport cannot start it again (then the caller
        raises the connection's end)."""
        fresh = self.transport.relaunch()
        if fresh is None:
            return False
        log.info(
            "%s ended on the server/discover probe: a handshake-era server that cannot take an "
            "unknown request; starting it again and initializing it (it will not be probed again)",
            self.transport.name,
        )
        await self.transport.close()
        self.transport = fresh
        self.session = self._session_on(fresh, self.session.timeout)
        self.session.capabilities = self._capabilities(modern=True)
        await asyncio.wait_for(fresh.connect(self.session), self.options.probe_timeout + 30)
        await self._initialize()
        assert self.session.version is not None  # _initialize set it
        KNOWN_ERAS.remember(fresh.configuration, self.session.version)
        return True

    async def _initialize_known(self) -> bool:
        """Initialize a server whose configuration is known to be handshake-era, without a
        probe; False (and the configuration forgotten) when it refuses: then probe it."""
        key = self.transport.configuration
        if KNOWN_ERAS.get(key) is None:
            return False
        try:
            await self._initialize()
        except ProtocolError as exc:
            log.info("%s refused initialize (%s); probing its era again", self.transport.name, exc)
            KNOWN_ERAS.forget(key)
            return False
        return True

    async def _initialize(self) -> None:
        session = self.session
        session.modern = False
        session.version = None
        self.transport.end_handshake_session()
        # A server known to answer an older revision is offered that one, with the
        # capabilities it names; any other is offered the newest (lifecycle.mdx).
        offer = KNOWN_ERAS.get(self.transport.configuration) or HANDSHAKE_VERSIONS[0]
        result = await session.request(
            "initialize",
            {
                "protocolVersion": offer,
                "capabilities": capabilities_for(self._capabilities(modern=False), features(offer)),
                "clientInfo": dict(self.options.client_info),
            },
            raw=True,
            timeout=self.options.probe_timeout + self.session.timeout,
        )
        version = result.get("protocolVersion")
        if not accepts_handshake_version(version):
            raise LocalError(
                f"{self.transport.name} offered protocol version {version!r}, which this client "
                f"does not speak (it speaks {', '.join(MODERN_VERSIONS + SERVED_HANDSHAKE_VERSIONS)}); "
                "upgrade the server or the client"
            )
        assert isinstance(version, str)  # accepts_handshake_version checked it
        session.version = version
        era = self.era = HandshakeEra(version, features(version), self._request, self._listeners)
        session.cancels_on_wire = era.tells_cancellation(stdio=self.transport.kind == "stdio")
        self.server_info = result.get("serverInfo")
        self._set_server_capabilities(result.get("capabilities"))
        self.instructions = result.get("instructions")
        self.supported_versions = [version]
        await session.notify("notifications/initialized")

    # -- server-initiated traffic -------------------------------------------------------------
    def _on_notification(self, note: Notification) -> None:
        method, params = note.method, note.params
        cache = self.cache
        event: SubscriptionEvent | None = None
        if method.endswith("/list_changed"):
            kind = method.split("/")[1]
            cache.invalidate(f"{kind}/list")
            if kind == "resources":
                cache.invalidate("resources/templates/list")
            if kind == "tools":
                self._tools.clear()
                self._tools_listed = False
            event = ListChanged(kind)
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            uri: str = params["uri"]
            cache.invalidate("resources/read", uri)
            event = ResourceUpdated(uri)
        if event is not None and self.era.events_on_session:
            for queue in self._listeners:
                queue.offer(event)
        if self.handlers.notification is not None:
            self.handlers.notification(note)

    async def _on_server_request(self, request: Request, handlers: ClientHandlers | None = None) -> dict[str, Any]:
        """Handshake-era server requests, answered by the same handlers as MRTR: those of
        the call the request relates to (``for_call``), else the client's."""
        if request.method == "ping":
            return {}
        if self.era.refuses(request.method):
            raise MethodNotFound(
                f"Method not found: {request.method} (not part of protocol version {self.session.version})"
            )
        answer = await answer_input(handlers or self.handlers, request.method, request.params, self.transport.name)
        return self.era.answer(request.method, answer)

    # -- requests ----------------------------------------------------------------------------------
    async def _request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        cacheable: bool = False,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        param_paths: dict[str, tuple[str, ...]] | None = None,
        handlers: ClientHandlers | None = None,
    ) -> dict[str, Any]:
        """One request (its input rounds, retries and cache); ``handlers``: the call's
        own, merged with the client's (``for_call``), for what the server asks about it."""
        params = params or {}
        credential = self.transport.credential_key
        use_cache = cacheable and self.options.cache and self.era.caches
        if use_cache:
            hit = self.cache.get(method, params, credential)
            if hit is not None:
                return hit
        try:
            result, retried = await self._with_input(
                method, params, timeout=timeout, progress=progress, param_paths=param_paths, handlers=handlers
            )
        except MissingRequiredClientCapability as exc:
            raise _with_handler_hint(exc) from exc
        if use_cache and not retried:  # results of retries are never cached (caching.mdx)
            self.cache.put(method, params, credential, result)
        return result

    async def _with_input(
        self,
        method: str,
        params: dict[str, Any],
        **kwargs: Any,
    ) -> tuple[dict[str, Any], bool]:
        """Drive multi round-trip requests (basic/patterns/mrtr.mdx, client rules).

        Returns the final result and whether it came from a retry. ``kwargs`` go to
        ``session.request``; their ``handlers`` (a call's own) answer the rounds' input
        requests, else the client's handlers do.
        """
        extra: dict[str, Any] = {}
        delay = 0.05
        retries = 2
        for round_number in range(self.options.max_rounds + 1):
            call = {**params, **extra}
            try:
                result = await self._reissuing(method, call, **kwargs)
            except (UnsupportedProtocolVersion, SessionExpired) as exc:
                if retries == 0 or not await self._recovered(exc):
                    raise
                retries -= 1
                result = await self._reissuing(method, call, **kwargs)
            kind = result.get("resultType", "complete")  # absent: an older server; complete
            if kind == "complete" or (kind == "task" and method == "tools/call" and self.takes_tasks):
                return result, round_number > 0
            if kind != "input_required":
                # basic/index.mdx: a resultType the client does not recognize MUST be
                # considered invalid.
                raise self._malformed(method, f"resultType {kind!r}, which this client does not recognize")
            requests = result.get("inputRequests") or {}
            extra = {}
            if isinstance(requests, dict) and requests:
                handlers = kwargs.get("handlers") or self.handlers
                extra["inputResponses"] = await answer_all(handlers, requests, self.transport.name)
            elif "requestState" not in result:
                raise self._malformed(method, "an input_required result that has neither inputRequests nor requestState")
            else:
                await asyncio.sleep(delay)  # "retry later": back off a little each time
                delay = min(delay * 2, 1.0)
            if "requestState" in result:
                extra["requestState"] = result["requestState"]  # echoed byte for byte
        raise InputRoundsExceeded(
            f"{self.transport.name} still asked for input after {self.options.max_rounds} rounds "
            f"of {method}; giving up (raise ClientOptions.max_rounds if that is expected)"
        )

    async def _recovered(self, exc: UnsupportedProtocolVersion | SessionExpired) -> bool:
        """Can the request that failed with ``exc`` be sent again? The version the server
        refused is replaced by one from its ``data.supported`` (basic/versioning.mdx); a
        handshake session the server forgot (HTTP 404) is initialized again, as the client
        MUST (2025-11-25 transports.mdx). False when this era does neither."""
        if isinstance(exc, UnsupportedProtocolVersion):
            return self.era.adopts_versions and self._adopt_supported(exc)
        if not self.era.renews_sessions:
            return False
        await self._initialize()
        return True

    def _malformed(self, method: str, what: str) -> MalformedResponse:
        return MalformedResponse(f"{self.transport.name} answered {method} with {what}")

    async def _reissuing(self, method: str, params: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """``session.request``, re-issued when a 2026-07-28 reply stream broke before the
        result (``RequestLost``) and repeating the request is safe.

        The changelog (item 9) says a broken stream loses the request and the client MUST
        re-issue it as a new request with a new id; it cannot say whether the server had
        already acted on it. So the client re-issues by itself only what cannot do harm
        twice: the requests that only read (``_REPEATABLE``), and a ``tools/call`` of a
        tool the server listed with ``readOnlyHint`` or ``idempotentHint`` (tools.mdx:
        annotations are hints, but here it is the server's own word about its own
        tool), at most ``_REISSUES`` times. Anything else fails with ``RequestLost``,
        saying why it was not sent again: the caller decides. Each re-issue is a new
        request (new id, new progress token; progress may start again from the
        beginning) with its own ``timeout``.
        """
        reissues = _REISSUES
        while True:
            try:
                return await self.session.request(method, params, **kwargs)
            except RequestLost as lost:
                unsafe = self._unsafe_to_repeat(method, params)
                if unsafe is None and reissues > 0:
                    reissues -= 1
                    log.info("%s; sending %s again as a new request (it is safe to repeat)", lost, method)
                    continue
                why = unsafe or f"it was sent {_REISSUES + 1} times and every stream broke"
                raise RequestLost(f"{lost}. It was not sent again: {why}; send it again if that is safe") from None

    def _unsafe_to_repeat(self, method: str, params: dict[str, Any]) -> str | None:
        """Why repeating this request could do harm (None: it is safe; see ``_reissuing``)."""
        if method in _REPEATABLE:
            return None
        if method != "tools/call":
            return f"{method} may change state on the server"
        name = params.get("name")
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return f"tool {name!r} was not listed, so nothing says it is safe to run twice"
        annotations = tool.get("annotations")
        if isinstance(annotations, dict) and (
            annotations.get("readOnlyHint") is True or annotations.get("idempotentHint") is True
        ):
            return None
        return f"tool {name!r} is marked neither readOnlyHint nor idempotentHint, so running it twice may do harm"

    # -- typed methods -----------------------------------------------------------------------------
    async def discover(self) -> DiscoverResult:
        """``server/discover`` (modern servers): versions, capabilities, instructions."""
        result = await self._request("server/discover", {}, cacheable=True)
        self._remember_discover(result)
        return convert(result, wire.DiscoverResult)

    async def list_tools(self, cursor: str | None = None) -> ListToolsResult:
        """One page of ``tools/list``. Over HTTP, tools whose ``x-mcp-header`` annotations
        break the rules are dropped with a warning (streamable-http.mdx)."""
        result = await self._request("tools/list", _cursor(cursor), cacheable=True)
        tools = []
        for tool in result.get("tools") or []:
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str):
                continue  # _convert below reports the malformed entry
            try:
                paths = header_paths(tool.get("inputSchema") or {})
            except ValueError as exc:
                if self.transport.kind == "http":
                    log.warning("%s: dropped tool %r: %s", self.transport.name, name, exc)
                    continue
                paths = {}
            self._tools[name] = tool
            self._param_paths[name] = paths
            tools.append(tool)
        return convert({**result, "tools": tools}, wire.ListToolsResult)

    async def tools(self) -> list[Tool]:
        """Every tool, across all pages."""
        return await _all(self.list_tools, lambda page: page.tools)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
        handlers: ClientHandlers | None = None,
    ) -> CallToolResult:
        """Call a tool. Input the server asks for is gathered through the handlers:
        ``handlers``, when given, for this call (each one it leaves unset is the
        client's): the 2026-07-28 ``input_required`` rounds, a task's input requests,
        and what a handshake-era server asks while the call runs when it relates the
        question to the call (on its reply stream over HTTP, or by modelctx's
        ``_meta`` key); a question the client cannot relate to a call goes to the
        client's handlers. Several calls at once, each with its own handlers, are each
        asked their own questions (a gateway answering each caller).

        ``structuredContent`` is checked against the tool's ``outputSchema`` when the
        tool was listed with one. Tool failures come back as ``isError`` results.
        A ``HeaderMismatch`` makes the client list the tools again and, when the tool's
        ``x-mcp-header`` annotations changed, send the call once more with the new
        headers (streamable-http.mdx, Client Behavior: SHOULD).

        ``timeout`` (default: the client's) restarts with each progress report of the
        server, up to ``ClientOptions.max_timeout``. A tool the server runs as a task
        (``ClientOptions(tasks=True)``) is waited for up to ``timeout``, or without one
        up to ``max_timeout``, while polling finds it running.
        """
        result = await self.call_tool_raw(name, arguments, progress=progress, timeout=timeout, handlers=handlers)
        return convert(result, wire.CallToolResult)

    async def call_tool_raw(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
        handlers: ClientHandlers | None = None,
    ) -> dict[str, Any]:
        """``call_tool``, but the complete result is the JSON object the server sent,
        not converted to ``CallToolResult`` (nor checked against that type; its
        ``structuredContent`` is still checked against the tool's ``outputSchema``).
        For relays that pass a result on as it came: a gateway saves two conversions.
        """
        handlers = for_call(handlers, self.handlers)
        result = await self._send_tool_call(name, arguments, progress=progress, timeout=timeout, handlers=handlers)
        if result.get("resultType") == "task":
            # A client that takes tasks may get one for any task-capable tool: wait for it.
            # Each poll that finds it running is a sign of life, as progress is for a plain
            # call: without a timeout of the caller's, wait up to max_timeout (the request
            # timeout failed a 3 s task at 1 s that a plain call with progress outlived).
            wait = timeout if timeout is not None else max(self.session.timeout, self.session.max_timeout)
            result = await TaskHandle(self, result, handlers=handlers).final(timeout=wait)
        await self._validate_tool_result(name, result)
        return result

    async def _send_tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
        handlers: ClientHandlers | None = None,
    ) -> dict[str, Any]:
        """One ``tools/call`` (re-sent once on a HeaderMismatch): a complete or task result."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments

        async def send() -> dict[str, Any]:
            return await self._request(
                "tools/call",
                params,
                timeout=timeout,
                progress=progress,
                param_paths=self._param_paths.get(name),
                handlers=handlers,
            )

        try:
            return await send()
        except HeaderMismatch:
            if not self.era.relists_on_header_mismatch or not await self._header_paths_changed(name):
                raise
            return await send()

    async def _validate_tool_result(self, name: str, result: dict[str, Any]) -> None:
        if (
            self.options.validate_output
            and name not in self._tools
            and "structuredContent" in result
            and not self._tools_listed
        ):
            # The tool's outputSchema is not known yet: learn the tools once (until the
            # next list_changed), as a client must to validate (server/tools.mdx).
            self._tools_listed = True
            try:
                await self.tools()
            except MCPError as exc:
                log.debug("%s: could not list tools to check output: %s", self.transport.name, exc)
        self._check_output(name, result)

    # -- tasks (io.modelcontextprotocol/tasks) ------------------------------------------------------
    def _require_tasks(self, what: str) -> None:
        if not self.takes_tasks:
            raise ValueError(
                f"{what} needs the tasks extension declared: create the client with "
                "ClientOptions(tasks=True)"
            )

    async def call_tool_as_task(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        handlers: ClientHandlers | None = None,
    ) -> TaskHandle:
        """Call a tool as a task: a ``TaskHandle`` as soon as the server has created it
        (``handle.result()`` waits for the outcome). A tool the server runs as a plain
        call gives a handle that is already ``completed`` with its result. ``handlers``:
        as for ``call_tool``; they answer the task's input requests too."""
        self._require_tasks("call_tool_as_task")
        handlers = for_call(handlers, self.handlers)
        result = await self._send_tool_call(name, arguments, timeout=timeout, handlers=handlers)
        if result.get("resultType") == "task":
            return TaskHandle(self, result, tool=name, validate=self._validate_tool_result, handlers=handlers)
        await self._validate_tool_result(name, result)
        return TaskHandle.completed(self, result)

    async def get_task(self, task_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        """``tasks/get``: the task (``DetailedTask``) as the server has it now; the
        server's -32602 ``InvalidParams`` when it has no such task (or it expired)."""
        self._require_tasks("get_task")
        return await self.session.request("tasks/get", {"taskId": task_id}, timeout=timeout)

    async def cancel_task(self, task_id: str, *, timeout: float | None = None) -> None:
        """``tasks/cancel``: ask the server to stop the task."""
        self._require_tasks("cancel_task")
        await self.session.request("tasks/cancel", {"taskId": task_id}, timeout=timeout)

    async def task(self, task_id: str, *, timeout: float | None = None) -> TaskHandle:
        """A handle on a task known by its id (started by this or another client of the
        same principal, e.g. before a restart): its state is read with ``tasks/get``."""
        return TaskHandle(self, await self.get_task(task_id, timeout=timeout))

    async def _header_paths_changed(self, name: str) -> bool:
        """List the tools afresh; True when ``name`` is still there with other header paths."""
        before = self._param_paths.get(name) or {}
        self.cache.invalidate("tools/list")
        self._tools.clear()
        self._param_paths.clear()
        try:
            await self.tools()
        except MCPError as exc:
            log.debug("%s: could not list tools after a header mismatch: %s", self.transport.name, exc)
            return False
        after = self._param_paths.get(name)
        return after is not None and after != before

    def _check_output(self, name: str, result: dict[str, Any]) -> None:
        tool = self._tools.get(name)
        schema = tool.get("outputSchema") if tool else None
        if not self.options.validate_output or schema is None or result.get("isError"):
            return
        if "structuredContent" not in result:
            raise OutputSchemaViolation(
                f"{self.transport.name}: tool {name!r} declares an outputSchema but its result "
                "has no structuredContent"
            )
        from ._schema import validate

        problem = validate(result["structuredContent"], schema)
        if problem is not None:
            raise OutputSchemaViolation(
                f"{self.transport.name}: tool {name!r} returned structuredContent that does not "
                f"match its outputSchema: {problem}"
            )

    async def list_resources(self, cursor: str | None = None) -> ListResourcesResult:
        """One page of ``resources/list``."""
        result = await self._request("resources/list", _cursor(cursor), cacheable=True)
        return convert(result, wire.ListResourcesResult)

    async def resources(self) -> list[Resource]:
        """Every resource, across all pages."""
        return await _all(self.list_resources, lambda page: page.resources)

    async def list_resource_templates(self, cursor: str | None = None) -> ListResourceTemplatesResult:
        """One page of ``resources/templates/list``."""
        result = await self._request("resources/templates/list", _cursor(cursor), cacheable=True)
        return convert(result, wire.ListResourceTemplatesResult)

    async def resource_templates(self) -> list[ResourceTemplate]:
        """Every resource template, across all pages."""
        return await _all(self.list_resource_templates, lambda page: page.resource_templates)

    async def read_resource(self, uri: str, *, timeout: float | None = None) -> ReadResourceResult:
        """``resources/read``; an unknown URI raises ``InvalidParams`` (a ``ResourceNotFound``)."""
        result = await self._request("resources/read", {"uri": uri}, cacheable=True, timeout=timeout)
        return convert(result, wire.ReadResourceResult)

    async def list_prompts(self, cursor: str | None = None) -> ListPromptsResult:
        """One page of ``prompts/list``."""
        result = await self._request("prompts/list", _cursor(cursor), cacheable=True)
        return convert(result, wire.ListPromptsResult)

    async def prompts(self) -> list[Prompt]:
        """Every prompt, across all pages."""
        return await _all(self.list_prompts, lambda page: page.prompts)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> GetPromptResult:
        """``prompts/get``: the prompt's messages for these arguments."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return convert(await self._request("prompts/get", params), wire.GetPromptResult)

    async def complete(
        self,
        ref: dict[str, Any],
        argument: str,
        value: str,
        context: dict[str, str] | None = None,
    ) -> CompleteResult:
        """Completion candidates for ``argument`` of a prompt (``{"type": "ref/prompt",
        "name": …}``) or a resource template (``{"type": "ref/resource", "uri": …}``)."""
        params: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": context}
        params = self.era.complete_params(params)
        return convert(await self._request("completion/complete", params), wire.CompleteResult)

    # -- subscriptions ----------------------------------------------------------------------------
    async def listen(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: bool = False,
        resource_uris: Sequence[str] = (),
        reconnect: bool = True,
        on_open: Callable[[], object] | None = None,
    ) -> AsyncIterator[SubscriptionEvent]:
        """Yield change events until the iterator is closed.

        Modern servers: one ``subscriptions/listen`` stream, re-opened with backoff if
        it drops. Handshake-era servers: ``resources/subscribe`` for each URI, and the
        session's own list_changed notifications.

        ``on_open()`` is called each time the server has confirmed the stream (and again
        after each re-opening): changes from then on are heard, earlier ones may not be,
        so a cache of lists fetched before it should be dropped.
        """
        wanted = Wanted(tools, prompts, resources, tuple(resource_uris))
        async for event in self.era.listen(wanted, reconnect, on_open):
            yield event


def _typed_capabilities(raw: dict[str, Any]) -> wire.ServerCapabilities:
    """``raw`` as a typed ``ServerCapabilities``; members that break the schema are dropped
    one by one, so one odd member never hides the others."""
    try:
        return msgspec.convert(raw, wire.ServerCapabilities, strict=False)
    except msgspec.ValidationError:
        pass
    kept: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            msgspec.convert({key: value}, wire.ServerCapabilities, strict=False)
        except msgspec.ValidationError:
            log.debug("server capability %r is malformed; ignored: %r", key, value)
            continue
        kept[key] = value
    return msgspec.convert(kept, wire.ServerCapabilities, strict=False)


def _cursor(cursor: str | None) -> dict[str, Any]:
    return {} if cursor is None else {"cursor": cursor}


def _supported(exc: UnsupportedProtocolVersion) -> list[str]:
    """The versions an ``UnsupportedProtocolVersion`` error names in ``data.supported``."""
    data = exc.data if isinstance(exc.data, dict) else {}
    supported = data.get("supported")
    return [v for v in supported if isinstance(v, str)] if isinstance(supported, list) else []


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | msgspec.UnsetType: ...


_PageT = TypeVar("_PageT", bound=_Page)
_ItemT = TypeVar("_ItemT")


async def _all(
    page: Callable[[str | None], Awaitable[_PageT]], items: Callable[[_PageT], list[_ItemT]]
) -> list[_ItemT]:
    """Every item of a paginated list, following ``nextCursor`` until it is absent."""
    collected: list[_ItemT] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        result = await page(cursor)
        collected.extend(items(result))
        cursor = result.next_cursor if isinstance(result.next_cursor, str) else None
        # An empty string is a valid cursor (pagination.mdx); only absence ends the list.
        if cursor is None or cursor in seen:
            return collected
        seen.add(cursor)


#: Times a request whose 2026-07-28 reply stream broke is re-issued (``_reissuing``).
_REISSUES = 2
#: Requests that only read: sending one twice does no harm (``_reissuing``).
_REPEATABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "tasks/get",
    }
)
