"""Real processes for the authorization tests: ``modelctx auth-server`` and a protected
``modelctx serve`` on loopback ports, each yielded once it says it is ready."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.support.paths import SERVERS
from tests.support.wire import DEADLINE, free_port

NOTES_SERVER = SERVERS / "notes_server.py"


@contextlib.contextmanager
def running(command: list[str], ready: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``command``; yield the stderr line holding ``ready`` once it appeared."""
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put("")  # the process ended

    threading.Thread(target=pump, daemon=True).start()
    try:
        seen: list[str] = []
        while not (seen and ready in seen[-1]):
            try:
                line = lines.get(timeout=DEADLINE)
            except queue.Empty:
                pytest.fail(f"{command[3:5]} did not get ready within {DEADLINE}s: {''.join(seen)}")
            if not line:
                pytest.fail(f"{command[3:5]} ended before it was ready: {''.join(seen)}")
            seen.append(line)
        yield seen[-1].strip()
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE)


def modelctx(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "modelctx", *args]


@contextlib.contextmanager
def dev_auth_server(*options: str, port: int | None = None) -> Iterator[str]:
    """``modelctx auth-server`` with ``options`` (on ``port``, default a free one); yields
    its issuer URL."""
    command = modelctx("auth-server", "--port", str(port or free_port()), *options)
    with running(command, "authorization server ready at") as line:
        yield line.rsplit(" ", 1)[-1]


@contextlib.contextmanager
def protected_notes(*options: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``modelctx serve notes_server.py --http`` with ``options`` (the ``--auth-*`` ones);
    yields its MCP endpoint URL."""
    port = free_port()
    command = modelctx("serve", str(NOTES_SERVER), "--http", "--port", str(port), *options)
    with running(command, "on Streamable HTTP at", env=env):
        yield f"http://127.0.0.1:{port}/mcp"


def client_credentials_token(issuer: str, resource: str, scope: str, client: tuple[str, str]) -> str:
    """An access token from ``issuer``'s token endpoint for ``resource`` (the client
    credentials grant of the confidential ``client``: id, secret)."""
    form = {"grant_type": "client_credentials", "resource": resource, "scope": scope}
    response = httpx.post(f"{issuer}/token", data=form, auth=client, timeout=DEADLINE)
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def mcp_post(url: str, message: dict[str, object], token: str | None = None) -> httpx.Response:
    """One modern (2026-07-28) MCP request over HTTP, with ``token`` as a bearer token."""
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": str(message["method"]),
    }
    if message.get("method") == "tools/call":
        headers["mcp-name"] = str(message["params"]["name"])  # type: ignore[index]
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx.post(url, json=message, headers=headers, timeout=DEADLINE)
