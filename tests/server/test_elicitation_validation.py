"""Form elicitation answers are checked against the requested schema (client/elicitation.mdx).

* Servers SHOULD validate that received data matches the requested schema (Form Mode
  Security). An accepted answer that does not is a -32602 error naming the field, in
  both eras: the 2026-07-28 ``inputResponses`` of a retry (mrtr.mdx: protocol errors
  such as an invalid schema SHOULD be a JSON-RPC error) and the handshake era's
  answer to ``elicitation/create``.
* A schema that came from a type gives the handler that type back.
* ``requestedSchema`` is a flat object of primitive properties; anything else is refused
  in the handler, naming the field, before it reaches the client.

The servers are ``tests/fixtures/servers/mrtr_server.py``: in process, on stdio and on HTTP.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from modelctx import Elicit
from modelctx.client import Client, ClientHandlers, Elicitation
from modelctx.errors import InvalidParams
from tests.fixtures.servers import mrtr_server
from tests.support.paths import SERVERS
from tests.support.wire import HttpServer, serve_command

MRTR_SERVER = SERVERS / "mrtr_server.py"
DEADLINE = 15.0


@pytest.fixture(scope="module")
def mrtr_http(tmp_path_factory) -> Iterator[HttpServer]:
    with HttpServer(MRTR_SERVER, tmp_path_factory.mktemp("mrtr-http") / "server.log") as server:
        yield server


# Every way a client reaches the server, in both eras.
WAYS = [
    ("memory", "auto"),
    ("memory", "handshake"),
    ("stdio", "auto"),
    ("stdio", "handshake"),
    ("http", "auto"),
    ("http", "handshake"),
]


@pytest.fixture(params=WAYS, ids=[f"{t}-{m}" for t, m in WAYS])
def way(request) -> tuple[Any, str]:
    transport, mode = request.param
    if transport == "memory":
        return mrtr_server.server, mode
    if transport == "stdio":
        return serve_command(MRTR_SERVER), mode
    return request.getfixturevalue("mrtr_http").url, mode


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(main(), 2 * DEADLINE))


class User:
    """Answers every form with ``content`` and remembers what it was asked."""

    def __init__(self, content: dict[str, Any], action: str = "accept") -> None:
        self.content = content
        self.action = action
        self.asked: list[Elicitation] = []

    async def elicit(self, request: Elicitation) -> dict[str, Any]:
        self.asked.append(request)
        return {"action": self.action, "content": self.content}


def call(way: tuple[Any, str], user: User, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    target, mode = way

    async def main() -> Any:
        async with Client(target, mode=mode, timeout=DEADLINE, handlers=ClientHandlers(elicitation=user.elicit)) as client:
            return await client.call_tool(tool, arguments or {})

    return run(main)


# -- invalid answers --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "field", "why"),
    [
        ({"age": "old"}, "'age'", "is not of type 'integer'"),
        ({"age": -1}, "'age'", "less than the minimum of 0"),
        ({}, "'age'", "is a required property"),
    ],
)
def test_an_accepted_form_that_does_not_match_the_schema_is_invalid_params_naming_the_field(
    way, content, field, why
):
    with pytest.raises(InvalidParams) as caught:
        call(way, User(content), "age_form")

    assert caught.value.code == -32602
    message = str(caught.value)
    assert field in message and why in message and "does not match the requested schema" in message


def test_a_matching_answer_reaches_the_handler(way):
    result = call(way, User({"age": 36}), "age_form")

    assert result.content[0].text == "accept {'age': 36}"


def test_a_declined_form_is_not_checked(way):
    result = call(way, User({"age": "not checked"}, action="decline"), "age_form")

    assert result.content[0].text.startswith("decline")


# -- typed answers --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "received"),
    [
        ("dataclass", "Person: Ada, 36"),
        ("typeddict", "dict: Ada, 36"),
        ("struct", "PersonStruct: Ada, 36"),
        ("pydantic", "PersonModel: Ada, 36"),
        ("dict", "dict: Ada, 36"),
    ],
)
@pytest.mark.parametrize("mode", ["auto", "handshake"])
def test_a_form_from_a_type_gives_the_handler_that_type(kind, received, mode):
    result = call((mrtr_server.server, mode), User({"name": "Ada", "age": 36}), "typed_form", {"kind": kind})

    assert result.content[0].text == received


@pytest.mark.parametrize("mode", ["auto", "handshake"])
def test_a_type_constraint_is_checked_like_the_schema(mode):
    with pytest.raises(InvalidParams) as caught:  # PersonModel: name has min_length=2
        call((mrtr_server.server, mode), User({"name": "A", "age": 36}), "typed_form", {"kind": "pydantic"})

    assert "'name'" in str(caught.value)


def test_the_schema_of_a_dataclass_is_flat_primitives_the_client_can_render():
    user = User({"name": "Ada", "age": 36})
    call((mrtr_server.server, "auto"), user, "typed_form", {"kind": "dataclass"})

    (asked,) = user.asked
    assert asked.requested_schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "colour": {"type": "string", "enum": ["green", "red"], "default": "red"},
            "nickname": {"type": "string"},  # Optional: left out of required, no null type
        },
        "required": ["name", "age"],
    }


# -- schemas that are not flat primitives ----------------------------------------------------
@pytest.mark.parametrize("mode", ["auto", "handshake"])
def test_a_nested_dataclass_is_refused_in_the_handler_naming_the_field(mode):
    user = User({})
    result = call((mrtr_server.server, mode), user, "nested_form")

    assert result.is_error
    text = result.content[0].text
    assert text.startswith("refused: elicitation schema Customer: field 'address'")
    assert "flat object" in text
    assert user.asked == []  # nothing reached the client


@dataclasses.dataclass
class Tagged:
    tags: list[str]


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"type": "object", "properties": {"home": {"type": "object", "properties": {}}}}, "'home'"),
        ({"type": "object", "properties": {"home": {"$ref": "#/$defs/Address"}}}, "'home'"),
        ({"type": "object", "properties": {"n": {"type": ["string", "null"]}}}, "'n'"),
        ({"type": "object", "properties": {"n": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}, "'n'"),
        ({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}}}}, "'ids'"),
        ({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}}, "'id'"),
        ({"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2]}}}, "'n'"),
    ],
)
def test_a_dict_schema_that_is_not_flat_primitives_is_refused_naming_the_field(schema, field):
    with pytest.raises(ValueError, match=f"field {field}"):
        Elicit("Form?", schema)


def test_a_list_field_that_is_not_an_enum_is_refused_naming_the_field():
    with pytest.raises(TypeError, match="elicitation schema Tagged: field 'tags'"):
        Elicit("Tags?", Tagged)


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "minLength": 3, "maxLength": 50, "format": "email", "default": "a@b.c"},
        {"type": "number", "minimum": 0, "maximum": 100, "default": 50},
        {"type": "integer"},
        {"type": "boolean", "default": False},
        {"type": "string", "enum": ["Red", "Green"]},
        {"type": "string", "oneOf": [{"const": "#FF0000", "title": "Red"}]},
        {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
        {"type": "array", "minItems": 1, "items": {"type": "string", "enum": ["Red", "Green"]}},
        {"type": "array", "items": {"anyOf": [{"const": "#FF0000", "title": "Red"}]}},
    ],
)
def test_every_primitive_the_spec_lists_is_accepted(prop):
    schema = {"type": "object", "properties": {"field": prop}}

    assert Elicit("Form?", schema).schema == schema
