"""What a server offers: tools, resources, resource templates and prompts.

Each kind is kept in insertion order (so ``*/list`` is deterministic, as
server/tools.mdx asks) and its wire definition is built once, when registered. A change
at run time calls ``on_change(kind)``, which the server turns into ``list_changed``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._signature import Signature, is_content_annotation, type_schema
from ._threads import run_in_worker
from ._uri_template import UriTemplate

__all__ = ["ToolDef", "ResourceDef", "TemplateDef", "PromptDef", "Registry", "CacheHint"]


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
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)
    )


def _common(definition: dict[str, Any], title, icons, meta) -> dict[str, Any]:
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
    ) -> ToolDef:
        name = name or fn.__name__
        signature = Signature(fn, name, context_type)
        definition: dict[str, Any] = {"name": name}
        _common(definition, title, None, None)
        desc = description or signature.description
        if desc:
            definition["description"] = desc
        if input_schema is not None:
            signature.raw = True
        definition["inputSchema"] = input_schema or signature.input_schema
        structured, wrap = False, False
        if output_schema is not None:
            structured = True
        elif structured_output is not False and not is_content_annotation(signature.return_type):
            schema = type_schema(signature.return_type)
            structured = True
            if schema.get("type") != "object":
                # Older revisions require an object; wrap other values as {"result": …}.
                wrap = True
                schema = {
                    "type": "object",
                    "properties": {"result": schema},
                    "required": ["result"],
                }
            output_schema = schema
        if output_schema is not None:
            definition["outputSchema"] = output_schema
        if annotations:
            definition["annotations"] = dict(annotations)
        _common(definition, None, icons, meta)
        return cls(name, fn, signature, definition, _is_async(fn), structured, wrap, cache, inline)


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


class Registry:
    """The four ordered collections, with a change hook."""

    KINDS = ("tools", "resources", "prompts")

    def __init__(self) -> None:
        self.tools: dict[str, ToolDef] = {}
        self.resources: dict[str, ResourceDef] = {}
        self.templates: dict[str, TemplateDef] = {}
        self.prompts: dict[str, PromptDef] = {}
        self.on_change: Callable[[str], None] | None = None
        # Wire lists are cached until the next change.
        self._lists: dict[str, list[dict[str, Any]]] = {}

    def changed(self, kind: str) -> None:
        self._lists.pop(kind, None)
        if kind == "resources":
            self._lists.pop("templates", None)
        if self.on_change is not None:
            self.on_change(kind)

    def wire_list(self, kind: str) -> list[dict[str, Any]]:
        cached = self._lists.get(kind)
        if cached is None:
            source = {
                "tools": self.tools,
                "resources": self.resources,
                "templates": self.templates,
                "prompts": self.prompts,
            }[kind]
            cached = self._lists[kind] = [d.definition for d in source.values()]
        return cached

    def cache_hints(self, kind: str) -> list[CacheHint]:
        source = {"tools": self.tools, "resources": self.resources, "templates": self.templates}
        items = source.get(kind, {})
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
