"""Mistakes a newcomer makes while registering, each refused at registration with a
message that names the fix; and a URI template variable typed ``int`` reads as one."""

from __future__ import annotations

import asyncio

import msgspec
import pydantic
import pytest

from modelctx import Client, Context, RegistrationError, Server


class Point(msgspec.Struct):
    x: int


class User(pydantic.BaseModel):
    name: str


def test_a_resource_decorator_without_its_uri_says_the_uri_is_missing():
    server = Server("r")

    with pytest.raises(RegistrationError, match=r'needs the resource\'s URI, e\.g\. @server\.resource\("notes://\{id\}"\) above def notes'):

        @server.resource  # type: ignore[arg-type]
        def notes() -> str:
            return ""


def test_a_misspelt_tool_or_prompt_option_is_named():
    server = Server("r")

    with pytest.raises(RegistrationError, match=r"tool options \['descripton'\] are not known; the options are \[.*'description'"):
        server.tool(descripton="typo")
    with pytest.raises(RegistrationError, match=r"prompt options \['titel'\] are not known"):
        server.prompt(titel="typo")
    assert server.tools == []


def test_a_ctx_parameter_without_a_type_is_refused_with_the_annotation_to_add():
    server = Server("r")

    with pytest.raises(RegistrationError, match=r"tool 'report': parameter 'ctx' has no type.*\(ctx: Context\)"):

        @server.tool
        async def report(text: str, ctx) -> str:  # type: ignore[no-untyped-def]
            return text

    @server.tool
    async def fine(text: str, ctx: Context) -> str:
        return text

    assert server.tools[0]["inputSchema"]["properties"] == {"text": {"type": "string"}}


def test_a_template_variable_typed_int_receives_an_int():
    server = Server("r")

    @server.resource("users://{user_id}/profile")
    def profile(user_id: int) -> str:
        return f"user {user_id + 1 - 1} ({type(user_id).__name__})"

    async def read(uri: str) -> str:
        async with Client(server) as client:
            return (await client.read_resource(uri)).contents[0]["text"]

    assert asyncio.run(asyncio.wait_for(read("users://42/profile"), 15)) == "user 42 (int)"


def test_a_type_pydantic_refuses_beside_a_pydantic_model_is_a_registration_error():
    # One pydantic-model parameter makes pydantic validate every parameter; a msgspec
    # Struct (fine on its own) is then refused by pydantic, and the error says so.
    server = Server("r")

    with pytest.raises(RegistrationError, match=r"tool 'place': its parameters include a pydantic model.*Point.*dataclass"):

        @server.tool
        def place(user: User, at: Point) -> str:
            return ""
