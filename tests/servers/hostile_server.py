"""A hostile MCP server on stdio: some answers are built to break a client's reader.

Run by ``tests/test_client_hostile.py`` as a real subprocess. It answers every
``tools/call`` by the tool's name: ``nested`` with a response nested 100,000 arrays
deep, ``huge`` with a response line of 17 MiB, ``garbage`` with a nested line that
names no id followed by its ordinary result; any other tool with an ordinary result
echoing ``arguments.text``.
"""

from __future__ import annotations

import json
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


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # notifications and responses: nothing to answer
        out.write(answer(request) + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
