"""`modelctx serve --http --workers N` and `server.run("http", workers=N)`: N forked
worker processes serving one port, each with its own lifespan; a worker that dies is
restarted, a crash loop or a failed lifespan ends the server with status 1, SIGTERM
stops every worker gracefully.

How a test reaches both workers: the kernel hands each new connection to a process
accepting on the shared socket; a tool that holds its worker's event loop (``hold``)
keeps that worker from accepting, so requests sent at the same time reach the other.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import DEADLINE, serve_command, wait_until
from scale_processes import PROTOCOL, Processes, ScaleError, free_port, post_json, tools_call

from modelctx import Server
from modelctx.transports._workers import max_workers, serve_workers

WORKERS_SERVER = textwrap.dedent('''
    import os
    import sys
    import time
    from contextlib import asynccontextmanager
    from pathlib import Path

    from modelctx import Context, Server


    def note(event):
        with Path(os.environ["WORKERS_LOG"]).open("a") as log:
            log.write(f"{event} {os.getpid()}\\n")


    @asynccontextmanager
    async def lifespan(server):
        note("start")
        if os.environ.get("LIFESPAN_FAIL"):
            raise RuntimeError(os.environ["LIFESPAN_FAIL"])
        try:
            yield {}
        finally:
            note("stop")


    server = Server("workers-demo", "1.0", lifespan=lifespan)


    @server.tool
    async def whoami(hold: float = 0.0) -> str:
        """This worker's pid, after holding its event loop for `hold` seconds."""
        time.sleep(hold)
        return str(os.getpid())


    @server.tool
    async def crash() -> str:
        """End this worker at once, as a fatal bug would."""
        os._exit(1)


    @server.tool
    async def confirm(ctx: Context, hold: float = 0.0) -> str:
        """Ask the user, then answer with the pid of the worker that got the answer."""
        answer = await ctx.elicit("Go on?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        time.sleep(hold)
        return f"{answer.action} {os.getpid()}"


    if __name__ == "__main__":
        server.run("http", port=int(sys.argv[1]), workers=2, ready_message="modelctx: serving by server.run")
''')


@pytest.fixture
def app(tmp_path: Path) -> Path:
    path = tmp_path / "workers_server.py"
    path.write_text(WORKERS_SERVER)
    return path


@pytest.fixture
def procs(tmp_path: Path) -> Any:
    with Processes(tmp_path / "procs") as started:
        yield started


def log_events(path: Path) -> list[tuple[str, int]]:
    if not path.exists():
        return []
    return [(event, int(pid)) for event, pid in (line.split() for line in path.read_text().splitlines())]


def text_of(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    return str(answer["result"]["content"][0]["text"])


def pids_answering(port: int, requests: int = 4, hold: float = 0.5) -> set[int]:
    """The pids of the workers that answered ``requests`` calls sent at once."""
    with ThreadPoolExecutor(requests) as pool:
        answers = list(pool.map(lambda _: post_json(port, tools_call("whoami", {"hold": hold})), range(requests)))
    return {int(text_of(a)) for a in answers}


def test_two_workers_serve_one_port_each_with_its_own_lifespan(app, procs, tmp_path):
    log = tmp_path / "events"
    replica = procs.start_replica(app, workers=2, env={"WORKERS_LOG": str(log)})
    pids = pids_answering(replica.port)
    assert len(pids) == 2 and replica.pid not in pids  # two workers, neither the supervisor
    assert sorted(pid for event, pid in log_events(log) if event == "start") == sorted(pids)
    output = replica.log()
    assert "(2 workers)" in output  # the ready line, once, when every worker is ready
    assert output.count("modelctx: serving") == 1
    # Without Redis each worker keeps its own sessions and listen streams: one line says so.
    assert output.count("workers without Redis") == 1 and "--redis URL" in output


def test_with_redis_configured_there_is_no_per_worker_warning(app, procs, tmp_path, redis_url):
    replica = procs.start_replica(app, workers=2, redis_url=redis_url, env={"WORKERS_LOG": str(tmp_path / "e")})
    assert text_of(post_json(replica.port, tools_call("whoami", {})))
    assert "without Redis" not in replica.log()


def test_a_worker_that_dies_is_restarted_and_the_port_keeps_answering(app, procs, tmp_path):
    log = tmp_path / "events"
    replica = procs.start_replica(app, workers=2, env={"WORKERS_LOG": str(log)})
    victim, survivor = sorted(pids_answering(replica.port))
    os.kill(victim, signal.SIGKILL)
    assert text_of(post_json(replica.port, tools_call("whoami", {})))  # the survivor answers meanwhile
    starts = wait_until(lambda: [p for e, p in log_events(log) if e == "start" and p not in (victim, survivor)],
                        "a new worker to run its lifespan")  # fmt: skip
    assert f"worker 1 (pid {victim}) was killed by SIGKILL; restarting it" in replica.log() or (
        f"worker 2 (pid {victim}) was killed by SIGKILL; restarting it" in replica.log()
    )
    wait_until(lambda: pids_answering(replica.port) == {survivor, starts[0]}, "the new worker to answer")
    replica.check_alive()


def test_sigterm_stops_every_worker_gracefully_through_server_run(app, procs, tmp_path):
    log = tmp_path / "events"
    port = free_port()
    supervisor = procs.start(
        "server-run", [sys.executable, str(app), str(port)], port,
        env={"WORKERS_LOG": str(log)}, ready_text="modelctx: serving by server.run (2 workers)",
    )  # fmt: skip
    pids = pids_answering(port)
    assert supervisor.stop(grace=DEADLINE) == 0
    events = log_events(log)
    assert sorted(p for e, p in events if e == "stop") == sorted(pids)  # each worker's lifespan ended
    assert "Traceback" not in supervisor.log()


def test_a_crash_loop_ends_the_server_with_status_1_and_says_why(app, procs, tmp_path):
    replica = procs.start_replica(app, workers=2, env={"WORKERS_LOG": str(tmp_path / "events")})
    give_up = time.monotonic() + DEADLINE
    while replica.alive() and time.monotonic() < give_up:
        try:
            post_json(replica.port, tools_call("crash", {}), timeout=2)
        except (OSError, ScaleError):
            pass  # the worker died under the request, or none is accepting right now
        time.sleep(0.05)
    assert replica.popen.wait(timeout=DEADLINE) == 1
    assert "workers keep dying (6 deaths within 60 s" in replica.log()


def test_a_lifespan_that_fails_in_a_worker_ends_the_server_with_status_1(app, tmp_path):
    done = subprocess.run(
        serve_command(app, "--http", "--port", str(free_port()), "--workers", "2"),
        env={**os.environ, "WORKERS_LOG": str(tmp_path / "events"), "LIFESPAN_FAIL": "no database"},
        capture_output=True, text=True, timeout=DEADLINE, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "its lifespan raised RuntimeError: no database" in done.stderr
    assert "failed to start: its lifespan failed" in done.stderr


def test_a_request_state_sealed_by_one_worker_opens_in_the_other(app, procs, tmp_path):
    replica = procs.start_replica(app, workers=2, env={"WORKERS_LOG": str(tmp_path / "events")})

    def confirm(**more: Any) -> dict[str, Any]:
        message = tools_call("confirm", {"hold": 0.5}, **more)
        message["params"]["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        }
        return post_json(replica.port, message)

    asked = confirm()["result"]
    assert asked["resultType"] == "input_required"
    key = next(iter(asked["inputRequests"]))
    answer = {"inputResponses": {key: {"action": "accept", "content": {"ok": True}}},
              "requestState": asked["requestState"]}  # fmt: skip
    # Sent at once, the retries reach both workers; only one of them sealed the state.
    with ThreadPoolExecutor(4) as pool:
        texts = [text_of(a) for a in pool.map(lambda _: confirm(**answer), range(4))]
    assert {t.split()[0] for t in texts} == {"accept"}
    assert len({t.split()[1] for t in texts}) == 2


def test_workers_need_http(app):
    done = subprocess.run(serve_command(app, "--workers", "2"), capture_output=True, text=True,
                          timeout=DEADLINE, check=False)  # fmt: skip
    assert done.returncode == 2
    assert "--workers runs HTTP worker processes; add --http" in done.stderr


def test_more_workers_than_the_machine_can_use_are_refused_before_any_fork(app):
    # --workers 100000 once forked until the machine ran out of memory.
    too_many = max_workers() + 1
    done = subprocess.run(serve_command(app, "--http", "--port", "1", "--workers", str(too_many)),
                          capture_output=True, text=True, timeout=DEADLINE, check=False)  # fmt: skip
    assert done.returncode == 2
    assert f"{too_many} workers is more than this machine can use: at most {max_workers()}" in done.stderr
    with pytest.raises(ValueError, match="more than this machine can use"):
        Server("many").run("http", port=1, workers=too_many)  # the API refuses it too, before binding


def test_workers_refuse_to_fork_inside_an_event_loop():
    async def main() -> None:
        serve_workers(2, lambda ready: None)

    with pytest.raises(RuntimeError, match="cannot run inside an event loop"):
        asyncio.run(main())


def test_workers_on_a_platform_without_fork_say_what_to_do(monkeypatch):
    monkeypatch.delattr(os, "fork")  # as on Windows: the real call cannot run here
    with pytest.raises(SystemExit, match="needs fork\\(\\), which this platform lacks"):
        serve_workers(2, lambda ready: None)
