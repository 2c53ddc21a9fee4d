"""A hostile MCP server on stdio: some answers are built to break a client's reader.

Run by ``tests/test_client_hostile.py`` as a real subprocess. It answers every
``tools/call`` by the tool's name: ``nested`` with a response nested 100,000 arrays
deep, ``huge`` with a response line of 17 MiB, ``garbage`` with a nested line that
names no id followed by its ordinary result; any other tool with an ordinary result
echoing ``arguments.text``.

Floods, for the client's bounds: ``subscriptions/listen`` is answered with 200,000
notifications for its stream (and never ends); ``many_inputs`` asks for 10,000 inputs in
one input_required round; ``ask_flood`` (after ``initialize``, the handshake era) sends
1,000 ``elicitation/create`` requests, then answers with how many the client refused
at once (``refused=N``).
"""

from __future__ import annotations

import json
import os
import select
import sys

DEPTH = 100_000
HUGE = 17 * 1024 * 1024


def answer(request: dict) -> bytes:
    request_id = json.dumps(request["id"]).encode()
    params = request.get("params") or {}
    name = params.get("name")
    head = b'{"jsonrpc":"2.0","id":' + request_id + b',"result":'
    if name == "nested":
        return head + b"[" * DEPTH + b"]" * DEPTH + b"}"
    if name == "huge":
        return head + b'{"content":[{"type":"text","text":"' + b"x" * HUGE + b'"}]}}'
    text = (params.get("arguments") or {}).get("text", "")
    result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    ordinary = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
    if name == "garbage":
        return b"[" * DEPTH + b"\n" + ordinary
    return ordinary


LISTEN_FLOOD = 200_000
ASKED = 1_000
INPUTS = 10_000


class Lines:
    """Lines of stdin, read from the file descriptor so ``select`` sees what is unread."""

    def __init__(self) -> None:
        self.buffer = b""

    def next(self, timeout: float | None = None) -> bytes | None:
        while b"\n" not in self.buffer:
            if timeout is not None and not select.select([0], [], [], timeout)[0]:
                return None
            chunk = os.read(0, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


STDIN = Lines()


def send(message: dict) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")


def listen_flood(request: dict) -> None:
    meta = {"io.modelcontextprotocol/subscriptionId": request["id"]}
    note = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": meta}}
    ).encode() + b"\n"
    for _ in range(LISTEN_FLOOD):
        sys.stdout.buffer.write(note)
    sys.stdout.buffer.flush()


def ask_flood(request: dict) -> bytes:
    """Ask ASKED questions, then count the answers that are errors, until every one is
    answered or the client has been quiet for 2 s (a question still shown to a user)."""
    for n in range(ASKED):
        params = {"mode": "form", "message": f"question {n}", "requestedSchema": {"type": "object", "properties": {}}}
        send({"jsonrpc": "2.0", "id": f"q{n}", "method": "elicitation/create", "params": params})
    sys.stdout.buffer.flush()
    answered = refused = 0
    while answered < ASKED:
        line = STDIN.next(timeout=2.0)
        if line is None:
            break
        reply = json.loads(line)
        if str(reply.get("id", "")).startswith("q"):
            answered += 1
            refused += "error" in reply
    result = {"content": [{"type": "text", "text": f"refused={refused}"}]}
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()


def many_inputs(request: dict) -> bytes:
    ask = {"method": "roots/list", "params": {}}
    result = {"resultType": "input_required", "inputRequests": {f"r{n}": ask for n in range(INPUTS)}}
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()


def initialize(request: dict) -> bytes:
    result = {
        "protocolVersion": request["params"]["protocolVersion"],
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "hostile", "version": "1"},
    }
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()


def main() -> None:
    out = sys.stdout.buffer
    for line in iter(STDIN.next, None):
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # notifications and responses: nothing to answer
        method, name = request["method"], (request.get("params") or {}).get("name")
        if method == "subscriptions/listen":
            listen_flood(request)
            continue
        if method == "initialize":
            reply = initialize(request)
        elif name == "ask_flood":
            reply = ask_flood(request)
        elif name == "many_inputs":
            reply = many_inputs(request)
        else:
            reply = answer(request)
        out.write(reply + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
