"""Tools a newcomer writes from the README: optional and listed pydantic models as
parameters, and return annotations whose promise (an ``outputSchema``) the result keeps.

Each test goes through the public API: a ``Server`` and our ``Client`` on it, which
lists the tools first so that it checks every result against its ``outputSchema``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pydantic

from modelctx import Client, Image, Server, Text


class User(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(ge=0)


def call(server: Server, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    async def go() -> Any:
        async with Client(server) as client:
            listed = {t.name: t for t in await client.tools()}  # learn the outputSchemas
            return listed[tool], await client.call_tool(tool, arguments)

    return asyncio.run(asyncio.wait_for(go(), 15))


def test_optional_and_listed_pydantic_models_are_parameters_that_validate():
    server = Server("users")

    @server.tool
    def greet(user: User | None = None, friends: list[User] | None = None) -> str:
        names = [u.name for u in friends or []]
        return f"hello {user.name if user else 'nobody'} and {names}"

    tool, ok = call(server, "greet", {"user": {"name": "ada", "age": 36}, "friends": [{"name": "bob", "age": 1}]})
    _, bad = call(server, "greet", {"friends": [{"name": "eve", "age": -1}]})

    assert tool.input_schema["properties"]["user"]["anyOf"][0] == {"$ref": "#/$defs/User"}
    assert ok.content[0].text == "hello ada and ['bob']"
    assert bad.is_error is True
    assert "friends.0.age" in bad.content[0].text and "greater than or equal to 0" in bad.content[0].text


def test_a_list_of_strings_is_the_structured_content_its_annotation_promised():
    server = Server("names")

    @server.tool
    def names() -> list[str]:
        return ["ada", "bob"]

    tool, result = call(server, "names")

    assert tool.output_schema["properties"]["result"] == {"type": "array", "items": {"type": "string"}}
    assert result.structured_content == {"result": ["ada", "bob"]}


def test_a_bare_list_return_may_be_content_blocks():
    # README: "Return str, Image, ..., a list of them". A bare `-> list` says nothing
    # of its items, so it promises no outputSchema that content blocks would break.
    server = Server("blocks")

    @server.tool
    def pictures() -> list:  # type: ignore[type-arg]
        return [Text("one"), Image(data=b"\x89PNG", mime_type="image/png")]

    tool, result = call(server, "pictures")

    assert tool.output_schema is msgspec.UNSET
    assert [block.type for block in result.content] == ["text", "image"]
    assert result.is_error is not True
