"""The stdio transport, as basic/transports/stdio.mdx states it (DIGEST §9.2).

The server is a real subprocess; the tests speak newline-delimited JSON on its pipes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

from tests.support.wire import DEADLINE, request, serve_command, wait_until


def test_each_message_is_one_line_of_json(stdio_server):
    stdio_server.send(request(1, "tools/call", {"name": "echo", "arguments": {"text": "two\nlines"}}))
    stdio_server.recv_until(1)

    (line,) = stdio_server.stdout_raw
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["result"]["content"] == [{"type": "text", "text": "two\nlines"}]


def test_the_server_exits_cleanly_when_stdin_closes(stdio_server):
    stdio_server.call(request(1, "tools/list"))

    stdio_server.close_stdin()

    assert stdio_server.wait() == 0


def test_the_server_answers_requests_already_read_before_stdin_closed(stdio_server):
    """A client may write its last request and close stdin at once."""
    stdio_server.send(request(1, "tools/call", {"name": "echo", "arguments": {"text": "last words"}}))
    stdio_server.close_stdin()

    response = stdio_server.recv_until(1)[-1]

    assert response["result"]["content"] == [{"type": "text", "text": "last words"}]
    assert stdio_server.wait() == 0


def test_the_last_answer_reaches_a_client_that_reads_it_late_whole():
    """The server flushes stdout before it exits: a 100 KB answer to a client that
    closed stdin and read only a second later once arrived cut at 64 KB."""
    text = "x" * 100_000
    process = subprocess.Popen(serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(request(1, "tools/call", {"name": "echo", "arguments": {"text": text}})).encode() + b"\n")
        process.stdin.close()
        time.sleep(1.0)
        answer = process.stdout.read()
        assert process.wait(DEADLINE) == 0
    finally:
        process.kill()
    assert json.loads(answer)["result"]["content"] == [{"type": "text", "text": text}]


def test_a_request_that_hangs_does_not_keep_the_server_alive_after_stdin_closes(stdio_server, tmp_path):
    marker = tmp_path / "cancelled"
    stdio_server.send(request(1, "tools/call", {"name": "sleepy", "arguments": {"seconds": 600, "marker": str(marker)}}))
    wait_until((tmp_path / "cancelled.started").exists, "the tool to start")

    stdio_server.close_stdin()

    assert stdio_server.wait() == 0
    assert marker.read_text() == "cancelled"  # the handler was cancelled, not abandoned


def test_the_server_exits_on_sigterm(stdio_server):
    stdio_server.call(request(1, "tools/list"))

    stdio_server.process.send_signal(signal.SIGTERM)

    assert stdio_server.wait() == 0


def test_sigterm_cancels_the_requests_in_flight(stdio_server, tmp_path):
    marker = tmp_path / "cancelled"
    stdio_server.send(request(1, "tools/call", {"name": "sleepy", "arguments": {"seconds": 600, "marker": str(marker)}}))
    wait_until((tmp_path / "cancelled.started").exists, "the tool to start")

    stdio_server.process.send_signal(signal.SIGTERM)

    assert stdio_server.wait() == 0
    assert marker.read_text() == "cancelled"


def test_logs_go_to_stderr_never_to_stdout(start_stdio_server):
    server = start_stdio_server(env={"MODELCTX_LOG_LEVEL": "DEBUG"})
    server.call(request(1, "tools/call", {"name": "boom", "arguments": {}}))  # logs a traceback
    server.call(request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    server.send_raw(b"this is not json")  # answered with -32700, maybe logged
    server.recv()

    server.close_stdin()
    assert server.wait() == 0

    assert "boom is about to raise" in server.stderr  # the tool's own logging.warning
    assert "RuntimeError" in server.stderr  # the traceback of the exception
    assert len(server.stdout_raw) == 3
    for line in server.stdout_raw:
        assert json.loads(line)["jsonrpc"] == "2.0"


def test_a_slow_request_does_not_block_a_fast_one(stdio_server):
    stdio_server.send(request(1, "tools/call", {"name": "sleepy", "arguments": {"seconds": 600}}))
    stdio_server.send(request(2, "tools/call", {"name": "echo", "arguments": {"text": "fast"}}))

    first = stdio_server.recv()

    assert first["id"] == 2
    assert first["result"]["content"] == [{"type": "text", "text": "fast"}]


def test_many_requests_in_flight_are_each_answered_once(stdio_server):
    for id in range(1, 21):
        stdio_server.send(request(id, "tools/call", {"name": "add", "arguments": {"a": id, "b": 1000}}))

    responses = [stdio_server.recv() for _ in range(20)]

    assert sorted(r["id"] for r in responses) == list(range(1, 21))
    assert all(r["result"]["structuredContent"] == {"result": r["id"] + 1000} for r in responses)


def test_progress_notifications_arrive_before_the_result(stdio_server):
    stdio_server.send(request(1, "tools/call", {"name": "progress", "arguments": {"steps": 3}}, progressToken="p-1"))

    *notifications, response = stdio_server.recv_until(1)

    assert [n["method"] for n in notifications] == ["notifications/progress"] * 3
    assert [n["params"] for n in notifications] == [
        {"progressToken": "p-1", "progress": i, "total": 3, "message": f"step {i}"} for i in (1, 2, 3)
    ]
    assert response["result"]["content"] == [{"type": "text", "text": "done after 3 steps"}]


def test_no_progress_is_sent_without_a_progress_token(stdio_server):
    stdio_server.send(request(1, "tools/call", {"name": "progress", "arguments": {"steps": 3}}))

    messages = stdio_server.recv_until(1)

    assert len(messages) == 1 and "result" in messages[0]


def test_an_integer_progress_token_is_echoed_as_an_integer(stdio_server):
    stdio_server.send(request(1, "tools/call", {"name": "progress", "arguments": {"steps": 1}}, progressToken=42))

    notification, _ = stdio_server.recv_until(1)

    assert notification["params"]["progressToken"] == 42


def test_a_request_id_already_in_flight_is_refused(stdio_server):
    stdio_server.send(request("dup", "tools/call", {"name": "sleepy", "arguments": {"seconds": 600}}))
    stdio_server.send(request("dup", "tools/list"))

    response = stdio_server.recv()

    # No id on the error: with "dup" it would read as the answer to the running request.
    assert "id" not in response
    assert response["error"]["code"] == -32600
    assert "'dup' is already in use" in response["error"]["message"]


def test_modern_requests_need_no_handshake_and_handshake_sessions_still_work(stdio_server):
    """A dual-era server: ``initialize`` opens a session on the process, and modern
    requests on the same pipe are still served statelessly (basic/versioning.mdx)."""
    modern = stdio_server.call(request(1, "server/discover"))
    initialized = stdio_server.call(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
        }
    )
    stdio_server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    legacy = stdio_server.call({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "old"}}})
    modern_again = stdio_server.call(request(4, "tools/call", {"name": "echo", "arguments": {"text": "new"}}))

    assert "2026-07-28" in modern["result"]["supportedVersions"]
    assert initialized["result"]["protocolVersion"] == "2025-11-25"
    assert legacy["result"] == {"content": [{"type": "text", "text": "old"}]}  # no resultType
    assert modern_again["result"]["resultType"] == "complete"


def _initialize(id: int, version: str, **params: object) -> dict:
    info = {"name": "old", "version": "1"}
    return {
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": info, **params},
    }  # fmt: skip


def test_a_second_initialize_on_the_same_pipe_is_refused_32600_and_the_session_stays_as_it_was(stdio_server):
    """lifecycle.mdx: initialization is the first interaction, once; a repeat on the same
    connection is an Invalid Request, and the session it opened is left as it was."""
    first = stdio_server.call(_initialize(1, "2025-11-25"))
    stdio_server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    again = stdio_server.call(_initialize(2, "2024-11-05"))
    added = stdio_server.call({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}})

    assert first["result"]["protocolVersion"] == "2025-11-25"
    assert again["id"] == 2 and again["error"]["code"] == -32600
    assert "already initialized" in again["error"]["message"]
    assert "new connection" in again["error"]["message"]
    assert added["result"]["structuredContent"] == {"result": 3}  # still 2025-11-25: 2024-11-05 has none


def test_two_initializes_sent_at_once_open_one_session_and_the_other_is_refused(stdio_server):
    stdio_server.send(_initialize(1, "2025-11-25"))
    stdio_server.send(_initialize(2, "2024-11-05"))
    answers = {answer["id"]: answer for answer in (stdio_server.recv(), stdio_server.recv())}
    added = stdio_server.call({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}})

    assert answers[1]["result"]["protocolVersion"] == "2025-11-25"
    assert answers[2]["error"]["code"] == -32600
    assert added["result"]["structuredContent"] == {"result": 3}


def test_an_initialize_refused_as_malformed_does_not_count_and_a_correct_one_follows(stdio_server):
    malformed = stdio_server.call(_initialize(1, "2025-11-25", capabilities="none"))
    opened = stdio_server.call(_initialize(2, "2025-11-25"))

    assert malformed["error"]["code"] == -32602
    assert opened["result"]["protocolVersion"] == "2025-11-25"
