"""The three ways a test reaches a server: in process, as a stdio subprocess, over HTTP.

Every wait has a deadline (``timeout`` seconds: connecting, each request, stopping),
and leaving the block closes what it opened: the client, the subprocess (its whole
process group), the HTTP server and its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import socket
import sys
from collections import deque
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ..client import Client, ClientHandlers
from ..server import Server
from ..transports.stdio_client import StdioClientTransport

__all__ = ["DEFAULT_TIMEOUT", "ServedHttp", "connected", "served_http", "server_command", "spawned"]

#: Seconds any one wait may take (connecting, a request, stopping) unless told otherwise.
DEFAULT_TIMEOUT = 30.0

#: What ``spawned`` and ``served_http`` run: a server file, a command line, or an argv list.
Command = str | os.PathLike[str] | Sequence[str]


def server_command(target: Command) -> list[str]:
    """The argv that starts ``target``: a ``.py`` file runs as ``python -m modelctx serve
    FILE`` on this interpreter; a string is split as a shell would; a list is used as is."""
    if isinstance(target, os.PathLike):
        path = Path(target)
        return _serve(path) if path.suffix == ".py" else [str(path)]
    if isinstance(target, str):
        argv = shlex.split(target)
        return _serve(Path(argv[0])) if len(argv) == 1 and argv[0].endswith(".py") else argv
    return [os.fspath(part) for part in target]


def _serve(file: Path) -> list[str]:
    return [sys.executable, "-m", "modelctx", "serve", str(file.absolute())]


async def _connect(client: Client, timeout: float) -> Client:
    try:
        await asyncio.wait_for(client.connect(), timeout)
    except TimeoutError:
        await _close(client, timeout)
        raise TimeoutError(f"{client.name} did not connect within {timeout:g}s") from None
    return client


async def _close(client: Client, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(client.close(), timeout)


@contextlib.asynccontextmanager
async def connected(
    server: Server, *, timeout: float = DEFAULT_TIMEOUT, handlers: ClientHandlers | None = None, mode: str = "auto"
) -> AsyncIterator[Client]:
    """A ``Client`` connected to ``server`` in this process (through JSON, as on a wire).

    ``async with connected(server) as client: await client.call_tool("add", {...})``.
    ``handlers`` answer what the server asks (elicitation, sampling, roots)."""
    if not isinstance(server, Server):
        raise TypeError(f"connected() takes a modelctx Server, not {type(server).__name__}; for a file use spawned()")
    client = await _connect(Client(server, timeout=timeout, handlers=handlers, mode=mode), timeout)
    try:
        yield client
    finally:
        await _close(client, timeout)


@contextlib.asynccontextmanager
async def spawned(
    target: Command,
    *,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    handlers: ClientHandlers | None = None,
    mode: str = "auto",
) -> AsyncIterator[Client]:
    """A ``Client`` talking to ``target`` run as a real subprocess on stdio.

    ``target``: a server file (``"server.py"``, run by ``python -m modelctx serve``), a
    command line, or an argv list. ``env`` is added to this process's environment. The
    process is stopped when the block ends; a server that fails to start raises
    ``ConnectionClosed`` quoting its stderr."""
    transport = StdioClientTransport(server_command(target), env=env, cwd=cwd, connect_timeout=timeout)
    client = await _connect(Client(transport, timeout=timeout, handlers=handlers, mode=mode), timeout)
    try:
        yield client
    finally:
        await _close(client, timeout)


def served_http(
    target: Server | Command,
    *,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    handlers: ClientHandlers | None = None,
    mode: str = "auto",
) -> ServedHttp:
    """A real Streamable HTTP server on 127.0.0.1 (a free port) and a ``Client`` connected to it.

    ``target``: a ``Server`` object (served by uvicorn in this event loop) or a server
    file (``python -m modelctx serve FILE --http`` as a subprocess; ``env`` and ``cwd``
    apply to it). Use it as ``async with served_http(server) as client``; the returned
    object's ``url`` is the endpoint, for a second client or plain HTTP requests."""
    return ServedHttp(target, env=env, cwd=cwd, timeout=timeout, handlers=handlers, mode=mode)


class ServedHttp:
    """The HTTP server ``served_http`` runs; ``url`` is set once the block is entered."""

    def __init__(
        self,
        target: Server | Command,
        *,
        env: dict[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        timeout: float,
        handlers: ClientHandlers | None,
        mode: str,
    ) -> None:
        self.target = target
        self.url = ""
        self._env, self._cwd, self._timeout = env, cwd, timeout
        self._handlers, self._mode = handlers, mode
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Client:
        try:
            if isinstance(self.target, Server):
                self.url = await self._stack.enter_async_context(_uvicorn(self.target, self._timeout))
            else:
                argv = server_command(self.target)
                self.url = await self._stack.enter_async_context(_http_process(argv, self._env, self._cwd, self._timeout))
            client = Client(self.url, timeout=self._timeout, handlers=self._handlers, mode=self._mode)
            await _connect(client, self._timeout)
            self._stack.push_async_callback(_close, client, self._timeout)
            return client
        except BaseException:
            await self._stack.aclose()
            raise

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()


async def _until(condition: Any, what: str, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:g}s")
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def _uvicorn(server: Server, timeout: float) -> AsyncIterator[str]:
    """Serve ``server`` with uvicorn in this loop on a socket bound to a free loopback port."""
    import uvicorn

    from ..transports.http import HttpApp

    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    config = uvicorn.Config(
        HttpApp(server), host="127.0.0.1", port=port, log_level="warning", lifespan="on",
        timeout_graceful_shutdown=1, access_log=False,
        log_config=None,  # uvicorn's default would reconfigure the test run's logging
    )
    runner = uvicorn.Server(config)
    task = asyncio.ensure_future(runner.serve(sockets=[listening]))
    try:
        await _until(lambda: runner.started or task.done(), "the HTTP server's start", timeout)
        if task.done():
            task.result()  # its startup error
            raise RuntimeError(f"the HTTP server for {server.name!r} stopped while starting")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        runner.should_exit = True
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=timeout)
        listening.close()


_READY = re.compile(r"^modelctx: serving .* on Streamable HTTP at (http://\S+)$")
_PORT_ATTEMPTS = 3  # another process may take the free port between our probe and the server's bind


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def _http_process(
    argv: list[str], env: dict[str, str] | None, cwd: str | os.PathLike[str] | None, timeout: float
) -> AsyncIterator[str]:
    """Run ``argv --http --port P`` and yield the URL it announces on stderr."""
    for attempt in range(_PORT_ATTEMPTS):
        process = await asyncio.create_subprocess_exec(
            *argv, "--http", "--host", "127.0.0.1", "--port", str(_free_port()),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True,
        )
        stderr: deque[str] = deque(maxlen=40)
        try:
            url = await asyncio.wait_for(_announced_url(process, stderr), timeout)
        except BaseException as exc:
            await _stop(process, timeout)
            in_use = "address is in use" in "".join(stderr)
            if isinstance(exc, (TimeoutError, ConnectionError)) and not (in_use and attempt + 1 < _PORT_ATTEMPTS):
                said = "".join(stderr).strip() or "(nothing on stderr)"
                problem = "did not announce its URL in time" if isinstance(exc, TimeoutError) else "exited"
                raise ConnectionError(f"{shlex.join(argv)} --http {problem}; its stderr:\n{said}") from None
            if in_use:
                continue
            raise
        drain = asyncio.ensure_future(_drain(process, stderr))
        try:
            yield url
        finally:
            await _stop(process, timeout)
            drain.cancel()
            await asyncio.wait({drain}, timeout=timeout)
        return


async def _announced_url(process: asyncio.subprocess.Process, stderr: deque[str]) -> str:
    assert process.stderr is not None
    while line := (await process.stderr.readline()).decode(errors="replace"):
        stderr.append(line)
        found = _READY.match(line.strip())
        if found:
            return found.group(1)
    raise ConnectionError("the server exited")


async def _drain(process: asyncio.subprocess.Process, stderr: deque[str]) -> None:
    """Keep reading its stderr, so a talkative server never blocks on a full pipe."""
    assert process.stderr is not None
    while line := await process.stderr.readline():
        stderr.append(line.decode(errors="replace"))


async def _stop(process: asyncio.subprocess.Process, timeout: float) -> None:
    """SIGTERM to its process group (``serve`` ends its streams and exits), SIGKILL past ``timeout``."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        if process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sent)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), timeout)
