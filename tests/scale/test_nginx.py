"""Two replicas sharing one Redis behind nginx (deploy/nginx/modelctx.conf), as issue 13
asks: a change made on replica A reaches a listener attached to replica B within 100 ms,
and a handshake-era client (the official ``mcp`` package) keeps its one session while
nginx sends its requests to both replicas in turn, with no sticky routing.

The processes are real (tests/support/scale_processes.py): redis-server, two ``modelctx serve
--http --redis`` replicas, nginx in the foreground.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.scale_processes import ListenStream, Processes, post_json, tools_call
from tests.support.wire import async_test

SERVER = '''
import os

from modelctx import Context, Server

server = Server("behind-nginx", "1.0")


async def extra() -> str:
    """A tool that comes and goes."""
    return "extra"


@server.tool
async def toggle() -> str:
    """Add the tool `extra`, or remove it: either way tools/list changes."""
    if any(tool["name"] == "extra" for tool in server.tools):
        server.remove_tool("extra")
    else:
        server.add_tool(extra)
    return os.environ["REPLICA"]


@server.tool
def whereami() -> str:
    """The replica serving this call."""
    return os.environ["REPLICA"]


@server.tool
async def ask_name(ctx: Context) -> str:
    """Asks the user's name (elicitation), then greets them from the replica it ran on."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    name = answer.content["name"] if answer.accepted and answer.content else "nobody"
    return f"hello {name} from {os.environ['REPLICA']}"
'''


@pytest.fixture
def behind_nginx(tmp_path: Path) -> Any:
    for tool, where in (("redis-server", "/usr/bin/redis-server"), ("nginx", "/usr/sbin/nginx")):
        if shutil.which(tool) is None and not Path(where).exists():
            pytest.skip(f"{tool} is not installed (scripts/test.sh installs it)")
    server_file = tmp_path / "behind_nginx.py"
    server_file.write_text(SERVER)
    with Processes(tmp_path / "procs") as procs:
        redis = procs.start_redis()
        a = procs.start_replica(server_file, redis_url=redis.extra["url"], env={"REPLICA": "A"})
        b = procs.start_replica(server_file, redis_url=redis.extra["url"], env={"REPLICA": "B"})
        lb = procs.start_nginx([a.port, b.port])
        yield a, b, lb


def test_a_list_changed_on_replica_a_reaches_a_listener_on_replica_b_within_100_ms(behind_nginx):
    a, b, _ = behind_nginx
    delays = []
    with ListenStream(b.port, {"toolsListChanged": True}) as listen:
        assert listen.next_message(10)["method"] == "notifications/subscriptions/acknowledged"
        for _ in range(5):
            sent = time.monotonic()  # the change's own request to A is inside the measure
            assert post_json(a.port, tools_call("toggle", {}))["result"]["content"][0]["text"] == "A"
            assert listen.next_message(10)["method"] == "notifications/tools/list_changed"
            delays.append(time.monotonic() - sent)
    assert statistics.median(delays) < 0.1, f"A to B took {[round(d * 1000, 1) for d in delays]} ms"


def test_a_listener_through_nginx_hears_changes_made_on_either_replica(behind_nginx):
    a, b, lb = behind_nginx
    with ListenStream(lb.port, {"toolsListChanged": True}) as listen:
        assert listen.next_message(10)["method"] == "notifications/subscriptions/acknowledged"
        for replica, name in ((a, "A"), (b, "B")):
            assert post_json(replica.port, tools_call("toggle", {}))["result"]["content"][0]["text"] == name
            assert listen.next_message(10)["method"] == "notifications/tools/list_changed"


@async_test(60)
async def test_the_official_client_keeps_its_session_across_replicas_behind_nginx(behind_nginx):
    import mcp_types as types
    from mcp import Client

    _, _, lb = behind_nginx

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    client = Client(f"http://127.0.0.1:{lb.port}/mcp", mode="legacy", elicitation_callback=user,
                    read_timeout_seconds=15)  # fmt: skip
    async with client as connected:
        assert connected.protocol_version == "2025-11-25"
        served_by = set()
        for _ in range(6):  # nginx's round robin: each call may land on either replica
            result = await asyncio.wait_for(connected.call_tool("whereami", {}), 15)
            served_by.add(result.content[0].text)
        assert served_by == {"A", "B"}, "nginx sent every request of the session to one replica"
        # The question goes out on one replica; the answer is POSTed through nginx and may
        # land on the other, which forwards it over Redis.
        for _ in range(2):
            greeting = await asyncio.wait_for(connected.call_tool("ask_name", {}), 15)
            assert greeting.content[0].text in ("hello Ada from A", "hello Ada from B")
