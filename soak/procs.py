"""The soak run's processes: starting the servers, and reading their memory and descriptors.

Every server runs with this checkout's ``src`` first on ``PYTHONPATH`` (the code under
test, not an installed copy) and its stderr in a file the run reads at the end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parent
REPO = SOAK.parent
SERVER = SOAK / "server.py"
START_TIMEOUT = 30.0


def child_env(stderr_file: Path | None = None) -> dict[str, str]:
    """This environment with the checkout's ``src`` first on the path; ``SOAK_STDERR`` set
    makes ``soak/server.py`` write its stderr there."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if stderr_file is not None:
        env["SOAK_STDERR"] = str(stderr_file)
    return env


def stdio_command() -> list[str]:
    """A stdio server: the server file run as a script (``server.run()``)."""
    return [sys.executable, str(SERVER)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def start_http(port: int, stderr_file: Path) -> asyncio.subprocess.Process:
    """``modelctx serve soak/server.py --http`` on 127.0.0.1:``port``, ready to answer.

    Ready means an HTTP answer: the socket is bound (and accepts connections) before the
    server has started, so a connection alone says nothing of its descriptors or memory."""
    with stderr_file.open("ab") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "modelctx", "serve", str(SERVER), "--http", "--host", "127.0.0.1",
            "--port", str(port), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=err, env=child_env(), start_new_session=True,
        )  # fmt: skip
    deadline = asyncio.get_running_loop().time() + START_TIMEOUT
    while asyncio.get_running_loop().time() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"the HTTP server exited at start with {process.returncode}; see {stderr_file}")
        if await _answers_http(port):
            return process
        await asyncio.sleep(0.1)
    await stop(process)
    raise RuntimeError(f"the HTTP server did not listen on port {port} within {START_TIMEOUT} s")


async def _answers_http(port: int) -> bool:
    """Whether an HTTP request to the endpoint gets a status line back within a second."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1.0)
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        status = await asyncio.wait_for(reader.readline(), 1.0)
        return status.startswith(b"HTTP/1.1 ")
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()


async def stop(process: asyncio.subprocess.Process, grace: float = 10.0) -> int | None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; the exit status (None if unknown)."""
    if process.returncode is None:
        try:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), grace)
        except TimeoutError:
            process.kill()
            await asyncio.wait_for(process.wait(), grace)
        except ProcessLookupError:
            pass
    return process.returncode


def rss_mb(pid: int) -> float | None:
    """Resident memory of ``pid`` in MB (None if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie counts: it runs nothing and holds no pipe)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


async def wait_gone(pid: int, timeout: float) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if gone(pid):
            return True
        await asyncio.sleep(0.1)
    return gone(pid)
