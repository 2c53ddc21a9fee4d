"""Running the inspector: the transport for a target, the web server, ``dev``'s reloads."""

from __future__ import annotations

import asyncio
import secrets
import shlex
import socket
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvicorn

from ..client import ClientTransport
from ._app import build_app
from ._session import InspectorSession, TransportFactory

__all__ = ["serve_inspector", "transport_factory", "watch_and_restart"]


def transport_factory(target: str | None, stdio: str | None) -> TransportFactory:
    """How to reach the server: an ``http(s)://`` URL, a ``--stdio`` command line, or a
    server file / ``module:obj`` run as ``python -m modelctx serve TARGET`` on stdio."""
    if stdio is not None:
        argv = shlex.split(stdio)
        if not argv:
            raise ValueError("--stdio needs a command line, e.g. --stdio 'python server.py'")
    elif target is None:
        raise ValueError("give a TARGET (URL, server file or module:obj) or --stdio 'COMMAND'")
    elif target.startswith(("http://", "https://")):
        url = target

        def http() -> ClientTransport:
            from ..transports.http_client import HttpClientTransport

            return HttpClientTransport(url)

        return http
    else:
        argv = [sys.executable, "-m", "modelctx", "serve", target]

    def stdio_process() -> ClientTransport:
        from ..transports.stdio_client import StdioClientTransport

        return StdioClientTransport(argv)

    return stdio_process


def _loopback_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}; pick another --port (0 = any)") from exc
    sock.listen(64)
    sock.setblocking(False)
    return sock


async def serve_inspector(
    session: InspectorSession,
    *,
    port: int = 0,
    open_browser: bool = True,
    announce: Callable[[str], None] = print,
    background: Callable[[InspectorSession], Awaitable[None]] | None = None,
) -> None:
    """Serve the page for ``session`` on 127.0.0.1 until interrupted (SIGINT/SIGTERM).

    ``announce`` gets the URL (with its token) as soon as the port is open; the session
    connects meanwhile. ``background`` runs beside the server (``dev``'s file watcher).
    """
    sock = _loopback_socket(port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    url = f"http://127.0.0.1:{bound}/{token}/"
    config = uvicorn.Config(
        build_app(session, token=token, port=bound),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    announce(url)
    tasks = [asyncio.create_task(session.start())]
    if background is not None:
        tasks.append(asyncio.create_task(background(session)))
    if open_browser:
        # webbrowser may block while it starts a browser: keep it off the event loop.
        tasks.append(asyncio.create_task(asyncio.to_thread(webbrowser.open, url)))
    try:
        await server.serve(sockets=[sock])
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.stop()
        sock.close()


def _watched(path: Path) -> Callable[[object, str], bool]:
    """Python files in the server file's directory (editors often replace the file)."""

    def accept(change: object, changed: str) -> bool:
        return changed.endswith(".py") and Path(changed).parent == path.parent

    return accept


async def watch_and_restart(path: Path, session: InspectorSession) -> None:
    """Restart the server each time ``path`` (or a sibling module) changes."""
    import watchfiles

    async for changes in watchfiles.awatch(path.parent, watch_filter=_watched(path), recursive=False, debounce=300):
        names = sorted({Path(changed).name for _, changed in changes})
        session.publish({"type": "notice", "level": "info", "text": f"{', '.join(names)} changed: restarting"})
        await session.start()
