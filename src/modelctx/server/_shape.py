"""Results shaped for the installed base: no field a 2025-03-26 or 2024-11-05 client's schema lacks.

Theory of operation. Handlers build results once, in the newest form. For a session of an
old revision (one without ``Feature.META_ON_TYPES``: every revision that lacks any feature
read here lacks that one, and a test keeps it so) the dispatcher passes the result through
``shape`` before it is sent. Objects are rebuilt from a whitelist of the keys the old schema
knows (schema/2025-03-26 and schema/2024-11-05 of modelcontextprotocol/modelcontextprotocol,
checked field by field), with the keys a revision gained added per
feature; the whitelist is exact for those revisions, so a field added later (``icons``,
``execution``, a vendor key) never reaches them either. Where the old schema lacks a whole
kind of value, what it stands for is kept in a form it has:

* ``structuredContent`` is dropped; its JSON stays in ``content`` as text (a tool with an
  output schema already sends it there, server/tools.mdx, Structured Content);
* a ``resource_link`` block becomes a text block naming the link;
* before 2025-03-26, an ``audio`` block becomes a text block saying what was left out.

Nothing here runs for 2025-06-18 and later sessions.
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol import Feature

__all__ = ["shape", "shape_initialize", "shape_listed", "needs_shape"]

_TOOL = frozenset({"name", "description", "inputSchema"})
_RESOURCE = frozenset({"uri", "name", "description", "mimeType", "annotations", "size"})
_TEMPLATE = frozenset({"uriTemplate", "name", "description", "mimeType", "annotations"})
_PROMPT = frozenset({"name", "description", "arguments"})
_ARGUMENT = frozenset({"name", "description", "required"})
_ANNOTATIONS = frozenset({"audience", "priority"})  # lastModified came with 2025-06-18
_CONTENTS = frozenset({"uri", "mimeType", "text", "blob"})
_IMPLEMENTATION = frozenset({"name", "version"})
_CAPABILITIES = frozenset({"experimental", "logging", "prompts", "resources", "tools"})
_BLOCK = {
    "text": frozenset({"type", "text", "annotations"}),
    "image": frozenset({"type", "data", "mimeType", "annotations"}),
    "audio": frozenset({"type", "data", "mimeType", "annotations"}),
    "resource": frozenset({"type", "resource", "annotations"}),
}
# The list results: which key holds the items, and how each item is shaped.
_LISTS = {"tools/list": "tools", "resources/list": "resources", "resources/templates/list": "resourceTemplates", "prompts/list": "prompts"}


def needs_shape(features: frozenset[Feature]) -> bool:
    """Does a session of a revision with ``features`` need its results shaped?"""
    return Feature.META_ON_TYPES not in features


def _keep(obj: Any, keys: frozenset[str]) -> Any:
    if not isinstance(obj, dict):
        return obj
    return {key: value for key, value in obj.items() if key in keys}


def _annotated(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = obj.get("annotations")
    if isinstance(annotations, dict):
        kept = _keep(annotations, _ANNOTATIONS)
        if kept:
            obj["annotations"] = kept
        else:
            del obj["annotations"]
    return obj


def _titled(keys: frozenset[str], features: frozenset[Feature]) -> frozenset[str]:
    return keys | {"title"} if Feature.TITLES in features else keys


def _tool(tool: Any, features: frozenset[Feature]) -> Any:
    keys = _titled(_TOOL, features)
    if Feature.TOOL_ANNOTATIONS in features:
        keys |= {"annotations"}
    if Feature.STRUCTURED_OUTPUT in features:
        keys |= {"outputSchema"}
    return _keep(tool, keys)


def _prompt(prompt: Any, features: frozenset[Feature]) -> Any:
    prompt = _keep(prompt, _titled(_PROMPT, features))
    if isinstance(prompt, dict) and isinstance(prompt.get("arguments"), list):
        argument_keys = _titled(_ARGUMENT, features)
        prompt["arguments"] = [_keep(argument, argument_keys) for argument in prompt["arguments"]]
    return prompt


def shape_listed(method: str, item: Any, features: frozenset[Feature]) -> Any:
    """One item of a ``*/list`` result of ``method`` in a form the revision has: a new
    object, the item itself untouched (the registry caches each item's shaped bytes,
    server/_registry.py)."""
    if method == "tools/list":
        return _tool(item, features)
    if method == "prompts/list":
        return _prompt(item, features)
    keys = _RESOURCE if method == "resources/list" else _TEMPLATE
    kept = _keep(item, _titled(keys, features))
    return _annotated(kept) if isinstance(kept, dict) else kept


def block(content: Any, features: frozenset[Feature]) -> Any:
    """One content block in a form the revision has."""
    if not isinstance(content, dict):
        return content
    kind = content.get("type")
    if kind == "resource_link" and Feature.RESOURCE_LINKS not in features:  # words naming it
        name = content.get("name") or content.get("uri")
        text = f"Resource {name}: {content.get('uri')}"
        if content.get("description"):
            text += f" ({content['description']})"
        return {"type": "text", "text": text}
    if kind == "audio" and Feature.AUDIO not in features:
        mime = content.get("mimeType", "audio")
        return {"type": "text", "text": f"[{mime} audio left out: this client's protocol revision has no audio content]"}
    keys = _BLOCK.get(kind) if isinstance(kind, str) else None
    if keys is None:
        return content
    shaped = _annotated(_keep(content, keys))
    if kind == "resource" and isinstance(shaped.get("resource"), dict):
        shaped["resource"] = _keep(shaped["resource"], _CONTENTS)
    return shaped


def _tool_result(result: dict[str, Any], features: frozenset[Feature]) -> None:
    structured = None if Feature.STRUCTURED_OUTPUT in features else result.pop("structuredContent", None)
    content = result.get("content")
    if not isinstance(content, list):
        content = []
    if structured is not None and not content:
        content = [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}]
    result["content"] = [block(item, features) for item in content]


def shape(method: str, result: dict[str, Any], features: frozenset[Feature]) -> None:
    """Shape ``result`` of ``method`` in place for a session of a revision with ``features``."""
    listed = _LISTS.get(method)
    if listed is not None:
        items = result.get(listed)
        # Items the registry already encoded come shaped (a msgspec.Raw, not a list).
        if isinstance(items, list):
            result[listed] = [shape_listed(method, item, features) for item in items]
    elif method == "tools/call":
        _tool_result(result, features)
    elif method == "resources/read":
        contents = result.get("contents")
        if isinstance(contents, list):
            result["contents"] = [_keep(item, _CONTENTS) for item in contents]
    elif method == "prompts/get":
        messages = result.get("messages")
        if isinstance(messages, list):
            result["messages"] = [
                {**message, "content": block(message.get("content"), features)}
                if isinstance(message, dict)
                else message
                for message in messages
            ]


def shape_initialize(result: dict[str, Any], features: frozenset[Feature]) -> None:
    """Shape an ``initialize`` result: the server's info and capabilities."""
    result["serverInfo"] = _keep(result.get("serverInfo"), _titled(_IMPLEMENTATION, features))
    # 2024-11-05 has completion/complete but no capability naming it; neither revision
    # has ``extensions`` (MCP Apps, tasks), which no client of theirs can use.
    keys = _CAPABILITIES | {"completions"} if Feature.COMPLETIONS_CAPABILITY in features else _CAPABILITIES
    result["capabilities"] = _keep(result.get("capabilities"), keys)
