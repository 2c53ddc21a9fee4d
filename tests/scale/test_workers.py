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

import httpx
import pytest

from modelctx import Client, Server
from modelctx.client import ClientHandlers
from modelctx.transports._workers import max_workers, serve_workers
from tests.support.scale_processes import PROTOCOL, Processes, ScaleError, free_port, post_json, tools_call
from tests.support.wire import DEADLINE, async_test, serve_command, wait_until

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
    async def ask(ctx: Context) -> str:
        """Ask the user (elicitation), the model (sampling) and the client's roots, then
        answer with what came back and the pid of the worker that ran the call."""
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        sampled = await ctx.sample("Say hi", max_tokens=5)
        roots = await ctx.list_roots()
        return f"{answer.content['name']} {sampled['content']['text']} {roots[0]['uri']} {os.getpid()}"


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
        serve_workers(2, lambda ready, slot: None)

    with pytest.raises(RuntimeError, match="cannot run inside an event loop"):
        asyncio.run(main())


def test_workers_on_a_platform_without_fork_say_what_to_do(monkeypatch):
    monkeypatch.delattr(os, "fork")  # as on Windows: the real call cannot run here
    with pytest.raises(SystemExit, match="needs fork\\(\\), which this platform lacks"):
        serve_workers(2, lambda ready, slot: None)


# -- handshake-era sessions across workers without Redis (transports/_siblings.py) -------------
LEGACY = "2025-11-25"
CALLS = 8  # each on new connections: an answer reaches either worker, 1 in 2 the other one


async def _elicit(request: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "ada"}}


async def _sample(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m", "stopReason": "endTurn"}


async def _roots() -> list[dict[str, Any]]:
    return [{"uri": "file:///work", "name": "work"}]


async def _ask_with_our_client(url: str) -> str:
    handlers = ClientHandlers(elicitation=_elicit, sampling=_sample, roots=_roots)
    async with Client(url, mode="handshake", timeout=DEADLINE, handlers=handlers) as client:
        result = await client.call_tool("ask", {})
        return str(result.content[0].text)


async def _ask_with_the_official_client(url: str) -> str:
    import mcp_types as types
    from mcp import Client as OfficialClient

    async def elicit(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"name": "ada"})

    async def sample(context: Any, params: Any) -> Any:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="hi"),
                                         model="m", stopReason="endTurn")  # fmt: skip

    async def roots(context: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    client = OfficialClient(url, mode="legacy", elicitation_callback=elicit, sampling_callback=sample,
                            list_roots_callback=roots, read_timeout_seconds=DEADLINE)  # fmt: skip
    async with client as connected:
        result = await connected.call_tool("ask", {})
        return str(result.content[0].text)


@pytest.mark.parametrize("redis", [False, True], ids=["without-redis", "with-redis"])
@async_test(deadline=180)
async def test_answers_to_the_servers_questions_reach_the_waiting_tool_on_either_worker(app, procs, tmp_path, redis,
                                                                                      request):  # fmt: skip
    # Before: the answer that reached the other worker was dropped (with Redis: 202, both
    # workers had one name on the channel) or refused (without: 404), and the tool waited
    # until its deadline: 0 of 6 calls of our Client succeeded.
    redis_url = request.getfixturevalue("redis_url") if redis else None
    replica = await asyncio.to_thread(procs.start_replica, app, workers=2, redis_url=redis_url,
                                      env={"WORKERS_LOG": str(tmp_path / "events")})  # fmt: skip
    answers = []
    for ask in (_ask_with_our_client, _ask_with_the_official_client):
        for _ in range(CALLS):
            answers.append(await asyncio.wait_for(ask(replica.url), DEADLINE))
    assert len(answers) == 2 * CALLS
    assert {answer.rsplit(" ", 1)[0] for answer in answers} == {"ada hi file:///work"}
    assert len({answer.rsplit(" ", 1)[1] for answer in answers}) == 2  # sessions held by both workers
    replica.check_alive()
    assert "Traceback" not in replica.log()


def _open_session(client: httpx.Client, url: str) -> dict[str, str]:
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": LEGACY}
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    opened = client.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params},
                         headers=headers)  # fmt: skip
    assert opened.status_code == 200, opened.text
    headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    initialized = client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert initialized.status_code == 202
    return headers


def _whoami(url: str, headers: dict[str, str], request_id: int) -> httpx.Response:
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
    with httpx.Client(timeout=DEADLINE) as fresh:  # a new connection: either worker accepts it
        return fresh.post(url, json=call, headers=headers)


def test_every_request_of_a_session_is_served_by_the_worker_that_holds_it(app, procs, tmp_path):
    # Before: a request of the session that reached the other worker got 404 there, and
    # the client had to open a new session.
    replica = procs.start_replica(app, workers=2, env={"WORKERS_LOG": str(tmp_path / "events")})
    with httpx.Client(timeout=DEADLINE) as client:
        headers = _open_session(client, replica.url)
        replies = [_whoami(replica.url, headers, n) for n in range(1, 13)]
        assert [reply.status_code for reply in replies] == [200] * 12
        assert len({reply.json()["result"]["content"][0]["text"] for reply in replies}) == 1
        with httpx.Client(timeout=DEADLINE) as fresh:
            assert fresh.delete(replica.url, headers=headers).status_code == 200
        assert _whoami(replica.url, headers, 13).status_code == 404  # ended, for both workers
    assert "Traceback" not in replica.log()


def test_the_sessions_of_a_worker_that_died_are_404_on_every_worker_and_the_server_goes_on(app, procs, tmp_path):
    replica = procs.start_replica(app, workers=2, env={"WORKERS_LOG": str(tmp_path / "events")})
    with httpx.Client(timeout=DEADLINE) as client:
        headers = _open_session(client, replica.url)
        holder = int(_whoami(replica.url, headers, 1).json()["result"]["content"][0]["text"])
        os.kill(holder, signal.SIGKILL)
        # Whichever worker a connection reaches (the survivor relays, the restarted worker
        # holds nothing), the session is gone, and the client is told to start over.
        for n in range(2, 8):
            gone = _whoami(replica.url, headers, n)
            assert gone.status_code == 404, gone.text
            assert "send initialize again" in gone.json()["error"]["message"]
        fresh = _open_session(client, replica.url)  # a new session works
        assert _whoami(replica.url, fresh, 9).status_code == 200
    replica.check_alive()
