"""What the client sends a handshake-era server of an older revision, and what it remembers.

Theory of operation. The client offers ``HANDSHAKE_VERSIONS[0]`` in ``initialize`` and goes
on with whatever handshake revision the server answers, the installed base's 2025-03-26
and 2024-11-05 among them (2025-11-25 lifecycle.mdx, Version Negotiation). From then on it
sends that server only what the revision's schema has (schema/2024-11-05 and
schema/2025-03-26 of modelcontextprotocol/modelcontextprotocol, checked field by field;
tests/test_interop_old_servers.py checks every message sent to a real old server):

* the ``initialize`` capabilities of a revision (when the client knows it before asking,
  see below): no ``elicitation`` before 2025-06-18, no ``extensions`` for the installed
  base (their ``ClientCapabilities`` have neither; server/_shape.py drops the server's
  extensions for the same sessions);
* ``completion/complete`` without ``context`` before 2025-06-18;
* answers to the server's own requests shaped to the revision: a ``Root`` is ``uri`` and
  ``name``, a ``CreateMessageResult`` its five members;
* an ``elicitation/create`` from a revision without elicitation is refused (-32601): the
  client never offered it to such a server, whatever the first ``initialize`` said.
* the installed base's servers are not sent ``notifications/cancelled``: a request the
  caller gives up (or whose deadline passes) is abandoned on this side only and its late
  answer dropped. Both revisions' schemas have the notification and cancellation.mdx says
  a sender SHOULD send it, but the official SDK's servers of those revisions end on it:
  mcp 1.2.0 has no type for it (modelcontextprotocol/python-sdk issue 88: the same
  ``ValidationError`` in the receive loop as below), and in mcp 1.9.4 the cancelled
  handler's scope ends the server's task group, so the process exits at its next line
  (reproduced with tests/peers/old_stdio_server.py). The official client of that time
  never sent it (python-sdk issue 2507), so that is what those servers were run with.
  Cancelling costs them work they finish for nothing; telling them costs the session.

The capabilities of a first ``initialize`` are those of the revision offered (2025-11-25):
the server's revision is not known before it answers, and a capability an old schema
does not name is one it ignores ("not a closed set", ClientCapabilities).

Probing a stdio server (stdio.mdx, Backward Compatibility; versioning.mdx). ``auto`` mode
sends ``server/discover`` first, as the spec asks. Some installed-base servers do not
survive it: mcp 1.2.0 (2024-11-05) validates each request against its closed union of
client requests inside its receive loop, and the ``ValidationError`` an unknown method
raises there (as does any request but ``initialize`` before initialization) ends that
loop; the process says nothing more and exits when its next line arrives. No request but
``initialize`` survives it, so no other probe would do. That is "no response", which the
spec reads as a legacy server: the client falls back to ``initialize``; when the process
is gone by then (or ended on the probe), the client starts the same command again once
and initializes it at once. The era is a property of the server (versioning.mdx: cache it
for the server process, MAY persist it across restarts of the same configuration): the
configuration and the revision it answered are kept (``KnownEras``), so the next connect
to it (a host restarting it, another client) sends ``initialize`` first, offering that
revision with its capabilities, and that server is never probed again in this process.
If that assumption fails (``initialize`` refused), it is forgotten and the server probed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from ..protocol._versions import Feature

__all__ = [
    "KnownEras",
    "KNOWN_ERAS",
    "capabilities_for",
    "complete_params",
    "answer_for",
    "refuses",
    "tells_cancellation",
]

# The members of a CreateMessageResult in every handshake revision (2024-11-05 onwards).
_CREATE_MESSAGE_RESULT = frozenset({"role", "content", "model", "stopReason", "_meta"})
_ROOT = frozenset({"uri", "name"})  # _meta on Root came with 2025-06-18


def capabilities_for(caps: dict[str, Any], has: frozenset[Feature]) -> dict[str, Any]:
    """``caps`` (the client's initialize capabilities) as a revision with ``has`` names them."""
    shaped = dict(caps)
    if Feature.ELICITATION not in has:
        shaped.pop("elicitation", None)
    if Feature.META_ON_TYPES not in has:  # the installed base: no extensions in its schema
        shaped.pop("extensions", None)
    return shaped


def complete_params(params: dict[str, Any], has: frozenset[Feature]) -> dict[str, Any]:
    """``completion/complete`` params for a revision with ``has``."""
    if Feature.COMPLETION_CONTEXT in has or "context" not in params:
        return params
    return {key: value for key, value in params.items() if key != "context"}


def tells_cancellation(has: frozenset[Feature]) -> bool:
    """Is a server of a revision with ``has`` sent ``notifications/cancelled``? Not the
    installed base's (see the module docstring)."""
    return Feature.META_ON_TYPES in has


def refuses(method: str, has: frozenset[Feature]) -> bool:
    """Does a server of a revision with ``has`` ask something it has no right to?"""
    return method == "elicitation/create" and Feature.ELICITATION not in has


def answer_for(method: str, result: dict[str, Any], has: frozenset[Feature]) -> dict[str, Any]:
    """The client's answer to a server request, with only what the revision's schema has."""
    if Feature.META_ON_TYPES in has:
        return result
    if method == "roots/list" and isinstance(result.get("roots"), list):
        roots = [
            {key: value for key, value in root.items() if key in _ROOT} if isinstance(root, dict) else root
            for root in result["roots"]
        ]
        return {**result, "roots": roots}
    if method == "sampling/createMessage":
        return {key: value for key, value in result.items() if key in _CREATE_MESSAGE_RESULT}
    return result


class KnownEras:
    """Server configurations known to be of the handshake era, with the revision each one
    answered; at most ``limit``, the least recently used forgotten first."""

    def __init__(self, limit: int = 256) -> None:
        self._known: OrderedDict[Hashable, str] = OrderedDict()
        self._limit = limit

    def get(self, key: Hashable | None) -> str | None:
        if key is None or key not in self._known:
            return None
        self._known.move_to_end(key)
        return self._known[key]

    def remember(self, key: Hashable | None, version: str) -> None:
        if key is None:
            return
        self._known[key] = version
        self._known.move_to_end(key)
        while len(self._known) > self._limit:
            self._known.popitem(last=False)

    def forget(self, key: Hashable | None) -> None:
        if key is not None:
            self._known.pop(key, None)


#: This process's memory of stdio server configurations that did not survive the probe.
KNOWN_ERAS = KnownEras()
