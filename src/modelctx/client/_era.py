"""The two eras of a connection, as one interface: what the client does differently in each.

``Client.connect`` is the opening phase (probe, ``initialize``); it hands the connection
over to an ``Era`` for the operating phase, as wsproto's handshake hands over to its
connection: ``ModernEra`` (2026-07-28: per-request ``_meta``, cache hints, ``-32022``
retries, header mirroring, ``subscriptions/listen``) or ``HandshakeEra`` (the negotiated
revision's session: re-initialized when it expires, ``resources/subscribe`` and the
session's notifications for change events, and the rules of its revision below). The
``Client`` facade asks its era and never which era it is in.

Old revisions. The client offers ``HANDSHAKE_VERSIONS[0]`` in ``initialize`` and goes
on with whatever handshake revision the server answers, the installed base's 2025-03-26
and 2024-11-05 among them (2025-11-25 lifecycle.mdx, Version Negotiation). From then on it
sends that server only what the revision's schema has (schema/2024-11-05 and
schema/2025-03-26 of modelcontextprotocol/modelcontextprotocol, checked field by field;
tests/interop/test_old_servers.py checks every message sent to a real old server):

* the ``initialize`` capabilities of a revision (when the client knows it before asking,
  see below): no ``elicitation`` before 2025-06-18, no ``extensions`` for the installed
  base (their ``ClientCapabilities`` have neither; server/_shape.py drops the server's
  extensions for the same sessions);
* ``completion/complete`` without ``context`` before 2025-06-18;
* answers to the server's own requests shaped to the revision: a ``Root`` is ``uri`` and
  ``name``, a ``CreateMessageResult`` its five members;
* an ``elicitation/create`` from a revision without elicitation is refused (-32601): the
  client never offered it to such a server, whatever the first ``initialize`` said.
* the installed base's stdio servers are not sent ``notifications/cancelled``: a request
  the caller gives up (or whose deadline passes) is abandoned on this side only and its
  late answer dropped. Both revisions' schemas have the notification and cancellation.mdx says
  a sender SHOULD send it, but the official SDK's servers of those revisions end on it:
  mcp 1.2.0 has no type for it (modelcontextprotocol/python-sdk issue 88: the same
  ``ValidationError`` in the receive loop as below), and in mcp 1.9.4 the cancelled
  handler's scope ends the server's task group, so the process exits at its next line
  (reproduced with tests/fixtures/peers/old_server.py). The official client of that time
  never sent it (python-sdk issue 2507), so that is what those servers were run with.
  Not telling them costs work they finish for nothing; telling them costs the process:
  on stdio the session is the process, every other request in it and its state. Over
  HTTP (and HTTP+SSE) the notification is sent: there it ends one session, which the
  client reports, and the server goes on serving the others.

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

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..errors import MCPError, ProtocolError
from ..protocol import Feature
from ._session import ClientSession, EventQueue

__all__ = [
    "Era",
    "HandshakeEra",
    "KNOWN_ERAS",
    "KnownEras",
    "ListChanged",
    "ModernEra",
    "ResourceUpdated",
    "SubscriptionEvent",
    "Wanted",
    "capabilities_for",
]

# The members of a CreateMessageResult in every handshake revision (2024-11-05 onwards).
_CREATE_MESSAGE_RESULT = frozenset({"role", "content", "model", "stopReason", "_meta"})
_ROOT = frozenset({"uri", "name"})  # _meta on Root came with 2025-06-18


@dataclass(frozen=True)
class ListChanged:
    """The server's list of ``kind`` ("tools", "prompts" or "resources") changed."""

    kind: str


@dataclass(frozen=True)
class ResourceUpdated:
    """The resource at ``uri`` changed: read it again to see how."""

    uri: str


SubscriptionEvent = ListChanged | ResourceUpdated


@dataclass(frozen=True)
class Wanted:
    """What a ``listen`` asks to hear of."""

    tools: bool
    prompts: bool
    resources: bool
    uris: tuple[str, ...]


#: ``Client._request`` as an era calls it: (method, params) to the result.
Requester = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def capabilities_for(caps: dict[str, Any], has: frozenset[Feature]) -> dict[str, Any]:
    """``caps`` (the client's initialize capabilities) as a revision with ``has`` names them."""
    shaped = dict(caps)
    if Feature.ELICITATION not in has:
        shaped.pop("elicitation", None)
    if Feature.META_ON_TYPES not in has:  # the installed base: no extensions in its schema
        shaped.pop("extensions", None)
    return shaped


class Era:
    """What the client does in one era; ``Client`` holds the one its connection is in."""

    #: Is this the 2026-07-28 era (``Client.modern``)?
    modern = False
    #: Reuse results as ``ttlMs``/``cacheScope`` allow (only 2026-07-28 results carry them).
    caches = False
    #: Retry a request with a version a -32022 error names.
    adopts_versions = False
    #: ``initialize`` again when the server forgot the session (HTTP 404), then re-send.
    renews_sessions = False
    #: On a ``HeaderMismatch``, list the tools again and re-send with their new headers.
    relists_on_header_mismatch = False
    #: Change notifications arrive on the session itself (not on a listen stream): the
    #: client hands them to its listeners.
    events_on_session = False
    #: Follow a task on a ``subscriptions/listen`` stream (else poll).
    follows_tasks = False

    def complete_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """``completion/complete`` params as this era's revision has them."""
        return params

    def refuses(self, method: str) -> bool:
        """Does the server ask something its revision does not have?"""
        return False

    def answer(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """The client's answer to a server request, as the revision's schema has it."""
        return result

    def listen(
        self, wanted: Wanted, reconnect: bool, on_open: Callable[[], object] | None
    ) -> AsyncIterator[SubscriptionEvent]:
        raise NotImplementedError


class ModernEra(Era):
    """2026-07-28: every request stands alone; changes are heard on listen streams."""

    modern = True
    caches = True
    adopts_versions = True
    relists_on_header_mismatch = True
    follows_tasks = True

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def listen(
        self, wanted: Wanted, reconnect: bool, on_open: Callable[[], object] | None
    ) -> AsyncIterator[SubscriptionEvent]:
        """One ``subscriptions/listen`` stream, re-opened with backoff when it drops."""
        filt = _listen_filter(wanted)
        backoff = 0.1
        session = self.session
        while True:
            request_id = session.next_id()
            queue = session.subscribe_queue(request_id)
            stream = asyncio.ensure_future(
                session.request("subscriptions/listen", {"notifications": filt}, request_id=request_id, timeout=24 * 3600.0)
            )
            stream.add_done_callback(partial(_stream_ended, queue))
            ended_gracefully = False
            try:
                while True:
                    item = await queue.get()
                    if isinstance(item, asyncio.Future):
                        ended_gracefully = _ended_gracefully(item)
                        break
                    if isinstance(item, BaseException):
                        raise item
                    method = item.method
                    if method == "notifications/subscriptions/acknowledged":
                        backoff = 0.1
                        if on_open is not None:
                            on_open()
                        continue
                    if method == "notifications/cancelled":
                        ended_gracefully = True
                        break
                    if method.endswith("/list_changed"):
                        yield ListChanged(method.split("/")[1])
                    elif method == "notifications/resources/updated" and isinstance(item.params.get("uri"), str):
                        yield ResourceUpdated(item.params["uri"])
            finally:
                session.unsubscribe_queue(request_id)
                if not stream.done():
                    await _cancel_stream(stream)
            if ended_gracefully or not reconnect or session.closed_error is not None:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)


class HandshakeEra(Era):
    """A session opened by ``initialize`` at ``version``: its revision's rules (the module
    docstring), ``resources/subscribe`` and the session's own notifications."""

    renews_sessions = True
    events_on_session = True

    def __init__(
        self, version: str, has: frozenset[Feature], request: Requester, listeners: set[EventQueue]
    ) -> None:
        self.version = version
        self.has = has  # features(version)
        self._request = request
        self._listeners = listeners

    def tells_cancellation(self, stdio: bool) -> bool:
        """Is the server sent ``notifications/cancelled``? Not an installed-base server
        on stdio, where its session is its process (see the module docstring)."""
        return Feature.META_ON_TYPES in self.has or not stdio

    def complete_params(self, params: dict[str, Any]) -> dict[str, Any]:
        if Feature.COMPLETION_CONTEXT in self.has or "context" not in params:
            return params
        return {key: value for key, value in params.items() if key != "context"}

    def refuses(self, method: str) -> bool:
        return method == "elicitation/create" and Feature.ELICITATION not in self.has

    def answer(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        if Feature.META_ON_TYPES in self.has:
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

    async def listen(
        self, wanted: Wanted, reconnect: bool, on_open: Callable[[], object] | None
    ) -> AsyncIterator[SubscriptionEvent]:
        """``resources/subscribe`` for each URI, then the session's notifications."""
        queue = EventQueue()
        self._listeners.add(queue)
        kinds = {"tools": wanted.tools, "prompts": wanted.prompts, "resources": wanted.resources}
        try:
            for uri in wanted.uris:
                await self._request("resources/subscribe", {"uri": uri})
            if on_open is not None:
                on_open()
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, ListChanged) and not kinds.get(item.kind):
                    continue
                if isinstance(item, ResourceUpdated) and item.uri not in wanted.uris:
                    continue
                yield item
        finally:
            self._listeners.discard(queue)
            for uri in wanted.uris:
                try:
                    await asyncio.wait_for(self._request("resources/unsubscribe", {"uri": uri}), 5)
                except (MCPError, TimeoutError):
                    pass


def _listen_filter(wanted: Wanted) -> dict[str, Any]:
    """The ``notifications`` filter of a ``subscriptions/listen`` request for ``wanted``."""
    filt: dict[str, Any] = {}
    if wanted.tools:
        filt["toolsListChanged"] = True
    if wanted.prompts:
        filt["promptsListChanged"] = True
    if wanted.resources:
        filt["resourcesListChanged"] = True
    if wanted.uris:
        filt["resourceSubscriptions"] = list(wanted.uris)
    return filt


def _ended_gracefully(stream: asyncio.Future[Any]) -> bool:
    """How a listen stream's request ended: True when the server answered it (the stream
    is over), False when it dropped (cancelled or failed: reconnect). Raises the
    server's refusal to listen, which retrying cannot help."""
    if stream.cancelled():
        return False
    failure = stream.exception()
    if failure is None:
        return True
    if isinstance(failure, ProtocolError) and failure.remote:
        raise failure
    return False


async def _cancel_stream(stream: asyncio.Future[Any]) -> None:
    """Cancel a listen stream's request still running and wait for it to end."""
    stream.cancel()
    try:
        await stream
    except (asyncio.CancelledError, MCPError):
        pass


def _stream_ended(queue: EventQueue, stream: asyncio.Future[Any]) -> None:
    """The listen queue hears when its stream ends; the stream's error counts as read
    even if the application never reads that far (no "exception never retrieved")."""
    if not stream.cancelled():
        stream.exception()
    queue.offer(stream)


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
