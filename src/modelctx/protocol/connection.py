"""The two ends of one JSON-RPC conversation, as state machines that do no I/O.

Theory of operation (in the manner of h11). A transport hands each message it read to
the connection object of its side and gets back one *event* that says what to do; when
work is finished it asks the connection what, if anything, to write. Nothing here
sleeps, spawns or reads a clock: deadlines are numbers the caller passes in (``now``)
and reads back (``next_deadline``), so a test drives every rule without an event loop.

The rules kept here, once for every transport:

* Requests are tracked by id while they run. A request that reuses the id of one still
  running is refused (answering it would look like the answer to the other one).
* ``notifications/cancelled`` names a running request: the event tells the transport
  to stop it, the id is free for reuse at once, and the cancelled request is never
  answered, even when its handler returns anyway (basic/utilities/cancellation.mdx).
  A ``requestId`` that is not a string or an integer names nothing and is ignored.
* Responses are matched to the requests this side sent; unknown ids are ignored.
* Each request this side sends has a deadline that progress pushes back by the
  request's own timeout, never past its hard limit (cancellation.mdx, Timeouts): the
  connection's ``max_timeout`` from the start, or the request's own timeout when that
  is longer (a caller who asks for an hour gets an hour).

``ServerConnection`` is the server's side (a stdio process, an in-process pair, or a
handshake-era HTTP session); ``ClientConnection`` the client's. The transports keep
whatever they need to act (a task, a future) in the ``handle`` slot of a record.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

from ..errors import InvalidRequest, ProtocolError
from . import meta as _meta
from .jsonrpc import (
    Message,
    Notification,
    Request,
    Response,
    decode,
    decode_json,
    error_response,
    from_object,
    is_request_id,
)

__all__ = [
    "Inbound",
    "Outbound",
    "Serve",
    "Notify",
    "Cancel",
    "Answer",
    "Progress",
    "Reject",
    "Ignore",
    "Batch",
    "MAX_BATCH",
    "Event",
    "ServerConnection",
    "ClientConnection",
]

RequestId = str | int


# -- records ------------------------------------------------------------------------------
class Inbound:
    """A request from the peer that this side is serving."""

    __slots__ = ("request", "cancelled", "handle")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.cancelled = False
        #: What the transport runs the request with (a task, a cancel guard).
        self.handle: Any = None

    @property
    def id(self) -> RequestId:
        return self.request.id


class Outbound:
    """A request this side sent and whose response it awaits."""

    __slots__ = ("id", "message", "deadline", "limit", "budget", "token", "handle")

    def __init__(
        self,
        request_id: RequestId,
        message: dict[str, Any],
        deadline: float,
        limit: float,
        budget: float,
        token: RequestId | None,
    ) -> None:
        self.id = request_id
        self.message = message
        #: When the request times out; progress moves it back, never past ``limit``.
        self.deadline = deadline
        self.limit = limit
        self.budget = budget
        self.token = token
        #: What the transport waits on (a future).
        self.handle: Any = None

    def extend(self, now: float) -> None:
        self.deadline = min(max(self.deadline, now + self.budget), self.limit)


# -- events -------------------------------------------------------------------------------
class Serve:
    """Start serving ``inbound.request``; later call ``finish(inbound, response)``."""

    __slots__ = ("inbound",)

    def __init__(self, inbound: Inbound) -> None:
        self.inbound = inbound


class Notify:
    """A notification for the layer above (never answered)."""

    __slots__ = ("notification",)

    def __init__(self, notification: Notification) -> None:
        self.notification = notification


class Cancel:
    """The peer cancelled ``inbound``: stop it; it will not be answered."""

    __slots__ = ("inbound", "reason")

    def __init__(self, inbound: Inbound, reason: str | None) -> None:
        self.inbound = inbound
        self.reason = reason


class Answer:
    """The response to ``outbound`` arrived (``response.error`` or ``response.result``)."""

    __slots__ = ("outbound", "response")

    def __init__(self, outbound: Outbound, response: Response) -> None:
        self.outbound = outbound
        self.response = response


class Progress:
    """Progress on ``outbound``; its deadline has already been pushed back."""

    __slots__ = ("outbound", "params")

    def __init__(self, outbound: Outbound, params: dict[str, Any]) -> None:
        self.outbound = outbound
        self.params = params


class Reject:
    """The message was refused: send ``response`` (a JSON-RPC error) if it is not None."""

    __slots__ = ("response", "error")

    def __init__(self, error: ProtocolError, request_id: RequestId | None) -> None:
        self.error = error
        self.response: dict[str, Any] = error_response(request_id, error)


class Ignore:
    """Nothing to do (a late response, a cancellation of nothing); ``why`` for logs."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class Batch:
    """A JSON-RPC batch (2025-03-26 only): one event per item, in order. The requests'
    responses (and the items' refusals) go back together, as one array."""

    __slots__ = ("events",)

    def __init__(self, events: list[Event]) -> None:
        self.events = events


Event = Serve | Notify | Cancel | Answer | Progress | Reject | Ignore

# At most this many messages in one batch: each request of it runs at once, so a batch is
# bounded like the requests a peer may have in flight (a bigger one is refused whole).
MAX_BATCH = 64


def decode_frame(data: bytes | str) -> Message | Reject:
    """Decode one frame from the peer; whatever it holds, never raise."""
    try:
        return decode(data)
    except ProtocolError as exc:
        return Reject(exc, exc.request_id)


# -- shared: requests this side sends -----------------------------------------------------
class _Requests:
    """Ids, deadlines and progress tokens of the requests this side has sent."""

    def __init__(self) -> None:
        self.pending: dict[RequestId, Outbound] = {}
        self._by_token: dict[RequestId, Outbound] = {}
        self._ids = itertools.count(1)
        self._deadlines: list[tuple[float, int, Outbound]] = []
        self._order = itertools.count()

    def next_id(self) -> int:
        return next(self._ids)

    def start(
        self,
        message: dict[str, Any],
        *,
        now: float,
        timeout: float,
        max_timeout: float | None,
        token: RequestId | None,
    ) -> Outbound:
        request_id = message["id"]
        if request_id in self.pending:
            raise InvalidRequest(f"request id {request_id!r} is already waiting for its response")
        limit = now + (max(timeout, max_timeout) if max_timeout is not None else timeout)
        outbound = Outbound(request_id, message, min(now + timeout, limit), limit, timeout, token)
        self.pending[request_id] = outbound
        if token is not None:
            self._by_token[token] = outbound
        heapq.heappush(self._deadlines, (outbound.deadline, next(self._order), outbound))
        return outbound

    def finish(self, outbound: Outbound) -> None:
        if self.pending.get(outbound.id) is outbound:
            del self.pending[outbound.id]
        if outbound.token is not None and self._by_token.get(outbound.token) is outbound:
            del self._by_token[outbound.token]
        self._drop_finished()

    def _drop_finished(self) -> None:
        """Forget the deadlines of finished requests. A request's entry stays in the heap
        when it finishes (taking it from the middle costs O(n)): entries on top go at
        once, and the heap is rebuilt (in place: ``expire`` may be walking it) when
        finished ones outnumber the waiting ones. Without this a side that never asks
        for its next deadline (the server's: each of its waits has its own timer) kept
        every request it ever sent, answer and all: a stdio server leaked ~1.5 KB per
        handshake-era elicitation (found by soak/run.py)."""
        heap = self._deadlines
        while heap and self.pending.get(heap[0][2].id) is not heap[0][2]:
            heapq.heappop(heap)
        if len(heap) > 2 * len(self.pending) + 16:
            heap[:] = [entry for entry in heap if self.pending.get(entry[2].id) is entry[2]]
            heapq.heapify(heap)

    def answer(self, response: Response) -> Answer | Ignore:
        outbound = self.pending.get(response.id) if response.id is not None else None
        if outbound is None:
            return Ignore(f"a response to unknown or finished request id {response.id!r}")
        self.finish(outbound)
        return Answer(outbound, response)

    def progress(self, params: dict[str, Any], now: float) -> Progress | None:
        """Progress on one of our requests, or None: for no request of ours, or not of
        the shape the schema gives (``progress`` a number, ``total`` a number,
        ``message`` a string), which a progress callback must never be handed."""
        token = params.get("progressToken")
        outbound = self._by_token.get(token) if isinstance(token, (str, int)) else None
        if outbound is None or not _progress_shape(params):
            return None
        outbound.extend(now)
        return Progress(outbound, params)

    def expire(self, now: float) -> list[Outbound]:
        """Finish and return the requests whose deadline is ``now`` or earlier."""
        expired: list[Outbound] = []
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            _, _, outbound = heapq.heappop(heap)
            if self.pending.get(outbound.id) is not outbound:
                continue  # answered or cancelled since
            if outbound.deadline > now:  # progress moved it: look again then
                heapq.heappush(heap, (outbound.deadline, next(self._order), outbound))
                continue
            self.finish(outbound)
            expired.append(outbound)
        return expired

    def next_deadline(self) -> float | None:
        self._drop_finished()
        return self._deadlines[0][0] if self._deadlines else None

    def close(self) -> list[Outbound]:
        waiting = list(self.pending.values())
        self.pending.clear()
        self._by_token.clear()
        self._deadlines.clear()
        return waiting


# -- the server's side --------------------------------------------------------------------
class ServerConnection:
    """The server's end: requests in (served, cancelled), server-to-client requests out.

    ``id_prefix``: server-to-client request ids become ``"<id_prefix>-<n>"`` instead of
    ``n``, for a session whose requests several processes send (replicas sharing it), so
    that no two of them ever use the same id.
    """

    def __init__(self, id_prefix: str | None = None) -> None:
        self.inflight: dict[RequestId, Inbound] = {}
        self._out = _Requests()
        self._id_prefix = id_prefix

    def receive_data(self, data: bytes | str) -> Event:
        """Decode one frame (a stdio line, an HTTP body) and take it in."""
        message = decode_frame(data)
        if isinstance(message, Reject):
            return message
        return self.receive(message)

    def receive_batch(self, data: bytes | str) -> Batch | Reject:
        """Take in a frame that is a JSON-RPC batch. Only a 2025-03-26 session has them
        (``Feature.BATCH``): the transport, which knows the session, asks for this after
        ``receive_data`` refused the array. An empty or oversized batch is refused whole;
        otherwise each item is taken in as ``receive`` would, and refused alone if bad."""
        try:
            items = decode_json(data)
        except ProtocolError as exc:
            return Reject(exc, None)
        if not isinstance(items, list) or not items:
            return Reject(InvalidRequest("Invalid Request: a batch must be a non-empty array"), None)
        if len(items) > MAX_BATCH:
            return Reject(
                InvalidRequest(
                    f"Invalid Request: a batch of {len(items)} messages; at most {MAX_BATCH} "
                    "go in one batch (send the rest in another)"
                ),
                None,
            )
        events: list[Event] = []
        for item in items:
            try:
                message = from_object(item)
            except ProtocolError as exc:
                events.append(Reject(exc, exc.request_id))
                continue
            if isinstance(message, Request) and message.method == "initialize":
                # 2025-03-26 (basic/lifecycle.mdx): initialize MUST NOT be part of a batch.
                refusal = InvalidRequest("Invalid Request: initialize must not be part of a batch; send it alone")
                events.append(Reject(refusal, message.id))
                continue
            events.append(self.receive(message))
        return Batch(events)

    def receive(self, message: Message) -> Event:
        if isinstance(message, Request):
            request = message
            if request.id in self.inflight:
                # The error names the id in its text only: with that id it would read as
                # the answer to the request that is still running.
                return Reject(
                    InvalidRequest(f"Invalid Request: id {request.id!r} is already in use"), None
                )
            inbound = Inbound(request)
            self.inflight[request.id] = inbound
            return Serve(inbound)
        if isinstance(message, Notification):
            if message.method == "notifications/cancelled":
                return self._cancelled(message.params)
            return Notify(message)
        return self._out.answer(message)

    def _cancelled(self, params: dict[str, Any]) -> Cancel | Ignore:
        request_id = params.get("requestId")
        if not is_request_id(request_id):
            return Ignore(f"notifications/cancelled names no request id ({request_id!r})")
        inbound = self.inflight.pop(request_id, None)
        if inbound is None:
            return Ignore(f"notifications/cancelled for unknown request id {request_id!r}")
        inbound.cancelled = True
        reason = params.get("reason")
        return Cancel(inbound, reason if isinstance(reason, str) else None)

    def cancel(self, inbound: Inbound) -> None:
        """This side gives up on ``inbound`` (the client left): it gets no answer."""
        inbound.cancelled = True
        if self.inflight.get(inbound.id) is inbound:
            del self.inflight[inbound.id]

    def finish(self, inbound: Inbound, response: dict[str, Any] | None) -> dict[str, Any] | None:
        """The message to send for a finished request: None when it was cancelled."""
        if self.inflight.get(inbound.id) is inbound:
            del self.inflight[inbound.id]
        if inbound.cancelled:
            return None
        return response

    # server-to-client requests (handshake era: elicitation, sampling, roots)
    def request(
        self, method: str, params: dict[str, Any], *, now: float, timeout: float
    ) -> Outbound:
        number = self._out.next_id()
        request_id: RequestId = number if self._id_prefix is None else f"{self._id_prefix}-{number}"
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return self._out.start(message, now=now, timeout=timeout, max_timeout=None, token=None)

    def forget(self, outbound: Outbound) -> None:
        """Stop waiting for ``outbound`` (it timed out or its caller left)."""
        self._out.finish(outbound)

    def close(self) -> tuple[list[Inbound], list[Outbound]]:
        """End the connection: what is still running, and what still waits for an answer."""
        running = list(self.inflight.values())
        for inbound in running:
            inbound.cancelled = True
        self.inflight.clear()
        return running, self._out.close()


# -- the client's side --------------------------------------------------------------------
class ClientConnection:
    """The client's end: requests out with deadlines, responses and server messages in."""

    def __init__(self, *, timeout: float = 60.0, max_timeout: float = 600.0) -> None:
        self.timeout = timeout
        self.max_timeout = max_timeout
        self._out = _Requests()

    def next_id(self) -> int:
        return self._out.next_id()

    def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        now: float,
        timeout: float | None = None,
        request_id: RequestId | None = None,
        progress: bool = False,
    ) -> Outbound:
        """Start a request. With ``progress`` the request id is its progress token, and
        ``params`` must already carry it in ``_meta`` (see ``with_progress_token``)."""
        request_id = self._out.next_id() if request_id is None else request_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return self._out.start(
            message,
            now=now,
            timeout=self.timeout if timeout is None else timeout,
            max_timeout=self.max_timeout,
            token=request_id if progress else None,
        )

    def receive(self, message: Message, now: float) -> Event:
        if isinstance(message, Response):
            return self._out.answer(message)
        if isinstance(message, Notification):
            if message.method == "notifications/progress":
                progress = self._out.progress(message.params, now)
                return progress if progress is not None else Ignore("progress for no request, or malformed")
            return Notify(message)
        return Serve(Inbound(message))  # a server-to-client request

    def finish(self, outbound: Outbound) -> None:
        self._out.finish(outbound)

    def failed(self, request_id: RequestId) -> Outbound | None:
        """The transport can no longer deliver an answer to ``request_id``."""
        outbound = self._out.pending.get(request_id)
        if outbound is not None:
            self._out.finish(outbound)
        return outbound

    def expire(self, now: float) -> list[Outbound]:
        return self._out.expire(now)

    def next_deadline(self) -> float | None:
        return self._out.next_deadline()

    @property
    def pending(self) -> dict[RequestId, Outbound]:
        return self._out.pending

    def close(self) -> list[Outbound]:
        return self._out.close()


def with_progress_token(params: dict[str, Any], token: RequestId) -> dict[str, Any]:
    """``params`` with ``_meta.progressToken`` set (a copy; the caller's dict is kept)."""
    meta = dict(params.get("_meta") or {})
    meta[_meta.PROGRESS_TOKEN] = token
    return {**params, "_meta": meta}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _progress_shape(params: dict[str, Any]) -> bool:
    total, message = params.get("total"), params.get("message")
    return (
        _number(params.get("progress"))
        and (total is None or _number(total))
        and (message is None or isinstance(message, str))
    )
