"""``SqliteTaskStore``: the default ``TaskStore`` (``_task_store.py``), in one SQLite file.

``SqliteTaskStore`` runs every SQLite call on one thread of its own, so the event loop
never waits on the disk; tasks and their results survive a restart of the process.

Processes sharing one file (``--workers N``: every worker opens the same file). A task
records the process running it (``runner``: host name, pid and that process's start
time, so a pid the system reused for another process is not taken for the one that
died; and an epoch, so a server run again in one process fails its previous run's). At start (``fail_unfinished``) a process fails only the unfinished tasks whose
runner is gone, never those of a live sibling; a ``get`` fails a task whose runner is
gone, too, so a worker that died and was not restarted yet does not leave its tasks
"working" for their TTL. A runner on another host (the file on a shared volume) cannot
be checked from here and is taken to be alive: share tasks between hosts through Redis.
A task cancelled by a sibling (``tasks/cancel`` reaching another worker) is seen by its
runner within ``check_interval`` seconds (it reads the status of the tasks it runs, one
query for all), which stops the handler (``watch``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ._task_store import TERMINAL, TaskRecord

log = logging.getLogger("modelctx.server")

__all__ = ["SqliteTaskStore"]

T = TypeVar("T")


_LOST = "The process running this task stopped; its work was lost. Call the tool again."


def _stat(pid: int) -> tuple[str, str] | None:
    """The state and start time (clock ticks since boot) of process ``pid``, from
    Linux ``/proc``; None where that cannot be read (another system, or no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()  # after the command, which may hold spaces
        # Fields 3 and 22 of proc_pid_stat(5): the 1st and the 20th after the command.
        return fields[0].decode(), fields[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _started(pid: int) -> str | None:
    stat = _stat(pid)
    return None if stat is None else stat[1]


def _alive(pid: int, start: str) -> bool:
    """Is ``pid`` the live process that started at ``start`` (``r...``: not known)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    stat = _stat(pid)
    if stat is None:  # no /proc: the pid alone says
        return True
    state, started = stat
    # A zombie (killed, not reaped yet) runs nothing; a reused pid is another process.
    return state != "Z" and (start.startswith("r") or started == start)


class _Runner:
    """This process as the runner of tasks, ``host:pid:start:epoch``, and whether another
    runner named in a record is still running. ``start`` (the process's start time, or a
    random ``r...`` without ``/proc``) tells a reused pid from the process that died;
    ``epoch`` is renewed by each recovery (``renew``), so a server that runs again in the
    same process fails what its previous run left unfinished, as a new process would,
    while another store of the same process (another epoch it never had) is left alone."""

    def __init__(self) -> None:
        self._pid = 0
        self._host = socket.gethostname()
        self._process = ""  # host:pid:start
        self._id = ""
        self._earlier: set[str] = set()  # this process's earlier ids: their runs ended

    def _fresh(self) -> None:
        pid = os.getpid()
        if pid != self._pid:  # made again in a forked worker: one per process
            self._pid = pid
            start = _started(pid)
            # Without /proc, a random token: the pid alone is then checked.
            self._process = f"{self._host}:{pid}:{start if start is not None else 'r' + secrets.token_hex(8)}"
            self._id = f"{self._process}:{secrets.token_hex(4)}"
            self._earlier = set()

    @property
    def id(self) -> str:
        self._fresh()
        return self._id

    def renew(self) -> None:
        """Begin a new run: what the previous one left unfinished is gone from now on."""
        self._fresh()
        self._earlier.add(self._id)
        self._id = f"{self._process}:{secrets.token_hex(4)}"

    def gone(self, runner: str | None) -> bool:
        """Is the process run ``runner`` (a record's) gone? A record with none was
        written by a process that kept no runner (one process per file): gone once we run."""
        if runner is None:
            return True
        if runner == self.id:
            return False
        if runner in self._earlier:
            return True
        parts = runner.rsplit(":", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            return True  # not a runner this store wrote
        host, pid, start = parts[0], int(parts[1]), parts[2]
        if host != self._host:
            return False  # another host's process: not ours to judge
        return not _alive(pid, start)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    expires_at REAL,
    record BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_expiry ON tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_status ON tasks (status);
"""


class SqliteTaskStore:
    """A ``TaskStore`` in one SQLite file (``path``), or in memory for ``":memory:"``
    (the default: nothing survives the process; give a path for durable tasks)."""

    def __init__(self, path: str | Path = ":memory:", *, check_interval: float = 0.5) -> None:
        if check_interval <= 0:
            raise ValueError(f"check_interval must be positive, not {check_interval!r}")
        self.path = str(path)
        self.check_interval = check_interval
        # The unfinished tasks this process runs, checked every ``check_interval`` for an
        # end by another process's hand (a cancel on a sibling worker), for ``watch``.
        self._mine: set[str] = set()
        self._ended: Callable[[str, TaskRecord | None], None] | None = None
        self._checking: asyncio.Task[None] | None = None
        # One thread owns the connection: calls are serialized there, the loop never blocks.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="modelctx-tasks")
        self._db: sqlite3.Connection | None = None
        self._runner = _Runner()
        # What a task whose runner is gone is failed with (``fail_unfinished`` sets it).
        self._lost: tuple[dict[str, Any], str] = ({"code": -32603, "message": _LOST}, _LOST)

    @property
    def per_process(self) -> bool:
        """Whether only this process sees these tasks (``":memory:"``): with ``--workers``
        each worker has its own, and requests for a task are relayed to its worker."""
        return self.path == ":memory:"

    @property
    def runner_id(self) -> str:
        """This process as the runner of the tasks it creates (``host:pid:start:epoch``)."""
        return self._runner.id

    # -- the thread -----------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def work() -> T:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                value = fn(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return value

        return await asyncio.get_running_loop().run_in_executor(self._thread, work)

    @staticmethod
    def _load(db: sqlite3.Connection, task_id: str) -> TaskRecord | None:
        row = db.execute("SELECT record, expires_at FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        if row[1] is not None and row[1] <= time.time():
            db.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))
            return None
        return TaskRecord.from_json(row[0])

    @staticmethod
    def _save(db: sqlite3.Connection, record: TaskRecord) -> None:
        db.execute(
            "INSERT OR REPLACE INTO tasks (task_id, status, expires_at, record) VALUES (?, ?, ?, ?)",
            (record.task_id, record.status, record.expires_at, record.to_json()),
        )

    # -- TaskStore --------------------------------------------------------------------
    async def create(self, record: TaskRecord) -> None:
        if record.runner is None:
            record.runner = self._runner.id
        await self._run(lambda db: self._save(db, record))
        watched = self._ended is not None and not self.per_process
        if watched and record.runner == self._runner.id and not record.terminal:
            self._mine.add(record.task_id)
            if self._checking is None or self._checking.done():
                self._checking = asyncio.get_running_loop().create_task(self._check())

    @staticmethod
    def _ended_among(db: sqlite3.Connection, ids: list[str]) -> list[str]:
        """Those of ``ids`` that are terminal or gone (read 500 at a time)."""
        open_: set[str] = set()
        for at in range(0, len(ids), 500):
            chunk = ids[at : at + 500]
            marks = ",".join("?" * len(chunk))
            rows = db.execute(f"SELECT task_id, status FROM tasks WHERE task_id IN ({marks})", chunk).fetchall()
            open_.update(task_id for task_id, status in rows if status not in TERMINAL)
        return [task_id for task_id in ids if task_id not in open_]

    async def _check(self) -> None:
        """Every ``check_interval`` while this process runs tasks: tell ``watch`` of each
        that ended by another hand (cancelled by a sibling worker; gone)."""
        while self._mine:
            await asyncio.sleep(self.check_interval)
            ids = list(self._mine)
            try:
                done = await self._run(functools.partial(self._ended_among, ids=ids))
            except sqlite3.Error as exc:  # the file is busy or gone: look again next time
                log.warning("could not check the tasks this process runs: %s", exc)
                continue
            for task_id in done:
                self._mine.discard(task_id)
                if self._ended is not None:
                    self._ended(task_id, None)  # whoever ended it told its own listeners

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task; an unfinished one whose runner is gone is failed first (with the
        error and message ``fail_unfinished`` last used, else a generic one)."""

        def read(db: sqlite3.Connection) -> TaskRecord | None:
            record = self._load(db, task_id)
            if record is not None and not record.terminal and record.runner is not None:
                if self._runner.gone(record.runner):
                    self._fail(db, record, *self._lost)
            return record

        return await self._run(read)

    def _fail(self, db: sqlite3.Connection, record: TaskRecord, error: dict[str, Any], message: str) -> None:
        record.status, record.status_message, record.error = "failed", message, error
        record.input_requests, record.responses, record.updated_at = {}, {}, time.time()
        self._save(db, record)

    async def set_status(
        self,
        task_id: str,
        status: str,
        *,
        message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        def change(db: sqlite3.Connection) -> TaskRecord | None:
            record = self._load(db, task_id)
            if record is None or record.terminal:
                return None
            record.status, record.status_message = status, message
            record.result, record.error = result, error
            if status in TERMINAL:
                record.input_requests, record.responses = {}, {}
            record.updated_at = time.time()
            self._save(db, record)
            return record

        if status in TERMINAL:
            self._mine.discard(task_id)  # ended here: nothing to watch
        return await self._run(change)

    async def ask(self, task_id: str, requests: dict[str, Any]) -> TaskRecord | None:
        def change(db: sqlite3.Connection) -> TaskRecord | None:
            record = self._load(db, task_id)
            if record is None or record.terminal:
                return None
            record.input_requests.update(requests)
            record.status = "input_required"
            record.updated_at = time.time()
            self._save(db, record)
            return record

        return await self._run(change)

    async def answer(self, task_id: str, responses: dict[str, Any]) -> TaskRecord | None:
        def change(db: sqlite3.Connection) -> TaskRecord | None:
            record = self._load(db, task_id)
            if record is None:
                return None
            taken = [key for key in responses if key in record.input_requests]
            if not taken or record.terminal:
                return record
            for key in taken:
                del record.input_requests[key]
                record.responses[key] = responses[key]
            if not record.input_requests:
                record.status = "working"
            record.updated_at = time.time()
            self._save(db, record)
            return record

        return await self._run(change)

    async def take_answers(self, task_id: str, keys: list[str]) -> dict[str, Any]:
        def change(db: sqlite3.Connection) -> dict[str, Any]:
            record = self._load(db, task_id)
            if record is None:
                return {}
            taken = {key: record.responses.pop(key) for key in keys if key in record.responses}
            if taken:
                self._save(db, record)
            return taken

        return await self._run(change)

    async def purge_expired(self, now: float | None = None) -> int:
        moment = time.time() if now is None else now

        def purge(db: sqlite3.Connection) -> int:
            return db.execute("DELETE FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?", (moment,)).rowcount

        return await self._run(purge)

    async def fail_unfinished(self, error: dict[str, Any], message: str) -> int:
        """Fail the unfinished tasks whose runner is gone (a live sibling worker's are
        left running); how many."""
        self._lost = (error, message)
        self._runner.renew()

        def fail(db: sqlite3.Connection) -> int:
            rows = db.execute("SELECT record FROM tasks WHERE status IN ('working', 'input_required')").fetchall()
            failed = 0
            for (data,) in rows:
                record = TaskRecord.from_json(data)
                if self._runner.gone(record.runner):
                    self._fail(db, record, error, message)
                    failed += 1
            return failed

        return await self._run(fail)

    def watch(self, ended: Callable[[str, TaskRecord | None], None]) -> None:
        """Call ``ended(task_id, None)`` when a task this process runs ended by another
        process's hand (a file shared by ``--workers``: cancelled on a sibling), within
        ``check_interval`` seconds. A store in memory has no other hand: never called."""
        self._ended = ended

    async def count(self) -> int:
        def count(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT count(*) FROM tasks").fetchone()
            return int(row[0])

        return await self._run(count)

    async def close(self) -> None:
        if self._checking is not None:
            self._checking.cancel()
            self._checking = None

        def close() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await asyncio.get_running_loop().run_in_executor(self._thread, close)
        self._thread.shutdown(wait=False)
