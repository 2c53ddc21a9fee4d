"""``fetch_json``: a JSON document from a URL a server named, behind the SSRF guard;
``post_form`` and ``post_json``: a POST there whose JSON reply is read whatever its status
(an OAuth token or registration endpoint answers its errors in JSON, with 400).

For what the client fetches on its own on a server's word: the Protected Resource
Metadata a ``WWW-Authenticate`` header points to, the authorization servers that
document lists, their metadata (security_best_practices.mdx, "Server-Side Request
Forgery"). Every URL, the first and each redirect, passes the ``UrlPolicy`` before
anything connects to it (``transports/_url_guard.py``).

The one module of this package that the layers above (``client``, ``auth``) use to reach
a URL a peer named: the calls, and the guard's names they need (``UrlPolicy``, ``Zone``,
``trust_of``, ``check_scheme``), re-exported from ``_url_guard``.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from ..errors import ConnectionClosed, HttpStatusError, MalformedResponse, RequestTimeout, UrlRefused
from ._http11 import ConnectTimeout, HttpError, ReadTimeout, WriteTimeout
from ._http_requests import Http11Client
from ._url_guard import UrlPolicy, Zone, check_scheme, trust_of

__all__ = ["PostReply", "UrlPolicy", "Zone", "check_scheme", "fetch_json", "post_form", "post_json", "trust_of"]

_T = TypeVar("_T")

_EXCERPT = 200


async def fetch_json(
    url: str,
    policy: UrlPolicy | None = None,
    *,
    timeout: float = 10.0,
    max_bytes: int = 1024 * 1024,
    headers: dict[str, str] | None = None,
) -> Any:
    """GET ``url`` and return its JSON body, decoded.

    ``policy`` (default ``UrlPolicy()``: https to public addresses only) is applied to
    ``url`` and to every redirect before connecting; ``timeout`` bounds the whole fetch,
    redirects included; a body over ``max_bytes`` is refused without being read whole.

    Raises ``UrlRefused`` (the policy refused a URL: nothing was sent to it),
    ``RequestTimeout``, ``ConnectionClosed`` (the network failed), ``HttpStatusError``
    (a status other than 2xx) or ``MalformedResponse`` (not JSON, or too large).
    """
    return await _guarded(
        "GET", url, policy, timeout, {}, headers,
        lambda http, request_headers: _fetch(http, url, request_headers, timeout, max_bytes),
    )  # fmt: skip


async def _guarded(
    method: str,
    url: str,
    policy: UrlPolicy | None,
    timeout: float,
    base_headers: Mapping[str, str],
    headers: Mapping[str, str] | None,
    exchange: Callable[[Http11Client, dict[str, str]], Awaitable[_T]],
) -> _T:
    """Run ``exchange`` on a one-use client behind ``policy`` (default ``UrlPolicy()``)
    with the request headers (ours, ``base_headers``, then the caller's), bounded as a
    whole by ``timeout``; the transport's failures become our errors."""
    policy = policy if policy is not None else UrlPolicy()
    check_scheme(url)
    request_headers = {"accept": "application/json", "user-agent": "modelctx", **base_headers}
    request_headers.update({k.lower(): v for k, v in (headers or {}).items()})
    http = Http11Client(max_idle=0, url_policy=policy)
    try:
        return await asyncio.wait_for(exchange(http, request_headers), timeout)
    except (TimeoutError, ConnectTimeout, ReadTimeout, WriteTimeout):
        # The whole exchange and each of its steps share one bound: whichever notices first.
        raise RequestTimeout(f"{method} {url} took longer than {timeout:g}s") from None
    except UrlRefused:
        raise
    except HttpError as exc:
        raise ConnectionClosed(f"{method} {url} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        http.close()


async def _fetch(http: Http11Client, url: str, headers: dict[str, str], timeout: float, max_bytes: int) -> Any:
    response = await http.request(
        "GET", url, headers, connect_timeout=timeout, read_timeout=timeout, write_timeout=timeout, check_first=True
    )
    try:
        body = await response.read_at_most(max_bytes + 1)
        if not response.is_success:
            excerpt = body[:_EXCERPT].decode("utf-8", "replace")
            raise HttpStatusError(url, "GET", response.status_code, excerpt, response.headers)
        media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json" and not media_type.endswith("+json"):
            raise MalformedResponse(f"GET {url}: the reply is {media_type or 'untyped'}, not application/json")
        if len(body) > max_bytes:
            raise MalformedResponse(f"GET {url}: the reply is larger than {max_bytes} bytes")
        try:
            return msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            raise MalformedResponse(f"GET {url}: the reply is not JSON: {exc}") from None
        except RecursionError:  # msgspec's nesting limit (about 1,000 levels)
            raise MalformedResponse(f"GET {url}: the reply is JSON nested too deeply") from None
    finally:
        response.release()


@dataclass(frozen=True)
class PostReply:
    """What a POST got back: the status, the headers, and the body decoded from JSON
    (``None`` when it was not JSON). ``repr`` leaves out the body: it may hold tokens."""

    status: int
    headers: Mapping[str, str]
    data: Any = field(repr=False)


async def post_form(
    url: str,
    fields: Mapping[str, str],
    policy: UrlPolicy | None = None,
    *,
    timeout: float = 10.0,
    max_bytes: int = 1024 * 1024,
    headers: Mapping[str, str] | None = None,
) -> PostReply:
    """POST ``fields`` as ``application/x-www-form-urlencoded`` to ``url``; the reply.

    The same guard, bounds and errors as ``fetch_json``, except that a status other
    than 2xx is returned, not raised (the caller reads the error the body names)."""
    body = urllib.parse.urlencode(dict(fields)).encode("ascii")
    return await _post(url, body, "application/x-www-form-urlencoded", policy, timeout, max_bytes, headers)


async def post_json(
    url: str,
    document: Any,
    policy: UrlPolicy | None = None,
    *,
    timeout: float = 10.0,
    max_bytes: int = 1024 * 1024,
    headers: Mapping[str, str] | None = None,
) -> PostReply:
    """POST ``document`` as JSON to ``url``; the reply (see ``post_form``)."""
    return await _post(url, msgspec.json.encode(document), "application/json", policy, timeout, max_bytes, headers)


async def _post(
    url: str,
    body: bytes,
    content_type: str,
    policy: UrlPolicy | None,
    timeout: float,
    max_bytes: int,
    headers: Mapping[str, str] | None,
) -> PostReply:
    return await _guarded(
        "POST", url, policy, timeout, {"content-type": content_type}, headers,
        lambda http, request_headers: _send(http, url, body, request_headers, timeout, max_bytes),
    )  # fmt: skip


async def _send(
    http: Http11Client, url: str, body: bytes, headers: dict[str, str], timeout: float, max_bytes: int
) -> PostReply:
    response = await http.request(
        "POST", url, headers, body, connect_timeout=timeout, read_timeout=timeout, write_timeout=timeout,
        check_first=True,
    )
    try:
        content = await response.read_at_most(max_bytes + 1)
        if len(content) > max_bytes:
            raise MalformedResponse(f"POST {url}: the reply is larger than {max_bytes} bytes")
        try:
            data = msgspec.json.decode(content) if content else None
        except (msgspec.DecodeError, RecursionError):
            data = None
        return PostReply(response.status_code, dict(response.headers), data)
    finally:
        response.release()
