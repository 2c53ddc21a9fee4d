"""``Tracing``: an OpenTelemetry span around every request, continuing the client's trace.

Optional: nothing here imports ``opentelemetry`` until a ``Tracing`` is made (the
``modelctx[otel]`` extra installs it), and a server without it in
``ServerConfig.middleware`` runs exactly as before.

Per OpenTelemetry's semantic conventions for MCP (gen-ai/mcp.md, status Development):

- one span per request, kind SERVER, named ``{mcp.method.name} {target}`` where the
  target is the tool or prompt name (a resource URI is not in the name by default: too
  many distinct values), else ``{mcp.method.name}``;
- its parent is the trace context the client put in ``params._meta`` (``traceparent``,
  ``tracestate``, ``baggage``; MCP 2026-07-28 basic/index.mdx reserves these keys),
  read with the configured propagator; when the request carries one and another span
  was current (say an HTTP server span), that one is linked, not the parent;
- attributes ``mcp.method.name``, ``jsonrpc.request.id``, ``mcp.protocol.version``,
  ``mcp.session.id`` (handshake era), ``gen_ai.tool.name`` with
  ``gen_ai.operation.name=execute_tool``, ``gen_ai.prompt.name``, ``mcp.resource.uri``;
- a JSON-RPC error sets ``error.type`` and ``rpc.response.status_code`` to its code
  and the span status to ERROR with the error's message; a tool result with
  ``isError`` sets ``error.type=tool_error``; an exception the server answers as an
  internal error sets ``error.type`` to its class name and records it on the span.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ProtocolError

__all__ = ["Tracing", "target_of"]

Next = Callable[[Any], Awaitable[dict[str, Any] | None]]

#: The ``_meta`` keys that carry trace context (W3C Trace Context and Baggage).
TRACE_KEYS = ("traceparent", "tracestate", "baggage")

_INTERNAL_ERROR = -32603

# The params field naming the target of a request, by method (for logs and span names).
_TARGET = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "resources/subscribe": "uri",
    "resources/unsubscribe": "uri",
}


def target_of(method: str, params: dict[str, Any]) -> str | None:
    """The tool or prompt name, or the resource URI, a request is about (None: none)."""
    field = _TARGET.get(method)
    value = params.get(field) if field is not None else None
    return value if isinstance(value, str) else None


class Tracing:
    """Server middleware: a SERVER span per request, child of the trace context in the
    request's ``_meta``. ``tracer_provider``: where spans go (default: the global one,
    ``opentelemetry.trace.set_tracer_provider``). Put it first in
    ``ServerConfig.middleware`` so that the span covers the rest (and their refusals).

    Raises ``ImportError`` naming the extra when OpenTelemetry is not installed.
    """

    def __init__(self, tracer_provider: Any = None) -> None:
        try:
            from opentelemetry import propagate, trace
        except ImportError as exc:  # pragma: no cover - the extra is installed in tests
            raise ImportError(
                "Tracing needs OpenTelemetry: pip install 'modelctx[otel]' "
                "(opentelemetry-api, and opentelemetry-sdk to export spans)"
            ) from exc
        from .. import __version__

        self._trace = trace
        self._propagate = propagate
        self._tracer = trace.get_tracer("modelctx", __version__, tracer_provider=tracer_provider)

    async def __call__(self, call: Any, call_next: Next) -> dict[str, Any] | None:
        trace = self._trace
        method = call.method
        target = target_of(method, call.params)
        parent, links = self._parent(call.params.get("_meta"))
        name = method if target is None or method.startswith("resources/") else f"{method} {target}"
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes=_attributes(call, target),
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = await call_next(call)
            except ProtocolError as exc:
                code = str(exc.code)
                span.set_attribute("error.type", code)
                span.set_attribute("rpc.response.status_code", code)
                span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message))
                raise
            except Exception as exc:
                # The dispatcher answers it as -32603 with a generic text; the span keeps
                # what the server's log keeps (the class and traceback), not more.
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_attribute("rpc.response.status_code", str(_INTERNAL_ERROR))
                span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, "Internal error"))
                raise
            if isinstance(result, dict) and result.get("isError") is True:
                span.set_attribute("error.type", "tool_error")
                span.set_status(trace.Status(trace.StatusCode.ERROR, "the tool returned an error result"))
            return result

    def _parent(self, meta: Any) -> tuple[Any, list[Any] | None]:
        """The context the request's ``_meta`` carries (None: the current one stays the
        parent) and the links to record (the current span, when it is replaced)."""
        if not isinstance(meta, dict):
            return None, None
        carrier = {key: meta[key] for key in TRACE_KEYS if isinstance(meta.get(key), str)}
        if not carrier:
            return None, None
        trace = self._trace
        ambient = trace.get_current_span().get_span_context()
        links = [trace.Link(ambient)] if ambient.is_valid else None
        return self._propagate.extract(carrier), links


def _attributes(call: Any, target: str | None) -> dict[str, Any]:
    method = call.method
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if call.id is not None:
        attributes["jsonrpc.request.id"] = str(call.id)
    if call.version:
        attributes["mcp.protocol.version"] = call.version
    session = call.session
    if session is not None:
        # The handshake-era session id is what lets an HTTP client act in that session:
        # traces get a digest that identifies it without granting it.
        attributes["mcp.session.id"] = hashlib.sha256(session.id.encode()).hexdigest()[:32]
    if target is not None:
        if method == "tools/call":
            attributes["gen_ai.tool.name"] = target
            attributes["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get":
            attributes["gen_ai.prompt.name"] = target
        else:
            attributes["mcp.resource.uri"] = target
    return attributes
