"""The inspector's one connection to the server under inspection, and what the page sees.

``InspectorSession`` holds a ``Client`` (over an ``ObservedTransport``), the lists the
server offers, the message log, and the elicitations waiting for the user. It publishes
every change as an event (a JSON-ready dict with a ``"type"``) to the page's event
streams; ``snapshot()`` is what a freshly opened stream starts from.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec

from ..client import Client, ClientHandlers, ClientOptions, ClientTransport, Elicitation, ListChanged
from ..errors import MCPError, ProtocolError
from ..protocol.apps import UI_EXTENSION, UI_MIME_TYPE
from ._observer import ObservedTransport
from ._views import Views

__all__ = ["InspectorSession", "TransportFactory"]

log = logging.getLogger("modelctx.inspector")

#: Makes a fresh transport to the server each time the inspector (re)connects.
TransportFactory = Callable[[], ClientTransport]

#: How long a question the server asks waits for the person at the page.
ELICITATION_DEADLINE = 600.0
#: Messages kept for a page that opens later (the log shows the most recent ones).
LOG_KEPT = 1000
#: Events a slow page may fall behind by before its stream is dropped (it reconnects).
STREAM_BACKLOG = 2000
_LIST_KINDS = ("tools", "resources", "resourceTemplates", "prompts")


def _plain(value: Any) -> Any:
    """A typed result (msgspec struct) as JSON-ready builtins, in its wire spelling."""
    return msgspec.to_builtins(value)


def _error_body(exc: BaseException) -> dict[str, Any]:
    """A failure as the page shows it: JSON-RPC errors keep their code and data."""
    if isinstance(exc, ProtocolError):
        return {"kind": "jsonrpc", "code": exc.code, "message": exc.message, "data": exc.data}
    return {"kind": "local", "message": f"{type(exc).__name__}: {exc}"}


class InspectorSession:
    """The connection under inspection; ``await start()``, then the API methods."""

    def __init__(self, make_transport: TransportFactory, *, target: str, timeout: float = 60.0) -> None:
        self._make_transport = make_transport
        self.target = target
        self._timeout = timeout
        self._client: Client | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._streams: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._log: deque[dict[str, Any]] = deque(maxlen=LOG_KEPT)
        self._pending: dict[str, tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = {}
        self._ids = itertools.count(1)
        self._status: dict[str, Any] = {"state": "idle"}
        self._lists: dict[str, list[Any]] = {kind: [] for kind in _LIST_KINDS}
        self._connect_lock = asyncio.Lock()
        self.views = Views()
        self.generation = 0  # bumped on every (re)connect, so the page can tell

    # -- the page's event streams -------------------------------------------------------
    def subscribe(self) -> asyncio.Queue[dict[str, Any] | None]:
        """A queue of events for one page stream, starting with a snapshot."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(STREAM_BACKLOG)
        queue.put_nowait(self.snapshot())
        self._streams.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        self._streams.discard(queue)

    def publish(self, event: dict[str, Any]) -> None:
        for queue in list(self._streams):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                # This page stopped reading; end its stream (None) rather than grow forever.
                self._streams.discard(queue)
                queue.get_nowait()
                queue.put_nowait(None)

    def close_streams(self) -> None:
        for queue in list(self._streams):
            self._streams.discard(queue)
            try:
                queue.put_nowait(None)
            except asyncio.QueueFull:
                pass

    def snapshot(self) -> dict[str, Any]:
        return {
            "type": "snapshot",
            "target": self.target,
            "generation": self.generation,
            "status": self._status,
            "lists": self._lists,
            "log": list(self._log),
            "elicitations": [question for question, _ in self._pending.values()],
        }

    def _on_message(self, entry: dict[str, Any]) -> None:
        self._log.append(entry)
        self.publish({"type": "message", "entry": entry})

    def _set_status(self, **status: Any) -> None:
        self._status = status
        self.publish({"type": "status", "status": status})

    # -- connecting ---------------------------------------------------------------------
    async def start(self) -> None:
        """Connect (again): a failure is shown on the page, not raised."""
        async with self._connect_lock:
            await self._disconnect()
            self.generation += 1
            self._log.clear()
            self._lists = {kind: [] for kind in _LIST_KINDS}
            self._set_status(state="connecting", generation=self.generation)
            transport = ObservedTransport(self._make_transport(), self._on_message)
            client = Client(
                transport,
                timeout=self._timeout,
                handlers=ClientHandlers(elicitation=self._ask_user),
                # The page shows MCP Apps views (the io.modelcontextprotocol/ui extension).
                options=ClientOptions(extensions={UI_EXTENSION: {"mimeTypes": [UI_MIME_TYPE]}}),
            )
            try:
                await client.connect()
            except (MCPError, OSError, TimeoutError) as exc:
                self._set_status(state="failed", generation=self.generation, error=_error_body(exc))
                return
            self._client = client
            self._set_status(state="connected", generation=self.generation, **self._describe(client))
            await self.refresh()
            self._watcher = asyncio.create_task(self._follow_changes(client))

    async def stop(self) -> None:
        async with self._connect_lock:
            await self._disconnect()
            self._set_status(state="closed", generation=self.generation)
        self.close_streams()

    async def _disconnect(self) -> None:
        for _, answer in self._pending.values():
            if not answer.done():
                answer.set_result({"action": "cancel"})
        self._pending.clear()
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await asyncio.wait_for(client.close(), 15)
            except (MCPError, OSError, TimeoutError) as exc:
                log.warning("closing %s: %s", self.target, exc)

    @staticmethod
    def _describe(client: Client) -> dict[str, Any]:
        return {
            "protocolVersion": client.protocol_version,
            "era": "stateless (2026-07-28)" if client.modern else "handshake (initialize)",
            "serverInfo": client.server_info,
            "capabilities": client.raw_server_capabilities,
            "instructions": client.instructions,
            "supportedVersions": client.supported_versions,
        }

    def _connected(self) -> Client:
        if self._client is None:
            raise ConnectionError(f"not connected to {self.target}; press Reconnect")
        return self._client

    # -- lists and list_changed ---------------------------------------------------------
    async def refresh(self, kinds: tuple[str, ...] = _LIST_KINDS) -> None:
        """List what the server offers (only what its capabilities declare) and publish it."""
        client = self._connected()
        caps = client.raw_server_capabilities
        fetchers = {
            "tools": ("tools", client.tools),
            "resources": ("resources", client.resources),
            "resourceTemplates": ("resources", client.resource_templates),
            "prompts": ("prompts", client.prompts),
        }
        for kind in kinds:
            capability, fetch = fetchers[kind]
            if capability not in caps:
                continue
            try:
                self._lists[kind] = _plain(await fetch())
            except MCPError as exc:
                self.publish({"type": "notice", "level": "error", "text": f"{kind}: {exc}"})
        self.publish({"type": "lists", "lists": self._lists, "changed": list(kinds)})

    async def _follow_changes(self, client: Client) -> None:
        """Re-list what the server says changed, for as long as the connection lasts."""
        caps = client.raw_server_capabilities
        follows = {kind: bool((caps.get(kind) or {}).get("listChanged")) for kind in ("tools", "prompts", "resources")}
        if not any(follows.values()):
            return
        try:
            async for event in client.listen(
                tools=follows["tools"], prompts=follows["prompts"], resources=follows["resources"]
            ):
                if isinstance(event, ListChanged):
                    kinds = ("resources", "resourceTemplates") if event.kind == "resources" else (event.kind,)
                    self.publish({"type": "notice", "level": "info", "text": f"{event.kind} list changed"})
                    await self.refresh(kinds)
        except (MCPError, OSError) as exc:
            self.publish({"type": "notice", "level": "error", "text": f"stopped following changes: {exc}"})

    # -- elicitation -----------------------------------------------------------------------
    async def _ask_user(self, question: Elicitation) -> dict[str, Any]:
        """Show the server's question on the page and wait (with a deadline) for the answer."""
        key = f"e{next(self._ids)}"
        shown = {
            "id": key,
            "mode": question.mode,
            "message": question.message,
            "requestedSchema": question.requested_schema,
            "url": question.url,
        }
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[key] = (shown, answer)
        self.publish({"type": "elicitation", "elicitation": shown})
        try:
            return await asyncio.wait_for(answer, ELICITATION_DEADLINE)
        except TimeoutError:
            return {"action": "cancel"}
        finally:
            self._pending.pop(key, None)
            self.publish({"type": "elicitation_done", "id": key})

    def answer(self, key: str, action: str, content: dict[str, Any] | None) -> None:
        """The user's answer to elicitation ``key``; raises ``KeyError``/``ValueError``."""
        if action not in ("accept", "decline", "cancel"):
            raise ValueError(f"action must be accept, decline or cancel, not {action!r}")
        _, future = self._pending[key]
        reply: dict[str, Any] = {"action": action}
        if action == "accept" and content is not None:
            reply["content"] = content
        if not future.done():
            future.set_result(reply)

    # -- calls -----------------------------------------------------------------------------
    async def call_tool(self, name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
        client = self._connected()
        started = time.monotonic()

        def progress(done: float, total: float | None, message: str | None) -> None:
            self.publish({"type": "progress", "callId": call_id, "progress": done, "total": total, "message": message})

        try:
            result = await client.call_tool_raw(name, arguments, progress=progress)
        except (MCPError, OSError) as exc:
            return {"error": _error_body(exc), "ms": _ms_since(started)}
        return {"result": result, "ms": _ms_since(started)}

    # -- MCP Apps views (_views.py) ---------------------------------------------------------
    async def open_view(self, tool: str) -> dict[str, Any]:
        """Read the UI resource of ``tool`` and keep it to be served as a view: the
        page's iframe loads it from ``/apps/<id>``. Raises ``ValueError`` saying why not."""
        client = self._connected()
        return await self.views.open(client, self._listed_tool(tool))

    async def app_call(self, view: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A view's ``tools/call``: only a tool of this server whose visibility lets
        the app call it (ext-apps, Visibility); else a JSON-RPC error for the view."""
        self.views.get(view)  # KeyError: not a view of this page
        refused = self.views.refusal(self._lists["tools"], name)
        if refused is not None:
            return {"error": refused}
        return await self.call_tool(name, arguments, "")

    async def app_read(self, view: str, uri: str) -> dict[str, Any]:
        self.views.get(view)
        return await self.read_resource(uri)

    def _listed_tool(self, name: str) -> dict[str, Any]:
        for tool in self._lists["tools"]:
            if isinstance(tool, dict) and tool.get("name") == name:
                return tool
        raise ValueError(f"{self.target} lists no tool named {name!r}")

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self._run(lambda client: client.read_resource(uri))

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        return await self._run(lambda client: client.get_prompt(name, arguments))

    async def _run(self, call: Callable[[Client], Any]) -> dict[str, Any]:
        client = self._connected()
        started = time.monotonic()
        try:
            result = await call(client)
        except (MCPError, OSError) as exc:
            return {"error": _error_body(exc), "ms": _ms_since(started)}
        return {"result": _plain(result), "ms": _ms_since(started)}


def _ms_since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
