"""Framing on byte streams: newline-delimited JSON (stdio) and Server-Sent Events (HTTP).

stdio (basic/transports/stdio.mdx): one message per line, no embedded newlines. JSON
encoders escape newlines inside strings, so an encoded message never contains one.

SSE (the HTML living standard's event stream): lines end with CRLF, LF or a lone CR;
``data:`` lines make up an event that a blank line ends; a line starting with ``:`` is
a comment (keep-alive) and is ignored.

Both parsers bound what a peer can make them hold: a line (stdio) or an event (SSE)
past the limit raises a ``ValueError`` subclass and is dropped, never buffered. Both
return lists, so a caller that stops early never sees a line twice.

``response_id`` reads the id of a response that could not be decoded (nested too
deeply, or cut short), so a client can fail that one request instead of waiting.
"""

from __future__ import annotations

import re

import msgspec

__all__ = [
    "SSE_KEEPALIVE",
    "EventTooLarge",
    "LineBuffer",
    "LineTooLong",
    "SSEParser",
    "request_id",
    "response_id",
    "sse_event",
]

SSE_KEEPALIVE = b": keep-alive\n\n"
MAX_FRAME = 16 * 1024 * 1024  # default bound of one stdio line or one SSE event
_HEAD = 16 * 1024  # bytes of a dropped line kept (enough to read its id), and scanned by response_id


def sse_event(data: bytes, event: bytes = b"message") -> bytes:
    """One SSE event carrying one encoded JSON message."""
    return b"event: " + event + b"\ndata: " + data + b"\n\n"


class LineTooLong(ValueError):
    """A line grew past the limit without a newline; the buffer drops it up to its newline.

    ``lines``: the complete lines that came before it in the same ``feed`` (handle them
    first); ``head``: the first bytes of the dropped line (for ``response_id``).
    """

    def __init__(self, message: str, lines: list[bytes], head: bytes) -> None:
        super().__init__(message)
        self.lines = lines
        self.head = head


class LineBuffer:
    """Splits a byte stream into lines at ``\\n``, holding back a partial last line.

    ``max_line`` bounds memory: a longer line raises ``LineTooLong`` once and is
    skipped up to its newline, so one bad peer frame cannot grow memory without bound
    and the lines after it are read as usual.
    """

    def __init__(self, max_line: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_line
        self._skipping = False  # inside a line that was too long: drop up to its newline

    def feed(self, data: bytes) -> list[bytes]:
        """The lines completed by ``data``, without their newlines."""
        if not self._buf and not self._skipping and data.find(b"\n") == len(data) - 1 >= 0:
            return [data[:-1]]  # one whole line and nothing held back: the common case
        if self._skipping:
            end = data.find(b"\n")
            if end < 0:
                return []
            self._skipping = False
            data = data[end + 1 :]
        buf = self._buf
        buf += data
        lines: list[bytes] = []
        if b"\n" in data:
            *lines, rest = bytes(buf).split(b"\n")
            buf[:] = rest
        if len(buf) > self._max:
            head = bytes(buf[:_HEAD])
            buf.clear()
            self._skipping = True
            raise LineTooLong(f"a line exceeded {self._max} bytes without a newline", lines, head)
        return lines

    def tail(self) -> bytes:
        """What is left after the stream ended (a last line with no newline)."""
        rest = b"" if self._skipping else bytes(self._buf)
        self._buf.clear()
        self._skipping = False
        return rest


class EventTooLarge(ValueError):
    """An SSE event grew past the limit before its blank line; the parser dropped it.

    ``events``: the complete events that came before it in the same ``feed``. The
    stream cannot be trusted to frame what follows: stop reading it.
    """

    def __init__(self, message: str, events: list[tuple[str, bytes]]) -> None:
        super().__init__(message)
        self.events = events


class SSEParser:
    """Incremental SSE parser: feed bytes, get ``(event, data)`` pairs.

    It also keeps what 2025-11-25 resumability needs (2026-07-28 has none): the last
    event id (set when an event is dispatched, even one without data such as a
    priming event; an empty ``id`` clears it) and the ``retry`` time, following the
    HTML standard's rules. ``dispatched`` counts events, with or without data.
    ``max_event`` bounds the bytes of one event (its lines, as received).
    """

    def __init__(self, max_event: int = MAX_FRAME) -> None:
        self._max = max_event
        self._buf = bytearray()  # the partial last line (never holds a CR)
        self._after_cr = False  # the last chunk ended with CR: a leading LF is its CRLF
        self._size = 0  # bytes of the event so far
        self._data: list[bytes] = []
        self._event = b""
        self._id: str | None = None
        self.last_id: str | None = None
        self.retry_ms: int | None = None
        self.dispatched = 0

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        """The events completed by ``chunk``; ``EventTooLarge`` past ``max_event``."""
        if self._after_cr:
            self._after_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not chunk:
            return []
        self._after_cr = chunk[-1:] == b"\r"
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        buf += chunk
        events: list[tuple[str, bytes]] = []
        if b"\n" in chunk:
            *lines, rest = bytes(buf).split(b"\n")
            buf[:] = rest
            for line in lines:
                self._size += len(line) + 1
                if self._size > self._max:
                    break
                self._line(line, events)
        if self._size + len(buf) > self._max:
            self._drop()
            raise EventTooLarge(f"an SSE event exceeded {self._max} bytes", events)
        return events

    def end_of_stream(self) -> None:
        """The connection ended: an event it left incomplete is never dispatched (HTML
        standard, "If the file ends in the middle of an event... the incomplete event is
        not dispatched"), and an ``id`` seen in it is forgotten, so a reconnection with
        ``last_id`` resumes after the last whole event."""
        self._drop()
        self._after_cr = False
        self._id = self.last_id

    def _drop(self) -> None:
        self._buf.clear()
        self._data, self._event, self._size = [], b"", 0

    def _line(self, line: bytes, events: list[tuple[str, bytes]]) -> None:
        if not line:
            if self._data or self._event or self._id != self.last_id:
                self.dispatched += 1
            self.last_id = self._id
            data, event = self._data, self._event
            self._data, self._event, self._size = [], b"", 0
            if data:
                events.append(((event or b"message").decode("utf-8", "replace"), b"\n".join(data)))
            return
        if line.startswith(b":"):
            return  # a comment: keep-alive
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


# A string, or one bracket. Everything else (numbers, literals, commas, colons,
# white space) is skipped by finditer.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_ID_VALUE = re.compile(rb'\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*[,}]')
_KEY_END = re.compile(rb"\s*:")


def response_id(frame: bytes) -> str | int | None:
    """The ``id`` of a JSON-RPC response that could not be decoded whole, or None.

    Reads the top level of the object in the first 16 KiB of ``frame`` without
    building it, so nesting of any depth costs no recursion. An id counts only once a
    top-level ``result`` or ``error`` key has been seen and no ``method``: a request
    from the peer reuses the number space of our own ids, and must never fail one.
    """
    found, method, answer = _top_level(frame)
    return found if answer and not method else None


def request_id(frame: bytes) -> str | int | None:
    """The ``id`` of a JSON-RPC request that could not be decoded whole (a line past the
    frame bound), or None: read like ``response_id``, it counts only beside a top-level
    ``method`` in the first 16 KiB and no ``result`` or ``error``, so the refusal can
    answer the very request (its sender stops waiting) and never a response."""
    found, method, answer = _top_level(frame)
    return found if method and not answer else None


def _top_level(frame: bytes) -> tuple[str | int | None, bool, bool]:
    """(the top-level ``id``, whether a top-level ``method`` key was seen, whether a
    ``result`` or ``error`` key was) in the first 16 KiB of ``frame``."""
    data = frame[:_HEAD]
    depth = 0
    found: str | int | None = None
    method = answer = False
    for match in _TOKEN.finditer(data):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
            if depth == 1 and token == b"[":
                return None, False, False  # a batch or garbage, not one message
        elif token in (b"}", b"]"):
            depth -= 1
            if depth <= 0:
                break
        elif depth == 1 and _KEY_END.match(data, match.end()):
            if token == b'"method"':
                method = True
            elif token in (b'"result"', b'"error"'):
                answer = True
            elif token == b'"id"' and (value := _ID_VALUE.match(data, match.end())):
                try:
                    decoded = msgspec.json.decode(value.group(1))
                except msgspec.DecodeError:
                    return None, method, answer
                found = decoded if isinstance(decoded, (str, int)) else None
    return found, method, answer
