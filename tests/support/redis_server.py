"""A real Redis for the tests that need one: ``redis-server`` from Debian's packages,
started by the test run on a free loopback port, without persistence.

CI installs it (scripts/test.sh); where it is missing the tests that need it skip, and
under CI a skip fails the run (conftest.py), so they never vanish silently.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["RedisServer"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process: ``url`` is where it listens; ``stop`` ends it."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(workdir), "--loglevel", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        give_up = time.monotonic() + 15
        while not self._answers():
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.process.stderr.read().decode() if self.process.stderr else ''}")
            if time.monotonic() > give_up:
                self.stop()
                raise RuntimeError(f"redis-server did not answer PING on port {self.port} within 15 s")
            time.sleep(0.05)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def flush(self) -> None:
        """Empty every database, so each test starts from nothing."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(b"FLUSHALL\r\n")
            if not conn.recv(16).startswith(b"+OK"):
                raise RuntimeError("FLUSHALL failed")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
