"""JSON-RPC 2.0 messages: bytes in, a checked message out; a message in, bytes out.

MCP uses JSON-RPC 2.0 without batching (basic/index.mdx). A message is one of:

* ``Request``      ``{"jsonrpc":"2.0","id":…,"method":…,"params"?:{…}}``
* ``Notification`` ``{"jsonrpc":"2.0","method":…,"params"?:{…}}``
* ``Response``     ``{"jsonrpc":"2.0","id":…,"result":{…}}`` or ``…"error":{…}``

Decoding is one ``msgspec`` call to plain dicts followed by a shape check; messages
stay dicts on the hot path because a typed decode of every params shape would cost
more than it saves. ``decode`` raises ``ParseError`` or ``InvalidRequest`` with
``request_id`` set whenever the id could be read, so the caller can answer.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import msgspec

from ..errors import InvalidParams, InvalidRequest, ParseError, ProtocolError

__all__ = [
    "Request",
    "Notification",
    "Response",
    "Message",
    "decode",
    "from_object",
    "encode",
    "request",
    "notification",
    "result_response",
    "error_response",
    "is_request_id",
]

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
encode = _encoder.encode


class Request:
    """A request: it expects exactly one response with the same ``id``."""

    __slots__ = ("id", "method", "params")

    def __init__(self, id: str | int, method: str, params: dict[str, Any]) -> None:
        self.id = id
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"Request(id={self.id!r}, method={self.method!r})"


class Notification:
    """A notification: no id, never answered."""

    __slots__ = ("method", "params")

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"Notification(method={self.method!r})"


class Response:
    """A response: ``result`` or ``error`` (the JSON-RPC error object), never both."""

    __slots__ = ("id", "result", "error")

    def __init__(
        self, id: str | int | None, result: dict[str, Any] | None, error: dict[str, Any] | None
    ) -> None:
        self.id = id
        self.result = result
        self.error = error

    def __repr__(self) -> str:
        return f"Response(id={self.id!r}, {'error' if self.error is not None else 'result'})"


Message = Request | Notification | Response


def is_request_id(value: object) -> TypeGuard[str | int]:
    """Is ``value`` a JSON-RPC id MCP allows: a string or an integer (not null, not a bool)?"""
    # bool is an int subclass; JSON true is no id. null ids are forbidden (basic/index.mdx).
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def decode(data: bytes | str) -> Message:
    """Decode one JSON-RPC message; raise ``ProtocolError`` if it is not one."""
    try:
        obj = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ParseError(f"Parse error: the message is not valid JSON ({exc})") from None
    except RecursionError:
        # msgspec stops at its nesting limit (about 1,000 levels); the frame is lost,
        # the connection is not.
        raise ParseError("Parse error: the message is nested too deeply") from None
    return from_object(obj)


def decode_json(data: bytes | str) -> Any:
    """Decode a frame's JSON value, whatever it is (a 2025-03-26 batch is an array);
    raise ``ParseError`` if it is not JSON."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ParseError(f"Parse error: the message is not valid JSON ({exc})") from None
    except RecursionError:
        raise ParseError("Parse error: the message is nested too deeply") from None


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for errors a peer reads (``null``, not
    ``NoneType``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def from_object(obj: Any) -> Message:
    """Check the shape of an already-decoded JSON value."""
    if not isinstance(obj, dict):
        if isinstance(obj, list):
            raise InvalidRequest("Invalid Request: JSON-RPC batches are not supported by MCP")
        raise InvalidRequest(
            f"Invalid Request: a message must be a JSON object, got {json_type(obj)}"
        )
    msg_id = obj.get("id")
    has_id = "id" in obj
    if obj.get("jsonrpc") != "2.0":
        raise _with_id(InvalidRequest('Invalid Request: "jsonrpc" must be "2.0"'), msg_id)
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise _with_id(InvalidRequest('Invalid Request: "method" must be a string'), msg_id)
        params = obj.get("params")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            raise _with_id(
                InvalidParams(f'Invalid params: "params" of {method} must be an object'), msg_id
            )
        if not has_id:
            return Notification(method, params)
        if not is_request_id(msg_id):
            raise InvalidRequest('Invalid Request: "id" must be a string or an integer')
        return Request(msg_id, method, params)
    if "result" in obj or "error" in obj:
        result, error = obj.get("result"), obj.get("error")
        if (result is None) == (error is None):
            raise InvalidRequest("Invalid Request: a response has exactly one of result or error")
        if error is not None and not (isinstance(error, dict) and isinstance(error.get("code"), int)):
            raise InvalidRequest('Invalid Request: "error" must be an object with an integer code')
        if result is not None and not isinstance(result, dict):
            raise InvalidRequest('Invalid Request: "result" must be an object')
        return Response(msg_id if is_request_id(msg_id) else None, result, error)
    raise _with_id(InvalidRequest('Invalid Request: no "method", "result" or "error"'), msg_id)


def _with_id(exc: ProtocolError, msg_id: Any) -> ProtocolError:
    if is_request_id(msg_id):
        exc.request_id = msg_id
    return exc


def request(id: str | int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result_response(id: str | int, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error_response(id: str | int | None, error: ProtocolError) -> dict[str, Any]:
    """The response for ``error``; ``id`` is left out only when it could not be read."""
    msg: dict[str, Any] = {"jsonrpc": "2.0"}
    if id is not None:
        msg["id"] = id
    msg["error"] = error.to_error()
    return msg
