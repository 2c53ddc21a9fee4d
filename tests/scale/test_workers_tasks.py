"""Tasks under ``--workers N``.

With a SQLite task file every worker opens the same file. A task records the process running it (host, pid and start time); when a worker starts
(a restart after one died) it fails only the unfinished tasks of processes that are
gone, never those a live sibling is running, and a ``tasks/get`` on any worker fails a
task whose runner died. Real workers (``server.run("http", workers=2)``), killed with
SIGKILL as a crash would.

With no task file nor Redis each worker keeps its tasks in memory: a task's id names
its worker (``w1-...``) and a request for it outside a session (2026-07-28, whose
``Mcp-Name`` is the task id) that reaches another worker is relayed to it, as requests
of a handshake session are (``transports._siblings``); the start warning says so.
"""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.scale_processes import PROTOCOL, Processes
from tests.support.wire import DEADLINE, wait_until

TASKS = "io.modelcontextprotocol/tasks"

TASKS_SERVER = textwrap.dedent('''
    import asyncio
    import os
    import sys
    import time
    from pathlib import Path

    from modelctx import Server, ServerConfig

    server = Server("workers-tasks", "1.0", config=ServerConfig(task_db=os.environ.get("TASK_DB")))
    LOG = Path(os.environ["TASK_LOG"])


    def note(event):
        with LOG.open("a") as log:
            log.write(f"{event} {os.getpid()}\\n")


    @server.tool(task="required")
    async def hold(tag: str) -> str:
        """Note which worker runs task `tag`, then run until cancelled. While a file
        `block-<tag>` appears beside the log, hold this worker's loop for a second (so
        the other worker takes the connections made meanwhile)."""
        note(tag)
        block = LOG.with_name(f"block-{tag}")
        try:
            while True:
                await asyncio.sleep(0.02)
                if block.exists():
                    block.unlink()
                    note(f"blocked-{tag}")
                    time.sleep(1.0)
        except asyncio.CancelledError:
            note(f"cancelled-{tag}")
            raise


    if __name__ == "__main__":
        server.run("http", port=int(sys.argv[2]), workers=2, ready_message="modelctx: serving tasks")
''')


def rpc(port: int, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}  # fmt: skip
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": PROTOCOL, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    # A new connection each time: the kernel hands it to whichever worker accepts.
    with httpx.Client(timeout=DEADLINE) as client:
        answer: dict[str, Any] = client.post(f"http://127.0.0.1:{port}/mcp", json=message, headers=headers).json()
    assert "result" in answer, answer
    return answer["result"]


def started(log: Path) -> dict[str, int]:
    """Event (a task's tag, ``blocked-<tag>``, ``cancelled-<tag>``) -> the pid of its worker."""
    if not log.exists():
        return {}
    return {tag: int(pid) for tag, pid in (line.split() for line in log.read_text().splitlines())}


def status(port: int, task: str) -> str:
    return str(rpc(port, "tasks/get", {"taskId": task}, task)["status"])


def start(port: int, log: Path, tag: str) -> tuple[str, int]:
    """Create task ``tag``; its id and the pid of the worker running it."""
    result = rpc(port, "tools/call", {"name": "hold", "arguments": {"tag": tag}}, "hold")
    assert result["resultType"] == "task", result
    return str(result["taskId"]), wait_until(lambda: started(log).get(tag), f"task {tag} to start")


def while_blocked(log: Path, tag: str, send: Any) -> Any:
    """``send()``'s answer, sent while the worker running task ``tag`` holds its loop:
    the connection goes to the other worker."""
    log.with_name(f"block-{tag}").touch()
    wait_until(lambda: f"blocked-{tag}" in started(log), f"task {tag} to hold its worker", timeout=5)
    answer = send()
    log.write_text(
        "".join(line + "\n" for line in log.read_text().splitlines() if not line.startswith(f"blocked-{tag} "))
    )
    return answer


def serve(procs: Processes, tmp_path: Path, task_db: str | None) -> tuple[Any, Path]:
    script, log = tmp_path / "tasks_server.py", tmp_path / "events"
    script.write_text(TASKS_SERVER)
    return procs.start_script(script, env={"TASK_DB": task_db, "TASK_LOG": str(log)}), log


@pytest.fixture
def procs(tmp_path: Path) -> Any:
    with Processes(tmp_path / "procs") as running:
        yield running


def test_a_worker_restarted_after_a_crash_fails_only_the_tasks_of_the_dead_one(procs, tmp_path):
    # The restarted worker failed every unfinished task in the file, its live sibling's too.
    replica, log = serve(procs, tmp_path, str(tmp_path / "tasks.db"))
    port = replica.port
    survivor_task, survivor = start(port, log, "a")
    victim_task, victim = while_blocked(log, "a", lambda: start(port, log, "b"))
    assert victim != survivor

    os.kill(victim, signal.SIGKILL)
    # Any worker that reads a task of the dead one fails it at once.
    assert wait_until(lambda: status(port, victim_task) == "failed", "the dead worker's task to fail")
    assert status(port, survivor_task) == "working"
    # The restarted worker recovers the store before its first use: make it run a task.
    _, restarted = while_blocked(log, "a", lambda: start(port, log, "c"))
    assert restarted not in (survivor, victim)
    assert status(port, survivor_task) == "working"  # the live sibling's task runs on
    assert started(log).get("cancelled-a") is None
    replica.check_alive()


def test_a_task_cancelled_through_the_other_worker_stops_its_handler(procs, tmp_path):
    # The cancel was written to the file, and the handler ran on in its worker until its end.
    replica, log = serve(procs, tmp_path, str(tmp_path / "tasks.db"))
    task, runner = start(replica.port, log, "c")
    answer = while_blocked(log, "c", lambda: rpc(replica.port, "tasks/cancel", {"taskId": task}, task))
    assert answer["resultType"] == "complete"
    assert wait_until(lambda: started(log).get("cancelled-c"), "the handler to be cancelled") == runner
    assert status(replica.port, task) == "cancelled"


def test_without_a_task_file_a_request_for_a_task_reaching_the_other_worker_is_relayed_to_it(procs, tmp_path):
    # Each worker kept its own tasks in memory: tasks/get reaching the other said "no task".
    replica, log = serve(procs, tmp_path, None)
    output = replica.log()
    assert "tasks are kept in memory by the worker that created them" in output and "task_db" in output
    task, runner = start(replica.port, log, "m")
    assert while_blocked(log, "m", lambda: status(replica.port, task)) == "working"
    # A cancel reaching the other worker reaches the handler in its worker.
    answer = while_blocked(log, "m", lambda: rpc(replica.port, "tasks/cancel", {"taskId": task}, task))
    assert answer["resultType"] == "complete"
    assert wait_until(lambda: started(log).get("cancelled-m"), "the handler to be cancelled") == runner
    assert status(replica.port, task) == "cancelled"
    replica.check_alive()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="start times are read from Linux /proc")
def test_a_reused_pid_a_zombie_and_another_host_are_told_apart(tmp_path):
    # The runner a record names is judged by its host, pid and start time: a pid the
    # system gave to a new process, or a killed worker not reaped yet, runs nothing.
    import asyncio
    import socket
    import subprocess
    import sys

    from modelctx.server import SqliteTaskStore, TaskRecord

    host = socket.gethostname()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = Path(f"/proc/{child.pid}/stat").read_bytes().rpartition(b")")[2].split()[19].decode()
        runners = {
            "live": f"{host}:{child.pid}:{start}:e1",
            "reused": f"{host}:{child.pid}:{int(start) - 1}:e1",  # same pid, an earlier process
            "elsewhere": f"another-{host}:1:1:e1",  # not ours to judge
            "zombie": f"{host}:{child.pid}:{start}:e1",
        }

        async def main() -> dict[str, str]:
            store = SqliteTaskStore(tmp_path / "tasks.db")
            now = time.time()
            for name, runner in runners.items():
                await store.create(TaskRecord(name, "working", now, now, None, 50, runner=runner))
            before = {name: (await store.get(name)).status for name in ("live", "reused", "elsewhere")}
            child.kill()
            time.sleep(0.2)  # killed, and not reaped: a zombie
            assert Path(f"/proc/{child.pid}/stat").read_bytes().rpartition(b")")[2].split()[0] == b"Z"
            failed = await store.fail_unfinished({"code": -32603, "message": "lost"}, "lost")
            after = {name: (await store.get(name)).status for name in runners}
            await store.close()
            return {**{f"{k} before": v for k, v in before.items()}, **after, "failed": str(failed)}

        seen = asyncio.run(main())
    finally:
        child.kill()
        child.wait()
    assert seen == {"live before": "working", "reused before": "failed", "elsewhere before": "working",
                    "live": "failed", "reused": "failed", "zombie": "failed", "elsewhere": "working", "failed": "2"}  # fmt: skip


def test_a_server_run_again_in_one_process_fails_what_its_previous_run_left(tmp_path):
    # One process, two runs of one store (a server stopped and run again): the first
    # run's unfinished task is lost, as after a restart; another store's is not touched.
    import asyncio

    from modelctx.server import SqliteTaskStore, TaskRecord

    async def main() -> tuple[str, str, int]:
        again, beside = SqliteTaskStore(tmp_path / "tasks.db"), SqliteTaskStore(tmp_path / "tasks.db")
        lost = {"code": -32603, "message": "lost"}
        for store in (again, beside):
            await store.fail_unfinished(lost, "lost")  # each starts its first run
        now = time.time()
        await again.create(TaskRecord("first-run", "working", now, now, None, 50))
        await beside.create(TaskRecord("beside", "working", now, now, None, 50))
        failed = await again.fail_unfinished(lost, "lost")  # its second run starts
        statuses = ((await again.get("first-run")).status, (await again.get("beside")).status)
        for store in (again, beside):
            await store.close()
        return *statuses, failed

    assert asyncio.run(main()) == ("failed", "working", 1)
