"""The inspector's web side: a Starlette app on loopback, guarded by a token.

Every path starts with ``/<token>/`` (the page's own relative URLs keep it, so the ES
modules, the JSON API and the event stream all carry it); anything else is 403. The
``Host`` header must name the loopback address and port we listen on (DNS rebinding),
and an ``Origin``, when a browser sends one, must be this page's own origin: a web page
elsewhere can neither read nor drive the inspector.

API (JSON in, JSON out, under ``/<token>/api/``): ``GET events`` (Server-Sent Events:
a ``snapshot``, then ``message``, ``status``, ``lists``, ``progress``, ``elicitation``,
``elicitation_done``, ``notice``), ``POST call``, ``read``, ``prompt``, ``elicitation``,
``reconnect``, ``refresh``; for MCP Apps views, ``view`` (open a tool's view),
``app-call`` and ``app-read`` (a view's requests, checked in ``_views``).

The one path outside the token: ``GET /apps/<view id>``, a view's document, with its
own policy instead of the page's (``_views.view_policy``); the id is random and known
only to the page that opened it, and the view's URL never holds the token.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._session import InspectorSession
from ._views import view_policy

__all__ = ["build_app"]

STATIC = Path(__file__).parent / "static"
#: Where views (MCP Apps) are served, outside the token (see the module's docstring).
VIEW_PREFIX = "/apps/"
BODY_LIMIT = 1_000_000
#: A comment line on an idle stream, so a dead page is noticed and proxies keep it open.
KEEPALIVE_SECONDS = 15.0


#: Sent with every answer. The page shows what a server sends (text, names, URLs, media):
#: scripts only from the page's own modules (a ``javascript:`` URL a server names does not
#: run), media only from ``data:`` URLs, no framing, and no ``Referer`` that would carry
#: the token in the URL's path to a site a link leads to.
PAGE_POLICY: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"media-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        b"form-action 'none'; frame-ancestors 'none'",
    ),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
)


def _with_page_policy(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *PAGE_POLICY]}
        await send(message)

    return sending


class LoopbackGuard:
    """Refuses (403) a request without the token, for another host, or from another origin."""

    def __init__(self, app: ASGIApp, *, token: str, port: int) -> None:
        self.app = app
        self.prefix = f"/{token}"
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{host}" for host in self.hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        view = scope["path"].startswith(VIEW_PREFIX)
        problem = self._problem(scope, view)
        if problem is not None:
            await PlainTextResponse(problem, status_code=403)(scope, receive, send)
            return
        # A view's document carries its own policy (its route sets it), never the page's.
        await self.app(scope, receive, send if view else _with_page_policy(send))

    def _problem(self, scope: Scope, view: bool) -> str | None:
        path: str = scope["path"]
        first = "/" + path.lstrip("/").split("/", 1)[0]
        if view:
            if scope["method"] != "GET":
                return "forbidden: a view is only read"
        elif not hmac.compare_digest(first.encode(), self.prefix.encode()):
            return "forbidden: open the URL the inspector printed (it carries the access token)"
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        if headers.get("host") not in self.hosts:
            return "forbidden: the inspector answers only to 127.0.0.1 and localhost"
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            return f"forbidden: requests from origin {origin} are refused"
        return None


class _Json(JSONResponse):
    """A JSON answer rendered as the protocol's messages are (msgspec): a result as
    deeply nested as a server may send (msgspec decoded it) never fails to render,
    where ``json.dumps`` ran out of recursion first."""

    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)


async def _json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object; ``ValueError`` saying what is wrong with it. Parsed as
    the protocol parses messages: strict JSON (no NaN, no lone surrogates, numbers a
    float can hold) nested at most about 1,000 levels; ``json.loads`` raised
    RecursionError (a 500) on 100,000 ``[``."""
    if request.headers.get("content-type", "").split(";")[0] != "application/json":
        raise ValueError("send the body as application/json")
    body = await request.body()
    if len(body) > BODY_LIMIT:
        raise ValueError(f"body over {BODY_LIMIT} bytes")
    try:
        value = msgspec.json.decode(body or b"{}")
    except msgspec.DecodeError as exc:
        raise ValueError(f"the body is not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError("the body is JSON nested too deeply (about 1,000 levels at most)") from None
    if not isinstance(value, dict):
        raise ValueError("the body must be a JSON object")
    return value


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise ValueError(f"{name!r} must be a string")
    return value


def _object(body: dict[str, Any], name: str) -> dict[str, Any]:
    """``body[name]``, an object; absent or null is an empty one."""
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name!r} must be an object")
    return value


def _prompt_arguments(body: dict[str, Any]) -> dict[str, str]:
    """A prompt's arguments: strings (MCP's ``GetPromptRequest``); numbers and booleans
    the page's form may give are sent as their text, objects and arrays are refused."""
    arguments: dict[str, str] = {}
    for key, value in _object(body, "arguments").items():
        if isinstance(value, (dict, list)) or value is None:
            raise ValueError(f"prompt argument {key!r} must be a string, not {_kind(value)}")
        arguments[key] = value if isinstance(value, str) else json.dumps(value)
    return arguments


def _kind(value: Any) -> str:
    return "null" if value is None else "an array" if isinstance(value, list) else "an object"


def _routes(session: InspectorSession) -> list[Route | Mount]:
    async def index(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    events = _events(session)
    api = _api(session)

    async def post(request: Request) -> JSONResponse:
        handler = api.get(request.path_params["name"])
        if handler is None:
            return _Json({"error": {"kind": "local", "message": "no such API"}}, status_code=404)
        try:
            return _Json(await handler(await _json_body(request)))
        except (ValueError, KeyError, ConnectionError) as exc:
            message = f"no pending question or open view {exc}" if isinstance(exc, KeyError) else str(exc)
            return _Json({"error": {"kind": "local", "message": message}}, status_code=400)

    return [
        Route("/", index),
        Route("/api/events", events),
        Route("/api/{name}", post, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]


def _events(session: InspectorSession) -> Callable[[Request], Awaitable[StreamingResponse]]:
    """``GET /api/events``: what the session records, as Server-Sent Events (keepalives between)."""

    async def events(request: Request) -> StreamingResponse:
        queue = session.subscribe()

        async def stream() -> AsyncIterator[str]:
            try:
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    if event is None:
                        return
                    yield f"data: {msgspec.json.encode(event).decode()}\n\n"
            finally:
                session.unsubscribe(queue)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    return events


def _api(session: InspectorSession) -> dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]]:
    """``POST /api/<name>``: each name's handler, from the request's JSON body to the reply's."""

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        call_id = body.get("callId")
        if call_id is not None and not isinstance(call_id, (str, int)):
            raise ValueError("'callId' must be a string or a number")
        return await session.call_tool(_text(body, "name"), _object(body, "arguments"), str(call_id or ""))

    async def read(body: dict[str, Any]) -> dict[str, Any]:
        return await session.read_resource(_text(body, "uri"))

    async def prompt(body: dict[str, Any]) -> dict[str, Any]:
        return await session.get_prompt(_text(body, "name"), _prompt_arguments(body))

    async def elicitation(body: dict[str, Any]) -> dict[str, Any]:
        content = body.get("content")
        if content is not None and not isinstance(content, dict):
            raise ValueError("'content' must be an object")
        session.answer(_text(body, "id"), _text(body, "action"), content)
        return {"ok": True}

    async def reconnect(body: dict[str, Any]) -> dict[str, Any]:
        await session.start()
        return {"ok": True}

    async def refresh(body: dict[str, Any]) -> dict[str, Any]:
        await session.refresh()
        return {"ok": True}

    async def view(body: dict[str, Any]) -> dict[str, Any]:
        return await session.open_view(_text(body, "tool"))

    async def app_call(body: dict[str, Any]) -> dict[str, Any]:
        return await session.app_call(_text(body, "view"), _text(body, "name"), _object(body, "arguments"))

    async def app_read(body: dict[str, Any]) -> dict[str, Any]:
        return await session.app_read(_text(body, "view"), _text(body, "uri"))

    return {
        "call": call,
        "read": read,
        "prompt": prompt,
        "elicitation": elicitation,
        "reconnect": reconnect,
        "refresh": refresh,
        "view": view,
        "app-call": app_call,
        "app-read": app_read,
    }


def _view_route(session: InspectorSession, port: int) -> Route:
    page_origins = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]

    async def view_document(request: Request) -> Response:
        try:
            view = session.views.get(request.path_params["id"])
        except KeyError:
            return PlainTextResponse("no such view (it was closed, or the inspector reconnected)", status_code=404)
        headers = {
            "Content-Security-Policy": view_policy(view, page_origins),
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        }
        return Response(view.html, media_type="text/html; charset=utf-8", headers=headers)

    return Route(VIEW_PREFIX + "{id}", view_document)


def build_app(session: InspectorSession, *, token: str, port: int) -> ASGIApp:
    """The guarded ASGI app serving the page and its API for ``session``."""
    inner = Starlette(routes=_routes(session))
    outer = Starlette(routes=[_view_route(session, port), Mount(f"/{token}", app=inner)])
    return LoopbackGuard(outer, token=token, port=port)
