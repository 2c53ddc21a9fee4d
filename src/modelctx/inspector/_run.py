"""Running the inspector: the web server on loopback, and ``dev``'s reloads."""

from __future__ import annotations

import asyncio
import secrets
import socket
import sys
import webbrowser
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import uvicorn

from ._app import build_app
from ._session import InspectorSession

__all__ = ["serve_inspector", "watch_and_restart"]


def _open_browser(url: str) -> None:
    if not webbrowser.open(url):
        print(f"could not open a browser; open {url} yourself", file=sys.stderr)


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
    background: Callable[[InspectorSession], Coroutine[Any, Any, None]] | None = None,
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
    tasks = [asyncio.create_task(session.start()), asyncio.create_task(_end_streams_on_exit(server, session))]
    if background is not None:
        tasks.append(asyncio.create_task(background(session)))
    if open_browser:
        # webbrowser may block while it starts a browser: keep it off the event loop.
        tasks.append(asyncio.create_task(asyncio.to_thread(_open_browser, url)))
    try:
        await server.serve(sockets=[sock])
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.stop()
        sock.close()


async def _end_streams_on_exit(server: uvicorn.Server, session: InspectorSession) -> None:
    """End the pages' event streams as soon as the server is told to stop: uvicorn waits
    for open responses before it exits, and an event stream never ends on its own."""
    while not server.should_exit:
        await asyncio.sleep(0.2)
    session.close_streams()


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
