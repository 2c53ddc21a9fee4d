"""Raw JSON-RPC to real server processes, on stdio or on HTTP, with a deadline on every wait.

``modelctx serve FILE`` is started exactly as a user starts it, and every process is
killed at teardown. ``StdioServer`` speaks raw JSON lines; ``HttpServer`` is a ``modelctx
serve --http`` process on a free loopback port and ``McpHttp`` posts raw JSON-RPC to it with
the headers 2026-07-28 requires. The fixtures of ``tests/conftest.py`` are built on these.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.paths import SAMPLE_SERVER

__all__ = ["SAMPLE_SERVER"]  # re-exported: the default server of ``serve_command``

MODERN = "2026-07-28"
DEADLINE = 15.0  # seconds any single wait may take before the test fails


def modern_meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The ``_meta`` every 2026-07-28 request carries (basic/index.mdx, ``_meta``)."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "modelctx-tests", "version": "0"},
        **extra,
    }


def request(id: int | str, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A modern JSON-RPC request: ``params`` plus the required ``_meta``."""
    capabilities = meta.pop("capabilities", None)
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": {**(params or {}), "_meta": modern_meta(capabilities, **meta)},
    }


def serve_command(target: Path | str = SAMPLE_SERVER, *options: str) -> list[str]:
    return [sys.executable, "-m", "modelctx", "serve", str(target), *options]


def async_test(deadline: float = 30.0) -> Callable[[Callable[..., Any]], Callable[..., None]]:
    """A decorator: run an ``async def`` test in a fresh event loop, and fail it, naming
    it, when it has not finished after ``deadline`` seconds (its task is cancelled)."""

    def decorate(test: Callable[..., Any]) -> Callable[..., None]:
        @functools.wraps(test)
        def sync(*args: Any, **kwargs: Any) -> None:
            async def main() -> None:
                task = asyncio.ensure_future(test(*args, **kwargs))
                done, _ = await asyncio.wait({task}, timeout=deadline)
                if not done:
                    task.cancel()
                    await asyncio.wait({task}, timeout=DEADLINE)
                    pytest.fail(f"{test.__name__} did not finish within {deadline:g}s")
                task.result()

            asyncio.run(main())

        return sync

    return decorate


def wait_until(condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """Poll ``condition`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)


async def until(condition: Callable[[], Any], what: str, seconds: float = DEADLINE) -> None:
    """``wait_until`` inside a running event loop: poll ``condition`` without blocking
    the loop; fail the test after ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {seconds:g}s waiting for {what}")
        await asyncio.sleep(0.01)


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    try:
        process.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:  # pragma: no cover - the kernel did not reap it
        pass



def stderr_lines(process: subprocess.Popen[str]) -> queue.Queue[str]:
    """The lines ``process`` writes to its stderr (a text pipe), queued by a reader thread as
    they come, so that a test's ``get(timeout=...)`` fails instead of hanging."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


# -- stdio -----------------------------------------------------------------------------------
class StdioServer:
    """A server process on pipes. A reader thread queues stdout lines, so reads time out."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stdout_raw: list[bytes] = []  # every stdout line, as written
        self._stderr: list[bytes] = []
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.stdout_raw.append(line)
            self.lines.put(line)
        self.lines.put(None)  # EOF

    def _pump_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    # -- writing -----------------------------------------------------------------------
    def send_raw(self, line: bytes) -> None:
        """Write one line exactly as given (plus the newline that ends it)."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode())

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    # -- reading -----------------------------------------------------------------------
    def recv(self, timeout: float = DEADLINE) -> dict[str, Any]:
        """The next message the server wrote; fails on timeout or EOF."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the server wrote nothing for {timeout:g}s; stderr:\n{self.stderr}")
        if line is None:
            pytest.fail(f"the server closed stdout (exit code {self.process.poll()}); stderr:\n{self.stderr}")
        return json.loads(line)

    def recv_until(self, id: int | str, timeout: float = DEADLINE) -> list[dict[str, Any]]:
        """Every message up to and including the response to ``id``."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while True:
            message = self.recv(max(0.01, deadline - time.monotonic()))
            seen.append(message)
            if message.get("id") == id and ("result" in message or "error" in message):
                return seen

    def call(self, message: dict[str, Any], timeout: float = DEADLINE) -> dict[str, Any]:
        """Send a request and return its response (messages before it are dropped)."""
        self.send(message)
        return self.recv_until(message["id"], timeout)[-1]

    def wait(self, timeout: float = DEADLINE) -> int:
        """The exit code; fails if the process is still running after ``timeout``."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server did not exit within {timeout:g}s")

    def stop(self) -> None:
        for pipe in (self.process.stdin,):
            try:
                if pipe is not None and not pipe.closed:
                    pipe.close()
            except OSError:
                pass
        stop_process(self.process)


# -- HTTP ------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpServer:
    """A ``modelctx serve --http`` process on a free port of 127.0.0.1."""

    def __init__(self, target: Path | str, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            serve_command(target, "--http", "--host", "127.0.0.1", "--port", str(self.port)),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until(self._answers, f"the HTTP server on port {self.port}")

    @classmethod
    def of_source(cls, source: str, directory: Path) -> HttpServer:
        """Serve the server module ``source``, written to ``directory`` (its log beside it)."""
        (directory / "server_module.py").write_text(source)
        return cls(directory / "server_module.py", directory / "server.log")

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"the HTTP server exited with {self.process.returncode}:\n{self.log}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        return True

    @property
    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class McpHttp:
    """Raw JSON-RPC over HTTP with the headers of 2026-07-28 filled in from the body.

    ``headers`` overrides them; a value of ``None`` leaves that header out.
    """

    NAME_FIELD = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.url = server.url
        self.client = httpx.Client(timeout=DEADLINE)

    def headers_for(self, message: Any) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if isinstance(message, dict) and isinstance(message.get("params"), dict):
            meta = message["params"].get("_meta") or {}
            version = meta.get("io.modelcontextprotocol/protocolVersion")
            if version is not None:
                headers["mcp-protocol-version"] = version
                headers["mcp-method"] = message["method"]
                field = self.NAME_FIELD.get(message["method"])
                if field is not None and field in message["params"]:
                    headers["mcp-name"] = str(message["params"][field])
        return headers

    def post(
        self, message: Any = None, *, content: bytes | None = None, headers: dict[str, str | None] | None = None
    ) -> httpx.Response:
        merged: dict[str, str | None] = {**self.headers_for(message), **(headers or {})}
        body = content if content is not None else json.dumps(message).encode()
        return self.client.post(
            self.url, content=body, headers={k: v for k, v in merged.items() if v is not None}
        )

    def call(self, message: dict[str, Any], **options: Any) -> dict[str, Any]:
        """POST a request and return its JSON-RPC response, from JSON or from SSE."""
        response = self.post(message, **options)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return sse_messages(response.text)[-1]
        return response.json()

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> McpHttp:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The JSON messages of an SSE body (``data:`` lines; comments ignored)."""
    messages = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages
