"""Mistakes in a server are found when it is written, not when a client calls: every
registration problem is a ``RegistrationError`` (also a ``ValueError`` and a
``TypeError``) raised at registration, naming the tool, resource or prompt. Failures
inside handlers reach the client in a form it can read.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import pytest

import modelctx
from modelctx import (
    InvalidParams,
    ProtocolError,
    RegistrationError,
    ResourceNotFound,
    Server,
    ToolError,
)
from modelctx.client import Client
from tests.support.wire import async_test

DEADLINE = 15.0


run = async_test(2 * DEADLINE)  # a fresh loop and a deadline for each test


def greet() -> str:
    return "hello"


def test_registration_error_is_a_value_error_and_a_type_error_under_the_root():
    assert issubclass(RegistrationError, modelctx.MCPError)
    assert issubclass(RegistrationError, ValueError) and issubclass(RegistrationError, TypeError)


# -- duplicates ------------------------------------------------------------------------------
def test_a_second_tool_with_the_same_name_is_refused():
    server = Server("dup")
    server.add_tool(greet)
    with pytest.raises(RegistrationError, match=r"a tool named 'greet' is already registered; pass replace=True"):
        server.add_tool(lambda: "other", name="greet")


def test_a_second_prompt_with_the_same_name_is_refused():
    server = Server("dup")
    server.prompt(greet)
    with pytest.raises(RegistrationError, match=r"a prompt named 'greet' is already registered"):
        server.prompt(lambda: "other", name="greet")


def test_a_second_resource_or_template_with_the_same_uri_is_refused():
    server = Server("dup")
    server.resource("notes://today")(greet)
    server.resource("notes://{id}")(lambda id: id)
    with pytest.raises(RegistrationError, match=r"a resource 'notes://today' is already registered"):
        server.resource("notes://today")(greet)
    with pytest.raises(RegistrationError, match=r"a resource template 'notes://\{id\}' is already registered"):
        server.resource("notes://{id}")(lambda id: id)


@run
async def test_replace_true_replaces_on_purpose():
    server = Server("dup")
    server.add_tool(greet)
    server.add_tool(lambda: "replaced", name="greet", replace=True)
    server.prompt(greet)
    server.prompt(lambda: "new prompt", name="greet", replace=True)
    server.resource("notes://today")(greet)
    server.resource("notes://today", replace=True)(lambda: "new text")
    async with Client(server, timeout=DEADLINE) as client:
        assert (await client.call_tool("greet")).content[0].text == "replaced"
        assert (await client.get_prompt("greet")).messages[0].content.text == "new prompt"
        read = await client.read_resource("notes://today")
        assert read.contents[0]["text"] == "new text"
        assert len(await client.tools()) == 1


# -- names ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("get user", "it contains ' '"),
        ("get,user", "it contains ','"),
        ("überlist", "it contains 'ü'"),
        ("t" * 129, "129 characters"),
        ("", "a tool name must be a non-empty string"),
    ],
    ids=["space", "comma", "non-ascii", "too-long", "empty"],
)
def test_a_tool_name_outside_the_specs_character_set_or_length_is_refused(name, why):
    server = Server("names")
    with pytest.raises(RegistrationError, match=why):
        server.add_tool(greet, name=name)


@pytest.mark.parametrize("name", ["getUser", "DATA_EXPORT_v2", "admin.tools.list", "a-b", "t" * 128])
def test_the_specs_example_tool_names_are_accepted(name):
    Server("names").add_tool(greet, name=name)


def test_a_lambda_without_a_name_is_refused():
    server = Server("names")
    with pytest.raises(RegistrationError, match="has no name to register this tool under.*pass name="):
        server.add_tool(lambda: "x")
    with pytest.raises(RegistrationError, match="has no name to register this prompt under"):
        server.prompt(lambda: "x")


def test_a_callable_object_without_a_name_is_refused():
    class Greeter:
        def __call__(self) -> str:
            return "hi"

    with pytest.raises(RegistrationError, match="pass name="):
        Server("names").add_tool(Greeter())
    Server("names").add_tool(Greeter(), name="greeter")


# -- types ---------------------------------------------------------------------------------
def test_a_prompt_argument_that_is_not_a_string_type_is_refused():
    server = Server("prompts")

    def review(code: str, lines: int) -> str:
        return code

    with pytest.raises(RegistrationError, match=r"prompt 'review': argument 'lines' is typed <class 'int'>.*strings"):
        server.prompt(review)


def test_prompt_arguments_may_be_optional_strings_or_literals():
    def review(code: str, language: Literal["python", "go"] = "python", note: str | None = None) -> str:
        return code

    Server("prompts").prompt(review)


class Connection:  # neither JSON nor a type with a schema
    pass


def test_an_unsupported_parameter_type_names_the_tool_and_the_parameter():
    def query(sql: str, connection: Connection) -> str:
        return sql

    with pytest.raises(RegistrationError) as caught:
        Server("types").add_tool(query)
    message = str(caught.value)
    assert "tool 'query': parameter 'connection' has type" in message and "Connection" in message
    assert "schema_hook" not in message  # msgspec's own wording stays out


def test_star_args_are_refused():
    def gather(*items: str) -> str:
        return ""

    with pytest.raises(RegistrationError, match=r"tool 'gather': \*items cannot receive arguments"):
        Server("types").add_tool(gather)


def test_a_template_parameter_that_is_not_a_variable_is_refused():
    with pytest.raises(RegistrationError, match=r"parameters \['ident'\] of 'note' are not variables"):

        @Server("t").resource("notes://{id}")
        def note(ident: str) -> str:
            return ident


def test_a_completion_for_an_argument_the_prompt_lacks_is_refused():
    server = Server("c")
    server.prompt(greet)
    with pytest.raises(RegistrationError, match=r"completion for 'greet': it has no argument 'lang'"):
        server.completion("greet", "lang")(lambda value, context: [])


# -- failures inside handlers ----------------------------------------------------------------
class Unsendable:
    pass


@run
async def test_an_unsupported_return_value_is_a_tool_error_naming_the_tool(caplog):
    server = Server("returns")

    @server.tool(structured_output=False)
    def make() -> Any:
        return Unsendable()

    with caplog.at_level(logging.ERROR, logger="modelctx.server"):
        async with Client(server, timeout=DEADLINE) as client:
            result = await client.call_tool("make")

    assert result.is_error is True
    assert "make" in result.content[0].text and "Unsendable" in result.content[0].text
    assert any("make" in record.getMessage() for record in caplog.records)  # logged on the server


@run
async def test_a_tool_error_in_a_resource_handler_is_an_error_the_client_reads():
    server = Server("resources")

    @server.resource("weather://{city}")
    def weather(city: str) -> str:
        raise ToolError(f"no station reports for {city} today")

    async with Client(server, timeout=DEADLINE) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.read_resource("weather://Oslo")

    assert caught.value.code == -32603  # the handler failed; the resource exists
    assert caught.value.message == "no station reports for Oslo today"


@run
async def test_a_tool_error_in_a_prompt_handler_is_an_error_the_client_reads():
    server = Server("prompts")

    @server.prompt
    def summary(topic: str) -> str:
        raise ToolError("the archive is offline")

    async with Client(server, timeout=DEADLINE) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.get_prompt("summary", {"topic": "x"})

    assert caught.value.code == -32603 and caught.value.message == "the archive is offline"


@run
async def test_resource_not_found_raised_by_a_handler_is_minus_32602_with_the_uri():
    server = Server("resources")

    @server.resource("notes://{id}")
    def note(id: str) -> str:
        raise ResourceNotFound(f"notes://{id}")

    async with Client(server, timeout=DEADLINE) as client:
        with pytest.raises(InvalidParams) as caught:
            await client.read_resource("notes://404")

    assert caught.value.code == -32602 and caught.value.data == {"uri": "notes://404"}


def test_the_errors_a_server_author_raises_are_importable_from_modelctx():
    import modelctx.errors

    for name in ("ToolError", "ResourceNotFound", "InvalidParams", "RegistrationError", "MCPError", "ProtocolError"):
        assert getattr(modelctx, name) is getattr(modelctx.errors, name)
        assert name in modelctx.__all__
