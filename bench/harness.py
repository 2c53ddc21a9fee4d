"""What every scenario shares: the two servers, their processes, and the wire messages.

A scenario never starts a process itself: it asks ``Servers`` for one, and ``Servers``
remembers every process it started so that ``close()`` (called by run.py in a
``finally``, and again at exit) kills them all, whatever went wrong. Every wait here
has a deadline: a server that hangs costs a bounded number of seconds and an error
row, never a stuck benchmark.

Client benchmarks run a client in a subprocess (``client_driver.py``) that starts its
own stdio server, in a session of its own, out of reach of a signal to the driver's
group. So ``Servers`` makes this process a child subreaper (Linux): whatever a driver
leaves behind is re-parented here, and ``stop``/``close`` kill and reap it.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
# What server processes run with: this environment, but allowed to write bytecode. An
# installed package has its .pyc files; a checkout run with PYTHONDONTWRITEBYTECODE=1 (set in
# some sandboxes) would compile every module of ours on every start, which no user pays.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
PYTHON = sys.executable
#: FastMCP's venv (scripts/test.sh makes it: fastmcp pins another mcp than ours).
FASTMCP_PYTHON = os.environ.get("MODELCTX_FASTMCP_PYTHON", str(REPO / ".tools" / "fastmcp" / "bin" / "python"))
MODELCTX_CLI = str(Path(PYTHON).with_name("modelctx"))

PROTOCOL = "2026-07-28"
#: The two implementations compared everywhere: our server (its async echo) and the SDK's.
IMPLS = ("modelctx", "official")
#: What the server scenarios run: beside the two above, our server with a sync echo tool
#: ("modelctx-sync": on a worker thread, the default; "modelctx-inline": marked
#: ``inline=True``, on the loop) and the floor (a bare server that only parses and
#: answers: servers/floor.py).
SERVER_IMPLS = ("modelctx", "modelctx-sync", "modelctx-inline", "official", "floor")

#: How long a server may take to start (the official one imports for ~1 s cold).
START_TIMEOUT = 20.0
#: How long one answer may take before the scenario gives up.
IO_TIMEOUT = 10.0


class BenchError(Exception):
    """A scenario could not measure: a server died, timed out or answered wrongly."""


# -- wire messages ------------------------------------------------------------------

_META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def echo_call(request_id: int, text: str = "hi") -> dict:
    """A modern (2026-07-28) ``tools/call`` of ``echo``: no handshake, the envelope in ``_meta``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}, "_meta": _META},
    }


def discover(request_id: int) -> dict:
    meta = dict(_META, **{"io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}})
    return {"jsonrpc": "2.0", "id": request_id, "method": "server/discover", "params": {"_meta": meta}}


def line(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def echo_call_template(text: str = "hi") -> bytes:
    """``echo_call`` as a ``%d`` template for the id: building a request costs one format."""
    return line(echo_call(123456789, text)).replace(b"123456789", b"%d", 1)


HTTP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": PROTOCOL,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "echo",
}


def check_echo_response(raw: bytes | str | dict, request_id: int, text: str = "hi") -> None:
    """Raise ``BenchError`` unless ``raw`` is the successful answer to ``echo_call(request_id, text)``."""
    message = raw if isinstance(raw, dict) else json.loads(raw)
    if message.get("id") != request_id or "result" not in message:
        raise BenchError(f"expected the result for id {request_id}, got {str(raw)[:300]}")
    result = message["result"]
    content = result.get("content") or [{}]
    if result.get("isError") or content[0].get("text") != text or result.get("resultType") != "complete":
        raise BenchError(f"wrong echo result for id {request_id}: {str(raw)[:300]}")


# -- processes ----------------------------------------------------------------------


_SCRIPTS = {
    "modelctx": "modelctx_echo.py",
    "modelctx-sync": "modelctx_echo_sync.py",
    "modelctx-inline": "modelctx_echo_inline.py",
    "official": "official_echo.py",
    "floor": "floor.py",
}


def _script(impl: str) -> str:
    if impl not in _SCRIPTS:
        raise ValueError(f"unknown implementation {impl!r}; expected one of {tuple(_SCRIPTS)}")
    return str(BENCH / "servers" / _SCRIPTS[impl])


def stdio_command(impl: str) -> list[str]:
    if impl.startswith("modelctx"):
        return [MODELCTX_CLI, "serve", _script(impl)]
    return [PYTHON, _script(impl)]


def http_command(impl: str, port: int) -> list[str]:
    if impl.startswith("modelctx"):
        return stdio_command(impl) + ["--http", "--host", "127.0.0.1", "--port", str(port)]
    return stdio_command(impl) + ["http", str(port)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    """A started server: the process and the file its stderr goes to."""

    name: str
    popen: subprocess.Popen
    log_path: Path

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            raise BenchError(
                f"{self.name} exited with code {self.popen.returncode}; stderr tail:\n{self.log_tail()}"
            )


class Servers:
    """Starts server processes and guarantees they are all killed."""

    def __init__(self) -> None:
        self._procs: list[Proc] = []
        self._logdir = Path(tempfile.mkdtemp(prefix="modelctx-bench-"))
        self._subreaper = _become_subreaper()
        atexit.register(self.close)

    def spawn(self, name: str, argv: list[str], *, stdio: bool, env: dict[str, str] | None = None) -> Proc:
        """Start ``argv`` in its own process group; stderr goes to a log file, never to an
        undrained pipe (a chatty server would block on it)."""
        log_path = self._logdir / f"{name}-{len(self._procs)}.log"
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdio else subprocess.DEVNULL,
                stderr=log,
                cwd=REPO,
                bufsize=0,
                start_new_session=True,
                env={**CHILD_ENV, **(env or {})},
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - run.py starts no threads
            )
        proc = Proc(name, popen, log_path)
        self._procs.append(proc)
        return proc

    def stop(self, proc: Proc, grace: float = 2.0) -> None:
        """Close its pipes, SIGTERM its group, SIGKILL after ``grace`` seconds."""
        popen = proc.popen
        for pipe in (popen.stdin, popen.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        if popen.poll() is None:
            _signal_group(popen, signal.SIGTERM)
            try:
                popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(popen, signal.SIGKILL)
                try:
                    popen.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    pass
        if proc in self._procs:
            self._procs.remove(proc)
        self.kill_orphans()

    def kill_orphans(self, grace: float = 1.0) -> list[int]:
        """Kill the processes that were re-parented to us (a stdio server whose client
        driver died or left it running): SIGTERM their groups, SIGKILL after ``grace``,
        reap them. Returns their pids. A no-op where we are no subreaper."""
        if not self._subreaper:
            return []
        tracked = {p.popen.pid for p in self._procs}
        orphans = [pid for pid in _children(os.getpid()) if pid not in tracked]
        for pid in orphans:
            _kill_tree(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        alive = list(orphans)
        while alive:
            alive = [pid for pid in alive if not _reaped(pid)]
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        for pid in alive:
            _kill_tree(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while alive and time.monotonic() < deadline:
            alive = [pid for pid in alive if not _reaped(pid)]
            time.sleep(0.02)
        return orphans

    @property
    def log_dir(self) -> Path:
        return self._logdir

    def close(self) -> None:
        for proc in list(self._procs):
            self.stop(proc, grace=1.0)
        self.kill_orphans()

    def remove_logs(self) -> None:
        shutil.rmtree(self._logdir, ignore_errors=True)


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, get SIGTERM if the benchmark itself is killed
    (even by SIGKILL, when no ``finally`` runs), so no server outlives it."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _become_subreaper() -> bool:
    """Make orphaned descendants our children (PR_SET_CHILD_SUBREAPER, Linux >= 3.4)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    PR_SET_CHILD_SUBREAPER = 36
    return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid``, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _kill_tree(pid: int, signum: int) -> None:
    """Signal ``pid``'s process group when it leads one (servers start in their own
    session), else ``pid`` alone."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _reaped(pid: int) -> bool:
    """Reap ``pid`` if it has exited; True once it is gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _signal_group(popen: subprocess.Popen, signum: int) -> None:
    # The group was created by start_new_session for this very child: its id is the pid.
    try:
        os.killpg(popen.pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            popen.send_signal(signum)
        except ProcessLookupError:
            pass


# -- stdio I/O with deadlines ---------------------------------------------------------


class LineReader:
    """Reads newline-terminated lines from a pipe, never waiting past a deadline."""

    def __init__(self, proc: Proc) -> None:
        self.proc = proc
        self.fd = proc.popen.stdout.fileno()
        self.buffer = b""

    def read_chunk(self, timeout: float) -> bytes:
        """Whatever the pipe has (at least one byte), waiting at most ``timeout`` seconds."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            self.proc.check_alive()
            raise BenchError(f"{self.proc.name}: no output within {timeout:.1f} s")
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.proc.check_alive()
            raise BenchError(f"{self.proc.name} closed stdout; stderr tail:\n{self.proc.log_tail()}")
        return chunk

    def readline(self, timeout: float = IO_TIMEOUT) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                found, self.buffer = self.buffer[: end + 1], self.buffer[end + 1 :]
                return found
            self.buffer += self.read_chunk(max(0.0, deadline - time.monotonic()))


def write_all(proc: Proc, data: bytes) -> None:
    """Blocking write of a small message (a pipe holds 64 KiB, so this does not hang)."""
    fd = proc.popen.stdin.fileno()
    view = memoryview(data)
    deadline = time.monotonic() + IO_TIMEOUT
    while view:
        _, ready, _ = select.select([], [fd], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise BenchError(f"{proc.name}: stdin did not accept input within {IO_TIMEOUT} s")
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue


def request_response(proc: Proc, reader: LineReader, message: dict, timeout: float = IO_TIMEOUT) -> dict:
    """Send one request and return the answer with its id (skipping notifications)."""
    write_all(proc, line(message))
    deadline = time.monotonic() + timeout
    while True:
        answer = json.loads(reader.readline(max(0.0, deadline - time.monotonic())))
        if answer.get("id") == message["id"]:
            return answer


# -- statistics -----------------------------------------------------------------------


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


# -- client drivers -------------------------------------------------------------------

CLIENT_DRIVER = BENCH / "client_driver.py"


def run_client_driver(
    servers: Servers,
    name: str,
    client: str,
    *,
    stdio_server: str | None = None,
    url: str | None = None,
    calls: int,
    seconds: float,
    warmup: int,
    in_flight: int = 1,
    deadline: float = 60.0,
    env: dict[str, str] | None = None,
) -> dict:
    """Run ``client_driver.py`` in its own process (its own imports and event loop) and
    return the figures it prints; ``BenchError`` with its stderr tail if it fails.

    The driver bounds itself by ``deadline``; we wait ``deadline`` + 20 s for its answer,
    then kill it (and, through ``Servers.stop``, any stdio server it left behind)."""
    argv = [PYTHON, str(CLIENT_DRIVER), "--client", client]
    argv += ["--stdio-server", stdio_server] if stdio_server else ["--url", url]
    argv += [
        "--calls", str(calls), "--seconds", str(seconds), "--warmup", str(warmup),
        "--in-flight", str(in_flight), "--deadline", str(deadline),
    ]  # fmt: skip
    proc = servers.spawn(name, argv, stdio=True, env=env)
    try:
        answer = LineReader(proc).readline(timeout=deadline + 20)
        try:
            proc.popen.wait(timeout=10.0)  # let it close its client and exit on its own
        except subprocess.TimeoutExpired:
            pass
        try:
            result = json.loads(answer)
        except ValueError:
            raise BenchError(f"{name}: not a JSON answer: {answer[:300]!r}") from None
        if "error" in result:
            raise BenchError(f"{name}: {result['error']}\nstderr tail:\n{proc.log_tail()}")
        return result
    finally:
        servers.stop(proc)
