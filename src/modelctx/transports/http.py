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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from ..errors import (
    INSUFFICIENT_SCOPE,
    InsufficientScope,
    InternalError,
    InvalidRequest,
    InvalidToken,
    ProtocolError,
)
from ..protocol.connection import Ignore, Inbound
from ..protocol.headers import name_source
from ..protocol.jsonrpc import Message, Notification, Request, decode, error_response
from ._asgi import (
    ASGISend,
    BodyDeadlines,
    BodyTimeout,
    Receive,
    Scope,
    app_path,
    send_empty,
    send_json,
    send_plain,
    sent_path,
)
from ._exchange import Confirm, HttpExchange, Named, OneWay, Refuse, ServeBatch, ServeRequest, refuse, status_for
from ._http_batch import serve_batch
from ._http_reply import CancelGuard, Reply
from ._http_server import serve_http
from ._legacy_sse import LegacySse
from ._redis_sessions import RedisSessionStore, SessionStoreUnavailable, apply_fields
from ._session_store import WRITTEN, SessionGone, SessionsFull, store_for
from ._siblings import BUSY, Siblings
from ._sse_resume import kept_after, parse_event_id, resume, standalone
from ._tuning import settle_heap
from .server_seam import Peer, ServerApp
from .session import HandshakeSession, act

__all__ = ["HttpApp", "ResourceAuth", "serve_http", "status_for"]

log = logging.getLogger("modelctx.http")

_METADATA_HEADERS = [(b"access-control-allow-origin", b"*"), (b"cache-control", b"max-age=300")]


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

    async def authenticate(self, headers: Mapping[str, str], method: str = "POST", path: str | None = None) -> Any:
        """The principal of a ``method`` request to the endpoint (``path``: the one it was
        sent to when not the endpoint's own, as HTTP+SSE's ``/sse`` and ``/messages``: a
        DPoP proof names that URL); raises ``InvalidToken`` (whose ``challenge_headers`` go
        on the 401) or ``InsufficientScope``."""

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
        self.max_body = max_body
        self.body_timeout = body_timeout
        self._body_deadlines = BodyDeadlines(body_timeout)
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
        self._sessions = store_for(
            server, session_store, max_sessions, quota, session_idle_seconds, self._on_note, self._listen_for
        )
        self._shared = self._sessions.shared
        self.exchange = HttpExchange(
            server, self._sessions, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
            max_body=max_body, max_sessions=max_sessions, max_sessions_per_principal=max_sessions_per_principal,
            max_requests_per_session=max_requests_per_session,
        )
        # Worker processes without Redis (serve_http): a request for another worker's
        # session is relayed to it (_siblings).
        self._siblings = siblings if self._shared is None else None
        # The deprecated HTTP+SSE transport (2024-11-05) at /sse and /messages: _legacy_sse.
        self._legacy = (
            LegacySse(
                server, max_sessions=max_sessions, per_principal=quota, max_requests=max_requests_per_session,
                slow_reader_seconds=body_timeout, siblings=self._siblings, store=self._shared,
            )
            # An endpoint served at /sse or /messages keeps its path: no HTTP+SSE beside it.
            if legacy_sse and not LegacySse.serves(self.path) else None
        )
        self._running: contextlib.AsyncExitStack | None = None

    @property
    def allowed_hosts(self) -> set[str]:
        return self.exchange.allowed_hosts

    @property
    def allowed_origins(self) -> set[str]:
        return self.exchange.allowed_origins

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
                self._sessions.follow()
                self._name_tasks()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await self._sessions.close()
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
        path = app_path(scope)
        legacy = self._legacy if self._legacy is not None and self._legacy.serves(path) else None
        if path != self.path and legacy is None:
            await self._elsewhere(path, scope, receive, send)
            return
        headers, refusal = self.exchange.head(scope["headers"])
        if refusal is not None:
            await _answer(send, refusal)
            return
        if self._siblings is not None:
            holder = self._sibling_for(headers) if legacy is None else legacy.holder(scope)
            if holder is not None:  # another worker's session or task: it answers (and checks) all
                await self._relay(holder, scope, headers, receive, send)
                return
        refusal = self.exchange.guard(headers)
        if refusal is not None:
            await _answer(send, refusal)
            return
        principal = None
        if self.auth is not None or self.authenticate is not None:
            principal = await self._principal(scope, headers, send, legacy is not None)
            if principal is _REFUSED:
                return
        if legacy is not None:
            await legacy.serve(scope, receive, send, principal, lambda: self._body(headers, receive, send), headers)
            return
        method = scope["method"]
        decided = None if method == "POST" else self.exchange.route(method, headers, principal)
        if decided is None:
            await self._post(headers, receive, send, principal)
        elif isinstance(decided, Refuse):
            await _answer(send, decided)
        elif method == "GET":
            await self._get(decided, headers, receive, send, principal)
        else:
            await self._delete(decided, send, principal)

    async def _elsewhere(self, path: str, scope: Scope, receive: Receive, send: ASGISend) -> None:
        """A path that is not the endpoint: the auth's metadata or its app, else 404."""
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

    async def _principal(self, scope: Scope, headers: dict[str, str], send: ASGISend, legacy: bool) -> Any:
        """Who sends the request (None: anonymous); ``_REFUSED`` once answered 401/403.
        ``legacy``: an HTTP+SSE path beside the endpoint, whose URL a DPoP proof names."""
        if self.auth is not None:
            where = sent_path(scope) if legacy else None
            try:
                return await self.auth.authenticate(headers, scope["method"], where)
            except (InvalidToken, InsufficientScope) as denied:
                await self._challenge(send, denied, None)
                return _REFUSED
        if self.authenticate is not None:
            try:
                return await self.authenticate(scope)
            except PermissionError as exc:
                await send_plain(
                    send, 401, str(exc).encode() or b"Unauthorized", [(b"www-authenticate", b"Bearer")]
                )
                return _REFUSED
        return None

    async def _challenge(self, send: ASGISend, refusal: Exception, request_id: str | int | None) -> None:
        """Refuse with the auth's challenge (401 or 403); the body a JSON-RPC error."""
        assert self.auth is not None
        status, challenge = self.auth.challenge(refusal)
        error = refusal if isinstance(refusal, ProtocolError) else InvalidRequest(str(refusal))
        extra = refusal.challenge_headers.items() if isinstance(refusal, InvalidToken) else ()
        headers = [(b"www-authenticate", challenge.encode()), *((k.encode(), v.encode()) for k, v in extra)]
        with contextlib.suppress(OSError):
            await send_json(send, status, error_response(request_id, error), headers)

    # -- POST -------------------------------------------------------------------------
    async def _body(self, headers: dict[str, str], receive: Receive, send: ASGISend) -> bytes | None:
        """The POST body, whole; None once it was refused (413 past ``max_body``, 408 not
        whole within ``body_timeout``)."""
        refusal = self.exchange.declared_too_large(headers)
        if refusal is None:
            try:
                body = await self._body_deadlines.read(receive, self.max_body)
            except BodyTimeout:
                refusal = self.exchange.late(self.body_timeout)
            else:
                if body is not None:
                    return body
                refusal = self.exchange.too_large()
        await _answer(send, refusal)
        return None

    async def _post(self, headers: dict[str, str], receive: Receive, send: ASGISend, principal: Any) -> None:
        body = await self._body(headers, receive, send)
        if body is None:
            return
        decided = self.exchange.post(headers, body, principal)
        if type(decided) is Confirm:
            decided = await self._confirm(decided, principal)
        if type(decided) is ServeRequest:
            await self._request(decided.request, decided.session, receive, send, principal)
        elif type(decided) is OneWay:
            await self._one_way(decided.message, decided.session, body, send, principal)
        elif type(decided) is ServeBatch:
            await serve_batch(self, decided.session, decided.body, receive, send, principal)
        else:
            assert isinstance(decided, Refuse)
            await _answer(send, decided)

    async def _confirm(self, confirm: Confirm, principal: Any) -> ServeRequest | OneWay | Refuse:
        """Ask the session store which session ``confirm`` names, and decide again."""
        request_id = getattr(confirm.message, "id", None)
        try:
            session = await self._sessions.resolve(confirm.session_id, confirm.held, principal)
        except SessionStoreUnavailable as down:
            log.warning("%s", down)
            return self.exchange.store_down(request_id, down)
        except SessionsFull as full:
            return self.exchange.full(full.reason, request_id)
        return self.exchange.confirmed(confirm, session)

    async def _one_way(
        self, message: Message, session: HandshakeSession | None, body: bytes, send: ASGISend, principal: Any
    ) -> None:
        """A notification or a response: acted on, answered 202 with no body."""
        if session is None:
            if type(message) is Notification and message.method != "notifications/cancelled":
                self.server.notify(message, self._peer(None, principal))
            else:  # nothing to cancel or answer outside a session (2026-07-28 is stateless)
                log.debug("ignored %r outside a handshake session", message)
        else:
            peer = self._peer(session, principal)
            event = session.connection.receive(message)
            act(event, lambda note: self.server.notify(note, peer))
            try:  # an answer or a cancellation for another replica is forwarded there
                await self._sessions.one_way(session, message, body, isinstance(event, Ignore))
            except SessionStoreUnavailable as down:
                log.warning("%s", down)
                await _answer(send, self.exchange.store_down(None, down))
                return
        await send_empty(send, 202)

    def _peer(self, session: HandshakeSession | None, principal: Any) -> Peer:
        # Each HTTP session has a connection of its own: the peer lends none.
        return Peer(None, session, principal, on_open=self._opened)

    def _opened(self, session: HandshakeSession) -> None:
        """Index a session ``initialize`` opened (``_request`` then stores it, if shared)."""
        if self._siblings is not None and self._siblings.slot is not None:
            session.id = self._siblings.name(session.id)  # names this worker, for the others
        self._sessions.add(session)

    async def _request(
        self, request: Request, session: HandshakeSession | None, receive: Receive, send: ASGISend, principal: Any
    ) -> None:
        """Run ``request`` (on ``session``, or statelessly) and write its reply."""
        peer = self._peer(session, principal)
        inbound: Inbound | None = None
        if session is not None:
            entered = self.exchange.enter(request, session)
            if isinstance(entered, Refuse):
                await _answer(send, entered)
                return
            inbound = entered
        # The handler runs inline in this task; a watcher cancels it if the client goes
        # away (closing the stream is the cancellation, streamable-http.mdx). One extra
        # task per request instead of two.
        guard = CancelGuard(asyncio.current_task())
        stream = Reply(send, session, guard, self._shared if session is not None else None)
        watcher = asyncio.get_running_loop().create_task(guard.watch(receive))
        if inbound is not None:
            inbound.handle = guard
        stopping = False
        response = None
        try:
            response = await self.server.handle(request, peer, stream.event, stream if session is not None else None)
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
        finally:
            guard.running = False
            watcher.cancel()
            if inbound is not None and session is not None:
                if guard.requested:
                    session.connection.cancel(inbound)
                response = session.connection.finish(inbound, response)
        if stopping:
            # 503: send it again (elsewhere, or once the server is back).
            await self._cut_short(
                request, stream, send, 503,
                "Server shutting down: the request was stopped; send it again", _RETRY,
            )
        elif guard.requested:
            await self._cancelled(request, session, guard, stream, send)
        elif (
            response is not None and peer.session is not None and request.method in WRITTEN
            and "result" in response and await self._saved(request, peer.session, stream, send)
        ):
            return  # the store refused what the request did: answered
        elif stream.started:
            await stream.finish(response)
        elif response is None:
            await send_empty(send, 202)
        elif self.auth is not None and _refused_scope(response):
            await self._step_up(request, response, send)
        else:
            await send_json(send, *_json_reply(request, peer, session, response))

    async def _cancelled(
        self, request: Request, session: HandshakeSession | None, guard: CancelGuard, stream: Reply, send: ASGISend
    ) -> None:
        """Answer a request whose cancellation was asked for (a disconnect, notifications/cancelled)."""
        guard.settle()
        if guard.disconnected:
            stream.drop()
        elif session is not None and session.closed:
            # The session ended under the request (DELETE, shutdown): the client
            # still gets a JSON-RPC answer, never a bare 202.
            await self._cut_short(
                request, stream, send, 404, "Session ended while the request ran; send initialize again and retry"
            )
        # Cancelled by notifications/cancelled on a handshake session; a handler that
        # swallowed its CancelledError still must not answer (cancellation.mdx).
        elif stream.started:
            await stream.finish(None)
        else:
            await send_empty(send, 202)

    async def _step_up(self, request: Request, response: dict[str, Any], send: ASGISend) -> None:
        """Runtime step-up (authorization/index.mdx): an insufficient scope is answered 403
        with the challenge, in both eras."""
        error = response["error"]
        data = error.get("data")
        needed = data.get("requiredScopes") if isinstance(data, dict) else None
        refusal = InsufficientScope(needed if isinstance(needed, list) else (), error.get("message"))
        await self._challenge(send, refusal, request.id)

    async def _saved(self, request: Request, session: HandshakeSession, stream: Reply, send: ASGISend) -> bool:
        """Write what ``request`` changed to the session store: True when that failed and
        the client was answered (503, 429, or 404 when the session ended meanwhile)."""
        try:
            await self._sessions.saved(request.method, session)
        except SessionsFull as full:
            status, error = self.exchange.full_status(full.reason), self.exchange.full_error(full.reason)
            await self._cut_short(request, stream, send, status, error.message, _RETRY)
        except SessionGone:
            await self._cut_short(request, stream, send, 404, "Session not found or expired; send initialize again")
        except SessionStoreUnavailable as down:
            await self._cut_short(request, stream, send, 503, str(down), _RETRY)
        else:
            return False
        return True

    async def _cut_short(
        self, request: Request, stream: Reply, send: ASGISend, status: int, text: str,
        extra: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        """Answer a request whose run was cut short (the server stopping, its session
        ending) with a JSON-RPC error, on the SSE stream if it started, else ``status``."""
        error = error_response(request.id, InternalError(text))
        try:
            if stream.started:
                await stream.finish(error)
            else:
                await send_json(send, status, error, list(extra))
        except OSError:
            pass  # the connection went first

    # -- GET and DELETE (handshake era only) -------------------------------------------------
    async def _get(self, named: Named, headers: dict[str, str], receive: Receive, send: ASGISend, principal: Any) -> None:
        session = await self._held(named, principal, send)
        if session is None:
            return
        last_event_id = headers.get("last-event-id")
        kept, after = kept_after(session, last_event_id)
        if kept is not None:
            await resume(session, kept, after, receive, send)
            return
        try:
            if await self._sessions.resume_elsewhere(session, last_event_id, receive, send):
                return  # a stream another replica keeps in Redis
        except SessionStoreUnavailable as down:
            log.warning("%s", down)
            await _answer(send, self.exchange.store_down(None, down))
            return
        if session.http_stream_open:
            # One GET stream per session (streamable-http.mdx); 409 Conflict, as the
            # official SDKs answer a second one.
            await _answer(send, refuse(
                409,
                "Conflict: this session's GET stream is already open; only one is allowed "
                "per session (close it before opening another)",
            ))
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

    async def _delete(self, named: Named, send: ASGISend, principal: Any) -> None:
        session = await self._held(named, principal, send)
        if session is None:
            return
        try:
            await self._sessions.delete(session)  # and every replica closes its copy
        except SessionStoreUnavailable as down:
            log.warning("%s", down)
            await _answer(send, self.exchange.store_down(None, down))
            return
        await send_empty(send, 200)

    async def _held(self, named: Named, principal: Any, send: ASGISend) -> HandshakeSession | None:
        """The session a GET or DELETE names; None once it answered 404 (or 503)."""
        session = named.held
        if session is None or not self._sessions.fresh(session):
            try:
                session = await self._sessions.resolve(named.session_id, session, principal)
            except SessionStoreUnavailable as down:
                log.warning("%s", down)
                await _answer(send, self.exchange.store_down(None, down))
                return None
            except SessionsFull as full:
                await _answer(send, self.exchange.full(full.reason, None))
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

    # -- sessions shared through Redis (_session_store.RedisSessions) ------------------------
    def _listen_for(self, session: HandshakeSession) -> None:
        """Give a session built here the bus listener the server gives it on
        ``notifications/initialized`` (list_changed, resources/updated)."""
        start = getattr(self.server, "start_session_listener", None)
        if start is not None and session.listener is None:
            start(session)

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
        return self._shared


_REFUSED = object()  # _principal: the request was refused, and answered
_RETRY = ((b"retry-after", b"1"),)


async def _answer(send: ASGISend, refusal: Refuse) -> None:
    """Write an exchange's ``Refuse``: JSON-RPC, plain text or empty (the client may be gone)."""
    body = refusal.body
    with contextlib.suppress(OSError):
        if isinstance(body, dict):
            await send_json(send, refusal.status, body, list(refusal.headers))
        elif body is None:
            await send_empty(send, refusal.status)
        else:
            await send_plain(send, refusal.status, body, list(refusal.headers))


def _refused_scope(response: dict[str, Any]) -> bool:
    error = response.get("error")
    return error is not None and error.get("code") == INSUFFICIENT_SCOPE


def _json_reply(
    request: Request, peer: Peer, session: HandshakeSession | None, response: dict[str, Any]
) -> tuple[int, dict[str, Any], list[tuple[bytes, bytes]]]:
    """Status, body and headers of ``response`` sent as one JSON body: the session id on
    ``initialize``; the table's status for a stateless error (a session's: 200)."""
    extra: list[tuple[bytes, bytes]] = []
    if peer.session is not None and request.method == "initialize":
        extra.append((b"mcp-session-id", peer.session.id.encode()))
    error = response.get("error")
    status = 200 if error is None or session is not None else status_for(error.get("code"), checked=True)
    return status, response, extra


def _id_of(message: Message) -> str | int | None:
    return None if isinstance(message, Notification) else message.id
