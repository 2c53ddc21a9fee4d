"""Framing on byte streams: newline-delimited JSON (stdio) and Server-Sent Events (HTTP).

stdio (basic/transports/stdio.mdx): one message per line, no embedded newlines. JSON
encoders escape newlines inside strings, so an encoded message never contains one.

SSE (the HTML living standard's event stream): ``data:`` lines end at a blank line; a
line starting with ``:`` is a comment (keep-alive) and is ignored.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["LineBuffer", "sse_event", "SSE_KEEPALIVE", "SSEParser"]

SSE_KEEPALIVE = b": keep-alive\n\n"


def sse_event(data: bytes, event: bytes = b"message") -> bytes:
    """One SSE event carrying one encoded JSON message."""
    return b"event: " + event + b"\ndata: " + data + b"\n\n"


class LineBuffer:
    """Splits a byte stream into lines, holding back a partial last line.

    ``max_line`` bounds memory: a longer line raises ``ValueError`` and the buffer is
    reset, so one bad peer frame cannot grow memory without bound.
    """

    def __init__(self, max_line: int = 16 * 1024 * 1024) -> None:
        self._buf = bytearray()
        self._max = max_line

    def feed(self, data: bytes) -> Iterator[bytes]:
        self._buf += data
        start = 0
        buf = self._buf
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            line = bytes(buf[start:end])
            start = end + 1
            yield line
        del buf[:start]
        if len(buf) > self._max:
            buf.clear()
            raise ValueError(f"a line exceeded {self._max} bytes without a newline")

    def tail(self) -> bytes:
        """What is left after the stream ended (a last line with no newline)."""
        rest = bytes(self._buf)
        self._buf.clear()
        return rest


class SSEParser:
    """Incremental SSE parser: feed bytes, get ``(event, data)`` pairs.

    It also keeps what 2025-11-25 resumability needs (2026-07-28 has none): the last
    event id (set when an event is dispatched, even one without data such as a
    priming event; an empty ``id`` clears it) and the ``retry`` time, following the
    HTML standard's rules. ``dispatched`` counts events, with or without data.
    """

    def __init__(self) -> None:
        self._lines = LineBuffer()
        self._data: list[bytes] = []
        self._event = b""
        self._id: str | None = None
        self.last_id: str | None = None
        self.retry_ms: int | None = None
        self.dispatched = 0

    def feed(self, chunk: bytes) -> Iterator[tuple[str, bytes]]:
        for raw in self._lines.feed(chunk):
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data or self._event or self._id != self.last_id:
                    self.dispatched += 1
                self.last_id = self._id
                data, event = self._data, self._event
                self._data, self._event = [], b""
                if data:
                    yield (event or b"message").decode("utf-8", "replace"), b"\n".join(data)
                continue
            if line.startswith(b":"):
                continue  # a comment: keep-alive
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                self._data.append(value)
            elif field == b"event":
                self._event = value
            elif field == b"id" and b"\0" not in value:
                self._id = value.decode("utf-8", "replace") or None
            elif field == b"retry" and value.isdigit():
                self.retry_ms = int(value)
