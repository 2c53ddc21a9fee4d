"""Dispatch: one request in, one response out, for either era, on any transport.

Theory of operation. A transport decodes a message and calls ``Dispatcher.handle``
with a ``Peer`` (what the transport knows about the other side: its handshake session
if any, the authenticated principal) and ``send``, a coroutine that delivers messages
related to this request (progress, logs, listen events, handshake-era server
requests) and, on handshake-era HTTP, ``stream``: the hold on the request's response
stream that ``Context.close_sse_stream`` uses. The era is decided per request
(basic/versioning.mdx):

1. ``initialize`` opens a handshake session on the peer, once: a peer that has one
   gets -32600 and keeps it as it was;
2. a request whose ``params._meta`` names a protocol version is modern and is served
   statelessly: nothing from earlier requests is used;
3. otherwise the peer's handshake session, if there is one, supplies version and
   capabilities;
4. otherwise the request is malformed (-32602): it names no version.

Middleware (``ServerConfig.middleware``, ``async (call, call_next) -> result``) wraps
every request that reaches a method, ``initialize`` and listen streams included: it sees
the result (``isError`` tool results, ``input_required``) or the exception, and may
translate either. Requests refused before a method is found (no or an unsupported
version, an unknown method or capability, a malformed ``initialize``) and client
notifications never reach it: they have no caller to describe or no answer to wrap.

Results for 2025-03-26 and 2024-11-05 sessions are shaped for that revision
(server/_shape.py): no field its schema lacks. Results of modern requests get ``resultType``, ``serverInfo`` in ``_meta`` and, for
cacheable methods, ``ttlMs`` and ``cacheScope``. Exceptions become JSON-RPC errors at
this one boundary: ``ProtocolError`` as itself, anything else as a generic -32603
whose detail goes to the log only.

The steps are public (``server/dispatch.py`` names them for the layers above), so a
relay that answers a request without a task of its own (the gateway's fast lane)
reads, decorates and fails it exactly as ``handle`` does: ``admit`` (the caller, and
the checks before any method runs), ``decorate`` (what the caller's revision adds to a
result), ``error_reply`` (an exception as the error response).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from ..protocol import meta as _meta
from ..protocol.jsonrpc import Notification, Request, error_response, result_response
from ..protocol.versions import LATEST, Feature, features, is_modern, negotiate_handshake, offers
from ..transports.server_seam import Peer, ResponseStream, Send
from ..transports.session import HandshakeSession
from ._context import Call, Caller
from ._shape import needs_shape, shape, shape_initialize

if TYPE_CHECKING:
    from ._server import Server

__all__ = ["Dispatcher", "error_reply"]

log = logging.getLogger("modelctx.server")

Handler = Callable[[Call], Awaitable[dict[str, Any] | None]]
Middleware = Callable[[Call, Handler], Awaitable[dict[str, Any] | None]]

# Methods that may answer input_required (basic/patterns/mrtr.mdx).
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
# Methods whose complete results carry ttlMs and cacheScope (server/utilities/caching.mdx).
CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)


class Dispatcher:
    def __init__(self, server: Server) -> None:
        self.server = server
        from . import _methods

        self._methods: Mapping[str, Handler] = _methods.TABLE

    def caller(self, request: Request, peer: Peer) -> Caller:
        """Who asks, and under which revision: from ``_meta`` (stateless era) or from
        the peer's handshake session. Raises ``UnsupportedProtocolVersion`` or
        ``InvalidParams`` as the spec asks."""
        meta = request.params.get("_meta")
        version = meta.get(_meta.PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if version is not None and isinstance(meta, dict):
            if not is_modern(version) or version not in self.server.versions:
                raise UnsupportedProtocolVersion(version, list(self.server.versions))
            caps = meta.get(_meta.CLIENT_CAPABILITIES)
            if not isinstance(caps, dict):
                raise InvalidParams(
                    f"Invalid params: _meta[{_meta.CLIENT_CAPABILITIES!r}] is required on "
                    "every request and must be an object ({} for none)"
                )
            info = meta.get(_meta.CLIENT_INFO)
            caller = Caller(version, caps, info if isinstance(info, dict) else None, None)
            level = meta.get(_meta.LOG_LEVEL)
            if level is not None:
                rank = _meta.LOG_LEVELS.get(level) if isinstance(level, str) else None
                if rank is None:
                    raise InvalidParams(
                        f"Invalid params: unknown log level {level!r}; use one of "
                        f"{', '.join(_meta.LOG_LEVELS)}"
                    )
                caller.log_rank = rank
            return caller
        session = peer.session
        if session is not None and not session.closed:
            session.touch()
            return Caller(session.version, session.capabilities, session.client_info, session)
        if meta is not None and not isinstance(meta, dict):
            raise InvalidParams("Invalid params: _meta must be an object")
        raise InvalidParams(
            f"Invalid params: _meta[{_meta.PROTOCOL_VERSION!r}] is required ({LATEST} "
            "requests carry it on every request; older clients send initialize first)"
        )

    async def handle(
        self, request: Request, peer: Peer, send: Send, stream: ResponseStream | None = None
    ) -> dict[str, Any] | None:
        """The response to ``request``, or ``None`` when it must not be answered."""
        try:
            result = await self._handle(request, peer, send, stream)
        except Exception as exc:  # noqa: BLE001 - error_reply logs it; CancelledError goes on up
            return error_reply(request, exc)
        return None if result is None else result_response(request.id, result)

    def admit(self, request: Request, peer: Peer) -> Caller:
        """The ``caller`` of ``request``, once its method is one this server serves to
        that caller: every check the dispatcher makes before a method runs. Raises
        ``UnsupportedProtocolVersion``, ``InvalidParams`` (``caller``) or
        ``MethodNotFound``. Not for ``initialize``, which makes its own caller."""
        caller = self.caller(request, peer)
        method = request.method
        if method not in self._methods or not offers(caller.features, method):
            raise MethodNotFound(f"Method not found: {method}")
        if not self.server.serves(method):
            raise MethodNotFound(
                f"Method not found: {method} (this server declares no such capability)"
            )
        return caller

    def decorate(self, method: str, result: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """``result`` (changed in place, and returned) as ``caller``'s revision has it:
        on 2026-07-28 ``resultType`` and ``serverInfo`` (kept when the method set them)
        and, for cacheable methods, cache hints; for 2025-03-26 and 2024-11-05 sessions
        only the fields that revision's schema names (server/_shape.py)."""
        has = caller.features
        if Feature.RESULT_TYPE in has:
            self._decorate(method, result, has)
        elif needs_shape(has):
            shape(method, result, has)
        return result

    async def _handle(
        self, request: Request, peer: Peer, send: Send, stream: ResponseStream | None
    ) -> dict[str, Any] | None:
        method = request.method
        if method == "initialize":
            meta = request.params.get("_meta")
            if isinstance(meta, dict) and _meta.PROTOCOL_VERSION in meta:
                # A modern request: initialize no longer exists (basic/versioning.mdx).
                raise MethodNotFound("Method not found: initialize (removed in 2026-07-28)")
            _once(peer)
            if self.server.middleware:
                return await self._initialize_through(request, peer, send)
            return self._initialize(request, peer)
        caller = self.admit(request, peer)
        handler = self._methods[method]
        # Only 2025-11-25 sessions can close a reply early and resume it (SEP-1699).
        resumable = stream if Feature.SSE_POLLING in caller.features else None
        call = Call(self.server, request, caller, send, peer.principal, resumable, peer.connection)
        middleware = self.server.middleware
        if middleware:
            result = await _chain(middleware, handler)(call)
        else:
            result = await handler(call)
        if result is None:
            return None
        return self.decorate(method, result, caller)

    def _decorate(self, method: str, result: dict[str, Any], features: frozenset[Feature]) -> None:
        if "resultType" not in result:
            result["resultType"] = "complete"
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {_meta.SERVER_INFO: self.server.info}
        else:
            meta.setdefault(_meta.SERVER_INFO, self.server.info)
        if (
            Feature.CACHE_HINTS in features
            and method in CACHEABLE
            and result["resultType"] == "complete"
        ):
            config = self.server.config
            result.setdefault("ttlMs", config.ttl_ms)
            result.setdefault("cacheScope", config.cache_scope)

    async def _initialize_through(self, request: Request, peer: Peer, send: Send) -> dict[str, Any] | None:
        """``initialize`` through the middleware, like every other method: its caller is
        what the request declares (the session opens inside, when the chain reaches it)."""
        version, caps, info = self._initialize_params(request)
        call = Call(self.server, request, Caller(version, caps, info, None), send, peer.principal, None, peer.connection)

        async def initialize(call: Call) -> dict[str, Any] | None:
            return self._initialize(request, peer)

        return await _chain(self.server.middleware, initialize)(call)

    def _initialize_params(self, request: Request) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
        """The negotiated version, capabilities and client info of an ``initialize``;
        raises ``InvalidParams`` for a malformed one, and for any when this server
        speaks no handshake revision (``ServerConfig.versions``; lifecycle.mdx's error)."""
        params = request.params
        caps = params.get("capabilities")
        info = params.get("clientInfo")
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise InvalidParams("Invalid params: initialize needs protocolVersion (a string)")
        if caps is not None and not isinstance(caps, dict):
            raise InvalidParams("Invalid params: capabilities must be an object")
        version = negotiate_handshake(requested, self.server.versions)
        if version is None:
            raise InvalidParams(
                "Unsupported protocol version: this server speaks no handshake revision; "
                f"send {LATEST} requests with _meta instead of initialize",
                {"supported": list(self.server.versions), "requested": requested},
            )
        return version, caps or {}, info if isinstance(info, dict) else None

    def _initialize(self, request: Request, peer: Peer) -> dict[str, Any]:
        version, caps, info = self._initialize_params(request)
        _once(peer)  # again: another initialize may have opened one while middleware ran
        session = HandshakeSession(
            uuid.uuid4().hex,
            version,
            caps,
            info,
            peer.connection,  # stdio and in-process: the session lives on the connection
        )
        peer.open_session(session)
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.server.capabilities(),
            "serverInfo": self.server.info,
        }
        if self.server.instructions:
            result["instructions"] = self.server.instructions
        has = features(version)
        if needs_shape(has):
            shape_initialize(result, has)
        return result

    def notify(self, notification: Notification, peer: Peer) -> None:
        """Act on a client notification (never answered). ``notifications/cancelled``
        never gets here: the connection acts on it (protocol/connection.py)."""
        if notification.method == "notifications/initialized":
            session = peer.session
            if session is not None and not session.initialized:
                session.initialized = True
                self.server.start_session_listener(session)
        # Other notifications (roots/list_changed, progress from the client…) carry
        # nothing this server acts on; they are ignored as JSON-RPC allows.


def _once(peer: Peer) -> None:
    """Refuse an ``initialize`` on a peer whose handshake already opened a session
    (lifecycle.mdx: initialization is the first interaction, once). Answering it as new
    would renegotiate under the requests of the running session, so the session is left
    as it was. Only an ``initialize`` that succeeded counts: one refused as malformed
    opened nothing, and the client may correct it."""
    session = peer.session
    if session is not None and not session.closed:
        raise InvalidRequest(
            f"Invalid Request: this session is already initialized (revision {session.version}); "
            "initialize comes once, first: to initialize again, open a new connection "
            "(a new process on stdio, a new session on HTTP)"
        )


def error_reply(request: Request, exc: Exception) -> dict[str, Any]:
    """The error response to ``request`` for ``exc``, as the dispatcher answers every
    failure: a ``ProtocolError`` as itself (its code, message and data are meant for
    the peer); anything else a generic -32603 whose detail goes to the log only."""
    if isinstance(exc, ProtocolError):
        return error_response(request.id, exc)
    log.error("internal error while handling %s (id %r)", request.method, request.id, exc_info=exc)
    return error_response(request.id, InternalError("Internal error"))


def _chain(middleware: list[Middleware], handler: Handler) -> Handler:
    """Wrap ``handler`` in middleware: each is ``async (call, call_next) -> result``."""
    wrapped = handler
    for layer in reversed(middleware):
        wrapped = _link(layer, wrapped)
    return wrapped


def _link(layer: Middleware, inner: Handler) -> Handler:
    def linked(call: Call) -> Awaitable[dict[str, Any] | None]:
        return layer(call, inner)

    return linked
