"""``Client``: one connection to one MCP server, in either era, over any transport.

::

    async with Client(["python", "weather.py"]) as client:      # stdio subprocess
        tools = await client.tools()
        result = await client.call_tool("forecast", {"city": "Oslo"})

    async with Client("http://127.0.0.1:8000/mcp") as client: ...  # Streamable HTTP
    async with Client(server) as client: ...                       # in-process Server

Era negotiation (basic/versioning.mdx, stdio.mdx and streamable-http.mdx, Backward
Compatibility): in ``"auto"`` mode the client sends ``server/discover`` at the latest
version. A ``DiscoverResult`` or a recognized modern error (-32022 names the versions
to retry with; -32020/-32021) means the server is modern. Any other error, an HTTP
status without a modern error body, or silence until ``probe_timeout`` means a
handshake-era server: the client sends ``initialize``. ``mode="legacy"`` skips the
probe; ``mode="2026-07-28"`` pins the version and sends no probe at all.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import (
    ConnectionClosed,
    HeaderMismatch,
    MCPError,
    MethodNotFound,
    MissingRequiredClientCapability,
    ProtocolError,
    SessionExpired,
    UnsupportedProtocolVersion,
)
from ..protocol import _meta
from ..protocol._headers import header_paths
from ..protocol._jsonrpc import Notification, Request
from ..protocol._versions import HANDSHAKE_VERSIONS, LATEST, MODERN_VERSIONS
from ._cache import ResultCache
from ._session import ClientSession, ProgressCallback, RequestTimeout
from ..transports._base import ClientTransport

__all__ = [
    "Client",
    "Elicitation",
    "InputRoundsExceeded",
    "ListChanged",
    "ResourceUpdated",
    "SubscriptionEvent",
]

log = logging.getLogger("modelctx.client")


class InputRoundsExceeded(MCPError):
    """The server kept asking for input past the client's limit of rounds."""


class OutputSchemaViolation(MCPError):
    """A tool's ``structuredContent`` does not match the ``outputSchema`` it declared."""


@dataclass(frozen=True)
class Elicitation:
    """What a server asks the user (client/elicitation.mdx).

    ``mode`` is "form" (fill in ``requested_schema``) or "url" (open ``url``).
    """

    mode: str
    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    server: str = ""


@dataclass(frozen=True)
class ListChanged:
    """The server's list of ``kind`` ("tools", "prompts" or "resources") changed."""

    kind: str


@dataclass(frozen=True)
class ResourceUpdated:
    uri: str


SubscriptionEvent = ListChanged | ResourceUpdated

ElicitationHandler = Callable[[Elicitation], Awaitable[Any]]
SamplingHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
RootsHandler = Callable[[], Awaitable[list[Any]]]


_TYPES: Any = None


def _types() -> Any:
    """The wire types of the latest revision, imported on first use."""
    global _TYPES
    if _TYPES is None:
        from ..protocol.types import v2026_07_28

        _TYPES = v2026_07_28
    return _TYPES


def _make_transport(target: Any, env: dict[str, str] | None, cwd: Any, headers: dict[str, str] | None) -> ClientTransport:
    if isinstance(target, ClientTransport):
        return target
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        from ..transports.http_client import HttpClientTransport

        return HttpClientTransport(target, headers=headers)
    if isinstance(target, (list, tuple)) or isinstance(target, str):
        from ..transports.stdio_client import StdioClientTransport

        argv = shlex.split(target) if isinstance(target, str) else list(target)
        return StdioClientTransport(argv[0], argv[1:], env=env, cwd=cwd)
    if hasattr(target, "dispatcher"):
        from ..transports.memory import MemoryTransport

        return MemoryTransport(target)
    raise TypeError(
        "Client target must be a URL, a command (string or argv list), a Server object or a "
        f"ClientTransport, not {type(target).__name__}"
    )


@dataclass
class _Options:
    mode: str = "auto"
    timeout: float = 60.0
    probe_timeout: float = 10.0
    max_rounds: int = 10
    cache: bool = True
    validate_output: bool = True
    client_info: dict[str, Any] = field(default_factory=lambda: {"name": "modelctx", "version": "0.1.0"})


class Client:
    """An MCP client; use it as ``async with Client(target) as client``.

    ``target``: an ``http(s)://`` URL, a command (``"python server.py"`` or an argv
    list, run as a subprocess on stdio), a ``Server`` object (in-process), or a
    ``ClientTransport``. Handlers answer what the server asks: ``elicitation``
    (``async (Elicitation) -> dict | ElicitResult``), ``sampling`` (``async (params) ->
    CreateMessageResult dict``), ``roots`` (``async () -> [{"uri": ...}]``); declaring a
    handler is what declares the capability. ``timeout`` is the default deadline of
    every request; progress pushes it back.
    """

    def __init__(
        self,
        target: Any,
        *,
        mode: str = "auto",
        timeout: float = 60.0,
        probe_timeout: float = 10.0,
        client_info: dict[str, Any] | None = None,
        elicitation: ElicitationHandler | None = None,
        elicitation_modes: Sequence[str] = ("form", "url"),
        sampling: SamplingHandler | None = None,
        roots: RootsHandler | None = None,
        log_level: str | None = None,
        on_notification: Callable[[Notification], Any] | None = None,
        cache: bool = True,
        max_rounds: int = 10,
        validate_output: bool = True,
        env: dict[str, str] | None = None,
        cwd: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if mode not in ("auto", "legacy", *MODERN_VERSIONS):
            raise ValueError(
                f"mode must be 'auto', 'legacy' or one of {list(MODERN_VERSIONS)}, not {mode!r}"
                + ("; handshake versions are spoken with mode='legacy'" if mode in HANDSHAKE_VERSIONS else "")
            )
        self.transport = _make_transport(target, env, cwd, headers)
        self._options = _Options(
            mode=mode,
            timeout=timeout,
            probe_timeout=probe_timeout,
            max_rounds=max_rounds,
            cache=cache,
            validate_output=validate_output,
            client_info=client_info or {"name": "modelctx", "version": "0.1.0"},
        )
        self.session = ClientSession(self.transport, timeout=timeout)
        self.session.client_info = self._options.client_info
        self.session.log_level = log_level
        self.session.on_notification = self._on_notification
        self.session.on_server_request = self._on_server_request
        self._elicitation = elicitation
        self._elicitation_modes = tuple(elicitation_modes)
        self._sampling = sampling
        self._roots = roots
        self._user_notification = on_notification
        self.cache = ResultCache()
        self.server_info: dict[str, Any] | None = None
        self.server_capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.supported_versions: list[str] = []
        self._tools: dict[str, dict[str, Any]] = {}
        self._param_paths: dict[str, dict[str, tuple[str, ...]]] = {}
        self._tools_listed = False  # tools/list fetched since the last tools list_changed
        self._listeners: set[asyncio.Queue] = set()
        self._legacy_subscriptions: dict[str, int] = {}
        self._connected = False

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def connect(self) -> None:
        self.session.capabilities = self._capabilities(modern=True)
        await asyncio.wait_for(self.transport.connect(self.session), self._options.probe_timeout + 30)
        try:
            await self._negotiate()
        except BaseException:
            await self.close()
            raise
        self._connected = True

    async def close(self) -> None:
        """End the connection: a subprocess gets stdin closed, then SIGTERM, then SIGKILL."""
        for queue in list(self._listeners):
            queue.put_nowait(ConnectionClosed(f"{self.transport.name}: the client was closed"))
        await self.session.aclose()
        await self.transport.close()

    @property
    def protocol_version(self) -> str | None:
        return self.session.version

    @property
    def modern(self) -> bool:
        return self.session.modern

    # -- era negotiation ------------------------------------------------------------------
    def _capabilities(self, modern: bool) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self._elicitation is not None:
            caps["elicitation"] = {mode: {} for mode in self._elicitation_modes}
        if self._sampling is not None:
            caps["sampling"] = {}
        if self._roots is not None:
            caps["roots"] = {} if modern else {"listChanged": False}
        return caps

    async def _negotiate(self) -> None:
        mode = self._options.mode
        session = self.session
        if mode == "legacy":
            await self._initialize()
            return
        session.modern = True
        session.version = LATEST if mode == "auto" else mode
        if mode != "auto":
            return
        for _ in range(3):
            try:
                result = await session.request("server/discover", {}, timeout=self._options.probe_timeout)
            except UnsupportedProtocolVersion as exc:
                if self._adopt_supported(exc):
                    continue
                if any(v in HANDSHAKE_VERSIONS for v in (exc.data or {}).get("supported") or []):
                    await self._initialize()
                    return
                raise
            except (HeaderMismatch, MissingRequiredClientCapability):
                return  # a modern server that did not like this probe; it is modern
            except (ProtocolError, RequestTimeout) as exc:
                log.debug("%s: discover failed (%s); trying initialize", self.transport.name, exc)
                await self._initialize()
                return
            except ConnectionClosed:
                raise
            except MCPError as exc:  # an HTTP status without a modern error body
                if self.transport.kind == "http":
                    log.debug("%s: discover got %s; trying initialize", self.transport.name, exc)
                    await self._initialize()
                    return
                raise
            versions = [v for v in result.get("supportedVersions") or [] if v in MODERN_VERSIONS]
            if not versions:
                await self._initialize()
                return
            if session.version not in versions:
                session.version = versions[0]
            self._remember_discover(result)
            if self._options.cache:
                self.cache.put("server/discover", {}, self.transport.credential_key, result)
            return
        raise MCPError(f"{self.transport.name}: could not agree on a protocol version")

    def _adopt_supported(self, exc: UnsupportedProtocolVersion) -> bool:
        """Switch to a modern version the server says it supports; False if none."""
        supported = (exc.data or {}).get("supported") or []
        mutual = [v for v in MODERN_VERSIONS if v in supported]  # our preference order
        if not mutual:
            return False
        self.session.version = mutual[0]
        return True

    def _remember_discover(self, result: dict[str, Any]) -> None:
        meta = result.get("_meta") or {}
        self.server_info = meta.get(_meta.SERVER_INFO) or self.server_info
        self.server_capabilities = result.get("capabilities") or {}
        self.instructions = result.get("instructions")
        self.supported_versions = list(result.get("supportedVersions") or [])

    async def _initialize(self) -> None:
        session = self.session
        session.modern = False
        session.version = None
        self.transport.end_handshake_session()
        result = await session.request(
            "initialize",
            {
                "protocolVersion": HANDSHAKE_VERSIONS[0],
                "capabilities": self._capabilities(modern=False),
                "clientInfo": self._options.client_info,
            },
            raw=True,
            timeout=self._options.probe_timeout + self._options.timeout,
        )
        version = result.get("protocolVersion")
        if version not in (*HANDSHAKE_VERSIONS, "2025-03-26"):
            raise MCPError(
                f"{self.transport.name} offered protocol version {version!r}, which this client "
                f"does not speak (it speaks {', '.join(MODERN_VERSIONS + HANDSHAKE_VERSIONS)})"
            )
        session.version = version
        self.server_info = result.get("serverInfo")
        self.server_capabilities = result.get("capabilities") or {}
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
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            cache.invalidate("resources/read", uri)
            event = ResourceUpdated(uri)
        if event is not None and not self.session.modern:
            for queue in self._listeners:
                queue.put_nowait(event)
        if self._user_notification is not None:
            self._user_notification(note)

    async def _on_server_request(self, request: Request) -> dict[str, Any]:
        """Handshake-era server requests, answered by the same handlers as MRTR."""
        if request.method == "ping":
            return {}
        return await self._answer_input(request.method, request.params)

    async def _answer_input(self, method: str, params: dict[str, Any]) -> Any:
        if method == "elicitation/create" and self._elicitation is not None:
            mode = params.get("mode", "form")
            schema = params.get("requestedSchema")
            answer = await self._elicitation(
                Elicitation(mode, params.get("message", ""), schema, params.get("url"), self.transport.name)
            )
            return _elicit_answer(answer, schema)
        if method == "sampling/createMessage" and self._sampling is not None:
            return _plain(await self._sampling(params))
        if method == "roots/list" and self._roots is not None:
            roots = await self._roots()
            return {"roots": [_root(r) for r in roots]}
        raise MethodNotFound(f"Method not found: {method} (this client has no handler for it)")

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
    ) -> dict[str, Any]:
        params = params or {}
        credential = self.transport.credential_key
        use_cache = cacheable and self._options.cache and self.session.modern
        if use_cache:
            hit = self.cache.get(method, params, credential)
            if hit is not None:
                return hit
        result, retried = await self._with_input(
            method, params, timeout=timeout, progress=progress, param_paths=param_paths
        )
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

        Returns the final result and whether it came from a retry.
        """
        extra: dict[str, Any] = {}
        delay = 0.05
        retries = 2
        for round_number in range(self._options.max_rounds + 1):
            try:
                result = await self.session.request(method, {**params, **extra}, **kwargs)
            except UnsupportedProtocolVersion as exc:
                # Retry with a version from data.supported (basic/versioning.mdx).
                if not self.session.modern or retries == 0 or not self._adopt_supported(exc):
                    raise
                retries -= 1
                result = await self.session.request(method, {**params, **extra}, **kwargs)
            except SessionExpired:
                # The server forgot our handshake session (HTTP 404): the client MUST
                # initialize again (2025-11-25 transports.mdx), then the call is re-sent.
                if self.session.modern or retries == 0:
                    raise
                retries -= 1
                await self._initialize()
                result = await self.session.request(method, {**params, **extra}, **kwargs)
            kind = result.get("resultType", "complete")  # absent: an older server; complete
            if kind == "complete":
                return result, round_number > 0
            if kind != "input_required":
                raise ProtocolError(
                    f"{self.transport.name} answered {method} with resultType {kind!r}, which this "
                    "client does not recognize"
                )
            requests = result.get("inputRequests") or {}
            extra = {}
            if requests:
                extra["inputResponses"] = await self._answer_all(requests)
            elif "requestState" not in result:
                raise ProtocolError(
                    f"{self.transport.name}: an input_required result with neither inputRequests "
                    "nor requestState"
                )
            else:
                await asyncio.sleep(delay)  # "retry later": back off a little each time
                delay = min(delay * 2, 1.0)
            if "requestState" in result:
                extra["requestState"] = result["requestState"]  # echoed byte for byte
        raise InputRoundsExceeded(
            f"{self.transport.name} still asked for input after {self._options.max_rounds} rounds "
            f"of {method}; giving up"
        )

    async def _answer_all(self, requests: dict[str, Any]) -> dict[str, Any]:
        keys = list(requests)

        async def one(request: Any) -> Any:
            if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                raise ProtocolError("an inputRequests entry is not a request object")
            return await self._answer_input(request["method"], request.get("params") or {})

        answers = await asyncio.gather(*(one(requests[k]) for k in keys))
        return dict(zip(keys, answers))

    # -- typed methods -----------------------------------------------------------------------------
    async def discover(self) -> Any:
        """``server/discover`` (modern servers): versions, capabilities, instructions."""
        result = await self._request("server/discover", {}, cacheable=True)
        self._remember_discover(result)
        return _convert(result, "DiscoverResult")

    async def list_tools(self, cursor: str | None = None) -> Any:
        """One page of ``tools/list``. Over HTTP, tools whose ``x-mcp-header`` annotations
        break the rules are dropped with a warning (streamable-http.mdx)."""
        result = await self._request("tools/list", _cursor(cursor), cacheable=True)
        tools = []
        for tool in result.get("tools") or []:
            name = tool.get("name")
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
        return _convert({**result, "tools": tools}, "ListToolsResult")

    async def tools(self) -> list[Any]:
        """Every tool, across all pages."""
        return await self._all(self.list_tools, "tools")

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Call a tool. Input the server asks for is gathered through the handlers.

        ``structuredContent`` is checked against the tool's ``outputSchema`` when the
        tool was listed with one. Tool failures come back as ``isError`` results.
        """
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        result = await self._request(
            "tools/call",
            params,
            timeout=timeout,
            progress=progress,
            param_paths=self._param_paths.get(name),
        )
        if (
            self._options.validate_output
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
        return _convert(result, "CallToolResult")

    def _check_output(self, name: str, result: dict[str, Any]) -> None:
        tool = self._tools.get(name)
        schema = tool.get("outputSchema") if tool else None
        if not self._options.validate_output or schema is None or result.get("isError"):
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

    async def list_resources(self, cursor: str | None = None) -> Any:
        return _convert(await self._request("resources/list", _cursor(cursor), cacheable=True), "ListResourcesResult")

    async def resources(self) -> list[Any]:
        return await self._all(self.list_resources, "resources")

    async def list_resource_templates(self, cursor: str | None = None) -> Any:
        result = await self._request("resources/templates/list", _cursor(cursor), cacheable=True)
        return _convert(result, "ListResourceTemplatesResult")

    async def resource_templates(self) -> list[Any]:
        return await self._all(self.list_resource_templates, "resource_templates")

    async def read_resource(self, uri: str, *, timeout: float | None = None) -> Any:
        result = await self._request("resources/read", {"uri": uri}, cacheable=True, timeout=timeout)
        return _convert(result, "ReadResourceResult")

    async def list_prompts(self, cursor: str | None = None) -> Any:
        return _convert(await self._request("prompts/list", _cursor(cursor), cacheable=True), "ListPromptsResult")

    async def prompts(self) -> list[Any]:
        return await self._all(self.list_prompts, "prompts")

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> Any:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return _convert(await self._request("prompts/get", params), "GetPromptResult")

    async def complete(
        self,
        ref: dict[str, Any],
        argument: str,
        value: str,
        context: dict[str, str] | None = None,
    ) -> Any:
        """Completion candidates for ``argument`` of a prompt (``{"type": "ref/prompt",
        "name": …}``) or a resource template (``{"type": "ref/resource", "uri": …}``)."""
        params: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": context}
        return _convert(await self._request("completion/complete", params), "CompleteResult")

    async def _all(self, page: Callable[[str | None], Awaitable[Any]], field_name: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            result = await page(cursor)
            items.extend(getattr(result, field_name))
            cursor = result.next_cursor if result.next_cursor is not msgspec.UNSET else None
            # An empty string is a valid cursor (pagination.mdx); only absence ends the list.
            if cursor is None or cursor in seen:
                return items
            seen.add(cursor)

    # -- subscriptions ----------------------------------------------------------------------------
    async def listen(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: bool = False,
        resource_uris: Sequence[str] = (),
        reconnect: bool = True,
    ) -> AsyncIterator[SubscriptionEvent]:
        """Yield change events until the iterator is closed.

        Modern servers: one ``subscriptions/listen`` stream, re-opened with backoff if
        it drops. Handshake-era servers: ``resources/subscribe`` for each URI, and the
        session's own list_changed notifications.
        """
        if self.session.modern:
            async for event in self._listen_modern(tools, prompts, resources, list(resource_uris), reconnect):
                yield event
            return
        queue: asyncio.Queue = asyncio.Queue()
        self._listeners.add(queue)
        try:
            for uri in resource_uris:
                await self._request("resources/subscribe", {"uri": uri})
            wanted = {"tools": tools, "prompts": prompts, "resources": resources}
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, ListChanged) and not wanted.get(item.kind):
                    continue
                if isinstance(item, ResourceUpdated) and item.uri not in resource_uris:
                    continue
                yield item
        finally:
            self._listeners.discard(queue)
            for uri in resource_uris:
                try:
                    await asyncio.wait_for(self._request("resources/unsubscribe", {"uri": uri}), 5)
                except (MCPError, asyncio.TimeoutError):
                    pass

    async def _listen_modern(
        self, tools: bool, prompts: bool, resources: bool, uris: list[str], reconnect: bool
    ) -> AsyncIterator[SubscriptionEvent]:
        filt: dict[str, Any] = {}
        if tools:
            filt["toolsListChanged"] = True
        if prompts:
            filt["promptsListChanged"] = True
        if resources:
            filt["resourcesListChanged"] = True
        if uris:
            filt["resourceSubscriptions"] = uris
        backoff = 0.1
        while True:
            request_id = self.session.next_id()
            queue = self.session.subscribe_queue(request_id)
            stream = asyncio.ensure_future(
                self.session.request(
                    "subscriptions/listen",
                    {"notifications": filt},
                    request_id=request_id,
                    timeout=24 * 3600.0,
                )
            )
            stream.add_done_callback(lambda task, q=queue: q.put_nowait(task))
            ended_gracefully = False
            try:
                while True:
                    item = await queue.get()
                    if isinstance(item, asyncio.Future):
                        if item.cancelled() or item.exception() is not None:
                            failure = None if item.cancelled() else item.exception()
                            if isinstance(failure, ProtocolError) and failure.remote:
                                raise failure  # the server refused to listen: retrying cannot help
                            break  # the stream dropped: reconnect below
                        ended_gracefully = True
                        break
                    if isinstance(item, BaseException):
                        raise item
                    method = item.method
                    if method == "notifications/subscriptions/acknowledged":
                        backoff = 0.1
                        continue
                    if method == "notifications/cancelled":
                        ended_gracefully = True
                        break
                    if method.endswith("/list_changed"):
                        yield ListChanged(method.split("/")[1])
                    elif method == "notifications/resources/updated":
                        yield ResourceUpdated(item.params.get("uri"))
            finally:
                self.session.unsubscribe_queue(request_id)
                if not stream.done():
                    stream.cancel()
                    try:
                        await stream
                    except (asyncio.CancelledError, MCPError):
                        pass
            if ended_gracefully or not reconnect or self.session.closed_error is not None:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)


def _cursor(cursor: str | None) -> dict[str, Any]:
    return {} if cursor is None else {"cursor": cursor}


_CACHEABLE_RESULTS = frozenset(
    {"DiscoverResult", "ListToolsResult", "ListResourcesResult", "ListResourceTemplatesResult", "ListPromptsResult", "ReadResourceResult"}
)


def _convert(result: dict[str, Any], type_name: str) -> Any:
    """The typed result; results of older servers get the fields the type requires."""
    result.setdefault("resultType", "complete")
    if type_name in _CACHEABLE_RESULTS:
        result.setdefault("ttlMs", 0)
        result.setdefault("cacheScope", "private")
    try:
        return msgspec.convert(result, getattr(_types(), type_name), strict=False)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"the server's {type_name} is malformed: {exc}") from None


def _elicit_answer(answer: Any, schema: dict[str, Any] | None) -> dict[str, Any]:
    """An ElicitResult dict; accepted forms get the schema's defaults for omitted fields
    (client/elicitation.mdx: clients SHOULD pre-fill defaults)."""
    answer = _plain(answer)
    if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
        raise ProtocolError('an elicitation handler must return {"action": "accept"|"decline"|"cancel", ...}')
    if answer["action"] == "accept" and isinstance(schema, dict):
        content = dict(answer.get("content") or {})
        for name, prop in (schema.get("properties") or {}).items():
            if name not in content and isinstance(prop, dict) and "default" in prop:
                content[name] = prop["default"]
        answer = {**answer, "content": content}
    return answer


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return value
    if hasattr(value, "action") and hasattr(value, "content"):  # server-side ElicitResult
        out = {"action": value.action}
        if value.content is not None:
            out["content"] = value.content
        return out
    return msgspec.to_builtins(value)


def _root(root: Any) -> dict[str, Any]:
    if isinstance(root, str):
        return {"uri": root}
    return _plain(root)
