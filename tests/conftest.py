"""Fixtures that serve a server file as a real subprocess, on stdio or on HTTP, and a real Redis.

* ``stdio_server``: a fresh process per test, spoken to in raw JSON lines.
* ``http_server``: one process for the whole session (starting one costs about a
  second); ``http`` posts raw JSON-RPC to it (``tests/support/wire.py``).
* ``redis_server`` / ``redis_url``: one ``redis-server`` for the run, emptied per test.

Under CI a skipped test fails the run (``tests/support/ci_skips.py``, hooked in here).
The helpers live in ``tests/support/``: import them from there, never from this file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ci_skips import pytest_make_collect_report, pytest_runtest_makereport
from tests.support.paths import SAMPLE_SERVER
from tests.support.wire import HttpServer, McpHttp, StdioServer, serve_command

__all__ = ["pytest_make_collect_report", "pytest_runtest_makereport"]  # the hooks pytest finds here


@pytest.fixture
def start_stdio_server() -> Iterator[Callable[..., StdioServer]]:
    """A factory: ``start_stdio_server(env={...})`` starts the sample server on stdio."""
    started: list[StdioServer] = []

    def start(target: Path | str = SAMPLE_SERVER, env: dict[str, str] | None = None) -> StdioServer:
        server = StdioServer(serve_command(target), env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def stdio_server(start_stdio_server) -> StdioServer:
    """The sample server on stdio, fresh for each test."""
    return start_stdio_server()


@pytest.fixture(scope="session")
def http_server(tmp_path_factory) -> Iterator[HttpServer]:
    """The sample server on Streamable HTTP, shared by the whole test session."""
    with HttpServer(SAMPLE_SERVER, tmp_path_factory.mktemp("http") / "server.log") as server:
        yield server


@pytest.fixture
def http(http_server) -> Iterator[McpHttp]:
    """A raw HTTP client for the shared HTTP server."""
    with McpHttp(http_server) as client:
        yield client


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> Iterator[Any]:
    """A real ``redis-server`` for the whole run (tests/support/redis_server.py); skips without one."""
    import shutil

    from tests.support.redis_server import RedisServer

    if shutil.which("redis-server") is None and not Path("/usr/bin/redis-server").exists():
        pytest.skip("redis-server is not installed (apt-get install redis-server; scripts/test.sh does)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    """The URL of the shared test Redis, emptied for this test."""
    redis_server.flush()
    url: str = redis_server.url
    return url
