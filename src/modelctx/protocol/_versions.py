"""Protocol revisions and what each one has: the only place a version string appears.

Two eras share one server and one client (basic/versioning.mdx):

* **modern** (2026-07-28 and later): no handshake; every request carries its version,
  client info and capabilities in ``params._meta``.
* **handshake** (2025-11-25, 2025-06-18): ``initialize`` opens a connection-scoped
  session (a stdio process, or an HTTP ``Mcp-Session-Id``) whose negotiated version
  governs every later message on it.

Code elsewhere asks ``has(version, Feature.X)`` instead of comparing version strings.
"""

from __future__ import annotations

import enum

__all__ = [
    "LATEST",
    "MODERN_VERSIONS",
    "HANDSHAKE_VERSIONS",
    "SUPPORTED_VERSIONS",
    "Feature",
    "has",
    "is_modern",
    "negotiate_handshake",
]

LATEST = "2026-07-28"
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18")
SUPPORTED_VERSIONS: tuple[str, ...] = MODERN_VERSIONS + HANDSHAKE_VERSIONS
# A handshake-era HTTP request without MCP-Protocol-Version is taken as this revision
# (2025-06-18 basic/transports.mdx, Protocol Version Header).
HTTP_DEFAULT_LEGACY_VERSION = "2025-03-26"


class Feature(enum.Enum):
    STATELESS = "per-request _meta, server/discover, no initialize"
    RESULT_TYPE = "resultType on every result"
    CACHE_HINTS = "ttlMs and cacheScope on cacheable results"
    MRTR = "input_required results instead of server-to-client requests"
    LISTEN = "subscriptions/listen instead of resources/subscribe and the GET stream"
    HTTP_METHOD_HEADERS = "Mcp-Method, Mcp-Name and Mcp-Param-* headers"
    SESSIONS = "Mcp-Session-Id on Streamable HTTP"
    PING = "ping"
    SET_LEVEL = "logging/setLevel"
    SERVER_REQUESTS = "server-to-client JSON-RPC requests (elicitation, sampling, roots)"
    URL_ELICITATION = "elicitation in URL mode"
    ICONS = "icons on implementations and primitives"
    SAMPLING_TOOLS = "tools in sampling requests"
    LEGACY_TASKS = "the tasks capability of 2025-11-25"
    SSE_POLLING = "a server may close an SSE reply early; the client resumes with Last-Event-ID"


_MODERN = frozenset(
    {
        Feature.STATELESS,
        Feature.RESULT_TYPE,
        Feature.CACHE_HINTS,
        Feature.MRTR,
        Feature.LISTEN,
        Feature.HTTP_METHOD_HEADERS,
        Feature.URL_ELICITATION,
        Feature.ICONS,
        Feature.SAMPLING_TOOLS,
    }
)
_HANDSHAKE_2025_06_18 = frozenset(
    {Feature.SESSIONS, Feature.PING, Feature.SET_LEVEL, Feature.SERVER_REQUESTS}
)
_HANDSHAKE_2025_11_25 = _HANDSHAKE_2025_06_18 | {
    Feature.URL_ELICITATION,
    Feature.ICONS,
    Feature.SAMPLING_TOOLS,
    Feature.LEGACY_TASKS,
    Feature.SSE_POLLING,
}

_FEATURES: dict[str, frozenset[Feature]] = {
    "2026-07-28": _MODERN,
    "2025-11-25": _HANDSHAKE_2025_11_25,
    "2025-06-18": _HANDSHAKE_2025_06_18,
    # Older handshake revisions are accepted on initialize-less HTTP requests only as a
    # fallback; they get the 2025-06-18 rules.
    "2025-03-26": _HANDSHAKE_2025_06_18,
}


def has(version: str, feature: Feature) -> bool:
    """Does ``version`` have ``feature``? Unknown versions have nothing."""
    return feature in _FEATURES.get(version, frozenset())


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS


def negotiate_handshake(requested: object) -> str:
    """The version a server answers ``initialize`` with (2025-11-25 lifecycle.mdx).

    Echo the client's version when we support it in the handshake era, else offer our
    latest handshake version and let the client decide whether to go on.
    """
    if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS:
        return requested
    return HANDSHAKE_VERSIONS[0]
