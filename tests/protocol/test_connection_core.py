"""The connection core without an event loop (protocol/connection.py).

Each test drives ``ServerConnection`` or ``ClientConnection`` with messages and clock
readings, as basic/utilities/cancellation.mdx and basic/index.mdx state the rules.
"""

from __future__ import annotations

import weakref

from modelctx.protocol.connection import (
    Answer,
    Cancel,
    ClientConnection,
    Ignore,
    Notify,
    Progress,
    Reject,
    Serve,
    ServerConnection,
)
from modelctx.protocol.jsonrpc import Notification, Request, Response


def _request(request_id: int | str, method: str = "tools/list") -> Request:
    return Request(request_id, method, {})


def _cancelled(request_id: object) -> Notification:
    return Notification("notifications/cancelled", {"requestId": request_id, "reason": "user"})


def test_a_request_is_served_and_its_answer_sent():
    connection = ServerConnection()
    event = connection.receive(_request(1))
    assert type(event) is Serve

    answer = connection.finish(event.inbound, {"jsonrpc": "2.0", "id": 1, "result": {}})

    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert connection.inflight == {}


def test_a_request_reusing_the_id_of_a_running_one_is_refused_without_that_id():
    connection = ServerConnection()
    connection.receive(_request(7))

    event = connection.receive(_request(7))

    assert type(event) is Reject
    assert "id" not in event.response  # it would read as the answer to the running one
    assert event.response["error"]["code"] == -32600


def test_a_cancelled_request_is_never_answered_even_if_its_handler_returns():
    connection = ServerConnection()
    inbound = connection.receive(_request(1)).inbound

    event = connection.receive(_cancelled(1))

    assert type(event) is Cancel and event.inbound is inbound and event.reason == "user"
    assert connection.finish(inbound, {"jsonrpc": "2.0", "id": 1, "result": {}}) is None


def test_a_cancelled_id_is_free_for_reuse_at_once():
    connection = ServerConnection()
    first = connection.receive(_request(1)).inbound
    connection.receive(_cancelled(1))

    again = connection.receive(_request(1))

    assert type(again) is Serve
    # The first request finishing late answers nothing and frees nothing of the second.
    assert connection.finish(first, {"jsonrpc": "2.0", "id": 1, "result": {}}) is None
    assert connection.inflight[1] is again.inbound
    assert connection.finish(again.inbound, {"id": 1}) == {"id": 1}


def test_a_cancellation_whose_request_id_is_not_an_id_is_ignored():
    connection = ServerConnection()
    connection.receive(_request(1))
    for bad in ([1], {"a": 1}, None, True, 1.5):
        assert type(connection.receive(_cancelled(bad))) is Ignore
    assert 1 in connection.inflight


def test_a_cancellation_of_an_unknown_request_is_ignored():
    assert type(ServerConnection().receive(_cancelled(99))) is Ignore


def test_other_notifications_go_to_the_layer_above():
    event = ServerConnection().receive(Notification("notifications/initialized", {}))
    assert type(event) is Notify


def test_a_frame_that_is_not_json_rpc_is_rejected_never_raised():
    connection = ServerConnection()
    for frame in (b"[" * 100_000, b"{", b"[]", b"7", b'{"jsonrpc":"2.0","id":[1],"method":"x"}'):
        event = connection.receive_data(frame)
        assert type(event) is Reject
    nested = connection.receive_data(b"[" * 100_000)
    assert nested.response["error"]["code"] == -32700


def test_server_to_client_requests_are_matched_by_id():
    connection = ServerConnection()
    outbound = connection.request("roots/list", {}, now=0.0, timeout=5.0)

    event = connection.receive(Response(outbound.id, {"roots": []}, None))

    assert type(event) is Answer and event.outbound is outbound
    assert type(connection.receive(Response(outbound.id, {}, None))) is Ignore  # answered once


class _Waiter:
    """Stands for what a transport waits on (``Outbound.handle``); weakly referenceable."""


def test_answered_and_forgotten_server_to_client_requests_are_not_kept():
    # A stdio server's one connection lives as long as the process: each handshake-era
    # elicitation it sends must be freed once answered (or given up), even while an
    # older request still waits (soak/run.py found a leak of every one of them).
    connection = ServerConnection()
    still_waiting = connection.request("roots/list", {}, now=0.0, timeout=1.0)
    refs = []
    for n in range(1000):
        outbound = connection.request("elicitation/create", {"n": n}, now=float(n), timeout=300.0)
        outbound.handle = waiter = _Waiter()
        refs.append(weakref.ref(waiter))
        if n % 2:
            assert type(connection.receive(Response(outbound.id, {"action": "accept"}, None))) is Answer
        else:
            connection.forget(outbound)  # its caller timed out or left
        del outbound, waiter

    kept = sum(ref() is not None for ref in refs)
    assert kept <= 20, f"{kept} of 1000 finished requests are still referenced"
    assert connection.close()[1] == [still_waiting]


def test_closing_returns_what_runs_and_what_waits():
    connection = ServerConnection()
    inbound = connection.receive(_request(1)).inbound
    outbound = connection.request("roots/list", {}, now=0.0, timeout=5.0)

    running, waiting = connection.close()

    assert running == [inbound] and inbound.cancelled
    assert waiting == [outbound]


# -- the client's side -----------------------------------------------------------------------
def test_a_request_times_out_at_its_deadline():
    connection = ClientConnection(timeout=10.0)
    outbound = connection.request("tools/list", {}, now=100.0)

    assert connection.next_deadline() == 110.0
    assert connection.expire(109.9) == []
    assert connection.expire(110.0) == [outbound]
    assert connection.pending == {}


def test_progress_pushes_the_deadline_back_by_the_timeout_but_not_past_the_limit():
    connection = ClientConnection(timeout=10.0, max_timeout=25.0)
    outbound = connection.request("tools/call", {}, now=0.0, progress=True)

    event = connection.receive(
        Notification("notifications/progress", {"progressToken": outbound.id, "progress": 1}), now=8.0
    )

    assert type(event) is Progress and outbound.deadline == 18.0
    assert connection.expire(17.0) == []
    connection.receive(Notification("notifications/progress", {"progressToken": outbound.id, "progress": 2}), now=20.0)
    assert outbound.deadline == 25.0  # the hard limit
    assert connection.expire(25.0) == [outbound]


def test_progress_for_a_request_without_a_token_does_nothing():
    connection = ClientConnection()
    outbound = connection.request("tools/call", {}, now=0.0)
    event = connection.receive(
        Notification("notifications/progress", {"progressToken": outbound.id}), now=1.0
    )
    assert type(event) is Ignore


def test_a_response_answers_its_request_once():
    connection = ClientConnection()
    outbound = connection.request("tools/list", {}, now=0.0)

    event = connection.receive(Response(outbound.id, {"tools": []}, None), now=1.0)

    assert type(event) is Answer and event.outbound is outbound
    assert type(connection.receive(Response(outbound.id, {}, None), now=1.0)) is Ignore
    assert connection.next_deadline() is None


def test_a_server_request_is_served():
    event = ClientConnection().receive(Request(5, "elicitation/create", {}), now=0.0)
    assert type(event) is Serve and event.inbound.id == 5


def test_ids_are_not_reused_while_waiting():
    connection = ClientConnection()
    ids = {connection.request("ping", {}, now=0.0).id for _ in range(100)}
    assert len(ids) == 100
