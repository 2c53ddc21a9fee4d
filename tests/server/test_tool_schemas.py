"""What a tool's types promise, the server keeps: every constraint written in ``Annotated``
(annotated_types, pydantic ``Field``, ``msgspec.Meta``) is in the tool's ``inputSchema``
and is checked before the handler runs; an ``input_schema`` the author writes is
enforced too. Invalid arguments are a tool execution error (``isError: true``,
server/tools.mdx, Error Handling), and the handler never sees them.

Every test talks to the server through the modelctx client, in process.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Optional

import annotated_types as at
import msgspec
import pydantic
import pytest

from modelctx import ProtocolError, RegistrationError, Server
from modelctx.client import Client
from tests.support.wire import async_test

DEADLINE = 15.0


run = async_test(2 * DEADLINE)  # a fresh loop and a deadline for each test


def server_with(annotation: Any) -> tuple[Server, list[Any]]:
    """A server whose tool ``check`` takes one parameter ``value: annotation``; the
    list records every value that reached the handler."""
    server = Server("schemas")
    seen: list[Any] = []

    def check(value):  # type: ignore[no-untyped-def]
        seen.append(value)
        return "ran"

    check.__annotations__ = {"value": annotation, "return": str}
    server.tool(check)
    return server, seen


# (id, annotation, what the parameter's schema must hold, a valid value, an invalid one)
CONSTRAINTS = [
    ("Gt", Annotated[int, at.Gt(0)], {"exclusiveMinimum": 0}, 1, 0),
    ("Ge", Annotated[int, at.Ge(1)], {"minimum": 1}, 1, 0),
    ("Lt", Annotated[int, at.Lt(10)], {"exclusiveMaximum": 10}, 9, 10),
    ("Le", Annotated[int, at.Le(10)], {"maximum": 10}, 10, 11),
    ("MultipleOf", Annotated[int, at.MultipleOf(3)], {"multipleOf": 3}, 6, 7),
    ("MinLen", Annotated[str, at.MinLen(2)], {"minLength": 2}, "ab", "a"),
    ("MaxLen", Annotated[str, at.MaxLen(2)], {"maxLength": 2}, "ab", "abc"),
    ("MinLen-list", Annotated[list[int], at.MinLen(1)], {"minItems": 1}, [1], []),
    ("Len", Annotated[str, at.Len(2, 3)], {"minLength": 2, "maxLength": 3}, "abc", "abcd"),
    ("Interval", Annotated[float, at.Interval(gt=0, le=1)], {"exclusiveMinimum": 0, "maximum": 1}, 0.5, 1.5),
    ("doc", Annotated[int, at.doc("how many"), at.Ge(0)], {"description": "how many", "minimum": 0}, 0, -1),
    ("nested-in-list", list[Annotated[int, at.Gt(0)]], {"items": {"type": "integer", "exclusiveMinimum": 0}}, [1], [0]),
    ("nested-in-dict", dict[str, Annotated[int, at.Le(5)]], {"additionalProperties": {"type": "integer", "maximum": 5}}, {"a": 5}, {"a": 6}),
    (
        "nested-in-optional",
        Optional[Annotated[int, at.Ge(0)]],  # noqa: UP045 - the typing spelling is the one tested
        {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
        None,
        -1,
    ),
    ("Field-gt", Annotated[int, pydantic.Field(gt=0)], {"exclusiveMinimum": 0}, 1, 0),
    ("Field-ge", Annotated[int, pydantic.Field(ge=1)], {"minimum": 1}, 1, 0),
    ("Field-lt", Annotated[int, pydantic.Field(lt=10)], {"exclusiveMaximum": 10}, 9, 10),
    ("Field-le", Annotated[int, pydantic.Field(le=10)], {"maximum": 10}, 10, 11),
    ("Field-multiple_of", Annotated[int, pydantic.Field(multiple_of=5)], {"multipleOf": 5}, 10, 11),
    ("Field-min_length", Annotated[str, pydantic.Field(min_length=2)], {"minLength": 2}, "ab", "a"),
    ("Field-max_length", Annotated[list[int], pydantic.Field(max_length=1)], {"maxItems": 1}, [1], [1, 2]),
    ("Field-pattern", Annotated[str, pydantic.Field(pattern=r"^[a-z]+$")], {"pattern": "^[a-z]+$"}, "abc", "ABC"),
    (
        "Field-title-description",
        Annotated[int, pydantic.Field(title="Count", description="how many", ge=0)],
        {"title": "Count", "description": "how many", "minimum": 0},
        3,
        -3,
    ),
    (
        "StringConstraints",
        Annotated[str, pydantic.StringConstraints(min_length=2, pattern=r"^x")],
        {"minLength": 2, "pattern": "^x"},
        "xy",
        "yy",
    ),
    ("msgspec.Meta", Annotated[int, msgspec.Meta(ge=0, description="d")], {"minimum": 0, "description": "d"}, 0, -1),
]


@pytest.mark.parametrize(
    ("annotation", "schema", "good", "bad"),
    [case[1:] for case in CONSTRAINTS],
    ids=[case[0] for case in CONSTRAINTS],
)
@run
async def test_a_constraint_is_in_the_schema_and_checked_before_the_handler(annotation, schema, good, bad):
    server, seen = server_with(annotation)
    async with Client(server, timeout=DEADLINE) as client:
        [tool] = await client.tools()
        accepted = await client.call_tool("check", {"value": good})
        refused = await client.call_tool("check", {"value": bad})

    described = tool.input_schema["properties"]["value"]
    assert {key: described.get(key) for key in schema} == schema
    assert accepted.is_error is not True and accepted.content[0].text == "ran"
    assert refused.is_error is True
    assert "value" in refused.content[0].text
    assert seen == [good]  # the invalid value never reached the handler


@run
async def test_a_predicate_is_checked_before_the_handler():
    server, seen = server_with(Annotated[str, at.Predicate(str.islower)])
    async with Client(server, timeout=DEADLINE) as client:
        accepted = await client.call_tool("check", {"value": "quiet"})
        refused = await client.call_tool("check", {"value": "LOUD"})

    assert accepted.is_error is not True
    assert refused.is_error is True
    assert "islower" in refused.content[0].text and "value" in refused.content[0].text
    assert seen == ["quiet"]


@run
async def test_constraints_hold_in_the_handshake_era_too():
    server, seen = server_with(Annotated[int, at.Gt(0)])
    async with Client(server, mode="handshake", timeout=DEADLINE) as client:
        refused = await client.call_tool("check", {"value": 0})

    assert refused.is_error is True and seen == []


def test_a_predicate_nested_inside_a_type_is_refused_at_registration():
    with pytest.raises(RegistrationError, match=r"tool 'check': parameter 'value'.*Predicate"):
        server_with(list[Annotated[str, at.Predicate(str.islower)]])


def test_a_constraint_that_cannot_be_checked_is_refused_at_registration():
    with pytest.raises(RegistrationError, match=r"tool 'check': parameter 'value'.*allow_inf_nan"):
        server_with(Annotated[float, pydantic.Field(allow_inf_nan=False)])


@dataclass
class Point:
    x: Annotated[int, msgspec.Meta(ge=0)]
    y: int = 0


@dataclass
class HiddenlyConstrained:
    x: Annotated[int, at.Ge(0)]


@run
async def test_msgspec_meta_inside_a_dataclass_is_checked():
    server, seen = server_with(list[Point])
    async with Client(server, timeout=DEADLINE) as client:
        refused = await client.call_tool("check", {"value": [{"x": -1}]})

    assert refused.is_error is True and seen == []


def test_an_annotated_types_constraint_inside_a_dataclass_is_refused_at_registration():
    # msgspec reads dataclass fields itself and would skip it without a word.
    with pytest.raises(RegistrationError, match=r"tool 'check': parameter 'value': field HiddenlyConstrained.x .*msgspec.Meta"):
        server_with(list[HiddenlyConstrained])


# -- an input_schema written by the author ---------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}


def schema_server(schema: dict[str, Any]) -> tuple[Server, list[Any]]:
    server = Server("schemas")
    seen: list[Any] = []

    @server.tool(input_schema=schema)
    def forecast(**arguments: Any) -> str:
        seen.append(arguments)
        return "sunny"

    return server, seen


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"days": 2}, "'city' is a required property"),
        ({"city": "Oslo", "days": 0}, "days: 0 is less than the minimum of 1"),
        ({"city": 7}, "city: 7 is not of type 'string'"),
    ],
    ids=["missing-required", "under-minimum", "wrong-type"],
)
@run
async def test_the_authors_input_schema_is_enforced(arguments, complaint):
    server, seen = schema_server(SCHEMA)
    async with Client(server, timeout=DEADLINE) as client:
        refused = await client.call_tool("forecast", arguments)
        accepted = await client.call_tool("forecast", {"city": "Oslo", "days": 2})

    assert refused.is_error is True
    assert complaint in refused.content[0].text
    assert accepted.is_error is not True
    assert seen == [{"city": "Oslo", "days": 2}]


@run
async def test_an_input_schema_without_dollar_schema_is_read_as_2020_12():
    # prefixItems exists in 2020-12 only; an older dialect would ignore it.
    server, seen = schema_server(
        {"type": "object", "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}}}
    )
    async with Client(server, timeout=DEADLINE) as client:
        refused = await client.call_tool("forecast", {"pair": [1, "a"]})

    assert refused.is_error is True and seen == []


@run
async def test_an_input_schema_naming_its_dialect_is_read_in_that_dialect():
    # In draft 7, "items" as a list is the tuple form.
    server, seen = schema_server(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}},
        }
    )
    async with Client(server, timeout=DEADLINE) as client:
        refused = await client.call_tool("forecast", {"pair": [1, "a"]})
        accepted = await client.call_tool("forecast", {"pair": ["a", 1]})

    assert refused.is_error is True and accepted.is_error is not True
    assert seen == [{"pair": ["a", 1]}]


@pytest.mark.parametrize(
    ("schema", "complaint"),
    [
        ({"type": "object", "properties": {"n": {"type": "integr"}}}, "not a valid JSON Schema at properties/n/type"),
        ({"type": "string"}, 'input_schema must have "type": "object"'),
        ({"type": "object", "required": "city"}, "not a valid JSON Schema at required"),
        ({"type": "object", "properties": {"c": {"pattern": "(["}}}, "not a valid JSON Schema at properties/c/pattern"),
        ({"type": "object", "properties": {"c": {"minLength": -1}}}, "not a valid JSON Schema at properties/c/minLength"),
        ({"type": "object", "anyOf": []}, "not a valid JSON Schema at anyOf"),
        ({"type": "object", "$defs": {"a": {"type": ["string", "string"]}}}, "not a valid JSON Schema at $defs/a/type"),
        ({"type": "object", "$schema": 7}, "$schema must be a URI"),
        # Another dialect than 2020-12 gets jsonschema's own check at registration.
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"n": {"type": "integr"}}},
            "not a valid JSON Schema at properties/n/type",
        ),
    ],
    ids=[
        "invalid-schema", "not-an-object-schema", "required-not-a-list", "bad-regex", "negative-count",
        "empty-anyOf", "repeated-type", "schema-uri-not-a-string", "draft-07-invalid",
    ],
)
def test_an_invalid_input_schema_is_refused_at_registration(schema, complaint):
    with pytest.raises(RegistrationError) as caught:
        schema_server(schema)
    assert "tool 'forecast'" in str(caught.value) and complaint in str(caught.value)


def test_registering_an_input_schema_tool_does_not_import_jsonschema():
    # jsonschema's import is 55-77 ms of a small server's start (issue 25): the shape is
    # checked at registration, the validator is built at the first call.
    code = (
        "import sys\n"
        "from modelctx import Server\n"
        "server = Server('start')\n"
        "@server.tool(input_schema={'type': 'object', 'properties': {'city': {'type': 'string', 'pattern': '^[A-Z]'}},"
        " 'required': ['city']})\n"
        "def forecast(**arguments): return 'sunny'\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@async_test()
async def test_a_schema_only_the_full_meta_schema_check_refuses_fails_its_calls_as_the_servers_fault(caplog):
    # "examples" must be an array, "$vocabulary" an object of booleans: the quick shape
    # check at registration does not know "$vocabulary", jsonschema's check at the first
    # call does. The caller gets an Internal error (not the server's schema in detail);
    # the server's log says what is wrong.
    server, seen = schema_server({"type": "object", "$vocabulary": 5})
    with caplog.at_level(logging.ERROR, logger="modelctx.server"):
        async with Client(server, timeout=DEADLINE) as client:
            with pytest.raises(ProtocolError) as caught:
                await client.call_tool("forecast", {})
    assert "Internal error" in str(caught.value) and "vocabulary" not in str(caught.value)
    assert seen == []
    assert any("not a valid JSON Schema at $vocabulary" in r.getMessage() + str(r.exc_info) for r in caplog.records)
