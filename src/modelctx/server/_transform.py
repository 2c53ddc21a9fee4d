"""Tool transforms: a tool derived from another, the original left as it is.

::

    server.derive_tool(
        "search",                       # a registered tool, or a function
        name="find_docs",
        description="Search the handbook.",
        arguments={
            "q": ArgTransform(name="query", description="What to look for"),
            "limit": ArgTransform(hide=True, default=10),
        },
        wrap=only_public,               # async def only_public(call, **args): ...
    )

Theory of operation. The derived tool is an ordinary ``ToolDef`` whose handler maps its
arguments back to the original's and calls the original's handler in the same request
(no second dispatch). Its ``inputSchema`` is the original's with properties renamed,
hidden ones removed and descriptions and defaults changed; calls are checked against
that schema (so an error names ``query``, the name the model sees), then bound by the
original's own signature (so its types and constraints still hold). The derivation takes
the original as it is at that moment: replacing the original later does not change it.

``wrap``: ``async def wrapper(call, **args)`` receives the derived tool's arguments
(new defaults filled in, hidden ones not among them) and ``call``, an async function that runs the original
with the derived tool's arguments (``await call(**args)``, changed as it likes) and
returns the original's value; what the wrapper returns is the tool's result.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidParams, RegistrationError, ToolError
from ._context import Context
from ._registry import ToolDef, call_handler

__all__ = ["ArgTransform", "derive_tool"]

_UNSET: Any = object()


@dataclass(frozen=True)
class ArgTransform:
    """How one argument of the original shows in the derived tool.

    ``name``: its new name. ``description``: its new description. ``default``: its new
    default (it becomes optional). ``hide``: leave it out of the schema; the original
    then always gets ``default`` (or its own default, when it has one)."""

    name: str | None = None
    description: str | None = None
    default: Any = _UNSET
    hide: bool = False


@dataclass(frozen=True)
class _Plan:
    """The derived tool's arguments mapped back to the original's."""

    original_names: dict[str, str]  # derived name -> original name
    fixed: dict[str, Any]  # hidden arguments' values, by original name
    defaults: dict[str, Any]  # new defaults, by derived name

    def to_original(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        values = {**self.defaults, **arguments}
        out = {self.original_names.get(k, k): v for k, v in values.items()}
        out.update(self.fixed)
        return out


def _check_changes(tool_name: str, properties: Mapping[str, Any], changes: Mapping[str, ArgTransform]) -> None:
    """``RegistrationError`` for a change of an argument the original lacks, or one not an ``ArgTransform``."""
    for arg, change in changes.items():
        if arg not in properties:
            raise RegistrationError(
                f"derived tool {tool_name!r}: the original has no argument {arg!r} "
                f"(it has {sorted(properties)})"
            )
        if not isinstance(change, ArgTransform):
            raise RegistrationError(
                f"derived tool {tool_name!r}: arguments[{arg!r}] must be an ArgTransform, "
                f"not {type(change).__name__}"
            )


def _plan_schema(
    tool_name: str, schema: dict[str, Any], changes: Mapping[str, ArgTransform]
) -> tuple[dict[str, Any], _Plan]:
    """The derived ``inputSchema`` and the way back. Raises ``RegistrationError`` for an
    argument the original lacks, a clash of new names, a required argument hidden
    without a value."""
    schema = copy.deepcopy(schema)
    properties: dict[str, Any] = schema.get("properties", {})
    required: list[str] = list(schema.get("required", []))
    names, fixed, defaults = {}, {}, {}
    new_properties: dict[str, Any] = {}
    new_required: list[str] = []
    _check_changes(tool_name, properties, changes)
    for arg, prop in properties.items():
        change = changes.get(arg, ArgTransform())
        if change.hide:
            if change.default is not _UNSET:
                fixed[arg] = change.default
            elif arg in required:
                raise RegistrationError(
                    f"derived tool {tool_name!r}: argument {arg!r} is required, so hiding it "
                    "needs its value: ArgTransform(hide=True, default=...)"
                )
            continue
        new = change.name or arg
        if new in new_properties:
            raise RegistrationError(f"derived tool {tool_name!r}: two arguments would be named {new!r}")
        prop = dict(prop)
        if change.description is not None:
            prop["description"] = change.description
        if change.default is not _UNSET:
            prop["default"] = change.default
            defaults[new] = change.default
        elif arg in required:
            new_required.append(new)
        new_properties[new] = prop
        if new != arg:
            names[new] = arg
    schema["properties"] = new_properties
    if new_required:
        schema["required"] = new_required
    else:
        schema.pop("required", None)
    return schema, _Plan(names, fixed, defaults)


def derive_tool(
    original: ToolDef,
    *,
    name: str | None = None,
    description: str | None = None,
    arguments: Mapping[str, ArgTransform] | None = None,
    wrap: Callable[..., Awaitable[Any]] | None = None,
    **options: Any,
) -> ToolDef:
    """A tool made from ``original`` (see the module docstring). ``options``: the other
    options of ``Server.tool`` (``title``, ``annotations``, ``meta``, ``output_schema``
    ...); unset ones are the original's. Raises ``RegistrationError``."""
    new_name = name or original.name
    if wrap is not None and not inspect.iscoroutinefunction(wrap):
        raise RegistrationError(
            f"derived tool {new_name!r}: wrap must be an async function "
            "(async def wrapper(call, **args)), not {wrap!r}"
        )
    schema, plan = _plan_schema(new_name, original.definition["inputSchema"], arguments or {})
    derived = _derived_handler(original, new_name, plan, wrap)
    defined = original.definition
    _inherit_options(defined, options)
    tool = ToolDef.build(
        derived,
        Context,
        name=new_name,
        description=description if description is not None else defined.get("description"),
        input_schema=schema,
        **options,
    )
    if "output_schema" not in options or options["output_schema"] is defined.get("outputSchema"):
        # The original's value, as the original would have sent it ({"result": ...} too).
        tool = dataclasses.replace(tool, structured=original.structured, wrap_result=original.wrap_result)
    return tool


def _derived_handler(
    original: ToolDef, new_name: str, plan: _Plan, wrap: Callable[..., Awaitable[Any]] | None
) -> Callable[..., Awaitable[Any]]:
    """The derived tool's handler: its arguments mapped back to the original's, through ``wrap`` if given."""

    async def call_original(ctx: Context, arguments: Mapping[str, Any]) -> Any:
        try:
            kwargs = original.signature.bind(plan.to_original(arguments))
        except InvalidParams as exc:  # a wrapper passed what the original refuses
            raise ToolError(f"{new_name}: {exc.message}") from None
        if original.signature.context_param is not None:
            kwargs[original.signature.context_param] = ctx
        return await call_handler(original.fn, original.is_async, kwargs, original.inline)

    async def derived(ctx: Context, **args: Any) -> Any:
        args = {**plan.defaults, **args}  # what the schema promised for an argument left out
        if wrap is None:
            return await call_original(ctx, args)

        async def call(**given: Any) -> Any:
            return await call_original(ctx, given)

        return await wrap(call, **args)

    return derived


def _inherit_options(defined: Mapping[str, Any], options: dict[str, Any]) -> None:
    """Fill the options not given from the original's definition (its output schema, or none)."""
    for option, key in (("title", "title"), ("annotations", "annotations"), ("icons", "icons"), ("meta", "_meta")):
        if option not in options and key in defined:
            options[option] = defined[key]
    if "output_schema" not in options and "structured_output" not in options:
        if "outputSchema" in defined:
            options["output_schema"] = defined["outputSchema"]
        else:
            options["structured_output"] = False
