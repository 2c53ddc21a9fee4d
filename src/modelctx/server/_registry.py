"""What a server offers: tools, resources, resource templates and prompts.

Each kind is kept in insertion order (so ``*/list`` is deterministic, as
server/tools.mdx asks) and its wire definition is built once, when registered. A change
at run time calls ``on_change(kind)``, which the server turns into ``list_changed``.

Lists are served from caches that every change of their kind empties: the wire dicts
(``wire_list``) and, beside them, each dict encoded as JSON, once per shape a revision
gives it (``page``: the handshake-era revisions have their own, server/_shape.py; the
others share the dicts' own). A page is those bytes joined into one ``msgspec.Raw``, which
the transports' encoder copies as it is: encoding 10,000 cached tool dicts took 19-24 ms
(their objects are spread over the heap) where joining their bytes takes about one.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

import msgspec

from ..errors import RegistrationError
from ..protocol import Feature, encode
from ._shape import needs_shape, shape_listed
from ._signature import Signature, is_content_annotation, strip_annotated, type_schema
from ._threads import run_in_worker
from ._uri_template import UriTemplate

__all__ = [
    "CacheHint",
    "PromptDef",
    "Registry",
    "ResourceDef",
    "TemplateDef",
    "ToolDef",
    "check_prompt_arguments",
    "check_tool_name",
    "handler_name",
]

# server/tools.mdx, Tool Names: 1 to 128 characters, ASCII letters, digits, "_", "-", ".".
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


@dataclass(frozen=True)
class CacheHint:
    """``ttlMs`` and ``cacheScope`` for a result (server/utilities/caching.mdx)."""

    ttl_ms: int = 0
    scope: str = "public"

    def __post_init__(self) -> None:
        if self.ttl_ms < 0 or int(self.ttl_ms) != self.ttl_ms:
            raise ValueError("ttl_ms must be a whole number of milliseconds >= 0")
        if self.scope not in ("public", "private"):
            raise ValueError('cache scope must be "public" or "private"')


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def handler_name(fn: Callable[..., Any], name: str | None, kind: str) -> str:
    """The name a handler is registered under: ``name``, else the function's own.

    Raises ``RegistrationError`` for a lambda or a callable object without ``name=``.
    """
    if name is not None:
        if not isinstance(name, str) or not name:
            raise RegistrationError(f"a {kind} name must be a non-empty string, not {name!r}")
        return name
    own = getattr(fn, "__name__", None)
    if not isinstance(own, str) or own == "<lambda>":
        raise RegistrationError(
            f"{fn!r} has no name to register this {kind} under (a lambda or a callable "
            f"object); pass name=... to the {kind} registration"
        )
    return own


def check_tool_name(name: str) -> None:
    """Refuse a tool name outside the spec's character set and length (server/tools.mdx)."""
    if not _TOOL_NAME.fullmatch(name):
        bad = sorted({c for c in name if not _TOOL_NAME.fullmatch(c)})
        why = f"{len(name)} characters" if not bad else f"it contains {''.join(bad)!r}"
        raise RegistrationError(
            f"tool name {name!r} is not valid ({why}): tool names are 1 to 128 characters of "
            "A-Z, a-z, 0-9, '_', '-' and '.' (server/tools.mdx, Tool Names); pass name=..."
        )


def check_prompt_arguments(name: str, signature: Signature) -> None:
    """Prompt arguments arrive as strings (server/prompts.mdx): refuse any other type."""
    for param, tp in signature.hints.items():
        if not _is_string_type(tp):
            raise RegistrationError(
                f"prompt {name!r}: argument {param!r} is typed {tp!r}, but prompt arguments "
                "are strings; type it str (or str | None, or a Literal of strings)"
            )


def _is_string_type(tp: Any) -> bool:
    """``str``, ``Any`` (unannotated), a ``Literal`` of strings, or an optional of those."""
    tp = strip_annotated(tp)
    if tp is str or tp is Any or tp is type(None):
        return True
    origin = get_origin(tp)
    if origin is Literal:
        return all(isinstance(v, str) for v in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return all(_is_string_type(a) for a in get_args(tp))
    return False


def _common(
    definition: dict[str, Any],
    title: str | None,
    icons: list[dict[str, Any]] | None,
    meta: dict[str, Any] | None,
) -> dict[str, Any]:
    if title:
        definition["title"] = title
    if icons:
        definition["icons"] = list(icons)
    if meta:
        definition["_meta"] = dict(meta)
    return definition


@dataclass
class ToolDef:
    name: str
    fn: Callable[..., Any]
    signature: Signature
    definition: dict[str, Any]
    is_async: bool
    structured: bool  # the result has structuredContent
    wrap_result: bool  # structuredContent is {"result": value}
    cache: CacheHint | None = None
    inline: bool = False  # a sync handler that runs on the event loop (it never blocks)
    task: str = "forbidden"  # tasks extension: "forbidden", "optional" or "required"
    task_start: str = "call"  # the task begins at the call, or at ctx.start_task()

    @classmethod
    def build(
        cls,
        fn: Callable[..., Any],
        context_type: type,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        cache: CacheHint | None = None,
        inline: bool = False,
        task: str = "forbidden",
        task_start: str = "call",
    ) -> ToolDef:
        name = handler_name(fn, name, "tool")
        check_tool_name(name)
        _check_task_options(name, fn, task, task_start)
        signature = Signature(fn, name, context_type)
        definition: dict[str, Any] = {"name": name}
        _common(definition, title, None, None)
        desc = description or signature.description
        if desc:
            definition["description"] = desc
        if input_schema is not None:
            signature.use_schema(input_schema)
        definition["inputSchema"] = input_schema or signature.input_schema
        output_schema, structured, wrap = _output_schema(signature, output_schema, structured_output)
        if output_schema is not None:
            definition["outputSchema"] = output_schema
        if annotations:
            definition["annotations"] = dict(annotations)
        _common(definition, None, icons, meta)
        return cls(
            name, fn, signature, definition, _is_async(fn), structured, wrap, cache, inline, task, task_start
        )


def _output_schema(
    signature: Signature, given: dict[str, Any] | None, structured_output: bool | None
) -> tuple[dict[str, Any] | None, bool, bool]:
    """The tool's ``outputSchema`` (the author's, else derived from the return type unless
    ``structured_output`` is False or it returns content), whether results are structured,
    and whether a non-object value is wrapped as ``{"result": ...}``."""
    if given is not None:
        return given, True, False
    if structured_output is False or is_content_annotation(signature.return_type):
        return None, False, False
    schema = type_schema(signature.return_type)
    if schema.get("type") == "object":
        return schema, True, False
    # Older revisions require an object; wrap other values as {"result": …}.
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}, True, True


def _check_task_options(name: str, fn: Callable[..., Any], task: str, task_start: str) -> None:
    if task not in ("forbidden", "optional", "required"):
        raise RegistrationError(
            f'tool {name!r}: task={task!r} is not one of "forbidden", "optional", "required"'
        )
    if task_start not in ("call", "handler"):
        raise RegistrationError(f'tool {name!r}: task_start={task_start!r} is not "call" or "handler"')
    if task_start == "handler" and not _is_async(fn):
        raise RegistrationError(
            f'tool {name!r}: task_start="handler" needs an async handler (it calls '
            "await ctx.start_task()); make it async def, or use task_start=\"call\""
        )


@dataclass
class ResourceDef:
    uri: str
    fn: Callable[..., Any]
    signature: Signature
    definition: dict[str, Any]
    mime_type: str | None
    is_async: bool
    cache: CacheHint | None = None


@dataclass
class TemplateDef:
    template: UriTemplate
    fn: Callable[..., Any]
    signature: Signature
    definition: dict[str, Any]
    mime_type: str | None
    is_async: bool
    complete: dict[str, Callable[..., Any]] = field(default_factory=dict)
    cache: CacheHint | None = None


@dataclass
class PromptDef:
    name: str
    fn: Callable[..., Any]
    signature: Signature
    definition: dict[str, Any]
    is_async: bool
    complete: dict[str, Callable[..., Any]] = field(default_factory=dict)


def resource_definition(
    *,
    uri: str | None = None,
    uri_template: str | None = None,
    name: str,
    title: str | None,
    description: str | None,
    mime_type: str | None,
    size: int | None = None,
    annotations: dict[str, Any] | None,
    icons: list[dict[str, Any]] | None,
    meta: dict[str, Any] | None,
) -> dict[str, Any]:
    definition: dict[str, Any] = {"uri": uri} if uri is not None else {"uriTemplate": uri_template}
    definition["name"] = name
    _common(definition, title, None, None)
    if description:
        definition["description"] = description
    if mime_type:
        definition["mimeType"] = mime_type
    if size is not None:
        definition["size"] = size
    if annotations:
        definition["annotations"] = dict(annotations)
    return _common(definition, None, icons, meta)


def prompt_definition(
    name: str,
    signature: Signature,
    *,
    title: str | None,
    description: str | None,
    icons: list[dict[str, Any]] | None,
    meta: dict[str, Any] | None,
) -> dict[str, Any]:
    definition: dict[str, Any] = {"name": name}
    _common(definition, title, None, None)
    desc = description or signature.description
    if desc:
        definition["description"] = desc
    arguments = []
    props = signature.input_schema.get("properties", {})
    required = set(signature.input_schema.get("required", []))
    for arg in signature.param_names:
        entry: dict[str, Any] = {"name": arg}
        arg_desc = props.get(arg, {}).get("description")
        if arg_desc:
            entry["description"] = arg_desc
        entry["required"] = arg in required
        arguments.append(entry)
    if arguments:
        definition["arguments"] = arguments
    return _common(definition, None, icons, meta)


# The method that lists each kind, which names the shape of its items (server/_shape.py).
_LIST_METHODS = {
    "tools": "tools/list",
    "resources": "resources/list",
    "templates": "resources/templates/list",
    "prompts": "prompts/list",
}


class _Encoded:
    """One list's items encoded as JSON, and the whole list as one array, joined the first
    time it is asked for: a ``msgspec.Raw`` shares its bytes, so every answer that lists
    everything sends them with no copy of its own."""

    __slots__ = ("items", "_whole")

    def __init__(self, items: list[bytes]) -> None:
        self.items = items
        self._whole: msgspec.Raw | None = None

    def whole(self) -> msgspec.Raw:
        if self._whole is None:
            self._whole = msgspec.Raw(b"[" + b",".join(self.items) + b"]")
        return self._whole


class Registry:
    """The four ordered collections, with a change hook."""

    KINDS = ("tools", "resources", "prompts")

    def __init__(self) -> None:
        self.tools: dict[str, ToolDef] = {}
        self.resources: dict[str, ResourceDef] = {}
        self.templates: dict[str, TemplateDef] = {}
        self.prompts: dict[str, PromptDef] = {}
        self.on_change: Callable[[str], None] | None = None
        # Also told of every change: the mounts that serve this registry in a parent.
        self.watchers: list[Callable[[str], None]] = []
        # Wire lists are cached until the next change, and so are their items' encodings:
        # (kind, None) for the dicts as they are, (kind, features) for a revision that
        # shapes them.
        self._lists: dict[str, list[dict[str, Any]]] = {}
        self._encoded: dict[tuple[str, frozenset[Feature] | None], _Encoded] = {}

    def put(self, kind: str, key: str, definition: Any, *, replace: bool) -> None:
        """Register ``definition`` under ``key`` in ``kind`` ("tools", "resources",
        "templates", "prompts") and announce the change.

        Raises ``RegistrationError`` if ``key`` is taken, unless ``replace`` is true.
        """
        items: dict[str, Any] = getattr(self, kind)
        if key in items and not replace:
            label = {"tools": "a tool named", "prompts": "a prompt named"}.get(
                kind, "a resource" if kind == "resources" else "a resource template"
            )
            remover = {"tools": "remove_tool", "prompts": "remove_prompt"}.get(kind, "remove_resource")
            raise RegistrationError(
                f"{label} {key!r} is already registered; pass replace=True to replace it on "
                f"purpose, or call {remover}({key!r}) first"
            )
        items[key] = definition
        self.changed("resources" if kind == "templates" else kind)

    def changed(self, kind: str) -> None:
        stale = (kind, "templates") if kind == "resources" else (kind,)
        for name in stale:
            self._lists.pop(name, None)
        for key in [key for key in self._encoded if key[0] in stale]:
            del self._encoded[key]
        if self.on_change is not None:
            self.on_change(kind)
        for watch in self.watchers:
            watch(kind)

    def wire_list(self, kind: str) -> list[dict[str, Any]]:
        cached = self._lists.get(kind)
        if cached is None:
            source: dict[str, Any] = getattr(self, kind)  # "tools", "resources", ...
            cached = self._lists[kind] = [d.definition for d in source.values()]
        return cached

    def page(
        self,
        kind: str,
        start: int,
        size: int | None,
        features: frozenset[Feature],
        *,
        keep: Callable[[dict[str, Any]], bool] | None = None,
        encoded: bool = True,
    ) -> tuple[list[dict[str, Any]] | msgspec.Raw, int | None]:
        """The items ``start`` to ``start + size`` (all of them if ``size`` is None) of the
        list of ``kind``, after dropping those ``keep`` refuses, and the offset of the next
        page (None: this is the last).

        ``encoded``: the page as one JSON array (``msgspec.Raw``), its items already shaped
        for the revision with ``features``; otherwise a new list of the wire dicts as they
        are (a middleware may read and change them; the dispatcher shapes them).
        """
        wire = self.wire_list(kind)
        cached = self._encodings(kind, features) if encoded else None
        items: list[Any] = wire if cached is None else cached.items
        if keep is not None:
            items = [item for item, definition in zip(items, wire, strict=True) if keep(definition)]
        stop = len(items) if size is None else min(start + size, len(items))
        following = stop if stop < len(items) else None
        if cached is None:
            return items[start:stop], following
        if keep is None and start == 0 and stop == len(items):
            return cached.whole(), following  # the common case: one page, nothing hidden
        return msgspec.Raw(b"[" + b",".join(items[start:stop]) + b"]"), following

    def _encodings(self, kind: str, features: frozenset[Feature]) -> _Encoded:
        shaped = needs_shape(features)
        key = (kind, features if shaped else None)
        cached = self._encoded.get(key)
        if cached is None:
            items = self.wire_list(kind)
            if shaped:
                method = _LIST_METHODS[kind]
                items = [shape_listed(method, item, features) for item in items]
            cached = self._encoded[key] = _Encoded([encode(item) for item in items])
        return cached

    def cache_hints(self, kind: str) -> list[CacheHint]:
        items: dict[str, Any] = getattr(self, kind) if kind in ("tools", "resources", "templates") else {}
        return [d.cache for d in items.values() if getattr(d, "cache", None) is not None]


async def call_handler(
    fn: Callable[..., Any], is_async: bool, kwargs: dict[str, Any], inline: bool = False
) -> Any:
    """Run a handler and return its result (awaited, if a sync handler returns an awaitable).

    Coroutine functions run on the loop; plain functions on a worker thread (see
    ``_threads``), unless ``inline``: then on the loop too, for handlers that never block.
    Whatever the handler raises propagates unchanged.
    """
    if is_async:
        return await fn(**kwargs)
    result = fn(**kwargs) if inline else await run_in_worker(fn, kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result
