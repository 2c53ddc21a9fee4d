"""``server.mount`` and ``server.derive_tool`` through the public API, with our own
``Client`` in process (both eras). The official client over stdio and HTTP, and the
remote mount of a real child process: ``tests/interop/test_compose.py``."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any

import pytest

from modelctx import ArgTransform, Client, ClientHandlers, Context, InvalidParams, RegistrationError, Server
from modelctx.client import ListChanged, ResourceUpdated
from tests.support.wire import async_test

MODES = ["auto", "handshake"]


def billing() -> Server:
    child = Server("billing")

    @child.tool
    async def charge(amount: int, ctx: Context) -> str:
        return f"charged {amount} by {ctx.server.name}"

    @child.resource("invoice://{id}")
    def invoice(id: str) -> str:
        return f"invoice {id}"

    @child.prompt
    def dunning(customer: str) -> str:
        return f"Remind {customer}."

    return child


async def next_event(events: Any, wanted: Any, trigger: Any) -> None:
    """Open a listen stream, then ``trigger()``, then wait for ``wanted``."""
    opened = asyncio.Event()
    stream = events(opened.set)
    reader = asyncio.ensure_future(anext(stream))
    await asyncio.wait_for(opened.wait(), 10)
    trigger()
    try:
        while True:
            event = await asyncio.wait_for(reader, 10)
            if event == wanted:
                return
            reader = asyncio.ensure_future(anext(stream))
    finally:
        reader.cancel()
        await stream.aclose()


# -- mount ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@async_test()
async def test_a_tool_added_to_the_child_after_mounting_is_listed_and_announced(mode):
    child = billing()
    parent = Server("shop")
    parent.mount(child, prefix="billing")

    async with Client(parent, mode=mode) as client:
        await next_event(
            lambda on_open: client.listen(tools=True, on_open=on_open),
            ListChanged("tools"),
            lambda: child.add_tool(lambda: "refunded", name="refund"),
        )
        names = [tool.name for tool in await client.tools()]
        refunded = await client.call_tool("billing_refund", {})

    assert names == ["billing_charge", "billing_refund"]
    assert refunded.content[0].text == "refunded"


@async_test()
async def test_a_tool_removed_from_the_child_is_gone_from_the_parent():
    child = billing()
    parent = Server("shop")
    parent.add_tool(lambda: "pong", name="ping")
    parent.mount(child, prefix="billing")

    child.remove_tool("charge")

    assert [tool["name"] for tool in parent.tools] == ["ping"]
    async with Client(parent) as client:
        assert [tool.name for tool in await client.tools()] == ["ping"]
        with pytest.raises(InvalidParams, match="Unknown tool: billing_charge"):
            await client.call_tool("billing_charge", {"amount": 1})


def test_a_mounted_servers_entries_keep_their_place_when_the_child_changes():
    parent = Server("shop")
    parent.add_tool(lambda: "a", name="first")
    child = billing()
    parent.mount(child, prefix="billing")
    parent.add_tool(lambda: "z", name="last")

    child.add_tool(lambda: "r", name="refund")

    assert [tool["name"] for tool in parent.tools] == ["first", "billing_charge", "billing_refund", "last"]


@pytest.mark.parametrize("mode", MODES)
@async_test()
async def test_resource_updated_on_the_child_reaches_subscribers_of_the_prefixed_uri(mode):
    child = billing()
    parent = Server("shop")
    parent.mount(child, prefix="billing")

    async with Client(parent, mode=mode) as client:
        await next_event(
            lambda on_open: client.listen(resource_uris=["invoice://billing/7"], on_open=on_open),
            ResourceUpdated("invoice://billing/7"),
            lambda: child.resource_updated("invoice://7"),
        )


@async_test()
async def test_the_childs_lifespan_runs_inside_the_parents_and_its_handlers_read_its_context():
    events: list[str] = []

    def lifespan(name: str) -> Any:
        @asynccontextmanager
        async def run(server: Server) -> Any:
            events.append(f"{name} up")
            yield {"pool": f"{name}-pool"}
            events.append(f"{name} down")

        return run

    child = Server("catalog", lifespan=lifespan("catalog"))

    @child.tool
    async def pool(ctx: Context) -> str:
        return f"{ctx.lifespan_context['pool']} of {ctx.server.name}"

    parent = Server("shop", lifespan=lifespan("shop"))
    parent.mount(child, prefix="catalog")

    async with Client(parent) as client:
        result = await client.call_tool("catalog_pool", {})
        assert events == ["shop up", "catalog up"]

    assert result.content[0].text == "catalog-pool of catalog"
    assert events == ["shop up", "catalog up", "catalog down", "shop down"]


@pytest.mark.parametrize("mode", MODES)
@async_test()
async def test_a_mounted_handlers_elicitation_reaches_the_parents_caller(mode):
    child = Server("billing")

    @child.tool
    async def confirm(amount: int, ctx: Context) -> str:
        answer = await ctx.elicit(f"Charge {amount}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"ok={answer.content['ok']}" if answer.accepted else "declined"

    parent = Server("shop")
    parent.mount(child, prefix="billing")
    asked: list[str] = []

    async def user(request: Any) -> dict[str, Any]:
        asked.append(request.message)
        return {"action": "accept", "content": {"ok": True}}

    async with Client(parent, mode=mode, handlers=ClientHandlers(elicitation=user)) as client:
        result = await client.call_tool("billing_confirm", {"amount": 5})

    assert asked == ["Charge 5?"]
    assert result.content[0].text == "ok=True"


@async_test()
async def test_mounted_resources_templates_and_prompts_answer_under_the_prefix():
    parent = Server("shop")
    parent.mount(billing(), prefix="billing")

    async with Client(parent) as client:
        templates = [t.uri_template for t in await client.resource_templates()]
        invoice = await client.read_resource("invoice://billing/42")
        prompt = await client.get_prompt("billing_dunning", {"customer": "Ada"})

    assert templates == ["invoice://billing/{id}"]
    assert invoice.contents[0]["uri"] == "invoice://billing/42"
    assert invoice.contents[0]["text"] == "invoice 42"
    assert prompt.messages[0].content.text == "Remind Ada."


def test_a_mount_without_a_prefix_keeps_the_names():
    parent = Server("shop")
    parent.mount(billing())

    assert [tool["name"] for tool in parent.tools] == ["charge"]
    assert list(parent.registry.templates) == ["invoice://{id}"]


def test_a_name_the_parent_already_has_is_refused_at_mount_and_nothing_is_mounted():
    parent = Server("shop")
    parent.add_tool(lambda: "mine", name="billing_charge")

    with pytest.raises(RegistrationError, match="already has a tool 'billing_charge'.*another prefix"):
        parent.mount(billing(), prefix="billing")
    assert [tool["name"] for tool in parent.tools] == ["billing_charge"]
    assert parent.registry.templates == {} and parent.registry.prompts == {}


def test_a_clash_that_appears_later_leaves_the_childs_entry_out_and_the_parents_in(caplog):
    parent = Server("shop")
    child = billing()
    parent.mount(child, prefix="billing")
    parent.add_tool(lambda: "mine", name="billing_refund")

    child.add_tool(lambda: "theirs", name="refund")

    assert parent.registry.tools["billing_refund"].fn() == "mine"
    assert "already has a tool 'billing_refund'" in caplog.text


@pytest.mark.parametrize("prefix", ["", "has space", "a/b", "_x", 3])
def test_a_prefix_that_cannot_be_part_of_a_name_and_a_uri_is_refused(prefix):
    with pytest.raises(RegistrationError, match="prefix"):
        Server("shop").mount(billing(), prefix=prefix)


def test_a_mount_cycle_is_refused():
    a, b = Server("a"), Server("b")
    a.mount(b, prefix="b")

    with pytest.raises(RegistrationError, match="cycle"):
        b.mount(a, prefix="a")
    with pytest.raises(RegistrationError, match="cycle"):
        a.mount(a, prefix="self")


def test_a_template_without_a_literal_scheme_cannot_be_mounted_under_a_prefix():
    child = Server("files")
    child.resource("{+path}")(lambda path: path)

    with pytest.raises(RegistrationError, match="does not start with a scheme"):
        Server("shop").mount(child, prefix="files")


@async_test()
async def test_servers_mounted_in_mounted_servers_get_both_prefixes():
    inner = billing()
    middle = Server("middle")
    middle.mount(inner, prefix="inner")
    outer = Server("outer")
    outer.mount(middle, prefix="middle")

    async with Client(outer) as client:
        charged = await client.call_tool("middle_inner_charge", {"amount": 1})
        invoice = await client.read_resource("invoice://middle/inner/3")

    assert charged.content[0].text == "charged 1 by billing"
    assert invoice.contents[0]["text"] == "invoice 3"


# -- derive_tool ---------------------------------------------------------------------
def catalog() -> Server:
    server = Server("catalog")

    @server.tool
    def search(q: str, limit: int = 5, private: bool = False) -> list[str]:
        """Search.

        Args:
            q: what to look for
        """
        return [f"{q}-{i}{'-private' if private else ''}" for i in range(limit)]

    return server


@async_test()
async def test_a_derived_tool_renames_hides_and_describes_arguments_and_the_original_stays():
    server = catalog()
    original = dict(server.registry.tools["search"].definition)

    server.derive_tool(
        "search",
        name="find",
        description="Find products.",
        arguments={
            "q": ArgTransform(name="query", description="Product words"),
            "limit": ArgTransform(hide=True, default=2),
            "private": ArgTransform(default=True),
        },
    )

    async with Client(server) as client:
        tools = {tool.name: tool for tool in await client.tools()}
        found = await client.call_tool("find", {"query": "tea"})
        searched = await client.call_tool("search", {"q": "tea", "limit": 1})

    assert server.registry.tools["search"].definition == original
    assert tools["find"].description == "Find products."
    assert tools["find"].input_schema == {
        "type": "object",
        "properties": {
            "query": {"description": "Product words", "type": "string"},
            "private": {"type": "boolean", "default": True},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert tools["find"].output_schema == tools["search"].output_schema
    assert found.structured_content == {"result": ["tea-0-private", "tea-1-private"]}
    assert searched.structured_content == {"result": ["tea-0"]}


@async_test()
async def test_a_derived_tool_checks_calls_against_its_own_schema_naming_its_own_arguments():
    server = catalog()
    server.derive_tool("search", name="find", arguments={"q": ArgTransform(name="query")})

    async with Client(server) as client:
        wrong_type = await client.call_tool("find", {"query": 3})
        old_name = await client.call_tool("find", {"q": "tea"})
        hidden = await client.call_tool("find", {"query": "tea", "limit": 1})

    assert wrong_type.is_error and "query: 3 is not of type 'string'" in wrong_type.content[0].text
    assert old_name.is_error and "'query' is a required property" in old_name.content[0].text
    assert hidden.is_error is not True  # limit was not hidden here: it passes


@async_test()
async def test_a_wrapper_sees_the_derived_arguments_and_may_change_them_and_the_result():
    server = catalog()
    seen: list[dict[str, Any]] = []

    async def wrapper(call: Any, **args: Any) -> list[str]:
        seen.append(dict(args))
        found = await call(query=args["query"].upper(), private=args["private"])
        return [item.lower() for item in found][:1]

    server.derive_tool(
        "search",
        name="find",
        arguments={"q": ArgTransform(name="query"), "private": ArgTransform(default=False)},
        wrap=wrapper,
    )

    async with Client(server) as client:
        result = await client.call_tool("find", {"query": "Tea", "limit": 3})

    assert seen == [{"query": "Tea", "limit": 3, "private": False}]
    assert result.structured_content == {"result": ["tea-0"]}


@async_test()
async def test_a_derived_tool_keeps_the_originals_context_and_can_derive_from_a_mounted_tool():
    parent = Server("shop")
    parent.mount(billing(), prefix="billing")
    parent.derive_tool("billing_charge", name="pay", arguments={"amount": ArgTransform(name="cents")})

    async with Client(parent) as client:
        paid = await client.call_tool("pay", {"cents": 9})

    assert paid.content[0].text == "charged 9 by billing"


def test_a_derived_tool_can_be_made_from_a_function_that_is_not_registered():
    server = Server("s")

    def add(a: int, b: int) -> int:
        return a + b

    server.derive_tool(add, name="plus", arguments={"b": ArgTransform(hide=True, default=1)})

    assert [tool["name"] for tool in server.tools] == ["plus"]
    assert server.tools[0]["inputSchema"]["properties"] == {"a": {"type": "integer"}}


@pytest.mark.parametrize(
    ("arguments", "wrap", "message"),
    [
        ({"nope": ArgTransform(name="x")}, None, "has no argument 'nope'"),
        ({"q": ArgTransform(hide=True)}, None, "is required, so hiding it needs its value"),
        ({"limit": ArgTransform(name="q")}, None, "two arguments would be named 'q'"),
        ({"q": "query"}, None, "must be an ArgTransform"),
        ({}, lambda call, **args: None, "wrap must be an async function"),
    ],
)
def test_a_derived_tool_that_cannot_work_is_refused_when_it_is_registered(arguments, wrap, message):
    with pytest.raises(RegistrationError, match=message):
        catalog().derive_tool("search", name="find", arguments=arguments, wrap=wrap)


def test_deriving_from_an_unknown_tool_names_it():
    with pytest.raises(KeyError, match="no tool named 'missing'"):
        catalog().derive_tool("missing", name="find")


# -- RemoteServer (a real child process) ---------------------------------------------
DYING_CHILD = """
import os, sys
from modelctx import Server

server = Server("dying")


@server.tool
def crash() -> str:
    print("SECRET-TOKEN-123 in a traceback", file=sys.stderr, flush=True)
    os._exit(3)


server.run()
"""


@async_test()
async def test_a_remote_that_dies_during_a_call_is_a_tool_error_that_does_not_quote_its_stderr(tmp_path, caplog):
    import sys

    from modelctx.host import RemoteServer

    (tmp_path / "dying.py").write_text(DYING_CHILD)
    parent = Server("shop")
    parent.mount(RemoteServer([sys.executable, str(tmp_path / "dying.py")]), prefix="dying")

    async with Client(parent) as client:
        result = await client.call_tool("dying_crash", {})

    assert result.is_error is True
    assert "could not be reached" in result.content[0].text
    assert "SECRET-TOKEN" not in result.content[0].text


@async_test()
async def test_a_server_with_a_lifespan_cannot_be_mounted_into_a_running_one():
    @asynccontextmanager
    async def lifespan(server: Server) -> Any:
        yield None

    parent = Server("shop", lifespan=lifespan)
    async with parent.running():
        parent.mount(billing(), prefix="billing")  # no lifespan: fine at any time
        with pytest.raises(RegistrationError, match="mount it before serving"):
            parent.mount(Server("late", lifespan=lifespan), prefix="late")
