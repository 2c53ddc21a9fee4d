"""An OpenAPI document's operations registered on a ``Server``: tools, resources, templates.

Each tool is an ordinary registered tool (the author's ``inputSchema`` enforced on every
call by the dispatcher), so an OpenAPI tool costs what any tool costs, plus its HTTP call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import RegistrationError, ResourceNotFound
from .._content import EmbeddedResource, Text, ToolResult
from .._uri_template import UriTemplate
from ._call import Caller, Failure
from ._operations import Operation, read_operations
from ._routes import RouteMap, choose
from ._schema import Document

if TYPE_CHECKING:
    from .._server import Server

__all__ = ["register_operations"]

_READ_ONLY = frozenset({"GET", "HEAD", "OPTIONS"})


def register_operations(
    server: Server, spec: dict[str, Any], caller: Caller, route_maps: Sequence[RouteMap], uri_scheme: str
) -> list[Operation]:
    """Register every operation the route maps do not exclude; returns those registered.

    Raises ``RegistrationError`` naming the operation that cannot become what its map says."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", uri_scheme):
        raise RegistrationError(f"uri_scheme {uri_scheme!r} is not a URI scheme (letters, digits, + . -)")
    registered = []
    for operation in read_operations(Document(spec)):
        kind = choose(route_maps, operation.method, operation.path, operation.tags)
        if kind == "exclude":
            continue
        if kind in ("resource", "template") and operation.method != "GET":
            raise RegistrationError(
                f"OpenAPI {operation.where}: a route map makes it a {kind}, but only a GET can be read "
                "as a resource; narrow the map with methods=('GET',)"
            )
        if kind == "tool":
            _add_tool(server, caller, operation)
        elif kind == "resource":
            _add_resource(server, caller, operation, uri_scheme)
        else:
            _add_template(server, caller, operation, uri_scheme)
        registered.append(operation)
    return registered


def _annotations(operation: Operation) -> dict[str, Any]:
    # What HTTP itself promises of a method (RFC 9110, 9.2): safe ones read, PUT and
    # DELETE may be repeated; DELETE removes something.
    annotations: dict[str, Any] = {}
    if operation.summary:
        annotations["title"] = operation.summary
    if operation.method in _READ_ONLY:
        annotations["readOnlyHint"] = True
    if operation.method == "DELETE":
        annotations["destructiveHint"] = True
    if operation.method in ("PUT", "DELETE"):
        annotations["idempotentHint"] = True
    return annotations


def _add_tool(server: Server, caller: Caller, operation: Operation) -> None:
    async def call(**arguments: Any) -> ToolResult:
        response, media, body = await caller.call(operation, arguments)
        return _tool_result(operation, response, media, body)

    server.add_tool(
        call,
        name=operation.name,
        description=operation.description or f"{operation.method} {operation.path}",
        input_schema=operation.input_schema,
        output_schema=operation.output_schema,
        annotations=_annotations(operation),
        structured_output=operation.output_schema is not None,
    )


def _tool_result(operation: Operation, response: Any, media: str, body: bytes) -> ToolResult:
    if not body:
        return ToolResult([Text(f"{operation.method} {operation.path} answered {response.status_code}")])
    if _is_json(media):
        text = body.decode("utf-8", errors="replace")
        if operation.output_schema is not None:
            try:
                return ToolResult([Text(text)], structured=json.loads(text))
            except ValueError:
                pass
        return ToolResult([Text(text)])
    if _is_text(media):
        return ToolResult([Text(body.decode("utf-8", errors="replace"))])
    return ToolResult([EmbeddedResource(str(response.url), blob=body, mime_type=media or "application/octet-stream")])


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def _is_text(media: str) -> bool:
    return media.startswith("text/") or media.endswith(("+xml", "/xml")) or _is_json(media) or media == ""


def _answer(media: str, body: bytes) -> str | bytes:
    return body.decode("utf-8", errors="replace") if _is_text(media) else body


def _uri_path(operation: Operation) -> str:
    return operation.path.strip("/")


def _add_resource(server: Server, caller: Caller, operation: Operation, scheme: str) -> None:
    if operation.path_names or any(a.required for a in operation.arguments):
        raise RegistrationError(
            f"OpenAPI {operation.where}: a route map makes it a resource, but it takes required "
            "arguments; map it to a template instead"
        )
    uri = f"{scheme}://{_uri_path(operation)}"

    async def read() -> str | bytes:
        try:
            _, media, body = await caller.call(operation, {})
        except Failure as exc:
            if exc.status == 404:
                raise ResourceNotFound(uri) from None
            raise
        return _answer(media, body)

    server.resource(uri, name=operation.name, description=operation.description or None,
                    mime_type=operation.answer_type or "application/json")(read)


def _add_template(server: Server, caller: Caller, operation: Operation, scheme: str) -> None:
    # RFC 6570 variable names are letters, digits and "_": spec names map onto them.
    variables: dict[str, str] = {}

    def variable(argument_name: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", argument_name) or "v"
        name, n = base, 2
        while name in variables:
            name, n = f"{base}_{n}", n + 1
        variables[name] = argument_name
        return name

    wire_to_var = {a.wire: variable(a.name) for a in operation.arguments if a.location == "path"}
    path = re.sub(r"\{([^}]+)\}", lambda m: "{" + wire_to_var[m.group(1)] + "}", _uri_path(operation))
    query = [variable(a.name) for a in operation.arguments if a.location == "query"]
    if any(a.required for a in operation.arguments if a.location not in ("path", "query")):
        raise RegistrationError(
            f"OpenAPI {operation.where}: a route map makes it a template, but it needs a header or "
            "body argument a URI cannot carry; leave it a tool"
        )
    template = f"{scheme}://{path}" + (f"{{?{','.join(query)}}}" if query else "")
    expand = UriTemplate(template)

    async def read(**values: Any) -> str | bytes:
        arguments = {variables[k]: v for k, v in values.items() if k in variables and v is not None}
        try:
            _, media, body = await caller.call(operation, arguments)
        except Failure as exc:
            if exc.status == 404:
                raise ResourceNotFound(expand.expand(values)) from None
            raise
        return _answer(media, body)

    server.resource(template, name=operation.name, description=operation.description or None,
                    mime_type=operation.answer_type or "application/json")(read)
