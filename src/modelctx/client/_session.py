"""The client session: ids, deadlines, progress and cancellation over one transport.

Theory of operation. The bookkeeping is ``ClientConnection``'s (protocol/connection.py):
ids, deadlines as numbers, progress tokens, which response answers which request. This
module adds the event loop: ``request`` registers a future for the request, sends it
and waits; one timer, set for the earliest deadline the connection reports, fails the
requests whose time is up. Every request but ``initialize`` carries a progress token
(its id), whether or not the caller passed a progress callback: a server reports
progress only on requests that carry one, and each report pushes the deadline back by
the request's timeout (basic/patterns/cancellation.mdx, Timeouts: a sender MAY reset
the clock on progress, and SHOULD still enforce a maximum), never past ``max_timeout``
from the start; the callback, if any, is called with it. Without the token a tool that
kept reporting failed at the plain deadline (3 s reporting every 0.3 s failed a 1 s
one). When the awaiting task is cancelled, or the deadline passes, the request is
cancelled on the wire too. When the transport reports the connection closed, every
pending request fails at once with an error that names the server and the cause.
Nothing here waits without a deadline.

Messages the server sends on its own are routed by kind: notifications tagged with a
subscription id go to that subscription's queue; other notifications to the
``on_notification`` hook; handshake-era server requests (elicitation, sampling, roots)
to ``on_server_request``, with the handlers of the request they relate to when the
request brought some (``request(..., handlers=)``) and the relation is known: the
transport delivered the question on that request's own reply stream (Streamable HTTP),
or its ``params._meta`` names the request (``RELATED_REQUEST``, which modelctx's
servers add; stdio carries nothing else), or it is the only request in flight (a
server asks while handling a request: other SDKs' servers on stdio name none), never a
guess among several; log messages so related go to those handlers' ``notification`` too. Its answer
is sent back as the response; at most
``MAX_SERVER_REQUESTS`` are answered at once, those past it refused with an error (at
most ``MAX_REFUSALS`` being sent), and the rest dropped. A timeout
or a cancellation reaches the caller at once; the cancellation is sent in the background.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from ..errors import (
    ConnectionClosed,
    InternalError,
    MCPError,
    MethodNotFound,
    ProtocolError,
    RequestTimeout,
    UnsendableMessage,
)
from ..protocol import meta as _meta
from ..protocol.connection import (
    Answer,
    ClientConnection,
    Ignore,
    Notify,
    Outbound,
    Progress,
    Serve,
    with_progress_token,
)
from ..protocol.headers import request_headers
from ..protocol.jsonrpc import Message, Notification, Request, error_response, is_request_id
from ..transports.client_seam import ClientTransport, Outgoing
from ..transports.session import resolve
from ._options import ClientHandlers, _default_client_info

__all__ = ["ClientSession", "RequestTimeout", "ProgressCallback"]

log = logging.getLogger("modelctx.client")

# What the encoders raise for a message JSON cannot carry. Every transport encodes in its
# send, so these fail the send itself, before a byte is written.
_UNENCODABLE = (UnicodeEncodeError, msgspec.EncodeError, TypeError, OverflowError)


def _unsendable(method: str, exc: BaseException) -> UnsendableMessage:
    return UnsendableMessage(f"{method} cannot be sent: its params are not JSON ({exc})")

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]


class _Expired(Exception):
    """Set on a request's future when its deadline passes; ``request`` turns it into
    ``RequestTimeout`` with the words of the moment."""


class _Waiter:
    """What one request's caller waits on: the future its answer settles, the task
    (cancelled when the deadline passes while it is still sending), the progress
    callback."""

    __slots__ = ("future", "task", "sending", "progress", "reporting", "pending")

    def __init__(
        self, future: asyncio.Future[Any], progress: ProgressCallback | None, task: asyncio.Task[Any] | None
    ) -> None:
        self.future = future
        self.task = task
        self.sending = True  # until ``request``'s send returns
        self.progress = progress
        self.reporting: asyncio.Task[Any] | None = None  # an async progress callback running
        # Updates that arrived while it ran, in order; in a flood the oldest are dropped.
        self.pending: deque[tuple[Any, ...]] = deque(maxlen=MAX_PENDING_PROGRESS)


class _Callback:
    """What ``begin`` registers where ``request`` registers a ``_Waiter`` and its future:
    the session settles it the same way (its response, its deadline, the connection's
    end) and it calls the caller back at once, in that callback: no task waits for it,
    no loop pass is spent. It is its own waiter (no task; progress only through a plain
    function, called at once) and future."""

    __slots__ = ("_session", "_on_done", "_request_id", "_method", "_started", "_settled", "progress")

    # The waiter's side: no task sending, and a progress callback only if a plain one.
    reporting = None
    sending = False
    task = None

    @property
    def future(self) -> _Callback:
        return self

    def __init__(
        self,
        session: ClientSession,
        on_done: Settled,
        request_id: str | int,
        method: str,
        started: float,
        progress: Callable[[float, float | None, str | None], None] | None,
    ) -> None:
        self.progress = progress
        self._session = session
        self._on_done = on_done
        self._request_id = request_id
        self._method = method
        self._started = started
        self._settled = False

    def done(self) -> bool:
        return self._settled

    def cancelled(self) -> bool:
        return False

    def set_result(self, result: dict[str, Any]) -> None:
        if not self._settled:
            self._settled = True
            self._on_done(result, None)

    def set_exception(self, exc: BaseException) -> None:
        if self._settled:
            return
        self._settled = True
        if isinstance(exc, _Expired):  # as ``request`` words it, and cancelled on the wire
            session = self._session
            session._cancel_in_background(self._request_id)
            waited = asyncio.get_running_loop().time() - self._started
            exc = session._timeout(
                f"no answer to {self._method} within {waited:.1f}s (request id {self._request_id})"
            )
        self._on_done(None, exc)

    def abandon(self) -> None:
        """The caller no longer wants the answer: forget the request, cancel it on the wire."""
        if self._settled:
            return
        self._settled = True
        session = self._session
        outbound = session.connection.pending.get(self._request_id)
        if outbound is not None:
            session.connection.finish(outbound)
            session._cancel_in_background(self._request_id)


#: The headers of a message on a transport that sends none (never changed).
_NO_HEADERS: dict[str, str] = {}

#: ``begin``'s callback: (result, None) or (None, the error).
Settled = Callable[[dict[str, Any] | None, BaseException | None], None]


# What a hostile or runaway server can make this client hold (SECURITY.md, Limits).
#: Notifications a listen stream keeps unread before the oldest are dropped.
MAX_UNREAD_EVENTS = 1024
#: Server-to-client requests answered at once (each may wait on a person); past it, each
#: is refused with an error at once ...
MAX_SERVER_REQUESTS = 64
#: ... and past this many refusals still being sent, dropped unanswered, as a server drops
#: what it cannot take (its own deadline ends them). A server that sends requests without
#: reading the answers blocks every answer on its full pipe; without these bounds each one
#: held a task (300,000 pings grew a client to 700 MB).
MAX_REFUSALS = 1000
#: Progress updates that wait while an async progress callback runs (oldest dropped).
MAX_PENDING_PROGRESS = 64
#: Seconds a result waits for the progress callbacks before it to finish.
PROGRESS_DRAIN = 5.0


class EventQueue(asyncio.Queue[Any]):
    """The notifications of one listener, at most ``MAX_UNREAD_EVENTS`` unread.

    ``offer`` drops the oldest unread one when full: a server that sends faster than
    the application reads costs events, never memory; the newest (the stream's end
    among them) always gets in.
    """

    def __init__(self) -> None:
        super().__init__(MAX_UNREAD_EVENTS)
        self.dropped = 0

    def offer(self, item: Any) -> None:
        if self.full():
            self.get_nowait()
            self.dropped += 1
            if self.dropped % 1000 == 1:  # the first, then now and then: not a log flood
                log.warning("a listener fell %d events behind; %d dropped so far", self.maxsize, self.dropped)
        self.put_nowait(item)


async def _progress_reported(reporting: asyncio.Task[Any]) -> None:
    """Wait for the progress callbacks a result came after: the caller sees every update
    before the result, bounded (a callback that hangs does not hold the result past
    ``PROGRESS_DRAIN``)."""
    await asyncio.wait({reporting}, timeout=PROGRESS_DRAIN)


class ClientSession:
    def __init__(
        self,
        transport: ClientTransport,
        *,
        timeout: float = 60.0,
        max_timeout: float = 600.0,
    ) -> None:
        self.transport = transport
        self.connection = ClientConnection(timeout=timeout, max_timeout=max_timeout)
        self.version: str | None = None
        self.modern = True
        self.client_info: dict[str, Any] = _default_client_info()
        self.capabilities: dict[str, Any] = {}
        self.log_level: str | None = None
        #: Put the current OpenTelemetry trace context in each request's ``_meta``
        #: (``ClientOptions.trace_context``); see ``with_trace_context``.
        self.trace_context = True
        #: Tell the server of a cancelled or timed-out request (``notifications/cancelled``);
        #: False for a server that must not be told (client/_era.py, ``tells_cancellation``).
        self.cancels_on_wire = True
        self.on_notification: Callable[[Notification], None] | None = None
        #: Answers a server request: (the request, the handlers of the request it relates
        #: to, None when it relates to none that brought handlers).
        self.on_server_request: (
            Callable[[Request, ClientHandlers | None], Awaitable[dict[str, Any]]] | None
        ) = None
        # The handlers of requests in flight that brought their own, by request id.
        self._handlers_of: dict[str | int, ClientHandlers] = {}
        #: Called once, with the cause, when the connection ends (a crash or ``aclose``).
        self.on_closed: Callable[[BaseException], None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # see ``_running_loop``
        self._timer_at = math.inf
        self._subscriptions: dict[str | int, EventQueue] = {}
        self._closed: BaseException | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._answering = 0  # server-to-client requests being answered
        self._refusing = 0  # ... and being refused
        self._dropped = 0

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, as ``asyncio.get_running_loop()`` gives it, looked up once
        while it runs: on Python 3.11 each lookup is a getpid() system call, and a
        relayed call made two (a session is used from one thread, one loop at a time)."""
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._loop = asyncio.get_running_loop()
        return loop

    @property
    def timeout(self) -> float:
        return self.connection.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self.connection.timeout = value

    @property
    def max_timeout(self) -> float:
        """The most seconds a request may take however long progress keeps it alive."""
        return self.connection.max_timeout

    @max_timeout.setter
    def max_timeout(self, value: float) -> None:
        self.connection.max_timeout = value

    # -- TransportEvents ------------------------------------------------------------
    def message(self, message: Message, related: str | int | None = None) -> None:
        """One message from the server; ``related``: the request on whose reply stream
        the transport received it, when it knows one."""
        event = self.connection.receive(message, self._running_loop().time())
        if isinstance(event, Answer):
            resolve(event.outbound.handle.future, event.response)
        elif isinstance(event, Progress):
            waiter: _Waiter | _Callback = event.outbound.handle
            if waiter.progress is not None:
                params = event.params
                self._report(waiter, (params.get("progress", 0), params.get("total"), params.get("message")))
        elif isinstance(event, Notify):
            self._notification(event.notification, related)
        elif isinstance(event, Serve):
            self._serve(event.inbound.request, related)
        elif isinstance(event, Ignore):
            log.debug("%s: %s", self.transport.name, event.why)

    def request_failed(self, request_id: str | int, exc: BaseException) -> None:
        outbound = self.connection.failed(request_id)
        if outbound is not None and not outbound.handle.future.done():
            outbound.handle.future.set_exception(exc)

    def closed(self, exc: BaseException) -> None:
        first = self._closed is None
        if first:
            self._closed = exc
        for outbound in self.connection.close():
            if not outbound.handle.future.done():
                outbound.handle.future.set_exception(exc)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for queue in self._subscriptions.values():
            queue.offer(exc)
        if first and self.on_closed is not None:
            self.on_closed(exc)

    # -- deadlines: one timer for the earliest ----------------------------------------------
    def _arm(self, deadline: float) -> None:
        if deadline >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = asyncio.get_running_loop().call_at(deadline, self._on_deadline)

    def _on_deadline(self) -> None:
        self._timer, self._timer_at = None, math.inf
        loop = asyncio.get_running_loop()
        for outbound in self.connection.expire(loop.time()):
            waiter: _Waiter = outbound.handle
            if not waiter.future.done():
                waiter.future.set_exception(_Expired())
            if waiter.sending and waiter.task is not None:
                waiter.task.cancel()  # still sending: stop that too
        deadline = self.connection.next_deadline()
        if deadline is not None:
            self._arm(deadline)

    # -- routing ------------------------------------------------------------------------
    def _notification(self, note: Notification, related: str | int | None = None) -> None:
        params = note.params
        meta = params.get("_meta")
        sub_id = meta.get(_meta.SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if note.method == "notifications/cancelled":
            sub_id = params.get("requestId")
        queue = self._subscriptions.get(sub_id) if isinstance(sub_id, (str, int)) else None
        if queue is not None:
            queue.offer(note)
        if self.on_notification is not None:
            try:
                self.on_notification(note)
            except Exception:
                log.exception("notification handler failed for %s", note.method)
        if note.method == "notifications/message" and self._handlers_of:
            # A log message about a request that brought handlers: its own ``notification``.
            handlers = self._related_handlers(params, related)
            if handlers is not None and handlers.notification is not None:
                try:
                    handlers.notification(note)
                except Exception:
                    log.exception("a call's notification handler failed for %s", note.method)

    def _report(self, waiter: _Waiter | _Callback, update: tuple[Any, ...]) -> None:
        """Call the progress callback. An async one runs one update at a time, in order;
        updates that arrive meanwhile wait, at most ``MAX_PENDING_PROGRESS`` of them (a
        server streaming faster than the callback takes them loses its oldest updates,
        never memory: a task per update piled up without bound)."""
        if waiter.reporting is not None:
            waiter.pending.append(update)
            return
        result = self._call_progress(waiter, update)
        if result is not None:
            assert isinstance(waiter, _Waiter)  # a _Callback's is a plain function
            task = asyncio.get_running_loop().create_task(self._drain(waiter, result))
            waiter.reporting = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _call_progress(self, waiter: _Waiter | _Callback, update: tuple[Any, ...]) -> Awaitable[Any] | None:
        """Call the callback; the awaitable an async one returned, else None."""
        assert waiter.progress is not None
        try:
            result = waiter.progress(*update)
        except Exception:
            log.exception("progress callback failed")
            return None
        return result if inspect.isawaitable(result) else None

    async def _drain(self, waiter: _Waiter, running: Awaitable[Any]) -> None:
        """Await the async callback, then call it with each update that waited."""
        try:
            while True:
                try:
                    await running
                except Exception:
                    log.exception("progress callback failed")
                next_one = None
                while next_one is None and waiter.pending:
                    next_one = self._call_progress(waiter, waiter.pending.popleft())
                if next_one is None:
                    return
                running = next_one
        finally:
            waiter.reporting = None

    def _related_handlers(self, params: dict[str, Any], related: str | int | None) -> ClientHandlers | None:
        """The handlers of the request a server message (its ``params``) relates to (see
        the module docstring)."""
        if not self._handlers_of:
            return None
        if related is None:
            meta = params.get("_meta")
            named = meta.get(_meta.RELATED_REQUEST) if isinstance(meta, dict) else None
            related = named if is_request_id(named) and not isinstance(named, bool) else None
        return self._handlers_of.get(related) if related is not None else None

    def _asking_handlers(self, request: Request, related: str | int | None) -> ClientHandlers | None:
        """The handlers that answer a server request: those of the request it relates to,
        else those of the only request in flight. Servers of other SDKs name none on stdio
        (the official SDKs keep the related id for HTTP routing), and a server asks while it
        handles a request, so with one in flight the question is about that one; with two
        or more there is no guess. (Logs are not attributed so: a server logs on its own.)"""
        handlers = self._related_handlers(request.params, related)
        if handlers is None and self._handlers_of and len(self.connection.pending) == 1:
            handlers = self._handlers_of.get(next(iter(self.connection.pending)))
        return handlers

    def _serve(self, request: Request, related: str | int | None = None) -> None:
        if self._answering < MAX_SERVER_REQUESTS:
            self._answering += 1
            self._track(self._answer(request, self._asking_handlers(request, related)), self._answered)
        elif self._refusing < MAX_REFUSALS:
            self._refusing += 1
            self._track(self._refuse(request), self._refused)
        else:
            if self._dropped % 10_000 == 0:  # one line per burst, not one per request
                log.warning(
                    "%s: %d server requests are already being answered and %d refused; %s (id %r) "
                    "and others beyond that bound are dropped unanswered (%d so far)",
                    self.transport.name, MAX_SERVER_REQUESTS, MAX_REFUSALS, request.method, request.id,
                    self._dropped + 1,
                )
            self._dropped += 1

    def _track(self, work: Awaitable[None], done: Callable[[asyncio.Task[Any]], None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(done)

    def _answered(self, task: asyncio.Task[Any]) -> None:
        self._answering -= 1
        self._tasks.discard(task)

    def _refused(self, task: asyncio.Task[Any]) -> None:
        self._refusing -= 1
        self._tasks.discard(task)

    async def _refuse(self, request: Request) -> None:
        """Answer a server request past ``MAX_SERVER_REQUESTS`` with an error, at once."""
        error = InternalError(
            f"Client busy: {MAX_SERVER_REQUESTS} requests of this server are already waiting "
            "for an answer; send this one again once they are answered"
        )
        await self._send_answer(error_response(request.id, error))

    async def _answer(self, request: Request, handlers: ClientHandlers | None) -> None:
        """Answer a handshake-era server-to-client request."""
        await self._send_answer(await self._answer_of(request, handlers))

    async def _answer_of(self, request: Request, handlers: ClientHandlers | None = None) -> dict[str, Any]:
        try:
            if self.on_server_request is None:
                raise MethodNotFound(f"Method not found: {request.method}")
            result = await self.on_server_request(request, handlers)
            response: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id, "result": result}
        except ProtocolError as exc:
            response = error_response(request.id, exc)
        except Exception as exc:
            log.exception("handler for %s failed", request.method)
            response = error_response(request.id, ProtocolError(f"Client handler failed: {type(exc).__name__}"))
        return response

    async def _send_answer(self, response: dict[str, Any]) -> None:
        try:
            await self.transport.send(Outgoing(response, self._handshake_headers(), handshake=True))
        except MCPError:
            pass

    # -- requests -------------------------------------------------------------------------
    def subscribe_queue(self, request_id: str | int) -> EventQueue:
        queue = EventQueue()
        self._subscriptions[request_id] = queue
        return queue

    def unsubscribe_queue(self, request_id: str | int) -> None:
        self._subscriptions.pop(request_id, None)

    def next_id(self) -> int:
        return self.connection.next_id()

    def _handshake_headers(self) -> dict[str, str]:
        return {"mcp-protocol-version": self.version} if self.version else {}

    def envelope(self, params: dict[str, Any], progress_token: Any = None, *, logs: bool = True) -> dict[str, Any]:
        """``params`` with the modern ``_meta`` keys (basic/index.mdx, ``_meta``); the
        log level left out when ``logs`` is False."""
        meta = dict(params.get("_meta") or {})
        meta[_meta.PROTOCOL_VERSION] = self.version
        meta[_meta.CLIENT_CAPABILITIES] = self.capabilities
        meta[_meta.CLIENT_INFO] = self.client_info
        if logs and self.log_level is not None:
            meta[_meta.LOG_LEVEL] = self.log_level
        if progress_token is not None:
            meta[_meta.PROGRESS_TOKEN] = progress_token
        return {**params, "_meta": meta}

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        param_paths: dict[str, tuple[str, ...]] | None = None,
        request_id: int | None = None,
        raw: bool = False,
        handlers: ClientHandlers | None = None,
    ) -> dict[str, Any]:
        """Send a request and return its result; raise the server's error as ours.

        ``raw`` sends ``params`` as given (no ``_meta`` envelope): used for ``initialize`` and handshake-era requests.
        ``handlers``: what answers the server's requests related to this one while it waits
        (the module docstring), passed to ``on_server_request``.
        """
        if self._closed is not None:
            raise self._closed
        request_id = request_id if request_id is not None else self.next_id()
        token = request_id if method != "initialize" else None  # progress keeps a deadline alive (module docstring)
        handshake = raw or not self.modern
        params = self._wire_params(params, token, handshake)
        headers = self._wire_headers(method, params, handshake, param_paths)
        loop = asyncio.get_running_loop()
        started = loop.time()
        outbound = self.connection.request(
            method, params, now=started, timeout=timeout, request_id=request_id, progress=token is not None
        )
        waiter = outbound.handle = _Waiter(loop.create_future(), progress, asyncio.current_task())
        future = waiter.future
        self._arm(outbound.deadline)
        if handlers is not None:
            self._handlers_of[request_id] = handlers
        try:
            try:
                await self.transport.send(Outgoing(outbound.message, headers, request_id, handshake))
            except BaseException as exc:
                self._send_failed(method, future, exc)
                raise
            finally:
                waiter.sending = False
            result: dict[str, Any] = await future
            if waiter.reporting is not None:
                await _progress_reported(waiter.reporting)
            return result
        except _Expired:
            raise self._expired(method, request_id, loop.time() - started) from None
        except asyncio.CancelledError:
            self._abandon(outbound, future, request_id)
            raise
        finally:
            self._forget(outbound, future)
            if handlers is not None:
                self._handlers_of.pop(request_id, None)

    def _wire_params(self, params: dict[str, Any] | None, token: int | None, handshake: bool) -> dict[str, Any]:
        """``request``'s ``params`` as its era sends them: a copy, with the trace context,
        and the progress token (handshake era) or the whole ``_meta`` envelope (modern)."""
        params = dict(params or {})
        if self.trace_context:
            params = with_trace_context(params)
        if not handshake:
            return self.envelope(params, token)
        return with_progress_token(params, token) if token is not None else params

    def _wire_headers(
        self, method: str, params: dict[str, Any], handshake: bool, param_paths: dict[str, tuple[str, ...]] | None
    ) -> dict[str, str]:
        """``request``'s headers: the protocol version alone in the handshake era (none on
        ``initialize``), the mirrored ones of a modern request on a transport that sends them."""
        if handshake:
            return self._handshake_headers() if method != "initialize" else {}
        return request_headers(method, params, self.version or "", param_paths) if self.transport.sends_headers else {}

    def _send_failed(self, method: str, future: asyncio.Future[Any], exc: BaseException) -> None:
        """Raise what ``request``'s failed send means, or return to let ``exc`` through:
        JSON that cannot carry the params is ``UnsendableMessage``; a cancellation that
        our deadline made (the future already holds ``_Expired``) is that deadline."""
        if isinstance(exc, _UNENCODABLE):
            raise _unsendable(method, exc) from exc
        if isinstance(exc, asyncio.CancelledError):
            if future.done() and not future.cancelled() and isinstance(future.exception(), _Expired):
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()  # our deadline cancelled the send, not the caller
                raise _Expired from None

    def _expired(self, method: str, request_id: str | int, waited: float) -> RequestTimeout:
        """The timeout ``request`` raises when its deadline passed; the request is
        cancelled on the wire, in the background."""
        self._cancel_in_background(request_id)
        return self._timeout(f"no answer to {method} within {waited:.1f}s (request id {request_id})")

    def _abandon(self, outbound: Outbound, future: asyncio.Future[Any], request_id: str | int) -> None:
        """The caller of ``request`` was cancelled: unless its answer was already in,
        forget the request and cancel it on the wire."""
        if not future.done() or future.cancelled():
            future.cancel()
            self.connection.finish(outbound)
            self._cancel_in_background(request_id)

    def _forget(self, outbound: Outbound, future: asyncio.Future[Any]) -> None:
        """``request``'s end, however it ended: the connection forgets the request and its
        future is settled, its exception (if any) marked retrieved."""
        self.connection.finish(outbound)
        if not future.done():
            future.cancel()
        elif not future.cancelled():
            future.exception()  # mark retrieved

    def begin(
        self,
        method: str,
        params: dict[str, Any],
        on_done: Settled,
        *,
        timeout: float | None = None,
        logs: bool = True,
        progress: Callable[[float, float | None, str | None], None] | None = None,
    ) -> Callable[[], None]:
        """Send a request and return at once; ``on_done(result, None)`` or ``on_done(None,
        error)`` is called exactly once, later, from the loop callback that settles it:
        the response (a server's JSON-RPC error as our exception), the deadline
        (``RequestTimeout``, the request cancelled on the wire), the connection's end.
        For relays that answer from that callback, with no task waiting per request.
        The request carries a progress token, as ``request``'s do, so the server's
        progress pushes its deadline back; ``progress`` (a plain function, never a
        coroutine) is called with each report. ``logs=False`` leaves the log level out
        of a modern envelope.

        Returns ``abandon()``: the caller gives up (the request is cancelled on the
        wire; ``on_done`` is not called). Raises the connection's error if it is closed.
        """
        if self._closed is not None:
            raise self._closed
        if self.trace_context:
            params = with_trace_context(params)
        request_id = self.connection.next_id()  # also the progress token
        modern = self.modern
        if not modern:
            params = with_progress_token(params, request_id)
            headers = self._handshake_headers()
        else:
            params = self._begin_envelope(params, request_id, logs)
            headers = self._modern_headers(method, params)
        loop = self._running_loop()
        now = loop.time()
        outbound = self.connection.request(method, params, now=now, timeout=timeout, request_id=request_id, progress=True)
        callback = outbound.handle = _Callback(self, on_done, request_id, method, now, progress)
        if outbound.deadline < self._timer_at:
            self._arm(outbound.deadline)
        outgoing = Outgoing(outbound.message, headers, request_id, not modern)
        try:
            sent = self.transport.send_nowait(outgoing)
        except _UNENCODABLE as exc:
            self.request_failed(request_id, _unsendable(method, exc))
            return callback.abandon
        if not sent:
            self._send_in_background(loop, outgoing)
        return callback.abandon

    def _begin_envelope(self, params: dict[str, Any], request_id: int, logs: bool) -> dict[str, Any]:
        """``begin``'s modern params: the caller's ``_meta`` merged by ``envelope``, else
        the envelope built at once in one literal (nothing of the caller's to merge)."""
        if "_meta" in params:
            return self.envelope(params, request_id, logs=logs)
        meta = {
            _meta.PROTOCOL_VERSION: self.version,
            _meta.CLIENT_CAPABILITIES: self.capabilities,
            _meta.CLIENT_INFO: self.client_info,
            _meta.PROGRESS_TOKEN: request_id,
        }
        if logs and self.log_level is not None:
            meta[_meta.LOG_LEVEL] = self.log_level
        return {**params, "_meta": meta}

    def _send_in_background(self, loop: asyncio.AbstractEventLoop, outgoing: Outgoing) -> None:
        """``begin``'s send when the transport cannot send at once: a task that
        ``aclose`` stops, failing the request if the send fails."""
        task = loop.create_task(self._send_later(outgoing))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _modern_headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        if not self.transport.sends_headers:
            return _NO_HEADERS
        return request_headers(method, params, self.version or "", None)

    async def _send_later(self, outgoing: Outgoing) -> None:
        """``begin``'s send when the transport cannot send at once; a failure fails the request."""
        assert outgoing.request_id is not None
        try:
            await self.transport.send(outgoing)
        except (MCPError, OSError) as exc:
            self.request_failed(outgoing.request_id, exc)
        except _UNENCODABLE as exc:
            self.request_failed(outgoing.request_id, _unsendable(str(outgoing.message.get("method")), exc))

    def _timeout(self, what: str) -> RequestTimeout:
        # Like every other failure, a timeout quotes what the transport saw (a stdio
        # server's stderr tail and stdout lines that were not JSON-RPC).
        details = self.transport.diagnostics()
        return RequestTimeout(f"{self.transport.name}: {what}" + (f"\n{details}" if details else ""))

    def _cancel_in_background(self, request_id: str | int) -> None:
        """Cancel the request on the wire without holding up the caller: its timeout or
        cancellation is reported at once, even to a server that reads nothing (a frozen
        handshake-era HTTP server held a 0.5 s timeout back for the 5 s the
        notifications/cancelled POST may take). ``aclose`` stops what is still sending."""
        if not self.cancels_on_wire:
            return
        task = asyncio.get_running_loop().create_task(self._cancel_on_wire(request_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cancel_on_wire(self, request_id: str | int) -> None:
        try:
            await asyncio.wait_for(self.transport.cancel(request_id, "cancelled by the client"), 5.0)
        except (TimeoutError, MCPError, OSError):
            pass

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.transport.send(Outgoing(message, self._handshake_headers(), handshake=not self.modern))

    @property
    def closed_error(self) -> BaseException | None:
        return self._closed

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self.closed(ConnectionClosed(f"{self.transport.name}: the client was closed"))


# The _meta keys of trace context: W3C Trace Context and Baggage, which MCP reserves
# unprefixed (basic/index.mdx, _meta); a propagator's other keys (B3, Jaeger) are not sent.
_TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def with_trace_context(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the current OpenTelemetry context in ``_meta`` (a copy), as
    OpenTelemetry's conventions for MCP ask; ``params`` itself when there is none.

    Costs a dictionary look-up when the application has not imported OpenTelemetry's
    context (every span needs it): without it there is no current span to carry, so
    nothing is imported here. With it, the globally configured propagator writes the
    keys (none without a valid span).
    """
    if "opentelemetry.context" not in sys.modules:
        return params
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    found = {key: carrier[key] for key in _TRACE_KEYS if key in carrier}
    if not found:
        return params
    meta = params.get("_meta")
    return {**params, "_meta": {**meta, **found} if isinstance(meta, dict) else found}
