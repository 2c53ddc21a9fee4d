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
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import DEADLINE, wait_until
from scale_processes import PROTOCOL, Processes

TASKS = "io.modelcontextprotocol/tasks"

TASKS_SERVER = textwrap.dedent('''
    import asyncio
    import os
    import sys
    import time
    from pathlib import Path

    from modelctx import Server, ServerConfig

    server = Server("workers-tasks", "1.0", config=ServerConfig(task_db=os.environ.get("TASK_DB")))


    @server.tool(task="required")
    async def hold(tag: str) -> str:
        """Note which worker runs task `tag`, then run until the test ends."""
        with Path(os.environ["TASK_LOG"]).open("a") as log:
            log.write(f"{tag} {os.getpid()}\\n")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            with Path(os.environ["TASK_LOG"]).open("a") as log:
                log.write(f"cancelled-{tag} {os.getpid()}\\n")
            raise
        return tag


    @server.tool
    async def whoami(hold: float = 0.0) -> str:
        """This worker's pid, after holding its event loop for `hold` seconds."""
        time.sleep(hold)
        return str(os.getpid())


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


def pid_of(port: int, hold: float = 0.0) -> int:
    return int(rpc(port, "tools/call", {"name": "whoami", "arguments": {"hold": hold}}, "whoami")["content"][0]["text"])


def started(log: Path) -> dict[str, int]:
    """Tag -> the pid of the worker running that task."""
    if not log.exists():
        return {}
    return {tag: int(pid) for tag, pid in (line.split() for line in log.read_text().splitlines())}


def status(port: int, task: str) -> str:
    return str(rpc(port, "tasks/get", {"taskId": task}, task)["status"])


def start_beside_a_held_worker(port: int, tag: str) -> str:
    """Create task ``tag`` while a ``whoami`` holds one worker's loop: the other takes it."""
    holding = threading.Thread(target=pid_of, args=(port, 0.6))
    holding.start()
    time.sleep(0.15)
    try:
        result = rpc(port, "tools/call", {"name": "hold", "arguments": {"tag": tag}}, "hold")
    finally:
        holding.join()
    assert result["resultType"] == "task", result
    return str(result["taskId"])


@pytest.fixture
def procs(tmp_path: Path) -> Any:
    with Processes(tmp_path / "procs") as running:
        yield running


def test_a_worker_restarted_after_a_crash_fails_only_the_tasks_of_the_dead_one(procs, tmp_path):
    # The restarted worker failed every unfinished task in the file, its live sibling's too.
    script, log = tmp_path / "tasks_server.py", tmp_path / "started"
    script.write_text(TASKS_SERVER)
    env = {"TASK_DB": str(tmp_path / "tasks.db"), "TASK_LOG": str(log)}
    replica = procs.start_script(script, env=env)
    tasks: dict[str, str] = {}
    for attempt in range(12):  # until each worker runs one task
        tag = f"t{attempt}"
        tasks[tag] = start_beside_a_held_worker(replica.port, tag)
        wait_until(lambda tag=tag: tag in started(log), "the task's handler to start")
        if len(set(started(log).values())) == 2:
            break
    runners = started(log)
    assert len(set(runners.values())) == 2, runners
    victim = runners[tag]
    survivor_tasks = [tasks[t] for t, pid in runners.items() if pid != victim]
    victim_tasks = [tasks[t] for t, pid in runners.items() if pid == victim]

    os.kill(victim, signal.SIGKILL)
    # Any worker that reads a task of the dead one fails it at once (the survivor, here,
    # before the supervisor's restart is done or after).
    wait_until(
        lambda: all(status(replica.port, t) == "failed" for t in victim_tasks), "the dead worker's tasks to fail"
    )
    # The restarted worker recovers the store before its first use: make it run a task.
    for attempt in range(12):
        tag = f"after{attempt}"
        tasks[tag] = start_beside_a_held_worker(replica.port, tag)
        wait_until(lambda tag=tag: tag in started(log), "the task's handler to start")
        if started(log)[tag] not in runners.values():
            break
    assert started(log)[tag] not in runners.values(), "no task reached the restarted worker"
    for task in survivor_tasks:
        assert status(replica.port, task) == "working"  # the live sibling's tasks run on
    assert status(replica.port, tasks[tag]) == "working"
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


def test_without_a_task_file_a_request_for_a_task_reaching_the_other_worker_is_relayed_to_it(procs, tmp_path):
    # Each worker kept its own tasks in memory: tasks/get reaching the other said "no task".
    script, log = tmp_path / "tasks_server.py", tmp_path / "started"
    script.write_text(TASKS_SERVER)
    replica = procs.start_script(script, env={"TASK_DB": None, "TASK_LOG": str(log)})
    output = replica.log()
    assert "tasks are kept in memory by the worker that created them" in output and "task_db" in output
    task = start_beside_a_held_worker(replica.port, "mem")
    runner = wait_until(lambda: started(log).get("mem"), "the task's handler to start")
    relayed = 0
    for _ in range(12):  # until a tasks/get surely reached the other worker: the runner was held
        held: list[int] = []
        holding = threading.Thread(target=lambda held=held: held.append(pid_of(replica.port, 0.6)))
        holding.start()
        time.sleep(0.15)
        try:
            assert status(replica.port, task) == "working"
        finally:
            holding.join()
        relayed += held == [runner]
        if relayed:
            break
    assert relayed, "no tasks/get reached the other worker"
    # A cancel from either worker reaches the task's handler in its worker.
    assert rpc(replica.port, "tasks/cancel", {"taskId": task}, task)["resultType"] == "complete"
    assert wait_until(lambda: started(log).get("cancelled-mem"), "the handler to be cancelled") == runner
    for _ in range(4):
        assert status(replica.port, task) == "cancelled"
    replica.check_alive()
