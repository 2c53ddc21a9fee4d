"""The browser step of the authorization code flow: open the authorization URL, and
receive the redirect back on a loopback port (RFC 8252 §7.3).

``open_in_browser`` opens only ``http(s)`` URLs, through ``webbrowser`` (which never
runs a shell): an authorization endpoint a server names must not become
``javascript:`` or ``file:`` in the user's browser. ``LoopbackReceiver`` listens on the
redirect URI's loopback address and port, answers the one request that carries the
expected ``state`` and refuses (400) any other, so a page that guesses the port cannot
inject a code of its own.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import logging
import sys
import urllib.parse
import webbrowser
from dataclasses import dataclass, field

from ..errors import AuthorizationError
from ._loopback import is_loopback_host

__all__ = ["AuthorizationResponse", "LoopbackReceiver", "open_in_browser"]

log = logging.getLogger("modelctx.auth")

_MAX_HEAD = 16 * 1024  # bytes of request line and headers read from a browser
_READ_WAIT = 10.0  # seconds a connection may take to send its request


@dataclass(frozen=True)
class AuthorizationResponse:
    """What the redirect carried: ``code`` (out of ``repr``), ``state``, and ``iss``
    (RFC 9207) when the authorization server sent one."""

    code: str = field(repr=False)
    state: str | None
    iss: str | None = None

    @classmethod
    def from_url(cls, url: str) -> AuthorizationResponse:
        """Read a redirect URL's query; an ``error`` there raises ``AuthorizationError``."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        return cls.from_query({k: v[0] for k, v in query.items() if v})

    @classmethod
    def from_query(cls, query: dict[str, str]) -> AuthorizationResponse:
        if "error" in query:
            description = query.get("error_description", "")
            raise AuthorizationError(
                f"the authorization server refused: {query['error'][:100]}"
                + (f" ({description[:300]})" if description else "")
            )
        code = query.get("code")
        if not code:
            raise AuthorizationError("the authorization response carries no code; start the authorization again")
        return cls(code, query.get("state"), query.get("iss"))


async def open_in_browser(url: str) -> None:
    """Open ``url`` in the system browser; only ``http://`` and ``https://`` URLs."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise AuthorizationError(
            f"refusing to open a {scheme or 'scheme-less'}: URL in the browser; an authorization "
            "endpoint must be an http(s) URL"
        )
    opened = await asyncio.to_thread(webbrowser.open, url)
    if not opened:
        # No browser here (a server, a container): the user can still open it by hand.
        # stderr: stdout may be an MCP stdio stream (a gateway serving on stdio).
        print(f"Open this URL in a browser to authorize:\n{url}", file=sys.stderr, flush=True)


class LoopbackReceiver:
    """Receives the authorization redirect at ``redirect_uri`` (an ``http://`` loopback
    URL: ``127.0.0.1``, ``[::1]`` or ``localhost``; port 0 picks a free one, and then
    ``redirect_uri`` names it once ``start`` returned).

    ``async with LoopbackReceiver(uri) as receiver: ... await receiver.wait(state, 300)``.
    """

    def __init__(self, redirect_uri: str) -> None:
        parts = urllib.parse.urlsplit(redirect_uri)
        host = parts.hostname or ""
        if parts.scheme != "http" or not is_loopback_host(host):
            raise ValueError(
                f"the loopback receiver needs an http:// loopback redirect URI, not {redirect_uri!r}; "
                "with another redirect URI, pass your own callback_handler"
            )
        self._host = "127.0.0.1" if host == "localhost" else host
        self._port = parts.port or 80
        self._path = parts.path or "/"
        self._shown_host = parts.netloc.rsplit(":", 1)[0] if parts.port else parts.netloc
        self.redirect_uri = redirect_uri
        self._server: asyncio.Server | None = None
        self._expected: str | None = None
        self._result: asyncio.Future[AuthorizationResponse] | None = None

    async def __aenter__(self) -> LoopbackReceiver:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Listen (before the browser is sent to the authorization server)."""
        self._result = asyncio.get_running_loop().create_future()
        try:
            self._server = await asyncio.start_server(self._serve, self._host, self._port)
        except OSError as exc:
            raise AuthorizationError(
                f"cannot receive the authorization redirect at {self.redirect_uri}: {exc.strerror or exc}; "
                "another program holds that port: give the client another redirect URI "
                "(ClientMetadata(redirect_uris=('http://127.0.0.1:PORT/callback',)), or redirectPort in a host "
                "configuration)"
            ) from None
        if self._port == 0:
            self._port = self._server.sockets[0].getsockname()[1]
            self.redirect_uri = f"http://{self._shown_host}:{self._port}{self._path}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def expect(self, state: str) -> None:
        """Accept only a response carrying ``state`` (call before the browser is sent)."""
        self._expected = state

    async def wait(self, state: str, timeout: float) -> AuthorizationResponse:
        """The response carrying ``state``; ``AuthorizationError`` after ``timeout`` seconds."""
        if self._result is None:
            raise RuntimeError("start the receiver before waiting on it")
        self.expect(state)
        try:
            return await asyncio.wait_for(asyncio.shield(self._result), timeout)
        except TimeoutError:
            raise AuthorizationError(
                f"no authorization response reached {self.redirect_uri} within {timeout:g}s; "
                "finish signing in in the browser, or try again"
            ) from None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_WAIT)
            status, message = self._handle(head[:_MAX_HEAD].decode("latin-1"))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            status, message = 400, "Bad request."
        body = f"<!doctype html><title>modelctx</title><p>{html.escape(message)}</p>".encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
        try:
            writer.write(
                f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\ncache-control: no-store\r\n\r\n".encode()
                + body
            )
            await asyncio.wait_for(writer.drain(), _READ_WAIT)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            writer.close()

    def _handle(self, head: str) -> tuple[int, str]:
        request_line = head.split("\r\n", 1)[0].split(" ")
        if len(request_line) != 3 or request_line[0] != "GET":
            return 400, "Bad request."
        target = urllib.parse.urlsplit(request_line[1])
        if target.path != self._path:
            return 404, "Not found."
        query = {k: v[0] for k, v in urllib.parse.parse_qs(target.query).items() if v}
        state = query.get("state", "")
        expected = self._expected
        if expected is None or not hmac.compare_digest(state.encode(), expected.encode()):
            # Not the response to our request: refuse it and keep waiting for the right one.
            log.warning("authorization redirect with an unexpected state refused")
            return 400, "This authorization response does not match the request in progress."
        result = self._result
        if result is None or result.done():
            return 400, "This authorization was already completed."
        try:
            result.set_result(AuthorizationResponse.from_query(query))
        except AuthorizationError as exc:
            result.set_exception(exc)
            return 400, "Authorization failed; see the application for details."
        return 200, "Authorization complete. You can close this window."


