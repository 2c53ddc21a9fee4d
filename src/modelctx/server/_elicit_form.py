"""Form elicitation schemas: refused when not flat, answers validated and typed.

client/elicitation.mdx restricts ``requestedSchema`` to a flat object whose properties
are primitives: a string (formats ``email``, ``uri``, ``date``, ``date-time``), a number
or integer, a boolean, a single-select enum (a string with ``enum`` or ``oneOf``
consts) or a multi-select enum (an array of such strings). ``FormSchema`` holds one
form: the schema sent on the wire, checked against those rules when the handler asks
(so a nested dataclass fails in the handler, naming the field, instead of reaching the
client as a ``$ref`` without its ``$defs``), and, when the schema came from a type,
how to turn an accepted answer into a value of that type.

Servers SHOULD validate that received data matches the requested schema
(client/elicitation.mdx, Form Mode Security); ``FormSchema.parse`` does, with
jsonschema, and raises ``InvalidParams`` naming the field. Why an error and not another
round: mrtr.mdx asks for a JSON-RPC error when the responses do not match their schema
("invalid schema") and keeps a new ``input_required`` for answers that are missing; a
client whose form produced wrong content would most likely produce it again.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from ..errors import InvalidParams

__all__ = ["FormSchema"]

_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_PRIMITIVES = frozenset({"string", "number", "integer", "boolean"})
_RULE = (
    "requestedSchema must be a flat object of string, number, integer, boolean or enum "
    "properties (client/elicitation.mdx, Requested Schema)"
)


class FormSchema:
    """One form: ``wire`` is the ``requestedSchema``; ``parse`` checks and types an answer.

    ``schema`` is a JSON Schema object or a type (dataclass, TypedDict, msgspec Struct,
    pydantic model). Raises ``TypeError`` (a type) or ``ValueError`` (a dict) naming the
    first property that is not a flat primitive.
    """

    __slots__ = ("type", "wire")

    def __init__(self, schema: Any) -> None:
        if isinstance(schema, dict):
            self.type: Any = None
            self.wire = {k: v for k, v in schema.items() if k not in ("title", "$defs")}
            problem = _flat_problem(self.wire)
            if problem is not None:
                raise ValueError(f"elicitation schema: {problem}; {_RULE}")
        else:
            self.type = schema
            self.wire = _wire_for_type(schema)

    def parse(self, content: dict[str, Any]) -> Any:
        """The accepted ``content`` as the handler receives it: a dict for a dict
        schema or a TypedDict, otherwise an instance of the type. Raises
        ``InvalidParams`` when it does not match the schema."""
        problem = _mismatch(content, self.wire)
        if problem is not None:
            raise InvalidParams(f"the accepted content does not match the requested schema: {problem}")
        if self.type is None:
            return content
        return _to_type(content, self.type)


# -- from a type -------------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _wire_for_type(tp: Any) -> dict[str, Any]:
    from ._signature import type_schema

    name = getattr(tp, "__name__", repr(tp))
    try:
        derived = type_schema(tp)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"elicitation schema {name}: cannot derive a JSON Schema ({exc})") from None
    defs = derived.get("$defs") or {}
    properties = {
        field: _simplify(prop, defs) for field, prop in (derived.get("properties") or {}).items()
    }
    wire: dict[str, Any] = {"type": "object", "properties": properties}
    if derived.get("required"):
        wire["required"] = list(derived["required"])
    problem = _flat_problem(wire) if derived.get("type") == "object" else "it is not an object"
    if problem is not None:
        raise TypeError(f"elicitation schema {name}: {problem}; {_RULE}")
    return wire


def _simplify(prop: Any, defs: dict[str, Any]) -> Any:
    """Rewrite what msgspec and pydantic generate into the spec's primitive shapes:
    ``Optional[X]`` is X left out of ``required`` (the spec has no null type), an enum
    class referenced through ``$defs`` is inlined, and string enums get their ``type``."""
    if not isinstance(prop, dict):
        return prop
    prop = dict(prop)
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref[len("#/$defs/") :])
        if isinstance(target, dict) and "enum" in target:
            del prop["$ref"]
            prop = {**{k: v for k, v in target.items() if k != "title"}, **prop}
    options = prop.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) == 1 and len(kept) < len(options):
            del prop["anyOf"]
            prop = {**_simplify(kept[0], defs), **prop}
    if prop.get("default", 0) is None:
        del prop["default"]
    enum = prop.get("enum")
    if "type" not in prop and isinstance(enum, list) and all(isinstance(v, str) for v in enum):
        prop["type"] = "string"
    if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
        prop["items"] = _simplify(prop["items"], defs)
    return prop


def _to_type(content: dict[str, Any], tp: Any) -> Any:
    if hasattr(tp, "model_validate") and hasattr(tp, "model_json_schema"):  # pydantic
        import pydantic

        try:
            return tp.model_validate(content)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise InvalidParams(
                f"the accepted content does not match the requested schema: field {where!r}: {first['msg']}"
            ) from None
    try:
        return msgspec.convert(content, tp)
    except msgspec.ValidationError as exc:
        raise InvalidParams(f"the accepted content does not match the requested schema: {exc}") from None


# -- the flat-primitives rule ------------------------------------------------------------------
def _flat_problem(schema: dict[str, Any]) -> str | None:
    """What breaks the flat-primitives rule, naming the property; ``None`` if nothing."""
    if schema.get("type") != "object":
        return "its type must be 'object'"
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return "it has no 'properties' object"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "'required' must be a list of property names"
    for name, prop in properties.items():
        problem = _property_problem(prop)
        if problem is not None:
            return f"field {name!r} {problem}"
    return None


def _property_problem(prop: Any) -> str | None:
    if not isinstance(prop, dict):
        return "is not a schema object"
    if "$ref" in prop:
        return f"refers to another schema ({prop['$ref']}): nested objects are not allowed"
    for keyword in ("anyOf", "allOf", "not", "if", "properties"):
        if keyword in prop:
            return f"uses {keyword!r}: it must be one primitive type"
    kind = prop.get("type")
    if kind == "array":
        return _multi_select_problem(prop.get("items"))
    if not isinstance(kind, str) or kind not in _PRIMITIVES:
        return f"has type {kind!r}: nested objects, lists and unions are not allowed"
    if kind == "string":
        return _string_problem(prop)
    if "oneOf" in prop or "enum" in prop:
        return "is an enum that is not of strings"
    return None


def _string_problem(prop: dict[str, Any]) -> str | None:
    fmt = prop.get("format")
    if fmt is not None and fmt not in _FORMATS:
        return f"has format {fmt!r}; the formats allowed are {sorted(_FORMATS)}"
    enum = prop.get("enum")
    if enum is not None and not (isinstance(enum, list) and all(isinstance(v, str) for v in enum)):
        return "has an enum that is not a list of strings"
    if "oneOf" in prop and not _titled_consts(prop["oneOf"]):
        return "has a 'oneOf' that is not a list of string consts"
    return None


def _multi_select_problem(items: Any) -> str | None:
    if isinstance(items, dict):
        enum = items.get("enum")
        if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
            return None
        if _titled_consts(items.get("anyOf")):
            return None
    return "is an array of something other than enum strings (only multi-select enums are allowed)"


def _titled_consts(options: Any) -> bool:
    return isinstance(options, list) and all(
        isinstance(o, dict) and isinstance(o.get("const"), str) for o in options
    )


# -- validating answers ------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _validator(schema_json: bytes) -> Any:
    import jsonschema  # type: ignore[import-untyped]  # no stubs in the environment

    cls = jsonschema.Draft202012Validator
    return cls(msgspec.json.decode(schema_json), format_checker=cls.FORMAT_CHECKER)


def _mismatch(content: dict[str, Any], schema: dict[str, Any]) -> str | None:
    validator = _validator(msgspec.json.encode(schema, order="sorted"))
    error = next(iter(validator.iter_errors(content)), None)
    if error is None:
        return None
    path = list(error.absolute_path)
    return f"field {path[0]!r}: {error.message}" if path else error.message
