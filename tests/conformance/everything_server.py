"""The conformance fixture: every tool, resource and prompt the MCP conformance suite calls.

Written with modelctx the way a user would write a server. Served by

    modelctx serve tests/conformance/everything_server.py --http --host 127.0.0.1 --port PORT
    modelctx serve tests/conformance/everything_server.py            # stdio

One server answers both eras: the 2025-11-25 scenarios drive it through initialize and
a session; the 2026-07-28 scenarios through stateless requests. The names and texts
below are the ones the suite's scenarios look for. Order matters in two places:
``test_simple_text`` is the first tool and ``test://static-text`` the first resource.
"""

from __future__ import annotations

import asyncio
import json

from modelctx import (
    Context,
    Elicit,
    EmbeddedResource,
    Image,
    ListRoots,
    Sample,
    Server,
    ServerConfig,
    ToolError,
)
from modelctx.errors import InternalError
from modelctx.server import Audio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

server = Server(
    "modelctx-everything",
    version="0.1.0",
    instructions="The modelctx conformance fixture: test tools, resources and prompts.",
    config=ServerConfig(ttl_ms=0, cache_scope="public"),
)

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


# -- tools of both eras ---------------------------------------------------------------
@server.tool
def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@server.tool
def test_image_content() -> Image:
    """Returns an image content block."""
    return Image(PNG, "image/png")


@server.tool
def test_audio_content() -> Audio:
    """Returns an audio content block."""
    return Audio(WAV, "audio/wav")


@server.tool
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded text resource."""
    return EmbeddedResource(
        "test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
    )


@server.tool
def test_multiple_content_types() -> list[str | Image | EmbeddedResource]:
    """Returns text, an image and an embedded resource together."""
    return [
        "Multiple content types test:",
        Image(PNG, "image/png"),
        EmbeddedResource(
            "test://mixed-content-resource",
            text=json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
            mime_type="application/json",
        ),
    ]


@server.tool
def test_error_handling() -> str:
    """Always fails, as a tool execution error the model can see."""
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100, then answers."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"step {step}")
        if step < 100:
            await asyncio.sleep(0.05)
    return "Progress complete"


@server.tool(
    description="Tool with JSON Schema 2020-12 features",
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    },
)
def json_schema_2020_12_tool(**arguments: object) -> str:
    return f"Received: {json.dumps(arguments, sort_keys=True)}"


@server.tool(
    input_schema={
        "type": "object",
        "properties": {"greeting": {"type": "string", "x-mcp-header": "Greeting"}},
        "required": ["greeting"],
    }
)
def test_custom_header_tool(greeting: str) -> str:
    """Echoes an argument that is mirrored into the Mcp-Param-Greeting header."""
    return f"Greeting: {greeting}"


# -- tools of the handshake era: server-to-client requests and logging --------------------
@server.tool
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three log messages while it runs."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(text)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@server.tool
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model to answer a prompt."""
    answer = await ctx.sample(prompt, max_tokens=100)
    content = answer.get("content")
    text = content.get("text") if isinstance(content, dict) else json.dumps(content)
    return f"LLM response: {text}"


@server.tool
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email address."""
    result = await ctx.elicit(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={result.action}, content={json.dumps(result.content)}"


@server.tool
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits a form whose fields all have defaults (SEP-1034)."""
    result = await ctx.elicit(
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
            "required": [],
        },
    )
    return f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}"


@server.tool
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits a form with every enum shape (SEP-1330)."""
    result = await ctx.elicit(
        "Please select options from the enum fields",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
            "required": [],
        },
    )
    return f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}"


@server.tool(description="Closes the SSE stream mid-call; the result arrives after the client reconnects")
async def test_reconnection(ctx: Context) -> str:
    # SEP-1699 polling (scenario server-sse-polling): the POST stream ends with a priming
    # event; the client gets the result with GET and Last-Event-ID.
    await ctx.close_sse_stream(retry_ms=500)
    await asyncio.sleep(0.1)
    return "Reconnection test completed: the result arrived after the stream was closed"


# -- tools of the modern era ----------------------------------------------------------------
@server.tool
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability (answers -32021 without it)."""
    answer = await ctx.sample("Say hello", max_tokens=20)
    return f"Sampled: {answer.get('content')}"


@server.tool
async def test_streaming_elicitation(ctx: Context) -> str:
    """Asks for a name; in 2026-07-28 that is an input_required result, never a request."""
    result = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    return f"Hello, {(result.content or {}).get('name', 'stranger')}!"


@server.tool
async def test_logging_tool(ctx: Context) -> str:
    """Logs only when the request asked for logs with _meta logLevel."""
    await ctx.info("test_logging_tool ran")
    return "Logging tool finished"


@server.tool
def test_trigger_tool_change() -> str:
    """Changes the tool list, which notifies tools/list_changed subscribers."""
    server.add_tool(_dynamic_tool, name="test_dynamic_tool", replace=True)
    return "Tool list changed"


@server.tool
def test_trigger_prompt_change() -> str:
    """Changes the prompt list, which notifies prompts/list_changed subscribers."""
    server.prompt(_dynamic_prompt, name="test_dynamic_prompt", replace=True)
    return "Prompt list changed"


def _dynamic_tool() -> str:
    """A tool added at run time."""
    return "dynamic"


def _dynamic_prompt() -> str:
    """A prompt added at run time."""
    return "dynamic prompt"


# -- multi round-trip requests (2026-07-28 input_required results) --------------------------
@server.tool
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks for the user's name with an input_required result."""
    result = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    return f"Hello, {(result.content or {}).get('name')}!"


@server.tool
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question with an input_required result."""
    answer = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"Model answered: {answer['content'].get('text')}"


@server.tool
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks the client for its roots with an input_required result."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(root.get("uri", "?") for root in roots)


@server.tool
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the retry must bring the requestState back."""
    result = await ctx.elicit(
        "Please confirm",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    return f"state-ok: confirmed={(result.content or {}).get('ok')}"


@server.tool
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks three things at once: a name, a model greeting and the roots."""
    answers = await ctx.ask(
        {
            "user_name": Elicit("What is your name?", NAME_FORM),
            "greeting": Sample("Generate a greeting", max_tokens=50),
            "client_roots": ListRoots(),
        }
    )
    name = (answers["user_name"].content or {}).get("name")
    greeting = answers["greeting"]["content"].get("text")
    return f"{greeting} {name}; roots: {len(answers['client_roots'])}"


@server.tool
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks two questions in two rounds."""
    first = await ctx.elicit("Step 1: What is your name?", NAME_FORM, key="step1")
    second = await ctx.elicit(
        "Step 2: What is your favorite color?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"{(first.content or {}).get('name')} likes {(second.content or {}).get('color')}"


@server.tool
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks a question; a tampered requestState on the retry is rejected."""
    result = await ctx.elicit(
        "Please confirm",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    return f"confirmed={(result.content or {}).get('ok')}"


@server.tool
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared: elicitation if it can, else sampling."""
    if "elicitation" in ctx.client_capabilities:
        result = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
        return f"Hello, {(result.content or {}).get('name')}!"
    answer = await ctx.sample("What is your name?", max_tokens=50, key="model_name")
    return f"The model says: {answer['content'].get('text')}"


# -- the tasks extension (io.modelcontextprotocol/tasks): the tasks-* scenarios -----------
@server.tool
def greet(name: str) -> str:
    """Says hello; never a task."""
    return f"Hello, {name}!"


@server.tool(task="optional")
async def slow_compute(seconds: float, label: str = "") -> str:
    """Sleeps ``seconds`` (a task for clients that take tasks), then says so."""
    await asyncio.sleep(seconds)
    return f"computed {label} after {seconds}s"


@server.tool(task="required")
async def failing_job() -> str:
    """Always a task; ends with a tool execution error after about a second."""
    await asyncio.sleep(1)
    raise ToolError("the job failed (on purpose)")


@server.tool(task="optional")
async def protocol_error_job() -> str:
    """Ends its task with a JSON-RPC error (the task fails)."""
    raise InternalError("the job broke (on purpose)")


CONFIRM_FORM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
PARTIAL_FORM = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
}


@server.tool(task="optional")
async def confirm_delete(filename: str, ctx: Context) -> str:
    """Asks the user to confirm, then pretends to delete ``filename``."""
    answer = await ctx.elicit(f"Delete {filename}?", CONFIRM_FORM)
    confirmed = answer.accepted and bool((answer.content or {}).get("confirm"))
    return f"deleted {filename}" if confirmed else f"kept {filename}"


@server.tool(task="optional")
async def multi_input(ctx: Context) -> str:
    """Asks two questions at once, so two inputRequests are open together."""
    first, second = await asyncio.gather(
        ctx.elicit("First name?", PARTIAL_FORM), ctx.elicit("Second name?", PARTIAL_FORM)
    )
    return f"got {(first.content or {}).get('name')} and {(second.content or {}).get('name')}"


@server.tool(task="required", task_start="handler")
async def test_tool_with_task(ctx: Context) -> str:
    """Asks for a name in input_required rounds, then goes on as a task."""
    answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    await ctx.start_task()
    return f"Hello from the task, {(answer.content or {}).get('name')}!"


# -- resources --------------------------------------------------------------------------
@server.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> EmbeddedResource:
    """A static binary resource (a PNG image)."""
    return EmbeddedResource("test://static-binary", blob=PNG, mime_type="image/png")


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


@server.resource("test://template/{id}/data", name="template", mime_type="application/json")
def template_data(id: str) -> str:
    """Data for an id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# -- prompts ---------------------------------------------------------------------------------
@server.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments.

    Args:
        arg1: the first argument
        arg2: the second argument
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    """A prompt that embeds a resource.

    Args:
        resourceUri: the URI of the resource to embed
    """
    return [
        EmbeddedResource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"),
        "Please process the embedded resource above.",
    ]


@server.prompt
def test_prompt_with_image() -> list:
    """A prompt that shows an image."""
    return [Image(PNG, "image/png"), "Please analyze the image above."]


@server.prompt
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that asks the user for context first."""
    result = await ctx.elicit(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return f"Use this context: {(result.content or {}).get('context')}"


@server.completion("test_prompt_with_arguments", "arg1")
def complete_arg1(value: str, context: dict) -> list[str]:
    return [v for v in ("test-value", "test-other", "sample") if v.startswith(value)]


@server.completion("test://template/{id}/data", "id")
def complete_id(value: str, context: dict) -> list[str]:
    return [v for v in ("123", "456", "789") if v.startswith(value)]
