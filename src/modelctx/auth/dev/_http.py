"""HTTP plumbing of the development authorization server: bounded request bodies,
Authlib's replies as Starlette responses, the error page, the listening socket."""

from __future__ import annotations

import asyncio
import html
import json
import socket
from urllib.parse import parse_qsl

from joserfc import jws
from joserfc.errors import JoseError
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from ._consent import PAGE_HEADERS
from ._oauth import Reply

__all__ = ["NO_STORE", "bounded_body", "bounded_form", "error_page", "listen", "named_client", "to_response"]

MAX_BODY = 64 * 1024
BODY_TIMEOUT = 10.0
NO_STORE = {"Cache-Control": "no-store"}


def named_client(form: dict[str, str]) -> str | None:
    """The client a token request names: its ``client_id``, else the ``sub`` of its
    client assertion (RFC 7523 section 3), read unverified: it only says which metadata
    document to fetch; Authlib verifies the assertion against that document's keys."""
    if form.get("client_id"):
        return form["client_id"]
    try:
        claims = json.loads(jws.extract_compact(form.get("client_assertion", "").encode()).payload)
    except (JoseError, ValueError, RecursionError):
        return None
    sub = claims.get("sub") if isinstance(claims, dict) else None
    return sub if isinstance(sub, str) else None


def to_response(reply: Reply) -> Response:
    body = reply.body
    if isinstance(body, dict):
        body = json.dumps(body)
    headers = dict(reply.headers)
    return Response(body or b"", status_code=reply.status, headers=headers)


def error_page(status: int, error: str, description: str) -> Response:
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Authorization error</title></head>"
        f"<body><h1>{html.escape(error)}</h1><p>{html.escape(description)}</p></body></html>"
    )
    return HTMLResponse(page, status_code=status, headers=PAGE_HEADERS)


async def bounded_body(request: Request) -> bytes | Response:
    """The request body, at most ``MAX_BODY`` bytes within ``BODY_TIMEOUT`` seconds."""

    async def read() -> bytes | Response:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                return JSONResponse({"error": "invalid_request", "error_description": "The body is too large"}, 413)
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(read(), BODY_TIMEOUT)
    except TimeoutError:
        return JSONResponse({"error": "invalid_request", "error_description": "The body came too slowly"}, 408)


async def bounded_form(request: Request) -> list[tuple[str, str]] | Response:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/x-www-form-urlencoded":
        return JSONResponse(
            {"error": "invalid_request", "error_description": "Send application/x-www-form-urlencoded"}, 400, NO_STORE
        )
    raw = await bounded_body(request)
    if isinstance(raw, Response):
        return raw
    try:
        return parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return JSONResponse({"error": "invalid_request", "error_description": "The body is not UTF-8"}, 400)


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        raise SystemExit(f"modelctx: cannot listen on {host}:{port}: {exc}; choose another port") from None
