"""Real processes for scale tests and bench/scale.py: Redis, modelctx replicas, nginx, wrk.

Every process starts in its own process group with its output in a log file (never an
undrained pipe), every wait has a deadline, and a ``Processes`` stack stops what it
started (SIGTERM, then SIGKILL) whatever went wrong. No pytest here: bench/scale.py uses
it too.

    with Processes(workdir) as procs:
        redis = procs.start_redis()
        a = procs.start_replica(SERVER, redis_url=redis.url)
        b = procs.start_replica(SERVER, redis_url=redis.url)
        lb = procs.start_nginx([a.port, b.port])
        reply = post_json(lb.port, tools_call("echo", {"text": "hi"}))
        a.kill(); a = procs.restart(a)   # SIGKILL, then the same command on the same port
        redis.kill(); redis = procs.restart(redis)   # Redis away, then back on its port

A replica's environment is this process's, with ``env`` on top (a value of None removes
the variable). ``start_replica(..., wait=False)`` returns at once, so that several start
together; ``proc.wait_ready()`` then waits for each.

The nginx configuration is the repository's deploy/nginx/modelctx.conf with its ports
filled in (``render_nginx_conf``); ``NginxProcess.access_log`` is its access log (format
``mcp``: end time, duration, status, upstream, upstream status, method).
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT

__all__ = [
    "NGINX_CONF",
    "EventStream",
    "ListenStream",
    "Proc",
    "Processes",
    "ScaleError",
    "free_port",
    "post_json",
    "render_nginx_conf",
    "tools_call",
]

REPO = ROOT
NGINX_CONF = REPO / "deploy" / "nginx" / "modelctx.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
START_DEADLINE = 30.0  # a replica imports and starts in ~1 s; a loaded CI box is slower
STOP_GRACE = 5.0
PROTOCOL = "2026-07-28"
SERVING = "modelctx: serving"  # the line a server prints once it serves (every lifespan started)
_META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL, "io.modelcontextprotocol/clientCapabilities": {}}


class ScaleError(RuntimeError):
    """A process of the harness did not start, died, or answered wrongly."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Proc:
    """One started process: its command, its log file, and for servers its port.
    ``ready`` says whether it serves yet (``wait_ready``; ``Processes.restart`` uses it too)."""

    name: str
    argv: list[str]
    env: dict[str, str | None]
    log_path: Path
    port: int
    popen: subprocess.Popen[bytes] = field(repr=False)
    extra: dict[str, Any] = field(default_factory=dict)
    ready: Callable[[Proc], bool] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_ready(self, deadline: float = START_DEADLINE) -> Proc:
        """Returns (itself) once ``ready`` holds; ``ScaleError`` if it exits first or
        ``deadline`` seconds pass."""
        if self.ready is not None:
            ready = self.ready
            _wait(lambda: ready(self), f"{self.name} on port {self.port}", self, deadline)
        return self

    def wait_for_text(self, text: str, deadline: float = START_DEADLINE) -> None:
        """Returns once the log holds ``text``; ``ScaleError`` if the process exits first."""
        _wait(lambda: text in self.log(), f"{text!r} in the log of {self.name}", self, deadline)

    def rss_kib(self) -> int:
        """The process's resident memory (``VmRSS`` of /proc/PID/status), in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise ScaleError(f"/proc/{self.pid}/status has no VmRSS line")

    def check_alive(self) -> None:
        if not self.alive():
            raise ScaleError(f"{self.name} exited with status {self.popen.returncode}; its log:\n{self.log()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group (a replica with workers: every worker too);
        returns once no process of the group is left, so its sockets are closed."""
        _signal_group(self.popen, signal.SIGKILL)
        self.popen.wait(timeout=STOP_GRACE)
        give_up = time.monotonic() + STOP_GRACE
        while _group_alive(self.popen.pid):  # workers are reaped by whoever inherits them
            if time.monotonic() > give_up:
                raise ScaleError(f"{self.name}: processes of group {self.popen.pid} still there after SIGKILL")
            time.sleep(0.005)

    def stop(self, grace: float = STOP_GRACE) -> int:
        """SIGTERM, then SIGKILL after ``grace`` seconds; the exit status."""
        if self.popen.poll() is None:
            _signal_group(self.popen, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(self.popen, signal.SIGKILL)
                self.popen.wait(timeout=grace)
        return self.popen.returncode


def _signal_group(popen: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(popen.pid, signum)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _logs(text: str) -> Callable[[Proc], bool]:
    return lambda proc: text in proc.log()


def _listens(proc: Proc) -> bool:
    return _connects(proc.port)


def _wait(check: Any, what: str, proc: Proc, deadline: float = START_DEADLINE) -> None:
    give_up = time.monotonic() + deadline
    while not check():
        proc.check_alive()
        if time.monotonic() > give_up:
            raise ScaleError(f"{what} not there within {deadline:g} s; its log:\n{proc.log()[-3000:]}")
        time.sleep(0.05)


class Processes:
    """Starts the processes of a scale test and stops them all on exit, the last started
    first: each gets SIGTERM, then SIGKILL after ``STOP_GRACE`` seconds; with
    ``graceful=False`` SIGKILL at once (a test whose processes have nothing left to
    finish, and whose Redis may be gone, need not wait for their shutdown)."""

    def __init__(self, workdir: Path, *, graceful: bool = True) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.graceful = graceful
        self.started: list[Proc] = []

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for proc in reversed(self.started):
            if self.graceful:
                proc.stop()
            elif proc.alive():
                proc.kill()
        self.started.clear()

    def start(self, name: str, argv: list[str], port: int, env: dict[str, str] | None = None,
              ready_text: str | None = None) -> Proc:
        """Any command (its output in ``workdir/NAME-N.log``); with ``ready_text``, returns
        once its output holds that text."""
        ready = _logs(ready_text) if ready_text is not None else None
        return self._popen(name, argv, port, env, ready).wait_ready()

    def _popen(self, name: str, argv: list[str], port: int, env: Mapping[str, str | None] | None = None,
               ready: Callable[[Proc], bool] | None = None) -> Proc:  # fmt: skip
        log_path = self.workdir / f"{name}-{len(self.started)}.log"
        given = dict(env or {})
        full_env = {key: value for key, value in {**os.environ, **given}.items() if value is not None}
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=full_env, cwd=REPO, start_new_session=True,
            )  # fmt: skip
        proc = Proc(name, argv, given, log_path, port, popen, ready=ready)
        self.started.append(proc)
        return proc

    # -- Redis ----------------------------------------------------------------------------
    def start_redis(self, *, port: int | None = None) -> Proc:
        """``redis-server`` on ``port`` (default: a free one), no persistence;
        ``.extra["url"]`` is its URL. ``kill`` or ``stop`` it and ``restart`` it to take
        Redis away and bring it back on the same port (empty)."""
        if not Path(REDIS).exists():
            raise ScaleError("redis-server is not installed (apt-get install redis-server)")
        port = port or free_port()
        argv = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.workdir), "--loglevel", "warning"]  # fmt: skip
        proc = self._popen("redis", argv, port, ready=_listens)
        proc.extra["url"] = f"redis://127.0.0.1:{port}/0"
        return proc.wait_ready()

    # -- replicas -------------------------------------------------------------------------
    def start_replica(
        self,
        target: Path | str,
        *,
        port: int | None = None,
        redis_url: str | None = None,
        workers: int = 1,
        options: tuple[str, ...] = (),
        env: Mapping[str, str | None] | None = None,
        wait: bool = True,
    ) -> Proc:
        """``python -m modelctx serve TARGET --http`` on ``port`` (default: a free one),
        with ``MODELCTX_REDIS_URL`` when ``redis_url`` is given; returns once it has
        printed that it serves (every worker's lifespan started), or at once with
        ``wait=False`` (then ``wait_ready()`` it)."""
        port = port or free_port()
        argv = [sys.executable, "-m", "modelctx", "serve", str(target), "--http", "--host", "127.0.0.1",
                "--port", str(port), *(("--workers", str(workers)) if workers != 1 else ()), *options]  # fmt: skip
        return self._start_server(argv, port, redis_url, env, wait)

    def start_script(
        self,
        script: Path | str,
        *args: str,
        port: int | None = None,
        redis_url: str | None = None,
        env: Mapping[str, str | None] | None = None,
        wait: bool = True,
    ) -> Proc:
        """``python SCRIPT --port PORT ARGS``: a server file run as a program, for what
        ``modelctx serve`` has no option for; like ``start_replica`` otherwise. The
        script serves Streamable HTTP on 127.0.0.1:PORT and prints a line starting
        ``modelctx: serving`` once it does."""
        port = port or free_port()
        return self._start_server([sys.executable, str(script), "--port", str(port), *args], port, redis_url, env, wait)

    def _start_server(self, argv: list[str], port: int, redis_url: str | None,
                      env: Mapping[str, str | None] | None, wait: bool) -> Proc:  # fmt: skip
        full_env = dict(env or {})
        if redis_url:
            full_env["MODELCTX_REDIS_URL"] = redis_url
        src = str(REPO / "src")
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
        proc = self._popen("replica", argv, port, full_env, _logs(SERVING))
        return proc.wait_ready() if wait else proc

    def restart(self, proc: Proc) -> Proc:
        """The same command again (same port, same environment), once ``proc`` has ended;
        returns once it is ready as it was at its start."""
        if proc.alive():
            proc.stop()
        self.started.remove(proc)
        new = self._popen(proc.name, proc.argv, proc.port, proc.env, proc.ready)
        new.extra.update(proc.extra)
        return new.wait_ready()

    # -- nginx ----------------------------------------------------------------------------
    def start_nginx(self, upstream_ports: list[int], *, port: int | None = None) -> Proc:
        """nginx in the foreground, unprivileged, under a prefix in the work directory,
        with deploy/nginx/modelctx.conf in front of ``upstream_ports``.
        ``.extra["access_log"]`` is the path of its access log."""
        if not Path(NGINX).exists():
            raise ScaleError("nginx is not installed (apt-get install nginx-light or nginx)")
        port = port or free_port()
        prefix = self.workdir / f"nginx-{port}"
        for sub in ("logs", "temp", "conf"):
            (prefix / sub).mkdir(parents=True, exist_ok=True)
        conf = prefix / "conf" / "modelctx.conf"
        conf.write_text(render_nginx_conf(port, upstream_ports))
        argv = [NGINX, "-p", f"{prefix}/", "-c", str(conf), "-e", "stderr",
                "-g", f"daemon off; pid {prefix}/nginx.pid;"]  # fmt: skip
        proc = self._popen("nginx", argv, port, ready=_listens)
        proc.extra["access_log"] = prefix / "logs" / "access.log"
        return proc.wait_ready()


def render_nginx_conf(listen_port: int, upstream_ports: list[int]) -> str:
    """deploy/nginx/modelctx.conf listening on ``listen_port`` of 127.0.0.1 in front of
    a replica on each of ``upstream_ports`` (the example lines replaced)."""
    text = NGINX_CONF.read_text()
    example = re.compile(r"^(\s*)server 127\.0\.0\.1:\d+ (max_fails=.*)\n", re.MULTILINE)
    seen: list[str] = []

    def fill(match: re.Match[str]) -> str:  # the first example line becomes ours, the others go
        seen.append(match.group(0))
        if len(seen) > 1:
            return ""
        indent, options = match.groups()
        return "".join(f"{indent}server 127.0.0.1:{p} {options}\n" for p in upstream_ports)

    text = example.sub(fill, text)
    if not seen:
        raise ScaleError(f"{NGINX_CONF} has no `server 127.0.0.1:PORT max_fails=...` line to fill in")
    text, listens = re.subn(r"listen 127\.0\.0\.1:\d+;", f"listen 127.0.0.1:{listen_port};", text)
    if listens != 1:
        raise ScaleError(f"{NGINX_CONF} should have one `listen 127.0.0.1:PORT;` line, found {listens}")
    return text


# -- requests -------------------------------------------------------------------------------

def tools_call(name: str, arguments: dict[str, Any], request_id: int = 1, **params: Any) -> dict[str, Any]:
    """A stateless (2026-07-28) ``tools/call``: the envelope in ``_meta``."""
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": _META, **params}}  # fmt: skip


def post_json(port: int, message: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """POST ``message`` to ``/mcp`` on ``port`` with the 2026-07-28 headers on a new
    connection; its JSON-RPC answer (from JSON or the last SSE event)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": PROTOCOL, "Mcp-Method": message["method"]}  # fmt: skip
    name = message.get("params", {}).get("name")
    if name is not None:
        headers["Mcp-Name"] = str(name)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/mcp", body=json.dumps(message).encode(), headers=headers)
        response = conn.getresponse()
        body = response.read().decode()
    finally:
        conn.close()
    if response.status != 200:
        raise ScaleError(f"HTTP {response.status} from port {port}: {body[:300]}")
    if response.getheader("content-type", "").startswith("text/event-stream"):
        body = [x[5:].strip() for x in body.splitlines() if x.startswith("data:")][-1]
    answer: dict[str, Any] = json.loads(body)
    return answer


class EventStream:
    """An SSE stream held open on ``port`` (a replica or nginx), read by a thread of its
    own, so that no message waits for the test to ask for it: ``next_message(timeout)``
    is the next JSON-RPC message it carried, ``next(method, timeout, **params)`` the
    moment (``time.perf_counter()``) the next ``method`` message with those params
    arrived (others are passed over). Either raises ``ScaleError`` when none comes
    within ``timeout`` seconds, and the stream stays usable. Close it (or use ``with``).

        get = {**headers, "accept": "text/event-stream", "mcp-session-id": session_id}
        with EventStream(a.port, "GET", get) as stream:   # a handshake-era session's stream
            arrived = stream.next("notifications/resources/updated", 5, uri="notes://a")
    """

    def __init__(self, port: int, method: str, headers: Mapping[str, str], body: dict[str, Any] | None = None,
                 timeout: float = 10.0) -> None:  # fmt: skip
        self._timeout = timeout
        self._messages: queue.Queue[tuple[float, dict[str, Any]] | None] = queue.Queue()
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        payload = json.dumps(body).encode() if body is not None else None
        try:
            self._conn.request(method, "/mcp", body=payload, headers=dict(headers))
            # Kept: getresponse() hands the socket to the response when it will close.
            self._sock: socket.socket | None = self._conn.sock
            self._response = self._conn.getresponse()
        except OSError as exc:
            self._conn.close()
            raise ScaleError(f"{method} /mcp on port {port}: {exc}") from exc
        if self._response.status != 200:
            text = self._response.read().decode(errors="replace")
            self._conn.close()
            raise ScaleError(f"{method} /mcp on port {port}: HTTP {self._response.status}: {text[:300]}")
        if self._sock is not None:
            self._sock.settimeout(None)  # the reader waits for events; close() wakes it
        self._reader = threading.Thread(target=self._read, name=f"sse-{port}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for raw in self._response:
                line = raw.decode(errors="replace").strip()
                if line.startswith("data:") and line[5:].strip():
                    self._messages.put((time.perf_counter(), json.loads(line[5:].strip())))
        except (OSError, ValueError, http.client.HTTPException):
            pass  # closed under it, or cut by the server: the stream has ended
        finally:
            self._messages.put(None)

    def next_arrival(self, timeout: float | None = None) -> tuple[float, dict[str, Any]]:
        """The next message and when it arrived."""
        wait = timeout if timeout is not None else self._timeout
        try:
            item = self._messages.get(timeout=wait)
        except queue.Empty:
            raise ScaleError(f"no message on the stream within {wait:g} s") from None
        if item is None:
            self._messages.put(None)  # ended: so say every later call too
            raise ScaleError("the stream ended")
        return item

    def next_message(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message of the stream."""
        return self.next_arrival(timeout)[1]

    def next(self, method: str, timeout: float | None = None, /, **params: Any) -> float:
        """When the next ``method`` message whose params hold ``params`` arrived."""
        give_up = time.monotonic() + (timeout if timeout is not None else self._timeout)
        while True:
            arrived, message = self.next_arrival(max(0.0, give_up - time.monotonic()))
            got = message.get("params", {})
            if message.get("method") == method and all(got.get(key) == value for key, value in params.items()):
                return arrived

    def discard(self) -> None:
        """Drops the messages that arrived and were not read yet."""
        while True:
            try:
                item = self._messages.get_nowait()
            except queue.Empty:
                return
            if item is None:
                self._messages.put(None)
                return

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)  # wakes the reader blocked on it
            except OSError:
                pass
        self._reader.join(timeout=STOP_GRACE)
        self._response.close()
        self._conn.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ListenStream(EventStream):
    """A 2026-07-28 ``subscriptions/listen`` stream held open on ``port`` (a replica or
    nginx) for ``notifications``; an ``EventStream``.

        with ListenStream(lb.port, {"toolsListChanged": True}) as listen:
            assert listen.next_message(5)["method"] == "notifications/subscriptions/acknowledged"
            ...   # change the tools on a replica
            event = listen.next_message(5)   # notifications/tools/list_changed
    """

    def __init__(self, port: int, notifications: dict[str, Any], timeout: float = 10.0) -> None:
        message = {"jsonrpc": "2.0", "id": "listen", "method": "subscriptions/listen",
                   "params": {"_meta": _META, "notifications": notifications}}  # fmt: skip
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": PROTOCOL, "Mcp-Method": "subscriptions/listen"}  # fmt: skip
        super().__init__(port, "POST", headers, message, timeout)
