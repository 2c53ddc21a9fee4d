"""The README demo: examples/weather_server.py served for real, used by modelctx.Client.

The server runs twice as its own process: over stdio (pipes) and over Streamable HTTP
on 127.0.0.1. Against each, the client negotiates the protocol (2026-07-28 via
server/discover), lists the tools, calls one with a progress callback, reads a resource
and gets a prompt. Then the same client code talks to the server in the handshake era
(initialize, 2025-11-25), to show both eras are served.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

from modelctx.client import Client

SERVER = str(Path(__file__).with_name("weather_server.py"))


async def tour(client: Client, label: str) -> None:
    print(f"\n=== {label}: protocol {client.protocol_version}, server {client.server_info}")
    for tool in await client.tools():
        print(f"  tool {tool.name}: {tool.description}")

    async def progress(done: float, total: float | None, message: str | None) -> None:
        print(f"  progress {done}/{total}: {message}")

    result = await client.call_tool("forecast", {"city": "Oslo", "unit": "F"}, progress=progress)
    print(f"  forecast(Oslo, F) -> {result.structured_content}")
    failed = await client.call_tool("forecast", {"city": "Atlantis"})
    print(f"  forecast(Atlantis) -> isError={failed.is_error}: {failed.content[0].text}")
    cities = await client.read_resource("weather://cities")
    print(f"  weather://cities -> {cities.contents[0]['text']}")
    prompt = await client.get_prompt("plan_trip", {"city": "Lisbon"})
    print(f"  prompt plan_trip -> {prompt.messages[0].content.text}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, deadline: float = 15.0) -> None:
    end = time.monotonic() + deadline
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > end:
                raise SystemExit(f"the HTTP server did not start within {deadline:g} s") from None
            time.sleep(0.05)


async def main() -> None:
    command = [sys.executable, "-m", "modelctx", "serve", SERVER]
    async with Client(command) as client:
        await tour(client, "stdio (modern)")
    async with Client(command, mode="handshake") as client:
        await tour(client, "stdio (handshake era)")

    port = free_port()
    http = subprocess.Popen([*command, "--http", "--port", str(port)])
    try:
        wait_for_port(port)
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url) as client:
            await tour(client, f"HTTP {url} (modern)")
        async with Client(url, mode="handshake") as client:
            await tour(client, f"HTTP {url} (handshake era)")
    finally:
        http.terminate()
        http.wait(timeout=10)
    print("\nDone: one server, two transports, two eras, one client API.")


if __name__ == "__main__":
    asyncio.run(main())
