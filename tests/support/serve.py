"""Run a server file with ``modelctx serve --http`` on a free loopback port."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve_http(path: Path, deadline: float = 20.0, env: dict[str, str] | None = None) -> Iterator[str]:
    """Yield the endpoint URL of ``path`` served over HTTP (``env``: the server's
    environment, default this process's); stop the process after."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "serve", str(path), "--http", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        end = time.monotonic() + deadline
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited early: {proc.stderr.read().decode()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > end:
                    raise RuntimeError(f"server did not listen on {port} within {deadline}s") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
