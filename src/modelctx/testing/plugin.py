"""pytest fixtures for testing your own MCP server; load with ``-p modelctx.testing.plugin``
(or ``pytest_plugins = ["modelctx.testing.plugin"]`` in ``conftest.py``).

No async test runner is needed: each fixture gives a ``SyncClient``, whose calls block
and return the result, while the connection lives on a background event loop.

* ``mcp_client``: an in-process client for the ``Server`` your ``mcp_server`` fixture returns;
  a ``mcp_handlers`` fixture of yours, if you write one, gives it the ``ClientHandlers``
  that answer what the server asks (elicitation, sampling, roots).
* ``mcp_stdio_client(target, env=..., cwd=...)``: a factory; ``target`` is a server file
  or a command, run as a real subprocess on stdio.
* ``mcp_http_client(target, ...)``: a factory; ``target`` is a ``Server`` or a server
  file, served on Streamable HTTP at 127.0.0.1 (``client.url``).

Each wait has a deadline: the ``mcp_timeout`` ini option (seconds, default 30). At a
test's end every client is closed and every process and server it started is stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..client import ClientHandlers
from ..server import Server
from ._connect import DEFAULT_TIMEOUT, connected, served_http, spawned
from ._sync import LoopThread, SyncClient

__all__ = ["mcp_client", "mcp_http_client", "mcp_stdio_client"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("mcp_timeout", "seconds any MCP test wait may take (modelctx.testing)", default=str(DEFAULT_TIMEOUT))


def _timeout(config: pytest.Config) -> float:
    return float(config.getini("mcp_timeout"))


@pytest.fixture
def mcp_client(request: pytest.FixtureRequest) -> Iterator[SyncClient]:
    """A client connected in process to the ``Server`` your ``mcp_server`` fixture returns."""
    try:
        server = request.getfixturevalue("mcp_server")
    except pytest.FixtureLookupError:
        pytest.fail(
            "mcp_client needs a fixture named mcp_server that returns your Server, e.g.\n"
            "    @pytest.fixture\n    def mcp_server():\n        return server",
            pytrace=False,
        )
    if not isinstance(server, Server):
        pytest.fail(f"the mcp_server fixture returned {type(server).__name__}, not a modelctx Server", pytrace=False)
    try:
        handlers = request.getfixturevalue("mcp_handlers")
    except pytest.FixtureLookupError:
        handlers = None  # the server's questions then fail the call, saying which handler is missing
    if handlers is not None and not isinstance(handlers, ClientHandlers):
        pytest.fail(f"the mcp_handlers fixture returned {type(handlers).__name__}, not ClientHandlers", pytrace=False)
    loop = LoopThread(_timeout(request.config))
    try:
        yield SyncClient(loop.open(connected(server, timeout=loop.timeout, handlers=handlers)), loop)
    finally:
        loop.close()


@pytest.fixture
def mcp_stdio_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., SyncClient]]:
    """A factory: ``mcp_stdio_client("server.py")`` runs the file (or command) on stdio."""
    loop = LoopThread(_timeout(request.config))

    def start(target: Any, **options: Any) -> SyncClient:
        options.setdefault("timeout", loop.timeout)
        return SyncClient(loop.open(spawned(target, **options)), loop)

    try:
        yield start
    finally:
        loop.close()


@pytest.fixture
def mcp_http_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., SyncClient]]:
    """A factory: ``mcp_http_client(server_or_file)`` serves it on Streamable HTTP; the
    client's ``url`` is the endpoint."""
    loop = LoopThread(_timeout(request.config))

    def start(target: Any, **options: Any) -> SyncClient:
        options.setdefault("timeout", loop.timeout)
        served = served_http(target, **options)
        client = loop.open(served)
        return SyncClient(client, loop, url=served.url)

    try:
        yield start
    finally:
        loop.close()
