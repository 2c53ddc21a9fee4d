"""Protocol revisions and what each one has: the only place a version string appears.

Two eras share one server and one client (basic/versioning.mdx):

* **stateless** (2026-07-28 and later): no handshake; every request carries its version,
  client info and capabilities in ``params._meta``.
* **handshake** (2025-11-25, 2025-06-18): ``initialize`` opens a connection-scoped
  session (a stdio process, or an HTTP ``Mcp-Session-Id``) whose negotiated version
  governs every later message on it.

Code elsewhere never compares version strings: it asks ``Feature.X in features(version)``
(a frozenset, cheap to keep per request) or ``offers(version, method)``. Every feature
below is read somewhere; a feature nobody reads does not belong here.
"""

from __future__ import annotations

import enum

__all__ = [
    "LATEST",
    "MODERN_VERSIONS",
    "HANDSHAKE_VERSIONS",
    "SUPPORTED_VERSIONS",
    "HTTP_DEFAULT_HANDSHAKE_VERSION",
    "HTTP_HANDSHAKE_HEADER_VERSIONS",
    "Feature",
    "features",
    "has",
    "is_modern",
    "offers",
    "negotiate_handshake",
    "accepts_handshake_version",
]

LATEST = "2026-07-28"
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18")
SUPPORTED_VERSIONS: tuple[str, ...] = MODERN_VERSIONS + HANDSHAKE_VERSIONS
# A handshake-era HTTP request without MCP-Protocol-Version is taken as this revision
# (2025-06-18 basic/transports.mdx, Protocol Version Header).
HTTP_DEFAULT_HANDSHAKE_VERSION = "2025-03-26"
# MCP-Protocol-Version values that mean the handshake era (and its sessions) over HTTP:
# ours, and the older ones a handshake-era client may still send.
HTTP_HANDSHAKE_HEADER_VERSIONS = frozenset(
    (*HANDSHAKE_VERSIONS, HTTP_DEFAULT_HANDSHAKE_VERSION, "2024-11-05")
)


class Feature(enum.Enum):
    STATELESS = "per-request _meta (version, client info, capabilities, log level); server/discover"
    RESULT_TYPE = "resultType and serverInfo on every result"
    CACHE_HINTS = "ttlMs and cacheScope on cacheable results"
    MRTR = "input_required results instead of server-to-client requests"
    LISTEN = "subscriptions/listen instead of resources/subscribe and the GET stream"
    HTTP_METHOD_HEADERS = "Mcp-Method, Mcp-Name and Mcp-Param-* headers"
    PING = "ping"
    SET_LEVEL = "logging/setLevel"
    RESOURCE_SUBSCRIBE = "resources/subscribe and resources/unsubscribe"
    URL_ELICITATION = "elicitation in URL mode"
    ELICITATION_ID = "URL elicitations carry an elicitationId"
    SSE_POLLING = "a server may close an SSE reply early; the client resumes with Last-Event-ID"

    # Members are singletons: hash them by identity, in C (Enum's own __hash__ is Python
    # code, and the dispatcher asks several features of every request).
    __hash__ = object.__hash__


_MODERN = frozenset(
    {
        Feature.STATELESS,
        Feature.RESULT_TYPE,
        Feature.CACHE_HINTS,
        Feature.MRTR,
        Feature.LISTEN,
        Feature.HTTP_METHOD_HEADERS,
        Feature.URL_ELICITATION,
    }
)
_HANDSHAKE_2025_06_18 = frozenset({Feature.PING, Feature.SET_LEVEL, Feature.RESOURCE_SUBSCRIBE})
_HANDSHAKE_2025_11_25 = _HANDSHAKE_2025_06_18 | {
    Feature.URL_ELICITATION,
    Feature.ELICITATION_ID,
    Feature.SSE_POLLING,
}

_FEATURES: dict[str, frozenset[Feature]] = {
    "2026-07-28": _MODERN,
    "2025-11-25": _HANDSHAKE_2025_11_25,
    "2025-06-18": _HANDSHAKE_2025_06_18,
    # Older handshake revisions are accepted on initialize-less HTTP requests only as a
    # fallback; they get the 2025-06-18 rules.
    HTTP_DEFAULT_HANDSHAKE_VERSION: _HANDSHAKE_2025_06_18,
}
_NOTHING: frozenset[Feature] = frozenset()

# Methods that exist in some revisions only; every other method exists in all of them.
_METHOD_FEATURE = {
    "server/discover": Feature.STATELESS,
    "subscriptions/listen": Feature.LISTEN,
    "ping": Feature.PING,
    "logging/setLevel": Feature.SET_LEVEL,
    "resources/subscribe": Feature.RESOURCE_SUBSCRIBE,
    "resources/unsubscribe": Feature.RESOURCE_SUBSCRIBE,
}


def features(version: object) -> frozenset[Feature]:
    """What ``version`` has; an unknown version has nothing.

    ``version`` is whatever a peer sent: a list or an object is no version (and must
    not reach a dict lookup, where it would raise ``TypeError``).
    """
    return _FEATURES.get(version, _NOTHING) if isinstance(version, str) else _NOTHING


def has(version: object, feature: Feature) -> bool:
    """Does ``version`` have ``feature``?"""
    return feature in features(version)


def is_modern(version: object) -> bool:
    """Is ``version`` of the stateless era (no ``initialize``)?"""
    return Feature.STATELESS in features(version)


def offers(version_features: frozenset[Feature], method: str) -> bool:
    """Does a revision with ``version_features`` have ``method`` at all?"""
    needed = _METHOD_FEATURE.get(method)
    return needed is None or needed in version_features


def negotiate_handshake(requested: object) -> str:
    """The version a server answers ``initialize`` with (2025-11-25 lifecycle.mdx).

    Echo the client's version when we support it in the handshake era, else offer our
    latest handshake version and let the client decide whether to go on.
    """
    if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS:
        return requested
    return HANDSHAKE_VERSIONS[0]


def accepts_handshake_version(version: object) -> bool:
    """May a client go on with the version a server's ``initialize`` result names?"""
    return isinstance(version, str) and (
        version in HANDSHAKE_VERSIONS or version == HTTP_DEFAULT_HANDSHAKE_VERSION
    )
