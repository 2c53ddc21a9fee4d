"""What each facade import loads: the modelctx modules of ``from modelctx import Server``,
``Client`` and ``Host``, pinned, so the set grows only by a deliberate edit here
(ARCHITECTURE.md: cheap imports that follow the layers). Each runs in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

# The modules under modelctx (without the "modelctx." prefix) each facade import loads.
SERVER = {
    "errors",
    "protocol", "protocol.apps", "protocol.connection", "protocol.framing", "protocol.headers",
    "protocol.jsonrpc", "protocol.meta", "protocol._request_state", "protocol.versions",
    "server", "server._apps", "server._bus", "server._compose", "server._constraints", "server._content",
    "server._context", "server._dispatch", "server._elicit_form", "server._files", "server._lifespan",
    "server._openapi", "server._openapi._routes", "server._registry", "server._schema_shape", "server._server",
    "server._shape", "server._signature", "server._task_store", "server._tasks", "server._threads",
    "server._transform", "server._uri_reach", "server._uri_template",
    "transports", "transports.identity", "transports.server_seam", "transports.session",
}  # fmt: skip
CLIENT = {
    "client", "client._cache", "client._client", "client._convert", "client._era", "client._input",
    "client._options", "client._session", "client._tasks",
    "errors",
    "protocol", "protocol.connection", "protocol.framing", "protocol.headers", "protocol.jsonrpc",
    "protocol.meta", "protocol._request_state", "protocol.versions",
    "transports", "transports.auth_seam", "transports.client_seam", "transports._http11", "transports._http_requests",
    "transports.identity", "transports.server_seam", "transports.session", "transports._url_guard", "transports.fetch",
}  # fmt: skip
HOST = {
    "errors",
    "host", "host._approval", "host._config", "host._host", "host._model", "host._names", "host._server",
    "host._tool_search", "host._ui",
    "protocol", "protocol.apps", "protocol.framing", "protocol.headers", "protocol.jsonrpc", "protocol.meta",
    "protocol._request_state", "protocol.versions", "protocol.types", "protocol.types.v2026_07_28",
}  # fmt: skip

# Libraries none of the three may load: storage, HTTP servers and clients, model SDKs, auth, the CLI.
HEAVY = ("sqlite3", "redis", "httpx", "starlette", "uvicorn", "anthropic", "openai", "joserfc", "authlib", "click")


def _loaded(name: str) -> tuple[set[str], set[str]]:
    code = (
        f"import sys; from modelctx import {name}; "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    modules = set(out.stdout.split())
    ours = {m.removeprefix("modelctx.") for m in modules if m.startswith("modelctx.")}
    return ours, {m for m in HEAVY if m in modules}


@pytest.mark.parametrize(("name", "expected"), [("Server", SERVER), ("Client", CLIENT), ("Host", HOST)])
def test_a_facade_import_loads_exactly_the_pinned_modelctx_modules(name: str, expected: set[str]) -> None:
    ours, _ = _loaded(name)
    assert {"added": ours - expected, "gone": expected - ours} == {"added": set(), "gone": set()}, (
        f"`from modelctx import {name}` loads another set of modules: if that is deliberate, edit the set here"
    )


@pytest.mark.parametrize("name", ["Server", "Client", "Host"])
def test_a_facade_import_loads_no_storage_http_server_model_or_auth_library(name: str) -> None:
    assert _loaded(name)[1] == set()


def test_the_server_stores_load_when_first_named() -> None:
    code = (
        "import sys; from modelctx import Server; "
        "print(sorted(m for m in ('sqlite3', 'modelctx.server._redis_tasks', 'modelctx.server._redis_bus') if m in sys.modules)); "
        "from modelctx.server import RedisBus, RedisTaskStore, SqliteTaskStore; "
        "print(SqliteTaskStore.__name__, RedisTaskStore.__name__, RedisBus.__name__, 'sqlite3' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["[]", "SqliteTaskStore RedisTaskStore RedisBus True"], out.stdout + out.stderr
