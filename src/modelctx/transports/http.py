"""Streamable HTTP, server side: a plain ASGI application.

basic/transports/streamable-http.mdx (2026-07-28) and the 2025-11-25 transport page.
One endpoint path; per request:

0. A header the spec defines once (``_asgi.SINGLE_HEADERS``, ``Mcp-Param-*``) sent
   twice gets 400, so a proxy and this server never act on different copies.
1. DNS-rebinding guard: a missing or malformed ``Host`` gets 400, one outside the
   allowed names 421, an ``Origin`` outside the allowed origins 403 (loopback names
   are allowed by default).
   With ``auth`` (an OAuth protected resource, ``ResourceAuth``) a GET of its
   well-known metadata paths is answered with the document, and every request to the
   endpoint must carry a valid bearer token: else 401 or 403 with ``WWW-Authenticate``
   (basic/authorization/index.mdx), before anything is read or run.
2. POST bodies above ``max_body`` get 413, bodies not whole within ``body_timeout``
   408; a Content-Type other than ``application/json`` gets 415, an Accept admitting
   neither JSON nor SSE 406; anything not a JSON-RPC message gets 400 with the
   JSON-RPC error.
3. A modern request (``_meta`` names a version) is checked against its headers
   (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``) and
   dispatched statelessly; ``Mcp-Session-Id`` and ``Last-Event-ID`` are ignored.
4. ``initialize`` opens a handshake session named by ``Mcp-Session-Id``; later
   requests of that session carry the header (unknown or expired: 404). GET opens
   the session's stream for server messages, DELETE ends the session. Sessions expire
   when idle and their number is capped, so memory stays bounded. With a Redis
   (``ServerConfig.redis_url``) sessions are kept there too and any replica serves
   any of them (``_redis_sessions``); the table here is then a cache. Without one,
   ``serve_http``'s worker processes relay a request naming another worker's session
   to that worker (``_siblings``), so it reaches the session wherever it lands.
5. Beside the endpoint, the deprecated HTTP+SSE transport of 2024-11-05 (``GET /sse``,
   ``POST /messages``) is served behind the same checks 0-2 (``_legacy_sse``), unless
   ``legacy_sse=False``.

The reply is one JSON body unless the handler sends something before its result
(progress, a log message, a listen event, a handshake-era server request): the first
such message turns the reply into an SSE stream that the result then ends. A client
that disconnects cancels its request (the spec's HTTP cancellation), unless the reply
is a handshake session's resumable SSE stream (below).

Resumability (2025-11-25 Resumability and Redelivery; handshake sessions only,
2026-07-28 has no event ids). A handshake session's SSE reply is a ``KeptStream`` of
the session: its events carry ids ``<stream>:1``, ``<stream>:2``... and are kept as
they are written, so when the connection breaks the request runs on (a disconnect is
not a cancellation there; ``notifications/cancelled`` is) and a GET with
``Last-Event-ID`` naming the stream replays what follows that id, then follows the
stream until its response. A handler's ``Context.close_sse_stream`` ends the reply on
purpose with a priming event (the last id, ``retry:``, empty ``data:``; SEP-1699) and
the rest is kept the same way. With a Redis each kept stream is mirrored there
(``_redis_streams``), so the GET may reach any replica. Any other ``Last-Event-ID``
(unknown, evicted, another session's) is ignored and the GET opens the standalone
stream as without one: the spec lets a server not replay, and 404 would tell the
client its session has ended. A session keeps at most ``KEPT_STREAMS`` streams
(finished ones are dropped oldest first; when all are still running, a new reply has
no ids, a disconnect cancels it, and closing is declined) of at most ``KEPT_EVENTS``
events each (the oldest are dropped; the response, being last, is always kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from ..errors import (
    HEADER_MISMATCH,
    INSUFFICIENT_SCOPE,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    HeaderMismatch,
    InsufficientScope,
    InternalError,
    InvalidParams,
    InvalidRequest,
    InvalidToken,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from ..protocol import _meta
from ..protocol._connection import Ignore, Reject, Serve, ServerConnection
from ..protocol._headers import check_headers, header_paths, name_source
from ..protocol._jsonrpc import Message, Notification, Request, decode, error_response
from ..protocol._versions import HTTP_HANDSHAKE_HEADER_VERSIONS, Feature, has, is_modern
from ._asgi import (
    METADATA_HEADERS,
    ASGISend,
    BodyDeadlines,
    BodyTimeout,
    Receive,
    Scope,
    accepts,
    fold_headers,
    is_json_type,
    send_empty,
    send_json,
    send_plain,
    split_host,
)
from ._http_batch import serve_batch
from ._http_reply import CancelGuard, Reply
from ._http_server import serve_http
from ._legacy_sse import LegacySse
from ._redis_sessions import (
    RedisSessionStore,
    SessionStoreUnavailable,
    apply_fields,
    principal_digest,
)
from ._seam import Peer, ServerApp
from ._session import HandshakeSession, SessionTable, act
from ._siblings import BUSY, Siblings
from ._sse_resume import (
    kept_after,
    parse_event_id,
    resume,
    resume_shared,
    standalone,
)
from ._tuning import settle_heap

__all__ = ["HttpApp", "ResourceAuth", "serve_http"]

log = logging.getLogger("modelctx.http")

_HEADER_PATHS_CACHED = 4096  # tools whose Mcp-Param header paths are kept
_HOSTS_REMEMBERED = 64  # Host values the guard remembers as allowed (names x ports)
_METADATA_HEADERS = [(b"access-control-allow-origin", b"*"), (b"cache-control", b"max-age=300")]
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


class ResourceAuth(Protocol):
    """What the app asks of an OAuth protected resource (``modelctx.auth.ProtectedResource``
    is one): transports never import ``auth``, they call this seam.

    Two methods are optional: ``share_through_redis(url, prefix)``, called when the server
    has a ``redis_url`` (what must be shared, such as DPoP's spent proofs, goes there), and
    ``check_processes(n)``, called by ``serve_http`` before forking ``n`` workers (raises
    ``ValueError`` saying what to do when something could not be shared). So is an
    attribute ``app``: an ASGI app answering every path but the endpoint's and the
    metadata's (an ``OAuthProxy``'s authorization endpoints), with its own Host check.
    """

    def metadata_document(self, path: str) -> dict[str, Any] | None:
        """The RFC 9728 document served at ``path`` (GET, no token needed), or None."""

    async def authenticate(self, headers: Mapping[str, str], method: str = "POST") -> Any:
        """The principal of a ``method`` request to the endpoint; raises ``InvalidToken``
        (whose ``challenge_headers`` go on the 401) or ``InsufficientScope``."""

    def challenge(self, refusal: Exception) -> tuple[int, str]:
        """The HTTP status and ``WWW-Authenticate`` value answering a refusal."""


class HttpApp:
    """The ASGI application of one ``Server``.

    Options: ``path`` of the endpoint (default ``/mcp``); ``allowed_hosts`` and
    ``allowed_origins`` beyond loopback (``"*"`` allows any, for servers behind a
    proxy that checks); ``max_body`` bytes; ``body_timeout`` seconds for a whole POST
    body to arrive (408 past it, so slow peers cannot hold memory); ``session_idle_seconds`` and
    ``max_sessions`` for handshake-era sessions; ``tune_gc`` to freeze the start-up heap
    (``serve_http`` sets it; see ``_tuning``); ``authenticate``, an async hook
    ``(scope) -> principal`` that raises ``PermissionError`` to answer 401; ``auth``, an
    OAuth protected resource (``ResourceAuth``, e.g. ``modelctx.auth.ProtectedResource``)
    instead: it serves its metadata at its well-known paths and checks every request's
    bearer token before any MCP work (401 or 403 with a ``WWW-Authenticate`` challenge);
    a handler's ``InsufficientScope`` is answered 403 with the challenge too, when no
    SSE reply has started.

    Limits of handshake-era sessions (each refusal is a JSON-RPC error that says what
    to do, before any work starts):

    - ``max_sessions`` (10,000): the whole table. At the cap ``initialize`` evicts the
      least recently used idle session; with every one in use it gets 503 and
      ``Retry-After`` (the server is overloaded for everyone).
    - ``max_sessions_per_principal`` (100; only with ``authenticate``): what one
      principal may hold. At its quota ``initialize`` evicts that principal's own least
      recently used idle session; with all of them in use it gets 429 Too Many Requests
      and ``Retry-After`` (RFC 6585 4: this client, not the server, is over its share).
      So one principal's flood never evicts or refuses another's sessions while the
      table has room. 100 is far above what an honest user holds (a session per open
      client window or agent) and lets 100 principals hold their whole quota in the
      default table; the anonymous principal (a hook returning None) is one principal.
    - ``max_requests_per_session`` (256): requests of one session running at once;
      past it the request gets 429, ``Retry-After`` and a JSON-RPC error, and does
      not run. The GET stream is one per session (a second one: 409 Conflict).

    Shared sessions: when the server's ``config.redis_url`` names a Redis (or
    ``session_store`` is given), each handshake-era session is written there by
    ``initialize`` with ``session_idle_seconds`` as its idle TTL, and a request naming
    a session this process does not hold reads it from there (only for the principal
    that opened it). ``logging/setLevel``, ``resources/(un)subscribe`` and
    ``notifications/initialized`` write through; DELETE removes it on every replica.
    A client's answer to a server-to-client request, or its cancellation of a request,
    that reaches another replica is forwarded there through Redis. When Redis does not
    answer within the store's deadline, what needs it gets 503 and a JSON-RPC error
    saying the session store is unreachable. Modern (2026-07-28) requests never touch it.

    ``legacy_sse`` (default True): also serve the deprecated HTTP+SSE transport of
    2024-11-05 (``GET /sse``, ``POST /messages``; ``_legacy_sse``) behind the same
    checks; False answers those paths 404. An endpoint ``path`` of ``/sse`` or
    ``/messages`` turns it off too (that path is the endpoint's).
    """

    def __init__(
        self,
        server: ServerApp,
        *,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        max_body: int = 4 * 1024 * 1024,
        body_timeout: float = 30.0,
        session_idle_seconds: float = 900.0,
        max_sessions: int = 10_000,
        max_sessions_per_principal: int = 100,
        max_requests_per_session: int = 256,
        authenticate: Callable[[Scope], Awaitable[Any]] | None = None,
        auth: ResourceAuth | None = None,
        tune_gc: bool = False,
        session_store: RedisSessionStore | None = None,
        siblings: Siblings | None = None,
        legacy_sse: bool = True,
    ) -> None:
        if auth is not None and authenticate is not None:
            raise ValueError("give HttpApp either auth (OAuth) or authenticate (a hook), not both")
        self.server = server
        self.tune_gc = tune_gc
        self.path = path.rstrip("/") or "/"
        self.allowed_hosts = {h.lower() for h in allowed_hosts} | set(_LOOPBACK_HOSTS)
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.max_body = max_body
        self.body_timeout = body_timeout
        self._body_deadlines = BodyDeadlines(body_timeout)
        self._hosts_passed: set[str | None] = set()  # exact Host values the guard allowed
        self.session_idle_seconds = session_idle_seconds
        self.max_sessions = max_sessions
        self.max_sessions_per_principal = max_sessions_per_principal
        self.max_requests_per_session = max_requests_per_session
        self.authenticate = authenticate
        self.auth = auth
        self._auth_app: Callable[[Scope, Receive, ASGISend], Awaitable[None]] | None = getattr(auth, "app", None)
        redis_url = getattr(getattr(server, "config", None), "redis_url", None)
        share = getattr(auth, "share_through_redis", None)
        if share is not None and redis_url is not None:  # e.g. DPoP's spent proofs, for every replica
            share(redis_url, getattr(server, "redis_prefix", "modelctx:"))
        # Without authentication every caller is the same anonymous principal:
        # no quota, the table's cap alone.
        quota = max_sessions_per_principal if authenticate is not None or auth is not None else None
        self._sessions = SessionTable(max_sessions, quota, session_idle_seconds)
        self._store = session_store if session_store is not None else _store_for(server, session_idle_seconds)
        # Worker processes without Redis (serve_http): a request for another worker's
        # session is relayed to it (_siblings).
        self._siblings = siblings if self._store is None else None
        if self._store is not None:
            # The caps hold in Redis, for every process serving these sessions.
            self._store.limit(max_sessions, quota)
        # The deprecated HTTP+SSE transport (2024-11-05) at /sse and /messages: _legacy_sse.
        self._legacy = (
            LegacySse(
                server, max_sessions=max_sessions, per_principal=quota, max_requests=max_requests_per_session,
                slow_reader_seconds=body_timeout, siblings=self._siblings, store=self._store,
            )
            # An endpoint served at /sse or /messages keeps its path: no HTTP+SSE beside it.
            if legacy_sse and not LegacySse.serves(self.path) else None
        )
        self._running: contextlib.AsyncExitStack | None = None
        self._header_paths: dict[str, tuple[dict[str, Any], dict[str, tuple[str, ...]]]] = {}

    # -- ASGI entry ------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: ASGISend) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._running = contextlib.AsyncExitStack()
                try:
                    await self._running.enter_async_context(self.server.running())
                except Exception:  # noqa: BLE001 - StartupError or any other: ASGI wants it reported
                    # No message: the server's lifespan has logged what failed, and uvicorn
                    # printed it a second time under its own "Application startup failed".
                    await send({"type": "lifespan.startup.failed", "message": ""})
                    return
                if self.tune_gc:
                    settle_heap()
                if self._store is not None:
                    self._follow_store(self._store)
                self._name_tasks()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                if self._store is not None:
                    await self._store.close()
                if self._siblings is not None:
                    self._siblings.disconnect()
                if self._running is not None:
                    await self._running.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def close(self) -> None:
        """End every listen stream and handshake session (server shutdown)."""
        self.server.close_subscriptions()
        self._sessions.close_all()
        self.end_legacy_streams()

    async def _http(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        path = scope["path"].rstrip("/") or "/"
        legacy = self._legacy if self._legacy is not None and self._legacy.serves(path) else None
        if path != self.path and legacy is None:
            if self.auth is not None and scope["method"] == "GET":
                document = self.auth.metadata_document(path)
                if document is not None:
                    # Public and the same for everyone: browsers' clients may read it.
                    await send_json(send, 200, document, _METADATA_HEADERS)
                    return
            if self._auth_app is not None:
                await self._auth_app(scope, receive, send)
                return
            await send_plain(send, 404, b"Not Found")
            return
        headers, repeated = fold_headers(scope["headers"])
        if repeated is not None:
            await send_json(send, 400, error_response(None, _repeated(repeated)))
            return
        if self._siblings is not None:
            holder = self._sibling_for(headers) if legacy is None else legacy.holder(scope)
            if holder is not None:  # another worker's session or task: it answers (and checks) all
                await self._relay(holder, scope, headers, receive, send)
                return
        refusal = self._guard(headers)
        if refusal is not None:
            status, message = refusal
            await _refuse(send, status, message)
            return
        principal = None
        if self.auth is not None:
            try:
                principal = await self.auth.authenticate(headers, scope["method"])
            except (InvalidToken, InsufficientScope) as denied:
                await self._challenge(send, denied, None)
                return
        elif self.authenticate is not None:
            try:
                principal = await self.authenticate(scope)
            except PermissionError as exc:
                await send_plain(
                    send, 401, str(exc).encode() or b"Unauthorized", [(b"www-authenticate", b"Bearer")]
                )
                return
        method = scope["method"]
        if legacy is not None:
            await legacy.serve(scope, receive, send, principal, lambda: self._body(headers, receive, send), headers)
        elif method == "POST":
            await self._post(headers, receive, send, principal)
        elif method == "GET":
            await self._get(headers, receive, send, principal)
        elif method == "DELETE":
            await self._delete(headers, send, principal)
        else:
            await send_plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST, GET, DELETE")])

    async def _challenge(self, send: ASGISend, refusal: Exception, request_id: str | int | None) -> None:
        """Refuse with the auth's challenge (401 or 403); the body a JSON-RPC error."""
        assert self.auth is not None
        status, challenge = self.auth.challenge(refusal)
        error = refusal if isinstance(refusal, ProtocolError) else InvalidRequest(str(refusal))
        extra = refusal.challenge_headers.items() if isinstance(refusal, InvalidToken) else ()
        headers = [(b"www-authenticate", challenge.encode()), *((k.encode(), v.encode()) for k, v in extra)]
        with contextlib.suppress(OSError):
            await send_json(send, status, error_response(request_id, error), headers)

    def _guard(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """DNS-rebinding protection (basic/transports/streamable-http.mdx, Security).

        Host is parsed whole (name or bracketed IPv6, optional port, nothing after).
        A missing or malformed Host is 400: RFC 9112 3.2 requires it of HTTP/1.1, and a
        guard that lets a request without Host through guards nothing (uvicorn's h11
        server answers 400 too; httptools lets it pass). A Host outside the allowed
        names is 421 Misdirected Request, as the spec's SDKs answer DNS rebinding.
        """
        host = headers.get("host")
        if host in self._hosts_passed:
            pass  # seen and allowed before: skip the parse
        elif "*" not in self.allowed_hosts:
            if host is None:
                return 400, "The Host header is missing; HTTP/1.1 requires it"
            parts = split_host(host)
            if parts is None:
                return 400, f"The Host header {host!r} is malformed"
            if parts[0] not in self.allowed_hosts and host.lower() not in self.allowed_hosts:
                return 421, f"Host {host!r} is not allowed; configure allowed_hosts for proxies"
            if len(self._hosts_passed) < _HOSTS_REMEMBERED:
                self._hosts_passed.add(host)
        origin = headers.get("origin")
        if origin and "*" not in self.allowed_origins:
            clean = origin.rstrip("/").lower()
            if clean not in self.allowed_origins and not _loopback_origin(clean):
                return 403, f"Origin {origin!r} is not allowed"
        return None

    # -- POST -------------------------------------------------------------------------
    async def _body(self, headers: dict[str, str], receive: Receive, send: ASGISend) -> bytes | None:
        """The POST body, whole; None once it was refused (413 past ``max_body``, 408 not
        whole within ``body_timeout``)."""
        length = headers.get("content-length")
        if length is not None and length.isascii() and length.isdigit() and int(length) > self.max_body:
            await _refuse(send, 413, self._too_large())
            return None
        try:
            body = await self._body_deadlines.read(receive, self.max_body)
        except BodyTimeout:
            # connection: close, so uvicorn drops the rest of the body with the connection.
            late = f"The request body did not arrive within {self.body_timeout:g} seconds"
            await _refuse(send, 408, late, [(b"connection", b"close")])
            return None
        if body is None:
            await _refuse(send, 413, self._too_large())
        return body

    async def _post(
        self, headers: dict[str, str], receive: Receive, send: ASGISend, principal: Any
    ) -> None:
        body = await self._body(headers, receive, send)
        if body is None:
            return
        # A POST body is one JSON-RPC message: application/json, parsed (not a substring
        # match); a missing Content-Type is tolerated as JSON (the body decides).
        content_type = headers.get("content-type")
        if content_type is not None and not is_json_type(content_type):
            await _refuse(send, 415, f"Content-Type must be application/json, not {content_type!r}")
            return
        # The client MUST list both application/json and text/event-stream (Sending
        # Messages, 2); the reply is one of them. A missing Accept means any type (RFC 9110
        # 12.5.1), and the official SDK clients list both; so only an Accept that admits
        # neither is refused, 406: such a client could read no reply of ours.
        accept = headers.get("accept")
        if accept is not None and not _admits_a_reply(accept):
            await _refuse(send, 406, "Accept must list application/json and text/event-stream")
            return
        try:
            message = decode(body)
        except ProtocolError as exc:
            # An array: a batch, which a 2025-03-26 session takes (_http_batch); else refused.
            if body.lstrip().startswith(b"[") and await serve_batch(self, body, headers, receive, send, principal):
                return
            await send_json(send, status_for(exc.code, checked=False), error_response(exc.request_id, exc))
            return
        missing: str | None = None  # the session id named, when this process holds no such session
        try:
            session = self._era(message, headers, principal)
        except ProtocolError as exc:
            await send_json(
                send, status_for(exc.code, checked=False), error_response(_id_of(message), exc)
            )
            return
        except _UnknownSession as unknown:
            session, missing = None, unknown.session_id
        except _SessionsFull as full:
            status, error = self._full(full.reason)
            await send_json(send, status, error_response(_id_of(message), error), [(b"retry-after", b"1")])
            return
        if self._store is not None and (session is not None or missing is not None):
            try:
                session = await self._shared(self._store, session.id if missing is None else missing, session, principal)
            except SessionStoreUnavailable as down:
                await _store_down(send, _id_of(message), down)
                return
            except _SessionsFull as full:
                status, error = self._full(full.reason)
                await send_json(send, status, error_response(_id_of(message), error), [(b"retry-after", b"1")])
                return
            if session is not None:
                missing = None
        if missing is not None:
            await send_json(
                send,
                404,
                error_response(
                    _id_of(message),
                    InvalidRequest("Session not found or expired; send initialize again"),
                ),
            )
            return
        if type(message) is Request:
            await self._request(message, session, receive, send, principal)
            return
        unmatched = self._one_way(message, session, principal)
        if self._store is not None and session is not None:
            try:
                if unmatched:  # an answer or a cancellation for another replica
                    await self._store.forward(session.id, body)
                elif type(message) is Notification and message.method == "notifications/initialized":
                    await self._store.write_through(session)
            except SessionStoreUnavailable as down:
                await _store_down(send, None, down)
                return
        await send_empty(send, 202)

    def _peer(self, session: HandshakeSession | None, principal: Any) -> Peer:
        # Each HTTP session has a connection of its own: the peer lends none.
        return Peer(None, session, principal, on_open=self._opened)

    def _opened(self, session: HandshakeSession) -> None:
        """Index a session ``initialize`` opened (``_request`` then stores it, if shared)."""
        if self._siblings is not None and self._siblings.slot is not None:
            session.id = self._siblings.name(session.id)  # names this worker, for the others
        if self._store is not None:
            # Its server-to-client request ids name this process: unique across replicas.
            session.connection = ServerConnection(id_prefix=self._store.process_id)
            self._follow_store(self._store)  # an app mounted without its lifespan starts it here
        self._sessions.add(session)

    def _one_way(self, message: Message, session: HandshakeSession | None, principal: Any) -> bool:
        """A notification or a response: acted on, answered 202 with no body. True when
        it names a request this process does not hold (an answer to another replica's
        server-to-client request, a cancellation of a request running there)."""
        if session is None:
            if type(message) is Notification and message.method != "notifications/cancelled":
                self.server.notify(message, self._peer(None, principal))
            else:  # nothing to cancel or answer outside a session (2026-07-28 is stateless)
                log.debug("ignored %r outside a handshake session", message)
            return False
        peer = self._peer(session, principal)
        event = session.connection.receive(message)
        act(event, lambda note: self.server.notify(note, peer))
        return isinstance(event, Ignore)

    def _too_large(self) -> str:
        return f"Request body too large: the limit is {self.max_body} bytes"

    def _era(self, message: Any, headers: dict[str, str], principal: Any) -> Any:
        """The handshake session the message belongs to, or None for modern/initialize.

        A message is modern when its ``_meta`` names a version or its
        ``MCP-Protocol-Version`` header is not a handshake-era one. Modern requests
        are checked here, before any work, in the order the conformance suite and the
        spec imply: header present, ``_meta`` complete, header equal to ``_meta``,
        version supported, then ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*``.
        """
        params = getattr(message, "params", None) or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(_meta.PROTOCOL_VERSION) if isinstance(meta, dict) else None
        header_version = headers.get("mcp-protocol-version")
        if version is not None or (
            header_version is not None and header_version not in HTTP_HANDSHAKE_HEADER_VERSIONS
        ):
            if type(message) is Request:
                self._check_modern(message, params, meta, version, header_version, headers)
            return None
        if type(message) is Request and message.method == "initialize":
            refused = self._sessions.admit(principal)
            if refused is not None:
                raise _SessionsFull(refused)
            return None
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            if type(message) is Request:
                raise InvalidParams(
                    "Invalid params: no Mcp-Session-Id header and no "
                    f"_meta[{_meta.PROTOCOL_VERSION!r}]: modern clients send the _meta keys "
                    "and the MCP-Protocol-Version header; older clients send initialize first"
                )
            return None
        session = self._sessions.find(session_id, principal)
        if session is None:
            raise _UnknownSession(session_id)
        return session

    def _check_modern(
        self,
        request: Request,
        params: dict[str, Any],
        meta: Any,
        version: Any,
        header_version: str | None,
        headers: dict[str, str],
    ) -> None:
        if header_version is None:
            raise HeaderMismatch("Header mismatch: the MCP-Protocol-Version header is required")
        missing = [
            key
            for key in (_meta.PROTOCOL_VERSION, _meta.CLIENT_CAPABILITIES)
            if not isinstance(meta, dict) or key not in meta
        ]
        if missing:
            raise InvalidParams(
                f"Invalid params: params._meta is missing required key(s) {', '.join(missing)}"
            )
        if header_version != version:
            raise HeaderMismatch(
                f"Header mismatch: MCP-Protocol-Version header value '{header_version}' does "
                f"not match body value '{version}'"
            )
        if not is_modern(version) or version not in self.server.versions:
            raise UnsupportedProtocolVersion(version, list(self.server.versions))
        if has(version, Feature.HTTP_METHOD_HEADERS):
            check_headers(headers, request.method, params, version, self._params_for(request))

    def _params_for(self, request: Request) -> dict[str, tuple[str, ...]] | None:
        if request.method != "tools/call":
            return None
        name = request.params.get("name")
        if not isinstance(name, str):
            return None
        schema = self.server.tool_input_schema(name)
        if schema is None:
            return None
        # Keyed by the schema object itself: a tool registered again has a new one.
        cached = self._header_paths.get(name)
        if cached is not None and cached[0] is schema:
            return cached[1]
        try:
            paths = header_paths(schema)
        except ValueError as exc:
            log.warning("tool %r: %s; its x-mcp-header annotations are ignored", name, exc)
            paths = {}
        if len(self._header_paths) >= _HEADER_PATHS_CACHED:  # names of tools removed since
            self._header_paths.clear()
        self._header_paths[name] = (schema, paths)
        return paths

    async def _request(
        self,
        request: Request,
        session: HandshakeSession | None,
        receive: Receive,
        send: ASGISend,
        principal: Any,
    ) -> None:
        peer = self._peer(session, principal)
        inbound = None
        if session is not None:
            if len(session.connection.inflight) >= self.max_requests_per_session:
                await self._too_many_requests(request, send)
                return
            event = session.connection.receive(request)
            if isinstance(event, Reject):
                await send_json(send, status_for(event.error.code, checked=False), event.response)
                return
            assert isinstance(event, Serve)
            inbound = event.inbound
        # The handler runs inline in this task; a watcher cancels it if the client goes
        # away (closing the stream is the cancellation, streamable-http.mdx). One extra
        # task per request instead of two.
        guard = CancelGuard(asyncio.current_task())
        stream = Reply(send, session, guard, self._store if session is not None else None)
        watcher = asyncio.get_running_loop().create_task(guard.watch(receive))
        if inbound is not None:
            inbound.handle = guard
        stopping = False
        try:
            response = await self.server.handle(
                request, peer, stream.event, stream if session is not None else None
            )
        except asyncio.CancelledError:
            if not guard.requested:
                # Nobody asked: the ASGI server is stopping and its grace ran out. Answer
                # with a JSON-RPC error (uvicorn would answer a bare 500 with no body).
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                stopping = True
            else:
                guard.settle()
            response = None
        finally:
            guard.running = False
            watcher.cancel()
            if inbound is not None and session is not None:
                if guard.requested:
                    session.connection.cancel(inbound)
                response = session.connection.finish(inbound, response)
        if self._store is not None and not stopping and not guard.requested and response is not None:
            if await self._stored(self._store, request, peer, session, stream, send, response):
                return
        if stopping:
            # 503: send it again (elsewhere, or once the server is back).
            await self._cut_short(
                request, stream, send, 503,
                "Server shutting down: the request was stopped; send it again", [(b"retry-after", b"1")],
            )
            return
        if guard.requested:
            guard.settle()
            if guard.disconnected:
                stream.drop()
                return
            if session is not None and session.closed:
                # The session ended under the request (DELETE, shutdown): the client
                # still gets a JSON-RPC answer, never a bare 202.
                await self._cut_short(
                    request, stream, send, 404,
                    "Session ended while the request ran; send initialize again and retry",
                )
                return
            # Cancelled by notifications/cancelled on a handshake session; a handler that
            # swallowed its CancelledError still must not answer (cancellation.mdx).
            if stream.started:
                await stream.finish(None)
            else:
                await send_empty(send, 202)
            return
        if stream.started:
            await stream.finish(response)
            return
        if response is None:
            await send_empty(send, 202)
            return
        error = response.get("error")
        if self.auth is not None and error is not None and error.get("code") == INSUFFICIENT_SCOPE:
            # Runtime step-up (authorization/index.mdx): 403 and the challenge, in both eras.
            data = error.get("data")
            needed = data.get("requiredScopes") if isinstance(data, dict) else None
            refusal = InsufficientScope(needed if isinstance(needed, list) else (), error.get("message"))
            await self._challenge(send, refusal, request.id)
            return
        extra: list[tuple[bytes, bytes]] = []
        if peer.session is not None and request.method == "initialize":
            extra.append((b"mcp-session-id", peer.session.id.encode()))
        status = 200
        if error is not None and session is None:
            status = status_for(error.get("code"), checked=True)
        await send_json(send, status, response, extra)

    async def _too_many_requests(self, request: Request, send: ASGISend) -> None:
        """Refuse a request past the session's ``max_requests_per_session``: 429 (RFC 6585
        4) and a JSON-RPC error; it never ran, so sending it again later is safe."""
        error = InternalError(
            f"Too many requests in flight: this session already runs {self.max_requests_per_session}; "
            "wait for some to finish (or cancel them), then send this one again"
        )
        await send_json(send, 429, error_response(request.id, error), [(b"retry-after", b"1")])

    async def _cut_short(
        self,
        request: Request,
        stream: Reply,
        send: ASGISend,
        status: int,
        text: str,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Answer a request whose run was cut short (the server stopping, its session
        ending) with a JSON-RPC error, on the SSE stream if it started, else ``status``."""
        error = error_response(request.id, InternalError(text))
        try:
            if stream.started:
                await stream.finish(error)
            else:
                await send_json(send, status, error, extra)
        except OSError:
            pass  # the connection went first

    # -- GET and DELETE (handshake era only) -------------------------------------------------
    async def _get(
        self, headers: dict[str, str], receive: Receive, send: ASGISend, principal: Any
    ) -> None:
        accept = headers.get("accept", "")
        session_id = headers.get("mcp-session-id")
        if session_id is None or accept and not accepts(accept, "text/event-stream"):
            # 2026-07-28 has no GET stream: 405 (streamable-http.mdx, Backward Compatibility).
            await send_plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
            return
        session = await self._held(session_id, principal, send)
        if session is None:
            return
        last_event_id = headers.get("last-event-id")
        kept, after = kept_after(session, last_event_id)
        if kept is not None:
            await resume(session, kept, after, receive, send)
            return
        if self._store is not None and await self._resumed_elsewhere(self._store, session, last_event_id, receive, send):
            return
        if session.http_stream_open:
            # One GET stream per session (streamable-http.mdx); 409 Conflict, as the
            # official SDKs answer a second one.
            await _refuse(
                send, 409,
                "Conflict: this session's GET stream is already open; only one is allowed "
                "per session (close it before opening another)",
            )
            return
        # The standalone stream keeps its events (ids <stream>:<n>), so a GET that comes
        # back after a broken one gets what it missed: from its Last-Event-ID when that
        # names the stream, else from the last event sent.
        kept = standalone(session)
        parsed = parse_event_id(last_event_id)
        after = parsed[1] if parsed is not None and parsed[0] == kept.id else kept.sent
        session.http_stream_open = True
        try:
            await resume(session, kept, after, receive, send)
        finally:
            session.http_stream_open = False

    async def _resumed_elsewhere(
        self, store: RedisSessionStore, session: HandshakeSession, last_event_id: str | None,
        receive: Receive, send: ASGISend,
    ) -> bool:
        """Resume a stream another replica keeps in Redis; True once the GET was answered
        (the stream, or 503 when Redis is silent), False when Redis has no such stream."""
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            return False
        try:
            return await resume_shared(store, session, parsed[0], parsed[1], receive, send)
        except SessionStoreUnavailable as down:
            await _store_down(send, None, down)
            return True

    async def _delete(self, headers: dict[str, str], send: ASGISend, principal: Any) -> None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            await send_plain(send, 405, b"Method Not Allowed", [(b"allow", b"POST")])
            return
        session = await self._held(session_id, principal, send)
        if session is None:
            return
        if self._store is not None:
            try:
                await self._store.delete(session.id)  # and every replica closes its copy
            except SessionStoreUnavailable as down:
                await _store_down(send, None, down)
                return
        self._sessions.drop(session)
        await send_empty(send, 200)

    async def _held(self, session_id: str, principal: Any, send: ASGISend) -> HandshakeSession | None:
        """The session a GET or DELETE names; None once it answered 404 (or 503)."""
        session = self._sessions.find(session_id, principal)
        if self._store is not None:
            try:
                session = await self._shared(self._store, session_id, session, principal)
            except SessionStoreUnavailable as down:
                await _store_down(send, None, down)
                return None
            except _SessionsFull as full:
                status, error = self._full(full.reason)
                await send_json(send, status, error_response(None, error), [(b"retry-after", b"1")])
                return None
        if session is None:
            await send_plain(send, 404, b"Session not found")
        return session

    # -- sessions and tasks of another worker (_siblings) -------------------------------------
    def _sibling_for(self, headers: dict[str, str]) -> int | None:
        """The other worker a request belongs to, by its headers alone: the one holding
        the session it names, or (a request outside a session for a task, whose
        ``Mcp-Name`` is its ``taskId``) the one whose own store holds the task (its id
        names it: ``_name_tasks``). The holder checks the headers against the body."""
        assert self._siblings is not None
        session_id = headers.get("mcp-session-id")
        if session_id is not None:
            return self._siblings.holder(session_id)
        method = headers.get("mcp-method")
        task_id = headers.get("mcp-name") if method is not None and name_source(method) == "taskId" else None
        return self._siblings.holder(task_id) if task_id is not None else None

    def _name_tasks(self) -> None:
        """In a worker whose task store is its own (memory), start task ids with the
        worker's name, so a request for one that reaches a sibling is relayed here."""
        tasks = getattr(self.server, "tasks", None)
        if self._siblings is not None and self._siblings.slot is not None and tasks is not None:
            if getattr(tasks.store, "per_process", False):
                tasks.id_prefix = self._siblings.name("")

    async def _relay(
        self, holder: int, scope: Scope, headers: dict[str, str], receive: Receive, send: ASGISend
    ) -> None:
        """Pass the request to worker ``holder``, which holds its session, and its reply
        back; answer 404 when that worker is gone (the session with it), 503 when it does
        not accept in time."""
        assert self._siblings is not None
        body = b""
        if scope["method"] == "POST":
            read = await self._body(headers, receive, send)
            if read is None:
                return
            body = read
        outcome = await self._siblings.relay(holder, scope, body, receive, send)
        if outcome is None:
            return
        request_id = None
        with contextlib.suppress(ProtocolError):
            request_id = _id_of(decode(body)) if body else None
        if outcome == BUSY:
            error = InternalError("Server busy: the worker holding this session did not answer in time; retry")
            await send_json(send, 503, error_response(request_id, error), [(b"retry-after", b"1")])
        elif scope["method"] == "POST":
            gone = InvalidRequest("Session not found or expired; send initialize again")
            await send_json(send, 404, error_response(request_id, gone))
        else:
            await send_plain(send, 404, b"Session not found")

    # -- sessions shared through Redis (_redis_sessions) ------------------------------------
    def _follow_store(self, store: RedisSessionStore) -> None:
        store.listen(self._on_note, self._sessions.in_use)

    async def _shared(
        self, store: RedisSessionStore, session_id: str, session: HandshakeSession | None, principal: Any
    ) -> HandshakeSession | None:
        """The session as the store knows it: ``session`` (held here) with its TTL
        renewed when due (when Redis does not answer, the session held here is served
        all the same), or else built from its record. None when the store has no such
        session for this principal (another principal's is not found either). Raises
        ``SessionStoreUnavailable`` when a session must be read and Redis is silent."""
        self._follow_store(store)
        if session is None:
            return await self._restore(store, session_id, principal)
        if store.due(session):
            try:
                alive = await store.touch(session)
            except SessionStoreUnavailable as down:
                # Held here, the session can still be served; only its renewal waits.
                log.warning("session %s served without renewing its TTL: %s", session.id, down)
                session.stored_at = time.monotonic()
                return session
            if not alive:
                self._sessions.drop(session)  # deleted or expired on the other replicas
                return None
        return session

    async def _restore(self, store: RedisSessionStore, session_id: str, principal: Any) -> HandshakeSession | None:
        record = await store.load(session_id)
        if record is None or record.principal != principal_digest(principal):
            return None
        held = self._sessions.find(session_id, principal)
        if held is not None:  # built meanwhile, by a request that ran side by side
            return held
        refused = self._sessions.admit(principal)
        if refused is not None:
            raise _SessionsFull(refused)
        session = record.build(principal, store.process_id)
        session.stored_at = time.monotonic()  # load renewed its TTL
        self._sessions.add(session)
        if session.initialized:
            self._listen_for(session)
        return session

    def _listen_for(self, session: HandshakeSession) -> None:
        """Give a session built here the bus listener the server gives it on
        ``notifications/initialized`` (list_changed, resources/updated)."""
        start = getattr(self.server, "start_session_listener", None)
        if start is not None and session.listener is None:
            start(session)

    async def _stored(
        self,
        store: RedisSessionStore,
        request: Request,
        peer: Peer,
        session: HandshakeSession | None,
        stream: Reply,
        send: ASGISend,
        response: dict[str, Any],
    ) -> bool:
        """Write what ``request`` changed to the store: a new session (``initialize``) or
        a session's level or subscriptions. True when that failed and the client was
        answered (503, or 404 when the session ended on another replica meanwhile)."""
        if "result" not in response:
            return False
        try:
            if request.method == "initialize" and peer.session is not None:
                try:
                    refused = await store.save(peer.session)
                except SessionStoreUnavailable:
                    self._sessions.drop(peer.session)  # no replica could serve it
                    raise
                if refused is None:
                    return False
                self._sessions.drop(peer.session)  # the shared cap or quota: no room for it
                status, error = self._full(refused)
                await self._cut_short(request, stream, send, status, error.message, [(b"retry-after", b"1")])
                return True
            if session is None or request.method not in _WRITTEN_THROUGH:
                return False
            if await store.write_through(session):
                return False
            self._sessions.drop(session)
            await self._cut_short(
                request, stream, send, 404, "Session not found or expired; send initialize again"
            )
            return True
        except SessionStoreUnavailable as down:
            await self._cut_short(request, stream, send, 503, str(down), [(b"retry-after", b"1")])
            return True

    def _on_note(self, note: dict[str, Any]) -> None:
        """Act on what another replica published about a session held here."""
        if note.get("kind") == "sse" and self._legacy is not None:
            self._legacy.forwarded(note)  # a POST for an HTTP+SSE stream held here
            return
        session_id = note.get("session")
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        kind = note.get("kind")
        if session is None:
            if kind == "message":
                log.debug("session %s: a forwarded message for a session not held here; dropped", session_id)
            return
        if kind == "deleted":
            self._sessions.drop(session)
        elif kind == "changed" and isinstance(note.get("fields"), dict):
            apply_fields(session, note["fields"])
            if session.initialized:
                self._listen_for(session)
        elif kind == "message" and isinstance(note.get("message"), str):
            try:
                message = decode(note["message"].encode())
            except ProtocolError:
                return
            if type(message) is Request:
                return  # only answers and notifications are forwarded
            peer = self._peer(session, session.principal)
            event = session.connection.receive(message)
            if isinstance(event, Ignore):
                log.debug("session %s: forwarded message not for this replica: %s", session.id, event.why)
            act(event, lambda notification: self.server.notify(notification, peer))

    # -- sessions ----------------------------------------------------------------------------
    # The table, its eviction and its quotas: _session.SessionTable. A session id is a
    # handle bound to the user who opened it (security best practices, session
    # hijacking): another principal's session is not found, and a 404 rather than a 403
    # does not confirm that the id is live.

    def _full(self, reason: str) -> tuple[int, InternalError]:
        # The transport page names no status for this. The principal's quota: 429 (RFC
        # 6585 4, this client sent too many); the whole table: 503 with Retry-After,
        # HTTP's "overloaded for now, come back" (RFC 9110 15.6.4). The JSON-RPC error
        # says the same to a client that reads only the body.
        if reason == SessionTable.QUOTA:
            return 429, InternalError(
                f"Too many sessions: all {self.max_sessions_per_principal} sessions of this "
                "principal are in use; end one (DELETE) or wait for its requests to finish, "
                "then send initialize again; or use the 2026-07-28 protocol (no session)"
            )
        return 503, InternalError(
            f"Server busy: all {self.max_sessions} sessions are in use; "
            "send initialize again later, or use the 2026-07-28 protocol (no session)"
        )

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    @property
    def legacy_sse_count(self) -> int:
        """Open HTTP+SSE event streams (each one session)."""
        return 0 if self._legacy is None else len(self._legacy)

    def end_legacy_streams(self) -> None:
        """End every HTTP+SSE event stream now (the server stops: uvicorn then need not
        wait its grace for them)."""
        if self._legacy is not None:
            self._legacy.close()

    @property
    def session_store(self) -> RedisSessionStore | None:
        """Where handshake-era sessions are shared between replicas (None: this process only)."""
        return self._store


class _UnknownSession(Exception):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id


# Methods whose effect on a handshake session is written through to a shared store.
_WRITTEN_THROUGH = frozenset({"logging/setLevel", "resources/subscribe", "resources/unsubscribe"})


def _store_for(server: Any, idle_seconds: float) -> RedisSessionStore | None:
    """The shared session store the server's ``config.redis_url`` names, if any."""
    url = getattr(getattr(server, "config", None), "redis_url", None)
    if not url:
        return None
    try:
        # The server's prefix (Server.redis_prefix): replicas of different servers may
        # share one Redis, and their sessions must not meet.
        return RedisSessionStore(url, idle_seconds=idle_seconds, prefix=getattr(server, "redis_prefix", "modelctx:"))
    except ImportError as exc:
        raise ImportError(
            f"redis_url {url!r} needs the redis package for shared sessions: pip install 'modelctx[redis]'"
        ) from exc


async def _store_down(send: ASGISend, request_id: str | int | None, down: SessionStoreUnavailable) -> None:
    """503 (retry shortly) and a JSON-RPC error saying the session store is unreachable."""
    log.warning("%s", down)
    with contextlib.suppress(OSError):
        await send_json(send, 503, error_response(request_id, InternalError(str(down))), [(b"retry-after", b"1")])


class _SessionsFull(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason  # SessionTable.QUOTA or .FULL


# The HTTP status of a reply that is one JSON-RPC error, on the 2026-07-28 path
# (ARCHITECTURE.md, choices): the one table, read by status_for.
_STATUS_BY_CODE = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    METHOD_NOT_FOUND: 404,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
}


def _repeated(name: str) -> ProtocolError:
    """The error for a header the spec defines once, sent more than once."""
    message = f"The {name} header was sent more than once; send it once"
    return HeaderMismatch(message) if name in METADATA_HEADERS or name.startswith("mcp-param-") else InvalidRequest(message)


def _loopback_origin(origin: str) -> bool:
    """True for an Origin (``scheme://host[:port]``, lower case) on a loopback host."""
    scheme, sep, authority = origin.partition("://")
    if not sep or not scheme:
        return False
    parts = split_host(authority)
    return parts is not None and parts[0] in _LOOPBACK_HOSTS


def _admits_a_reply(accept: str) -> bool:
    if "application/json" in accept and "text/event-stream" in accept and ";" not in accept:
        return True  # the usual value, without parsing
    return accepts(accept, "application/json") or accepts(accept, "text/event-stream")


async def _refuse(
    send: ASGISend, status: int, message: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Refuse a request before any work: ``status`` and a JSON-RPC -32600 with no id."""
    with contextlib.suppress(OSError):  # the client may be gone already
        await send_json(send, status, error_response(None, InvalidRequest(message)), extra)


def status_for(code: object, *, checked: bool) -> int:
    """The HTTP status for an error reply with JSON-RPC ``code``.

    ``checked=False``: the message was refused before dispatch (unreadable, malformed
    or with headers unlike its body): 400, or what the table says. ``checked=True``:
    a method's own error: what the table says, else 200 as the official SDK does.
    Handshake-era session replies are always 200 (the caller does not ask).
    """
    status = _STATUS_BY_CODE.get(code) if isinstance(code, int) else None
    if status is not None:
        return status
    return 200 if checked else 400


def _id_of(message: Message) -> str | int | None:
    return None if isinstance(message, Notification) else message.id
