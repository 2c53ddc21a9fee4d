"""Rounds of a multi round-trip request (basic/patterns/mrtr.mdx), as the server keeps them.

* A retry's ``inputResponses`` count only for the questions of the round its sealed
  ``requestState`` names; the server SHOULD ignore unexpected entries: answers sent
  without a ``requestState``, answers to questions not asked in that round, answers
  that would replace one an earlier round sealed.
* The replay model: a handler that asks twice runs three times, but its progress and
  log notifications reach the client once.
* An ``input_required`` result MAY carry a ``requestState`` alone ("retry later");
  the client retries, and the handler sees the state it carried.

Raw cases go over a real HTTP server (``modelctx serve --http``) as JSON-RPC; the rest
go through our Client, in process, on stdio and on HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from modelctx.client import Client, ClientHandlers, ClientOptions, Elicitation
from tests.fixtures.servers import mrtr_server
from tests.support.paths import SERVERS
from tests.support.wire import HttpServer, McpHttp, request, serve_command, sse_messages

MRTR_SERVER = SERVERS / "mrtr_server.py"
DEADLINE = 15.0
ELICITING = {"elicitation": {"form": {}}}


@pytest.fixture(scope="module")
def mrtr_http(tmp_path_factory) -> Iterator[HttpServer]:
    with HttpServer(MRTR_SERVER, tmp_path_factory.mktemp("mrtr-http") / "server.log") as server:
        yield server


@pytest.fixture
def raw(mrtr_http) -> Iterator[McpHttp]:
    with McpHttp(mrtr_http) as client:
        yield client


def register(id: int, **mrtr: Any) -> dict[str, Any]:
    return request(id, "tools/call", {"name": "register", "arguments": {}, **mrtr}, capabilities=ELICITING)


def result_of(response: dict[str, Any]) -> dict[str, Any]:
    assert "result" in response, response
    return response["result"]


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


# -- which answers count ------------------------------------------------------------------------
def test_answers_sent_without_a_request_state_are_ignored(raw):
    forged = result_of(raw.call(register(1, inputResponses={"name": accept(name="Mallory")})))

    assert forged["resultType"] == "input_required"
    assert list(forged["inputRequests"]) == ["name"]  # asked again: the answer did not count


def test_answers_to_questions_the_round_did_not_ask_are_ignored(raw):
    first = result_of(raw.call(register(1)))
    assert list(first["inputRequests"]) == ["name"]

    early = {"name": accept(name="Ada"), "age": accept(age=30)}  # "age" was not asked yet
    second = result_of(raw.call(register(2, inputResponses=early, requestState=first["requestState"])))

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["age"]


def test_an_answer_an_earlier_round_sealed_cannot_be_replaced(raw):
    first = result_of(raw.call(register(1)))
    second = result_of(
        raw.call(register(2, inputResponses={"name": accept(name="Ada")}, requestState=first["requestState"]))
    )
    assert list(second["inputRequests"]) == ["age"]

    override = {"name": accept(name="Mallory"), "age": accept(age=30)}
    final = result_of(raw.call(register(3, inputResponses=override, requestState=second["requestState"])))

    assert final["content"][0]["text"] == "registered Ada, aged 30"


# -- what a replay sends -----------------------------------------------------------------------
def test_each_round_sends_only_the_notifications_that_are_new(raw):
    def round_trip(id: int, **mrtr: Any) -> tuple[list[Any], dict[str, Any]]:
        message = register(id, **mrtr)
        message["params"]["_meta"]["progressToken"] = f"t{id}"
        message["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "info"
        response = raw.post(message)
        assert response.headers["content-type"].startswith("text/event-stream")
        *notes, last = sse_messages(response.text)
        seen = [n["params"].get("data", n["params"].get("message")) for n in notes]
        return seen, result_of(last)

    notes1, first = round_trip(1)
    notes2, second = round_trip(2, inputResponses={"name": accept(name="Ada")}, requestState=first["requestState"])
    notes3, final = round_trip(3, inputResponses={"age": accept(age=36)}, requestState=second["requestState"])

    assert notes1 == ["starting registration", "asking the name"]
    assert notes2 == ["got the name Ada", "asking the age"]
    assert notes3 == ["registered", "done"]
    assert final["content"][0]["text"] == "registered Ada, aged 36"


WAYS = ["memory", "stdio", "http"]


@pytest.fixture(params=WAYS)
def target(request) -> Any:
    if request.param == "memory":
        return mrtr_server.server
    if request.param == "stdio":
        return serve_command(MRTR_SERVER)
    return request.getfixturevalue("mrtr_http").url


class Watcher:
    """The application side: answers the forms, collects logs and progress."""

    def __init__(self) -> None:
        self.logs: list[Any] = []
        self.progress: list[tuple[float, float | None, str | None]] = []

    async def elicit(self, request: Elicitation) -> dict[str, Any]:
        properties = (request.requested_schema or {}).get("properties", {})
        return accept(name="Ada") if "name" in properties else accept(age=36)

    def on_notification(self, note: Any) -> None:
        if note.method == "notifications/message":
            self.logs.append(note.params["data"])

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(main(), 2 * DEADLINE))


def session(target: Any, watcher: Watcher, mode: str = "auto") -> Client:
    return Client(
        target,
        mode=mode,
        timeout=DEADLINE,
        handlers=ClientHandlers(elicitation=watcher.elicit, notification=watcher.on_notification),
        options=ClientOptions(log_level="info"),
    )


def test_a_handler_that_asks_twice_runs_three_times_and_sends_its_logs_and_progress_once(target):
    watcher = Watcher()

    async def main() -> tuple[Any, int]:
        async with session(target, watcher) as client:
            before = (await client.call_tool("runs", {"name": "register"})).structured_content["result"]
            result = await client.call_tool("register", progress=watcher.on_progress)
            after = (await client.call_tool("runs", {"name": "register"})).structured_content["result"]
        return result, after - before

    result, runs = run(main)

    assert result.content[0].text == "registered Ada, aged 36"
    assert runs == 3  # the replay model of 2026-07-28
    assert watcher.logs == ["starting registration", "got the name Ada", "registered"]
    assert watcher.progress == [(1, 3, "asking the name"), (2, 3, "asking the age"), (3, 3, "done")]


# -- retry later: requestState alone ------------------------------------------------------------
def test_a_handler_can_answer_input_required_with_a_request_state_alone(raw):
    def slow_job(id: int, **mrtr: Any) -> dict[str, Any]:
        return result_of(raw.call(request(id, "tools/call", {"name": "slow_job", "arguments": {"steps": 1}, **mrtr})))

    first = slow_job(1)
    final = slow_job(2, requestState=first["requestState"])

    assert first["resultType"] == "input_required"
    assert "inputRequests" not in first and isinstance(first["requestState"], str)
    assert final["content"][0]["text"] == "finished 1 steps"


@pytest.mark.parametrize("mode", ["auto", "handshake"])
def test_our_client_retries_a_request_state_only_result_until_the_handler_is_done(target, mode):
    watcher = Watcher()

    async def main() -> tuple[Any, int]:
        async with session(target, watcher, mode) as client:
            before = (await client.call_tool("runs", {"name": "slow_job"})).structured_content["result"]
            result = await client.call_tool("slow_job", {"steps": 2})
            after = (await client.call_tool("runs", {"name": "slow_job"})).structured_content["result"]
        return result, after - before

    result, runs = run(main)

    assert result.content[0].text == "finished 2 steps"
    assert runs == 3
    # Each attempt logged something new at the same place: all of it is sent.
    assert watcher.logs == ["attempt after step 0", "attempt after step 1", "attempt after step 2"]


@pytest.mark.parametrize("mode", ["auto", "handshake"])
def test_resources_and_prompts_take_part_in_rounds_too(mode):
    watcher = Watcher()

    async def main() -> tuple[Any, Any]:
        async with session(mrtr_server.server, watcher, mode) as client:
            resource = await client.read_resource("mrtr://slow")
            prompt = await client.get_prompt("greeting")
        return resource, prompt

    resource, prompt = run(main)

    assert resource.contents[0]["text"] == "ready after warming up"
    assert prompt.messages[0].content.text == "Say hello to Ada"


def test_retry_later_refuses_state_that_cannot_travel_in_request_state():
    async def main() -> Any:
        async with Client(mrtr_server.server, timeout=DEADLINE) as client:
            return await client.call_tool("unsendable_retry")

    result = run(main)

    assert result.content[0].text.startswith("refused: retry_later(state=...) must be JSON-able")
