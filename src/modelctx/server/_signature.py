"""From a Python function to a JSON Schema and a fast argument validator.

The parameters of a tool become the fields of a ``msgspec`` struct made for it: one
``msgspec.convert`` call then checks and converts the arguments (dataclasses,
TypedDicts, enums, ``Literal``, ``Annotated[..., msgspec.Meta(...)]``; the
annotated_types and pydantic ``Field`` constraints are rewritten as ``msgspec.Meta``
by ``_constraints.py``), and ``msgspec.json.schema`` of the same struct is the
``inputSchema``. Parameters typed as pydantic models switch that tool to a pydantic
model instead (pydantic is imported only then). An ``inputSchema`` the author writes
is compiled once into a jsonschema validator (2020-12 unless its ``$schema`` says
otherwise) that checks every call; a 2020-12 schema has its shape checked at registration
(``_schema_shape.py``) and its validator built at the first call, so a server's start
never imports jsonschema (55-77 ms).

Parameters annotated with the handler context type are injected, not exposed.
Descriptions come from the docstring: its first paragraph describes the tool, and an
``Args:`` (Google) or ``Parameters`` (NumPy) section describes each argument.
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import msgspec
import msgspec.json as _json

from ..errors import InvalidParams, RegistrationError
from ._constraints import refuse_hidden_constraints, to_msgspec
from ._schema_shape import DIALECT_2020_12, problem

__all__ = ["Signature", "parse_docstring", "strip_annotated", "type_schema"]

_MISSING = inspect.Parameter.empty


_ARGS_HEADERS = frozenset({"args", "arguments", "parameters", "params"})
_OTHER_HEADERS = frozenset({"returns", "return", "raises", "yields", "examples", "example", "notes", "note"})
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\(.*?\))?\s*(?::\s*[^:]*)?:\s*(.*)$")
_NUMPY_ARG = re.compile(r"^(\w+)\s*:\s*.+$")


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
    for index, line in enumerate(lines):
        stripped = line.strip()
        header = stripped.rstrip(":").lower()
        if header in _ARGS_HEADERS and (stripped.endswith(":") or _is_underline_next(lines, index)):
            section, current = "args", None
            continue
        if header in _OTHER_HEADERS:
            section, current = "other", None
            continue
        if stripped and not stripped.strip("-"):  # a NumPy underline
            continue
        if section == "args":
            match = _GOOGLE_ARG.match(stripped)
            numpy = _NUMPY_ARG.match(stripped)
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


def _is_underline_next(lines: list[str], index: int) -> bool:
    return index + 1 < len(lines) and set(lines[index + 1].strip()) == {"-"}


def _is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_json_schema") and hasattr(tp, "model_validate")


def _mentions_pydantic(tp: Any) -> bool:
    """Is a pydantic model anywhere in ``tp`` (``User``, ``User | None``, ``list[User]``)?

    msgspec cannot validate one, so such a parameter needs the pydantic path."""
    return _is_pydantic_model(tp) or any(_mentions_pydantic(arg) for arg in get_args(tp))


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of one type, ``$defs`` inlined at the top when needed."""
    if _is_pydantic_model(tp):
        schema: dict[str, Any] = tp.model_json_schema()
        return schema
    plain = _plain_schema(tp)
    if plain is not None:
        return plain
    schema = msgspec.json.schema(tp, ref_template="#/$defs/{name}")
    return _hoist_root(schema)


# msgspec derives a schema through its inspect module: 60-100 us for a tool's arguments,
# most of a registration. Parameters repeat a few types (str, int, str | None, a Literal),
# so the schema of each type without components (no $defs: no dataclass, struct, enum...
# inside) is kept, encoded, by the type: what msgspec would embed for it in any struct.
_SCALARS = frozenset({str, int, float, bool})
_Field = tuple[str, Any, str | None, Any]  # a parameter: name, msgspec type, description to add, default
_PLAIN: dict[Any, bytes | None] = {}  # type -> its encoded schema; None: it has components
_PLAIN_MAX = 4096  # types are few; a program minting types without end is not held by them


def _plain_schema(tp: Any) -> dict[str, Any] | None:
    """A new copy of ``tp``'s schema when it has no components, else None. Raises
    ``TypeError`` (as ``msgspec.json.schema``) for a type with no schema."""
    try:
        cached = _PLAIN.get(tp, b"")
    except TypeError:  # an unhashable annotation (Annotated with a list in it): not kept
        cached = b""
        hashable = False
    else:
        hashable = True
    if cached == b"":
        schema = msgspec.json.schema(tp)
        cached = None if "$defs" in schema else _json.encode(schema)
        if hashable:
            if len(_PLAIN) >= _PLAIN_MAX:
                _PLAIN.clear()
            _PLAIN[tp] = cached
    return None if cached is None else _json.decode(cached)


def _struct_schema(fields: list[_Field], forbid_unknown: bool) -> dict[str, Any] | None:
    """The ``inputSchema`` msgspec gives the arguments struct of ``fields`` (name, type,
    the description added to it, default), title removed, built from the kept schemas of
    their types; None if a type has components (then msgspec derives it, ``$defs`` and
    all) or already says something of its description."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, tp, description, default in fields:
        schema = _plain_schema(tp)
        if schema is None:
            return None
        if description is not None:
            if "description" in schema:  # msgspec's merge of the two decides
                return None
            schema = {"description": description, **schema}
        if default is msgspec.NODEFAULT:
            required.append(name)
        else:
            schema["default"] = msgspec.to_builtins(default, str_keys=True)
        properties[name] = schema
    built: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if forbid_unknown:
        built["additionalProperties"] = False
    return built


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
    """What a handler function takes: its schema, a validator and the injected params.

    ``kind`` and ``name`` ("tool", "forecast") name the handler in the
    ``RegistrationError`` raised for a signature that cannot be served. A "resource
    template" converts its text variables to the parameters' types ("42" to an int).
    """

    def __init__(
        self, fn: Callable[..., Any], name: str, context_type: type, kind: str = "tool"
    ) -> None:
        self.fn = fn
        self.where = f"{kind} {name!r}"
        # A URI template's variables are text: ``users://{id}`` with ``id: int`` reads
        # "42" as 42. Tool arguments are JSON and are checked strictly.
        self._strict = kind != "resource template"
        # parse_docstring cleans the text as inspect.getdoc does; getdoc only for what has
        # no docstring of its own (a method may inherit its base class's).
        own = getattr(fn, "__doc__", None)
        self.description, param_docs = parse_docstring(own if isinstance(own, str) else inspect.getdoc(fn))
        # A callable object's hints are those of its __call__.
        hinted: Any = fn if inspect.isroutine(fn) or isinstance(fn, type) else type(fn).__call__
        try:
            hints = get_type_hints(hinted, include_extras=True)
        except Exception as exc:  # an annotation that cannot be resolved
            raise RegistrationError(f"{self.where}: cannot read its type hints: {exc}") from exc
        self.return_type = hints.get("return", _MISSING)
        self.context_param: str | None = None
        self.param_names: list[str] = []
        self.var_kw = False
        self.hints: dict[str, Any] = {}  # each exposed parameter's type, as written
        self._predicates: dict[str, list[Callable[[Any], bool]]] = {}
        fields, pydantic_fields = self._parameters(fn, hints, context_type, param_docs)
        self._pydantic: Any = None  # a pydantic model class, when a parameter needs one
        self._schema: dict[str, Any] | None = None  # set by use_schema: the author's own inputSchema
        self._validator: Any = None  # its jsonschema validator, built at first use
        self._build_schema(name, fields, pydantic_fields)

    def _parameters(
        self, fn: Callable[..., Any], hints: dict[str, Any], context_type: type, param_docs: dict[str, str]
    ) -> tuple[list[_Field], dict[str, Any]]:
        """Each parameter the client sends, as (name, msgspec type, the docstring's
        description to add to it, default) and as a pydantic field; notes the context
        parameter and ``**kwargs``; refuses ``*args`` and an untyped ``ctx``."""
        fields: list[_Field] = []
        pydantic_fields: dict[str, Any] = {}
        self._uses_pydantic = False  # set by _field_type
        for param in _read_parameters(fn):
            tp = hints.get(param.name, Any)
            if not (type(tp) is type and tp in _SCALARS) and _is_context(tp, context_type):
                self.context_param = param.name
                continue
            if param.kind is _VAR_KEYWORD:
                self.var_kw = True
                continue
            if param.kind is _VAR_POSITIONAL:
                raise RegistrationError(
                    f"{self.where}: *{param.name} cannot receive arguments (they arrive by "
                    "name); use named parameters or **kwargs"
                )
            if param.name == "ctx" and not param.annotated:
                raise RegistrationError(
                    f"{self.where}: parameter 'ctx' has no type, so the client would have to "
                    "send it; annotate it (ctx: Context) to receive the request's context"
                )
            self.hints[param.name] = tp
            doc = param_docs.get(param.name)
            plain, described = self._field_type(param.name, tp, doc)
            default = msgspec.NODEFAULT if param.default is _MISSING else param.default
            fields.append((param.name, plain, described, default))
            pydantic_fields[param.name] = (
                hints.get(param.name, Any),
                ... if param.default is _MISSING else param.default,
                doc,
            )
            self.param_names.append(param.name)
        return fields, pydantic_fields

    def _build_schema(self, name: str, fields: list[_Field], pydantic_fields: dict[str, Any]) -> None:
        """The input schema and what validates arguments: a pydantic model when a type
        needs pydantic, else a msgspec struct."""
        self._required = [n for n, _, _, d in fields if d is msgspec.NODEFAULT]
        if self._uses_pydantic:
            self._pydantic = _pydantic_model(self.where, name, pydantic_fields)
            self.input_schema = self._pydantic.model_json_schema()
            self.input_schema.pop("title", None)
        else:
            _check_fields(self.where, fields)
            # The struct that checks the arguments is made at the first call (msgspec's
            # defstruct is a third of a registration): its schema is built from the
            # fields' kept schemas, unless a type has components, which msgspec lays out.
            self._name = name
            self._fields = fields
            self._struct: Any = None
            built = _struct_schema(fields, not self.var_kw)
            self.input_schema = type_schema(self._arguments_struct()) if built is None else built
            self.input_schema.pop("title", None)
        self.input_schema.setdefault("type", "object")
        self.input_schema.setdefault("properties", {})
        if not self.var_kw and "additionalProperties" not in self.input_schema:
            self.input_schema["additionalProperties"] = False

    def _arguments_struct(self) -> Any:
        """The msgspec struct the arguments are converted to, made the first time."""
        if self._struct is None:
            fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
            for name, tp, description, default in self._fields:
                if description is not None:
                    tp = Annotated[tp, msgspec.Meta(description=description)]
                fields.append((name, tp) if default is msgspec.NODEFAULT else (name, tp, default))
            self._struct = msgspec.defstruct(
                f"{_camel(self._name)}Arguments", fields, kw_only=True, forbid_unknown_fields=not self.var_kw
            )
        return self._struct

    def _field_type(self, param: str, tp: Any, doc: str | None) -> tuple[Any, str | None]:
        """The msgspec type of one parameter (constraints as Meta) and the docstring's
        text to describe it with, unless the type has a description of its own (None)."""
        if type(tp) is type and tp in _SCALARS:  # nothing to rewrite, refuse or look into
            plain = tp
        else:
            where = f"{self.where}: parameter {param!r}"
            predicates: list[Callable[[Any], bool]] = []
            plain = to_msgspec(tp, where, predicates)
            if predicates:
                self._predicates[param] = predicates
            if _mentions_pydantic(plain):
                self._uses_pydantic = True
            else:
                refuse_hidden_constraints(plain, where)
                try:
                    _plain_schema(plain)
                except TypeError:
                    raise RegistrationError(
                        f"{where} has type {_type_name(plain)}, which has no JSON Schema and cannot "
                        "be validated; use JSON types (str, int, float, bool, list, dict), "
                        "dataclasses, TypedDicts, msgspec Structs, enums, Literal or pydantic models"
                    ) from None
        return plain, doc if doc and not _has_description(plain) else None

    @property
    def raw(self) -> bool:
        """Does the author's own ``inputSchema`` describe the arguments?"""
        return self._schema is not None

    def use_schema(self, schema: dict[str, Any]) -> None:
        """Check calls against ``schema`` (the author's ``inputSchema``) from now on.

        The dialect is the schema's ``$schema``, JSON Schema 2020-12 when it names none
        (server/tools.mdx). Raises ``RegistrationError`` if ``schema`` is not a valid
        schema of its dialect. A 2020-12 schema has the shapes of its keywords checked
        here and its validator compiled at the first call (jsonschema's import is most of
        a small server's start); a schema of another dialect is compiled here.
        """
        if not isinstance(schema, dict):
            raise RegistrationError(f"{self.where}: input_schema must be a JSON Schema object")
        dialect = schema.get("$schema", DIALECT_2020_12)
        if not isinstance(dialect, str):
            raise RegistrationError(f"{self.where}: input_schema's $schema must be a URI (a string)")
        quick = dialect.rstrip("#") == DIALECT_2020_12
        if quick:
            if found := problem(schema):
                path, message = found
                raise RegistrationError(
                    f"{self.where}: input_schema is not a valid JSON Schema at {path}: {message}"
                )
        if schema.get("type") != "object":
            raise RegistrationError(
                f'{self.where}: input_schema must have "type": "object" (server/tools.mdx)'
            )
        self._schema = schema
        if not quick:
            self._validator = self._compile(schema, RegistrationError)

    def _compile(self, schema: dict[str, Any], error: type[Exception]) -> Any:
        """jsonschema's validator for ``schema``, after its full meta-schema check."""
        # A dependency, but only servers with such tools need it loaded (and it ships no
        # type stubs: it is used as Any).
        jsonschema: Any = importlib.import_module("jsonschema")
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            path = "/".join(map(str, exc.path)) or "(root)"
            raise error(
                f"{self.where}: input_schema is not a valid JSON Schema at {path}: {exc.message}"
            ) from None
        return cls(schema)

    def bind(self, arguments: Any) -> dict[str, Any]:
        """Validate ``arguments`` and return the keyword arguments for the call.

        Raises ``InvalidParams`` saying which argument is wrong and why.
        """
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("Invalid arguments: expected an object")
        if self._schema is not None:
            return self._bind_raw(arguments)
        if self._pydantic is not None:
            return self._bind_pydantic(arguments)
        try:
            value = msgspec.convert(arguments, self._struct or self._arguments_struct(), strict=self._strict)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"Invalid arguments: {exc}") from None
        kwargs = {name: getattr(value, name) for name in self.param_names}
        if self._predicates:
            self._check_predicates(kwargs, arguments)
        if self.var_kw:
            kwargs.update({k: v for k, v in arguments.items() if k not in kwargs})
        return kwargs

    def _check_predicates(self, kwargs: dict[str, Any], arguments: dict[str, Any]) -> None:
        for param, predicates in self._predicates.items():
            if param not in arguments:
                continue  # the default applies; the author chose it
            value = kwargs[param]
            for predicate in predicates:
                try:
                    ok = bool(predicate(value))
                except Exception:  # noqa: BLE001 - a predicate that cannot judge the value rejects it
                    ok = False
                if not ok:
                    what = getattr(predicate, "__qualname__", None) or repr(predicate)
                    raise InvalidParams(
                        f"Invalid arguments: {param}: {value!r} does not satisfy {what} - at `$.{param}`"
                    )

    def _bind_raw(self, arguments: dict[str, Any]) -> dict[str, Any]:
        # The author's own schema describes the arguments: check them against it, then
        # pass them on as they are.
        if self._validator is None:
            # The full meta-schema check found what the shape check at registration
            # let through: the server's fault, logged, never the caller's (Internal error).
            assert self._schema is not None
            self._validator = self._compile(self._schema, RuntimeError)
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(map(str, e.path)))
        if errors:
            shown = "; ".join(
                f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors[:5]
            )
            more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
            raise InvalidParams(f"Invalid arguments: {shown}{more}")
        missing = [n for n in self._required if n not in arguments]
        if missing:
            raise InvalidParams(f"Invalid arguments: missing {', '.join(missing)}")
        if self.var_kw:
            return dict(arguments)
        return {k: v for k, v in arguments.items() if k in self.param_names}

    def _bind_pydantic(self, arguments: dict[str, Any]) -> dict[str, Any]:
        import pydantic

        assert self._pydantic is not None
        try:
            model = self._pydantic.model_validate(arguments)
        except pydantic.ValidationError as exc:
            errors = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidParams(f"Invalid arguments: {errors}") from None
        return {name: getattr(model, name) for name in self.param_names}


_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
_VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD


class _Param(typing.NamedTuple):
    name: str
    kind: object  # an inspect.Parameter kind
    default: Any  # inspect.Parameter.empty: none
    annotated: bool


def _read_parameters(fn: Callable[..., Any]) -> list[_Param]:
    """``fn``'s parameters in ``inspect.signature`` order. A plain function's are read
    from its code object (``inspect.signature`` builds and checks an object per
    parameter: a fifth of a registration); anything else (a wrapper, a partial, a
    callable object, a set ``__signature__``) goes through ``inspect.signature``."""
    if type(fn) is not types.FunctionType or hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        return [
            _Param(p.name, p.kind, p.default, p.annotation is not _MISSING)
            for p in inspect.signature(fn).parameters.values()
        ]
    code = fn.__code__
    names, annotations = code.co_varnames, fn.__annotations__
    positional, keyword_only = code.co_argcount, code.co_kwonlyargcount
    defaults, keyword_defaults = fn.__defaults__ or (), fn.__kwdefaults__ or {}
    first_default = positional - len(defaults)
    found = []
    for i in range(positional):
        kind = inspect.Parameter.POSITIONAL_ONLY if i < code.co_posonlyargcount else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = defaults[i - first_default] if i >= first_default else _MISSING
        found.append(_Param(names[i], kind, default, names[i] in annotations))
    after = positional + keyword_only  # *args and **kwargs come after the named ones in co_varnames
    if code.co_flags & inspect.CO_VARARGS:
        found.append(_Param(names[after], _VAR_POSITIONAL, _MISSING, names[after] in annotations))
        after += 1
    for name in names[positional : positional + keyword_only]:
        found.append(_Param(name, inspect.Parameter.KEYWORD_ONLY, keyword_defaults.get(name, _MISSING), name in annotations))
    if code.co_flags & inspect.CO_VARKEYWORDS:
        found.append(_Param(names[after], _VAR_KEYWORD, _MISSING, names[after] in annotations))
    return found


def _check_fields(where: str, fields: list[_Field]) -> None:
    """Refuse at registration what msgspec would refuse when the struct is made, at the
    first call: a name with two leading underscores (a struct field cannot have one), and
    a non-empty list, dict, set or bytearray default, one object shared by every call (an
    empty one is made anew for each call)."""
    for name, _, _, default in fields:
        if name.startswith("__"):
            raise RegistrationError(
                f"{where}: parameter {name!r} starts with two underscores, which an argument "
                "cannot; rename it"
            )
        if isinstance(default, (list, dict, set, bytearray)) and default:
            raise RegistrationError(
                f"{where}: parameter {name!r} defaults to a non-empty {type(default).__name__} "
                f"({default!r}), which every call would share; default it to None and build the "
                "value in the function"
            )


def _type_name(tp: Any) -> str:
    return tp.__qualname__ if isinstance(tp, type) else repr(tp)


def strip_annotated(tp: Any) -> Any:
    """``tp`` without its ``Annotated`` layers."""
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp




def _is_context(tp: Any, context_type: type) -> bool:
    """``Context``, ``Context | None`` or ``Optional[Context]``."""
    tp = strip_annotated(tp)
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


def _pydantic_model(where: str, name: str, fields: dict[str, tuple[Any, Any, str | None]]) -> Any:
    import pydantic

    spec = {
        field: (tp, pydantic.Field(default, description=doc))
        for field, (tp, default, doc) in fields.items()
    }
    try:
        return pydantic.create_model(f"{_camel(name)}Arguments", **spec)  # type: ignore[call-overload]
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError) as exc:
        # A pydantic model among the parameters makes pydantic validate all of them, and
        # it refuses some types msgspec takes (typing.TypedDict before Python 3.12).
        # Its first sentence names the type; its advice is about a model_config that
        # is not the author's to set.
        first = str(exc).split("\n")[0].split(". ")[0].rstrip(".")
        raise RegistrationError(
            f"{where}: its parameters include a pydantic model, so pydantic checks them all, "
            f"and it refuses one ({first}); make that parameter a pydantic model, a "
            "dataclass or a typing_extensions.TypedDict"
        ) from None


# Return annotations that mean "content, not data": no outputSchema for these.
def is_content_annotation(tp: Any) -> bool:
    """``str``, a content class, or a list/union of them that names a content class.

    ``list[str]`` stays data (structured output); ``list[str | Image]`` is content;
    a bare ``list`` (or ``list[Any]``), like ``Any``, is not promised as either.
    """
    return _content_kind(tp) is not None


def _content_kind(tp: Any) -> str | None:
    """None: data; "text": str-like; "blocks": names a content class."""
    tp = strip_annotated(tp)
    if tp is _MISSING or tp is None or tp is type(None) or tp is Any or tp is str:
        return "text"
    from ._content import Audio, EmbeddedResource, Image, ResourceLink, Text, ToolResult

    if tp in (list, tuple) or (get_origin(tp) in (list, tuple) and set(get_args(tp)) <= {Any, Ellipsis}):
        # A bare ``list`` says nothing of its items: like ``Any``, no outputSchema is
        # promised, so a list of content blocks is as valid a return as a list of data.
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
