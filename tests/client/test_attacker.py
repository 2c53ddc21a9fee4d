"""Our client facing a hostile HTTP server: what the server sends cannot grow the
client's memory past its bounds, the spoiled call fails with a clear error, and the
next call works (issue 6, review R2).

The server is a raw HTTP/1.1 server on 127.0.0.1 that writes its replies byte for byte.
A stdio server is a real subprocess. Memory is measured in a fresh process (``ru_maxrss``), so the test suite's own
footprint does not hide a leak.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import Any

from modelctx import Client
from tests.support.paths import SERVERS

DEADLINE = 60.0
BAD_PROGRESS = SERVERS / "bad_progress_server.py"

# A client and a hostile server in one fresh process. The server answers the tool
# ``attack`` as ATTACK says and every other call with an ordinary result; the script
# prints what the attacked call raised, what the next call returned, and the growth
# of the peak resident size in MB.
SCRIPT = textwrap.dedent(
    r'''
    import asyncio, json, resource, sys, zlib
    from modelctx import Client
    from modelctx.transports.http_client import HttpClientTransport

    ATTACK = sys.argv[1]

    def gzip_bomb(megabytes):
        packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        zeros = b"\0" * (1 << 20)
        return b"".join(packer.compress(zeros) for _ in range(megabytes)) + packer.flush()

    BOMB = gzip_bomb(512) if ATTACK == "gzip" else b""

    def reply(body, extra=b""):
        return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
            len(body), extra, body)

    def ok(request, text):
        result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
        return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                fields = dict(l.split(": ", 1) for l in head.decode("latin-1").lower().split("\r\n")[1:] if l)
                request = json.loads(await reader.readexactly(int(fields["content-length"])))
                if (request.get("params") or {}).get("name") != "attack":
                    writer.write(reply(ok(request, "after")))
                elif ATTACK == "gzip":
                    writer.write(reply(BOMB, b"content-encoding: gzip\r\n"))
                else:  # one header line that never ends
                    writer.write(b"HTTP/1.1 200 OK\r\nx-endless: ")
                    for _ in range(256):
                        writer.write(b"a" * (1 << 20))
                        await writer.drain()
                    await asyncio.sleep(3600)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
        async with Client(HttpClientTransport(url), mode="2026-07-28", timeout=30) as client:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            try:
                await client.call_tool("attack", {})
                error = None
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
            after = (await client.call_tool("echo", {})).content[0].text
        server.close()
        print(json.dumps({"error": error, "after": after, "grown_mb": grown}))

    asyncio.run(main())
    '''
)


def attacked(attack: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, attack], capture_output=True, text=True, timeout=DEADLINE
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_gzip_bomb_is_cut_at_max_message_without_inflating_it_whole():
    # 512 MB of zeros in about half a megabyte of gzip; the reply bound is 16 MiB.
    outcome = attacked("gzip")
    assert outcome["error"].startswith("ParseError") and "larger than" in outcome["error"]
    assert outcome["after"] == "after"
    assert outcome["grown_mb"] < 100, outcome


def test_an_endless_response_header_fails_the_call_at_once_and_is_not_held():
    outcome = attacked("header")
    assert "headers exceeded" in outcome["error"], outcome
    assert outcome["after"] == "after"
    assert outcome["grown_mb"] < 100, outcome


def test_progress_notifications_of_the_wrong_shape_never_reach_the_callback():
    seen: list[tuple[Any, Any, Any]] = []

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))  # called as each notification is read

    async def main() -> None:
        async with Client([sys.executable, str(BAD_PROGRESS)], mode="2026-07-28", timeout=DEADLINE) as client:
            result = await client.call_tool("work", {}, progress=on_progress)
            assert result.content[0].text == "done"

    asyncio.run(asyncio.wait_for(main(), DEADLINE))
    assert seen == [(1, 2, "ok")]
