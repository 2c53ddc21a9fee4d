"""Calling the API: one operation's arguments into one HTTP request, its answer into a result.

The request goes to ``base_url`` and nowhere else: the path is the spec's path with each
path argument percent-encoded as one segment (``/`` is ``%2F``, a value of dots is
``%2E``, an empty value is refused), so no argument can change which endpoint is called,
and the URL is checked once built to be the one intended. A spec's ``servers`` entries are
never followed. Configured headers win over header arguments, so a model cannot replace
the credentials the author set. Redirects are not followed. Answers are read as a stream
and bounded: an error answer's body is quoted up to ``ERROR_BODY_BYTES``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ...errors import ToolError
from ._operations import Argument, Operation

__all__ = ["DEFAULT_TIMEOUT", "ERROR_BODY_BYTES", "Caller", "Failure"]

log = logging.getLogger("modelctx.server.openapi")

ERROR_BODY_BYTES = 2048
DEFAULT_TIMEOUT = 30.0  # seconds, for a client of our own (a client given keeps its own)
MAX_ANSWER_BYTES = 8 * 1024 * 1024


class Failure(ToolError):
    """The API answered outside 2xx, or could not be reached; the text says which."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Caller:
    """Sends requests for operations to one base URL, through one ``httpx.AsyncClient``.

    A client given is used as is and never closed here; without one, ``make_client()`` (a
    plain ``httpx.AsyncClient`` by default) makes one on first use in each event loop, and
    ``aclose`` (the server's lifespan) closes it."""

    def __init__(
        self,
        base_url: str,
        *,
        client: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        make_client: Any = None,
    ) -> None:
        import httpx

        self._httpx = httpx
        base = httpx.URL(base_url)
        if base.scheme not in ("http", "https") or not base.host:
            raise ValueError(f"base_url must be an absolute http(s) URL, not {base_url!r}")
        self.base = base
        self._prefix = base.raw_path.split(b"?")[0].rstrip(b"/").decode("ascii")
        self._given = client
        self._owned: Any = None
        own_timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self._make = make_client or (lambda: httpx.AsyncClient(timeout=own_timeout, follow_redirects=False))
        self._loop: asyncio.AbstractEventLoop | None = None
        self.headers = dict(headers or {})
        self._fixed = {k.lower() for k in self.headers}
        self.timeout = timeout
        self.max_answer_bytes = max_answer_bytes

    def _client(self) -> Any:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        if self._owned is None or self._loop is not loop:
            # A client's pool belongs to the loop it first ran in (a test, a second run()).
            self._owned = self._make()
            self._loop = loop
        return self._owned

    async def aclose(self) -> None:
        owned, self._owned = self._owned, None
        if owned is not None:
            await owned.aclose()

    def request(self, operation: Operation, arguments: Mapping[str, Any]) -> Any:
        """The ``httpx.Request`` for one call. Raises ``ToolError`` for a path argument
        that cannot be one segment, or a URL that came out other than intended."""
        path = self._path(operation, arguments)
        query: list[tuple[str, str]] = []
        headers: dict[str, str] = {}
        fields: dict[str, Any] = {}
        body: Any = _UNSET
        for argument in operation.arguments:
            if argument.name not in arguments:
                continue
            value = arguments[argument.name]
            if argument.location == "query":
                query.extend(_query_pairs(argument, value))
            elif argument.location == "header":
                if argument.wire.lower() not in self._fixed:
                    header = _text(value) if not argument.as_json else json.dumps(value)
                    if any(c in header for c in "\r\n\0"):
                        raise ToolError(f"{operation.name}: the header argument {argument.name!r} holds a line break")
                    headers[argument.wire] = header
            elif argument.location == "field":
                fields[argument.wire] = value
            elif argument.location == "body":
                body = value
        headers.update(self.headers)
        if fields:
            body = fields
        url = self.base.copy_with(raw_path=(self._prefix + path).encode("ascii"), query=None)
        content, kind = _encode_body(operation.body_type, body)
        if kind:
            headers["Content-Type"] = kind
        if not any(k.lower() == "accept" for k in headers):
            headers["Accept"] = "application/json"
        request = self._client().build_request(
            operation.method, url, params=query or None, headers=headers, content=content,
            timeout=self._httpx.USE_CLIENT_DEFAULT if self.timeout is None else self.timeout,
        )
        sent = request.url
        if (sent.scheme, sent.host, sent.port) != (self.base.scheme, self.base.host, self.base.port) or (
            sent.raw_path.split(b"?")[0] != (self._prefix + path).encode("ascii")
        ):
            raise ToolError(f"{operation.name}: the request URL came out other than {operation.path}; not sent")
        return request

    def _path(self, operation: Operation, arguments: Mapping[str, Any]) -> str:
        values = {a.wire: a for a in operation.arguments if a.location == "path"}

        def segment(match: re.Match[str]) -> str:
            argument = values[match.group(1)]
            if argument.name not in arguments:
                raise ToolError(f"{operation.name}: missing the path argument {argument.name!r}")
            text = _text(arguments[argument.name])
            if text == "":
                raise ToolError(f"{operation.name}: the path argument {argument.name!r} is empty")
            encoded = quote(text, safe="")
            # "." and ".." are dot segments a URL normalizer would remove: encode them.
            return encoded.replace(".", "%2E") if set(text) == {"."} else encoded

        # The spec's own text between variables is a path already: only what is not
        # allowed in one (a space, a non-ASCII letter) is encoded.
        parts = re.split(r"(\{[^}]+\})", operation.path)
        return "".join(
            re.sub(r"\{([^}]+)\}", segment, part) if i % 2 else quote(part, safe=_PATH_SAFE)
            for i, part in enumerate(parts)
        )

    async def call(self, operation: Operation, arguments: Mapping[str, Any]) -> tuple[Any, str, bytes]:
        """Send the call; the 2xx answer as (response, media type, body).

        Raises ``Failure`` (non-2xx, unreachable, too large) and ``ToolError``."""
        httpx = self._httpx
        request = self.request(operation, arguments)
        what = f"{operation.method} {operation.path}"
        try:
            response = await self._client().send(request, stream=True)
        except httpx.TimeoutException:
            limit = (request.extensions.get("timeout") or {}).get("read")
            within = f" within {limit:g} s" if isinstance(limit, (int, float)) else ""
            raise Failure(f"{what}: the API did not answer{within}") from None
        except httpx.HTTPError as exc:
            log.warning("OpenAPI %s: %s", what, exc)
            raise Failure(f"{what}: could not reach the API ({type(exc).__name__})") from None
        try:
            ok = 200 <= response.status_code < 300
            limit = self.max_answer_bytes if ok else ERROR_BODY_BYTES
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    if ok:
                        raise Failure(f"{what}: the answer is over {limit:,} bytes")
                    break
        except httpx.HTTPError as exc:
            raise Failure(f"{what}: the answer broke off ({type(exc).__name__})") from None
        finally:
            await response.aclose()
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if not ok:
            raise Failure(_failure_text(what, response, bytes(body[:ERROR_BODY_BYTES]), len(body) > ERROR_BODY_BYTES),
                          response.status_code)
        return response, media, bytes(body)


_UNSET: Any = object()
_PATH_SAFE = "/!$&'()*+,;=:@-._~%"  # RFC 3986 pchar and "/", with "%" left as the spec wrote it


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _query_pairs(argument: Argument, value: Any) -> list[tuple[str, str]]:
    """A query parameter as (name, value) pairs, by its style (OpenAPI Parameter Object)."""
    if argument.as_json:
        return [(argument.wire, json.dumps(value, separators=(",", ":")))]
    if isinstance(value, list):
        if argument.explode:
            return [(argument.wire, _text(v)) for v in value]
        joiner = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(argument.style, ",")
        return [(argument.wire, joiner.join(_text(v) for v in value))]
    if isinstance(value, dict):
        if argument.style == "deepObject":
            return [(f"{argument.wire}[{k}]", _text(v)) for k, v in value.items()]
        if argument.explode:
            return [(str(k), _text(v)) for k, v in value.items()]
        return [(argument.wire, ",".join(f"{k},{_text(v)}" for k, v in value.items()))]
    return [(argument.wire, _text(value))]


def _encode_body(media: str | None, body: Any) -> tuple[bytes | None, str | None]:
    if body is _UNSET or media is None:
        return None, None
    if media == "application/json" or media.endswith("+json"):
        return json.dumps(body, separators=(",", ":")).encode(), media
    if media == "application/x-www-form-urlencoded" and isinstance(body, dict):
        from urllib.parse import urlencode

        return urlencode({k: _text(v) for k, v in body.items()}).encode(), media
    if isinstance(body, str):
        return body.encode(), media
    return json.dumps(body, separators=(",", ":")).encode(), "application/json"


def _failure_text(what: str, response: Any, body: bytes, cut: bool) -> str:
    reason = response.reason_phrase or ""
    text = body.decode("utf-8", errors="replace").strip()
    more = " ..." if cut else ""
    shown = f": {text}{more}" if text else ""
    return f"{what} answered {response.status_code} {reason}".rstrip() + shown
