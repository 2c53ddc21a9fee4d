"""A stdio MCP server (2026-07-28) whose progress notifications are mostly malformed.

Run by ``tests/test_attacker_client.py``. ``server/discover`` is answered; every
``tools/call`` gets, on its progress token, notifications whose ``progress``,
``total`` or ``message`` have the wrong JSON type, then one well-formed notification
(progress 1 of 2, "ok"), then its result.
"""

from __future__ import annotations

import json
import sys

MALFORMED = [
    {"progress": "x"},
    {"progress": True},
    {"progress": None},
    {},
    {"progress": 1, "total": [2]},
    {"progress": 1, "total": "2"},
    {"progress": 1, "message": 5},
    {"progress": {"n": 1}, "message": {"text": "no"}},
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue
        if request["method"] == "server/discover":
            result = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bad-progress", "version": "0"},
                "resultType": "complete",
            }
            send({"jsonrpc": "2.0", "id": request["id"], "result": result})
            continue
        token = request["params"]["_meta"].get("progressToken")
        for fields in MALFORMED:
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, **fields}})
        well_formed = {"progressToken": token, "progress": 1, "total": 2, "message": "ok"}
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": well_formed})
        result = {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}
        send({"jsonrpc": "2.0", "id": request["id"], "result": result})


if __name__ == "__main__":
    main()
