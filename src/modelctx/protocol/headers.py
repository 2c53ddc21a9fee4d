"""HTTP header mirroring of 2026-07-28, as plain functions for both sides.

basic/transports/streamable-http.mdx, Request Metadata: every POST carries
``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` (tools/call, prompts/get,
resources/read, and ``params.taskId`` for the tasks extension) and one
``Mcp-Param-{Name}`` per argument whose property schema says ``x-mcp-header``. The
body is the source of truth; a server rejects any disagreement with HeaderMismatch.

Header names here are lower-case, as ASGI delivers them.
"""

from __future__ import annotations

import base64
import binascii
import re
from decimal import Decimal
from typing import Any

from ..errors import HeaderMismatch

__all__ = [
    "check_headers",
    "decode_value",
    "encode_value",
    "header_paths",
    "name_source",
    "request_headers",
]

_SENTINEL_PREFIX = "=?base64?"
_SENTINEL_SUFFIX = "?="
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SAFE_INT = 2**53 - 1
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")  # a JSON number

# Methods whose Mcp-Name header mirrors a params field.
_NAME_FIELD = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def name_source(method: str) -> str | None:
    """The params field that ``Mcp-Name`` mirrors for ``method``, if any."""
    return _NAME_FIELD.get(method)


def _plain_safe(text: str) -> bool:
    # Leading or trailing whitespace, non-ASCII, control characters, or a value that
    # looks like the sentinel itself must be Base64-encoded.
    return (
        text == text.strip(" \t")
        and not text.startswith(_SENTINEL_PREFIX)
        and all(0x20 <= ord(c) < 0x7F for c in text)
    )


def encode_value(value: Any) -> str:
    """A header value for a string, integer or boolean (Value Encoding)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _plain_safe(text):
        return text
    return _SENTINEL_PREFIX + base64.b64encode(text.encode()).decode() + _SENTINEL_SUFFIX


def decode_value(header: str, raw: str) -> str:
    """Undo the Base64 sentinel; reject values with characters a header cannot hold."""
    if raw.startswith(_SENTINEL_PREFIX) and raw.endswith(_SENTINEL_SUFFIX) and len(raw) >= 11:
        payload = raw[len(_SENTINEL_PREFIX) : -len(_SENTINEL_SUFFIX)]
        try:
            return base64.b64decode(payload, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise HeaderMismatch(
                f"Header mismatch: {header} is not valid base64-encoded UTF-8"
            ) from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise HeaderMismatch(f"Header mismatch: {header} contains control characters")
    return raw


def header_paths(input_schema: Any) -> dict[str, tuple[str, ...]]:
    """Map ``Mcp-Param-{Name}`` (lower-cased) to the property path it mirrors.

    Raises ``ValueError`` naming the problem when an ``x-mcp-header`` breaks the rules
    of the Schema Extension section; an HTTP client drops such a tool.
    """
    found: dict[str, tuple[str, ...]] = {}
    _walk(input_schema, (), found, reachable=True)
    return found


def _walk(schema: Any, path: tuple[str, ...], found: dict[str, tuple[str, ...]], reachable: bool) -> None:
    if isinstance(schema, list):
        for item in schema:
            _walk(item, path, found, False)
        return
    if not isinstance(schema, dict):
        return
    if "x-mcp-header" in schema:
        name = schema["x-mcp-header"]
        where = "/".join(path) or "(root)"
        if not reachable or not path:
            raise ValueError(f"x-mcp-header at {where} is not reachable through properties only")
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ValueError(f"x-mcp-header {name!r} at {where} is not an HTTP token")
        kind = schema.get("type")
        if kind not in ("string", "integer", "boolean"):
            raise ValueError(
                f"x-mcp-header {name!r} at {where} is on type {kind!r}; "
                "only string, integer and boolean may be mirrored"
            )
        key = "mcp-param-" + name.lower()
        if key in found:
            raise ValueError(f"x-mcp-header {name!r} is used twice (case-insensitively)")
        found[key] = path
    for key, sub in schema.items():
        if key == "properties" and isinstance(sub, dict):
            for prop, prop_schema in sub.items():
                _walk(prop_schema, path + (prop,), found, reachable)
        elif isinstance(sub, (dict, list)):
            _walk(sub, path + (key,), found, False)


def _lookup(arguments: Any, path: tuple[str, ...]) -> Any:
    value = arguments
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def request_headers(
    method: str,
    params: dict[str, Any],
    version: str,
    param_paths: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, str]:
    """The headers a client sends with a request (Client Behavior)."""
    headers = {"mcp-protocol-version": version, "mcp-method": method}
    field = _NAME_FIELD.get(method)
    if field is not None and field in params:
        headers["mcp-name"] = encode_value(params[field])
    if param_paths:
        arguments = params.get("arguments")
        for header, path in param_paths.items():
            value = _lookup(arguments, path)
            if value is not None:
                headers[header] = encode_value(value)
    return headers


def _same(header_value: str, body_value: Any) -> bool:
    """Whether a (decoded) header value mirrors a body value (Value Encoding).

    Numbers compare numerically (Server Validation: ``42.0`` equals ``42``) and
    exactly, as decimals: as floats, 2**53 + 1 would equal 2**53."""
    if isinstance(body_value, bool):
        return header_value == ("true" if body_value else "false")
    if isinstance(body_value, (int, float)):
        if not _NUMBER.fullmatch(header_value):
            return False
        try:
            if isinstance(body_value, float):  # the body is a float already: so is the header
                return float(header_value) == body_value
            return Decimal(header_value) == body_value
        except (ArithmeticError, ValueError):  # an exponent Decimal cannot hold
            return False
    return isinstance(body_value, str) and header_value == body_value


def check_headers(
    headers: dict[str, str],
    method: str,
    params: dict[str, Any],
    version: str,
    param_paths: dict[str, tuple[str, ...]] | None = None,
) -> None:
    """Raise ``HeaderMismatch`` unless the headers agree with the body (Server Validation)."""
    got = headers.get("mcp-protocol-version")
    if got is None:
        raise HeaderMismatch("Header mismatch: the MCP-Protocol-Version header is required")
    if got != version:
        raise HeaderMismatch(
            f"Header mismatch: MCP-Protocol-Version header value '{got}' does not match "
            f"body value '{version}'"
        )
    got = headers.get("mcp-method")
    if got is None:
        raise HeaderMismatch("Header mismatch: the Mcp-Method header is required")
    if got != method:
        raise HeaderMismatch(
            f"Header mismatch: Mcp-Method header value '{got}' does not match body value '{method}'"
        )
    field = _NAME_FIELD.get(method)
    if field is not None:
        raw = headers.get("mcp-name")
        if raw is None:
            raise HeaderMismatch(f"Header mismatch: the Mcp-Name header is required for {method}")
        got = decode_value("Mcp-Name", raw)
        body = params.get(field)
        if not _same(got, body):  # an integer is sent in decimal (Value Encoding)
            raise HeaderMismatch(
                f"Header mismatch: Mcp-Name header value '{got}' does not match body value '{body}'"
            )
    if param_paths:
        _check_param_headers(headers, params.get("arguments"), param_paths)


def _check_param_headers(headers: dict[str, str], arguments: Any, param_paths: dict[str, tuple[str, ...]]) -> None:
    """Each ``Mcp-Param-*`` header agrees with the argument it mirrors (present when the argument is)."""
    for header, path in param_paths.items():
        body = _lookup(arguments, path)
        raw = headers.get(header)
        pretty = "Mcp-Param-" + header[len("mcp-param-") :]
        if body is None:
            continue  # a null or absent argument has no header to expect
        if raw is None:
            raise HeaderMismatch(
                f"Header mismatch: the {pretty} header is required: argument "
                f"{'.'.join(path)} is present in the body"
            )
        got = decode_value(pretty, raw)
        if not _same(got, body):
            raise HeaderMismatch(
                f"Header mismatch: {pretty} header value '{got}' does not match "
                f"body value '{body}'"
            )
