"""OpenAPI operations, each read once into what a tool needs: a name, arguments, schemas.

An operation's arguments are its path, query and header parameters (path-level ones
merged under the operation's own, OpenAPI 3 Path Item Object), then its JSON or form body:
an object body's properties become arguments of their own when none of them collides with
a parameter's name, else the whole body is one ``body`` argument. Two parameters of the
same name in different places (``id`` in the path and in the query) are told apart by a
suffix (``id__query``). Cookie parameters are not sent, and header parameters named
``Accept``, ``Content-Type`` or ``Authorization`` are ignored, as the specification says.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from ...errors import RegistrationError
from ._schema import Document, Schemas

__all__ = ["METHODS", "Argument", "Operation", "read_operations"]

log = logging.getLogger("modelctx.server.openapi")

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_NAME = 64
_MAX_DESCRIPTION = 4000


@dataclass(frozen=True)
class Argument:
    """One tool argument and where its value goes in the request."""

    name: str  # in the tool's inputSchema
    location: str  # "path", "query", "header", "body" (the whole body) or "field" (one property of it)
    wire: str  # its name in the request (the parameter's or the property's)
    required: bool
    style: str = "form"
    explode: bool = True
    as_json: bool = False  # a parameter given by "content": sent as JSON text


@dataclass
class Operation:
    method: str  # upper case
    path: str  # as the spec writes it: /pets/{petId}
    name: str
    tags: list[str]
    summary: str
    description: str
    arguments: list[Argument]
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    body_type: str | None = None  # the request body's media type
    where: str = field(default="")
    answer_type: str | None = None  # the first 2xx answer's media type, as the spec says

    @property
    def path_names(self) -> list[str]:
        return [a.name for a in self.arguments if a.location == "path"]


def read_operations(document: Document) -> list[Operation]:
    """Every operation of the document, in its order, with unique tool names.

    Raises ``RegistrationError`` naming the operation whose parameters or schemas are bad."""
    operations: list[Operation] = []
    used: set[str] = set()
    for path, item in document.spec.get("paths", {}).items():
        if not isinstance(path, str) or not path.startswith("/"):
            raise RegistrationError(f"OpenAPI path {str(path)[:100]!r} must start with '/'")
        item = document.resolve(item, f"path {path}")
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters", [])
        for method in METHODS:
            spec = item.get(method)
            if not isinstance(spec, dict):
                continue
            where = f"{method.upper()} {path}"
            name = _unique(_tool_name(spec.get("operationId"), method, path), used, where)
            operations.append(_read(document, method.upper(), path, name, spec, shared, where))
    return operations


def _tool_name(operation_id: Any, method: str, path: str) -> str:
    if isinstance(operation_id, str) and operation_id.strip():
        name = _NAME_BAD.sub("_", operation_id).strip("_")
    else:  # get_/pets/{id} reads get_pets_id
        name = re.sub(r"_+", "_", _NAME_BAD.sub("_", f"{method}_{path}")).strip("_")
    return name[:_MAX_NAME] or method


def _unique(name: str, used: set[str], where: str) -> str:
    unique, n = name, 2
    while unique in used:
        suffix = f"_{n}"
        unique, n = name[: _MAX_NAME - len(suffix)] + suffix, n + 1
    if unique != name:
        log.warning("OpenAPI %s: tool name %r is taken (after sanitizing), using %r", where, name, unique)
    used.add(unique)
    return unique


def _read(
    document: Document, method: str, path: str, name: str, spec: dict[str, Any], shared: Any, where: str
) -> Operation:
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(shared if isinstance(shared, list) else []), *(spec.get("parameters") or [])]:
        param = document.resolve(raw, where)
        if not isinstance(param, dict) or not isinstance(param.get("name"), str) or "in" not in param:
            raise RegistrationError(f"OpenAPI {where}: a parameter needs 'name' and 'in'")
        merged[(param["name"], param["in"])] = param

    def build(schemas: Schemas) -> tuple[list[Argument], dict[str, Any], str | None]:
        return _arguments(document, schemas, merged, spec, path, where)

    arguments, input_schema, body_type = document.build(build, where)
    text = "\n\n".join(t for t in (_text(spec.get("summary")).strip(), _text(spec.get("description")).strip()) if t)
    tags = [t for t in spec.get("tags") or [] if isinstance(t, str)]
    return Operation(
        method, path, name, tags, _text(spec.get("summary")), text[:_MAX_DESCRIPTION], arguments, input_schema,
        _output_schema(document, spec, where), body_type, where, _answer_type(document, spec, where),
    )


def _arguments(
    document: Document,
    schemas: Schemas,
    merged: dict[tuple[str, str], dict[str, Any]],
    spec: dict[str, Any],
    path: str,
    where: str,
) -> tuple[list[Argument], dict[str, Any], str | None]:
    """The operation's arguments and its inputSchema, converted by ``schemas``."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: list[Argument] = []
    for (wire, location), param in merged.items():
        if location == "cookie" or (location == "header" and wire.lower() in _IGNORED_HEADERS):
            continue
        if location not in ("path", "query", "header"):
            raise RegistrationError(f"OpenAPI {where}: parameter {wire!r} is 'in: {location}', not path/query/header/cookie")
        schema, as_json = _parameter_schema(document, param, where)
        argument = _name_for(wire, location, properties)
        prop = schemas.convert(schema)
        if isinstance(param.get("description"), str) and "description" not in prop:
            prop["description"] = param["description"]
        properties[argument] = prop
        needed = location == "path" or param.get("required") is True
        if needed:
            required.append(argument)
        style = param.get("style") or ("simple" if location in ("path", "header") else "form")
        explode = param.get("explode", style == "form")
        arguments.append(Argument(argument, location, wire, needed, str(style), bool(explode), as_json))
    for variable in re.findall(r"\{([^}]+)\}", path):
        if not any(a.location == "path" and a.wire == variable for a in arguments):
            raise RegistrationError(f"OpenAPI {where}: path variable {{{variable}}} has no path parameter")
    body_type = _body(document, schemas, spec, where, properties, required, arguments)
    input_schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        input_schema["required"] = required
    defs = schemas.defs()
    if defs:
        input_schema["$defs"] = defs
    return arguments, input_schema, body_type


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _parameter_schema(document: Document, param: dict[str, Any], where: str) -> tuple[Any, bool]:
    if "schema" in param:
        return param["schema"], False
    content = param.get("content")
    if isinstance(content, dict) and content:
        media = document.resolve(next(iter(content.values())), where)
        return (media.get("schema", {}) if isinstance(media, dict) else {}), True
    return {"type": "string"}, False


def _name_for(wire: str, location: str, taken: dict[str, Any]) -> str:
    return wire if wire not in taken else f"{wire}__{location}"


def _pick_media(content: dict[str, Any]) -> str | None:
    for wanted in ("application/json", "application/x-www-form-urlencoded"):
        if wanted in content:
            return wanted
    for media in content:
        if media.endswith("+json"):
            return media
    return next(iter(content), None)


def _body(
    document: Document,
    schemas: Schemas,
    spec: dict[str, Any],
    where: str,
    properties: dict[str, Any],
    required: list[str],
    arguments: list[Argument],
) -> str | None:
    body = document.resolve(spec.get("requestBody"), where)
    if not isinstance(body, dict) or not isinstance(body.get("content"), dict) or not body["content"]:
        return None
    media = _pick_media(body["content"])
    assert media is not None
    entry = document.resolve(body["content"][media], where)
    schema = schemas.convert(entry.get("schema", {}) if isinstance(entry, dict) else {})
    body_required = body.get("required") is True
    fields = schema.get("properties") if schema.get("type") == "object" else None
    if isinstance(fields, dict) and fields and not (set(fields) & set(properties)) and "$ref" not in schema:
        needed = set(schema.get("required") or []) if body_required else set()
        for prop, sub in fields.items():
            properties[prop] = sub
            if prop in needed:
                required.append(prop)
            arguments.append(Argument(prop, "field", prop, prop in needed))
        return media
    argument = "body" if "body" not in properties else "body__request"
    if isinstance(body.get("description"), str) and "description" not in schema:
        schema["description"] = body["description"]
    properties[argument] = schema
    if body_required:
        required.append(argument)
    arguments.append(Argument(argument, "body", argument, body_required))
    return media


def _answers(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    """The 2xx responses by status (200 first; YAML may key them as numbers)."""
    responses = spec.get("responses")
    if not isinstance(responses, dict):
        return []
    by_code = {str(code): answer for code, answer in responses.items()}
    codes = sorted((c for c in by_code if c.startswith("2") and len(c) == 3), key=lambda c: (c != "200", c))
    return [(code, by_code[code]) for code in codes]


def _answer_type(document: Document, spec: dict[str, Any], where: str) -> str | None:
    for _, answer in _answers(spec):
        content = document.resolve(answer, where).get("content") if isinstance(answer, dict) else None
        if isinstance(content, dict) and content:
            return _pick_media(content)
    return None


def _output_schema(document: Document, spec: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The first 2xx JSON answer's schema, when it is an object (MCP's outputSchema must be)."""
    for code, answer in _answers(spec)[:1]:
        answer = document.resolve(answer, where)
        content = answer.get("content") if isinstance(answer, dict) else None
        if not isinstance(content, dict):
            return None
        media = next((m for m in content if m == "application/json" or m.endswith("+json")), None)
        entry = document.resolve(content[media], where) if media is not None else None
        if not isinstance(entry, dict) or "schema" not in entry:
            return None
        schema = document.schema(entry["schema"], f"{where} response {code}")
        return schema if schema.get("type") == "object" else None
    return None
