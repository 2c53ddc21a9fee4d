"""The client session: ids, deadlines, progress and cancellation over one transport.

Theory of operation. ``request`` gives each request a fresh id, registers a future,
sends the message and waits for the matching response with a deadline. A progress
notification for the request's token calls the caller's progress callback and pushes
the deadline back (never past ``max_timeout``). When the awaiting task is cancelled,
or the deadline passes, the request is cancelled on the wire too. When the transport
reports the connection closed, every pending request fails at once with an error that
names the server and the cause. Nothing here waits without a deadline.

Messages the server sends on its own are routed by kind: notifications tagged with a
subscription id go to that subscription's queue; other notifications to the
``on_notification`` hook; handshake-era server requests (elicitation, sampling, roots)
to ``on_server_request``, whose answer is sent back as the response.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ConnectionClosed, MCPError, MethodNotFound, ProtocolError, RequestTimeout, error_from_wire
from ..protocol import _meta
from ..protocol._jsonrpc import Notification, Request, Response, error_response
from ..protocol._headers import request_headers
from ..transports._base import ClientTransport, Outgoing

__all__ = ["ClientSession", "RequestTimeout", "ProgressCallback"]

log = logging.getLogger("modelctx.client")

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]


class _Pending:
    __slots__ = ("future", "progress", "deadline", "limit", "budget", "method", "scope")

    def __init__(self, future: asyncio.Future, method: str, progress: ProgressCallback | None) -> None:
        self.future = future
        self.method = method
        self.progress = progress
        self.deadline = 0.0  # loop time when the request times out, moved by progress
        self.limit = 0.0  # loop time past which no progress extends it (max_timeout)
        self.budget = 0.0  # this request's timeout: what each progress update grants again
        self.scope: Any = None  # the asyncio.Timeout that enforces the deadline

    def extend(self, now: float) -> None:
        self.deadline = max(self.deadline, now + self.budget)
        if self.scope is not None:
            self.scope.reschedule(min(self.deadline, self.limit))


class ClientSession:
    def __init__(
        self,
        transport: ClientTransport,
        *,
        timeout: float = 60.0,
        max_timeout: float = 600.0,
    ) -> None:
        self.transport = transport
        self.timeout = timeout
        self.max_timeout = max_timeout
        self.version: str | None = None
        self.modern = True
        self.client_info: dict[str, Any] = {"name": "modelctx", "version": "0.1.0"}
        self.capabilities: dict[str, Any] = {}
        self.log_level: str | None = None
        self.on_notification: Callable[[Notification], None] | None = None
        self.on_server_request: Callable[[Request], Awaitable[dict[str, Any]]] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[str | int, _Pending] = {}
        self._by_token: dict[str | int, _Pending] = {}
        self._subscriptions: dict[str | int, asyncio.Queue] = {}
        self._closed: BaseException | None = None
        self._tasks: set[asyncio.Task] = set()

    # -- TransportEvents ------------------------------------------------------------
    def message(self, message: Any) -> None:
        kind = type(message)
        if kind is Response:
            pending = self._pending.get(message.id)
            if pending is None or pending.future.done():
                log.debug("%s: ignored a response to unknown or finished id %r", self.transport.name, message.id)
                return
            if message.error is not None:
                pending.future.set_exception(error_from_wire(message.error))
            else:
                pending.future.set_result(message.result)
        elif kind is Notification:
            self._notification(message)
        elif kind is Request:
            task = asyncio.get_running_loop().create_task(self._answer(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def request_failed(self, request_id: str | int, exc: BaseException) -> None:
        pending = self._pending.get(request_id)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(exc)

    def closed(self, exc: BaseException) -> None:
        if self._closed is None:
            self._closed = exc
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(exc)
        for queue in self._subscriptions.values():
            queue.put_nowait(exc)

    # -- routing ------------------------------------------------------------------------
    def _notification(self, note: Notification) -> None:
        params = note.params
        if note.method == "notifications/progress":
            pending = self._by_token.get(params.get("progressToken"))
            if pending is not None and not pending.future.done():
                # Progress pushes the deadline back by the request's own timeout, up to
                # max_timeout (cancellation.mdx).
                pending.extend(asyncio.get_running_loop().time())
                if pending.progress is not None:
                    self._spawn(pending.progress, params.get("progress", 0), params.get("total"), params.get("message"))
            return
        meta = params.get("_meta")
        sub_id = meta.get(_meta.SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if note.method == "notifications/cancelled":
            sub_id = params.get("requestId")
        queue = self._subscriptions.get(sub_id) if sub_id is not None else None
        if queue is not None:
            queue.put_nowait(note)
        if self.on_notification is not None:
            try:
                self.on_notification(note)
            except Exception:
                log.exception("notification handler failed for %s", note.method)

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            result = fn(*args)
        except Exception:
            log.exception("progress callback failed")
            return
        if asyncio.iscoroutine(result):
            task = asyncio.get_running_loop().create_task(result)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, request: Request) -> None:
        """Answer a handshake-era server-to-client request."""
        try:
            if self.on_server_request is None:
                raise MethodNotFound(f"Method not found: {request.method}")
            result = await self.on_server_request(request)
            response: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id, "result": result}
        except ProtocolError as exc:
            response = error_response(request.id, exc)
        except Exception as exc:
            log.exception("handler for %s failed", request.method)
            response = error_response(request.id, ProtocolError(f"Client handler failed: {type(exc).__name__}"))
        try:
            await self.transport.send(Outgoing(response, self._legacy_headers(), legacy=True))
        except MCPError:
            pass

    # -- requests -------------------------------------------------------------------------
    def subscribe_queue(self, request_id: str | int) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue()
        self._subscriptions[request_id] = queue
        return queue

    def unsubscribe_queue(self, request_id: str | int) -> None:
        self._subscriptions.pop(request_id, None)

    def next_id(self) -> int:
        return next(self._ids)

    def _legacy_headers(self) -> dict[str, str]:
        return {"mcp-protocol-version": self.version} if self.version else {}

    def envelope(self, params: dict[str, Any], progress_token: Any = None) -> dict[str, Any]:
        """``params`` with the modern ``_meta`` keys (basic/index.mdx, ``_meta``)."""
        meta = dict(params.get("_meta") or {})
        meta[_meta.PROTOCOL_VERSION] = self.version
        meta[_meta.CLIENT_CAPABILITIES] = self.capabilities
        meta[_meta.CLIENT_INFO] = self.client_info
        if self.log_level is not None:
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
    ) -> dict[str, Any]:
        """Send a request and return its result; raise the server's error as ours.

        ``raw`` sends ``params`` as given (no ``_meta`` envelope): used for
        ``initialize`` and handshake-era requests.
        """
        if self._closed is not None:
            raise self._closed
        request_id = request_id if request_id is not None else self.next_id()
        params = dict(params or {})
        token = request_id if progress is not None else None
        legacy = raw or not self.modern
        if legacy:
            if token is not None:
                params["_meta"] = {**(params.get("_meta") or {}), _meta.PROGRESS_TOKEN: token}
            headers = self._legacy_headers() if method != "initialize" else {}
        else:
            params = self.envelope(params, token)
            headers = request_headers(method, params, self.version or "", param_paths)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        pending = _Pending(future, method, progress)
        pending.budget = budget = self.timeout if timeout is None else timeout
        started = loop.time()
        pending.deadline = started + budget
        pending.limit = started + self.max_timeout
        self._pending[request_id] = pending
        if token is not None:
            self._by_token[token] = pending
        try:
            try:
                # One timer covers sending and waiting; progress reschedules it.
                async with asyncio.timeout_at(min(pending.deadline, pending.limit)) as scope:
                    pending.scope = scope
                    await self.transport.send(Outgoing(message, headers, request_id, legacy))
                    return await future
            except TimeoutError:
                raise self._timeout(
                    f"no answer to {method} within {loop.time() - started:.1f}s (request id {request_id})"
                ) from None
        except (asyncio.CancelledError, RequestTimeout):
            if not future.done() or future.cancelled():
                future.cancel()
                await self._cancel_on_wire(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
            if token is not None:
                self._by_token.pop(token, None)
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # mark retrieved

    def _timeout(self, what: str) -> RequestTimeout:
        # Like every other failure, a timeout quotes what the transport saw (a stdio
        # server's stderr tail and stdout lines that were not JSON-RPC).
        details = self.transport.diagnostics()
        return RequestTimeout(f"{self.transport.name}: {what}" + (f"\n{details}" if details else ""))

    async def _cancel_on_wire(self, request_id: str | int) -> None:
        try:
            await asyncio.wait_for(self.transport.cancel(request_id, "cancelled by the client"), 5.0)
        except (MCPError, OSError, asyncio.TimeoutError):
            pass

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.transport.send(Outgoing(message, self._legacy_headers(), legacy=not self.modern))

    @property
    def closed_error(self) -> BaseException | None:
        return self._closed

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self.closed(ConnectionClosed(f"{self.transport.name}: the client was closed"))
