"""A quick shape check of a JSON Schema 2020-12 document, without importing jsonschema.

Importing jsonschema costs 55-77 ms (its format checkers, ``referencing`` and the bundled
meta-schemas), while its meta-schema check itself takes under 1 ms. A server that
registers ``input_schema=`` tools would pay that import at start for a check whose usual
catches (a misspelt type, ``required`` that is not a list of names, a bad regex) this
module finds in microseconds. The validator, and jsonschema's full meta-schema check, are
built at the first call that needs them.

``problem(schema)`` returns ``(path, message)`` for the first keyword whose value has the
wrong shape, or None. Unknown keywords are annotations and pass, as in the meta-schema.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["DIALECT_2020_12", "problem"]

DIALECT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_ONE_SCHEMA = frozenset({
    "additionalProperties", "contains", "else", "if", "items", "not", "propertyNames",
    "then", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
})
_SCHEMA_MAPS = frozenset({"$defs", "definitions", "dependentSchemas", "patternProperties", "properties"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_COUNTS = frozenset({
    "maxContains", "maxItems", "maxLength", "maxProperties",
    "minContains", "minItems", "minLength", "minProperties",
})
_NUMBERS = frozenset({"exclusiveMaximum", "exclusiveMinimum", "maximum", "minimum"})
_BOOLS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})
_STRINGS = frozenset({"$anchor", "$comment", "$dynamicAnchor", "$dynamicRef", "$id", "$ref", "$schema",
                      "contentEncoding", "contentMediaType", "description", "format", "title"})

Problem = tuple[str, str]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value) and len(set(value)) == len(value)


def _keyword(key: str, value: Any, path: str) -> Problem | None:  # noqa: C901, PLR0911 - one table
    if key == "type":
        kinds = value if isinstance(value, list) else [value]
        if not kinds or not all(isinstance(k, str) and k in _TYPES for k in kinds) or len(set(kinds)) < len(kinds):
            return path, f"{value!r} is not one of {sorted(_TYPES)} (or a list of them, without repeats)"
    elif key in _ONE_SCHEMA:
        return problem(value, path)
    elif key in _SCHEMA_MAPS:
        if not isinstance(value, dict):
            return path, f"{value!r} is not an object of schemas"
        for name, sub in value.items():
            if key == "patternProperties" and (found := _regex(name, f"{path}/{name}")):
                return found
            if found := problem(sub, f"{path}/{name}"):
                return found
    elif key in _SCHEMA_LISTS:
        if not isinstance(value, list) or not value:
            return path, f"{value!r} is not a non-empty array of schemas"
        for i, sub in enumerate(value):
            if found := problem(sub, f"{path}/{i}"):
                return found
    elif key in _COUNTS:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return path, f"{value!r} is not a non-negative integer"
    elif key in _NUMBERS:
        if not _number(value):
            return path, f"{value!r} is not a number"
    elif key == "multipleOf":
        if not _number(value) or value <= 0:
            return path, f"{value!r} is not a number above 0"
    elif key in _BOOLS:
        if not isinstance(value, bool):
            return path, f"{value!r} is not a boolean"
    elif key in _STRINGS:
        if not isinstance(value, str):
            return path, f"{value!r} is not a string"
    elif key == "pattern":
        return _regex(value, path)
    elif key == "required":
        if not _names(value):
            return path, f"{value!r} is not an array of distinct strings"
    elif key in ("enum", "examples"):
        if not isinstance(value, list):
            return path, f"{value!r} is not an array"
    elif key == "dependentRequired":
        if not isinstance(value, dict) or not all(_names(v) for v in value.values()):
            return path, f"{value!r} is not an object of arrays of distinct strings"
    return None


def _regex(value: Any, path: str) -> Problem | None:
    if not isinstance(value, str):
        return path, f"{value!r} is not a string"
    try:
        re.compile(value)
    except re.error as exc:
        return path, f"{value!r} is not a regex ({exc})"
    return None


def problem(schema: Any, path: str = "") -> Problem | None:
    """The first ``(path, message)`` where ``schema`` breaks the 2020-12 meta-schema's shapes."""
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, dict):
        return path or "(root)", f"{schema!r} is not a schema (an object or a boolean)"
    for key, value in schema.items():
        if found := _keyword(key, value, f"{path}/{key}" if path else key):
            return found
    return None
