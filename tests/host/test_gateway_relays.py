"""The gateway relays completions and resource subscriptions (issue 8, "A gateway").

``completion/complete`` reaches the server that owns the prompt (its namespaced name
mapped back) or the resource template; a subscription to a resource, by handshake-era
``resources/subscribe`` or a 2026-07-28 listen stream, is watched on the upstream that
serves it, and its updates reach the gateway's client. Real processes: the gateway
over stdio, the upstream a subprocess; modelctx's ``Client`` in both eras.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client
from modelctx.client import ResourceUpdated
from modelctx.errors import ProtocolError
from tests.support.wire import async_test

MODES = ["auto", "handshake"]
DEADLINE = 20.0

LIBRARY_UPSTREAM = textwrap.dedent(
    """
    from modelctx import Context, Server

    server = Server("library")


    @server.tool
    async def touch(uri: str, ctx: Context) -> str:
        ctx.resource_updated(uri)
        return f"touched {uri}"


    @server.resource("mem://greeting", mime_type="text/plain")
    def greeting() -> str:
        return "hello"


    @server.resource("mem://books/{title}", mime_type="text/plain")
    def book(title: str) -> str:
        return f"the book {title}"


    @server.prompt
    def review(code: str, language: str = "python") -> str:
        return f"Review this {language}: {code}"


    @server.completion("review", "language")
    def languages(value: str, context: dict) -> list[str]:
        return [language for language in ("python", "perl", "rust") if language.startswith(value)]


    @server.completion("mem://books/{title}", "title")
    def titles(value: str, context: dict) -> list[str]:
        return [title for title in ("dune", "dracula", "emma") if title.startswith(value)]
    """
)


def _gateway(tmp_path: Path, mode: str) -> Client:
    script = tmp_path / "library.py"
    script.write_text(LIBRARY_UPSTREAM)
    upstream = {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(script)], "approval": "allow"}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"library": upstream}}))
    command = [sys.executable, "-m", "modelctx", "gateway", "--config", str(config)]
    return Client(command, mode=mode, timeout=30)


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_completion_of_a_prompt_argument_reaches_the_server_that_owns_the_prompt(tmp_path, mode):
    async with _gateway(tmp_path, mode) as gateway:
        names = [prompt.name for prompt in await gateway.prompts()]
        completed = await gateway.complete({"type": "ref/prompt", "name": "library_review"}, "language", "p")
        declared = gateway.server_capabilities.completions

    assert names == ["library_review"]  # namespaced: the ref's name is mapped back upstream
    assert declared is not None
    assert completed.completion.values == ["python", "perl"]


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_completion_of_a_resource_template_argument_reaches_its_server(tmp_path, mode):
    async with _gateway(tmp_path, mode) as gateway:
        completed = await gateway.complete({"type": "ref/resource", "uri": "mem://books/{title}"}, "title", "d")

    assert completed.completion.values == ["dune", "dracula"]


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_completion_for_a_prompt_no_server_has_is_invalid_params(tmp_path, mode):
    async with _gateway(tmp_path, mode) as gateway:
        with pytest.raises(ProtocolError) as raised:
            await gateway.complete({"type": "ref/prompt", "name": "library_nothing"}, "language", "p")

    assert raised.value.code == -32602
    assert "library_nothing" in str(raised.value)


@pytest.mark.parametrize("mode", MODES)
@async_test(90)
async def test_an_upstream_resource_update_reaches_the_gateway_client_that_subscribed(tmp_path, mode):
    # "handshake": resources/subscribe to the gateway; "auto": a 2026-07-28 listen stream
    # with resourceSubscriptions. Either way the gateway watches the URI upstream.
    async with _gateway(tmp_path, mode) as gateway:
        assert gateway.server_capabilities.resources.subscribe is True
        events: asyncio.Queue[Any] = asyncio.Queue()

        async def listen() -> None:
            async for event in gateway.listen(resource_uris=["mem://greeting"]):
                events.put_nowait(event)

        listening = asyncio.ensure_future(listen())
        try:
            # Touch until the update arrives: the streams may not be open at the first touch,
            # and nothing is replayed to a stream opened later.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE
            got: Any = None
            while got is None and loop.time() < deadline:
                touched = await gateway.call_tool("library_touch", {"uri": "mem://greeting"})
                assert not touched.is_error
                try:
                    got = await asyncio.wait_for(events.get(), 0.3)
                except TimeoutError:
                    assert not listening.done(), listening
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)

    assert got == ResourceUpdated("mem://greeting")
