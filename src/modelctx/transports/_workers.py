"""Pre-fork worker processes: one listening socket, N processes serving it.

Theory of operation. The parent binds the socket once, then forks ``count`` children;
each inherits the socket and runs ``run_worker`` (a uvicorn server with its own event
loop and its own server lifespan), and the kernel spreads new connections over the
processes accepting on it. The parent serves nothing: it waits for signals and for
children to end.

- A child that ends while the parent is not stopping is restarted after a backoff
  (``RestartPolicy``: 0.1 s doubling up to 5 s); more than ``max_restarts`` deaths within
  ``window`` seconds is a crash loop: every worker is stopped and the parent returns 1
  with one line saying so. A child that fails its lifespan (uvicorn's status 3) is not
  restarted: the server cannot start, so the parent stops the others and returns 1.
- SIGTERM or SIGINT to the parent is forwarded to every child as SIGTERM (each ends its
  listen streams, lets requests finish for uvicorn's grace, runs its lifespan's exit);
  a second one, or ``stop_timeout`` seconds without every child gone, sends SIGKILL. A
  graceful stop returns 0.
- Children die with the parent (``PR_SET_PDEATHSIG`` on Linux), so a parent killed with
  SIGKILL leaves no orphan serving the port.

What exists before the fork is copied into every child: the ``Server`` (its registry,
its ``requestState`` key, made at construction, so a state sealed by one worker opens in
another). Nothing that belongs to an event loop may exist then (no running loop, no
connections, no threads: a forked child gets one thread, and a lock another thread held
stays locked for ever); open connections in the server's lifespan, which runs in each
worker. ``serve_workers`` refuses to fork inside a running event loop and warns about
live threads.
"""

from __future__ import annotations

import asyncio
import collections
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RestartPolicy", "check_workers", "max_workers", "serve_workers"]

#: uvicorn's exit status when the ASGI lifespan failed to start (uvicorn.config.STARTUP_FAILURE).
STARTUP_FAILURE = 3
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Workers a CPU may have. Each is a whole process (about 40 MB); past a few per CPU more
#: of them add memory, not throughput. ``--workers 100000`` forked until the machine ran
#: out of memory.
WORKERS_PER_CPU = 4
#: Slots are told apart by one byte on the ready pipe.
_MOST_WORKERS = 255


def max_workers() -> int:
    """The most workers ``serve_workers`` starts here: ``WORKERS_PER_CPU`` per CPU this
    process may run on, at least 8, at most 255."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(_MOST_WORKERS, max(8, WORKERS_PER_CPU * cpus))


@dataclass(frozen=True)
class RestartPolicy:
    """When a worker that died is started again, and when the parent gives up.

    ``backoff`` seconds before the first restart, doubled with each death in the last
    ``window`` seconds, at most ``max_backoff``; more than ``max_restarts`` deaths within
    ``window`` seconds end the server (status 1). ``stop_timeout``: seconds a graceful
    stop may take before the workers left are killed.
    """

    backoff: float = 0.1
    max_backoff: float = 5.0
    max_restarts: int = 5
    window: float = 60.0
    stop_timeout: float = 10.0

    def delay(self, recent_deaths: int) -> float:
        return float(min(self.max_backoff, self.backoff * 2 ** max(0, recent_deaths - 1)))


def check_workers(count: int) -> None:
    """Raise ``ValueError``, saying why, for a worker count this machine should not run."""
    if count < 1:
        raise ValueError(f"workers must be at least 1, got {count}")
    if count > max_workers():
        raise ValueError(
            f"{count} workers is more than this machine can use: at most {max_workers()} "
            f"({WORKERS_PER_CPU} per CPU); each worker is a whole process"
        )


def serve_workers(
    count: int,
    run_worker: Callable[[Callable[[], None], int], None],
    *,
    ready_message: str | None = None,
    policy: RestartPolicy = RestartPolicy(),
) -> int:
    """Run ``run_worker(ready, slot)`` in ``count`` forked processes until stopped; return
    the exit status for this process (0 after a graceful stop, 1 after a crash loop or a
    failed start).

    ``run_worker`` serves in the child until told to stop (SIGTERM) and calls ``ready()``
    once it accepts connections; ``slot`` (0 to ``count - 1``) names the worker, and a
    worker restarted after a death gets the slot of the one it replaces (so what the
    parent made for a slot before forking, a socket of its own, serves it again);
    ``ready_message`` goes to stderr once every worker has.
    Raises ``SystemExit`` on a platform without ``fork`` and ``RuntimeError`` when called
    inside a running event loop.
    """
    check_workers(count)
    if not hasattr(os, "fork"):
        raise SystemExit(
            "modelctx: --workers needs fork(), which this platform lacks; run one process per port "
            "(workers=1) behind a load balancer instead"
        )
    _check_nothing_async()
    return _Supervisor(count, run_worker, ready_message, policy).run()


def _check_nothing_async() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "serve_workers forks worker processes and cannot run inside an event loop; "
            "call server.run('http', workers=N) from synchronous code"
        )
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    if others:
        print(
            f"modelctx: warning: threads running before the fork ({', '.join(others)}) do not exist in the "
            "workers, and a lock one of them holds stays locked there; start them in the server's lifespan",
            file=sys.stderr,
            flush=True,
        )


class _Supervisor:
    def __init__(
        self,
        count: int,
        run_worker: Callable[[Callable[[], None], int], None],
        ready_message: str | None,
        policy: RestartPolicy,
    ) -> None:
        self.count = count
        self.run_worker = run_worker
        self.ready_message = ready_message
        self.policy = policy
        self.workers: dict[int, int] = {}  # pid -> slot
        self.restarts: list[tuple[float, int]] = []  # (when, slot)
        self.deaths: collections.deque[float] = collections.deque()
        self.ready_slots: set[int] = set()
        self.announced = False
        self.stopping_since: float | None = None
        self.status = 0
        self.parent_pid = os.getpid()

    # -- the parent's loop -------------------------------------------------------------
    def run(self) -> int:
        self.ready_r, self.ready_w = os.pipe()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        previous = {sig: signal.signal(sig, _note) for sig in (*_STOP_SIGNALS, signal.SIGCHLD)}
        previous_fd = signal.set_wakeup_fd(self.wake_w.fileno(), warn_on_full_buffer=False)
        try:
            for slot in range(self.count):
                if self._stop_requested():
                    break  # SIGTERM while starting: stop what started, start no more
                self._spawn(slot)
            while self.workers or (self.restarts and self.stopping_since is None):
                self._wait_for_events()
                self._reap()
                self._start_due()
                self._check_stop_deadline()
            return self.status
        finally:
            self._kill_all()
            signal.set_wakeup_fd(previous_fd)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for fd in (self.ready_r, self.ready_w):
                os.close(fd)
            self.wake_r.close()
            self.wake_w.close()

    def _wait_for_events(self) -> None:
        timeout = 1.0
        now = time.monotonic()
        if self.restarts and self.stopping_since is None:
            timeout = min(timeout, max(0.0, min(when for when, _ in self.restarts) - now))
        readable, _, _ = select.select([self.ready_r, self.wake_r.fileno()], [], [], timeout)
        if self.ready_r in readable:
            self._note_ready(os.read(self.ready_r, 4096))
        if self.wake_r.fileno() in readable:
            self._stop_requested()

    def _stop_requested(self) -> bool:
        """Act on the stop signals noted since the last look; True once stopping."""
        try:
            signals = self.wake_r.recv(4096)
        except BlockingIOError:
            signals = b""
        for number in signals:
            if number in _STOP_SIGNALS:
                self._stop(signal.Signals(number))
        return self.stopping_since is not None

    def _note_ready(self, data: bytes) -> None:
        self.ready_slots.update(data)
        if not self.announced and len(self.ready_slots) >= min(self.count, 256) and self.stopping_since is None:
            self.announced = True
            if self.ready_message:
                print(f"{self.ready_message} ({self.count} workers)", file=sys.stderr, flush=True)

    def _reap(self) -> None:
        while self.workers:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.workers.clear()
                return
            if pid == 0:
                return
            slot = self.workers.pop(pid, None)
            if slot is not None:
                self._worker_ended(slot, pid, wait_status)

    def _worker_ended(self, slot: int, pid: int, wait_status: int) -> None:
        if self.stopping_since is not None:
            return
        how = _describe(wait_status)
        if os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == STARTUP_FAILURE:
            self._fail(f"worker {slot + 1} (pid {pid}) failed to start: its lifespan failed (see above); "
                       "stopping the other workers")
            return
        now = time.monotonic()
        self.deaths.append(now)
        while self.deaths and self.deaths[0] < now - self.policy.window:
            self.deaths.popleft()
        if len(self.deaths) > self.policy.max_restarts:
            self._fail(
                f"workers keep dying ({len(self.deaths)} deaths within {self.policy.window:g} s, the last: "
                f"worker {slot + 1}, pid {pid}, {how}); stopping. Fix the cause shown above and start again"
            )
            return
        delay = self.policy.delay(len(self.deaths))
        print(f"modelctx: worker {slot + 1} (pid {pid}) {how}; restarting it in {delay:.1f} s",
              file=sys.stderr, flush=True)
        self.restarts.append((now + delay, slot))

    def _fail(self, message: str) -> None:
        print(f"modelctx: {message}", file=sys.stderr, flush=True)
        self.status = 1
        self._stop(None)

    def _start_due(self) -> None:
        if self.stopping_since is not None:
            self.restarts.clear()
            return
        now = time.monotonic()
        due = [slot for when, slot in self.restarts if when <= now]
        self.restarts = [(when, slot) for when, slot in self.restarts if when > now]
        for slot in due:
            self._spawn(slot)

    def _stop(self, signum: signal.Signals | None) -> None:
        if self.stopping_since is not None:
            if signum is not None:  # a second signal: do not wait any more
                self._signal_all(signal.SIGKILL)
            return
        self.stopping_since = time.monotonic()
        self.restarts.clear()
        self._signal_all(signal.SIGTERM)

    def _check_stop_deadline(self) -> None:
        if self.stopping_since is not None and time.monotonic() - self.stopping_since > self.policy.stop_timeout:
            print(f"modelctx: workers still running {self.policy.stop_timeout:g} s after SIGTERM; killing them",
                  file=sys.stderr, flush=True)
            self._signal_all(signal.SIGKILL)
            self.stopping_since = time.monotonic()  # then wait for the kernel to reap them

    def _signal_all(self, signum: signal.Signals) -> None:
        for pid in list(self.workers):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _kill_all(self) -> None:
        """Whatever ended the loop (even an exception here), no worker outlives it."""
        self._signal_all(signal.SIGKILL)
        for pid in list(self.workers):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.workers.clear()

    # -- a child -----------------------------------------------------------------------
    def _spawn(self, slot: int) -> None:
        self.parent_pid = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            self.workers[pid] = slot
            return
        os._exit(self._child(slot))  # never returns into the parent's loop

    def _child(self, slot: int) -> int:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in _STOP_SIGNALS:
                signal.signal(sig, _exit_quietly)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(self.ready_r)
            self.wake_r.close()
            self.wake_w.close()
            _die_with_parent(self.parent_pid)
            ready_w = self.ready_w

            def ready() -> None:
                os.write(ready_w, bytes([slot % 256]))

            self.run_worker(ready, slot)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - the child's last word before os._exit
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return code


def _note(signum: int, frame: object) -> None:
    """The parent's handler: the signal's number reaches the loop through the wakeup fd."""


def _exit_quietly(signum: int, frame: object) -> None:
    # A worker told to stop before uvicorn took over its signals (or after uvicorn
    # re-raised the one it handled) ends with status 0, without a KeyboardInterrupt trace.
    raise SystemExit(0)


def _die_with_parent(parent_pid: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    PR_SET_PDEATHSIG = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before prctl: no signal will come
        raise SystemExit(0)


def _describe(wait_status: int) -> str:
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"was killed by {name}"
    return f"exited with status {os.WEXITSTATUS(wait_status)}"
