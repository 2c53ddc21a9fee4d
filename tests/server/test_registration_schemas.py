"""Registration builds a tool's ``inputSchema`` from kept per-type schemas (issue 25: 60 us a
tool at most, where msgspec's own derivation took 180-250 us). The schema must be what
msgspec derives for the arguments struct, for every kind of parameter; the struct that
checks the arguments is made at the first call and must check exactly as before.
"""

from __future__ import annotations

import datetime
import enum
import inspect
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, TypedDict

import annotated_types as at
import msgspec
import pytest

from modelctx import Client, Context, RegistrationError, Server
from modelctx.server._constraints import to_msgspec  # what registration did before the schema
from tests.support.wire import DEADLINE, async_test

run = async_test(DEADLINE)
NO = object()  # no default


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Point:
    x: int
    y: int = 0


class Place(TypedDict):
    city: str


TYPES: list[tuple[str, Any, Any]] = [
    ("str", str, NO),
    ("int with default", int, 3),
    ("float", float, NO),
    ("bool with default", bool, False),
    ("any", Any, NO),
    ("list of str", list[str], NO),
    ("empty list default", list[int], []),
    ("empty dict default", dict[str, int], {}),
    ("optional str", Optional[str], None),  # noqa: UP045 - the spelling people write
    ("str or none", str | None, None),
    ("literal", Literal["metric", "imperial"], "metric"),
    ("msgspec bounds", Annotated[int, msgspec.Meta(ge=1, le=10)], 5),
    ("annotated_types bound", Annotated[str, at.MaxLen(5)], NO),
    ("own description", Annotated[str, msgspec.Meta(description="its own")], NO),
    ("own title", Annotated[str, msgspec.Meta(title="Title")], NO),
    ("description in extra schema", Annotated[str, msgspec.Meta(extra_json_schema={"description": "x"})], NO),
    ("tuple", tuple[int, ...], NO),
    ("set", set[str], NO),
    ("datetime", datetime.datetime, NO),
    ("uuid", uuid.UUID, NO),
    ("bytes", bytes, NO),
    ("enum with default", Colour, Colour.RED),
    ("dataclass", Point, NO),
    ("list of dataclasses", list[Point], NO),
    ("typed dict", Place, NO),
]


def make_tool(tp: Any, default: Any, doc: str | None) -> Any:
    namespace = {"tp": tp, "d": default}
    body = f'    """A tool.\n\n    Args:\n        x: {doc}\n    """\n' if doc else ""
    source = f"def tool(x: tp{'' if default is NO else ' = d'}, y: int = 1) -> str:\n{body}    return ''\n"
    exec(source, namespace)  # noqa: S102 - a function whose annotation is the type under test
    return namespace["tool"]


def msgspec_schema(fn: Any) -> dict[str, Any]:
    """The inputSchema as registration built it before: the constraints rewritten as
    msgspec.Meta, the docstring's text as a description, msgspec's schema of the struct."""
    hints = {"x": fn.__annotations__["x"], "y": int}
    defaults = fn.__defaults__ or ()
    names = ["x", "y"][-len(defaults) :] if defaults else []
    doc = "the x" if fn.__doc__ else None
    fields: list[Any] = []
    for name in ("x", "y"):
        tp = hints[name]
        if isinstance(tp, str):
            tp = eval(tp, {**fn.__globals__})  # noqa: S307 - the test's own annotation
        tp = to_msgspec(tp, "test")
        if name == "x" and doc and not _described(tp):
            tp = Annotated[tp, msgspec.Meta(description=doc)]
        if name in names:
            fields.append((name, tp, defaults[names.index(name)]))
        else:
            fields.append((name, tp))
    struct = msgspec.defstruct("ToolArguments", fields, kw_only=True, forbid_unknown_fields=True)
    schema = msgspec.json.schema(struct, ref_template="#/$defs/{name}")
    defs = dict(schema["$defs"])
    root = defs.pop("ToolArguments")
    if defs:
        root["$defs"] = defs
    root.pop("title")
    return root


def _described(tp: Any) -> bool:
    metadata = getattr(tp, "__metadata__", ())
    return any(isinstance(m, msgspec.Meta) and m.description for m in metadata)


@pytest.mark.parametrize("doc", [None, "the x"])
@pytest.mark.parametrize(("label", "tp", "default"), TYPES, ids=[t[0] for t in TYPES])
def test_the_input_schema_is_what_msgspec_derives_for_every_kind_of_parameter(label, tp, default, doc):
    fn = make_tool(tp, default, doc)
    server = Server("schemas")
    server.add_tool(fn)
    assert server.tool_input_schema("tool") == msgspec_schema(fn)


def test_a_tool_taking_any_other_keywords_has_no_additional_properties_rule():
    server = Server("open")

    @server.tool
    def tool(city: str, **rest: Any) -> str:
        return city

    assert server.tool_input_schema("tool") == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }


def test_two_tools_with_the_same_parameter_types_get_schemas_of_their_own():
    server = Server("apart")

    @server.tool
    def first(city: str, days: int = 3) -> str:
        """First.

        Args:
            city: where
        """
        return city

    @server.tool
    def second(city: str, days: int = 5) -> str:
        return city

    one, two = server.tool_input_schema("first"), server.tool_input_schema("second")
    assert one is not None and two is not None
    one["properties"]["days"]["default"] = 99  # a schema changed by its author after registration
    assert two["properties"] == {"city": {"type": "string"}, "days": {"type": "integer", "default": 5}}
    assert one["properties"]["city"] == {"description": "where", "type": "string"}


@pytest.mark.parametrize("default", [[1], {"a": 1}, {"x"}, bytearray(b"x")], ids=["list", "dict", "set", "bytearray"])
def test_a_non_empty_mutable_default_is_refused_at_registration(default):
    server = Server("shared")

    def tool(values: Any = default) -> str:
        return ""

    with pytest.raises(RegistrationError, match=r"parameter 'values' defaults to a non-empty .*default it to None"):
        server.add_tool(tool)


def test_a_parameter_with_two_leading_underscores_is_refused_at_registration():
    server = Server("dunder")
    source = "def tool(__secret: int) -> str:\n    return ''\n"
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # noqa: S102 - a class body would mangle the name; a module does not

    with pytest.raises(RegistrationError, match=r"parameter '__secret' starts with two underscores"):
        server.add_tool(namespace["tool"])


@run
async def test_arguments_are_checked_at_the_first_call_as_before():
    server = Server("checked")

    @server.tool
    def forecast(city: str, days: Annotated[int, at.Ge(1)] = 3, units: Literal["metric", "imperial"] = "metric") -> str:
        return f"{city} {days} {units}"

    @server.tool
    def moved(point: Point, ctx: Context) -> str:
        return f"{point.x},{point.y}"

    async with Client(server, mode="2026-07-28", timeout=DEADLINE) as client:
        bad = await client.call_tool_raw("forecast", {"city": "Oslo", "days": 0})
        unknown = await client.call_tool_raw("forecast", {"city": "Oslo", "wind": 1})
        wrong_type = await client.call_tool_raw("forecast", {"city": 3})
        good = await client.call_tool_raw("forecast", {"city": "Oslo", "units": "imperial"})
        point = await client.call_tool_raw("moved", {"point": {"x": 2}})

    for refused in (bad, unknown, wrong_type):
        assert refused.get("isError") is True, refused
    assert "days" in bad["content"][0]["text"] and "wind" in unknown["content"][0]["text"]
    assert good["content"][0]["text"] == "Oslo 3 imperial"
    assert point["content"][0]["text"] == "2,0"


def _shapes() -> list[Any]:
    import functools

    def plain(a: int, b: str = "x") -> str:
        return b

    def keyword_only(a: int, *, b: int = 2, c: str) -> str:
        return c

    def positional_only(a: int, /, b: int = 1) -> str:
        return ""

    def open_ended(a, *args, b: int = 1, **rest: Any) -> str:  # noqa: ANN001 - one unannotated on purpose
        return ""

    def nothing() -> str:
        return ""

    def with_ctx(ctx: Context, city: str = "Oslo") -> str:
        return city

    @functools.wraps(plain)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        return plain(*args, **kwargs)

    def signed(**kwargs: Any) -> str:
        return ""

    signed.__signature__ = inspect.signature(plain)  # type: ignore[attr-defined]
    return [plain, keyword_only, positional_only, open_ended, nothing, with_ctx, wrapper, signed]


@pytest.mark.parametrize("fn", _shapes(), ids=lambda fn: fn.__name__)
def test_parameters_are_read_as_inspect_signature_reads_them(fn):
    from modelctx.server._signature import _read_parameters

    expected = [
        (p.name, p.kind, p.default, p.annotation is not inspect.Parameter.empty)
        for p in inspect.signature(fn).parameters.values()
    ]
    assert [tuple(p) for p in _read_parameters(fn)] == expected


def test_keyword_only_parameters_and_their_defaults_reach_the_schema():
    server = Server("keywords")

    @server.tool
    def tool(city: str, *, days: int = 3, units: str) -> str:
        return city

    schema = server.tool_input_schema("tool")
    assert schema is not None
    assert list(schema["properties"]) == ["city", "days", "units"]
    assert schema["required"] == ["city", "units"] and schema["properties"]["days"]["default"] == 3
