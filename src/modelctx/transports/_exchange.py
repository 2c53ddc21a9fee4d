"""Streamable HTTP, sans-IO: what one exchange on the endpoint comes to.

basic/transports/streamable-http.mdx (2026-07-28) and the 2025-11-25 transport page.
``HttpExchange`` holds an endpoint's rules and its ``SessionStore``; the ASGI adapter
(``http.HttpApp``) feeds it the request head (``head``, ``guard``, ``route``), then the
body (``post``), and does what the decision says. Nothing here awaits, reads a socket or
needs an event loop: a test drives it with plain calls (tests/transports/test_http_exchange.py).

Decisions (each a small value, never changed once made; not frozen: a frozen
dataclass costs two ``object.__setattr__`` calls per request on the hot path):

- ``Refuse``: answer with this status, these headers and this body (a JSON-RPC error,
  plain text, or none: 202), and run nothing.
- ``ServeRequest``: run this request, on this handshake session or (None) statelessly:
  a 2026-07-28 request whose headers matched its body, or ``initialize`` (the table had
  room for one more session).
- ``ServeBatch``: a JSON array for a 2025-03-26 session (``_http_batch``).
- ``OneWay``: a notification or a response, for this session or none; answered 202.
- ``Confirm``: a message naming a session the table does not hold, or holds but must
  renew: the store settles it (``SessionStore.resolve``), then ``confirmed`` decides.
- ``Named``: a GET or DELETE naming this session (the table's, or None).

The era (rule 3 below) is decided in ``era`` alone, once per message:

1. ``_meta`` names a version, or ``MCP-Protocol-Version`` is not a handshake-era value:
   2026-07-28, stateless. A request is checked against its headers in the order the
   conformance suite and the spec imply: header present, ``_meta`` complete, header
   equal to ``_meta``, version supported, then ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*``.
   ``Mcp-Session-Id`` and ``Last-Event-ID`` are ignored.
2. ``initialize``: opens a handshake session, if the caps leave room (503 for the
   table, 429 for the principal's quota, both with ``Retry-After``).
3. Else ``Mcp-Session-Id`` names the session (unknown: ``Confirm``, then 404); a request
   without it is -32602 (HTTP 400), a notification or a response outside a session is
   acted on as one-way.

``server/_dispatch.Dispatcher.caller`` decides the revision of a request again from its
``_meta`` or its peer's session, for every transport (stdio has no headers): the same
rule 1 read from the body, not a second routing of HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from ..protocol import meta as _meta
from ..protocol.connection import Inbound, Reject, Serve
from ..protocol.headers import check_headers, header_paths
from ..protocol.jsonrpc import Message, Notification, Request, decode, error_response
from ..protocol.versions import HTTP_HANDSHAKE_HEADER_VERSIONS, Feature, features, has, is_modern
from ._asgi import METADATA_HEADERS, accepts, fold_headers, is_json_type, split_host
from ._redis_sessions import SessionStoreUnavailable
from ._session_store import SessionStore
from .server_seam import ServerApp
from .session import HandshakeSession, SessionTable

__all__ = [
    "Confirm",
    "HttpExchange",
    "Named",
    "OneWay",
    "Refuse",
    "ServeBatch",
    "ServeRequest",
    "status_for",
]

log = logging.getLogger("modelctx.http")

Headers = tuple[tuple[bytes, bytes], ...]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
_HEADER_PATHS_CACHED = 4096  # tools whose Mcp-Param header paths are kept
_HOSTS_REMEMBERED = 64  # Host values the guard remembers as allowed (names x ports)
_RETRY = ((b"retry-after", b"1"),)
_NOT_FOUND = "Session not found or expired; send initialize again"


@dataclass(slots=True)
class Refuse:
    """Answer ``status`` with ``headers`` and ``body``: a JSON-RPC message (dict), plain
    text (bytes) or nothing (None); nothing runs."""

    status: int
    body: dict[str, Any] | bytes | None = None
    headers: Headers = ()


@dataclass(slots=True)
class ServeRequest:
    """Run ``request``: on ``session``, or (None) statelessly or as ``initialize``."""

    request: Request
    session: HandshakeSession | None


@dataclass(slots=True)
class ServeBatch:
    """Serve ``body``, a JSON array, as a batch of ``session`` (a 2025-03-26 one)."""

    session: HandshakeSession
    body: bytes


@dataclass(slots=True)
class OneWay:
    """Act on a notification or a response (of ``session``, or outside any); 202."""

    message: Message
    session: HandshakeSession | None


@dataclass(slots=True)
class Confirm:
    """``message`` names session ``session_id``, which the table does not hold (``held``
    None) or holds but must renew: ask the store, then ``HttpExchange.confirmed``."""

    message: Message
    session_id: str
    held: HandshakeSession | None


@dataclass(slots=True)
class Named:
    """A GET or DELETE naming ``session_id`` (``held``: the table's session, or None)."""

    session_id: str
    held: HandshakeSession | None


Decision = Refuse | ServeRequest | ServeBatch | OneWay | Confirm


class HttpExchange:
    """The rules of one Streamable HTTP endpoint (see the module docstring).

    ``server`` answers the version and schema questions (``ServerApp.versions``,
    ``tool_input_schema``); ``sessions`` is where handshake sessions are looked up.
    """

    def __init__(
        self,
        server: ServerApp,
        sessions: SessionStore,
        *,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        max_body: int = 4 * 1024 * 1024,
        max_sessions: int = 10_000,
        max_sessions_per_principal: int = 100,
        max_requests_per_session: int = 256,
    ) -> None:
        self.server = server
        self.sessions = sessions
        self.allowed_hosts = {h.lower() for h in allowed_hosts} | set(LOOPBACK_HOSTS)
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.max_body = max_body
        self.max_sessions = max_sessions
        self.max_sessions_per_principal = max_sessions_per_principal
        self.max_requests_per_session = max_requests_per_session
        self._hosts_passed: set[str | None] = set()  # exact Host values the guard allowed
        self._header_paths: dict[str, tuple[dict[str, Any], dict[str, tuple[str, ...]]]] = {}

    # -- the head --------------------------------------------------------------------------
    @staticmethod
    def head(raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], Refuse | None]:
        """The headers by lower-case name; a refusal (400) when one the spec defines once
        (``_asgi.SINGLE_HEADERS``, ``Mcp-Param-*``) came twice, so a proxy and this
        server never act on different copies."""
        headers, repeated = fold_headers(raw)
        if repeated is None:
            return headers, None
        message = f"The {repeated} header was sent more than once; send it once"
        metadata = repeated in METADATA_HEADERS or repeated.startswith("mcp-param-")
        error = HeaderMismatch(message) if metadata else InvalidRequest(message)
        return headers, Refuse(400, error_response(None, error))

    def guard(self, headers: dict[str, str]) -> Refuse | None:
        """DNS-rebinding protection (basic/transports/streamable-http.mdx, Security).

        Host is parsed whole (name or bracketed IPv6, optional port, nothing after).
        A missing or malformed Host is 400: RFC 9112 3.2 requires it of HTTP/1.1, and a
        guard that lets a request without Host through guards nothing (uvicorn's h11
        server answers 400 too; httptools lets it pass). A Host outside the allowed
        names is 421 Misdirected Request, as the spec's SDKs answer DNS rebinding; an
        Origin outside the allowed origins (loopback ones are) 403.
        """
        host = headers.get("host")
        if host in self._hosts_passed:
            pass  # seen and allowed before: skip the parse
        elif "*" not in self.allowed_hosts:
            if host is None:
                return refuse(400, "The Host header is missing; HTTP/1.1 requires it")
            parts = split_host(host)
            if parts is None:
                return refuse(400, f"The Host header {host!r} is malformed")
            if parts[0] not in self.allowed_hosts and host.lower() not in self.allowed_hosts:
                return refuse(421, f"Host {host!r} is not allowed; configure allowed_hosts for proxies")
            if len(self._hosts_passed) < _HOSTS_REMEMBERED:
                self._hosts_passed.add(host)
        origin = headers.get("origin")
        if origin and "*" not in self.allowed_origins:
            clean = origin.rstrip("/").lower()
            if clean not in self.allowed_origins and not _loopback_origin(clean):
                return refuse(403, f"Origin {origin!r} is not allowed")
        return None

    def route(self, method: str, headers: dict[str, str], principal: Any) -> Refuse | Named | None:
        """What an authenticated request to the endpoint is: None for a POST (read its
        body, then ``post``), ``Named`` for a GET or DELETE of a session of ``principal``,
        or 405 (a GET or DELETE without ``Mcp-Session-Id``: 2026-07-28 has no GET stream,
        Backward Compatibility; a GET not accepting SSE; any other method)."""
        if method == "POST":
            return None
        if method not in ("GET", "DELETE"):
            return Refuse(405, b"Method Not Allowed", ((b"allow", b"POST, GET, DELETE"),))
        session_id = headers.get("mcp-session-id")
        accept = headers.get("accept", "") if method == "GET" else ""
        if session_id is None or accept and not accepts(accept, "text/event-stream"):
            return Refuse(405, b"Method Not Allowed", ((b"allow", b"POST"),))
        return Named(session_id, self.sessions.find(session_id, principal))

    def declared_too_large(self, headers: dict[str, str]) -> Refuse | None:
        """413 when ``Content-Length`` already says the body is over ``max_body``."""
        length = headers.get("content-length")
        if length is not None and length.isascii() and length.isdigit() and int(length) > self.max_body:
            return self.too_large()
        return None

    def too_large(self) -> Refuse:
        return refuse(413, f"Request body too large: the limit is {self.max_body} bytes")

    @staticmethod
    def late(seconds: float) -> Refuse:
        """408 for a body not whole within ``seconds``; ``connection: close``, so the
        server drops the rest of the body with the connection."""
        text = f"The request body did not arrive within {seconds:g} seconds"
        return refuse(408, text, ((b"connection", b"close"),))

    # -- the body --------------------------------------------------------------------------
    def post(self, headers: dict[str, str], body: bytes, principal: Any) -> Decision:
        """What a POST of ``body`` comes to (415, 406, 400, the era's decision)."""
        # A POST body is one JSON-RPC message: application/json, parsed (not a substring
        # match); a missing Content-Type is tolerated as JSON (the body decides).
        content_type = headers.get("content-type")
        if content_type is not None and not is_json_type(content_type):
            return refuse(415, f"Content-Type must be application/json, not {content_type!r}")
        # The client MUST list both application/json and text/event-stream (Sending
        # Messages, 2); the reply is one of them. A missing Accept means any type (RFC 9110
        # 12.5.1), and the official SDK clients list both; so only an Accept that admits
        # neither is refused, 406: such a client could read no reply of ours.
        accept = headers.get("accept")
        if accept is not None and not _admits_a_reply(accept):
            return refuse(406, "Accept must list application/json and text/event-stream")
        try:
            message = decode(body)
        except ProtocolError as exc:
            # An array: a batch, which a 2025-03-26 session takes (_http_batch); else refused.
            batch = self._batch_session(headers, principal) if body.lstrip().startswith(b"[") else None
            if batch is not None:
                return ServeBatch(batch, body)
            return Refuse(status_for(exc.code, checked=False), error_response(exc.request_id, exc))
        return self.era(message, headers, principal)

    def _batch_session(self, headers: dict[str, str], principal: Any) -> HandshakeSession | None:
        session_id = headers.get("mcp-session-id")
        session = self.sessions.find(session_id, principal) if session_id is not None else None
        if session is None or Feature.BATCH not in features(session.version):
            return None
        return session

    def era(self, message: Message, headers: dict[str, str], principal: Any) -> Decision:
        """The era of ``message`` and where it goes (the module docstring's rules 1-3)."""
        params = getattr(message, "params", None) or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(_meta.PROTOCOL_VERSION) if isinstance(meta, dict) else None
        header_version = headers.get("mcp-protocol-version")
        request = message if type(message) is Request else None
        if version is not None or (
            header_version is not None and header_version not in HTTP_HANDSHAKE_HEADER_VERSIONS
        ):
            if request is None:
                return OneWay(message, None)
            try:
                self.check_modern(request, params, meta, version, header_version, headers)
            except ProtocolError as exc:
                return Refuse(status_for(exc.code, checked=False), error_response(request.id, exc))
            return ServeRequest(request, None)
        if request is not None and request.method == "initialize":
            refused = self.sessions.admit(principal)
            return ServeRequest(request, None) if refused is None else self.full(refused, request.id)
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            if request is not None:
                return Refuse(400, error_response(request.id, _NO_SESSION))
            return OneWay(message, None)
        session = self.sessions.find(session_id, principal)
        if session is None or not self.sessions.fresh(session):
            return Confirm(message, session_id, session)
        return OneWay(message, session) if request is None else ServeRequest(request, session)

    def confirmed(self, confirm: Confirm, session: HandshakeSession | None) -> Refuse | ServeRequest | OneWay:
        """The decision once the store said which session ``confirm`` names (None: 404)."""
        message = confirm.message
        if session is None:
            return Refuse(404, error_response(_id_of(message), InvalidRequest(_NOT_FOUND)))
        return ServeRequest(message, session) if type(message) is Request else OneWay(message, session)

    def check_modern(
        self,
        request: Request,
        params: dict[str, Any],
        meta: Any,
        version: Any,
        header_version: str | None,
        headers: dict[str, str],
    ) -> None:
        """Raise what a 2026-07-28 request's headers and ``_meta`` break, in rule 1's order."""
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
        """The ``Mcp-Param-*`` header paths of the tool a ``tools/call`` names (cached)."""
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

    # -- a request on a session ----------------------------------------------------------------
    def enter(self, request: Request, session: HandshakeSession) -> Refuse | Inbound:
        """Start ``request`` on its session's connection: its ``Inbound``, or 429 past
        ``max_requests_per_session`` (it never ran, so sending it again is safe), or the
        connection's refusal (a duplicate id)."""
        connection = session.connection
        if len(connection.inflight) >= self.max_requests_per_session:
            error = InternalError(
                f"Too many requests in flight: this session already runs {self.max_requests_per_session}; "
                "wait for some to finish (or cancel them), then send this one again"
            )
            return Refuse(429, error_response(request.id, error), _RETRY)
        event = connection.receive(request)
        if isinstance(event, Reject):
            return Refuse(status_for(event.error.code, checked=False), event.response)
        assert isinstance(event, Serve)
        return event.inbound

    # -- refusals the adapter asks for -----------------------------------------------------------
    def full(self, reason: str, request_id: str | int | None) -> Refuse:
        """No room for a session. The transport page names no status for this. The
        principal's quota: 429 (RFC 6585 4, this client sent too many); the whole table:
        503 with Retry-After, HTTP's "overloaded for now, come back" (RFC 9110 15.6.4).
        The JSON-RPC error says the same to a client that reads only the body."""
        return Refuse(self.full_status(reason), error_response(request_id, self.full_error(reason)), _RETRY)

    def full_status(self, reason: str) -> int:
        return 429 if reason == SessionTable.QUOTA else 503

    def full_error(self, reason: str) -> InternalError:
        if reason == SessionTable.QUOTA:
            return InternalError(
                f"Too many sessions: all {self.max_sessions_per_principal} sessions of this "
                "principal are in use; end one (DELETE) or wait for its requests to finish, "
                "then send initialize again; or use the 2026-07-28 protocol (no session)"
            )
        return InternalError(
            f"Server busy: all {self.max_sessions} sessions are in use; "
            "send initialize again later, or use the 2026-07-28 protocol (no session)"
        )

    @staticmethod
    def store_down(request_id: str | int | None, down: SessionStoreUnavailable) -> Refuse:
        """503 (retry shortly) and a JSON-RPC error saying the session store is unreachable."""
        return Refuse(503, error_response(request_id, InternalError(str(down))), _RETRY)

    @staticmethod
    def not_found(message: Message | None) -> Refuse:
        """404 for a POST naming a session that is gone (JSON-RPC error)."""
        return Refuse(404, error_response(None if message is None else _id_of(message), InvalidRequest(_NOT_FOUND)))


_NO_SESSION = InvalidParams(
    "Invalid params: no Mcp-Session-Id header and no "
    f"_meta[{_meta.PROTOCOL_VERSION!r}]: modern clients send the _meta keys "
    "and the MCP-Protocol-Version header; older clients send initialize first"
)

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


def refuse(status: int, message: str, headers: Headers = ()) -> Refuse:
    """A refusal before any work: ``status`` and a JSON-RPC -32600 with no id."""
    return Refuse(status, error_response(None, InvalidRequest(message)), headers)


def _loopback_origin(origin: str) -> bool:
    """True for an Origin (``scheme://host[:port]``, lower case) on a loopback host."""
    scheme, sep, authority = origin.partition("://")
    if not sep or not scheme:
        return False
    parts = split_host(authority)
    return parts is not None and parts[0] in LOOPBACK_HOSTS


def _admits_a_reply(accept: str) -> bool:
    if "application/json" in accept and "text/event-stream" in accept and ";" not in accept:
        return True  # the usual value, without parsing
    return accepts(accept, "application/json") or accepts(accept, "text/event-stream")


def _id_of(message: Message) -> str | int | None:
    return None if isinstance(message, Notification) else message.id
