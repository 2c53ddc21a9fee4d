"""OpenTelemetry (issue 13): a SERVER span per request whose parent is the trace context
the client put in ``_meta`` (OpenTelemetry's conventions for MCP), across the
in-process transport, Streamable HTTP and stdio; and no cost without it.

Spans go to the real SDK's ``InMemorySpanExporter`` (in this process) or, for the stdio
server in its own process, to a file through the SDK's ``ConsoleSpanExporter``."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from modelctx import Client, Server, ToolError
from modelctx.client import ClientOptions
from modelctx.errors import InvalidParams
from modelctx.server import ServerConfig
from modelctx.server.middleware import Tracing
from modelctx.testing import connected, served_http, spawned
from tests.support.wire import DEADLINE, async_test


@pytest.fixture
def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def weather_server(*middleware: Any) -> Server:
    server = Server("weather", config=ServerConfig(middleware=list(middleware)))

    @server.tool
    def forecast(city: str) -> str:
        """Forecast for a city."""
        return f"sunny in {city}"

    @server.tool
    def broken() -> str:
        """Always fails, on purpose."""
        raise ToolError("the backend is down")

    @server.prompt
    def brief(city: str) -> str:
        return f"Brief me on {city}"

    return server


def server_spans(exporter: InMemorySpanExporter) -> list[Any]:
    return [span for span in exporter.get_finished_spans() if span.kind == SpanKind.SERVER]


# -- in process ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["2026-07-28", "handshake"])
@async_test()
async def test_the_server_span_continues_the_clients_trace(traced, mode):
    provider, exporter = traced
    tracer = provider.get_tracer("test")
    async with connected(weather_server(Tracing(provider)), mode=mode) as client:
        with tracer.start_as_current_span("agent step") as parent:
            await client.call_tool("forecast", {"city": "Oslo"})
    (span,) = [s for s in server_spans(exporter) if s.name == "tools/call forecast"]
    assert span.context.trace_id == parent.get_span_context().trace_id
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    assert span.parent.is_remote


@async_test()
async def test_a_tool_call_span_has_the_mcp_semantic_convention_attributes(traced):
    provider, exporter = traced
    async with connected(weather_server(Tracing(provider)), mode="2026-07-28") as client:
        await client.call_tool("forecast", {"city": "Oslo"})
        await client.get_prompt("brief", {"city": "Oslo"})
    spans = {span.name: span for span in server_spans(exporter)}
    call = spans["tools/call forecast"].attributes
    assert call["mcp.method.name"] == "tools/call"
    assert call["gen_ai.tool.name"] == "forecast"
    assert call["gen_ai.operation.name"] == "execute_tool"
    assert call["mcp.protocol.version"] == "2026-07-28"
    assert call["jsonrpc.request.id"]
    assert "error.type" not in call
    assert spans["tools/call forecast"].status.status_code == StatusCode.UNSET
    assert spans["prompts/get brief"].attributes["gen_ai.prompt.name"] == "brief"
    assert "Oslo" not in json.dumps(dict(call))  # argument values stay out of spans


@async_test()
async def test_errors_mark_the_span(traced):
    provider, exporter = traced
    async with connected(weather_server(Tracing(provider)), mode="2026-07-28") as client:
        assert (await client.call_tool("broken")).is_error
        with pytest.raises(InvalidParams):
            await client.call_tool("missing")
    spans = {span.name: span for span in server_spans(exporter)}
    tool_error = spans["tools/call broken"]
    assert tool_error.attributes["error.type"] == "tool_error"
    assert tool_error.status.status_code == StatusCode.ERROR
    refused = spans["tools/call missing"]
    assert refused.attributes["error.type"] == "-32602"
    assert refused.attributes["rpc.response.status_code"] == "-32602"
    assert refused.status.status_code == StatusCode.ERROR
    assert "Unknown tool" in refused.status.description


@async_test()
async def test_a_handshake_era_session_is_named_by_a_digest_not_its_id(traced):
    provider, exporter = traced
    session_ids: list[str] = []

    async def record(call: Any, call_next: Any) -> Any:
        if call.session is not None:
            session_ids.append(call.session.id)
        return await call_next(call)

    async with connected(weather_server(Tracing(provider), record), mode="handshake") as client:
        await client.call_tool("forecast", {"city": "Oslo"})
    spans = {span.name: span for span in server_spans(exporter)}
    assert "initialize" in spans  # the handshake itself is traced
    digest = spans["tools/call forecast"].attributes["mcp.session.id"]
    session_id = session_ids[-1]
    assert digest == hashlib.sha256(session_id.encode()).hexdigest()[:32] != session_id


@async_test()
async def test_no_trace_context_is_sent_without_a_current_span_or_when_turned_off(traced):
    provider, _ = traced
    metas: list[dict[str, Any]] = []

    async def record(call: Any, call_next: Any) -> Any:
        metas.append(dict(call.params.get("_meta") or {}))
        return await call_next(call)

    server = weather_server(record)
    async with connected(server, mode="2026-07-28") as client:
        await client.call_tool("forecast", {"city": "Oslo"})
    assert "traceparent" not in metas[-1]
    off = Client(server, mode="2026-07-28", options=ClientOptions(trace_context=False))
    async with off:
        with provider.get_tracer("test").start_as_current_span("step"):
            await off.call_tool("forecast", {"city": "Oslo"})
    assert "traceparent" not in metas[-1]


# -- across real transports ------------------------------------------------------------------------
@async_test()
async def test_the_trace_continues_across_streamable_http(traced):
    provider, exporter = traced
    tracer = provider.get_tracer("test")
    async with served_http(weather_server(Tracing(provider)), mode="2026-07-28") as client:
        with tracer.start_as_current_span("agent step") as parent:
            await client.call_tool("forecast", {"city": "Oslo"})
    (span,) = [s for s in server_spans(exporter) if s.name == "tools/call forecast"]
    assert span.context.trace_id == parent.get_span_context().trace_id
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id


STDIO_SERVER = '''
import json, os
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from modelctx import Server
from modelctx.server import ServerConfig
from modelctx.server.middleware import Tracing

def line(span):
    context = span.context
    parent = span.parent
    return json.dumps({
        "name": span.name,
        "trace_id": format(context.trace_id, "032x"),
        "parent": format(parent.span_id, "016x") if parent else None,
    }) + "\\n"

provider = TracerProvider()
out = open(os.environ["SPANS_FILE"], "a", buffering=1)
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=line)))
server = Server("weather", config=ServerConfig(middleware=[Tracing(provider)]))

@server.tool
def forecast(city: str) -> str:
    """Forecast for a city."""
    return f"sunny in {city}"
'''


@async_test(deadline=60)
async def test_the_trace_continues_across_stdio(traced, tmp_path: Path):
    provider, _ = traced
    tracer = provider.get_tracer("test")
    server_file = tmp_path / "weather.py"
    server_file.write_text(STDIO_SERVER)
    spans_file = tmp_path / "spans.jsonl"
    async with spawned(server_file, env={"SPANS_FILE": str(spans_file)}, mode="2026-07-28") as client:
        with tracer.start_as_current_span("agent step") as parent:
            await client.call_tool("forecast", {"city": "Oslo"})
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    (span,) = [s for s in spans if s["name"] == "tools/call forecast"]
    context = parent.get_span_context()
    assert span["trace_id"] == format(context.trace_id, "032x")
    assert span["parent"] == format(context.span_id, "016x")


# -- no cost when not used ---------------------------------------------------------------------------
def test_a_server_and_client_without_tracing_never_import_opentelemetry():
    program = textwrap.dedent(
        """
        import asyncio, sys
        from modelctx import Server
        from modelctx.server import ServerConfig
        from modelctx.server.middleware import RequestLog, RateLimit
        from modelctx.testing import connected

        server = Server("calc", config=ServerConfig(middleware=[RequestLog(), RateLimit(100)]))

        @server.tool
        def add(a: int, b: int) -> int:
            return a + b

        async def main():
            async with connected(server) as client:
                await client.call_tool("add", {"a": 1, "b": 2})

        asyncio.run(main())
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=DEADLINE * 2, check=True
    )
    assert done.stdout.strip() == "[]"


@async_test()
async def test_spans_a_sync_tool_opens_are_children_of_the_request_span(traced):
    provider, exporter = traced
    server = Server("db", config=ServerConfig(middleware=[Tracing(provider)]))
    tracer = provider.get_tracer("db")

    @server.tool
    def query(sql: str) -> str:
        """Runs on a worker thread."""
        with tracer.start_as_current_span("SELECT"):
            return "3 rows"

    async with connected(server, mode="2026-07-28") as client:
        await client.call_tool("query", {"sql": "select 1"})
    spans = {span.name: span for span in exporter.get_finished_spans()}
    request = spans["tools/call query"]
    assert spans["SELECT"].parent is not None
    assert spans["SELECT"].parent.span_id == request.context.span_id


@async_test()
async def test_a_span_current_on_the_server_is_linked_when_the_request_names_its_parent(traced):
    provider, exporter = traced
    tracer = provider.get_tracer("test")

    async def transport_span(call: Any, call_next: Any) -> Any:  # as HTTP instrumentation would
        with tracer.start_as_current_span("POST /mcp"):
            return await call_next(call)

    async with connected(weather_server(transport_span, Tracing(provider)), mode="2026-07-28") as client:
        with tracer.start_as_current_span("agent step") as parent:
            await client.call_tool("forecast", {"city": "Oslo"})
    spans = {span.name: span for span in exporter.get_finished_spans()}
    served = spans["tools/call forecast"]
    assert served.parent.span_id == parent.get_span_context().span_id
    assert [link.context.span_id for link in served.links] == [spans["POST /mcp"].context.span_id]


def test_a_client_that_uses_only_the_tracing_api_and_sdk_sends_its_trace_context():
    # A fresh process: nothing else has imported OpenTelemetry's propagators.
    program = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from modelctx import Server
        from modelctx.server import ServerConfig
        from modelctx.testing import connected

        metas = []

        async def record(call, call_next):
            metas.append(call.params.get("_meta") or {})
            return await call_next(call)

        server = Server("calc", config=ServerConfig(middleware=[record]))

        @server.tool
        def add(a: int, b: int) -> int:
            return a + b

        async def main():
            tracer = TracerProvider().get_tracer("app")
            async with connected(server, mode="2026-07-28") as client:
                with tracer.start_as_current_span("step") as span:
                    await client.call_tool("add", {"a": 1, "b": 2})
            trace_id = format(span.get_span_context().trace_id, "032x")
            print(metas[-1]["traceparent"].split("-")[1] == trace_id)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=DEADLINE * 2, check=True
    )
    assert done.stdout.strip() == "True", done.stderr
