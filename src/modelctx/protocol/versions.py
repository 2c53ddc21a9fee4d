"""Protocol revisions and what each one has: the only place a version string appears.

Two eras share one server and one client (basic/versioning.mdx):

* **stateless** (2026-07-28 and later): no handshake; every request carries its version,
  client info and capabilities in ``params._meta``.
* **handshake** (2025-11-25, 2025-06-18, and the installed base's 2025-03-26 and
  2024-11-05): ``initialize`` opens a connection-scoped session (a stdio process, or an
  HTTP ``Mcp-Session-Id``) whose negotiated version governs every later message on it.

The two oldest revisions lack much of what later ones added; their feature sets below
say what. Both sides respect them: the server shapes every result for the session's
revision (server/_shape.py) so that an old client never sees a field its schema does
not know, and the client sends an old server only what its revision has (client/_era.py).

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
    "LEGACY_HANDSHAKE_VERSIONS",
    "SERVED_HANDSHAKE_VERSIONS",
    "SUPPORTED_VERSIONS",
    "SERVED_VERSIONS",
    "HTTP_DEFAULT_HANDSHAKE_VERSION",
    "HTTP_HANDSHAKE_HEADER_VERSIONS",
    "Feature",
    "features",
    "has",
    "is_modern",
    "offers",
    "negotiate_handshake",
    "accepts_handshake_version",
    "first_with",
]

LATEST = "2026-07-28"
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18")
SUPPORTED_VERSIONS: tuple[str, ...] = MODERN_VERSIONS + HANDSHAKE_VERSIONS
# The installed base (issue 21): revisions both sides speak with their own rules. A server
# negotiates them in initialize; a client offers HANDSHAKE_VERSIONS[0] and goes on with one
# of these when the server answers with it (lifecycle.mdx, Version Negotiation). They are
# not in HANDSHAKE_VERSIONS, the revisions a server names in supportedVersions and a
# client offers first.
LEGACY_HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-03-26", "2024-11-05")
SERVED_HANDSHAKE_VERSIONS: tuple[str, ...] = HANDSHAKE_VERSIONS + LEGACY_HANDSHAKE_VERSIONS
# Every revision a server speaks by default (``ServerConfig.versions``; leave one out to refuse it).
SERVED_VERSIONS: tuple[str, ...] = MODERN_VERSIONS + SERVED_HANDSHAKE_VERSIONS
# A handshake-era HTTP request without MCP-Protocol-Version is taken as this revision
# (2025-06-18 basic/transports.mdx, Protocol Version Header).
HTTP_DEFAULT_HANDSHAKE_VERSION = "2025-03-26"
# MCP-Protocol-Version values that mean the handshake era (and its sessions) over HTTP:
# ours, and the older ones a handshake-era client may still send.
HTTP_HANDSHAKE_HEADER_VERSIONS = frozenset(SERVED_HANDSHAKE_VERSIONS)


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
    # Added by 2025-06-18 (changelog): absent from the installed base's revisions.
    STRUCTURED_OUTPUT = "structuredContent in tool results, outputSchema on tools"
    ELICITATION = "elicitation/create (server to client)"
    TITLES = "title on tools, prompts, resources, templates, arguments and implementations"
    RESOURCE_LINKS = "resource_link content in tool results"
    META_ON_TYPES = "_meta on tools, prompts, resources, templates and content blocks"
    COMPLETION_CONTEXT = "context (the arguments already resolved) in completion/complete"
    # Added by 2025-03-26 (changelog): absent from 2024-11-05.
    AUDIO = "audio content"
    TOOL_ANNOTATIONS = "annotations on tools (readOnlyHint, destructiveHint ...)"
    COMPLETIONS_CAPABILITY = "the completions server capability"
    PROGRESS_MESSAGE = "message on notifications/progress"
    # 2025-03-26 only (2025-06-18 removed them again).
    BATCH = "JSON-RPC batches: an array of requests and notifications, answered by an array"

    # Members are singletons: hash them by identity, in C (Enum's own __hash__ is Python
    # code, and the dispatcher asks several features of every request).
    __hash__ = object.__hash__


# What 2025-03-26 added to 2024-11-05, and 2025-06-18 to 2025-03-26 (batches aside):
# every later revision has all of it.
_SINCE_2025_03_26 = frozenset(
    {Feature.AUDIO, Feature.TOOL_ANNOTATIONS, Feature.COMPLETIONS_CAPABILITY, Feature.PROGRESS_MESSAGE}
)
_SINCE_2025_06_18 = _SINCE_2025_03_26 | {
    Feature.STRUCTURED_OUTPUT,
    Feature.ELICITATION,
    Feature.TITLES,
    Feature.RESOURCE_LINKS,
    Feature.META_ON_TYPES,
    Feature.COMPLETION_CONTEXT,
}
_MODERN = _SINCE_2025_06_18 | frozenset(
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
_HANDSHAKE_2024_11_05 = frozenset({Feature.PING, Feature.SET_LEVEL, Feature.RESOURCE_SUBSCRIBE})
_HANDSHAKE_2025_03_26 = _HANDSHAKE_2024_11_05 | _SINCE_2025_03_26 | {Feature.BATCH}
_HANDSHAKE_2025_06_18 = _HANDSHAKE_2024_11_05 | _SINCE_2025_06_18
_HANDSHAKE_2025_11_25 = _HANDSHAKE_2025_06_18 | {
    Feature.URL_ELICITATION,
    Feature.ELICITATION_ID,
    Feature.SSE_POLLING,
}

_FEATURES: dict[str, frozenset[Feature]] = {
    "2026-07-28": _MODERN,
    "2025-11-25": _HANDSHAKE_2025_11_25,
    "2025-06-18": _HANDSHAKE_2025_06_18,
    "2025-03-26": _HANDSHAKE_2025_03_26,
    "2024-11-05": _HANDSHAKE_2024_11_05,
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


def negotiate_handshake(requested: object, served: tuple[str, ...] = SERVED_VERSIONS) -> str | None:
    """The version a server answers ``initialize`` with (2025-11-25 lifecycle.mdx).

    Echo the client's version when the server speaks it in the handshake era, else offer
    the newest handshake version it speaks and let the client decide whether to go on;
    None when ``served`` (``ServerConfig.versions``) holds no handshake revision at all.
    """
    if isinstance(requested, str) and requested in SERVED_HANDSHAKE_VERSIONS and requested in served:
        return requested
    return next((version for version in SERVED_HANDSHAKE_VERSIONS if version in served), None)


def accepts_handshake_version(version: object) -> bool:
    """May a client go on with the version a server's ``initialize`` result names?

    Every handshake revision, the installed base's among them: a server answers with its
    own latest when it lacks the one offered, and the client speaks that one's rules.
    """
    return isinstance(version, str) and version in SERVED_HANDSHAKE_VERSIONS


def first_with(feature: Feature) -> str:
    """The oldest revision that has ``feature``, for errors that say what to upgrade to."""
    for version in reversed(MODERN_VERSIONS + SERVED_HANDSHAKE_VERSIONS):
        if feature in _FEATURES[version]:
            return version
    return LATEST
