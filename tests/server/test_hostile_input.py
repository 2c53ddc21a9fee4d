"""Whatever a peer sends, the answer is a JSON-RPC error or silence: never a dead
process, a 5xx, or a server that will not stop (issue: foundation, second pass §3).

Real processes over real pipes, a real HTTP server on loopback.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from tests.support.paths import SERVERS
from tests.support.wire import request, wait_until

DEAF_SERVER = SERVERS / "deaf_server.py"
NESTED = b"[" * 1000 + b"]" * 1000  # about 2 KB: msgspec's nesting limit


def _cancel(request_id: object) -> dict:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


def _echo(request_id: int | str, text: str) -> dict:
    return request(request_id, "tools/call", {"name": "echo", "arguments": {"text": text}})


# -- stdio ----------------------------------------------------------------------------------
def test_a_deeply_nested_line_is_a_parse_error_and_the_server_goes_on(stdio_server):
    stdio_server.send_raw(NESTED)

    error = stdio_server.recv()

    assert error["error"]["code"] == -32700
    assert stdio_server.call(_echo(2, "still here"))["result"]["content"][0]["text"] == "still here"
    assert stdio_server.process.poll() is None


def test_a_cancellation_naming_a_list_or_an_object_is_ignored(stdio_server):
    for bad in ([1], {"id": 1}, None, 1.5):
        stdio_server.send(_cancel(bad))

    assert stdio_server.call(_echo(1, "alive"))["result"]["content"][0]["text"] == "alive"
    assert stdio_server.process.poll() is None


def test_a_cancelled_request_id_is_free_for_reuse(stdio_server, tmp_path):
    marker = tmp_path / "m"
    stdio_server.send(request(1, "tools/call", {"name": "stubborn", "arguments": {"marker": str(marker)}}))
    wait_until((tmp_path / "m.started").exists, "the tool to start")
    stdio_server.send(_cancel(1))
    wait_until(marker.exists, "the handler to see its cancellation")

    answer = stdio_server.call(_echo(1, "second use of id 1"))

    assert answer["result"]["content"][0]["text"] == "second use of id 1"
    stdio_server.close_stdin()
    assert stdio_server.wait() == 0
    # Exactly one answer for id 1: the stubborn handler's late result was never sent.
    answers = [line for line in stdio_server.stdout_raw if b'"id":1' in line]
    assert len(answers) == 1


def test_a_handler_that_swallows_cancellation_does_not_keep_the_process_alive(
    start_stdio_server, tmp_path
):
    server = start_stdio_server(DEAF_SERVER)
    marker = tmp_path / "deaf"
    server.send(request(1, "tools/call", {"name": "deaf", "arguments": {"marker": str(marker)}}))
    wait_until((tmp_path / "deaf.started").exists, "the tool to start")

    server.close_stdin()

    assert server.wait(timeout=15) == 0  # bounded: grace, cancellation, grace
    assert marker.read_text() == "cancelled"
    assert "did not stop" in server.stderr


def test_sigterm_ends_a_server_whose_handler_swallows_cancellation(start_stdio_server, tmp_path):
    server = start_stdio_server(DEAF_SERVER)
    marker = tmp_path / "deaf"
    server.send(request(1, "tools/call", {"name": "deaf", "arguments": {"marker": str(marker)}}))
    wait_until((tmp_path / "deaf.started").exists, "the tool to start")

    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)

    assert server.wait(timeout=15) == 0
    assert time.monotonic() - started < 10


def test_a_sync_handler_stuck_in_its_thread_does_not_keep_the_process_alive(
    start_stdio_server, tmp_path
):
    server = start_stdio_server(DEAF_SERVER)
    server.send(request(1, "tools/call", {"name": "stuck", "arguments": {"marker": str(tmp_path / "s")}}))
    wait_until((tmp_path / "s.started").exists, "the tool to start")

    server.close_stdin()

    assert server.wait(timeout=15) == 0


def test_sigterm_ends_an_open_listen_stream_with_its_final_response(start_stdio_server):
    server = start_stdio_server(DEAF_SERVER)
    server.send(request(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    ack = server.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged"

    server.process.send_signal(signal.SIGTERM)

    final = server.recv_until(1)[-1]
    assert final["id"] == 1 and "result" in final
    assert server.wait() == 0


# -- HTTP -----------------------------------------------------------------------------------
def test_a_deeply_nested_body_is_a_400_parse_error_not_a_500(http):
    response = http.post(content=NESTED)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
    assert http.call(_echo(2, "fine"))["result"]["content"][0]["text"] == "fine"


def test_a_cancellation_naming_a_list_is_ignored_on_a_handshake_session(http_server):
    import httpx

    with httpx.Client(timeout=10) as client:
        init = client.post(
            http_server.url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            },
            headers={"accept": "application/json, text/event-stream"},
        )
        session = init.headers["mcp-session-id"]
        headers = {
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-11-25",
            "accept": "application/json, text/event-stream",
        }
        for bad in ([1], {"a": 1}):
            assert client.post(http_server.url, json=_cancel(bad), headers=headers).status_code == 202
        answer = client.post(
            http_server.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "ok"}}},
            headers=headers,
        )
        assert answer.status_code == 200
        assert answer.json()["result"]["content"][0]["text"] == "ok"


def test_a_line_too_long_to_hold_is_refused_with_its_own_id_and_its_neighbours_are_served(stdio_server):
    # The refusal names the request when its head does (id and method in the first 16 KiB),
    # so the sender stops waiting at once; a line whose id comes only after 16 MiB gets id null.
    pad = b"a" * (17 << 20)
    long_line = b'{"jsonrpc":"2.0","id":99,"method":"x","params":{"pad":"' + pad + b'"}}'
    id_last = b'{"jsonrpc":"2.0","method":"x","params":{"pad":"' + pad + b'"},"id":98}'
    before, after = _echo(1, "before"), _echo(2, "after")
    import json

    stdio_server.send_raw(
        json.dumps(before).encode() + b"\n" + long_line + b"\n" + id_last + b"\n" + json.dumps(after).encode()
    )

    answers = {m.get("id"): m for m in [stdio_server.recv() for _ in range(4)]}
    assert answers[1]["result"]["content"][0]["text"] == "before"
    assert answers[2]["result"]["content"][0]["text"] == "after"
    assert answers[99]["error"]["code"] == -32600 and "exceeded" in answers[99]["error"]["message"]
    assert answers[None]["error"]["code"] == -32600


def test_a_client_that_never_answers_the_servers_question_fails_that_call_only(start_stdio_server):
    server = start_stdio_server(DEAF_SERVER)
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "silent", "version": "0"},
    }
    server.call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}})

    question = server.recv()
    answer = server.recv_until(2)[-1]  # the question is never answered

    assert question["method"] == "elicitation/create"
    assert answer["result"]["isError"] is True
    wait_until(lambda: "did not answer elicitation/create within 0.5s" in server.stderr, "the log line")
    assert "0.5s" not in answer["result"]["content"][0]["text"]  # logged, not leaked
    echo = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "on"}}}
    assert server.call(echo)["result"]["content"][0]["text"] == "on"


def test_sigterm_ends_an_http_listen_stream_with_its_final_response(tmp_path):
    import httpx

    from tests.support.wire import HttpServer, modern_meta

    server = HttpServer(DEAF_SERVER, tmp_path / "server.log")
    try:
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": modern_meta()},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "subscriptions/listen",
        }
        events: list[str] = []
        with httpx.Client(timeout=15) as client, client.stream("POST", server.url, json=body, headers=headers) as reply:
            lines = reply.iter_lines()
            for line in lines:
                if line.startswith("data:"):
                    events.append(line)
                    break  # the acknowledgement
            server.process.send_signal(signal.SIGTERM)
            events += [line for line in lines if line.startswith("data:")]
        assert "subscriptions/acknowledged" in events[0]
        final = json.loads(events[-1][len("data:"):])
        assert final["id"] == 7 and "result" in final
        # uvicorn re-raises the signal once it has shut down gracefully.
        assert server.process.wait(timeout=15) in (0, -signal.SIGTERM)
    finally:
        server.stop()


def _call_in_background(url: str, tool: str, marker: Path) -> tuple[Any, dict[str, Any]]:
    import threading

    import httpx

    from tests.support.wire import modern_meta

    outcome: dict[str, Any] = {}
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"marker": str(marker)}, "_meta": modern_meta()},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }

    def call() -> None:
        try:
            outcome["reply"] = httpx.post(url, json=body, headers=headers, timeout=30)
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, outcome


def test_a_request_cut_short_by_shutdown_gets_a_json_rpc_error_not_a_bare_500(tmp_path):
    from tests.support.wire import HttpServer

    server = HttpServer(DEAF_SERVER, tmp_path / "server.log")
    try:
        thread, outcome = _call_in_background(server.url, "stuck", tmp_path / "s")
        wait_until((tmp_path / "s.started").exists, "the tool to start")

        server.process.send_signal(signal.SIGTERM)
        thread.join(timeout=15)

        reply = outcome["reply"]
        assert reply.status_code == 503
        assert reply.json()["id"] == 5 and reply.json()["error"]["code"] == -32603
        assert "shutting down" in reply.json()["error"]["message"]
        assert server.process.wait(timeout=15) in (0, -signal.SIGTERM)
        assert "Exception in ASGI application" not in server.log
    finally:
        server.stop()


def test_sigterm_ends_an_http_server_whose_handler_swallows_cancellation(tmp_path):
    from tests.support.wire import HttpServer

    server = HttpServer(DEAF_SERVER, tmp_path / "server.log")
    try:
        _call_in_background(server.url, "deaf", tmp_path / "d")
        wait_until((tmp_path / "d.started").exists, "the tool to start")

        server.process.send_signal(signal.SIGTERM)

        assert server.process.wait(timeout=20) in (0, 1, -signal.SIGTERM)
    finally:
        server.stop()
