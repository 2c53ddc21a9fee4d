"""Every exception modelctx raises, under one root.

::

    MCPError                      root: catch this to catch everything from modelctx
    ├── ProtocolError             a JSON-RPC error with a code; travels on the wire
    │   ├── ParseError            -32700  the bytes were not JSON
    │   ├── InvalidRequest        -32600  JSON, but not a JSON-RPC request object
    │   ├── MethodNotFound        -32601  unknown method, or a capability not served
    │   ├── InvalidParams         -32602  params of the wrong shape, unknown tool/prompt,
    │   │   │                             resource not found, bad cursor, bad requestState
    │   │   ├── ResourceNotFound  -32602  with data.uri
    │   │   └── PathRefused       -32602  a path a ``FileRoot`` will not serve (data.path)
    │   ├── InternalError         -32603  the server failed; the text is generic on purpose
    │   ├── HeaderMismatch        -32020  HTTP headers missing, malformed or unlike the body
    │   ├── MissingRequiredClientCapability  -32021  data.requiredCapabilities
    │   ├── UnsupportedProtocolVersion       -32022  data.supported, data.requested
    │   ├── InsufficientScope     -31403  the token lacks scopes (data.requiredScopes);
    │   │                                 HTTP answers it 403 with a Bearer challenge
    │   └── RateLimited           -31429  the server is at a limit (a rate, the running
    │                                     tasks' cap); data.retryAfterMs: when to retry
    ├── ToolError                 raised by a tool on purpose: its text reaches the client
    │   │                         as an ``isError`` result (never a JSON-RPC error)
    │   └── Failure               [server] the API behind an OpenAPI tool answered outside
    │                             2xx, or could not be reached
    ├── RegistrationError         a tool, resource or prompt cannot be registered as written
    │                             (also a ValueError and a TypeError); raised at registration
    ├── StartupError              [server] the lifespan raised while starting: nothing served
    ├── InvalidToken              a resource server refused a bearer token (or its absence):
    │   │                         HTTP 401 with a Bearer challenge, never a JSON-RPC error
    │   └── InvalidDPoPProof      [auth] the request's DPoP proof is missing or does not hold
    └── LocalError                found on this side; no JSON-RPC code, never sent
        ├── ConnectionClosed      the peer went away; pending calls fail with this
        │   ├── SessionExpired    HTTP 404 on a handshake-era session: initialize again
        │   ├── RequestLost       a 2026-07-28 reply stream broke before its result; it
        │   │                     may or may not have run; send it again if that is safe
        │   └── ServerNotStarted  [transports] a stdio server's command could not be started
        ├── HttpStatusError       an HTTP status with no JSON-RPC response in the body
        ├── RequestTimeout        no answer within the deadline (also a ``TimeoutError``)
        ├── MalformedResponse     the peer's reply breaks the spec (unknown ``resultType``,
        │                         a result missing what its type requires, ...)
        ├── InputRoundsExceeded   the server kept asking for input past the client's limit
        ├── OutputSchemaViolation a tool's ``structuredContent`` breaks its ``outputSchema``
        ├── UrlRefused            the SSRF guard refused a URL (scheme, or an address in a
        │                         zone the ``UrlPolicy`` does not admit); nothing was sent
        ├── UnsendableMessage     a request JSON cannot carry (a lone surrogate, a value of
        │                         no JSON type; also a ValueError); nothing was sent
        ├── AuthorizationError    the client could not obtain authorization (OAuth): what
        │                         failed and what to do; never a token
        ├── TaskCancelled         [client] the task was cancelled: it has no result
        ├── HostConfigError       [host] the configuration cannot be used as written
        ├── ApprovalConfigError   [host] an ``approval`` setting cannot be used as written
        ├── ApprovalStoreError    [host] the approvals file cannot be used; it is ignored
        ├── ServerUnavailable     [host] the server is not connected (failed, or closed)
        ├── UnknownName           [host] no server offers a tool, prompt or resource so named
        ├── Denied                [host] the configuration denies that resource or prompt
        ├── ScriptExhausted       [host] a ``ScriptedUI`` was asked past its script
        ├── ModelSetupError       [host] a model cannot be used as configured
        ├── ModelError            [host] the model's API failed or answered unusably
        └── ConversationFileError [host] a conversation file cannot be read back

``[package]``: defined in that package, beside what raises it; the others are defined
here. Some are also built-in exceptions: ``HostConfigError``, ``ApprovalConfigError`` and
``ConversationFileError`` a ``ValueError``, ``UnknownName`` a ``LookupError``, ``Denied``
a ``PermissionError``, ``ModelSetupError`` a ``RuntimeError``.

A ``LocalError`` never carries a JSON-RPC code, so it cannot be mistaken for an error the
peer sent; catch it to handle everything that went wrong on this side of the wire. A
``ProtocolError`` received from a peer has ``remote=True``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = [  # noqa: RUF022 - in the order of the tree above
    "MCPError",
    "ProtocolError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "ResourceNotFound",
    "PathRefused",
    "InternalError",
    "HeaderMismatch",
    "MissingRequiredClientCapability",
    "UnsupportedProtocolVersion",
    "InsufficientScope",
    "RateLimited",
    "ToolError",
    "RegistrationError",
    "InvalidToken",
    "LocalError",
    "ConnectionClosed",
    "SessionExpired",
    "RequestLost",
    "HttpStatusError",
    "RequestTimeout",
    "MalformedResponse",
    "InputRoundsExceeded",
    "OutputSchemaViolation",
    "UrlRefused",
    "UnsendableMessage",
    "AuthorizationError",
    "error_from_wire",
]

# JSON-RPC 2.0 codes and the codes MCP 2026-07-28 allocates (basic/index.mdx, Error Codes).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
# modelctx's own: a request refused for want of OAuth scopes (over HTTP the 403 carries
# the challenge). Outside -32768..-32000: the spec reserves -32020..-32099 for its own
# codes (an implementation MUST NOT emit others there) and asks new application codes
# to stay out of JSON-RPC's range (2026-07-28 Error Codes). 403 echoes HTTP's Forbidden,
# as RATE_LIMITED's -31429 echoes 429.
INSUFFICIENT_SCOPE = -31403
# modelctx's own: a request refused because the server is at a limit (too many requests,
# ``server.middleware.RateLimit``; too many running tasks) and may be sent again later.
RATE_LIMITED = -31429
# Handshake-era codes: accepted from old peers, never emitted by the modern era.
HANDSHAKE_ERA_RESOURCE_NOT_FOUND = -32002
HANDSHAKE_ERA_URL_ELICITATION_REQUIRED = -32042


class MCPError(Exception):
    """Root of every modelctx exception."""


class ProtocolError(MCPError):
    """A JSON-RPC error: a code, a message and optional data.

    The HTTP status a reply of this error gets is the HTTP transport's business: one
    table, ``transports/http.py:status_for``.
    """

    code: int = INTERNAL_ERROR
    #: The id of the request this error answers, when it could be read.
    request_id: str | int | None = None

    def __init__(self, message: str, data: Any = None, *, remote: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.remote = remote

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code})"


class ParseError(ProtocolError):
    code = PARSE_ERROR


class InvalidRequest(ProtocolError):
    code = INVALID_REQUEST


class MethodNotFound(ProtocolError):
    code = METHOD_NOT_FOUND


class InvalidParams(ProtocolError):
    code = INVALID_PARAMS


class ResourceNotFound(InvalidParams):
    def __init__(self, uri: str) -> None:
        super().__init__(f"Resource not found: {uri}", {"uri": uri})


class PathRefused(InvalidParams):
    """A path a ``FileRoot`` will not serve: absolute, leaving the root (``..`` or a
    symlink), with a NUL byte, missing, or not a regular file.

    The message names the path as the client gave it, never the root's place on disk.
    """

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"Cannot read {path!r}: {why}", {"path": path})


class InternalError(ProtocolError):
    code = INTERNAL_ERROR


class HeaderMismatch(ProtocolError):
    code = HEADER_MISMATCH


class MissingRequiredClientCapability(ProtocolError):
    code = MISSING_REQUIRED_CLIENT_CAPABILITY

    def __init__(self, message: str, required: dict[str, Any]) -> None:
        super().__init__(message, {"requiredCapabilities": required})


class UnsupportedProtocolVersion(ProtocolError):
    code = UNSUPPORTED_PROTOCOL_VERSION

    def __init__(self, requested: Any, supported: list[str], message: str | None = None) -> None:
        super().__init__(
            message or "Unsupported protocol version",
            {"supported": list(supported), "requested": requested},
        )


class InsufficientScope(ProtocolError):
    """The request's access token lacks scopes the operation needs.

    ``required``: every scope the operation needs (all at once, so a client steps up
    once; basic/authorization/index.mdx, Scope Challenge Handling). Raised by
    ``Context.require_scopes`` and by a ``ProtectedResource`` whose ``required_scopes``
    the token lacks. Over Streamable HTTP the reply is 403 with ``WWW-Authenticate:
    Bearer error="insufficient_scope", scope="..."`` (when no SSE reply has started);
    elsewhere it is this JSON-RPC error with ``data.requiredScopes``.
    """

    code = INSUFFICIENT_SCOPE

    def __init__(self, required: Any, message: str | None = None) -> None:
        scopes = sorted({str(s) for s in required})
        super().__init__(
            message or f"Insufficient scope: this needs the scope(s) {' '.join(scopes)}; "
            "authorize again asking for them",
            {"requiredScopes": scopes},
        )
        self.required = frozenset(scopes)


class RateLimited(ProtocolError):
    """A request refused because the server is at a limit (``RateLimit``'s rate, the
    running tasks' cap); ``data.retryAfterMs``, when present, says when to try again."""

    code = RATE_LIMITED


class ToolError(MCPError):
    """Raise from a tool to report a failure the model should see.

    The message becomes the text of an ``isError: true`` result. Any other exception a
    tool raises is logged and replaced by a generic message, so internals never leak.
    """


class RegistrationError(MCPError, ValueError, TypeError):
    """A tool, resource, template or prompt cannot be registered as written.

    Raised by ``Server.tool``/``resource``/``prompt`` at registration, never at call
    time; the message names the thing and says what to change. It is a ``ValueError``
    and a ``TypeError`` too, so code that caught either before keeps working.
    """


class InvalidToken(MCPError):
    """A protected resource refused a request's bearer token: missing, malformed,
    expired, not yet valid, signed by an unknown key, from another issuer, or issued
    for another audience (RFC 6750 3.1, RFC 8707 2).

    ``token_sent``: False when the request had no token at all (the 401 challenge then
    carries no ``error``, RFC 6750 3.1). The message says what was wrong and never
    contains the token. The HTTP transport answers 401 with a ``WWW-Authenticate``
    challenge; nothing of the request is served.
    """

    def __init__(self, message: str, *, token_sent: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.token_sent = token_sent

    #: Headers the 401 carries besides ``WWW-Authenticate`` (a DPoP refusal's ``DPoP-Nonce``).
    challenge_headers: Mapping[str, str] = MappingProxyType({})


class LocalError(MCPError):
    """A problem found on this side of the wire: it has no JSON-RPC code and is never sent.

    Raised as is for a client handler (elicitation, sampling, roots) that returns
    something the protocol cannot carry; the subclasses name the other cases.
    """


class ConnectionClosed(LocalError):
    """The connection to the peer closed; the request can no longer be answered."""


class SessionExpired(ConnectionClosed):
    """The server no longer knows our handshake-era session (HTTP 404); initialize again."""


class RequestLost(ConnectionClosed):
    """A 2026-07-28 request's SSE reply broke before its result (changelog 9: no
    resumption; the request is lost). The server may or may not have acted on it; the
    client re-sends it by itself only when that is safe (``Client`` says when)."""


class HttpStatusError(LocalError):
    """The server answered with an HTTP status and no JSON-RPC response in the body.

    ``status``, ``excerpt`` (the start of the body), ``headers`` (the response headers,
    e.g. ``www-authenticate`` on 401) and ``server`` (who answered).
    """

    def __init__(self, server: str, what: str, status: int, excerpt: str, headers: Any) -> None:
        detail = f": {excerpt}" if excerpt else " and an empty body"
        super().__init__(f"{server}: {what} got HTTP {status} with no JSON-RPC response{detail}")
        self.server = server
        self.status = status
        self.excerpt = excerpt
        self.headers = dict(headers)


class RequestTimeout(LocalError, TimeoutError):
    """A request got no answer within its deadline; it was cancelled on the wire.

    Also a ``TimeoutError``, so ``except TimeoutError`` code keeps working.
    """


class MalformedResponse(LocalError):
    """The peer's reply does not follow the spec: the request cannot be completed.

    For example a ``resultType`` this side does not recognize (basic/index.mdx: it
    MUST be considered invalid), or a result that lacks a field its type requires.
    """


class InputRoundsExceeded(LocalError):
    """The server kept asking for input past the client's limit of rounds (``max_rounds``)."""


class OutputSchemaViolation(LocalError):
    """A tool's ``structuredContent`` does not match the ``outputSchema`` it declared."""


class UrlRefused(LocalError):
    """The SSRF guard refused a URL before connecting to it (``modelctx.client.UrlPolicy``):
    a scheme other than ``https``, or a host that resolves to a loopback, private,
    link-local or otherwise non-public address the policy does not admit."""


class UnsendableMessage(LocalError, ValueError):
    """A request JSON cannot carry: a string with a lone surrogate (UTF-8 has no bytes
    for it), a value of no JSON type, an integer past 64 bits. Nothing was sent; the
    connection goes on. Also a ``ValueError``, as the encoder's own errors are."""


class AuthorizationError(LocalError):
    """The client could not obtain (or refused) authorization for an HTTP server: the
    message names the step that failed (discovery, registration, the authorization
    response, the token request) and what to do. It never contains a token or secret."""


_BY_CODE: dict[int, type[ProtocolError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        HeaderMismatch,
        RateLimited,
        ProtocolError,
    )
}


def error_from_wire(error: dict[str, Any]) -> ProtocolError:
    """Build the exception for a JSON-RPC ``error`` object received from a peer."""
    code = error.get("code")
    message = str(error.get("message", "")) or "(no message)"
    data = error.get("data")
    if code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(data, dict):
        exc: ProtocolError = UnsupportedProtocolVersion(
            data.get("requested"), list(data.get("supported") or []), message
        )
    elif code == MISSING_REQUIRED_CLIENT_CAPABILITY and isinstance(data, dict):
        exc = MissingRequiredClientCapability(message, data.get("requiredCapabilities") or {})
    elif code == INSUFFICIENT_SCOPE and isinstance(data, dict) and isinstance(data.get("requiredScopes"), list):
        exc = InsufficientScope(data["requiredScopes"], message)
    else:
        cls = _BY_CODE.get(code) if isinstance(code, int) else None
        exc = (cls or ProtocolError)(message, data)
        if cls is None:
            exc.code = code if isinstance(code, int) else INTERNAL_ERROR
    exc.remote = True
    return exc
