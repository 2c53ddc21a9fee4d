"""The README demo: serve examples/weather_server.py, list its tools and call one.

It starts the server twice, as real processes: over stdio (pipes) and over Streamable
HTTP on 127.0.0.1, and speaks 2026-07-28 to both with plain JSON-RPC so every message
on the wire is visible.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SERVER = str(Path(__file__).with_name("weather_server.py"))
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "modelctx-demo", "version": "0.1.0"},
}


def request(id: int, method: str, **params) -> dict:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": {**params, "_meta": META}}


def show(title: str, message: dict) -> None:
    print(f"\n== {title}")
    print(json.dumps(message, indent=2)[:1500])


def over_stdio() -> None:
    print("\n#### stdio: modelctx serve examples/weather_server.py")
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "serve", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        for msg in (
            request(1, "server/discover"),
            request(2, "tools/list"),
            request(3, "tools/call", name="forecast", arguments={"city": "Lisbon"}),
        ):
            proc.stdin.write(json.dumps(msg).encode() + b"\n")
            proc.stdin.flush()
            show(f"{msg['method']} ->", json.loads(proc.stdout.readline()))
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post(url: str, message: dict) -> dict:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": message["method"],
    }
    if "name" in message["params"]:
        headers["Mcp-Name"] = message["params"]["name"]
    req = urllib.request.Request(url, json.dumps(message).encode(), headers)
    with urllib.request.urlopen(req, timeout=10) as response:
        body = response.read().decode()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        # The last SSE event is the result; earlier ones were progress.
        data = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
        return json.loads(data[-1])
    return json.loads(body)


def over_http() -> None:
    port = free_port()
    print(f"\n#### Streamable HTTP: modelctx serve examples/weather_server.py --http --port {port}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "serve", SERVER, "--http", "--port", str(port)]
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the HTTP server did not start within 15 s")
                time.sleep(0.05)
        show("tools/list ->", post(url, request(1, "tools/list")))
        show(
            "tools/call forecast(city='Oslo', unit='F') ->",
            post(url, request(2, "tools/call", name="forecast", arguments={"city": "Oslo", "unit": "F"})),
        )
        show(
            "tools/call forecast(city='Atlantis') ->",
            post(url, request(3, "tools/call", name="forecast", arguments={"city": "Atlantis"})),
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    over_stdio()
    over_http()
    print("\nDone: both transports listed and called the tools of one server.")
