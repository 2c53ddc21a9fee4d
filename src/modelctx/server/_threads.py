"""Where plain (sync) handlers run: a few long-lived worker threads, shared by the process.

A sync handler must not run on the event loop: it may block (a database, a file, an HTTP
call) and would stall every request of the server. ``asyncio.to_thread`` keeps it off
the loop, but each call costs a ``concurrent.futures`` future chained to an asyncio one,
an executor work item, and a wake-up of the loop for each answer.

Here a call is one tuple put on a C ``queue.SimpleQueue`` and one asyncio future. A
worker takes calls while there are any; each answer goes into its loop's ``_Outbox``,
and the loop is woken once for all the answers that arrive before it looks (one write
to an eventfd the loop watches, for many answers). Against ``call_soon_threadsafe``
the hop alone went from 30 [28-35] to 26 [24-39] us of CPU a call one at a time, and
stayed at 3 with 100 in flight (``bench/stdio_sync.py --hop``, medians of 5 on a loaded
box). Measured in one process on a shared 2-core
box (the hop alone, an echo): ``to_thread`` did 8,000-15,000 calls/s one at a time and
20,000-50,000 with 64 in flight; this does 11,000-35,000 and 90,000-400,000. One at a
time, what is left is the wake-ups of two threads per call, which a loaded machine makes
slow: ``inline=True`` (see ``call_handler``) avoids them for handlers that never block.

Where the rest of a ``def`` tool's cost goes, and why the hop stays the default (issue
25; each thread's on-CPU time from ``/proc/PID/task/*/schedstat``, stdio handshake driver,
one call at a time, 20,000 calls, medians of 5 rounds, the servers interleaved): the loop
thread is scheduled 2.8-3.1 times a call against 1.0 for an ``async def`` tool, the worker
2.0-2.6 times, and the def tool costs 85-102 us of CPU a call against 61 and 88 (async, two
runs) and 46-48 (``inline``). The extra scheduling is the two wake-ups and, most likely
(not traced: perf counters on this VM slow every context switch), a wait for the GIL on
most calls: the worker's write to the eventfd releases the GIL, the woken loop takes it,
and the worker sleeps until the loop lets it go again. Tried instead, the same tool
interleaved with this code in the same rounds (load averages 1-5):

- The loop waiting for the answer of its only call in flight (a lock taken with a 0.5 ms
  timeout, the GIL released; the answer handed over without the eventfd): 29-31 us of CPU
  a hop in process against 21-23 here; over stdio 106 [81-110] against 135 [121-152] us a
  call at load 5 and 123 [113-144] against 134 [68-159] at load 1, still 2.4x the async
  tool's 43; waiting at submission serialised pipelined calls (4,000 in flight: 9,400
  against 20,100 calls/s), so the wait ran after the ready callbacks; it blocks the loop
  up to the timeout for a handler not yet seen to be slow.
- Putting calls on the queue after the loop's ready callbacks (so the worker wakes while
  the loop sleeps, not while it holds the GIL): scheduling unchanged (3.2 / 2.6 a call),
  30.8 against 21.3 us a hop in process, 87 [73-91] against 101 [88-128] us a call over
  stdio at load 5: mixed, nowhere near 1.3x of async.
- The worker spinning 0.2 ms for the next call before it sleeps (``time.sleep(0)``
  between looks, the only way to spin without the GIL): 168 [168-210] against 135 us a
  call and 2,000 against 2,700 calls/s: a spinning thread fights the loop for the GIL.
- Waking the loop with the GIL held (``ctypes.PyDLL``'s ``eventfd_write``): more
  scheduling (3.7-4.0 / 3.0 a call), CPU within the noise.

Running the handler on the loop after it has been quick for a while (adaptive promotion)
would reach the inline figures but stalls every other request when such a handler does
block (a path that is a FIFO, a slow disk): a thread cannot be interrupted and a loop cannot
move. So a ``def`` tool keeps paying for two hand-offs between threads (21-30 us of CPU in
process, more under load); ``inline=True`` is the opt-in for handlers that never block.

Workers start when needed, up to ``MAX_WORKERS`` (what asyncio's default executor would
use): when a call arrives and no worker waits for one, and when a worker takes a call
(which may block) while others wait behind it and no other worker is free. So handlers
that block still run side by side, and a call never waits behind a blocked one while a
worker could start. Each call runs in a copy of the caller's ``contextvars`` context, as
with ``asyncio.to_thread``. A call whose future was cancelled before it started is
skipped; one already running finishes in its thread (a thread cannot be interrupted) and
its answer is dropped. Workers are daemon threads: a handler stuck in a blocking call
never holds up the end of the process.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_WORKERS", "run_in_worker"]

#: How many sync handlers may run (and block) at once; further calls wait in the queue.
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)

_Answer = tuple["asyncio.Future[Any]", Any, "BaseException | None"]


#: Seconds a loop goes without sync calls before its eventfd is closed (reopened at the
#: next call): a loop serving them keeps it, a loop done with them holds no descriptor.
_IDLE_CLOSE = 1.0


class _Outbox:
    """The answers for one event loop, handed over with one wake-up for as many as arrive
    before the loop gets to them.

    The wake-up is an ``eventfd`` the loop watches (one write from the worker, one read
    on the loop) where the platform and the loop have them; else ``call_soon_threadsafe``
    (a handle, a write to the loop's self-pipe and two reads of it). The eventfd is
    opened at a call and closed once the loop has had none in flight for
    ``_IDLE_CLOSE`` seconds (or when the outbox is freed with its loop); a worker writes
    it under ``_lock``, so never after it is closed.
    """

    __slots__ = (
        "__weakref__", "_answers", "_loop", "_scheduled", "_fd", "_lock", "_pending", "_idle_since", "_timer",
        "_finalizer",
    )  # fmt: skip

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # the loop owns its outbox, not the other way round
        self._answers: deque[_Answer] = deque()
        self._scheduled = False
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._finalizer: weakref.finalize[..., Any] | None = None
        self._pending = 0  # calls of this loop not yet settled (the loop's thread only)
        self._idle_since = 0.0
        # An idle check is scheduled. A flag, not the handle: the handle holds the loop,
        # and the loop's outbox must not (the WeakKeyDictionary would keep it forever).
        self._timer = False

    def expect(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop, for each call submitted: open the wake-up if it is closed."""
        self._pending += 1
        if self._fd is None and self._finalizer is None:
            fd = _watched_eventfd(loop, self._settle)
            if fd is not None:
                self._finalizer = weakref.finalize(self, os.close, fd)
                self._fd = fd

    def put(self, answer: _Answer) -> None:
        """From a worker: queue an answer; wake the loop unless a wake-up is pending."""
        self._answers.append(answer)
        # Appended before the flag is read: if _settle has already cleared the flag, we
        # schedule another; if not, the answer is still in the deque it drains.
        if self._scheduled:
            return
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
            if self._fd is not None:
                os.eventfd_write(self._fd, 1)
                return
        loop = self._loop()
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._settle)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for these answers any more

    def _settle(self) -> None:
        """On the loop: complete the futures of every answer (skipping cancelled ones)."""
        if self._fd is not None:
            try:
                os.eventfd_read(self._fd)
            except BlockingIOError:
                pass  # a wake-up already counted by an earlier read
        self._scheduled = False
        answers = self._answers
        settled = 0
        while answers:
            future, value, error = answers.popleft()
            settled += 1
            if future.cancelled():
                continue
            if error is None:
                future.set_result(value)
            else:
                future.set_exception(error)
        self._pending -= settled
        if not self._pending and self._fd is not None:
            loop = self._loop()
            if loop is not None:
                self._idle_since = loop.time()
                if not self._timer:
                    self._timer = True
                    loop.call_later(_IDLE_CLOSE, self._close_if_idle)

    def _close_if_idle(self) -> None:
        """On the loop: close the eventfd if no call came for ``_IDLE_CLOSE`` seconds."""
        self._timer = False
        loop = self._loop()
        if loop is None or self._pending or self._fd is None:
            return  # a call in flight re-arms this when it is settled
        left = self._idle_since + _IDLE_CLOSE - loop.time()
        if left > 0:
            self._timer = True
            loop.call_later(left, self._close_if_idle)
            return
        with self._lock:
            fd, finalizer = self._fd, self._finalizer
            self._fd = self._finalizer = None
            # A worker may have raised the flag (and written the eventfd) for an answer
            # that a _settle already running had taken: its wake-up dies with the fd,
            # so the flag goes down with it. Left up, every later put() would see a
            # wake-up pending that never comes, and its answers would wait forever.
            self._scheduled = False
        loop.remove_reader(fd)
        if finalizer is not None:
            finalizer()  # closes fd, once


def _watched_eventfd(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> int | None:
    """A non-blocking eventfd that ``loop`` calls ``callback`` for when it is written;
    None where there is none (not Linux) or the loop cannot watch a descriptor."""
    if not hasattr(os, "eventfd"):
        return None
    fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    try:
        loop.add_reader(fd, callback)
    except (NotImplementedError, RuntimeError, ValueError, OSError):
        os.close(fd)
        return None
    return fd


_Job = tuple[_Outbox, "asyncio.Future[Any]", contextvars.Context, Callable[..., Any], dict[str, Any]]


class _Workers:
    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # Workers blocked on the queue or about to be; written only under _lock. Read
        # without it: a worker that has just taken a call may still be counted, but it
        # checks the queue itself once it has counted itself out (_cover_queue).
        self._idle = 0
        self._outboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Outbox] = (
            weakref.WeakKeyDictionary()
        )

    def submit(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        outbox = self._outboxes.get(loop)
        if outbox is None:
            outbox = self._outboxes[loop] = _Outbox(loop)
        future: asyncio.Future[Any] = loop.create_future()
        outbox.expect(loop)
        self._queue.put((outbox, future, contextvars.copy_context(), fn, kwargs))
        if not self._idle and len(self._threads) < self.max_workers:
            self._start_worker()
        return future

    def _start_worker(self) -> None:
        with self._lock:
            if len(self._threads) >= self.max_workers:
                return
            name = f"modelctx-handler-{len(self._threads) + 1}"
            thread = threading.Thread(target=self._work, name=name, daemon=True)
            self._threads.append(thread)
        thread.start()

    def _cover_queue(self) -> None:
        """Before running a call that may block: if calls wait behind it and no worker
        is free to take them, start one."""
        if not self._idle and not self._queue.empty() and len(self._threads) < self.max_workers:
            self._start_worker()

    def _work(self) -> None:
        get, get_nowait, lock = self._queue.get, self._queue.get_nowait, self._lock
        with lock:
            self._idle += 1
        job = get()
        while True:
            with lock:
                self._idle -= 1
            while True:  # take calls while there are any, without counting in and out
                self._cover_queue()
                outbox, answer = _run(job)
                try:
                    job = get_nowait()
                except queue.Empty:
                    break
                outbox.put(answer)
            with lock:
                self._idle += 1
            # The last answer goes out just before this thread blocks: the loop it wakes
            # then finds the GIL free instead of waiting for it.
            outbox.put(answer)
            job = get()


def _run(job: _Job) -> tuple[_Outbox, _Answer]:
    """Run one call; its outbox and the answer to put there."""
    outbox, future, context, fn, kwargs = job
    if future.cancelled():  # cancelled before it started: skip it, as an executor does
        return outbox, (future, None, None)  # _settle skips a cancelled future
    try:
        return outbox, (future, context.run(fn, **kwargs), None)
    except StopIteration as exc:
        # An asyncio future refuses StopIteration (it would end the awaiting coroutine).
        error = RuntimeError(f"handler {getattr(fn, '__name__', fn)!r} raised StopIteration")
        error.__cause__ = exc
        return outbox, (future, None, error)
    except BaseException as exc:  # noqa: BLE001 - the awaiting task gets it, as with to_thread
        return outbox, (future, None, exc)


_workers = _Workers(MAX_WORKERS)


def _reset_after_fork() -> None:
    # A forked child has none of the parent's threads: start again with none.
    global _workers
    _workers = _Workers(MAX_WORKERS)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def run_in_worker(fn: Callable[..., Any], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
    """Call ``fn(**kwargs)`` on a worker thread; a future of its result on the running loop.

    The call runs in a copy of the caller's ``contextvars`` context. Cancelling the
    future skips a call that has not started and drops the answer of one that has.
    """
    return _workers.submit(fn, kwargs)
