"""From a Python function to a JSON Schema and a fast argument validator.

The parameters of a tool become the fields of a ``msgspec`` struct made for it: one
``msgspec.convert`` call then checks and converts the arguments (dataclasses,
TypedDicts, enums, ``Literal``, ``Annotated[..., msgspec.Meta(...)]`` and the
``annotated_types`` constraints all work), and ``msgspec.json.schema`` of the same
struct is the ``inputSchema``. Parameters typed as pydantic models switch that tool
to a pydantic model instead (pydantic is imported only then).

Parameters annotated with the handler context type are injected, not exposed.
Descriptions come from the docstring: its first paragraph describes the tool, and an
``Args:`` (Google) or ``Parameters`` (NumPy) section describes each argument.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import msgspec

from ..errors import InvalidParams

__all__ = ["Signature", "parse_docstring", "type_schema"]

_MISSING = inspect.Parameter.empty


def parse_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """(description, {param: description}) from a Google or NumPy style docstring."""
    if not doc:
        return None, {}
    doc = inspect.cleandoc(doc)
    lines = doc.splitlines()
    params: dict[str, str] = {}
    body: list[str] = []
    section: str | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        header = stripped.rstrip(":").lower()
        if header in ("args", "arguments", "parameters", "params") and (
            stripped.endswith(":") or _is_underline_next(lines, line)
        ):
            section, current = "args", None
            continue
        if header in ("returns", "return", "raises", "yields", "examples", "example", "notes", "note"):
            section, current = "other", None
            continue
        if set(stripped) <= {"-"} and stripped:
            continue
        if section == "args":
            match = re.match(r"^(\*{0,2}\w+)\s*(?:\(.*?\))?\s*(?::\s*[^:]*)?:\s*(.*)$", stripped)
            numpy = re.match(r"^(\w+)\s*:\s*.+$", stripped)
            indent = len(line) - len(line.lstrip())
            if match and indent <= 4:
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif numpy and indent == 0:
                current = numpy.group(1)
                params[current] = ""
            elif current and stripped:
                params[current] = (params[current] + " " + stripped).strip()
        elif section is None:
            body.append(line)
    paragraphs = "\n".join(body).strip().split("\n\n")
    description = paragraphs[0].strip() if paragraphs and paragraphs[0].strip() else None
    if description:
        description = " ".join(description.split())
    return description, params


def _is_underline_next(lines: list[str], line: str) -> bool:
    index = lines.index(line)
    return index + 1 < len(lines) and set(lines[index + 1].strip()) == {"-"}


def _annotated_types_to_meta(tp: Any) -> Any:
    """Turn ``annotated_types`` / pydantic ``Field`` constraints into ``msgspec.Meta``."""
    if get_origin(tp) is not Annotated:
        return tp
    base, *extras = get_args(tp)
    kept: list[Any] = []
    meta: dict[str, Any] = {}
    for extra in extras:
        name = type(extra).__name__
        if isinstance(extra, msgspec.Meta):
            kept.append(extra)
        elif name in ("Gt", "Ge", "Lt", "Le", "MultipleOf"):
            key = {"Gt": "gt", "Ge": "ge", "Lt": "lt", "Le": "le", "MultipleOf": "multiple_of"}[name]
            meta[key] = next(iter(vars(extra).values()))
        elif name == "MinLen":
            meta["min_length"] = extra.min_length
        elif name == "MaxLen":
            meta["max_length"] = extra.max_length
        elif name == "FieldInfo":  # pydantic.Field(description=...)
            if getattr(extra, "description", None):
                meta["description"] = extra.description
        elif isinstance(extra, str):
            meta["description"] = extra  # Annotated[str, "what it is"]
    if meta:
        kept.append(msgspec.Meta(**meta))
    return Annotated[(base, *kept)] if kept else base


def _is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_json_schema") and hasattr(tp, "model_validate")


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of one type, ``$defs`` inlined at the top when needed."""
    if _is_pydantic_model(tp):
        return tp.model_json_schema()
    schema = msgspec.json.schema(tp, ref_template="#/$defs/{name}")
    return _hoist_root(schema)


def _hoist_root(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    defs = schema.get("$defs", {})
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/") :]
        root = dict(defs.get(name, {}))
        rest = {k: v for k, v in defs.items() if k != name}
        # The root may still be referenced from inside (recursive types): keep it.
        if _mentions(rest, ref) or _mentions(root, ref):
            rest[name] = defs[name]
        if rest:
            root["$defs"] = rest
        return root
    return schema


def _mentions(obj: Any, ref: str) -> bool:
    if isinstance(obj, dict):
        return obj.get("$ref") == ref or any(_mentions(v, ref) for v in obj.values())
    if isinstance(obj, list):
        return any(_mentions(v, ref) for v in obj)
    return False


class Signature:
    """What a handler function takes: its schema, a validator and the injected params."""

    def __init__(self, fn: Callable[..., Any], name: str, context_type: type) -> None:
        self.fn = fn
        self.description, param_docs = parse_docstring(inspect.getdoc(fn))
        try:
            hints = get_type_hints(fn, include_extras=True)
        except Exception as exc:  # an annotation that cannot be resolved
            raise TypeError(f"cannot read the type hints of {name!r}: {exc}") from exc
        self.return_type = hints.get("return", _MISSING)
        self.context_param: str | None = None
        fields: list[tuple[str, Any, Any]] = []
        self.param_names: list[str] = []
        self.var_kw = False
        pydantic_fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            tp = hints.get(param.name, Any)
            if _is_context(tp, context_type):
                self.context_param = param.name
                continue
            if param.kind is param.VAR_KEYWORD:
                self.var_kw = True
                continue
            if param.kind is param.VAR_POSITIONAL:
                raise TypeError(f"{name!r}: *{param.name} cannot be a tool argument")
            tp = _annotated_types_to_meta(tp)
            doc = param_docs.get(param.name)
            if doc and not _has_description(tp):
                tp = Annotated[tp, msgspec.Meta(description=doc)]
            default = msgspec.NODEFAULT if param.default is _MISSING else param.default
            fields.append((param.name, tp, default))
            pydantic_fields[param.name] = (
                hints.get(param.name, Any),
                ... if param.default is _MISSING else param.default,
                doc,
            )
            self.param_names.append(param.name)
        self._pydantic = None
        self.raw = False  # set when the author supplies the input schema
        self._required = [n for n, _, d in fields if d is msgspec.NODEFAULT]
        if any(_is_pydantic_model(_strip(tp)) for _, tp, _ in fields):
            self._pydantic = _pydantic_model(name, pydantic_fields)
            self.input_schema = self._pydantic.model_json_schema()
            self.input_schema.pop("title", None)
        else:
            self._struct = msgspec.defstruct(
                f"{_camel(name)}Arguments",
                [(n, tp) if d is msgspec.NODEFAULT else (n, tp, d) for n, tp, d in fields],
                kw_only=True,
                forbid_unknown_fields=not self.var_kw,
            )
            self.input_schema = type_schema(self._struct)
            self.input_schema.pop("title", None)
        self.input_schema.setdefault("type", "object")
        self.input_schema.setdefault("properties", {})
        if not self.var_kw and "additionalProperties" not in self.input_schema:
            self.input_schema["additionalProperties"] = False

    def bind(self, arguments: Any) -> dict[str, Any]:
        """Validate ``arguments`` and return the keyword arguments for the call."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("Invalid arguments: expected an object")
        if self.raw:
            return self._bind_raw(arguments)
        if self._pydantic is not None:
            return self._bind_pydantic(arguments)
        try:
            value = msgspec.convert(arguments, self._struct)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"Invalid arguments: {exc}") from None
        kwargs = {name: getattr(value, name) for name in self.param_names}
        if self.var_kw:
            kwargs.update({k: v for k, v in arguments.items() if k not in kwargs})
        return kwargs

    def _bind_raw(self, arguments: dict[str, Any]) -> dict[str, Any]:
        # The author's own schema describes the arguments; pass them on as they are.
        missing = [n for n in self._required if n not in arguments]
        if missing:
            raise InvalidParams(f"Invalid arguments: missing {', '.join(missing)}")
        if self.var_kw:
            return dict(arguments)
        return {k: v for k, v in arguments.items() if k in self.param_names}

    def _bind_pydantic(self, arguments: dict[str, Any]) -> dict[str, Any]:
        import pydantic

        try:
            model = self._pydantic.model_validate(arguments)
        except pydantic.ValidationError as exc:
            errors = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidParams(f"Invalid arguments: {errors}") from None
        return {name: getattr(model, name) for name in self.param_names}


def _strip(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _is_context(tp: Any, context_type: type) -> bool:
    """``Context``, ``Context | None`` or ``Optional[Context]``."""
    tp = _strip(tp)
    if isinstance(tp, type) and issubclass(tp, context_type):
        return True
    args = [a for a in get_args(tp) if a is not type(None)]
    return len(args) == 1 and get_origin(tp) in (typing.Union, types.UnionType) and _is_context(args[0], context_type)


def _has_description(tp: Any) -> bool:
    if get_origin(tp) is not Annotated:
        return False
    return any(isinstance(m, msgspec.Meta) and m.description for m in get_args(tp)[1:])


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", name) if part)


def _pydantic_model(name: str, fields: dict[str, tuple[Any, Any, str | None]]) -> Any:
    import pydantic

    spec = {
        field: (tp, pydantic.Field(default, description=doc))
        for field, (tp, default, doc) in fields.items()
    }
    return pydantic.create_model(f"{_camel(name)}Arguments", **spec)  # type: ignore[call-overload]


# Return annotations that mean "content, not data": no outputSchema for these.
def is_content_annotation(tp: Any) -> bool:
    """``str``, a content class, or a list/union of them that names a content class.

    ``list[str]`` stays data (structured output); ``list[str | Image]`` is content.
    """
    return _content_kind(tp) is not None


def _content_kind(tp: Any) -> str | None:
    """None: data; "text": str-like; "blocks": names a content class."""
    from ._content import Audio, EmbeddedResource, Image, ResourceLink, Text, ToolResult

    tp = _strip(tp)
    if tp is _MISSING or tp is None or tp is type(None) or tp is Any:
        return "text"
    if tp is str:
        return "text"
    if isinstance(tp, type) and issubclass(tp, (Text, Image, Audio, ResourceLink, EmbeddedResource, ToolResult)):
        return "blocks"
    origin = get_origin(tp)
    if origin in (list, tuple, typing.Union, types.UnionType):
        kinds = [_content_kind(a) for a in get_args(tp) if a is not Ellipsis]
        if kinds and all(kinds):
            if origin in (list, tuple):
                return "blocks" if "blocks" in kinds else None
            return "blocks" if "blocks" in kinds else "text"
    return None
