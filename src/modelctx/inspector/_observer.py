"""A client transport that reports every JSON-RPC message it carries, both ways.

``ObservedTransport(inner, on_message)`` wraps any ``ClientTransport`` (the public seam
``Client`` accepts as its target) and calls ``on_message(entry)`` for each message sent
or received; the client itself is unchanged. An entry is a plain dict ready for JSON:
``{"seq", "direction": "out"|"in", "at_ms", "message", "elapsed_ms"?}`` where
``elapsed_ms`` (on responses) is the time since the request with the same id was sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..client import ClientTransport, Outgoing, TransportEvents
from ..protocol import Message, Notification, Request

__all__ = ["ObservedTransport", "message_to_dict"]

MessageObserver = Callable[[dict[str, Any]], None]


def message_to_dict(message: Message) -> dict[str, Any]:
    """The JSON-RPC object a decoded message came from."""
    if isinstance(message, Request):
        return {"jsonrpc": "2.0", "id": message.id, "method": message.method, "params": message.params}
    if isinstance(message, Notification):
        return {"jsonrpc": "2.0", "method": message.method, "params": message.params}
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": message.id}
    if message.error is not None:
        body["error"] = message.error
    else:
        body["result"] = message.result
    return body


class _ObservedEvents:
    """The session's ``TransportEvents``, reporting each inbound message first."""

    def __init__(self, inner: TransportEvents, transport: ObservedTransport) -> None:
        self._inner = inner
        self._transport = transport

    def message(self, message: Message, related: str | int | None = None) -> None:
        self._transport.record("in", message_to_dict(message))
        self._inner.message(message, related)

    def request_failed(self, request_id: str | int, exc: BaseException) -> None:
        self._inner.request_failed(request_id, exc)

    def closed(self, exc: BaseException) -> None:
        self._inner.closed(exc)


class ObservedTransport(ClientTransport):
    """``inner`` with every message reported to ``on_message`` (see the module docstring)."""

    def __init__(self, inner: ClientTransport, on_message: MessageObserver) -> None:
        self.inner = inner
        self.name = inner.name
        self.kind = inner.kind
        # The mirrored headers are part of what an HTTP transport sends; keep computing them.
        self.sends_headers = inner.sends_headers
        self._on_message = on_message
        self._started = time.monotonic()
        self._seq = 0
        self._sent_at: dict[tuple[str, str | int], float] = {}

    def record(self, direction: str, message: dict[str, Any]) -> None:
        """Report one message; pairs a response with its request to time it."""
        now = time.monotonic()
        self._seq += 1
        entry: dict[str, Any] = {
            "seq": self._seq,
            "direction": direction,
            "at_ms": round((now - self._started) * 1000, 1),
            "message": message,
        }
        msg_id = message.get("id")
        if isinstance(msg_id, (str, int)):
            if "method" in message:
                self._sent_at[(direction, msg_id)] = now
            else:
                # A response travels the other way from the request it answers.
                asked = self._sent_at.pop(("out" if direction == "in" else "in", msg_id), None)
                if asked is not None:
                    entry["elapsed_ms"] = round((now - asked) * 1000, 1)
        self._on_message(entry)

    async def connect(self, events: TransportEvents) -> None:
        await self.inner.connect(_ObservedEvents(events, self))

    async def send(self, outgoing: Outgoing) -> None:
        self.record("out", outgoing.message)
        await self.inner.send(outgoing)

    def send_nowait(self, outgoing: Outgoing) -> bool:
        sent = self.inner.send_nowait(outgoing)
        if sent:
            self.record("out", outgoing.message)
        return sent

    async def cancel(self, request_id: str | int, reason: str | None = None) -> None:
        await self.inner.cancel(request_id, reason)

    async def close(self) -> None:
        await self.inner.close()

    def end_handshake_session(self) -> None:
        self.inner.end_handshake_session()

    def diagnostics(self) -> str:
        return self.inner.diagnostics()

    @property
    def credential_key(self) -> str | None:
        return self.inner.credential_key
